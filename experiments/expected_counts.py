"""Study only: the authors' fractional expected counts in place of the sampled token split.

The authors' GPU code does not draw the multinomial split of a token's pseudo-count over its
candidates (f, k); it adds the expected counts, count * w_{j,k,s} d_{k,v,f} / lambda, as
fractions (notes, section 3, step 1).  That is not a Gibbs step, and the CRT of the upward pass
is not defined for a fractional count, so the library does not offer it.  This module patches
the PyTorch sampler, for this process only, to test whether that approximation explains the
paper's MR figure (``prior_study.py --expected-counts --device cuda``; the PyTorch sampler
on 2 CPU cores takes about 8 s per sweep on 3000 MR documents once w has left its start, too
slow for the study).

What the patch changes:

* m (per position), A (per document) and n (per kernel entry) are float64 sums of fractions;
  shares of a unit below ``DROP`` are left out (a w draw with shape alpha + 1e-9 instead of
  alpha is the same draw in all but name, and dropping them keeps the w step sparse);
* the first-layer tables are CRT(round(m_jks), a_jk / S_j): the nearest whole count;
* everything after the tables (the split over layer 2, Phi, r, the downward pass) is unchanged.

With ``token_count="bernoulli-poisson"`` the number of units of a token is still drawn; the
authors' code and this study use an integer pseudo-count.
"""
from __future__ import annotations

DROP = 1e-6


def use_expected_counts():
    """Patch TorchGibbsSampler's token split and first-layer tables (see the module docstring)."""
    import torch

    from cpgbn.inference import torch_sweep

    sampler = torch_sweep.TorchGibbsSampler
    position_tables = sampler._position_tables

    def split_units(self, cum, units):
        weights = torch.diff(cum, dim=1, prepend=torch.zeros_like(cum[:, :1]))
        share = units.to(torch.float64)[:, None] * weights / cum[:, -1:]
        rows, cols = (share > DROP).nonzero(as_tuple=True)
        return rows, cols, share[rows, cols]

    def tables(self, m, shape):
        return position_tables(self, torch.round(m).to(torch.int64), shape)

    sampler.count_dtype = torch.float64
    sampler._split_units = split_units
    sampler._position_tables = tables
