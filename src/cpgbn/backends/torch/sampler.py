"""PyTorch backend of the Gibbs sweep: the same conditionals, in the same order, as
:class:`cpgbn.inference.gibbs.GibbsSampler`, vectorised over cells, positions and documents so
that it runs on a GPU (``device="cuda"``) or, for CI and small problems, on the CPU.

The sweep is step for step the one of :mod:`cpgbn.inference.gibbs` (read its module docstring
for the reasons of the order):

1. w | m, a, c^(2) (pooling prior; the floor-aware exact draw for empty positions), then every
   cell is re-augmented, m | w, D (zero-truncated Poisson / pseudo-count / observed count, split
   over the candidates (f, k) by one multinomial draw), giving m, A, n and the log-likelihood;
2. D_k | n ~ Dir(n_k + eta^(1));
3. c^(t+1) | theta^(t), theta^(t+1) for t = 1..T, while every theta is current;
4. upward pass: first-layer tables sum_s CRT(m_jks, a_jk / S_j), higher layers
   CRT(m^(t), Phi^(t+1) theta^(t+1)), each split over layer t+1;
5. Phi^(t) | counts, r | tables;
6. downward pass theta^(T), ..., theta^(2).

Random numbers
    One ``torch.Generator`` on the device (in :class:`cpgbn.backends.torch.random.TorchRandom`,
    with the exact variates built on it), re-seeded at every step of every sweep from
    ``(seed, sweep, step)`` (the stream codes of :mod:`cpgbn.inference.gibbs`).  A run is
    therefore reproducible for a given seed, device type, torch version and ``max_elements``
    (the chunking changes the order in which variates are consumed), and a run resumed from a
    checkpoint continues exactly as an uninterrupted one.  It is NOT bit-identical to the numba
    backend (different generators and algorithms): the two agree in distribution, which
    ``tests/test_torch_backend.py`` checks (Geweke test and a two-sample posterior comparison).

Exactness
    Every draw is exact up to floating-point rounding.  Only torch's uniform, exponential and
    ``_standard_gamma`` (Marsaglia-Tsang, used for shapes >= 1 only) are used as primitives;
    shapes < 1 use the boost G(a) = G(a + 1) exp(-E / a) in log space (no underflow for tiny
    shapes), the zero-truncated Poisson is inversion (lam < 10) or Hormann's PTRS rejection,
    the multinomials are inverse-CDF categorical draws (binary search on cumulative weights) per
    unit, and CRT(m, a) is the sum of its m - 1 Bernoulli(a / (a + i)) variables.  torch's own
    Poisson/binomial are not used: on CUDA, ``torch.poisson`` goes through cuRAND, which
    uses float32 arithmetic above rate 64 and a normal approximation above 4000.

Dtypes
    Storage follows :class:`~cpgbn.inference.state.GibbsState`: w and D float32 with the float32
    floor FLOOR = 1e-30; theta, c, Phi, r float64 with the floors TINY = 1e-100 and PHI_FLOOR.
    Counts (m, A, n, tables) are int64 on the device (int32 in the returned GibbsState; the
    state on the device and its conversions are in :mod:`cpgbn.backends.torch.state`).  All
    arithmetic of the conditionals (candidate weights w d, lambda, cumulative weights, gamma
    shapes, CRT probabilities) is float64, as in the numba kernels: a product of two floored
    float32 values (1e-60) underflows in float32, and TINY is not representable in float32.
    There is no float32 compute mode for that reason; on a GPU the steps are bound by memory
    traffic and indexing rather than by float64 throughput.

Memory
    Large temporaries are built in chunks of at most ``max_elements`` float64 entries (cells x
    F x K candidate weights, positions x K weights, rows x K_{t+1} split weights, padded unit
    blocks).
"""

from __future__ import annotations

import math
import time

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("the PyTorch backend needs torch: pip install 'cpgbn[torch]'") from exc

from ...errors import CPGBNInputError
from ...layers.cells import BERNOULLI_POISSON, FIXED_COUNT, OBSERVED_COUNT, ConvData
from ..numba.conv import FLOOR as _FLOOR32
from ..numba.gbn import PHI_FLOOR, TINY
from .random import TorchRandom
from ...inference.gibbs import (_CONV, _DOWNWARD, _INIT, _KERNELS, _PHI, _R, _REFRESH, _SCALES, _SPLIT,
                    _UPWARD, Collector, RunResult, _stream)
