"""What every inference mode shares: the record of a fitted model, the training job a mode is
given, and the base class of the modes.

A mode (:class:`InferenceMode`) is one way to learn a CPGBN's globals and to infer the local
variables of new documents.  It owns the checks of its own parameters (one table,
:attr:`InferenceMode.parameter_constraints`, read by :meth:`InferenceMode.check_parameters`),
its fit (:meth:`InferenceMode.fit`, which returns a :class:`FittedState`), the features of
new documents (:meth:`InferenceMode.thetas`) and its memory estimate.  The estimator
validates the model's parameters once, picks the mode once (:func:`cpgbn.modes.mode_for`)
and assigns the :class:`FittedState` it gets back in one place; :mod:`cpgbn.io` saves and
loads the same record.  A new way to fit is a new mode class, which may hold the modes it
builds on (the supervised mode holds a hybrid one), not new branches in the estimator.
"""

from __future__ import annotations

import shutil
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

import numpy as np

from ..blocks import DOC_BLOCK, STREAM_BLOCK_DOCS
from ..inference.communicator import Communicator, SingleProcess, gather_rows
from ..inference.state import GlobalParameters, Hyperparameters
from ..layers.cells import ConvData
from ..text.vocabulary import Vocabulary
from .constraints import check_constraints

__all__ = ["FittedState", "ChainRecord", "TrainingDocumentsRecord", "StepRecord",
           "EncoderRecord", "SupervisionRecord", "ExplanationRecords", "SavedBy",
           "FITTED_ATTRIBUTES", "FITTED_ALWAYS", "ESTIMATOR_RECORDS", "SAVED_ARRAYS",
           "Training", "Checkpointing", "InferenceMode", "features", "finish_fit",
           "training_features"]


def _saved(how: str, key: str | None = None) -> dict:
    """A leaf's metadata: how :mod:`cpgbn.io` saves it ("array": under its own name in the
    model's npz; "json": under ``key`` in the model's JSON; "timing": in its timings file)."""
    return {"saved_as": how, **({} if key is None else {"key": key})}


@dataclass
class ChainRecord:
    """The training chain's record, per sweep: every mode sets it (empty traces in the
    minibatch modes, which run no full-corpus chain)."""

    loglik_trace_: np.ndarray
    """(n_iter,) the training chain's log-likelihood per sweep."""
    sweep_seconds_: np.ndarray = field(metadata=_saved("timing"))
    """(n_iter,) seconds of each sweep."""
    mixing_: object | None = None
    """Gibbs: the chain's :class:`~cpgbn.inference.mixing.Mixing` diagnostic."""


@dataclass
class TrainingDocumentsRecord:
    """The training documents' features (not kept by a streamed or distributed worker's fit,
    nor saved): Gibbs, the chain's averages; the minibatch modes, what ``transform`` gives."""

    train_features_: np.ndarray | None = None
    """(N, K_1) training features."""
    train_theta_: list | None = None
    """theta^(1..T) of the training documents, [(N, K_t)]."""


@dataclass
class StepRecord:
    """The minibatch modes' record, per step (``InferenceMode.loss_name`` names the loss)."""

    loss_trace_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """Per step: the loss named by the mode's ``loss_name``."""
    kl_trace_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """Per step: the KL per document (NaN when the mode has none)."""
    step_seconds_: np.ndarray | None = field(default=None, metadata=_saved("timing"))
    """Seconds of each step."""


@dataclass
class EncoderRecord:
    """The hybrid mode's Weibull encoder (paper Sec. 3.3)."""

    encoder_config_: dict | None = None
    """Its JSON-able configuration."""
    encoder_weights_: dict | None = None
    """Its weights, float32 arrays by ``state_dict`` name."""


@dataclass
class SupervisionRecord:
    """A supervised fit's record (:class:`cpgbn.classifier.CPGBNClassifier`,
    :mod:`cpgbn.modes.supervised`)."""

    classes_: np.ndarray | None = field(default=None, metadata=_saved("json", "classes"))
    """The classes, in the order of the softmax's outputs."""
    paper_xi_: float | None = field(default=None, metadata=_saved("json", "paper_xi"))
    """The weight of the cross-entropy per document, the paper's xi."""
    validation_curve_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """With a validation split: its accuracy at the end of each epoch."""
    best_epoch_: int | None = field(default=None, metadata=_saved("json", "best_epoch"))
    """With a validation split: the epoch (1-based) whose encoder and globals are kept."""
    gradient_norms_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """The encoder gradient's norm before the clip, per step."""


