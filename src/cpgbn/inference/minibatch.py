"""Minibatch Gibbs: local Gibbs sweeps on a minibatch with the globals fixed, then one
TLASGR-MCMC step for D and every Phi^(t) (the authors' MNIST scheme; inference notes,
section 6; issue 25's mode without the encoder).

Step i (1-based) on a minibatch of B documents:

1. a fresh local chain for the minibatch (:meth:`GibbsSampler.local_state`: w = 1, one
   augmentation), its sweeps numbered from (i - 1) * (burn_in + collect) so that every sweep of
   every minibatch draws from streams of its own (the seed and i fix them all);
2. ``burn_in`` sweeps of the full Gibbs schedule with the globals fixed (no statistics), then
   ``collect`` sweeps whose sufficient statistics (kernel counts n, Phi counts, r's tables) are
   averaged (:class:`~cpgbn.inference.updates.AccumulateStatistics`): n~;
3. one :class:`~cpgbn.inference.updates.TLASGRGlobalUpdate` with rho = N / B (and r drawn from
   its rho-scaled conditional when ``hyper.sample_r``).

The local part is the numba Gibbs schedule unchanged (:mod:`cpgbn.inference.gibbs`), only
with a global update that keeps the globals fixed.  The defaults, 24 burn-in and 16 collected
sweeps, are the authors'.  :func:`fit_minibatch_gibbs` runs it with the shared training loop
(:func:`cpgbn.inference.training.train`: streaming, checkpoints, exact resume, progress).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..backends.numba.numba_backend import NumbaBackend
from ..errors import CPGBNInputError
from ..layers.batches import restrict_vocabulary
from .gibbs import GibbsSampler
from .state import GlobalParameters, Hyperparameters
from . import streams
from .batches import Batch, ConvDataBlocks, Minibatches
from .communicator import as_communicator, weighted_mean
from .prior import sample_globals
from .tlasgr import TLASGRSchedule
from .training import StepReport, TrainingTrace, train
from .updates import AccumulateStatistics, DistributedGlobalUpdate, TLASGRGlobalUpdate

__all__ = ["MinibatchGibbs", "MinibatchResult", "fit_minibatch_gibbs", "initial_globals"]


def initial_globals(layers, vocab_size: int, filter_width: int, hyper: Hyperparameters,
                    seed: int) -> GlobalParameters:
    """Random starting globals for the minibatch algorithms: every kernel and Phi column
    ~ Dir(1) (numpy, seeded by (seed, INIT)), r = gamma0 / K_T."""
    layers = tuple(int(k) for k in layers)
    flat = Hyperparameters(eta=(1.0,) * len(layers), gamma0=hyper.gamma0, c0=hyper.c0,
                           sample_r=False)
    rng = np.random.default_rng(streams.derived_seed(seed, streams.MINIBATCH_INIT))
    return sample_globals(layers, int(vocab_size), int(filter_width), flat, rng)


def check_globals(g: GlobalParameters, layers, vocab_size: int, filter_width: int):
    if tuple(g.layers) != tuple(layers) or g.D.shape[:2] != (vocab_size, filter_width):
        raise CPGBNInputError(f"the globals have kernels {g.D.shape} and layers {g.layers}, "
                              f"expected ({vocab_size}, {filter_width}, {layers[0]}) and {layers}")


@dataclass
class MinibatchResult:
    """What a minibatch run returns.

    globals : GlobalParameters -- D (V, F, K_1) float32, Phi^(2..T), r: the last TLASGR state
        of the chain (not an average).
    trace : TrainingTrace -- per step: loss (minus the minibatch's log-likelihood per
        document at its last local sweep), KL (NaN: none), seconds.
    tlasgr : dict of numpy arrays -- the TLASGR preconditioners and step counts (to continue).
    n_steps : int
    """

    globals: GlobalParameters
    trace: TrainingTrace
    tlasgr: dict
    n_steps: int


class MinibatchGibbs:
    """The minibatch-Gibbs algorithm for :func:`cpgbn.inference.training.train` (module
    docstring).  Holds the globals (numpy) and the TLASGR state.

    Parameters
    ----------
    layers, vocab_size, filter_width, hyper : the model's.
    n_docs_total : int -- N (rho = N / |batch|).
    seed : int
    burn_in, collect : local sweeps per minibatch before and while collecting statistics.
    schedule : TLASGRSchedule
    globals_ : starting globals (default :func:`initial_globals`); copied.
    communicator : one of several data-parallel workers, each with minibatches of its shard
        (:mod:`cpgbn.inference.updates`): the step's statistics are summed over the workers'
        batches (rho = N / the batches' documents), the root takes the TLASGR step and every
        worker gets its globals; the loss reported is the batches' together.
    """

    #: what the training loop reads (:class:`~cpgbn.inference.training.Algorithm`): the
    #: same state on every worker, no early end
    deals_rows = False
    finished = False
    non_finite_hint = "check the data"

    def __init__(self, layers, vocab_size: int, filter_width: int, hyper: Hyperparameters, *,
                 n_docs_total: int, seed: int, burn_in: int = 24, collect: int = 16,
                 schedule: TLASGRSchedule = TLASGRSchedule(),
                 globals_: GlobalParameters | None = None, communicator=None):
        self.communicator = as_communicator(communicator)
        self.layers = tuple(int(k) for k in layers)
        self.vocab_size, self.filter_width = int(vocab_size), int(filter_width)
        self.hyper, self.seed = hyper, int(seed)
        if int(burn_in) < 0 or int(collect) < 1:
            raise CPGBNInputError(f"need burn_in >= 0 and collect >= 1 local sweeps, got "
                                  f"burn_in={burn_in}, collect={collect}")
        self.burn_in, self.collect = int(burn_in), int(collect)
        self.schedule = schedule
        if globals_ is None:
            globals_ = initial_globals(self.layers, vocab_size, filter_width, hyper, seed)
        else:
            check_globals(globals_, self.layers, self.vocab_size, self.filter_width)
        self.globals = globals_.copy()
        self.update = TLASGRGlobalUpdate(n_docs_total, self.seed, schedule=schedule,
                                         update_r=hyper.sample_r)

    def config(self) -> dict:
        return {"mode": "minibatch-gibbs", "layers": self.layers, "V": self.vocab_size,
                "F": self.filter_width, "hyper": repr(self.hyper), "seed": self.seed,
                "burn_in": self.burn_in, "collect": self.collect, "schedule": repr(self.schedule),
                "N": self.update.n_docs_total}

    def step(self, i: int, batch: Batch) -> StepReport:
        """Local sweeps on ``batch`` with the globals fixed, then one TLASGR step (step i)."""
        # swept against the rows of D of the batch's own words (exact: layers.batches)
        words, local_batch = restrict_vocabulary(batch.data)
        g = self.globals
        # one backend for the batch's chain; its burn-in keeps no statistics, its collected
        # sweeps add theirs up (two samplers over the same state and backend)
        backend = NumbaBackend(local_batch, self.seed)
        burn = GibbsSampler(local_batch, self.hyper, self.seed, learn_globals=False,
                            backend=backend)
        kept = AccumulateStatistics()
        collect = GibbsSampler(local_batch, self.hyper, self.seed, learn_globals=False,
                               backend=backend, global_update=kept)
        first = (int(i) - 1) * (self.burn_in + self.collect)
        state = burn.local_state(GlobalParameters(np.ascontiguousarray(g.D[words]), g.phi,
                                                  g.r), first)
        for _ in range(self.burn_in):
            burn.sweep_on_backend(state)
        for _ in range(self.collect):
            collect.sweep_on_backend(state)
        loss, n_docs = -float(state.loglik.sum()) / batch.n_docs, batch.n_docs
        # the union's loss first: every worker must agree on whether the step updates
        loss, n_docs = weighted_mean(loss, n_docs, self.communicator)
        if np.isfinite(loss):
            stats = kept.mean()
            counts = np.zeros(g.D.shape, dtype=np.float64)
            counts[words] = stats.kernel_counts
            DistributedGlobalUpdate(self.update, self.communicator).apply(
                backend, g, replace(stats, kernel_counts=counts), hyper=self.hyper, sweep=i)
        return StepReport(loss, None, n_docs)

    # ---------------------------------------------------------------- checkpoints
    def to_arrays(self) -> dict:
        g = self.globals
        arrays = {"D": g.D, "r": g.r}
        arrays.update({f"phi_{t}": p for t, p in enumerate(g.phi)})
        arrays.update(self.update.to_arrays())
        return arrays

    def meta(self) -> dict:
        return {"mode": "minibatch-gibbs", "n_layers": len(self.layers)}

    def load(self, arrays, meta) -> None:
        T = int(meta["n_layers"])
        self.globals = GlobalParameters(np.array(arrays["D"], dtype=np.float32),
                                        [np.array(arrays[f"phi_{t}"]) for t in range(T - 1)],
                                        np.array(arrays["r"]))
        check_globals(self.globals, self.layers, self.vocab_size, self.filter_width)
        self.update.load_arrays(arrays, T)

    def result(self, trace: TrainingTrace) -> MinibatchResult:
        return MinibatchResult(self.globals.copy(), trace, self.update.to_arrays(),
                               len(trace.loss))


def fit_minibatch_gibbs(source, layers, vocab_size: int, hyper: Hyperparameters, *, seed: int,
                        n_steps: int, batch_size: int, burn_in: int = 24, collect: int = 16,
                        schedule: TLASGRSchedule = TLASGRSchedule(),
                        globals_: GlobalParameters | None = None, checkpoint_dir=None,
                        checkpoint_every: int = 50, resume: bool = False, progress=None,
                        on_step=None, communicator=None,
                        n_docs_total: int | None = None) -> MinibatchResult:
    """Fit the globals by minibatch Gibbs (module docstring).

    ``source``: a ConvData (the corpus in memory) or a block source
    (:class:`~cpgbn.inference.batches.TextFileBlocks` for a file read in blocks).  The other
    arguments are those of :class:`MinibatchGibbs` and :func:`~cpgbn.inference.training.train`;
    with a ``communicator``, ``source`` is this worker's shard and ``n_docs_total`` the
    corpus' size.  Returns a :class:`MinibatchResult`.
    """
    if not hasattr(source, "read_block"):
        source = ConvDataBlocks(source)
    filter_width = filter_width_of(source)
    algorithm = MinibatchGibbs(layers, vocab_size, filter_width, hyper,
                               n_docs_total=source.n_docs if n_docs_total is None
                               else n_docs_total, seed=seed, burn_in=burn_in,
                               collect=collect, schedule=schedule, globals_=globals_,
                               communicator=communicator)
    trace = train(algorithm, Minibatches(source, batch_size, seed), n_steps,
                  checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                  resume=resume, progress=progress, on_step=on_step,
                  communicator=communicator)
    return algorithm.result(trace)


def filter_width_of(source) -> int:
    if hasattr(source, "data"):
        return int(source.data.filter_width)
    if hasattr(source, "filter_width"):
        return int(source.filter_width)
    raise CPGBNInputError("the block source must say its filter_width")
