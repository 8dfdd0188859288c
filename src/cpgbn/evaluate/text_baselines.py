"""Strong n-gram baselines for text classification, as scikit-learn pipelines: text in, labels out.

Every baseline is a two-step :class:`~sklearn.pipeline.Pipeline` over raw strings: ``ngrams``
(a scikit-learn vectorizer that splits text with the library's tokenizer,
:func:`cpgbn.text.tokenize.tokenize`, so a baseline and CPGBN see the same tokens) and
``classifier``.  Build one by name:

>>> from cpgbn.evaluate.text_baselines import make_baseline
>>> model = make_baseline("nbsvm-bigram", random_state=0)          # doctest: +SKIP
>>> model.fit(train_texts, train_labels).score(test_texts, test_labels)  # doctest: +SKIP

A name is ``<model>-<n-grams>``; ``unigram`` bags hold single tokens, ``bigram`` bags tokens and
pairs of adjacent tokens, ``trigram`` bags 1-, 2- and 3-grams (the usual meaning of "bigram" in
these tables: Wang & Manning's "NBSVM-bi" and Johnson & Zhang's "bow2" hold unigrams too).

========  ==============================================  ================================
model     features                                        classifier
========  ==============================================  ================================
``svm``   tf-idf: (1 + log tf) * idf, rows L2-normalised  ``LinearSVC(C=1)`` (squared hinge)
``lr``    the same tf-idf                                 ``LogisticRegression(C=1)`` (lbfgs)
``nbsvm`` binary (n-gram present or not)                  :class:`NBSVMClassifier`
``mnb``   binary                                          ``MultinomialNB(alpha=1)``
========  ==============================================  ================================

``svm`` and ``lr`` take scikit-learn's defaults (C = 1, chosen by no data); ``nbsvm`` and
``mnb`` are Wang & Manning's (2012) settings (binarised features, alpha = 1, C = 1,
beta = 0.25).  Tune any of them with ``GridSearchCV`` on the step names, e.g.
``{"classifier__C": [0.1, 1, 10]}``.  ``svm``, ``lr`` and ``nbsvm`` have
``decision_function``, ``lr`` and ``mnb`` ``predict_proba``.  A seed (``random_state``) gives
the same model on every run (only the SVMs' coordinate descent draws random numbers).

Only NBSVM's log-count-ratio scaling and its weight interpolation are written here
(:func:`log_count_ratio`, :func:`interpolate_weights`, :class:`NBSVMClassifier`); everything
else is scikit-learn.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import LabelEncoder
from sklearn.svm import LinearSVC
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import CPGBNInputError, check_int, check_positive
from ..text.tokenize import tokenize

__all__ = ["BASELINES", "Baseline", "NBSVMClassifier", "baseline_names", "interpolate_weights",
           "log_count_ratio", "make_baseline", "ngram_vectorizer"]

#: n-gram bag name -> the largest n (the bag holds every n-gram from 1 to it)
NGRAMS = {"unigram": 1, "bigram": 2, "trigram": 3}
WEIGHTINGS = ("tfidf", "binary")


def ngram_vectorizer(max_n: int, *, weighting: str = "tfidf"):
    """A scikit-learn vectorizer of 1- to ``max_n``-grams of :func:`~cpgbn.text.tokenize.tokenize`'s
    tokens (n-grams do not cross documents; every n-gram of the training texts is a feature).

    ``weighting="tfidf"``: ``TfidfVectorizer(sublinear_tf=True)``, (1 + log tf) * smoothed idf
    with every row scaled to unit L2 norm; ``"binary"``: ``CountVectorizer(binary=True)``, 1 where
    the n-gram occurs in the document.  The tokenizer lower-cases, so the vectorizer does not.
    """
    max_n = check_int("max_n", max_n, 1)
    common = dict(tokenizer=tokenize, lowercase=False, token_pattern=None,
                  ngram_range=(1, max_n), dtype=np.float64)
    if weighting == "tfidf":
        return TfidfVectorizer(sublinear_tf=True, **common)
    if weighting == "binary":
        return CountVectorizer(binary=True, **common)
    raise CPGBNInputError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")


# ----------------------------------------------------------------------------- NBSVM
def log_count_ratio(X, positive, *, alpha: float = 1.0) -> np.ndarray:
    """Wang & Manning's (2012, section 2) log-count ratio of each feature, for one class.

    With f^(i) the binarised feature vector of document i (``X > 0``), ``positive`` a boolean
    per document (the class against the rest) and alpha the smoothing,

        p = alpha + sum_{i: positive} f^(i),     q = alpha + sum_{i: not positive} f^(i),
        r = log( (p / ||p||_1) / (q / ||q||_1) ),

    which equals the NumPy expression ``np.log((p / p.sum()) / (q / q.sum()))``.  ``X``: a
    documents x features array or sparse matrix of non-negative counts.  Returns r, shape
    (n_features,).
    """
    presence = (sp.csr_matrix(X) > 0).astype(np.float64)
    positive = np.asarray(positive, dtype=bool)
    p = alpha + np.asarray(presence[positive].sum(axis=0)).ravel()
    q = alpha + np.asarray(presence[~positive].sum(axis=0)).ravel()
    return np.log(p / p.sum()) - np.log(q / q.sum())


def interpolate_weights(w, beta: float) -> np.ndarray:
    """Wang & Manning's (2012, section 2.3) interpolation of SVM weights with their mean magnitude:

        w' = (1 - beta) * w_bar + beta * w,      w_bar = ||w||_1 / |V|,

    with |V| the number of weights (``(1 - beta) * np.abs(w).mean() + beta * w``).  The mean
    magnitude is the same positive number for every feature, so on features scaled by r it pulls
    the classifier towards multinomial naive Bayes (whose weights are r); beta = 1 leaves the SVM.
    :class:`NBSVMClassifier` passes the SVM's bias as the last weight.
    """
    w = np.asarray(w, dtype=np.float64)
    return (1.0 - beta) * np.abs(w).mean() + beta * w


class NBSVMClassifier(ClassifierMixin, BaseEstimator):
    """NBSVM (Wang & Manning, "Baselines and bigrams", ACL 2012): a linear SVM on binarised
    features scaled by the naive-Bayes log-count ratio, with its weights interpolated towards
    their mean magnitude.

    For each class c against the rest: f^(i) = 1{x^(i) > 0} (binarised counts); r_c =
    :func:`log_count_ratio` of f for c (smoothing ``alpha``); an L2-regularised squared-hinge
    linear SVM (``LinearSVC(C=C)``, liblinear, as the paper's) is trained on x^(i) = r_c o f^(i)
    with the target "class c", giving weights w and bias b; then

        (w'_c, b'_c) = interpolate_weights((w, b), beta),   score_c = w'_c . (r_c o f) + b'_c.

    The bias is interpolated with the weights, as one more weight: liblinear (the paper's
    solver, and scikit-learn's ``LinearSVC`` with ``intercept_scaling=1``) learns b as the weight
    of a constant feature equal to 1, so w = (w_1, ..., w_|V|, b) and |V| counts that feature.
    The paper's formula does not say which.  With bigram bags this reading comes within 0.3
    points of the paper's MR and SUBJ numbers (79.1 and 93.1 against 79.4 and 93.2), where the
    other, b' = b, gives 78.8 and 91.6, and 88.0 against 92.0 on TREC; on MR's unigram bag the
    kept bias did better (78.3 against 77.2); docs/results.md says more.

    Two classes need one such model (c = ``classes_[1]``, the score's sign decides, as
    scikit-learn's binary classifiers); more classes are one-vs-rest, a log-count ratio per
    class, and the highest score wins.  The paper's defaults: alpha = 1, C = 1, beta = 0.25.

    Input: a documents x features matrix of non-negative counts (dense or sparse), e.g. from
    ``ngram_vectorizer(2, weighting="binary")``.  Fitted attributes, one row per binary problem:
    ``log_count_ratio_`` (r), ``coef_`` and ``intercept_`` (w' and b', in the space scaled by
    r), ``svm_coef_`` and ``svm_intercept_`` (the SVM's w and b before the interpolation); and
    ``classes_``, ``n_features_in_``, ``n_iter_`` (the most coordinate-descent iterations any
    problem's SVM took).
    """

    def __init__(self, *, alpha: float = 1.0, beta: float = 0.25, C: float = 1.0,
                 max_iter: int = 10000, random_state=None):
        self.alpha = alpha
        self.beta = beta
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    def _check_params(self) -> None:
        check_positive("alpha", self.alpha)
        check_positive("C", self.C)
        check_int("max_iter", self.max_iter, 1)
        if isinstance(self.beta, bool) or not isinstance(self.beta, Real) \
                or not 0.0 <= self.beta <= 1.0:
            raise CPGBNInputError(f"beta must be a number in [0, 1], got {self.beta!r}")

    def fit(self, X, y):
        """Fit one interpolated SVM per binary problem (one for two classes, one per class else)."""
        self._check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise CPGBNInputError(f"NBSVM needs at least 2 classes, got one class "
                                  f"({self.classes_[0]})")
        values = X.data if sp.issparse(X) else X
        if values.size and values.min() < 0:
            raise CPGBNInputError("Negative values in data passed to NBSVMClassifier, which "
                                  "needs non-negative counts")
        codes = encoder.transform(y)
        presence = (sp.csr_matrix(X) > 0).astype(np.float64)
        problems = [1] if len(self.classes_) == 2 else range(len(self.classes_))
        ratios, weights, iterations = [], [], []
        for code in problems:
            positive = codes == code
            r = log_count_ratio(presence, positive, alpha=self.alpha)
            svm = LinearSVC(C=self.C, loss="squared_hinge", intercept_scaling=1.0,
                            max_iter=self.max_iter, random_state=self.random_state)
            svm.fit(presence.multiply(r).tocsr(), positive)
            ratios.append(r)
            # the bias is the weight of liblinear's constant feature (intercept_scaling = 1)
            weights.append(np.append(svm.coef_.ravel(), svm.intercept_[0]))
            iterations.append(int(svm.n_iter_))
        weights = np.vstack(weights)
        mixed = np.vstack([interpolate_weights(w, self.beta) for w in weights])
        self.log_count_ratio_ = np.vstack(ratios)
        self.svm_coef_, self.svm_intercept_ = weights[:, :-1], weights[:, -1]
        self.coef_, self.intercept_ = mixed[:, :-1], mixed[:, -1]
        self.n_iter_ = max(iterations)
        return self

    def decision_function(self, X):
        """w'_c . (r_c o f) + b'_c per document: shape (n,) for two classes (positive means
        ``classes_[1]``), (n, n_classes) otherwise."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        presence = (sp.csr_matrix(X) > 0).astype(np.float64)
        scores = presence @ (self.log_count_ratio_ * self.coef_).T + self.intercept_
        scores = np.asarray(scores)
        return scores.ravel() if len(self.classes_) == 2 else scores

    def predict(self, X):
        scores = self.decision_function(X)
        if len(self.classes_) == 2:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True  # counts; a negative value is refused
        tags.classifier_tags.poor_score = True  # binarised, continuous features lose their values
        return tags


# ----------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Baseline:
    """One named baseline: its model family, n-gram bag and one-line description."""
    name: str
    model: str
    ngrams: str
    description: str


_MODELS = {
    "svm": ("tfidf", "linear SVM (LinearSVC, C=1) on sublinear tf-idf"),
    "lr": ("tfidf", "logistic regression (lbfgs, C=1) on sublinear tf-idf"),
    "nbsvm": ("binary", "NBSVM (Wang & Manning 2012: alpha=1, C=1, beta=0.25) on binary"),
    "mnb": ("binary", "multinomial naive Bayes (alpha=1) on binary"),
}

#: name -> :class:`Baseline`, in the order of the tables: model family, then n-gram bag
BASELINES = {f"{model}-{ngrams}": Baseline(f"{model}-{ngrams}", model, ngrams,
                                           f"{text} {ngrams} bag (n-grams 1..{n})")
             for model, (_, text) in _MODELS.items() for ngrams, n in NGRAMS.items()}


def baseline_names() -> tuple[str, ...]:
    """The names :func:`make_baseline` knows, in the order of :data:`BASELINES`."""
    return tuple(BASELINES)


def _classifier(model: str, random_state):
    if model == "svm":
        return LinearSVC(C=1.0, random_state=random_state)
    if model == "lr":
        return LogisticRegression(C=1.0, max_iter=1000, random_state=random_state)
    if model == "nbsvm":
        return NBSVMClassifier(random_state=random_state)
    return MultinomialNB(alpha=1.0)


def make_baseline(name: str, *, random_state=None) -> Pipeline:
    """An unfitted baseline, a ``Pipeline([("ngrams", vectorizer), ("classifier", model)])`` over
    raw strings; ``name`` is one of :func:`baseline_names` (see the module docstring).
    ``random_state`` seeds the SVMs (``svm``, ``nbsvm``); the others draw nothing."""
    spec = BASELINES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise CPGBNInputError(f"unknown baseline {name!r}; the baselines are "
                              f"{', '.join(BASELINES)}")
    weighting, _ = _MODELS[spec.model]
    return Pipeline([("ngrams", ngram_vectorizer(NGRAMS[spec.ngrams], weighting=weighting)),
                     ("classifier", _classifier(spec.model, random_state))])
