"""The floor-aware draw of w at positions without counts has the law of a floored gamma draw."""
import numpy as np
import pytest
from scipy import stats
from scipy.special import gammainc

from cpgbn.samplers.conv import FLOOR, sample_empty_weights

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
