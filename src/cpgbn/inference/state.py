"""The state of the CPGBN Gibbs sampler: one documented record, no behaviour.

Layers are numbered as in the paper: layer 1 is the convolutional layer (K_1 kernels), layers
2..T form the gamma belief stack.  Lists indexed by ``i`` hold layer ``t = i + 1`` for ``theta``
and ``m``-like quantities, and layer ``t = i + 2`` for ``phi`` and ``c``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
    theta : list, theta[t-1] float64 (N, K_t) -- theta^(t)_j; theta[0] = sum_s w_{j,k,s} (pooling).
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
    extra: dict = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(self.theta)

    def first_layer_shape(self) -> np.ndarray:
        """a_{jk}: the gamma shape of theta^(1)_j, (Phi^(2) theta^(2)_j)_k, or r_k when T = 1."""
        if self.n_layers == 1:
            return np.ascontiguousarray(np.broadcast_to(self.globals.r, self.theta[0].shape))
        return self.theta[1] @ self.globals.phi[0].T