from ...inference.state import GibbsState, GlobalParameters, Hyperparameters
from .state import (F32, F64, I64, TorchState, resolve_device, tensor, to_device,
                          to_host)

__all__ = ["TorchGibbsSampler", "TorchState", "resolve_device"]

#: The float32 floor of w and D, as the float64 number it compares equal to (numba compares
#: float64 values with the float32 constant promoted to float64).
FLOOR = float(_FLOOR32)
_LOG_FLOOR = math.log(FLOOR)
#: Shapes below this use the floor-aware draw for positions without counts (as conv.py).
_FAST_SHAPE = 0.1


class TorchGibbsSampler:
    """Gibbs sweeps of a T-layer CPGBN with PyTorch tensors on ``device``.

    Same interface and the same conditionals as :class:`~cpgbn.inference.gibbs.GibbsSampler`;
    see the module docstring for random numbers, dtypes and memory.

    Parameters
    ----------
    data : ConvData
        The cells of the documents (re-assignable: ``sampler.data = other`` uploads new cells,
        as the Geweke test does between sweeps).
    hyper : Hyperparameters
    seed : int
    learn_globals : bool
        Draw D, Phi and r (training) or keep them fixed (inference for new documents).
    device : "cpu", "cuda", "cuda:N" or torch.device
        Where the tensors live.  ``"cuda"`` without a usable GPU raises CPGBNInputError.
    max_elements : int or None
        Largest float64 temporary built at once (default 2**22 on the CPU, 2**26 on a GPU).

    ``sweep``, ``draw_weights`` accept a numpy :class:`GibbsState` (uploaded, updated in place
    and written back) or a :class:`TorchState` (kept on the device: ``to_device`` /
    ``to_numpy_state`` convert); ``run`` uploads once and writes back at the end.
    """

    def __init__(self, data: ConvData, hyper: Hyperparameters, seed: int, *,
                 learn_globals: bool = True, device="cpu", max_elements: int | None = None):
        self.device = resolve_device(device)
        self.hyper = hyper
        self.seed = int(seed)
        self.learn_globals = learn_globals
        if max_elements is None:
            max_elements = 1 << (26 if self.device.type == "cuda" else 22)
        if int(max_elements) < 1:
            raise CPGBNInputError(f"max_elements must be >= 1, got {max_elements}")
        self.max_elements = int(max_elements)
        self.random = TorchRandom(self.seed, self.device, self.max_elements)
        self.data = data

    # ------------------------------------------------------------------ data
    @property
    def data(self) -> ConvData:
        return self._data

    @data.setter
    def data(self, data: ConvData) -> None:
        dev = self.device
        self._data = data
        n_docs = data.n_docs
        positions = np.asarray(data.doc_positions, dtype=np.int64)
        S = np.diff(positions)
        cells = np.asarray(data.doc_cells, dtype=np.int64)
        self._S = torch.tensor(S, dtype=I64, device=dev)
        self._p0 = torch.tensor(positions[:-1], dtype=I64, device=dev)
        self._pos_doc = torch.tensor(np.repeat(np.arange(n_docs), S), dtype=I64, device=dev)
        self._cell_doc = torch.tensor(np.repeat(np.arange(n_docs), np.diff(cells)), dtype=I64,
                                      device=dev)
        self._cell_word = torch.tensor(np.asarray(data.cell_word, dtype=np.int64), device=dev)
        self._cell_col = torch.tensor(np.asarray(data.cell_col, dtype=np.int64), device=dev)
        if data.mode == OBSERVED_COUNT:
            self._cell_count = torch.tensor(np.asarray(data.cell_count, dtype=np.int64),
                                            device=dev)
        elif data.mode in (BERNOULLI_POISSON, FIXED_COUNT):
            self._cell_count = None
        else:
            raise CPGBNInputError(f"unknown ConvData mode {data.mode!r}")

    # ------------------------------------------------------------------ conversions
    def _tensor(self, array, dtype) -> torch.Tensor:
        return tensor(array, dtype, self.device)

    def to_device(self, state: GibbsState) -> TorchState:
        """A device copy of a numpy GibbsState."""
        return to_device(state, self.device)

    def to_numpy_state(self, ts: TorchState, out: GibbsState | None = None) -> GibbsState:
        """The state as numpy arrays: written into ``out`` (in place where shapes and dtypes
        allow, as the numba sampler mutates its state; the globals only when they are learned)
        or into a new GibbsState."""
        return to_host(ts, out, with_globals=self.learn_globals)

    # ------------------------------------------------------------------ initialisation
    def initial_state(self, layers: tuple[int, ...], vocab_size: int,
                      globals_: GlobalParameters | None = None) -> GibbsState:
        """A starting state: Dir(1) kernels and Phi unless given, w = 1, one augmentation."""
        data = self.data
        n_docs, F = data.n_docs, data.filter_width
        K1 = layers[0]
        dev = self.device
        if globals_ is None:
            self.random.reseed(_stream(-1, _INIT))
            D = self._dirichlet_kernels(torch.zeros((vocab_size, F, K1), dtype=I64, device=dev),
                                        1.0)
            phi = []
            for t in range(1, len(layers)):
                self.random.reseed(_stream(-1, _INIT + t))
                phi.append(self._dirichlet_columns(
                    torch.zeros((layers[t - 1], layers[t]), dtype=I64, device=dev), 1.0))
            r = torch.full((layers[-1],), self.hyper.gamma0 / layers[-1], dtype=F64, device=dev)
            ts_globals = (D, phi, r)
        else:
            ts_globals = (self._tensor(globals_.D, F32),
                          [self._tensor(p, F64) for p in globals_.phi],
                          self._tensor(globals_.r, F64))
        S = self._S.to(F64)
        ts = TorchState(
            D=ts_globals[0], phi=ts_globals[1], r=ts_globals[2],
            w=torch.ones((data.n_positions, K1), dtype=F32, device=dev),
            m=torch.zeros((data.n_positions, K1), dtype=I64, device=dev),
            theta=[S[:, None].expand(n_docs, K1).clone()]
            + [torch.ones((n_docs, k), dtype=F64, device=dev) for k in layers[1:]],
            c=[torch.ones(n_docs, dtype=F64, device=dev) for _ in layers],
            A=torch.zeros((n_docs, K1), dtype=I64, device=dev),
            loglik=torch.zeros(n_docs, dtype=F64, device=dev),
            sweep=0)
        self.random.reseed(_stream(-1, _CONV))
        self._augment(ts, None)
        state = self.to_numpy_state(ts)
        if globals_ is not None:
            state.globals = globals_  # like GibbsSampler: the state holds the caller's object
        return state

    # ------------------------------------------------------------------ one sweep
    def sweep(self, state):
        """Advance ``state`` (GibbsState or TorchState) by one full Gibbs sweep, in place."""
        if isinstance(state, TorchState):
            self._sweep(state)
            return state
        ts = self.to_device(state)
        self._sweep(ts)
        return self.to_numpy_state(ts, state)

    def draw_weights(self, state):
        """Redraw w | m, a, c^(2) alone (no augmentation); see GibbsSampler.draw_weights."""
        if isinstance(state, TorchState):
            self.random.reseed(_stream(state.sweep, _REFRESH))
            self._draw_w(state)
            return state
        ts = self.to_device(state)
        self.draw_weights(ts)
        return self.to_numpy_state(ts, state)

    def _sweep(self, ts: TorchState) -> None:
        hyper = self.hyper
        T = ts.n_layers
        s = ts.sweep
        n_docs = self.data.n_docs
        learn = self.learn_globals

        # 1. w | m, then m | w, D (with the kernel counts n when learning)
        self.random.reseed(_stream(s, _CONV))
        self._draw_w(ts)
        counts = self._augment(ts, learn)
        # 2. D | n
        if learn:
            self.random.reseed(_stream(s, _KERNELS))
            ts.D = self._dirichlet_kernels(counts, hyper.eta[0])
        del counts

        # 3. c^(t+1) | theta^(t), theta^(t+1), all current
        for t in range(1, T + 1):
            self.random.reseed(_stream(s, _SCALES + t))
            above = (ts.r.sum().expand(n_docs) if t == T else ts.theta[t].sum(dim=1))
            ts.c[t - 1] = (self.random.gamma(hyper.e0 + above).clamp_min(TINY)
                           / (hyper.f0 + ts.theta[t - 1].sum(dim=1)))
        q = [torch.ones(n_docs, dtype=F64, device=self.device)]
        for t in range(1, T + 1):
            q.append(torch.log1p(q[t - 1] / ts.c[t - 1]))

        # 4-5. upward pass with theta marginalised, then the globals of the stack
        need_first = T > 1 or (learn and hyper.sample_r)
        tables = None
        if need_first:
            self.random.reseed(_stream(s, _UPWARD))
            tables = self._position_tables(ts.m, ts.first_layer_shape())
        counts_up = [ts.A]
        for t in range(1, T):
            phi = ts.phi[t - 1]
            if t > 1:
                self.random.reseed(_stream(s, _UPWARD + t))
                tables = self.random.crt(counts_up[-1], (ts.theta[t] @ phi.T).clamp_min(TINY))
            self.random.reseed(_stream(s, _SPLIT + t))
            m_next, phi_counts = self._split_tables(tables, phi, ts.theta[t])
            if learn:
                self.random.reseed(_stream(s, _PHI + t))
                ts.phi[t - 1] = self._dirichlet_columns(
                    phi_counts, hyper.eta[min(t, len(hyper.eta) - 1)])
            counts_up.append(m_next)
        if learn and hyper.sample_r:
            if T > 1:
                self.random.reseed(_stream(s, _UPWARD + T))
                tables = self.random.crt(counts_up[-1],
                                   ts.r.clamp_min(TINY).unsqueeze(0).expand(counts_up[-1].shape))
            self.random.reseed(_stream(s, _R))
            shape = hyper.gamma0 / ts.r.numel() + tables.sum(dim=0).to(F64)
            ts.r = self.random.gamma(shape).clamp_min(TINY) / (hyper.c0 + q[T].sum())

        # 6. downward pass theta^(T), ..., theta^(2)
        for t in range(T, 1, -1):
            self.random.reseed(_stream(s, _DOWNWARD + t))
            shape = (ts.r.unsqueeze(0).expand(ts.theta[t - 1].shape) if t == T
                     else ts.theta[t] @ ts.phi[t - 1].T)
            rate = ts.c[t - 1] + q[t - 1]
            ts.theta[t - 1] = (self.random.gamma(shape + counts_up[t - 1].to(F64)).clamp_min(TINY)
                               / rate[:, None])
        ts.sweep += 1

    # ------------------------------------------------------------------ runs
    def run(self, state: GibbsState, n_iter: int, burn_in: int, *, progress=None,
            collect_globals: bool | None = None, collector: Collector | None = None,
            on_sweep=None) -> RunResult:
        """Run sweeps until ``state.sweep == n_iter`` (as GibbsSampler.run).

        The state is uploaded once, the sums over collected sweeps are kept on the device, and
        ``state`` (and ``collector``, if given) are written back at the end.  ``on_sweep(state,
        collector)`` sees current numpy copies: with it, the state and the sums are copied to
        the host after every sweep (use it sparingly on a GPU).
        """
        if collect_globals is None:
            collect_globals = self.learn_globals
        if collector is None:
            collector = Collector.empty(state, collect_globals)
        ts = self.to_device(state)
        theta_sum = [self._tensor(a, F64) for a in collector.theta_sum]
        gsum = collector.globals_sum
        g_sum = None
        if gsum is not None:
            g_sum = [self._tensor(gsum.D, F64), [self._tensor(p, F64) for p in gsum.phi],
                     self._tensor(gsum.r, F64)]

        def flush() -> None:
            for acc, t in zip(collector.theta_sum, theta_sum):
                np.copyto(acc, t.cpu().numpy())
            if g_sum is not None:
                np.copyto(gsum.D, g_sum[0].cpu().numpy())
                for acc, p in zip(gsum.phi, g_sum[1]):
                    np.copyto(acc, p.cpu().numpy())
                np.copyto(gsum.r, g_sum[2].cpu().numpy())
            self.to_numpy_state(ts, state)

        while ts.sweep < n_iter:
            start = time.perf_counter()
            self._sweep(ts)
            loglik = float(ts.loglik.sum())  # also waits for the device
            collector.seconds.append(time.perf_counter() - start)
            collector.loglik.append(loglik)
            if ts.sweep > burn_in:
                collector.n_collected += 1
                for acc, t in zip(theta_sum, ts.theta):
                    acc += t
                if g_sum is not None:
                    g_sum[0] += ts.D.to(F64)
                    for acc, p in zip(g_sum[1], ts.phi):
                        acc += p
                    g_sum[2] += ts.r
            if progress is not None:
                progress.update(1)
            if on_sweep is not None:
                flush()
                on_sweep(state, collector)
        flush()
        return collector.result(state)

    # ------------------------------------------------------------------ random variates
    def _position_chunks(self, K: int):
        P = self.data.n_positions
        step = max(1, self.max_elements // max(K, 1))
        for start in range(0, P, step):
            yield start, min(P, start + step)

    def _draw_w(self, ts: TorchState) -> None:
        """w_jks ~ Gam(m_jks + a_jk / S_j, 1 / (1 + c_j)), floored; theta^(1) = sum_s w."""
        n_docs, K = ts.theta[0].shape
        alpha_doc = ts.first_layer_shape() / self._S.to(F64)[:, None]
        log_rate_doc = torch.log(1.0 + ts.c[0])
        w = torch.empty_like(ts.w)
        theta = torch.zeros((n_docs, K), dtype=F64, device=self.device)
        for lo, hi in self._position_chunks(K):
            doc = self._pos_doc[lo:hi]
            alpha = alpha_doc[doc]
            log_rate = log_rate_doc[doc][:, None].expand(-1, K)
            m = ts.m[lo:hi]
            fast = (m == 0) & (alpha < _FAST_SHAPE)
            value = torch.empty(alpha.shape, dtype=F64, device=self.device)
            gen = (~fast).nonzero(as_tuple=True)
            if gen[0].numel():
                value[gen] = torch.exp(self.random.log_gamma(m[gen].to(F64) + alpha[gen])
                                       - log_rate[gen])
            idx = fast.nonzero(as_tuple=True)
            if idx[0].numel():
                a, lr = alpha[idx], log_rate[idx]
                p_floor = torch.exp(a * (_LOG_FLOOR + lr) - torch.lgamma(a + 1.0))
                above = self.random.uniform(a.numel()) >= p_floor
                v = torch.full(a.shape, FLOOR, dtype=F64, device=self.device)
                sel = above.nonzero(as_tuple=True)[0]
                if sel.numel():
                    v[sel] = (self.random.gamma_above(a[sel], _LOG_FLOOR + lr[sel])
                              * torch.exp(-lr[sel]))
                value[idx] = v
            w_chunk = torch.where(value > FLOOR, value, FLOOR).to(F32)
            w[lo:hi] = w_chunk
            theta.index_add_(0, doc, w_chunk.to(F64))
        ts.w = w
        ts.theta[0] = theta

    #: dtype of the latent counts m, A and n on the device (a study may change it with
    #: :meth:`_split_units`: ``experiments/expected_counts.py``)
    count_dtype = I64

    def _split_units(self, cum: torch.Tensor, units: torch.Tensor):
        """Multinomial(units[i]) over the candidates of every cell i (inclusive cumulative
        weights ``cum``): (cell rows, candidate columns, amounts), one unit per entry."""
        r_u, c_u = self.random.units(cum, units)
        return r_u, c_u, torch.ones(r_u.shape, dtype=I64, device=self.device)

    def _augment(self, ts: TorchState, with_counts):
        """m | w, D for every cell; returns the kernel counts n (V, F, K) if ``with_counts``."""
        data = self.data
        V, F, K = ts.D.shape
        dev = self.device
        P, N = data.n_positions, data.n_docs
        m = torch.zeros(P * K, dtype=self.count_dtype, device=dev)
        A = torch.zeros(N * K, dtype=self.count_dtype, device=dev)
        n = torch.zeros(V * F * K, dtype=self.count_dtype, device=dev) if with_counts else None
        loglik = -ts.theta[0].sum(dim=1)
        f_range = torch.arange(F, device=dev)
        step = max(1, self.max_elements // (F * K))
        for lo in range(0, data.n_cells, step):
            hi = min(data.n_cells, lo + step)
            doc = self._cell_doc[lo:hi]
            word = self._cell_word[lo:hi]
            col = self._cell_col[lo:hi]
            s = col[:, None] - f_range[None, :]                          # (C, F)
            valid = (s >= 0) & (s < self._S[doc][:, None])
            rows = torch.where(valid, self._p0[doc][:, None] + s, 0)
            weights = ts.w[rows].to(F64) * ts.D[word].to(F64)        # (C, F, K)
            weights = torch.where(valid[:, :, None], weights, 0.0).reshape(hi - lo, F * K)
            cum = torch.cumsum(weights, dim=1)
            del weights
            lam = cum[:, -1]
            if data.mode == BERNOULLI_POISSON:
                units = self.random.zero_truncated_poisson(lam)
                cell_ll = torch.log(-torch.expm1(-lam)) + lam
            else:
                if data.mode == FIXED_COUNT:
                    units = torch.full((hi - lo,), int(data.fixed_count), dtype=I64, device=dev)
                else:
                    units = self._cell_count[lo:hi]
                uf = units.to(F64)
                cell_ll = uf * torch.log(lam) - torch.lgamma(uf + 1.0)
            loglik.index_add_(0, doc, cell_ll)
            r_u, c_u, amount = self._split_units(cum, units)
            del cum
            f_u = torch.div(c_u, K, rounding_mode="floor")
            k_u = c_u - f_u * K
            d_u = doc[r_u]
            m.index_add_(0, (self._p0[d_u] + col[r_u] - f_u) * K + k_u, amount)
            A.index_add_(0, d_u * K + k_u, amount)
            if n is not None:
                n.index_add_(0, word[r_u] * (F * K) + c_u, amount)
        ts.m = m.reshape(P, K)
        ts.A = A.reshape(N, K)
        ts.loglik = loglik
        return None if n is None else n.reshape(V, F, K)

    def _dirichlet_kernels(self, counts: torch.Tensor, eta: float) -> torch.Tensor:
        """D_k ~ Dir(n_k + eta) over the V*F entries of each kernel, floored, float32."""
        V, F, K = counts.shape
        lg = self.random.log_gamma(counts.to(F64) + eta).reshape(V * F, K)
        D = torch.exp(lg - torch.logsumexp(lg, dim=0, keepdim=True))
        D = torch.where(D > FLOOR, D, FLOOR)
        return D.reshape(V, F, K).to(F32)

    # ------------------------------------------------------------------ the gamma belief stack
    def _dirichlet_columns(self, counts: torch.Tensor, eta: float) -> torch.Tensor:
        """Phi[:, k'] ~ Dir(eta + counts[:, k']), floored at PHI_FLOOR and renormalised."""
        lg = self.random.log_gamma(counts.to(F64) + eta)
        col = torch.exp(lg - lg.max(dim=0, keepdim=True).values)
        col = col / col.sum(dim=0, keepdim=True)
        col = col.clamp_min(PHI_FLOOR)
        return col / col.sum(dim=0, keepdim=True)

    def _position_tables(self, m: torch.Tensor, shape: torch.Tensor) -> torch.Tensor:
        """tables[j, k] = sum_s CRT(m_jks, max(a_jk / S_j, TINY)) (gbn.position_tables)."""
        n_docs, K = shape.shape
        a_doc = shape / self._S.to(F64)[:, None]
        tables = torch.zeros(n_docs * K, dtype=I64, device=self.device)
        for lo, hi in self._position_chunks(K):
            mm = m[lo:hi]
            p, k = (mm > 0).nonzero(as_tuple=True)
            if p.numel() == 0:
                continue
            doc = self._pos_doc[lo:hi][p]
            t = self.random.crt(mm[p, k], a_doc[doc, k].clamp_min(TINY))
            tables.index_add_(0, doc * K + k, t)
        return tables.reshape(n_docs, K)

    def _split_tables(self, tables: torch.Tensor, phi: torch.Tensor, theta_above: torch.Tensor):
        """Split l_jk over k' in proportion to Phi[k, k'] theta_above[j, k'] (gbn.split_tables);
        returns (m_next (N, K_{t+1}), phi_counts (K_t, K_{t+1}))."""
        n_docs, n_below = tables.shape
        n_above = phi.shape[1]
        m_next = torch.zeros(n_docs * n_above, dtype=I64, device=self.device)
        phi_counts = torch.zeros(n_below * n_above, dtype=I64, device=self.device)
        j_all, k_all = (tables > 0).nonzero(as_tuple=True)
        step = max(1, self.max_elements // n_above)
        for lo in range(0, j_all.numel(), step):
            j, k = j_all[lo:lo + step], k_all[lo:lo + step]
            cum = torch.cumsum(phi[k] * theta_above[j], dim=1)
            r_u, c_u = self.random.units(cum, tables[j, k])
            ones = torch.ones(r_u.shape, dtype=I64, device=self.device)
            m_next.index_add_(0, j[r_u] * n_above + c_u, ones)
            phi_counts.index_add_(0, k[r_u] * n_above + c_u, ones)
        return m_next.reshape(n_docs, n_above), phi_counts.reshape(n_below, n_above)
