"""The ziggurat for log G, G ~ Gamma(a), that the kernels' Dirichlet draw uses for its zero counts.

Checked against scipy: the table's geometry (levels are f at both ends, equal layer areas, tails
from the incomplete gamma function), the law of the draws (KS on log G, a chi-square with one bin
per layer and per side so that a wrong layer, wedge or tail shows, and the tails alone), and the
row sampler used by ``draw_kernels`` entry by entry.  Fixed seeds, significance level 1e-3.
"""
import math

import numba
import numpy as np
import pytest
from scipy import special, stats

from cpgbn.backends.numba import seed_state
from cpgbn.backends.numba.shared_shape import (gamma_counts_shared, log_gamma_shared,
                                         shared_shape_table, table_shape)

ALPHA = 1e-3
SHAPES = [0.002, 0.05, 0.3, 1.0, 7.5, 300.0]


def _state(seed):
    st = np.empty(4, dtype=np.uint64)
    seed_state(st, seed, 31, 0)
    return st


@numba.njit(cache=True)
def _draw_log_ratios(state, table, n):
    """ln(G / a) for n draws (the ziggurat's own variable z)."""
    out = np.empty(n)
    log_a = math.log(table[6, 0])
    for i in range(n):
        out[i] = log_gamma_shared(state, table) - log_a
    return out


def _f(z, a):
    return np.exp(-a * (np.expm1(z) - z))


def _cdf_z(z, a):
    """P(ln(G / a) <= z); far left, where a e^z underflows, P(a, x) = x^a / Gamma(a + 1) (1 + O(x))."""
    z = np.asarray(z, dtype=np.float64)
    far = z < -600.0
    near = special.gammainc(a, a * np.exp(np.where(far, 0.0, z)))
    return np.where(far, np.exp(a * (math.log(a) + np.where(far, z, 0.0)) - special.gammaln(a + 1)),
                    near)


@pytest.mark.parametrize("a", SHAPES)
def test_table_geometry(a):
    t = shared_shape_table(a)
    start, width, in_lo, in_hi, y_lo, y_hi = t[:6]
    lo1, hi1 = t[6, 1], t[6, 2]
    assert t[6, 0] == a == table_shape(t) and lo1 < 0 < hi1
    # layer k >= 1 spans [lo_k, hi_k] at level y_k = f(lo_k) = f(hi_k); levels rise to the mode
    lo, hi = start[1:], start[1:] + width[1:]
    assert np.allclose(_f(lo, a), y_lo[1:], rtol=1e-12, atol=0)
    assert np.allclose(_f(hi, a), y_lo[1:], rtol=1e-9, atol=0)
    assert np.all(np.diff(y_lo[1:]) > 0) and y_hi[-1] == 1.0
    assert np.all(y_hi[:-1] == y_lo[1:])  # layers stack without gaps
    assert np.all(in_lo[:-1] == start[1:]) and in_hi[-1] == 0.0
    # equal areas, the base layer's including both tails
    areas = width[1:] * (y_hi[1:] - y_lo[1:])
    c = math.exp(special.gammaln(a) + a - a * math.log(a))  # total area under f
    tails = c * (_cdf_z(lo1, a) + special.gammaincc(a, a * math.exp(hi1)))
    v = (hi1 - lo1) * y_hi[0] + tails
    assert np.allclose(areas, v, rtol=1e-9, atol=0)
    assert abs(width[0] * y_hi[0] - v) <= 1e-12 * v
    # the 256 rectangles cover f with little overhang: few draws are rejected
    assert c <= 256 * v <= 1.02 * c


@pytest.mark.parametrize("a", SHAPES)
def test_log_gamma_shared_law(a):
    table = shared_shape_table(a)
    n = 2_000_000
    z = _draw_log_ratios(_state(int(a * 1000) + 5), table, n)
    assert np.all(np.isfinite(z))
    assert stats.kstest(z[:500_000], lambda q: _cdf_z(q, a)).pvalue > ALPHA
    # one bin per layer boundary on each side of the mode, plus the two tails
    edges = np.unique(np.concatenate([[-np.inf], table[0, 1:], table[0, 1:] + table[1, 1:],
                                      [0.0, np.inf]]))
    observed = np.histogram(z, edges)[0]
    expected = np.diff(np.where(np.isinf(edges), np.sign(edges) * 0.5 + 0.5, _cdf_z(edges, a)))
    keep = expected * n > 5  # pool bins too small for the chi-square approximation
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum()) * n
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > ALPHA


@pytest.mark.parametrize("a", [0.002, 0.05, 2.0])
def test_tails_alone(a):
    """Beyond the base layer's span: the counts and the conditional laws of both tails."""
    table = shared_shape_table(a)
    lo1, hi1 = table[6, 1], table[6, 2]
    n = 4_000_000
    z = _draw_log_ratios(_state(77), table, n)
    for side, p in ((z < lo1, _cdf_z(lo1, a)), (z > hi1, 1 - _cdf_z(hi1, a))):
        k = side.sum()
        sd = math.sqrt(n * p * (1 - p))
        assert abs(k - n * p) < 3.3 * sd
    left, right = z[z < lo1], z[z > hi1]
    p_lo, p_hi = _cdf_z(lo1, a), special.gammaincc(a, a * math.exp(hi1))
    assert stats.kstest(left, lambda q: _cdf_z(q, a) / p_lo).pvalue > ALPHA
    assert stats.kstest(right, lambda q: 1 - special.gammaincc(a, a * np.exp(q)) / p_hi).pvalue \
        > ALPHA


@pytest.mark.parametrize("a", [0.05, 0.3, 1.0, 2.5])
def test_gamma_counts_shared_per_count(a):
    """The Dirichlet row sampler: zero counts from the ziggurat, others Gamma(count + a)."""
    counts = np.tile(np.array([0, 0, 0, 1, 0, 7, 0, 0], dtype=np.int64), 40_000)
    out = np.empty(counts.shape[0])
    gamma_counts_shared(_state(int(a * 1000) + 11), counts, shared_shape_table(a), out,
                        np.empty_like(out))
    assert np.all(out >= 0.0) and np.all(np.isfinite(out))
    for c in (0, 1, 7):
        x = out[counts == c]
        assert stats.kstest(x, stats.gamma(c + a).cdf).pvalue > ALPHA
        z_mean = abs(x.mean() - (c + a)) / math.sqrt((c + a) / x.size)
        assert z_mean < stats.norm.isf(ALPHA / 2)
    # log scale for the small-shape zeros, where a plain KS has no power in the left tail
    if a < 1:
        x = out[counts == 0]
        x = np.log(x[x > 0])
        assert stats.kstest(x, stats.loggamma(a).cdf).pvalue > ALPHA


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_shape_raises(bad):
    with pytest.raises(ValueError, match="shape"):
        shared_shape_table(bad)
