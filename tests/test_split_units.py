"""The heavy/light split of a cell's units is a multinomial over all its candidates."""
import numpy as np
import pytest
from scipy import stats

from cpgbn.backends.numba.conv import sample_split

REPS = 20000


@pytest.mark.parametrize("n_units,light_scale", [(1, 1.0), (7, 0.3), (200, 1e-3), (200, 0.5), (60, 1.0)])
def test_marginals_and_light_total_match_the_multinomial(n_units, light_scale):
    rng = np.random.default_rng(n_units)
    size = 30
    heavy = rng.random(size) < 0.3
    weights = rng.gamma(0.7, size=size) * np.where(heavy, 1.0, light_scale)
    p = weights / weights.sum()
    counts = sample_split(5, weights, heavy, n_units, REPS)
    assert np.all(counts.sum(axis=1) == n_units)
    # each candidate's count is Binomial(n, p_i): z-test on its mean
    se = np.sqrt(n_units * p * (1 - p) / REPS)
    z = (counts.mean(axis=0) - n_units * p) / np.maximum(se, 1e-12)
    assert np.max(np.abs(z)) < 4.5
    # the light group's total is Binomial(n, p_light): chi-square on its distribution
    light = counts[:, ~heavy].sum(axis=1)
    p_light = p[~heavy].sum()
    values, observed = np.unique(light, return_counts=True)
    expected = stats.binom.pmf(values, n_units, p_light) * REPS
    keep = expected >= 5
    if keep.sum() >= 2:
        obs, exp = observed[keep], expected[keep]
        assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3


def test_all_light_and_all_heavy():
    w = np.array([0.2, 0.5, 0.3])
    for mask in (np.zeros(3, bool), np.ones(3, bool)):
        counts = sample_split(1, w, mask, 50, 5000)
        np.testing.assert_allclose(counts.mean(axis=0), 50 * w, rtol=0.03)


@pytest.mark.parametrize("w_row", [[2e-30, 1e-30, 3e-30, 1e-30, 1e-30],   # heavy and floor mixed
                                   [1e-30] * 5,                            # every candidate at the floor
                                   [0.4, 1e-30, 1.0, 1e-30, 1e-30]])       # floor units are rare
def test_sweep_splits_a_cell_over_heavy_and_floor_candidates_by_weight(w_row):
    """In the sweep, a cell's units go to candidate k with probability w_k d_k / lambda, whether
    w_k is above the floor or at it (the light total comes from the kernels' row sums)."""
    from cpgbn.backends.numba.numba_backend import NumbaBackend
    from cpgbn.inference.state import GibbsState, GlobalParameters
    from cpgbn.layers.cells import from_token_sequences

    # 80,000 units in all, as 2,000 calls of 40 units, in a fifth of the calls: a cell's
    # units are independent draws given w, so the test's power is that of the units' total
    n_kernels, vocab, n_units, reps = 5, 3, 200, 400
    data = from_token_sequences(np.array([1]), np.array([0, 1]), 1, n_units)  # one token, F = 1
    D = np.full((vocab, 1, n_kernels), 1e-3, dtype=np.float32)
    D[1, 0] = [0.5, 0.2, 0.1, 0.4, 0.3]
    w = np.array([w_row], dtype=np.float32)
    p = w[0].astype(np.float64) * D[1, 0].astype(np.float64)
    p /= p.sum()
    totals = np.zeros(n_kernels)
    for r in range(reps):
        # the augmentation alone (w given), through the backend's position stores
        state = GibbsState(GlobalParameters(D, [], np.ones(n_kernels)), w.copy(),
                           np.zeros((1, n_kernels), dtype=np.int32), [w.astype(np.float64)],
                           [np.zeros(1)], np.zeros((1, n_kernels), dtype=np.int32), np.zeros(1))
        NumbaBackend(data, r).draw_first_layer(state, prior_shape=np.ones((1, n_kernels)),
                                               stream=0, table_stream=-1, draw_w=False)
        m = state.m.toarray()
        assert m.sum() == n_units and np.array_equal(state.A, m)
        totals += m[0]
    expected = p * n_units * reps
    assert stats.chisquare(totals, expected).pvalue > 1e-3
