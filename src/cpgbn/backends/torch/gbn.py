"""The gamma belief stack's draws of the PyTorch Gibbs sweep above the first layer: Phi^(t) |
counts and the split of a layer's tables over the layer above (the counterpart of
:mod:`cpgbn.backends.numba.gbn`).  Pure functions over tensors and a
:class:`~cpgbn.backends.torch.random.TorchRandom` already keyed to the step (and block)."""

from __future__ import annotations

import torch

from ..numba.gbn import PHI_FLOOR
from .random import TorchRandom

__all__ = ["dirichlet_columns", "split_tables"]

F64 = torch.float64
I64 = torch.int64


def dirichlet_columns(random: TorchRandom, counts: torch.Tensor, eta: float) -> torch.Tensor:
    """Phi[:, k'] ~ Dir(eta + counts[:, k']), floored at PHI_FLOOR and renormalised."""
    lg = random.log_gamma(counts.to(F64) + eta)
    col = torch.exp(lg - lg.max(dim=0, keepdim=True).values)
    col = col / col.sum(dim=0, keepdim=True)
    col = col.clamp_min(PHI_FLOOR)
    return col / col.sum(dim=0, keepdim=True)


def split_tables(random: TorchRandom, tables: torch.Tensor, phi: torch.Tensor,
                 theta_above: torch.Tensor):
    """Split l_jk over k' in proportion to Phi[k, k'] theta_above[j, k'] (numba:
    gbn.split_tables), in chunks of ``random.max_elements`` weights; returns
    (m_next (N, K_{t+1}), phi_counts (K_t, K_{t+1}))."""
    n_docs, n_below = tables.shape
    n_above = phi.shape[1]
    m_next = torch.zeros(n_docs * n_above, dtype=I64, device=random.device)
    phi_counts = torch.zeros(n_below * n_above, dtype=I64, device=random.device)
    j_all, k_all = (tables > 0).nonzero(as_tuple=True)
    step = max(1, random.max_elements // n_above)
    for lo in range(0, j_all.numel(), step):
        j, k = j_all[lo:lo + step], k_all[lo:lo + step]
        cum = torch.cumsum(phi[k] * theta_above[j], dim=1)
        r_u, c_u, amounts = random.unit_counts(cum, tables[j, k])
        m_next.index_add_(0, j[r_u] * n_above + c_u, amounts)
        phi_counts.index_add_(0, k[r_u] * n_above + c_u, amounts)
    return m_next.reshape(n_docs, n_above), phi_counts.reshape(n_below, n_above)
