"""The PyTorch backend of the Gibbs sweep (cpgbn.backends.torch).

1. Its random-variate building blocks against exact laws (zero-truncated Poisson, CRT, the
   floor-aware conditioned gamma, multinomial splits), and the pooling layer's tables against
   the exact posterior of tests/test_pooling_crt.py (with its power check).
2. The Geweke (2004) joint-distribution test of the full torch sweep on the tiny models of
   tests/test_geweke.py, with its statistics, batch-means standard errors and threshold.
3. Agreement in distribution with the numba sampler on one simulated corpus: independent
   chains of both backends from the same start, compared by a two-sample test on chain means
   (see test_agrees_with_numba_in_distribution).
4. Reproducibility for a seed, resumability, invariants of the counts under chunking, the
   random streams keyed by global document blocks (shards swept apart draw what the whole
   corpus draws), and the error for device="cuda" without CUDA.

Every test is deterministic (fixed seeds); torch and numba run on one thread.
"""

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch backend needs torch "
                                            "(pip install 'cpgbn[torch]')")

from scipy import special, stats  # noqa: E402
from test_geweke import CASES, THRESHOLD, run_geweke  # noqa: E402

from cpgbn.errors import CPGBNInputError  # noqa: E402
from cpgbn.inference.gibbs import GibbsSampler  # noqa: E402
from cpgbn.inference.state import GibbsState, Hyperparameters  # noqa: E402
from cpgbn.backends.numba.position_store import as_dense  # noqa: E402
from cpgbn.backends.torch.position_field import DeviceField  # noqa: E402
from cpgbn.backends.torch.torch_backend import FLOOR  # noqa: E402
from cpgbn.inference.gibbs import TorchGibbsSampler  # noqa: E402
from cpgbn.simulate import sample_corpus, sample_globals  # noqa: E402

