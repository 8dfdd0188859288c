"""The estimator's minibatch inference modes: ``CPGBN(inference="minibatch-gibbs")`` and
``CPGBN(inference="hybrid")``, between :mod:`cpgbn.model` and the algorithms of
:mod:`cpgbn.inference`.

``inference="gibbs"`` (the default) is the full-batch Gibbs sampler of the paper's section 3 and
never comes here.  The two other modes learn the globals D, Phi^(2..T), r from minibatches with
TLASGR-MCMC (paper section 3.3), through the shared training loop
(:func:`cpgbn.inference.training.train`: seeded minibatch stream, checkpoints, exact resume):

* ``"minibatch-gibbs"`` (:func:`cpgbn.inference.minibatch.fit_minibatch_gibbs`): per minibatch,
  local Gibbs sweeps with the globals fixed (:data:`LOCAL_BURN_IN` burn-in and
  :data:`LOCAL_COLLECT` collected sweeps, the authors' MNIST scheme), then one TLASGR step;
  the numba sampler only.
* ``"hybrid"`` (:func:`cpgbn.inference.hybrid.fit_hybrid`, paper Algorithm 1): per minibatch,
  a draw from the Weibull convolutional encoder and one Adam step on the negative ELBO, then one
  TLASGR step; PyTorch on ``device`` (default the CPU).  New documents get theta^(1..T) from the
  encoder's mean path, optionally followed by a few Gibbs sweeps (:func:`encoder_thetas`).

Units: ``n_epochs`` passes over the training corpus; one epoch is :func:`steps_per_epoch`
minibatch steps of at most ``batch_size`` documents (every document exactly once).  The
per-step loss these modes record is *not* a log-likelihood of the corpus: :data:`LOSS_NAMES`
says what it is for each mode.

This module validates the modes' parameters, runs their fit (setting the fitted attributes
they own) and computes the hybrid's features; :class:`cpgbn.model.CPGBN` keeps the parameters
and dispatches on ``inference``.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .errors import CPGBNInputError, check_int, check_positive
from .inference.hybrid import ENCODER_PRECISIONS
from .inference.training import ConvDataBlocks, TextFileBlocks
from .layers.cells import ConvData

__all__ = ["MODES", "LOSS_NAMES", "FITTED_ATTRIBUTES", "LOCAL_BURN_IN", "LOCAL_COLLECT",
           "BLOCK_DOCS", "check_params", "steps_per_epoch", "memory_source", "file_source",
           "fit_model", "encoder_thetas", "require_torch"]

#: The values of ``CPGBN(inference=...)``.
MODES = ("gibbs", "minibatch-gibbs", "hybrid")

#: What each minibatch mode's per-step loss (``CPGBN.loss_trace_``) is.
LOSS_NAMES = {
    "minibatch-gibbs": "negative log-likelihood per document of the minibatch at its last "
                       "local sweep",
    "hybrid": "negative ELBO per document of the minibatch",
}

#: The fitted attributes only the minibatch modes set (:func:`fit_model`).
FITTED_ATTRIBUTES = ("loss_trace_", "kl_trace_", "step_seconds_", "encoder_config_",
                     "encoder_weights_")

#: Local Gibbs sweeps per minibatch in ``"minibatch-gibbs"`` before / while collecting the
#: statistics of the TLASGR step (the authors' MNIST demo: 24 and 16).
LOCAL_BURN_IN, LOCAL_COLLECT = 24, 16

#: Documents per block of the minibatch stream (each epoch shuffles within and across blocks).
BLOCK_DOCS = 4096

_TORCH_HINT = "needs PyTorch: pip install 'cpgbn[torch]'"


def require_torch(what: str) -> None:
    """Raise a CPGBNInputError with the extra's install hint when torch cannot be imported."""
    import importlib
    try:   # by name: only whether it imports matters here, no name of it is used
        importlib.import_module("torch")
    except ImportError:
        raise CPGBNInputError(f"{what} {_TORCH_HINT}") from None


