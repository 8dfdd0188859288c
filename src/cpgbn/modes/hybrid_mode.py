"""``CPGBN(inference="hybrid")``: the paper's Algorithm 1 (:mod:`cpgbn.inference.hybrid`).

Per minibatch, a draw from the Weibull convolutional encoder and one Adam step on the negative
ELBO, then one TLASGR step; PyTorch on ``device`` (default the CPU).  New documents get
theta^(1..T) from the encoder's mean path (deterministic), optionally followed by
``refine_iter`` Gibbs sweeps (:meth:`HybridMode.thetas`); ``encoder_precision`` sets the
arithmetic of the encoder's position head.
"""

from __future__ import annotations


import numpy as np

from ..errors import CPGBNInputError
from ..inference.hybrid import ENCODER_PRECISIONS
from ..inference.streams import transform_seed
from ..layers.cells import ConvData
from .base import FittedState, Training
from .constraints import Integer, OneOf, Positive
from .runtime import require_torch, torch_threads
from .minibatch_modes import MinibatchMode

__all__ = ["HybridMode"]


class HybridMode(MinibatchMode):
    """``inference="hybrid"`` (module docstring).

    ``supervisor``: what a supervised mode adds to the fit (:class:`cpgbn.modes.supervised.
    Supervisor`: the training documents' source, the trainer's options, the supervised term
    of the loss and the fitted attributes it records); None: the unsupervised model."""

    name = "hybrid"
    chain_parameters = ("batch_size", "n_epochs", "learning_rate", "device")
    fitted_extras = MinibatchMode.fitted_extras + ("encoder_config_", "encoder_weights_")
    loss_name = "negative ELBO per document of the minibatch"
    parameter_constraints = {"learning_rate": Positive(), "refine_iter": Integer(0),
                             "encoder_precision": OneOf(ENCODER_PRECISIONS)}

    def __init__(self, settings: dict, supervisor=None):
        super().__init__(settings)
        self.supervisor = supervisor
        if supervisor is not None:   # the fitted record: the hybrid's and the supervisor's
            self.fitted_extras = type(self).fitted_extras + supervisor.fitted_extras


    def check_compatible(self) -> None:
        require_torch("inference='hybrid'")

    def training_bytes(self, data: ConvData, layers, vocab_size: int) -> int | None:
        # minibatches; the Gibbs refinement runs in blocks
        from ..inference.hybrid import ENCODER_CHUNK_POSITIONS, REFINE_BLOCK_DOCS
        from ..backends.device_registry import gibbs_backend
        from ..inference.memory import estimate_hybrid_bytes
        s = self.settings
        if gibbs_backend(s["device"]).memory_kind(s["device"]) == "cuda":
            return None   # the estimate's encoder arrays would be the GPU's, not the host's
        refine = REFINE_BLOCK_DOCS if s["refine_iter"] > 0 else 0
        # a step's graph holds a group of at most ENCODER_CHUNK_POSITIONS positions
        per_batch = -(-data.n_positions * s["batch_size"] // max(data.n_docs, 1))
        return estimate_hybrid_bytes(data.n_docs, data.n_positions, data.n_cells, vocab_size,
                                     data.filter_width, layers,
                                     chunk_positions=min(ENCODER_CHUNK_POSITIONS, per_batch),
                                     refine_block_docs=refine)

    def block_source(self, training: Training):
        if self.supervisor is None:
            return super().block_source(training)
        return self.supervisor.block_source(training)

    def learn(self, training: Training, source, common: dict):
        from ..inference.hybrid import fit_hybrid
        s, supervisor = self.settings, self.supervisor
        term = None if supervisor is None else supervisor.term(training, source, common)
        options = {} if supervisor is None else supervisor.trainer_options()
        with torch_threads(s["n_threads"]):
            run = fit_hybrid(source, training.layers, len(training.vocabulary), training.hyper,
                             device=s["device"] or "cpu", learning_rate=s["learning_rate"],
                             supervision=term, **options, **common)
        extras = dict(encoder_config_=run.encoder_config, encoder_weights_=run.encoder_weights)
        if supervisor is not None:
            extras.update(supervisor.fitted(run, term))
        return run, extras

    def inference_bytes(self, data: ConvData, layers, vocab_size: int) -> int:
        # the encoder runs a batch at a time and the refinement a block at a time: bounded
        # by the training estimate's parts, not by the number of documents
        return 0

    def transform_refusal(self) -> str | None:
        if self.settings["refine_iter"] > 0:
            return ("a distributed transform of a hybrid model gives the encoder's features "
                    "only: set refine_iter=0")
        return None

    def streams_transform(self) -> bool:
        # the encoder's mean path is a function of each document alone (up to the float32
        # rounding of its batched matrix products, which may depend on the batch's size)
        return self.settings["refine_iter"] == 0

    def thetas(self, fitted: FittedState, data: ConvData, first_doc: int = 0) -> list[np.ndarray]:
        """theta^(1..T) from the encoder's mean path (deterministic), or with ``refine_iter``
        > 0 the average over that many Gibbs sweeps with the globals fixed, started there
        (:func:`cpgbn.inference.hybrid.refine_with_gibbs`, seeded by the transform seed).  A
        list of (N, K_t) float64 arrays.  ``first_doc`` changes nothing on the mean path (a
        function of each document alone); the refinement's streams are its blocks' own, so a
        shard's refined features are not one process' (:meth:`transform_refusal`)."""
        if fitted.encoder_config_ is None or fitted.encoder_weights_ is None:
            raise CPGBNInputError("this model has no encoder (it was not fitted with "
                                  "inference='hybrid'); fit it again, or set inference='gibbs' "
                                  "for Gibbs inference with its globals")
        require_torch("the features of a model fitted with inference='hybrid'")
        from ..inference.hybrid import encoder_features, refine_with_gibbs
        s = self.settings
        device = s["device"] or "cpu"
        with torch_threads(s["n_threads"]):
            if s["refine_iter"] > 0:
                return refine_with_gibbs(fitted.encoder_config_, fitted.encoder_weights_,
                                         fitted.globals_, data, fitted.hyper_,
                                         n_sweeps=s["refine_iter"],
                                         seed=transform_seed(fitted.seed_), device=device,
                                         head_precision=s["encoder_precision"])
            return encoder_features(fitted.encoder_config_, fitted.encoder_weights_,
                                    fitted.globals_, data, device=device,
                                    head_precision=s["encoder_precision"])
