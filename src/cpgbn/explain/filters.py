"""The encoder's filters read as the phrases of a corpus that excite them (a classifier's
units when its softmax reads the pooled first hidden layer h^(1)).

Filter k of the encoder's first layer scores the F-word window at position s of a document as
H_sk = relu(sum_f C_1[k, x_{s+f}, f] + b_1k) (:class:`cpgbn.backends.torch.encoder.
WeibullConvEncoder`), and the softmax reads ln(1 + mean_s H_sk).  A window's score depends on
its words alone, so every occurrence of one window scores the same, and the windows that carry
most of filter k's activation over a corpus are those with the largest count x H_k.  Those are
the phrases shown for a filter: windows that occur, with how often; the per-column view (for
each column f, the words of largest C_1[k, v, f]) combines words that rarely or never occur
together and read as noise (issue 47).

Written over numpy arrays (the encoder's saved weights), so reading a saved classifier's
filters needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..layers.cells import ConvData

__all__ = ["FilterWindows", "ClassWindows", "corpus_windows", "distinct_windows",
           "filter_windows", "class_windows", "window_activations", "EMPTY"]

#: A column of a window outside the document's words (the padding of a short document).
EMPTY = -1


def corpus_windows(data: ConvData) -> tuple[np.ndarray, np.ndarray]:
    """(windows, counts): the distinct F-word windows of the documents ``data`` (one row of F
    word ids per distinct window, :data:`EMPTY` for a padded column) and how often each
    occurs, over every position of every document."""
    F = data.filter_width
    starts = np.zeros(data.n_docs + 1, dtype=np.int64)
    np.cumsum(data.doc_length, out=starts[1:])
    columns = np.full(int(starts[-1]), EMPTY, dtype=np.int64)
    doc_of_cell = np.repeat(np.arange(data.n_docs), np.diff(data.doc_cells))
    columns[starts[doc_of_cell] + data.cell_col] = data.cell_word
    positions = np.diff(data.doc_positions)                      # S_j per document
    doc_of_position = np.repeat(np.arange(data.n_docs), positions)
    first = data.doc_positions[:-1]
    s = np.arange(int(data.doc_positions[-1])) - first[doc_of_position]
    window_start = starts[doc_of_position] + s
    windows = columns[window_start[:, None] + np.arange(F)]
    if len(windows) == 0:
        return np.zeros((0, F), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return distinct_windows(windows)


def distinct_windows(windows: np.ndarray, counts: np.ndarray | None = None, *,
                     return_inverse: bool = False) -> tuple:
    """(the distinct rows of ``windows``, sorted, and how often each occurs, or the sum of
    ``counts`` over its copies), and with ``return_inverse`` the distinct row of each row."""
    windows = np.asarray(windows, dtype=np.int64)
    base = int(windows.max(initial=EMPTY)) + 2          # ids EMPTY..V-1 -> digits 0..V
    _, first, inverse = np.unique(row_keys(windows - EMPTY, base), return_index=True,
                                  return_inverse=True)
    distinct = windows[first]
    weights = None if counts is None else np.asarray(counts, dtype=np.float64)
    inverse = inverse.ravel()
    total = np.rint(np.bincount(inverse, weights=weights, minlength=len(distinct)))
    if return_inverse:
        return distinct, total.astype(np.int64), inverse
    return distinct, total.astype(np.int64)


def row_keys(digits: np.ndarray, base: int) -> np.ndarray:
    """One key per row of ``digits`` (non-negative integers below ``base``): keys sort as the
    rows do and are equal only for equal rows, so they compare between calls with one
    ``base``.  An integer when the row's digits fit in 62 bits (a sort of keys is several times
    faster than numpy's unique over rows), else the row's big-endian bytes."""
    F = digits.shape[1]
    if F * np.log2(max(base, 2)) < 62:
        return digits @ (base ** np.arange(F - 1, -1, -1, dtype=np.int64))
    packed = np.ascontiguousarray(digits.astype(">i8")).view(np.dtype((np.void, 8 * F)))
    return packed.ravel()


@dataclass(frozen=True)
class FilterWindows:
    """Per filter, the windows of a corpus with the largest share of its activation."""

    windows: np.ndarray
    """(K, top, F) word ids, :data:`EMPTY` for a padded column; a filter with fewer active
    windows has rows of EMPTY."""
    counts: np.ndarray
    """(K, top) occurrences of each window in the corpus (0 for an EMPTY row)."""
    shares: np.ndarray
    """(K, top) the window's share of the filter's activation summed over the corpus."""


def filter_windows(conv1: np.ndarray, bias1: np.ndarray, windows: np.ndarray,
                   counts: np.ndarray, *, top: int = 5, chunk: int = 65536) -> FilterWindows:
    """The ``top`` windows of each filter by count x activation (module docstring).

    ``conv1``: the encoder's ``conv1.weight`` as (V, F, K) (C_1[k, v, f] at [v, f, k]);
    ``bias1``: (K,); ``windows``, ``counts``: :func:`corpus_windows`.  The windows are scored
    ``chunk`` at a time, so memory stays at chunk x K numbers."""
    V, F, K = conv1.shape
    top = int(top)
    best_score = np.full((K, top), -1.0)
    best_row = np.full((K, top), -1, dtype=np.int64)
    total = np.zeros(K)
    for lo in range(0, len(windows), chunk):
        rows = windows[lo:lo + chunk]
        score = window_activations(conv1, bias1, rows) * counts[lo:lo + chunk, None]  # (n, K)
        total += score.sum(axis=0)
        n = len(rows)
        pick = np.argpartition(-score, min(top, n) - 1, axis=0)[:top] if n > top else \
            np.broadcast_to(np.arange(n)[:, None], (n, K))
        best_score, best_row = _keep_top(best_score, best_row,
                                         np.take_along_axis(score, pick, 0).T, (pick + lo).T)
    out_windows, out_counts, active = _chosen(windows, counts, best_score, best_row, F)
    shares = np.where(active, best_score / np.maximum(total, 1e-300)[:, None], 0.0)
    return FilterWindows(out_windows, out_counts, shares)


def _keep_top(best, best_row, scores, rows):
    """The largest of ``best`` and ``scores`` per unit, as many as ``best`` holds, largest
    first, with their rows: a running top over chunks.  ``best``, ``best_row``: (units, top);
    ``scores``, ``rows``: (units, m) candidates."""
    top = best.shape[1]
    candidates = np.concatenate([best, scores], axis=1)
    ids = np.concatenate([best_row, rows], axis=1)
    order = np.argsort(-candidates, axis=1, kind="stable")[:, :top]
    return np.take_along_axis(candidates, order, 1), np.take_along_axis(ids, order, 1)


def _chosen(windows, counts, best, best_row, F):
    """(units, top, F) windows, (units, top) counts and which are chosen (a row with a
    positive score): the rest EMPTY and 0."""
    chosen = (best_row >= 0) & (best > 0)
    out = np.full(best.shape + (F,), EMPTY, dtype=np.int64)
    out[chosen] = windows[best_row[chosen]]
    out_counts = np.where(chosen, counts[np.maximum(best_row, 0)] if len(counts) else 0, 0)
    return out, out_counts.astype(np.int64), chosen


def window_activations(conv1: np.ndarray, bias1: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """(n, K): H of each window, relu(sum_f C_1[k, window_f, f] + b_1k) (module docstring),
    an :data:`EMPTY` column adding nothing."""
    V, F, K = conv1.shape
    pre = np.broadcast_to(np.asarray(bias1, dtype=np.float64), (len(windows), K)).copy()
    for f in range(F):
        present = windows[:, f] != EMPTY
        pre[present] += conv1[windows[present, f], f, :]
    return np.maximum(pre, 0.0)


@dataclass(frozen=True)
class ClassWindows:
    """Per class, the windows of a corpus that push most towards it."""

    windows: np.ndarray
    """(C, top, F) word ids (:data:`EMPTY` for a padded column or no window)."""
    counts: np.ndarray
    """(C, top) occurrences in the corpus (0: no window)."""
    pushes: np.ndarray
    """(C, top) the window's push towards the class: sum_k W_ck H_k, the class's softmax
    weights on h^(1) (centred over the classes) times the window's activations."""


