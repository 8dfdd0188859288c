"""PyTorch random variates for the GPU sampler: the torch counterpart of
:mod:`cpgbn.backends.numba.distributions` (exact draws, vectorised over tensors on one device).

One ``torch.Generator`` is re-seeded at every (seed, sweep, step, block of documents) by
:meth:`TorchRandom.reseed`, so a run is reproducible for a seed, device type, torch version,
``max_elements`` and the backend's ``doc_block``.  Only torch's uniform, exponential and
``_standard_gamma`` (for shapes >= 1) are used as primitives; everything else (small-shape
gammas in log space, the floor-aware truncated gamma, zero-truncated Poisson, multinomial
units by inverse CDF over sorted uniforms, CRT) is built on them here and tested against
exact laws in ``tests/test_torch_backend.py``.
"""

from __future__ import annotations

import math

import torch

_F64 = torch.float64
_I64 = torch.int64
_MASK64 = (1 << 64) - 1
#: Rates from which the zero-truncated Poisson uses PTRS rejection instead of inversion.
_POISSON_INV_MAX = 10.0
#: Unit blocks: rows whose sizes are all <= this go in one padded block.
_ONE_BLOCK = 8


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _step_seed(seed: int, stream: int, block: int = 0) -> int:
    """The generator seed of one (seed, sweep, step, block): a splitmix64 chain, below 2**63.
    Block 0 (and every draw that is not per document: D, Phi, r) takes the step's seed; a
    further block mixes its number in."""
    h = _splitmix64(seed & _MASK64)
    h = _splitmix64(h ^ ((stream * 0xD1B54A32D192ED03) & _MASK64))
    if block:
        h = _splitmix64(h ^ ((block * 0x8CB92BA72F3D8DD7) & _MASK64))
    return h >> 1