@dataclass
class ExplanationRecords:
    """What the fit records for the explanations once its chain has ended
    (:data:`cpgbn.explain.records.POST_FIT_RECORDS`, one pass): no mode sets these."""

    softmax_input_mean_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """A classifier fitted in one process: the mean over its training documents of each unit
    of the softmax's input (the units' usage; a unit's contribution to a class's logit is its
    weight times this)."""
    filter_windows_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """A classifier whose softmax reads h^(1), fitted in one process: (K_1, top, F) word ids,
    per encoder filter the windows of the training documents with the largest share of its
    activation (:mod:`cpgbn.explain.filters`; -1 for a padded column or no window)."""
    filter_window_counts_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """(K_1, top): how often each of ``filter_windows_`` occurs in the training documents."""
    class_windows_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """As ``filter_windows_``: (C, top, F) word ids, per class the windows of the training
    documents that push most towards it (:func:`cpgbn.explain.filters.class_windows`)."""
    class_window_counts_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """(C, top): how often each of ``class_windows_`` occurs in the training documents."""
    class_window_pushes_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """(C, top): each of ``class_windows_``' push towards its class."""
    kernel_windows_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """A fit in one process: (K_1, top, F) word ids, per kernel the windows of (a sample of)
    the training documents it explains most (:mod:`cpgbn.explain.kernel_windows`; -2 at an
    open slot, -1 for a padded column or no window)."""
    kernel_window_counts_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """(K_1, top): how often each of ``kernel_windows_`` occurs in those documents."""
    kernel_window_shares_: np.ndarray | None = field(default=None, metadata=_saved("array"))
    """(K_1, top): each of ``kernel_windows_``' share of the kernel's count there."""


@dataclass
class SavedBy:
    """A loaded model's provenance."""

    format_version_: int | None = None
    """The format version of its directory."""
    saved_by_version_: str | None = None
    """The cpgbn version that saved it."""


def _record(kind: type) -> dict:
    return {"record": kind}


