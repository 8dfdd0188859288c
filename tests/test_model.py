"""The CPGBN estimator on small synthetic text: validation, determinism, persistence,
scikit-learn integration, shapes, phrases and both observation models."""
from __future__ import annotations

import hashlib
import json
import os

import numba
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC

import cpgbn.io
from cpgbn import CPGBN, CPGBNInputError, ModelFormatError
from cpgbn.text import OOV_TOKEN
from helpers import phrase_corpus, random_texts

TEXTS = random_texts(60, seed=0)
NEW_TEXTS = random_texts(12, seed=1)
SMALL = dict(vocab_size=30, n_iter=8, burn_in=4, random_state=0, n_threads=1)


def small(**overrides) -> CPGBN:
    return CPGBN(**{"layers": (4,), **SMALL, **overrides})


@pytest.fixture(scope="module")
def deep_model() -> CPGBN:
    """A fitted two-layer model shared by the read-only tests."""
    return small(layers=(6, 3), random_state=5).fit(TEXTS)


def assert_globals_equal(a, b):
    np.testing.assert_array_equal(a.D, b.D)
    assert len(a.phi) == len(b.phi)
    for pa, pb in zip(a.phi, b.phi):
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.r, b.r)


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize("params,name", [
    (dict(layers=()), "layers"),
    (dict(layers=(0,)), "layer"),
    (dict(layers=(4, 0)), "layer"),
    (dict(layers="4"), "layer"),
    (dict(vocab_size=1), "vocab_size"),
    (dict(n_iter=0), "n_iter"),
    (dict(n_iter=True), "n_iter"),
    (dict(n_iter=5, burn_in=5), "burn_in"),
    (dict(n_iter=5, burn_in=9), "burn_in"),
    (dict(burn_in=-1), "burn_in"),
    (dict(transform_iter=4, transform_burn_in=4), "transform_burn_in"),
    (dict(eta=-1), "eta"),
    (dict(eta=0.0), "eta"),
    (dict(eta=float("inf")), "eta"),
    (dict(eta=(0.1, 0.1)), "eta"),  # one per layer, but there is one layer
    (dict(e0=0), "e0"),
    (dict(f0=-2.0), "f0"),
    (dict(token_count=0), "token_count"),
    (dict(token_count="x"), "token_count"),
    (dict(token_count=2.5), "token_count"),
    (dict(feature_normalization="x"), "feature_normalization"),
    (dict(filter_width=0), "filter_width"),
    (dict(n_threads=0), "n_threads"),
    (dict(random_state=-1), "random_state"),
    (dict(pooling_concentration=0), "pooling_concentration"),
    (dict(pooling_concentration=-0.5), "pooling_concentration"),
    (dict(pooling_concentration=float("inf")), "pooling_concentration"),
    (dict(pooling_concentration="1"), "pooling_concentration"),
    (dict(pooling_concentration=True), "pooling_concentration"),
])
def test_bad_parameter_names_itself(params, name):
    model = small(**params)
    with pytest.raises(CPGBNInputError, match=name):
        model.fit(TEXTS)
    assert not hasattr(model, "globals_")


def test_bad_input_data():
    with pytest.raises(CPGBNInputError, match="empty corpus"):
        small().fit([])
    with pytest.raises(CPGBNInputError, match="training document 2 .line 2 .* has no tokens"):
        small().fit(["w01 w02 w03", "   ", "w04 w05"])
    with pytest.raises(CPGBNInputError, match="sequence of document strings"):
        small().fit("one string is not a corpus")
    with pytest.raises(CPGBNInputError, match="document 3 is NoneType, not str"):
        small().fit(["w01 w02", "w03 w04", None])
    with pytest.raises(CPGBNInputError, match="document 1 is bytes, not str"):
        small().fit([b"w01 w02"])
    with pytest.raises(NotFittedError):
        small().transform(TEXTS)


def test_column_objects_are_accepted():
    # what a pandas column offers: no Sequence registration, but tolist()
    class Column:
        def __init__(self, values):
            self.values = values

        def tolist(self):
            return list(self.values)

    a = small(random_state=1).fit_transform(Column(TEXTS))
    b = small(random_state=1).fit_transform(np.array(TEXTS))
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- determinism

