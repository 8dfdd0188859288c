"""The loss pieces of the hybrid model (cpgbn.backends.torch.elbo).

1. The sparse log-likelihood (token cells plus -sum w) equals the dense likelihood over all
   V x L_j cells, built by explicit convolution, in the three observation models (Bernoulli-
   Poisson link, pseudo-count per token, observed bag-of-words counts), with edge padding.
2. The KL terms equal a direct evaluation of the closed form (scipy) with the prior shapes
   written out (a_jk / S_j for the weights, Phi theta of the layer above, r at the top) and
   per-document rates.
3. The expected kernel counts are D times the gradient of the cells' terms, and add up to the
   expected number of units of the batch.
4. The minibatch loss scales the batch's sum by N / |batch|.
5. The pieces train: a few Adam steps of the encoder on a fixed model lower the loss.
"""

import numpy as np
import pytest
import torch
from helpers import random_token_documents
from scipy import special, stats

from cpgbn.backends.torch.elbo import RATE_FLOOR, cell_rates, elbo_terms, \
    expected_kernel_counts, kl_divergences, log_likelihood
from cpgbn.backends.torch.encoder import WeibullConvEncoder
from cpgbn.backends.torch.packed import pack
from cpgbn.errors import CPGBNInputError
from cpgbn.layers.cells import from_bag_of_words, from_token_sequences

V = 9


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _documents(lengths, seed=0):
    return random_token_documents(lengths, V, seed)


def _kernels(rng, F, K):
    return rng.dirichlet(np.full(V * F, 0.3), K).T.reshape(V, F, K)


def _dense_rates(data, w, D, j):
    """R[v, l] = sum_k sum_s w[s, k] d[k, v, l - s] over the document's positions (loops)."""
    F = D.shape[1]
    p0, p1 = data.doc_positions[j], data.doc_positions[j + 1]
    R = np.zeros((V, int(data.doc_length[j])))
    for s in range(p1 - p0):
        for f in range(F):
            R[:, s + f] += D[:, f, :] @ w[p0 + s]
    return R


def _dense_counts(data, j, values):
    X = np.zeros((V, int(data.doc_length[j])))
    for c in range(data.doc_cells[j], data.doc_cells[j + 1]):
        X[data.cell_word[c], data.cell_col[c]] += values[c]
    return X


