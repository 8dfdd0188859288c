"""Goodness-of-fit tests for the hand-written numba RNG primitives.

Every statistical test uses a FIXED seed (so it is deterministic, never flaky) and is a
real test at significance level ``ALPHA``: it fails when the p-value of the test of
"the sampler draws from the stated distribution" is below ``ALPHA``.  References are
scipy.stats distributions or exact pmfs computed independently here.  Draws are made by
small numba drivers so the whole file is fast.
"""
import math

import numba
import numpy as np
import pytest
from scipy import special, stats

from cpgbn.backends.numba import (
    beta,
    binomial,
    categorical_cumulative,
    crt,
    dirichlet,
    gamma,
    log_gamma,
    multinomial_cumulative,
    new_states,
    next_u64,
    poisson,
    seed_state,
    standard_exponential,
    standard_normal,
    uniform,
    zero_truncated_poisson,
)
from cpgbn.backends.numba import rng as rng_mod
from cpgbn.backends.numba.distributions import multinomial_binomials, multinomial_categorical

#: significance level of every goodness-of-fit test
ALPHA = 1e-3
#: two-sided normal quantile for ALPHA
Z_CRIT = stats.norm.isf(ALPHA / 2)


def _state(seed, stream=7, block=0):
    st = np.empty(4, dtype=np.uint64)
    seed_state(st, seed, stream, block)
    return st


# ----------------------------------------------------------------------------
# numba drivers (one compilation each, generic over the distribution)
# ----------------------------------------------------------------------------
@numba.njit(cache=True)
def _draw_float(kind, state, n, p1, p2):
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        if kind == 0:
            out[i] = uniform(state)
        elif kind == 1:
            out[i] = standard_normal(state)
        elif kind == 2:
            out[i] = standard_exponential(state)
        elif kind == 3:
            out[i] = gamma(state, p1)
        elif kind == 4:
            out[i] = log_gamma(state, p1)
        else:
            out[i] = beta(state, p1, p2)
    return out


U, NORMAL, EXPON, GAMMA, LOG_GAMMA, BETA = range(6)


@numba.njit(cache=True)
def _draw_int(kind, state, n, p1, p2):
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        if kind == 0:
            out[i] = poisson(state, p1)
        elif kind == 1:
            out[i] = zero_truncated_poisson(state, p1)
        elif kind == 2:
            out[i] = binomial(state, np.int64(p1), p2)
        else:
            out[i] = crt(state, np.int64(p1), p2)
    return out


POISSON, ZTPOISSON, BINOMIAL, CRT = range(4)


@numba.njit(cache=True)
def _draw_u64(state, n):
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = next_u64(state)
    return out


@numba.njit(cache=True)
def _draw_normal_tail(state, n):
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = rng_mod._normal_tail(state)
    return out


@numba.njit(cache=True)
def _normal_abs_histogram(state, n, edges):
    """Histogram of |Z| over increasing ``edges`` (last = inf) for n standard normals."""
    counts = np.zeros(edges.shape[0] - 1, dtype=np.int64)
    nb = edges.shape[0] - 1
    for _ in range(n):
        z = abs(standard_normal(state))
        lo = 0
        hi = nb
        while hi - lo > 1:  # last lo with edges[lo] <= z
            mid = (lo + hi) >> 1
            if edges[mid] <= z:
                lo = mid
            else:
                hi = mid
        counts[lo] += 1
    return counts


@numba.njit(cache=True)
def _draw_categorical(state, cum, size, n):
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = categorical_cumulative(state, cum, size)
    return out


@numba.njit(cache=True)
def _draw_multinomial(which, state, n, cum, size, reps, out_dtype_probe, ncols=-1):
    out = np.full((reps, size if ncols < 0 else ncols), -7, dtype=out_dtype_probe.dtype)
    for r in range(reps):
        if which == 0:
            multinomial_cumulative(state, n, cum, size, out[r])
        elif which == 1:
            multinomial_categorical(state, n, cum, size, out[r])
        else:
            multinomial_binomials(state, n, cum, size, out[r])
    return out


