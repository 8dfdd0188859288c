"""CPGBNClassifier (sCPGBN, issue 36): it learns, it reads word order, its probabilities are
deterministic, it follows scikit-learn's conventions, saves and loads, explains itself, and
refuses bad labels with one line."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from helpers import phrase_corpus

torch = pytest.importorskip("torch")

from cpgbn import CPGBN  # noqa: E402
from cpgbn.classifier import CPGBNClassifier  # noqa: E402
from cpgbn.errors import CPGBNInputError, ModelFormatError  # noqa: E402
from cpgbn.explain.classes import (class_phrases, class_units, explain_document,  # noqa: E402
                                   format_class_units,
                                   format_document)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FILLER = [f"f{i}" for i in range(12)]


def order_corpus(n_docs: int, seed: int):
    """Two classes with the same words: "x y z" in class "fwd", "z y x" in class "back",
    among filler words.  A bag of words cannot tell them apart; a width-3 kernel can."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n_docs):
        label = "fwd" if i % 2 == 0 else "back"
        phrase = ["x", "y", "z"] if label == "fwd" else ["z", "y", "x"]
        before = list(rng.choice(FILLER, size=int(rng.integers(0, 5))))
        after = list(rng.choice(FILLER, size=int(rng.integers(0, 5))))
        texts.append(" ".join(before + phrase + after))
        labels.append(label)
    return texts, labels


def small(**kwargs) -> CPGBNClassifier:
    # every epoch run (patience None): 20 held-out documents are too few to stop on
    params = dict(layers=(6,), vocab_size=60, n_epochs=40, batch_size=40, learning_rate=1e-2,
                  random_state=0, xi=30.0, patience=None)
    params.update(kwargs)
    return CPGBNClassifier(**params)


@pytest.fixture(scope="module")
def fitted_order():
    texts, labels = order_corpus(400, seed=0)
    return small().fit(texts[:200], labels[:200]), (texts[200:], labels[200:])


def test_a_fit_stopped_before_it_learnt_says_so():
    """Early stopping on a flat start: 20 held-out documents at 50% for the first epochs stop
    the fit at chance, kept silently before; now a warning says so and what to change."""
    texts, labels = order_corpus(300, seed=8)
    with pytest.warns(UserWarning, match=r"never rose above 50\.0%.*patience"):
        model = small(patience=3).fit(texts[:200], labels[:200])
    assert model.best_epoch_ == 1 and max(model.validation_curve_) == 0.5
    assert model.score(texts[200:], labels[200:]) == 0.5
    # given the epochs, the same fit learns, and nothing is said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = small(n_epochs=15).fit(texts[:200], labels[:200])
    assert max(model.validation_curve_) > 0.5
    assert not [w for w in caught if "never rose above" in str(w.message)]


def test_learns_word_order_that_a_bag_of_words_cannot_see(fitted_order):
    from cpgbn.evaluate.text_baselines import make_baseline
    model, (test_texts, test_labels) = fitted_order
    train_texts, train_labels = order_corpus(400, seed=0)
    bag = make_baseline("lr-unigram", random_state=0).fit(train_texts[:200], train_labels[:200])
    assert bag.score(test_texts, test_labels) < 0.65          # the words alone: chance
    assert model.score(test_texts, test_labels) >= 0.9
    # the loss it minimises fell over training
    loss = model.loss_trace_
    assert loss[-20:].mean() < loss[:20].mean()


def test_probabilities_are_deterministic_and_in_class_order(fitted_order):
    model, (texts, _) = fitted_order
    p = model.predict_proba(texts[:30])
    assert p.shape == (30, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(p, model.predict_proba(texts[:30]))
    assert list(model.classes_) == ["back", "fwd"]
    np.testing.assert_array_equal(model.predict(texts[:30]), model.classes_[p.argmax(axis=1)])
    # one document alone gets the probabilities it gets in a batch
    np.testing.assert_allclose(model.predict_proba(texts[3:4])[0], p[3], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.log(p[:, 1] / p[:, 0]), model.decision_function(texts[:30]),
                               rtol=1e-9, atol=1e-12)


def test_save_and_load_give_the_same_predictions(fitted_order, tmp_path):
    model, (texts, _) = fitted_order
    model.save(tmp_path / "m")
    loaded = CPGBNClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict_proba(texts[:20]), model.predict_proba(texts[:20]))
    assert list(loaded.classes_) == list(model.classes_)
    assert loaded.get_params() == model.get_params()
    with pytest.raises(ModelFormatError, match="saved by CPGBNClassifier"):
        CPGBN.load(tmp_path / "m")


