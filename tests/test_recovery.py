"""Planted recovery: the Gibbs sampler finds kernels (and Phi^(2)) that generated a corpus.

Data come from :mod:`cpgbn.simulate` with planted globals, in observed-count mode.  Each
planted kernel k is a 3-word phrase: column f puts (1 - BACKGROUND) / F of the kernel's mass
on word 6k + f, and BACKGROUND of the mass is spread uniformly over all V x F cells, so the
phrases have disjoint supports apart from the shared background.

Learned kernels are matched to planted ones by the Hungarian algorithm on the total-variation
(TV) distance between the flattened V*F distributions.

Chains and tolerances. A Gibbs chain from a random start can sit for hundreds of sweeps in a
local mode where one kernel holds two phrases, or a phrase shifted by one column (worst
kernel at TV 0.4-0.95, and a clearly lower log-likelihood: on these corpora about -21,000
against -20,000). In trials over 7 simulated corpora, about a quarter of 600-sweep chains
were still there. Each test therefore runs three chains and keeps the one with the highest
mean log-likelihood over its collected sweeps (the usual practice with restarts); that chain
must recover everything. With a correct sampler the worst recovered kernel sits at TV
0.065-0.09 (the planted background cannot be attributed to kernels exactly: moving
background mass between kernels barely changes the likelihood), and the worst Phi^(2) column
at 0.03-0.11. The tolerances, 0.15 for kernels and 0.2 for Phi^(2) columns, leave a margin
of about 2x over what a correct sampler reaches and are far below a stuck chain (typically
0.4 or more), a random Dirichlet initialisation (about 0.75; asserted) or a uniform Phi^(2)
(0.4). Checked the other way: rolling the kernel counts by one column before the D draw, or
the Phi^(2) counts by one row, fails these tests. The Dirichlet concentration is 0.2 rather
than the library's 0.05: the planted kernels are dense (every cell has background mass),
which a sparse prior pulls toward zero. Simulated corpora with e0 = f0 = 1 carry moderate
counts (tens per document) except for rare draws of a tiny c; ``simulate`` checks that the
fixed corpus used here is not one of those.
"""
from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import GlobalParameters, Hyperparameters
from cpgbn.simulate import sample_corpus

# a correct sampler takes 5-60 s per test: 300 s ends a hang or a runaway (a w rate of c^(2)
# instead of 1 + c^(2) once ran for over 15 minutes) as a failure
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

V, F = 30, 3
BACKGROUND = 0.2
N_DOCS, DOC_LENGTH = 300, 15
N_ITER, BURN_IN = 600, 300
CHAIN_SEEDS = (0, 1, 2)
KERNEL_TV_TOL = 0.15
PHI_TV_TOL = 0.2
ETA = 0.2
# e0 = f0 = 1: c ~ Gam(1, 1) has mean 1; documents carry tens of counts (the heavy tail of 1/c
# can give a huge document now and then: MAX_COUNTS_PER_DOC rules such a corpus out).
E0 = F0 = 1.0
R_PLANTED = 2.0
MAX_COUNTS_PER_DOC = 200


@pytest.fixture(autouse=True)
def _one_thread(numba_one_thread):
    """One numba thread (conftest)."""


def planted_kernels(K: int) -> np.ndarray:
    """(V, F, K): kernel k is the phrase (6k, 6k+1, 6k+2) plus a uniform background."""
    assert 6 * (K - 1) + F <= V
    D = np.full((V, F, K), BACKGROUND / (V * F))
    for k in range(K):
        for f in range(F):
            D[6 * k + f, f, k] += (1.0 - BACKGROUND) / F
    np.testing.assert_allclose(D.sum(axis=(0, 1)), 1.0)
    return D


def tv(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - q).sum())


