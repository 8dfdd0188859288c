"""sCPGBN's fit (paper section 2.3): the hybrid inference with a softmax on theta^(1..T).

:class:`SupervisedMode` is :class:`~cpgbn.modes.hybrid.HybridMode` (Algorithm 1: a Weibull
encoder trained by Adam, TLASGR-MCMC for the globals) whose encoder carries sCPGBN's softmax
layer and whose loss per document is L = L_g + xi L_c: the negative ELBO plus xi times the
cross-entropy of the document's label, for the labelled documents of each minibatch
(:class:`cpgbn.inference.hybrid.HybridTrainer`'s ``classes`` and ``xi``).  An unlabelled
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

import numpy as np

from ..errors import CPGBNInputError, check_choice, check_positive
from ..inference.hybrid import GLOBAL_STATISTICS
from ..layers.cells import ConvData
from .base import FittedState, Training
from .hybrid import HybridMode, require_torch, torch_threads
from .minibatch import block_source

__all__ = ["SupervisedMode"]


class SupervisedMode(HybridMode):
    """sCPGBN's fit and class probabilities (module docstring)."""

    name = "supervised"
    chain_parameters = HybridMode.chain_parameters + ("xi", "global_statistics")
    #: as the hybrid; the classes are the whole corpus' (:func:`cpgbn.classifier.shared_labels`)
    distributes = True
    loss_name = ("negative ELBO plus xi times the cross-entropy, per document of the "
                 "minibatch")

    @staticmethod
    def check_parameters(params: dict) -> dict:
        return dict(xi=check_positive("xi", params["xi"]),
                    global_statistics=check_choice("global_statistics",
                                                   params["global_statistics"],
                                                   GLOBAL_STATISTICS))

    def fit(self, training: Training) -> FittedState:
        if training.classes is None:
            raise CPGBNInputError("a supervised fit needs the classes of its labels")
        fitted = super().fit(training)
        fitted.classes_ = np.asarray(training.classes)
        return fitted

    def block_source(self, training: Training):
        """A corpus in memory as one block, so that every minibatch is drawn from the whole
        corpus: files are often sorted by label (IMDB's, SUBJ's), and blocks of consecutive
        documents then give minibatches of one class for a whole block, after which the
        softmax predicts the last block's class for everything (seen on SUBJ: one class for
        every test document).  A streamed file is read in blocks; :func:`cpgbn.classifier.
        file_classes` warns when its labels come in runs."""
        if training.data is None:
            return block_source(training)
        return block_source(training, memory_block_docs=max(training.data.n_docs, 1))

    def learn(self, training: Training, source, common: dict):
        from ..inference.hybrid import fit_hybrid
        s = self.settings
        # the corpus' mean units per document: over every worker's documents
        paper_xi = self.paper_xi(training.n_tokens, common.get("n_docs_total", source.n_docs))
        with torch_threads(s["n_threads"]):
            run = fit_hybrid(source, training.layers, len(training.vocabulary), training.hyper,
                             device=s["device"] or "cpu", learning_rate=s["learning_rate"],
                             classes=training.classes, xi=paper_xi,
                             global_statistics=s["global_statistics"], **common)
        return run, dict(encoder_config_=run.encoder_config,
                         encoder_weights_=run.encoder_weights, paper_xi_=paper_xi)

    def paper_xi(self, n_tokens: int, n_docs: int) -> float:
        """The paper's xi (the weight of L_c against L_g per document) for the estimator's
        ``xi``: xi times the mean units a training document carries (its tokens times the
        observation model's count per token; module docstring)."""
        units = self.settings["observation"].scale * n_tokens / max(n_docs, 1)
        return float(self.settings["xi"] * units)

    def _encoder(self, fitted: FittedState):
        """The fitted encoder (with its softmax) on the mode's device."""
        from ..backends.torch.hybrid import TorchEncoderBackend
        require_torch("a classifier's predictions")
        return TorchEncoderBackend.from_weights(fitted.encoder_config_, fitted.encoder_weights_,
                                                self.settings["device"] or "cpu")

    def probabilities(self, fitted: FittedState, data: ConvData) -> np.ndarray:
        """(N, C) class probabilities of the documents ``data``: the softmax of the encoder's
        mean path (module docstring), one encoder built for both."""
        s = self.settings
        backend = self._encoder(fitted)
        with torch_threads(s["n_threads"]):
            _, thetas = backend.mean_path(fitted.globals_.phi, data, batch_size=512,
                                          head_precision=s["encoder_precision"], with_w=False)
            return backend.class_probabilities(thetas, np.diff(data.doc_positions))

    def attributions(self, fitted: FittedState, data: ConvData, targets) -> np.ndarray:
        """(P, K_1): how much each position and kernel of the documents ``data`` moved them
        towards the classes ``targets`` (indices), at the encoder's mean path
        (:meth:`cpgbn.backends.torch.hybrid.TorchEncoderBackend.class_attributions`)."""
        backend = self._encoder(fitted)
        with torch_threads(self.settings["n_threads"]):
            return backend.class_attributions(fitted.globals_.phi, data, targets)