def test_what_the_softmax_reads_is_decided_in_one_place(fitted_order):
    model, _ = fitted_order
    assert model.softmax_input_ == model.classifier_input == "hidden"
    # a model saved before the encoder recorded the choice read theta (the encoder's default)
    older = copy.deepcopy(model)
    older.encoder_config_ = {k: v for k, v in model.encoder_config_.items()
                             if k != "classifier_input"}
    assert older.softmax_input_ == "theta"
    from cpgbn.explain.classes import _softmax_inputs
    assert _softmax_inputs(older) == [(1, 6)]
    assert _softmax_inputs(model) == [(0, 6)]


def test_a_cpgbn_model_does_not_load_as_a_classifier(tmp_path):
    texts, _ = phrase_corpus(40, seed=1)
    CPGBN(layers=(3,), vocab_size=30, n_iter=4, burn_in=2, random_state=0).fit(texts).save(
        tmp_path / "u")
    with pytest.raises(ModelFormatError, match="saved by CPGBN"):
        CPGBNClassifier.load(tmp_path / "u")


def test_integer_labels_and_a_seed_give_the_same_model_twice():
    texts, labels = phrase_corpus(80, seed=2)
    y = np.array([0 if v == "red" else 1 for v in labels])
    a = small(n_epochs=3).fit(texts, y)
    b = small(n_epochs=3).fit(texts, y)
    assert a.classes_.tolist() == [0, 1]
    np.testing.assert_array_equal(a.predict_proba(texts), b.predict_proba(texts))


def test_semi_supervised_documents_without_labels_still_train(tmp_path):
    """Half the documents unlabelled, in memory (None) and in a streamed file (an empty
    label): both train (the same model: a streamed fit holds out no validation split, so
    neither does the one in memory here); without semi_supervised both are refused."""
    from helpers import write_tsv

    from cpgbn import TextFile
    texts, labels = order_corpus(400, seed=3)
    partial = [label if i % 4 in (0, 1) else None for i, label in enumerate(labels[:200])]
    model = small(semi_supervised=True, validation_fraction=0).fit(texts[:200], partial)
    assert model.score(texts[200:], labels[200:]) >= 0.85
    path = write_tsv(tmp_path / "partial.tsv", texts[:200], [v or "" for v in partial])
    streamed = small(semi_supervised=True, validation_fraction=0).fit(
        TextFile(path, missing_labels=True))
    np.testing.assert_array_equal(streamed.predict_proba(texts[200:]),
                                  model.predict_proba(texts[200:]))
    with pytest.raises(CPGBNInputError, match="set semi_supervised=True"):
        small().fit(TextFile(path, missing_labels=True))
    with pytest.raises(Exception, match="line 3: empty label"):
        small(semi_supervised=True).fit(TextFile(path))


def test_works_in_a_pipeline_and_a_grid_search():
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
    texts, labels = phrase_corpus(240, seed=4)
    pipe = Pipeline([("clf", small())])
    assert pipe.fit(texts[:160], labels[:160]).score(texts[160:], labels[160:]) >= 0.9
    search = GridSearchCV(small(n_epochs=5), {"xi": [1.0, 30.0]}, cv=2).fit(texts[:80],
                                                                           labels[:80])
    assert search.best_params_["xi"] in (1.0, 30.0)


