"""Exact random variates for numba kernels, driven by an explicit xoshiro256** state.

Every function takes ``state`` (uint64[4], see :mod:`cpgbn.backends.numba.rng`) first, is a
plain ``@njit(cache=True)`` function usable from other njit code, and is exact in
distribution (up to float64 rounding).  Degenerate parameters are handled without
raising (njit code cannot raise cheaply in hot loops): they are documented per function.

As in :mod:`cpgbn.backends.numba.rng`, public functions are cached wrappers over private
``inline="always"`` helpers, and public functions only call private helpers, so each
compiles to a leaf function with no array reference counting per draw.
"""
import math

import numba
import numpy as np

from .rng import borrow, exponential_inline, normal_inline, uniform_inline

__all__ = [
    "gamma",
    "log_gamma",
    "poisson",
    "zero_truncated_poisson",
    "binomial",
    "categorical_cumulative",
    "multinomial_cumulative",
    "crt",
    "dirichlet",
    "beta",
]

_ONE_THIRD = 1.0 / 3.0


# ----------------------------------------------------------------------------
# Gamma
# ----------------------------------------------------------------------------
@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _gamma_mt(state, shape):
    """Gamma(shape, 1) for shape >= 1: Marsaglia & Tsang (2000), "A simple method
    for generating gamma variables", with the x**4 squeeze."""
    d = shape - _ONE_THIRD
    return _gamma_mt_constants(state, d, 1.0 / math.sqrt(9.0 * d))


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _gamma_mt_constants(state, d, c):
    """Marsaglia & Tsang with d = shape - 1/3 and c = 1/sqrt(9 d) given (shape >= 1)."""
    while True:
        x = normal_inline(state)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = uniform_inline(state)
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2:
            return d * v
        if math.log(u) < 0.5 * x2 + d * (1.0 - v + math.log(v)):
            return d * v


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _gamma(state, shape):
    # (one inlined copy of _gamma_mt only: compile time grows with every copy)
    if not (shape > 0.0):
        return 0.0
    small = shape < 1.0
    g = _gamma_mt(state, shape + 1.0 if small else shape)
    if small:
        # boost: G(shape) = G(shape + 1) * U**(1/shape), U**(1/shape) = exp(-E/shape)
        g *= math.exp(-exponential_inline(state) / shape)
    return g


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def gamma(state, shape):
    """Gamma(shape, scale=1) variate: density x**(shape-1) exp(-x) / Gamma(shape).

    Equivalent in distribution to ``numpy.random.gamma(shape)`` /
    ``scipy.stats.gamma(shape).rvs()``.
    Algorithm: shape >= 1: Marsaglia & Tsang (2000), normal variates by ziggurat.
    shape < 1: the boost G(shape) = G(shape + 1) * U**(1/shape) (Marsaglia & Tsang
    2000, sec. 6; Stuart 1962), with U**(1/shape) = exp(-E/shape), E ~ Exp(1); for
    tiny shapes the value may underflow to 0.0 (use :func:`log_gamma` when the log
    is what you need).
    shape <= 0 (or NaN) returns 0.0 (the shape -> 0 limit, a point mass at 0).
    """
    return _gamma(borrow(state), shape)


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def log_gamma_inline(state, shape):
    if not (shape > 0.0):
        return -np.inf
    small = shape < 1.0
    lg = math.log(_gamma_mt(state, shape + 1.0 if small else shape))
    if small:
        # boost in log space: log G(shape) = log G(shape + 1) + log(U) / shape, with
        # -log(U) ~ Exp(1) drawn directly by the exponential ziggurat
        lg -= exponential_inline(state) / shape
    return lg


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def log_gamma(state, shape):
    """log of a Gamma(shape, 1) variate, accurate for tiny shapes.

    Equivalent in distribution to ``numpy.log(numpy.random.gamma(shape))`` and to
    ``scipy.stats.loggamma(c=shape).rvs()`` (density exp(shape*x - exp(x))/Gamma(shape)),
    but never underflows: for shape < 1 it returns log(G(shape + 1)) - E/shape with
    E ~ Exp(1) (= log(U)/shape; the Marsaglia & Tsang 2000 boost computed in log
    space); for shape >= 1 the log of a Marsaglia-Tsang draw.  shape <= 0 (or NaN)
    returns -inf.
    """
    return log_gamma_inline(borrow(state), shape)


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def beta(state, a, b):
    """Beta(a, b) variate: density x**(a-1) (1-x)**(b-1) / B(a, b) on (0, 1).

    Equivalent in distribution to ``numpy.random.beta(a, b)``.
    Algorithm: X = G_a / (G_a + G_b) with independent gammas (Marsaglia & Tsang
    2000), the ratio formed in log space (log_gamma + log-sum-exp) so that tiny
    shapes give 0/1-saturated values instead of 0/0 = NaN.
    a <= 0 returns 0.0, b <= 0 returns 1.0 (a <= 0 takes precedence).
    """
    state = borrow(state)
    if not (a > 0.0):
        return 0.0
    if not (b > 0.0):
        return 1.0
    la = 0.0
    lb = 0.0
    for j in range(2):  # a loop keeps a single inlined copy of the gamma sampler
        v = log_gamma_inline(state, a if j == 0 else b)
        if j == 0:
            la = v
        else:
            lb = v
    if la >= lb:
        return 1.0 / (1.0 + math.exp(lb - la))
    e = math.exp(la - lb)
    return e / (1.0 + e)


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def dirichlet(state, alpha, out):
    """out[:] = Dirichlet(alpha) (``numpy.random.dirichlet(alpha)``), float64.

    Algorithm: independent log-gamma variates (:func:`log_gamma`) normalised with
    log-sum-exp, so tiny alphas never produce an all-zero or NaN vector (entries
    may underflow to exactly 0.0, but the vector always sums to 1 up to rounding).
    Entries with alpha <= 0 get 0.0.  If no alpha is > 0 the result is undefined
    and ``out`` is filled with NaN.
    """
    state = borrow(state)
    alpha = borrow(alpha)
    out = borrow(out)
    n = alpha.shape[0]
    m = -np.inf
    for i in range(n):
        lg = log_gamma_inline(state, alpha[i])
        out[i] = lg
        if lg > m:
            m = lg
    if m == -np.inf:
        for i in range(n):
            out[i] = np.nan
        return
    s = 0.0
    for i in range(n):
        e = math.exp(out[i] - m)
        out[i] = e
        s += e
    inv = 1.0 / s
    for i in range(n):
        out[i] *= inv