#: p-value below which a goodness-of-fit check of a building block fails.
P_MIN = 1e-4


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One thread for torch and for the numba reference (the machine may be shared)."""
    import numba
    previous = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    yield
    torch.set_num_threads(previous[0])
    numba.set_num_threads(previous[1])


def _small_corpus(binary=False, layers=(3, 2), seed=1, n_docs=12, length=8):
    hyper = Hyperparameters(eta=(0.5,) * len(layers), e0=2.0, f0=2.0)
    g, _, _, data = sample_corpus(layers, 10, 3, np.full(n_docs, length), hyper, seed=seed,
                                  binary=binary)
    return hyper, g, data


def _sampler_for_draws(seed=0):
    hyper, _, data = _small_corpus()
    sampler = TorchGibbsSampler(data, hyper, seed)
    sampler.backend.random.reseed(12345)
    return sampler


# ---------------------------------------------------------------------- building blocks
@pytest.mark.parametrize("lam", [1e-9, 0.3, 4.0, 9.99, 10.0, 35.0])
def test_zero_truncated_poisson_law(lam):
    sampler = _sampler_for_draws()
    n = 20000
    draws = sampler.backend.random.zero_truncated_poisson(torch.full((n,), lam, dtype=torch.float64)).numpy()
    assert draws.min() >= 1
    if lam < 1e-6:
        assert np.all(draws == 1)  # P(k >= 2) ~ lam / 2
        return
    k = np.arange(1, int(lam + 10 * np.sqrt(lam) + 10))
    pmf = stats.poisson.pmf(k, lam) / -np.expm1(-lam)
    observed = np.bincount(draws, minlength=k[-1] + 1)[1:k[-1] + 1]
    keep = pmf * n >= 5  # values with enough expected draws; the rest form one cell
    obs = np.append(observed[keep], n - observed[keep].sum())
    exp = np.append(pmf[keep], max(1.0 - pmf[keep].sum(), 0.0)) * n
    if exp[-1] < 5:  # the remainder is too small to test alone: merge it with the last value
        obs = np.append(obs[:-2], obs[-2:].sum())
        exp = np.append(exp[:-2], exp[-2:].sum())
    assert stats.chisquare(obs, exp * n / exp.sum()).pvalue > P_MIN


@pytest.mark.parametrize("m,a", [(1, 0.5), (5, 0.5), (60, 3.0), (400, 0.2), (400, 1e-100)])
def test_crt_moments(m, a):
    sampler = _sampler_for_draws()
    n = 20000
    draws = sampler.backend.random.crt(torch.full((n,), m, dtype=torch.int64),
                         torch.full((n,), a, dtype=torch.float64)).numpy()
    p = a / (a + np.arange(m))  # customer i + 1 opens a table with probability a / (a + i)
    assert draws.min() >= 1 and draws.max() <= m
    mean, var = p.sum(), (p * (1 - p)).sum()
    if var == 0:
        assert np.all(draws == 1)
        return
    z = (draws.mean() - mean) / np.sqrt(var / n)
    assert abs(z) < 4.5
    # zero counts give zero tables
    assert sampler.backend.random.crt(torch.zeros(3, dtype=torch.int64), torch.ones(3, dtype=torch.float64)).sum() == 0


@pytest.mark.parametrize("alpha,x0", [(0.05, 2e-30), (0.5, 1e-12), (0.001, 3e-30)])
def test_gamma_above_law(alpha, x0):
    """The floor-aware draw of empty positions: Gam(alpha) conditioned on >= x0, against the exact
    conditional cdf."""
    sampler = _sampler_for_draws()
    n = 20000
    x = sampler.backend.random.gamma_above(torch.full((n,), alpha, dtype=torch.float64),
                             torch.full((n,), np.log(x0), dtype=torch.float64)).numpy()
    assert x.min() >= x0
    tail = special.gammaincc(alpha, x0)

    def cdf(v):
        return np.clip((special.gammainc(alpha, v) - special.gammainc(alpha, x0)) / tail, 0, 1)

    assert stats.kstest(x, cdf).pvalue > P_MIN


def test_log_gamma_small_shapes():
    """Shapes far below 1 stay finite in log space (no underflow to -inf or NaN)."""
    sampler = _sampler_for_draws()
    shape = torch.tensor([1e-100, 1e-8, 0.3, 1.0, 250.0], dtype=torch.float64).repeat(4000)
    lg = sampler.backend.random.log_gamma(shape)
    assert torch.isfinite(lg).all()
    # E[log G] = digamma(shape)
    means = lg.reshape(4000, 5).mean(dim=0).numpy()
    sds = lg.reshape(4000, 5).std(dim=0).numpy() / np.sqrt(4000)
    z = (means[1:] - special.digamma([1e-8, 0.3, 1.0, 250.0])) / sds[1:]
    assert np.all(np.abs(z) < 4.5), z


def _draw_unit_counts(cum, counts):
    """unit_counts as a dense (rows, columns) count matrix."""
    sampler = _sampler_for_draws()
    r_u, c_u, amounts = sampler.backend.random.unit_counts(cum, torch.tensor(counts))
    dense = np.zeros(tuple(cum.shape), dtype=np.int64)
    np.add.at(dense, (r_u.numpy(), c_u.numpy()), amounts.numpy())
    return dense, amounts.numpy()


def test_multinomial_units_law():
    """Rows of varying counts (1..60, so every grouping path runs) split by their weights."""
    rng = np.random.default_rng(3)
    weights = np.array([0.0, 2.0, 1e-9, 0.5, 0.0, 3.0, 1.5])
    rows = 3000
    counts = rng.integers(0, 61, size=rows)
    cum = torch.tensor(np.tile(np.cumsum(weights), (rows, 1)))
    dense, amounts = _draw_unit_counts(cum, counts)
    assert (amounts > 0).all()
    np.testing.assert_array_equal(dense.sum(axis=1), counts)
    totals = dense.sum(axis=0)
    assert totals[weights == 0].sum() == 0
    p = weights / weights.sum()
    big = p * counts.sum() >= 5
    obs = np.append(totals[big], totals[~big].sum())
    exp = np.append(p[big], p[~big].sum()) * counts.sum()
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > P_MIN


@pytest.mark.parametrize("n", [1, 2, 37, 300])
def test_multinomial_unit_counts_per_row(n):
    """Each row's draw is Multinomial(n, p) jointly, not only in its column totals: a column's
    count over rows follows Binomial(n, p_c) (chi-square over its values, for the first,
    a middle and the last column with weight, where a wrong normalisation of the sorted
    uniforms would show), and two columns' counts covary as -n p_a p_b."""
    weights = np.array([0.7, 0.0, 1.3, 0.25, 2.0, 0.75])
    p = weights / weights.sum()
    rows = 6000
    cum = torch.tensor(np.tile(np.cumsum(weights), (rows, 1)))
    dense, _ = _draw_unit_counts(cum, np.full(rows, n))
    np.testing.assert_array_equal(dense.sum(axis=1), n)
    assert dense[:, 1].sum() == 0
    for c in (0, 3, 5):
        pmf = stats.binom.pmf(np.arange(n + 1), n, p[c])
        keep = pmf * rows >= 5
        obs = np.bincount(dense[:, c], minlength=n + 1)
        obs = np.append(obs[keep], obs[~keep].sum())
        exp = np.append(pmf[keep], pmf[~keep].sum()) * rows
        assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > P_MIN, c
    if n > 1:
        a, b = 2, 4
        cov = np.cov(dense[:, a], dense[:, b])[0, 1]
        expected = -n * p[a] * p[b]
        # the sample covariance's standard error, from the multinomial's fourth moments
        se = np.std((dense[:, a] - n * p[a]) * (dense[:, b] - n * p[b])) / np.sqrt(rows)
        assert abs(cov - expected) < 4.5 * se, (cov, expected, se)


