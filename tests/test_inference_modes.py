"""The estimator's minibatch inference modes (``CPGBN(inference="minibatch-gibbs" | "hybrid")``,
:mod:`cpgbn.modes`): fit / transform / save / load, reproducibility, checkpoints and
exact resume, the explain tools on such a model, bad parameters, the missing-torch hint, and
``cpgbn fit --inference hybrid``.  Small synthetic corpora, one thread."""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

import cpgbn.io
from cpgbn import CPGBN, PGBN, CPGBNInputError
from cpgbn.modes import LOSS_NAMES, steps_per_epoch
from helpers import interrupted_at_step, random_labeled, random_texts, write_tsv

torch = pytest.importorskip("torch")

TEXTS = random_texts(40, seed=0)
NEW = random_texts(8, seed=1)
FAST = dict(layers=(4, 2), vocab_size=30, n_iter=6, burn_in=3, random_state=0, n_threads=1,
            batch_size=16, n_epochs=2, learning_rate=0.01)
MODES = ("minibatch-gibbs", "hybrid")


@pytest.fixture(autouse=True)
def _one_thread(numba_one_thread, torch_one_thread):
    """One numba thread (conftest)."""


@pytest.fixture(scope="module", params=MODES)
def fitted(request, torch_one_thread):
    """(mode, a model fitted in that mode on TEXTS), shared by the read-only tests."""
    return request.param, CPGBN(inference=request.param, **FAST).fit(TEXTS)


def assert_same_model(a, b):
    np.testing.assert_array_equal(a.globals_.D, b.globals_.D)
    for pa, pb in zip(a.globals_.phi, b.globals_.phi, strict=True):
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.globals_.r, b.globals_.r)
    np.testing.assert_array_equal(a.loss_trace_, b.loss_trace_)


# ---------------------------------------------------------------------- fit and transform
def test_fitted_attributes(fitted):
    mode, model = fitted
    n_steps = FAST["n_epochs"] * steps_per_epoch(len(TEXTS), FAST["batch_size"])
    assert n_steps == 2 * 3   # 40 documents in minibatches of <= 16: 3 steps per epoch
    assert model.loss_trace_.shape == model.kl_trace_.shape == model.step_seconds_.shape \
        == (n_steps,)
    assert np.isfinite(model.loss_trace_).all()
    assert np.isfinite(model.kl_trace_).all() == (mode == "hybrid")  # minibatch Gibbs: no KL
    assert len(model.loglik_trace_) == 0 and len(model.sweep_seconds_) == 0
    assert model.train_features_.shape == (40, 4)
    assert [t.shape for t in model.train_theta_] == [(40, 4), (40, 2)]
    assert np.isclose(model.kernel_usage_.sum(), 1.0) and (model.kernel_usage_ >= 0).all()
    assert model.n_train_tokens_ == sum(len(t.split()) for t in TEXTS)
    D = model.globals_.D
    assert D.shape == (30, 3, 4) and np.allclose(D.sum(axis=(0, 1)), 1.0, atol=1e-4)
    assert hasattr(model, "encoder_weights_") == (mode == "hybrid")


def test_transform_shape_finite_and_equal_to_the_training_features(fitted):
    """The minibatch modes' training features are those transform gives (fit_transform(X) ==
    fit(X).transform(X)), and transform is deterministic for a fitted model."""
    _, model = fitted
    np.testing.assert_array_equal(model.transform(TEXTS), model.train_features_)
    features = model.transform(NEW)
    assert features.shape == (8, 4) and np.isfinite(features).all() and (features > 0).all()
    np.testing.assert_array_equal(model.transform(NEW), features)
    assert model.transform(NEW, all_layers=True).shape == (8, 6)


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_model_other_seed_other_model(mode):
    a = CPGBN(inference=mode, **FAST).fit(TEXTS)
    b = CPGBN(inference=mode, **FAST).fit(TEXTS)
    assert_same_model(a, b)
    np.testing.assert_array_equal(a.train_features_, b.train_features_)
    np.testing.assert_array_equal(a.transform(NEW), b.transform(NEW))
    c = CPGBN(inference=mode, **{**FAST, "random_state": 1}).fit(TEXTS)
    assert not np.array_equal(a.globals_.D, c.globals_.D)


def test_the_minibatch_steps_learn():
    """TLASGR moves the globals towards the data: after 8 epochs the minibatch-Gibbs loss
    (negative log-likelihood per document) is well below the first step's."""
    model = CPGBN(inference="minibatch-gibbs", **{**FAST, "n_epochs": 8, "layers": (4,)}).fit(TEXTS)
    first, last = model.loss_trace_[:3].mean(), model.loss_trace_[-3:].mean()
    assert last < first - 0.05 * abs(first), (first, last)