def match_kernels(planted: np.ndarray, learned: np.ndarray):
    """Hungarian matching on TV; returns (tv of each planted kernel, learned index of each)."""
    K = planted.shape[2]
    P = planted.reshape(V * F, K)
    L = learned.reshape(V * F, -1).astype(np.float64)
    L = L / L.sum(axis=0)
    cost = np.array([[tv(P[:, i], L[:, j]) for j in range(L.shape[1])] for i in range(K)])
    rows, cols = linear_sum_assignment(cost)
    return cost[rows, cols], cols


def simulate(globals_: GlobalParameters, seed: int = 1):
    hyper = Hyperparameters(eta=(ETA,) * len(globals_.layers), e0=E0, f0=F0)
    _, _, m, data = sample_corpus(globals_.layers, V, F, np.full(N_DOCS, DOC_LENGTH), hyper,
                                  seed=seed, globals_=globals_)
    # enough data to learn from, and moderate: every kernel generated >= 1000 units
    assert data.n_cells > 10 * N_DOCS
    assert (m.sum(axis=0) > 1000).all()
    assert data.cell_count.sum() < MAX_COUNTS_PER_DOC * N_DOCS
    return data, hyper


def best_chain(data, hyper, layers):
    """Run one chain per seed; return (results of the highest-likelihood chain, its initial D)."""
    best = None
    for seed in CHAIN_SEEDS:
        sampler = GibbsSampler(data, hyper, seed)
        state = sampler.initial_state(layers, V)
        initial_D = state.globals.D.copy()
        result = sampler.run(state, N_ITER, BURN_IN)
        assert result.n_collected == N_ITER - BURN_IN
        assert np.isfinite(result.loglik).all()
        score = float(np.mean(result.loglik[BURN_IN:]))
        if best is None or score > best[0]:
            best = (score, result, initial_D)
    return best[1], best[2]


def test_one_layer_recovers_planted_kernels():
    K = 5
    D = planted_kernels(K)
    data, hyper = simulate(GlobalParameters(D.astype(np.float32), [], np.full(K, R_PLANTED)))

    result, initial_D = best_chain(data, hyper, (K,))

    # the test has power: a random start is far from the planted kernels
    initial_tv, _ = match_kernels(D, initial_D)
    assert initial_tv.min() > 0.5, f"random start already close: {initial_tv}"

    distances, _ = match_kernels(D, result.globals_mean.D)
    assert (distances < KERNEL_TV_TOL).all(), f"kernel TV distances {np.round(distances, 3)}"


def test_two_layers_recover_kernels_and_phi():
    K1, K2 = 4, 2
    D = planted_kernels(K1)
    phi = np.array([[0.45, 0.05],
                    [0.45, 0.05],
                    [0.05, 0.45],
                    [0.05, 0.45]])  # topic 0 uses kernels 0 and 1, topic 1 kernels 2 and 3
    data, hyper = simulate(GlobalParameters(D.astype(np.float32), [phi.copy()],
                                            np.full(K2, R_PLANTED)))

    result, initial_D = best_chain(data, hyper, (K1, K2))

    initial_tv, _ = match_kernels(D, initial_D)
    assert initial_tv.min() > 0.5, f"random start already close: {initial_tv}"

    distances, order = match_kernels(D, result.globals_mean.D)
    assert (distances < KERNEL_TV_TOL).all(), f"kernel TV distances {np.round(distances, 3)}"

    learned_phi = result.globals_mean.phi[0][order]  # rows in the planted kernels' order
    np.testing.assert_allclose(learned_phi.sum(axis=0), 1.0)

    def worst_column_tv(candidate):
        return min(max(tv(phi[:, j], candidate[:, p[j]]) for j in range(K2))
                   for p in permutations(range(K2)))

    phi_tv = worst_column_tv(learned_phi)
    assert worst_column_tv(np.full_like(phi, 1.0 / K1)) > 1.5 * PHI_TV_TOL  # the metric has power
    assert phi_tv < PHI_TV_TOL, f"Phi^(2) column TV {phi_tv:.3f}: {np.round(learned_phi, 3)}"
