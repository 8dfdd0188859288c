"""Evaluation on a user's own labelled documents: CPGBN against strong baselines on one set of
splits.

:func:`evaluate_files` reads ``label<TAB>text`` files (``.gz`` allowed); :func:`evaluate_labeled`
takes the ``(texts, labels)`` pairs themselves (a dataset's splits from
:func:`cpgbn.datasets.load_dataset`, say).  Every model is scored on the same splits, for every
seed:

* ``--test``-style: one fixed split, the training documents against the test documents;
* ``cv=k``: stratified k-fold cross-validation of the training documents, the folds of
  ``StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)`` (exactly those of
  :func:`cpgbn.datasets.fold_indices` and ``load_dataset(..., protocol="cv")``), one set of
  folds per seed.

The models, in the order of the table:

1. unsupervised CPGBN features and the protocol's classifier
   (:data:`~cpgbn.evaluate.protocols.PROTOCOLS`, :func:`~cpgbn.evaluate.protocols.make_classifier`):
   a :class:`~cpgbn.model.CPGBN` fitted to the training texts without their labels, the test
   texts' features inferred with its globals fixed; the training features come from the
   training chain (``features="inductive"``, the authors' code) or are inferred again like the
   test ones (``"inferred"``);
2. with ``supervised=True``, the supervised classifier :class:`cpgbn.classifier.CPGBNClassifier`
   (``fit(texts, labels)``, ``predict``, ``predict_proba``), and its discriminative baseline:
   the same encoder network trained by the cross-entropy alone (``generative=False``,
   ``classifier_input="hidden"``: a one-hot convolution, ReLU, mean over positions and a
   softmax, Johnson & Zhang's one-hot CNN), so that the table shows what the generative half
   adds;
3. the n-gram baselines of :mod:`cpgbn.evaluate.text_baselines` (by default
   :data:`DEFAULT_BASELINES`).

Each model is seeded with the run's seed.  Accuracy is given per split and as mean and
standard deviation (ddof = 1) over all folds and seeds together; the expected calibration error
(:mod:`cpgbn.evaluate.calibration`, 15 bins) for the models with ``predict_proba`` (logistic
regression, naive Bayes, the supervised CPGBN), None for the others (the SVMs).
"""
from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..datasets import fold_indices
from ..errors import CPGBNInputError, check_int, empty_document_error, warn_whitespace_twins
from ..model import CPGBN, DEFAULT_TOKEN_COUNT
from ..text.readers import read_labeled
from ..text.tokenize import tokenize
from .calibration import DEFAULT_BINS, expected_calibration_error
from .protocols import PROTOCOLS, make_classifier
from .provenance import provenance
from .text_baselines import BASELINES, make_baseline

__all__ = ["DEFAULT_BASELINES", "FEATURES", "evaluate_files", "evaluate_labeled", "table_text"]

#: The baselines evaluated unless others are named: each model family on the bigram bag.
DEFAULT_BASELINES = ("svm-bigram", "lr-bigram", "nbsvm-bigram", "mnb-bigram")
#: Where the training features of the unsupervised CPGBN come from (see the module docstring).
FEATURES = ("inductive", "inferred")


@dataclass(frozen=True)
class _Contender:
    """One model of the comparison: its name, kind, description, and how it is scored on a
    split (``score(seed, train, test) -> (accuracy, ece or None, fit s, predict s)``)."""

    name: str
    kind: str
    description: str
    score: Callable


# ----------------------------------------------------------------------------- scoring
def _score_predictions(model, x_test, y_test, n_bins):
    """(accuracy, ECE or None) of a fitted classifier on the test split."""
    y_test = np.asarray(y_test)
    accuracy = float(np.mean(np.asarray(model.predict(x_test)) == y_test))
    ece = None
    if hasattr(model, "predict_proba"):
        ece = expected_calibration_error(y_test, model.predict_proba(x_test), model.classes_,
                                         n_bins=n_bins)
    return accuracy, ece


