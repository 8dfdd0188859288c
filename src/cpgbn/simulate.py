"""Draw parameters and data from the CPGBN generative model (paper eq. 2).

Used by the sampler's correctness tests (Geweke joint-distribution test, planted recovery)
and available to users who want synthetic corpora with known kernels.  Plain NumPy: clarity
matters more than speed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .inference.prior import sample_globals  # noqa: F401  (part of this module's API)
from .inference.state import GlobalParameters, Hyperparameters
from .layers.cells import ConvData, from_cells
from .backends.numba.conv import FLOOR
from .backends.numba.gbn import TINY


@dataclass
class LocalParameters:
    """Per-document parameters: w (P, K_1), theta[t-1] (N, K_t), c[t-1] = c^(t+1) (N,)."""

    w: np.ndarray
    theta: list[np.ndarray]
    c: list[np.ndarray]


def sample_locals(g: GlobalParameters, doc_positions: np.ndarray, hyper: Hyperparameters,
                  rng: np.random.Generator) -> LocalParameters:
    """c^(t+1)_j ~ Gam(e0, 1/f0); theta^(T) ~ Gam(r, 1/c^(T+1)); ... ; w_jks ~ Gam(a_jk/S_j, 1/c^(2)_j).

    With ``hyper.pooling_concentration`` beta: theta^(1)_jk ~ Gam(a_jk, 1/c^(2)_j),
    pi_jk ~ Dir(beta 1_{S_j}) and w_jks = theta^(1)_jk pi_jks (floored; theta^(1) as drawn).
    """
    n_docs = len(doc_positions) - 1
    layers = g.layers
    T = len(layers)
    c = [rng.gamma(hyper.e0, 1.0 / hyper.f0, size=n_docs) for _ in range(T)]
    theta = [None] * T
    shape = np.broadcast_to(g.r, (n_docs, layers[-1]))
    for t in range(T, 1, -1):
        theta[t - 1] = np.maximum(rng.gamma(shape) / c[t - 1][:, None], TINY)
        shape = theta[t - 1] @ g.phi[t - 2].T
    S = np.diff(doc_positions)
    doc_of_pos = np.repeat(np.arange(n_docs), S)
    if hyper.pooling_concentration is not None:
        w, theta[0] = _split_weights(shape, c[0], hyper.pooling_concentration, doc_of_pos, rng)
        return LocalParameters(w, theta, c)
    w_shape = shape[doc_of_pos] / S[doc_of_pos, None]
    w = np.maximum(rng.gamma(w_shape) / c[0][doc_of_pos, None], FLOOR).astype(np.float32)
    theta[0] = np.zeros((n_docs, layers[0]))
    np.add.at(theta[0], doc_of_pos, w.astype(np.float64))
    return LocalParameters(w, theta, c)


def _split_weights(shape, c, beta: float, doc_of_pos, rng):
    """(w, theta^(1)) of the pooling prior with a free positional concentration beta: the
    Dirichlet of each (j, k) over its positions as log-gamma variates (ln G(b + 1) + ln(U) / b,
    no underflow for tiny b), normalised by log-sum-exp."""
    n_docs, K = shape.shape
    log_theta = np.log(np.maximum(rng.gamma(shape), 1e-300)) - np.log(c)[:, None]
    # (a gamma that underflows to 0 has every w at the floor, whatever its exact value)
    n_pos = len(doc_of_pos)
    log_g = (np.log(rng.gamma(beta + 1.0, size=(n_pos, K)))
             + np.log1p(-rng.uniform(size=(n_pos, K))) / beta)
    top = np.full((n_docs, K), -np.inf)
    np.maximum.at(top, doc_of_pos, log_g)
    total = np.zeros((n_docs, K))
    np.add.at(total, doc_of_pos, np.exp(log_g - top[doc_of_pos]))
    log_w = log_g + (log_theta - top - np.log(total))[doc_of_pos]
    w = np.maximum(np.exp(log_w), FLOOR).astype(np.float32)
    return w, np.maximum(np.exp(log_theta), TINY)


def sample_counts(g: GlobalParameters, w: np.ndarray, doc_length: np.ndarray, filter_width: int,
                  rng: np.random.Generator, *, binary: bool = False):
    """Latent counts and observed cells given w and D.

    m_jks ~ Pois(w_jks) units per position and kernel, each placed at (v, f) ~ Cat(D_k(:)) and
    landing in cell (v, l = s + f).  Returns ``(m, data)``: ``m`` int32 (P, K) and the cells as
    :class:`ConvData` (observed counts, or x = 1(count > 0) when ``binary``).
    """
    V, F, K = g.D.shape
    doc_length = np.asarray(doc_length, dtype=np.int64)
    S = doc_length - F + 1
    positions = np.concatenate([[0], np.cumsum(S)])
    m64 = rng.poisson(w.astype(np.float64))
    if m64.max(initial=0) > np.iinfo(np.int32).max:
        raise ValueError("simulated counts overflow int32: the prior draws are too extreme "
                         "(use larger e0/f0)")
    m = m64.astype(np.int32)
    flat_D = g.D.astype(np.float64).reshape(V * F, K)
    flat_D /= flat_D.sum(axis=0, keepdims=True)
    doc_cells, words, cols, counts = [0], [], [], []
    for j in range(len(doc_length)):
        cell_counts: dict[tuple[int, int], int] = {}
        for s in range(S[j]):
            for k in np.flatnonzero(m[positions[j] + s]):
                units = rng.multinomial(m[positions[j] + s, k], flat_D[:, k])
                for idx in np.flatnonzero(units):
                    v, f = divmod(int(idx), F)
                    key = (s + f, v)
                    cell_counts[key] = cell_counts.get(key, 0) + int(units[idx])
        for (col, v), n in sorted(cell_counts.items()):
            words.append(v)
            cols.append(col)
            counts.append(n)
        doc_cells.append(len(words))
    data = from_cells(np.array(doc_cells), np.array(words, dtype=np.int32),
                      np.array(cols, dtype=np.int32), doc_length, filter_width,
                      cell_count=None if binary else np.array(counts, dtype=np.int32))
    return m, data


def sample_corpus(layers, vocab_size: int, filter_width: int, doc_length, hyper: Hyperparameters,
                  seed: int = 0, *, binary: bool = False, globals_: GlobalParameters | None = None):
    """Draw (globals, locals, m, data) from the model for documents of the given lengths."""
    rng = np.random.default_rng(seed)
    doc_length = np.asarray(doc_length, dtype=np.int64)
    g = globals_ if globals_ is not None else sample_globals(layers, vocab_size, filter_width,
                                                            hyper, rng)
    S = doc_length - filter_width + 1
    positions = np.concatenate([[0], np.cumsum(S)])
    local = sample_locals(g, positions, hyper, rng)
    m, data = sample_counts(g, local.w, doc_length, filter_width, rng, binary=binary)
    return g, local, m, data


__all__ = ["ConvData", "LocalParameters", "sample_globals", "sample_locals", "sample_counts",
           "sample_corpus"]