def test_explanations_name_the_phrase_that_decides(fitted_order):
    model, _ = fitted_order
    text = "f1 f2 x y z f3 f4"
    explanation = explain_document(model, text, top=3)
    assert explanation.predicted == "fwd"
    # the window pushing hardest towards the class holds the phrase (the largest |score|
    # may push away: a window starting at "z" is what "back"'s "z y x" starts with)
    best = max(explanation.phrases, key=lambda w: w.score)
    assert best.score > 0 and set(best.words) & {"x", "y", "z"}
    assert explanation.token_scores.shape == (7,)
    # removing the phrase's words (each in turn, its column left empty) lowers the class's
    # log-odds, together more than removing the filler words
    scores = explanation.token_scores
    assert scores[2:5].sum() > 0 and scores[2:5].sum() > np.delete(scores, [2, 3, 4]).sum(), scores
    assert "predicted: fwd" in format_document(explanation)
    units = class_units(model, top=2, phrases=1)
    assert set(units) == {"back", "fwd"} and all(len(rows) == 2 for rows in units.values())
    assert units["fwd"][0].weight > 0
    assert "class fwd:" in format_class_units(units)


@pytest.mark.parametrize("labels, message", [
    (["a"] * 20, "at least 2 classes"),
    (["a", "b"] * 9 + ["a", None], "document 20 has no label"),
    (["a", "b"] * 9 + ["a", ""], "document 20 has no label"),
    (["a", "b"] * 9, "one label per document"),
    ([None] * 20, "document 1 has no label"),
])
def test_bad_labels_are_one_line_errors(labels, message):
    texts, _ = phrase_corpus(20, seed=5)
    with pytest.raises(CPGBNInputError, match=message) as info:
        small(n_epochs=1).fit(texts, labels)
    assert "\n" not in str(info.value)


def test_missing_labels_and_unseen_classes_are_refused():
    texts, labels = phrase_corpus(40, seed=6)
    with pytest.raises(CPGBNInputError, match="needs labels"):
        small(n_epochs=1).fit(texts)
    with pytest.raises(CPGBNInputError, match="no labelled document"):
        small(n_epochs=1, semi_supervised=True).fit(texts, [None] * 40)
    model = small(n_epochs=1).fit(texts, labels)
    with pytest.raises(CPGBNInputError, match="not trained on .'green'"):
        model.score(texts[:2], ["red", "green"])


def test_explaining_an_unsupervised_model_is_refused():
    texts, _ = phrase_corpus(40, seed=7)
    model = CPGBN(layers=(3,), vocab_size=30, n_iter=4, burn_in=2, random_state=0).fit(texts)
    with pytest.raises(CPGBNInputError, match="fitted without labels"):
        explain_document(model, "red apple pie")


def _run(args, **kwargs):
    import subprocess
    from helpers import cpgbn_command
    return subprocess.run(cpgbn_command() + [str(a) for a in args], capture_output=True,
                          text=True, timeout=600, **kwargs)


