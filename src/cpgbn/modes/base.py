"""What every inference mode shares: the record of a fitted model, the training job a mode is
given, and the base class of the modes.

A mode (:class:`InferenceMode`) is one way to learn a CPGBN's globals and to infer the local
variables of new documents.  It owns the checks of its own parameters
(:meth:`InferenceMode.check_parameters`), its fit (:meth:`InferenceMode.fit`, which returns a
:class:`FittedState`), the features of new documents (:meth:`InferenceMode.thetas`) and its
memory estimate.  The estimator validates the model's parameters once, picks the mode once
(:func:`cpgbn.modes.mode_for`) and assigns the :class:`FittedState` it gets back in one place;
:mod:`cpgbn.io` saves and loads the same record.  A new way to fit (the supervised model's, a
distributed one) is a new subclass, not new branches in the estimator.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import numpy as np

from ..blocks import DOC_BLOCK, STREAM_BLOCK_DOCS
from ..inference.communicator import Communicator, SingleProcess
from ..inference.state import GlobalParameters, Hyperparameters
from ..layers.cells import ConvData
from ..text.vocabulary import Vocabulary

__all__ = ["FittedState", "FITTED_ATTRIBUTES", "FITTED_ALWAYS", "ESTIMATOR_RECORDS",
           "SAVED_ARRAYS", "Training", "Checkpointing", "InferenceMode", "features"]


@dataclass
class FittedState:
    """Everything a fit learns, under the estimator attributes' names (each ends in ``_``).

    Every mode sets the first nine; of the others, each mode declares those its fit may set
    (``InferenceMode.fitted_extras``), and the rest are the estimator's (None where absent).
    This list is the only list of the fitted attributes: the estimator assigns them from it
    and :mod:`cpgbn.io` saves and loads them from it (a field whose metadata says
    ``saved_as="array"`` is saved under its own name in the model's npz file, one whose
    metadata says ``saved_as="json"`` under its ``key`` in the model's JSON).
    """

    vocabulary_: Vocabulary
    layers_: tuple
    """K_1, ..., K_T as fitted."""
    hyper_: Hyperparameters
    seed_: int
    """The resolved seed."""
    globals_: GlobalParameters
    """D (V, F, K_1), Phi^(2..T), r: Gibbs, their means over the collected sweeps; the
    minibatch modes, the TLASGR chain's last state."""
    kernel_usage_: np.ndarray
    """(K_1,) share of each kernel in the training documents' theta^(1) (sums to 1)."""
    n_train_tokens_: int
    loglik_trace_: np.ndarray
    """(n_iter,) the training chain's log-likelihood per sweep (empty in the minibatch modes)."""
    sweep_seconds_: np.ndarray = field(metadata={"saved_as": "timing"})
    """(n_iter,) seconds of each sweep (empty in the minibatch modes)."""
    train_features_: np.ndarray | None = None
    """(N, K_1) training features (not kept by a streamed fit, nor saved)."""
    train_theta_: list | None = None
    """theta^(1..T) of the training documents, [(N, K_t)] (as ``train_features_``)."""
    mixing_: object | None = None
    """Gibbs: the chain's :class:`~cpgbn.inference.mixing.Mixing` diagnostic."""
    loss_trace_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """Minibatch modes, per step: the loss named by the mode's ``loss_name``."""
    kl_trace_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """Minibatch modes, per step: the KL per document (NaN when the mode has none)."""
    step_seconds_: np.ndarray | None = field(default=None, metadata={"saved_as": "timing"})
    """Minibatch modes: seconds of each step."""
    encoder_config_: dict | None = None
    """Hybrid: the encoder's JSON-able configuration."""
    encoder_weights_: dict | None = None
    """Hybrid: the encoder's weights, float32 arrays by ``state_dict`` name."""
    classes_: np.ndarray | None = field(default=None,
                                        metadata={"saved_as": "json", "key": "classes"})
    """A supervised fit (:class:`cpgbn.classifier.CPGBNClassifier`): the classes, in the order
    of the softmax's outputs."""
    paper_xi_: float | None = field(default=None,
                                    metadata={"saved_as": "json", "key": "paper_xi"})
    """A supervised fit: the weight of the cross-entropy per document, the paper's xi
    (:mod:`cpgbn.modes.supervised`)."""
    validation_curve_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """A supervised fit with a validation split: its accuracy at the end of each epoch."""
    best_epoch_: int | None = field(default=None,
                                    metadata={"saved_as": "json", "key": "best_epoch"})
    """A supervised fit with a validation split: the epoch (1-based) whose encoder and
    globals the model keeps."""
    gradient_norms_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """A supervised fit: the encoder gradient's norm before the clip, per step."""
    softmax_input_mean_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """A classifier fitted in one process: the mean over its training documents of each unit
    of the softmax's input (the units' usage; a unit's contribution to a class's logit is its
    weight times this)."""
    filter_windows_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """A classifier whose softmax reads h^(1), fitted in one process: (K_1, top, F) word ids,
    per encoder filter the windows of the training documents with the largest share of its
    activation (:mod:`cpgbn.explain.filters`; -1 for a padded column or no window)."""
    filter_window_counts_: np.ndarray | None = field(default=None,
                                                     metadata={"saved_as": "array"})
    """(K_1, top): how often each of ``filter_windows_`` occurs in the training documents."""
    class_windows_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """A classifier whose softmax reads h^(1), fitted in one process: (C, top, F) word ids, per
    class the windows of the training documents that push most towards it
    (:func:`cpgbn.explain.filters.class_windows`)."""
    class_window_counts_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """(C, top): how often each of ``class_windows_`` occurs in the training documents."""
    class_window_pushes_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """(C, top): each of ``class_windows_``' push towards its class."""
    kernel_windows_: np.ndarray | None = field(default=None, metadata={"saved_as": "array"})
    """A fit in one process: (K_1, top, F) word ids, per kernel the windows of (a sample of)
    the training documents it explains most (:mod:`cpgbn.explain.kernel_windows`; -2 at an
    open slot, -1 for a padded column or no window)."""
    kernel_window_counts_: np.ndarray | None = field(default=None,
                                                     metadata={"saved_as": "array"})
    """(K_1, top): how often each of ``kernel_windows_`` occurs in those documents."""
    kernel_window_shares_: np.ndarray | None = field(default=None,
                                                     metadata={"saved_as": "array"})
    """(K_1, top): each of ``kernel_windows_``' share of the kernel's count there."""
    format_version_: int | None = None
    """A loaded model: the format version of its directory."""
    saved_by_version_: str | None = None
    """A loaded model: the cpgbn version that saved it."""

    def present(self) -> dict:
        """The attributes that are set (not None), by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


#: The names of every fitted attribute (:class:`FittedState`'s fields).
FITTED_ATTRIBUTES = tuple(f.name for f in fields(FittedState))
#: The fields every mode's fit sets: those without a default.
FITTED_ALWAYS = tuple(f.name for f in fields(FittedState)
                      if f.default is MISSING and f.default_factory is MISSING)
#: The fields no mode sets: the estimator's records after a fit, and a loaded model's versions.
ESTIMATOR_RECORDS = ("softmax_input_mean_", "filter_windows_", "filter_window_counts_",
                     "class_windows_", "class_window_counts_", "class_window_pushes_",
                     "kernel_windows_", "kernel_window_counts_", "kernel_window_shares_",
                     "format_version_", "saved_by_version_")
#: The optional fitted arrays saved under their own names (``saved_as="array"``).
SAVED_ARRAYS = tuple(f.name for f in fields(FittedState) if f.metadata.get("saved_as") == "array")
#: The wall-clock times of a fit (``saved_as="timing"``), saved apart from the model's arrays:
#: they differ from run to run, everything else is a function of data, parameters and seed.
SAVED_TIMINGS = tuple(f.name for f in fields(FittedState)
                      if f.metadata.get("saved_as") == "timing")
#: The optional fitted values saved in the model's JSON (``saved_as="json"``), by attribute
#: name: their key there.
SAVED_JSON = {f.name: f.metadata["key"] for f in fields(FittedState)
              if f.metadata.get("saved_as") == "json"}


@dataclass
class Checkpointing:
    """Where and how often a fit saves its state, and whether it resumes from it."""

    directory: Path | None = None
    every: int = 10
    resume: bool = False


@dataclass
class Training:
    """A fit's job, as the estimator prepares it for a mode.

    vocabulary, layers, hyper, seed : the model being fitted.
    data : the training documents' cells (None when a file is streamed: then ``file``).
    file : a :class:`~cpgbn.text.stream.TextFile`, with ``scan`` (its one pass) and
        ``encode(texts, first_line) -> ConvData`` building a block's cells as ``data`` would be.
    labels : the documents' labels, when given (in memory: one per document).
    classes : a supervised fit's classes (sorted; the softmax's order), else None.
    n_tokens : tokens in the training documents.
    chain_params : the parameters that change the chain (fingerprints of checkpoints).
    checkpointing : :class:`Checkpointing`.
    first_doc, communicator : a distributed fit's worker (:mod:`cpgbn.modes.sharded`):
        ``data`` is its shard, whose first document has global id ``first_doc``; one process
        over the whole corpus: 0 and :class:`~cpgbn.inference.communicator.SingleProcess`.
    block_docs : documents per block of a streamed file and of the minibatch modes' block
        stream (:data:`cpgbn.blocks.STREAM_BLOCK_DOCS` unless the estimator says).
    after_fit : a streamed fit's post-fit records (:class:`cpgbn.explain.records.PostFitPass`'s
        ``visit(fitted, texts, data)``): the mode's pass over the file with the final state
        shows it every block, in order, so that the records need not read the file again.
    """

    vocabulary: Vocabulary
    layers: tuple
    hyper: Hyperparameters
    seed: int
    n_tokens: int
    chain_params: dict
    data: ConvData | None = None
    file: object | None = None
    scan: object | None = None
    encode: object | None = None
    labels: np.ndarray | None = None
    classes: np.ndarray | None = None
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    first_doc: int = 0
    communicator: Communicator = field(default_factory=SingleProcess)
    block_docs: int = STREAM_BLOCK_DOCS
    after_fit: object | None = None


def features(thetas, data: ConvData, normalization: str, all_layers: bool = False) -> np.ndarray:
    """The feature matrix of theta^(1..T): theta^(1) (or every layer's, concatenated), divided
    by each document's length L_j when ``normalization == "length"`` (the authors' features)."""
    thetas = thetas if all_layers else thetas[:1]
    feats = np.hstack(thetas)
    if normalization == "length":
        feats = feats / np.maximum(data.true_length, 1)[:, None]
    return feats


class InferenceMode:
    """One way to fit and to infer (module docstring).

    ``settings`` is the estimator's validated parameters (a dict: the model's, resolved, and
    every mode's own, checked by :meth:`check_parameters`).  Subclasses set ``name`` (the value
    of ``CPGBN(inference=...)``), ``loss_name`` (what their per-step loss is; None: the Gibbs
    chain's log-likelihood) and ``streams_files`` (whether ``fit`` reads a
    :class:`~cpgbn.text.stream.TextFile` a block at a time) and ``distributes``.
    """

    name: str = ""
    loss_name: str | None = None
    streams_files: bool = False
    #: Whether ``fit`` runs as one worker of several (``Training.communicator``).
    distributes: bool = False
    #: The estimator parameters besides the model's (``cpgbn.params.MODEL``) and the seed
    #: that change this mode's chain: what a checkpoint's fingerprint includes.
    chain_parameters: tuple = ()
    #: The optional fields of :class:`FittedState` (past :data:`FITTED_ALWAYS`) that this
    #: mode's ``fit`` may set: its own part of the fitted record.  The rest are the
    #: estimator's records after a fit (kernel windows, a classifier's explanations) and a
    #: loaded model's versions (:data:`ESTIMATOR_RECORDS`).
    fitted_extras: tuple = ()

    def __init__(self, settings: dict):
        self.settings = settings

    @staticmethod
    def check_parameters(params: dict) -> dict:
        """This mode's own parameters of ``params`` (the estimator's, raw) checked and
        resolved.  Every mode's check runs on every fit, as scikit-learn validates parameters
        a model does not use; a check names the parameter and the value."""
        return {}

    def check_compatible(self) -> None:
        """Refuse settings this mode cannot run (a one-line CPGBNInputError)."""

    def training_bytes(self, data: ConvData, layers, vocab_size: int) -> int | None:
        """Host bytes a fit on ``data`` needs (checked before it starts), or None where this
        mode has no estimate of the host's share on its device (nothing is checked)."""
        raise NotImplementedError

    def inference_bytes(self, data: ConvData, layers, vocab_size: int) -> int | None:
        """Host bytes :meth:`thetas` needs for ``data`` (checked before it starts), or None
        as for :meth:`training_bytes`."""
        raise NotImplementedError

    def fit(self, training: Training) -> FittedState:
        """Learn the globals from ``training``; the fitted state."""
        raise NotImplementedError

    def thetas(self, fitted: FittedState, data: ConvData, first_doc: int = 0) -> list[np.ndarray]:
        """theta^(1..T) of the documents ``data`` with the fitted globals: [(N, K_t)].
        ``first_doc``: the global id of ``data``'s first document when it is one worker's
        shard of a corpus (a multiple of 32), so that its random streams are the ones its
        documents draw in one process."""
        raise NotImplementedError

    def shard_block(self) -> int:
        """Documents per block of a distributed run's shards (its random streams' block): a
        worker's shard is whole blocks (:func:`cpgbn.inference.shards.shard_range`)."""
        return DOC_BLOCK

    def transform_refusal(self) -> str | None:
        """Why this mode's ``transform`` cannot run distributed with its settings (one line),
        or None when each worker's shard gets the features one process gives its documents."""
        return None

    def streams_transform(self) -> bool:
        """Whether ``transform(TextFile)`` may read the file a block at a time (the features
        of a block do not depend on the other blocks' documents)."""
        return False
