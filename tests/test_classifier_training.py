"""How sCPGBN is trained (issue 47): the step's loss is L_g + xi L_c exactly, the softmax reads
what ``classifier_input`` names, a validation split keeps the best epoch and stops when it no
longer improves (resumable), the discriminative baseline learns by the cross-entropy alone,
and integer labels keep their order."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from helpers import phrase_corpus

from cpgbn.inference import hybrid
from cpgbn.inference.batches import Batch, ConvDataBlocks
from cpgbn.inference.state import Hyperparameters
from cpgbn.inference.streams import ENCODER_DRAW, derived_seed
from cpgbn.layers.batches import subset_cells

torch = pytest.importorskip("torch")

from cpgbn.backends.torch.elbo import conditional_rates, elbo_terms  # noqa: E402
from cpgbn.backends.torch.encoder_backend import TorchEncoderBackend  # noqa: E402
from cpgbn.backends.torch.packed import pack  # noqa: E402
from cpgbn.classifier import CPGBNClassifier  # noqa: E402
from test_classifier import order_corpus, small  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def encoded(texts, vocab_size=60):
    """The texts' cells under a CPGBN vocabulary (as a classifier's fit builds them)."""
    from cpgbn import CPGBN
    model = CPGBN(layers=(4,), vocab_size=vocab_size)
    corpus = model._corpus(texts, None, vocab_size)
    return corpus, model._data(corpus, 3)


@pytest.mark.parametrize("classifier_input", ["theta", "hidden+theta", "hidden"])
def test_the_steps_loss_is_the_elbo_plus_xi_times_the_cross_entropy(classifier_input):
    """A step's reported loss equals L_g (the draw reproduced from the step's seed) plus xi
    times the cross-entropy of the softmax on the mean path (theta / S_j and h^(1), as
    ``classifier_input`` says), per document, to float rounding; its gradient is that loss's
    times ``loss_scale``."""
    texts, labels = order_corpus(30, seed=4)
    corpus, data = encoded(texts)
    hyper = Hyperparameters(eta=(0.05, 0.05))
    xi, scale = 2e4, 0.25
    trainer = hybrid.HybridTrainer((4, 3), corpus.vocabulary.__len__(), 3, hyper,
                                   n_docs_total=30, seed=3, max_grad_norm=None,
                                   supervision=hybrid.Supervision(["back", "fwd"], xi=xi,
                                                                  loss_scale=scale),
                                   encoder_options=dict(classifier_input=classifier_input))
    encoder = copy.deepcopy(trainer.encoder)
    g = trainer.globals
    packed = pack(data)
    generator = torch.Generator().manual_seed(derived_seed(3, ENCODER_DRAW, 1))
    output = encoder(packed)
    sample = encoder.sample(packed, g.phi, generator=generator, output=output)
    rates = conditional_rates(sample, g.r, hyper.e0, hyper.f0)
    l_g = elbo_terms(packed, sample, g.D, g.phi, g.r, rates).negative_elbo
    mean = encoder.sample(packed, g.phi, mean=True, output=output)
    parts = []
    if classifier_input != "theta":
        parts.append(torch.log1p(output.pooled_hidden))
    if classifier_input != "hidden":
        parts += [torch.log1p(t / packed.n_positions[:, None]) for t in mean.theta]
    logits = encoder.classifier(torch.cat([p.float() for p in parts], dim=1))
    codes = torch.as_tensor([1 if v == "fwd" else 0 for v in labels])
    l_c = torch.nn.functional.cross_entropy(logits.double(), codes, reduction="none")
    want = (l_g + xi * l_c).mean()
    (want * scale).backward()
    record = Batch(data, np.arange(30), labels=np.asarray(labels, dtype=object))
    report = trainer.step(1, record)
    assert report.loss == pytest.approx(float(want.detach()), rel=1e-6)
    # xi times the cross-entropy is no rounding error of the total here
    assert float(xi * l_c.mean()) > 0.1 * abs(float(want.detach()))
    # the step's clip saw the gradient of the scaled loss
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in encoder.parameters()
                          if p.grad is not None))
    assert trainer.gradient_norms[0] == pytest.approx(float(norm), rel=1e-4)


def test_integer_labels_keep_their_numeric_order():
    """Labels 2 and 10 (10 sorts before 2 as strings): classes_ == [2, 10], predict_proba's
    columns in that order, predictions and accuracy right."""
    texts, labels = order_corpus(400, seed=6)
    y = np.array([10 if v == "fwd" else 2 for v in labels])
    model = small().fit(texts[:200], y[:200])
    assert model.classes_.tolist() == [2, 10]
    p = model.predict_proba(texts[200:])
    fwd = y[200:] == 10
    assert p[fwd, 1].mean() > 0.6 and p[~fwd, 0].mean() > 0.6
    np.testing.assert_array_equal(model.predict(texts[200:]), model.classes_[p.argmax(axis=1)])
    assert model.score(texts[200:], y[200:]) >= 0.9


def _validated_run(data, codes, val_data, val_codes, *, patience, n_epochs=12, **kwargs):
    source = ConvDataBlocks(data, 4096, labels=codes)
    every = -(-data.n_docs // 40)
    validation = hybrid.Validation(val_data, val_codes, every=every, patience=patience)
    return hybrid.fit_hybrid(source, (6,), 60, Hyperparameters(eta=(0.05,)), seed=1,
                             n_steps=n_epochs * every, batch_size=40, learning_rate=1e-2,
                             supervision=hybrid.Supervision([0, 1], xi=30.0 * 800 * 5,
                                                            loss_scale=1 / (800 * 5),
                                                            validation=validation),
                             encoder_options=dict(classifier_input="hidden+theta"),
                             **kwargs), every


@pytest.fixture(scope="module")
def split_corpus():
    texts, labels = order_corpus(260, seed=8)
    _, data = encoded(texts)
    codes = np.array([1 if v == "fwd" else 0 for v in labels])
    return (subset_cells(data, np.arange(200)), codes[:200],
            subset_cells(data, np.arange(200, 260)), codes[200:])


@pytest.mark.usefixtures("numba_one_thread")
def test_validation_keeps_the_best_epoch_and_stops_when_it_stops_improving(split_corpus):
    """The run returns the encoder and globals of its best-scoring epoch (rescoring the
    held-out documents with them gives that epoch's accuracy), stops ``patience`` epochs
    after it, and records the curve."""
    data, codes, val_data, val_codes = split_corpus
    run, every = _validated_run(data, codes, val_data, val_codes, patience=2)
    curve = run.validation_curve
    assert run.best_epoch == int(np.argmax(curve)) + 1
    assert len(curve) == min(12, run.best_epoch + 2)
    assert run.n_steps == len(curve) * every
    backend = TorchEncoderBackend.from_weights(run.encoder_config, run.encoder_weights)
    p = backend.class_probabilities(run.globals.phi, val_data)
    assert np.mean(p.argmax(axis=1) == val_codes) == pytest.approx(curve[run.best_epoch - 1])
    assert curve.max() >= 0.9


@pytest.mark.usefixtures("numba_one_thread")
def test_a_validated_run_resumed_from_a_checkpoint_is_the_uninterrupted_one(split_corpus,
                                                                             tmp_path):
    data, codes, val_data, val_codes = split_corpus
    whole, every = _validated_run(data, codes, val_data, val_codes, patience=None, n_epochs=4)

    class Stop(Exception):
        pass

    def stop(i, report):
        if i == 2 * every + 1:
            raise Stop

    with pytest.raises(Stop):
        _validated_run(data, codes, val_data, val_codes, patience=None, n_epochs=4,
                       checkpoint_dir=tmp_path / "run", checkpoint_every=every, on_step=stop)
    resumed, _ = _validated_run(data, codes, val_data, val_codes, patience=None, n_epochs=4,
                                checkpoint_dir=tmp_path / "run", checkpoint_every=every, resume=True)
    np.testing.assert_array_equal(resumed.validation_curve, whole.validation_curve)
    assert resumed.best_epoch == whole.best_epoch
    for name, value in whole.encoder_weights.items():
        np.testing.assert_array_equal(resumed.encoder_weights[name], value, err_msg=name)
    np.testing.assert_array_equal(resumed.globals.D, whole.globals.D)
    np.testing.assert_array_equal(resumed.gradient_norms, whole.gradient_norms)


def test_the_discriminative_baseline_learns_by_the_cross_entropy_alone():
    """generative=False: no ELBO (the KL trace is 0), the globals never move from their start,
    the loss falls and the network learns word order."""
    texts, labels = order_corpus(400, seed=0)
    model = small(generative=False, classifier_input="hidden", validation_fraction=0).fit(
        texts[:200], labels[:200])
    assert model.score(texts[200:], labels[200:]) >= 0.9
    assert np.all(model.kl_trace_ == 0)
    loss = model.loss_trace_
    assert loss[-20:].mean() < 0.5 * loss[:20].mean()
    start = small(generative=False, classifier_input="hidden", validation_fraction=0,
                  n_epochs=1).fit(texts[:200], labels[:200])
    np.testing.assert_array_equal(model.globals_.D, start.globals_.D)


def test_the_fitted_classifier_records_its_model_selection(tmp_path):
    texts, labels = phrase_corpus(160, seed=2)
    model = small(n_epochs=6, validation_fraction=0.2, patience=None, batch_size=32).fit(
        texts, labels)
    assert len(model.validation_curve_) == 6
    assert len(model.loss_trace_) == 6 * 4     # 128 fitted documents (32 held out), 4 batches
    assert model.best_epoch_ == int(np.argmax(model.validation_curve_)) + 1
    assert len(model.gradient_norms_) == len(model.loss_trace_)
    model.save(tmp_path / "m")
    loaded = CPGBNClassifier.load(tmp_path / "m")
    assert loaded.best_epoch_ == model.best_epoch_
    np.testing.assert_array_equal(loaded.validation_curve_, model.validation_curve_)
    # a corpus too small to hold out each class: a warning, and the last epoch
    with pytest.warns(UserWarning, match="too few labelled documents"):
        tiny = small(n_epochs=2, validation_fraction=0.1).fit(texts[:8], labels[:8])
    # (a fitted attribute that a fit does not set is absent, as scikit-learn's)
    assert not hasattr(tiny, "best_epoch_") and not hasattr(tiny, "validation_curve_")


def test_a_classifier_clips_its_softmax_path_and_its_heads_apart():
    """With the clip far below both parts' norms, after one step the gradient left on the
    softmax's path (filters, softmax) has norm 1e-6 and so has the heads' (one clip of the
    whole would leave the smaller part far below it); the reported norm is the whole's before
    the clip."""
    texts, labels = order_corpus(30, seed=4)
    corpus, data = encoded(texts)
    trainer = hybrid.HybridTrainer((4, 3), len(corpus.vocabulary), 3,
                                   Hyperparameters(eta=(0.05, 0.05)), n_docs_total=30, seed=3,
                                   supervision=hybrid.Supervision(["back", "fwd"], xi=1e4),
                                   max_grad_norm=1e-6,
                                   encoder_options=dict(classifier_input="hidden"))
    trainer.step(1, Batch(data, np.arange(30), labels=np.asarray(labels, dtype=object)))
    path = TorchEncoderBackend.SOFTMAX_PATH

    def norm(params):
        return float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)))

    named = [(n, p) for n, p in trainer.encoder.named_parameters() if p.grad is not None]
    on_path = norm([p for n, p in named if n in path])
    on_heads = norm([p for n, p in named if n not in path])
    assert on_path == pytest.approx(1e-6, rel=1e-3)
    assert on_heads == pytest.approx(1e-6, rel=1e-3)
    assert trainer.gradient_norms[0] > 1e3 * 1e-6


def test_summary_names_the_classifiers_loss_and_its_kept_epoch():
    from cpgbn.explain.summary import summary_facts
    texts, labels = phrase_corpus(160, seed=2)
    model = small(n_epochs=4, validation_fraction=0.2, patience=None).fit(texts, labels)
    assert "cross-entropy" in model.loss_name and "ELBO" in model.loss_name
    facts = dict(summary_facts(model))
    assert "cross-entropy" in facts["training loss"]
    assert facts["model selection"].startswith(f"epoch {model.best_epoch_} of 4 kept")


@pytest.mark.parametrize("params, message", [
    (dict(generative="yes"), "generative must be True or False"),
    (dict(elbo_reaches_filters=1), "elbo_reaches_filters must be True or False"),
    (dict(validation_fraction=0.7), "validation_fraction must be a number in"),
    (dict(classifier_input="words"), "classifier_input must be one of"),
    (dict(classifier_pooling="sum"), "classifier_pooling must be one of"),
    (dict(generative_every=0), "generative_every must be"),
    (dict(max_grad_norm=-1), "max_grad_norm must be a positive number"),
    (dict(classifier_dropout=1.0), "classifier_dropout must be a number in"),
    (dict(patience=0), "patience"),
])
def test_bad_training_settings_are_one_line_errors(params, message):
    from cpgbn.errors import CPGBNInputError
    with pytest.raises(CPGBNInputError, match=message):
        CPGBNClassifier(**params).fit(["a b c"] * 4, ["x", "y"] * 2)
