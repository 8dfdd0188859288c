"""Phrases of the convolutional kernels: what each kernel writes, and what it explains in a corpus.

Three views of kernel k (D_k, a V x F matrix whose columns are what the kernel puts at each of
the F positions of a phrase; the paper's Table 3):

* :func:`best_phrases` -- the most probable F-word sequences under the kernel.  A phrase
  v_1 .. v_F scores sum_f log p(v_f | column f), each column normalised to sum to 1, and a beam
  search over the columns keeps the ``beam`` best prefixes.  Because the score is a sum over
  columns, the beam's top ``beam`` phrases are exact, not approximate; the search is written
  for any column score.
* :func:`corpus_phrases` -- the F-grams of real documents that the kernel explains most often:
  inference with the globals fixed (the sampler of ``transform``), then for each kernel the
  F-grams at the positions s it was assigned to, weighted by its latent count m[s, k] and
  averaged over a few sweeps.
* :func:`sharpness` -- a score of how peaked the kernel is (mean over columns of the largest
  word probability), so that tables can be sorted by interpretability, not only by usage.

Columns that carry less than ``min_column_share`` of the kernel's mass are shown as ``_``
(:data:`~cpgbn.explain.hierarchy.HIDDEN`): they hold the prior and a few rare words, not what the
kernel writes (see :mod:`cpgbn.explain.hierarchy`).  The low-level functions hide nothing by
default; :func:`~cpgbn.explain.kernel_table.kernel_table` and the command line hide below
``MIN_COLUMN_SHARE``.

The out-of-vocabulary token ``<unk>`` (id 0) is a real row of every kernel; it is hidden by
default: it is never a word of a best phrase, corpus F-grams containing it are skipped, and
it does not count towards sharpness.  The windows a kernel explains
(:mod:`~cpgbn.explain.kernel_windows`, the kernel's name) show it: there it stands for the
rare words a kernel explains, and hiding it would name such a kernel by a window that holds
almost none of its count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.numba.position_store import as_sparse, dense_rows
from ..errors import CPGBNInputError
from ..text.corpus import Corpus
from ..text.vocabulary import OOV_ID, Vocabulary
from .hierarchy import HIDDEN, shown_columns


@dataclass(frozen=True)
class Phrase:
    """A phrase and its weight.

    ``weight`` is the phrase's probability under the kernel (product of its column
    probabilities) for :func:`best_phrases`, and its share of the kernel's counts in the corpus
    for :func:`corpus_phrases` and a kernel's recorded windows; ``count``, for the latter, how
    often it occurs in the corpus (``_`` matching any word).
    """

    words: tuple[str, ...]
    weight: float
    count: int | None = None

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def __str__(self) -> str:
        return self.text


def column_probabilities(matrix: np.ndarray) -> np.ndarray:
    """The V x F matrix with every column normalised to sum to 1 (float64; empty columns stay 0)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2:
        raise CPGBNInputError(f"a kernel must be a V x F matrix, got shape {matrix.shape}")
    total = matrix.sum(axis=0, keepdims=True)
    return np.divide(matrix, total, out=np.zeros_like(matrix), where=total > 0)


def beam_search(log_columns: list[tuple[np.ndarray, np.ndarray]], beam: int
                ) -> list[tuple[tuple[int, ...], float]]:
    """Best sequences over columns: ``log_columns[f] = (ids, log scores)`` of the candidates at
    column f.  Keeps the ``beam`` best prefixes after each column; returns (ids, score) pairs,
    best first, ties broken by the earlier candidate."""
    prefixes: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    for ids, scores in log_columns:
        if len(ids) == 0:
            return []
        extended = [(prefix + (int(v),), total + float(s))
                    for prefix, total in prefixes for v, s in zip(ids, scores)]
        # stable sort: equal scores keep the prefix order, then the candidate order
        extended.sort(key=lambda item: -item[1])
        prefixes = extended[:beam]
    return prefixes


def _with_hidden(words: tuple[str, ...], shown: np.ndarray, n_columns: int) -> tuple[str, ...]:
    """Spread the words of the shown columns over all columns, ``HIDDEN`` elsewhere."""
    full = [HIDDEN] * n_columns
    for f, word in zip(shown, words):
        full[f] = word
    return tuple(full)