def class_windows(conv1: np.ndarray, bias1: np.ndarray, weight: np.ndarray,
                  windows: np.ndarray, counts: np.ndarray, *, top: int = 10,
                  min_count: int = 3, chunk: int = 65536) -> ClassWindows:
    """The ``top`` windows of each class among those occurring at least ``min_count`` times:
    ranked by push x ln(1 + count), so that a phrase that pushes hard and recurs comes first,
    one that pushes hard once (a name, a typo) does not, nor a frequent one that barely
    pushes.  ``weight``: (C, K) the softmax's weights on h^(1), centred over the classes.
    (On MR, push x sqrt(count) put frequent function-word windows first, ", and the" and
    ". . ." among the positive class's; the push alone, windows seen 3 times.)

    The push is the first-order effect of one occurrence on the class's logit: the softmax
    reads ln(1 + mean_s H_s), whose slope at a document is 1 / (S (1 + h)), the same for every
    window of that document, so a window's push is ranked without it."""
    weight = np.asarray(weight, dtype=np.float64)
    C = len(weight)
    F = windows.shape[1] if windows.ndim == 2 else conv1.shape[1]
    frequent = np.flatnonzero(counts >= int(min_count))
    best = np.full((C, top), -np.inf)
    best_row = np.full((C, top), -1, dtype=np.int64)
    for lo in range(0, len(frequent), chunk):
        rows = frequent[lo:lo + chunk]
        push = window_activations(conv1, bias1, windows[rows]) @ weight.T     # (n, C)
        score = push * np.log1p(counts[rows])[:, None]
        best, best_row = _keep_top(best, best_row, score.T,
                                   np.broadcast_to(rows, (C, len(rows))))
    out, out_counts, found = _chosen(windows, counts, best, best_row, F)
    pushes = np.where(found, best / np.log1p(np.maximum(out_counts, 1)), 0.0)
    return ClassWindows(out, out_counts, pushes)