@numba.njit(cache=True)
def _draw_dirichlet(state, alpha, reps):
    out = np.empty((reps, alpha.shape[0]), dtype=np.float64)
    for r in range(reps):
        dirichlet(state, alpha, out[r])
    return out


def draw(kind, n, p1=0.0, p2=0.0, seed=1):
    return _draw_float(kind, _state(seed), n, float(p1), float(p2))


def draw_int(kind, n, p1=0.0, p2=0.0, seed=1):
    return _draw_int(kind, _state(seed), n, float(p1), float(p2))


# ----------------------------------------------------------------------------
# statistical helpers
# ----------------------------------------------------------------------------
def chi2_discrete(samples, pmf, min_expected=5.0):
    """Chi-square p-value of integer ``samples`` against ``pmf[k]`` = P(X = k), k >= 0.

    Values >= len(pmf) - 1 form one tail bin whose probability is 1 - sum(pmf[:-1]);
    adjacent bins are pooled left to right until each expects >= ``min_expected``.
    """
    samples = np.asarray(samples)
    assert samples.min() >= 0, "sample outside the support"
    n = samples.size
    kmax = len(pmf) - 1
    obs = np.bincount(np.minimum(samples, kmax), minlength=kmax + 1).astype(np.float64)
    p = np.asarray(pmf, dtype=np.float64).copy()
    p[kmax] = max(1.0 - p[:kmax].sum(), 0.0)
    exp = n * p
    # a sample where the model puts zero mass is an outright failure
    assert np.all(obs[exp == 0] == 0), "sample where the pmf is zero"
    pooled_obs, pooled_exp = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(obs, exp):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            pooled_obs.append(acc_o)
            pooled_exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0 or acc_o > 0:
        pooled_obs[-1] += acc_o
        pooled_exp[-1] += acc_e
    assert len(pooled_obs) >= 2, "too few bins for a chi-square test"
    pooled_obs = np.array(pooled_obs)
    pooled_exp = np.array(pooled_exp)
    pooled_exp *= pooled_obs.sum() / pooled_exp.sum()  # remove float round-off only
    return stats.chisquare(pooled_obs, pooled_exp).pvalue


def chi2_binned(x, edges, cdf):
    """Chi-square p-value of continuous samples over the bins given by ``edges``
    (first edge <= min, last edge >= max) against the reference ``cdf``."""
    obs = np.histogram(x, bins=edges)[0].astype(np.float64)
    p = np.diff(cdf(np.asarray(edges, dtype=np.float64)))
    exp = x.size * p / p.sum()
    assert exp.min() >= 5.0
    return stats.chisquare(obs, exp).pvalue


def z_mean(x, mean, var):
    return abs(x.mean() - mean) / math.sqrt(var / x.size)


def z_var(x, var, mu4):
    """z statistic of the sample variance given the true variance and the 4th central moment."""
    return abs(x.var() - var) / math.sqrt((mu4 - var * var) / x.size)


def binomial_tail_pvalue(k, n, p):
    """Two-sided exact binomial test p-value."""
    return stats.binomtest(int(k), int(n), p).pvalue


# ----------------------------------------------------------------------------
# rng: generator, seeding, streams
# ----------------------------------------------------------------------------
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _ref_mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _ref_seed(seed, stream, block):
    h = _ref_mix64((seed + GOLDEN) & M64)
    h = _ref_mix64(h ^ ((stream + 0xD1B54A32D192ED03) & M64))
    h = _ref_mix64(h ^ ((block + 0x8CB92BA72F3D8DD7) & M64))
    out, x = [], h
    for _ in range(4):
        x = (x + GOLDEN) & M64
        out.append(_ref_mix64(x))
    return out


def _ref_xoshiro(s, n):
    s = [int(v) for v in s]
    rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64  # noqa: E731
    out = []
    for _ in range(n):
        out.append((rotl((s[1] * 5) & M64, 7) * 9) & M64)
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out, s


