"""The supervised model: :class:`CPGBNClassifier` (sCPGBN, paper section 2.3), a phrase-topic
model that is also a classifier, with scikit-learn's conventions.

``CPGBNClassifier(layers=(200, 100, 50)).fit(texts, labels)`` trains CPGBN's Weibull
convolutional encoder with a softmax (on the concatenation of theta^(1..T) in the paper; by
default here on its pooled first hidden layer too: ``classifier_input``), on the loss
L = L_g + xi L_c per document (negative ELBO plus xi times the cross-entropy), and the globals
(kernels D, Phi^(2..T)) by TLASGR-MCMC (:mod:`cpgbn.modes.supervised`).  ``predict_proba`` is the
softmax of the encoder's mean path: deterministic, one forward pass per document.  Everything
CPGBN offers for reading a model (``phrases``, ``tree``, ``summary``, ``kernel_usage``) works
on a classifier too; :mod:`cpgbn.explain.classes` says which phrases push towards each class.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin

from . import blocks
from .errors import CPGBNInputError, one_line, warn_whitespace_twins
from .inference.checkpoint import fingerprint
from .inference.labels import is_missing_label
from .model import CPGBN
from .modes import Training, registered_mode
from .modes.supervised import SupervisedMode, softmax_input_of
from .params import CLASSIFIER_PARAMETERS, declare_init
from .text.documents import Documents, labels_per_document
from .text.stream import TextFile, scan_labels

__all__ = ["CPGBNClassifier", "check_labels", "shared_labels", "file_classes"]

def check_labels(labels, n_docs: int, *, semi_supervised: bool) -> tuple[np.ndarray, np.ndarray]:
    """(labels as an array, the sorted classes) of a supervised fit, or a one-line
    CPGBNInputError: not one label per document, a missing label (None, "" or NaN) when
    ``semi_supervised`` is False, fewer than two classes."""
    labels, missing = _labels_and_missing(labels, n_docs)
    if missing.any() and not semi_supervised:
        raise _missing_label_error(int(np.flatnonzero(missing)[0]), int(missing.sum()), n_docs)
    return labels, _classes_of(labels[~missing].tolist())


def shared_labels(labels, n_docs: int, first_doc: int, *, semi_supervised: bool,
                  communicator) -> tuple[np.ndarray, np.ndarray, str]:
    """One worker's part of :func:`check_labels` in a distributed fit: (this shard's labels as
    an array, the whole corpus' sorted classes, a digest of the corpus' labels), the classes
    and digest the same on every worker.  ``labels``: the shard's ``n_docs`` labels, whose
    first document has global id ``first_doc`` (a multiple of 32).

    Each worker sends what it found (an error, its first missing label's global number and
    how many are missing, its distinct labels, a digest per 32-document block); the root
    decides as one process does over the whole corpus, with the same one-line errors, and
    broadcasts; every worker raises the error, so none waits for the others in vain.  A
    worker's shard may hold one class only (a file sorted by label): the classes are the
    union.  The digest (the checkpoints' fingerprint) hashes the block digests in order, so it
    does not depend on the split (each label hashed as its string, not as an array whose
    width would be the shard's longest label)."""
    part = dict(error=None, first_missing=None, n_missing=0, n_docs=int(n_docs), distinct=[],
                blocks=[])
    try:
        labels, missing = _labels_and_missing(labels, n_docs)
        where = np.flatnonzero(missing)
        known = labels[~missing].tolist()
        part.update(first_missing=int(first_doc + where[0]) if len(where) else None,
                    n_missing=int(len(where)), distinct=list(dict.fromkeys(known)),
                    blocks=[fingerprint([str(v) for v in labels[lo:lo + blocks.DOC_BLOCK].tolist()])
                            for lo in range(0, len(labels), blocks.DOC_BLOCK)])
    except Exception as error:   # on every worker, below: none may wait for this one in vain
        part["error"] = one_line(error)
    parts = communicator.gather(part)
    shared = None
    if communicator.is_root:
        message = next((p["error"] for p in parts if p["error"] is not None), None)
        classes = digest = None
        firsts = [p["first_missing"] for p in parts if p["first_missing"] is not None]
        if message is None and firsts and not semi_supervised:
            message = str(_missing_label_error(min(firsts), sum(p["n_missing"] for p in parts),
                                               sum(p["n_docs"] for p in parts)))
        if message is None:
            try:
                classes = _classes_of([v for p in parts for v in p["distinct"]])
            except Exception as error:
                message = one_line(error)
            digest = fingerprint([b for p in parts for b in p["blocks"]])
        shared = (message, classes, digest)
    message, classes, digest = communicator.broadcast_object(shared)
    if message is not None:
        raise CPGBNInputError(message)
    return labels, classes, digest


def _labels_and_missing(labels, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels as an array, which are missing), or the error of labels absent or not one
    per document."""
    if labels is None:
        raise CPGBNInputError("CPGBNClassifier.fit needs labels: fit(X, y), or a labelled "
                              "TextFile (label<TAB>text lines)")
    labels = labels_per_document(labels, n_docs,
                                 dtype=object if isinstance(labels, list) else None)
    return labels, np.array([is_missing_label(v) for v in labels.tolist()], dtype=bool)


def _missing_label_error(first: int, n_missing: int, n_docs: int) -> CPGBNInputError:
    return CPGBNInputError(f"document {first + 1} has no label ({n_missing} of {n_docs} have "
                           "none); give every document a label, or set semi_supervised=True "
                           "to train on the unlabelled ones too")


def _classes_of(known: list) -> np.ndarray:
    """The sorted classes of the known labels, or the error of mixed types or fewer than two."""
    if len({type(v) for v in known}) > 1:
        raise CPGBNInputError("the labels mix types (" + ", ".join(sorted(
            {type(v).__name__ for v in known})) + "); give labels of one type")
    classes = np.unique(np.asarray(known))
    if len(classes) < 2:
        what = ("no labelled document" if len(classes) == 0
                else f"one class ({classes.tolist()[0]!r})")
        raise CPGBNInputError(f"a classifier needs at least 2 classes in y, got {what}")
    warn_whitespace_twins(classes.tolist(), "y")
    return classes


def file_classes(text_file: TextFile, *, block_lines: int | None = None,
                 semi_supervised: bool = False, scan=None) -> tuple[np.ndarray, str]:
    """(the sorted classes, a digest of the labels) of a labelled file, read one block at a
    time, or taken from ``scan`` (the file's :class:`~cpgbn.text.stream.LabelScan`, from the
    pass that built the vocabulary) without reading it again.  One-line errors: a file
    without labels, a line with an empty label unless ``semi_supervised`` (the reader's
    error, naming the line; with ``semi_supervised`` the
    file must say so, ``TextFile(..., missing_labels=True)``), fewer than two classes.  A
    warning when the labels come in runs (a file sorted by class): a streamed fit's
    minibatches come from blocks of ``block_lines`` consecutive lines (default
    :data:`cpgbn.blocks.STREAM_BLOCK_DOCS`)."""
    if block_lines is None:
        block_lines = blocks.STREAM_BLOCK_DOCS
    if not text_file.labeled:
        raise CPGBNInputError(f"{text_file.path} has no labels: a classifier reads "
                              "label<TAB>text lines (a .tsv file, or format='tsv')")
    if text_file.missing_labels and not semi_supervised:
        raise CPGBNInputError(f"{text_file.path} may hold unlabelled lines (missing_labels="
                              "True): set semi_supervised=True to train on them")
    if scan is None:
        scan = scan_labels(text_file, block_lines=block_lines)
    counts, changes, n = scan.counts, scan.changes, scan.n_labelled
    classes = np.array(sorted(counts))
    if len(classes) < 2:
        what = "no labelled line" if len(classes) == 0 else f"one ({classes.tolist()[0]!r})"
        raise CPGBNInputError(f"a classifier needs at least 2 classes, {text_file.path} has "
                              f"{what}")
    warn_whitespace_twins(classes.tolist(), str(text_file.path))
    shares = np.array(list(counts.values())) / max(n, 1)
    expected = (n - 1) * (1.0 - float(np.sum(shares ** 2)))   # in a shuffled file
    if n > 2 * block_lines and changes < 0.5 * expected:
        warnings.warn(f"the labels of {text_file.path} come in runs ({changes} changes between "
                      f"consecutive lines, about {expected:.0f} in a shuffled file): a streamed "
                      f"fit draws its minibatches from blocks of {block_lines} consecutive lines, "
                      "so they would hold one class at a time; shuffle the lines first (e.g. "
                      "shuf), or fit on the texts in memory", stacklevel=3)
    return classes, scan.digest


class CPGBNClassifier(ClassifierMixin, CPGBN):
    """sCPGBN: CPGBN with a softmax on its encoder, trained on L = L_g + xi L_c (paper
    section 2.3) by the hybrid inference (Weibull encoder + TLASGR-MCMC), the best epoch on a
    validation split of the training data kept.

    Parameters
    ----------
    layers, filter_width, vocab_size, token_count, padding, eta, e0, f0, sample_r
        The model's, as :class:`~cpgbn.model.CPGBN`'s (``pooling_concentration`` is not
        offered: the encoder is written for the tied pooling prior).
    xi : float, default 1000.0
        Weight of the cross-entropy per unit of a document's observed counts: the loss per
        document is L_g + xi' L_c with the paper's xi' = ``xi`` times the mean units of a
        training document (tokens times ``token_count``'s pseudo-count), because L_g grows
        with them (:mod:`cpgbn.modes.supervised`); ``paper_xi_`` records xi'.  The gradient
        is taken of the loss per unit (the clip at norm 10 reads it).
    classifier_input : {"hidden", "hidden+theta", "theta"}, default "hidden"
        What the softmax reads: "theta", the paper's theta^(1..T) (ln(1 + theta / S_j));
        "hidden", the pooled first hidden layer of the encoder h^(1) (ln(1 + h^(1)), the
        mean over positions of relu(C_1 * X + b_1): a one-hot convolution); "hidden+theta",
        both.
    classifier_pooling : {"mean", "max"}, default "mean"
        How the softmax pools the first hidden layer over a document's positions (the mean
        is the h^(1) the upper layers read; the max, a one-hot CNN's usual pooling).
    generative : bool, default True
        False: the encoder's network trained by the cross-entropy alone, the globals left at
        their random start: the discriminative baseline of the same network (`cpgbn
        evaluate --supervised` shows it beside the classifier).
    elbo_reaches_filters : bool, default True
        False: the ELBO's gradient stops at the first hidden layer, so the filters C_1 the
        softmax reads through h^(1) learn from the cross-entropy alone and the generative
        half trains the layers above them.
    global_statistics : {"gibbs", "encoder"}, default "gibbs"
        Where the TLASGR step's statistics of the globals come from
        (:mod:`cpgbn.modes.supervised`): local Gibbs chains (the globals are the unsupervised
        model's) or the encoder's draw (the paper's Algorithm 1; the labels reach the kernels).
    generative_every : int, default 16
        The generative half every this many minibatches: on those the loss is L_g + xi L_c
        and the globals take their TLASGR step; on the others, the cross-entropy alone
        trains the softmax's path (1: every minibatch, Algorithm 1).
    classifier_dropout : float, default 0.0
        Dropout on the softmax's input during training.
    max_grad_norm : float or None, default 10.0
        The clip of the encoder gradient's norm (of the loss per unit), applied to the
        softmax's path and to the generative heads apart; None: no clip.
    validation_fraction : float, default 0.1
        Share of the labelled training documents held out (stratified, drawn from the seed)
        and scored after every epoch; the encoder and globals of the best epoch are kept.
        0: none, the last epoch is kept (as for a streamed file or a distributed fit, which
        hold none out).
    patience : int or None, default 3
        Stop after this many epochs without a better validation accuracy (None: run every
        epoch of ``n_epochs``).
    semi_supervised : bool, default False
        Whether documents without a label (None, "" or NaN in ``y``) are allowed: they add
        their negative ELBO alone.  False: a missing label is an error.
    batch_size, n_epochs, learning_rate, encoder_precision, device
        The hybrid inference's (:class:`~cpgbn.model.CPGBN`), with a batch of 50 and at most
        30 epochs (``patience`` usually stops the fit earlier).
    feature_normalization, random_state, n_threads, memory_limit, progress
        As :class:`~cpgbn.model.CPGBN`'s.

    Attributes
    ----------
    classes_ : ndarray (C,)
        The classes, in the order of ``predict_proba``'s columns.
    paper_xi_ : float
        The paper's xi of the fit: the weight of L_c against L_g per document.
    validation_curve_ : ndarray (epochs run,)
        The validation accuracy after each epoch (absent without a validation split).
    best_epoch_ : int
        The epoch (1-based) whose state the model keeps (absent without a validation split).
    gradient_norms_ : ndarray (steps,)
        The encoder gradient's norm before the clip, per step.
    softmax_input_mean_ : ndarray (units,)
        The mean over the training documents of each unit the softmax reads (its usage:
        :mod:`cpgbn.explain.classes` ranks units by weight times usage).  Absent after a
        distributed fit.
    filter_windows_, filter_window_counts_ : ndarray (K_1, 5, F), (K_1, 5)
        When the softmax reads h^(1): per encoder filter, the windows of the training
        documents (seen at least twice, without the out-of-vocabulary word) that carry most
        of its activation (word ids, -1 for a padded column), and
        how often each occurs (:mod:`cpgbn.explain.filters`).  Absent after a distributed fit.
    class_windows_, class_window_counts_, class_window_pushes_ : (C, 20, F), (C, 20), (C, 20)
        When the softmax reads h^(1): per class, the windows of the training documents
        (occurring at least 3 times) that push most towards it, their counts and pushes
        (:func:`cpgbn.explain.filters.class_windows`).  Absent after a distributed fit.
    Every fitted attribute of a hybrid CPGBN (``vocabulary_``, ``globals_``, ``encoder_*``,
    ``loss_trace_``, ...).
    """

    __init__ = declare_init(CLASSIFIER_PARAMETERS)
    _saved_as = "CPGBNClassifier"   # save/load (CPGBN's) record and check this name

    #: The settings of CPGBN that a classifier fixes (not parameters of it): the hybrid
    #: inference, no Gibbs refinement of the softmax's features, the tied pooling prior the
    #: encoder is written for, and Gibbs sweeps for ``infer`` (inference with the globals
    #: fixed).
    _fixed_settings = dict(inference="hybrid", refine_iter=0, pooling_concentration=None,
                           n_iter=200, burn_in=150, transform_iter=None, transform_burn_in=None)

    @property
    def softmax_input_(self) -> str:
        """What the fitted softmax reads: "hidden" (the pooled first hidden layer h^(1)),
        "hidden+theta" or "theta" (theta^(1..T), the paper's form), from ``encoder_config_``.
        A model saved before the encoder recorded the choice read theta, the encoder's default
        then.  The one place that decides it, for the fit's unit statistics and the
        explanations."""
        return softmax_input_of(self.encoder_config_)

    def _mode_class(self) -> type[SupervisedMode]:
        """The supervised mode, from the registry (:data:`cpgbn.modes.REGISTERED_MODES`; its
        loss is L_g + xi L_c, ``loss_name`` says so)."""
        return registered_mode("supervised")

    def _prepare(self, training: Training) -> Training:
        """The classes, and a digest of the labels in the checkpoints' fingerprint (a resumed
        fit must read the same labels; the corpus' own fingerprint covers the texts only)."""
        if training.file is not None:   # streamed: the classes from one pass over the labels
            training.classes, digest = file_classes(
                training.file, block_lines=training.block_docs,
                semi_supervised=bool(self.semi_supervised), scan=training.scan.labels)
        elif training.communicator.world_size > 1:   # a worker's shard: the corpus' classes
            training.labels, training.classes, digest = shared_labels(
                training.labels, training.data.n_docs, training.first_doc,
                semi_supervised=bool(self.semi_supervised), communicator=training.communicator)
        else:
            training.labels, training.classes = check_labels(
                training.labels, training.data.n_docs,
                semi_supervised=bool(self.semi_supervised))
            digest = fingerprint(np.asarray(training.labels).astype(str))
        training.chain_params = {**training.chain_params, "labels": digest}
        return training

    def fit(self, X, y=None, **fit_params):
        """Fit on the documents ``X`` (strings, an encoded Corpus, or a labelled
        :class:`~cpgbn.text.TextFile`) with their labels ``y`` (one per document; a labelled
        TextFile carries its own).  ``fit_params``: CPGBN.fit's checkpointing arguments and
        ``communicator`` (one worker of a distributed fit: :func:`shared_labels` gives every
        worker the whole corpus' classes)."""
        documents = Documents.of(X)
        if documents.streamed and y is None:
            if not documents.labeled:
                file_classes(documents.file)   # its one-line error: the file has no labels
        elif y is None:
            check_labels(None, 0, semi_supervised=False)
        # a fit in one process records the units' statistics too (:mod:`cpgbn.explain.records`;
        # a distributed fit's workers hold shards: its explanations rank units by weight alone)
        return super().fit(documents, y, **fit_params)

    def softmax_inputs(self, X) -> np.ndarray:
        """(N, units): what the softmax reads of each document of ``X`` on the encoder's mean
        path (ln(1 + h^(1)) and/or ln(1 + theta^(t) / S), as ``classifier_input`` says), the
        units in the order of the softmax's weight columns."""
        self._check_fitted()
        mode = self._mode(self._run_settings())
        data = self._cells(self._corpus(X, self.vocabulary_, None))
        return mode.softmax_inputs(self._fitted_state(), data)

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X) -> np.ndarray:
        """(N, C) class probabilities, columns in ``classes_`` order: the softmax of the
        encoder's mean path (theta^(1..T), h^(1), as ``classifier_input`` says), the same on
        every call."""
        self._check_fitted()
        settings = self._run_settings()
        mode = self._mode(settings)
        blocks_of_X = Documents.of(X).blocks(blocks.STREAM_BLOCK_DOCS)   # in memory: one
        return np.vstack([self._probabilities(texts, mode) for texts in blocks_of_X])

    def _probabilities(self, X, mode) -> np.ndarray:
        return mode.probabilities(self._fitted_state(),
                                  self._cells(self._corpus(X, self.vocabulary_, None)))

    def _cells(self, corpus):
        """The cells of encoded documents at the model's filter width, short documents padded
        as at fit time (without the fit's warning about them)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return self._data(corpus, self.globals_.D.shape[1])

    def cell_probabilities(self, data) -> np.ndarray:
        """(N, C) class probabilities of documents given as cells (a
        :class:`~cpgbn.layers.cells.ConvData` over the model's vocabulary, as
        :meth:`position_attributions` returns them): for explanations that edit a document's
        cells, such as leaving one word's column empty."""
        self._check_fitted()
        return self._mode(self._run_settings()).probabilities(self._fitted_state(), data)

    def position_attributions(self, X, classes=None):
        """For each document of ``X``: how much each of its positions (the F-word window
        starting there) and kernels moved it towards a class -- ``classes`` (one label per
        document; default the predicted class).  Returns (the documents encoded, a
        :class:`~cpgbn.text.Corpus`; their cells, whose ``doc_positions`` index the rows;
        (P, K_1) contributions to the log-odds of the class, gradient times input at the
        encoder's mean path; the class index of each document).  :mod:`cpgbn.explain.classes`
        turns them into phrases."""
        self._check_fitted()
        mode = self._mode()
        corpus = self._corpus(X, self.vocabulary_, None)
        data = self._cells(corpus)
        fitted = self._fitted_state()
        if classes is None:
            targets = np.argmax(mode.probabilities(fitted, data), axis=1)
        else:
            index = {c: i for i, c in enumerate(self.classes_.tolist())}
            labels = np.asarray(classes).tolist()
            if len(labels) != len(corpus) or any(c not in index for c in labels):
                raise CPGBNInputError(f"classes must be one of {self.classes_.tolist()!r} per "
                                      "document")
            targets = np.array([index[c] for c in labels], dtype=np.int64)
        return corpus, data, mode.attributions(fitted, data, targets), targets

    def predict_log_proba(self, X) -> np.ndarray:
        return np.log(self.predict_proba(X))

    def decision_function(self, X) -> np.ndarray:
        """Log-probabilities per class, (N, C); for two classes, (N,) the log-odds of
        ``classes_[1]`` (scikit-learn's binary convention)."""
        log_p = self.predict_log_proba(X)
        return log_p[:, 1] - log_p[:, 0] if len(self.classes_) == 2 else log_p

    def predict(self, X) -> np.ndarray:
        """The most probable class of each document."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on ``(X, y)``; a label of ``y`` the model never saw is an error (the
        model cannot predict it: its accuracy would be silently 0 on those documents)."""
        self._check_fitted()
        y = np.asarray(y)
        unseen = sorted({v for v in y.tolist() if v not in set(self.classes_.tolist())},
                        key=str)
        if unseen:
            raise CPGBNInputError(f"y holds {len(unseen)} class(es) the model was not trained "
                                  f"on ({unseen[0]!r}); its classes are "
                                  f"{self.classes_.tolist()!r}")
        return super().score(X, y, sample_weight=sample_weight)

    def _check_fitted(self):
        super()._check_fitted()
        if getattr(self, "classes_", None) is None:
            raise CPGBNInputError("this classifier was loaded from a model fitted without "
                                  "labels; fit it with labels first")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        return tags
