"""Gamma variates that share one shape: a ziggurat for log G, G ~ Gamma(a), for the Dirichlet draws.

The kernels' Dirichlet draw D_k ~ Dir(n_k + eta) needs one Gamma(eta) variate for every kernel
entry without counts: about 12 million per sweep on MR, all with the same shape.  A per-shape
table pays off there: it replaces a Marsaglia-Tsang draw, an exponential and an exp (the boost
for shapes below 1) by one 64-bit draw, two comparisons and an exp.

Z = log(G / a) has density proportional to

    f(z) = exp(-a h(z)),   h(z) = e^z - 1 - z  (convex, h(0) = 0),

so f is log-concave with its mode f(0) = 1 at z = 0, an exponential left tail (f ~ e^(a (1 + z)))
and a doubly exponential right tail.  The ziggurat (Marsaglia & Tsang 2000) is built around the
mode on both sides: layer i >= 1 is the rectangle [lo_i, hi_i] x [y_i, y_(i+1)] with
f(lo_i) = f(hi_i) = y_i (lo_N = hi_N = 0, y_N = 1); the base layer is [lo_1, hi_1] x [0, y_1]
plus both tails; all N layers have the same area v.  A draw picks a layer and a uniform abscissa
in it; abscissae inside the next layer's span are under f and accepted at once, others are
tested against f (wedges) or sent to the exact tail samplers.  Rejections restart with fresh
bits (Doornik 2005).  The result is exact up to float64 rounding of the tables, like the normal
and exponential ziggurats in :mod:`cpgbn.backends.numba.rng`.

Tail areas come from the regularised incomplete gamma function:
int f over z > c = C Q(a, a e^c) and over z < c = C P(a, a e^c), with C = Gamma(a) e^a a^-a.
"""
from __future__ import annotations

import functools
import math

import numba
import numpy as np
from scipy.special import gammainc, gammaincc, gammaln

from .distributions import log_gamma_inline
from .rng import U11, MASK8, TWO_M53, borrow, exponential_inline, next_u64_inline, uniform_inline
from .vector_math import exp_in_place

__all__ = ["shared_shape_table", "table_shape", "log_gamma_shared", "gamma_counts_shared"]

_LAYERS = 256
# table rows (columns are layers 0..N-1): start and width of the abscissa span drawn,
# the span accepted at once (the next layer's), and the layer's lower and upper density level
_START, _WIDTH, _IN_LO, _IN_HI, _Y_LO, _Y_HI = range(6)
# scalars kept in column 0 of row 6: the shape a, lo_1 and hi_1 (where the tails begin)
_SCALARS = 6


@numba.njit(cache=True)
def _h(x):
    return math.expm1(x) - x


@numba.njit(cache=True)
def _level_span(a, y):
    """The two roots lo <= 0 <= hi of f(z) = y, i.e. h(z) = t with t = -ln(y) / a (Newton)."""
    t = -math.log(y) / a
    # h is convex with h'(z) = e^z - 1: Newton from the outer side of each root converges
    # monotonically; sqrt(2 t) and 2 ln(1 + t) + 1 bound the right root from above, -(1 + t)
    # bounds the left root from below
    hi = min(math.sqrt(2.0 * t), 2.0 * math.log1p(t) + 1.0)
    for _ in range(200):
        step = (_h(hi) - t) / math.expm1(hi) if hi > 0.0 else 0.0
        hi -= step
        if not step > 1e-16 * hi:
            break
    lo = -(1.0 + t)
    for _ in range(400):
        step = (_h(lo) - t) / math.expm1(lo)
        lo -= step
        if not step < 1e-16 * lo:  # steps are negative: lo rises towards the root
            break
    return lo, hi


@numba.njit(cache=True)
def _stack_layers(a, y1, v, n_layers, table):
    """Fill layers 1..N-1 upward from level y1 with area v each; returns the top's overshoot.

    The overshoot y_(N-1) + v / width_(N-1) - 1 is > 0 when the layers are too large to fit
    under the mode (y1 too high) and < 0 when they are too small.
    """
    y = y1
    lo, hi = _level_span(a, y)
    for i in range(1, n_layers):
        table[_START, i] = lo
        table[_WIDTH, i] = hi - lo
        table[_Y_LO, i] = y
        y_next = y + v / (hi - lo)
        if i == n_layers - 1 or y_next >= 1.0:
            table[_Y_HI, i] = 1.0
            table[_IN_LO, i] = 0.0
            table[_IN_HI, i] = 0.0
            if i < n_layers - 1:
                return 1.0 + (n_layers - 1 - i)  # closed with layers to spare
            return y_next - 1.0
        lo, hi = _level_span(a, y_next)
        table[_Y_HI, i] = y_next
        table[_IN_LO, i] = lo
        table[_IN_HI, i] = hi
        y = y_next
    return 0.0


def _tail_areas(a, lo, hi):
    """Areas under f left of lo and right of hi."""
    log_c = float(gammaln(a)) + a - a * math.log(a)
    log_x = math.log(a) + lo
    if log_x > -700.0:
        left = math.exp(log_c) * float(gammainc(a, math.exp(log_x)))
    else:  # a e^lo underflows (tiny shapes): P(a, x) = x^a / Gamma(a + 1) (1 + O(x))
        left = math.exp(log_c + a * log_x - float(gammaln(a + 1.0)))
    right = math.exp(log_c) * float(gammaincc(a, a * math.exp(hi)))
    return left, right