def best_phrases(matrix: np.ndarray, vocabulary: Vocabulary, top_n: int = 3, beam: int = 10,
                 hide_unknown: bool = True, min_column_share: float = 0.0) -> list[Phrase]:
    """The ``top_n`` most probable phrases of a V x F kernel (or of any topic's phrase matrix).

    Beam search over the F columns maximising sum_f log p(v_f | f); each column offers its
    ``beam`` most probable words (``<unk>`` excluded unless ``hide_unknown=False``).  The beam
    is widened to ``top_n`` if it is smaller.  Zero-probability words are never used.  Columns
    with less than ``min_column_share`` of the mass are ``HIDDEN`` in every phrase (and do not
    enter its weight).
    """
    if top_n < 1:
        raise CPGBNInputError(f"top_n must be >= 1, got {top_n}")
    if beam < 1:
        raise CPGBNInputError(f"beam must be >= 1, got {beam}")
    beam = max(beam, top_n)
    probs = column_probabilities(matrix)
    if probs.shape[0] != len(vocabulary):
        raise CPGBNInputError(f"the kernel has {probs.shape[0]} rows but the vocabulary "
                              f"{len(vocabulary)}")
    shown = shown_columns(matrix, min_column_share)
    columns = []
    for f in shown:
        col = probs[:, f].copy()
        if hide_unknown:
            col[OOV_ID] = 0.0
        order = np.argsort(-col, kind="stable")[:beam]
        order = order[col[order] > 0]
        columns.append((order, np.log(col[order])))
    if not columns:
        return []
    return [Phrase(_with_hidden(tuple(vocabulary.decode(list(ids))), shown, probs.shape[1]),
                   float(np.exp(score)))
            for ids, score in beam_search(columns, beam)[:top_n]]


def phrases_from_columns(columns: list[list[tuple[str, float]]], top_n: int = 3) -> list[Phrase]:
    """Best phrases from columns of (word, probability) pairs, as :func:`top_words_per_column`
    and :class:`~cpgbn.explain.TopicNode` keep them.  Exact for the first ``k`` phrases when
    every column lists at least ``k`` words.  An empty column (a hidden, near-empty one) is
    ``HIDDEN`` in every phrase."""
    shown = np.array([f for f, col in enumerate(columns) if col], dtype=np.int64)
    words = [[w for w, _ in columns[f]] for f in shown]
    log_columns = []
    for f in shown:
        p = np.array([p for _, p in columns[f]], dtype=np.float64)
        keep = np.flatnonzero(p > 0)
        log_columns.append((keep, np.log(p[keep])))
    if not log_columns:
        return []
    return [Phrase(_with_hidden(tuple(words[i][v] for i, v in enumerate(ids)), shown, len(columns)),
                   float(np.exp(score)))
            for ids, score in beam_search(log_columns, max(top_n, 1))[:top_n]]


def sharpness(matrix: np.ndarray, hide_unknown: bool = True, min_column_share: float = 0.0) -> float:
    """Mean over the shown columns of the largest word probability in the column (0..1].

    1 means every shown column is a single word (a fixed phrase); 1/V a flat kernel.  With
    ``hide_unknown`` the ``<unk>`` row is not a candidate (columns are not renormalised), so a
    kernel that mostly writes out-of-vocabulary tokens scores low.  Columns with less than
    ``min_column_share`` of the mass are left out (they would score their few rare words).
    """
    probs = column_probabilities(matrix)
    if hide_unknown:
        probs = probs.copy()
        probs[OOV_ID] = 0.0
    shown = shown_columns(matrix, min_column_share)
    return float(probs[:, shown].max(axis=0).mean()) if len(shown) else 0.0


