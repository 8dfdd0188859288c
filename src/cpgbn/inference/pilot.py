"""The pilot chain of a Gibbs fit: informed kernels from a sample of the documents.

A chain from random kernels must start dense (w = 1 at every position and kernel: a sparse
start from random kernels ruins the chain, :mod:`cpgbn.backends.numba.sparse_start`), and its
first sweeps over the whole corpus then hold and walk the dense P x K_1 field: 25-35 times a
steady sweep, most of a fit's memory peak.  The pilot runs that dense start on a sample of
the documents instead, :data:`PILOT_SWEEPS` sweeps of the ordinary sampler, and the fit's
chain starts from the pilot's last globals (D, Phi, r) with the sparse start, so that no
sweep over the whole corpus is dense.  The pilot is part of the chain's start, like the
random kernels it replaces: a seed gives one pilot and one chain.

The sample is whole random-stream blocks of documents (``block``: :data:`PILOT_BLOCK`), every
``stride``-th block of the corpus from block 0, at most :data:`PILOT_SHARE` of the documents
and about :data:`PILOT_POSITIONS` positions.  Blocks chosen by their global number make a
distributed fit's pilot the single process': each worker samples its shard's chosen blocks
and numbers them as the whole sample does (``first_doc``), and the pilot's statistics are
summed over the workers as the chain's are.
"""

from __future__ import annotations

import numpy as np

from ..blocks import DOC_BLOCK
from ..layers.batches import subset_cells
from .communicator import as_communicator
from .state import GlobalParameters, globals_to_numpy

__all__ = ["PILOT_BLOCK", "PILOT_SWEEPS", "PILOT_SHARE", "PILOT_POSITIONS", "PilotPlan", "plan_pilot",
           "run_pilot", "pilot_seed"]

#: Sweeps of the pilot chain (at most the fit's ``n_iter``).  Chosen on the training chain's
#: log-likelihood at the end of burn-in (TREC and MR, K_1 = 200, seed 0): a 20-sweep pilot left
#: it below the dense start's, a 50-sweep one above (records: docs/sampler.md).
PILOT_SWEEPS = 50
#: The largest share of the corpus's documents in the pilot's sample.
PILOT_SHARE = 0.25
#: About the most positions in the pilot's sample: its dense start holds about 10 bytes per
#: position and kernel (0.5 GB at K_1 = 200).
PILOT_POSITIONS = 1 << 18
#: Below this many blocks a corpus is fitted from the dense start without a pilot (its dense
#: start is small, and a sample of one block would be most of it).
PILOT_MIN_BLOCKS = 8
#: Documents per block of the pilot's sample and of its sampler's random streams, on every
#: backend: numba's block (:data:`cpgbn.blocks.DOC_BLOCK`), which divides the PyTorch
#: backend's, so that a corpus of a few of the PyTorch backend's large blocks (2,000 reviews
#: on the CPU: two) gets a pilot too, and a shard's first document (a multiple of the
#: fit's block) is one of the pilot's.
PILOT_BLOCK = DOC_BLOCK
#: Added to the fit's seed for the pilot's draws, so that its streams are not the chain's.
_PILOT_SALT = 0x9170


def pilot_seed(seed: int) -> int:
    """The seed of a fit's pilot chain."""
    return (int(seed) + _PILOT_SALT) % (1 << 63)


class PilotPlan:
    """Which documents of one worker's shard the pilot samples.

    ``stride``: every ``stride``-th block of ``block`` documents (global numbers) is sampled;
    ``docs``: the shard's sampled documents (local indices); ``first_doc``: the global id of
    the first of them within the whole sample (a multiple of ``block``)."""

    def __init__(self, stride: int, docs: np.ndarray, first_doc: int):
        self.stride, self.docs, self.first_doc = int(stride), docs, int(first_doc)


def plan_pilot(data, first_doc: int, block: int, communicator=None, *,
               share: float = PILOT_SHARE, positions: int = PILOT_POSITIONS,
               min_blocks: int = PILOT_MIN_BLOCKS) -> PilotPlan | None:
    """The pilot's sample of this worker's documents ``data`` (global ids from
    ``first_doc``, a multiple of ``block``), or None where the corpus is fitted without a
    pilot (fewer than ``min_blocks`` blocks).  Every worker gets the same answer: the corpus's
    document and position counts are summed over the workers first."""
    comm = as_communicator(communicator)
    n_docs, n_positions = (int(x) for x in comm.sum(
        np.array([data.n_docs, data.n_positions], dtype=np.int64)))
    n_blocks = -(-n_docs // block)
    if n_blocks < min_blocks or n_docs == 0:
        return None
    per_doc = max(n_positions / n_docs, 1.0)
    wanted = min(share * n_docs, positions / per_doc)
    stride = max(2, -(-n_blocks // max(1, int(wanted // block))))
    first_block = first_doc // block
    ids = first_block * block + np.arange(data.n_docs)
    docs = np.flatnonzero((ids // block) % stride == 0)
    before = -(-first_block // stride)   # sampled blocks of the workers before this one
    return PilotPlan(stride, docs, before * block)


def run_pilot(make_sampler, data, plan: PilotPlan, layers: tuple, vocab_size: int, *,
              n_sweeps: int = PILOT_SWEEPS, progress=None) -> GlobalParameters:
    """The globals after ``n_sweeps`` sweeps of a chain from random kernels and the dense
    start over the documents of ``plan``.  ``make_sampler(data, first_doc)`` builds the
    training sampler (its seed the pilot's: :func:`pilot_seed`) over them; ``progress``: a
    factory ``(total, initial) -> bar`` or None."""
    sampler = make_sampler(subset_cells(data, plan.docs), plan.first_doc)
    # on the backend from the start, and only the globals brought back: the dense local
    # state of the pilot's sample is the largest a fit holds, so it is never copied to the
    # host (the PyTorch backend's peak)
    state = sampler.initial_state(layers, vocab_size, on_backend=True)
    bar = progress(n_sweeps, 0) if progress is not None else None
    try:
        for _ in range(n_sweeps):
            sampler.sweep_on_backend(state)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return globals_to_numpy(sampler.backend, state.globals)
