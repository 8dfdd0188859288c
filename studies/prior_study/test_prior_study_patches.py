"""The approximations of the authors' code that prior_study.py patches in for one
process: the last sample of the globals for the test documents, and posterior-mean D and Phi.
The patches change a class and module functions, so each test puts the originals back."""
import numpy as np
import pytest

from cpgbn import CPGBN
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.backends.numba import conv, gbn
from cpgbn.backends.numba.shared_shape import shared_shape_table

from helpers import random_texts
from studies.prior_study import prior_study

SETTINGS = dict(layers=(4, 2), n_iter=10, burn_in=5, random_state=0, vocab_size=40)


@pytest.fixture
def restore_sampler():
    run, draw_kernels, draw_phi = GibbsSampler.run, conv.draw_kernels, gbn.draw_phi
    yield
    GibbsSampler.run, conv.draw_kernels, gbn.draw_phi = run, draw_kernels, draw_phi


def test_last_globals_keep_the_chain_and_replace_the_means(restore_sampler):
    texts = random_texts(30)
    means = CPGBN(**SETTINGS).fit(texts)
    last_states = []
    run = GibbsSampler.run

    def spy(self, state, *args, **kwargs):
        result = run(self, state, *args, **kwargs)
        last_states.append(state.globals)
        return result
    GibbsSampler.run = spy
    prior_study.use_last_sample_globals()
    last = CPGBN(**SETTINGS).fit(texts)
    # the same chain (same training features), but the fitted globals are its last sample
    np.testing.assert_array_equal(last.train_features_, means.train_features_)
    # the training chain's run (the fit's record of kernel windows runs the sampler again)
    np.testing.assert_array_equal(last.globals_.D, last_states[0].D)
    assert last.globals_.D is not last_states[0].D  # a copy, not the sampler's live array
    assert not np.allclose(last.globals_.D, means.globals_.D)
    np.testing.assert_allclose(last.globals_.D.sum(axis=(0, 1)), 1, atol=1e-5)


def test_mean_globals_set_d_to_the_normalised_posterior_mean(restore_sampler):
    prior_study.use_posterior_mean_globals()
    counts = np.zeros((1, 3, 2, 2), dtype=np.int32)  # (slabs, V, F, K)
    counts[0, :, :, 0] = [[4, 0], [0, 2], [1, 1]]
    D = np.full((3, 2, 2), 1 / 6, dtype=np.float32)
    eta_table = shared_shape_table(0.5)
    conv.draw_kernels(0, 0, counts, eta_table, D, 1)
    expected = np.array([[4, 0], [0, 2], [1, 1]]) + 0.5
    np.testing.assert_allclose(D[:, :, 0], expected / expected.sum(), rtol=1e-6)
    assert not counts.any()  # the slabs are left at zero for the next sweep
