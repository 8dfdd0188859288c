"""What a mode's parameter may be: the constraints each mode declares in one table
(:attr:`cpgbn.modes.base.InferenceMode.parameter_constraints`, as scikit-learn's estimators
declare ``_parameter_constraints``), checked once per set of parameters by
:func:`check_constraints`.

Written by hand because scikit-learn's validation (``sklearn.utils._param_validation``) is a
private module; each constraint reuses the one-line checks of :mod:`cpgbn.errors`, so a bad
value is refused with the same message wherever it is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CPGBNInputError, check_choice, check_int, check_positive

__all__ = ["Integer", "Positive", "OneOf", "Boolean", "Fraction", "Optional",
           "check_constraints"]


@dataclass(frozen=True)
class Integer:
    """An integer (not a bool) >= ``low``."""

    low: int

    def check(self, name: str, value):
        return check_int(name, value, self.low)


@dataclass(frozen=True)
class Positive:
    """A finite number > 0."""

    def check(self, name: str, value):
        return check_positive(name, value)


@dataclass(frozen=True)
class OneOf:
    """One of ``choices``."""

    choices: tuple

    def check(self, name: str, value):
        return check_choice(name, value, self.choices)


@dataclass(frozen=True)
class Boolean:
    """True or False (numpy's booleans too)."""

    def check(self, name: str, value):
        if not isinstance(value, (bool, np.bool_)):
            raise CPGBNInputError(f"{name} must be True or False, got {value!r}")
        return bool(value)


@dataclass(frozen=True)
class Fraction:
    """A number in [``low``, ``high``)."""

    low: float
    high: float

    def check(self, name: str, value):
        if not (isinstance(value, (int, float)) and self.low <= float(value) < self.high):
            raise CPGBNInputError(f"{name} must be a number in [{self.low:g}, {self.high:g}), "
                                  f"got {value!r}")
        return float(value)


@dataclass(frozen=True)
class Optional:
    """None, or what ``inner`` allows."""

    inner: object

    def check(self, name: str, value):
        return None if value is None else self.inner.check(name, value)


def check_constraints(constraints: dict, params: dict) -> dict:
    """Each parameter of ``constraints`` (name: constraint) read from ``params``, checked and
    resolved, in the table's order; a bad value is a one-line CPGBNInputError naming it."""
    return {name: constraint.check(name, params[name])
            for name, constraint in constraints.items()}
