"""numba kernels of the per-position weights w of the convolutional layer (paper eq. 3).

w_jks ~ Gam(m_jks + a_jk / S_j, 1 / rate_j) for every position s and kernel k of document j,
w float32 (P, K) and m int32 (P, K) in the layout of :mod:`cpgbn.backends.numba.conv`, floored at
FLOOR.  Almost every w_jks of real text is at the floor (on MR about 6% of the position-kernel
pairs are above it), so :func:`draw_document_weights` draws the positions with counts one by
one and walks from one above-floor position to the next with geometric gaps, and lists the
kernels above the floor at each position for the token augmentation.

With a free positional concentration beta (``CPGBN(pooling_concentration=beta)``: the prior
theta^(1)_jk ~ Gam(a_jk, 1/c^(2)_j), pi_jk ~ Dir(beta 1_{S_j}), w_jks = theta^(1)_jk pi_jks),
:func:`draw_document_split` draws theta^(1)_jk ~ Gam(a_jk + A_jk, 1 / rate_j) and the split
pi_jk ~ Dir(beta + m_jk1, ..., beta + m_jkS_j) independently, and w_jks = theta^(1)_jk pi_jks.
Why: given w the position totals m_jks are Pois(w_jks) (each kernel sums to 1), so the
likelihood theta^{A_jk} e^{-theta} prod_s pi_s^{m_jks} factors into a gamma and a Dirichlet
kernel (the derivation is in :mod:`cpgbn.inference.gibbs`).  The tied prior is the case
beta = a_jk / S_j, which :func:`draw_document_weights` draws position by position: independent
Gam(m_jks + a_jk / S_j) weights sum to Gam(A_jk + a_jk) and split as Dir(m_jk. + a_jk / S_j).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .distributions import gamma, log_gamma
from .gbn import TINY
from .rng import borrow, exponential_inline, uniform_inline, seed_state
from .vector_math import LGAMMA1P_MAX, expm1_in_place, lgamma1p_small_in_place

#: Smallest value stored for w and D.  Gamma draws with shapes of 1e-4 underflow; a floor that
#: is a normal float32 keeps every token's total rate positive and the arithmetic fast.
FLOOR = np.float32(1e-30)

#: Shapes below this use the floor-aware path for positions without counts (see below).
_FAST_SHAPE = LGAMMA1P_MAX
_LOG_FLOOR = float(np.log(np.float64(FLOOR)))
_EXP_M1 = float(np.exp(-1.0))
#: Below this shape the truncated exponential in :func:`_gamma_above` is drawn by inversion.
_MODULO_MIN_SHAPE = 1e-6


@njit(cache=True, inline="always")
def _gamma_above(state, alpha, span, p_low):
    """G ~ Gam(alpha, 1) conditioned on G >= x0, for alpha < 1 and x0 < 1; exact.

    ``span`` = -ln x0 and ``p_low`` = m / (m + e^-1) with m = (1 - x0^alpha) / alpha are
    per-(document, kernel) constants.  Rejection from the envelope x^(alpha-1) on [x0, 1]
    (mass m, accept with e^-x) plus e^-x on (1, inf) (mass e^-1, accept with x^(alpha-1)).
    On [x0, 1], t = -ln x has the density of an Exp(alpha) variate truncated to [0, span], which
    is an Exp(alpha) variate taken modulo span (the exponential forgets the multiples of span
    it has passed), so x = e^-((E / alpha) mod span) with E ~ Exp(1) from the ziggurat: no
    logarithm.  E / alpha carries a rounding error of 1e-16 E / alpha into t, so below
    alpha = 1e-6 t comes from the inverse cdf instead, -ln(1 - u (1 - x0^alpha)) / alpha.
    Acceptance is at least 1/e, near 1 for small alpha, and the test against e^-x is first made
    against its lower bound 1 - x.
    """
    inv_alpha = 1.0 / alpha
    inv_span = 1.0 / span
    by_modulo = alpha >= _MODULO_MIN_SHAPE
    while True:
        if uniform_inline(state) < p_low:
            if by_modulo:
                q = exponential_inline(state) * inv_alpha
                t = q - span * np.floor(q * inv_span)
            else:
                t = -np.log1p(uniform_inline(state) * np.expm1(-alpha * span)) * inv_alpha
            x = np.exp(-min(max(t, 0.0), span))  # the clamp undoes rounding at the ends
            t = uniform_inline(state)
            if t <= 1.0 - x or t < np.exp(-x):
                return x
        else:
            x = 1.0 + exponential_inline(state)
            if np.log(uniform_inline(state)) < (alpha - 1.0) * np.log(x):
                return x


@njit(cache=True, inline="always")
def draw_scaled_gamma(state, shape, log_rate):
    """Gamma(shape, rate) as float32, floored: exact in log space for the tiny shapes of empty positions."""
    if shape >= 1.0:
        value = gamma(state, shape) * np.exp(-log_rate)
    else:
        value = np.exp(log_gamma(state, shape) - log_rate)
    if value < FLOOR:
        return FLOOR
    return np.float32(value)


@njit(cache=True)
def draw_document_weights(state, m, w, p0, n_pos, prior_shape, log_rate, theta, scratch, slow,
                          heavy_k, n_heavy_at, nonzero):
    """w_jks ~ Gam(m_jks + a_jk / S_j, 1 / rate_j) for one document (pooling prior, paper eq. 3).

    Rows ``p0 .. p0 + n_pos - 1`` of ``w`` and ``m``; ``prior_shape`` = a_j (K,), ``theta`` =
    theta^(1)_j (K,) is overwritten with sum_s w_jks.  Stored values are floored at FLOOR, and
    for a tiny shape alpha = a_jk / S_j (< 0.1) at a position without counts only
    P(G < x0) with x0 = FLOOR * rate matters below the floor: the draw is the floor with
    probability p_floor = x0^alpha / Gamma(alpha + 1) (exact to O(x0)) and otherwise G
    conditioned on G >= x0.  Such positions are Bernoulli(1 - p_floor) trials, so the next one
    above the floor is a Geometric gap away, floor(E / -ln p_floor) with E ~ Exp(1): the walk
    costs one exponential draw per position above the floor instead of one uniform per
    position.  Writes the kernels above the floor at position s to
    ``heavy_k[s, :n_heavy_at[s]]``; ``scratch`` (float64, (4, K)) and ``slow`` (int32, K) are
    work arrays.  Returns the number of nonzero counts m_jks, whose offsets s * K + k it writes
    to ``nonzero`` (capacity S_j * K), so that the caller can reset them without a pass over
    all of m.
    """
    # views without reference counting (see rng.borrow): no atomic operations per call
    state, m, w, prior_shape = borrow(state), borrow(m), borrow(w), borrow(prior_shape)
    theta, scratch, slow = borrow(theta), borrow(scratch), borrow(slow)
    heavy_k, n_heavy_at, nonzero = borrow(heavy_k), borrow(n_heavy_at), borrow(nonzero)
    n_nonzero = 0
    alpha, log_p_floor, p_low, work = scratch[0], scratch[1], scratch[2], scratch[3]
    n_kernels = w.shape[1]
    log_x0 = _LOG_FLOOR + log_rate
    per_position = 1.0 / n_pos
    for k in range(n_kernels):
        theta[k] = 0.0
        alpha[k] = prior_shape[k] * per_position
        slow[k] = 1 if alpha[k] >= _FAST_SHAPE else 0  # drawn everywhere, not by the walk
    for s in range(n_pos):
        row = p0 + s
        # the whole row at the floor first (a vectorised store); the walk below raises the few
        # empty positions above it, and the loop after this one draws the rest
        for k in range(n_kernels):
            w[row, k] = FLOOR
        n_here = 0
        for k in range(n_kernels):
            count = m[row, k]
            if (count | slow[k]) != 0:  # one predictable branch for the common case
                if count != 0:
                    nonzero[n_nonzero] = s * n_kernels + k
                    n_nonzero += 1
                value = draw_scaled_gamma(state, count + alpha[k], log_rate)
                w[row, k] = value
                theta[k] += value
                if value > FLOOR:
                    heavy_k[s, n_here] = k
                    n_here += 1
        n_heavy_at[s] = n_here
    # the walk's constants for all kernels at once, in vectorised loops:
    # ln p_floor = a ln x0 - ln Gamma(1 + a); the envelope's low mass (1 - x0^a) / a.
    # From here alpha is read only for the walk's kernels, whose shapes are below _FAST_SHAPE;
    # clipping the slow ones keeps their (unused) constants finite.
    for k in range(n_kernels):
        alpha[k] = min(alpha[k], _FAST_SHAPE)
    lgamma1p_small_in_place(alpha, log_p_floor)
    for k in range(n_kernels):
        p_low[k] = alpha[k] * log_x0
        log_p_floor[k] = p_low[k] - log_p_floor[k]
    expm1_in_place(p_low, work)
    for k in range(n_kernels):
        mass_low = -p_low[k] / alpha[k]
        p_low[k] = mass_low / (mass_low + _EXP_M1)
    scale = np.exp(-log_rate)
    for k in range(n_kernels):
        lpf = log_p_floor[k]
        if slow[k] != 0 or not lpf < 0.0:
            continue  # drawn above, or every empty position at the floor (a = 0)
        # floor outcomes before the first position above it: Geometric(1 - p_floor), i.e.
        # floor(E / -ln p_floor) with E ~ Exp(1); none of the n_pos is above when
        # E >= -n_pos ln p_floor
        e = exponential_inline(state)
        if e >= -n_pos * lpf:
            continue
        # np.floor keeps the float (math.floor's int64 overflows when p_floor is within 1e-19 of 1)
        gap_scale = -1.0 / lpf
        s = np.floor(e * gap_scale)
        a = alpha[k]
        while s < n_pos:
            si = int(s)
            s += 1.0 + np.floor(exponential_inline(state) * gap_scale)
            if m[p0 + si, k] != 0:
                continue  # drawn above; this trial belongs to no empty position
            value = _gamma_above(state, a, -log_x0, p_low[k]) * scale
            if value > FLOOR:
                stored = np.float32(value)
                w[p0 + si, k] = stored
                theta[k] += stored
                heavy_k[si, n_heavy_at[si]] = k
                n_heavy_at[si] += 1
    return n_nonzero


@njit(cache=True)
def draw_document_split(state, m, w, p0, n_pos, prior_shape, log_rate, beta, theta, scratch,
                        log_split, heavy_k, n_heavy_at):
    """theta^(1)_jk ~ Gam(a_jk + A_jk, 1 / rate_j), pi_jk ~ Dir(beta + m_jk1, ..., beta + m_jkS)
    and w_jks = theta^(1)_jk pi_jks, floored, for one document (the pooling layer with its
    positional concentration beta free of a_jk; see :mod:`cpgbn.inference.gibbs`).

    In numpy terms, for each kernel k: ``A = m[:, k].sum()``,
    ``theta[k] = rng.gamma(a[k] + A) / rate`` (floored at TINY),
    ``w[:, k] = np.maximum(theta[k] * rng.dirichlet(beta + m[:, k]), FLOOR)`` as float32.
    A_jk is summed from m here (not read from the state: the Geweke test replaces m alone).
    The Dirichlet is a vector of log-gamma variates (:func:`log_gamma`, exact for tiny
    shapes) normalised by log-sum-exp.  When theta^(1)_jk <= FLOOR every w_jks is at the floor
    whatever pi_jk is, so that split is not drawn.  Every other split costs one log-gamma
    draw per position: there is no walk over the floor as in :func:`draw_document_weights`
    (so a sweep costs O(K sum_j S_j) log-gamma draws; with a tiny beta most of them land at
    the floor, and a walk would be the speed-up to write).  Writes rows ``p0 .. p0 + n_pos - 1`` of ``w``, ``theta``
    (K,) and the heavy lists as :func:`draw_document_weights` does; ``scratch`` is float64
    (>= 3, K) and ``log_split`` float64 (>= S_j, K).
    """
    # views without reference counting (see rng.borrow): no atomic operations per call
    state, m, w, prior_shape = borrow(state), borrow(m), borrow(w), borrow(prior_shape)
    theta, scratch, log_split = borrow(theta), borrow(scratch), borrow(log_split)
    heavy_k, n_heavy_at = borrow(heavy_k), borrow(n_heavy_at)
    n_kernels = w.shape[1]
    log_theta, top, total = scratch[0], scratch[1], scratch[2]
    for k in range(n_kernels):
        total[k] = 0.0
    for s in range(n_pos):
        for k in range(n_kernels):
            total[k] += m[p0 + s, k]
    for k in range(n_kernels):
        value = log_gamma(state, prior_shape[k] + total[k]) - log_rate
        log_theta[k] = value
        theta[k] = max(np.exp(value), TINY)
        top[k] = -np.inf  # stays -inf for a kernel whose w are all at the floor
        total[k] = 0.0
    for s in range(n_pos):
        for k in range(n_kernels):
            if log_theta[k] > _LOG_FLOOR:
                value = log_gamma(state, beta + m[p0 + s, k])
                log_split[s, k] = value
                top[k] = max(top[k], value)
    for s in range(n_pos):
        for k in range(n_kernels):
            if top[k] > -np.inf:
                total[k] += np.exp(log_split[s, k] - top[k])
    for k in range(n_kernels):
        if top[k] > -np.inf:  # ln theta - ln sum_s G_s: w_jks = exp(ln G_s + this)
            log_theta[k] -= top[k] + np.log(total[k])
    for s in range(n_pos):
        row = p0 + s
        n_here = 0
        for k in range(n_kernels):
            w[row, k] = FLOOR
            if top[k] > -np.inf:
                stored = np.float32(np.exp(log_split[s, k] + log_theta[k]))
                if stored > FLOOR:  # as the heavy lists read w (float32)
                    w[row, k] = stored
                    heavy_k[s, n_here] = k
                    n_here += 1
        n_heavy_at[s] = n_here


@njit(cache=True)
def list_heavy_kernels(w, p0, n_pos, heavy_k, n_heavy_at):
    """The kernels above the floor at each position of one document (w given, not drawn)."""
    # views without reference counting (see rng.borrow): no atomic operations per call
    w, heavy_k, n_heavy_at = borrow(w), borrow(heavy_k), borrow(n_heavy_at)
    n_kernels = w.shape[1]
    for s in range(n_pos):
        n_here = 0
        for k in range(n_kernels):
            if w[p0 + s, k] > FLOOR:
                heavy_k[s, n_here] = k
                n_here += 1
        n_heavy_at[s] = n_here


@njit(cache=True)
def sample_empty_weights(seed, alpha, rate, n):
    """n draws of w at positions without counts (for tests: compare with flooring Gam(alpha)/rate).

    They come from :func:`draw_document_weights` on one-kernel documents of 50 positions with
    m = 0, in position order, so the geometric walk across positions is what is tested.
    """
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    n_pos = 50
    m = np.zeros((n_pos, 1), dtype=np.int32)
    w = np.empty((n_pos, 1), dtype=np.float32)
    prior = np.array([alpha * n_pos])
    theta = np.empty(1)
    scratch = np.empty((4, 1))
    heavy_k = np.empty((n_pos, 1), dtype=np.int32)
    n_heavy_at = np.empty(n_pos, dtype=np.int32)
    out = np.empty(n, dtype=np.float32)
    log_rate = np.log(rate)
    for start in range(0, n, n_pos):
        draw_document_weights(state, m, w, 0, n_pos, prior, log_rate, theta, scratch,
                              np.empty(1, dtype=np.int32), heavy_k, n_heavy_at,
                              np.empty(n_pos, dtype=np.int64))
        for s in range(min(n_pos, n - start)):
            out[start + s] = w[s, 0]
    return out


@njit(cache=True)
def sample_gamma_above(seed, alpha, x0, n):
    """n draws of Gam(alpha) conditioned on >= x0 by the walk's sampler (for tests)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    mass_low = -math.expm1(alpha * np.log(x0)) / alpha
    p_low = mass_low / (mass_low + _EXP_M1)
    out = np.empty(n)
    for i in range(n):
        out[i] = _gamma_above(state, alpha, -np.log(x0), p_low)
    return out