# ---------------------------------------------------------------------- corpus phrases
@dataclass
class KernelAssignments:
    """What the sampler assigned to each kernel at each position of a corpus (globals fixed).

    corpus : the encoded documents.
    grams : int32 (P, F) -- the token ids of the F-gram at each position s (-1 where the
        placement overhangs an edge: a document shorter than F, or the model's ``padding``).
    counts : scipy CSR float32 (P, K_1) -- m[s, k], the latent count of kernel k at position s,
        averaged over the collected sweeps (sparse: most positions hold a few kernels, and a
        dense (P, K_1) array of a large corpus would outweigh the chain).
    doc_positions : int64 (N + 1,) -- positions of document j are doc_positions[j]:doc_positions[j+1].
    doc_kernel : float64 (N, K_1) -- mean theta^(1) of each document (its kernel weights).
    column_tokens : float64 (K_1, F) -- expected number of tokens that kernel k explains at
        column f of its phrase (responsibilities, below), averaged over the collected sweeps.
    word_tokens : float64 (V, K_1) -- expected number of occurrences of word v that kernel k
        explains (summed over columns), averaged over the collected sweeps.
    n_sweeps, n_collected : int.

    Responsibilities: a token v at column l of a (padded) document can come from kernel k placed
    at position s = l - f (f = 0..F-1 inside the document), with weight w[s, k] D[v, f, k]; its
    responsibilities are these weights normalised over (s, k), i.e. the expected share of the
    token's units that the sampler gives to each (kernel, column).
    """

    corpus: Corpus
    grams: np.ndarray
    counts: np.ndarray
    doc_positions: np.ndarray
    doc_kernel: np.ndarray
    column_tokens: np.ndarray
    word_tokens: np.ndarray
    n_sweeps: int
    n_collected: int

    @property
    def usage(self) -> np.ndarray:
        """Share of each kernel in the corpus's theta^(1) (sums to 1)."""
        usage = self.doc_kernel.sum(axis=0)
        return usage / max(usage.sum(), 1e-300)

    @property
    def column_share(self) -> np.ndarray:
        """(K_1, F): each kernel's explained tokens by column (rows sum to 1; 0 if unused)."""
        total = self.column_tokens.sum(axis=1, keepdims=True)
        return np.divide(self.column_tokens, total, out=np.zeros_like(self.column_tokens),
                         where=total > 0)

    @property
    def width(self) -> np.ndarray:
        """(K_1,): effective number of columns a kernel uses, exp(entropy of its column share),
        from 1 (a one-word kernel: the other columns explain almost nothing) to F."""
        share = self.column_share
        logs = np.log(np.where(share > 0, share, 1.0))
        return np.exp(-(share * logs).sum(axis=1))


def _position_grams(corpus: Corpus, doc_positions: np.ndarray, F: int, padding: int) -> np.ndarray:
    lengths = corpus.lengths
    n_pos = np.diff(doc_positions)
    doc = np.repeat(np.arange(len(corpus)), n_pos)
    start = np.arange(int(doc_positions[-1]), dtype=np.int64) - doc_positions[doc] - padding
    grams = np.full((len(doc), F), -1, dtype=np.int32)
    for f in range(F):
        col = start + f
        valid = (col >= 0) & (col < lengths[doc])
        grams[valid, f] = corpus.tokens[corpus.offsets[doc[valid]] + col[valid]]
    return grams


def assign_kernels(model, X, *, n_iter: int = 10, burn_in: int = 5, seed: int | None = None
                   ) -> KernelAssignments:
    """Run the sampler on documents ``X`` with the model's globals fixed (:meth:`CPGBN.infer`)
    and record, for every position, the mean latent count of each kernel over the sweeps after
    ``burn_in``.

    ``X``: strings or a :class:`~cpgbn.text.Corpus` over ``model.vocabulary_``.  ``seed``
    defaults to the seed ``transform`` uses; the model's ``device``, ``n_threads`` and
    ``memory_limit`` apply as in ``transform``.  Cost: ``n_iter`` sweeps of ``transform``.
    """
    if n_iter < 1 or not 0 <= burn_in < n_iter:
        raise CPGBNInputError(f"need n_iter >= 1 and 0 <= burn_in < n_iter, got n_iter={n_iter}, "
                              f"burn_in={burn_in}")
    if len(X) == 0:
        raise CPGBNInputError("no documents to assign")
    from scipy.sparse import csr_matrix
    D = model.globals_.D
    V, F, K = D.shape
    sums: dict = {}

    def collect(state, inferred) -> None:
        if state.sweep <= burn_in:
            return
        if not sums:
            sums.update(counts=csr_matrix(state.m.shape), theta=np.zeros(state.theta[0].shape),
                        columns=np.zeros((K, F)), words=np.zeros((V, K)))
        # summed exactly (integer counts in float64), as sparse as the chain's m
        sums["counts"] = sums["counts"] + as_sparse(state.m)
        sums["theta"] += state.theta[0]
        _add_responsibilities(inferred.corpus, inferred.data.doc_positions, inferred.data.padding,
                              state.w, D, sums["columns"], sums["words"])

    inferred = model.infer(X, n_iter=n_iter, burn_in=burn_in, seed=seed, on_sweep=collect)
    corpus, data, n = inferred.corpus, inferred.data, n_iter - burn_in
    return KernelAssignments(corpus, _position_grams(corpus, data.doc_positions, F, data.padding),
                             (sums["counts"] / n).astype(np.float32), data.doc_positions,
                             sums["theta"] / n, sums["columns"] / n, sums["words"] / n, n_iter, n)


