"""What a training step receives: the batch record, and the streams of batches the training
loop (:func:`cpgbn.inference.training.train`) draws from.

A :class:`Batch` carries a step's documents as cells (:class:`~cpgbn.layers.cells.ConvData`),
each document's *global id* (its index in the training corpus, 0-based: the line of a file
minus one) and, when the corpus has them, its label.  Every source gives the same record, so an
algorithm never knows where its documents came from, and a supervised step sees the labels of
exactly the documents it draws.

Sources of blocks (consecutive documents, read one block at a time):

* :class:`ConvDataBlocks`: a corpus in memory (with its labels, when given);
* :class:`TextFileBlocks`: a one-document-per-line file (``label<TAB>text`` when labelled),
  holding one block and one byte offset per block, never the file.

Streams of batches (what the loop calls ``next()`` on; ``cursor`` says where one stands and is
saved in checkpoints; ``identity()`` goes into the checkpoint's fingerprint):

* :class:`Minibatches`: every epoch visits the blocks in a seeded order and shuffles each
  block's documents with a generator seeded by (seed, epoch, block) before cutting it into
  minibatches, so the sequence of minibatches is a function of the seed and the corpus;
* :class:`WholeCorpus`: the whole corpus at every step (a Gibbs sweep).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..blocks import STREAM_BLOCK_DOCS
from ..errors import CPGBNInputError, empty_document_error
from ..layers.batches import subset_cells
from ..layers.cells import ConvData, from_token_sequences
from . import streams

__all__ = ["Batch", "Cursor", "ConvDataBlocks", "TextFileBlocks", "text_encoder",
           "Minibatches", "WholeCorpus"]


@dataclass(frozen=True)
class Batch:
    """The documents of one training step.

    data : ConvData of the B documents.
    ids : (B,) int64 -- each document's index in the training corpus (its line - 1 in a file).
    labels : (B,) array of labels (as read: strings from a file), or None for unlabelled data.
    texts : the documents' texts, where a file's block was read (the post-fit records take
        their sample of documents from them: :mod:`cpgbn.explain.records`), else None.
    """

    data: ConvData
    ids: np.ndarray
    labels: np.ndarray | None = None
    texts: list | None = None

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, dtype=np.int64)
        object.__setattr__(self, "ids", ids)
        if ids.shape != (self.data.n_docs,):
            raise CPGBNInputError(f"a batch of {self.data.n_docs} documents needs as many ids, "
                                  f"got {ids.shape}")
        if self.labels is not None:
            labels = np.asarray(self.labels)
            object.__setattr__(self, "labels", labels)
            if labels.shape != (self.data.n_docs,):
                raise CPGBNInputError(f"a batch of {self.data.n_docs} documents needs as many "
                                      f"labels, got {labels.shape}")

    @property
    def n_docs(self) -> int:
        return self.data.n_docs

    def subset(self, docs) -> "Batch":
        """The documents at positions ``docs`` of this batch (in that order)."""
        docs = np.asarray(docs, dtype=np.int64)
        return Batch(subset_cells(self.data, docs), self.ids[docs],
                     None if self.labels is None else self.labels[docs])


# ---------------------------------------------------------------------- block sources
class ConvDataBlocks:
    """A corpus in memory (``labels``: one per document, or None) as blocks of ``block_docs``
    consecutive documents."""

    def __init__(self, data: ConvData, block_docs: int = STREAM_BLOCK_DOCS, *, labels=None):
        if int(block_docs) < 1:
            raise CPGBNInputError(f"block_docs must be >= 1, got {block_docs}")
        if data.n_docs < 1:
            raise CPGBNInputError("cannot train on an empty corpus (0 documents)")
        if labels is not None and len(labels) != data.n_docs:
            raise CPGBNInputError(f"{len(labels)} labels for {data.n_docs} documents: give one "
                                  "label per document")
        self.data, self.block_docs = data, int(block_docs)
        self.labels = None if labels is None else np.asarray(labels)

    @property
    def n_docs(self) -> int:
        return self.data.n_docs

    @property
    def n_blocks(self) -> int:
        return -(-self.data.n_docs // self.block_docs)

    @property
    def filter_width(self) -> int:
        return int(self.data.filter_width)

    def identity(self) -> dict:
        return {"kind": "memory", "n_docs": self.data.n_docs, "n_cells": self.data.n_cells,
                "block_docs": self.block_docs}

    def read_block(self, block: int) -> Batch:
        """Block ``block``'s documents, with their global ids and labels."""
        start = block * self.block_docs
        ids = np.arange(start, min(self.data.n_docs, start + self.block_docs))
        return Batch(subset_cells(self.data, ids), ids,
                     None if self.labels is None else self.labels[ids])


