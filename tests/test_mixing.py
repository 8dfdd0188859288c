"""The mixing diagnostic (cpgbn.inference.mixing): the per-sweep change shares, the effective
sample size, and what a fitted model records of them."""
import io
import json

import numpy as np
import pytest
from scipy.signal import lfilter

from cpgbn import CPGBN, PGBN
from cpgbn.backends.numba.numba_backend import NumbaBackend
from cpgbn.inference.mixing import (Mixing, assignment_change_counts, change_shares,
                                    dominant_kernels, effective_sample_size)
from cpgbn.layers.cells import from_token_sequences

from helpers import random_texts

FAST = dict(vocab_size=30, n_iter=24, burn_in=12, random_state=0)


# ---------------------------------------------------------------------- the change shares
def test_change_shares_of_a_hand_made_pair_of_states():
    previous = np.array([[3, 0, 1],    # dominant 0
                         [0, 0, 0],    # empty
                         [2, 2, 0],    # a tie: the first kernel, 0
                         [0, 5, 0]])   # dominant 1
    m = np.array([[1, 2, 1],           # 2 units moved from kernel 0 to 1: dominant 1
                  [0, 0, 0],
                  [0, 2, 2],           # 2 units moved 0 -> 2: tie of 1 and 2, dominant 1
                  [0, 4, 1]])          # 1 unit moved, dominant stays 1
    np.testing.assert_array_equal(dominant_kernels(previous), [0, -1, 0, 1])
    np.testing.assert_array_equal(dominant_kernels(m), [1, -1, 1, 1])
    moved, switched = change_shares(previous, m)
    assert moved == pytest.approx((2 + 2 + 1) / 13)  # half of sum |dm| = 5 of 13 units
    assert switched == pytest.approx(2 / 3)  # 3 positions occupied in both, 2 switched
    # units that swap places between the same two counts are invisible: a lower bound
    assert change_shares(m, m) == (0.0, 0.0)


def test_a_varying_total_is_shared_out_of_the_larger_total():
    # under the Bernoulli-Poisson link the units of a position vary from sweep to sweep
    previous = np.array([[0, 0], [4, 0]])
    m = np.array([[0, 3], [4, 1]])  # a newly occupied position does not count as switched
    moved, switched = change_shares(previous, m)
    assert moved == pytest.approx(0.5 * 4 / 8) and switched == 0.0
    assert np.isnan(change_shares(np.zeros((2, 2)), np.zeros((2, 2)))[1])


def _sequence(rng, n_rows=3000, n_kernels=7):
    """Latent counts of consecutive sweeps: sparse, one sweep with counts past int16."""
    arrays = []
    for step in range(4):
        m = rng.poisson(0.6, size=(n_rows, n_kernels)) * rng.integers(0, 3, size=(n_rows, 1))
        if step == 2:
            m[5, 3] = 40_000  # the backends' narrow copy of m must widen, exactly
        arrays.append(m.astype(np.int32))
    return arrays


def _step(backend, m, box):
    sums, box[0] = backend.assignment_changes(m, box[0])
    return sums


def _run_backend(backend, arrays, put=lambda a: a):
    box = [backend.assignment_changes(put(arrays[0]), None)[1]]
    return [_step(backend, put(m), box) for m in arrays[1:]]


def _tiny_data():
    tokens = np.arange(12, dtype=np.int32) % 5
    return from_token_sequences(tokens, np.array([0, 5, 12]), 3, 10)


def _documents_of(n_positions, doc_length=32, filter_width=3):
    """Documents with ``n_positions`` positions in all (the numba backend's stores are per
    document)."""
    n_docs = n_positions // (doc_length - filter_width + 1)
    tokens = np.arange(n_docs * doc_length, dtype=np.int32) % 5
    return from_token_sequences(tokens, np.arange(n_docs + 1) * doc_length, filter_width, 10)


def test_the_numba_kernel_equals_the_numpy_expression():
    arrays = _sequence(np.random.default_rng(0))
    got = _run_backend(NumbaBackend(_documents_of(len(arrays[0])), 0), arrays)
    for previous, m, sums in zip(arrays, arrays[1:], got):
        np.testing.assert_array_equal(sums, assignment_change_counts(previous, m))


def test_the_torch_backend_equals_the_numpy_expression():
    torch = pytest.importorskip("torch")
    from cpgbn.backends.torch.torch_backend import TorchBackend
    arrays = _sequence(np.random.default_rng(1))
    backend = TorchBackend(_tiny_data(), 0, device="cpu", max_elements=1000)  # several chunks
    got = _run_backend(backend, arrays, lambda a: torch.tensor(a, dtype=torch.int64))
    for previous, m, sums in zip(arrays, arrays[1:], got):
        np.testing.assert_array_equal(sums, assignment_change_counts(previous, m))


# ---------------------------------------------------------------------- effective sample size
def _ar1(rng, n, rho):
    """x_t = rho x_{t-1} + e_t, started in its stationary distribution."""
    e = rng.standard_normal(n)
    e[0] /= np.sqrt(1 - rho ** 2)
    return lfilter([1.0], [1.0, -rho], e)


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9, -0.5])
def test_ess_of_an_ar1_series_is_n_1_minus_rho_over_1_plus_rho(rho):
    """Measured (200 series of each rho, n = 2000 and 5000): the estimates' mean is within 2-4%
    of n (1 - rho)/(1 + rho) and one estimate's spread is 4-14% at n = 5000, so the mean of 40
    is off by more than 8% with probability well below 1e-3; a naive n (ESS of independent
    draws) would miss by a factor of 19 at rho = 0.9."""
    n, rng = 5000, np.random.default_rng(int(100 * rho) + 100)
    estimates = np.array([effective_sample_size(_ar1(rng, n, rho)) for _ in range(40)])
    assert np.mean(estimates) == pytest.approx(n * (1 - rho) / (1 + rho), rel=0.08)


