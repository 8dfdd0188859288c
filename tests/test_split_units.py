"""The heavy/light split of a cell's units is a multinomial over all its candidates."""
import numpy as np
import pytest
from scipy import stats

from cpgbn.samplers.conv import sample_split

REPS = 20000


@pytest.mark.parametrize("n_units,light_scale", [(1, 1.0), (7, 0.3), (200, 1e-3), (200, 0.5), (60, 1.0)])
def test_marginals_and_light_total_match_the_multinomial(n_units, light_scale):
    rng = np.random.default_rng(n_units)
    size = 30
    heavy = rng.random(size) < 0.3
    weights = rng.gamma(0.7, size=size) * np.where(heavy, 1.0, light_scale)
    p = weights / weights.sum()
    counts = sample_split(5, weights, heavy, n_units, REPS)
    assert np.all(counts.sum(axis=1) == n_units)
    # each candidate's count is Binomial(n, p_i): z-test on its mean
    se = np.sqrt(n_units * p * (1 - p) / REPS)
    z = (counts.mean(axis=0) - n_units * p) / np.maximum(se, 1e-12)
    assert np.max(np.abs(z)) < 4.5
    # the light group's total is Binomial(n, p_light): chi-square on its distribution
    light = counts[:, ~heavy].sum(axis=1)
    p_light = p[~heavy].sum()
    values, observed = np.unique(light, return_counts=True)
    expected = stats.binom.pmf(values, n_units, p_light) * REPS
    keep = expected >= 5
    if keep.sum() >= 2:
        obs, exp = observed[keep], expected[keep]
        assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3


def test_all_light_and_all_heavy():
    w = np.array([0.2, 0.5, 0.3])
    for mask in (np.zeros(3, bool), np.ones(3, bool)):
        counts = sample_split(1, w, mask, 50, 5000)
        np.testing.assert_allclose(counts.mean(axis=0), 50 * w, rtol=0.03)