def _text_classifier(new_model: Callable, n_bins: int) -> Callable:
    """The scorer of a classifier of raw texts built by ``new_model(seed)``."""
    def score(seed, train, test):
        model = new_model(seed)
        start = time.perf_counter()
        model.fit(list(train[0]), list(train[1]))
        fitted = time.perf_counter()
        accuracy, ece = _score_predictions(model, list(test[0]), test[1], n_bins)
        return accuracy, ece, fitted - start, time.perf_counter() - fitted
    return score


def _features_classifier(new_model: Callable, classifier: str, features: str,
                         n_bins: int) -> Callable:
    """The scorer of unsupervised features (``new_model(seed)``, a CPGBN) + ``classifier``."""
    def score(seed, train, test):
        model = new_model(seed)
        start = time.perf_counter()
        f_train = model.fit_transform(list(train[0]))
        if features == "inferred":
            f_train = model.transform(list(train[0]))
        f_test = model.transform(list(test[0]))
        fitted = time.perf_counter()
        clf = make_classifier(classifier, seed).fit(f_train, np.asarray(train[1]))
        accuracy, ece = _score_predictions(clf, f_test, test[1], n_bins)
        return accuracy, ece, fitted - start, time.perf_counter() - fitted
    return score


#: The supervised CPGBN's settings that its discriminative baseline shares (the network and
#: its training; not the generative model's)
_NETWORK = ("n_epochs", "learning_rate", "batch_size", "vocab_size", "filter_width",
            "validation_fraction", "patience", "classifier_dropout")


def _supervised_class():
    """:class:`cpgbn.classifier.CPGBNClassifier` (it needs PyTorch), imported when asked for."""
    from ..modes.runtime import require_torch
    require_torch("the supervised CPGBN (--supervised)")
    from ..classifier import CPGBNClassifier
    return CPGBNClassifier


# ----------------------------------------------------------------------------- checks
def _check_classes(labels, name: str) -> Counter:
    counts = Counter(labels)
    if len(counts) < 2:
        [(label, n)] = counts.items()
        raise CPGBNInputError(f"{name}: every document has the label {label!r} ({n} "
                              f"document(s)); classification needs at least 2 classes")
    warn_whitespace_twins(sorted(counts), name)
    return counts


def _check_folds(counts: Counter, cv: int, name: str) -> None:
    label, n = min(counts.items(), key=lambda item: (item[1], item[0]))
    if n < cv:
        raise CPGBNInputError(f"{name}: class {label!r} has {n} document(s), fewer than the {cv} "
                              f"cross-validation folds; use fewer folds or more documents")


def _check_test_classes(train_counts: Counter, test_labels, train_name: str,
                        test_name: str) -> None:
    unknown = Counter(y for y in test_labels if y not in train_counts)
    if unknown:
        listed = ", ".join(f"{label!r} ({n} document(s))" for label, n in sorted(unknown.items()))
        known = ", ".join(map(repr, sorted(train_counts)))
        raise CPGBNInputError(f"{test_name}: class(es) {listed} not in the training file "
                              f"{train_name} (classes {known})")


def _check_no_empty(texts, name: str) -> None:
    empty = [i for i, text in enumerate(texts, start=1) if not tokenize(text)]
    if empty:
        raise empty_document_error(empty[0], len(empty), name)


def _baseline_names(baselines) -> tuple[str, ...]:
    names = tuple(baselines)
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise CPGBNInputError(f"unknown baseline {unknown[0]!r}; the baselines are "
                              f"{', '.join(BASELINES)}")
    if len(set(names)) != len(names):
        raise CPGBNInputError(f"a baseline is named twice in {', '.join(names)}")
    return names


def _pair(data, name: str):
    if not (isinstance(data, Sequence) and len(data) == 2):
        raise CPGBNInputError(f"{name} must be a pair (texts, labels)")
    texts, labels = list(data[0]), [str(y) for y in data[1]]
    if len(texts) != len(labels) or not texts:
        raise CPGBNInputError(f"{name}: {len(texts)} texts and {len(labels)} labels; give as "
                              f"many labels as texts, at least one")
    return texts, labels