@functools.lru_cache(maxsize=16)
def _build(a: float) -> np.ndarray:
    table = np.zeros((7, _LAYERS), dtype=np.float64)
    # bisection on ln y1 (the base layer's height): the top overshoots when y1 is too high
    log_lo, log_hi = -745.0, 0.0
    for _ in range(200):
        log_y1 = 0.5 * (log_lo + log_hi)
        y1 = math.exp(log_y1)
        lo, hi = _level_span(a, y1)
        left, right = _tail_areas(a, lo, hi)
        v = (hi - lo) * y1 + left + right
        if _stack_layers(a, y1, v, _LAYERS, table) > 0.0:
            log_hi = log_y1
        else:
            log_lo = log_y1
        if log_hi - log_lo < 1e-15 * max(1.0, abs(log_lo)):
            break
    # the final table from the lower end: layers slightly too small, so the top layer's true
    # area exceeds v by a relative error at the bisection's resolution (as in rng's ziggurats)
    y1 = math.exp(log_lo)
    lo, hi = _level_span(a, y1)
    left, right = _tail_areas(a, lo, hi)
    v = (hi - lo) * y1 + left + right
    _stack_layers(a, y1, v, _LAYERS, table)
    # base layer: the span [lo, hi] widened on each side by the tail's area over y1, so that a
    # uniform abscissa lands in a tail with probability tail area / v
    table[_START, 0] = lo - left / y1
    table[_WIDTH, 0] = v / y1
    table[_IN_LO, 0] = lo
    table[_IN_HI, 0] = hi
    table[_Y_LO, 0] = 0.0
    table[_Y_HI, 0] = y1
    table[_SCALARS, 0] = a
    table[_SCALARS, 1] = lo
    table[_SCALARS, 2] = hi
    table.setflags(write=False)
    return table


def shared_shape_table(a: float) -> np.ndarray:
    """The ziggurat table for shape ``a`` > 0 (cached; read-only float64 array of 7 x 256)."""
    a = float(a)
    if not (a > 0.0 and math.isfinite(a)):
        raise ValueError(f"the shape must be positive and finite, got {a!r}")
    return _build(a)


def table_shape(table: np.ndarray) -> float:
    """The shape a that ``table`` was built for."""
    return float(table[_SCALARS, 0])


@numba.njit(inline="always", error_model="numpy")
def _tail(state, a, edge):
    """Z given Z beyond ``edge`` (away from the mode; edge = lo_1 < 0 or hi_1 > 0).

    h is convex, so its tangent at the edge bounds it from below on both sides:
    f(z) / f(edge) <= exp(-a h'(edge) (z - edge)), an exponential away from the edge, and the
    draw is accepted with exp(-a (h(z) - h(edge) - h'(edge)(z - edge))) = exp(-a e^edge h(z - edge)).
    """
    slope = a * math.expm1(edge)  # h'(edge) a: negative on the left, positive on the right
    excess = a * math.exp(edge)
    while True:
        d = exponential_inline(state) / slope
        if exponential_inline(state) > excess * (math.expm1(d) - d):
            return edge + d


@numba.njit(inline="always", error_model="numpy")
def _log_ratio(state, table):
    """Z = ln(G / a) for G ~ Gamma(a), a = table[6, 0]."""
    a = table[_SCALARS, 0]
    while True:
        bits = next_u64_inline(state)
        k = np.int64(bits & MASK8)
        u = np.float64(bits >> U11) * TWO_M53  # [0, 1)
        z = table[_START, k] + u * table[_WIDTH, k]
        if table[_IN_LO, k] < z < table[_IN_HI, k]:
            return z
        if k == 0:
            return _tail(state, a, table[_SCALARS, 1] if z <= table[_SCALARS, 1]
                         else table[_SCALARS, 2])
        y = table[_Y_LO, k] + uniform_inline(state) * (table[_Y_HI, k] - table[_Y_LO, k])
        if y < math.exp(-a * (math.expm1(z) - z)):
            return z


@numba.njit(cache=True, error_model="numpy")
def log_gamma_shared(state, table):
    """ln G for G ~ Gamma(a, 1), a the table's shape: the same law as
    :func:`cpgbn.backends.numba.log_gamma` (scipy.stats.loggamma(c=a)), drawn by the ziggurat."""
    state = borrow(state)
    return math.log(table[_SCALARS, 0]) + _log_ratio(state, table)


@numba.njit(cache=True, error_model="numpy")
def gamma_counts_shared(state, counts, table, out, work):
    """out[i] = Gamma(counts[i] + a, 1) for integer counts >= 0, a the table's shape.

    The same law as :func:`cpgbn.backends.numba.gamma` entry by entry; entries without counts come
    from the ziggurat.  The logs are drawn first and exponentiated together by
    :func:`cpgbn.backends.numba.vector_math.exp_in_place` (``work``: float64 scratch as long as
    ``out``), so values below about 3.3e-308 come out as 3.3e-308 (callers floor).
    """
    state = borrow(state)
    a = table[_SCALARS, 0]
    log_a = math.log(a)
    for i in range(counts.shape[0]):
        n = counts[i]
        if n == 0:
            out[i] = log_a + _log_ratio(state, table)
        else:
            out[i] = log_gamma_inline(state, n + a)
    exp_in_place(out, work)
