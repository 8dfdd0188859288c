"""The two evaluation protocols of the notes (section 5), as one function.

* ``authors`` -- what the authors' released code does: fixed splits (MR test = first 500 lines
  of each class, SUBJ test = last 500 of each class, TREC official), 200 sweeps with 150 burn-in
  (50 collected) for training and for test documents, ``sklearn.svm.SVC()`` defaults (RBF, C=1)
  on theta^(1) / L_j.
* ``paper`` -- what the paper's text says: 500 burn-in + 200 collected sweeps, a linear SVM on
  theta^(1), 10-fold cross-validation for MR and SUBJ, the official split for TREC and IMDB.
  The linear SVM is ``LinearSVC(C=1)`` after standardising the features (the paper gives no C).

Where the features come from is a separate choice (``features``), recorded with every number:

* ``inductive`` (the authors' code): training features from the training chain (fit_transform),
  test features from inference with the learned globals fixed (notes section 4);
* ``inferred``: training features inferred again with the learned globals fixed, exactly as the
  test features are, so the classifier is trained and tested on features of one kind (the
  paper's text: "collect 200 MCMC samples after 500 burn-ins to estimate the posterior mean of
  w_j for every document in both the training and testing sets");
* ``transductive``: one unsupervised fit over the training and test texts together (labels unseen).

Every number is returned with the settings that produced it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC

from ..baselines import LDAFeatures
from ..datasets import dataset_info, fold_indices, load_dataset
from ..errors import CPGBNInputError
from ..model import CPGBN, DEFAULT_TOKEN_COUNT
from ..pgbn import PGBN
from .provenance import provenance


@dataclass(frozen=True)
class Protocol:
    name: str
    n_iter: int
    burn_in: int
    classifier: str
    cross_validation: bool


PROTOCOLS = {
    "authors": Protocol("authors", n_iter=200, burn_in=150, classifier="rbf-svc", cross_validation=False),
    "paper": Protocol("paper", n_iter=700, burn_in=500, classifier="linear-svm", cross_validation=True),
}


def make_classifier(kind: str, seed: int):
    if kind == "rbf-svc":
        return SVC()
    if kind == "linear-svm":
        return make_pipeline(StandardScaler(), LinearSVC(C=1.0, max_iter=20000, random_state=seed))
    raise CPGBNInputError(f"unknown classifier {kind!r}")


def _uses_folds(dataset: str, protocol: Protocol) -> bool:
    """Whether the protocol scores this dataset by 10-fold CV (MR and SUBJ have no official split)."""
    return protocol.cross_validation and dataset in ("mr", "subj")


def _splits(dataset: str, protocol: Protocol, data_dir, seed: int):
    """Yield (split_name, (train_texts, train_labels), (test_texts, test_labels))."""
    if _uses_folds(dataset, protocol):
        for fold in range(10):
            train = load_dataset(dataset, "train", data_dir=data_dir, protocol="cv", fold=fold,
                                 n_folds=10, seed=seed)
            test = load_dataset(dataset, "test", data_dir=data_dir, protocol="cv", fold=fold,
                                n_folds=10, seed=seed)
            yield f"fold{fold}", train, test
    else:
        yield "fixed", load_dataset(dataset, "train", data_dir=data_dir), \
            load_dataset(dataset, "test", data_dir=data_dir)


MODELS = ("cpgbn", "pgbn", "lda")


def _make_model(kind, *, layers, filter_width, vocab_size, token_count, eta, n_iter, burn_in, seed,
                n_threads, progress, device=None, model_params=None, estimator=None):
    if model_params is not None and not isinstance(model_params, dict):
        raise CPGBNInputError(f"model_params must be a dict, got {type(model_params).__name__}")
    model_params = dict(model_params or {})
    if kind == "lda":
        if len(layers) != 1:
            raise CPGBNInputError(f"LDA has one layer, got layers={layers}")
        if model_params:
            raise CPGBNInputError(f"model_params are for CPGBN and PGBN, got {model_params} for LDA")
        if estimator is not None:
            raise CPGBNInputError(f"estimator must be a subclass of CPGBN or PGBN, got "
                                  f"{estimator!r} for LDA")
        return LDAFeatures(layers[0], vocab_size, n_iter=min(n_iter, 100), seed=seed)
    cls = {"cpgbn": CPGBN, "pgbn": PGBN}.get(kind)
    if cls is None:
        raise CPGBNInputError(f"model must be one of {MODELS}, got {kind!r}")
    if estimator is not None:
        if not (isinstance(estimator, type) and issubclass(estimator, cls)):
            raise CPGBNInputError(f"estimator must be a subclass of {cls.__name__} for "
                                  f"model={kind!r}, got {estimator!r}")
        cls = estimator
    extra = {} if kind == "pgbn" else {"filter_width": filter_width}
    fixed = {"layers", "vocab_size", "token_count", "eta", "n_iter", "burn_in", "random_state",
             "n_threads", "progress", "device", "filter_width"}
    clash = sorted(fixed & set(model_params))
    if clash:
        raise CPGBNInputError(f"model_params may not set {clash}: evaluate() has its own arguments")
    valid = set(cls().get_params())
    unknown = sorted(set(model_params) - valid)
    if unknown:
        raise CPGBNInputError(f"model_params has unknown {cls.__name__} parameters {unknown}")
    if "transform_iter" in valid:
        # the protocol's sweeps for the test documents too (the estimator's default is
        # shorter: cpgbn.settings.TRANSFORM_SWEEPS), unless model_params says otherwise
        model_params = {"transform_iter": n_iter, "transform_burn_in": burn_in, **model_params}
    return cls(layers=tuple(layers), vocab_size=vocab_size, token_count=token_count, eta=eta,
               n_iter=n_iter, burn_in=burn_in, random_state=seed, n_threads=n_threads,
               progress=progress, device=device, **extra, **model_params)


FEATURES = ("inductive", "inferred", "transductive")


def _inductive_splits(dataset, proto, data_dir, seed, new_estimator, reinfer_train=False):
    """Per split: fit on the training texts, infer the test texts with the globals fixed (and,
    with ``reinfer_train``, the training texts too instead of reading them off the chain)."""
    for split_name, (x_train, y_train), (x_test, y_test) in _splits(dataset, proto, data_dir, seed):
        estimator = new_estimator()
        start = time.perf_counter()
        f_train = estimator.fit_transform(x_train)
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        if reinfer_train:
            f_train = estimator.transform(x_train)
        f_test = estimator.transform(x_test)
        yield (split_name, estimator, (f_train, y_train), (f_test, y_test),
               (fit_seconds, time.perf_counter() - start))


def _transductive_splits(dataset, proto, data_dir, seed, new_estimator):
    """One unsupervised fit on the training and test texts together; every split's features are
    rows of that chain (no label is seen).  Cross-validation folds share the one fit."""
    if _uses_folds(dataset, proto):
        texts, labels = load_dataset(dataset, "all", data_dir=data_dir)
        folds = [(f"fold{fold}",) + fold_indices(labels, fold, 10, seed) for fold in range(10)]
    else:
        [(_, (x_train, y_train), (x_test, y_test))] = _splits(dataset, proto, data_dir, seed)
        texts, labels = list(x_train) + list(x_test), list(y_train) + list(y_test)
        folds = [("fixed", list(range(len(x_train))), list(range(len(x_train), len(texts))))]
    estimator = new_estimator()
    start = time.perf_counter()
    features = estimator.fit_transform(texts)
    fit_seconds = time.perf_counter() - start
    labels = np.asarray(labels)
    for split_name, train, test in folds:
        yield (split_name, estimator, (features[train], labels[train]),
               (features[test], labels[test]), (fit_seconds, 0.0))


def evaluate(dataset: str, *, layers=(200,), protocol: str = "authors", seeds=(0,), data_dir=None,
             vocab_size: int | None = None, token_count=DEFAULT_TOKEN_COUNT, n_iter: int | None = None,
             burn_in: int | None = None, filter_width: int = 3, eta=0.05, n_threads=None,
             progress: bool = False, log=None, save_model=None, model: str = "cpgbn",
             device=None, features: str = "inductive", model_params: dict | None = None,
             estimator: type | None = None) -> dict:
    """Train on the training split, infer the test split, score an SVM; repeat for each seed.

    Returns a JSON-ready dict: settings, per-run accuracy, timing and (CPGBN, PGBN) the training
    chain's mixing diagnostic (:meth:`cpgbn.inference.mixing.Mixing.as_record`), mean and std.
    ``save_model``: a directory where the model of the last run is saved.  ``model``: "cpgbn",
    or a baseline in the same harness: "pgbn" (bag-of-words PGBN, token_count multiplies the
    word counts) or "lda" (scikit-learn, at most 100 variational iterations).  ``device``: None
    for the numba sampler, or a torch device for the PyTorch one (CPGBN and PGBN only).
    ``features``: "inductive" (training features from the training chain, test features
    inferred with the globals fixed, as the authors' code does), "inferred" (the training
    features are inferred again with the globals fixed, as the test features are; this costs one
    more inference over the training texts) or "transductive" (one fit on the training and test
    texts together, both feature sets from that chain).  See the module docstring.
    ``model_params``: further estimator parameters, e.g. ``{"sample_r": False}`` (recorded).
    ``estimator``: a subclass of the ``model``'s class (CPGBN or PGBN) to evaluate in its place,
    with the same parameters (e.g. one whose sampler draws on another backend); its name is
    recorded.
    """
    origin = provenance()  # before any work: the code this process imported
    dataset = dataset.lower()
    if protocol not in PROTOCOLS:
        raise CPGBNInputError(f"protocol must be one of {sorted(PROTOCOLS)}, got {protocol!r}")
    proto = PROTOCOLS[protocol]
    if features not in FEATURES:
        raise CPGBNInputError(f"features must be one of {FEATURES}, got {features!r}")
    info = dataset_info(dataset)
    # the paper's V_pre words, plus the out-of-vocabulary row (id 0)
    vocab_size = vocab_size or info["vocab_size"] + 1
    n_iter = n_iter or proto.n_iter
    burn_in = proto.burn_in if burn_in is None else burn_in
    runs = []
    for seed in seeds:
        def new_estimator():
            return _make_model(model, layers=layers, filter_width=filter_width,
                               vocab_size=vocab_size, token_count=token_count, eta=eta,
                               n_iter=n_iter, burn_in=burn_in, seed=seed, n_threads=n_threads,
                               progress=progress, device=device, model_params=model_params,
                               estimator=estimator)
        splits = (_transductive_splits(dataset, proto, data_dir, seed, new_estimator)
                  if features == "transductive" else
                  _inductive_splits(dataset, proto, data_dir, seed, new_estimator,
                                    reinfer_train=features == "inferred"))
        for split_name, fitted, (f_train, y_train), (f_test, y_test), seconds in splits:
            classifier = make_classifier(proto.classifier, seed).fit(f_train, y_train)
            accuracy = float(classifier.score(f_test, np.asarray(y_test)))
            run = dict(seed=int(seed), split=split_name, accuracy=accuracy,
                       fit_seconds=round(seconds[0], 2), transform_seconds=round(seconds[1], 2),
                       median_sweep_seconds=(float(np.median(fitted.sweep_seconds_))
                                             if len(fitted.sweep_seconds_) else None),
                       n_train=len(y_train), n_test=len(y_test))
            # CPGBN and PGBN: the training chain's (LDA has none)
            mixing = None if model == "lda" else fitted.recorded("mixing_")
            if mixing is not None:
                run["mixing"] = mixing.as_record()
            runs.append(run)
            if save_model is not None and model != "lda":
                fitted.save(save_model)
            if log is not None:
                log(f"{dataset} {model} layers={'-'.join(map(str, layers))} seed={seed} {split_name}: "
                    f"accuracy {accuracy:.4f} (fit {seconds[0]:.0f}s)")
    per_seed = {}
    for run in runs:
        per_seed.setdefault(run["seed"], []).append(run["accuracy"])
    seed_means = np.array([np.mean(v) for v in per_seed.values()])
    return dict(
        dataset=dataset, model=model, layers=list(layers), protocol=protocol, classifier=proto.classifier,
        n_iter=n_iter, burn_in=burn_in, vocab_size=vocab_size, token_count=token_count,
        filter_width=filter_width, eta=eta, seeds=[int(s) for s in seeds],
        features=features,
        model_params=dict(model_params or {}),
        **({} if estimator is None else
           {"estimator": f"{estimator.__module__}.{estimator.__qualname__}"}),
        device=None if device is None or model == "lda" else str(device),
        accuracy_mean=float(seed_means.mean()),
        accuracy_std=float(seed_means.std(ddof=1)) if len(seed_means) > 1 else 0.0,
        runs=runs, **origin,
    )