# ----------------------------------------------------------------------------- the runs
def _splits(train, test, cv, seed):
    """Yield (split name, train pair, test pair, test rows or None) for one seed."""
    texts, labels = train
    if cv is None:
        yield "test", train, test, None
        return
    for fold in range(cv):
        train_rows, test_rows = fold_indices(labels, fold, cv, seed)
        yield (f"fold{fold}", ([texts[i] for i in train_rows], [labels[i] for i in train_rows]),
               ([texts[i] for i in test_rows], [labels[i] for i in test_rows]), test_rows)


def _summary(values) -> tuple[float | None, float | None]:
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def evaluate_labeled(train, test=None, *, cv: int | None = None, seeds=(0,), layers=(200,),
                     protocol: str = "authors", n_iter: int | None = None,
                     burn_in: int | None = None, features: str = "inductive",
                     vocab_size: int = 8000, token_count=DEFAULT_TOKEN_COUNT,
                     filter_width: int = 3, padding: int = 0, unsupervised: bool = True,
                     baselines=DEFAULT_BASELINES, supervised: bool = False,
                     supervised_params: dict | None = None, n_bins: int = DEFAULT_BINS,
                     n_threads=None, progress: bool = False, log=None,
                     names: tuple[str, str] = ("train", "test")) -> dict:
    """Score CPGBN and baselines on labelled documents; return a JSON-ready record.

    ``train`` and ``test``: pairs ``(texts, labels)``.  Give ``test`` for one fixed split, or
    ``cv`` (an integer >= 2) for stratified ``cv``-fold cross-validation of ``train``, not both
    (neither: 10 folds).  ``seeds``: one run of every model per seed (and, with ``cv``, one set
    of folds per seed).

    ``unsupervised``: the CPGBN features + classifier row, with ``layers``, ``filter_width``,
    ``vocab_size``, ``token_count``, ``padding`` and the sweeps ``n_iter``/``burn_in`` (default:
    the ``protocol``'s, which also names the classifier: "authors" an RBF SVC, "paper" a linear
    SVM); ``features``: "inductive" or "inferred" (module docstring).  ``baselines``: names from
    :data:`~cpgbn.evaluate.text_baselines.BASELINES` (empty: none).  ``supervised``: add
    :class:`cpgbn.classifier.CPGBNClassifier` with ``layers``, the seed, ``n_threads``,
    ``progress`` and ``supervised_params`` (e.g. ``{"n_epochs": 20}``).  ``n_bins``: the ECE's
    bins.  ``names``: what the messages call the training and test data (file names).
    ``log(message)``: called after each run.

    The record holds the settings, the splits (for ``cv``: per seed and fold the sizes and the
    sha256 of the test rows, 0-based positions in ``train``), per model the per-split accuracy,
    ECE (None without ``predict_proba``) and seconds, their mean and std over all splits and
    seeds, and the provenance (:func:`~cpgbn.evaluate.provenance.provenance`).
    """
    origin = provenance()   # before any work: the code this process imported
    train_name, test_name = names
    if test is not None and cv is not None:
        raise CPGBNInputError("give a test set or cv (cross-validation folds), not both")
    cv = 10 if test is None and cv is None else cv
    if cv is not None:
        cv = check_int("cv", cv, 2)
    seeds = [check_int("seed", s, 0) for s in seeds]
    if not seeds:
        raise CPGBNInputError("seeds must name at least one seed")
    if protocol not in PROTOCOLS:
        raise CPGBNInputError(f"protocol must be one of {sorted(PROTOCOLS)}, got {protocol!r}")
    if features not in FEATURES:
        raise CPGBNInputError(f"features must be one of {', '.join(FEATURES)} for labelled "
                              f"documents, got {features!r}")
    proto = PROTOCOLS[protocol]
    n_iter = proto.n_iter if n_iter is None else check_int("n_iter", n_iter, 1)
    burn_in = proto.burn_in if burn_in is None else check_int("burn_in", burn_in, 0)
    if unsupervised and burn_in >= n_iter:
        raise CPGBNInputError(f"burn_in must be < n_iter, got burn_in={burn_in}, n_iter={n_iter}")
    baselines = _baseline_names(baselines)
    train = _pair(train, train_name)
    train_counts = _check_classes(train[1], train_name)
    if test is not None:
        test = _pair(test, test_name)
        _check_test_classes(train_counts, test[1], train_name, test_name)
    else:
        _check_folds(train_counts, cv, train_name)
    layers = tuple(check_int("layer size", k, 1) for k in layers)
    supervised_class = _supervised_class() if supervised else None
    if unsupervised or supervised:
        _check_no_empty(train[0], train_name)

    contenders = []
    if unsupervised:
        def new_cpgbn(seed):
            return CPGBN(layers=layers, filter_width=filter_width, vocab_size=vocab_size,
                         token_count=token_count, padding=padding, n_iter=n_iter,
                         burn_in=burn_in, random_state=seed, n_threads=n_threads,
                         progress=progress)
        width = "-".join(map(str, layers))
        contenders.append(_Contender(
            f"cpgbn-{width} + {proto.classifier}", "unsupervised",
            f"unsupervised CPGBN-{width} ({n_iter} sweeps, {burn_in} burn-in; {features} "
            f"training features) + {proto.classifier}",
            _features_classifier(new_cpgbn, proto.classifier, features, n_bins)))
    if supervised:
        params = dict(supervised_params or {})

        def new_classifier(seed):
            return supervised_class(layers=layers, random_state=seed, n_threads=n_threads,
                                    progress=progress, **params)
        width = "-".join(map(str, layers))
        contenders.append(_Contender(
            f"supervised cpgbn-{width}", "supervised",
            f"cpgbn.classifier.CPGBNClassifier(layers={layers}"
            + "".join(f", {k}={v!r}" for k, v in params.items()) + ")",
            _text_classifier(new_classifier, n_bins)))

        def new_discriminative(seed):
            return supervised_class(layers=layers[:1], random_state=seed, n_threads=n_threads,
                                    progress=progress, generative=False,
                                    classifier_input="hidden",
                                    **{k: v for k, v in params.items() if k in _NETWORK})
        contenders.append(_Contender(
            f"one-hot cnn-{layers[0]}", "supervised",
            f"the classifier's network alone: CPGBNClassifier(layers=({layers[0]},), "
            "generative=False, classifier_input='hidden'), trained by cross-entropy",
            _text_classifier(new_discriminative, n_bins)))
    for name in baselines:
        contenders.append(_Contender(name, "baseline", BASELINES[name].description,
                                     _text_classifier(
                                         lambda seed, name=name: make_baseline(
                                             name, random_state=seed), n_bins)))
    if not contenders:
        raise CPGBNInputError("nothing to evaluate: no CPGBN row and no baseline")

    runs = {c.name: [] for c in contenders}
    splits, majority = [], []
    for seed in seeds:
        for split, part_train, part_test, test_rows in _splits(train, test, cv, seed):
            record = dict(seed=seed, split=split, n_train=len(part_train[1]),
                          n_test=len(part_test[1]))
            if test_rows is not None:
                record["test_rows_sha256"] = hashlib.sha256(
                    ",".join(map(str, test_rows)).encode()).hexdigest()
            splits.append(record)
            top = Counter(part_train[1]).most_common(1)[0][0]
            majority.append(float(np.mean(np.asarray(part_test[1]) == top)))
            for contender in contenders:
                accuracy, ece, fit_s, predict_s = contender.score(seed, part_train, part_test)
                runs[contender.name].append(dict(
                    seed=seed, split=split, accuracy=accuracy, ece=ece,
                    fit_seconds=round(fit_s, 3), predict_seconds=round(predict_s, 3)))
                if log is not None:
                    shown = "" if ece is None else f", ECE {ece:.3f}"
                    log(f"seed {seed} {split}: {contender.name}: accuracy {100 * accuracy:.1f} %"
                        f"{shown} ({fit_s + predict_s:.1f} s)")
    models = []
    for contender in contenders:
        rows = runs[contender.name]
        acc_mean, acc_std = _summary([r["accuracy"] for r in rows])
        ece_mean, ece_std = _summary([r["ece"] for r in rows])
        models.append(dict(
            name=contender.name, kind=contender.kind, description=contender.description,
            accuracy_mean=acc_mean, accuracy_std=acc_std, ece_mean=ece_mean, ece_std=ece_std,
            seconds=round(sum(r["fit_seconds"] + r["predict_seconds"] for r in rows), 2),
            runs=rows))
    if cv is None:
        split_rule = dict(kind="test", rule=f"train on {train_name}, test on {test_name}")
    else:
        split_rule = dict(kind="cv", folds=cv,
                          rule=f"StratifiedKFold(n_splits={cv}, shuffle=True, random_state=seed) "
                               f"over the documents of {train_name} in order")
    return dict(
        train=train_name, test=None if cv is not None else test_name,
        n_train=len(train[1]), n_test=None if test is None else len(test[1]),
        classes=sorted(train_counts), class_counts=dict(sorted(train_counts.items())),
        split=split_rule, seeds=seeds, splits=splits,
        settings=dict(layers=list(layers), protocol=protocol, classifier=proto.classifier,
                      n_iter=n_iter, burn_in=burn_in, features=features, vocab_size=vocab_size,
                      token_count=token_count, filter_width=filter_width, padding=padding,
                      supervised_params=dict(supervised_params or {}), ece_bins=n_bins,
                      unsupervised=bool(unsupervised), supervised=bool(supervised),
                      baselines=list(baselines)),
        majority_accuracy=float(np.mean(majority)),
        models=models, **origin)


