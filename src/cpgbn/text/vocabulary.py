"""Fixed-size token vocabulary with a shared out-of-vocabulary row.

CPGBN works on one-hot word sequences over a vocabulary of ``V`` rows (the paper's
``V_pre``), so rare words must map somewhere.  Here every token outside the kept set maps
to id 0, ``"<unk>"``, which is an ordinary row of the model: its training count is the
number of dropped token occurrences, so the model sees the same number of tokens as the
text has.  Ranking is by training frequency with ties broken by the tokens' string order,
so the vocabulary depends on the word counts alone: not on the hash seed, and not on the
order of the documents.  The second matters: with ties broken by first occurrence, a
training file sorted by class (as SUBJ's is) keeps the rare words of the first class and
drops those of the last, so ``"<unk>"`` marks the last class in the training features but
not in the test features (SUBJ at V = 20000: 1.7% of tokens in objective training
sentences, none in subjective ones; ``experiments/vocab_ties.py``).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from cpgbn.errors import CPGBNInputError, ModelFormatError

__all__ = ["OOV_ID", "OOV_TOKEN", "Vocabulary"]

OOV_ID = 0
OOV_TOKEN = "<unk>"
_FORMAT = "cpgbn.vocabulary"
_VERSION = 1


class Vocabulary:
    """Token <-> id mapping; id 0 is the out-of-vocabulary token ``"<unk>"``.

    Parameters
    ----------
    tokens:
        The tokens by id; ``tokens[0]`` must be ``"<unk>"`` and all must be distinct.
    counts:
        Training frequency per id (zeros when omitted).

    Build one from tokenized documents with :meth:`Vocabulary.build`.
    """

    __slots__ = ("_tokens", "_index", "_counts")

    def __init__(self, tokens: Sequence[str], counts: Sequence[int] | np.ndarray | None = None):
        tokens = list(tokens)
        _check_tokens(tokens)
        if counts is None:
            counts_arr = np.zeros(len(tokens), dtype=np.int64)
        else:
            counts_arr = np.array(counts, dtype=np.int64)
            if counts_arr.shape != (len(tokens),) or (counts_arr < 0).any():
                raise CPGBNInputError(
                    f"vocabulary counts must be {len(tokens)} non-negative integers, "
                    f"got shape {counts_arr.shape}"
                )
        counts_arr.flags.writeable = False
        self._tokens = tokens
        self._index = {token: i for i, token in enumerate(tokens)}
        self._counts = counts_arr

    @classmethod
    def build(cls, token_lists: Iterable[Iterable[str]], size: int) -> Vocabulary:
        """Keep the ``size - 1`` most frequent tokens at ids ``1..size-1``.

        ``size`` counts every row, the ``"<unk>"`` row included.  Ties in frequency go to
        the token that sorts first as a string, so shuffling the documents gives the same
        vocabulary.  With fewer distinct tokens the vocabulary is smaller.  A literal
        ``"<unk>"`` in the input is counted as out of vocabulary.
        """
        size = _check_size(size)
        frequency: Counter[str] = Counter()
        for tokens in token_lists:
            frequency.update(tokens)
        return cls.from_frequencies(frequency, size)

    @classmethod
    def from_frequencies(cls, frequency: Mapping[str, int], size: int) -> Vocabulary:
        """:meth:`build` from token frequencies already counted (``frequency[token]``): the
        same ranking, ties and out-of-vocabulary row."""
        size = _check_size(size)
        frequency = dict(frequency)
        oov_literal = frequency.pop(OOV_TOKEN, 0)
        ranked = sorted(frequency.items(), key=lambda item: (-item[1], item[0]))
        kept, dropped = ranked[: size - 1], ranked[size - 1 :]
        oov_count = oov_literal + sum(count for _, count in dropped)
        tokens = [OOV_TOKEN] + [token for token, _ in kept]
        counts = [oov_count] + [count for _, count in kept]
        return cls(tokens, counts)

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._index

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._tokens == other._tokens and np.array_equal(self._counts, other._counts)

    def __repr__(self) -> str:
        preview = ", ".join(repr(t) for t in self._tokens[1:6])
        more = ", ..." if len(self) > 6 else ""
        return f"Vocabulary(size={len(self)}, tokens=['<unk>', {preview}{more}])"

    @property
    def tokens(self) -> list[str]:
        """The tokens by id (a copy; ``tokens[0] == "<unk>"``)."""
        return list(self._tokens)

    @property
    def counts(self) -> np.ndarray:
        """Training frequency per id (``np.int64``, read-only); id 0 holds all dropped tokens."""
        return self._counts

    def id_of(self, token: str) -> int:
        """The id of ``token``, or 0 (``"<unk>"``) when it is not in the vocabulary."""
        return self._index.get(token, OOV_ID)

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Map tokens to ids (``np.int32``); unknown tokens become 0."""
        tokens = tokens if isinstance(tokens, (list, tuple)) else list(tokens)
        # map over two iterables runs the lookups in C: twice as fast as a generator
        return np.fromiter(map(self._index.get, tokens, repeat(OOV_ID, len(tokens))),
                           dtype=np.int32, count=len(tokens))

    def decode(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        """Map ids back to tokens; an id outside ``0..len-1`` raises CPGBNInputError."""
        ids_arr = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids))
        if ids_arr.size == 0:
            return []
        if ids_arr.ndim != 1 or not np.issubdtype(ids_arr.dtype, np.integer):
            raise CPGBNInputError("decode expects a 1-D sequence of integer ids")
        low, high = int(ids_arr.min()), int(ids_arr.max())
        if low < 0 or high >= len(self):
            bad = low if low < 0 else high
            raise CPGBNInputError(f"token id {bad} out of range for a vocabulary of {len(self)}")
        return [self._tokens[i] for i in ids_arr.tolist()]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable plain dict; :meth:`from_dict` restores it exactly."""
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "tokens": list(self._tokens),
            "counts": [int(c) for c in self._counts],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocabulary:
        """Rebuild a vocabulary from :meth:`to_dict`; a malformed dict raises ModelFormatError."""
        if not isinstance(data, dict):
            raise ModelFormatError(f"vocabulary: expected a dict, got {type(data).__name__}")
        if data.get("format") != _FORMAT or data.get("version") != _VERSION:
            raise ModelFormatError(
                f"vocabulary: expected format {_FORMAT!r} version {_VERSION}, got "
                f"{data.get('format')!r} version {data.get('version')!r}"
            )
        tokens, counts = data.get("tokens"), data.get("counts")
        if not isinstance(tokens, list) or not isinstance(counts, list):
            raise ModelFormatError("vocabulary: 'tokens' and 'counts' must be lists")
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            raise ModelFormatError("vocabulary: 'counts' must hold integers")
        try:
            return cls(tokens, counts)
        except CPGBNInputError as exc:
            raise ModelFormatError(f"vocabulary: {exc}") from None


def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
        raise CPGBNInputError(f"vocab_size must be >= 2, got {size!r}")
    return int(size)


def _check_tokens(tokens: list[str]) -> None:
    if not tokens or tokens[0] != OOV_TOKEN:
        raise CPGBNInputError(f"vocabulary must start with {OOV_TOKEN!r} at id 0")
    if not all(isinstance(t, str) for t in tokens):
        raise CPGBNInputError("vocabulary tokens must be strings")
    seen: set[str] = set()
    for token in tokens:
        if token in seen:
            raise CPGBNInputError(f"vocabulary token {token!r} appears more than once")
        seen.add(token)
