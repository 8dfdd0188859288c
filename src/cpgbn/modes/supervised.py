"""sCPGBN's fit (paper section 2.3): the hybrid inference with a softmax on theta^(1..T).

:class:`SupervisedMode` wraps a :class:`~cpgbn.modes.hybrid_mode.HybridMode` (Algorithm 1: a
Weibull encoder trained by Adam, TLASGR-MCMC for the globals), as numpyro's ``HMCGibbs`` wraps
an inner kernel: it gives the hybrid's fit a :class:`Supervisor`, whose term
(:class:`cpgbn.inference.supervision.Supervision`) puts sCPGBN's softmax on the encoder and
makes the loss per document L = L_g + xi L_c: the negative ELBO plus xi times the
cross-entropy of the document's label, for the labelled documents of each minibatch.  New
documents' features are the hybrid's.  An unlabelled
document (a missing label) contributes L_g alone, so unlabelled text shapes the encoder and
the globals too (semi-supervised, beyond the paper).

The weight: the negative ELBO per document grows with the document's units (its tokens times
the pseudo-count per token of ``token_count``: 8,000 for a 10-word question at 800, 200,000 for
a 250-word review) and L_c does not, so a fixed xi would mean a different balance on every
corpus.  The estimator's ``xi`` is per unit: the paper's xi is ``xi`` times the mean units of a
training document (:meth:`SupervisedMode.paper_xi`; ``CPGBNClassifier.paper_xi_``).

Where the labels reach: the cross-entropy's gradient flows through the reparameterised draw
into every weight of the encoder; the globals (D, Phi) see the labels only through the
statistics of the TLASGR step.  With ``global_statistics="gibbs"`` (the hybrid's default) those
come from local Gibbs chains that never read the encoder, so the globals are the unsupervised
model's and the labels shape only the encoder and its softmax; with ``"encoder"`` (the paper's
Algorithm 1) they come from the encoder's draw, which the labels move.  The estimator that
uses this mode is :class:`cpgbn.classifier.CPGBNClassifier`; it is not a value of
``CPGBN(inference=...)``.

New documents: the class probabilities are the softmax of the encoder's mean path
(deterministic: the same probabilities on every call); the classifier offers no Gibbs
refinement (``refine_iter`` is 0: the softmax was trained on the encoder's theta).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ..errors import CPGBNInputError
from ..inference.hybrid import GLOBAL_STATISTICS
from ..inference.labels import LabelCodes
from ..inference.streams import derived_seed
from ..layers.cells import ConvData
from .base import FittedState, InferenceMode, Training
from .constraints import Boolean, Fraction, Integer, OneOf, Optional, Positive
from .hybrid_mode import HybridMode
from .runtime import require_torch, torch_threads
from .minibatch_modes import block_source, steps_per_epoch

#: What the softmax reads (:data:`cpgbn.backends.torch.encoder.CLASSIFIER_INPUTS`, repeated
#: here so that checking a parameter does not import torch).
CLASSIFIER_INPUTS = ("theta", "hidden+theta", "hidden")
#: The stream of the validation split's draw (:func:`cpgbn.inference.streams.derived_seed`);
#: public, so that a study can draw the split a fit draws
VALIDATION_SPLIT_STREAM = 7301

__all__ = ["SupervisedMode", "Supervisor", "softmax_input_of"]


class SupervisedMode(InferenceMode):
    """sCPGBN's fit and class probabilities (module docstring): a hybrid mode
    (:attr:`hybrid`) fitted with a :class:`Supervisor`."""

    name = "supervised"
    chain_parameters = HybridMode.chain_parameters + (
        "xi", "global_statistics", "classifier_input", "generative", "elbo_reaches_filters",
        "generative_every", "max_grad_norm", "classifier_pooling",
        "classifier_dropout", "validation_fraction", "patience")
    #: as the hybrid; the classes are the whole corpus' (:func:`cpgbn.classifier.shared_labels`)
    distributes = True
    #: as the hybrid: a file is read a block at a time
    streams_files = HybridMode.streams_files
    parameter_constraints = {
        "xi": Positive(),
        "classifier_input": OneOf(CLASSIFIER_INPUTS),
        "classifier_pooling": OneOf(("mean", "max")),
        "generative": Boolean(),
        "elbo_reaches_filters": Boolean(),
        "global_statistics": OneOf(GLOBAL_STATISTICS),
        "generative_every": Integer(1),
        "classifier_dropout": Fraction(0.0, 1.0),
        "max_grad_norm": Optional(Positive()),
        "validation_fraction": Fraction(0.0, 0.5),
        "patience": Optional(Integer(1)),
    }
    fitted_extras = HybridMode.fitted_extras + ("classes_", "paper_xi_", "validation_curve_",
                                                "best_epoch_", "gradient_norms_")
    loss_name = ("loss per document of the minibatch: the negative ELBO plus xi times the "
                 "cross-entropy on the generative steps (every generative_every-th), xi times "
                 "the cross-entropy alone on the others")

    def __init__(self, settings: dict):
        super().__init__(settings)
        #: the inner mode: its parameters, memory, transform; each fit adds a supervisor
        self.hybrid = HybridMode(settings)

    def check_compatible(self) -> None:
        self.hybrid.check_compatible()

    def training_bytes(self, data: ConvData, layers, vocab_size: int) -> int | None:
        return self.hybrid.training_bytes(data, layers, vocab_size)

    def inference_bytes(self, data: ConvData, layers, vocab_size: int) -> int | None:
        return self.hybrid.inference_bytes(data, layers, vocab_size)

    def thetas(self, fitted: FittedState, data: ConvData, first_doc: int = 0) -> list[np.ndarray]:
        return self.hybrid.thetas(fitted, data, first_doc)

    def shard_block(self) -> int:
        return self.hybrid.shard_block()

    def transform_refusal(self) -> str | None:
        return self.hybrid.transform_refusal()

    def streams_transform(self) -> bool:
        return self.hybrid.streams_transform()

    def fit(self, training: Training) -> FittedState:
        if training.classes is None:
            raise CPGBNInputError("a supervised fit needs the classes of its labels")
        supervisor = Supervisor(self, self._validation_split(training))
        fitted = HybridMode(self.settings, supervisor=supervisor).fit(training)
        fitted.classes_ = np.asarray(training.classes)
        return fitted

    def _validation_split(self, training: Training):
        """(fitted documents, held-out documents) as index arrays, or None: a stratified
        share ``validation_fraction`` of the labelled documents, drawn from the fit's seed,
        for a corpus in memory fitted by one process.  A streamed file or a distributed fit
        has none (the last epoch is kept); so does a corpus too small to hold out one
        document of each class twice, with a warning."""
        fraction = self.settings["validation_fraction"]
        if fraction == 0 or training.data is None or training.communicator.world_size > 1:
            return None
        codes = LabelCodes(training.classes).codes(training.labels, training.data.n_docs)
        known = np.flatnonzero(codes >= 0)
        counts = np.bincount(codes[known], minlength=len(training.classes))
        n_held = int(round(fraction * len(known)))
        if n_held < len(counts) or counts.min() < 2 or len(known) - n_held < len(counts):
            warnings.warn(f"validation_fraction={fraction}: too few labelled documents to hold "
                          f"out one of each class ({len(known)} labelled, classes of "
                          f"{counts.min()} to {counts.max()}); the fit keeps its last epoch",
                          UserWarning, stacklevel=2)
            return None
        from sklearn.model_selection import train_test_split
        seed = derived_seed(training.seed, VALIDATION_SPLIT_STREAM) % (2 ** 32)
        fitted, held = train_test_split(known, test_size=n_held, stratify=codes[known],
                                        random_state=seed)
        fitted = np.sort(np.concatenate([fitted, np.flatnonzero(codes < 0)]))
        return fitted, np.sort(held)

    def paper_xi(self, n_tokens: int, n_docs: int) -> float:
        """The paper's xi (the weight of L_c against L_g per document) for the estimator's
        ``xi``: xi times the mean units a training document carries (its tokens times the
        observation model's count per token; module docstring)."""
        units = self.settings["observation"].scale * n_tokens / max(n_docs, 1)
        return float(self.settings["xi"] * units)

    def _encoder(self, fitted: FittedState):
        """The fitted encoder (with its softmax) on the mode's device."""
        from ..backends.device_registry import encoder_backend
        require_torch("a classifier's predictions")
        return encoder_backend().from_weights(fitted.encoder_config_, fitted.encoder_weights_,
                                                self.settings["device"] or "cpu")

    def probabilities(self, fitted: FittedState, data: ConvData) -> np.ndarray:
        """(N, C) class probabilities of the documents ``data``: the softmax of the encoder's
        mean path (module docstring)."""
        s = self.settings
        backend = self._encoder(fitted)
        with torch_threads(s["n_threads"]):
            return backend.class_probabilities(fitted.globals_.phi, data, batch_size=512,
                                               head_precision=s["encoder_precision"])

    def softmax_inputs(self, fitted: FittedState, data: ConvData) -> np.ndarray:
        """(N, units): what the softmax reads of each document of ``data`` on the encoder's
        mean path (:meth:`cpgbn.backends.torch.encoder_backend.TorchEncoderBackend.softmax_inputs`)."""
        s = self.settings
        backend = self._encoder(fitted)
        with torch_threads(s["n_threads"]):
            return backend.softmax_inputs(fitted.globals_.phi, data, batch_size=512,
                                          head_precision=s["encoder_precision"])

    def attributions(self, fitted: FittedState, data: ConvData, targets) -> np.ndarray:
        """(P, K_1): how much each position and kernel of the documents ``data`` moved them
        towards the classes ``targets`` (indices), at the encoder's mean path
        (:meth:`cpgbn.backends.torch.encoder_backend.TorchEncoderBackend.class_attributions`)."""
        backend = self._encoder(fitted)
        with torch_threads(self.settings["n_threads"]):
            return backend.class_attributions(fitted.globals_.phi, data, targets)


class Supervisor:
    """What :class:`SupervisedMode` adds to its hybrid mode's fit
    (:class:`~cpgbn.modes.hybrid_mode.HybridMode`'s ``supervisor``): where the minibatches
    come from, the trainer's options, the supervised term of the loss
    (:class:`~cpgbn.inference.supervision.Supervision`) and the fitted attributes it records.
    ``split``: the validation split (fitted, held-out document indices) or None."""

    fitted_extras = ("paper_xi_", "validation_curve_", "best_epoch_", "gradient_norms_")

    def __init__(self, mode: SupervisedMode, split):
        self.settings, self.paper_xi, self.split = mode.settings, mode.paper_xi, split

    def block_source(self, training: Training):
        """A corpus in memory as one block, so that every minibatch is drawn from the whole
        corpus: files are often sorted by label (IMDB's, SUBJ's), and blocks of consecutive
        documents then give minibatches of one class for a whole block, after which the
        softmax predicts the last block's class for everything (seen on SUBJ: one class for
        every test document).  A streamed file is read in blocks; :func:`cpgbn.classifier.
        file_classes` warns when its labels come in runs.  With a validation split, the
        fitted documents only."""
        if training.data is None:
            return block_source(training)
        split = self.split
        if split is not None:
            from ..layers.batches import subset_cells
            fitted = split[0]
            training = dataclasses.replace(training, data=subset_cells(training.data, fitted),
                                           labels=np.asarray(training.labels)[fitted])
        return block_source(training, memory_block_docs=max(training.data.n_docs, 1))

    def trainer_options(self) -> dict:
        """The hybrid trainer's options a classifier sets (its encoder's softmax input,
        dropout and pooling; the globals' statistics; the gradient clip)."""
        s = self.settings
        return dict(global_statistics=s["global_statistics"],
                    encoder_options=dict(classifier_input=s["classifier_input"],
                                         classifier_dropout=s["classifier_dropout"],
                                         classifier_pooling=s["classifier_pooling"]),
                    max_grad_norm=s["max_grad_norm"])

    def term(self, training: Training, source, common: dict):
        """The supervised term of the fit's loss: the classes, the paper's xi, the generative
        steps and the validation of the held-out documents."""
        from ..inference.supervision import Supervision, Validation
        s = self.settings
        # the corpus' mean units per document: over every worker's documents
        paper_xi = self.paper_xi(training.n_tokens, training.data.n_docs
                                 if training.data is not None
                                 and training.communicator.world_size == 1
                                 else common["n_docs_total"])
        validation = None
        if self.split is not None:
            from ..layers.batches import subset_cells
            held = self.split[1]
            codes = LabelCodes(training.classes).codes(np.asarray(training.labels)[held],
                                                       len(held))
            validation = Validation(subset_cells(training.data, held), codes,
                                    every=steps_per_epoch(source.n_docs, s["batch_size"],
                                                          source.block_docs),
                                    patience=s["patience"])
        return Supervision(training.classes, xi=paper_xi, loss_scale=s["xi"] / paper_xi,
                           elbo=s["generative"], generative_every=s["generative_every"],
                           elbo_reaches_filters=s["elbo_reaches_filters"],
                           validation=validation)

    @staticmethod
    def fitted(run, term) -> dict:
        """The fitted attributes of the supervised term (``run``: the hybrid's result)."""
        if term.validation is not None:
            _warn_if_no_better_than_the_majority(run.validation_curve, term.validation.codes)
        return dict(paper_xi_=term.xi,
                    validation_curve_=None if term.validation is None
                    else run.validation_curve,
                    best_epoch_=run.best_epoch, gradient_norms_=run.gradient_norms)


def _warn_if_no_better_than_the_majority(curve, codes) -> None:
    """Warn when no epoch's validation accuracy beat predicting the held-out documents'
    most frequent class: the kept model is then no classifier, and early stopping most
    likely cut the fit before it learnt (a curve flat at the start)."""
    curve = np.asarray(curve if curve is not None else [], dtype=np.float64)
    codes = np.asarray(codes)
    if curve.size == 0 or codes.size == 0:
        return
    majority = np.bincount(codes).max() / codes.size
    if curve.max() <= majority:
        warnings.warn(f"the validation accuracy never rose above {100 * majority:.1f}%, the "
                      f"share of the held-out documents' most frequent class, in "
                      f"{curve.size} epoch(s): the model kept is no better than predicting "
                      "that class. Give the fit more epochs before it stops (a larger "
                      "patience, or None), a larger learning_rate or more labelled documents",
                      UserWarning, stacklevel=4)


def softmax_input_of(encoder_config: dict | None) -> str:
    """What a fitted softmax reads, from the encoder's configuration (``encoder_config_``):
    :attr:`cpgbn.classifier.CPGBNClassifier.softmax_input_`."""
    return (encoder_config or {}).get("classifier_input", "theta")