@pytest.mark.parametrize("model", ["bernoulli-poisson", "pseudo-count", "bag-of-words"])
def test_sparse_likelihood_equals_dense_likelihood(model):
    rng = np.random.default_rng(1)
    tokens, offsets = _documents([5, 1, 0, 8, 2], seed=2)
    K = 4
    if model == "bag-of-words":
        data = from_bag_of_words(tokens, offsets)
    else:
        data = from_token_sequences(tokens, offsets, 3, padding=1,
                                    token_count="bernoulli-poisson" if model == "bernoulli-poisson"
                                    else 6)
    F = data.filter_width
    D = _kernels(rng, F, K)
    w = rng.gamma(0.5, 1.0, (data.n_positions, K))
    batch = pack(data)
    ll = log_likelihood(batch, torch.tensor(w), torch.tensor(D)).numpy()
    for j in range(data.n_docs):
        R = _dense_rates(data, w, D, j)
        if model == "bernoulli-poisson":
            X = _dense_counts(data, j, np.ones(data.n_cells)) > 0
            dense = np.where(X, np.log(-np.expm1(-R)), -R).sum()
        elif model == "pseudo-count":
            X = _dense_counts(data, j, np.full(data.n_cells, 6.0))
            dense = stats.poisson.logpmf(X, R).sum()
        else:
            X = _dense_counts(data, j, data.cell_count)
            dense = stats.poisson.logpmf(X, R).sum()
        assert ll[j] == pytest.approx(dense, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("token_count", ["bernoulli-poisson", 6])
def test_expected_kernel_counts_are_the_gradient_in_d(token_count):
    rng = np.random.default_rng(9)
    tokens, offsets = _documents([5, 1, 8], seed=10)
    data = from_token_sequences(tokens, offsets, 3, token_count=token_count, padding=1)
    batch = pack(data)
    D = torch.tensor(_kernels(rng, 3, 4), requires_grad=True)
    w = torch.tensor(rng.gamma(0.5, 1.0, (data.n_positions, 4)))
    log_likelihood(batch, w, D).sum().backward()
    counts = expected_kernel_counts(batch, w, D)
    assert counts.shape == D.shape and (counts >= 0).all()
    torch.testing.assert_close(counts, (D * D.grad).detach(), rtol=1e-10, atol=1e-12)
    lam = cell_rates(batch, w, D).detach()
    units = lam / -torch.expm1(-lam) if token_count == "bernoulli-poisson" \
        else torch.full_like(lam, 6.0)
    assert counts.sum().item() == pytest.approx(units.sum().item(), rel=1e-12)


def test_cell_rates_are_floored_and_checked():
    tokens, offsets = _documents([4])
    data = from_token_sequences(tokens, offsets, 2)
    batch = pack(data)
    D = torch.tensor(_kernels(np.random.default_rng(0), 2, 3))
    w = torch.zeros(data.n_positions, 3, dtype=torch.float64)
    assert (cell_rates(batch, w, D) == 0).all()
    ll = log_likelihood(batch, w, D)
    assert ll.item() == pytest.approx(4 * np.log(RATE_FLOOR), rel=1e-6)
    with pytest.raises(CPGBNInputError, match="D must have shape"):
        cell_rates(batch, w, D[:, :1])


def _weibull_gamma_kl_scipy(k, lam, alpha, beta):
    """The closed form written with scipy, for the cross-check of the assembled terms."""
    return (np.euler_gamma * alpha / k - alpha * np.log(lam) + np.log(k)
            + beta * lam * special.gamma(1 + 1 / k) - np.euler_gamma - 1
            - alpha * np.log(beta) + special.gammaln(alpha))


def test_kl_terms_use_the_pooling_prior_and_the_layer_above():
    tokens, offsets = _documents([5, 2, 9], seed=3)
    data = from_token_sequences(tokens, offsets, 3)
    layers = (4, 3, 2)
    torch.manual_seed(0)
    enc = WeibullConvEncoder(V, layers, 3).double()
    rng = np.random.default_rng(4)
    phi = [rng.dirichlet(np.ones(layers[t - 1]), layers[t]).T for t in (1, 2)]
    r = np.array([0.3, 0.7])
    rates = [np.array([1.0, 2.0, 0.5]), 1.5, np.array([0.2, 0.3, 0.4])]
    batch = pack(data)
    with torch.no_grad():
        sample = enc.sample(batch, phi, generator=torch.Generator().manual_seed(2))
        kls = [k.numpy() for k in kl_divergences(batch, sample, phi, r, rates)]
    theta = [t.numpy() for t in sample.theta]
    S = np.diff(data.doc_positions)
    for j in range(data.n_docs):
        rows = slice(data.doc_positions[j], data.doc_positions[j + 1])
        a = phi[0] @ theta[1][j] / S[j]
        kl_w = _weibull_gamma_kl_scipy(sample.w_shape[rows].numpy(), sample.w_scale[rows].numpy(),
                                       a[None, :], rates[0][j]).sum()
        kl_2 = _weibull_gamma_kl_scipy(sample.theta_shape[0][j].numpy(),
                                       sample.theta_scale[0][j].numpy(),
                                       phi[1] @ theta[2][j], 1.5).sum()
        kl_3 = _weibull_gamma_kl_scipy(sample.theta_shape[1][j].numpy(),
                                       sample.theta_scale[1][j].numpy(), r, rates[2][j]).sum()
        np.testing.assert_allclose([kls[0][j], kls[1][j], kls[2][j]], [kl_w, kl_2, kl_3],
                                   rtol=1e-9)
    with pytest.raises(CPGBNInputError, match="rates"):
        kl_divergences(batch, sample, phi, r, rates[:2])
    with pytest.raises(CPGBNInputError, match="one value per document"):
        kl_divergences(batch, sample, phi, r, [np.ones(2), 1.0, 1.0])


def test_minibatch_loss_scales_by_corpus_size():
    tokens, offsets = _documents([3, 6], seed=5)
    data = from_token_sequences(tokens, offsets, 3, token_count=4)
    torch.manual_seed(1)
    enc = WeibullConvEncoder(V, (3,), 3).double()
    D = _kernels(np.random.default_rng(6), 3, 3)
    batch = pack(data)
    with torch.no_grad():
        terms = elbo_terms(batch, enc.sample(batch, [], mean=True), D, [], np.full(3, 1 / 3))
    per_doc = terms.negative_elbo
    torch.testing.assert_close(per_doc, terms.kl[0] - terms.log_likelihood)
    assert terms.loss(1000).item() == pytest.approx(500 * per_doc.sum().item(), rel=1e-12)


def test_encoder_training_lowers_the_loss():
    """Adam on the encoder alone, with D, Phi, r fixed: the mean loss of the last 10 of 80
    steps is at least 10% below that of the first 10 (a one-sample estimate each step)."""
    tokens, offsets = _documents([12] * 16, seed=7)
    data = from_token_sequences(tokens, offsets, 2, token_count=5)
    layers = (6, 3)
    rng = np.random.default_rng(8)
    D = _kernels(rng, 2, layers[0])
    phi = [rng.dirichlet(np.ones(layers[0]), layers[1]).T]
    r = np.full(layers[1], 1 / layers[1])
    torch.manual_seed(3)
    enc = WeibullConvEncoder(V, layers, 2)
    optimizer = torch.optim.Adam(enc.parameters(), lr=0.03)
    generator = torch.Generator().manual_seed(4)
    batch = pack(data)
    losses = []
    for _ in range(80):
        optimizer.zero_grad()
        loss = elbo_terms(batch, enc.sample(batch, phi, generator=generator), D, phi, r) \
            .loss(data.n_docs)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert np.isfinite(losses).all()
    assert last < first - 0.1 * abs(first)