def test_xoshiro256starstar_matches_reference():
    st = np.array([1, 2, 3, 4], dtype=np.uint64)
    ref, ref_state = _ref_xoshiro([1, 2, 3, 4], 1000)
    got = _draw_u64(st, 1000)
    assert got[0] == 11520 and got[1] == 0  # published first outputs for state {1,2,3,4}
    assert [int(v) for v in got] == ref
    assert [int(v) for v in st] == ref_state
    # the public scalar function advances the same way
    st2 = np.array([1, 2, 3, 4], dtype=np.uint64)
    assert [int(next_u64(st2)) for _ in range(5)] == ref[:5]


@pytest.mark.parametrize("seed,stream,block", [(0, 0, 0), (1, 2, 3), (-1, 5, 0),
                                               (2**62, -3, 12345), (123, 0, 2**40)])
def test_seed_state_matches_reference(seed, stream, block):
    st = np.empty(4, dtype=np.uint64)
    seed_state(st, seed, stream, block)
    ref = _ref_seed(seed % 2**64, stream % 2**64, block % 2**64)
    assert [int(v) for v in st] == ref


def test_same_triple_same_stream_and_different_triples_differ():
    a = _draw_u64(_state(42, 3, 5), 1000)
    b = _draw_u64(_state(42, 3, 5), 1000)
    assert np.array_equal(a, b)
    others = [_draw_u64(_state(*t), 1000) for t in
              [(42, 3, 6), (42, 4, 5), (43, 3, 5), (5, 3, 42), (3, 42, 5)]]
    for o in others:
        assert not np.array_equal(a, o)
        assert np.intersect1d(a, o).size == 0  # 64-bit outputs: any overlap means overlap
    # new_states rows are seed_state(seed, stream, b)
    rows = new_states(42, 3, 8)
    assert rows.dtype == np.uint64 and rows.shape == (8, 4)
    for b in range(8):
        assert np.array_equal(rows[b], _state(42, 3, b))


def test_states_never_zero_and_distinct():
    seen = set()
    for seed in range(-3, 4):
        for stream in range(4):
            rows = new_states(seed, stream, 64)
            assert np.all(rows.any(axis=1))
            seen.update(map(tuple, rows.tolist()))
    assert len(seen) == 7 * 4 * 64


