"""The Gibbs driver: initialisation, the order of the conditional draws in one sweep, and runs.

One sweep (paper section 3.1 and the GBN upward-downward sampler; layer 1 is convolutional):

1. for each document: w | m, a, c^(2) (pooling prior, eq. 3), then every cell is re-augmented,
   m | w, D, giving m_{jks}, A_{jk} = m_{jk..} and the kernel counts n_{kvf};
2. D_k | n ~ Dir(n_k + eta^(1));
3. c^(t+1)_j | theta^(t)_j, theta^(t+1)_j for t = 1..T, while every theta is current;
4. upward pass with theta^(1..T) marginalised: l ~ CRT(m^(t), Phi^(t+1) theta^(t+1)), split
   over layer t+1 (counts for Phi^(t+1) and m^(t+1)); at the top l ~ CRT(m^(T), r);
5. Phi^(t) | counts ~ Dir(counts + eta^(t)); r | l ~ Gam(gamma0/K_T + l_.k, 1/(c0 + sum_j q^(T+1)_j));
6. downward pass: theta^(t)_j | m^(t) ~ Gam(Phi^(t+1) theta^(t+1)_j + m^(t)_j, 1/(c^(t+1)_j + q^(t)_j)).

The marginalised steps (4-6) are followed by the draw of the variable they integrate out
(w, hence theta^(1), at the start of the next sweep) before anything conditions on it, so the
sweep is a valid partially collapsed Gibbs sampler; c^(2) conditions on theta^(1) and is drawn
before the marginalisation.  Step 1 fuses the end of one sweep with the start of the next,
which keeps a document's w in cache while its cells are augmented.  The Geweke test in
``tests/test_geweke.py`` checks this order against the joint distribution.

With the globals held fixed (``learn_globals=False``) the same sweep infers the local
parameters of new documents (paper section 4: test documents).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

from ..layers.cells import ConvData
from ..backends.numba import conv, gbn
from ..backends.numba.shared_shape import shared_shape_table
from .state import GibbsState, GlobalParameters, Hyperparameters

#: Documents per RNG block.  Part of what a seed means: changing it changes the draws.
DOC_BLOCK = 32
#: Vocabulary rows per RNG block of the kernel draw.
WORD_BLOCK = 256

# Step codes: stream = (sweep + 1) * _STEPS + code, so every (sweep, step) has its own streams.
_STEPS = 256
_CONV, _KERNELS, _INIT = 0, 1, 2
_SCALES, _UPWARD, _SPLIT, _PHI, _DOWNWARD = 16, 48, 80, 112, 144
_R, _REFRESH = 176, 177

_blas_controller: ThreadpoolController | None = None


def one_blas_thread():
    """A context in which numpy's BLAS runs on one thread.

    The stack's matrix products (Phi theta, 10^8 flops at most) are cheap on one core, but
    OpenBLAS's worker threads keep spinning for a while after each product and take the cores
    from the numba kernels that follow: on 2 cores the w draw of a three-layer MR model ran at
    0.09 s instead of 0.05.
    """
    global _blas_controller
    if _blas_controller is None:
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


def _stream(sweep: int, code: int) -> int:
    return (sweep + 1) * _STEPS + code


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


@dataclass
class Collector:
    """Running sums over the collected sweeps, plus the trace: the part of a run that a
    checkpoint must keep besides the sampler state.

    theta_sum : list of (N, K_t) float64 -- sum of theta^(t) over collected sweeps.
    globals_sum : GlobalParameters of float64 sums, or None (globals fixed).
    n_collected : int; loglik, seconds : per-sweep trace.
    """

    theta_sum: list[np.ndarray]
    globals_sum: GlobalParameters | None
    n_collected: int = 0
    loglik: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @classmethod
    def empty(cls, state: GibbsState, collect_globals: bool) -> "Collector":
        g = state.globals
        g_sum = (GlobalParameters(np.zeros(g.D.shape, dtype=np.float64),
                                  [np.zeros_like(p) for p in g.phi], np.zeros_like(g.r))
                 if collect_globals else None)
        return cls([np.zeros_like(t) for t in state.theta], g_sum)

    def add(self, state: GibbsState, collect: bool, seconds: float) -> None:
        self.seconds.append(seconds)
        self.loglik.append(float(state.loglik.sum()))
        if not collect:
            return
        self.n_collected += 1
        for acc, t in zip(self.theta_sum, state.theta):
            acc += t
        if self.globals_sum is not None:
            self.globals_sum.D += state.globals.D
            for acc, p in zip(self.globals_sum.phi, state.globals.phi):
                acc += p
            self.globals_sum.r += state.globals.r

    def result(self, state: GibbsState) -> RunResult:
        n = self.n_collected
        theta = [acc / n for acc in self.theta_sum] if n else [t.copy() for t in state.theta]
        g_mean = None
        if self.globals_sum is not None:
            g = self.globals_sum
            g_mean = (GlobalParameters((g.D / n).astype(np.float32), [p / n for p in g.phi], g.r / n)
                      if n else state.globals.copy())
        return RunResult(theta, g_mean, list(self.loglik), list(self.seconds), n)


class GibbsSampler:
    """Runs Gibbs sweeps of a T-layer CPGBN over one corpus.

    Parameters
    ----------
    data : ConvData
        The cells of the documents.
    hyper : Hyperparameters
    seed : int
        The RNG seed; every draw is a function of (seed, sweep, step, block).
    learn_globals : bool
        Draw D, Phi and r (training) or keep them fixed (inference for new documents).
    """

    #: dtype of the latent counts m, A and the kernel-count slabs (whole counts; a study that
    #: adds fractional counts sets float64, as the PyTorch sampler's ``count_dtype``)
    count_dtype = np.int32

    def __init__(self, data: ConvData, hyper: Hyperparameters, seed: int, *,
                 learn_globals: bool = True):
        self.data = data
        self.hyper = hyper
        self.seed = int(seed)
        self.learn_globals = learn_globals
        self._count_slabs = None
        self._slabs_zero = False  # True once draw_kernels has summed and zeroed the slabs

    # ------------------------------------------------------------------ initialisation
    def initial_state(self, layers: tuple[int, ...], vocab_size: int,
                      globals_: GlobalParameters | None = None) -> GibbsState:
        """A starting state: random kernels and Phi (Dir(1) draws) unless given, w = 1, one augmentation."""
        data = self.data
        n_docs, F = data.n_docs, data.filter_width
        K1 = layers[0]
        if globals_ is None:
            D = np.empty((vocab_size, F, K1), dtype=np.float32)
            conv.draw_kernels(self.seed, _stream(-1, _INIT),
                              np.zeros((1, vocab_size, F, K1), dtype=np.int32),
                              shared_shape_table(1.0), D, WORD_BLOCK)
            phi = []
            for t in range(1, len(layers)):
                p = np.empty((layers[t - 1], layers[t]), dtype=np.float64)
                gbn.draw_phi(self.seed, _stream(-1, _INIT + t),
                             np.zeros(p.shape, dtype=np.int64), 1.0, p)
                phi.append(p)
            r = np.full(layers[-1], self.hyper.gamma0 / layers[-1])
            globals_ = GlobalParameters(D, phi, r)
        w = np.ones((data.n_positions, K1), dtype=np.float32)
        theta = [np.repeat((data.doc_length - F + 1).astype(np.float64)[:, None], K1, axis=1)]
        theta += [np.ones((n_docs, k), dtype=np.float64) for k in layers[1:]]
        state = GibbsState(
            globals=globals_,
            w=w,
            m=np.zeros((data.n_positions, K1), dtype=self.count_dtype),
            theta=theta,
            c=[np.ones(n_docs) for _ in layers],
            A=np.zeros((n_docs, K1), dtype=self.count_dtype),
            loglik=np.zeros(n_docs),
            sweep=0,
        )
        self._sweep_positions(state, stream=_stream(-1, _CONV), draw_w=False, counts=self._no_counts())
        return state

    # ------------------------------------------------------------------ one sweep
    def sweep(self, state: GibbsState) -> GibbsState:
        """Advance ``state`` by one full Gibbs sweep (in place) and return it."""
        with one_blas_thread():
            return self._sweep(state)

    def _sweep(self, state: GibbsState) -> GibbsState:
        hyper, g = self.hyper, state.globals
        T = state.n_layers
        s = state.sweep
        counts = self._counts_for_sweep(g.D.shape) if self.learn_globals else self._no_counts()

        # a_jk = (Phi^(2) theta^(2)_j)_k or r_k: unchanged until the stack is redrawn in step 4-5
        first_shape = state.first_layer_shape()
        # 1. w | m (uses the stack's latest theta^(2) or r and c^(2)), then m | w, D, and the
        # pooling tables of the new m (the first step of the upward pass in 4-5)
        n_docs = self.data.n_docs
        tables = np.empty((n_docs, g.D.shape[2]), dtype=np.int64)
        self._sweep_positions(state, stream=_stream(s, _CONV), draw_w=True, counts=counts,
                              prior_shape=first_shape, tables=tables)
        # 2. D | n (this also zeroes the count slabs for the next sweep)
        if self.learn_globals:
            conv.draw_kernels(self.seed, _stream(s, _KERNELS), counts,
                              shared_shape_table(hyper.eta[0]), g.D, WORD_BLOCK)
            self._slabs_zero = True

        # 3. c^(t+1) | theta^(t), theta^(t+1), all current
        for t in range(1, T + 1):
            above = g.r.sum() * np.ones(self.data.n_docs) if t == T else state.theta[t].sum(axis=1)
            gbn.draw_doc_scales(self.seed, _stream(s, _SCALES + t), DOC_BLOCK, above,
                                state.theta[t - 1].sum(axis=1), hyper.e0, hyper.f0, state.c[t - 1])
        q = [np.ones(self.data.n_docs)]  # q^(t), t = 1..T+1
        for t in range(1, T + 1):
            q.append(np.log1p(q[t - 1] / state.c[t - 1]))

        # 4-5. upward pass with theta marginalised (tables from step 1), then the stack's globals
        counts_up = [state.A]  # m^(t), t = 1..T
        for t in range(1, T):
            phi = g.phi[t - 1]
            if t > 1:
                tables = np.empty(counts_up[-1].shape, dtype=np.int64)
                gbn.layer_tables(self.seed, _stream(s, _UPWARD + t), DOC_BLOCK, counts_up[-1],
                                 state.theta[t] @ phi.T, tables)
            m_next = np.empty((n_docs, phi.shape[1]), dtype=np.int64)
            slabs = (np.zeros((numba.get_num_threads(),) + phi.shape, dtype=np.int64)
                     if self.learn_globals else np.zeros((0, 0, 0), dtype=np.int64))
            gbn.split_tables(self.seed, _stream(s, _SPLIT + t), DOC_BLOCK, tables, phi,
                             state.theta[t], m_next, slabs)
            if self.learn_globals:
                gbn.draw_phi(self.seed, _stream(s, _PHI + t), slabs.sum(axis=0),
                             hyper.eta[min(t, len(hyper.eta) - 1)], phi)
            counts_up.append(m_next)
        if self.learn_globals and hyper.sample_r:
            if T > 1:
                tables = np.empty(counts_up[-1].shape, dtype=np.int64)
                gbn.layer_tables(self.seed, _stream(s, _UPWARD + T), DOC_BLOCK, counts_up[-1],
                                 np.ascontiguousarray(np.broadcast_to(g.r, tables.shape)), tables)
            shape = hyper.gamma0 / len(g.r) + tables.sum(axis=0)
            gbn.draw_gamma_vector(self.seed, _stream(s, _R), shape, hyper.c0 + q[T].sum(), g.r)

        # 6. downward pass theta^(T), ..., theta^(2)
        for t in range(T, 1, -1):
            shape = (np.ascontiguousarray(np.broadcast_to(g.r, state.theta[t - 1].shape)) if t == T
                     else state.theta[t] @ g.phi[t - 1].T)
            gbn.draw_doc_gammas(self.seed, _stream(s, _DOWNWARD + t), DOC_BLOCK, shape,
                                counts_up[t - 1], state.c[t - 1] + q[t - 1], state.theta[t - 1])
        state.sweep += 1
        return state

    # ------------------------------------------------------------------ runs
    def run(self, state: GibbsState, n_iter: int, burn_in: int, *, progress=None,
            collect_globals: bool | None = None, collector: Collector | None = None,
            on_sweep=None) -> RunResult:
        """Run sweeps until ``state.sweep == n_iter``; average theta (and the globals) over the
        sweeps after ``burn_in``.

        A run continues from ``state.sweep`` with an existing ``collector`` (a resumed
        checkpoint): every draw depends only on (seed, sweep, step, block), so a resumed run is
        identical to an uninterrupted one.  ``progress`` is an optional object with
        ``update(n)`` (a tqdm bar); ``on_sweep(state, collector)`` is called after each sweep.
        """
        if collect_globals is None:
            collect_globals = self.learn_globals
        if collector is None:
            collector = Collector.empty(state, collect_globals)
        while state.sweep < n_iter:
            start = time.perf_counter()
            self.sweep(state)
            collector.add(state, collect=state.sweep > burn_in,
                          seconds=time.perf_counter() - start)
            if progress is not None:
                progress.update(1)
            if on_sweep is not None:
                on_sweep(state, collector)
        return collector.result(state)

    # ------------------------------------------------------------------ helpers
    def draw_weights(self, state: GibbsState) -> GibbsState:
        """Redraw w | m, a, c^(2) alone (no augmentation), so that w is current again.

        At the end of a sweep, w was drawn before the stack's marginalised updates, so the
        tuple (w, theta^(2..T), Phi, r) is not yet a joint draw; every variable is current when
        it is drawn, so averages over the chain are unaffected.  Call this before reading w
        together with the stack (the Geweke test does).
        """
        with one_blas_thread():
            self._sweep_positions(state, stream=_stream(state.sweep, _REFRESH), draw_w=True,
                                  counts=self._no_counts(), augment=False)
        return state

    def _sweep_positions(self, state: GibbsState, *, stream: int, draw_w: bool, counts,
                         augment: bool = True, prior_shape=None, tables=None) -> None:
        data, g = self.data, state.globals
        rate = 1.0 + state.c[0]
        if prior_shape is None:
            prior_shape = state.first_layer_shape()
        row_sums = np.empty(g.D.shape[:2], dtype=np.float64)
        if augment:
            conv.kernel_row_sums(g.D, row_sums)
        conv.sweep_positions(
            self.seed, stream, DOC_BLOCK, data.doc_cells, data.doc_positions, data.cell_word,
            data.cell_col, data.cell_count, data.mode, data.fixed_count, g.D, row_sums,
            prior_shape, rate, draw_w, augment, state.w, state.m, state.theta[0], state.A,
            counts, state.loglik,
            tables if tables is not None else np.empty((0, g.D.shape[2]), dtype=np.int64))

    def _counts_for_sweep(self, shape) -> np.ndarray:
        n_threads = numba.get_num_threads()
        slabs = self._count_slabs
        if slabs is None or slabs.shape[0] != n_threads or slabs.shape[1:] != shape:
            slabs = np.zeros((n_threads,) + tuple(shape), dtype=self.count_dtype)
            self._count_slabs = slabs
        elif not self._slabs_zero:  # a sweep stopped between the augmentation and the D draw
            conv.reset_counts(slabs)
        self._slabs_zero = False
        return slabs

    @staticmethod
    def _no_counts() -> np.ndarray:
        return np.zeros((0, 0, 0, 0), dtype=np.int32)
