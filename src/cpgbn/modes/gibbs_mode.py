"""``CPGBN(inference="gibbs")``: the full-batch Gibbs sampler (paper section 3).

Training runs ``n_iter`` sweeps over every document (:class:`~cpgbn.inference.gibbs.
GibbsSampler`, numba, or the PyTorch sampler when ``device`` is set) and averages the globals
and theta^(1..T) over the sweeps after ``burn_in``; new documents get theta from the same
sweeps with the globals fixed (paper section 4), ``transform_iter`` of them after
``transform_burn_in``, seeded by :func:`cpgbn.inference.streams.transform_seed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends.numba.openmp import import_torch_first
from ..backends.device_registry import gibbs_backend
from ..inference.gibbs import START_LIVE_KERNELS, GibbsSampler, RunResult
from ..inference.mixing import MixingMonitor
from ..inference.pilot import PILOT_BLOCK, PILOT_SWEEPS, pilot_seed, plan_pilot, run_pilot
from ..inference.streams import transform_seed
from ..layers.cells import COUNT_LIMIT, ConvData
from ..text.corpus import Corpus
from ..errors import CPGBNInputError
from ..inference.checkpoint import corpus_identity
from .base import FittedState, InferenceMode, Training, finish_fit, training_features
from .runtime import numba_threads

__all__ = ["GibbsMode", "Inference", "progress_bars"]


@dataclass
class Inference:
    """What :meth:`CPGBN.infer <cpgbn.model.CPGBN.infer>` returns (Gibbs inference with the
    globals fixed, in every mode): the documents as the sampler saw them, and the run."""

    corpus: Corpus
    """The documents, encoded with the model's vocabulary."""
    data: ConvData
    """Their cells and positions (``data.doc_positions`` indexes the rows of w and m)."""
    result: RunResult | None
    """Posterior means of theta^(1..T) over the collected sweeps, and the trace."""


def progress_bars(show: bool, desc: str):
    """A factory of progress bars of sweeps (``(total, initial) -> bar``: a tqdm bar when
    stderr is a terminal, else progress lines, :func:`cpgbn.progress.progress_bar`) when
    ``show``, else None."""
    if not show:
        return None

    def bar(total: int, initial: int):
        from ..progress import progress_bar
        return progress_bar(total=total, initial=initial, desc=desc, unit="sweep",
                            leave=False)
    return bar


