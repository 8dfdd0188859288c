"""The n-gram baselines (cpgbn.evaluate.text_baselines): NBSVM's formulas by hand, word order
seen by the bigram bags only, the registry, scikit-learn's conventions (clone, GridSearchCV)."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from cpgbn.errors import CPGBNInputError
from cpgbn.evaluate.text_baselines import (BASELINES, NBSVMClassifier, baseline_names,
                                           interpolate_weights, log_count_ratio, make_baseline,
                                           ngram_vectorizer)
from cpgbn.text.tokenize import tokenize

FILLER = [f"w{i:02d}" for i in range(30)]


def order_corpus(n_docs, seed, phrases=None):
    """Documents of 6-10 filler words with one phrase inserted at a random place; the label is
    the phrase's class.  The default phrases use the same two words in either order ("not good"
    for "neg", "good not" for "pos"), so a bag of single words carries no label at all."""
    phrases = phrases or {"neg": ["not good"], "pos": ["good not"]}
    rng = np.random.default_rng(seed)
    labels = sorted(phrases)
    texts, y = [], []
    for i in range(n_docs):
        label = labels[i % len(labels)]
        words = list(rng.choice(FILLER, size=int(rng.integers(6, 11))))
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(phrases[label])))
        texts.append(" ".join(words))
        y.append(label)
    return texts, np.array(y)


THREE_CLASSES = {"red": ["apple pie", "pie cherry"], "green": ["pie apple", "cherry jam"],
                 "blue": ["jam cherry", "cherry pie"]}


# ----------------------------------------------------------------------------- NBSVM by hand
def test_log_count_ratio_equals_the_hand_computation():
    counts = np.array([[2, 0, 1], [1, 1, 0], [0, 1, 1], [0, 0, 1]])
    positive = np.array([True, True, False, False])
    # binarised: [[1,0,1],[1,1,0],[0,1,1],[0,0,1]]; p = 1 + (2,1,1) = (3,2,2), |p| = 7;
    # q = 1 + (0,1,2) = (1,2,3), |q| = 6; r = log((p/7) / (q/6))
    expected = np.log([(3 / 7) / (1 / 6), (2 / 7) / (2 / 6), (2 / 7) / (3 / 6)])
    np.testing.assert_allclose(log_count_ratio(counts, positive), expected, rtol=1e-12)
    np.testing.assert_allclose(log_count_ratio(sp.csr_matrix(counts), positive), expected,
                               rtol=1e-12)
    # alpha = 0.5: p = (2.5, 1.5, 1.5), |p| = 5.5; q = (0.5, 1.5, 2.5), |q| = 4.5
    half = np.log(np.array([2.5, 1.5, 1.5]) / 5.5) - np.log(np.array([0.5, 1.5, 2.5]) / 4.5)
    np.testing.assert_allclose(log_count_ratio(counts, positive, alpha=0.5), half, rtol=1e-12)


def test_interpolate_weights_equals_the_hand_computation():
    w = np.array([1.0, -3.0, 2.0])   # ||w||_1 / |V| = 6 / 3 = 2
    np.testing.assert_allclose(interpolate_weights(w, 0.25), 0.75 * 2 + 0.25 * w)
    np.testing.assert_allclose(interpolate_weights(w, 0.25), [1.75, 0.75, 2.0])
    np.testing.assert_allclose(interpolate_weights(w, 1.0), w)


def test_nbsvm_is_an_svm_on_ratio_scaled_binary_features():
    texts, y = order_corpus(120, seed=1)
    counts = ngram_vectorizer(2, weighting="binary").fit_transform(texts) * 3  # counts > 1
    presence = (counts > 0).astype(float)
    positive = y == "pos"
    r = log_count_ratio(presence, positive)
    scaled = presence.multiply(r).tocsr()
    svm = LinearSVC(C=1.0, max_iter=10000, random_state=0).fit(scaled, positive)
    w, b = svm.coef_[0], svm.intercept_[0]
    plain = NBSVMClassifier(beta=1.0, random_state=0).fit(counts, y)   # no interpolation
    np.testing.assert_allclose(plain.log_count_ratio_[0], r)
    np.testing.assert_allclose(plain.coef_[0], w, rtol=1e-10)
    np.testing.assert_allclose(plain.decision_function(counts), svm.decision_function(scaled),
                               rtol=1e-10, atol=1e-12)
    model = NBSVMClassifier(random_state=0).fit(counts, y)            # beta = 0.25
    np.testing.assert_allclose(model.svm_coef_[0], w, rtol=1e-10)
    np.testing.assert_allclose(model.svm_intercept_[0], b, rtol=1e-10)
    # the bias is the last of |V| + 1 weights: w_bar = (||w||_1 + |b|) / (|V| + 1)
    w_bar = (np.abs(w).sum() + abs(b)) / (len(w) + 1)
    np.testing.assert_allclose(model.coef_[0], 0.75 * w_bar + 0.25 * w, rtol=1e-10)
    np.testing.assert_allclose(model.intercept_[0], 0.75 * w_bar + 0.25 * b, rtol=1e-10)
    np.testing.assert_allclose(model.decision_function(counts),
                               presence @ (r * model.coef_[0]) + model.intercept_[0],
                               rtol=1e-10, atol=1e-12)
    assert list(model.classes_) == ["neg", "pos"]
    assert ((model.decision_function(counts) > 0) == (model.predict(counts) == "pos")).all()


# ----------------------------------------------------------------------------- word order
@pytest.mark.parametrize("family", ["svm", "lr", "nbsvm", "mnb"])
def test_bigram_bags_see_word_order_and_unigram_bags_do_not(family):
    train, test = order_corpus(300, seed=2), order_corpus(300, seed=3)
    scores = {ngrams: make_baseline(f"{family}-{ngrams}", random_state=0).fit(*train).score(*test)
              for ngrams in ("unigram", "bigram", "trigram")}
    assert scores["unigram"] < 0.65, scores      # the word bags are the same for both classes
    assert scores["bigram"] > 0.95, scores
    assert scores["trigram"] > 0.9, scores


def test_the_vectorizer_uses_the_library_tokenizer():
    text = "Don't miss the co-writer/director's cut :-) !!"
    analyzer = make_baseline("svm-bigram").named_steps["ngrams"].build_analyzer()
    tokens = tokenize(text)
    assert analyzer(text) == tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]
    assert make_baseline("mnb-trigram").named_steps["ngrams"].ngram_range == (1, 3)


# ----------------------------------------------------------------------------- multiclass
@pytest.mark.parametrize("name", ["svm-bigram", "lr-bigram", "nbsvm-bigram", "mnb-bigram"])
def test_three_classes(name):
    train, test = order_corpus(240, 4, THREE_CLASSES), order_corpus(120, 5, THREE_CLASSES)
    model = make_baseline(name, random_state=0).fit(*train)
    assert list(model.classes_) == ["blue", "green", "red"]
    assert model.score(*test) > 0.95
    if hasattr(model, "decision_function"):
        assert model.decision_function(test[0]).shape == (120, 3)
    if hasattr(model, "predict_proba"):
        proba = model.predict_proba(test[0])
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        assert (model.classes_[proba.argmax(axis=1)] == model.predict(test[0])).all()


def test_nbsvm_has_one_log_count_ratio_per_class():
    texts, y = order_corpus(90, 6, THREE_CLASSES)
    vectorizer = ngram_vectorizer(2, weighting="binary")
    counts = vectorizer.fit_transform(texts)
    model = NBSVMClassifier(random_state=0).fit(counts, y)
    assert model.log_count_ratio_.shape == model.coef_.shape == (3, counts.shape[1])
    for row, label in enumerate(model.classes_):
        np.testing.assert_allclose(model.log_count_ratio_[row], log_count_ratio(counts, y == label))
    scores = model.decision_function(counts)
    assert (model.predict(counts) == model.classes_[scores.argmax(axis=1)]).all()


# ----------------------------------------------------------------------------- conventions
def test_registry():
    names = baseline_names()
    assert names == tuple(BASELINES) and len(names) == 12
    assert {"svm-unigram", "svm-bigram", "svm-trigram", "lr-unigram", "lr-bigram", "lr-trigram",
            "nbsvm-bigram", "mnb-bigram"} <= set(names)
    for name in names:
        model = make_baseline(name)
        assert isinstance(model, Pipeline) and list(model.named_steps) == ["ngrams", "classifier"]
        assert BASELINES[name].description
        has_proba = name.startswith(("lr-", "mnb-"))
        assert hasattr(model, "predict_proba") == has_proba, name
        assert hasattr(model, "decision_function") == (not name.startswith("mnb-")), name


@pytest.mark.parametrize("name", ["svm-trigram", "lr-bigram", "nbsvm-bigram", "mnb-bigram"])
def test_a_seed_gives_the_same_model_and_clone_gives_a_fresh_copy(name):
    train, test = order_corpus(150, 7), order_corpus(60, 8)

    def outputs(model):
        model.fit(*train)
        method = "predict_proba" if hasattr(model, "predict_proba") else "decision_function"
        return getattr(model, method)(test[0])

    original = make_baseline(name, random_state=3)
    first = outputs(original)
    np.testing.assert_array_equal(first, outputs(make_baseline(name, random_state=3)))
    copy = clone(original)   # clone copies parameters, never the fitted state, and pickles nothing
    assert not hasattr(copy.named_steps["ngrams"], "vocabulary_")
    assert copy.get_params()["ngrams__tokenizer"] is tokenize
    np.testing.assert_array_equal(first, outputs(copy))


def test_grid_search_over_the_step_parameters():
    texts, y = order_corpus(150, 9)
    grid = GridSearchCV(make_baseline("nbsvm-unigram", random_state=0),
                        {"ngrams__ngram_range": [(1, 1), (1, 2)],
                         "classifier__beta": [0.25, 1.0]}, cv=3, n_jobs=1).fit(texts, y)
    assert grid.best_params_["ngrams__ngram_range"] == (1, 2)
    assert grid.best_score_ > 0.95
    svm = GridSearchCV(make_baseline("svm-bigram", random_state=0), {"classifier__C": [0.1, 1.0]},
                       cv=3, n_jobs=1).fit(texts, y)
    assert svm.score(*order_corpus(60, 10)) > 0.95


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", ["svm-4gram", "nbsvm", "SVM-bigram", "", None, 3])
def test_an_unknown_name_is_a_one_line_error(name):
    with pytest.raises(CPGBNInputError) as info:
        make_baseline(name)
    message = str(info.value)
    assert "\n" not in message and "unknown baseline" in message and "nbsvm-bigram" in message


@pytest.mark.parametrize("params, words", [
    ({"alpha": 0}, "alpha"), ({"C": -1.0}, "C"), ({"beta": 1.5}, "beta"), ({"beta": "x"}, "beta"),
    ({"max_iter": 0}, "max_iter"),
])
def test_bad_nbsvm_parameters_are_one_line_errors(params, words):
    texts, y = order_corpus(30, 11)
    with pytest.raises(CPGBNInputError, match=words) as info:
        make_baseline("nbsvm-bigram").set_params(
            **{f"classifier__{k}": v for k, v in params.items()}).fit(texts, y)
    assert "\n" not in str(info.value)


def test_nbsvm_refuses_one_class_and_negative_counts():
    with pytest.raises(CPGBNInputError, match="at least 2 classes, got one class"):
        NBSVMClassifier().fit(np.ones((4, 3)), ["a"] * 4)
    with pytest.raises(CPGBNInputError, match="Negative values in data"):
        NBSVMClassifier().fit(-np.ones((4, 3)), ["a", "b"] * 2)
    with pytest.raises(CPGBNInputError, match="weighting"):
        ngram_vectorizer(2, weighting="counts")


@parametrize_with_checks([NBSVMClassifier(random_state=0)])
def test_nbsvm_passes_scikit_learn_estimator_checks(estimator, check, monkeypatch):
    # scikit-learn skips its array-API check (here with numpy's namespace) unless this is set;
    # it reads the variable when the check runs, and scipy's own dispatch is not needed for numpy
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    check(estimator)
