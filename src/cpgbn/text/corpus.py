"""A tokenized, encoded document collection in ragged (CSR-like) layout.

The samplers walk every word position of every document, so the corpus keeps all token
ids in one flat ``int32`` array with an ``int64`` offset array, the layout numba kernels
read directly, instead of a Python list of per-document arrays.  Labels ride along as
strings; :meth:`Corpus.label_codes` turns them into integers against a fixed list of class
names so train and test sets share one coding even when the test set lacks a class.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from cpgbn.errors import CPGBNInputError
from cpgbn.text.tokenize import tokenize
from cpgbn.text.vocabulary import Vocabulary

__all__ = ["Corpus"]


@dataclass(frozen=True, eq=False)
class Corpus:
    """Documents as word ids over one vocabulary.

    Attributes
    ----------
    tokens:
        All token ids, document after document (``np.int32``, values in
        ``0..len(vocabulary)-1``).
    offsets:
        ``np.int64`` of length ``n_docs + 1``; document ``j`` is
        ``tokens[offsets[j]:offsets[j + 1]]``.  Starts at 0, never decreases, ends at
        ``len(tokens)``.  Empty documents are allowed.
    labels:
        One label string per document (``np.ndarray`` of dtype object), or ``None``.
    vocabulary:
        The :class:`~cpgbn.text.vocabulary.Vocabulary` the ids refer to.

    The constructor converts the arrays to these dtypes and raises CPGBNInputError when
    they are inconsistent.  The arrays are made read-only; use :meth:`subset` or build a
    new corpus to change anything.
    """

    tokens: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray | None
    vocabulary: Vocabulary

    def __post_init__(self) -> None:
        tokens = _as_int_array(self.tokens, np.int32, "tokens")
        offsets = _as_int_array(self.offsets, np.int64, "offsets")
        if not isinstance(self.vocabulary, Vocabulary):
            raise CPGBNInputError("corpus vocabulary must be a Vocabulary")
        _check_offsets(offsets, len(tokens))
        _check_ids(tokens, len(self.vocabulary))
        labels = None if self.labels is None else _as_labels(self.labels, len(offsets) - 1)
        for name, value in (("tokens", tokens), ("offsets", offsets), ("labels", labels)):
            if value is not None:
                value.flags.writeable = False
            object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ construction
    @classmethod
    def of(cls, X, vocabulary: Vocabulary | None = None, vocab_size: int | None = None
           ) -> Corpus:
        """Documents in a form the estimators take, as a Corpus: a Corpus as it is (it must
        use ``vocabulary`` when one is given), or document strings (a list, a numpy array, a
        pandas column) encoded with ``vocabulary``, or with a new vocabulary of at most
        ``vocab_size`` rows."""
        if isinstance(X, Corpus):
            if vocabulary is not None and X.vocabulary != vocabulary:
                raise CPGBNInputError("the corpus uses a different vocabulary than the fitted model;"
                                      " pass raw texts or encode with model.vocabulary_")
            return X
        # a pandas Series or Index is not a registered Sequence; its tolist() is the column
        if isinstance(X, str) or not (isinstance(X, Sequence | np.ndarray) or hasattr(X, "tolist")):
            raise CPGBNInputError("X must be a sequence of document strings (a list, an array, a "
                                  "pandas column), a cpgbn.text.Corpus or a cpgbn.text.TextFile")
        texts = X if isinstance(X, Sequence) else X.tolist()
        if vocabulary is None:
            return cls.from_texts(texts, vocab_size=vocab_size)
        return cls.from_texts(texts, vocabulary=vocabulary)

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        vocabulary: Vocabulary | None = None,
        vocab_size: int | None = None,
        labels: Sequence[str] | None = None,
    ) -> Corpus:
        """Tokenize ``texts`` and encode them.

        With ``vocabulary=None`` a vocabulary of at most ``vocab_size`` rows is built from
        these texts (every distinct token is kept when ``vocab_size`` is None); otherwise
        the given vocabulary encodes them and unknown tokens become 0.
        """
        if isinstance(texts, str):
            raise CPGBNInputError("texts must be a sequence of strings, not one string")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise CPGBNInputError(
                    f"document {i + 1} is {type(text).__name__}, not str; every document must be "
                    "one string of text (decode bytes, replace missing values)")
        if vocabulary is not None and vocab_size is not None:
            raise CPGBNInputError("give either a vocabulary or a vocab_size, not both")
        # One document's token strings at a time: the lists of a whole corpus's tokens as
        # Python strings (some 70 bytes a token) would hold ~400 MB for IMDB's 25k reviews,
        # and the interpreter keeps that memory after they are freed.
        if vocabulary is not None:
            ids = [vocabulary.encode(tokenize(text)) for text in texts]
            return cls._from_id_arrays(ids, vocabulary, labels)
        seen: dict[str, int] = {}       # every distinct token -> its id in order of appearance
        first_ids = [np.fromiter((seen.setdefault(t, len(seen)) for t in tokens), np.int32,
                                 len(tokens)) for tokens in map(tokenize, texts)]
        all_ids = np.concatenate(first_ids) if first_ids else np.zeros(0, np.int32)
        counts = np.bincount(all_ids, minlength=len(seen))
        if vocab_size is None:  # keep every distinct token
            vocab_size = max(len(seen) + 1, 2)
        vocabulary = Vocabulary.from_frequencies(dict(zip(seen, counts.tolist())), vocab_size)
        to_final = vocabulary.encode(list(seen))      # first-seen id -> vocabulary id
        return cls._from_id_arrays([to_final[ids] for ids in first_ids], vocabulary, labels)

    @classmethod
    def _from_id_arrays(cls, ids: list, vocabulary: Vocabulary, labels) -> Corpus:
        lengths = np.fromiter((len(a) for a in ids), np.int64, len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = np.concatenate(ids).astype(np.int32) if ids else np.zeros(0, np.int32)
        return cls(tokens, offsets, None if labels is None else list(labels), vocabulary)

    @classmethod
    def from_token_lists(
        cls,
        token_lists: Sequence[Sequence[str]],
        vocabulary: Vocabulary | None = None,
        vocab_size: int | None = None,
        labels: Sequence[str] | None = None,
    ) -> Corpus:
        """Like :meth:`from_texts` for documents that are already tokenized."""
        if vocabulary is not None and vocab_size is not None:
            raise CPGBNInputError("give either a vocabulary or a vocab_size, not both")
        if vocabulary is None:
            if vocab_size is None:  # keep every distinct token
                vocab_size = max(len({t for tokens in token_lists for t in tokens}) + 1, 2)
            vocabulary = Vocabulary.build(token_lists, vocab_size)
        lengths = np.fromiter((len(t) for t in token_lists), np.int64, len(token_lists))
        offsets = np.zeros(len(token_lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = vocabulary.encode(list(chain.from_iterable(token_lists)))
        return cls(tokens, offsets, None if labels is None else list(labels), vocabulary)

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        classes = "unlabeled" if self.labels is None else f"{len(self.label_names)} classes"
        return (f"Corpus({len(self)} documents, {len(self.tokens)} tokens, "
                f"vocabulary of {len(self.vocabulary)}, {classes})")

    @property
    def lengths(self) -> np.ndarray:
        """Number of tokens per document (``np.int64``)."""
        return np.diff(self.offsets)

    @property
    def n_tokens(self) -> int:
        """Total number of tokens in the corpus."""
        return int(len(self.tokens))

    def document(self, j: int) -> np.ndarray:
        """The token ids of document ``j`` (a read-only view; negative ``j`` counts back)."""
        n = len(self)
        if not -n <= j < n:
            raise IndexError(f"document {j} out of range for a corpus of {n}")
        j %= n
        return self.tokens[self.offsets[j]:self.offsets[j + 1]]

    def subset(self, indices: Sequence[int] | np.ndarray) -> Corpus:
        """A new corpus with documents ``indices``, in the order given (repeats allowed).

        A boolean mask of length ``len(self)`` selects the documents where it is True.
        """
        idx = self._check_indices(indices)
        lengths = self.lengths[idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # position of each new token in the old flat array
        shift = np.repeat(self.offsets[:-1][idx] - offsets[:-1], lengths)
        tokens = self.tokens[np.arange(offsets[-1], dtype=np.int64) + shift]
        labels = None if self.labels is None else self.labels[idx]
        return Corpus(tokens, offsets, labels, self.vocabulary)

    # ------------------------------------------------------------------ labels
    @property
    def label_names(self) -> list[str]:
        """The distinct labels, sorted (empty when the corpus has no labels)."""
        if self.labels is None:
            return []
        return sorted(set(self.labels.tolist()))

    def label_codes(self, names: Sequence[str] | None = None) -> np.ndarray:
        """Labels as ``np.int64`` positions in ``names`` (default :attr:`label_names`).

        Pass the training corpus's ``label_names`` when coding a test corpus, so both
        use one coding.
        """
        if self.labels is None:
            raise CPGBNInputError("this corpus has no labels")
        names = self.label_names if names is None else list(names)
        position = {name: i for i, name in enumerate(names)}
        missing = sorted(set(self.labels.tolist()) - position.keys())
        if missing:
            raise CPGBNInputError(f"labels {missing[:5]} are not among the class names given")
        return np.fromiter((position[x] for x in self.labels), np.int64, len(self.labels))

    def _check_indices(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise CPGBNInputError(
                    f"boolean mask must have length {len(self)}, got shape {idx.shape}")
            return np.flatnonzero(idx)
        if idx.size == 0:
            return np.zeros(0, dtype=np.int64)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise CPGBNInputError("subset indices must be a 1-D array of integers")
        if idx.min() < -len(self) or idx.max() >= len(self):
            raise CPGBNInputError(f"subset index out of range for a corpus of {len(self)}")
        return idx.astype(np.int64) % max(len(self), 1)


def _as_int_array(values: Iterable[int] | np.ndarray, dtype: type, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise CPGBNInputError(f"corpus {name} must be 1-D, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=dtype)
    if not np.issubdtype(array.dtype, np.integer):
        raise CPGBNInputError(f"corpus {name} must be integers, got dtype {array.dtype}")
    info = np.iinfo(dtype)
    if array.min() < info.min or array.max() > info.max:
        raise CPGBNInputError(f"corpus {name} do not fit in {np.dtype(dtype).name}")
    return np.array(array, dtype=dtype)  # a private copy


def _check_offsets(offsets: np.ndarray, n_tokens: int) -> None:
    if len(offsets) == 0 or offsets[0] != 0:
        raise CPGBNInputError("corpus offsets must start with 0")
    if (np.diff(offsets) < 0).any():
        raise CPGBNInputError("corpus offsets must not decrease")
    if offsets[-1] != n_tokens:
        raise CPGBNInputError(
            f"corpus offsets end at {offsets[-1]} but there are {n_tokens} tokens")


def _check_ids(tokens: np.ndarray, vocab_size: int) -> None:
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        bad = tokens.min() if tokens.min() < 0 else tokens.max()
        raise CPGBNInputError(
            f"token id {bad} out of range for a vocabulary of {vocab_size}")


def _as_labels(labels: Sequence[str] | np.ndarray, n_docs: int) -> np.ndarray:
    values = list(labels.tolist() if isinstance(labels, np.ndarray) else labels)
    if len(values) != n_docs:
        raise CPGBNInputError(f"got {len(values)} labels for {n_docs} documents")
    if not all(isinstance(v, str) for v in values):
        raise CPGBNInputError("labels must be strings")
    array = np.empty(n_docs, dtype=object)
    array[:] = values
    return array