def test_output_bits_balanced_and_blocks_uncorrelated():
    n = 200_000
    x = _draw_u64(_state(9), n)
    bits = ((x[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).sum(axis=0)
    # each bit ~ Binomial(n, 1/2); Bonferroni over the 64 bits
    z = np.abs(bits - n / 2) / math.sqrt(n / 4)
    assert z.max() < stats.norm.isf(ALPHA / 2 / 64)
    # adjacent blocks: uniforms uncorrelated
    u0 = draw(U, n, seed=9)
    u1 = _draw_float(U, _state(9, 7, 1), n, 0.0, 0.0)
    r = np.corrcoef(u0, u1)[0, 1]
    assert abs(r) * math.sqrt(n) < Z_CRIT


@numba.njit(parallel=True, cache=True)
def _parallel_blocks(states, n_per_block):
    nb = states.shape[0]
    out = np.empty((nb, n_per_block), dtype=np.float64)
    for b in numba.prange(nb):
        st = states[b]
        for i in range(n_per_block):
            out[b, i] = gamma(st, 0.5) + crt(st, 50, 2.0) + poisson(st, 3.0)
    return out


def test_parallel_blocks_independent_of_thread_count():
    before = numba.get_num_threads()
    try:
        results = []
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(threads)
            states = new_states(5, 1, 16)
            results.append((_parallel_blocks(states, 1000), states.copy()))
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(results[0][0], results[-1][0])
    assert np.array_equal(results[0][1], results[-1][1])
    # and equal to drawing block by block in serial
    st = _state(5, 1, 3)
    ref = [gamma(st, 0.5) + crt(st, 50, 2.0) + poisson(st, 3.0) for _ in range(1000)]
    assert np.array_equal(results[0][0][3], np.array(ref))


# ----------------------------------------------------------------------------
# uniform / normal / exponential
# ----------------------------------------------------------------------------
def test_uniform_open_interval_53_bit_and_ks():
    x = draw(U, 1_000_000, seed=11)
    assert x.min() > 0.0 and x.max() < 1.0
    k = x * 2.0**53
    assert np.all(k == np.floor(k))  # 53-bit grid
    assert stats.kstest(x, stats.uniform.cdf).pvalue > ALPHA
    # pairs (u_i, u_{i+1}) uniform on a 16 x 16 grid: serial independence
    cells = (np.floor(x[:-1:2] * 16) * 16 + np.floor(x[1::2] * 16)).astype(np.int64)
    assert chi2_discrete(cells, np.full(256, 1 / 256)) > ALPHA


def test_normal_ks_and_moments():
    x = draw(NORMAL, 1_000_000, seed=12)
    assert stats.kstest(x, stats.norm.cdf).pvalue > ALPHA
    assert z_mean(x, 0.0, 1.0) < Z_CRIT
    assert z_var(x, 1.0, 3.0) < Z_CRIT




@pytest.mark.parametrize("which", ["normal", "exponential"])
def test_ziggurat_tables_equal_areas(which):
    if which == "normal":
        xs, fs, r = rng_mod._ZN_X, rng_mod._ZN_F, rng_mod._ZN_R
        dens = lambda t: np.exp(-0.5 * t * t)  # noqa: E731
        tail = math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2))
    else:
        xs, fs, r = rng_mod._ZE_X, rng_mod._ZE_F, rng_mod._ZE_R
        dens = lambda t: np.exp(-t)  # noqa: E731
        tail = math.exp(-r)
    assert xs.shape == (257,) and fs.shape == (257,)
    assert xs[1] == r and xs[256] == 0.0 and fs[256] == 1.0
    assert np.all(np.diff(xs) < 0)
    assert np.allclose(fs[1:], dens(xs[1:]), rtol=1e-14, atol=0)
    v = r * dens(r) + tail
    assert abs(xs[0] * fs[1] - v) <= 1e-14 * v  # base layer incl. tail
    areas = xs[1:256] * (fs[2:] - fs[1:256])
    assert np.allclose(areas, v, rtol=1e-11, atol=0)


def test_normal_ziggurat_layers_and_tail():
    n = 20_000_000
    # one bin per ziggurat layer (plus the tail): a layer, wedge or tail error shows here
    edges = np.concatenate([rng_mod._ZN_X[1:][::-1], [np.inf]])
    obs = _normal_abs_histogram(_state(13), n, edges)
    p = np.diff(2 * stats.norm.cdf(edges) - 1)
    assert stats.chisquare(obs, p / p.sum() * n).pvalue > ALPHA
    assert binomial_tail_pvalue(obs[-1], n, 2 * stats.norm.sf(rng_mod._ZN_R)) > ALPHA
    # the tail sampler itself: truncated normal beyond r
    r = rng_mod._ZN_R
    tail = _draw_normal_tail(_state(14), 500_000)
    assert tail.min() > r
    assert stats.kstest(tail, lambda t: 1 - stats.norm.sf(t) / stats.norm.sf(r)).pvalue > ALPHA
    # symmetric signs
    x = draw(NORMAL, 1_000_000, seed=15)
    assert binomial_tail_pvalue((x > 0).sum(), x.size, 0.5) > ALPHA


def test_exponential_ks_layers_tail_and_moments():
    n = 4_000_000
    x = draw(EXPON, n, seed=14)
    assert x.min() >= 0.0
    assert stats.kstest(x[:1_000_000], stats.expon.cdf).pvalue > ALPHA
    edges = np.concatenate([rng_mod._ZE_X[1:][::-1], [np.inf]])
    assert chi2_binned(x, edges, stats.expon.cdf) > ALPHA
    r = rng_mod._ZE_R
    tail = x[x > r]
    assert binomial_tail_pvalue(tail.size, n, math.exp(-r)) > ALPHA
    assert stats.kstest(tail - r, stats.expon.cdf).pvalue > ALPHA
    assert z_mean(x, 1.0, 1.0) < Z_CRIT
    assert z_var(x, 1.0, 9.0) < Z_CRIT


