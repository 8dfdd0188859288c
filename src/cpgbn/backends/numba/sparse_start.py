"""The sparse start of a chain whose kernels are known: each position live on a few kernels.

A chain that starts from w = 1 at every (position, kernel) spreads every token's units over
all K_1 x F candidates in its first augmentation, and its first sweeps hold and walk the dense
P x K_1 field (25-35 times a steady sweep; issue 57).  When the kernels D are informed (a
fitted model's, or a short pilot chain's) the start can be sparse instead: position s of
document j is live on the ``n_live`` kernels k of largest window score

    score_jsk = sum_f D[v_j(s + f), f, k]

(the kernels the words of its window favour, placement by placement), with w_jsk = 1 there
and the floor elsewhere.  The first augmentation then walks ``n_live`` heavy kernels per
position, and the chain's later sweeps decide which kernels keep units, as from any start.

A start from random kernels picks random live kernels and ruins the chain (TREC: 48.6%
against 77.4% from the dense start), so the sampler uses this start only with kernels that
were learned (:mod:`cpgbn.inference.pilot`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .position_store import PositionStore, kernel_index_dtype
from .weights import FLOOR

__all__ = ["strongest_kernels", "sparse_start_weights"]


@njit(parallel=True, cache=True)
def strongest_kernels(doc_cells, doc_positions, cell_word, cell_col, D, n_live, kernel_out,
                      theta_out):
    """``kernel_out[p]``: the ``n_live`` kernels of largest window score at position p (module
    docstring), in decreasing order of score (ties: the smaller k first); ``theta_out[j, k]``:
    the sum over document j's positions of the start's w (1 where k is live, FLOOR elsewhere),
    theta^(1) of the start under the tied pooling prior."""
    n_docs = len(doc_positions) - 1
    n_kernels, filter_width = D.shape[2], D.shape[1]
    floor = np.float64(FLOOR)
    for j in prange(n_docs):
        p0 = doc_positions[j]
        n_pos = doc_positions[j + 1] - p0
        score = np.zeros((n_pos, n_kernels), dtype=np.float64)
        for c in range(doc_cells[j], doc_cells[j + 1]):
            v, col = cell_word[c], cell_col[c]
            for f in range(max(0, col - n_pos + 1), min(filter_width - 1, col) + 1):
                s = col - f
                for k in range(n_kernels):
                    score[s, k] += D[v, f, k]
        best = np.empty(n_live, dtype=np.float64)
        live = np.zeros(n_kernels, dtype=np.int64)
        for s in range(n_pos):
            n = 0
            for k in range(n_kernels):
                x = score[s, k]
                if n == n_live and x <= best[n_live - 1]:
                    continue
                # insert k, dropping the last when the list is full
                i = n if n < n_live else n_live - 1
                while i > 0 and best[i - 1] < x:
                    best[i] = best[i - 1]
                    kernel_out[p0 + s, i] = kernel_out[p0 + s, i - 1]
                    i -= 1
                best[i] = x
                kernel_out[p0 + s, i] = k
                if n < n_live:
                    n += 1
            for i in range(n_live):
                live[kernel_out[p0 + s, i]] += 1
        for k in range(n_kernels):
            theta_out[j, k] = live[k] + (n_pos - live[k]) * floor


def sparse_start_weights(data, D: np.ndarray, n_live: int) -> tuple[PositionStore, np.ndarray]:
    """The sparse start's w (a store with ``n_live`` entries of 1 per position over the floor)
    and its theta^(1) (N, K_1), for the documents of ``data`` and the kernels ``D``."""
    n_kernels = D.shape[2]
    if not 0 < n_live <= n_kernels:
        raise ValueError(f"n_live must be in 1..{n_kernels}, got {n_live}")
    positions = data.doc_positions
    kernels = np.empty((data.n_positions, n_live), dtype=kernel_index_dtype(n_kernels))
    theta = np.empty((data.n_docs, n_kernels), dtype=np.float64)
    strongest_kernels(data.doc_cells, positions, data.cell_word, data.cell_col,
                      np.ascontiguousarray(D, dtype=np.float32), int(n_live), kernels, theta)
    w = PositionStore.from_rows(positions, n_kernels, FLOOR,
                                np.full(data.n_positions, n_live, dtype=np.int32),
                                kernels.reshape(-1), np.ones(kernels.size, dtype=np.float32))
    return w, theta