def evaluate_files(train_path, test_path=None, *, cv: int | None = None, **kwargs) -> dict:
    """:func:`evaluate_labeled` on ``label<TAB>text`` files (``.gz`` allowed), read with
    :func:`cpgbn.text.readers.read_labeled`; messages and the record name the files.  Every
    check of the files (missing, one class, too few documents of a class for the folds, a test
    class the training file lacks) is made before any model is fitted."""
    if test_path is not None and cv is not None:
        raise CPGBNInputError("give a test file or cv (cross-validation folds), not both")
    train = read_labeled(train_path)
    test = None if test_path is None else read_labeled(test_path)
    names = (str(train_path), "test" if test_path is None else str(test_path))
    return evaluate_labeled(train, test, cv=cv, names=names, **kwargs)


def _mean_spread(mean: float, std: float, n_values: int, digits: int) -> str:
    """``mean +- std``, or the mean alone when it is of one value: the record's std of one
    value is 0.0, which printed as "+- 0.0" would read as a measured spread of zero."""
    if n_values > 1:
        return f"{mean:.{digits}f} +- {std:.{digits}f}"
    return f"{mean:.{digits}f}"


def table_text(record: dict) -> str:
    """The record of :func:`evaluate_labeled` as a plain-text table: per model the accuracy
    (mean +- std over all splits and seeds, in %; the value alone for one run), the ECE (the
    same; "-" without probabilities) and the seconds of all its runs together."""
    split = record["split"]
    n_splits = len(record["splits"])
    how = (f"{split['folds']}-fold stratified cross-validation" if split["kind"] == "cv"
           else f"test set {record['test']} ({record['n_test']} documents)")
    lines = [f"{record['train']}: {record['n_train']} documents, {len(record['classes'])} "
             f"classes; {how}; seeds {','.join(map(str, record['seeds']))} "
             f"({n_splits} run(s) per model)"]
    rows = [("model", "accuracy %", "ECE", "seconds")]
    for m in record["models"]:
        n_ece = sum(r["ece"] is not None for r in m["runs"])
        rows.append((m["name"],
                     _mean_spread(100 * m["accuracy_mean"], 100 * m["accuracy_std"],
                                  len(m["runs"]), 1),
                     "-" if m["ece_mean"] is None
                     else _mean_spread(m["ece_mean"], m["ece_std"], n_ece, 3),
                     f"{m['seconds']:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        lines.append(f"{row[0]:<{widths[0]}}  " + "  ".join(
            f"{cell:>{w}}" for cell, w in zip(row[1:], widths[1:])))
    lines.append(f"(majority class: {100 * record['majority_accuracy']:.1f} %; ECE over "
                 f"{record['settings']['ece_bins']} equal-width bins of the top-class "
                 f"probability)")
    return "\n".join(lines)
