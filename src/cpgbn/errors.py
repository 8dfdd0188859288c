"""Exceptions raised for bad user input, the checks of parameter values that raise them, and
the warning about class labels that look alike (:func:`warn_whitespace_twins`).

Every error a user can cause by giving the library or the command line bad input is a
:class:`CPGBNInputError` (a ``ValueError``), whose message is one line that names the
problem.  The command line prints that line and exits with status 2; anything else that
escapes is a bug.
"""

import warnings
from numbers import Integral, Real

import numpy as np


class CPGBNInputError(ValueError):
    """Bad input from the user: a file, a document, a parameter or a model directory."""


class DataFileError(CPGBNInputError):
    """A data file is missing, empty, not UTF-8, or not in the expected layout."""


class MemoryLimitError(CPGBNInputError):
    """A run would need more memory than ``memory_limit`` or the machine has (its estimate in
    the message)."""


class ModelFormatError(CPGBNInputError):
    """A saved model directory is missing, truncated, corrupted or from another format version."""


class WorkerError(RuntimeError):
    """A worker of a distributed run failed, died or stopped answering within the timeout, or
    never joined (one-line message naming the rank).  Not the user's input, so the command
    line exits with status 1, not 2, but it prints the line alone all the same."""


def one_line(value) -> str:
    """``str(value)`` on one line (runs of white space become one space), or the type's name
    if that is empty: for an exception's text inside a one-line error message."""
    return " ".join(str(value).split()) or type(value).__name__


def empty_document_error(line: int, n_empty: int | None = None,
                         file: str = "a one-document-per-line file") -> CPGBNInputError:
    """The one-line error of a training document without tokens: document (and line)
    ``line`` of ``file``, with the count of empty documents when it is known for the whole
    corpus (``n_empty``)."""
    count = "" if n_empty is None else f" ({n_empty} empty document(s) in all)"
    return CPGBNInputError(f"training document {line} (line {line} of {file}) has no "
                           f"tokens{count}; remove empty documents from the training data")


def check_int(name: str, value, low: int) -> int:
    """``value`` as an int if it is an integer (not a bool) >= ``low``; else a CPGBNInputError
    naming the parameter ``name`` and the value."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
        raise CPGBNInputError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise CPGBNInputError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_positive(name: str, value) -> float:
    """``value`` as a float if it is a finite number > 0; else a CPGBNInputError naming the
    parameter ``name`` and the value."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) or not value > 0:
        raise CPGBNInputError(f"{name} must be a positive number, got {value!r}")
    if not np.isfinite(value):
        raise CPGBNInputError(f"{name} must be finite, got {value!r}")
    return float(value)


def check_choice(name: str, value, choices) -> object:
    """``value`` if it is one of ``choices``; else a CPGBNInputError naming the parameter
    ``name``, the choices and the value."""
    if value not in choices:
        raise CPGBNInputError(f"{name} must be one of {', '.join(map(repr, choices))}, got "
                              f"{value!r}")
    return value


def warn_whitespace_twins(classes, source: str) -> None:
    """Warn (naming ``source``) when class labels differ only in surrounding whitespace,
    such as 'pos' and 'pos ': they stay different classes, which a file rarely means."""
    groups: dict[str, list[str]] = {}
    for label in classes:
        if isinstance(label, str):
            groups.setdefault(label.strip(), []).append(label)
    twins = [group for group in groups.values() if len(group) > 1]
    if twins:
        warnings.warn(f"{source}: the labels " + "; ".join(
            " and ".join(repr(label) for label in group) for group in twins)
            + " differ only in surrounding whitespace and are different classes",
            stacklevel=3)