def test_hybrid_refinement_sweeps():
    model = CPGBN(inference="hybrid", **FAST).fit(TEXTS)
    mean = model.transform(NEW)
    refined = model.set_params(refine_iter=3).transform(NEW)
    assert refined.shape == mean.shape and np.isfinite(refined).all() and (refined > 0).all()
    assert not np.allclose(refined, mean)  # the Gibbs sweeps moved theta from the encoder's mean
    np.testing.assert_array_equal(model.transform(NEW), refined)  # seeded
    assert np.array_equal(model.set_params(refine_iter=0).transform(NEW), mean)


@pytest.mark.parametrize("refine_iter", [0, 2])
def test_a_bfloat16_encoder_head_gives_features_close_to_float32s(refine_iter):
    model = CPGBN(inference="hybrid", **FAST).fit(TEXTS).set_params(refine_iter=refine_iter)
    full = model.transform(NEW)
    half = model.set_params(encoder_precision="bfloat16").transform(NEW)
    assert not np.array_equal(half, full)
    if refine_iter == 0:   # the mean path: bfloat16 rounding only
        np.testing.assert_allclose(half, full, rtol=0.05, atol=1e-6)
    else:                  # the same seeded sweeps from a start moved by rounding
        relative = np.abs(half - full).sum(axis=1) / np.abs(full).sum(axis=1)
        assert np.median(relative) < 0.05, relative


def test_a_gibbs_refit_forgets_the_minibatch_fit():
    model = CPGBN(inference="hybrid", **FAST).fit(TEXTS)
    model.set_params(inference="gibbs").fit(TEXTS)
    assert not hasattr(model, "encoder_weights_") and not hasattr(model, "loss_trace_")
    assert len(model.loglik_trace_) == FAST["n_iter"] and np.isfinite(model.log_likelihood())


# ---------------------------------------------------------------------- persistence
def test_save_load_round_trip(fitted, tmp_path):
    mode, model = fitted
    model.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["format_version"] == cpgbn.io.FORMAT_VERSION and meta["params"]["inference"] == mode
    with np.load(tmp_path / "m" / "arrays.npz", allow_pickle=False) as npz:   # no pickle
        keys = set(npz.files)
    assert {"loss_trace_", "kl_trace_"} <= keys and "step_seconds_" not in keys
    assert any(k.startswith("encoder/") for k in keys) == (mode == "hybrid")
    assert ("encoder_config" in meta) == (mode == "hybrid")
    loaded = CPGBN.load(tmp_path / "m")
    assert loaded.get_params() == model.get_params()
    assert_same_model(loaded, model)
    np.testing.assert_array_equal(loaded.kl_trace_, model.kl_trace_)
    # the wall-clock times are saved apart from the model (timings.json)
    np.testing.assert_array_equal(loaded.step_seconds_, model.step_seconds_)
    np.testing.assert_array_equal(loaded.sweep_seconds_, model.sweep_seconds_)
    np.testing.assert_array_equal(loaded.transform(NEW), model.transform(NEW))
    if mode == "hybrid":
        assert loaded.encoder_config_ == model.encoder_config_
        for name, w in model.encoder_weights_.items():
            np.testing.assert_array_equal(loaded.encoder_weights_[name], w)


def test_a_format_2_gibbs_model_still_loads(tmp_path):
    """A model saved before the minibatch modes (format 2: no inference parameters) loads as
    inference="gibbs" and transforms as before."""
    model = CPGBN(**{**FAST, "layers": (4,)}).fit(TEXTS)
    model.save(tmp_path / "m")
    meta_path = tmp_path / "m" / "model.json"
    meta = json.loads(meta_path.read_text())
    for name in ("inference", "batch_size", "n_epochs", "learning_rate", "refine_iter"):
        del meta["params"][name]
    meta["format_version"] = 2
    meta_path.write_text(json.dumps(meta))
    old = CPGBN.load(tmp_path / "m")
    assert old.inference == "gibbs" and old.format_version_ == 2
    np.testing.assert_array_equal(old.transform(NEW), model.transform(NEW))
    assert np.isfinite(old.log_likelihood())


