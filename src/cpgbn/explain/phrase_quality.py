"""Phrase quality: do the phrases a model shows occur, and do their words belong together?

Word-list coherence (the NPMI of a topic's top words co-occurring within a window,
:mod:`cpgbn.explain.coherence`) rates a bag-of-words topic, and rates a phrase kernel unfairly:
the words of one column are alternatives ("how many _ | how long _") that rarely occur together.
What the reader of a phrase needs is

* support: whether the phrase occurs in the corpus as contiguous words (``_`` any word), and
  how often;
* association: whether its fixed words occur together, at their offsets, more often than
  chance.  For a phrase g with n >= 2 fixed words w_1..w_n, the n-gram NPMI

      NPMI(g) = log(p(g) / prod_i p(w_i)) / ((n - 1) * -log p(g)),

  where, over the window starts (the positions where the whole phrase fits inside a document),
  p(g) is the share at which every fixed word is at its offset and p(w_i) the share at which
  w_i is at its offset.  For n = 2 this is Bouma's (2009) NPMI of a bigram; dividing by n - 1 keeps n words that
  always occur together at 1.  A phrase that never occurs scores -1.  A phrase with one fixed
  word ("what _ _") has no association: it is a word at a position, not a phrase.

Both numbers apply to any list of phrases (the names of a model's kernels, the labels an LDA
labeller gives its topics, the collocation baseline :func:`collocations`), so that they are
compared on one scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CPGBNInputError
from ..text.corpus import Corpus
from ..text.vocabulary import OOV_ID
from .hierarchy import HIDDEN

__all__ = ["ANY", "PhraseQuality", "phrase_counts", "phrase_npmi", "phrase_quality",
           "collocations", "MIN_SUPPORT", "KernelPhraseQuality", "kernel_phrase_quality"]

#: A slot of a phrase pattern that matches any token
ANY = -2
#: A phrase is supported when it occurs at least this many times
MIN_SUPPORT = 3


def _check_pattern(pattern, n_words: int) -> np.ndarray:
    pattern = np.asarray(pattern, dtype=np.int64).reshape(-1)
    if len(pattern) == 0:
        raise CPGBNInputError("a phrase pattern needs at least one slot")
    fixed = pattern[pattern != ANY]
    if len(fixed) == 0:
        raise CPGBNInputError("a phrase pattern needs at least one fixed word")
    if fixed.min() < 0 or fixed.max() >= n_words:
        raise CPGBNInputError("phrase word ids must index the corpus vocabulary")
    return pattern


def _starts(corpus: Corpus, span: int) -> np.ndarray:
    """Token offsets where a window of ``span`` tokens starts inside one document."""
    lengths = corpus.lengths
    n_starts = np.maximum(lengths - span + 1, 0)
    doc = np.repeat(np.arange(len(corpus)), n_starts)
    first = np.repeat(np.cumsum(n_starts) - n_starts, n_starts)
    return corpus.offsets[doc] + (np.arange(int(n_starts.sum())) - first)


def _match(corpus: Corpus, pattern: np.ndarray) -> tuple[int, int, np.ndarray]:
    """(occurrences of ``pattern`` as contiguous tokens, window starts of its length, and at
    how many starts each fixed word is at its offset)."""
    starts = _starts(corpus, len(pattern))
    match = np.ones(len(starts), dtype=bool)
    singles = []
    for f, v in enumerate(pattern):
        if v != ANY:
            here = corpus.tokens[starts + f] == v
            singles.append(int(here.sum()))
            match &= here
    return int(match.sum()), len(starts), np.array(singles, dtype=np.int64)


def _ngram_npmi(count, n_starts: int, singles) -> np.ndarray:
    """The n-gram NPMI (module docstring) from window counts: ``count`` of the ``n_starts``
    window starts hold the whole phrase, ``singles[i]`` its i-th fixed word at its offset
    (an array of n >= 2 rows; one value per phrase along the other axes); -1 for a phrase that
    never occurs, 1 for one at every start."""
    count = np.asarray(count, dtype=np.float64)
    singles = np.asarray(singles, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):   # the two ends, set below
        log_joint = np.log(count / n_starts)
        pmi = log_joint - np.log(singles / n_starts).sum(axis=0)
        value = pmi / ((len(singles) - 1) * -log_joint)
    return np.where(count == 0, -1.0, np.where(log_joint >= 0, 1.0, value))


def _match_npmi(count: int, n_starts: int, singles: np.ndarray) -> float:
    """:func:`_ngram_npmi` of one :func:`_match`; NaN for one fixed word or no window."""
    if len(singles) < 2 or n_starts == 0:
        return float("nan")
    return float(_ngram_npmi(count, n_starts, singles))


def phrase_counts(corpus: Corpus, patterns) -> np.ndarray:
    """How often each pattern (word ids, :data:`ANY` for an open slot) occurs in ``corpus`` as
    contiguous tokens of one document."""
    V = len(corpus.vocabulary)
    return np.array([_match(corpus, _check_pattern(p, V))[0] for p in patterns],
                    dtype=np.int64)


def phrase_npmi(corpus: Corpus, pattern) -> float:
    """The n-gram NPMI of the fixed words of ``pattern`` (module docstring); NaN for a pattern
    with one fixed word or a corpus without a window of its length."""
    return _match_npmi(*_match(corpus, _check_pattern(pattern, len(corpus.vocabulary))))


@dataclass
class PhraseQuality:
    """Support and association of a list of phrases on one corpus."""

    phrases: list[list[str]]
    """The phrases as tokens, :data:`~cpgbn.explain.hierarchy.HIDDEN` at an open slot."""
    counts: np.ndarray
    """Occurrences of each phrase in the corpus."""
    npmi: np.ndarray
    """n-gram NPMI of each phrase's fixed words; NaN for one fixed word."""

    @property
    def n_supported(self) -> int:
        """Phrases occurring at least :data:`MIN_SUPPORT` times."""
        return int(np.count_nonzero(self.counts >= MIN_SUPPORT))

    @property
    def n_multiword(self) -> int:
        """Phrases that fix two words or more."""
        return int(np.count_nonzero(np.isfinite(self.npmi)))

    @property
    def mean_npmi(self) -> float:
        """Mean NPMI of the phrases that fix two words or more (NaN if none does)."""
        values = self.npmi[np.isfinite(self.npmi)]
        return float(values.mean()) if len(values) else float("nan")

    def describe(self) -> str:
        n = len(self.phrases)
        text = (f"{self.n_supported} of {n} occur >= {MIN_SUPPORT} times, "
                f"{self.n_multiword} of {n} fix two words or more")
        if self.n_multiword:
            text += f" (their NPMI {self.mean_npmi:+.2f})"
        return text

    def to_dict(self) -> dict:
        return {"phrases": [list(p) for p in self.phrases],
                "counts": [int(c) for c in self.counts],
                "npmi": [float(x) if np.isfinite(x) else None for x in self.npmi],
                "n_supported": self.n_supported, "n_multiword": self.n_multiword,
                "mean_npmi": self.mean_npmi if self.n_multiword else None}


