"""Counter-seeded xoshiro256** streams and basic continuous variates for numba code.

The Gibbs sampler runs numba kernels in parallel over blocks of documents.  To make
the result independent of the number of threads, every block owns an explicit RNG
state derived from ``(seed, stream, block)``; numba's ``np.random`` is *not* used
because its state is per thread.  Every function here is a plain ``@njit`` function
taking that state (a 1-D ``np.uint64`` array of length 4, mutated in place), so it
can be called from other njit code and from Python alike.

Generator: xoshiro256** (Blackman & Vigna 2018).  It is chosen over xoshiro256+
because all 64 output bits are of full quality: we use the low bits for the ziggurat
layer index and sign, and the high 53 bits for the mantissa, which xoshiro256+
(weak low bits) would not support.  The cost difference (one extra multiply) is
negligible.

Seeding: ``(seed, stream, block)`` are chained through the splitmix64 finaliser
(a bijection of 64-bit words), and the result seeds a splitmix64 sequence that
fills the four state words (the seeding procedure recommended by the xoshiro
authors).

Normal and exponential variates use the ziggurat method (Marsaglia & Tsang 2000,
"The ziggurat method for generating random variables"), with independent bits for
layer, sign and abscissa and a fresh draw after every rejection (the correction
of Doornik 2005), so they are exact up to float64 rounding of the tables.

All uint64 arithmetic is done with ``np.uint64`` operands only: in numba, mixing
uint64 with int64 promotes to float64.

Implementation note (performance): each public function is a thin cached ``@njit``
wrapper around a private ``inline="always"`` helper (``next_u64_inline``, ``uniform_inline``,
``normal_inline``, ``exponential_inline``), and other primitives call the private helpers, so
every public primitive compiles to one leaf function.  Numba increfs/decrefs an
array's meminfo (atomic operations, ~10 ns per draw, and cache-line contention when
threads use rows of one shared ``states`` array) whenever it binds the array to a
new variable, including the arguments of inlined helpers, and its reference-count
pruning pass does not remove all of those pairs in branchy rejection samplers.
So every public primitive first takes a :func:`borrow`-ed view of its array
arguments (same data, no meminfo): reference counting on it is a no-op, and the
owner (the caller's argument) is alive for the whole call.
"""
import math

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

__all__ = [
    "seed_state",
    "new_states",
    "next_u64",
    "uniform",
    "standard_normal",
    "standard_exponential",
]

# ----------------------------------------------------------------------------
# 64-bit constants (typed uint64 so numba never promotes to float64)
# ----------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_STREAM_SALT = np.uint64(0xD1B54A32D192ED03)
_BLOCK_SALT = np.uint64(0x8CB92BA72F3D8DD7)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U5 = np.uint64(5)
_U7 = np.uint64(7)
_U8 = np.uint64(8)
_U9 = np.uint64(9)
U11 = np.uint64(11)
_U17 = np.uint64(17)
_U27 = np.uint64(27)
_U30 = np.uint64(30)
_U31 = np.uint64(31)
_U45 = np.uint64(45)
_U64 = np.uint64(64)
MASK8 = np.uint64(0xFF)
TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


