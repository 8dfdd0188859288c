"""A corpus that stays on disk: :class:`TextFile` names a one-document-per-line file that is
read a block of lines at a time, and :func:`scan_text_file` makes the one pass over it that a
streamed fit needs before training (vocabulary, sizes, empty documents, a digest).

``CPGBN(inference="hybrid").fit(TextFile("big.tsv"))`` trains on minibatches cut from blocks
of the file (:class:`cpgbn.inference.batches.TextFileBlocks`), so the file may be larger than
memory; the model is the one ``fit(read_lines(...))`` gives for the same seed, because the
scan builds the same vocabulary as :meth:`cpgbn.text.Corpus.from_texts` and the blocks are the
in-memory blocks.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cpgbn.blocks import STREAM_BLOCK_DOCS
from cpgbn.errors import CPGBNInputError, empty_document_error
from cpgbn.text.readers import read_labeled, read_line_blocks, read_lines
from cpgbn.text.tokenize import tokenize
from cpgbn.text.vocabulary import Vocabulary

__all__ = ["TextFile", "FileScan", "LabelScan", "scan_text_file", "scan_labels",
           "count_documents", "documents_digest", "read_line_range"]

_FORMATS = ("auto", "tsv", "lines")


@dataclass(frozen=True)
class TextFile:
    """A data file to be read in blocks instead of loaded whole.

    path : a plain or ``.gz`` file with one document per line.
    format : ``"tsv"`` (``label<TAB>text``; the labels are ignored by ``fit``), ``"lines"`` (the
        whole line is the document) or ``"auto"`` (``.tsv`` / ``.tsv.gz`` are tsv), as the
        command line's ``--format``.
    missing_labels : whether a tsv line may have an empty label (an unlabelled document, for
        a semi-supervised classifier); False: an empty label is an error naming the line.
    """

    path: Path
    format: str = "auto"
    missing_labels: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.path, str | Path):
            raise CPGBNInputError(f"TextFile path must be a str or a Path, got "
                                  f"{type(self.path).__name__}")
        if self.format not in _FORMATS:
            raise CPGBNInputError(f"TextFile format must be one of {', '.join(_FORMATS)}, got "
                                  f"{self.format!r}")
        object.__setattr__(self, "path", Path(self.path))

    @property
    def labeled(self) -> bool:
        """Whether each line is ``label<TAB>text``."""
        if self.format == "auto":
            return self.path.name.lower().endswith((".tsv", ".tsv.gz"))
        return self.format == "tsv"

    def blocks(self, block_lines: int) -> Iterator[list[str]]:
        """The documents, ``block_lines`` at a time (one block held at once)."""
        for block in read_line_blocks(self.path, block_lines, labeled=self.labeled,
                                      missing_labels=self.missing_labels):
            yield block.texts

    def read_texts(self) -> list[str]:
        """Every document at once (for the modes that hold the corpus in memory anyway)."""
        return self.read()[0]

    def read(self) -> tuple[list[str], list[str] | None]:
        """(every document, their labels or None for an unlabelled file), read at once."""
        if self.labeled:
            return read_labeled(self.path, missing_labels=self.missing_labels)
        return read_lines(self.path), None


@dataclass(frozen=True)
class LabelScan:
    """The labels of a labelled file, as one pass found them (:func:`scan_text_file`).

    counts : labelled lines per label, in the order the labels first occur.
    digest : BLAKE2b of every line's label (an empty one included), in order.
    changes : consecutive labelled lines with different labels (a file sorted by class has few).
    n_labelled : lines with a label.
    """

    counts: dict
    digest: str
    changes: int
    n_labelled: int


@dataclass(frozen=True)
class FileScan:
    """What one pass over a :class:`TextFile` found (:func:`scan_text_file`).

    vocabulary : built from the file's tokens as :meth:`Corpus.from_texts` builds it.
    n_docs, n_tokens : documents (lines) and tokens in the file.
    n_short : documents with fewer than ``short_below`` tokens (padded by the cells).
    digest : BLAKE2b of the documents' text, so a checkpoint is resumed only on the same file.
    longest : tokens in the longest document.
    labels : a labelled file's :class:`LabelScan`, else None.
    block_offsets : the byte offset of each block's first line (blocks of the scan's
        ``block_lines``), so that the blocks can be read in any order without another pass
        (:class:`cpgbn.inference.batches.TextFileBlocks`).
    stamp : the file's (size, modification time in ns) before the pass: an edit shows.
    block_lines : the lines per block of the pass (of ``block_offsets``).
    """

    vocabulary: Vocabulary
    n_docs: int
    n_tokens: int
    n_short: int
    digest: str
    longest: int = 0
    labels: LabelScan | None = None
    block_offsets: tuple = ()
    stamp: tuple | None = None
    block_lines: int = 0


def scan_text_file(source: TextFile, vocab_size: int | None, *,
                   block_lines: int = STREAM_BLOCK_DOCS,
                   short_below: int = 1) -> FileScan:
    """One streaming pass over ``source``: token counts for a vocabulary of at most
    ``vocab_size`` rows (every distinct token when None), sizes, a digest, the labels of a
    labelled file (:class:`LabelScan`) and the blocks' byte offsets.  A document without
    tokens raises the one-line error of an in-memory fit, naming its line."""
    counts: Counter[str] = Counter()
    digest = hashlib.blake2b(digest_size=16)
    n_docs = n_tokens = n_short = longest = 0
    empty: list[int] = []
    labels = _LabelCounter() if source.labeled else None
    offsets = []
    try:
        stat = source.path.stat()   # before the pass, as the blocks' reader compares it
    except OSError:
        stat = None                 # read_line_blocks says why, in one line
    for block in read_line_blocks(source.path, block_lines, labeled=source.labeled,
                                  missing_labels=source.missing_labels):
        offsets.append(block.start)
        if labels is not None:
            labels.update(block.labels)
        for text in block.texts:
            n_docs += 1
            tokens = tokenize(text)
            counts.update(tokens)
            n_tokens += len(tokens)
            n_short += len(tokens) < short_below
            longest = max(longest, len(tokens))
            if not tokens:
                empty.append(n_docs)
            digest.update(text.encode("utf-8"))
            digest.update(b"\n")
    if empty:
        raise empty_document_error(empty[0], len(empty), str(source.path))
    if vocab_size is None:
        vocab_size = max(len(counts) + 1, 2)
    return FileScan(Vocabulary.from_frequencies(counts, vocab_size), n_docs, n_tokens, n_short,
                    digest.hexdigest(), longest,
                    None if labels is None else labels.result(), tuple(offsets),
                    None if stat is None else (stat.st_size, stat.st_mtime_ns), int(block_lines))


def scan_labels(source: TextFile, *, block_lines: int = STREAM_BLOCK_DOCS) -> LabelScan:
    """The :class:`LabelScan` of a labelled file, in a pass of its own (a fit takes it from
    :func:`scan_text_file`'s pass instead)."""
    labels = _LabelCounter()
    for block in read_line_blocks(source.path, block_lines, labeled=True,
                                  missing_labels=source.missing_labels):
        labels.update(block.labels)
    return labels.result()


class _LabelCounter:
    """A :class:`LabelScan` fed a block of labels at a time."""

    def __init__(self):
        self.counts: dict = {}
        self.digest = hashlib.blake2b(digest_size=16)
        self.changes, self.n, self.previous = 0, 0, None

    def update(self, labels) -> None:
        for label in labels:
            self.digest.update(label.encode("utf-8") + b"\n")
            if label == "":      # unlabelled (missing_labels)
                self.previous = None
                continue
            self.counts[label] = self.counts.get(label, 0) + 1
            self.changes += self.previous is not None and label != self.previous
            self.previous, self.n = label, self.n + 1

    def result(self) -> LabelScan:
        return LabelScan(dict(self.counts), self.digest.hexdigest(), self.changes, self.n)


def documents_digest(texts, labels=None, digest=None):
    """A BLAKE2b digest of documents and their labels (None: unlabelled), fed one document at
    a time: what the workers of a distributed fit compare to know they read one corpus."""
    digest = hashlib.blake2b(digest_size=16) if digest is None else digest
    for text, label in zip(texts, [None] * len(texts) if labels is None else labels):
        label = "" if label is None else str(label)
        digest.update(f"{label}\t{text}\n".encode("utf-8", "surrogatepass"))
    return digest


def count_documents(source: TextFile, *, block_lines: int = STREAM_BLOCK_DOCS) -> tuple[int, str]:
    """(the documents (lines) of ``source``, their digest with the labels:
    :func:`documents_digest`), in one streaming pass (a worker of a distributed fit needs the
    count to find its line range, and the digest to know that every worker read the same
    file)."""
    n_docs, digest = 0, hashlib.blake2b(digest_size=16)
    for block in read_line_blocks(source.path, block_lines, labeled=source.labeled,
                                  missing_labels=source.missing_labels):
        documents_digest(block.texts, block.labels, digest)
        n_docs += len(block.texts)
    return n_docs, digest.hexdigest()


def read_line_range(source: TextFile, start: int, stop: int, *,
                    block_lines: int = STREAM_BLOCK_DOCS) -> tuple[list[str], list[str] | None]:
    """(texts, labels or None) of the documents ``start .. stop - 1`` (0-based lines) of
    ``source``: the lines before are read past a block at a time, never held, and reading
    stops after ``stop``."""
    texts: list[str] = []
    labels: list[str] | None = [] if source.labeled else None
    line = 0
    for block in read_line_blocks(source.path, block_lines, labeled=source.labeled,
                                  missing_labels=source.missing_labels):
        lo, hi = max(start - line, 0), min(stop - line, len(block.texts))
        if lo < hi:
            texts += block.texts[lo:hi]
            if labels is not None:
                labels += block.labels[lo:hi]
        line += len(block.texts)
        if line >= stop:
            break
    return texts, labels
