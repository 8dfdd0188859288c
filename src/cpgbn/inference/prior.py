"""Draws of the globals from their prior: the start of the minibatch algorithms and of the
simulations (:mod:`cpgbn.simulate`)."""

from __future__ import annotations

import numpy as np

from ..backends.numba.conv import FLOOR
from ..backends.numba.gbn import PHI_FLOOR, TINY
from .state import GlobalParameters, Hyperparameters

__all__ = ["sample_globals"]


def _dirichlet_columns(rng, alpha: float, n_rows: int, n_cols: int) -> np.ndarray:
    g = np.maximum(rng.gamma(alpha, size=(n_rows, n_cols)), 1e-300)
    return g / g.sum(axis=0, keepdims=True)


def sample_globals(layers, vocab_size: int, filter_width: int, hyper: Hyperparameters,
                   rng: np.random.Generator) -> GlobalParameters:
    """D_k ~ Dir(eta^(1)), Phi^(t) columns ~ Dir(eta^(t)), r ~ Gam(gamma0/K_T, 1/c0)."""
    K1 = layers[0]
    flat = _dirichlet_columns(rng, hyper.eta[0], vocab_size * filter_width, K1)
    D = np.maximum(flat.reshape(vocab_size, filter_width, K1), FLOOR).astype(np.float32)
    phi = []
    for t in range(1, len(layers)):
        eta = hyper.eta[min(t, len(hyper.eta) - 1)]
        p = np.maximum(_dirichlet_columns(rng, eta, layers[t - 1], layers[t]), PHI_FLOOR)
        phi.append(p / p.sum(axis=0, keepdims=True))
    K_T = layers[-1]
    if hyper.sample_r:
        r = np.maximum(rng.gamma(hyper.gamma0 / K_T, 1.0 / hyper.c0, size=K_T), TINY)
    else:
        r = np.full(K_T, hyper.gamma0 / K_T)
    return GlobalParameters(D, phi, r)
