"""A Gibbs chain as an algorithm of the training loop: sweeps, their collection and trace.

:class:`GibbsChain` takes one sweep per step of :func:`cpgbn.inference.training.train` (the
one loop of every mode: progress, checkpoints, the non-finite stop), averages theta (and the
globals) over the sweeps after ``burn_in``, keeps the chain's trace (log-likelihood and wall
time per sweep) and calls a per-sweep hook.  The state and the running sums live on the backend
(a GPU, for the PyTorch one) and come back to the host at the end, before a checkpoint, or
before each hook call.  :func:`run_chain` runs one without checkpoints (inference for new
documents, tests, studies).

Several workers (a ``communicator``, :mod:`cpgbn.inference.updates`) each run a chain over
their shard of the documents: the trace's log-likelihood is summed over them exactly
(:class:`~cpgbn.inference.exact.ExactSum`, so it is the single process' number), the theta
sums stay with each worker's documents, and only the root writes checkpoints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..backends.numba.position_store import (ENTRY_SUFFIXES, POSITION_SUFFIX, field_arrays,
                                             field_from_arrays)
from .communicator import as_communicator, deal, gather_row_arrays
from .exact import ExactSum
from .mixing import Mixing, MixingTrace
from .state import GibbsState, GlobalParameters, state_on, write_back
from .training import StepReport, train


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


class GibbsChain:
    """Gibbs sweeps as the steps of the training loop (:func:`~cpgbn.inference.training.train`):
    step i is sweep i of ``sampler`` over the whole corpus (the batch the loop passes is the
    sampler's own data); after ``burn_in`` sweeps theta (and, with ``collect_globals``, D, Phi,
    r) are summed.

    ``state`` (numpy) holds the final values once :meth:`result` is called; the state and the
    running sums live on the backend meanwhile.  ``collector`` continues a run (its sums and
    trace); ``monitor`` (:class:`~cpgbn.inference.mixing.MixingMonitor`) measures the mixing
    after every sweep, outside the sweep's timed part; ``on_sweep(state, collector)`` is called
    after each sweep with the numpy state and sums (on a GPU that copies them to the host).
    A checkpoint keeps the state and the collector (:meth:`to_arrays`).

    ``communicator``: the workers of a data-parallel chain (module docstring), each with a
    sampler over its shard whose global update sums over them
    (:class:`~cpgbn.inference.updates.DistributedGlobalUpdate`); the log-likelihood of the
    trace and the documents of a step's report are the whole corpus'.
    """

    def __init__(self, sampler, state: GibbsState, burn_in: int, *,
                 collect_globals: bool | None = None, collector: Collector | None = None,
                 monitor=None, on_sweep=None, communicator=None):
        self.sampler, self.burn_in = sampler, int(burn_in)
        self.monitor, self.on_sweep = monitor, on_sweep
        if on_sweep is not None:   # the hook may read the state's w
            sampler.keep_weights = True
        self.communicator = as_communicator(communicator)
        if collect_globals is None:
            collect_globals = sampler.learn_globals
        self._attach(state, Collector.empty(state, collect_globals) if collector is None
                     else collector)

    def _attach(self, state: GibbsState, collector: Collector) -> None:
        backend = self.sampler.backend
        self.state, self.collector = state, collector
        self.current = state_on(backend, state)
        self.sums = _Sums(backend, collector)
        if self.monitor is not None:
            if collector.mixing is None:
                collector.mixing = MixingTrace()
            collector.mixing.pad_to(self.current.sweep, self.current.theta[0].shape[1])
            self.monitor.start(backend, self.current)

    @property
    def sweeps_done(self) -> int:
        return int(self.current.sweep)

    def whole_corpus(self, identity, labels=None):
        """The loop's stream for this chain: its data (with ``labels``, when given) at every
        step; ``identity`` is what a checkpoint must match (a fingerprint of the data and the
        chain's parameters)."""
        from .batches import WholeCorpus
        return WholeCorpus(self.sampler.data, identity, labels)

    def step(self, i: int, batch) -> StepReport:
        current, collector = self.current, self.collector
        start = time.perf_counter()
        self.sampler.sweep_on_backend(current)
        # on a GPU the copy also waits for the sweep
        loglik, n_docs = self._corpus_loglik(current, batch.n_docs)
        seconds = time.perf_counter() - start
        collector.seconds.append(seconds)
        collector.loglik.append(loglik)
        if current.sweep > self.burn_in:
            collector.n_collected += 1
            self.sums.add(current)
        if self.monitor is not None:
            self.monitor.observe(self.sampler.backend, current, collector.mixing)
        if self.on_sweep is not None:
            self._flush()
            self.on_sweep(self.state, collector)
        return StepReport(-loglik / max(n_docs, 1), None, n_docs, seconds)

    def _corpus_loglik(self, current: GibbsState, n_docs: int) -> tuple[float, int]:
        """The log-likelihood of the whole corpus after the sweep (summed exactly, so that it
        does not depend on how the documents are split) and its number of documents: one
        all-reduce of the exact sum's bins with the shard's size beside them."""
        total = ExactSum.of(self.sampler.backend.to_numpy(current.loglik, np.float64))
        summed = np.asarray(self.communicator.sum(np.append(total.bins, np.int64(n_docs))),
                            dtype=np.int64)
        return float(ExactSum(summed[:-1])), int(summed[-1])

    def _flush(self) -> None:
        self.sums.flush()
        write_back(self.sampler.backend, self.current, self.state,
                   with_globals=self.sampler.learn_globals)

    def result(self) -> RunResult:
        """The run's means and trace; ``state`` holds the final values."""
        self._flush()
        return self.collector.result(self.state)

    # ---------------------------------------------------------------- checkpoints
    def config(self) -> dict:
        return {"algorithm": "gibbs", "burn_in": self.burn_in,
                "collect_globals": self.collector.globals_sum is not None}

    def meta(self) -> dict:
        return {"n_layers": len(self.state.theta), "sweep": int(self.current.sweep),
                "n_collected": int(self.collector.n_collected),
                "has_globals_sum": self.collector.globals_sum is not None}

    def to_arrays(self) -> dict:
        self._flush()
        state, collector = self.state, self.collector
        g = state.globals
        arrays = {"D": g.D, "r": g.r, **field_arrays("w", state.w),
                  **field_arrays("m", state.m), "A": state.A, "loglik": state.loglik,
                  "chain_loglik": np.asarray(collector.loglik, dtype=np.float64),
                  "chain_seconds": np.asarray(collector.seconds, dtype=np.float64)}
        for i, p in enumerate(g.phi):
            arrays[f"phi_{i}"] = p
        if collector.mixing is not None:
            arrays.update(collector.mixing.arrays(state.m.shape[1]))
        for i, (t, c, acc) in enumerate(zip(state.theta, state.c, collector.theta_sum)):
            arrays[f"theta_{i}"], arrays[f"c_{i}"], arrays[f"theta_sum_{i}"] = t, c, acc
        if collector.globals_sum is not None:
            arrays["sum_D"] = collector.globals_sum.D
            arrays["sum_r"] = collector.globals_sum.r
            for i, p in enumerate(collector.globals_sum.phi):
                arrays[f"sum_phi_{i}"] = p
        return gather_row_arrays(arrays, self._is_row_array, self.communicator)

    # The arrays with one row per document (documents) or per position (positions): the
    # workers hold consecutive ranges of them in rank order, so a checkpoint of the whole
    # corpus is their rows stacked, and any number of workers can resume it.
    #: :func:`~cpgbn.inference.training.train` gives the root alone a checkpoint's arrays
    deals_rows = True
    #: the loop's other reads (:class:`~cpgbn.inference.training.Algorithm`)
    finished = False
    non_finite_hint = "check the data"
    # A stored position field (numba) saves a row per position and a row per stored entry:
    # a worker's entries are those of its positions (``field_arrays``).
    _FIELDS = ("w", "m")
    _POSITION_ROWS = _FIELDS + tuple(f + POSITION_SUFFIX for f in _FIELDS)
    _ENTRY_ROWS = {f + suffix: f + POSITION_SUFFIX for f in _FIELDS for suffix in ENTRY_SUFFIXES}
    _DOCUMENT_ROWS = ("A", "loglik")
    _PER_LAYER_DOCUMENT_ROWS = ("theta_", "c_", "theta_sum_")

    def _is_row_array(self, name: str) -> bool:
        if name in self._POSITION_ROWS + self._DOCUMENT_ROWS or name in self._ENTRY_ROWS:
            return True
        return any(name.startswith(prefix) and name[len(prefix):].isdigit()
                   for prefix in self._PER_LAYER_DOCUMENT_ROWS)

    def _dealt(self, arrays: dict) -> dict:
        """This worker's part of a whole-corpus checkpoint the root read (its rows, and the
        shared arrays), however many workers wrote it."""
        comm, data = self.communicator, self.sampler.data
        sizes = comm.gather((int(data.n_docs), int(data.n_positions)))

        def parts() -> list:   # the root's
            doc_edges = np.cumsum([0] + [n for n, _ in sizes])
            pos_edges = np.cumsum([0] + [p for _, p in sizes])
            positions = arrays["m"] if "m" in arrays else arrays["m" + POSITION_SUFFIX]
            if doc_edges[-1] != len(arrays["A"]) or pos_edges[-1] != len(positions):
                # the fingerprint makes this unreachable; kept loud
                return [ValueError("the checkpoint's documents are not the corpus'")] * len(sizes)
            # where each position's entries end, for the fields saved as stores
            entry_ends = {f: np.concatenate([[0], np.cumsum(arrays[f], dtype=np.int64)])
                          for f in set(self._ENTRY_ROWS.values()) if f in arrays}
            dealt = []
            for r in range(len(sizes)):
                part = {}
                for k, v in arrays.items():
                    if k in self._POSITION_ROWS:
                        part[k] = v[pos_edges[r]:pos_edges[r + 1]]
                    elif k in self._ENTRY_ROWS:
                        ends = entry_ends[self._ENTRY_ROWS[k]]
                        part[k] = v[ends[pos_edges[r]]:ends[pos_edges[r + 1]]]
                    elif self._is_row_array(k):
                        part[k] = v[doc_edges[r]:doc_edges[r + 1]]
                    else:
                        part[k] = v
                dealt.append(part)
            return dealt
        return deal(parts, comm)

    def load(self, arrays: dict, meta: dict) -> None:
        arrays = self._dealt(arrays)   # one process: its own, as views
        a, T = arrays, int(meta["n_layers"])
        g = GlobalParameters(a["D"], [a[f"phi_{i}"] for i in range(T - 1)], a["r"])
        positions, K = self.sampler.data.doc_positions, g.D.shape[2]
        loaded = GibbsState(globals=g, w=field_from_arrays("w", a, positions, K),
                            m=field_from_arrays("m", a, positions, K),
                            theta=[a[f"theta_{i}"] for i in range(T)],
                            c=[a[f"c_{i}"] for i in range(T)], A=a["A"], loglik=a["loglik"],
                            sweep=int(meta["sweep"]))
        # into the caller's state object, which holds the final values when the run returns
        state = self.state
        for name in GibbsState.__dataclass_fields__:
            setattr(state, name, getattr(loaded, name))
        g_sum = (GlobalParameters(a["sum_D"], [a[f"sum_phi_{i}"] for i in range(T - 1)],
                                  a["sum_r"]) if meta["has_globals_sum"] else None)
        collector = Collector([a[f"theta_sum_{i}"] for i in range(T)], g_sum,
                              int(meta["n_collected"]), a["chain_loglik"].tolist(),
                              a["chain_seconds"].tolist(), MixingTrace.from_arrays(a))
        self._attach(state, collector)


def run_chain(algorithm, state: GibbsState, n_iter: int, burn_in: int, *, progress=None,
              collect_globals: bool = True, collector: Collector | None = None,
              on_sweep=None, monitor=None, checkpoint_dir=None, checkpoint_every: int = 10,
              resume: bool = False, identity=None, labels=None,
              communicator=None) -> RunResult:
    """Run ``algorithm.sweep_on_backend`` until ``state.sweep == n_iter``; average theta (and,
    with ``collect_globals``, D, Phi, r) over the sweeps after ``burn_in``: a
    :class:`GibbsChain` driven by the training loop.

    A run continues from ``state.sweep`` with an existing ``collector``: every draw depends
    only on (seed, sweep, step, block), so a continued run is identical to an uninterrupted
    one.  ``progress``: None (no bar), a bar (an object with ``update(n)``) or a factory
    ``progress(total, initial) -> bar``.  With ``checkpoint_dir`` the chain is saved every
    ``checkpoint_every`` sweeps (not after the last), fingerprinted by ``identity`` (what must
    match to ``resume``: the data and the parameters); ``labels`` go with the documents to
    every sweep.  ``state`` (and ``collector``) hold the final values when the run returns.
    ``communicator``: one of several workers, each over its shard (:class:`GibbsChain`).
    """
    chain = GibbsChain(algorithm, state, burn_in, collect_globals=collect_globals,
                       collector=collector, monitor=monitor, on_sweep=on_sweep,
                       communicator=communicator)
    if chain.sweeps_done < n_iter:
        train(chain, chain.whole_corpus(identity, labels), n_iter,
              first_step=chain.sweeps_done, progress=False if progress is None else progress,
              checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume,
              save_at_end=False, communicator=chain.communicator)
    return chain.result()
