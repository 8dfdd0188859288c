"""TLASGR-MCMC for column-stochastic globals (cpgbn.inference.tlasgr, on numpy and on a backend).

1. The schedule and the preconditioner M (first minibatch initialises it, then an EMA).
2. Every column stays on the simplex after many steps, large steps and empty columns included,
   for a kernel array (V, F, K) in float32 and a Phi in float64.
3. With a vanishing step and counts whose conditional posterior mean is the current value
   ("expected counts"), the update leaves it fixed in expectation (mean over 40,000 draws
   within 5 standard errors); with other counts it moves by the predicted drift (the power
   check), and its covariance is the projected 2 eps / M (diag(phi) - phi phi').
4. The state round-trips through arrays (and an npz file) and a resumed run continues
   exactly; bad input raises CPGBNInputError; on the PyTorch backend's tensors the step computes
   the same update.
"""

import io

import numpy as np
import pytest
import torch

from cpgbn.backends.numba.weights import FLOOR as NUMBA_FLOOR
from cpgbn.errors import CPGBNInputError
from cpgbn.inference.tlasgr import FLOOR, TLASGRSchedule, TLASGRState, tlasgr_step


def _columns(rng, n_rows, n_columns, concentration=1.0):
    return rng.dirichlet(np.full(n_rows, concentration), size=n_columns).T


def _assert_on_simplex(phi, atol):
    columns = phi.reshape(-1, phi.shape[-1]).astype(np.float64)
    assert np.isfinite(columns).all()
    assert (columns >= FLOOR * (1 - 1e-6)).all()
    np.testing.assert_allclose(columns.sum(0), 1.0, rtol=0, atol=atol)


def test_floor_is_the_library_floor():
    assert FLOOR == pytest.approx(float(NUMBA_FLOOR), rel=1e-6)


def test_schedule_values():
    schedule = TLASGRSchedule()
    assert schedule.step_size(1) == pytest.approx(1.0)
    assert schedule.step_size(10) == pytest.approx((30 / 21) ** -0.7)
    assert schedule.forgetting_rate(1) == 1.0
    assert schedule.forgetting_rate(5) == pytest.approx(5 ** -0.9)
    assert TLASGRSchedule(eps0=0.5).step_size(1) == pytest.approx(0.5)
    with pytest.raises(CPGBNInputError, match="eps0"):
        TLASGRSchedule(eps0=0.0)


def test_precision_initialised_by_first_minibatch_then_averaged():
    rng = np.random.default_rng(0)
    phi = _columns(rng, 8, 3)
    counts1 = rng.poisson(3.0, phi.shape).astype(float)
    counts2 = rng.poisson(1.0, phi.shape).astype(float)
    state = TLASGRState.initial(3)
    phi, state = tlasgr_step(phi, counts1, state, rho=5.0, eta=0.1, rng=rng)
    assert state.n_updates == 1
    np.testing.assert_allclose(state.precision, 5.0 * counts1.sum(0))
    phi, state = tlasgr_step(phi, counts2, state, rho=5.0, eta=0.1, rng=rng)
    varrho = 2 ** -0.9
    np.testing.assert_allclose(state.precision, (1 - varrho) * 5.0 * counts1.sum(0)
                               + varrho * 5.0 * counts2.sum(0))
    assert state.n_updates == 2


@pytest.mark.parametrize("eps0", [1.0, 10.0, 1000.0])
def test_columns_stay_on_the_simplex(eps0):
    """Kernels (V, F, K) float32 and Phi float64, 200 minibatches with sparse counts (two
    columns never get a count), rho = 50, including steps far too large to be accurate."""
    rng = np.random.default_rng(1)
    V, F, K = 30, 3, 6
    D = _columns(rng, V * F, K).reshape(V, F, K).astype(np.float32)
    phi = _columns(rng, K, 4)
    schedule = TLASGRSchedule(eps0=eps0)
    state_d, state_phi = TLASGRState.initial(K), TLASGRState.initial(4)
    for _ in range(200):
        counts_d = rng.poisson(0.05, D.shape) * rng.integers(1, 30, D.shape)
        counts_d[..., :2] = 0
        D, state_d = tlasgr_step(D, counts_d, state_d, rho=50.0, eta=0.05, rng=rng,
                                 schedule=schedule)
        phi, state_phi = tlasgr_step(phi, rng.poisson(0.3, phi.shape), state_phi, rho=50.0,
                                     eta=0.05, rng=rng, schedule=schedule)
        assert D.dtype == np.float32 and D.shape == (V, F, K)
        _assert_on_simplex(D, atol=1e-5)
        _assert_on_simplex(phi, atol=1e-12)
    assert state_d.n_updates == 200


