"""Geweke (2004) joint-distribution test of the full Gibbs sweep on tiny models.

The marginal-conditional simulator draws parameters from the prior.  The successive-conditional
simulator alternates data | parameters (from the model) with one Gibbs sweep | data.  If every
conditional in the sweep is right (and applied in a valid order), both produce the prior, so
the means of bounded test functions must agree.  Standard errors of the chain use batch means.
Seeds are fixed: the test is deterministic, and its threshold (|z| < 4.5 for each of about 30
statistics, family-wise p < 2e-4 under a correct sampler) is not tuned to pass.
"""

import numpy as np
import pytest

from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import GibbsState, Hyperparameters
from cpgbn.simulate import sample_counts, sample_globals, sample_locals

THRESHOLD = 4.5


def _statistics(g, w, theta, c) -> np.ndarray:
    """Bounded summaries of every kind of parameter: kernels, Phi, r, c, theta, w."""
    squash = lambda x: x / (1.0 + x)  # noqa: E731
    stats = [g.D[0, 0, 0], g.D[2, -1, -1], g.D[1, 0, -1], g.D[0, 0, 0] ** 2]
    for p in g.phi:
        stats += [p[0, 0], p[-1, -1] ** 2]
    stats += [squash(g.r[0]), squash(g.r[-1])]
    for cc in c:
        stats += [squash(cc[0]), squash(cc[1]) ** 2]
    for th in theta:
        stats += [squash(th[0, 0]), squash(th[2, -1]), squash(th[1, 0]) ** 2]
    stats += [squash(float(w[0, 0])), squash(float(w[-1, -1]))]
    return np.array(stats, dtype=np.float64)


def _batch_se(x: np.ndarray, n_batches: int = 50) -> np.ndarray:
    batches = np.array_split(x, n_batches)
    means = np.array([b.mean(axis=0) for b in batches])
    return means.std(axis=0, ddof=1) / np.sqrt(n_batches)


def _run_geweke(layers, binary, n_prior, n_chain, seed, V=3, F=2, N=3, L=3,
                make_sampler=GibbsSampler):
    """z-scores of the chain's statistics against the prior's; ``make_sampler`` builds the
    sampler under test (any class with GibbsSampler's constructor, sweep and draw_weights)."""
    hyper = Hyperparameters(eta=(0.8,) * len(layers), e0=2.0, f0=2.0, gamma0=2.0 * layers[-1],
                            c0=1.0, sample_r=True)
    rng = np.random.default_rng(seed)
    lengths = np.full(N, L)
    positions = np.concatenate([[0], np.cumsum(lengths - F + 1)])

    prior = []
    for _ in range(n_prior):
        g = sample_globals(layers, V, F, hyper, rng)
        loc = sample_locals(g, positions, hyper, rng)
        prior.append(_statistics(g, loc.w, loc.theta, loc.c))
    prior = np.array(prior)

    g = sample_globals(layers, V, F, hyper, rng)
    loc = sample_locals(g, positions, hyper, rng)
    m, data = sample_counts(g, loc.w, lengths, F, rng, binary=binary)
    sampler = make_sampler(data, hyper, seed=seed + 1)
    state = GibbsState(globals=g, w=loc.w, m=m, theta=loc.theta, c=loc.c,
                       A=np.zeros((N, layers[0]), dtype=np.int32), loglik=np.zeros(N))
    chain = []
    for _ in range(n_chain):
        sampler.sweep(state)
        sampler.draw_weights(state)  # w current again before it is read with the stack
        chain.append(_statistics(state.globals, state.w, state.theta, state.c))
        state.m, sampler.data = sample_counts(state.globals, state.w, lengths, F, rng,
                                              binary=binary)
    chain = np.array(chain)

    se = np.sqrt(prior.var(axis=0, ddof=1) / n_prior + _batch_se(chain) ** 2)
    z = (chain.mean(axis=0) - prior.mean(axis=0)) / se
    return z


@pytest.mark.slow
@pytest.mark.parametrize("layers,binary", [
    ((2,), False),
    ((2,), True),
    ((2, 2), False),
])
def test_geweke_full_sweep(layers, binary):
    """CPGBN: F = 2, documents of 3 columns (2 positions each)."""
    z = _run_geweke(layers, binary, n_prior=20000, n_chain=20000, seed=11)
    assert np.all(np.isfinite(z))
    assert np.max(np.abs(z)) < THRESHOLD, f"Geweke z-scores {np.round(z, 2)}"


@pytest.mark.slow
def test_geweke_bag_of_words_pgbn():
    """The PGBN baseline: F = 1 and one column of word counts per document."""
    z = _run_geweke((2, 2), False, n_prior=20000, n_chain=20000, seed=12, V=4, F=1, L=1)
    assert np.all(np.isfinite(z))
    assert np.max(np.abs(z)) < THRESHOLD, f"Geweke z-scores {np.round(z, 2)}"
