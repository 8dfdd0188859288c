"""Planted recovery by minibatch Gibbs + TLASGR (issue 25), measured as tests/test_recovery.py
measures the full Gibbs sampler: the same 2-layer simulated corpus (300 documents, 4 phrase
kernels, Phi^(2) pairing them), Hungarian matching on the total-variation distance, the same
tolerances (0.15 for every kernel, 0.2 for every Phi^(2) column).

Measured on this corpus (one thread, commit of this test):

* full Gibbs, best of three 600-sweep chains (test_recovery's protocol): kernel TV
  0.080 / 0.075 / 0.060 / 0.086, Phi^(2) worst column 0.067 (30 s);
* minibatch Gibbs, 150 steps of 50 documents, 10 burn-in + 10 collected local sweeps per step
  (25 passes over the corpus, 5/6 of the Gibbs run's document-sweeps), one chain: worst kernel
  TV 0.131, 0.117, 0.116 and Phi^(2) 0.079, 0.102, 0.148 for seeds 0, 1, 2 (5-10 s);
  with only 60 steps: worst kernel 0.117, 0.139, 0.154 and Phi^(2) 0.098, 0.237, 0.186.

* hybrid (``fit_hybrid``, its default ``global_statistics="gibbs"``: the globals' chain is
  minibatch Gibbs with 5 + 5 local sweeps, the encoder trained beside it), 300 steps of 50
  documents (as many local sweeps as the minibatch run): worst kernel TV 0.123, 0.124, 0.121
  and Phi^(2) 0.082, 0.090, 0.129 for seeds 0, 1, 2 (4 s), at the commit of this test; with
  the TLASGR normals' streams of later commits (results/hybrid_statistics/, issue 35) 0.114,
  0.160, 0.112, 0.142, 0.862, 0.153 for seeds 0-5 after 300 steps and 0.128, 0.115, 0.122,
  0.122, 0.831, 0.145 after 600: one seed in six leaves two kernels merged, a local mode of
  the globals' chain from a random start.  The paper's form of Algorithm 1
  (``global_statistics="encoder"``: statistics from the encoder's draws) stays near a random
  start on this corpus, worst kernel TV 0.5 - 0.8 after 1500 - 6000 steps, with the model's
  prior rates in the ELBO and either shape of q(w) too (docs/hybrid.md).

So minibatch Gibbs recovers the planted structure, about 1.5x further from it than the Gibbs
posterior mean (its estimate is the chain's last TLASGR state, not an average).  The test uses
test_recovery's tolerances (0.15, 0.2), about 1.7x and 3x the Gibbs figures, far below a
random start (about 0.75), with seed 0.
"""
from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest

import test_recovery as recovery
from cpgbn.inference.minibatch import fit_minibatch_gibbs
from cpgbn.inference.state import GlobalParameters

pytestmark = pytest.mark.slow

K1, K2 = 4, 2
PHI = np.array([[0.45, 0.05],
                [0.45, 0.05],
                [0.05, 0.45],
                [0.05, 0.45]])


@pytest.fixture(autouse=True)
def _one_thread(numba_one_thread):
    """One numba thread (conftest)."""


def worst_phi_tv(candidate):
    return min(max(recovery.tv(PHI[:, j], candidate[:, p[j]]) for j in range(K2))
               for p in permutations(range(K2)))


def test_minibatch_gibbs_recovers_planted_kernels_and_phi():
    D = recovery.planted_kernels(K1)
    data, hyper = recovery.simulate(GlobalParameters(D.astype(np.float32), [PHI.copy()],
                                                     np.full(K2, recovery.R_PLANTED)))
    result = fit_minibatch_gibbs(data, (K1, K2), recovery.V, hyper, seed=0, n_steps=150,
                                 batch_size=50, burn_in=10, collect=10, progress=False)
    distances, order = recovery.match_kernels(D, result.globals.D)
    assert (distances < recovery.KERNEL_TV_TOL).all(), f"kernel TV {np.round(distances, 3)}"
    learned_phi = result.globals.phi[0][order]
    np.testing.assert_allclose(learned_phi.sum(axis=0), 1.0)
    phi_tv = worst_phi_tv(learned_phi)
    assert phi_tv < recovery.PHI_TV_TOL, f"Phi^(2) column TV {phi_tv:.3f}"


def test_hybrid_recovers_planted_kernels_and_phi(torch_one_thread):
    from cpgbn.inference.hybrid import fit_hybrid

    D = recovery.planted_kernels(K1)
    data, hyper = recovery.simulate(GlobalParameters(D.astype(np.float32), [PHI.copy()],
                                                     np.full(K2, recovery.R_PLANTED)))
    result = fit_hybrid(data, (K1, K2), recovery.V, hyper, seed=0, n_steps=300,
                        batch_size=50, learning_rate=3e-3, local_sweeps=(5, 5),
                        encoder_options=dict(w_shape_above="pooled"), progress=False)
    distances, order = recovery.match_kernels(D, result.globals.D)
    assert (distances < recovery.KERNEL_TV_TOL).all(), f"kernel TV {np.round(distances, 3)}"
    phi_tv = worst_phi_tv(result.globals.phi[0][order])
    assert phi_tv < recovery.PHI_TV_TOL, f"Phi^(2) column TV {phi_tv:.3f}"
    assert np.isfinite(result.trace.loss).all()