def _add_responsibilities(corpus: Corpus, doc_positions: np.ndarray, padding: int, w,
                          D: np.ndarray, column_tokens: np.ndarray, word_tokens: np.ndarray,
                          max_bytes: int = 64 << 20) -> None:
    """Add every token's responsibilities (see :class:`KernelAssignments`) to the (K, F) column
    and (V, K) word totals, in blocks of tokens of at most ``max_bytes`` of work space; ``w``
    (a position store or a dense (P, K) array) is read densely only over a block's positions."""
    from scipy.sparse import csr_matrix
    V, F, K = D.shape
    n_tokens = len(corpus.tokens)
    if n_tokens == 0:
        return
    doc = np.repeat(np.arange(len(corpus)), corpus.lengths)
    n_pos = np.diff(doc_positions)
    block = max(1, int(max_bytes // (4 * F * K)))
    for lo in range(0, n_tokens, block):
        hi = min(lo + block, n_tokens)
        d = doc[lo:hi]
        col = np.arange(lo, hi, dtype=np.int64) - corpus.offsets[d] + padding
        v = corpus.tokens[lo:hi]
        # the positions this block's tokens can come from, in order: s = col - f in a document
        first = doc_positions[d[0]] + max(int(col[0]) - F + 1, 0)
        last = doc_positions[d[-1]] + min(int(col[-1]), int(n_pos[d[-1]]) - 1)
        w_block = dense_rows(w, first, last + 1)
        weights = np.zeros((F, hi - lo, K), dtype=np.float32)
        for f in range(F):
            start = col - f
            ok = (start >= 0) & (start < n_pos[d])
            weights[f, ok] = w_block[doc_positions[d[ok]] + start[ok] - first] * D[v[ok], f, :]
        total = weights.sum(axis=(0, 2), dtype=np.float64)
        weights /= np.where(total > 0, total, 1.0).astype(np.float32)[None, :, None]
        column_tokens += weights.sum(axis=1, dtype=np.float64).T
        per_token = weights.sum(axis=0, dtype=np.float64)
        onehot = csr_matrix((np.ones(hi - lo), (v, np.arange(hi - lo))), shape=(V, hi - lo))
        word_tokens += onehot @ per_token


def top_corpus_phrases(assignments: KernelAssignments, vocabulary: Vocabulary, top_n: int = 3,
                       hide_unknown: bool = True) -> list[list[Phrase]]:
    """For each kernel, the ``top_n`` F-grams with the largest summed counts m[s, k], each with
    its share of the kernel's total count.  A placement that overhangs an edge (a document
    shorter than F, or the model's padding) gives a shorter gram."""
    from scipy.sparse import csc_matrix
    grams = assignments.grams
    keep = np.ones(len(grams), dtype=bool)
    if hide_unknown:
        keep &= ~np.any(grams == OOV_ID, axis=1)
    keep &= np.any(grams >= 0, axis=1)  # an empty document's only position has no words
    unique, inverse = np.unique(grams[keep], axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    counts = csc_matrix(assignments.counts[np.flatnonzero(keep)], dtype=np.float64)
    counts.sort_indices()
    totals = np.asarray(assignments.counts.sum(axis=0, dtype=np.float64)).ravel()
    result = []
    for k in range(counts.shape[1]):
        rows = slice(counts.indptr[k], counts.indptr[k + 1])
        weights = np.bincount(inverse[counts.indices[rows]], weights=counts.data[rows],
                              minlength=len(unique))
        order = np.argsort(-weights, kind="stable")[:top_n]
        order = order[weights[order] > 0]
        result.append([Phrase(tuple(vocabulary.decode([int(v) for v in unique[i] if v >= 0])),
                              float(weights[i] / totals[k]) if totals[k] > 0 else 0.0)
                       for i in order])
    return result


def corpus_phrases(model, X, top_n: int = 3, *, n_iter: int = 10, burn_in: int = 5,
                   hide_unknown: bool = True, seed: int | None = None) -> list[list[Phrase]]:
    """For each kernel, the F-grams of the documents ``X`` it explains most often:
    :func:`assign_kernels` then :func:`top_corpus_phrases`."""
    assignments = assign_kernels(model, X, n_iter=n_iter, burn_in=burn_in, seed=seed)
    return top_corpus_phrases(assignments, model.vocabulary_, top_n, hide_unknown)
