"""The pieces of the hybrid model's loss (paper eq. L_g): likelihood and KL terms per document.

For document j, with w and theta^(2..T) drawn from the encoder's q
(:meth:`~cpgbn.backends.torch.encoder.WeibullConvEncoder.sample`) and the globals D, Phi, r
held fixed,

    L_g(X_j) = sum_{t=2..T} KL_t,j + KL_1,j - ln p(X_j | D, w_j),

a one-sample estimate of the negative ELBO in which every KL is the closed form of
:func:`~cpgbn.backends.torch.weibull.weibull_gamma_kl` against the layer's gamma prior *given the
sample of the layer above* (the expectation over that sample is the Monte Carlo part):

* layer 1 (the weights): KL(q(w_jks) || Gam(a_jk / S_j, 1 / c^(2)_j)) summed over k and s, with
  a_jk = (Phi^(2) theta^(2)_j)_k (or r_k when T = 1): the pooling prior of paper eq. 3;
* layer t = 2..T: KL(q(theta^(t)_jk) || Gam((Phi^(t+1) theta^(t+1)_j)_k, 1 / c^(t+1)_j)) summed
  over k, with r_k in place of Phi^(T+1) theta^(T+1)_j at the top.

The rates c^(t+1)_j are arguments (``rates[t - 1]`` for layer t, the convention of
:class:`~cpgbn.inference.state.GibbsState.c`), scalars or per-document tensors; WHAI fixes them
at 1, the default here.  The model has them as latent variables, c^(t+1)_j ~ Gam(e0, 1/f0),
that its Gibbs chain samples: :func:`conditional_rates` gives their conditional means at a
draw, which the hybrid trainer passes (inference notes, section 6: with the rates at 1 the
posterior rate of w is 2 where the chain's is 1 + c^(2), which shrinks w and theta^(1)).

Likelihood (inference notes, sections 2 and 4).  Cell (v, l) of document j has rate
lambda_jvl = sum_{f, k} w_{j,k,s = l - f} d_{k,v,f} over the valid positions s; because each
kernel sums to 1 over its V*F entries, the rates of all V x L_j cells add up to sum_{k,s} w_jks,
so the dense matrix is never needed:

* Bernoulli-Poisson link (x = 1(m > 0)): ln p = sum_cells [ln(1 - e^-lambda) + lambda]
  - sum_{k,s} w_jks;
* pseudo-count n per token (the authors' code) or observed counts n (bag-of-words):
  ln p = sum_cells [n ln lambda - ln n!] - sum_{k,s} w_jks;

the same terms as the Gibbs sweep's ``cell_units`` (:mod:`cpgbn.backends.numba.conv`).  All terms
are per document: a minibatch estimate of the corpus loss scales their sum by N / |batch|
(:meth:`ElboTerms.loss`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import CPGBNInputError
from ...layers.cells import BERNOULLI_POISSON
from .encoder import WeibullSample
from .packed import PackedDocuments, gather_rows, segment_sum
from .weibull import weibull_gamma_kl

__all__ = ["RATE_FLOOR", "ElboTerms", "cell_rates", "log_likelihood", "kl_divergences",
           "elbo_terms", "conditional_rates", "expected_kernel_counts"]

#: Floor of a cell's rate lambda.  A cell whose candidates all sit at tiny w and d (w can be as
#: small as the float's tiny, d a floored kernel entry) would underflow to lambda = 0 and
#: ln(1 - e^-lambda) = -inf; 1e-30 is the library's floor of w and D (a normal float32), so a
#: floored lambda gives a large but finite loss and gradient 1 / lambda.
RATE_FLOOR = 1e-30


@dataclass
class ElboTerms:
    """Per-document terms of the loss for one batch.

    log_likelihood : (B,) -- ln p(X_j | D, w_j) at the drawn w.
    kl : list of (B,) for t = 1..T (index t - 1) -- the KL of layer t (layer 1: the weights w).
    """

    log_likelihood: torch.Tensor
    kl: list

    @property
    def negative_elbo(self) -> torch.Tensor:
        """(B,): L_g(X_j) = sum_t KL_t,j - ln p(X_j | D, w_j)."""
        return torch.stack(self.kl).sum(dim=0) - self.log_likelihood

    def loss(self, n_docs_total: int) -> torch.Tensor:
        """The minibatch estimate of the corpus loss sum_j L_g(X_j): N / |batch| times the
        batch's sum (an unbiased estimate when the batch is drawn uniformly)."""
        per_doc = self.negative_elbo
        return per_doc.sum() * (float(n_docs_total) / per_doc.shape[0])


