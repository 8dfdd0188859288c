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
from pathlib import Path

from cpgbn.errors import DataFileError, one_line

__all__ = ["read_labeled", "read_lines"]

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


def read_labeled(path: PathLike) -> tuple[list[str], list[str]]:
    """Read ``label<TAB>text`` lines (``.gz`` is decompressed); return ``(texts, labels)``.

    Each line is split on its first TAB, so the text may contain further TABs.  A line
    without a TAB or with an empty label raises DataFileError naming the line.
    """
    path = _check_file(path)
    texts: list[str] = []
    labels: list[str] = []
    for number, line in enumerate(_decoded_lines(path), start=1):
        label, tab, text = line.partition("\t")
        if not tab:
            raise DataFileError(f"{path}: line {number}: no TAB; expected 'label<TAB>text'")
        if not label:
            raise DataFileError(f"{path}: line {number}: empty label before the TAB")
        labels.append(label)
        texts.append(text)
    if not texts:
        raise DataFileError(f"{path}: empty file, no documents")
    return texts, labels


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
        if raw.endswith(b"\n"):
            raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield raw.decode("utf-8")
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
