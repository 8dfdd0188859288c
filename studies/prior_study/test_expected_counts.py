"""The study patches expected_counts.py (the authors' fractional expected counts).

The study's backends subclass the library's (the PyTorch one overrides the token split and the
pooled tables, the numba one the position step and the kernel draw), and the study's estimator
gives them to the library's Gibbs sampler as its ``backend`` argument.  These tests keep both
working when the samplers change; they watch the training chain through a recording subclass
of the sampler (the mode's ``sampler_class``), so nothing of the library is rebound.
"""

import numpy as np
import pytest

from cpgbn.inference.gibbs import GibbsSampler
from studies.prior_study.expected_counts import (DROP, ExpectedCountsCPGBN, RedistributedCPGBN,
                                                 estimator_for)


def _texts():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(25)]
    return [" ".join(rng.choice(words, size=8)) for _ in range(30)]


def _watched(estimator, *, initial=None, before=None, after=None):
    """``estimator`` whose training sampler (not the samplers of ``transform``) calls
    ``initial(sampler, state)`` on its initial state, and around each sweep
    ``memo = before(sampler, state)`` and ``after(sampler, state, memo)``."""

    class Recording(GibbsSampler):
        def initial_state(self, *args, **kwargs):
            state = super().initial_state(*args, **kwargs)
            if self.learn_globals and initial is not None:
                initial(self, state)
            return state

        def sweep_on_backend(self, state):
            watch = self.learn_globals
            memo = before(self, state) if watch and before is not None else None
            super().sweep_on_backend(state)
            if watch and after is not None:
                after(self, state, memo)

    return estimator_for(type(f"Watched{estimator.mode.__name__}", (estimator.mode,),
                              {"sampler_class": Recording}))


# The two tests of the study's numba sampler are in the long tier (``make test-long``): it
# compiles the numba sweep for float latent counts, 50 s of one core for one-second tests
# (moving one alone moved the compilation to the other: 17 s in a fresh-clone make test).
@pytest.mark.long
def test_numba_expected_counts_are_fractional_and_keep_every_unit():
    seen = []

    def record(sampler, state, memo=None):
        seen.append((float(state.A.sum()), bool((state.m != np.round(state.m)).any()),
                     state.m.dtype, float(np.asarray(state.globals.D).sum())))

    count, K, F = 25, 4, 3
    # the initial augmentation keeps its fractions too
    model = _watched(ExpectedCountsCPGBN, initial=record, after=record)(
        layers=(K, 2), vocab_size=30, token_count=count, n_iter=4, burn_in=2, random_state=0,
        n_threads=1).fit(_texts())
    units = count * model.n_train_tokens_
    assert len(seen) == 5
    for total, fractional, dtype, d_sum in seen:
        assert dtype == np.float64 and fractional
        assert units - model.n_train_tokens_ * F * K * DROP <= total <= units * (1 + 1e-12)
        assert d_sum == pytest.approx(K, rel=1e-4)  # every kernel on the simplex
    assert np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(_texts()[:5])).all()


@pytest.mark.long
def test_redistributed_w_follows_the_expected_counts_and_zero_is_absorbing():
    """The authors' w step: w_jks / theta_jk = m_jks / A_jk of the previous augmentation, and a
    kernel that has vanished from a document never comes back."""
    checked = {"ratios": 0, "vanished": 0}

    def remember(sampler, state):
        return state.m.copy(), state.A.copy(), state.theta[0] == 0

    def check(sampler, state, memo):
        m_prev, A_prev, vanished = memo
        theta = state.theta[0]
        assert (theta[vanished] == 0).all()
        checked["vanished"] += int(vanished.sum())
        pos = sampler.data.doc_positions
        for j in range(sampler.data.n_docs):
            rows = slice(pos[j], pos[j + 1])
            live = (theta[j] > 0) & (A_prev[j] > 1e-3)
            np.testing.assert_allclose(state.w[rows][:, live] / theta[j, live],
                                       m_prev[rows][:, live] / A_prev[j, live],
                                       rtol=1e-4, atol=1e-6)
            checked["ratios"] += int(live.sum())

    model = _watched(RedistributedCPGBN, before=remember, after=check)(
        layers=(6, 3), vocab_size=30, token_count=25, n_iter=25, burn_in=20, random_state=0,
        n_threads=1, padding=1).fit(_texts())
    assert checked["ratios"] > 100 and checked["vanished"] > 0
    assert (model.train_features_ == 0).any() and np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(_texts()[:5])).all()


def test_expected_counts_are_fractional_and_keep_every_unit():
    torch = pytest.importorskip("torch", reason="the study subclasses the PyTorch backend")
    seen = []

    def record(sampler, ts, memo):
        m = ts.m.value   # the stored counts of the PyTorch backend's field
        seen.append((float(ts.A.sum()), bool((m != torch.round(m)).any()), ts.m.dtype))

    count, K, F = 25, 4, 3
    model = _watched(ExpectedCountsCPGBN, after=record)(
        layers=(K, 2), vocab_size=30, token_count=count, n_iter=4, burn_in=2, device="cpu",
        random_state=0).fit(_texts())
    units = count * model.n_train_tokens_
    assert len(seen) == 4
    for total, fractional, dtype in seen:
        assert dtype == torch.float64 and fractional
        # only shares below DROP of a unit are left out: at most F * K of them per token
        assert units - model.n_train_tokens_ * F * K * DROP <= total <= units * (1 + 1e-12)
    assert np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(_texts()[:5])).all()
    with pytest.raises(ValueError, match="numba sampler"):
        RedistributedCPGBN(layers=(K, 2), vocab_size=30, device="cpu").fit(_texts())
