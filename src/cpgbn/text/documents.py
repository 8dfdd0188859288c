"""One door for documents: :class:`Documents` is what ``fit``, ``transform``, ``predict_proba``
and ``score`` make of their ``X`` before anything else reads it.

An estimator takes documents in three forms: strings in memory (a list, an array, a pandas
column), an encoded :class:`~cpgbn.text.Corpus`, or a :class:`~cpgbn.text.TextFile` on disk.
Which of them ``X`` is gets decided here, once; the code below the estimator asks a
``Documents`` for what it needs instead of testing the form again:

* :meth:`Documents.blocks` -- the documents a block at a time: a file's blocks of lines, or
  the documents in memory as one block (what a transform, a prediction and the post-fit
  records iterate over);
* :meth:`Documents.read` -- every document at once with its labels (the modes that hold the
  whole corpus read a file whole);
* :meth:`Documents.corpus` -- the documents encoded (with a fitted vocabulary, or a new one);
* :meth:`Documents.count` and :meth:`Documents.line_range` -- the count, the digest and one
  range of global ids (a worker of a distributed fit reads its shard by them);
* :attr:`Documents.streamed`, :attr:`Documents.file`, :attr:`Documents.labeled` -- whether the
  documents stay on disk, the file, and whether they carry labels.

scikit-learn's estimators normalise ``X`` once at the door (``validate_data``) and iterate
over batches below it; this is that door for documents that may not fit in memory.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cpgbn.blocks import STREAM_BLOCK_DOCS
from cpgbn.errors import CPGBNInputError
from cpgbn.text.corpus import Corpus
from cpgbn.text.stream import (TextFile, count_documents, documents_digest, read_line_range)
from cpgbn.text.vocabulary import Vocabulary

__all__ = ["Documents", "labels_per_document"]


def labels_per_document(y, n_docs: int, dtype=None) -> np.ndarray | None:
    """``y`` as an array (of ``dtype``) of one label per document, or the error that it is
    not; None stays None.  Every fit's labels pass here (the classifier's too)."""
    if y is None:
        return None
    labels = np.asarray(y, dtype=dtype)
    if labels.shape != (n_docs,):
        raise CPGBNInputError(f"y must hold one label per document: {n_docs} documents, y of "
                              f"shape {labels.shape}")
    return labels


class Documents:
    """The documents ``X`` of an estimator's call, in whichever form they came (module
    docstring).  Made with :meth:`of`, which returns a ``Documents`` as it is, so that a
    function may be handed either."""

    __slots__ = ("_X", "_file")

    def __init__(self, X):
        self._file = X if isinstance(X, TextFile) else None
        self._X = X

    @classmethod
    def of(cls, X) -> Documents:
        """``X`` (strings, a Corpus, a TextFile, or a Documents) as a Documents."""
        return X if isinstance(X, Documents) else cls(X)

    # ------------------------------------------------------------------ what they are
    @property
    def streamed(self) -> bool:
        """Whether the documents stay on disk (a TextFile), to be read a block at a time."""
        return self._file is not None

    @property
    def file(self) -> TextFile | None:
        """The TextFile the documents are read from (None: they are in memory)."""
        return self._file

    @property
    def labeled(self) -> bool:
        """Whether the documents carry their own labels: a file of ``label<TAB>text`` lines
        (documents in memory carry none: their labels are the caller's ``y``)."""
        return self._file is not None and self._file.labeled

    # ------------------------------------------------------------------ reading
    def read(self) -> tuple[object, list | None]:
        """(every document at once, the labels they carry or None): a file is read whole, the
        documents in memory are themselves (their labels are the caller's ``y``)."""
        if self._file is not None:
            return self._file.read()
        return self._X, None

    def blocks(self, block_docs: int) -> Iterator:
        """The documents a block at a time: a file's blocks of ``block_docs`` lines (one held
        at once), or the documents in memory as a single block (in their own form)."""
        if self._file is not None:
            yield from self._file.blocks(block_docs)
        else:
            yield self._X

    def corpus(self, vocabulary: Vocabulary | None = None,
               vocab_size: int | None = None) -> Corpus:
        """The documents encoded (:meth:`Corpus.of <cpgbn.text.Corpus.of>`; a file is read
        whole): with ``vocabulary``, or with a new vocabulary of at most ``vocab_size``
        rows."""
        return Corpus.of(self.read()[0], vocabulary, vocab_size)

    def n_docs(self) -> int:
        """The number of documents (a file: one streaming pass over its lines)."""
        if self._file is not None:
            return sum(len(block) for block in self._file.blocks(STREAM_BLOCK_DOCS))
        return len(self._X)

    # ------------------------------------------------------------------ global ids
    def count(self) -> tuple[int, str]:
        """(the number of documents, a digest of them: :func:`~cpgbn.text.stream.
        documents_digest`); a file in one streaming pass.  An encoded Corpus is refused: its
        vocabulary is the one process' that encoded it, so workers could not share it."""
        if self._file is not None:
            return count_documents(self._file)
        X = self._X
        if isinstance(X, Corpus):
            raise CPGBNInputError("a distributed fit reads texts or a TextFile, not an encoded "
                                  "Corpus (its vocabulary would be one worker's)")
        if isinstance(X, str) or not hasattr(X, "__len__"):
            raise CPGBNInputError("X must be a sequence of document strings or a "
                                  "cpgbn.text.TextFile")
        return len(X), documents_digest(X).hexdigest()

    def line_range(self, start: int, stop: int) -> tuple[list, list | None]:
        """(texts, the labels they carry or None) of the documents with global ids
        ``start .. stop - 1``: a file's lines read past a block at a time, never held."""
        if self._file is not None:
            return read_line_range(self._file, start, stop)
        return list(self._X[start:stop]), None

    def __repr__(self) -> str:
        return f"Documents({self._X!r})" if self.streamed else \
            f"Documents(<{type(self._X).__name__}>)"