def check_params(inference, batch_size, n_epochs, learning_rate, refine_iter, device,
                 encoder_precision="float32") -> dict:
    """The modes' parameters validated (messages name the parameter and the value); returns
    them resolved.  Every mode checks them all, as scikit-learn validates unused parameters."""
    if not isinstance(inference, str) or inference not in MODES:
        raise CPGBNInputError(f"inference must be one of {', '.join(map(repr, MODES))}, "
                              f"got {inference!r}")
    resolved = dict(inference=inference, batch_size=check_int("batch_size", batch_size, 1),
                    n_epochs=check_int("n_epochs", n_epochs, 1),
                    learning_rate=check_positive("learning_rate", learning_rate),
                    refine_iter=check_int("refine_iter", refine_iter, 0),
                    encoder_precision=encoder_precision)
    if encoder_precision not in ENCODER_PRECISIONS:
        raise CPGBNInputError(f"encoder_precision must be one of "
                              f"{', '.join(map(repr, ENCODER_PRECISIONS))}, got "
                              f"{encoder_precision!r}")
    if inference == "minibatch-gibbs" and device is not None:
        raise CPGBNInputError(f"inference='minibatch-gibbs' runs the numba sampler: leave device "
                              f"unset (None), got device={device!r}")
    if inference == "hybrid":
        require_torch("inference='hybrid'")
    return resolved


