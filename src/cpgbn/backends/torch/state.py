"""The Gibbs state on a torch device, and its conversion to and from :class:`GibbsState`.

:class:`TorchState` holds the fields of :class:`~cpgbn.inference.state.GibbsState` as tensors,
in the dtypes of :mod:`cpgbn.backends.torch.sampler` (w and D float32; theta, c, Phi, r float64;
counts int64 on the device, int32 on the host).  :func:`to_device` uploads a numpy state and
:func:`to_host` writes one back, in place where it can, because the numba sampler mutates its
state and callers may hold references to its arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ...errors import CPGBNInputError
from ...inference.state import GibbsState, GlobalParameters

__all__ = ["TorchState", "resolve_device", "to_device", "to_host"]

F64 = torch.float64
F32 = torch.float32
I64 = torch.int64


def resolve_device(device) -> torch.device:
    """``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device``; CPGBNInputError if CUDA is
    requested but absent."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CPGBNInputError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, "
                              f"got {device!r}") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CPGBNInputError(
                f"device={device!r} was requested but CUDA is not available to torch "
                f"{torch.__version__} (no GPU visible, or a CPU-only build); use device='cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise CPGBNInputError(f"device={device!r}: only {torch.cuda.device_count()} CUDA "
                                  "device(s) are visible")
    elif dev.type != "cpu":
        raise CPGBNInputError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return dev


@dataclass
class TorchState:
    """The sampler state on the device; the fields of :class:`GibbsState` as tensors.

    D float32 (V, F, K_1); phi list of float64 (K_{t-1}, K_t); r float64 (K_T,);
    w float32 (P, K_1); m int64 (P, K_1); theta list of float64 (N, K_t); c list of float64 (N,);
    A int64 (N, K_1); loglik float64 (N,); sweep int.
    """

    D: torch.Tensor
    phi: list
    r: torch.Tensor
    w: torch.Tensor
    m: torch.Tensor
    theta: list
    c: list
    A: torch.Tensor
    loglik: torch.Tensor
    sweep: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(self.theta)

    def first_layer_shape(self) -> torch.Tensor:
        """a_jk: (Phi^(2) theta^(2)_j)_k, or r_k when T = 1 (as GibbsState.first_layer_shape)."""
        if self.n_layers == 1:
            return self.r.unsqueeze(0).expand(self.theta[0].shape)
        return self.theta[1] @ self.phi[0].T


def tensor(array, dtype, device: torch.device) -> torch.Tensor:
    """A device copy of a numpy array (or sequence) in ``dtype``."""
    return torch.tensor(np.asarray(array), dtype=dtype, device=device)


def to_device(state: GibbsState, device: torch.device) -> TorchState:
    """A device copy of a numpy GibbsState."""
    g = state.globals
    return TorchState(
        D=tensor(g.D, F32, device), phi=[tensor(p, F64, device) for p in g.phi],
        r=tensor(g.r, F64, device), w=tensor(state.w, F32, device),
        m=tensor(state.m, I64, device), theta=[tensor(t, F64, device) for t in state.theta],
        c=[tensor(c, F64, device) for c in state.c], A=tensor(state.A, I64, device),
        loglik=tensor(state.loglik, F64, device), sweep=int(state.sweep))


def _host(x: torch.Tensor, dtype) -> np.ndarray:
    return x.detach().to("cpu").numpy().astype(dtype, copy=False)


def _put(holder, name: str, value: np.ndarray) -> None:
    old = getattr(holder, name)
    if (isinstance(old, np.ndarray) and old.shape == value.shape
            and old.dtype == value.dtype and old.flags.writeable):
        np.copyto(old, value)
    else:
        setattr(holder, name, value.copy())


def _new_host_state(ts: TorchState) -> GibbsState:
    g = GlobalParameters(_host(ts.D, np.float32).copy(),
                         [_host(p, np.float64).copy() for p in ts.phi],
                         _host(ts.r, np.float64).copy())
    return GibbsState(globals=g, w=_host(ts.w, np.float32).copy(),
                      m=_host(ts.m, np.int32).copy(),
                      theta=[_host(t, np.float64).copy() for t in ts.theta],
                      c=[_host(c, np.float64).copy() for c in ts.c],
                      A=_host(ts.A, np.int32).copy(),
                      loglik=_host(ts.loglik, np.float64).copy(), sweep=ts.sweep)


def to_host(ts: TorchState, out: GibbsState | None = None, *,
            with_globals: bool = True) -> GibbsState:
    """The state as numpy arrays: a new GibbsState, or written into ``out`` (in place where
    shapes and dtypes allow; the globals only if ``with_globals``, i.e. when they are learned)."""
    if out is None:
        return _new_host_state(ts)
    g = out.globals
    if with_globals:
        _put(g, "D", _host(ts.D, np.float32))
        _put(g, "r", _host(ts.r, np.float64))
        for i, p in enumerate(ts.phi):
            value = _host(p, np.float64)
            if g.phi[i].shape == value.shape and g.phi[i].flags.writeable:
                np.copyto(g.phi[i], value)
            else:
                g.phi[i] = value.copy()
    _put(out, "w", _host(ts.w, np.float32))
    _put(out, "m", _host(ts.m, np.int32))
    _put(out, "A", _host(ts.A, np.int32))
    _put(out, "loglik", _host(ts.loglik, np.float64))
    for lst, src in ((out.theta, ts.theta), (out.c, ts.c)):
        for i, t in enumerate(src):
            value = _host(t, np.float64)
            if lst[i].shape == value.shape and lst[i].dtype == value.dtype:
                np.copyto(lst[i], value)
            else:
                lst[i] = value.copy()
    out.sweep = ts.sweep
    return out
