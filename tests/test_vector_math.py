"""The vectorised elementary functions against numpy/scipy: within an ulp or two, clamped at the ends."""
import numpy as np
import pytest
from scipy.special import gammaln

from cpgbn.backends.numba.vector_math import (EXP_LOWEST, LGAMMA1P_MAX, exp_in_place, expm1_in_place,
                                        lgamma1p_small_in_place)


def _apply(function, x):
    out = np.array(x, dtype=np.float64)
    function(out, np.empty_like(out))
    return out


def _grid():
    rng = np.random.default_rng(3)
    return np.concatenate([np.linspace(EXP_LOWEST, 709.0, 1_000_001),
                           rng.normal(0.0, 1.0, 100_000), rng.uniform(-1e-8, 1e-8, 1000),
                           np.linspace(-0.4, 0.4, 10_001),
                           [0.0, -0.0, 1.0, -1.0, np.log(2.0), -np.log(2.0), 1e-300, -1e-300]])


def test_exp_within_one_ulp_over_the_whole_range():
    x = _grid()
    ref = np.exp(x)
    assert np.all(np.abs(_apply(exp_in_place, x) - ref) <= np.spacing(ref))
    assert _apply(exp_in_place, [0.0])[0] == 1.0


def test_expm1_within_two_ulp_and_precise_near_zero():
    x = _grid()
    ref = np.expm1(x)
    got = _apply(expm1_in_place, x)
    assert np.all(np.abs(got - ref) <= 2 * np.abs(np.spacing(ref)))
    tiny = np.array([1e-300, -1e-20, 3e-12, -7e-9])
    np.testing.assert_allclose(_apply(expm1_in_place, tiny), np.expm1(tiny), rtol=1e-15, atol=0)


@pytest.mark.parametrize("function, reference", [(exp_in_place, np.exp), (expm1_in_place, np.expm1)])
def test_clamped_outside_the_normal_range(function, reference):
    out = _apply(function, [-709.0, -1e4, -np.inf, 710.0, np.inf])
    np.testing.assert_allclose(out[:3], reference(EXP_LOWEST), rtol=1e-15, atol=0)
    np.testing.assert_allclose(out[3:], reference(709.0), rtol=1e-15, atol=0)


@pytest.mark.parametrize("n", [0, 1, 7, 200, 1001])
def test_any_length_and_a_longer_work_array(n):
    x = np.linspace(-3.0, 3.0, n)
    out = x.copy()
    exp_in_place(out, np.empty(n + 5))
    assert np.all(np.abs(out - np.exp(x)) <= np.spacing(np.exp(x)))


def test_lgamma1p_small_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    a = np.concatenate([[0.0, 1e-300, 1e-12], np.geomspace(1e-10, LGAMMA1P_MAX, 2001),
                        np.linspace(0.0, LGAMMA1P_MAX, 2001)[1:]])
    out = np.empty_like(a)
    lgamma1p_small_in_place(a, out)
    with mpmath.workdps(40):
        ref = np.array([float(mpmath.loggamma(1 + mpmath.mpf(float(t)))) for t in a])
    assert out[0] == 0.0
    assert out[1] == -0.5772156649015329 * 1e-300  # 40 digits cannot resolve 1 + 1e-300
    np.testing.assert_allclose(out[2:], ref[2:], rtol=4e-16, atol=0)
    # and scipy agrees where its own rounding of 1 + a does not matter
    np.testing.assert_allclose(out[-100:], gammaln(1.0 + a[-100:]), rtol=1e-14)
