"""The pooling layer with its own positional concentration (``pooling_concentration`` = beta).

Prior: theta^(1)_jk ~ Gam(a_jk, 1/c^(2)_j), pi_jk ~ Dir(beta 1_{S_j}), w_jks = theta^(1)_jk pi_jks;
conditionals (derived in :mod:`cpgbn.inference.gibbs`): theta^(1)_jk | m ~ Gam(a_jk + A_jk,
1/(1 + c^(2)_j)) and pi_jk | m ~ Dir(beta + m_jk.), independently.

1. The prior draws of :func:`cpgbn.simulate.sample_locals` against the closed form: c theta^(1)
   ~ Gam(a) (KS), E[w_jks] = a_jk / (c_j S_j), each share pi_jks ~ Beta(beta, (S_j - 1) beta)
   (KS) with the Dirichlet variance, theta^(1) independent of the split.
2. The w draw of each backend (``GibbsSampler.draw_weights``, numba and torch) given fixed
   counts against the exact conditionals (KS per kernel and position), including a document
   without counts (the prior) and the joint law of theta^(1) and the split (uncorrelated).
3. The estimator: default None is the tied prior (hyper_ and get_params), a fit with the
   option on either backend, save/load keeps it, a format-2 model loads as None, ``summary``
   names it; the hybrid inference and the sampler refuse what they cannot run.

The Geweke tests of the whole sweep with the option are the ``split`` cases of
tests/test_geweke.py (numba) and tests/test_torch_backend.py (torch, also agreement with numba);
the pooled tables CRT(A_jk, a_jk) are checked against the exact posterior in
tests/test_pooling_crt.py.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from cpgbn.backends.numba.position_store import as_dense
from cpgbn import CPGBN, CPGBNInputError
from cpgbn.explain import summary_text
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import GibbsState, Hyperparameters
from cpgbn.simulate import sample_corpus, sample_globals, sample_locals
from helpers import random_texts

#: p-value below which a goodness-of-fit check fails; |z| above which a moment check fails.
P_MIN = 1e-4
Z_MAX = 4.5
SMALL = dict(vocab_size=30, n_iter=8, burn_in=4, random_state=0, n_threads=1)


@pytest.fixture(autouse=True)
def _one_thread(numba_one_thread):
    """One numba thread (conftest)."""


def _moment_z(x, expected):
    return (x.mean() - expected) / (x.std(ddof=1) / np.sqrt(len(x)))


# ----------------------------------------------------------------------------- prior draws
@pytest.mark.parametrize("beta", [0.3, 4.0])
def test_prior_draws_match_the_closed_form(beta):
    n_docs, S, K = 6000, 5, 2
    a = np.array([2.5, 0.8])
    hyper = Hyperparameters(eta=(0.5,), e0=4.0, f0=2.0, pooling_concentration=beta)
    rng = np.random.default_rng(int(beta * 10))
    g = sample_globals((K,), 4, 2, hyper, rng)
    g.r = a.copy()  # one layer: a_jk = r_k
    positions = np.arange(n_docs + 1) * S
    loc = sample_locals(g, positions, hyper, rng)
    c, theta = loc.c[0], loc.theta[0]
    w = loc.w.astype(np.float64).reshape(n_docs, S, K)
    share = w / w.sum(axis=1, keepdims=True)
    for k in range(K):
        assert stats.kstest(c * theta[:, k], stats.gamma(a[k]).cdf).pvalue > P_MIN
        # E[w_jks] = a_k / (c_j S): the scaled weights have mean 1
        assert abs(_moment_z((w[:, :, k] * c[:, None] * S / a[k]).ravel(), 1.0)) < Z_MAX
        marginal = stats.beta(beta, (S - 1) * beta)
        assert stats.kstest(share[:, 0, k], marginal.cdf).pvalue > P_MIN
        assert stats.kstest(share[:, S - 1, k], marginal.cdf).pvalue > P_MIN
        # the Dirichlet variance (1/S)(1 - 1/S) / (S beta + 1), against its sampling error
        x = share[:, 0, k]
        var, expected = x.var(ddof=1), marginal.var()
        se = np.sqrt(max(((x - x.mean()) ** 4).mean() - var ** 2, 1e-300) / len(x))
        assert abs(var - expected) / se < Z_MAX
        # theta^(1) and the split are independent
        rho = np.corrcoef(c * theta[:, k], x)[0, 1]
        assert abs(rho) * np.sqrt(n_docs) < Z_MAX


def test_none_keeps_the_tied_prior_draws():
    """pooling_concentration=None draws w_jks ~ Gam(a/S, 1/c) with theta^(1) = sum_s w: the
    shares then follow Dir(a/S), and the w are i.i.d. given c (no shared theta)."""
    n_docs, S = 6000, 4
    hyper = Hyperparameters(eta=(0.5,), e0=4.0, f0=2.0)
    rng = np.random.default_rng(3)
    g = sample_globals((1,), 4, 2, hyper, rng)
    g.r = np.array([6.0])
    loc = sample_locals(g, np.arange(n_docs + 1) * S, hyper, rng)
    w = loc.w.astype(np.float64).reshape(n_docs, S)
    c = loc.c[0]
    np.testing.assert_allclose(loc.theta[0][:, 0], w.sum(axis=1), rtol=1e-6)
    assert stats.kstest(c * w[:, 0], stats.gamma(6.0 / S).cdf).pvalue > P_MIN


# ----------------------------------------------------------------------------- conditionals
_S, _K = 4, 2
_M = np.array([[3, 0], [0, 0], [1, 2], [0, 9],     # document 0: counts on both kernels
               [0, 0], [0, 0], [0, 0], [0, 0]],    # document 1: none (the prior's split)
              dtype=np.int32)


def _sampler_and_state(backend: str, beta: float):
    hyper = Hyperparameters(eta=(0.5,), e0=2.0, f0=2.0, pooling_concentration=beta)
    g, _, _, data = sample_corpus((_K,), 5, 2, np.full(2, _S + 1), hyper, seed=5)
    g.r = np.array([1.5, 3.0])
    if backend == "torch":
        pytest.importorskip("torch")
        import torch
        torch.set_num_threads(1)
        from cpgbn.inference.gibbs import TorchGibbsSampler
        sampler = TorchGibbsSampler(data, hyper, 17)
    else:
        sampler = GibbsSampler(data, hyper, 17)
    state = GibbsState(globals=g, w=np.ones((2 * _S, _K), dtype=np.float32), m=_M.copy(),
                       theta=[np.ones((2, _K))], c=[np.array([0.5, 2.0])],
                       A=np.zeros((2, _K), dtype=np.int32), loglik=np.zeros(2))
    return sampler, sampler.on_backend(state), g.r


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("beta", [0.5, 3.0])
def test_weights_draw_samples_the_exact_conditional(backend, beta):
    sampler, state, a = _sampler_and_state(backend, beta)
    n = 4000
    thetas = np.empty((n, 2, _K))
    ws = np.empty((n, 2 * _S, _K))
    for i in range(n):
        state.sweep = i  # each sweep index is its own random stream
        sampler.draw_weights(state)
        host = sampler.to_numpy(state)
        thetas[i], ws[i] = host.theta[0], as_dense(host.w)
    np.testing.assert_array_equal(as_dense(sampler.to_numpy(state).m), _M)  # w alone is redrawn
    rate = 1.0 + np.array([0.5, 2.0])
    for j in range(2):
        rows = _M[j * _S:(j + 1) * _S]
        A = rows.sum(axis=0)
        w = ws[:, j * _S:(j + 1) * _S]
        share = w / w.sum(axis=1, keepdims=True)
        for k in range(_K):
            law = stats.gamma(a[k] + A[k], scale=1.0 / rate[j])
            assert stats.kstest(thetas[:, j, k], law.cdf).pvalue > P_MIN, (j, k)
            # the floor apart, sum_s w = theta^(1)
            np.testing.assert_allclose(w[:, :, k].sum(axis=1), thetas[:, j, k], rtol=1e-5)
            total = _S * beta + A[k]
            for s in range(_S):
                law = stats.beta(beta + rows[s, k], total - beta - rows[s, k])
                assert stats.kstest(share[:, s, k], law.cdf).pvalue > P_MIN, (j, k, s)
            rho = np.corrcoef(thetas[:, j, k], share[:, 0, k])[0, 1]
            assert abs(rho) * np.sqrt(n) < Z_MAX


# ----------------------------------------------------------------------------- the estimator
def test_default_is_the_tied_prior():
    model = CPGBN()
    assert model.get_params()["pooling_concentration"] is None
    fitted = CPGBN(layers=(3,), **SMALL).fit(random_texts(10))
    assert fitted.hyper_.pooling_concentration is None
    assert "tied prior" in summary_text(fitted)


@pytest.mark.parametrize("device", [None, "cpu"])
def test_fit_save_load_and_summary_keep_it(tmp_path, device):
    if device is not None:
        pytest.importorskip("torch")
    texts = random_texts(12)
    model = CPGBN(layers=(4, 2), pooling_concentration=2.5, device=device, **SMALL).fit(texts)
    assert model.hyper_.pooling_concentration == 2.5
    features = model.transform(texts)
    assert features.shape == (12, 4) and np.all(np.isfinite(features)) and features.sum() > 0
    assert "pooling_concentration = 2.5" in summary_text(model)
    model.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["params"]["pooling_concentration"] == 2.5
    assert meta["hyper"]["pooling_concentration"] == 2.5
    loaded = CPGBN.load(tmp_path / "m")
    assert loaded.pooling_concentration == 2.5 and loaded.hyper_.pooling_concentration == 2.5
    np.testing.assert_array_equal(loaded.transform(texts), features)


def test_a_format_2_model_loads_with_the_tied_prior(tmp_path):
    texts = random_texts(12)
    model = CPGBN(layers=(4,), **SMALL).fit(texts)
    model.save(tmp_path / "m")
    path = tmp_path / "m" / "model.json"
    meta = json.loads(path.read_text())
    del meta["params"]["pooling_concentration"], meta["hyper"]["pooling_concentration"]
    meta["format_version"] = 2
    path.write_text(json.dumps(meta))
    old = CPGBN.load(tmp_path / "m")
    assert old.pooling_concentration is None and old.hyper_.pooling_concentration is None
    np.testing.assert_array_equal(old.transform(texts), model.transform(texts))


@pytest.mark.parametrize("beta", [0.0, -1.0, float("nan"), "2", True])
def test_the_sampler_refuses_a_bad_concentration(beta):
    hyper = Hyperparameters(eta=(0.5,), pooling_concentration=beta)
    _, _, _, data = sample_corpus((2,), 5, 2, np.full(2, 4), Hyperparameters(eta=(0.5,)), seed=0)
    with pytest.raises(CPGBNInputError, match="pooling_concentration"):
        GibbsSampler(data, hyper, 0)


def test_the_hybrid_inference_refuses_it():
    pytest.importorskip("torch")
    from cpgbn.inference.hybrid import HybridTrainer
    hyper = Hyperparameters(eta=(0.5,), pooling_concentration=1.0)
    with pytest.raises(CPGBNInputError, match="pooling_concentration"):
        HybridTrainer((3,), 10, 2, hyper, n_docs_total=10, seed=0)