def cell_rates(batch: PackedDocuments, w: torch.Tensor, D) -> torch.Tensor:
    """lambda of every cell, (C,): sum over f and k of w[p(c, f), k] d_{k, v_c, f}.

    ``w`` is (P, K_1); ``D`` is the library's (V, F, K_1) kernel array (tensor or numpy), a
    constant.  Gathers (C, F, K_1) products; the sentinel position reads a zero row.
    """
    D = torch.as_tensor(D, dtype=w.dtype, device=w.device)
    if D.dim() != 3 or D.shape[1] != batch.filter_width or D.shape[2] != w.shape[1]:
        raise CPGBNInputError(f"D must have shape (V, {batch.filter_width}, {w.shape[1]}), "
                              f"got {tuple(D.shape)}")
    padded = torch.cat([w, w.new_zeros((1, w.shape[1]))])
    return (gather_rows(padded, batch.cell_positions) * D[batch.cell_word]).sum(dim=(1, 2))


def log_likelihood(batch: PackedDocuments, w: torch.Tensor, D) -> torch.Tensor:
    """ln p(X_j | D, w_j) per document, (B,) (module docstring; rates floored at RATE_FLOOR)."""
    lam = cell_rates(batch, w, D).clamp_min(RATE_FLOOR)
    if batch.mode == BERNOULLI_POISSON:
        term = torch.log(-torch.expm1(-lam)) + lam
    else:
        n = batch.cell_units.to(lam.dtype)
        term = n * torch.log(lam) - torch.lgamma(n + 1.0)
    cells = segment_sum(term, batch.cell_doc, batch.n_docs)
    return cells - segment_sum(w.sum(dim=1), batch.position_doc, batch.n_docs)


def _rate(rate, n_docs: int, like: torch.Tensor) -> torch.Tensor:
    rate = torch.as_tensor(rate, dtype=like.dtype, device=like.device)
    if rate.dim() == 0:
        return rate.expand(n_docs)
    if rate.shape != (n_docs,):
        raise CPGBNInputError(f"a prior rate must be a scalar or one value per document "
                              f"({n_docs}), got shape {tuple(rate.shape)}")
    return rate


def kl_divergences(batch: PackedDocuments, sample: WeibullSample, phi, r, rates=None) -> list:
    """The KL of every layer per document, [(B,) for t = 1..T] (module docstring).

    ``phi``: Phi^(2..T), (K_{t-1}, K_t) each; ``r``: (K_T,); ``rates``: T values or (B,)
    tensors, c^(t+1)_j for layer t (default 1).  Prior shapes are floored at the dtype's
    tiny: lnGamma(0) is infinite, and a / S_j underflows when theta^(2) is tiny.
    """
    like = sample.w
    T, B = sample.n_layers, batch.n_docs
    tiny = torch.finfo(like.dtype).tiny
    phi = [torch.as_tensor(p, dtype=like.dtype, device=like.device) for p in phi]
    r = torch.as_tensor(r, dtype=like.dtype, device=like.device)
    if len(phi) != T - 1:
        raise CPGBNInputError(f"expected {T - 1} matrices Phi^(2..T), got {len(phi)}")
    rates = [1.0] * T if rates is None else list(rates)
    if len(rates) != T:
        raise CPGBNInputError(f"expected {T} prior rates c^(2..T+1), got {len(rates)}")
    rates = [_rate(c, B, like) for c in rates]

    def prior_shape(t):                    # the gamma shape of layer t's prior, (B, K_t)
        if t == T:
            return r.expand(B, r.shape[0])
        return sample.theta[t] @ phi[t - 1].T

    per_position = gather_rows(prior_shape(1), batch.position_doc) \
        / batch.n_positions.to(like.dtype)[batch.position_doc, None]
    kl_w = weibull_gamma_kl(sample.w_shape, sample.w_scale, per_position.clamp_min(tiny),
                            rates[0][batch.position_doc, None])
    kls = [segment_sum(kl_w.sum(dim=1), batch.position_doc, B)]
    for t in range(2, T + 1):
        kl = weibull_gamma_kl(sample.theta_shape[t - 2], sample.theta_scale[t - 2],
                              prior_shape(t).clamp_min(tiny), rates[t - 1][:, None])
        kls.append(kl.sum(dim=1))
    return kls


