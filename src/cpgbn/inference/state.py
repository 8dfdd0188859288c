"""The state of the CPGBN Gibbs sampler: one documented record, no behaviour.

The arrays of a state belong to one backend: numpy arrays for the numba backend, tensors on a
device for the PyTorch one (``state_on`` and ``write_back`` convert).  The dtypes below are the
host's; a backend may keep counts in a wider integer type.

Layers are numbered as in the paper: layer 1 is the convolutional layer (K_1 kernels), layers
2..T form the gamma belief stack.  Lists indexed by ``i`` hold layer ``t = i + 1`` for ``theta``
and ``m``-like quantities, and layer ``t = i + 2`` for ``phi`` and ``c``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.numba.conv import FLOOR
from ..backends.numba.position_store import PositionStore


@dataclass
class Hyperparameters:
    """Fixed hyperparameters of the model (paper defaults)."""

    eta: tuple[float, ...]
    """Dirichlet concentration per layer: eta[0] for the kernels D (eta^(1)), eta[t-1] for Phi^(t)."""
    e0: float = 0.1
    """Shape of the gamma prior on every c^(t)_j."""
    f0: float = 0.1
    """Rate of the gamma prior on every c^(t)_j."""
    gamma0: float = 1.0
    """r_k ~ Gam(gamma0 / K_T, 1 / c0) (paper: Gam(1/K_T, 1))."""
    c0: float = 1.0
    sample_r: bool = True
    """Draw r from its conditional (True) or keep it at its initial value gamma0 / K_T (the authors' code)."""
    pooling_concentration: float | None = None
    """beta > 0, or None.  None: the paper's tied pooling prior (eq. 3),
    w_jks ~ Gam(a_jk / S_j, 1/c^(2)_j), whose positional split
    (w_jk1..w_jkS_j) / theta^(1)_jk is Dir(a_jk / S_j, ...): its concentration is tied to the
    shape a_jk = (Phi^(2) theta^(2)_j)_k.  beta: the split gets a concentration of its own,
    theta^(1)_jk ~ Gam(a_jk, 1/c^(2)_j), (pi_jk1..pi_jkS_j) ~ Dir(beta, ..., beta),
    w_jks = theta^(1)_jk pi_jks -- a pseudo-count per position, in the units of the counts
    m_jks (the conditionals are in :mod:`cpgbn.inference.gibbs`).  theta^(1) has the same
    prior Gam(a_jk, 1/c^(2)_j) either way."""


@dataclass
class GlobalParameters:
    """Parameters shared by all documents: what a fitted model keeps.

    D : float32 (V, F, K_1) -- convolutional kernels d_{k,v,f}; D[:, :, k] sums to 1 (paper D_k).
    phi : list of float64 (K_{t-1}, K_t) for t = 2..T -- Phi^(t), columns on the simplex.
    r : float64 (K_T,) -- top-layer gamma shapes.
    """

    D: np.ndarray
    phi: list[np.ndarray]
    r: np.ndarray

    @property
    def layers(self) -> tuple[int, ...]:
        return (self.D.shape[2],) + tuple(p.shape[1] for p in self.phi)

    def copy(self) -> "GlobalParameters":
        return GlobalParameters(self.D.copy(), [p.copy() for p in self.phi], self.r.copy())


@dataclass
class GibbsState:
    """Everything the sampler carries from one sweep to the next.

    globals : GlobalParameters
    w : float32 (P, K_1) -- per-position weights w_{j,k,s}, ragged over documents (P = sum_j S_j).
    m : int32 (P, K_1) -- latent counts m_{j,k,s} from the last augmentation (summed over v, f).
        The numba backend keeps w and m as :class:`~cpgbn.backends.numba.position_store.
        PositionStore` objects (their entries off the floor, and the non-zero counts; ``toarray``
        or :func:`~cpgbn.backends.numba.position_store.as_dense` gives the (P, K_1) array) and
        takes dense arrays too; the PyTorch backend keeps dense tensors.
    theta : list, theta[t-1] float64 (N, K_t) -- theta^(t)_j; theta[0] = sum_s w_{j,k,s} (pooling;
        with a ``pooling_concentration`` theta^(1) is drawn itself and w = theta^(1) pi, floored,
        so sum_s w_{j,k,s} differs from it by float32 rounding and at most S_j FLOOR).
    c : list, c[t-1] float64 (N,) -- c^(t+1)_j, the gamma rate of layer t's prior, t = 1..T.
    A : int32 (N, K_1) -- m_{j,k,.,.}, the counts of document j on kernel k.
    loglik : float64 (N,) -- per-document log-likelihood at the last augmentation.
    sweep : int -- completed sweeps.
    """

    globals: GlobalParameters
    w: np.ndarray
    m: np.ndarray
    theta: list[np.ndarray]
    c: list[np.ndarray]
    A: np.ndarray
    loglik: np.ndarray
    sweep: int = 0

    @property
    def n_layers(self) -> int:
        return len(self.theta)


#: The host dtype of every array field of a GibbsState (globals: D, phi, r); counts are
#: float64 instead for a backend whose ``count_dtype`` is a float type.
FIELD_DTYPES = {"D": np.float32, "phi": np.float64, "r": np.float64, "w": np.float32,
                "m": np.int32, "theta": np.float64, "c": np.float64, "A": np.int32,
                "loglik": np.float64}


def state_on(backend, state: GibbsState) -> GibbsState:
    """``state`` with its arrays on ``backend`` (the same object when the backend works on
    numpy arrays in place, as the numba backend does)."""
    if backend.works_on_host or backend.holds(state.m):
        return state
    put = backend.to_backend
    g = state.globals
    return GibbsState(
        globals=GlobalParameters(put(g.D, np.float32), [put(p, np.float64) for p in g.phi],
                                 put(g.r, np.float64)),
        w=backend.field_to_backend(state.w, np.float32, FLOOR),
        m=backend.field_to_backend(state.m, backend.count_dtype, 0),
        theta=[put(t, np.float64) for t in state.theta], c=[put(c, np.float64) for c in state.c],
        A=put(state.A, backend.count_dtype), loglik=put(state.loglik, np.float64), sweep=int(state.sweep))


def _put(holder, name: str, value) -> None:
    old = getattr(holder, name)
    if value is None or isinstance(value, PositionStore):   # a new object: kept as it is
        setattr(holder, name, value)
    elif (isinstance(old, np.ndarray) and old.shape == value.shape and old.dtype == value.dtype
            and old.flags.writeable):
        np.copyto(old, value)
    else:
        setattr(holder, name, value.copy())


def _put_list(items: list, values) -> None:
    for i, value in enumerate(values):
        old = items[i]
        if (isinstance(old, np.ndarray) and old.shape == value.shape
                and old.dtype == value.dtype and old.flags.writeable):
            np.copyto(old, value)
        else:
            items[i] = value.copy()


def _host_field(backend, field, dtype):
    """A position field of a backend's state on the host: a new PositionStore (a sparse
    field), a copy of a dense array, or None (a w the chain did not keep)."""
    if field is None:
        return None
    host = backend.to_numpy(field, dtype)
    return host if isinstance(host, PositionStore) else host.copy()


def globals_to_numpy(backend, g: GlobalParameters) -> GlobalParameters:
    """Host copies of a backend's globals (D, Phi, r), without the local state: what a
    pilot chain hands on (:mod:`cpgbn.inference.pilot`)."""
    get = backend.to_numpy
    return GlobalParameters(get(g.D, np.float32).copy(), [get(p, np.float64).copy() for p in g.phi],
                            get(g.r, np.float64).copy())


def write_back(backend, source: GibbsState, out: GibbsState | None = None, *,
               with_globals: bool = True) -> GibbsState:
    """The numpy state of ``source`` (a state on ``backend``): a new GibbsState, or written into
    ``out`` (in place where shapes and dtypes allow, since callers may hold references to its
    arrays; the globals only if ``with_globals``, i.e. when they are learned)."""
    if out is source or (backend.works_on_host and out is None):
        return source
    get = backend.to_numpy
    counts = np.float64 if np.dtype(backend.count_dtype).kind == "f" else np.int32
    g = source.globals
    if out is None:
        return GibbsState(globals=globals_to_numpy(backend, g),
                          w=_host_field(backend, source.w, np.float32),
                          m=_host_field(backend, source.m, counts),
                          theta=[get(t, np.float64).copy() for t in source.theta],
                          c=[get(c, np.float64).copy() for c in source.c],
                          A=get(source.A, counts).copy(),
                          loglik=get(source.loglik, np.float64).copy(), sweep=source.sweep)
    if with_globals:
        _put(out.globals, "D", get(g.D, np.float32))
        _put(out.globals, "r", get(g.r, np.float64))
        _put_list(out.globals.phi, [get(p, np.float64) for p in g.phi])
    _put(out, "w", _host_field(backend, source.w, np.float32))
    _put(out, "loglik", get(source.loglik, np.float64))
    _put(out, "m", _host_field(backend, source.m, counts))
    _put(out, "A", get(source.A, counts))
    _put_list(out.theta, [get(t, np.float64) for t in source.theta])
    _put_list(out.c, [get(c, np.float64) for c in source.c])
    out.sweep = source.sweep
    return out
