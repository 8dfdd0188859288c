"""The PyTorch backend's mixing diagnostic: how the latent counts m moved between sweeps
(:mod:`cpgbn.inference.mixing` reads it; the numba backend's ``assignment_changes`` is the
same sums from a kernel)."""

from __future__ import annotations

import torch

from .conv import position_rows

__all__ = ["assignment_changes"]

I64 = torch.int64


def assignment_changes(m, memory, max_elements: int):
    """How m moved since the last call (the numba backend's method of that name, as tensor
    code over chunks of ``max_elements`` entries): int64[6] sums as a numpy array, and the
    memory for the next call -- this m itself, held by reference (a sweep writes a new field,
    it never changes one), as the numba backend keeps its store."""
    P, K = m.shape
    sums = torch.zeros(6, dtype=I64, device=m.device)
    step = max(1, max_elements // max(K, 1))
    for lo in range(0, P, step):
        hi = min(P, lo + step)
        now = position_rows(m, lo, hi).to(I64)
        before = (torch.zeros_like(now) if memory is None
                  else position_rows(memory, lo, hi).to(I64))
        sums[0] += (now - before).abs().sum()
        sums[1] += now.sum()
        sums[2] += before.sum()
        best, dominant = _dominant(now), _dominant(before)
        both = (best >= 0) & (dominant >= 0)
        sums[3] += (both & (best != dominant)).sum()
        sums[4] += both.sum()
        if hi > lo:
            sums[5] = torch.maximum(sums[5], now.max())
    return sums.cpu().numpy(), m


def _dominant(counts: torch.Tensor) -> torch.Tensor:
    """Each position's kernel of largest count (the first of equal ones), -1 without counts."""
    top, best = counts.max(dim=1).values, counts.argmax(dim=1)  # argmax: the first maximum
    return torch.where(top > 0, best, -1)
