"""The user-facing estimator: :class:`CPGBN` (scikit-learn conventions).

``CPGBN(layers=(200,))`` is the paper's single-layer model (CPFA with the pooling prior);
``layers=(200, 100, 50)`` the three-layer CPGBN.  ``fit`` runs the Gibbs sampler over a
training corpus (or, with ``inference="hybrid"`` / ``"minibatch-gibbs"``, the paper's
minibatch TLASGR-MCMC; each mode is a class of :mod:`cpgbn.modes`); ``transform`` infers features of any
documents with the learned globals held fixed (burn-in, then the mean of theta^(1) over
collected sweeps, paper section 4; a hybrid model's encoder gives them in one forward pass).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from . import blocks
from .errors import CPGBNInputError, check_int as _check_int
from .inference.checkpoint import fingerprint
from .inference.communicator import agree, as_communicator, gather_rows, same_settings
from .inference.state import GlobalParameters
from .inference.streams import transform_seed
from .layers.cells import ConvData, ObservationModel, from_token_sequences
from .modes import (FITTED_ATTRIBUTES, Checkpointing, FittedState, InferenceMode, Training,
                    features, mode_class, mode_for)
from .modes.gibbs_mode import GibbsMode, Inference
from .params import (CPGBN_PARAMETERS, DEFAULT_TOKEN_COUNT, MODEL as MODEL_PARAMETERS,
                     declare_init)
from .settings import model_settings, run_settings
from .text.corpus import Corpus
from .text.documents import Documents
from .text.vocabulary import Vocabulary

_MAX_SEED = 2**63 - 1


class CPGBN(TransformerMixin, BaseEstimator):
    """Convolutional Poisson Gamma Belief Network, fitted by Gibbs sampling or TLASGR-MCMC.

    Parameters
    ----------
    layers : sequence of int, default (200,)
        Widths K_1, ..., K_T: K_1 convolutional kernels, then the gamma belief stack.
    filter_width : int, default 3
        F, the number of word positions one kernel spans.
    vocab_size : int, default 8000
        Rows of the vocabulary built at fit time, including id 0, the shared
        out-of-vocabulary token (a real row of every kernel).  Ignored when ``fit`` is given
        an encoded :class:`~cpgbn.text.Corpus`.
    token_count : int or "bernoulli-poisson", default 800
        The observation model of a token.  ``"bernoulli-poisson"`` is the paper's link
        x = 1(m > 0) with a zero-truncated Poisson latent count; an integer c gives every token
        c pseudo-counts (the authors' code, a tempered likelihood).  The default was chosen by
        measured accuracy on TREC, SUBJ and MR (see the documentation's results).
    padding : int, default 0
        Empty columns added before and after every document, so a kernel may overhang an edge
        by up to ``padding`` words (0 <= padding <= F - 1).  0 is the paper's model, with
        S_j = L_j - F + 1 positions (eq. 1); the authors' code pads.
    eta : float or sequence of float, default 0.05
        Dirichlet concentration of the kernels (eta^(1)) and of each Phi^(t).
    e0, f0 : float, default 0.1
        Gamma prior of every c^(t)_j.
    sample_r : bool, default True
        Draw the top-layer shapes r (True) or keep r = 1/K_T (the authors' code).
    pooling_concentration : float > 0 or None, default None
        beta, the Dirichlet concentration of the pooling layer's positional split.  None: the
        paper's tied prior (eq. 3), w_jks ~ Gam(a_jk / S_j, 1/c^(2)_j), whose split over the
        S_j positions is Dir(a_jk / S_j, ...).  A number: theta^(1)_jk ~ Gam(a_jk, 1/c^(2)_j)
        and (w_jk1..w_jkS_j) = theta^(1)_jk pi_jk with pi_jk ~ Dir(beta, ..., beta), a
        pseudo-count per position in the units of the token counts (see ``token_count``).
        beta = 1000 gains about 4 points on SUBJ and loses about 5 on TREC, three seeds
        (docs/generalisation.md).
    n_iter, burn_in : int, default 200, 150
        Training sweeps, and how many of them come before the averages are collected.
    transform_iter, transform_burn_in : int or None
        Sweeps for new documents and their burn-in; None: ``min(n_iter, 50)`` sweeps
        (:data:`cpgbn.settings.TRANSFORM_SWEEPS`) and the fit's share of burn-in (50 and 37
        at the defaults; chosen on validation splits: results/transform_sweeps.md).
    feature_normalization : {"length", "none"}, default "length"
        Divide theta^(1)_j by the document length L_j (the authors' features) or not.
    random_state : int or None
        Seed.  A seed gives the same model and features for any thread count; with
        ``inference="hybrid"``, for one torch thread count (:mod:`cpgbn.inference.hybrid`).
    n_threads : int or None
        numba threads during fit/transform, and torch's with ``inference="hybrid"`` (None:
        their defaults); restored afterwards.
    memory_limit : int or None
        Bytes a fit or transform may use; before allocating, the estimate of
        :mod:`cpgbn.inference.memory` is checked against it and against the available memory.
    progress : bool, default False
        Show a progress bar.
    device : None or str, default None
        None: the numba sampler (CPU).  A torch device ("cpu", "cuda", "cuda:1") selects the
        PyTorch sampler of :mod:`cpgbn.backends.torch` (same conditionals, same order;
        reproducible for a seed and device, equal to the numba sampler in distribution, not bit
        for bit).  Needs ``pip install 'cpgbn[torch]'``.  With ``inference="hybrid"``: the
        encoder's device (None: the CPU).
    inference : {"gibbs", "minibatch-gibbs", "hybrid"}, default "gibbs"
        "gibbs": the sampler above.  The minibatch modes learn the globals by TLASGR-MCMC with
        local Gibbs sweeps ("minibatch-gibbs", numba) or the paper's Weibull encoder ("hybrid",
        Algorithm 1, PyTorch); there ``n_iter``/``burn_in`` only set Gibbs inference's sweeps.
        See :mod:`cpgbn.modes`.  A subclass of one of these modes' classes
        (:class:`cpgbn.modes.InferenceMode`) may be given instead of its name: a variant, such
        as a Gibbs sampler on a backend of one's own (saved under its mode's name).
    batch_size, n_epochs : int, default 100, 10
        Minibatch modes: documents per minibatch, and passes over the training corpus.
    learning_rate : float, default 1e-3
        Hybrid: Adam's step size for the encoder.
    refine_iter : int, default 0
        Hybrid ``transform``: Gibbs sweeps (globals fixed) after the encoder's mean theta.
        0 is the encoder's forward pass alone (fastest); 2 gave features as accurate as the
        Gibbs-trained model's on TREC, SUBJ, MR and IMDB, where the encoder alone was 2.4-4.5
        points behind (docs/hybrid.md).
    encoder_precision : {"float32", "bfloat16"}, default "float32"
        Hybrid ``transform``: the arithmetic of the encoder's position head, most of the
        forward pass's time.  "bfloat16" rounds its inputs and outputs to bfloat16 (features
        within a few per cent of float32's, as accurate on IMDB); the encoder's pass a third
        faster on a CPU with bfloat16 dot products (AVX512-BF16, AMX), slower elsewhere
        (docs/hybrid.md).

    Attributes
    ----------
    vocabulary_ : Vocabulary
    globals_ : GlobalParameters
        Posterior means over the collected sweeps of D (V, F, K_1), Phi^(t), r.
    train_features_, train_theta_ : ndarray (n_docs, K_1), list of (n_docs, K_t)
        Features and theta^(1..T) of the training documents from the training chain (minibatch
        modes: as ``transform`` gives them).
    loglik_trace_, sweep_seconds_ : ndarray (n_iter,)
        Training log-likelihood and seconds of each sweep (empty in the minibatch modes).
    loss_trace_, kl_trace_, step_seconds_, encoder_config_, encoder_weights_
        Minibatch modes (:class:`cpgbn.modes.FittedState` documents every fitted attribute).
    kernel_usage_ : ndarray (K_1,)
        Share of each kernel in the training documents' theta^(1).
    kernel_windows_, kernel_window_counts_, kernel_window_shares_ : (K_1, 5, F), (K_1, 5), (K_1, 5)
        Per kernel the windows of the training documents it explains most, with how often
        each occurs (``_`` slots counting every matching window) and its share of the kernel:
        the phrases every view names a kernel by (:mod:`cpgbn.explain.kernel_windows`).
    mixing_ : cpgbn.inference.mixing.Mixing
        How the training chain mixed: per sweep, the share of token units and of positions
        whose kernel changed, and the effective sample size of the features (``summary()``).
    seed_ : int
        The resolved seed.
    """

    __init__ = declare_init(CPGBN_PARAMETERS)
    #: The estimator name a saved model records (:mod:`cpgbn.io`); None for CPGBN and PGBN,
    #: whose parameters tell them apart.
    _saved_as: str | None = None
    #: The settings this estimator fixes, by name: not parameters (``get_params`` does not
    #: list them, ``set_params`` refuses them), read with the parameters (:meth:`_parameters`).
    #: CPGBN fixes none; PGBN and the classifier name theirs.
    _fixed_settings: dict = {}

    # ------------------------------------------------------------------ validation
    def _parameters(self) -> dict:
        """Every setting by name: the parameters and the settings this estimator fixes."""
        return {**self._fixed_settings, **self.get_params()}

    def _model_settings(self) -> dict:
        """The model's settings checked and resolved (:func:`cpgbn.settings.model_settings`)."""
        return model_settings(self._parameters(), self._observation())

    def _run_settings(self) -> dict:
        """How fits and inference run, checked and resolved (:func:`cpgbn.settings.
        run_settings`); what ``transform`` reads.

        Checked once per set of parameters: ``fit`` checks them (and resolves the device),
        and a ``transform``, ``predict_proba``, ``score`` or explanation after it reuses the
        result while the parameters are what they were; a parameter changed since (a loaded
        model given more ``n_threads``, say) is checked on the next call."""
        params = self._parameters()
        key = repr(sorted(params.items()))   # the values as given: a change is a new key
        checked = self.__dict__.get("_checked_run_settings")
        if checked is None or checked[0] != key:
            checked = (key, run_settings(params, self._mode_class()))
            self.__dict__["_checked_run_settings"] = checked
        return dict(checked[1])

    def _mode_class(self) -> type[InferenceMode]:
        """The class of this estimator's inference mode: the one place that names it (the
        value of ``inference``; the classifier's supervised mode)."""
        return mode_class(self.inference)

    def _prepare(self, training: Training) -> Training:
        """The fit's job as the mode will get it; a subclass checks or adds to it here (the
        classifier: its labels and classes)."""
        return training

    def _validated(self) -> dict:
        """Every parameter checked; the resolved values (the model's and the run's)."""
        return {**self._model_settings(), **self._run_settings()}

    def _mode(self, settings: dict | None = None) -> InferenceMode:
        """The inference mode of ``inference`` over the run settings."""
        return mode_for(self._run_settings() if settings is None else settings)

    # ------------------------------------------------------------------ data
    def _corpus(self, X, vocabulary: Vocabulary | None, vocab_size: int | None) -> Corpus:
        # a file is read whole: the paths that stream never come here
        return Documents.of(X).corpus(vocabulary, vocab_size)

    def _observation(self) -> ObservationModel:
        """``token_count`` resolved (and validated): the observation model of every token."""
        return ObservationModel.of(self.token_count)

    @property
    def observation_model(self) -> ObservationModel:
        """How the tokens are observed (``token_count`` resolved)."""
        return self._observation()

    @property
    def loss_name(self) -> str | None:
        """What ``loss_trace_`` holds in this model's inference mode (None for Gibbs, whose
        training figure is the log-likelihood in ``loglik_trace_``)."""
        return self._mode_class().loss_name

    @property
    def mode_name(self) -> str:
        """The inference mode that fits and infers (:mod:`cpgbn.modes`): the value of
        ``inference``, or the classifier's ``"supervised"``."""
        return self._mode_class().name

    def _data(self, corpus: Corpus, filter_width: int, stacklevel: int = 3) -> ConvData:
        """The corpus' cells; a warning (attributed ``stacklevel`` frames up: the caller of
        ``fit`` or ``transform``) for documents shorter than a filter."""
        data = from_token_sequences(corpus.tokens, corpus.offsets, filter_width,
                                    self._observation(), self._parameters()["padding"])
        if data.n_padded():
            warnings.warn(f"{data.n_padded()} document(s) shorter than filter_width={filter_width} "
                          "are padded with empty columns", stacklevel=stacklevel)
        return data

    def _check_memory(self, needed: int | None) -> None:
        """Refuse a run whose host-memory estimate does not fit (None: not estimated).  A
        GPU's free memory is the Gibbs mode's to check, against a lower bound, when it
        estimates (:meth:`cpgbn.modes.gibbs_mode.GibbsMode.training_bytes`)."""
        from .inference.memory import check_memory
        if needed is not None:
            check_memory(needed, self.memory_limit)

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, checkpoint_dir=None, checkpoint_every: int = 10,
            resume: bool = False, communicator=None):
        """Fit the model to the documents ``X`` (strings, an encoded Corpus, or a
        :class:`~cpgbn.text.TextFile`) by the mode that ``inference`` names
        (:mod:`cpgbn.modes`); ``y``, when given, labels the documents (one per document; a
        labelled TextFile carries its own) and travels with them to every training step.

        A :class:`~cpgbn.text.TextFile` is streamed in the minibatch modes: one pass builds the
        vocabulary, then training reads a block of lines at a time, so the file may be larger
        than memory (the same model as the file's texts in a list give); such a fit keeps no
        ``train_features_`` / ``train_theta_`` (``transform`` the file for them).  The Gibbs
        sampler holds every position, so there it reads the file whole.

        With ``checkpoint_dir``, the sampler state is saved there (atomically) every
        ``checkpoint_every`` sweeps (minibatch steps); ``resume=True`` continues from it if it
        exists and was made from the same data and parameters, ending in exactly the model an
        uninterrupted fit gives.  The checkpoint is deleted when the fit completes.

        ``communicator`` (:mod:`cpgbn.backends.torch.distributed`): this process is one
        worker of a data-parallel Gibbs fit, called with the same arguments on every worker;
        it reads only its shard of ``X`` (:mod:`cpgbn.modes.sharded`) and every worker ends
        with the single process' globals and trace; the root alone keeps ``train_features_``
        and ``train_theta_`` (gathered), which the others lack.  With ``checkpoint_dir``
        the root alone writes the whole corpus' state there (the workers' rows gathered;
        the directory need be on the root's disk only) and ``resume=True`` continues it with
        this or any other number of workers, one process without a communicator included:
        the chain is the same (:mod:`cpgbn.modes.sharded`).
        """
        from .explain.kernel_windows import record_kernel_windows
        from .explain.records import KernelWindowsRecord, PostFitPass
        from .modes.jobs import JobSettings, job_from_file, job_from_shard, job_from_texts
        from .version import __version__
        settings = self._validated()
        mode = self._mode(settings)
        checkpointing = Checkpointing(checkpoint_dir,
                                      _check_int("checkpoint_every", checkpoint_every, 1),
                                      bool(resume))
        seed = (None if self.random_state is None
                else _check_int("random_state", self.random_state, 0))
        chain_params = self._chain_params(mode)
        comm = as_communicator(communicator)
        same_settings({**chain_params, "cpgbn version": __version__},
                      comm)   # random_state included
        if seed is None:   # one chain: the root's fresh seed on every worker
            seed = comm.broadcast_object(int(np.random.SeedSequence().entropy % _MAX_SEED))
        spec = JobSettings(
            settings, seed, checkpointing, chain_params,
            corpus=lambda X, size: self._corpus(X, None, size),
            # _data <- this lambda <- a job builder <- fit <- fit's caller, who is warned
            cells=lambda corpus: self._data(corpus, settings["filter_width"], stacklevel=5),
            check_memory=self._check_memory, observation=self._observation(),
            padding=settings["padding"], block_docs=blocks.STREAM_BLOCK_DOCS)
        # the records the views read (:mod:`cpgbn.explain.records`), in one pass over the
        # documents: a streamed fit's, in its mode's last pass over the file
        post_fit = corpus = None
        documents = Documents.of(X)   # the one place that asks what form X has
        if comm.world_size > 1:   # this worker's shard of X
            training = job_from_shard(spec, mode, documents, y, comm)
        elif documents.streamed and mode.streams_files:
            training = job_from_file(spec, mode, documents)
            post_fit = PostFitPass(self, mode, training.scan.n_docs)
            training.after_fit = post_fit.visit
        else:
            training, corpus = job_from_texts(spec, mode, documents, y)
        fitted = mode.fit(self._prepare(training))
        self._set_fitted(fitted)
        if corpus is not None:   # in memory: the corpus, as one block
            post_fit = PostFitPass(self, mode, len(corpus))
            post_fit.visit(fitted, corpus, training.data)
        if post_fit is not None:
            records = post_fit.finish(self)
        elif comm.is_root:   # a distributed fit: its root reads X for the kernels' phrases
            records = KernelWindowsRecord.attributes_of(record_kernel_windows(self, documents))
        else:
            records = {}
        for name, value in records.items():
            setattr(self, name, value)
        return self

    def _chain_params(self, mode: InferenceMode) -> dict:
        """The parameters that change the Markov chain (not threads or progress bars)."""
        params = self.get_params()
        names = [p.name for p in MODEL_PARAMETERS] + ["random_state", "inference"]
        return {name: params[name] for name in names + list(mode.chain_parameters)
                if name in params}

    def _set_fitted(self, fitted: FittedState) -> None:
        """Assign a fit's state (every fitted attribute; those it lacks are removed)."""
        for name in FITTED_ATTRIBUTES:
            self.__dict__.pop(name, None)
        for name, value in fitted.present().items():
            setattr(self, name, value)

    def _fitted_state(self) -> FittedState:
        """The fitted attributes as a record (:class:`~cpgbn.modes.FittedState`)."""
        return FittedState.of(**{name: getattr(self, name, None) for name in FITTED_ATTRIBUTES})

    def fit_transform(self, X, y=None, **fit_params):
        """Fit, and return the training documents' features from the training chain.

        The averages of theta^(1) collected while the globals were being learned (the
        authors' protocol); ``fit(X).transform(X)`` instead re-infers them with the globals fixed.
        The minibatch modes have no such chain: there the two are equal.
        """
        self.fit(X, y, **fit_params)
        if not hasattr(self, "train_features_"):   # a streamed fit keeps none
            return self.transform(X)
        return self.train_features_

    def infer(self, X, *, n_iter: int | None = None, burn_in: int | None = None,
              seed: int | None = None, on_sweep=None) -> Inference:
        """Run the sampler on the documents ``X`` with the fitted globals held fixed (paper
        section 4), as :meth:`transform` does (except with ``inference="hybrid"``, whose
        transform reads the encoder), and return everything the run produced.

        ``n_iter`` and ``burn_in`` default to ``transform_iter`` and ``transform_burn_in``,
        ``seed`` to the seed ``transform`` uses.  ``on_sweep(state, inference)``, if given, is
        called after every sweep with the sampler's :class:`~cpgbn.inference.state.GibbsState`
        as numpy arrays (``state.sweep`` sweeps done) and the :class:`Inference` being built
        (its ``corpus`` and ``data`` are set; ``result`` is None until the run ends), to collect
        per-sweep quantities such as the latent counts m of every position; it runs on any
        ``device`` (the state is copied to the host for it).  ``n_threads``, ``memory_limit`` and ``progress`` apply.
        """
        self._check_fitted()
        settings = self._run_settings()
        n_iter = settings["transform_iter"] if n_iter is None else _check_int("n_iter", n_iter, 1)
        burn_in = (settings["transform_burn_in"] if burn_in is None
                   else _check_int("burn_in", burn_in, 0))
        if burn_in >= n_iter:
            raise CPGBNInputError(f"burn_in must be < n_iter, got burn_in={burn_in}, n_iter={n_iter}")
        seed = transform_seed(self.seed_) if seed is None else _check_int("seed", seed, 0)
        corpus = self._corpus(X, self.vocabulary_, None)
        data = self._data(corpus, self.globals_.D.shape[1])
        mode = self._mode(settings)   # Gibbs inference with the globals fixed, in every mode
        gibbs = mode if isinstance(mode, GibbsMode) else GibbsMode(settings)
        self._check_memory(gibbs.sweep_bytes(data, self.layers_, len(self.vocabulary_)))
        inferred = Inference(corpus, data, None)
        hook = None if on_sweep is None else (lambda state, collector: on_sweep(state, inferred))
        inferred.result = gibbs.infer(self._fitted_state(), data, n_iter=n_iter,
                                      burn_in=burn_in, seed=seed, on_sweep=hook)
        return inferred

    def transform(self, X, *, all_layers: bool = False, communicator=None) -> np.ndarray:
        """Features of the documents ``X``: mean theta^(1) over collected sweeps (globals fixed);
        with ``inference="hybrid"`` the encoder's mean theta^(1) (then ``refine_iter`` Gibbs
        sweeps, if > 0).

        Empty documents keep their row (features drawn from the prior).  With ``all_layers``
        the features of every layer are concatenated [theta^(1), ..., theta^(T)].

        ``communicator``: this process is one worker of a distributed transform, called with
        the same arguments on every worker; it reads only its shard of ``X`` (a TextFile's
        line range) and the root returns every document's features, equal to one process'
        (the others return None).
        """
        from .modes.jobs import transform_blocks
        self._check_fitted()
        settings = self._run_settings()
        mode = self._mode(settings)
        comm = as_communicator(communicator)
        # one model and one way to infer on every worker (a stale copy of the model directory
        # on one machine would mix two models' features)
        g, params = self.globals_, self.get_params()
        same_settings(lambda: {**{name: value for name, value in params.items()
                                  if name not in ("n_threads", "progress", "memory_limit")},
                               "model": fingerprint(g.D, *g.phi, g.r, self.seed_),
                               "all_layers": all_layers}, comm)
        rows = [features(*self._thetas(texts, mode, first_doc, comm),
                         settings["feature_normalization"], all_layers)
                for texts, first_doc in transform_blocks(mode, Documents.of(X), comm)]
        return gather_rows(rows[0] if len(rows) == 1 else np.vstack(rows), comm)

    def _thetas(self, X, mode: InferenceMode, first_doc: int, communicator):
        """(theta^(1..T), cells) of the documents ``X`` as ``transform`` infers them, whose
        first document has global id ``first_doc``; the workers' verdicts on the cells and
        the memory are every worker's (:func:`~cpgbn.inference.communicator.agree`)."""
        built = []

        def check():
            data = self._data(self._corpus(X, self.vocabulary_, None), self.globals_.D.shape[1])
            self._check_memory(mode.inference_bytes(data, self.layers_, len(self.vocabulary_)))
            built.append(data)
        agree(check, communicator)
        return mode.thetas(self._fitted_state(), built[0], first_doc=first_doc), built[0]

    def log_likelihood(self, X=None) -> float:
        """Log-likelihood per token: of the training data at the last sweep (X=None), or of
        new documents X, averaged over the collected sweeps of inference with the globals fixed."""
        self._check_fitted()
        if X is None and len(self.loglik_trace_) == 0:
            raise CPGBNInputError(f"inference={self.mode_name!r} records no training log-"
                                  "likelihood (it never sweeps the whole corpus); pass documents "
                                  "X, or read the training loss in loss_trace_")
        if X is None:
            return float(self.loglik_trace_[-1] / max(self.n_train_tokens_, 1))
        inferred = self.infer(X)
        result = inferred.result
        collected = result.loglik[-max(result.n_collected, 1):]
        return float(np.mean(collected) / max(int(inferred.data.true_length.sum()), 1))

    def __sklearn_is_fitted__(self) -> bool:
        """The scikit-learn protocol behind ``sklearn.utils.validation.check_is_fitted``."""
        return hasattr(self, "globals_")

    def _check_fitted(self):
        if not hasattr(self, "globals_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("this CPGBN is not fitted yet: call fit first")

    def recorded(self, name: str):
        """The fitted attribute ``name`` (a field of :class:`~cpgbn.modes.FittedState`) where
        this fit set it, else None: a mode that does not learn it (``loss_trace_`` in Gibbs),
        a record a fit could not make (a distributed or streamed fit keeps no
        ``train_features_``), or a model saved before the record existed.  The way the
        explanations ask a model for what it holds; a name that is no fitted attribute is an
        error, not a silent None."""
        if name not in FITTED_ATTRIBUTES:
            raise CPGBNInputError(f"{name!r} is not a fitted attribute; they are: "
                                  + ", ".join(FITTED_ATTRIBUTES))
        self._check_fitted()
        return self.__dict__.get(name)

    def encode(self, X) -> Corpus:
        """The documents ``X`` (strings, or a :class:`~cpgbn.text.Corpus` over this model's
        vocabulary) encoded with the fitted vocabulary; unknown words become id 0."""
        self._check_fitted()
        return self._corpus(X, self.vocabulary_, None)

    # ------------------------------------------------------------------ inspection
    @property
    def kernels_(self) -> np.ndarray:
        """The convolutional kernels as (K_1, V, F): kernels_[k, v, f] = d_{k,v,f}."""
        self._check_fitted()
        return np.transpose(self.globals_.D, (2, 0, 1))

    def phrases(self, kernel: int, top_n: int = 5):
        """The phrases kernel ``kernel`` explains in the training documents, as ``cpgbn
        topics`` shows them, the first being the kernel's name in every view: a list of up to
        ``top_n`` :class:`cpgbn.explain.Phrase` (``words`` with ``_`` at an open slot, ``weight``
        the phrase's share of the kernel's count there, ``count`` its occurrences), from the
        windows recorded at the end of the fit (:mod:`cpgbn.explain.kernel_windows`).  A model
        saved without that record gives the kernel's most probable phrases under D_k (beam
        search; ``count`` None).  :meth:`columns` is the per-column view."""
        from .explain import MIN_COLUMN_SHARE, best_phrases
        from .explain.kernel_table import recorded_phrases
        self._check_fitted()
        index = _check_int("kernel", kernel, 0)
        if index >= self.globals_.D.shape[2]:
            raise CPGBNInputError(f"kernel must be < {self.globals_.D.shape[2]}, got {index}")
        top_n = _check_int("top_n", top_n, 1)
        recorded = recorded_phrases(self, top_n=top_n)
        if recorded is not None:
            return recorded[index]
        return best_phrases(self.globals_.D[:, :, index], self.vocabulary_, top_n,
                            min_column_share=MIN_COLUMN_SHARE)

    def columns(self, kernel: int | None = None, top_n: int = 4, *, layer: int = 1,
                topic: int | None = None, hide_unknown: bool = True):
        """Top words of each column of a kernel (the paper's Table 3), or of a deeper topic.

        ``columns(k)`` is kernel k of layer 1; ``columns(layer=t, topic=k)`` projects topic k of
        layer t onto the kernels (Phi^(2) ... Phi^(t) onto D).  Returns F columns, each a list of
        ``top_n`` ``(word, probability)`` pairs, probability normalised within the column.
        """
        from .explain import phrase_matrix, top_words_per_column
        self._check_fitted()
        if (kernel is None) == (topic is None):
            raise CPGBNInputError("give a kernel (layer 1) or a topic with its layer, not both")
        index = _check_int("kernel" if topic is None else "topic", kernel if topic is None else topic, 0)
        if topic is None and index >= self.globals_.D.shape[2]:
            raise CPGBNInputError(f"kernel must be < {self.globals_.D.shape[2]}, got {index}")
        layer = _check_int("layer", layer, 1)
        top_n = _check_int("top_n", top_n, 1)
        return top_words_per_column(phrase_matrix(self.globals_, layer, index), self.vocabulary_,
                                    top_n, hide_unknown)

    def tree(self, layer: int | None = None, topic: int = 0, children: int = 3, top_n: int = 3,
             min_column_share: float | None = None):
        """The topic tree below ``topic`` of ``layer`` (default: the top layer), down to layer 1.

        Phrase columns with less than ``min_column_share`` of a topic's mass (default
        ``cpgbn.explain.MIN_COLUMN_SHARE``; 0 shows all) are left empty and printed as ``_``.

        Returns a :class:`cpgbn.explain.TopicNode`; ``str(cpgbn.explain.format_tree(node))``
        renders it as text.
        """
        from .explain import MIN_COLUMN_SHARE, topic_tree
        self._check_fitted()
        layer = len(self.layers_) if layer is None else _check_int("layer", layer, 1)
        share = MIN_COLUMN_SHARE if min_column_share is None else min_column_share
        return topic_tree(self.globals_, self.vocabulary_, layer, _check_int("topic", topic, 0),
                          _check_int("children", children, 1), _check_int("top_n", top_n, 1),
                          min_column_share=share)

    def summary(self, X=None, *, file=None, **kwargs) -> None:
        """Print the model's essentials on one screen: model, training, usage, the most used
        kernels with their best phrases; with documents ``X`` (normally the training data) also
        phrase widths, corpus phrases and NPMI coherence vs LDA.  ``file``: where to print
        (default stdout); other keyword arguments go to
        :func:`cpgbn.explain.summary.summary_text`."""
        from .explain.summary import summary_text
        self._check_fitted()
        print(summary_text(self, X, **kwargs), file=file)

    def kernel_usage(self) -> np.ndarray:
        """Share of each kernel in the training documents' theta^(1) (sums to 1)."""
        self._check_fitted()
        return self.kernel_usage_

    # ------------------------------------------------------------------ persistence
    def save(self, directory) -> None:
        """Save to a directory (JSON + npz, versioned, no pickle); atomic."""
        from .io import save_model
        self._check_fitted()
        save_model(self.get_params(), self._fitted_state(), directory,
                   estimator=self._saved_as)

    @classmethod
    def load(cls, directory) -> "CPGBN":
        """Load a model saved by :meth:`save` (by this class: a classifier's directory
        opens with ``CPGBNClassifier.load`` only)."""
        from .errors import ModelFormatError
        from .io import load_model
        params, fitted = load_model(directory, estimator=cls._saved_as)
        try:
            model = cls(**params)
        except TypeError as exc:
            raise ModelFormatError(f"model in {directory} is corrupted: {exc}") from None
        model._set_fitted(fitted)
        return model

    def _more_tags(self):
        return {"X_types": ["string"], "non_deterministic": False}


__all__ = ["CPGBN", "Inference", "DEFAULT_TOKEN_COUNT", "GlobalParameters"]
