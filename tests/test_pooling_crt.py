"""The pooling layer's CRT augmentation against the exact posterior of the pooled shape.

Scalar model: a ~ Gam(alpha0, 1); w_s ~ Gam(a / S, 1/c) at S positions; m_s ~ Pois(w_s).
Marginally m_s ~ NB(a / S, p = 1/(1 + c)) and the exact posterior of a given (m_1..m_S) is
computed on a grid.  The sampler's augmentation l = sum_s CRT(m_s, a / S) followed by
a | l ~ Gam(alpha0 + l, 1 / (1 + q)), q = ln(1 + 1/c), is a Gibbs sampler of that posterior.
The shortcut CRT(sum_s m_s, a) ignores the Dirichlet-multinomial factor of how the counts are
spread over positions; the test checks that it is detectably wrong here, so it has power.
With the free positional split (``pooling_concentration``, end of the file) the roles swap:
CRT(sum_s m_s, a) is exact and the per-position tables are detectably wrong.
"""

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from cpgbn.backends.numba import gbn
from cpgbn.backends.numba.rng import seed_state

ALPHA0, C, S = 2.0, 0.5, 8
Q = np.log1p(1.0 / C)


def exact_cdf(m):
    grid = np.linspace(1e-6, 60.0, 200001)
    r = grid[:, None] / S
    log_nb = (gammaln(m[None, :] + r) - gammaln(r) - gammaln(m[None, :] + 1)).sum(axis=1)
    log_post = (ALPHA0 - 1) * np.log(grid) - grid - Q * grid + log_nb
    dens = np.exp(log_post - log_post.max())
    cdf = np.cumsum(dens)
    cdf /= cdf[-1]
    return lambda x: np.interp(x, grid, cdf)


def run_chain(m, use_positions, n=30000, seed=0, listed=False):
    rng = np.random.default_rng(seed)
    positions = np.array([0, S], dtype=np.int64)
    counts = m.reshape(S, 1).astype(np.int32)
    out = np.zeros((1, 1), dtype=np.int64)
    state = seed_state(np.empty(4, dtype=np.uint64), seed, 0, 0)
    nonzero = np.flatnonzero(m).astype(np.int64)  # s * K + k with K = 1
    a, draws = 1.0, np.empty(n)
    for i in range(n):
        shape = np.array([[a]])
        if listed:  # the sweep's form: only the listed nonzero counts
            gbn.listed_tables(state, counts, 0, S, shape[0], nonzero, len(nonzero), out[0])
        elif use_positions:
            gbn.position_tables(seed, i, 32, 0, positions, counts, shape, out)
        else:
            gbn.layer_tables(seed, i, 32, 0, counts.sum(axis=0, keepdims=True).astype(np.int64),
                             shape, out)
        a = rng.gamma(ALPHA0 + out[0, 0]) / (1.0 + Q)
        draws[i] = a
    return draws[1000::10]  # burn-in, thin to nearly independent draws


@pytest.mark.parametrize("listed", [False, True])
@pytest.mark.parametrize("m", [np.array([12, 0, 0, 0, 0, 0, 0, 0]), np.array([2, 1, 2, 1, 2, 1, 2, 1]),
                               np.array([0, 3, 0, 0, 7, 0, 1, 0])])
def test_position_tables_sample_the_exact_posterior(m, listed):
    cdf = exact_cdf(m)
    p_value = stats.kstest(run_chain(m, use_positions=True, listed=listed), cdf).pvalue
    assert p_value > 1e-3


def test_summed_crt_shortcut_is_detectably_wrong():
    m = np.array([12, 0, 0, 0, 0, 0, 0, 0])
    # a third of the exact tests' draws: the shortcut's p-value is below 1e-260 at seeds 0-2
    p_value = stats.kstest(run_chain(m, use_positions=False, n=10000), exact_cdf(m)).pvalue
    assert p_value < 1e-6


# ---- the free positional split (``pooling_concentration`` = beta): w_s = theta pi_s with
# theta ~ Gam(a, 1/c) and pi ~ Dir(beta).  Marginally A = sum_s m_s ~ NB(a, 1/(1 + c)) and the
# split m | A is Dirichlet-multinomial(beta), free of a, so the exact posterior of a depends on
# A alone and the tables are CRT(A, a) (gbn.pooled_tables).

def exact_cdf_free_split(m):
    grid = np.linspace(1e-6, 60.0, 200001)
    A = m.sum()
    log_post = ((ALPHA0 - 1) * np.log(grid) - grid - Q * grid
                + gammaln(A + grid) - gammaln(grid))
    dens = np.exp(log_post - log_post.max())
    cdf = np.cumsum(dens)
    cdf /= cdf[-1]
    return lambda x: np.interp(x, grid, cdf)


def run_pooled_chain(m, n=30000, seed=0):
    rng = np.random.default_rng(seed)
    state = seed_state(np.empty(4, dtype=np.uint64), seed, 0, 0)
    A = np.array([m.sum()], dtype=np.int32)
    out = np.zeros(1, dtype=np.int64)
    a, draws = 1.0, np.empty(n)
    for i in range(n):
        gbn.pooled_tables(state, A, np.array([a]), out)
        a = rng.gamma(ALPHA0 + out[0]) / (1.0 + Q)
        draws[i] = a
    return draws[1000::10]


@pytest.mark.parametrize("m", [np.array([12, 0, 0, 0, 0, 0, 0, 0]), np.array([2, 1, 2, 1, 2, 1, 2, 1])])
def test_pooled_tables_sample_the_free_split_posterior(m):
    assert stats.kstest(run_pooled_chain(m), exact_cdf_free_split(m)).pvalue > 1e-3


def test_position_tables_are_detectably_wrong_for_the_free_split():
    m = np.array([12, 0, 0, 0, 0, 0, 0, 0])
    p_value = stats.kstest(run_chain(m, use_positions=True, n=10000),
                           exact_cdf_free_split(m)).pvalue
    assert p_value < 1e-6
