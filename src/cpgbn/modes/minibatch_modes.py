"""The minibatch modes' common part, and ``CPGBN(inference="minibatch-gibbs")``.

Both minibatch modes learn the globals D, Phi^(2..T), r from minibatches with TLASGR-MCMC
(paper section 3.3), through the one training loop (:func:`cpgbn.inference.training.train`:
seeded minibatch stream, checkpoints, exact resume).  Units: ``n_epochs`` passes over the
training corpus; one epoch is :func:`steps_per_epoch` minibatch steps of at most
``batch_size`` documents (every document exactly once).  The per-step loss they record is
*not* a log-likelihood of the corpus: each mode's ``loss_name`` says what it is.

:class:`MinibatchGibbsMode` (:mod:`cpgbn.inference.minibatch`): per minibatch, local Gibbs
sweeps with the globals fixed (:data:`LOCAL_BURN_IN` burn-in and :data:`LOCAL_COLLECT`
collected sweeps, the authors' MNIST scheme), then one TLASGR step; the numba sampler only.
New documents get Gibbs inference with the learned globals, as in the Gibbs mode.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..blocks import DOC_BLOCK, STREAM_BLOCK_DOCS
from ..errors import CPGBNInputError
from ..inference.batches import ConvDataBlocks, TextFileBlocks
from ..inference.checkpoint import corpus_identity, fingerprint
from ..layers.cells import ConvData
from .base import FittedState, InferenceMode, Training, finish_fit, training_features
from .constraints import Integer
from .runtime import numba_threads
from .gibbs_mode import GibbsMode

__all__ = ["LOCAL_BURN_IN", "LOCAL_COLLECT", "MinibatchMode",
           "MinibatchGibbsMode", "steps_per_epoch"]

#: Local Gibbs sweeps per minibatch in ``"minibatch-gibbs"`` before / while collecting the
#: statistics of the TLASGR step (the authors' MNIST demo: 24 and 16).
LOCAL_BURN_IN, LOCAL_COLLECT = 24, 16

def steps_per_epoch(n_docs: int, batch_size: int,
                    block_docs: int = STREAM_BLOCK_DOCS) -> int:
    """Minibatch steps in one pass over ``n_docs`` documents: each block of ``block_docs``
    documents is cut into ceil(n / batch_size) minibatches
    (:class:`cpgbn.inference.batches.Minibatches`)."""
    full, rest = divmod(int(n_docs), int(block_docs))
    per_block = -(-int(block_docs) // int(batch_size))
    return full * per_block + -(-rest // int(batch_size))


class _FingerprintedBlocks(ConvDataBlocks):
    """The training corpus in blocks, whose identity (what a checkpoint must match to be
    resumed) includes a hash of the tokens and the estimator's parameters, not only sizes."""

    def __init__(self, data: ConvData, fingerprint_: str, block_docs: int, labels=None):
        super().__init__(data, block_docs, labels=labels)
        self.fingerprint = fingerprint_

    def identity(self) -> dict:
        return {**super().identity(), "fingerprint": self.fingerprint}


class _FingerprintedFile(TextFileBlocks):
    """A training file in blocks; its identity is the digest of its documents with the
    estimator's parameters (not its path: a moved file resumes, an edited one does not)."""

    def __init__(self, path, encode, labeled: bool, fingerprint_: str, block_docs: int,
                 missing_labels: bool = False, scan=None):
        super().__init__(path, encode, block_docs, labeled=labeled,
                         missing_labels=missing_labels, scan=scan)
        self.fingerprint = fingerprint_

    def identity(self) -> dict:
        return {"kind": "file", "n_docs": self.n_docs, "block_docs": self.block_docs,
                "fingerprint": self.fingerprint}


def block_source(training: Training, *, memory_block_docs: int | None = None):
    """The training documents of ``training`` as a block source: its cells in memory (in
    blocks of ``memory_block_docs``, default the job's ``block_docs``), or its file read a
    block of ``block_docs`` lines at a time; fingerprinted by the data (the cells, or the
    file's digest), the vocabulary, the seed and the parameters that change the run."""
    if memory_block_docs is None:
        memory_block_docs = training.block_docs
    if training.data is not None:
        data = training.data
        # the whole corpus', whichever worker (or the one process) reads it
        corpus_print = corpus_identity(data, training.first_doc, training.communicator,
                                       training.vocabulary.tokens, training.chain_params,
                                       training.seed)
        return _FingerprintedBlocks(data, corpus_print, memory_block_docs,
                                    labels=training.labels)
    file_print = fingerprint(training.scan.digest, training.vocabulary.tokens,
                             training.chain_params, training.seed)
    return _FingerprintedFile(training.file.path, training.encode, training.file.labeled,
                              file_print, training.block_docs,
                              missing_labels=training.file.missing_labels,
                              scan=training.scan)


