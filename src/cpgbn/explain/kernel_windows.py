"""The corpus windows each kernel explains: kernels named by phrases that occur (issue 48).

A kernel's most probable phrase under D_k (:func:`~cpgbn.explain.phrases.best_phrases`) joins
the likeliest word of each column, and the columns of a kernel are learned apart: on TREC
most such phrases ("dubbed $ you", "life build .") never occur.  What a reader needs is what
the kernel does in the corpus.  With the globals fixed, the sampler of ``transform`` gives each
token to a kernel k placed at a position s (:func:`~cpgbn.explain.phrases.assign_kernels`);
m[s, k], the count kernel k holds at s averaged over sweeps, is how much of the F-word window
at s the kernel explains.  Summed over the positions of each distinct window, it ranks the
windows a kernel explains most: phrases as they occur, each shown with how often it occurs.

Open slots.  Some kernels fix one or two columns and take many words at another ("how many
_").  Column f is open for kernel k when no word holds ``open_below`` or more of the weight
kernel k explains at that column (its windows' words there are spread; a kernel keeps at
least its most concentrated column).  The kernel's windows are then grouped with the open
columns ignored, and a group's count is every window of the corpus that matches it: "how
many _" counts each "how many X"; a column outside the document (a window at its edge) stays
empty rather than open, so ``_`` always stands for a word.  The out-of-vocabulary token is
shown as ``<unk>``: a kernel that explains rare words is named by it ("_ <unk> _"), not by the
one word of its windows that happens to be in the vocabulary.

Written over numpy arrays (the assignments' grams and counts), so that the result can be
recorded on a model at the end of its fit and read back without the sampler.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .filters import EMPTY, distinct_windows, row_keys
from .hierarchy import HIDDEN

__all__ = ["KernelWindows", "kernel_windows", "window_tokens", "OPEN", "OPEN_BELOW"]

#: A column of a kernel's window that takes many words (shown as ``_``).
OPEN = -2
#: A column is open when its most frequent word holds less than this share of the kernel's
#: weight at that column (module docstring).
OPEN_BELOW = 0.5


@dataclass(frozen=True)
class KernelWindows:
    """Per kernel, the corpus windows it explains most."""

    windows: np.ndarray
    """(K, top, F) word ids; :data:`OPEN` at an open slot, :data:`~cpgbn.explain.filters.EMPTY`
    for a padded column, or a whole row of EMPTY where the kernel has fewer windows."""
    counts: np.ndarray
    """(K, top) occurrences of each window (of every window matching it, with open slots) in
    the corpus; 0 for no window."""
    shares: np.ndarray
    """(K, top) the window's share of the count the kernel holds in the corpus."""


def kernel_windows(grams: np.ndarray, counts: np.ndarray, *, top: int = 5, min_count: int = 3,
                   open_below: float = OPEN_BELOW) -> KernelWindows:
    """The ``top`` windows of each kernel by the count it explains there (module docstring),
    among windows (or groups, with open slots) that occur at least ``min_count`` times.

    ``grams``: (P, F) the word ids of the window at each position (EMPTY outside a document),
    ``counts``: (P, K) m[s, k], dense or scipy sparse
    (:class:`~cpgbn.explain.phrases.KernelAssignments`)."""
    from scipy.sparse import csr_matrix
    grams = np.asarray(grams, dtype=np.int64)
    P, F = grams.shape
    K = counts.shape[1]
    out = np.full((K, top, F), EMPTY, dtype=np.int64)
    out_counts = np.zeros((K, top), dtype=np.int64)
    out_shares = np.zeros((K, top))
    if P == 0:
        return KernelWindows(out, out_counts, out_shares)
    distinct, occurrences, inverse = distinct_windows(grams, return_inverse=True)
    # weight[i, k]: the count kernel k explains over every position of distinct window i
    onehot = csr_matrix((np.ones(P), (inverse, np.arange(P))), shape=(len(distinct), P))
    weight = (onehot @ csr_matrix(counts, dtype=np.float64)).tocsc()
    pattern_counts: dict = {}   # open mask -> (sorted keys, occurrences) over the corpus
    base = int(distinct.max(initial=0)) - OPEN + 1   # one key encoding for every grouping
    for k in range(K):
        lo, hi = weight.indptr[k], weight.indptr[k + 1]
        rows, w = weight.indices[lo:hi], weight.data[lo:hi]
        total = w.sum()
        if total <= 0:
            continue
        mask = _open_columns(distinct[rows], w, open_below)
        patterns = _opened(distinct[rows], mask)
        keys, weights, first = _group(patterns, w, base)
        if tuple(mask) not in pattern_counts:
            masked = _opened(distinct, mask)
            all_keys, all_weights, _ = _group(masked, occurrences.astype(np.float64), base)
            pattern_counts[tuple(mask)] = all_keys, all_weights
        all_keys, all_weights = pattern_counts[tuple(mask)]
        n = np.rint(all_weights[np.searchsorted(all_keys, keys)]).astype(np.int64)
        shown = patterns[first][:, ~mask]
        keep = (n >= min_count) & np.any(shown != EMPTY, axis=1)
        order = np.flatnonzero(keep)[np.argsort(-weights[keep], kind="stable")][:top]
        out[k, :len(order)] = patterns[first[order]]
        out_counts[k, :len(order)] = n[order]
        out_shares[k, :len(order)] = weights[order] / total
    return KernelWindows(out, out_counts, out_shares)