class GibbsMode(InferenceMode):
    """The exact sampler: fit and inference by Gibbs sweeps (module docstring)."""

    name = "gibbs"
    chain_parameters = ("n_iter", "burn_in", "device")
    distributes = True
    fitted_extras = ("train_features_", "train_theta_", "mixing_")

    def sampler(self, data: ConvData, hyper, seed: int, *, learn_globals: bool,
                first_doc: int = 0):
        """The Gibbs sampler over ``data``: numba, or PyTorch on ``device`` when it is set.
        A subclass may return a sampler on a backend of its own (a study's variant), and the
        estimator runs it with ``CPGBN(inference=<the subclass>)``.  ``first_doc``: the
        global id of a shard's first document (a multiple of :meth:`shard_block`: both
        backends key their streams by global document blocks)."""
        return self._sampler(data, hyper, seed, learn_globals=learn_globals, first_doc=first_doc)

    def _sampler(self, data, hyper, seed: int, *, learn_globals: bool, first_doc: int = 0,
                 communicator=None, doc_block: int | None = None):
        device = self.settings["device"]
        backend = gibbs_backend(device).make(data, seed, first_doc=first_doc, device=device,
                                             doc_block=doc_block)
        return GibbsSampler(data, hyper, seed, learn_globals=learn_globals, backend=backend,
                            communicator=communicator)

    def shard_block(self) -> int:
        """The sampler's random-stream block: numba's 32 documents, or the PyTorch backend's
        on ``device`` when it is set (:mod:`cpgbn.backends.device_registry`)."""
        device = self.settings["device"]
        return gibbs_backend(device).doc_block(device)

    def _training_sampler(self, training: Training, data=None, seed=None, first_doc=None,
                          doc_block=None):
        """The sampler of a fit: :meth:`sampler`'s, or one worker's over its shard (its
        streams are keyed by global document blocks, which makes the workers' chain the
        single process').  ``data``, ``seed``, ``first_doc`` and the random-stream block
        ``doc_block`` replace the fit's (the pilot's sample)."""
        comm = training.communicator
        data = training.data if data is None else data
        seed = training.seed if seed is None else seed
        first_doc = training.first_doc if first_doc is None else first_doc
        if type(self).sampler is not GibbsMode.sampler:
            if comm.world_size > 1:
                raise CPGBNInputError(f"{type(self).__name__} draws with a sampler of its own, "
                                      f"which does not run distributed")
            return self.sampler(data, training.hyper, seed, learn_globals=True)
        return self._sampler(data, training.hyper, seed, learn_globals=True,
                             first_doc=first_doc, communicator=comm, doc_block=doc_block)

    def _pilot_globals(self, training: Training):
        """The fit's starting globals from its pilot chain (:mod:`cpgbn.inference.pilot`), or
        None where the corpus is small enough to start dense."""
        comm = training.communicator
        plan = plan_pilot(training.data, training.first_doc, PILOT_BLOCK, comm)
        if plan is None:
            return None
        seed = pilot_seed(training.seed)
        # no longer than the fit itself: a short fit (a test's, a quick look) does not pay
        # for a pilot of PILOT_SWEEPS sweeps
        return run_pilot(
            lambda data, first_doc: self._training_sampler(training, data, seed, first_doc,
                                                           PILOT_BLOCK),
            training.data, plan, training.layers, len(training.vocabulary),
            n_sweeps=min(PILOT_SWEEPS, self.settings["n_iter"]),
            progress=progress_bars(self.settings["progress"] and comm.is_root, "pilot"))

    def training_bytes(self, data: ConvData, layers, vocab_size: int) -> int:
        return self._gibbs_bytes(data, layers, vocab_size, training=True)

    def sweep_bytes(self, data: ConvData, layers, vocab_size: int) -> int:
        """Bytes :meth:`infer` needs for ``data`` (Gibbs sweeps with the globals fixed, in
        every mode: ``CPGBN.infer`` checks it)."""
        return self._gibbs_bytes(data, layers, vocab_size, training=False)

    def _gibbs_bytes(self, data: ConvData, layers, vocab_size: int, training: bool) -> int:
        """The host's bytes; on a GPU its free memory is checked here too, against the lower
        bound of what the sampler holds there (:func:`cpgbn.backends.torch.devices.
        check_device_memory`), since the host's check cannot see it."""
        import numba

        from ..inference.memory import estimate_bytes
        import_torch_first()  # get_num_threads starts numba's pool (cpgbn.backends.numba.openmp)
        n_threads = self.settings["n_threads"] or numba.get_num_threads()
        backend = gibbs_backend(self.settings["device"])
        backend.check_device_memory(data.n_positions, layers[0], self.settings["device"])
        device = backend.memory_kind(self.settings["device"])
        wide = training and device is None and data.largest_word_units() > COUNT_LIMIT
        return estimate_bytes(data.n_docs, data.n_positions, data.n_cells, vocab_size,
                              data.filter_width, layers, n_threads, training, device, wide,
                              **self._start_shape(data, training))

    def _start_shape(self, data: ConvData, training: bool) -> dict:
        """How the chain starts, for the estimate: sparse with fitted kernels (inference), or
        after a pilot chain, dense on its sample (a fit; this process' documents decide, as
        if they were the whole corpus), or dense."""
        if not training:
            return dict(sparse_start=START_LIVE_KERNELS)
        plan = plan_pilot(data, 0, PILOT_BLOCK)
        if plan is None:
            return {}
        sizes = np.diff(data.doc_positions)
        return dict(sparse_start=START_LIVE_KERNELS,
                    dense_positions=int(sizes[plan.docs].sum()))

    def inference_bytes(self, data: ConvData, layers, vocab_size: int) -> int:
        return self.sweep_bytes(data, layers, vocab_size)

    def fit(self, training: Training) -> FittedState:
        s, data = self.settings, training.data
        ckpt = training.checkpointing
        weights = (None if s["feature_normalization"] == "none"
                   else 1.0 / np.maximum(data.true_length, 1))  # as in the features
        comm = training.communicator
        with numba_threads(s["n_threads"]):
            sampler = self._training_sampler(training)
            state = sampler.initial_state(training.layers, len(training.vocabulary),
                                          self._pilot_globals(training))
            identity = corpus_identity(data, training.first_doc, comm,
                                       training.vocabulary.tokens, training.chain_params,
                                       training.seed)
            result = sampler.run(state, s["n_iter"], s["burn_in"],
                                 progress=progress_bars(s["progress"] and comm.is_root,
                                                        "fit"),   # shown once
                                 monitor=MixingMonitor(weights, comm),
                                 checkpoint_dir=ckpt.directory,
                                 checkpoint_every=ckpt.every, resume=ckpt.resume,
                                 identity=identity, labels=training.labels)
        finish_fit(training)
        theta, train_features = training_features(result.theta_mean, training,
                                                  s["feature_normalization"])
        usage = comm.broadcast_object(None if theta is None else theta[0].sum(axis=0))
        return FittedState.of(
            vocabulary_=training.vocabulary, layers_=training.layers, hyper_=training.hyper,
            seed_=training.seed, globals_=result.globals_mean, kernel_usage_=usage / usage.sum(),
            n_train_tokens_=training.n_tokens, loglik_trace_=np.asarray(result.loglik),
            sweep_seconds_=np.asarray(result.seconds), train_features_=train_features,
            train_theta_=theta, mixing_=result.mixing)

    def infer(self, fitted: FittedState, data: ConvData, *, n_iter: int, burn_in: int,
              seed: int, on_sweep=None, first_doc: int = 0) -> RunResult:
        """``n_iter`` sweeps over ``data`` with the fitted globals fixed; the run's result
        (means of theta^(1..T) over the sweeps after ``burn_in``).  ``on_sweep(state,
        collector)`` is called after every sweep (numpy arrays)."""
        s = self.settings
        with numba_threads(s["n_threads"]):
            sampler = self.sampler(data, fitted.hyper_, seed, learn_globals=False,
                                   first_doc=first_doc)
            state = sampler.initial_state(fitted.layers_, len(fitted.vocabulary_),
                                          fitted.globals_)
            return sampler.run(state, n_iter, burn_in,
                               progress=progress_bars(s["progress"], "transform"),
                               on_sweep=on_sweep)

    def thetas(self, fitted: FittedState, data: ConvData, first_doc: int = 0) -> list[np.ndarray]:
        s = self.settings
        return self.infer(fitted, data, n_iter=s["transform_iter"],
                          burn_in=s["transform_burn_in"], seed=transform_seed(fitted.seed_),
                          first_doc=first_doc).theta_mean
