"""TLASGR-MCMC on a torch device: the twin of :func:`cpgbn.inference.tlasgr.tlasgr_step`.

The arithmetic is the same function, :func:`~cpgbn.inference.tlasgr.simplex_langevin_step`
(written with operators numpy and torch share), run in float64 on the parameter's device; the
schedule and the state (M_k and i, small host arrays) are those of :mod:`cpgbn.inference.tlasgr`,
so a run can switch between the two and checkpoints are the same.  The standard normals come
from a ``torch.Generator`` on the device (or are given).
"""

from __future__ import annotations

import torch

from ...errors import CPGBNInputError
from ...inference.tlasgr import (FLOOR, TLASGRSchedule, TLASGRState, check_step_inputs,
                                 next_precision, simplex_langevin_step)

__all__ = ["tlasgr_step_torch"]


def tlasgr_step_torch(phi: torch.Tensor, counts: torch.Tensor, state: TLASGRState, *,
                      rho: float, eta: float, generator: torch.Generator | None = None,
                      normal: torch.Tensor | None = None,
                      schedule: TLASGRSchedule = TLASGRSchedule(),
                      floor: float = FLOOR) -> tuple[torch.Tensor, TLASGRState]:
    """One TLASGR-MCMC update of a column-stochastic tensor (see ``tlasgr_step``).

    ``phi`` (..., K) on any device, ``counts`` the same shape; the normals are drawn from
    ``generator`` (torch's default generator when both it and ``normal`` are None) or given
    as ``normal`` of shape (n, K).  Returns a new tensor of ``phi``'s shape, dtype and device,
    and the new state.  Unlike the numpy version it does not check that ``phi`` lies on the
    simplex (that would synchronise with the device).
    """
    check_step_inputs(tuple(phi.shape), tuple(counts.shape), len(state.precision), rho, eta)
    n_columns = phi.shape[-1]
    columns = phi.reshape(-1, n_columns).to(torch.float64)
    column_counts = torch.as_tensor(counts, device=phi.device).reshape(-1, n_columns) \
        .to(torch.float64)
    if normal is None:
        normal = torch.randn(columns.shape, dtype=torch.float64, device=phi.device,
                             generator=generator)
    elif tuple(normal.shape) != tuple(columns.shape):
        raise CPGBNInputError(f"normal must have shape {tuple(columns.shape)}, got "
                              f"{tuple(normal.shape)}")
    precision = next_precision(state, column_counts.sum(0).cpu().numpy(), rho, schedule)
    i = state.n_updates + 1
    effective = torch.as_tensor(precision, device=phi.device).clamp(min=eta * columns.shape[0])
    new = simplex_langevin_step(columns, column_counts, effective, schedule.step_size(i),
                                rho=float(rho), eta=float(eta),
                                normal=normal.to(torch.float64), floor=floor)
    return new.reshape(phi.shape).to(phi.dtype), TLASGRState(precision, i)