# ----------------------------------------------------------------------------
# Poisson
# ----------------------------------------------------------------------------
_POISSON_INV_MAX = 10.0


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _search_from(state, lam, k_first, p_first):
    """Sequential-search inversion of a Poisson(lam) tail from k_first, whose probability is
    p_first (expected lam + 1 steps): the Poisson itself from k = 0, the zero-truncated one
    from k = 1."""
    while True:
        u = uniform_inline(state)
        k = k_first
        p = p_first
        s = p_first
        ok = True
        while u > s:
            k += 1
            p *= lam / k
            s += p
            if p < 1e-300 and k > lam:
                ok = False  # u beyond the float-representable cdf (prob ~1e-16): redraw
                break
        if ok:
            return np.int64(k)


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _poisson_inversion(state, lam):
    """Sequential-search inversion from k = 0, lam < ~10."""
    return _search_from(state, lam, 0, math.exp(-lam))


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _poisson_ptrs(state, lam):
    """Poisson for lam >= 10: transformed rejection with squeeze, PTRS
    (Hormann 1993, "The transformed rejection method for generating Poisson
    random variables")."""
    slam = math.sqrt(lam)
    loglam = math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_invalpha = math.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2.0)
    while True:
        u = uniform_inline(state) - 0.5
        v = uniform_inline(state)
        us = 0.5 - abs(u)
        kf = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        if us >= 0.07 and v <= vr:
            return np.int64(kf)
        if kf < 0.0 or (us < 0.013 and v > us):
            continue
        if (math.log(v) + log_invalpha - math.log(a / (us * us) + b)
                <= -lam + kf * loglam - math.lgamma(kf + 1.0)):
            return np.int64(kf)


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _poisson(state, lam):
    if lam >= _POISSON_INV_MAX:
        return _poisson_ptrs(state, lam)
    if not (lam > 0.0):
        return np.int64(0)
    return _poisson_inversion(state, lam)


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def poisson(state, lam):
    """Poisson(lam) variate, P(k) = lam**k exp(-lam) / k!  (``numpy.random.poisson(lam)``).

    Algorithm: lam < 10: inversion by sequential search; lam >= 10: PTRS
    (Hormann 1993), exact transformed rejection, O(1) expected time.
    lam <= 0 (or NaN) returns 0.
    """
    return _poisson(borrow(state), lam)


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def zero_truncated_poisson(state, lam):
    """Zero-truncated Poisson: Poisson(lam) conditioned on being >= 1,
    P(k) = lam**k / (k! (exp(lam) - 1)), k >= 1.

    Equivalent in distribution to drawing ``numpy.random.poisson(lam)`` until > 0.
    Algorithm: lam < 10: inversion from k = 1 with P(1) = lam / expm1(lam) (stable for
    tiny lam: lam = 1e-12 gives 1 with probability 1 - 5e-13, no cancellation);
    lam >= 10: rejection, PTRS Poisson draws until > 0 (acceptance > 0.9999).
    lam <= 0 (or NaN) returns 1 (the lam -> 0 limit).
    """
    state = borrow(state)
    if lam >= _POISSON_INV_MAX:
        while True:
            k = _poisson_ptrs(state, lam)
            if k > 0:
                return k
    if not (lam > 0.0):
        return np.int64(1)
    return _search_from(state, lam, 1, lam / math.expm1(lam))