def _replicated(rng, n_rows=6, n_copies=40_000):
    """One point phi of the simplex (entries >= 0.05), as n_copies identical columns."""
    phi = 0.05 + 0.7 * rng.dirichlet(np.ones(n_rows))
    return phi, np.repeat(phi[:, None], n_copies, axis=1)


#: Settings of the expectation tests: the conditional posterior is Dir(rho n + eta) with total
#: TOTAL = rho n. + eta n; a step eps0 = 1e-3 over M = rho n. ~ 1000 moves each entry by noise
#: of standard deviation ~ 1.4e-3 sqrt(phi): far from the boundary, so nothing is clipped.
RHO, ETA, TOTAL, EPS0 = 20.0, 0.05, 1000.0, 1e-3


def _expected_counts(phi):
    """Counts whose conditional posterior mean (rho n + eta) / (rho n. + eta n) is phi."""
    return (TOTAL * phi - ETA) / RHO


def _one_step(phi_columns, counts_columns, seed):
    state = TLASGRState.initial(phi_columns.shape[1])
    new, state = tlasgr_step(phi_columns, counts_columns, state, rho=RHO, eta=ETA,
                             rng=np.random.default_rng(seed), schedule=TLASGRSchedule(eps0=EPS0))
    return new, state


def test_expected_counts_leave_the_value_fixed_in_expectation():
    rng = np.random.default_rng(2)
    phi, columns = _replicated(rng)
    counts = np.repeat(_expected_counts(phi)[:, None], columns.shape[1], axis=1)
    new, state = _one_step(columns, counts, seed=3)
    M = RHO * counts[:, 0].sum()
    assert state.precision[0] == pytest.approx(M)
    noise_sd = np.sqrt(2 * EPS0 / M * phi)
    standard_error = noise_sd / np.sqrt(columns.shape[1])
    assert (np.abs(new.mean(1) - phi) < 5 * standard_error).all()
    assert new.min() > 10 * FLOOR  # nothing was clipped


def test_other_counts_move_the_value_by_the_predicted_drift():
    """The power check of the test above: counts of another point phi2 move the mean by
    (eps / M) [(rho n + eta) - (rho n. + eta n) phi], many standard errors away from phi."""
    rng = np.random.default_rng(4)
    phi, columns = _replicated(rng)
    other = 0.05 + 0.7 * rng.dirichlet(np.ones(len(phi)))
    counts = _expected_counts(other)
    new, _ = _one_step(columns, np.repeat(counts[:, None], columns.shape[1], axis=1), seed=5)
    M = RHO * counts.sum()
    drift = (RHO * counts + ETA) - (RHO * counts.sum() + ETA * len(phi)) * phi
    predicted = phi + EPS0 / M * drift
    standard_error = np.sqrt(2 * EPS0 / M * phi) / np.sqrt(columns.shape[1])
    assert (np.abs(new.mean(1) - predicted) < 5 * standard_error).all()
    assert (np.abs(new.mean(1) - phi) > 20 * standard_error).any()


