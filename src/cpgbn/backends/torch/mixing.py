"""The PyTorch backend's mixing diagnostic: how the latent counts m moved between sweeps
(:mod:`cpgbn.inference.mixing` reads it; the numba backend's ``assignment_changes`` is the
same sums from a kernel)."""

from __future__ import annotations

import torch

__all__ = ["assignment_changes"]

I64 = torch.int64


def assignment_changes(m: torch.Tensor, memory, max_elements: int):
    """How m moved since the last call (the numba backend's method of that name, as tensor
    code over chunks of ``max_elements`` entries): int64[6] sums as a numpy array, and the
    memory of this m on its device (int16 while its counts fit, else int64) for the next
    call."""
    P, K = m.shape
    if memory is None:
        memory = (torch.zeros((P, K), dtype=torch.int16, device=m.device),
                  torch.full((P,), -1, dtype=I64, device=m.device))
    previous, dominant = memory
    sums = torch.zeros(6, dtype=I64, device=m.device)
    step = max(1, max_elements // max(K, 1))
    for lo in range(0, P, step):
        hi = min(P, lo + step)
        now, before = m[lo:hi], previous[lo:hi].to(I64)
        sums[0] += (now - before).abs().sum()
        sums[1] += now.sum()
        sums[2] += before.sum()
        top, best = now.max(dim=1).values, now.argmax(dim=1)  # argmax: the first maximum
        best = torch.where(top > 0, best, -1)
        both = (best >= 0) & (dominant[lo:hi] >= 0)
        sums[3] += (both & (best != dominant[lo:hi])).sum()
        sums[4] += both.sum()
        sums[5] = torch.maximum(sums[5], top.max())
        previous[lo:hi] = now.to(previous.dtype)
        dominant[lo:hi] = best
    sums = sums.cpu().numpy()
    if sums[5] > torch.iinfo(previous.dtype).max:  # the copy was truncated: keep it wider
        previous = m.to(I64, copy=True)
    return sums, (previous, dominant)