def text_encoder(vocabulary, filter_width: int, token_count="bernoulli-poisson",
                 padding: int = 0):
    """``encode(texts, first_line) -> ConvData`` for :class:`TextFileBlocks`: tokenize, encode
    with ``vocabulary`` (unknown words -> 0), cells as the Gibbs path builds them; an empty
    document raises the Gibbs path's one-line error, naming its line of the file."""
    from ..text.corpus import Corpus

    def encode(texts, first_line: int) -> ConvData:
        corpus = Corpus.from_texts(texts, vocabulary=vocabulary)
        empty = np.flatnonzero(corpus.lengths == 0)
        if len(empty):
            raise empty_document_error(first_line + int(empty[0]))
        return from_token_sequences(corpus.tokens, corpus.offsets, filter_width, token_count,
                                    padding)

    encode.filter_width = int(filter_width)
    return encode


class TextFileBlocks:
    """A one-document-per-line file (``label<TAB>text`` with ``labeled=True``; ``.gz`` read
    through) as blocks of ``block_docs`` lines, each turned into a ConvData by ``encode``
    (:func:`text_encoder`), with the lines' labels when the file is labelled.  Holds one block
    at a time.

    The first use indexes the file in one streaming pass (:func:`~cpgbn.text.readers.
    index_line_blocks`: N for rho = N / |batch|, and one byte offset per block, so blocks can
    be visited in any order), unless ``scan`` gives the index (a
    :class:`~cpgbn.text.stream.FileScan` of blocks of ``block_docs`` lines: its offsets, count
    and the file's stamp before it); a block read after the file's size or modification time
    changed is refused (its offsets would cut other lines).  ``max_block_docs`` records the
    most documents held at once.
    """

    def __init__(self, path, encode, block_docs: int = STREAM_BLOCK_DOCS, *, labeled: bool = False,
                 missing_labels: bool = False, scan=None):
        if int(block_docs) < 1:
            raise CPGBNInputError(f"block_docs must be >= 1, got {block_docs}")
        self.path, self.encode = Path(path), encode
        self.block_docs, self.labeled = int(block_docs), bool(labeled)
        self.missing_labels = bool(missing_labels)   # empty labels read as "" (unlabelled)
        #: F of the cells ``encode`` builds (set by :func:`text_encoder`)
        self.filter_width = getattr(encode, "filter_width", None)
        self._index = None
        self.max_block_docs = 0
        if (scan is not None and scan.stamp is not None and scan.block_offsets
                and scan.block_lines == self.block_docs):   # the scan's blocks are these
            self._stamp = scan.stamp
            self._index = (list(scan.block_offsets), scan.n_docs)

    def _indexed(self):
        if self._index is None:
            from ..text.readers import index_line_blocks
            self._stamp = self._file_stamp()   # before the pass: an edit during it shows
            self._index = index_line_blocks(self.path, self.block_docs)
        return self._index

    def _file_stamp(self) -> tuple[int, int]:
        stat = self.path.stat()
        return stat.st_size, stat.st_mtime_ns

    @property
    def n_docs(self) -> int:
        return self._indexed()[1]

    @property
    def n_blocks(self) -> int:
        return len(self._indexed()[0])

    def identity(self) -> dict:
        stat = self.path.stat()
        return {"kind": "file", "path": str(self.path.resolve()), "size": stat.st_size,
                "n_docs": self.n_docs, "block_docs": self.block_docs}

    def read_block(self, block: int) -> Batch:
        """Block ``block``'s documents (lines block * block_docs + 1, ...), with their global
        ids (line - 1) and, for a labelled file, their labels."""
        from ..text.readers import read_line_blocks
        offsets, _ = self._indexed()
        stamp = self._file_stamp()
        if stamp != self._stamp:   # the byte offsets would cut other lines
            raise CPGBNInputError(
                f"{self.path} changed while it was being read in blocks (size {self._stamp[0]:,}"
                f" -> {stamp[0]:,} bytes, or its modification time): leave the file as it is "
                "until the run ends, and start it again")
        first_doc = block * self.block_docs
        blocks = read_line_blocks(self.path, self.block_docs, labeled=self.labeled,
                                  start=offsets[block], first_line=first_doc + 1,
                                  missing_labels=self.missing_labels)
        lines = next(blocks, None)
        blocks.close()
        if lines is None:
            raise CPGBNInputError(f"{self.path}: no documents at byte {offsets[block]} (the "
                                  "file changed since it was indexed?)")
        self.max_block_docs = max(self.max_block_docs, len(lines.texts))
        ids = np.arange(first_doc, first_doc + len(lines.texts))
        labels = None if lines.labels is None else np.asarray(lines.labels)
        return Batch(self.encode(lines.texts, lines.first_line), ids, labels, lines.texts)