def conditional_rates(sample: WeibullSample, r, e0: float, f0: float) -> list:
    """E[c^(t+1)_j | theta^(t)_j, theta^(t+1)_j] at the draw ``sample``, for t = 1..T: a list
    of (B,) tensors, no gradient (the ``rates`` of :func:`kl_divergences`).

    The Gibbs chain draws c^(t+1)_j ~ Gam(e0 + sum_k (Phi^(t+1) theta^(t+1)_j)_k,
    1 / (f0 + sum_k theta^(t)_jk)) (inference notes, section 3; r_k in place of the shapes at
    the top); since every column of Phi sums to 1 the shape's sum is sum_k theta^(t+1)_jk, and
    for the weights (t = 1) the positions' prior shapes a_jk / S_j add up to sum_k a_jk over
    the document, against theta^(1)_j = sum_s w_js.  The mean of that gamma is
    (e0 + sum_k theta^(t+1)_jk) / (f0 + sum_k theta^(t)_jk).  Taken as constants of the
    encoder's gradient (a coordinate step on c, as the chain's own conditional draw), not
    differentiated.
    """
    with torch.no_grad():
        T = sample.n_layers
        theta = [t.detach() for t in sample.theta]
        top = torch.as_tensor(r, dtype=theta[0].dtype, device=theta[0].device).sum()
        rates = []
        for t in range(1, T + 1):
            above = top if t == T else theta[t].sum(dim=1)
            rates.append((e0 + above) / (f0 + theta[t - 1].sum(dim=1)))
        return rates


def elbo_terms(batch: PackedDocuments, sample: WeibullSample, D, phi, r,
               rates=None) -> ElboTerms:
    """Likelihood and KL terms of one batch for one draw of the encoder."""
    return ElboTerms(log_likelihood(batch, sample.w, D),
                     kl_divergences(batch, sample, phi, r, rates))


def expected_kernel_counts(batch: PackedDocuments, w: torch.Tensor, D) -> torch.Tensor:
    """E[n_{k,v,f} | w, D] over the batch, float64 (V, F, K_1): the counts TLASGR needs for D.

    The latent count m of a cell (zero-truncated Poisson(lambda) under the Bernoulli-Poisson
    link, with mean lambda / (1 - e^-lambda); the pseudo-count or observed count n otherwise)
    is split over the candidates (f, k) in proportion to w_{s,k} d_{k,v,f} (paper eq. for the
    augmentation), so the expected count of a candidate is weight / (1 - e^-lambda), or
    n * weight / lambda.  This is the Rao-Blackwellised form of Algorithm 1's sampled counts,
    and equals D times the gradient of the cells' log-likelihood terms with respect to D (the
    -sum w term does not depend on D while each kernel sums to 1), which a test checks.
    No gradient flows through it.
    """
    with torch.no_grad():
        D = torch.as_tensor(D, device=w.device).to(torch.float64)
        w = w.detach().to(torch.float64)
        V, F, K = D.shape
        padded = torch.cat([w, w.new_zeros((1, K))])
        weights = padded[batch.cell_positions] * D[batch.cell_word]          # (C, F, K)
        lam = weights.sum(dim=(1, 2)).clamp_min(RATE_FLOOR)
        if batch.mode == BERNOULLI_POISSON:
            per_weight = 1.0 / -torch.expm1(-lam)
        else:
            per_weight = batch.cell_units.to(torch.float64) / lam
        counts = torch.zeros((V, F * K), dtype=torch.float64, device=w.device)
        expected = weights * per_weight[:, None, None]
        counts.index_add_(0, batch.cell_word, expected.reshape(-1, F * K))
        return counts.reshape(V, F, K)