def _floor_heavy_augmentation(n_repeats, max_elements=1 << 20, seed=0):
    """augment_rows over a small corpus whose weights all sit within ten floors, so that
    the floor bucket of the live-candidate split takes a large share of every cell's units:
    (the counts m summed over the repeats, their expectation under the dense law
    units_c w_{s k} D[v_c, f, k] / lambda_c, the log-likelihoods, their dense values)."""
    from cpgbn.backends.torch import conv
    from cpgbn.backends.torch.random import TorchRandom
    _, g, data = _small_corpus(seed=5, n_docs=6, length=6)
    device = torch.device("cpu")
    cells = conv.DeviceCells.upload(data, device, 1024, 0)
    random = TorchRandom(seed, device, max_elements)
    split_units = lambda cum, units: random.unit_counts(cum, units)  # noqa: E731
    rng = np.random.default_rng(seed)
    P, (V, F, K) = data.n_positions, g.D.shape
    w = np.full((P, K), FLOOR, dtype=np.float32)
    lifted = rng.random((P, K)) < 0.5               # half the entries just above the floor
    w[lifted] = (FLOOR * rng.uniform(1.5, 10.0, size=int(lifted.sum()))).astype(np.float32)
    w[rng.random(P) < 0.3] = FLOOR                    # and whole positions at it
    D = torch.tensor(g.D)
    w_rows, theta = torch.tensor(w), torch.ones((data.n_docs, K), dtype=torch.float64)
    # the dense law, cell by cell
    wd, Dd = w.astype(np.float64), g.D.astype(np.float64)
    expected = np.zeros((P, K))
    dense_loglik = -theta.sum(dim=1).numpy().copy()
    for j in range(data.n_docs):
        p0, S = data.doc_positions[j], data.doc_positions[j + 1] - data.doc_positions[j]
        for c in range(data.doc_cells[j], data.doc_cells[j + 1]):
            v, col, units = data.cell_word[c], data.cell_col[c], data.cell_count[c]
            share = np.zeros((P, K))
            for f in range(F):
                if 0 <= col - f < S:
                    share[p0 + col - f] += wd[p0 + col - f] * Dd[v, f]
            lam = share.sum()
            expected += n_repeats * units * share / lam
            dense_loglik[j] += units * np.log(lam) - special.gammaln(units + 1.0)
    total = np.zeros((P, K), dtype=np.int64)
    for repeat in range(n_repeats):
        random.reseed(repeat)
        m = torch.zeros((P, K), dtype=torch.int32)
        A = torch.zeros((data.n_docs, K), dtype=torch.int32)
        n = torch.zeros(V * F * K, dtype=torch.int64)
        loglik = torch.empty(data.n_docs, dtype=torch.float64)
        conv.augment_rows(cells, random, 0, slice(0, data.n_docs), D, w_rows, theta, m, A, n,
                          loglik, split_units, conv.kernel_sums(D))
        total += m.numpy()
        assert int(n.sum()) == int(A.sum()) == int(m.sum()) == int(data.cell_count.sum())
    return total, expected, loglik.numpy(), dense_loglik


@pytest.mark.parametrize("max_elements", [1 << 20, 7])
def test_live_candidate_augmentation_has_the_dense_law(max_elements):
    """The augmentation splits a cell's units over its live candidates and one floor bucket
    whose units are spread over every (f, k) in proportion to D: the same multinomial as over
    all F x K candidates.  With every weight within ten floors the bucket takes a large share,
    so a bucket that lost its units, kept them from the live candidates or spread them by the
    wrong weights would move the totals; the chi-square of the (position, kernel) totals
    (conservative for a sum of multinomials) against the dense law, and the log-likelihoods
    against the dense lambda, with chunks of every size (``max_elements`` 7: one cell at a
    time and the bucket's spread one cell at a time)."""
    total, expected, loglik, dense_loglik = _floor_heavy_augmentation(400, max_elements)
    np.testing.assert_allclose(loglik, dense_loglik, rtol=1e-12)
    keep = expected > 0
    assert total[~keep].sum() == 0
    assert stats.chisquare(total[keep], expected[keep]).pvalue > P_MIN


