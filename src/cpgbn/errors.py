"""Exceptions raised for bad user input.

Every error a user can cause by giving the library or the command line bad input is a
:class:`CPGBNInputError` (a ``ValueError``), whose message is one line that names the
problem.  The command line prints that line and exits with status 2; anything else that
escapes is a bug.
"""


class CPGBNInputError(ValueError):
    """Bad input from the user: a file, a document, a parameter or a model directory."""


class DataFileError(CPGBNInputError):
    """A data file is missing, empty, not UTF-8, or not in the expected layout."""


class ModelFormatError(CPGBNInputError):
    """A saved model directory is missing, truncated, corrupted or from another format version."""


def one_line(value) -> str:
    """``str(value)`` on one line (runs of white space become one space), or the type's name
    if that is empty: for an exception's text inside a one-line error message."""
    return " ".join(str(value).split()) or type(value).__name__