# ----------------------------------------------------------------------------
# Binomial
# ----------------------------------------------------------------------------
_BINOMIAL_INV_MAX = 10.0


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _binomial_inversion(state, n, p):
    """Binomial by sequential-search inversion (BINV, Kachitvichyanukul & Schmeiser
    1988) for p <= 1/2 and n*p < 10: expected n*p + 1 steps."""
    q = 1.0 - p
    s = p / q
    a = (n + 1) * s
    r0 = math.exp(n * math.log1p(-p))
    while True:
        u = uniform_inline(state)
        r = r0
        x = 0
        ok = True
        while u > r:
            u -= r
            x += 1
            if x > n:
                ok = False  # rounding left u above the total mass: redraw
                break
            r *= a / x - s
        if ok:
            return np.int64(x)


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _binomial_btrs(state, n, p):
    """Binomial for p <= 1/2 and n*p >= 10: transformed rejection with squeeze,
    BTRS (Hormann 1993, "The generation of binomial random variates"); O(1)."""
    q = 1.0 - p
    spq = math.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    log_alpha = math.log((2.83 + 5.1 / b) * spq)
    lpq = math.log(p / q)
    m = math.floor((n + 1) * p)
    h = math.lgamma(m + 1.0) + math.lgamma(n - m + 1.0)
    nf = np.float64(n)
    while True:
        u = uniform_inline(state) - 0.5
        v = uniform_inline(state)
        us = 0.5 - abs(u)
        kf = math.floor((2.0 * a / us + b) * u + c)
        if kf < 0.0 or kf > nf:
            continue
        if us >= 0.07 and v <= vr:
            return np.int64(kf)
        lv = math.log(v) + log_alpha - math.log(a / (us * us) + b)
        if lv <= h - math.lgamma(kf + 1.0) - math.lgamma(nf - kf + 1.0) + (kf - m) * lpq:
            return np.int64(kf)


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _binomial(state, n, p):
    if n <= 0 or not (p > 0.0):
        return np.int64(0)
    if p >= 1.0:
        return np.int64(n)
    flip = p > 0.5
    if flip:
        p = 1.0 - p
    if n * p < _BINOMIAL_INV_MAX:
        k = _binomial_inversion(state, n, p)
    else:
        k = _binomial_btrs(state, n, p)
    if flip:
        return np.int64(n) - k
    return k


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def binomial(state, n, p):
    """Binomial(n, p) variate (``numpy.random.binomial(n, p)``), n >= 0 integer.

    Algorithm (on min(p, 1-p), reflecting the result): n*p < 10: inversion (BINV,
    Kachitvichyanukul & Schmeiser 1988), expected O(n*p + 1); otherwise BTRS
    (Hormann 1993), O(1) expected.  n <= 0 or p <= 0 returns 0; p >= 1 returns n.
    """
    return _binomial(borrow(state), n, p)


