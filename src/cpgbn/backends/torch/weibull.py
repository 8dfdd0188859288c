"""The Weibull distribution of the convolutional inference network (paper section 2.3).

Pure, differentiable functions over tensors of any floating dtype, broadcasting like torch's
arithmetic.  Weibull(k, lambda) has shape k > 0, scale lambda > 0 and density

    q(x) = (k / lambda) (x / lambda)^(k - 1) exp(-(x / lambda)^k),   x > 0,

which is ``scipy.stats.weibull_min(c=k, scale=lambda)``.  Following WHAI (Zhang et al., 2018)
the paper approximates every gamma-distributed conditional posterior (the weights w_jks and the
hidden units theta^(t)_j) by a Weibull, because

* a sample is a differentiable function of the parameters and of a uniform variate
  (:func:`weibull_rsample`), and
* its KL divergence to a gamma distribution has a closed form (:func:`weibull_gamma_kl`).

Gamma distributions are written Gam(alpha, 1 / beta) as in the paper: shape alpha, scale
1 / beta, i.e. *rate* beta.
"""

from __future__ import annotations

import math

import torch

__all__ = ["EULER_GAMMA", "weibull_rsample", "weibull_log_prob", "weibull_mean",
           "weibull_gamma_kl"]

#: The Euler-Mascheroni constant gamma_E = -psi(1) = -E[ln E] for E ~ Exp(1).
EULER_GAMMA = 0.57721566490153286061


def _bounds(dtype: torch.dtype) -> tuple[float, float, float]:
    """(eps, ln tiny, ln sqrt(max)) of a floating dtype."""
    info = torch.finfo(dtype)
    return info.eps, math.log(info.tiny), 0.5 * math.log(info.max)


def weibull_rsample(shape_k: torch.Tensor, scale: torch.Tensor, *, uniform=None,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """A reparameterised draw x ~ Weibull(k, lambda) by inversion of the cdf.

    x = lambda * (-ln(1 - u))^(1 / k) with u ~ U(0, 1): E = -ln(1 - u) is Exp(1) and
    P(lambda E^(1/k) <= x) = P(E <= (x / lambda)^k) = 1 - exp(-(x / lambda)^k), the Weibull cdf.
    The draw is computed in log space, ln x = ln lambda + ln(E) / k, with three clips, each
    in the dtype of the result:

    * u is clipped to [eps, 1 - eps] (eps = the dtype's machine epsilon).  Away from 1:
      -ln(1 - u) is infinite at u = 1.  Away from 0: ln E = -inf at u = 0 would give x = 0,
      whose gradient with respect to k, -x ln(E) / k^2, is 0 * inf = NaN.  The clip removes
      probability 2 eps from the law (2.4e-7 in float32), far below what any test or
      optimiser can see.
    * ln x is clipped to [ln tiny, ln sqrt(max)].  Below: a small k turns E^(1/k) into a
      number beneath the smallest normal float (E = 1e-7, k = 0.1 gives 1e-70), which would
      underflow to 0 and make ln x (in the log-density and the likelihood) -inf.  Above: x is
      a Poisson rate that the likelihood multiplies by kernel entries and sums over many
      positions; staying below the square root of the largest float leaves room for such
      sums without overflow.  The clipped draws receive zero gradient, as with any clamp.

    Parameters
    ----------
    shape_k, scale : tensors (broadcastable), k > 0 and lambda > 0.
    uniform : tensor or None
        The uniform variates u (broadcast shape), for common random numbers and tests; drawn
        from ``generator`` (torch's default generator when None) otherwise.

    Returns a tensor of the broadcast shape; differentiable in ``shape_k`` and ``scale``.
    """
    shape_k, scale = torch.broadcast_tensors(shape_k, scale)
    dtype = torch.result_type(shape_k, scale)
    eps, log_tiny, log_half_max = _bounds(dtype)
    if uniform is None:
        uniform = torch.rand(shape_k.shape, dtype=dtype, device=shape_k.device,
                             generator=generator)
    uniform = uniform.to(dtype).clamp(eps, 1.0 - eps)
    log_exponential = torch.log(-torch.log1p(-uniform))
    log_x = torch.log(scale) + log_exponential / shape_k
    # the second clamp only undoes exp's rounding just below tiny at the lower bound
    return torch.exp(log_x.clamp(log_tiny, log_half_max)).clamp_min(torch.finfo(dtype).tiny)


def weibull_log_prob(x: torch.Tensor, shape_k: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """ln q(x) = ln k - ln lambda + (k - 1) ln(x / lambda) - (x / lambda)^k, for x > 0.

    Equals ``scipy.stats.weibull_min.logpdf(x, c=k, scale=lambda)``.
    """
    log_ratio = torch.log(x) - torch.log(scale)
    return torch.log(shape_k) - torch.log(scale) + (shape_k - 1.0) * log_ratio \
        - torch.exp(shape_k * log_ratio)


def weibull_mean(shape_k: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """E[x] = lambda Gamma(1 + 1/k), computed as exp(ln lambda + lnGamma(1 + 1/k)).

    Equals ``scipy.stats.weibull_min.mean(c=k, scale=lambda)``; the log form avoids the
    overflow of Gamma(1 + 1/k) alone for small k when lambda is small.
    """
    return torch.exp(torch.log(scale) + torch.lgamma(1.0 + 1.0 / shape_k))


def weibull_gamma_kl(shape_k: torch.Tensor, scale: torch.Tensor, alpha: torch.Tensor,
                     rate: torch.Tensor) -> torch.Tensor:
    """KL(Weibull(k, lambda) || Gam(alpha, 1 / beta)) in closed form (beta = ``rate``).

        KL = gamma_E alpha / k - alpha ln lambda + ln k + beta lambda Gamma(1 + 1/k)
             - gamma_E - 1 - alpha ln beta + lnGamma(alpha),

    with gamma_E the Euler-Mascheroni constant (:data:`EULER_GAMMA`).  Derivation: under
    q = Weibull(k, lambda), (x / lambda)^k = E ~ Exp(1), so

    * E_q[(x / lambda)^k] = 1,
    * E_q[ln x] = ln lambda + E[ln E] / k = ln lambda - gamma_E / k,
    * E_q[x] = lambda Gamma(1 + 1/k);

    hence E_q[ln q] = ln k - k ln lambda + (k - 1)(ln lambda - gamma_E / k) - 1
                    = ln k - ln lambda - gamma_E + gamma_E / k - 1, and for the gamma density
    ln p(x) = alpha ln beta - lnGamma(alpha) + (alpha - 1) ln x - beta x,
    E_q[ln p] = alpha ln beta - lnGamma(alpha) + (alpha - 1)(ln lambda - gamma_E / k)
                - beta lambda Gamma(1 + 1/k).
    Their difference is the formula above (it agrees with the inference notes, section 6, and
    with WHAI's).  beta lambda Gamma(1 + 1/k) is evaluated as exp(ln beta + ln lambda +
    lnGamma(1 + 1/k)), which stays finite for small k whenever the product is.

    Parameters broadcast together; the result has the broadcast shape and is differentiable
    in all four.  In the paper's loss (eq. L_g), alpha is the prior shape given the sample of
    the layer above, so the term is that layer's KL conditional on the sample.
    """
    scaled_mean = torch.exp(torch.log(rate) + torch.log(scale) + torch.lgamma(1.0 + 1.0 / shape_k))
    return (EULER_GAMMA * alpha / shape_k - alpha * torch.log(scale) + torch.log(shape_k)
            + scaled_mean - EULER_GAMMA - 1.0 - alpha * torch.log(rate) + torch.lgamma(alpha))