@dataclass
class FittedState:
    """Everything a fit learns: the model's globals and what it is, then one record per
    concern (a field whose metadata names its ``record`` class; None where no part of the fit
    set it).

    The estimator exposes every attribute of every record under its own name, each ending in
    ``_`` (``model.loss_trace_``), and so does this state: ``fitted.loss_trace_`` reads the
    :class:`StepRecord`'s attribute (None while that record is absent), ``fitted.classes_ =
    ...`` writes it (making the record), and :meth:`of` builds a state from such names.  These
    classes are the only list of the fitted attributes (:data:`FITTED_ATTRIBUTES`): the
    estimator assigns them from it and :mod:`cpgbn.io` saves and loads them from it (a leaf's
    metadata ``saved_as`` says how).  Every mode sets the model's fields and the chain record;
    of the other attributes each mode declares those its fit may set
    (``InferenceMode.fitted_extras``), and the rest are the estimator's
    (:data:`ESTIMATOR_RECORDS`).
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
    chain: ChainRecord = field(metadata=_record(ChainRecord))
    train: TrainingDocumentsRecord | None = field(
        default=None, metadata=_record(TrainingDocumentsRecord))
    steps: StepRecord | None = field(default=None, metadata=_record(StepRecord))
    encoder: EncoderRecord | None = field(default=None, metadata=_record(EncoderRecord))
    supervision: SupervisionRecord | None = field(default=None,
                                                  metadata=_record(SupervisionRecord))
    explanations: ExplanationRecords | None = field(default=None,
                                                    metadata=_record(ExplanationRecords))
    saved_by: SavedBy | None = field(default=None, metadata=_record(SavedBy))

    @classmethod
    def of(cls, **attributes) -> "FittedState":
        """The state holding ``attributes`` (estimator names; None: not set), each record made
        where one of its attributes is set."""
        unknown = set(attributes) - set(_LEAVES)
        if unknown:
            raise TypeError(f"not fitted attributes: {sorted(unknown)}")
        own = {name: value for name, value in attributes.items() if _LEAVES[name][0] is None}
        for record, kind in _RECORD_CLASSES.items():
            values = {f.name: attributes[f.name] for f in fields(kind)
                      if attributes.get(f.name) is not None}
            if values or record in _REQUIRED_RECORDS:
                own[record] = kind(**values)
        return cls(**own)

    def __getattr__(self, name):
        # only reached when normal lookup fails: a record's attribute, read through its record
        leaf = _LEAVES.get(name)
        if leaf is None or leaf[0] is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        record = object.__getattribute__(self, leaf[0])
        return None if record is None else getattr(record, name)

    def __setattr__(self, name, value):
        leaf = _LEAVES.get(name)
        if leaf is None or leaf[0] is None:
            object.__setattr__(self, name, value)
            return
        record = object.__getattribute__(self, leaf[0])
        if record is None:
            if value is None:
                return
            record = _RECORD_CLASSES[leaf[0]]()
            object.__setattr__(self, leaf[0], record)
        setattr(record, name, value)

    def present(self) -> dict:
        """The attributes that are set (not None), by estimator name."""
        return {name: getattr(self, name) for name in _LEAVES
                if getattr(self, name) is not None}


#: The records of :class:`FittedState` by field name: their classes.
_RECORD_CLASSES = {f.name: f.metadata["record"] for f in fields(FittedState)
                   if "record" in f.metadata}
_REQUIRED_RECORDS = {f.name for f in fields(FittedState)
                     if "record" in f.metadata and f.default is MISSING}
#: Every fitted attribute by estimator name: (its record's field name or None for the
#: state's own, its dataclass field).
_LEAVES = {f.name: (None, f) for f in fields(FittedState) if "record" not in f.metadata}
_LEAVES.update({leaf.name: (record, leaf) for record, kind in _RECORD_CLASSES.items()
                for leaf in fields(kind)})


def _required(record: str | None, leaf) -> bool:
    no_default = leaf.default is MISSING and leaf.default_factory is MISSING
    return no_default and (record is None or record in _REQUIRED_RECORDS)


#: The names of every fitted attribute (the state's own fields and its records').
FITTED_ATTRIBUTES = tuple(_LEAVES)
#: The attributes every mode's fit sets: those without a default in a record every fit has.
FITTED_ALWAYS = tuple(name for name, (record, leaf) in _LEAVES.items()
                      if _required(record, leaf))
#: The attributes no mode sets: the estimator's records after a fit, and a loaded model's
#: versions.
ESTIMATOR_RECORDS = tuple(f.name for kind in (ExplanationRecords, SavedBy) for f in fields(kind))
#: The optional fitted arrays saved under their own names (``saved_as="array"``).
SAVED_ARRAYS = tuple(name for name, (_, leaf) in _LEAVES.items()
                     if leaf.metadata.get("saved_as") == "array")
#: The wall-clock times of a fit (``saved_as="timing"``), saved apart from the model's arrays:
#: they differ from run to run, everything else is a function of data, parameters and seed.
SAVED_TIMINGS = tuple(name for name, (_, leaf) in _LEAVES.items()
                      if leaf.metadata.get("saved_as") == "timing")
#: The optional fitted values saved in the model's JSON (``saved_as="json"``), by attribute
#: name: their key there.
SAVED_JSON = {name: leaf.metadata["key"] for name, (_, leaf) in _LEAVES.items()
              if leaf.metadata.get("saved_as") == "json"}


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


def training_features(theta, training: Training, normalization: str):
    """(theta^(1..T), features) of the training documents of a finished fit from this
    worker's ``theta`` (its rows): the workers' rows gathered on the root in document order;
    (None, None) on the others.  The modes' shared epilogue, with :func:`finish_fit`."""
    theta_rows = [gather_rows(t, training.communicator) for t in theta]
    train_features = gather_rows(features(theta, training.data, normalization),
                                 training.communicator)
    return (None if theta_rows[0] is None else theta_rows), train_features


def finish_fit(training: Training) -> None:
    """What every mode does once its fit has ended: the root removes the fit's checkpoints (the
    fit is over; a later fit of the same directory starts afresh)."""
    if training.checkpointing.directory is not None and training.communicator.is_root:
        shutil.rmtree(training.checkpointing.directory, ignore_errors=True)


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
    #: This mode's own parameters (those of ``params.MODES`` and the classifier's it reads)
    #: and what each may be (:mod:`cpgbn.modes.constraints`): the one table of its checks.
    parameter_constraints: dict = {}

    def __init__(self, settings: dict):
        self.settings = settings

    @classmethod
    def check_parameters(cls, params: dict) -> dict:
        """This mode's own parameters of ``params`` (the estimator's, raw) checked and
        resolved by its :attr:`parameter_constraints`.  Every mode's check runs once per set
        of parameters, as scikit-learn validates parameters a model does not use; a check
        names the parameter and the value."""
        return check_constraints(cls.parameter_constraints, params)

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
        worker's shard is whole blocks (:func:`cpgbn.modes.sharded.shard_range`)."""
        return DOC_BLOCK

    def transform_refusal(self) -> str | None:
        """Why this mode's ``transform`` cannot run distributed with its settings (one line),
        or None when each worker's shard gets the features one process gives its documents."""
        return None

    def streams_transform(self) -> bool:
        """Whether ``transform(TextFile)`` may read the file a block at a time (the features
        of a block do not depend on the other blocks' documents)."""
        return False
