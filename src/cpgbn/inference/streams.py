"""Random-stream codes: every (sweep, step) of a chain draws from streams of its own.

``stream(sweep, code)`` is the integer a backend seeds its generator(s) with, together with the
run's seed (and, for the numba backend, a block of documents).  A draw is thus a function of
(seed, sweep, step, block) only, which makes a resumed run identical to an uninterrupted one
and lets every backend consume randomness step by step in any order.  The codes are part of
what a seed means: changing one changes the chains.
"""

from __future__ import annotations

#: Codes per sweep; a step with one stream per layer t adds t to its code.
STEPS_PER_SWEEP = 256

#: Step 1: w | m, then m | w, D (and the numba backend's fused pooling tables).
CONV = 0
#: Step 2: D | n.
KERNELS = 1
#: Initial draws of D (INIT) and Phi^(t) (INIT + t), at sweep -1.
INIT = 2
#: Step 3: c^(t+1) (SCALES + t).
SCALES = 16
#: Step 4: tables of layer t (UPWARD + t; the PyTorch backend's pooling tables at UPWARD).
UPWARD = 48
#: Step 4: split of the tables over layer t + 1 (SPLIT + t).
SPLIT = 80
#: Step 5: Phi^(t+1) (PHI + t).
PHI = 112
#: Step 6: theta^(t) (DOWNWARD + t).
DOWNWARD = 144
#: Step 5: r.
R = 176
#: w redrawn alone at the end of a sweep (GibbsSampler.draw_weights).
REFRESH = 177
#: r's draw in a TLASGR global update (the "sweep" is then the update's index i).
TLASGR_R = 178
#: The first augmentation of a fresh local state (a minibatch's, GibbsSampler.local_state).
LOCAL_INIT = 179


def stream(sweep: int, code: int) -> int:
    """The stream of step ``code`` in sweep ``sweep`` (sweep -1: the initial state)."""
    return (sweep + 1) * STEPS_PER_SWEEP + code


# ---------------------------------------------------------------------- seeds of numpy streams
# Besides the per-step streams above, a few draws use numpy generators seeded from the run's
# seed and a salt of their own (with further integers: an epoch, a block, a step).  Every salt
# is here, so that no two draws share a stream by accident; like the codes above, they are part
# of what a seed means.

#: The minibatch stream's order of blocks in an epoch (seed, BLOCK_ORDER, epoch).
BLOCK_ORDER = 0xB1
#: The shuffle of one block's documents in an epoch (seed, BLOCK_SHUFFLE, epoch, block).
BLOCK_SHUFFLE = 0xB10C
#: The minibatch modes' starting globals (seed, MINIBATCH_INIT).
MINIBATCH_INIT = 0x1217
#: The hybrid encoder's initial weights, its draw at step i, and the refinement's block seeds.
ENCODER_INIT, ENCODER_DRAW, REFINE = 0xE1, 0xE2, 0xE3
#: The TLASGR step's normal draws (seed, step, parameter, TLASGR_NORMAL[, block]).
TLASGR_NORMAL = 0x7C5A
#: The seed of inference for new documents (seed, TRANSFORM): "tran" in ASCII.
TRANSFORM = 0x7472616E

_MAX_SEED = 2**63 - 1


def derived_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed that is a function of (seed, parts) alone (numpy's SeedSequence)."""
    import numpy as np

    state = np.random.SeedSequence([int(seed)] + [int(p) for p in parts]).generate_state(
        1, np.uint64)[0]
    return int(state >> np.uint64(1))


def transform_seed(seed: int) -> int:
    """The seed of Gibbs inference for new documents of a model fitted with ``seed``."""
    import numpy as np

    return int(np.random.SeedSequence([int(seed), TRANSFORM]).generate_state(1, np.uint64)[0]
               % _MAX_SEED)