def test_command_line_fit_predict_explain_on_a_streamed_file(tmp_path):
    """`cpgbn fit FILE.tsv --supervised` streams the file, `predict` scores it, `explain`
    prints the classes' phrases and one document's; bad uses are one-line errors."""
    from helpers import write_tsv
    texts, labels = order_corpus(300, seed=8)
    train = write_tsv(tmp_path / "train.tsv", texts[:200], labels[:200])
    test = write_tsv(tmp_path / "test.tsv", texts[200:], labels[200:])
    out = tmp_path / "model"
    fit = _run(["fit", train, "--supervised", "--layers", "6", "--vocab-size", "60",
                "--epochs", "40", "--batch-size", "40", "--learning-rate", "0.01", "--xi", "30",
                "--threads", "1", "--quiet", "--out", out])
    assert fit.returncode == 0, fit.stderr
    assert "classifier (sCPGBN, xi 30)" in fit.stdout and "classes back, fwd" in fit.stdout
    predicted = _run(["predict", out, test, "--out", tmp_path / "p.tsv", "--threads", "1"])
    assert predicted.returncode == 0, predicted.stderr
    accuracy = float(predicted.stdout.split("accuracy ")[1].split(" %")[0])
    assert accuracy >= 90
    rows = (tmp_path / "p.tsv").read_text().splitlines()
    assert rows[0] == "predicted\tp(back)\tp(fwd)" and len(rows) == 101
    explained = _run(["explain", out, "f3 x y z f1", "--classes", "--threads", "1"])
    assert explained.returncode == 0, explained.stderr
    assert "class fwd:" in explained.stdout and "predicted: fwd" in explained.stdout
    # documents from standard input ("-"), as explain reads its text
    piped = _run(["predict", out, "-", "--threads", "1"], input="f1 x y z f2\nf2 z y x f1\n")
    assert piped.returncode == 0 and piped.stdout.split() == ["fwd", "back"], piped.stderr
    # a reader that leaves before the output (| head): no error, the status of SIGPIPE
    import subprocess
    from helpers import cpgbn_command
    proc = subprocess.Popen(cpgbn_command() + ["explain", str(out), "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    assert proc.wait(timeout=600) == 141 and proc.stderr.read() == b""
    # a model without labels, a file without labels: one line each, status 2
    unlabelled = tmp_path / "plain.txt"
    unlabelled.write_text("\n".join(texts[:50]) + "\n")
    for args, message in [
            (["explain", tmp_path / "nothing"], "does not exist"),
            (["fit", "--supervised", unlabelled, "--out", tmp_path / "m2", "--quiet"],
             "has no labels")]:
        result = _run(args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_report_shows_classes_and_a_highlighted_document_in_a_browser(fitted_order, tmp_path):
    """The HTML report of a classifier: the units of each class, and the explained text with
    its tokens shaded by their scores, rendered by headless Chromium as the report's own
    browser test does (skips, saying so, where Chromium is not installed)."""
    import re

    from test_report import _check_rendered, _chromium_dom

    from cpgbn.explain.report import build_report, write_report
    model, _ = fitted_order
    html = build_report(model, npmi=False, explain=["f1 f2 x y z f3", "f4 z y x f5"])
    assert html.count('<table class="class-units">') == 2
    path = write_report(html, tmp_path / "report.html")
    dom = _chromium_dom(path, tmp_path)
    _check_rendered(dom, 6)
    assert '<section id="documents">' in dom and '<section id="classes">' in dom
    predicted = re.findall(r'class="explained-doc" id="doc-\d" data-predicted="(\w+)"', dom)
    assert predicted == ["fwd", "back"]
    first = dom[dom.index('id="doc-0"'):dom.index('id="doc-1"')]
    tokens = re.findall(r'<span class="tok" data-score="([-0-9.]+)"[^>]*>([^<]+)</span>', first)
    assert [t for _, t in tokens] == ["f1", "f2", "x", "y", "z", "f3"]
    best = max(tokens, key=lambda item: float(item[0]))[1]
    assert best in ("x", "y", "z")


def test_a_corpus_sorted_by_label_is_mixed_in_every_minibatch(tmp_path):
    """Files are often sorted by class (IMDB's, SUBJ's): in memory the supervised fit draws
    each minibatch from the whole corpus (blocks of consecutive documents would hold one class
    for thousands of steps); a streamed file whose labels come in runs is warned about."""
    from helpers import write_tsv

    from cpgbn.inference.batches import Minibatches
    from cpgbn.layers.cells import ObservationModel, from_token_sequences
    from cpgbn.modes import Training
    from cpgbn.modes.supervised import SupervisedMode, Supervisor
    from cpgbn.inference.state import Hyperparameters
    from cpgbn.text.vocabulary import Vocabulary
    from cpgbn.text.stream import TextFile
    from cpgbn.classifier import file_classes

    n = 10_000
    tokens = np.ones(2 * n, dtype=np.int32)
    data = from_token_sequences(tokens, np.arange(0, 2 * n + 1, 2), 2, ObservationModel.of(1))
    labels = np.array(["a"] * (n // 2) + ["b"] * (n // 2))
    training = Training(Vocabulary.from_frequencies({"w": 1}, 2), (3,),
                        Hyperparameters(eta=(0.05,)), 0, 2 * n, {}, data=data, labels=labels)
    source = Supervisor(SupervisedMode({}), split=None).block_source(training)
    first = Minibatches(source, 100, seed=0).next()
    assert source.n_blocks == 1 and set(first.labels) == {"a", "b"}
    sorted_file = write_tsv(tmp_path / "sorted.tsv", ["w w"] * n, labels)
    with pytest.warns(UserWarning, match="come in runs"):
        assert list(file_classes(TextFile(sorted_file))[0]) == ["a", "b"]


def _occurrences(texts, phrase: str) -> int:
    """How often ``phrase`` occurs as contiguous words of ``texts`` (split on spaces)."""
    words = phrase.split()
    return sum(tokens[i:i + len(words)] == words
               for tokens in (t.split() for t in texts) for i in range(len(tokens)))


def test_class_tables_rank_by_weight_times_usage_with_phrases_that_occur(fitted_order,
                                                                        tmp_path):
    """Issue 47: a class's units are ranked by push = weight x usage (the unit's mean input
    to the softmax over the training documents), and a filter's phrases are windows of the
    training documents, shown with how often they occur, not per-column words."""
    model, _ = fitted_order
    train_texts = order_corpus(400, seed=0)[0][:200]
    assert model.softmax_input_mean_.shape == (6,)
    np.testing.assert_allclose(model.softmax_input_mean_,
                               model.softmax_inputs(train_texts).mean(axis=0), rtol=1e-6)
    assert model.filter_windows_.shape == (6, 5, 3) and model.filter_windows_.dtype.kind == "i"
    units = class_units(model, top=6, phrases=5)
    for rows in units.values():
        assert [u.push for u in rows] == sorted((u.push for u in rows), reverse=True)
        for u in rows:
            assert u.push == pytest.approx(u.weight * u.usage)
            assert len(u.phrases) == len(u.counts) > 0
            for phrase, n in zip(u.phrases, u.counts):
                assert _occurrences(train_texts, phrase) == n
    # the unit that pushes hardest towards each class reads the class's phrase
    assert units["fwd"][0].phrases[0] == "x y z" and units["back"][0].phrases[0] == "z y x"
    by_weight = class_units(model, top=6, phrases=1, rank="weight")
    for rows in by_weight.values():
        assert [u.weight for u in rows] == sorted((u.weight for u in rows), reverse=True)
    text = format_class_units(units)
    assert "push = weight x usage" in text and '"x y z" x' in text
    # the phrases that push most towards each class are the class's own
    phrases = class_phrases(model, top=3)
    assert phrases["fwd"][0].text == "x y z" and phrases["back"][0].text == "z y x"
    for rows in phrases.values():
        for p in rows:
            assert p.count == _occurrences(train_texts, p.text) >= 3 and p.push > 0
    model.save(tmp_path / "m")
    loaded = CPGBNClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.filter_windows_, model.filter_windows_)
    assert loaded.filter_windows_.dtype.kind == "i"
    assert class_units(loaded, top=6, phrases=5) == units


def test_the_settings_a_classifier_fixes_are_neither_parameters_nor_attributes():
    """The classifier fixes CPGBN's inference mode and Gibbs settings (the hybrid, no
    refinement, the tied pooling prior): none is a parameter, none shadows one as a class
    attribute, and its mode is named once (``mode_name``)."""
    from cpgbn import PGBN
    fixed = ("inference", "refine_iter", "pooling_concentration", "n_iter", "burn_in",
             "transform_iter", "transform_burn_in")
    model = CPGBNClassifier()
    for name in fixed:
        assert name not in model.get_params() and not hasattr(model, name), name
    with pytest.raises(ValueError, match="Invalid parameter 'inference'"):
        model.set_params(inference="gibbs")
    assert model.mode_name == "supervised"
    assert CPGBN().mode_name == "gibbs" and CPGBN(inference="hybrid").mode_name == "hybrid"
    for name in ("padding", "pooling_concentration"):   # PGBN's one column per document
        assert name not in PGBN().get_params() and not hasattr(PGBN(), name), name


def test_a_streamed_fit_reads_its_file_once_per_epoch_and_once_after(tmp_path, monkeypatch):
    """A streamed classifier fit reads its file once for the vocabulary (the classes and the
    blocks' index from the same pass), once per epoch, and once after the fit (the usage and
    every post-fit record in that one pass: explain/records.py), and its records are what
    the fitted model gives for the same texts in memory."""
    from helpers import write_tsv

    import cpgbn.blocks
    import cpgbn.text.readers as readers
    from cpgbn import TextFile
    from cpgbn.explain.kernel_windows import record_kernel_windows
    texts, labels = order_corpus(200, seed=4)
    path = write_tsv(tmp_path / "train.tsv", texts, labels)
    monkeypatch.setattr(cpgbn.blocks, "STREAM_BLOCK_DOCS", 50)   # 4 blocks
    decoded, indexed = [0], [0]
    decode, index = readers._decode, readers.index_line_blocks

    def counted_decode(*args):
        decoded[0] += 1
        return decode(*args)

    def counted_index(*args, **kwargs):
        indexed[0] += 1
        return index(*args, **kwargs)
    monkeypatch.setattr(readers, "_decode", counted_decode)
    monkeypatch.setattr(readers, "index_line_blocks", counted_index)
    model = small(n_epochs=3).fit(TextFile(path))
    assert decoded[0] == len(texts) * (1 + 3 + 1) and indexed[0] == 0
    monkeypatch.undo()
    np.testing.assert_allclose(model.softmax_input_mean_,
                               model.softmax_inputs(texts).mean(axis=0), rtol=1e-10)
    again = record_kernel_windows(model, texts)
    np.testing.assert_array_equal(model.kernel_windows_, again.windows)
    np.testing.assert_array_equal(model.kernel_window_counts_, again.counts)
    assert model.filter_windows_.shape[0] == model.layers_[0]
    assert model.class_windows_.shape[0] == len(model.classes_) == 2


def test_a_streamed_fit_records_what_one_in_memory_records(tmp_path):
    """One block (the corpus is smaller than a block, and neither holds out a validation
    split): the same model, so the same post-fit records, however the documents came."""
    from helpers import write_tsv

    from cpgbn import TextFile
    texts, labels = order_corpus(200, seed=4)
    path = write_tsv(tmp_path / "train.tsv", texts, labels)
    streamed = small(n_epochs=3, validation_fraction=0).fit(TextFile(path))
    in_memory = small(n_epochs=3, validation_fraction=0).fit(texts, labels)
    np.testing.assert_array_equal(streamed.predict_proba(texts), in_memory.predict_proba(texts))
    for name in ("kernel_windows_", "kernel_window_counts_", "filter_windows_",
                 "filter_window_counts_", "class_windows_", "class_window_counts_"):
        np.testing.assert_array_equal(streamed.recorded(name), in_memory.recorded(name))
    for name in ("kernel_window_shares_", "softmax_input_mean_", "class_window_pushes_"):
        np.testing.assert_allclose(streamed.recorded(name), in_memory.recorded(name),
                                   rtol=1e-12)


def test_the_supervised_mode_is_registered_and_predictions_do_not_recheck(fitted_order,
                                                                        monkeypatch):
    import cpgbn.model
    from cpgbn.modes import MODES, REGISTERED_MODES, registered_mode
    from cpgbn.modes.supervised import SupervisedMode
    model, (test_texts, test_labels) = fitted_order
    assert registered_mode("supervised") is SupervisedMode is REGISTERED_MODES["supervised"]
    assert model.mode_name == "supervised" and "supervised" not in MODES   # needs labels
    with pytest.raises(CPGBNInputError, match="inference must be one of"):
        CPGBN(inference="supervised").fit(["a b c d"] * 4)
    with pytest.raises(CPGBNInputError, match="no inference mode is named 'nope'"):
        registered_mode("nope")
    calls = []
    checked = cpgbn.model.run_settings
    monkeypatch.setattr(cpgbn.model, "run_settings",
                        lambda params, mode: calls.append(1) or checked(params, mode))
    model.predict_proba(test_texts)
    model.score(test_texts, test_labels)
    model.softmax_inputs(test_texts[:3])
    assert calls == []   # the fit's check stands while the parameters do
