"""The Weibull pieces of the inference network (cpgbn.backends.torch.weibull).

1. The closed-form KL(Weibull || Gamma) against an independent quadrature of the integral and
   against a Monte Carlo estimate from scipy's draws and densities (several settings, small
   shapes included), and its exact zero when both laws are the same exponential.
2. The reparameterised draw against scipy.stats.weibull_min (Kolmogorov-Smirnov, fixed seeds),
   its gradients against the analytic derivatives, and the clips at the edges.
3. The log-density and the mean against scipy.
"""

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from cpgbn.backends.torch.weibull import (EULER_GAMMA, weibull_gamma_kl, weibull_log_prob,
                                          weibull_mean, weibull_rsample)

#: p-value below which a goodness-of-fit check fails.
P_MIN = 1e-3

#: (k, lambda, alpha, beta): Weibull shape and scale, gamma shape and rate.
KL_SETTINGS = [
    (1.0, 2.0, 1.0, 0.5),
    (0.3, 1.5, 0.2, 1.0),
    (0.15, 0.02, 0.01, 1.0),
    (2.5, 0.7, 3.0, 2.0),
    (8.0, 30.0, 50.0, 2.0),
    (0.5, 1e-3, 1e-3, 3.0),
]


def _t(*values):
    return [torch.tensor(v, dtype=torch.float64) for v in values]


def _log_ratio(x, k, lam, alpha, beta):
    """ln q(x) - ln p(x) with scipy's densities (the oracle, independent of the module)."""
    return (stats.weibull_min.logpdf(x, k, scale=lam)
            - stats.gamma.logpdf(x, alpha, scale=1.0 / beta))


def test_euler_gamma_constant():
    assert EULER_GAMMA == pytest.approx(-special.digamma(1.0), abs=1e-15)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")  # roundoff at 1e-11
@pytest.mark.parametrize("k, lam, alpha, beta", KL_SETTINGS)
def test_kl_matches_quadrature(k, lam, alpha, beta):
    """KL = E_q[ln q - ln p], integrated over E ~ Exp(1) with x = lambda E^(1/k) (smooth in E)."""
    def integrand(e):
        x = lam * e ** (1.0 / k)
        return np.exp(-e) * _log_ratio(x, k, lam, alpha, beta)

    exact = sum(integrate.quad(integrand, lo, hi, limit=400, epsabs=1e-11, epsrel=1e-11)[0]
                for lo, hi in ((0.0, 1e-8), (1e-8, 1.0), (1.0, 10.0), (10.0, np.inf)))
    closed = float(weibull_gamma_kl(*_t(k, lam, alpha, beta)))
    assert closed == pytest.approx(exact, rel=1e-7, abs=1e-7)


@pytest.mark.parametrize("k, lam, alpha, beta", KL_SETTINGS)
def test_kl_matches_monte_carlo(k, lam, alpha, beta):
    """The mean of ln q(x) - ln p(x) over 200,000 scipy draws is within 5 standard errors."""
    rng = np.random.default_rng(7)
    x = stats.weibull_min.rvs(k, scale=lam, size=200_000, random_state=rng)
    log_ratio = _log_ratio(x, k, lam, alpha, beta)
    estimate = log_ratio.mean()
    standard_error = log_ratio.std() / np.sqrt(len(x))
    closed = float(weibull_gamma_kl(*_t(k, lam, alpha, beta)))
    assert abs(closed - estimate) < 5 * standard_error + 1e-9
    assert closed >= 0.0


def test_kl_zero_between_equal_exponentials():
    """Weibull(1, lambda) and Gam(1, lambda) (rate 1/lambda) are the same exponential law."""
    lam = torch.tensor([0.1, 1.0, 7.5], dtype=torch.float64)
    kl = weibull_gamma_kl(torch.ones(3, dtype=torch.float64), lam,
                          torch.ones(3, dtype=torch.float64), 1.0 / lam)
    np.testing.assert_allclose(kl.numpy(), 0.0, atol=1e-12)