def test_a_version_3_model_loads_with_its_times(fitted, tmp_path):
    """Versions 1-3 kept the sweeps' seconds in model.json and the steps' in arrays.npz."""
    import hashlib
    mode, model = fitted
    folder = tmp_path / "m"
    model.save(folder)
    timings = json.loads((folder / "timings.json").read_text())
    (folder / "timings.json").unlink()
    with np.load(folder / "arrays.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["step_seconds_"] = np.asarray(timings["step_seconds_"])
    np.savez(folder / "arrays.npz", **arrays)
    meta = json.loads((folder / "model.json").read_text())
    meta.update(format_version=3, sweep_seconds=timings["sweep_seconds_"],
                arrays_sha256=hashlib.sha256((folder / "arrays.npz").read_bytes()).hexdigest())
    (folder / "model.json").write_text(json.dumps(meta))
    old = CPGBN.load(folder)
    assert old.format_version_ == 3
    np.testing.assert_array_equal(old.step_seconds_, model.step_seconds_)
    np.testing.assert_array_equal(old.sweep_seconds_, model.sweep_seconds_)
    np.testing.assert_array_equal(old.transform(NEW), model.transform(NEW))


# ---------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("mode", MODES)
def test_interrupted_fit_resumes_to_the_same_model(mode, tmp_path, monkeypatch):
    """A fit killed after step 4 (checkpoints every 2 steps) and resumed ends in exactly the
    uninterrupted model; the checkpoint is gone at the end, and another fit refuses it."""
    if mode == "hybrid":
        from cpgbn.inference.hybrid import HybridTrainer as Algorithm
    else:
        from cpgbn.inference.minibatch import MinibatchGibbs as Algorithm
    whole = CPGBN(inference=mode, **FAST).fit(TEXTS)
    ck = tmp_path / "ck"
    with interrupted_at_step(monkeypatch, Algorithm, 5):
        CPGBN(inference=mode, **FAST).fit(TEXTS, checkpoint_dir=ck, checkpoint_every=2)
    assert (ck / "checkpoint.json").is_file()
    with pytest.raises(CPGBNInputError, match="other data or parameters"):
        CPGBN(inference=mode, **FAST).fit(TEXTS[:-1], checkpoint_dir=ck, resume=True)
    resumed = CPGBN(inference=mode, **FAST).fit(TEXTS, checkpoint_dir=ck, checkpoint_every=2,
                                                 resume=True)
    assert not ck.exists()
    assert_same_model(resumed, whole)
    np.testing.assert_array_equal(resumed.train_features_, whole.train_features_)


# ---------------------------------------------------------------------- explain
def test_explain_tools_on_a_minibatch_model(fitted):
    from cpgbn.explain import summary_text
    from cpgbn.explain.report import build_report

    mode, model = fitted
    columns = model.columns(0, top_n=3)
    assert len(columns) == 3 and all(len(c) == 3 for c in columns)
    assert model.tree(children=2).children
    text = summary_text(model)
    assert f"inference='{mode}': 6 minibatch steps of up to 16 documents (2 epochs)" in text
    assert LOSS_NAMES[mode] in text and "s per step" in text
    assert "log-likelihood" not in text.replace(LOSS_NAMES[mode], "")  # none is claimed
    html = build_report(model, npmi=False)
    assert '<figure class="loss-plot">' in html and "training log-likelihood" not in html
    with pytest.raises(CPGBNInputError, match="loss_trace_"):
        model.log_likelihood()
    assert np.isfinite(model.log_likelihood(NEW))   # Gibbs inference with the fitted globals


def test_pgbn_runs_the_minibatch_modes():
    for mode in MODES:
        model = PGBN(inference=mode, **FAST).fit(TEXTS)
        assert model.globals_.D.shape == (30, 1, 4)
        assert model.transform(NEW).shape == (8, 4) and np.isfinite(model.transform(NEW)).all()


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name, value", [
    ("inference", "variational"), ("inference", None), ("batch_size", 0), ("batch_size", 2.5),
    ("n_epochs", 0), ("n_epochs", True), ("learning_rate", 0.0), ("learning_rate", np.nan),
    ("learning_rate", "fast"), ("refine_iter", -1), ("refine_iter", 1.0),
    ("encoder_precision", "float16"), ("encoder_precision", None)])
def test_bad_parameters_name_themselves(name, value):
    with pytest.raises(CPGBNInputError, match=name):
        CPGBN(**{**FAST, name: value}).fit(TEXTS)


def test_minibatch_gibbs_refuses_a_device():
    with pytest.raises(CPGBNInputError, match="device"):
        CPGBN(inference="minibatch-gibbs", device="cpu", **FAST).fit(TEXTS)


