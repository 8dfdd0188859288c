"""Elementary functions over whole arrays, in loops that the compiler vectorises.

libm's exp, expm1 and lgamma are one call per value.  Where a kernel needs them for a whole
row at once (about 12 million gamma variates per sweep in the kernels' Dirichlet draw; the
per-kernel constants of the w walk, 200 per document), these loops compute the same values,
within an ulp or two, in branch-free code that LLVM turns into SIMD (AVX2/AVX-512).

exp and expm1 (Cody & Waite range reduction): x = n ln 2 + r with n = round(x / ln 2) and
|r| <= ln(2) / 2, ln 2 split into a high part exact in products with n and a low part;
e^r - 1 = r q(r) with q the Taylor polynomial of (e^r - 1) / r to degree 12 (truncation error
below 5e-18 on that interval), and 2^n put straight into the exponent bits.  Rounding x / ln 2
to an integer is done by adding 1.5 * 2^52, which leaves the integer in the low bits of the sum.
expm1 = 2^n r q(r) + (2^n - 1) keeps its relative precision near 0.

ln Gamma(1 + a) for 0 <= a <= 0.1: its Taylor series -euler a + sum_k (-1)^k zeta(k) a^k / k,
to k = 17 (truncation error below 1e-19).
"""
from __future__ import annotations

import numba
import numpy as np

from .rng import borrow

__all__ = ["exp_in_place", "expm1_in_place", "lgamma1p_small_in_place", "EXP_LOWEST",
           "LGAMMA1P_MAX"]

#: Inputs are clamped to [EXP_LOWEST, 709]: below it e^x would leave the normal doubles (the
#: result is then e^EXP_LOWEST, about 3.3e-308, instead of a subnormal or 0.0).
EXP_LOWEST = -708.0
_HIGHEST = 709.0
_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238  # ln 2 to 32 bits: n * _LN2_HI is exact for |n| < 2^11
_LN2_LO = 1.9082149292705877e-10  # ln 2 - _LN2_HI
_ROUNDER = 6755399441055744.0  # 1.5 * 2^52
_ROUNDER_BITS = np.int64(np.float64(_ROUNDER).view(np.int64))
_EXPONENT_BIAS = np.int64(1023)
_MANTISSA_BITS = np.int64(52)
# 1 / i! for i = 13 .. 2 (Horner order)
_C13, _C12, _C11, _C10 = 1 / 6227020800, 1 / 479001600, 1 / 39916800, 1 / 3628800
_C9, _C8, _C7, _C6 = 1 / 362880, 1 / 40320, 1 / 5040, 1 / 720
_C5, _C4, _C3, _C2 = 1 / 120, 1 / 24, 1 / 6, 0.5

#: :func:`lgamma1p_small_in_place` is accurate on [0, LGAMMA1P_MAX].
LGAMMA1P_MAX = 0.1
_EULER = 0.5772156649015329
# (-1)^k zeta(k) / k for k = 2 .. 17 (zeta values from scipy.special.zeta)
_L2, _L3, _L4 = 1.6449340668482264 / 2, -1.2020569031595942 / 3, 1.0823232337111381 / 4
_L5, _L6, _L7 = -1.03692775514337 / 5, 1.0173430619844492 / 6, -1.008349277381923 / 7
_L8, _L9, _L10 = 1.0040773561979444 / 8, -1.0020083928260821 / 9, 1.000994575127818 / 10
_L11, _L12, _L13 = -1.0004941886041194 / 11, 1.000246086553308 / 12, -1.0001227133475785 / 13
_L14, _L15, _L16 = 1.0000612481350588 / 14, -1.000030588236307 / 15, 1.0000152822594086 / 16
_L17 = -1.0000076371976379 / 17


@numba.njit(inline="always", error_model="numpy")
def _reduced(x):
    """(1.5 * 2^52 + n, e^r - 1) for x clamped to the normal range, x = n ln 2 + r."""
    v = min(max(x, EXP_LOWEST), _HIGHEST)
    big = v * _LOG2E + _ROUNDER  # n in the low mantissa bits
    k = big - _ROUNDER
    r = (v - k * _LN2_HI) - k * _LN2_LO
    q = _C13
    q = q * r + _C12
    q = q * r + _C11
    q = q * r + _C10
    q = q * r + _C9
    q = q * r + _C8
    q = q * r + _C7
    q = q * r + _C6
    q = q * r + _C5
    q = q * r + _C4
    q = q * r + _C3
    q = q * r + _C2
    q = q * r + 1.0
    return big, q * r


@numba.njit(inline="always", error_model="numpy")
def _powers_of_two(rounded):
    """rounded[i] = 1.5 * 2^52 + n_i  ->  2^n_i (n + bias written into the exponent field)."""
    bits = rounded.view(np.int64)
    for i in range(rounded.shape[0]):
        bits[i] = (bits[i] - _ROUNDER_BITS + _EXPONENT_BIAS) << _MANTISSA_BITS


@numba.njit(inline="always", error_model="numpy")
def _reduce_all(x, work):
    """x[i] <- e^(r_i) - 1 in place; returns work[:len(x)] holding 2^(n_i)."""
    scale = work[:x.shape[0]]
    for i in range(x.shape[0]):
        scale[i], x[i] = _reduced(x[i])
    _powers_of_two(scale)
    return scale


@numba.njit(cache=True, error_model="numpy")
def exp_in_place(x, work):
    """x[i] = exp(max(min(x[i], 709), EXP_LOWEST)) for a float64 array x; within 1 ulp of libm.

    ``work`` is a float64 array at least as long as ``x`` (scratch).
    """
    x, work = borrow(x), borrow(work)
    scale = _reduce_all(x, work)
    for i in range(x.shape[0]):
        x[i] = (x[i] + 1.0) * scale[i]


@numba.njit(cache=True, error_model="numpy")
def expm1_in_place(x, work):
    """x[i] = expm1(max(min(x[i], 709), EXP_LOWEST)) (e^x - 1, precise near 0) in place."""
    x, work = borrow(x), borrow(work)
    scale = _reduce_all(x, work)
    for i in range(x.shape[0]):
        s = scale[i]
        # 2^n (1 + r q) - 1 = 2^n r q + (2^n - 1), where 2^n - 1 is exact: r q is not rounded
        # against 1 first (and for n = 0 the sum is r q itself)
        x[i] = s * x[i] + (s - 1.0)


@numba.njit(cache=True, error_model="numpy")
def lgamma1p_small_in_place(a, out):
    """out[i] = ln Gamma(1 + a[i]) for 0 <= a[i] <= LGAMMA1P_MAX (other values: meaningless)."""
    a, out = borrow(a), borrow(out)
    for i in range(a.shape[0]):
        t = a[i]
        p = _L17
        p = p * t + _L16
        p = p * t + _L15
        p = p * t + _L14
        p = p * t + _L13
        p = p * t + _L12
        p = p * t + _L11
        p = p * t + _L10
        p = p * t + _L9
        p = p * t + _L8
        p = p * t + _L7
        p = p * t + _L6
        p = p * t + _L5
        p = p * t + _L4
        p = p * t + _L3
        p = p * t + _L2
        out[i] = t * (p * t - _EULER)