@intrinsic
def borrow(typingctx, arr):
    """A view of ``arr`` (same data, shape, strides) with a NULL meminfo, so that numba
    does no reference counting on it.  Only valid while ``arr`` itself is alive: use
    it inside one function call, never return or store it."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, value=args[0])
        dst = make_array(sig.return_type)(context, builder)
        populate_array(dst, data=src.data, shape=src.shape, strides=src.strides,
                       itemsize=src.itemsize, meminfo=None, parent=None)
        return dst._getvalue()

    return arr(arr), codegen


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _mix64(z):
    """splitmix64 finaliser: a bijective avalanche of one uint64 word."""
    z = (z ^ (z >> _U30)) * _MIX1
    z = (z ^ (z >> _U27)) * _MIX2
    return z ^ (z >> _U31)


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def seed_state(state, seed, stream, block):
    """Fill ``state`` (uint64[4]) for the stream identified by ``(seed, stream, block)``.

    The three integers (int64 or uint64; negative values are taken modulo 2**64) are
    chained through the splitmix64 finaliser, each with its own additive salt, so
    that for fixed ``(seed, stream)`` distinct blocks give distinct 64-bit keys
    (the finaliser is a bijection).  The key then seeds a splitmix64 sequence whose
    four outputs are the xoshiro256** state.  The all-zero state (the only invalid
    one) is replaced by a fixed nonzero word, so it can never occur.
    """
    h = _mix64(np.uint64(seed) + _GOLDEN)
    h = _mix64(h ^ (np.uint64(stream) + _STREAM_SALT))
    h = _mix64(h ^ (np.uint64(block) + _BLOCK_SALT))
    x = h
    for i in range(4):
        x = x + _GOLDEN
        state[i] = _mix64(x)
    if state[0] == _U0 and state[1] == _U0 and state[2] == _U0 and state[3] == _U0:
        state[0] = _GOLDEN
    return state


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def new_states(seed, stream, n_blocks):
    """Return a ``(n_blocks, 4)`` uint64 array; row ``b`` is ``seed_state(., seed, stream, b)``."""
    out = np.empty((n_blocks, 4), dtype=np.uint64)
    for b in range(n_blocks):
        seed_state(out[b], seed, stream, b)
    return out


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _rotl(x, k):
    return (x << k) | (x >> (_U64 - k))


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def next_u64_inline(state):
    s0 = state[0]
    s1 = state[1]
    s2 = state[2]
    s3 = state[3]
    result = _rotl(s1 * _U5, _U7) * _U9
    t = s1 << _U17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, _U45)
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3
    return result


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def uniform_inline(state):
    while True:
        k = next_u64_inline(state) >> U11
        if k != _U0:
            return np.float64(k) * TWO_M53


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def next_u64(state):
    """Next 64-bit output of xoshiro256** (Blackman & Vigna 2018); advances ``state``.

    Uniform on {0, ..., 2**64 - 1}; period 2**256 - 1.
    """
    return next_u64_inline(borrow(state))


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def uniform(state):
    """Uniform(0, 1) on the OPEN interval, 53-bit resolution.

    Returns ``k * 2**-53`` with ``k`` uniform on {1, ..., 2**53 - 1} (the top 53 bits
    of a xoshiro256** output; ``k == 0`` is rejected and redrawn, probability 2**-53).
    Every value is exactly representable, so the result is never 0.0 nor 1.0.
    Equivalent in distribution to ``numpy.random.uniform(0, 1)`` (minus the point 0).
    """
    return uniform_inline(borrow(state))


# ----------------------------------------------------------------------------
# Ziggurat tables (computed once at import, frozen into the compiled code)
# ----------------------------------------------------------------------------
_ZIG_N = 256


def _ziggurat_tables(f, finv, tail_area, r_lo, r_hi):
    """Layer abscissae X[0..N] (X[0] = v/f(r) is the pseudo-width of the base
    layer, X[1] = r, X[N] = 0) and fX = f(X).  ``r`` is found by bisection so that
    the N equal-area layers exactly close at the mode."""
    n = _ZIG_N

    def build(r):
        v = r * f(r) + tail_area(r)
        xs = [v / f(r), r]
        fs = [0.0, f(r)]
        for _ in range(1, n - 1):
            # equal areas: X[k] * (f(X[k+1]) - f(X[k])) = v
            y = fs[-1] + v / xs[-1]
            if y >= 1.0:
                return None, v, xs, fs
            fs.append(y)
            xs.append(finv(y))
        return xs, v, xs, fs

    for _ in range(200):
        r = 0.5 * (r_lo + r_hi)
        full, v, xs, fs = build(r)
        if full is None:
            r_lo = r  # layers too big: closed before N layers -> r too small
            continue
        # area of the top layer vs v: > 0 means the layers overshoot -> r too small
        excess = fs[-1] + v / xs[-1] - 1.0
        if excess > 0.0:
            r_lo = r
        else:
            r_hi = r
        if r_hi - r_lo <= 4e-16 * r:
            break
    r = r_hi
    xs, v, _, fs = build(r)
    xs.append(0.0)
    fs.append(1.0)
    x = np.array(xs, dtype=np.float64)
    fx = np.array(fs, dtype=np.float64)
    return x, fx, r


def _fn(x):
    return math.exp(-0.5 * x * x)


def _fn_inv(y):
    return math.sqrt(-2.0 * math.log(y))


def _fn_tail(r):
    return math.sqrt(0.5 * math.pi) * math.erfc(r / math.sqrt(2.0))


def _fe(x):
    return math.exp(-x)


def _fe_inv(y):
    return -math.log(y)


def _fe_tail(r):
    return math.exp(-r)


_ZN_X, _ZN_F, _ZN_R = _ziggurat_tables(_fn, _fn_inv, _fn_tail, 3.0, 4.5)
_ZE_X, _ZE_F, _ZE_R = _ziggurat_tables(_fe, _fe_inv, _fe_tail, 6.0, 9.0)
_ZN_INV_R = 1.0 / _ZN_R


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def _normal_tail(state):
    """|Z| conditioned on |Z| > r (r = _ZN_R): Marsaglia's (1964) exact method,
    r + A with A = E1/r accepted when 2 E2 > A**2."""
    while True:
        a = -math.log(uniform_inline(state)) * _ZN_INV_R
        b = -math.log(uniform_inline(state))
        if b + b > a * a:
            return _ZN_R + a


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def normal_inline(state):
    while True:
        bits = next_u64_inline(state)
        k = np.int64(bits & MASK8)
        neg = ((bits >> _U8) & _U1) != _U0
        u = np.float64(bits >> U11) * TWO_M53  # [0, 1)
        x = u * _ZN_X[k]
        if x < _ZN_X[k + 1]:
            return -x if neg else x
        if k == 0:
            x = _normal_tail(state)  # the base layer's part beyond r is the tail
            return -x if neg else x
        # wedge: uniform y between the layer's lower and upper density levels
        y = _ZN_F[k] + uniform_inline(state) * (_ZN_F[k + 1] - _ZN_F[k])
        if y < math.exp(-0.5 * x * x):
            return -x if neg else x


@numba.njit(inline="always", fastmath=False, error_model="numpy")
def exponential_inline(state):
    offset = 0.0
    while True:
        bits = next_u64_inline(state)
        k = np.int64(bits & MASK8)
        u = np.float64(bits >> U11) * TWO_M53  # [0, 1)
        x = u * _ZE_X[k]
        if x < _ZE_X[k + 1]:
            return offset + x
        if k == 0:
            offset += _ZE_R
            continue
        y = _ZE_F[k] + uniform_inline(state) * (_ZE_F[k + 1] - _ZE_F[k])
        if y < math.exp(-x):
            return offset + x


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def standard_normal(state):
    """Standard normal N(0, 1) variate (``numpy.random.standard_normal()``).

    Ziggurat method (Marsaglia & Tsang 2000) with 256 equal-area layers; one
    64-bit draw gives layer (bits 0-7), sign (bit 8) and abscissa (bits 11-63).
    Rejections restart from a fresh draw (Doornik 2005); the tail beyond
    r ~ 3.654 uses Marsaglia's (1964) exact exponential-rejection tail method.
    """
    return normal_inline(borrow(state))


@numba.njit(cache=True, fastmath=False, error_model="numpy")
def standard_exponential(state):
    """Standard exponential Exp(1) variate (``numpy.random.standard_exponential()``).

    Ziggurat method (Marsaglia & Tsang 2000) with 256 equal-area layers; the tail
    beyond r ~ 7.697 is handled exactly by memorylessness (add r and redraw).
    """
    return exponential_inline(borrow(state))