def test_hybrid_without_torch_says_how_to_install_it(fitted, monkeypatch):
    mode, model = fitted
    monkeypatch.setitem(sys.modules, "torch", None)   # "import torch" now fails
    with pytest.raises(CPGBNInputError, match=r"pip install 'cpgbn\[torch\]'"):
        CPGBN(inference="hybrid", **FAST).fit(TEXTS)
    if mode == "hybrid":
        with pytest.raises(CPGBNInputError, match=r"pip install 'cpgbn\[torch\]'"):
            model.transform(NEW)


def test_hybrid_transform_needs_an_encoder():
    model = CPGBN(**{**FAST, "layers": (4,)}).fit(TEXTS)
    with pytest.raises(CPGBNInputError, match="no encoder"):
        model.set_params(inference="hybrid").transform(NEW)


# ---------------------------------------------------------------------- command line
def test_cli_fit_and_transform_with_the_hybrid(tmp_path, capsys):
    from cpgbn.cli import main

    texts, labels = random_labeled(40, seed=0)
    data = write_tsv(tmp_path / "train.tsv", texts, labels)
    out = tmp_path / "model"
    args = ["fit", str(data), "--out", str(out), "--layers", "4,2", "--vocab-size", "30",
            "--inference", "hybrid", "--batch-size", "16", "--epochs", "2",
            "--learning-rate", "0.01", "--quiet", "--threads", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args) == 0
    printed = capsys.readouterr().out
    assert "(hybrid)" in printed and "6 minibatch steps" in printed
    assert LOSS_NAMES["hybrid"] in printed and "log-likelihood" not in printed
    model = CPGBN.load(out)
    assert model.inference == "hybrid" and model.n_epochs == 2 and model.batch_size == 16
    features = tmp_path / "f.npy"
    assert main(["transform", str(out), str(data), "--out", str(features), "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(features), model.transform(texts))
    assert main(["transform", str(out), str(data), "--out", str(features), "--quiet",
                 "--refine-iter", "2"]) == 0
    assert not np.allclose(np.load(features), model.transform(texts))
    assert main(["transform", str(out), str(data), "--out", str(features), "--quiet",
                 "--encoder-precision", "bfloat16"]) == 0
    half = model.set_params(encoder_precision="bfloat16").transform(texts)
    np.testing.assert_array_equal(np.load(features), half)


@pytest.mark.parametrize("option, value", [("--inference", "bogus"), ("--batch-size", "0"),
                                           ("--epochs", "-1"), ("--learning-rate", "0"),
                                           ("--learning-rate", "nan")])
def test_cli_bad_values_are_one_line_errors(tmp_path, capsys, option, value):
    from cpgbn.cli import main

    data = write_tsv(tmp_path / "train.tsv", *random_labeled(10, seed=0))
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(data), "--out", str(tmp_path / "model"), option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"cpgbn fit: error: argument {option}")
    assert not (tmp_path / "model").exists()


def test_each_mode_declares_its_parameters_constraints_in_one_table():
    """Every mode parameter of CPGBN (``params.MODES`` but ``inference``) and every sCPGBN
    parameter the supervised mode reads has exactly one constraint, in its mode's table; a
    value each refuses is a one-line error naming the parameter."""
    from cpgbn.errors import CPGBNInputError
    from cpgbn.modes import REGISTERED_MODES
    from cpgbn.modes.supervised import SupervisedMode
    from cpgbn.params import CLASSIFIER_PARAMETERS, MODES, MODEL, RUN
    tables = {mode: mode.__dict__.get("parameter_constraints", {})
              for mode in {m.__mro__[i] for m in REGISTERED_MODES.values()
                           for i in range(m.__mro__.index(object))}}
    declared = [name for table in tables.values() for name in table]
    assert len(declared) == len(set(declared))
    scpgbn = {p.name for p in CLASSIFIER_PARAMETERS} - {p.name for p in MODEL + MODES + RUN}
    assert set(declared) == ({p.name for p in MODES} - {"inference"}
                             | scpgbn - {"semi_supervised"})
    assert set(SupervisedMode.parameter_constraints) == scpgbn - {"semi_supervised"}
    bad = {"batch_size": 0, "n_epochs": 1.5, "learning_rate": -1, "refine_iter": -1,
           "encoder_precision": "float16", "xi": 0, "classifier_input": "words",
           "classifier_pooling": "sum", "generative": 1, "elbo_reaches_filters": "no",
           "global_statistics": "both", "generative_every": 0, "classifier_dropout": 1.0,
           "max_grad_norm": -1, "validation_fraction": 0.5, "patience": 0}
    assert set(bad) == set(declared)
    for table in tables.values():
        for name, constraint in table.items():
            with pytest.raises(CPGBNInputError, match=name):
                constraint.check(name, bad[name])


def test_modes_compose_no_deeper_than_two_levels_below_the_base():
    """Modes hold the modes they build on (the minibatch modes a Gibbs mode for new documents,
    the supervised mode a hybrid one) instead of inheriting from them."""
    from cpgbn.modes import REGISTERED_MODES
    from cpgbn.modes.base import InferenceMode
    from cpgbn.modes.gibbs_mode import GibbsMode
    from cpgbn.modes.hybrid_mode import HybridMode
    from cpgbn.modes.supervised import SupervisedMode
    for mode in REGISTERED_MODES.values():
        assert mode.__mro__.index(InferenceMode) <= 2, mode.__name__
    settings = CPGBN(**FAST)._run_settings()
    assert isinstance(REGISTERED_MODES["minibatch-gibbs"](settings).gibbs, GibbsMode)
    assert isinstance(SupervisedMode(settings).hybrid, HybridMode)


def test_the_fitted_state_is_a_few_records_read_by_the_estimators_names():
    """FittedState: the model's fields and one record per concern (at most 15 fields); every
    record's attribute is read and written through the state by its estimator name, a record
    is made where one of its attributes is set, and the post-fit records' attributes are the
    explanation record's."""
    from dataclasses import fields

    from cpgbn.explain.records import POST_FIT_RECORDS
    from cpgbn.modes import FITTED_ATTRIBUTES, FittedState
    from cpgbn.modes.base import ExplanationRecords, StepRecord, SupervisionRecord
    assert len(fields(FittedState)) <= 15
    assert len(FITTED_ATTRIBUTES) == len(set(FITTED_ATTRIBUTES)) == 33
    model = CPGBN(**FAST).fit(TEXTS)
    state = model._fitted_state()
    assert state.steps is None and state.loss_trace_ is None and state.supervision is None
    assert state.chain.mixing_ is model.mixing_ and state.globals_ is model.globals_
    state.classes_ = np.array(["a", "b"])
    assert isinstance(state.supervision, SupervisionRecord)
    assert list(state.supervision.classes_) == ["a", "b"] and state.paper_xi_ is None
    built = FittedState.of(**{**state.present(), "loss_trace_": np.ones(3)})
    assert isinstance(built.steps, StepRecord) and built.kl_trace_ is None
    assert set(built.present()) == set(state.present()) | {"loss_trace_"}
    with pytest.raises(TypeError, match="not fitted attributes"):
        FittedState.of(**state.present(), weights_=1)
    with pytest.raises(AttributeError):
        state.no_such_attribute_
    declared = [name for record in POST_FIT_RECORDS for name in record.attributes]
    assert sorted(declared) == sorted(f.name for f in fields(ExplanationRecords))


def test_each_mode_declares_the_fitted_attributes_its_fit_sets():
    """The fitted record: every field is always set, a mode's own (``fitted_extras``) or the
    estimator's; a fit sets no optional field beyond its mode's (the estimator's records
    aside), and an in-memory fit sets every one of its mode's (a classifier fitted without a
    validation split: but the validation's curve and best epoch)."""
    from cpgbn.classifier import CPGBNClassifier
    from cpgbn.modes import FITTED_ATTRIBUTES, MODE_CLASSES
    from cpgbn.modes.base import ESTIMATOR_RECORDS, FITTED_ALWAYS
    from cpgbn.modes.supervised import SupervisedMode
    classes = [*MODE_CLASSES.values(), SupervisedMode]
    declared = set().union(*(mode.fitted_extras for mode in classes))
    assert set(FITTED_ATTRIBUTES) == set(FITTED_ALWAYS) | declared | set(ESTIMATOR_RECORDS)
    assert not declared & (set(FITTED_ALWAYS) | set(ESTIMATOR_RECORDS))
    labels = ["a", "b"] * (len(TEXTS) // 2)
    models = [CPGBN(inference=name, **FAST).fit(TEXTS) for name in MODE_CLASSES]
    models.append(CPGBNClassifier(layers=(4,), vocab_size=30, batch_size=16, n_epochs=2,
                                  random_state=0, n_threads=1,
                                  validation_fraction=0.0).fit(TEXTS, labels))
    for model, mode in zip(models, classes):
        optional = {name for name in FITTED_ATTRIBUTES if hasattr(model, name)} \
            - set(FITTED_ALWAYS) - set(ESTIMATOR_RECORDS)
        assert optional == set(mode.fitted_extras) - {"validation_curve_", "best_epoch_"}, \
            mode.name