def test_live_candidate_augmentation_check_has_power():
    """The check above fails when the floor bucket's units go to the live candidates only
    (the bucket dropped from the split): its power against a plausible slip."""
    from cpgbn.backends.torch import conv
    original = conv.kernel_sums
    try:
        conv.kernel_sums = lambda D: torch.zeros(D.shape[:2], dtype=torch.float64)
        total, expected, _, _ = _floor_heavy_augmentation(400)
    finally:
        conv.kernel_sums = original
    keep = expected > 0
    assert stats.chisquare(total[keep], expected[keep] * total.sum() / expected.sum()
                           ).pvalue < 1e-6


# ---------------------------------------------------------------------- Geweke
@pytest.mark.slow
@pytest.mark.parametrize("case_name,n_sweeps", [   # seconds on the 2-core machine, in a suite
    pytest.param("binary", 10000, marks=pytest.mark.long),
    pytest.param("counts", 20000, marks=pytest.mark.long),
    pytest.param("split", 10000, marks=pytest.mark.long),
    pytest.param("split_counts", 20000, marks=pytest.mark.long)])
def test_geweke_torch_sweep(case_name, n_sweeps):
    """Four of tests/test_geweke.py's cases: the Bernoulli-Poisson link under a two-layer stack
    with one eta per layer, with 10000 prior draws and sweeps (the torch sweep of a tiny model
    is dominated by per-operation overhead, about 9 ms), cells of ~100 units with the numba
    test's 20000 (the large cells mix slowly: at 10000 sweeps the batch-means standard error
    comes out too small, and in a trial both backends, numba included, exceeded the
    threshold), and the free positional split (``pooling_concentration``) with beta = 0.5
    under three layers and with beta = 5 and cells of 10-30 units (the case that sees the
    tables' law).

    All four are in the long tier (``make test-long``, before a release and after any change
    to the sampler's conditionals: CONTRIBUTING.md): 85-190 s each in a suite, they were
    half of ``make test``'s time (issue 49: ten minutes on two cores).  In ``make test`` the
    PyTorch sampler keeps its draws' own laws in this file (the zero-truncated Poisson past
    the switch at 10, CRT moments at 400 customers, the multinomial of 300 units, the position
    tables' exact posterior, the weights' conditional under both pooling priors in
    tests/test_pooling_concentration.py) and the whole sweep's agreement with the numba
    sampler's in distribution below, whose conditionals the numba Geweke cases test at every
    seed offset (the mutation report: results/mutation)."""
    z = run_geweke(CASES[case_name], n_prior=n_sweeps, n_chain=n_sweeps, seed=11,
                   make_sampler=TorchGibbsSampler)
    assert np.all(np.isfinite(z))
    assert np.max(np.abs(z)) < THRESHOLD, f"Geweke z-scores {np.round(z, 2)}"


# ---------------------------------------------------------------------- agreement with numba
_AGREE_LAYERS = (3,)
_AGREE_V, _AGREE_F = 12, 2


def _agreement_corpus(pooling_concentration=None):
    hyper = Hyperparameters(eta=(0.3,), e0=3.0, f0=3.0,
                            pooling_concentration=pooling_concentration)
    rng = np.random.default_rng(2024)
    g = sample_globals(_AGREE_LAYERS, _AGREE_V, _AGREE_F, hyper, rng)
    g.r = np.full(3, 8.0)
    _, _, _, data = sample_corpus(_AGREE_LAYERS, _AGREE_V, _AGREE_F, np.full(40, 10), hyper,
                                  seed=7, globals_=g)
    return hyper, g, data