def test_kl_gradients_finite_and_broadcast():
    k, lam = torch.tensor([[0.2], [3.0]], dtype=torch.float64, requires_grad=True), \
        torch.tensor([0.5, 2.0, 40.0], dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor(1e-4, dtype=torch.float64, requires_grad=True)
    kl = weibull_gamma_kl(k, lam, alpha, torch.tensor(1.0, dtype=torch.float64))
    assert kl.shape == (2, 3)
    kl.sum().backward()
    for p in (k, lam, alpha):
        assert torch.isfinite(p.grad).all()


@pytest.mark.parametrize("k, lam, dtype", [
    (0.3, 2.0, torch.float64),
    (1.0, 1.0, torch.float64),
    (5.0, 0.1, torch.float64),
    (0.1, 1e-3, torch.float64),
    (0.3, 2.0, torch.float32),
    (2.0, 50.0, torch.float32),
])
def test_rsample_follows_scipy_weibull(k, lam, dtype):
    generator = torch.Generator().manual_seed(2024)
    shape_k = torch.full((20_000,), k, dtype=dtype)
    x = weibull_rsample(shape_k, torch.tensor(lam, dtype=dtype), generator=generator)
    assert x.dtype == dtype and x.shape == (20_000,)
    assert torch.isfinite(x).all() and (x > 0).all()
    p_value = stats.kstest(x.double().numpy(), stats.weibull_min(k, scale=lam).cdf).pvalue
    assert p_value > P_MIN


def test_rsample_power_against_a_wrong_shape():
    """The KS check above can fail: draws with k = 1.1 are told apart from Weibull(1)."""
    generator = torch.Generator().manual_seed(2024)
    x = weibull_rsample(torch.full((20_000,), 1.1, dtype=torch.float64),
                        torch.tensor(1.0, dtype=torch.float64), generator=generator)
    assert stats.kstest(x.numpy(), stats.weibull_min(1.0).cdf).pvalue < P_MIN


def test_rsample_gradients_are_the_analytic_derivatives():
    """x = lambda E^(1/k): dx/dlambda = x / lambda, dx/dk = -x ln(E) / k^2."""
    u = torch.tensor([0.01, 0.3, 0.7, 0.999], dtype=torch.float64)
    k = torch.tensor([0.2, 1.0, 2.5, 7.0], dtype=torch.float64, requires_grad=True)
    lam = torch.tensor([3.0, 0.5, 1.0, 20.0], dtype=torch.float64, requires_grad=True)
    x = weibull_rsample(k, lam, uniform=u)
    x.sum().backward()
    e = -np.log1p(-u.numpy())
    x_np = lam.detach().numpy() * e ** (1.0 / k.detach().numpy())
    np.testing.assert_allclose(x.detach().numpy(), x_np, rtol=1e-12)
    np.testing.assert_allclose(lam.grad.numpy(), x_np / lam.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(k.grad.numpy(), -x_np * np.log(e) / k.detach().numpy() ** 2,
                               rtol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rsample_clips_keep_values_and_gradients_finite(dtype):
    """u at 0 and 1, tiny shapes with huge or tiny scales: finite, positive draws, finite grads."""
    u = torch.tensor([0.0, 1.0, 0.5, 0.5, 1.0, 0.0], dtype=dtype)
    k = torch.tensor([1.0, 1.0, 1e-3, 1e-3, 0.05, 0.05], dtype=dtype, requires_grad=True)
    lam = torch.tensor([1.0, 1.0, 1e30, 1e-30, 1e20, 1e-20], dtype=dtype, requires_grad=True)
    x = weibull_rsample(k, lam, uniform=u)
    assert torch.isfinite(x).all() and (x > 0).all()
    info = torch.finfo(dtype)
    assert (x <= info.max ** 0.5 * (1 + 1e-5)).all() and (x >= info.tiny).all()
    torch.log(x).sum().backward()
    assert torch.isfinite(k.grad).all() and torch.isfinite(lam.grad).all()


def test_log_prob_and_mean_match_scipy():
    k, lam = np.array([0.2, 1.0, 3.0, 12.0]), np.array([2.0, 0.3, 5.0, 1e-2])
    x = np.array([0.7, 0.01, 4.0, 1.1e-2])
    log_prob = weibull_log_prob(*_t(x, k, lam))
    np.testing.assert_allclose(log_prob.numpy(), stats.weibull_min.logpdf(x, k, scale=lam),
                               rtol=1e-12)
    mean = weibull_mean(*_t(k, lam))
    np.testing.assert_allclose(mean.numpy(), stats.weibull_min.mean(k, scale=lam), rtol=1e-12)
