"""The run loop of a chain, written once for every backend and inference algorithm.

:func:`run_chain` repeats an algorithm's ``sweep`` until the state has completed ``n_iter``
sweeps, averages theta (and the globals) over the sweeps after ``burn_in``, keeps the trace
(log-likelihood and wall time per sweep), reports progress and calls a per-sweep hook (the
estimator's checkpoints).  The state and the running sums live on the backend (a GPU, for the
PyTorch one) and come back to the host at the end, or before each hook call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .mixing import Mixing, MixingTrace
from .state import GibbsState, GlobalParameters, state_on, write_back


@dataclass
class RunResult:
    """What a run collects: posterior means over the collected sweeps and the training trace."""

    theta_mean: list[np.ndarray]
    """Mean of theta^(t) over collected sweeps, t = 1..T (list of (N, K_t))."""
    globals_mean: GlobalParameters | None
    """Mean of D, Phi, r over collected sweeps (None when the globals were fixed)."""
    loglik: list[float] = field(default_factory=list)
    """Total log-likelihood after each sweep."""
    seconds: list[float] = field(default_factory=list)
    """Wall time of each sweep."""
    n_collected: int = 0
    mixing: Mixing | None = None
    """The mixing diagnostic of every sweep (:mod:`cpgbn.inference.mixing`), when a monitor ran."""


@dataclass
class Collector:
    """Running sums over the collected sweeps, plus the trace: the part of a run that a
    checkpoint must keep besides the sampler state.

    theta_sum : list of (N, K_t) float64 -- sum of theta^(t) over collected sweeps.
    globals_sum : GlobalParameters of float64 sums, or None (globals fixed).
    n_collected : int; loglik, seconds : per-sweep trace.
    mixing : MixingTrace or None -- the mixing diagnostic's per-sweep values, when measured.
    """

    theta_sum: list[np.ndarray]
    globals_sum: GlobalParameters | None
    n_collected: int = 0
    loglik: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    mixing: MixingTrace | None = None

    @classmethod
    def empty(cls, state: GibbsState, collect_globals: bool) -> "Collector":
        g = state.globals
        g_sum = (GlobalParameters(np.zeros(g.D.shape, dtype=np.float64),
                                  [np.zeros(p.shape, dtype=np.float64) for p in g.phi],
                                  np.zeros(g.r.shape, dtype=np.float64))
                 if collect_globals else None)
        return cls([np.zeros(t.shape, dtype=np.float64) for t in state.theta], g_sum)

    def result(self, state: GibbsState) -> RunResult:
        n = self.n_collected
        theta = [acc / n for acc in self.theta_sum] if n else [t.copy() for t in state.theta]
        g_mean = None
        if self.globals_sum is not None:
            g = self.globals_sum
            g_mean = (GlobalParameters((g.D / n).astype(np.float32), [p / n for p in g.phi], g.r / n)
                      if n else state.globals.copy())
        mixing = (None if self.mixing is None
                  else self.mixing.result(n, state.theta[0].shape[1]))
        return RunResult(theta, g_mean, list(self.loglik), list(self.seconds), n, mixing)


class _Sums:
    """The collector's running sums on the backend, written back to it on ``flush``."""

    def __init__(self, backend, collector: Collector):
        self.backend, self.collector = backend, collector
        put = backend.to_backend
        self.theta = [put(a, np.float64) for a in collector.theta_sum]
        g = collector.globals_sum
        self.globals = (None if g is None else
                        GlobalParameters(put(g.D, np.float64), [put(p, np.float64) for p in g.phi],
                                         put(g.r, np.float64)))

    def add(self, state: GibbsState) -> None:
        for acc, t in zip(self.theta, state.theta):
            acc += t
        if self.globals is not None:
            g = state.globals
            self.globals.D += g.D  # float32 into float64: exact
            for acc, p in zip(self.globals.phi, g.phi):
                acc += p
            self.globals.r += g.r

    def flush(self) -> None:
        if self.backend.works_on_host:
            return  # the sums are the collector's own arrays
        get = self.backend.to_numpy
        for acc, t in zip(self.collector.theta_sum, self.theta):
            np.copyto(acc, get(t, np.float64))
        g, dev = self.collector.globals_sum, self.globals
        if g is not None:
            np.copyto(g.D, get(dev.D, np.float64))
            for acc, p in zip(g.phi, dev.phi):
                np.copyto(acc, get(p, np.float64))
            np.copyto(g.r, get(dev.r, np.float64))


def run_chain(algorithm, state: GibbsState, n_iter: int, burn_in: int, *, progress=None,
              collect_globals: bool = True, collector: Collector | None = None,
              on_sweep=None, monitor=None) -> RunResult:
    """Run ``algorithm.sweep_on_backend`` until ``state.sweep == n_iter``; average theta (and,
    with ``collect_globals``, D, Phi, r) over the sweeps after ``burn_in``.

    A run continues from ``state.sweep`` with an existing ``collector`` (a resumed
    checkpoint): every draw depends only on (seed, sweep, step, block), so a resumed run is
    identical to an uninterrupted one.  ``progress`` is an optional object with ``update(n)``
    (a tqdm bar); ``on_sweep(state, collector)`` is called after each sweep with the numpy
    state and sums (on a GPU that copies them to the host: use it sparingly).
    ``monitor``, a :class:`~cpgbn.inference.mixing.MixingMonitor`, measures the mixing after
    every sweep into ``collector.mixing`` (outside the sweep's timed part; it only reads).
    ``state`` (and ``collector``) hold the final values when the run returns.
    """
    backend = algorithm.backend
    if collector is None:
        collector = Collector.empty(state, collect_globals)
    current = state_on(backend, state)
    sums = _Sums(backend, collector)
    if monitor is not None:
        if collector.mixing is None:
            collector.mixing = MixingTrace()
        collector.mixing.pad_to(current.sweep, current.theta[0].shape[1])
        monitor.start(backend, current)

    def flush() -> None:
        sums.flush()
        write_back(backend, current, state, with_globals=algorithm.learn_globals)

    while current.sweep < n_iter:
        start = time.perf_counter()
        algorithm.sweep_on_backend(current)
        loglik = float(current.loglik.sum())  # on a GPU this also waits for the sweep
        collector.seconds.append(time.perf_counter() - start)
        collector.loglik.append(loglik)
        if current.sweep > burn_in:
            collector.n_collected += 1
            sums.add(current)
        if monitor is not None:
            monitor.observe(backend, current, collector.mixing)
        if progress is not None:
            progress.update(1)
        if on_sweep is not None:
            flush()
            on_sweep(state, collector)
    flush()
    return collector.result(state)
