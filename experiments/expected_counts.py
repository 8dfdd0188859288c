"""Study only: the authors' fractional expected counts in place of the sampled token split.

The authors' GPU code does not draw the multinomial split of a token's pseudo-count over its
candidates (f, k); it adds the expected counts, count * w_{j,k,s} d_{k,v,f} / lambda, as
fractions (notes, section 3, step 1).  That is not a Gibbs step, and the CRT of the upward pass
is not defined for a fractional count, so the library does not offer it.  This module patches
the PyTorch sampler, for this process only, to test whether that approximation explains the
paper's MR figure (``prior_study.py --expected-counts``, with ``--device cpu``).

What the patch changes:

* m (per position), A (per document) and n (per kernel entry) are float64 sums of fractions;
  shares of a unit below ``DROP`` are left out (a w draw with shape alpha + 1e-9 instead of
  alpha is the same draw in all but name, and dropping them keeps the w step sparse);
* the first-layer tables are CRT(round(m_jks), a_jk / S_j): the nearest whole count;
* everything after the tables (the split over layer 2, Phi, r, the downward pass) is unchanged.

Only ``token_count`` given as an integer (the pseudo-count) is supported.
"""
from __future__ import annotations

import math

DROP = 1e-6


def use_expected_counts():
    """Patch TorchGibbsSampler's augmentation and first-layer tables (see the module docstring)."""
    import torch

    from cpgbn.errors import CPGBNInputError
    from cpgbn.inference import torch_sweep
    from cpgbn.layers.cells import FIXED_COUNT

    f64, i64 = torch.float64, torch.int64
    sampler = torch_sweep.TorchGibbsSampler
    position_tables = sampler._position_tables

    def augment(self, ts, with_counts):
        data = self.data
        if data.mode != FIXED_COUNT:
            raise CPGBNInputError("--expected-counts needs an integer token_count")
        V, F, K = ts.D.shape
        dev = self.device
        P, N = data.n_positions, data.n_docs
        m = torch.zeros(P * K, dtype=f64, device=dev)
        A = torch.zeros(N * K, dtype=f64, device=dev)
        n = torch.zeros(V * F * K, dtype=f64, device=dev) if with_counts else None
        loglik = -ts.theta[0].sum(dim=1)
        count = float(data.fixed_count)
        f_range = torch.arange(F, device=dev)
        step = max(1, self.max_elements // (F * K))
        for lo in range(0, data.n_cells, step):
            hi = min(data.n_cells, lo + step)
            doc = self._cell_doc[lo:hi]
            word = self._cell_word[lo:hi]
            col = self._cell_col[lo:hi]
            s = col[:, None] - f_range[None, :]
            valid = (s >= 0) & (s < self._S[doc][:, None])
            rows = torch.where(valid, self._p0[doc][:, None] + s, 0)
            weights = ts.w[rows].to(f64) * ts.D[word].to(f64)
            weights = torch.where(valid[:, :, None], weights, 0.0).reshape(hi - lo, F * K)
            lam = weights.sum(dim=1)
            loglik.index_add_(0, doc, count * torch.log(lam) - math.lgamma(count + 1.0))
            share = count * weights / lam[:, None]
            r_u, c_u = (share > DROP).nonzero(as_tuple=True)
            value = share[r_u, c_u]
            f_u = torch.div(c_u, K, rounding_mode="floor")
            k_u = c_u - f_u * K
            d_u = doc[r_u]
            m.index_add_(0, (self._p0[d_u] + col[r_u] - f_u) * K + k_u, value)
            A.index_add_(0, d_u * K + k_u, value)
            if n is not None:
                n.index_add_(0, word[r_u] * (F * K) + c_u, value)
        ts.m = m.reshape(P, K)
        ts.A = A.reshape(N, K)
        ts.loglik = loglik
        return None if n is None else n.reshape(V, F, K)

    def tables(self, m, shape):
        return position_tables(self, torch.round(m).to(i64), shape)

    sampler._augment = augment
    sampler._position_tables = tables