# ---------------------------------------------------------------------- streams of batches
@dataclass
class Cursor:
    """Where a minibatch stream stands: the next minibatch is number ``batch`` of the
    ``block``-th block visited in epoch ``epoch``."""

    epoch: int = 0
    block: int = 0
    batch: int = 0


class Minibatches:
    """Minibatches of ``batch_size`` documents from a block source (module docstring).

    A block of n documents gives ceil(n / batch_size) minibatches (the last one smaller when n
    is not a multiple), each a :class:`Batch` whose documents keep the block's order.
    :meth:`next` returns the next one and advances ``cursor``.
    """

    def __init__(self, source, batch_size: int, seed: int, cursor: Cursor | None = None):
        if int(batch_size) < 1:
            raise CPGBNInputError(f"batch_size must be >= 1, got {batch_size}")
        self.source, self.batch_size, self.seed = source, int(batch_size), int(seed)
        self.cursor = Cursor() if cursor is None else cursor
        self._block = None  # (key, Batch of the block, order)
        self._order = None  # (epoch, block order)

    def identity(self) -> dict:
        return {"source": self.source.identity(), "batch_size": self.batch_size,
                "seed": self.seed}

    def _current_block(self):
        c = self.cursor
        if self._order is None or self._order[0] != c.epoch:
            rng = np.random.default_rng(streams.derived_seed(self.seed, streams.BLOCK_ORDER,
                                                             c.epoch))
            self._order = (c.epoch, rng.permutation(self.source.n_blocks))
        block = int(self._order[1][c.block])
        key = (c.epoch, block)
        if self._block is None or self._block[0] != key:
            self._block = None  # drop the old block before reading the next one
            whole = self.source.read_block(block)
            order = np.random.default_rng(streams.derived_seed(
                self.seed, streams.BLOCK_SHUFFLE, c.epoch, block)).permutation(whole.n_docs)
            self._block = (key, whole, order)
        return self._block

    def next(self) -> Batch:
        _, whole, order = self._current_block()
        c = self.cursor
        docs = np.sort(order[c.batch * self.batch_size:(c.batch + 1) * self.batch_size])
        if (c.batch + 1) * self.batch_size < whole.n_docs:
            self.cursor = Cursor(c.epoch, c.block, c.batch + 1)
        elif c.block + 1 < self.source.n_blocks:
            self.cursor = Cursor(c.epoch, c.block + 1, 0)
        else:
            self.cursor = Cursor(c.epoch + 1, 0, 0)
        return whole.subset(docs)


class WholeCorpus:
    """Every document at every step: the stream of a full-batch Gibbs chain.  ``identity``
    (what a checkpoint must match: a fingerprint of the data and parameters) is the caller's."""

    def __init__(self, data: ConvData, identity, labels=None):
        self.batch = Batch(data, np.arange(data.n_docs), labels)
        self._identity = identity
        self.cursor = Cursor()

    def identity(self):
        return self._identity

    def next(self) -> Batch:
        return self.batch