class TorchRandom:
    """Exact random variates on one device, from one generator re-seeded per step and block.

    ``max_elements`` bounds the padded temporaries of :meth:`unit_counts` and :meth:`crt`.
    """

    def __init__(self, seed: int, device: torch.device, max_elements: int):
        self.seed = int(seed)
        self.device = device
        self.max_elements = int(max_elements)
        self.generator = torch.Generator(device=device)

    def reseed(self, stream: int, block: int = 0) -> None:
        """Seed the generator for step ``stream`` (:mod:`cpgbn.inference.streams`) of the
        documents of global block ``block``."""
        self.generator.manual_seed(_step_seed(self.seed, stream, block))

    def uniform(self, *shape) -> torch.Tensor:
        return torch.rand(shape, dtype=_F64, device=self.device, generator=self.generator)

    def exponential(self, n: int) -> torch.Tensor:
        return torch.empty(n, dtype=_F64, device=self.device).exponential_(generator=self.generator)

    def log_gamma(self, shape: torch.Tensor) -> torch.Tensor:
        """log Gam(shape, 1) variates, exact for every shape > 0 (the boost in log space below 1);
        shape 0 gives -inf."""
        shape = shape.to(_F64)
        small = shape < 1.0
        g = torch._standard_gamma(torch.where(small, shape + 1.0, shape), generator=self.generator)
        lg = torch.log(g)
        idx = small.nonzero(as_tuple=True)
        if idx[0].numel():
            lg[idx] = lg[idx] - self.exponential(idx[0].numel()) / shape[idx]
        return lg

    def gamma(self, shape: torch.Tensor) -> torch.Tensor:
        """Gam(shape, 1) variates (float64; may underflow to 0 for tiny shapes: callers floor)."""
        shape = shape.to(_F64)
        small = shape < 1.0
        g = torch._standard_gamma(torch.where(small, shape + 1.0, shape), generator=self.generator)
        idx = small.nonzero(as_tuple=True)
        if idx[0].numel():
            g[idx] = torch.exp(torch.log(g[idx]) - self.exponential(idx[0].numel()) / shape[idx])
        return g

    def gamma_above(self, alpha: torch.Tensor, log_x0: torch.Tensor) -> torch.Tensor:
        """G ~ Gam(alpha, 1) | G >= x0 = exp(log_x0) < 1, alpha < 1: the rejection sampler of
        weights._gamma_above (envelope x^(alpha-1) on [x0, 1], e^-x beyond), vectorised."""
        n = alpha.numel()
        out = torch.empty(n, dtype=_F64, device=self.device)
        d = -torch.expm1(alpha * log_x0)
        mass_low = d / alpha
        mass_high = math.exp(-1.0)
        active = torch.arange(n, device=self.device)
        while active.numel():
            a, dd, ml = alpha[active], d[active], mass_low[active]
            k = active.numel()
            u = self.uniform(3, k)
            e = self.exponential(k)
            low = u[0] * (ml + mass_high) < ml
            x_low = torch.exp(torch.log1p(-(1.0 - u[1]) * dd) / a)
            x_high = 1.0 + e
            x = torch.where(low, x_low, x_high)
            accept = torch.where(low, u[2] < torch.exp(-x_low),
                                 torch.log(u[2]) < (a - 1.0) * torch.log(x_high))
            out[active[accept]] = x[accept]
            active = active[~accept]
        return out

    def zero_truncated_poisson(self, lam: torch.Tensor) -> torch.Tensor:
        """Zero-truncated Poisson(lam) per entry (int64), exact; lam <= 0 gives 1
        (as distributions.zero_truncated_poisson)."""
        out = torch.ones(lam.shape, dtype=_I64, device=self.device)
        ok = lam > 0.0
        small = (ok & (lam < _POISSON_INV_MAX)).nonzero(as_tuple=True)[0]
        large = (lam >= _POISSON_INV_MAX).nonzero(as_tuple=True)[0]
        if small.numel():
            out[small] = self._ztp_inversion(lam[small])
        if large.numel():
            out[large] = self._ztp_ptrs(lam[large])
        return out

    def _ztp_inversion(self, lam: torch.Tensor) -> torch.Tensor:
        """Inversion from k = 1 with P(1) = lam / expm1(lam) (lam < 10); a u beyond the
        float-representable cdf is redrawn."""
        result = torch.empty(lam.shape, dtype=_I64, device=self.device)
        todo = torch.arange(lam.numel(), device=self.device)
        while todo.numel():
            lt = lam[todo]
            p = lt / torch.expm1(lt)
            s = p.clone()
            k = torch.ones(lt.shape, dtype=_I64, device=self.device)
            u = self.uniform(lt.numel())
            act = (u > s).nonzero(as_tuple=True)[0]
            failed = []
            while act.numel():
                k[act] += 1
                p[act] = p[act] * lt[act] / k[act].to(_F64)
                s[act] = s[act] + p[act]
                bad = (p[act] < 1e-300) & (k[act].to(_F64) > lt[act])
                if bool(bad.any()):
                    failed.append(act[bad])
                    act = act[~bad]
                act = act[u[act] > s[act]]
            if failed:
                failed = torch.cat(failed)
                good = torch.ones(todo.shape, dtype=torch.bool, device=self.device)
                good[failed] = False
                result[todo[good]] = k[good]
                todo = todo[failed]
            else:
                result[todo] = k
                break
        return result

    def _ztp_ptrs(self, lam: torch.Tensor) -> torch.Tensor:
        """Poisson(lam) by PTRS (Hormann 1993), lam >= 10, redrawn until > 0."""
        result = torch.empty(lam.shape, dtype=_I64, device=self.device)
        slam = torch.sqrt(lam)
        loglam = torch.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        log_invalpha = torch.log(1.1239 + 1.1328 / (b - 3.4))
        vr = 0.9277 - 3.6224 / (b - 2.0)
        active = torch.arange(lam.numel(), device=self.device)
        while active.numel():
            n = active.numel()
            uv = self.uniform(2, n)
            u = uv[0] - 0.5
            v = uv[1]
            us = 0.5 - u.abs()
            aa, bb, ll = a[active], b[active], lam[active]
            kf = torch.floor((2.0 * aa / us + bb) * u + ll + 0.43)
            quick = (us >= 0.07) & (v <= vr[active])
            reject = (kf < 0.0) | ((us < 0.013) & (v > us))
            slow = (torch.log(v) + log_invalpha[active] - torch.log(aa / (us * us) + bb)
                    <= -ll + kf * loglam[active] - torch.lgamma(kf + 1.0))
            accept = (quick | (~reject & slow)) & (kf > 0.0)
            result[active[accept]] = kf[accept].to(_I64)
            active = active[~accept]
        return result

    def unit_counts(self, cum: torch.Tensor, counts: torch.Tensor):
        """Multinomial(counts[i], w_i / sum w_i) for every row i of the INCLUSIVE cumulative
        weights ``cum`` (R, C), as (rows, columns, amounts): the nonzero entries of the draw
        (int64; a (row, column) pair may appear more than once, the amounts then add up).

        Each unit is a categorical draw by inversion (first column with cum > u * total, as
        distributions.categorical_cumulative).  A row's n uniforms are drawn already sorted, as
        the normalised partial sums S_1 / S_(n+1), ..., S_n / S_(n+1) of n + 1 standard
        exponentials (the uniform order statistics), so its units come out column by column
        and each run of one column is one entry: the callers' scatter-adds (atomics on a GPU)
        get an entry per distinct column instead of one per unit.  A u that rounds onto the
        total is redrawn on its own (a fresh uniform: the units are exchangeable, so this is
        the rejection of an iid draw).  Rows are grouped by ceil(log2(count)) so that the
        padded (rows, max count) blocks waste at most half of their entries (see blocks).
        """
        rows_out, cols_out, amounts_out = [], [], []
        total = cum[:, -1]
        C = cum.shape[1]
        for rows, width in self.blocks(counts):
            block = cum if rows.numel() == cum.shape[0] else cum[rows]  # all rows: no copy
            if width == 1:
                t = self.uniform(rows.numel(), 1) * total[rows, None]
            else:
                n = counts[rows].to(_I64)  # gather takes int64 indices
                spacings = torch.empty((rows.numel(), width + 1), dtype=_F64,
                                       device=self.device).exponential_(generator=self.generator)
                partial = torch.cumsum(spacings, dim=1)
                del spacings
                scale = total[rows] / partial.gather(1, n[:, None])[:, 0]
                t = partial[:, :width] * scale[:, None]
                del partial
            cols = torch.searchsorted(block, t, right=True)
            del t
            if width == 1:
                r_u, c_u = rows, cols[:, 0]
            else:
                mask = torch.arange(width, device=self.device) < n[:, None]
                r_u = rows[:, None].expand(-1, width)[mask]
                c_u = cols[mask]
            del cols
            bad = (c_u >= C).nonzero(as_tuple=True)[0]
            while bad.numel():
                rb = r_u[bad]
                c_u[bad] = torch.searchsorted(cum[rb], (self.uniform(bad.numel()) * total[rb])
                                              [:, None], right=True)[:, 0]
                bad = bad[c_u[bad] >= C]
            # (row, column) keys ascend within the block (rows ascend, each row's columns do)
            keys, amounts = torch.unique_consecutive(r_u * C + c_u, return_counts=True)
            rows_out.append(torch.div(keys, C, rounding_mode="floor"))
            cols_out.append(keys - rows_out[-1] * C)
            amounts_out.append(amounts)
        if not rows_out:
            empty = torch.zeros(0, dtype=_I64, device=self.device)
            return empty, empty, empty
        return torch.cat(rows_out), torch.cat(cols_out), torch.cat(amounts_out)

    def blocks(self, sizes: torch.Tensor):
        """Yield (row indices, width) covering the rows with sizes > 0, width >= their sizes,
        rows grouped by ceil(log2(size)) (one group if no size exceeds _ONE_BLOCK) and each
        block at most max_elements entries."""
        rows = (sizes > 0).nonzero(as_tuple=True)[0]
        if rows.numel() == 0:
            return
        sz = sizes[rows]
        largest = int(sz.max())
        if largest <= _ONE_BLOCK:
            groups = [(rows, largest)]  # little padding, and fewer launches
        else:
            key = torch.ceil(torch.log2(sz.to(_F64))).to(_I64)
            groups = []
            for value in torch.unique(key).tolist():
                sel = key == value
                groups.append((rows[sel], int(sz[sel].max())))
        for g_rows, width in groups:
            step = max(1, self.max_elements // width)
            for start in range(0, g_rows.numel(), step):
                yield g_rows[start:start + step], width

    def crt(self, counts: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """CRT(counts, a) entrywise (any shape; a > 0):
        1(m >= 1) + sum_{i=1}^{m-1} Bernoulli(a / (a + i)), with one uniform per customer."""
        flat_m = counts.reshape(-1)
        flat_a = a.reshape(-1).to(_F64)
        out = (flat_m > 0).to(_I64)
        for rows, width in self.blocks(flat_m - 1):
            i = torch.arange(1, width + 1, dtype=_F64, device=self.device)
            ar = flat_a[rows, None]
            hit = (self.uniform(rows.numel(), width) * (ar + i) < ar) & (i < flat_m[rows, None])
            out[rows] += hit.sum(dim=1)
        return out.reshape(counts.shape)

    # ------------------------------------------------------------------ the convolutional layer
