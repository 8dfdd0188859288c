"""Global updates: what one Gibbs sweep does with the sufficient statistics of its documents.

The schedule (:meth:`cpgbn.inference.gibbs.GibbsSampler.sweep_on_backend`) draws the local
variables of its documents and reduces them to the statistics that the global parameters
depend on, summed over documents (:class:`SufficientStatistics`):

* the kernel counts n_{k,v,f} (paper eq. for D_k | -: Dir(n_k + eta^(1)));
* the counts of every Phi^(t) from the upward pass (Dir(counts + eta^(t)) per column);
* for r, the top layer's table sums l_{.k} and the rate sum_j q^(T+1)_j
  (r_k | - ~ Gam(gamma0 / K_T + l_.k, 1 / (c0 + sum_j q^(T+1)_j))).

It then hands them to a *global update* object, called once per sweep, after the upward pass
and before the downward pass (steps 2 and 5 of the sweep, which only these statistics feed):

* :class:`GibbsGlobalUpdate` (the default): the exact conditional draws, with the streams of
  steps 2 and 5, so that a seeded chain is what it was before the update became pluggable;
* :class:`AccumulateStatistics`: keeps the globals fixed and sums the statistics of the sweeps
  it is asked to keep (the local part of minibatch Gibbs, :mod:`cpgbn.inference.minibatch`);
* :class:`TLASGRGlobalUpdate`: one TLASGR-MCMC step for D and every Phi^(t) from minibatch
  statistics scaled by rho = N / |batch| (:mod:`cpgbn.inference.tlasgr`, notes section 6);
* :class:`DistributedGlobalUpdate`: wraps any of them for data-parallel workers: the statistics
  are sum-reduced across workers through a communicator
  (:mod:`cpgbn.inference.communicator`), the root applies the inner update, and the new
  globals are broadcast.

An update has one method, ``apply(backend, globals_, stats, *, hyper, sweep)``, which replaces
the arrays of ``globals_`` (a :class:`~cpgbn.inference.state.GlobalParameters` on the backend)
by their new values, computing on the backend's arrays through its members
(:class:`cpgbn.inference.backend_protocols.Backend`; the TLASGR step through its array helpers and
normals, whatever the backend).  Only the globals' draws are pluggable; the local draws and their order
stay in the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol
import numpy as np

from ..errors import CPGBNInputError
from ..layers.cells import counts_dtype
from . import streams
from .backend_protocols import Backend
from .communicator import SingleProcess
from .exact import ExactSum
from .state import GlobalParameters, Hyperparameters
from .streams import stream
from .tlasgr import TLASGRSchedule, TLASGRState, tlasgr_step

__all__ = ["SufficientStatistics", "GlobalUpdate", "GibbsGlobalUpdate", "AccumulateStatistics",
           "TLASGRGlobalUpdate", "DistributedGlobalUpdate", "phi_eta"]


def phi_eta(hyper: Hyperparameters, t: int) -> float:
    """eta^(t+1), the Dirichlet concentration of Phi^(t+1) (the last given value repeats)."""
    return hyper.eta[min(t, len(hyper.eta) - 1)]


@dataclass
class SufficientStatistics:
    """What the global draws of one sweep need from its documents, summed over them.

    kernel_counts : the kernel counts n_{k,v,f} in the backend's layout (the numba backend: one
        (V, F, K_1) slab per thread, to be summed; the PyTorch backend: one (V, F, K_1) tensor);
        ``backend.total_kernel_counts(kernel_counts)`` gives the (V, F, K_1) sum.
    phi_counts : list, for t = 2..T (index t - 2), of (K_{t-1}, K_t) -- the counts that the
        upward pass split from layer t - 1 onto Phi^(t)'s entries.
    r_tables : (K_T,) or None -- sum_j l_jk, the top layer's tables (None when r is not drawn).
    r_rate : scalar, :class:`~cpgbn.inference.exact.ExactSum` or None -- sum_j q^(T+1)_j (the
        rate of r's conditional is c0 + r_rate); the schedule gives an ExactSum, so that a sum
        over workers is the single process' number (updates read it as ``float(r_rate)``).
    n_docs : int -- the documents these sums run over (|batch| for a minibatch).
    """

    kernel_counts: object
    phi_counts: list
    r_tables: object | None
    r_rate: object | None
    n_docs: int


class GlobalUpdate(Protocol):
    """The interface the schedule calls (module docstring)."""

    def apply(self, backend: Backend, globals_: GlobalParameters, stats: SufficientStatistics,
              *, hyper: Hyperparameters, sweep: int) -> None: ...


class GibbsGlobalUpdate:
    """The exact conditional draws of D, Phi^(t) and r (steps 2 and 5 of a sweep).

    D_k ~ Dir(n_k + eta^(1)) from stream (sweep, KERNELS); Phi^(t+1) columns ~
    Dir(counts + eta^(t+1)) from (sweep, PHI + t); r ~ Gam(gamma0 / K_T + l_.k,
    1 / (c0 + sum_j q_j)) from (sweep, R), when the statistics carry r's tables.
    """

    def apply(self, backend, globals_: GlobalParameters, stats: SufficientStatistics, *,
              hyper: Hyperparameters, sweep: int) -> None:
        g = globals_
        g.D = backend.draw_kernels(g.D, stats.kernel_counts, hyper.eta[0],
                                   stream(sweep, streams.KERNELS))
        for t, counts in enumerate(stats.phi_counts, start=1):
            g.phi[t - 1] = backend.draw_phi(g.phi[t - 1], counts, phi_eta(hyper, t),
                                            stream(sweep, streams.PHI + t))
        if stats.r_tables is not None:
            shape = hyper.gamma0 / len(g.r) + stats.r_tables
            g.r = backend.draw_gamma_vector(shape, hyper.c0 + float(stats.r_rate),
                                            stream(sweep, streams.R), out=g.r)


class AccumulateStatistics:
    """Keeps the globals fixed; adds up the statistics of the sweeps numbered ``>= keep_from``.

    The local part of minibatch Gibbs: the sweeps of a minibatch run with the globals fixed, and
    the statistics of the collected sweeps are averaged (:meth:`mean`) for one TLASGR step.
    Sums are kept as (V, F, K_1) totals in float64 on the backend.
    """

    def __init__(self, keep_from: int = 0):
        self.keep_from = int(keep_from)
        self.reset()

    def reset(self) -> None:
        self.kernel_counts = None
        self.phi_counts: list = []
        self.r_tables = None
        self.r_rate = None
        self.n_docs = 0
        self.n_sweeps = 0

    def apply(self, backend, globals_: GlobalParameters, stats: SufficientStatistics, *,
              hyper: Hyperparameters, sweep: int) -> None:
        if sweep < self.keep_from:
            return
        total = backend.as_float(backend.total_kernel_counts(stats.kernel_counts))
        phi = [backend.as_float(c) for c in stats.phi_counts]
        if self.n_sweeps == 0:
            self.kernel_counts, self.phi_counts = total, phi
            self.r_tables = None if stats.r_tables is None else backend.as_float(stats.r_tables)
            self.r_rate = None if stats.r_rate is None else float(stats.r_rate)
            self.n_docs = stats.n_docs
        else:
            self.kernel_counts = self.kernel_counts + total
            self.phi_counts = [a + c for a, c in zip(self.phi_counts, phi)]
            if stats.r_tables is not None:
                self.r_tables = self.r_tables + backend.as_float(stats.r_tables)
                self.r_rate += float(stats.r_rate)
        self.n_sweeps += 1

    def mean(self) -> SufficientStatistics:
        """The statistics averaged over the kept sweeps (n~ of the TLASGR step)."""
        if self.n_sweeps == 0:
            raise CPGBNInputError("no sweep was kept: nothing to average")
        n = float(self.n_sweeps)
        return SufficientStatistics(
            self.kernel_counts / n, [c / n for c in self.phi_counts],
            None if self.r_tables is None else self.r_tables / n,
            None if self.r_rate is None else self.r_rate / n, self.n_docs)


class TLASGRGlobalUpdate:
    """One TLASGR-MCMC step for D and each Phi^(t) per call (inference notes, section 6).

    Parameters
    ----------
    n_docs_total : int
        N, the corpus size: the statistics of a minibatch of |batch| documents are scaled by
        rho = N / |batch| (:func:`~cpgbn.inference.tlasgr.tlasgr_step`).
    seed : int
        The standard normals of call i come from (seed, i, parameter) (on the host, one
        stream per block of columns): a step is a function of its inputs and of i alone, so a
        resumed run repeats it exactly.
    schedule : TLASGRSchedule
    update_r : bool
        Draw r from its conditional with the minibatch standing in for the corpus,
        r_k ~ Gam(gamma0 / K_T + rho l_.k, 1 / (c0 + rho sum_j q_j)) (when the statistics carry
        r's tables); otherwise r keeps its value.

    Attributes
    ----------
    states : list of TLASGRState -- M and i for D (index 0) and Phi^(2..T) (index t - 1).
        Initialised at the first call; :meth:`to_arrays` / :meth:`load_arrays` save and restore
        them.
    """

    def __init__(self, n_docs_total: int, seed: int, *, schedule: TLASGRSchedule = TLASGRSchedule(),
                 update_r: bool = True):
        if int(n_docs_total) < 1:
            raise CPGBNInputError(f"n_docs_total must be >= 1, got {n_docs_total}")
        self.n_docs_total = int(n_docs_total)
        self.seed = int(seed)
        self.schedule = schedule
        self.update_r = bool(update_r)
        self.states: list[TLASGRState] = []

    @property
    def n_updates(self) -> int:
        """Steps taken so far (i)."""
        return self.states[0].n_updates if self.states else 0

    def apply(self, backend, globals_: GlobalParameters, stats: SufficientStatistics, *,
              hyper: Hyperparameters, sweep: int) -> None:
        g = globals_
        if not self.states:
            self.states = ([TLASGRState.initial(g.D.shape[2])]
                           + [TLASGRState.initial(p.shape[1]) for p in g.phi])
        rho = self.n_docs_total / float(stats.n_docs)
        step = self.n_updates + 1
        params = [g.D] + list(g.phi)
        counts = [backend.total_kernel_counts(stats.kernel_counts)] + list(stats.phi_counts)
        etas = [hyper.eta[0]] + [phi_eta(hyper, t) for t in range(1, len(g.phi) + 1)]
        new = []
        for index, (param, count, eta) in enumerate(zip(params, counts, etas)):
            n_rows = int(np.prod(param.shape[:-1]))
            # the normals of step i and parameter index: a function of (seed, i, index) alone,
            # drawn by the backend (on the host one stream per block of columns, so D's
            # (V F, K_1) normals never exist at once: 144 MB on IMDB)
            normal = backend.column_normals(n_rows, param.shape[-1],
                                            (self.seed, step, index, streams.TLASGR_NORMAL))
            value, self.states[index] = tlasgr_step(param, count, self.states[index], rho=rho,
                                                    eta=eta, normal=normal,
                                                    schedule=self.schedule, arrays=backend)
            new.append(value)
        g.D, g.phi[:] = new[0], new[1:]
        if self.update_r and stats.r_tables is not None:
            shape = hyper.gamma0 / len(g.r) + rho * backend.as_float(stats.r_tables)
            g.r = backend.draw_gamma_vector(shape, hyper.c0 + rho * float(stats.r_rate),
                                            stream(step, streams.TLASGR_R), out=g.r)

    def to_arrays(self) -> dict:
        """The TLASGR states as named numpy arrays (``tlasgr_{index}_{field}``)."""
        out = {}
        for index, state in enumerate(self.states):
            for name, value in state.to_arrays().items():
                out[f"tlasgr_{index}_{name}"] = value
        return out

    def load_arrays(self, arrays, n_params: int) -> None:
        """Inverse of :meth:`to_arrays` for ``n_params`` parameters (D and T - 1 Phi's)."""
        if "tlasgr_0_precision" not in arrays:
            self.states = []
            return
        self.states = [TLASGRState.from_arrays({name: arrays[f"tlasgr_{i}_{name}"]
                                                for name in ("precision", "n_updates")})
                       for i in range(n_params)]


def _sum_kernel_counts(backend, comm, total):
    """The (V, F, K_1) kernel counts summed over the workers: the all-reduce that dominates a
    sweep's traffic (V F K_1 values).  On the host it travels as int32, half the bytes of
    int64, when the workers' largest counts add up to at most 2^31 - 1 (one 8-byte
    all-reduce decides, the same way on every worker), else as int64; the counts are whole
    numbers, so any order of the sum is exact."""
    if not backend.works_on_host:
        return comm.sum(total)
    peak = int(comm.sum(np.array(total.max(initial=0), dtype=np.int64)))
    return comm.sum(np.asarray(total, dtype=counts_dtype(peak)))


def _is_float(array) -> bool:
    """Whether ``array`` (numpy, or a backend's tensor) holds floating-point numbers."""
    if hasattr(array, "is_floating_point"):
        return bool(array.is_floating_point())
    return np.issubdtype(np.asarray(array).dtype, np.floating)


def _sum_rate(comm, rate):
    """r's rate summed over the workers: exactly when it is an ExactSum (the schedule's)."""
    if isinstance(rate, ExactSum):
        return ExactSum(np.asarray(comm.sum(rate.bins), dtype=np.int64))
    return comm.sum(rate)


@dataclass
class DistributedGlobalUpdate:
    """Data-parallel global update: every worker holds a part of the documents.

    The workers' statistics are summed (``communicator.sum``: kernel counts as (V, F, K_1)
    totals, Phi counts, r's tables and rate, document counts), the root applies ``inner`` to
    the sums, and every global is broadcast from the root, so all workers continue with the
    same D, Phi and r.  The inner update sees exactly the statistics of the whole corpus (or
    of the union of the workers' minibatches): the counts are integers, and r's rate comes as
    an :class:`~cpgbn.inference.exact.ExactSum`, whose sum over workers is the single
    process' number bit for bit.  So the exact Gibbs draws on N workers, each over a shard
    of the sampler's random-stream blocks numbered globally
    (``GibbsSampler(first_doc=...)``: 32 documents for numba, larger for PyTorch), make the
    chain of one process.  Statistics averaged over sweeps (minibatch Gibbs' float kernel
    counts, the encoder's expected counts) are summed as floats: data-parallel minibatch
    training draws other minibatches than one process, so there is no single-process chain
    to equal.  A group of one (:class:`~cpgbn.inference.communicator.SingleProcess`) applies
    ``inner`` to its own statistics as they are: the sums would be identities, and the
    numba backend's per-thread kernel counts would be reduced to a total and back every
    sweep for nothing.
    """

    inner: object
    communicator: object = field(default_factory=SingleProcess)

    def apply(self, backend, globals_: GlobalParameters, stats: SufficientStatistics, *,
              hyper: Hyperparameters, sweep: int) -> None:
        comm, g = self.communicator, globals_
        if comm.world_size == 1:
            self.inner.apply(backend, g, stats, hyper=hyper, sweep=sweep)
            return
        if _is_float(stats.kernel_counts):   # a minibatch's counts averaged over sweeps
            kernel_counts = comm.sum(stats.kernel_counts)
        else:
            kernel_counts = backend.kernel_counts_from_total(_sum_kernel_counts(
                backend, comm, backend.total_kernel_counts(stats.kernel_counts)))
        total = SufficientStatistics(
            kernel_counts=kernel_counts,
            phi_counts=[comm.sum(c) for c in stats.phi_counts],
            r_tables=None if stats.r_tables is None else comm.sum(stats.r_tables),
            r_rate=None if stats.r_rate is None else _sum_rate(comm, stats.r_rate),
            n_docs=int(comm.sum(np.array(stats.n_docs, dtype=np.int64))))
        if comm.is_root:
            self.inner.apply(backend, g, total, hyper=hyper, sweep=sweep)
        g.D = comm.broadcast(g.D)
        g.phi[:] = [comm.broadcast(p) for p in g.phi]
        g.r = comm.broadcast(g.r)

    # a checkpoint of the wrapped update is the inner update's (the communicator has no state)
    def to_arrays(self) -> dict:
        return dict(getattr(self.inner, "to_arrays", dict)())

    def load_arrays(self, arrays, n_params: int) -> None:
        if hasattr(self.inner, "load_arrays"):
            self.inner.load_arrays(arrays, n_params)