# ----------------------------------------------------------------------------
# gamma, log_gamma, beta, dirichlet
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [0.01, 0.3, 1.0, 2.5, 50.0])
def test_gamma_ks_and_moments(shape):
    x = draw(GAMMA, 300_000, shape, seed=int(shape * 1000) + 1)
    assert np.all(x >= 0.0) and np.all(np.isfinite(x))
    assert stats.kstest(x, stats.gamma(shape).cdf).pvalue > ALPHA
    assert z_mean(x, shape, shape) < Z_CRIT
    if shape >= 0.3:  # for 0.01 the 4th moment is too heavy for a normal approximation
        assert z_var(x, shape, 3 * shape**2 + 6 * shape) < Z_CRIT


@pytest.mark.parametrize("shape", [1e-4, 1e-3, 0.05, 0.7, 3.0])
def test_log_gamma_ks_and_moments(shape):
    x = draw(LOG_GAMMA, 300_000, shape, seed=int(shape * 1e5) + 2)
    assert np.all(np.isfinite(x))
    # scipy.stats.loggamma(c) is the law of log(G), G ~ Gamma(c)
    assert stats.kstest(x, stats.loggamma(shape).cdf).pvalue > ALPHA
    var = special.polygamma(1, shape)
    mu4 = special.polygamma(3, shape) + 3 * var**2
    assert z_mean(x, special.digamma(shape), var) < Z_CRIT
    assert z_var(x, var, mu4) < Z_CRIT


def test_gamma_degenerate_shapes():
    st = _state(3)
    assert gamma(st, 0.0) == 0.0 and gamma(st, -1.0) == 0.0
    assert log_gamma(st, 0.0) == -np.inf
    # tiny shapes: values may underflow to 0.0, never NaN / negative
    x = draw(GAMMA, 10_000, 1e-4, seed=4)
    assert np.all(x >= 0.0) and not np.any(np.isnan(x))
    # large shape: mean/var z-test
    x = draw(GAMMA, 100_000, 1e6, seed=5)
    assert z_mean(x, 1e6, 1e6) < Z_CRIT


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (2.0, 5.0), (0.1, 3.0), (30.0, 40.0), (1.0, 1.0)])
def test_beta_ks(a, b):
    x = draw(BETA, 200_000, a, b, seed=int(a * 10 + b * 100) + 6)
    assert np.all((x >= 0.0) & (x <= 1.0))
    assert stats.kstest(x, stats.beta(a, b).cdf).pvalue > ALPHA
    assert z_mean(x, a / (a + b), stats.beta(a, b).var()) < Z_CRIT


def test_beta_tiny_shapes_no_nan():
    n = 100_000
    x = draw(BETA, n, 1e-3, 1e-3, seed=7)
    assert not np.any(np.isnan(x))
    assert binomial_tail_pvalue((x < 0.5).sum(), n, 0.5) > ALPHA
    x = draw(BETA, n, 1e-3, 2.0, seed=8)
    edges = np.array([0.0, 1e-300, 1e-100, 1e-30, 1e-10, 1e-3, 1.0])
    assert chi2_binned(x, edges, stats.beta(1e-3, 2.0).cdf) > ALPHA