def test_same_seed_same_model_and_features():
    a = small(layers=(4, 2), random_state=3).fit(TEXTS)
    b = small(layers=(4, 2), random_state=3).fit(TEXTS)
    assert_globals_equal(a.globals_, b.globals_)
    np.testing.assert_array_equal(a.train_features_, b.train_features_)
    np.testing.assert_array_equal(a.loglik_trace_, b.loglik_trace_)
    np.testing.assert_array_equal(a.transform(NEW_TEXTS), b.transform(NEW_TEXTS))

    c = small(layers=(4, 2), random_state=4).fit(TEXTS)
    assert not np.array_equal(a.globals_.D, c.globals_.D)
    assert not np.array_equal(a.transform(NEW_TEXTS), c.transform(NEW_TEXTS))


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs at least 2 numba threads")
@pytest.mark.parametrize("pooling_concentration", [None, 1.5])
def test_thread_count_does_not_change_results(pooling_concentration):
    before = numba.get_num_threads()
    one = small(layers=(4, 2), random_state=7, n_threads=1,
                pooling_concentration=pooling_concentration).fit(TEXTS)
    assert numba.get_num_threads() == before  # restored after fit
    two = small(layers=(4, 2), random_state=7, n_threads=2,
                pooling_concentration=pooling_concentration).fit(TEXTS)
    assert numba.get_num_threads() == before
    assert_globals_equal(one.globals_, two.globals_)
    np.testing.assert_array_equal(one.train_features_, two.train_features_)
    np.testing.assert_array_equal(one.transform(NEW_TEXTS), two.transform(NEW_TEXTS))


# ----------------------------------------------------------------------------- persistence

def test_save_load_round_trip(tmp_path, deep_model):
    deep_model.save(tmp_path / "model")
    loaded = CPGBN.load(tmp_path / "model")
    assert loaded.get_params() == deep_model.get_params()
    assert loaded.vocabulary_ == deep_model.vocabulary_
    assert loaded.layers_ == deep_model.layers_ == (6, 3)
    assert_globals_equal(loaded.globals_, deep_model.globals_)
    np.testing.assert_array_equal(loaded.loglik_trace_, deep_model.loglik_trace_)
    np.testing.assert_array_equal(loaded.kernel_usage(), deep_model.kernel_usage())
    for k in range(6):
        assert loaded.columns(k, 5) == deep_model.columns(k, 5)
        assert loaded.phrases(k) == deep_model.phrases(k)
    np.testing.assert_array_equal(loaded.transform(NEW_TEXTS), deep_model.transform(NEW_TEXTS))
    np.testing.assert_array_equal(loaded.transform(NEW_TEXTS, all_layers=True),
                                  deep_model.transform(NEW_TEXTS, all_layers=True))
    assert loaded.log_likelihood(NEW_TEXTS) == deep_model.log_likelihood(NEW_TEXTS)


def test_integer_layers_round_trip(tmp_path):
    # layers=4 is accepted for layers=(4,); the saved model must load back.
    model = small(layers=4).fit(TEXTS)
    model.save(tmp_path / "model")
    loaded = CPGBN.load(tmp_path / "model")
    assert loaded.get_params()["layers"] == 4
    np.testing.assert_array_equal(loaded.transform(NEW_TEXTS), model.transform(NEW_TEXTS))


def test_save_twice_replaces_atomically(tmp_path):
    target = tmp_path / "model"
    first = small(random_state=1).fit(TEXTS)
    second = small(random_state=2).fit(TEXTS)
    first.save(target)
    first.save(target)  # same model again: fine
    second.save(target)  # another model: replaces the first
    loaded = CPGBN.load(target)
    assert loaded.seed_ == 2
    np.testing.assert_array_equal(loaded.globals_.D, second.globals_.D)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temp dirs left
    assert sorted(p.name for p in target.iterdir()) == ["arrays.npz", "model.json", "timings.json"]