class MinibatchMode(InferenceMode):
    """What the minibatch modes share: their parameters, the streamed fit, the fitted state
    (:meth:`fit`), and Gibbs inference for new documents: the mode holds a
    :class:`~cpgbn.modes.gibbs_mode.GibbsMode` over its settings (:attr:`gibbs`) and asks it
    for new documents' theta and their memory, instead of being one."""

    streams_files = True
    chain_parameters = ("batch_size", "n_epochs")
    parameter_constraints = {"batch_size": Integer(1), "n_epochs": Integer(1)}
    #: the per-step traces; a fit of documents in memory keeps their features too
    fitted_extras = ("train_features_", "train_theta_", "loss_trace_", "kl_trace_",
                     "step_seconds_")
    #: Data-parallel: each worker draws minibatches of its shard; a step's gradients and
    #: TLASGR statistics are those of the workers' batches together (``batch_size`` per
    #: worker), every worker runs the steps an epoch of the largest shard takes.
    distributes = True

    def __init__(self, settings: dict):
        super().__init__(settings)
        #: Gibbs sweeps with the learned globals fixed: new documents' theta
        self.gibbs = GibbsMode(settings)

    def thetas(self, fitted: FittedState, data: ConvData, first_doc: int = 0) -> list:
        """theta^(1..T) by Gibbs inference with the fitted globals (:attr:`gibbs`)."""
        return self.gibbs.thetas(fitted, data, first_doc)

    def inference_bytes(self, data: ConvData, layers, vocab_size: int) -> int | None:
        return self.gibbs.inference_bytes(data, layers, vocab_size)

    def shard_block(self) -> int:
        """Numba's 32 documents, whatever the device: a worker's minibatches are its own, no
        chain is one process' to equal, and the encoder's features are a function of each
        document alone (Gibbs inference for new documents runs on numba)."""
        return DOC_BLOCK


    def n_steps(self, n_docs: int, block_docs: int) -> int:
        s = self.settings
        return s["n_epochs"] * steps_per_epoch(n_docs, s["batch_size"], block_docs)

    def learn(self, training: Training, source, common: dict) -> tuple[object, dict]:
        """Run the algorithm over ``source`` with the loop's arguments ``common`` (seed,
        batch size, checkpointing, progress): (its result, extra fitted attributes)."""
        raise NotImplementedError

    def block_source(self, training: Training):
        """Where the fit's minibatches come from (:func:`block_source`)."""
        return block_source(training)

    def fit(self, training: Training) -> FittedState:
        s, ckpt, comm = self.settings, training.checkpointing, training.communicator
        source = self.block_source(training)
        # the workers' documents together (one process: its own); every worker runs the
        # steps of the largest shard
        sizes = comm.gather(int(source.n_docs))
        n_docs, step_docs = comm.broadcast_object(
            None if sizes is None else (sum(sizes), max(sizes)))
        common = dict(seed=training.seed, batch_size=s["batch_size"],
                      checkpoint_dir=ckpt.directory, checkpoint_every=ckpt.every,
                      resume=ckpt.resume,
                      progress=None if s["progress"] and comm.is_root else False,
                      communicator=comm, n_docs_total=n_docs,
                      n_steps=self.n_steps(step_docs, source.block_docs))
        run, extra = self.learn(training, source, common)
        undeclared = set(extra) - set(self.fitted_extras)
        if undeclared:   # a mode's fitted record is what it declares
            raise TypeError(f"{type(self).__name__} sets undeclared fitted attributes "
                            f"{sorted(undeclared)}")
        finish_fit(training)
        traces = {name: np.asarray(values, dtype=np.float64) for name, values in
                  (("loss_trace_", run.trace.loss), ("kl_trace_", run.trace.kl),
                   ("step_seconds_", run.trace.seconds))}
        fitted = FittedState.of(
            vocabulary_=training.vocabulary, layers_=training.layers, hyper_=training.hyper,
            seed_=training.seed, globals_=run.globals, kernel_usage_=np.zeros(0),
            n_train_tokens_=training.n_tokens, loglik_trace_=np.zeros(0),
            sweep_seconds_=np.zeros(0), **traces, **extra)
        # no chain visits every training document with the final globals: their features
        # are what transform gives them (a streamed fit keeps none: N x K_1 grows with the file)
        if training.data is not None:
            theta = self.thetas(fitted, training.data)
            usage = comm.sum(theta[0].sum(axis=0))
            fitted.train_theta_, fitted.train_features_ = training_features(
                theta, training, s["feature_normalization"])
        else:
            usage = np.zeros(training.layers[0])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                for block in range(source.n_blocks):   # one block at a time
                    batch = source.read_block(block)
                    usage += self.thetas(fitted, batch.data)[0].sum(axis=0)
                    if training.after_fit is not None:   # the post-fit records, same pass
                        training.after_fit(fitted, batch.texts, batch.data)
        fitted.kernel_usage_ = usage / usage.sum()
        return fitted


class MinibatchGibbsMode(MinibatchMode):
    """``inference="minibatch-gibbs"`` (module docstring)."""

    name = "minibatch-gibbs"
    loss_name = ("negative log-likelihood per document of the minibatch at its last local "
                 "sweep")

    def check_compatible(self) -> None:
        device = self.settings["device"]
        if device is not None:
            raise CPGBNInputError(f"inference='minibatch-gibbs' runs the numba sampler: leave "
                                  f"device unset (None), got device={device!r}")

    def training_bytes(self, data: ConvData, layers, vocab_size: int) -> int:
        # every training document is inferred at once afterwards (train_theta_)
        return self.gibbs.sweep_bytes(data, layers, vocab_size)

    def learn(self, training: Training, source, common: dict):
        from ..inference.minibatch import fit_minibatch_gibbs
        with numba_threads(self.settings["n_threads"]):
            run = fit_minibatch_gibbs(source, training.layers, len(training.vocabulary),
                                      training.hyper, burn_in=LOCAL_BURN_IN,
                                      collect=LOCAL_COLLECT, **common)
        return run, {}
