"""Readers for one-document-per-line text files, plain or gzipped.

Data files come from users, so every problem with one (missing, a directory, empty, not
UTF-8, a line without a label) is a :class:`~cpgbn.errors.DataFileError` whose one-line
message names the file and, where it helps, the 1-based line number; the command line
prints it and exits.  Lines are decoded one at a time from bytes so that a bad byte can be
pinned to its line.  Only the line terminator (``"\\n"`` or ``"\\r\\n"``) is removed; the
text is otherwise verbatim, and a UTF-8 byte-order mark at the very start is dropped.
"""
from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cpgbn.errors import DataFileError, one_line

__all__ = ["LineBlock", "index_line_blocks", "read_labeled", "read_line_blocks",
           "read_lines"]

PathLike = str | os.PathLike


def read_lines(path: PathLike) -> list[str]:
    """Read a text file with one document per line (``.gz`` is decompressed).

    Empty lines are empty documents; the newline that ends the last line does not start
    another.  Raises DataFileError for a missing, unreadable or empty file, or bytes that
    are not UTF-8.
    """
    path = _check_file(path)
    texts = list(_decoded_lines(path))
    if not texts:
        raise DataFileError(f"{path}: empty file, no documents")
    return texts


def read_labeled(path: PathLike, *, missing_labels: bool = False
                 ) -> tuple[list[str], list[str]]:
    """Read ``label<TAB>text`` lines (``.gz`` is decompressed); return ``(texts, labels)``.

    Each line is split on its first TAB, so the text may contain further TABs.  A line
    without a TAB raises DataFileError naming the line, and so does an empty label unless
    ``missing_labels`` (then its label is ``""``: an unlabelled document).
    """
    path = _check_file(path)
    texts: list[str] = []
    labels: list[str] = []
    for number, line in enumerate(_decoded_lines(path), start=1):
        label, text = _split_label(path, line, number, missing_labels)
        labels.append(label)
        texts.append(text)
    if not texts:
        raise DataFileError(f"{path}: empty file, no documents")
    return texts, labels


@dataclass
class LineBlock:
    """A block of consecutive lines of a data file (:func:`read_line_blocks`).

    texts : the documents (the text after the TAB for a labelled file).
    labels : the labels, or None for a plain file.
    start, end : byte offsets of the block's first line and of the line after its last (in the
        decompressed stream for ``.gz``): ``read_line_blocks(path, ..., start=end)`` goes on
        with the next block.
    first_line : 1-based line number of the block's first line.
    """

    texts: list[str]
    labels: list[str] | None
    start: int
    end: int
    first_line: int


def read_line_blocks(path: PathLike, block_lines: int, *, labeled: bool = False,
                     start: int = 0, first_line: int = 1,
                     missing_labels: bool = False) -> Iterator[LineBlock]:
    """Yield the file's lines in blocks of ``block_lines`` (the last block may be shorter).

    Only one block is held at a time, so a file larger than memory can be read.  ``start``
    (a byte offset from an earlier block's ``end``) and ``first_line`` (its line number, for
    messages) resume reading there.  Lines are decoded and checked as by :func:`read_lines`
    (``labeled=False``) or :func:`read_labeled` (``labeled=True``; ``missing_labels`` as
    there), with the same one-line DataFileErrors; an empty file raises.
    """
    if int(block_lines) < 1:
        raise DataFileError(f"block_lines must be >= 1, got {block_lines}")
    path = _check_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    number = int(first_line) - 1
    texts, labels = [], ([] if labeled else None)
    block_start = int(start)
    try:
        with opener(path, "rb") as handle:
            handle.seek(block_start)
            for raw in iter(handle.readline, b""):
                number += 1
                text = _decode(path, raw, number)
                if labeled:
                    label, text = _split_label(path, text, number, missing_labels)
                    labels.append(label)
                texts.append(text)
                if len(texts) == block_lines:
                    end = handle.tell()
                    yield LineBlock(texts, labels, block_start, end, number - len(texts) + 1)
                    texts, labels, block_start = [], ([] if labeled else None), end
            if texts:
                yield LineBlock(texts, labels, block_start, handle.tell(),
                                number - len(texts) + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataFileError(f"{path}: not a valid gzip file ({one_line(exc)})") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or one_line(exc)}") from None
    if number == 0 and block_start == 0:
        raise DataFileError(f"{path}: empty file, no documents")


def index_line_blocks(path: PathLike, block_lines: int) -> tuple[list[int], int]:
    """(byte offset of every block's first line, number of lines): one streaming pass of raw
    bytes (no decoding), holding one offset per block of ``block_lines`` lines.  Block b
    starts at line b * block_lines + 1; ``read_line_blocks(path, block_lines, start=offsets[b],
    first_line=b * block_lines + 1)`` reads it."""
    if int(block_lines) < 1:
        raise DataFileError(f"block_lines must be >= 1, got {block_lines}")
    path = _check_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    offsets, n = [], 0
    try:
        with opener(path, "rb") as handle:
            while True:
                position = handle.tell()
                if not handle.readline():
                    break
                if n % block_lines == 0:
                    offsets.append(position)
                n += 1
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataFileError(f"{path}: not a valid gzip file ({one_line(exc)})") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or one_line(exc)}") from None
    if n == 0:
        raise DataFileError(f"{path}: empty file, no documents")
    return offsets, n


def _split_label(path: Path, line: str, number: int,
                 missing_labels: bool = False) -> tuple[str, str]:
    label, tab, text = line.partition("\t")
    if not tab:
        raise DataFileError(f"{path}: line {number}: no TAB; expected 'label<TAB>text'")
    if not label and not missing_labels:
        raise DataFileError(f"{path}: line {number}: empty label before the TAB")
    return label, text


def _check_file(path: PathLike) -> Path:
    path = Path(path)
    if path.is_dir():
        raise DataFileError(f"{path}: is a directory, expected a data file")
    if not path.exists():
        raise DataFileError(f"{path}: no such file")
    return path


def _decoded_lines(path: Path) -> Iterator[str]:
    """Yield the lines of ``path`` as str, without terminators, decoding each separately."""
    for number, raw in enumerate(_raw_lines(path), start=1):
        yield _decode(path, raw, number)


def _decode(path: Path, raw: bytes, number: int) -> str:
    """Line ``number`` (1-based) as str, without its terminator (and the BOM of line 1)."""
    if raw.endswith(b"\n"):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(
            f"{path}: line {number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} "
            f"at column {exc.start + 1})"
        ) from None


def _raw_lines(path: Path) -> Iterator[bytes]:
    """Yield the byte lines of a plain or gzipped file, turning I/O failures into DataFileError."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            yield from handle
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataFileError(f"{path}: not a valid gzip file ({one_line(exc)})") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or one_line(exc)}") from None
