"""The floor-aware draw of w at positions without counts has the law of a floored gamma draw."""
import numpy as np
import pytest
from scipy import stats
from scipy.special import gammainc

from cpgbn.backends.numba.weights import FLOOR, sample_empty_weights

N = 200_000


@pytest.mark.parametrize("alpha,rate", [(1e-4, 1.0), (6e-4, 3.0), (0.01, 0.2), (0.09, 50.0)])
def test_floor_mass_and_tail_law(alpha, rate):
    draws = sample_empty_weights(7, alpha, rate, N).astype(np.float64)
    x0 = float(FLOOR) * rate
    p_floor = gammainc(alpha, x0)  # P(Gam(alpha) < x0), regularised lower incomplete gamma
    at_floor = np.count_nonzero(draws <= float(FLOOR))
    assert stats.binomtest(at_floor, N, p_floor).pvalue > 1e-3
    tail = draws[draws > float(FLOOR)] * rate
    if len(tail) > 50:
        # CDF of Gam(alpha) conditioned on G >= x0
        cdf = lambda x: (gammainc(alpha, x) - p_floor) / (1.0 - p_floor)  # noqa: E731
        assert stats.kstest(tail, cdf).pvalue > 1e-3


def test_matches_a_plain_floored_gamma_in_log_space():
    alpha, rate = 0.03, 2.0
    fast = np.log(sample_empty_weights(3, alpha, rate, N).astype(np.float64))
    rng = np.random.default_rng(0)
    plain = np.log(np.maximum(rng.gamma(alpha, size=N) / rate, float(FLOOR)).astype(np.float32)
                   .astype(np.float64))
    assert stats.ks_2samp(fast, plain).pvalue > 1e-3


@pytest.mark.parametrize("alpha,rate", [(2e-3, 1.0), (0.02, 5.0)])
def test_positions_above_the_floor_are_independent_trials(alpha, rate):
    """The geometric walk across a document's positions: the number of positions above the floor
    among 50 is Binomial(50, 1 - p_floor)."""
    n_pos, n_docs = 50, 8000
    draws = sample_empty_weights(11, alpha, rate, n_pos * n_docs).reshape(n_docs, n_pos)
    above = np.count_nonzero(draws > FLOOR, axis=1)
    q = 1.0 - gammainc(alpha, float(FLOOR) * rate)
    values = np.arange(n_pos + 1)
    expected = stats.binom.pmf(values, n_pos, q) * n_docs
    observed = np.bincount(above, minlength=n_pos + 1)
    keep = expected >= 5
    obs, exp = observed[keep], expected[keep]
    rest_obs, rest_exp = n_docs - obs.sum(), n_docs - exp.sum()
    assert stats.chisquare(np.append(obs, rest_obs), np.append(exp, rest_exp)).pvalue > 1e-3
    # and where in the document they fall does not matter
    per_position = np.count_nonzero(draws > FLOOR, axis=0)
    assert stats.chisquare(per_position).pvalue > 1e-3


def test_document_draw_lists_heavy_kernels_and_sums_theta():
    """draw_document_weights: theta is the sum of w, the heavy lists are exactly the kernels above
    the floor, the nonzero counts are listed, and a position with counts follows
    Gam(m + alpha) / rate."""
    from cpgbn.backends.numba.weights import draw_document_weights
    from cpgbn.backends.numba.rng import seed_state

    n_pos, n_kernels, reps, p0 = 12, 6, 4000, 3
    rng = np.random.default_rng(3)
    m = np.zeros((p0 + n_pos, n_kernels), dtype=np.int32)
    m[p0:][rng.random((n_pos, n_kernels)) < 0.2] = 2
    m[p0 + 4, 2] = 2
    prior = np.array([0.01, 0.05, 0.3, 1.0, 2.5, 0.002]) * n_pos
    rate = 1.7
    state = seed_state(np.empty(4, dtype=np.uint64), 5, 0, 0)
    w = np.empty((p0 + n_pos, n_kernels), dtype=np.float32)
    theta, scratch = np.empty(n_kernels), np.empty((4, n_kernels))
    heavy_k = np.empty((n_pos, n_kernels), dtype=np.int32)
    n_heavy_at = np.empty(n_pos, dtype=np.int32)
    draws = np.empty(reps)
    nonzero = np.empty(n_pos * n_kernels, dtype=np.int64)
    for r in range(reps):
        n_nonzero = draw_document_weights(state, m, w, p0, n_pos, prior, np.log(rate), theta,
                                          scratch, np.empty(n_kernels, dtype=np.int32),
                                          heavy_k, n_heavy_at, nonzero)
        np.testing.assert_array_equal(np.sort(nonzero[:n_nonzero]), np.flatnonzero(m[p0:]))
        block = w[p0:]
        np.testing.assert_allclose(theta, block.astype(np.float64).sum(axis=0), rtol=1e-12)
        for s in range(n_pos):
            listed = np.sort(heavy_k[s, :n_heavy_at[s]])
            np.testing.assert_array_equal(listed, np.flatnonzero(block[s] > FLOOR))
        draws[r] = w[p0 + 4, 2]
    shape = 2 + prior[2] / n_pos
    assert stats.kstest(draws, stats.gamma(shape, scale=1 / rate).cdf).pvalue > 1e-3


@pytest.mark.parametrize("alpha,x0", [(1e-9, 1e-30), (3e-7, 5e-29), (1e-6, 1e-30), (6e-4, 2e-30),
                                      (0.05, 1e-25), (0.099, 1e-30), (0.5, 1e-3)])
def test_gamma_above_law(alpha, x0):
    """The draw above the floor (truncated exponential by modulo, or by inversion for tiny
    shapes): Gam(alpha) conditioned on >= x0, against the exact conditional cdf."""
    from cpgbn.backends.numba.weights import sample_gamma_above
    x = sample_gamma_above(int(alpha * 1e9) + 5, alpha, x0, N)
    assert x.min() >= x0 * (1 - 1e-12)
    below = gammainc(alpha, x0)

    def cdf(v):
        return np.clip((gammainc(alpha, v) - below) / (1.0 - below), 0.0, 1.0)

    assert stats.kstest(x, cdf).pvalue > 1e-3
    # and in log space, where the mass of the tiny shapes lies
    edges = np.exp(np.linspace(np.log(x0), 0.0, 11)[1:-1])
    expected = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]])) * N
    observed = np.bincount(np.searchsorted(edges, x), minlength=len(edges) + 1)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