def _opened(windows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``windows`` with the columns of ``mask`` made OPEN where they hold a word: a column
    outside the document stays EMPTY, so that ``_`` always stands for a word."""
    opened = windows.copy()
    opened[:, mask] = np.where(windows[:, mask] == EMPTY, EMPTY, OPEN)
    return opened


def _open_columns(windows: np.ndarray, weight: np.ndarray, open_below: float) -> np.ndarray:
    """(F,) bool: the columns where no word holds ``open_below`` of ``weight`` (of the weight
    of the windows with a word there: an edge of a document is no word); never all."""
    F = windows.shape[1]
    top_share = np.ones(F)
    for f in range(F):
        words = windows[:, f] != EMPTY
        if not words.any():
            continue
        _, inverse = np.unique(windows[words, f], return_inverse=True)
        per_word = np.bincount(inverse.ravel(), weights=weight[words])
        top_share[f] = per_word.max() / max(per_word.sum(), 1e-300)
    mask = top_share < open_below
    if mask.all():
        mask[np.argmax(top_share)] = False
    return mask


def _group(patterns: np.ndarray, weight: np.ndarray, base: int):
    """(keys sorted, summed weight per key, index of a row of each key) of the distinct rows
    of ``patterns`` (word ids, EMPTY and OPEN, shifted to digits 0..``base`` - 1), keys
    comparable between calls with one ``base``."""
    unique, first, inverse = np.unique(row_keys(patterns - OPEN, base), return_index=True,
                                       return_inverse=True)
    return unique, np.bincount(inverse.ravel(), weights=weight), first


def window_tokens(window, vocabulary) -> list[str]:
    """The tokens of one recorded window: :data:`~cpgbn.explain.hierarchy.HIDDEN` at an open
    slot, padded columns left out."""
    return [HIDDEN if v == OPEN else vocabulary.decode([int(v)])[0]
            for v in window if v != EMPTY]


#: The fit's record reads at most this many training documents (a seeded sample beyond it),
#: with this many sweeps of the transform sampler, the first ``RECORD_BURN_IN`` discarded: on
#: TREC's 5,452 questions a second or two on 2 cores
RECORD_DOCS = 5000
RECORD_SWEEPS, RECORD_BURN_IN = 6, 3
#: Windows recorded per kernel
RECORD_TOP = 5


def record_kernel_windows(model, X, *, stacklevel: int = 3) -> KernelWindows | None:
    """What a fitted model records at the end of its fit (``kernel_windows_``): the windows
    each kernel explains in its training documents ``X`` (strings, a Corpus or a TextFile),
    found by :func:`~cpgbn.explain.phrases.assign_kernels` with the fitted globals and ranked
    by :func:`kernel_windows`.  Past ``RECORD_DOCS`` documents, a seeded sample of them, the
    same documents however ``X`` is given (a file is read twice, a block at a time; a fit
    takes its sample from the pass of :mod:`cpgbn.explain.records` instead), so that a
    streamed or distributed fit records what an in-memory one does.  None, with a warning
    (``stacklevel`` frames up: the fit's caller), where not even one document's inference
    fits the memory limit."""
    return windows_of_sample(model, record_sample(X), stacklevel=stacklevel + 1)


def windows_of_sample(model, X, *, stacklevel: int = 2) -> KernelWindows | None:
    """:func:`record_kernel_windows` of documents already sampled (:class:`RecordSample`);
    its warning ``stacklevel`` frames up from here."""
    from ..errors import MemoryLimitError
    from .phrases import assign_kernels
    while True:   # past the memory limit, the first half of the sample, and so on
        try:
            with warnings.catch_warnings():   # the fit has warned of its documents already
                warnings.simplefilter("ignore", UserWarning)
                assignments = assign_kernels(model, X, n_iter=RECORD_SWEEPS,
                                             burn_in=RECORD_BURN_IN)
            break
        except MemoryLimitError as error:
            if len(X) <= 1:
                warnings.warn(f"the kernels' corpus windows were not recorded: {error}",
                              stacklevel=stacklevel)
                return None
            X = _take(X, np.arange(len(X) // 2))
    return kernel_windows(assignments.grams, assignments.counts, top=RECORD_TOP)


def record_sample(X):
    """At most ``RECORD_DOCS`` of the documents ``X``, in corpus order (module constants)."""
    from ..text.documents import Documents
    documents = Documents.of(X)
    sample = RecordSample(documents.n_docs())
    for block in documents.blocks(RECORD_DOCS):   # documents in memory: one block
        sample.add(block)
    return sample.documents()


class RecordSample:
    """The record's sample of ``n_docs`` documents, taken from their blocks as they pass by
    (in corpus order, one :meth:`add` per block): the same documents whatever the blocks."""

    def __init__(self, n_docs: int):
        self.n_docs, self._keep = int(n_docs), _sample_indices(int(n_docs))
        self._start, self._parts = 0, []

    def add(self, block) -> None:
        """The next block of documents (a list of texts or a Corpus)."""
        n = len(block)
        if self._start == 0 and n == self.n_docs and self.n_docs <= RECORD_DOCS:
            self._parts.append(block)   # the whole corpus at once: itself
        else:
            keep = self._keep
            chosen = keep[(keep >= self._start) & (keep < self._start + n)] - self._start
            self._parts.append(_take(block, chosen))
        self._start += n

    def documents(self):
        """The sampled documents (one kind, as given), once every block has been added."""
        if self._start != self.n_docs:
            raise RuntimeError(f"the sample saw {self._start} of {self.n_docs} documents")
        if len(self._parts) == 1:
            return self._parts[0]
        return [text for part in self._parts for text in part]


def _take(X, indices: np.ndarray):
    """The documents ``indices`` of ``X`` (a Corpus, or a list of texts), as the same kind."""
    from ..text.corpus import Corpus
    return X.subset(indices) if isinstance(X, Corpus) else [X[i] for i in indices]


def _sample_indices(n: int) -> np.ndarray:
    if n <= RECORD_DOCS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, RECORD_DOCS, replace=False))