def steps_per_epoch(n_docs: int, batch_size: int, block_docs: int = BLOCK_DOCS) -> int:
    """Minibatch steps in one pass over ``n_docs`` documents: each block of ``block_docs``
    documents is cut into ceil(n / batch_size) minibatches
    (:class:`cpgbn.inference.training.Minibatches`)."""
    full, rest = divmod(int(n_docs), int(block_docs))
    per_block = -(-int(block_docs) // int(batch_size))
    return full * per_block + -(-rest // int(batch_size))


class _FingerprintedBlocks(ConvDataBlocks):
    """The training corpus in blocks, whose identity (what a checkpoint must match to be
    resumed) includes a hash of the tokens and the estimator's parameters, not only sizes."""

    def __init__(self, data: ConvData, fingerprint: str):
        super().__init__(data, BLOCK_DOCS)
        self.fingerprint = fingerprint

    def identity(self) -> dict:
        return {**super().identity(), "fingerprint": self.fingerprint}


class _FingerprintedFile(TextFileBlocks):
    """A training file in blocks; its identity is the digest of its documents with the
    estimator's parameters (not its path: a moved file resumes, an edited one does not)."""

    def __init__(self, path, encode, labeled: bool, fingerprint: str):
        super().__init__(path, encode, BLOCK_DOCS, labeled=labeled)
        self.fingerprint = fingerprint

    def identity(self) -> dict:
        return {"kind": "file", "n_docs": self.n_docs, "block_docs": self.block_docs,
                "fingerprint": self.fingerprint}


def memory_source(model, data: ConvData, chain_params: dict) -> ConvDataBlocks:
    """The block source of training cells ``data`` held in memory, fingerprinted by the
    cells, ``model``'s vocabulary and seed, and ``chain_params`` (the parameters that change
    the run) for :func:`fit_model`'s checkpoints."""
    from .inference.checkpoint import fingerprint
    corpus_print = fingerprint(data.cell_word, data.cell_col, np.asarray(data.cell_count),
                               data.doc_cells, data.doc_length, model.vocabulary_.tokens,
                               chain_params, model.seed_)
    return _FingerprintedBlocks(data, corpus_print)


def file_source(model, text_file, scan, chain_params: dict, encode) -> TextFileBlocks:
    """The block source of a :class:`~cpgbn.text.stream.TextFile` read a block at a time,
    ``encode(texts, first_line) -> ConvData`` building each block's cells as an in-memory fit
    builds them, fingerprinted by the file's digest (``scan``:
    :func:`~cpgbn.text.stream.scan_text_file`) and the same parameters as
    :func:`memory_source`."""
    from .inference.checkpoint import fingerprint
    file_print = fingerprint(scan.digest, model.vocabulary_.tokens, chain_params, model.seed_)
    return _FingerprintedFile(text_file.path, encode, text_file.labeled, file_print)


@contextlib.contextmanager
def _torch_threads(n_threads):
    """torch's intra-op threads set to ``n_threads`` (None: unchanged), restored afterwards."""
    if n_threads is None:
        yield
        return
    import torch
    previous = torch.get_num_threads()
    torch.set_num_threads(int(n_threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def fit_model(model, source, mode: dict, *, checkpoint_dir=None, checkpoint_every: int = 10,
              resume: bool = False) -> None:
    """Learn ``model``'s globals (and the hybrid's encoder) from the training documents of the
    block ``source`` (:func:`memory_source`, :func:`file_source`) in
    ``mode["n_epochs"]`` passes of minibatches of ``mode["batch_size"]`` documents (module
    docstring), and set the estimator's fitted attributes of the minibatch modes:

    * ``globals_``: the last TLASGR state of D (V, F, K_1), Phi^(2..T), r (not an average);
    * ``loss_trace_``, ``kl_trace_``, ``step_seconds_`` (n_steps,): per step the loss
      (:data:`LOSS_NAMES`), the KL per document (NaN for minibatch Gibbs), wall seconds;
    * ``loglik_trace_``, ``sweep_seconds_``: empty (no sweep over the whole corpus);
    * hybrid: ``encoder_config_`` (JSON-able) and ``encoder_weights_`` (float32 arrays by
      ``state_dict`` name).

    ``model`` has been prepared by ``fit`` (``vocabulary_``, ``layers_``, ``hyper_``,
    ``seed_``); ``mode`` is :func:`check_params`'s result.  The source's fingerprint (data and
    parameters) marks the checkpoint in ``checkpoint_dir`` (written every ``checkpoint_every``
    steps, deleted at the end), so ``resume`` continues only the same fit, to the same model as
    an uninterrupted run.
    """
    import shutil

    n_steps = mode["n_epochs"] * steps_per_epoch(source.n_docs, mode["batch_size"],
                                                  source.block_docs)
    common = dict(seed=model.seed_, n_steps=n_steps, batch_size=mode["batch_size"],
                  checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                  resume=resume, progress=None if model.progress else False)
    layers, vocab_size, hyper = model.layers_, len(model.vocabulary_), model.hyper_
    if mode["inference"] == "minibatch-gibbs":
        from .inference.minibatch import fit_minibatch_gibbs
        run = fit_minibatch_gibbs(source, layers, vocab_size, hyper,
                                  burn_in=LOCAL_BURN_IN, collect=LOCAL_COLLECT, **common)
    elif mode["inference"] == "hybrid":
        from .inference.hybrid import fit_hybrid
        with _torch_threads(model.n_threads):
            run = fit_hybrid(source, layers, vocab_size, hyper, device=model.device or "cpu",
                             learning_rate=mode["learning_rate"], **common)
        model.encoder_config_, model.encoder_weights_ = run.encoder_config, run.encoder_weights
    else:
        raise CPGBNInputError(f"inference={mode['inference']!r} is not a minibatch mode")
    if checkpoint_dir is not None:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    model.globals_ = run.globals
    model.loss_trace_, model.kl_trace_, model.step_seconds_ = (
        np.asarray(values, dtype=np.float64)
        for values in (run.trace.loss, run.trace.kl, run.trace.seconds))
    model.loglik_trace_, model.sweep_seconds_ = np.zeros(0), np.zeros(0)


def encoder_thetas(model, data: ConvData, *, refine_iter: int = 0, seed: int = 0,
                   precision: str = "float32") -> list[np.ndarray]:
    """theta^(1..T) of the documents ``data`` from a hybrid-fitted ``model``'s encoder: its
    mean path (deterministic), or with ``refine_iter`` > 0 the average over that many Gibbs
    sweeps with the globals fixed, started there
    (:func:`cpgbn.inference.hybrid.refine_with_gibbs`, seeded by ``seed``); ``precision``:
    the arithmetic of the encoder's position head (``CPGBN.encoder_precision``).  A list of
    (N, K_t) float64 arrays."""
    config = getattr(model, "encoder_config_", None)
    weights = getattr(model, "encoder_weights_", None)
    if config is None or weights is None:
        raise CPGBNInputError("this model has no encoder (it was not fitted with "
                              "inference='hybrid'); fit it again, or set inference='gibbs' "
                              "for Gibbs inference with its globals")
    require_torch("the features of a model fitted with inference='hybrid'")
    from .inference.hybrid import encoder_features, refine_with_gibbs
    device = model.device or "cpu"
    with _torch_threads(model.n_threads):
        if refine_iter > 0:
            return refine_with_gibbs(config, weights, model.globals_, data, model.hyper_,
                                     n_sweeps=refine_iter, seed=seed, device=device,
                                     head_precision=precision)
        return encoder_features(config, weights, model.globals_, data, device=device,
                                head_precision=precision)
