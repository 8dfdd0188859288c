"""Sums of float64 values that do not depend on how the values are split or ordered.

A Gibbs sweep adds up a few float64 quantities over all documents: r's rate sum_j q^(T+1)_j
(which r's draw reads) and the log-likelihood of the trace.  Split over workers, a sum of
partial sums is rounded differently from one sum over the whole corpus, so the last bits of r
would depend on the number of workers, and the chains would part after a few sweeps.

:class:`ExactSum` keeps such a sum *exactly*, as integers: every finite float64 is
M 2^(e - 53) with an integer |M| < 2^53 (``np.frexp``), so the values are binned by their
exponent e and each bin holds sum M as two int64 sums, of M's bits from 26 up (|.| < 2^27)
and of its low 26 bits: 2^36 values fit in a bin before an int64 could overflow.  Integer sums are associative, so the
bins of two parts add up to the bins of the whole, on one worker or through an integer
all-reduce of :attr:`ExactSum.bins` (a fixed 4,199 int64 values, 33.6 kB, whatever the number
of documents).  ``float(s)`` is the exact total rounded once, to nearest (CPython's int / int
division is correctly rounded): the correctly rounded sum, the value ``math.fsum`` gives.  The
single process and every split of the documents therefore draw r from the same number.

Infinities and NaNs are counted apart and follow IEEE arithmetic: any NaN, or both
infinities, give NaN; otherwise an infinity wins.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ExactSum"]

#: frexp's exponents of finite non-zero float64 values: 2^-1074 = 0.5 * 2^-1073 up to
#: just below 2^1024 = 0.99.. * 2^1024.
_E_MIN, _E_MAX = -1073, 1024
_N_EXP = _E_MAX - _E_MIN + 1
#: The low half of a mantissa: bits below this one.
_LOW_BITS = 26
#: Layout of :attr:`ExactSum.bins`: the high halves, the low halves, then three counts.
_NAN, _POS_INF, _NEG_INF = 2 * _N_EXP, 2 * _N_EXP + 1, 2 * _N_EXP + 2
N_BINS = 2 * _N_EXP + 3


class ExactSum:
    """The exact sum of float64 values (module docstring).

    ``ExactSum.of(values)`` sums an array; ``a + b`` is the sum of both parts, exactly;
    ``float(s)`` rounds the total once; ``ExactSum(bins)`` rebuilds a sum from its int64
    :attr:`bins` (after an all-reduce).
    """

    __slots__ = ("bins",)

    def __init__(self, bins=None):
        if bins is None:
            bins = np.zeros(N_BINS, dtype=np.int64)
        bins = np.asarray(bins)
        if bins.shape != (N_BINS,) or bins.dtype != np.int64:
            raise ValueError(f"an ExactSum's bins are {N_BINS} int64 values, got "
                             f"{bins.dtype} {bins.shape}")
        #: int64 (N_BINS,): the integer state; summing it element-wise sums the values.
        self.bins = bins

    @classmethod
    def of(cls, values) -> "ExactSum":
        """The exact sum of the float64 ``values`` (any shape; other dtypes are converted)."""
        x = np.asarray(values, dtype=np.float64).ravel()
        bins = np.zeros(N_BINS, dtype=np.int64)
        finite = np.isfinite(x)
        if not finite.all():
            bad = x[~finite]
            bins[_NAN] = np.isnan(bad).sum()
            bins[_POS_INF] = (bad == np.inf).sum()
            bins[_NEG_INF] = (bad == -np.inf).sum()
            x = x[finite]
        x = x[x != 0.0]
        if x.size:
            fraction, exponent = np.frexp(x)
            # |fraction| in [0.5, 1): times 2^53 it is an integer below 2^53, exactly
            mantissa = np.ldexp(fraction, 53).astype(np.int64)
            where = (exponent - _E_MIN).astype(np.intp)
            # floor shift and mask split signed integers exactly: M = high 2^26 + low
            np.add.at(bins, where, mantissa >> _LOW_BITS)
            np.add.at(bins, where + _N_EXP, mantissa & ((1 << _LOW_BITS) - 1))
        return cls(bins)

    def __add__(self, other: "ExactSum") -> "ExactSum":
        if not isinstance(other, ExactSum):
            return NotImplemented
        return ExactSum(self.bins + other.bins)

    def __float__(self) -> float:
        bins = self.bins
        n_nan, n_pos, n_neg = (int(bins[i]) for i in (_NAN, _POS_INF, _NEG_INF))
        if n_nan or (n_pos and n_neg):
            return float("nan")
        if n_pos or n_neg:
            return float("inf") if n_pos else float("-inf")
        # the total as numerator / 2^(53 - E_MIN): bin e holds the units of 2^(e - 53)
        numerator = 0
        for e in np.flatnonzero(bins[:_N_EXP] | bins[_N_EXP:2 * _N_EXP]):
            value = (int(bins[e]) << _LOW_BITS) + int(bins[e + _N_EXP])
            numerator += value << int(e)
        try:
            return numerator / (1 << (53 - _E_MIN))   # one correctly rounded division
        except OverflowError:   # beyond the largest float64
            return float("inf") if numerator > 0 else float("-inf")

    def __repr__(self) -> str:
        return f"ExactSum({float(self)!r})"