def _agreement_stats(D, r, theta1, c1, loglik, D_true, n_tokens):
    """Bounded per-sweep summaries, invariant to relabelling the kernels."""
    K = D_true.shape[2]
    flat, flat_true = D.reshape(-1, K), D_true.reshape(-1, K)
    perm = min(itertools.permutations(range(K)),
               key=lambda p: np.abs(flat[:, list(p)] - flat_true).sum())
    perm = list(perm)  # sample kernel perm[k] plays true kernel k
    usage = theta1.sum(axis=0)
    out = [loglik / n_tokens]
    out += list(np.sort(usage / usage.sum())[::-1])
    out.append(np.mean(c1 / (1 + c1)))
    for k in range(K):
        for idx in np.argsort(flat_true[:, k])[::-1][:2]:  # the two heaviest true entries
            out.append(flat[idx, perm[k]])
        out.append(r[perm[k]] / (1 + r[perm[k]]))
    return np.array(out, dtype=np.float64)


def _agreement_chain(backend, seed, hyper, g, data, n_sweeps, burn):
    init = g.copy()
    n_tokens = int(data.cell_count.sum())
    if backend == "torch":
        sampler = TorchGibbsSampler(data, hyper, seed)
        ts = sampler.on_backend(sampler.initial_state(_AGREE_LAYERS, _AGREE_V, init))
        read = lambda: (ts.globals.D.numpy(), ts.globals.r.numpy(), ts.theta[0].numpy(), ts.c[0].numpy(),  # noqa: E731
                        float(ts.loglik.sum()))
        step = lambda: sampler.sweep(ts)  # noqa: E731
    else:
        sampler = GibbsSampler(data, hyper, seed)
        st = sampler.initial_state(_AGREE_LAYERS, _AGREE_V, init)
        read = lambda: (st.globals.D, st.globals.r, st.theta[0], st.c[0],  # noqa: E731
                        float(st.loglik.sum()))
        step = lambda: sampler.sweep(st)  # noqa: E731
    rows = []
    for i in range(n_sweeps):
        step()
        if i >= burn:
            rows.append(_agreement_stats(*read(), g.D, n_tokens))
    return np.array(rows)