@pytest.mark.parametrize("alpha", [(0.5, 2.0, 3.0), (4.0, 0.2, 1.0, 7.5)])
def test_dirichlet_beta_marginals(alpha):
    alpha = np.array(alpha)
    x = _draw_dirichlet(_state(21), alpha, 200_000)
    assert np.allclose(x.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    a0 = alpha.sum()
    for i, a in enumerate(alpha):
        assert stats.kstest(x[:, i], stats.beta(a, a0 - a).cdf).pvalue > ALPHA


def test_dirichlet_tiny_entry():
    alpha = np.array([1e-3, 1.0, 1.0])
    x = _draw_dirichlet(_state(22), alpha, 200_000)
    assert not np.any(np.isnan(x))
    assert np.allclose(x.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(x >= 0.0)
    for i in (1, 2):
        assert stats.kstest(x[:, i], stats.beta(1.0, 1.001).cdf).pvalue > ALPHA
    # the tiny component, including its underflowed zeros, by bins over 300 decades
    edges = np.array([0.0, 1e-300, 1e-100, 1e-30, 1e-10, 1e-3, 1.0])
    assert chi2_binned(x[:, 0], edges, stats.beta(1e-3, 2.0).cdf) > ALPHA
    # all-tiny alphas: still a probability vector
    y = _draw_dirichlet(_state(23), np.full(5, 1e-4), 10_000)
    assert not np.any(np.isnan(y))
    assert np.allclose(y.sum(axis=1), 1.0, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------
# poisson, zero-truncated poisson, binomial
# ----------------------------------------------------------------------------
def _poisson_pmf(lam, kmax):
    return stats.poisson(lam).pmf(np.arange(kmax + 1))


@pytest.mark.parametrize("lam", [0.01, 3.0, 9.99, 10.0, 40.0, 500.0, 1e4])
def test_poisson_chi2(lam):
    n = 200_000
    x = draw_int(POISSON, n, lam, seed=int(lam * 100) + 31)
    kmax = int(lam + 12 * math.sqrt(lam) + 20)
    assert chi2_discrete(x, _poisson_pmf(lam, kmax)) > ALPHA
    assert z_mean(x.astype(float), lam, lam) < Z_CRIT


def test_poisson_degenerate():
    st = _state(32)
    assert poisson(st, 0.0) == 0 and poisson(st, -2.0) == 0
    x = draw_int(POISSON, 10_000, 1e-300, seed=33)
    assert np.all(x == 0)


def _ztp_pmf(lam, kmax):
    k = np.arange(kmax + 1)
    logp = k * math.log(lam) - special.gammaln(k + 1) - math.log(math.expm1(lam))
    p = np.exp(logp)
    p[0] = 0.0
    return p


@pytest.mark.parametrize("lam", [0.2, 2.0, 9.5, 10.0, 30.0])
def test_zero_truncated_poisson_chi2(lam):
    n = 200_000
    x = draw_int(ZTPOISSON, n, lam, seed=int(lam * 100) + 41)
    assert x.min() >= 1
    kmax = int(lam + 12 * math.sqrt(lam) + 20)
    assert chi2_discrete(x, _ztp_pmf(lam, kmax)) > ALPHA


@pytest.mark.parametrize("lam", [1e-12, 1e-8, 1e-3])
def test_zero_truncated_poisson_tiny_lam(lam):
    n = 200_000
    x = draw_int(ZTPOISSON, n, lam, seed=43)
    assert x.min() >= 1
    # P(X >= 2) = 1 - lam / expm1(lam): exact binomial test on the count of X >= 2
    p2 = -math.expm1(math.log(lam) - math.log(math.expm1(lam)))
    assert binomial_tail_pvalue((x >= 2).sum(), n, p2) > ALPHA
    if lam >= 1e-3:
        pmf = _ztp_pmf(lam, 4)
        assert chi2_discrete(x, pmf) > ALPHA


@pytest.mark.parametrize("n_trials,p", [(5, 0.3), (50, 0.02), (19, 0.5), (100, 0.1),
                                        (1000, 0.4), (200, 0.99), (1000, 0.995),
                                        (10**6, 0.3), (7, 1e-9)])
def test_binomial_chi2(n_trials, p):
    n = 200_000
    x = draw_int(BINOMIAL, n, n_trials, p, seed=n_trials + int(p * 1000) + 51)
    assert x.min() >= 0 and x.max() <= n_trials
    kmax = min(n_trials, int(n_trials * p + 12 * math.sqrt(n_trials * p * (1 - p)) + 20))
    pmf = stats.binom(n_trials, p).pmf(np.arange(kmax + 1))
    if n_trials * min(p, 1 - p) < 1e-3:
        assert binomial_tail_pvalue((x != round(n_trials * p)).sum(), n,
                                    1 - pmf[round(n_trials * p)]) > ALPHA
        return
    if kmax < n_trials:
        assert chi2_discrete(x, pmf) > ALPHA
    else:
        # full support: put the upper tail bin exactly at n
        assert chi2_discrete(x, pmf) > ALPHA
    assert z_mean(x.astype(float), n_trials * p, n_trials * p * (1 - p)) < Z_CRIT


def test_binomial_degenerate():
    st = _state(52)
    assert binomial(st, 0, 0.5) == 0
    assert binomial(st, 10, 0.0) == 0
    assert binomial(st, 10, 1.0) == 10
    assert binomial(st, -3, 0.5) == 0


# ----------------------------------------------------------------------------
# categorical / multinomial from cumulative weights
# ----------------------------------------------------------------------------
def test_categorical_cumulative_chi2_and_zero_weights():
    w = np.array([0.0, 1.0, 0.0, 2.0, 3.5, 0.0, 1e-3, 0.5, 0.0, 99.0])  # last ignored (size=9)
    cum = np.cumsum(w)
    size = 9
    x = _draw_categorical(_state(61), cum, size, 500_000)
    p = w[:size] / w[:size].sum()
    assert x.min() >= 0 and x.max() < size
    assert np.all(np.isin(x, np.flatnonzero(w[:size] > 0)))  # zero weights never chosen
    obs = np.bincount(x, minlength=size)[p > 0]
    assert stats.chisquare(obs, p[p > 0] * x.size).pvalue > ALPHA
    # a single positive weight at the end / start
    assert np.all(_draw_categorical(_state(62), np.array([0.0, 0.0, 0.0, 2.0]), 4, 1000) == 3)
    assert np.all(_draw_categorical(_state(63), np.array([5.0, 5.0, 5.0]), 3, 1000) == 0)


MULTI_W = np.array([0.3, 0.0, 1.2, 0.05, 2.0, 0.0, 0.45])


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("n_trials", [0, 1, 3, 1000])
def test_multinomial_cumulative_marginals(which, n_trials):
    cum = np.cumsum(MULTI_W)
    size = len(MULTI_W)
    reps = 20_000 if n_trials > 3 else 50_000
    out = _draw_multinomial(which, _state(70 + which + n_trials), n_trials, cum, size, reps,
                            np.zeros(1, np.int64))
    assert np.all(out.sum(axis=1) == n_trials)  # overwritten, not added (init was -7)
    assert np.all(out[:, MULTI_W == 0] == 0)
    assert out.min() >= 0
    if n_trials == 0:
        return
    p = MULTI_W / MULTI_W.sum()
    for i in np.flatnonzero(p > 0):
        pmf = stats.binom(n_trials, p[i]).pmf(np.arange(n_trials + 1))
        assert chi2_discrete(out[:, i], pmf) > ALPHA / size


@pytest.mark.parametrize("which", [0, 1, 2])
def test_multinomial_cumulative_joint_small_n(which):
    """Joint law for n = 4 over 3 cells (15 compositions) against the multinomial pmf."""
    w = np.array([1.0, 0.0, 2.5, 0.5])
    cum = np.cumsum(w)
    n_trials, reps = 4, 100_000
    out = _draw_multinomial(which, _state(80 + which), n_trials, cum, 4, reps,
                            np.zeros(1, np.int64))
    assert np.all(out[:, 1] == 0)
    p = w / w.sum()
    comps = [(a, 0, b, n_trials - a - b) for a in range(n_trials + 1)
             for b in range(n_trials + 1 - a)]
    index = {c: j for j, c in enumerate(comps)}
    codes = np.array([index[tuple(r)] for r in out.tolist()])
    pmf = np.array([stats.multinomial(n_trials, p).pmf(c) for c in comps])
    obs = np.bincount(codes, minlength=len(comps))
    assert stats.chisquare(obs, pmf / pmf.sum() * reps).pvalue > ALPHA


def test_multinomial_cumulative_int32_out_and_prefix():
    w = np.array([0.2, 0.3, 0.5, 100.0])
    cum = np.cumsum(w)
    out = _draw_multinomial(0, _state(90), 500, cum, 3, 5000, np.zeros(1, np.int32), 4)
    assert out.dtype == np.int32
    assert np.all(out[:, :3].sum(axis=1) == 500)
    assert np.all(out[:, 3] == -7)  # beyond size: untouched
    assert z_mean(out[:, 2].astype(float), 250.0, 500 * 0.25) < Z_CRIT


# ----------------------------------------------------------------------------
# CRT
# ----------------------------------------------------------------------------
def crt_pmf(m, a):
    """P(l | m, a) = |s(m, l)| a^l Gamma(a) / Gamma(m + a), l = 0..m, with the unsigned
    Stirling numbers of the first kind from |s(n+1, k)| = n |s(n, k)| + |s(n, k-1)|
    in log space."""
    logs = np.full(m + 1, -np.inf)
    logs[0] = 0.0  # |s(0, 0)| = 1
    for nn in range(m):
        new = np.full(m + 1, -np.inf)
        new[1:] = np.logaddexp(math.log(nn) + logs[1:] if nn > 0 else -np.inf, logs[:-1])
        logs = new
    l = np.arange(m + 1)
    return np.exp(logs + l * math.log(a) + special.gammaln(a) - special.gammaln(m + a))


@pytest.mark.parametrize("m,a", [(1, 0.5), (10, 0.1), (30, 2.0), (200, 5.0), (100, 1.0),
                                 (1000, 0.5)])
def test_crt_chi2(m, a):
    pmf = crt_pmf(m, a)
    assert abs(pmf.sum() - 1.0) < 1e-9
    n = 100_000
    x = draw_int(CRT, n, m, a, seed=m + int(a * 10) + 101)
    assert x.min() >= 1 and x.max() <= m
    if m == 1:
        assert np.all(x == 1)
        return
    assert chi2_discrete(x, pmf) > ALPHA


@pytest.mark.parametrize("a", [0.5, 3.0, 50.0])
def test_crt_mean_large_m(a):
    m = 100_000
    i = np.arange(1, m + 1)
    p = a / (a + i - 1)
    x = draw_int(CRT, 20_000, m, a, seed=int(a) + 111).astype(float)
    assert z_mean(x, p.sum(), (p * (1 - p)).sum()) < Z_CRIT
    assert z_var(x, (p * (1 - p)).sum(),
                 # 4th central moment of a sum of independent Bernoullis
                 (p * (1 - p) * (1 - 3 * p * (1 - p))).sum()
                 + 3 * ((p * (1 - p)).sum()) ** 2 - 3 * ((p * (1 - p)) ** 2).sum()) < Z_CRIT


def test_crt_edge_cases():
    st = _state(120)
    assert crt(st, 0, 1.0) == 0
    assert crt(st, 1, 1e-9) == 1
    x = draw_int(CRT, 1000, 10**6, 1e-6, seed=121)
    assert x.min() >= 1
    x = draw_int(CRT, 200, 10**6, 1e4, seed=122)  # big a: both paths reachable, sane values
    i = np.arange(1, 10**6 + 1)
    p = 1e4 / (1e4 + i - 1)
    assert z_mean(x.astype(float), p.sum(), (p * (1 - p)).sum()) < Z_CRIT


@pytest.mark.timeout(60)
@pytest.mark.parametrize("a", [1e-17, 1e-19, 1e-60, 1e-300])
def test_crt_terminates_for_vanishing_concentration(a):
    """For a below about 1e-18 the thinning path's geometric gap passes 2^63; an int64 floor
    once wrapped it to a negative index and the draw never returned (a minibatch chain with
    r_k near 1e-100 hung in its first sweep).  Extra tables have probability about
    a * ln(m) here, so every draw is exactly 1."""
    st = _state(123)
    for m in (17, 1000, 10**6):
        assert all(crt(st, m, a) == 1 for _ in range(200))