def test_covariance_is_the_projected_multinomial_covariance():
    """xi - (1' xi) phi with xi ~ N(0, s diag(phi)) has covariance s (diag(phi) - phi phi')."""
    rng = np.random.default_rng(6)
    phi, columns = _replicated(rng)
    counts = np.repeat(_expected_counts(phi)[:, None], columns.shape[1], axis=1)
    new, _ = _one_step(columns, counts, seed=7)
    M = RHO * counts[:, 0].sum()
    expected = 2 * EPS0 / M * (np.diag(phi) - np.outer(phi, phi))
    empirical = np.cov(new)
    # entry-wise standard error of a sample covariance ~ sqrt((s_ii s_jj + s_ij^2) / n)
    scale = np.sqrt(np.outer(np.diag(expected), np.diag(expected)) + expected ** 2)
    assert (np.abs(empirical - expected) < 5 * scale / np.sqrt(columns.shape[1])).all()


def test_state_round_trips_and_resumes_exactly(tmp_path):
    rng = np.random.default_rng(8)
    phi = _columns(rng, 10, 4)
    counts = [rng.poisson(2.0, phi.shape) for _ in range(3)]
    state = TLASGRState.initial(4)
    for c in counts[:2]:
        phi, state = tlasgr_step(phi, c, state, rho=3.0, eta=0.1, rng=rng)
    buffer = io.BytesIO()
    np.savez(buffer, **state.to_arrays())
    buffer.seek(0)
    with np.load(buffer) as arrays:
        restored = TLASGRState.from_arrays(arrays)
    assert restored.n_updates == state.n_updates == 2
    np.testing.assert_array_equal(restored.precision, state.precision)
    normal = rng.standard_normal(phi.shape)
    a, sa = tlasgr_step(phi, counts[2], state, rho=3.0, eta=0.1, normal=normal)
    b, sb = tlasgr_step(phi, counts[2], restored, rho=3.0, eta=0.1, normal=normal)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(sa.precision, sb.precision)
    with pytest.raises(CPGBNInputError, match="lack"):
        TLASGRState.from_arrays({"precision": np.zeros(4)})
    with pytest.raises(CPGBNInputError, match="malformed"):
        TLASGRState.from_arrays({"precision": np.zeros((2, 2)), "n_updates": np.array(1)})