def test_ess_is_undefined_for_constant_or_short_series():
    assert np.isnan(effective_sample_size(np.ones(50)))
    assert np.isnan(effective_sample_size([1.0, 2.0, 3.0]))
    assert np.isnan(effective_sample_size([1.0, np.nan, 2.0, 3.0, 1.0]))


# ---------------------------------------------------------------------- a fitted model
@pytest.fixture(scope="module")
def fitted():
    texts = random_texts(50)
    return texts, CPGBN(layers=(8, 4), **FAST).fit(texts)


def test_a_fit_records_its_mixing(fitted):
    texts, model = fitted
    mixing = model.mixing_
    assert isinstance(mixing, Mixing) and mixing.n_collected == 12
    for shares in (mixing.moved, mixing.switched):
        assert shares.shape == (24,) and np.all((shares >= 0) & (shares <= 1))
    assert mixing.feature_sums.shape == (24, 8) and mixing.seconds.shape == (24,)
    # the per-sweep sums of the features average to the sums of the features the fit returns
    np.testing.assert_allclose(mixing.collected(mixing.feature_sums).mean(axis=0),
                               model.train_features_.sum(axis=0), rtol=1e-10)
    ess = mixing.feature_ess()
    assert ess.shape == (8,) and np.all(ess[np.isfinite(ess)] > 0)
    record = json.loads(json.dumps(mixing.as_record()))  # JSON-ready
    assert len(record["moved"]) == 24 and record["n_collected"] == 12


def test_summary_prints_the_mixing(fitted):
    _, model = fitted
    out = io.StringIO()
    model.summary(file=out)
    text = out.getvalue()
    assert "of token units change kernel or position (a lower bound)" in text
    assert "feature ESS" in text and "of 12 averaged sweeps" in text


def test_a_saved_model_keeps_its_mixing_and_an_older_file_loads(fitted, tmp_path):
    _, model = fitted
    model.save(tmp_path / "m")
    loaded = CPGBN.load(tmp_path / "m")
    for name in ("moved", "switched", "feature_sums", "seconds"):
        np.testing.assert_array_equal(getattr(loaded.mixing_, name), getattr(model.mixing_, name))
    assert loaded.mixing_.n_collected == 12

    # a model saved before the diagnostic existed: no mixing arrays, no mixing_n_collected
    from cpgbn.io import FORMAT_VERSION
    import hashlib
    folder = tmp_path / "m"
    with np.load(folder / "arrays.npz") as npz:
        arrays = {k: npz[k] for k in npz.files if not k.startswith("mixing_")}
    np.savez(folder / "arrays.npz", **arrays)
    meta = json.loads((folder / "model.json").read_text())
    del meta["mixing_n_collected"]
    meta["arrays_sha256"] = hashlib.sha256((folder / "arrays.npz").read_bytes()).hexdigest()
    (folder / "model.json").write_text(json.dumps(meta))
    old = CPGBN.load(folder)
    assert old.format_version_ == FORMAT_VERSION and not hasattr(old, "mixing_")
    out = io.StringIO()
    old.summary(file=out)
    assert "feature ESS" not in out.getvalue() and "kernel usage" in out.getvalue()


def test_a_resumed_fit_has_the_mixing_of_an_uninterrupted_one(tmp_path, monkeypatch):
    texts = random_texts(40, seed=1)
    import cpgbn.inference.checkpoint as module
    original = module.save_checkpoint

    class Stop(Exception):
        pass

    def save_then_stop(*args, **kwargs):
        original(*args, **kwargs)
        raise Stop

    with monkeypatch.context() as patch:
        patch.setattr(module, "save_checkpoint", save_then_stop)
        with pytest.raises(Stop):
            CPGBN(layers=(4,), **FAST).fit(texts, checkpoint_dir=tmp_path / "c", checkpoint_every=5)
    resumed = CPGBN(layers=(4,), **FAST).fit(texts, checkpoint_dir=tmp_path / "c", resume=True)
    whole = CPGBN(layers=(4,), **FAST).fit(texts)
    for name in ("moved", "switched", "feature_sums"):
        np.testing.assert_array_equal(getattr(resumed.mixing_, name), getattr(whole.mixing_, name))


def test_the_torch_sampler_and_pgbn_record_mixing_too():
    pytest.importorskip("torch")
    texts = random_texts(30)
    for model in (CPGBN(layers=(6,), device="cpu", **FAST), PGBN(layers=(6, 3), **FAST)):
        mixing = model.fit(texts).mixing_
        assert mixing.moved.shape == (24,) and np.all((mixing.moved >= 0) & (mixing.moved <= 1))
        np.testing.assert_allclose(mixing.collected(mixing.feature_sums).mean(axis=0),
                                   model.train_features_.sum(axis=0), rtol=1e-10)


def test_transform_leaves_the_fitted_mixing_alone(fitted):
    texts, model = fitted
    before = model.mixing_.moved.copy()
    model.transform(texts[:5])
    np.testing.assert_array_equal(model.mixing_.moved, before)