# ----------------------------------------------------------------------------
# Categorical / multinomial from cumulative weights
# ----------------------------------------------------------------------------
@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _search_cumulative(cum, size, t):
    """First index i in [0, size) with cum[i] > t (size if none)."""
    lo = 0
    hi = size
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] > t:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _categorical(state, cum, size):
    total = cum[size - 1]
    while True:
        t = uniform_inline(state) * total
        i = _search_cumulative(cum, size, t)
        if i < size:
            return np.int64(i)


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def categorical_cumulative(state, cum, size):
    """One Categorical draw, P(i) = w[i] / sum(w), from the INCLUSIVE cumulative sums
    ``cum[0:size]`` of nonnegative weights w (cum[size-1] > 0).

    Equivalent to ``numpy.random.choice(size, p=w / w.sum())``.
    Algorithm: inversion by binary search for the first i with cum[i] > U*cum[size-1],
    U in (0, 1), O(log size).  Zero-weight entries are never returned (their cum
    equals the previous one, or 0 for i = 0).  The rare rounding case U*total == total
    is redrawn.
    """
    return _categorical(borrow(state), borrow(cum), size)


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def multinomial_categorical(state, n, cum, size, out):
    """Multinomial by n independent categorical draws: O(size + n log size)."""
    for i in range(size):
        out[i] = 0
    for _ in range(n):
        out[_categorical(state, cum, size)] += 1


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def multinomial_binomials(state, n, cum, size, out):
    """Multinomial by conditional binomials: cell i gets Binomial(remaining n,
    w[i] / (remaining mass)); O(size) binomial draws, stops once n is used up."""
    total = cum[size - 1]
    rem = np.int64(n)
    prev = 0.0
    for i in range(size):
        c = cum[i]
        if rem <= 0:
            out[i] = 0
            continue
        w = c - prev
        mass = total - prev
        prev = c
        if w <= 0.0:
            out[i] = 0
            continue
        if w >= mass:
            k = rem
        else:
            k = _binomial(state, rem, w / mass)
        out[i] = k
        rem -= k


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def multinomial_cumulative(state, n, cum, size, out):
    """out[0:size] = Multinomial(n, w / sum(w)) given the INCLUSIVE cumulative sums
    ``cum[0:size]`` of nonnegative weights w (cum[size-1] > 0).  ``out`` (int64 or
    int32) is overwritten.  Equivalent to ``numpy.random.multinomial(n, w / w.sum())``.

    Algorithm: if n * (log2(size) + 1) <= 8 * size, n categorical draws by binary
    search (O(size + n log size)); otherwise conditional binomials (cell i ~
    Binomial(n_left, w[i] / w[i:].sum()), inversion/BTRS, O(size) draws with O(1)
    expected cost each).  Both exact; zero-weight cells always get 0.  n <= 0 gives
    all zeros.
    """
    state = borrow(state)
    cum = borrow(cum)
    out = borrow(out)
    if n <= 0:
        for i in range(size):
            out[i] = 0
        return
    lg = 1.0
    s = size
    while s > 1:
        s >>= 1
        lg += 1.0
    if n * lg <= 8.0 * size:  # measured crossover of the two exact methods
        multinomial_categorical(state, n, cum, size, out)
    else:
        multinomial_binomials(state, n, cum, size, out)


# ----------------------------------------------------------------------------
# Chinese restaurant table distribution
# ----------------------------------------------------------------------------
@numba.njit(cache=True, fastmath=False, error_model="numpy")
def crt(state, m, a):
    """Chinese restaurant table count CRT(m, a) = sum_{i=1..m} Bernoulli(a / (a + i - 1)),
    i.e. P(l) = |s(m, l)| a**l Gamma(a) / Gamma(m + a) (unsigned Stirling numbers of
    the first kind); the number of tables after seating m customers with
    concentration a (Zhou & Carin 2015).  Numpy equivalent:
    ``(numpy.random.random(m) < a / (a + numpy.arange(m))).sum()``.

    Algorithm: small m (m <= 4 a log(1 + m/a) + 16): one uniform per customer.
    Large m: exact thinning of the decreasing-probability Bernoulli sequence: from
    the last examined index i, jump to j = i + Geometric(p_{i+1}) and accept j with
    probability p_j / p_{i+1} = (a + i) / (a + j - 1); expected cost O(a log(m/a)),
    independent of m otherwise (m = 1e6 costs ~ a*14 + a few draws).
    m <= 0 returns 0; m >= 1 always gives >= 1 (customer 1 opens a table); for
    m >= 1, a <= 0 (or NaN) returns 1 (the a -> 0 limit).
    """
    state = borrow(state)
    if m <= 0:
        return np.int64(0)
    if not (a > 0.0):
        return np.int64(1)
    mf = np.float64(m)
    count = np.int64(1)  # customer 1 sits at a new table with probability 1
    # 4 a log(1 + m/a), written so that a denormal a cannot overflow m/a
    if mf <= 4.0 * a * (math.log(mf + a) - math.log(a)) + 16.0:
        for i in range(1, m):
            # customer i+1: new table with probability a / (a + i)
            if uniform_inline(state) * (a + i) < a:
                count += 1
        return count
    i = 1.0  # indices 1..i examined
    while True:
        q = a / (a + i)  # p_{i+1}, dominates p_j for all j > i
        # failures before success; np.floor keeps the float: for a below about 1e-18 the gap
        # passes 2^63, where math.floor's int64 wrapped to a negative j and the loop never ended
        g = np.floor(math.log(uniform_inline(state)) / math.log1p(-q))
        j = i + 1.0 + g
        if j > mf:
            return count
        # accept with p_j / q = (a + i) / (a + j - 1)
        if uniform_inline(state) * (a + j - 1.0) < a + i:
            count += 1
        i = j