def test_two_fits_with_one_seed_save_the_same_model_files(tmp_path):
    # the wall-clock times (sweeps, the mixing diagnostic) are saved apart, in timings.json
    for name in ("a", "b"):
        small(random_state=3).fit(TEXTS).save(tmp_path / name)
    for name in ("model.json", "arrays.npz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    loaded = CPGBN.load(tmp_path / "a")
    assert len(loaded.sweep_seconds_) == loaded.n_iter and (loaded.sweep_seconds_ > 0).all()
    assert len(loaded.mixing_.seconds) == len(loaded.mixing_.moved)


def test_saved_arrays_hold_no_objects(tmp_path, deep_model):
    deep_model.save(tmp_path / "model")
    with np.load(tmp_path / "model" / "arrays.npz", allow_pickle=False) as npz:
        assert set(npz.files) == {"D", "r", "kernel_usage", "phi_2", "mixing_moved",
                                  "mixing_switched", "mixing_features", "kernel_windows_",
                                  "kernel_window_counts_", "kernel_window_shares_"}
        for name in npz.files:
            assert npz[name].dtype.kind in "fiu", (name, npz[name].dtype)
    meta = json.loads((tmp_path / "model" / "model.json").read_text(encoding="utf-8"))
    assert meta["format"] == "cpgbn-model" and meta["format_version"] == cpgbn.io.FORMAT_VERSION
    source = open(cpgbn.io.__file__, encoding="utf-8").read()
    assert "import pickle" not in source and "allow_pickle=True" not in source


def test_pickled_object_array_is_refused_not_executed(tmp_path, deep_model):
    # An attacker-controlled arrays.npz (with a matching checksum) holding a pickled object
    # array: loading must refuse it without unpickling, i.e. without running its payload.
    target = tmp_path / "model"
    deep_model.save(target)
    sentinel = tmp_path / "payload-ran"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(sentinel),))

    with np.load(target / "arrays.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["r"] = np.array([Payload() for _ in arrays["r"]], dtype=object)
    np.savez(target / "arrays.npz", **arrays)
    meta = json.loads((target / "model.json").read_text(encoding="utf-8"))
    meta["arrays_sha256"] = hashlib.sha256((target / "arrays.npz").read_bytes()).hexdigest()
    (target / "model.json").write_text(json.dumps(meta), encoding="utf-8")

    with pytest.raises(ModelFormatError, match="[Oo]bject arrays"):
        CPGBN.load(target)
    assert not sentinel.exists()


# ----------------------------------------------------------------------------- scikit-learn

def test_pipeline_with_svm_separates_phrase_classes():
    train, y_train = phrase_corpus(80, seed=0)
    test, y_test = phrase_corpus(40, seed=1)
    pipe = Pipeline([("cpgbn", small(layers=(6,), vocab_size=60, n_iter=20, burn_in=10)),
                     ("svm", SVC())])
    accuracy = pipe.fit(train, y_train).score(test, y_test)
    assert accuracy >= 0.9


def test_clone_and_get_params():
    model = CPGBN(layers=(6, 3), filter_width=2, vocab_size=50, token_count="bernoulli-poisson",
                  eta=(0.1, 0.2), e0=0.5, f0=2.0, sample_r=False, pooling_concentration=2.0,
                  n_iter=9, burn_in=3,
                  transform_iter=5, transform_burn_in=2, feature_normalization="none",
                  random_state=11, n_threads=1)
    params = model.get_params()
    copy = clone(model)
    assert copy is not model and copy.get_params() == params
    assert CPGBN(**params).get_params() == params
    assert CPGBN().set_params(**params).get_params() == params
    fitted = clone(model).fit(TEXTS)
    assert not hasattr(copy, "globals_")  # clone is unfitted
    assert clone(fitted).get_params() == params and not hasattr(clone(fitted), "globals_")


# ----------------------------------------------------------------------------- outputs

def test_shapes_and_likelihood(deep_model):
    x = small(layers=(4,)).fit_transform(TEXTS)
    assert x.shape == (len(TEXTS), 4)
    assert np.isfinite(x).all() and (x >= 0).all()

    x1 = deep_model.transform(NEW_TEXTS)
    x_all = deep_model.transform(NEW_TEXTS, all_layers=True)
    assert x1.shape == (len(NEW_TEXTS), 6)
    assert x_all.shape == (len(NEW_TEXTS), 9)
    np.testing.assert_array_equal(x_all[:, :6], x1)  # the same chain; theta^(1) comes first
    assert deep_model.train_features_.shape == (len(TEXTS), 6)
    assert deep_model.globals_.D.shape == (len(deep_model.vocabulary_), 3, 6)
    assert deep_model.globals_.phi[0].shape == (6, 3)
    np.testing.assert_allclose(deep_model.globals_.phi[0].sum(axis=0), 1.0, rtol=1e-6)
    np.testing.assert_allclose(deep_model.globals_.D.sum(axis=(0, 1)), 1.0, rtol=1e-4)

    assert np.isfinite(deep_model.log_likelihood())
    assert np.isfinite(deep_model.log_likelihood(NEW_TEXTS))
    assert len(deep_model.loglik_trace_) == len(deep_model.sweep_seconds_) == SMALL["n_iter"]


def test_feature_normalization_divides_by_length():
    texts = ["w01 w02 w03 w04", "w05 w06 w07 w08 w09 w10 w11 w12", "w01 w05 w09"]
    by_length = small(feature_normalization="length").fit(TEXTS).transform(texts)
    raw = small(feature_normalization="none").fit(TEXTS).transform(texts)
    np.testing.assert_allclose(raw / np.array([4, 8, 3])[:, None], by_length, rtol=1e-12)


def test_more_sweeps_do_not_lower_the_fit():
    trace = small(n_iter=24, burn_in=12).fit(TEXTS).loglik_trace_
    assert np.isfinite(trace).all()
    assert trace[-len(trace) // 4:].mean() > trace[:2].mean()


def test_phrases(deep_model):
    F, V = 3, len(deep_model.vocabulary_)
    columns = deep_model.columns(0, top_n=4)
    assert len(columns) == F
    for column in columns:
        assert len(column) == 4
        probs = [p for _, p in column]
        assert probs == sorted(probs, reverse=True)
        assert all(0.0 <= p <= 1.0 for p in probs)
        assert all(isinstance(word, str) for word, _ in column)

    # Every word of a column, <unk> included: the probabilities are the whole column.
    for column in deep_model.columns(1, top_n=V, hide_unknown=False):
        assert len(column) == V and OOV_TOKEN in [w for w, _ in column]
        assert sum(p for _, p in column) == pytest.approx(1.0, abs=1e-6)
    for column in deep_model.columns(1, top_n=V):  # hide_unknown=True by default
        assert len(column) == V - 1 and OOV_TOKEN not in [w for w, _ in column]

    for bad in (6, -1, 1.5, "0"):
        with pytest.raises(CPGBNInputError, match="kernel"):
            deep_model.columns(bad)
    with pytest.raises(CPGBNInputError, match="top_n"):
        deep_model.columns(0, top_n=0)


def test_a_kernels_phrases_are_what_topics_names_it(deep_model):
    """``phrases(k)`` is the recorded windows, the first of them the kernel's name in every
    view; a model without the record gives its best phrases under D_k."""
    from copy import copy

    from cpgbn.explain import kernel_table
    rows = kernel_table(deep_model)
    for k in range(6):
        phrases = deep_model.phrases(k, top_n=3)
        assert phrases == rows[k].corpus_phrases[:3]
        if phrases:
            assert " ".join(phrases[0].words) == rows[k].name
            assert all(p.count >= 1 for p in phrases)
    old = copy(deep_model)
    old.kernel_windows_ = None   # as a model saved before the record
    best = old.phrases(0, top_n=2)
    assert len(best) == 2 and all(p.count is None for p in best)
    assert best[0].text == kernel_table(old)[0].name
    for bad in (6, -1, 1.5):
        with pytest.raises(CPGBNInputError, match="kernel"):
            deep_model.phrases(bad)


@pytest.mark.parametrize("token_count", ["bernoulli-poisson", 1, 5])
def test_token_count_modes(token_count):
    model = small(token_count=token_count).fit(TEXTS)
    for x in (model.train_features_, model.transform(NEW_TEXTS)):
        assert x.shape[1] == 4
        assert np.isfinite(x).all() and (x >= 0).all() and x.sum() > 0
    assert np.isfinite(model.log_likelihood())


def test_transform_runs_fifty_sweeps_by_default_and_the_protocols_their_own():
    """transform_iter=None: min(n_iter, TRANSFORM_SWEEPS) sweeps and the fit's share of
    burn-in (results/transform_sweeps.md); evaluate's protocols infer test documents with
    their own sweeps (the authors': 200 with 150 of burn-in)."""
    from cpgbn.evaluate.protocols import PROTOCOLS, _make_model
    from cpgbn.settings import TRANSFORM_SWEEPS

    def sweeps(**params):
        settings = CPGBN(**params)._run_settings()
        return settings["transform_iter"], settings["transform_burn_in"]

    assert TRANSFORM_SWEEPS == 50
    assert sweeps() == (50, 37)                                   # 200 and 150 by default
    assert sweeps(n_iter=20, burn_in=15) == (20, 15)              # a short fit: its own
    assert sweeps(transform_iter=40) == (40, 30)
    assert sweeps(transform_iter=40, transform_burn_in=5) == (40, 5)
    proto = PROTOCOLS["authors"]
    model = _make_model("cpgbn", layers=(10,), filter_width=3, vocab_size=100, token_count=800,
                        eta=0.05, n_iter=proto.n_iter, burn_in=proto.burn_in, seed=0,
                        n_threads=1, progress=False)
    assert (model.transform_iter, model.transform_burn_in) == (200, 150)


def test_parameters_are_checked_at_fit_and_again_only_when_they_change(monkeypatch):
    import cpgbn.model
    calls = []
    checked = cpgbn.model.run_settings

    def counting(params, mode):
        calls.append(params["n_threads"])
        return checked(params, mode)
    monkeypatch.setattr(cpgbn.model, "run_settings", counting)
    model = small(random_state=0).fit(TEXTS)
    assert len(calls) == 1   # fit checks every parameter once
    first = model.transform(NEW_TEXTS)
    model.log_likelihood(NEW_TEXTS)
    assert len(calls) == 1   # transform and inference reuse fit's check
    model.set_params(n_threads=2)
    np.testing.assert_array_equal(model.transform(NEW_TEXTS), first)
    assert calls[1:] == [2]   # a changed parameter is checked on the next call, once
    model.transform(NEW_TEXTS)
    assert len(calls) == 2
    model.set_params(n_threads=0)
    with pytest.raises(CPGBNInputError, match="n_threads"):
        model.transform(NEW_TEXTS)   # and a bad one refused then