def test_seeded_steps_repeat_and_inputs_are_untouched():
    rng = np.random.default_rng(9)
    phi = _columns(rng, 12, 3)
    counts = rng.poisson(2.0, phi.shape)
    before = phi.copy()
    runs = [tlasgr_step(phi, counts, TLASGRState.initial(3), rho=2.0, eta=0.1,
                        rng=np.random.default_rng(11))[0] for _ in range(3)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    np.testing.assert_array_equal(phi, before)


def test_bad_inputs_raise():
    rng = np.random.default_rng(10)
    phi = _columns(rng, 5, 2)
    state = TLASGRState.initial(2)
    ok = dict(rho=1.0, eta=0.1, rng=rng)
    with pytest.raises(CPGBNInputError, match="simplex"):
        tlasgr_step(phi * 2, np.ones_like(phi), state, **ok)
    with pytest.raises(CPGBNInputError, match="non-negative"):
        tlasgr_step(phi, -np.ones_like(phi), state, **ok)
    with pytest.raises(CPGBNInputError, match="shape"):
        tlasgr_step(phi, np.ones((5, 3)), state, **ok)
    with pytest.raises(CPGBNInputError, match="columns"):
        tlasgr_step(phi, np.ones_like(phi), TLASGRState.initial(3), **ok)
    with pytest.raises(CPGBNInputError, match="rho"):
        tlasgr_step(phi, np.ones_like(phi), state, rho=0.0, eta=0.1, rng=rng)
    with pytest.raises(CPGBNInputError, match="exactly one"):
        tlasgr_step(phi, np.ones_like(phi), state, rho=1.0, eta=0.1)


def _torch_backend():
    from cpgbn.backends.torch.torch_backend import TorchBackend
    from cpgbn.layers.cells import from_token_sequences

    data = from_token_sequences(np.array([1, 2, 3]), np.array([0, 3]), 2)
    return TorchBackend(data, 0, device="cpu")


def test_the_step_on_torch_tensors_matches_numpy():
    """The same function on the PyTorch backend's tensors (all columns at once, the backend's
    normals) computes numpy's update, and keeps float32 kernels float32 on the simplex."""
    backend = _torch_backend()
    rng = np.random.default_rng(12)
    V, F, K = 7, 3, 4
    D = _columns(rng, V * F, K).reshape(V, F, K)
    counts = rng.poisson(1.0, D.shape).astype(float)
    normal = rng.standard_normal((V * F, K))
    state = TLASGRState(np.array([5.0, 0.0, 40.0, 2.0]), 3)
    a, sa = tlasgr_step(D, counts, state, rho=4.0, eta=0.05, normal=normal)
    b, sb = tlasgr_step(torch.from_numpy(D), torch.from_numpy(counts), state, rho=4.0,
                        eta=0.05, normal=torch.from_numpy(normal), arrays=backend)
    assert isinstance(b, torch.Tensor)
    np.testing.assert_allclose(b.numpy(), a, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(sb.precision, sa.precision, rtol=1e-14)
    assert sb.n_updates == sa.n_updates == 4
    normals = backend.column_normals(V * F, K, (0, 1, 2))
    c, _ = tlasgr_step(torch.from_numpy(D).float(), torch.from_numpy(counts), state,
                       rho=4.0, eta=0.05, normal=normals, arrays=backend)
    assert c.dtype == torch.float32 and c.shape == (V, F, K)
    _assert_on_simplex(c.numpy(), atol=1e-5)
    with pytest.raises(CPGBNInputError, match="simplex"):
        tlasgr_step(torch.from_numpy(D) * 2, torch.from_numpy(counts), state, rho=4.0,
                    eta=0.05, normal=normals, arrays=backend)


def test_backend_normals_are_a_function_of_the_key():
    """Both backends' TLASGR normals repeat for a key and differ across keys; the numba
    backend's come one block of columns at a time, each block from its own stream."""
    from cpgbn.backends.numba.numba_backend import COLUMN_BLOCK, NumbaBackend

    for backend in (NumbaBackend, _torch_backend()):
        first = backend.column_normals(5, 40, (3, 1, 0, 9))
        again = backend.column_normals(5, 40, (3, 1, 0, 9))
        other = backend.column_normals(5, 40, (3, 2, 0, 9))
        for lo, hi in [(0, COLUMN_BLOCK), (COLUMN_BLOCK, 40)]:
            x, y, z = (np.asarray(f(lo, hi)) for f in (first, again, other))
            assert x.shape == (5, hi - lo) and x.dtype == np.float64
            np.testing.assert_array_equal(x, y)
            assert not np.array_equal(x, z)
    block = NumbaBackend.column_normals(5, 40, (3, 1, 0, 9))
    np.testing.assert_array_equal(
        block(COLUMN_BLOCK, 40),
        np.random.default_rng(np.random.SeedSequence([3, 1, 0, 9, COLUMN_BLOCK]))
        .standard_normal((5, 40 - COLUMN_BLOCK)))


def test_step_in_column_blocks_equals_the_whole_arithmetic():
    """tlasgr_step works COLUMN_BLOCK columns at a time (memory); the result is the arithmetic
    of simplex_langevin_step on all columns at once, to the bit."""
    from cpgbn.inference.tlasgr import COLUMN_BLOCK, TLASGRSchedule, simplex_langevin_step
    rng = np.random.default_rng(4)
    K = 2 * COLUMN_BLOCK + 5
    phi = rng.dirichlet(np.ones(30), size=K).T
    counts = rng.poisson(2.0, size=phi.shape).astype(float)
    normal = rng.standard_normal(phi.shape)
    state = TLASGRState.initial(K)
    new, after = tlasgr_step(phi, counts, state, rho=7.0, eta=0.1, normal=normal)
    schedule = TLASGRSchedule()
    effective = np.maximum(after.precision, 0.1 * phi.shape[0])
    whole = simplex_langevin_step(phi, counts, effective, schedule.step_size(1), rho=7.0,
                                  eta=0.1, normal=normal)
    np.testing.assert_array_equal(new, whole)