def _encode_phrase(phrase, vocabulary) -> np.ndarray:
    """Token list -> pattern: ``_`` is :data:`ANY`, a word out of the vocabulary (and
    ``<unk>``) is the out-of-vocabulary id."""
    return np.array([ANY if w == HIDDEN else int(vocabulary.encode([w])[0]) for w in phrase],
                    dtype=np.int64)


def phrase_quality(corpus: Corpus, phrases) -> PhraseQuality:
    """Support and NPMI (module docstring) of ``phrases`` (token lists or space-separated
    strings, ``_`` for an open slot) on ``corpus``."""
    phrases = [p.split() if isinstance(p, str) else list(p) for p in phrases]
    V = len(corpus.vocabulary)
    matches = [_match(corpus, _check_pattern(_encode_phrase(p, corpus.vocabulary), V))
               for p in phrases]   # one pass over the corpus per phrase, for both numbers
    return PhraseQuality(phrases=phrases,
                         counts=np.array([m[0] for m in matches], dtype=np.int64),
                         npmi=np.array([_match_npmi(*m) for m in matches]))


def collocations(corpus: Corpus, top: int = 12, min_count: int = 5) -> PhraseQuality:
    """The collocation baseline: the ``top`` contiguous bigrams of ``corpus`` that occur at
    least ``min_count`` times, ranked by NPMI (gensim's ``Phrases`` with its ``npmi`` scorer
    ranks the same way); ``<unk>`` excluded.  Written over numpy rather than gensim or NLTK:
    the counting is a dozen lines, and neither is a dependency of the library."""
    if top < 1 or min_count < 1:
        raise CPGBNInputError(f"top and min_count must be >= 1, got {top} and {min_count}")
    starts = _starts(corpus, 2)
    V = len(corpus.vocabulary)
    first, second = corpus.tokens[starts], corpus.tokens[starts + 1]
    keep = (first != OOV_ID) & (second != OOV_ID)
    keys, counts = np.unique(first[keep] * V + second[keep], return_counts=True)
    frequent = counts >= min_count
    keys, counts = keys[frequent], counts[frequent]
    scores = _ngram_npmi(counts, max(len(starts), 1),
                         [np.bincount(first, minlength=V)[keys // V],
                          np.bincount(second, minlength=V)[keys % V]])
    order = np.lexsort((keys, -scores))[:top]   # ties by word ids, for a stable list
    vocabulary = corpus.vocabulary
    phrases = [vocabulary.decode([int(k // V), int(k % V)]) for k in keys[order]]
    return PhraseQuality(phrases=phrases, counts=counts[order], npmi=scores[order])


#: Kernels whose names :func:`kernel_phrase_quality` scores: the most used, as ``cpgbn
#: topics`` shows them by default
SHOWN_KERNELS = 12


@dataclass
class KernelPhraseQuality:
    """How a fitted model's kernels read as phrases on a corpus, beside the collocation
    baseline."""

    names: PhraseQuality
    """The names of the most used kernels (of those not folded away)."""
    n_phrase_kernels: int
    """Kernels whose name fixes two words or more."""
    n_kernels: int
    collocations: PhraseQuality

    def describe(self) -> str:
        n = len(self.names.phrases)
        return (f"names of the {n} most used kernels: {self.names.describe()}; "
                f"{self.n_phrase_kernels} of {self.n_kernels} kernels fix two words or more; "
                f"collocation baseline (the {len(self.collocations.phrases)} bigrams of highest "
                f"NPMI): NPMI {self.collocations.mean_npmi:+.2f}")

    def to_dict(self) -> dict:
        return {"names": self.names.to_dict(), "n_phrase_kernels": self.n_phrase_kernels,
                "n_kernels": self.n_kernels, "collocations": self.collocations.to_dict()}


def kernel_phrase_quality(rows, corpus: Corpus, top: int = SHOWN_KERNELS
                          ) -> KernelPhraseQuality | None:
    """Score the names of the ``top`` most used kernels among the phrase table's ``rows``
    (:func:`~cpgbn.explain.kernel_table.kernel_table`, with corpus phrases) that are not
    folded away (:func:`~cpgbn.explain.kernel_table.shown_kernels`); None when no kernel has
    a name from the corpus."""
    from .kernel_table import shown_kernels
    named = [r for r in rows if r.corpus_phrases]
    if not named:
        return None
    shown = shown_kernels(named, top)
    return KernelPhraseQuality(
        names=phrase_quality(corpus, [r.corpus_phrases[0].words for r in shown]),
        n_phrase_kernels=sum(1 for r in named if r.n_named_columns >= 2),
        n_kernels=len(rows), collocations=collocations(corpus, top))
