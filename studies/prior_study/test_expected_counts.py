"""The study patches expected_counts.py (the authors' fractional expected counts).

The study's backends subclass the library's (the PyTorch one overrides the token split and the
pooled tables, the numba one the position step and the kernel draw), and the study makes them
the samplers' defaults for its process.  These tests keep both working when the samplers
change, and put the library's defaults back.
"""

import numpy as np
import pytest

from cpgbn import CPGBN
from cpgbn.inference import gibbs
from studies.prior_study.expected_counts import DROP, use_expected_counts, use_expected_counts_numba


def _texts():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(25)]
    return [" ".join(rng.choice(words, size=8)) for _ in range(30)]


@pytest.fixture(params=[False], ids=["sampled-w"])
def patched_numba(request):
    saved = gibbs.NumbaBackend
    try:
        use_expected_counts_numba(request.param)
        yield DROP
    finally:
        gibbs.NumbaBackend = saved


def test_numba_expected_counts_are_fractional_and_keep_every_unit(patched_numba):
    drop = patched_numba
    seen = []
    sweep = gibbs.GibbsSampler.sweep_on_backend
    initial = gibbs.GibbsSampler.initial_state

    def record(state):
        seen.append((float(state.A.sum()), bool((state.m != np.round(state.m)).any()),
                     state.m.dtype, float(np.asarray(state.globals.D).sum())))
        return state

    def spy(self, state):
        sweep(self, state)
        record(state)

    def first(self, *args, **kwargs):  # the initial augmentation keeps its fractions too
        return record(initial(self, *args, **kwargs))

    gibbs.GibbsSampler.sweep_on_backend = spy
    gibbs.GibbsSampler.initial_state = first
    try:
        count, K, F = 25, 4, 3
        model = CPGBN(layers=(K, 2), vocab_size=30, token_count=count, n_iter=4, burn_in=2,
                      random_state=0, n_threads=1).fit(_texts())
    finally:
        gibbs.GibbsSampler.sweep_on_backend = sweep
        gibbs.GibbsSampler.initial_state = initial
    units = count * model.n_train_tokens_
    assert len(seen) == 5
    for total, fractional, dtype, d_sum in seen:
        assert dtype == np.float64 and fractional
        assert units - model.n_train_tokens_ * F * K * drop <= total <= units * (1 + 1e-12)
        assert d_sum == pytest.approx(K, rel=1e-4)  # every kernel on the simplex
    assert np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(_texts()[:5])).all()


@pytest.mark.parametrize("patched_numba", [True], ids=["redistributed-w"], indirect=True)
def test_redistributed_w_follows_the_expected_counts_and_zero_is_absorbing(patched_numba):
    """The authors' w step: w_jks / theta_jk = m_jks / A_jk of the previous augmentation, and a
    kernel that has vanished from a document never comes back."""
    checked = {"ratios": 0, "vanished": 0}
    sweep = gibbs.GibbsSampler.sweep_on_backend

    def spy(self, state):
        m_prev, A_prev = state.m.copy(), state.A.copy()
        vanished = state.theta[0] == 0
        sweep(self, state)
        theta = state.theta[0]
        assert (theta[vanished] == 0).all()
        checked["vanished"] += int(vanished.sum())
        pos = self.data.doc_positions
        for j in range(self.data.n_docs):
            rows = slice(pos[j], pos[j + 1])
            live = (theta[j] > 0) & (A_prev[j] > 1e-3)
            np.testing.assert_allclose(state.w[rows][:, live] / theta[j, live],
                                       m_prev[rows][:, live] / A_prev[j, live],
                                       rtol=1e-4, atol=1e-6)
            checked["ratios"] += int(live.sum())

    gibbs.GibbsSampler.sweep_on_backend = spy
    try:
        model = CPGBN(layers=(6, 3), vocab_size=30, token_count=25, n_iter=25, burn_in=20,
                      random_state=0, n_threads=1, padding=1).fit(_texts())
    finally:
        gibbs.GibbsSampler.sweep_on_backend = sweep
    assert checked["ratios"] > 100 and checked["vanished"] > 0
    assert (model.train_features_ == 0).any() and np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(_texts()[:5])).all()


@pytest.fixture
def patched_sampler():
    torch = pytest.importorskip("torch", reason="the study patches the PyTorch backend")
    from cpgbn.backends.torch import backend
    saved = backend.TorchBackend
    try:
        use_expected_counts()
        yield torch, gibbs.GibbsSampler, DROP
    finally:
        backend.TorchBackend = saved


def test_expected_counts_are_fractional_and_keep_every_unit(patched_sampler):
    torch, cls, drop = patched_sampler
    texts = _texts()
    seen = []
    sweep = cls.sweep_on_backend

    def spy(self, ts):
        sweep(self, ts)
        seen.append((float(ts.A.sum()), bool((ts.m != torch.round(ts.m)).any()), ts.m.dtype))

    cls.sweep_on_backend = spy
    try:
        count, K, F = 25, 4, 3
        model = CPGBN(layers=(K, 2), vocab_size=30, token_count=count, n_iter=4, burn_in=2,
                      device="cpu", random_state=0).fit(texts)
    finally:
        cls.sweep_on_backend = sweep
    units = count * model.n_train_tokens_
    assert len(seen) == 4
    for total, fractional, dtype in seen:
        assert dtype == torch.float64 and fractional
        # only shares below DROP of a unit are left out: at most F * K of them per token
        assert units - model.n_train_tokens_ * F * K * drop <= total <= units * (1 + 1e-12)
    assert np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(texts[:5])).all()