def _welch_z(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(mean a - mean b) / sqrt(var a / n_a + var b / n_b), column by column."""
    se2 = a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b)
    return (a.mean(axis=0) - b.mean(axis=0)) / np.sqrt(se2)


@pytest.mark.slow
@pytest.mark.parametrize("pooling_concentration", [None, 1.5])
def test_agrees_with_numba_in_distribution(pooling_concentration):
    """Both backends give the same law of the chain, sweep by sweep, with the tied pooling
    prior and with a free positional split (``pooling_concentration`` = 1.5).

    Data: 40 documents of 10 columns (observed counts), V = 12, F = 2, K = 3, drawn from the
    model.  Each backend runs 16 independent chains (seeds 1..16) of 150 sweeps from the same
    start (the true globals, then each sampler's initial_state).  Statistics per sweep:
    log-likelihood per token, the sorted kernel shares of theta^(1), the mean of c/(1+c), and,
    after matching the kernels to the true ones (the permutation minimising the L1 distance of
    D), the two heaviest true entries of each kernel and r/(1+r).

    Since both chains start from the same distribution, a correct backend has the same law at
    every sweep, converged or not; so each chain's mean over sweeps 50..150 is one
    independent replicate, and autocorrelation within a chain (slow moves of D between chains'
    local modes are visible here) needs no modelling.  Two-sample statistic per summary: Welch
    z = (mean_torch - mean_numba) / sqrt(s_torch^2 / 16 + s_numba^2 / 16) over the 16 + 16
    chain means, which must be below the Geweke threshold 4.5 (about 30 degrees of freedom:
    p < 1e-4 per summary, family-wise < 2e-3 for the 14 summaries).
    """
    hyper, g, data = _agreement_corpus(pooling_concentration)
    n_sweeps, burn, seeds = 150, 50, range(1, 17)
    chain_means = {backend: np.array([
        _agreement_chain(backend, seed, hyper, g, data, n_sweeps, burn).mean(axis=0)
        for seed in seeds]) for backend in ("torch", "numba")}
    z = _welch_z(chain_means["torch"], chain_means["numba"])
    assert np.all(np.isfinite(z))
    assert np.max(np.abs(z)) < THRESHOLD, f"torch vs numba z-scores {np.round(z, 2)}"


# ---------------------------------------------------------------------- API, reproducibility
def _arrays(state: GibbsState):
    g = state.globals
    fields = [as_dense(f) for f in (state.w, state.m) if f is not None]
    return [g.D, g.r, *g.phi, *fields, state.A, state.loglik, *state.theta, *state.c]


def test_reproducible_for_a_seed_on_cpu():
    hyper, _, data = _small_corpus(binary=True)
    states = []
    for seed in (5, 5, 6):
        sampler = TorchGibbsSampler(data, hyper, seed, device="cpu")
        state = sampler.initial_state((3, 2), 10)
        for _ in range(4):
            sampler.sweep(state)
        sampler.draw_weights(state)
        states.append(state)
    for a, b in zip(_arrays(states[0]), _arrays(states[1])):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(_arrays(states[0]), _arrays(states[2])))


def test_run_matches_sweeps_and_resumes_exactly():
    """run() equals sweep by sweep, and a run continued with its collector equals one run."""
    hyper, _, data = _small_corpus()
    layers = (3, 2)
    sampler = TorchGibbsSampler(data, hyper, 9)
    whole = sampler.initial_state(layers, 10)
    result = sampler.run(whole, 6, 2)

    by_hand = sampler.initial_state(layers, 10)
    for _ in range(6):
        sampler.sweep(by_hand)
    for a, b in zip(_arrays(whole), _arrays(by_hand)):
        np.testing.assert_array_equal(a, b)

    from cpgbn.inference.driver import Collector
    part = sampler.initial_state(layers, 10)
    collector = Collector.empty(part, True)
    seen = []
    sampler.run(part, 3, 2, collector=collector, on_sweep=lambda st, co: seen.append(st.sweep))
    assert seen == [1, 2, 3] and part.sweep == 3
    resumed = TorchGibbsSampler(data, hyper, 9).run(part, 6, 2, collector=collector)
    for a, b in zip(_arrays(whole), _arrays(part)):
        np.testing.assert_array_equal(a, b)
    assert resumed.n_collected == result.n_collected == 4
    np.testing.assert_allclose(resumed.theta_mean[1], result.theta_mean[1])
    np.testing.assert_allclose(resumed.globals_mean.D, result.globals_mean.D)
    assert result.loglik == resumed.loglik
    assert len(result.seconds) == 6 and result.theta_mean[0].shape == (12, 3)


@pytest.mark.parametrize("binary", [False, True])
def test_count_invariants_with_small_chunks(binary):
    """Tiny max_elements (every chunk loop runs many times): m, A and n stay consistent, the
    kernels stay on the simplex (up to the floor), and fixed globals stay fixed."""
    hyper, g, data = _small_corpus(binary=binary, seed=4)
    sampler = TorchGibbsSampler(data, hyper, 2, max_elements=7)
    sampler.keep_weights = True   # the pass below reads w
    ts = sampler.on_backend(sampler.initial_state((3, 2), 10))
    for _ in range(3):
        sampler.sweep(ts)
    assert isinstance(ts.m, DeviceField) and isinstance(ts.w, DeviceField)
    m, A = ts.m.toarray().numpy(), ts.A.numpy()
    per_doc = np.add.reduceat(m, data.doc_positions[:-1], axis=0)
    np.testing.assert_array_equal(per_doc, A)
    if binary:
        assert m.sum() >= data.n_cells
    else:
        assert m.sum() == data.cell_count.sum()
    assert ts.w.dtype == torch.float32 and float(ts.w.toarray().min()) >= FLOOR
    np.testing.assert_allclose(ts.globals.D.double().sum(dim=(0, 1)).numpy(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(ts.globals.phi[0].sum(dim=0).numpy(), 1.0)
    assert all(torch.isfinite(t).all() for t in ts.theta) and torch.isfinite(ts.loglik).all()
    # the augmentation counts are the kernel counts the D draw sees
    counts, _ = sampler.backend.draw_first_layer(
        ts, prior_shape=sampler._first_layer_shape(ts), stream=99, table_stream=-1,
        draw_w=False, with_counts=True)
    assert int(counts.sum()) == int(ts.m.value.sum())

    fixed = TorchGibbsSampler(data, hyper, 2, learn_globals=False)
    state = fixed.initial_state((3, 2), 10, g.copy())
    fixed.sweep(state)
    np.testing.assert_array_equal(state.globals.D, g.D)
    np.testing.assert_array_equal(state.globals.r, g.r)


# the GPU's run where one exists (benchmarks/gpu_session.sh): are its float sums as ordered?
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("beta", [None, 0.5])
def test_shards_swept_apart_draw_what_the_whole_corpus_draws(beta, device):
    """The streams are keyed by global blocks of documents: with the globals fixed, a shard
    that starts at a block (first_doc) draws every local variable of one sweep as the whole
    corpus does (blocks of 32 here, so that a small corpus has several; tiny max_elements,
    so that the memory chunks nest inside the blocks); numbered from 0 it draws others."""
    from cpgbn.layers.batches import subset_cells
    layers, block = (4, 3, 2), 32
    hyper = Hyperparameters(eta=(0.5,) * 3, e0=2.0, f0=2.0, pooling_concentration=beta)
    g, _, _, data = sample_corpus(layers, 10, 3, np.arange(100) % 9 + 3, hyper, seed=3)
    split = block   # the second part starts at block 1 and holds blocks 1-3

    def one_sweep(part, first_doc):
        sampler = TorchGibbsSampler(part, hyper, 11, learn_globals=False, max_elements=50,
                                    first_doc=first_doc, doc_block=block, device=device)
        sampler.keep_weights = True   # w compared too
        return sampler.sweep(sampler.initial_state(layers, 10, g.copy()))

    whole = one_sweep(data, 0)
    positions = np.asarray(data.doc_positions)
    for first_doc, docs in [(0, np.arange(split)), (split, np.arange(split, data.n_docs))]:
        half = one_sweep(subset_cells(data, docs), first_doc)
        rows = np.arange(positions[docs[0]], positions[docs[-1] + 1])
        for name in ("w", "m"):
            np.testing.assert_array_equal(as_dense(getattr(half, name)),
                                          as_dense(getattr(whole, name))[rows])
        for name in ("A", "loglik"):
            np.testing.assert_array_equal(getattr(half, name), getattr(whole, name)[docs])
        for t in range(3):
            np.testing.assert_array_equal(half.theta[t], whole.theta[t][docs])
            np.testing.assert_array_equal(half.c[t], whole.c[t][docs])
    unaligned = one_sweep(subset_cells(data, np.arange(split, data.n_docs)), 0)
    assert not np.array_equal(unaligned.theta[0], whole.theta[0][split:])
    with pytest.raises(CPGBNInputError, match="multiple of 32"):
        TorchGibbsSampler(data, hyper, 0, first_doc=16, doc_block=block)
    with pytest.raises(CPGBNInputError, match="doc_block"):
        TorchGibbsSampler(data, hyper, 0, doc_block=48)


@pytest.mark.parametrize("device", DEVICES)
def test_segment_sums_add_in_index_adds_order(device):
    """theta^(1), the free split's normalisers and the log-likelihood are summed per document
    by segment_reduce (a GPU's index_add_ adds floats atomically, in an order that may change
    from run to run): on the CPU the same bits as index_add_ (so chains did not change), on a
    GPU the same bits on every call; zero-length segments and nothing at all included."""
    from cpgbn.backends.torch.conv import segment_sums, segment_sums_after
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 400, (60,), generator=gen)
    lengths[[0, 7, 59]] = 0
    n = int(lengths.sum())
    values = torch.rand((n, 5), generator=gen, dtype=torch.float64) * torch.exp(
        20 * torch.randn((n, 5), generator=gen, dtype=torch.float64))
    segment = torch.repeat_interleave(torch.arange(60), lengths)
    first = -torch.rand(60, generator=gen, dtype=torch.float64) * 1e3
    on = {name: x.to(device) for name, x in
          dict(values=values, lengths=lengths, segment=segment, first=first).items()}
    sums = segment_sums(on["values"], on["lengths"])
    after = segment_sums_after(on["first"], on["values"][:, 0].contiguous(), on["segment"],
                               on["lengths"])
    if device == "cpu":
        assert torch.equal(sums, torch.zeros(60, 5, dtype=torch.float64).index_add_(
            0, segment, values))
        assert torch.equal(after, first.clone().index_add_(0, segment, values[:, 0]))
    else:
        np.testing.assert_allclose(sums.cpu(), torch.zeros(60, 5, dtype=torch.float64)
                                   .index_add_(0, segment, values), rtol=1e-12)
        for _ in range(3):
            assert torch.equal(segment_sums(on["values"], on["lengths"]), sums)
            assert torch.equal(segment_sums_after(on["first"], on["values"][:, 0].contiguous(),
                                                  on["segment"], on["lengths"]), after)
    none = torch.zeros(0, dtype=torch.float64, device=device)
    assert segment_sums(none.reshape(0, 3), on["lengths"][:2]).shape == (2, 3)
    assert segment_sums_after(none, none, none.long(), none.long()).numel() == 0


def test_fixed_count_mode_runs():
    from cpgbn.layers.cells import from_token_sequences
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 10, size=60)
    offsets = np.array([0, 5, 20, 21, 60])
    data = from_token_sequences(tokens, offsets, 3, token_count=2)
    hyper = Hyperparameters(eta=(0.1,))
    sampler = TorchGibbsSampler(data, hyper, 0)
    state = sampler.initial_state((4,), 10)
    result = sampler.run(state, 3, 1)
    assert as_dense(state.m).sum() == 2 * len(tokens) and state.m.dtype == np.int32
    assert np.all(np.isfinite(result.loglik))


def test_cuda_request_without_cuda_is_a_clear_error():
    hyper, _, data = _small_corpus()
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: the error path cannot be exercised")
    with pytest.raises(CPGBNInputError, match="CUDA is not available"):
        TorchGibbsSampler(data, hyper, 0, device="cuda")
    with pytest.raises(CPGBNInputError, match="device"):
        TorchGibbsSampler(data, hyper, 0, device="tpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_sweep_keeps_invariants():
    hyper, _, data = _small_corpus()
    sampler = TorchGibbsSampler(data, hyper, 0, device="cuda")
    state = sampler.initial_state((3, 2), 10)
    sampler.run(state, 5, 2)
    assert as_dense(state.m).sum() == data.cell_count.sum()
    assert isinstance(sampler.on_backend(state).m, DeviceField)


# ---------------------------------------------------------------------- pooling-layer tables
def _pooled_shape_draws(m, use_positions, n_chains=3000, n_steps=100):
    """tests/test_pooling_crt.py with the torch tables: many independent chains side by side
    (one document each), each run n_steps from a = 1; the final states are independent draws
    from the chain's law after n_steps (far past this scalar chain's mixing time)."""
    from cpgbn.layers.cells import from_cells
    from test_pooling_crt import ALPHA0, Q, S
    data = from_cells(np.arange(n_chains + 1), np.zeros(n_chains, dtype=np.int32),
                      np.zeros(n_chains, dtype=np.int32), np.full(n_chains, S), 1,
                      cell_count=np.ones(n_chains, dtype=np.int32))
    sampler = TorchGibbsSampler(data, Hyperparameters(eta=(0.1,)), 0)
    counts = torch.tensor(np.tile(m, n_chains).reshape(-1, 1), dtype=torch.int64)
    a = torch.ones((n_chains, 1), dtype=torch.float64)
    for step in range(n_steps):
        sampler.backend.random.reseed(step)
        if use_positions:
            tables = sampler.backend.position_tables(counts, a)
        else:
            tables = sampler.backend.random.crt(counts.reshape(n_chains, S).sum(dim=1, keepdim=True), a)
        a = sampler.backend.random.gamma(ALPHA0 + tables.to(torch.float64)) / (1.0 + Q)
    return a[:, 0].numpy()


@pytest.mark.parametrize("m", [np.array([12, 0, 0, 0, 0, 0, 0, 0]),
                               np.array([2, 1, 2, 1, 2, 1, 2, 1])])
def test_position_tables_sample_the_exact_posterior(m):
    from test_pooling_crt import exact_cdf
    assert stats.kstest(_pooled_shape_draws(m, True), exact_cdf(m)).pvalue > 1e-3


def test_summed_crt_shortcut_is_detectably_wrong():
    """The same check has power: CRT(sum_s m_s, a) misses the exact posterior."""
    from test_pooling_crt import exact_cdf
    m = np.array([12, 0, 0, 0, 0, 0, 0, 0])
    assert stats.kstest(_pooled_shape_draws(m, False), exact_cdf(m)).pvalue < 1e-6


def test_estimator_with_the_torch_backend():
    from cpgbn import CPGBN, PGBN
    from helpers import random_texts
    texts = random_texts(40, seed=4)
    model = CPGBN(layers=(5, 2), vocab_size=30, n_iter=6, burn_in=3, random_state=0, device="cpu")
    features = model.fit_transform(texts)
    assert features.shape == (40, 5) and np.all(np.isfinite(features)) and np.all(features >= 0)
    again = CPGBN(layers=(5, 2), vocab_size=30, n_iter=6, burn_in=3, random_state=0, device="cpu")
    np.testing.assert_array_equal(again.fit(texts).globals_.D, model.globals_.D)
    assert np.all(np.isfinite(model.transform(texts[:5])))
    assert PGBN(layers=(4,), vocab_size=30, n_iter=4, burn_in=2, device="cpu").fit(texts).globals_.D.shape == (30, 1, 4)
    with pytest.raises(CPGBNInputError, match="device"):
        CPGBN(device="tpu").fit(texts)
