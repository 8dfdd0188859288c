"""Topic quality: NPMI coherence over sliding windows of a reference corpus.

For the top words w_1..w_N of a topic, coherence is the mean over the pairs i < j of

    NPMI(w_i, w_j) = log(p(w_i, w_j) / (p(w_i) p(w_j))) / -log p(w_i, w_j),

where p(w) is the fraction of windows that contain w and p(w_i, w_j) the fraction that contain
both (Bouma 2009; Lau, Newman & Baldwin 2014).  A pair that never co-occurs scores -1, a pair
that occurs in every window +1.

Windows: a window of ``window`` consecutive tokens slides over each document one token at a
time; a document with at most ``window`` tokens is a single window.  On short texts such as
TREC questions (about 10 tokens) this is nearly document-level co-occurrence; ``window=None``
makes it exactly document-level.  The out-of-vocabulary token occupies its positions but is
never a topic word.

Phrase topics: a kernel (or a deeper topic's phrase matrix) is a V x F matrix.  Its topic
words are the union of its columns' top words, ranked by max_f p(v | column f) and cut at N:
a word that is prominent at any position of the phrase counts.  With the sampler's
assignments on the corpus (:func:`cpgbn.explain.phrases.assign_kernels`) a second word list
is scored: the N words whose occurrences the kernel explains most (its corpus topic, the
analogue of LDA's topic-word counts).  The two differ when a column holds few tokens: each
token carries ``token_count`` pseudo-counts, so a handful of rare words can dominate a column
the data barely use.  LDA topics (the baseline of
:func:`cpgbn.baselines.lda_estimator`: scikit-learn batch variational Bayes, same
vocabulary) use their N most probable words.  Both are scored on the same windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..baselines import document_word_counts, lda_estimator
from ..errors import CPGBNInputError
from ..text.corpus import Corpus
from ..text.vocabulary import OOV_ID

DEFAULT_WINDOW = 10
DEFAULT_TOP_N = 10


def phrase_topic_words(matrix: np.ndarray, top_n: int = DEFAULT_TOP_N) -> np.ndarray:
    """Word ids of a V x F phrase topic: the union of the columns' top words, ranked by their
    largest column probability, the first ``top_n`` (``<unk>`` excluded)."""
    from .phrases import column_probabilities
    best = column_probabilities(matrix).max(axis=1)
    best[OOV_ID] = -1.0
    order = np.argsort(-best, kind="stable")[:top_n]
    return order[best[order] > 0]


def kernel_topic_words(model, top_n: int = DEFAULT_TOP_N) -> list[np.ndarray]:
    """The topic words of every kernel of a fitted model (:func:`phrase_topic_words`)."""
    D = model.globals_.D
    return [phrase_topic_words(D[:, :, k], top_n) for k in range(D.shape[2])]


def assigned_topic_words(assignments, top_n: int = DEFAULT_TOP_N) -> list[np.ndarray]:
    """For each kernel, the ``top_n`` words whose occurrences it explains most in the corpus
    (``assignments.word_tokens``; ``<unk>`` excluded, words it never explains dropped)."""
    topics = []
    for k in range(assignments.word_tokens.shape[1]):
        weights = assignments.word_tokens[:, k].copy()
        weights[OOV_ID] = 0.0
        order = np.argsort(-weights, kind="stable")[:top_n]
        topics.append(order[weights[order] > 0])
    return topics


def _window_matrix(corpus: Corpus, words: np.ndarray, window: int | None):
    """Binary sparse (n_windows, len(words)) membership matrix, and the number of windows."""
    from scipy.sparse import coo_matrix
    column = np.full(len(corpus.vocabulary), -1, dtype=np.int64)
    column[words] = np.arange(len(words))
    lengths = corpus.lengths
    if window is None:
        n_windows = np.ones(len(corpus), dtype=np.int64)
    else:
        n_windows = np.maximum(lengths - window + 1, 1)
    window_offset = np.zeros(len(corpus) + 1, dtype=np.int64)
    np.cumsum(n_windows, out=window_offset[1:])
    doc = np.repeat(np.arange(len(corpus)), lengths)
    local = np.arange(len(corpus.tokens), dtype=np.int64) - corpus.offsets[doc]
    cols = column[corpus.tokens]
    kept = cols >= 0
    doc, local, cols = doc[kept], local[kept], cols[kept]
    if window is None:
        rows_all, cols_all = window_offset[doc], cols
    else:
        rows, cs = [], []
        for back in range(window):  # the window starting `back` tokens before this one
            start = local - back
            ok = (start >= 0) & (start < n_windows[doc])
            rows.append(window_offset[doc[ok]] + start[ok])
            cs.append(cols[ok])
        rows_all, cols_all = np.concatenate(rows), np.concatenate(cs)
    total = int(window_offset[-1])
    matrix = coo_matrix((np.ones(len(rows_all), dtype=np.float64), (rows_all, cols_all)),
                        shape=(total, len(words))).tocsr()
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix, total


@dataclass
class Cooccurrence:
    """Window counts of a set of words: ``words`` (ids), ``single[i]`` windows with word i,
    ``joint[i, j]`` windows with both, ``n_windows`` in all."""

    words: np.ndarray
    single: np.ndarray
    joint: np.ndarray
    n_windows: int

    def npmi(self, topic: np.ndarray) -> float:
        """Mean NPMI over the word pairs of one topic (ids among ``words``); NaN for < 2 words."""
        index = {int(w): i for i, w in enumerate(self.words)}
        idx = np.array([index[int(w)] for w in topic], dtype=np.int64)
        if len(idx) < 2:
            return float("nan")
        i, j = np.triu_indices(len(idx), k=1)
        a, b = idx[i], idx[j]
        n = float(self.n_windows)
        joint = self.joint[a, b]
        values = np.full(len(a), -1.0)
        both = joint > 0
        p_ab = joint[both] / n
        p_a, p_b = self.single[a[both]] / n, self.single[b[both]] / n
        denom = -np.log(p_ab)
        pmi = np.log(p_ab) - np.log(p_a) - np.log(p_b)
        values[both] = np.where(denom > 0, pmi / np.where(denom > 0, denom, 1.0), 1.0)
        return float(values.mean())


def cooccurrence(corpus: Corpus, words, window: int | None = DEFAULT_WINDOW) -> Cooccurrence:
    """Count the windows of ``corpus`` containing each of ``words`` and each pair."""
    if window is not None and window < 1:
        raise CPGBNInputError(f"window must be >= 1 (or None for whole documents), got {window}")
    words = np.unique(np.asarray(words, dtype=np.int64))
    if len(words) and (words.min() < 0 or words.max() >= len(corpus.vocabulary)):
        raise CPGBNInputError("topic word ids must index the corpus vocabulary")
    matrix, n_windows = _window_matrix(corpus, words, window)
    single = np.asarray(matrix.sum(axis=0)).reshape(-1)
    joint = (matrix.T @ matrix).toarray()
    return Cooccurrence(words, single, joint, max(n_windows, 1))


def npmi(topics, corpus: Corpus, window: int | None = DEFAULT_WINDOW) -> np.ndarray:
    """Mean pairwise NPMI of each topic (a list of word-id arrays) on ``corpus``."""
    topics = [np.asarray(t, dtype=np.int64) for t in topics]
    if not topics:
        return np.zeros(0)
    counts = cooccurrence(corpus, np.concatenate(topics), window)
    return np.array([counts.npmi(t) for t in topics])


def lda_topic_words(corpus: Corpus, n_topics: int, top_n: int = DEFAULT_TOP_N, *,
                    n_iter: int = 50, seed: int = 0) -> list[np.ndarray]:
    """Fit LDA (scikit-learn, batch variational Bayes, as the ``lda`` baseline of
    ``cpgbn evaluate``) on the corpus's word counts; return each topic's ``top_n`` word ids
    (``<unk>`` excluded)."""
    if n_topics < 1:
        raise CPGBNInputError(f"n_topics must be >= 1, got {n_topics}")
    lda = lda_estimator(n_topics, n_iter, seed).fit(document_word_counts(corpus))
    topics = []
    for weights in lda.components_:
        weights = weights.copy()
        weights[OOV_ID] = -np.inf
        topics.append(np.argsort(-weights, kind="stable")[:top_n])
    return topics


@dataclass
class CoherenceResult:
    """NPMI of every kernel and, optionally, of LDA topics on the same corpus and windows."""

    kernel_npmi: np.ndarray
    lda_npmi: np.ndarray | None
    window: int | None
    top_n: int
    n_windows: int
    lda_topics: list[list[str]] | None = None
    corpus_npmi: np.ndarray | None = None
    """NPMI of the words each kernel explains in the corpus (with assignments)."""

    @property
    def mean(self) -> float:
        return float(np.nanmean(self.kernel_npmi)) if len(self.kernel_npmi) else float("nan")

    @property
    def lda_mean(self) -> float | None:
        return None if self.lda_npmi is None else float(np.nanmean(self.lda_npmi))

    @property
    def corpus_mean(self) -> float | None:
        return None if self.corpus_npmi is None else float(np.nanmean(self.corpus_npmi))

    def describe(self) -> str:
        """One line; with assignments it leads with the words each kernel explains in the
        corpus, the counterpart of LDA's topic words (the union of the columns' top words
        mixes alternatives that never occur together, and is shown after them)."""
        where = "whole documents" if self.window is None else f"sliding windows of {self.window} tokens"
        text = f"NPMI of the top {self.top_n} words ({where}, {self.n_windows} windows): "
        if self.corpus_npmi is not None:
            text += f"the words CPGBN's kernels explain in the corpus {self.corpus_mean:+.3f}"
        else:
            text += f"CPGBN kernels {self.mean:+.3f}"
        if self.lda_npmi is not None:
            text += f", LDA with {len(self.lda_npmi)} topics {self.lda_mean:+.3f}"
        if self.corpus_npmi is not None:
            text += f" (the top words of the kernels' columns {self.mean:+.3f})"
        return text

    def to_dict(self) -> dict:
        return {"window": self.window, "top_n": self.top_n, "n_windows": self.n_windows,
                "kernel_npmi": [float(x) for x in self.kernel_npmi], "mean": self.mean,
                "lda_npmi": None if self.lda_npmi is None else [float(x) for x in self.lda_npmi],
                "lda_mean": self.lda_mean,
                "corpus_npmi": None if self.corpus_npmi is None else [float(x) for x in self.corpus_npmi],
                "corpus_mean": self.corpus_mean}


def model_coherence(model, X, *, window: int | None = DEFAULT_WINDOW, top_n: int = DEFAULT_TOP_N,
                    lda: bool = True, lda_iter: int = 50, seed: int = 0,
                    assignments=None) -> CoherenceResult:
    """NPMI of each kernel of ``model`` on the documents ``X`` (strings or a Corpus over the
    model's vocabulary; normally the training corpus) and, with ``lda``, of an LDA with as
    many topics as kernels fitted on the same documents.  With ``assignments`` (from
    :func:`~cpgbn.explain.phrases.assign_kernels` on the same documents) also the NPMI of the
    words each kernel explains there."""
    check_is_fitted(model)
    corpus = model.encode(X)
    kernel_topics = kernel_topic_words(model, top_n)
    lda_topics = (lda_topic_words(corpus, len(kernel_topics), top_n, n_iter=lda_iter, seed=seed)
                  if lda else [])
    corpus_topics = assigned_topic_words(assignments, top_n) if assignments is not None else []
    counts = cooccurrence(corpus, np.concatenate(kernel_topics + lda_topics + corpus_topics), window)
    return CoherenceResult(
        kernel_npmi=np.array([counts.npmi(t) for t in kernel_topics]),
        lda_npmi=np.array([counts.npmi(t) for t in lda_topics]) if lda else None,
        window=window, top_n=top_n, n_windows=counts.n_windows,
        lda_topics=[corpus.vocabulary.decode(list(t)) for t in lda_topics] if lda else None,
        corpus_npmi=(np.array([counts.npmi(t) for t in corpus_topics])
                     if assignments is not None else None))
