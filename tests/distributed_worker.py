"""One worker of the distributed Gibbs tests (``tests/test_distributed.py``), started as a
process with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    python distributed_worker.py OUT_DIR [--timeout S] [--die-after SWEEP]
                                 [--checkpoint DIR [--resume]] [--torch]

Fits the test corpus' shard of this rank (:func:`cpgbn.modes.sharded.shard_range`) with
the data-parallel sampler and writes ``OUT_DIR/rank<r>.npz`` (:func:`fit_arrays`).  A
worker failure prints one line on stderr and exits with status 1.  ``--die-after k``: rank 1
exits abruptly after sweep k (the others must stop within the timeout, naming it).
``--checkpoint DIR``: the root saves the chain there every 2 sweeps; ``--resume`` continues it.
``--torch``: the PyTorch sampler on the CPU, with random-stream blocks of 32 documents
(:data:`TORCH_BLOCK`, so that the small corpus has several), in place of numba's.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from cpgbn.blocks import DOC_BLOCK
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import Hyperparameters
from cpgbn.layers.batches import subset_cells
from cpgbn.layers.cells import from_token_sequences

#: The corpus: 4 blocks of 32 documents, the last one short (a shard may end mid-block).
N_DOCS, VOCAB, FILTER_WIDTH = 110, 25, 3
LAYERS = (5, 3)
HYPER = Hyperparameters(eta=(0.1, 0.2), e0=1.0, f0=1.0)
SEED, N_ITER, BURN_IN = 7, 6, 3
#: The PyTorch sampler's random-stream block in these tests (its default is 1,024 documents).
TORCH_BLOCK = 32


def corpus():
    """The whole corpus' cells (documents of 4-11 tokens over VOCAB words)."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(4, 12, size=N_DOCS)
    tokens = rng.integers(1, VOCAB, size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return from_token_sequences(tokens, offsets, FILTER_WIDTH)


def fit_arrays(data, *, first_doc: int = 0, communicator=None, on_sweep=None,
               checkpoint_dir=None, resume: bool = False, use_torch: bool = False,
               pilot: bool = False) -> dict:
    """The fit's arrays: the means of theta^(t) over the collected sweeps (this shard's
    rows), of D, Phi and r, the final globals and the log-likelihood trace.  With
    ``checkpoint_dir``: a checkpoint every 2 sweeps, and ``resume`` continues one.
    ``use_torch``: the PyTorch sampler (blocks of :data:`TORCH_BLOCK`).  ``pilot``: the
    chain starts from a 3-sweep pilot over every second block (:mod:`cpgbn.inference.pilot`)
    and the sparse start with 2 live kernels."""
    from cpgbn.inference.checkpoint import corpus_identity
    from cpgbn.inference.communicator import as_communicator

    if use_torch:
        from cpgbn.inference.gibbs import TorchGibbsSampler
        sampler = TorchGibbsSampler(data, HYPER, SEED, first_doc=first_doc,
                                    doc_block=TORCH_BLOCK, communicator=communicator)
    else:
        sampler = GibbsSampler(data, HYPER, SEED, first_doc=first_doc,
                               communicator=communicator)
    globals_ = None
    if pilot:
        from cpgbn.inference.pilot import pilot_seed, plan_pilot, run_pilot
        plan = plan_pilot(data, first_doc, DOC_BLOCK, communicator, min_blocks=2)
        globals_ = run_pilot(lambda d, first: GibbsSampler(d, HYPER, pilot_seed(SEED),
                                                           first_doc=first,
                                                           communicator=communicator),
                             data, plan, LAYERS, VOCAB, n_sweeps=3)
        sampler.start_live_kernels = 2
    state = sampler.initial_state(LAYERS, VOCAB, globals_)
    checkpointing = {}
    if checkpoint_dir is not None:
        identity = corpus_identity(data, first_doc, as_communicator(communicator), SEED)
        checkpointing = dict(checkpoint_dir=checkpoint_dir, checkpoint_every=2, resume=resume,
                             identity=identity)
    result = sampler.run(state, N_ITER, BURN_IN, on_sweep=on_sweep, **checkpointing)
    g, final = result.globals_mean, state.globals
    arrays = {"D": g.D, "r": g.r, "final_D": final.D, "final_r": final.r,
              "loglik": np.asarray(result.loglik)}
    for t, theta in enumerate(result.theta_mean):
        arrays[f"theta_{t}"] = theta
    for t, (p, f) in enumerate(zip(g.phi, final.phi)):
        arrays[f"phi_{t}"], arrays[f"final_phi_{t}"] = p, f
    return {name: np.asarray(value) for name, value in arrays.items()}


def main() -> int:
    from cpgbn.backends.torch.distributed import TorchCommunicator
    from cpgbn.errors import WorkerError
    from cpgbn.blocks import DOC_BLOCK
    from cpgbn.modes.sharded import shard_range

    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--die-after", type=int, default=None)
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--torch", action="store_true")
    parser.add_argument("--pilot", action="store_true")
    args = parser.parse_args()

    def die(state, collector):
        if state.sweep == args.die_after:
            os._exit(3)   # no clean-up, as a killed worker

    try:
        with TorchCommunicator.from_environment(timeout=args.timeout) as comm:
            data = corpus()
            start, stop = shard_range(data.n_docs, comm.rank, comm.world_size,
                                      TORCH_BLOCK if args.torch else DOC_BLOCK)
            shard = subset_cells(data, np.arange(start, stop))
            hook = die if args.die_after is not None and comm.rank == 1 else None
            arrays = fit_arrays(shard, first_doc=start, communicator=comm, on_sweep=hook,
                                checkpoint_dir=args.checkpoint, resume=args.resume,
                                use_torch=args.torch, pilot=args.pilot)
            arrays.update(start=start, stop=stop, bytes_summed=comm.bytes_summed,
                          bytes_broadcast=comm.bytes_broadcast)
            np.savez(args.out / f"rank{comm.rank}.npz", **arrays)
    except WorkerError as error:
        print(f"worker error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
