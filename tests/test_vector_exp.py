"""exp_in_place against numpy's exp: within one unit in the last place, clamped at the ends."""
import numpy as np
import pytest

from cpgbn.samplers.vector_exp import EXP_LOWEST, exp_in_place


def _exp(x):
    out = np.array(x, dtype=np.float64)
    exp_in_place(out, np.empty_like(out))
    return out


def test_within_one_ulp_over_the_whole_range():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(EXP_LOWEST, 709.0, 1_000_001),
                        rng.normal(0.0, 1.0, 100_000), rng.uniform(-1e-8, 1e-8, 1000),
                        [0.0, -0.0, 1.0, -1.0, np.log(2.0), -np.log(2.0)]])
    ref = np.exp(x)
    assert np.all(np.abs(_exp(x) - ref) <= np.spacing(ref))
    assert _exp([0.0])[0] == 1.0


def test_clamped_outside_the_normal_range():
    low = np.exp(EXP_LOWEST)
    out = _exp([-709.0, -1e4, -np.inf, 710.0, np.inf])
    assert np.allclose(out[:3], low, rtol=1e-15, atol=0)
    assert np.allclose(out[3:], np.exp(709.0), rtol=1e-15, atol=0)


@pytest.mark.parametrize("n", [0, 1, 7, 200, 1001])
def test_any_length_and_a_longer_work_array(n):
    x = np.linspace(-3.0, 3.0, n)
    out = x.copy()
    exp_in_place(out, np.empty(n + 5))
    assert np.all(np.abs(out - np.exp(x)) <= np.spacing(np.exp(x)))
