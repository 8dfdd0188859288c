"""Hybrid inference (paper Algorithm 1): TLASGR-MCMC for D and every Phi^(t), and a Weibull
convolutional encoder trained on the ELBO for the local variables (instant features).

Step i (1-based) on a minibatch of B documents out of N:

1. the encoder (:class:`~cpgbn.backends.torch.encoder.WeibullConvEncoder`) draws w and
   theta^(2..T) from its upward-downward q (reparameterised; a torch generator seeded by
   (seed, i));
2. the loss, the negative ELBO per document averaged over the batch
   (:func:`~cpgbn.backends.torch.elbo.elbo_terms` with the globals as constants and, by
   ``prior_rates``, the prior rates c^(t+1)_j at their conditional means given the draw,
   :func:`~cpgbn.backends.torch.elbo.conditional_rates`, or at 1 as WHAI), takes one
   optimiser step (Adam, the gradient's norm clipped at
   ``max_grad_norm``) on the encoder's weights; loss and gradient are accumulated over groups
   of whole documents of about :data:`ENCODER_CHUNK_POSITIONS` positions (memory), the
   groups drawing from the step's generator in turn;
3. the statistics of the globals, by ``global_statistics``:

   * ``"gibbs"`` (the default): a fresh local Gibbs chain on the batch with the globals fixed,
     ``local_sweeps`` = (burn-in, collected) sweeps, the collected sweeps' statistics averaged:
     minibatch Gibbs (:class:`~cpgbn.inference.minibatch.MinibatchGibbs`, numba), which owns
     the globals' chain; the encoder reads a copy of its globals after each step;
   * ``"encoder"`` (the paper's form): with the same draw as step 1 (detached), the Gibbs
     schedule's local part reduces the batch to the statistics
     (:meth:`GibbsSampler.statistics_given_locals` on the PyTorch backend: m | w, D, then
     tables and splits upward through the encoder's theta^(2..T)), the kernel counts being
     their expectation given w and D (Rao-Blackwellised:
     :func:`~cpgbn.backends.torch.elbo.expected_kernel_counts`);

4. one :class:`~cpgbn.inference.updates.TLASGRGlobalUpdate` step with rho = N / B for D and
   every Phi^(t) (r from its rho-scaled conditional when ``hyper.sample_r``).

Why "gibbs" is the default: on the planted 2-layer corpus of the recovery tests the paper's
form stays near its random start (worst kernel TV 0.5 - 0.8 after 1500 - 6000 steps, against
0.11 - 0.16 for "gibbs" after 300 steps, and the same test's tolerance 0.15), with the ELBO's rates at 1 or at their conditional means and
either shape of q(w) (issue 35; docs/hybrid.md).  Its statistics are a deterministic
function of an encoder
trained against the current globals, so globals and encoder settle on a joint fixed point
(as in EM with a biased E-step) instead of sampling the globals' posterior; started at the
planted globals the 2-layer model drifts away from them (docs/hybrid.md).  With "gibbs" the
TLASGR chain is an exact minibatch sampler given its local chains, whatever the encoder does.

Every random number of step i is a function of (seed, i); with the encoder's weights, the
optimiser's moments, the TLASGR state and the globals saved, a resumed run repeats the
uninterrupted one exactly (:func:`cpgbn.inference.training.train`).  On the CPU a seed gives the
same model, bit for bit, on every run at one number of torch threads (``n_threads``, which the
fit sets for torch as for numba; by default torch's own, fixed for a machine), a resumed run
included: the encoder and the loss gather rows by
:func:`~cpgbn.backends.torch.packed.gather_rows`, whose gradient adds in index order, where
``x[index]``'s gradient adds with atomic additions from all threads in a varying order.
Another number of threads may round differently: MKL splits its matrix products by thread
count (the TREC fit of issue 35 gives the same model at 1 and 2 threads, and encoder weights
up to 6e-6 apart at 4).  MKL's strict reproducible mode, ``MKL_CBWR=AUTO,STRICT`` in the
environment before the process starts, removes that too: at 4 threads that fit then equals the
2-thread one.

New documents: :func:`encoder_features` (the encoder's deterministic mean path) and, for a few
Gibbs refinement sweeps from there, :func:`refine_with_gibbs`.

This module is the schedule: the order of the steps, which statistics feed which update, the
grouping of documents, the seeds, what a checkpoint holds.  Every tensor operation (the
encoder, its draws, loss, gradient and optimiser, its mean path) is a method of the encoder
backend (:class:`cpgbn.inference.backend_protocols.EncoderBackend`;
:class:`cpgbn.backends.torch.encoder_backend.TorchEncoderBackend` on the ``device`` asked for), imported
when first needed, so that this module imports without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CPGBNInputError, check_choice
from .backend_protocols import EncoderBackend
from .batches import Batch, ConvDataBlocks, Minibatches
from .communicator import as_communicator
from .supervision import Supervision, Validation
from .state import GibbsState, GlobalParameters, Hyperparameters
from .streams import ENCODER_DRAW as _ENCODER_DRAW, ENCODER_INIT as _ENCODER_INIT
from .streams import REFINE as _REFINE, derived_seed
from .tlasgr import TLASGRSchedule
from .training import StepReport, TrainingTrace, train
from .minibatch import MinibatchGibbs
from .updates import DistributedGlobalUpdate, TLASGRGlobalUpdate

__all__ = ["GLOBAL_STATISTICS", "PRIOR_RATES", "ENCODER_PRECISIONS", "HybridTrainer",
           "HybridResult", "Supervision", "Validation",
           "fit_hybrid", "encoder_features", "refine_with_gibbs", "build_encoder"]

#: Positions per group of documents in the encoder's step: the batch's loss and gradient are
#: accumulated over groups of whole documents of about this many positions, so the autograd
#: graph (some 20 tensors of (positions, K_1) floats, a few of (cells, F, K_1)) is bounded by
#: one group instead of growing with the batch: about 200 MB at K_1 = 200, against 600 MB for a
#: batch of 100 IMDB reviews at once.  The groups' draws come from the step's generator in turn.
ENCODER_CHUNK_POSITIONS = 8192


def document_groups(doc_positions, max_positions: int) -> list:
    """Consecutive documents in groups of at most ``max_positions`` positions (a longer
    document alone): a list of index arrays covering 0..B-1 in order."""
    ends = np.asarray(doc_positions, dtype=np.int64)
    groups, start = [], 0
    n_docs = len(ends) - 1
    while start < n_docs:
        stop = int(np.searchsorted(ends, ends[start] + max_positions, side="right")) - 1
        stop = max(stop, start + 1)
        groups.append(np.arange(start, min(stop, n_docs)))
        start = stop
    return groups


#: Where the TLASGR step's statistics come from (:class:`HybridTrainer`'s ``global_statistics``).
GLOBAL_STATISTICS = ("gibbs", "encoder")
#: The encoder's options (:class:`~cpgbn.backends.torch.encoder.WeibullConvEncoder`) unless
#: ``encoder_options`` says otherwise; written into every new model's encoder configuration.
ENCODER_DEFAULTS = {"pooling": "mean", "w_shape_above": "pooled"}
#: The prior rates c of the encoder's ELBO (:class:`HybridTrainer`'s ``prior_rates``):
#: "conditional", the model's rates at their conditional means given the draw; "one", WHAI's
#: rates fixed at 1 (the earlier default, kept to reproduce docs/hybrid.md's measurements).
PRIOR_RATES = ("conditional", "one")
#: ``CPGBN(encoder_precision=...)``: the arithmetic of the encoder's position head when it
#: computes features (float32: the encoder's own; bfloat16: ``mean_thetas(head_dtype=...)``)
ENCODER_PRECISIONS = ("float32", "bfloat16")


@dataclass
class HybridResult:
    """What a hybrid run returns (everything a saved model needs is in the first three).

    globals : GlobalParameters (numpy) -- D (V, F, K_1) float32, Phi^(2..T) float64, r: the
        chain's last state.
    encoder_weights : dict name -> numpy array -- the encoder's ``state_dict`` (float32).
    encoder_config : dict -- the arguments of :func:`build_encoder` (vocab_size, layers,
        filter_width, pooling, w_shape_above): JSON-able.
    trace : TrainingTrace -- per step: negative ELBO and KL per document, seconds.
    tlasgr : dict of numpy arrays -- TLASGR state (to continue training).
    n_steps : int -- the steps run (fewer than asked when validation stopped the run early).
    gradient_norms : (n_steps,) the encoder gradient's norm before the clip, per step.
    validation_curve : (epochs scored,) validation accuracy at the end of each epoch (empty
        without validation); the returned encoder and globals are those of the best.
    best_epoch : int or None -- the epoch (1-based) whose state is returned.
    """

    globals: GlobalParameters
    encoder_weights: dict
    encoder_config: dict
    trace: TrainingTrace
    tlasgr: dict
    n_steps: int
    gradient_norms: np.ndarray = None
    validation_curve: np.ndarray = None
    best_epoch: int | None = None


def _torch_encoder():
    """The encoder backend's class (PyTorch), imported when first needed."""
    from ..backends.device_registry import encoder_backend
    return encoder_backend()


def build_encoder(encoder_config: dict, weights: dict | None = None, device="cpu"):
    """A WeibullConvEncoder from its config (and weights: numpy arrays by state_dict name):
    :func:`cpgbn.backends.torch.encoder_backend.build_encoder`."""
    from ..backends.torch.encoder_backend import build_encoder as build
    return build(encoder_config, weights, device)


class HybridTrainer:
    """Algorithm 1 for :func:`cpgbn.inference.training.train` (module docstring).

    Parameters
    ----------
    layers, vocab_size, filter_width, hyper : the model's.
    n_docs_total : int -- N.
    seed : int
    learning_rate : float -- Adam's step size for the encoder.
    device : torch device for the encoder, the globals and the statistics.
    encoder_options : dict -- ``pooling``, ``w_shape_above`` of the encoder.
    schedule : TLASGRSchedule
    globals_ : starting globals (default: Dir(1) draws, as minibatch Gibbs).
    max_grad_norm : float or None -- clip of the encoder gradient's norm (None: no clip).
        Without it the encoder does not learn even with the planted globals fixed: a few
        documents whose draws reach far into a Weibull tail (shape < 1) give gradients many
        orders of magnitude above the rest (docs/hybrid.md).
    global_statistics : "gibbs" or "encoder" -- step 3 of the module docstring.
    local_sweeps : (burn-in, collected) local Gibbs sweeps per step ("gibbs" only).
    prior_rates : "conditional" or "one" -- the rates c of the ELBO's priors
        (:data:`PRIOR_RATES`).
    supervision : :class:`~cpgbn.inference.supervision.Supervision` or None -- sCPGBN (paper
        section 2.3): the softmax's classes, the cross-entropy's weight, which steps are
        generative and the validation that picks the epoch kept.  None: the unsupervised
        model, every step Algorithm 1's.
    communicator : one of several data-parallel workers, each with minibatches of its shard:
        the encoder's gradients are averaged over the workers' batches
        (:meth:`EncoderBackend.average_gradients`) before every worker takes the same Adam
        step, and the globals' statistics are summed over them for one TLASGR step
        (:class:`~cpgbn.inference.updates.DistributedGlobalUpdate`), so every worker holds
        the same encoder and globals.

    The encoder's side is an :class:`~cpgbn.inference.backend_protocols.EncoderBackend` on ``device``
    (:attr:`encoder_backend`); :attr:`globals` are the globals as its arrays.
    """

    #: what the training loop's non-finite-loss error suggests
    non_finite_hint = "lower the learning rate or check the data"
    #: every worker holds the same state (:class:`~cpgbn.inference.training.Algorithm`)
    deals_rows = False

    def __init__(self, layers, vocab_size: int, filter_width: int, hyper: Hyperparameters, *,
                 n_docs_total: int, seed: int, learning_rate: float = 1e-3, device="cpu",
                 encoder_options: dict | None = None,
                 schedule: TLASGRSchedule = TLASGRSchedule(),
                 globals_: GlobalParameters | None = None, max_grad_norm: float | None = 10.0,
                 global_statistics: str = "gibbs", local_sweeps: tuple[int, int] = (5, 5),
                 prior_rates: str = "conditional", supervision: Supervision | None = None,
                 communicator=None):
        from .minibatch import check_globals, initial_globals

        self.communicator = as_communicator(communicator)
        self.layers = tuple(int(k) for k in layers)
        self.vocab_size, self.filter_width = int(vocab_size), int(filter_width)
        self.hyper, self.seed = hyper, int(seed)
        if hyper.pooling_concentration is not None:
            # the encoder's w and the ELBO's KL are written for the tied prior Gam(a_jk / S_j, .)
            raise CPGBNInputError("the hybrid inference has the tied pooling prior only: "
                                  "pooling_concentration must be None, got "
                                  f"{hyper.pooling_concentration!r}")
        if not (np.isfinite(learning_rate) and learning_rate > 0):
            raise CPGBNInputError(f"learning_rate must be a positive number, got {learning_rate}")
        self.learning_rate = float(learning_rate)
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise CPGBNInputError(f"max_grad_norm must be > 0 or None, got {max_grad_norm}")
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.global_statistics = check_choice("global_statistics", global_statistics,
                                              GLOBAL_STATISTICS)
        self.prior_rates = check_choice("prior_rates", prior_rates, PRIOR_RATES)
        self.rate_prior = (float(hyper.e0), float(hyper.f0)) if prior_rates == "conditional" \
            else None
        burn, collect = (int(x) for x in local_sweeps)
        if burn < 0 or collect < 1:
            raise CPGBNInputError(f"local_sweeps must be (burn-in >= 0, collected >= 1), got "
                                  f"{tuple(local_sweeps)}")
        self.local_sweeps = (burn, collect)
        self.supervision = supervision
        if supervision is not None and supervision.validation is not None \
                and self.communicator.world_size > 1:
            raise CPGBNInputError("validation needs one process")
        self.gradient_norms: list = []
        self.validation_curve: list = []
        self.best = None          # (epoch, encoder weights, host globals) of the best score
        self.finished = False     # validation's patience ran out: the loop stops
        # every option written out, so that a saved model says what its encoder was
        self.encoder_config = {"vocab_size": self.vocab_size, "layers": list(self.layers),
                               "filter_width": self.filter_width,
                               **ENCODER_DEFAULTS, **(encoder_options or {})}
        if supervision is not None:
            self.encoder_config["n_classes"] = supervision.n_classes
        # seeded initial weights (the caller's torch RNG untouched) and Adam
        self.encoder_backend: EncoderBackend = _torch_encoder().for_training(
            self.encoder_config, init_seed=derived_seed(self.seed, _ENCODER_INIT),
            learning_rate=self.learning_rate, device=device)
        if globals_ is None:
            globals_ = initial_globals(self.layers, vocab_size, filter_width, hyper, seed)
        else:
            check_globals(globals_, self.layers, self.vocab_size, self.filter_width)
        self._set_globals(globals_)
        self.schedule = schedule
        self._sampler = None
        self._local_chain = None
        if self.global_statistics == "gibbs":
            # The globals' chain is minibatch Gibbs itself (numba, numpy globals, its own
            # TLASGR state); the encoder reads a device copy of its globals after every step.
            self._local_chain = MinibatchGibbs(
                self.layers, self.vocab_size, self.filter_width, hyper,
                n_docs_total=n_docs_total, seed=self.seed, burn_in=self.local_sweeps[0],
                collect=self.local_sweeps[1], schedule=schedule, globals_=globals_,
                communicator=self.communicator)
            self.update = self._local_chain.update
        else:
            self.update = TLASGRGlobalUpdate(n_docs_total, self.seed, schedule=schedule,
                                             update_r=hyper.sample_r)

    @property
    def encoder(self):
        """The encoder's network (its backend's)."""
        return self.encoder_backend.encoder

    def _set_globals(self, g: GlobalParameters) -> None:
        put = self.encoder_backend.to_device
        self.globals = GlobalParameters(put(g.D, np.float32), [put(p, np.float64) for p in g.phi],
                                        put(g.r, np.float64))

    def host_globals(self) -> GlobalParameters:
        g, get = self.globals, self.encoder_backend.to_host
        return GlobalParameters(get(g.D), [get(p) for p in g.phi], get(g.r))

    def config(self) -> dict:
        return {"mode": "hybrid", "encoder": self.encoder_config, "hyper": repr(self.hyper),
                "seed": self.seed, "lr": self.learning_rate, "schedule": repr(self.schedule),
                "N": self.update.n_docs_total, "device": self.encoder_backend.device_type,
                "max_grad_norm": self.max_grad_norm,
                "global_statistics": self.global_statistics,
                "local_sweeps": list(self.local_sweeps), "prior_rates": self.prior_rates,
                # the supervised term's options (none for the unsupervised model)
                **({} if self.supervision is None else self.supervision.config())}

    def sampler_for(self, batch):
        """The Gibbs schedule on the encoder's device (the PyTorch backend) over ``batch``, with
        this trainer's TLASGR update (built at the first call, re-pointed at each new batch)."""
        from .gibbs import GibbsSampler

        if self._sampler is None:
            self._sampler = GibbsSampler(
                batch, self.hyper, self.seed, learn_globals=False,
                backend=self.encoder_backend.gibbs_backend(batch, self.seed),
                global_update=self.update)
        else:
            self._sampler.data = batch
        return self._sampler

    def step(self, i: int, record: Batch) -> StepReport:
        """One step of Algorithm 1 on the batch ``record`` (module docstring)."""
        batch = record.data
        term = self.supervision
        if self._local_chain is not None or (term is not None and not term.elbo):
            groups = document_groups(batch.doc_positions, ENCODER_CHUNK_POSITIONS)
        else:     # the encoder's statistics need the whole batch's draw at once
            groups = [np.arange(batch.n_docs)]
        generative = True if term is None else term.generative(i)
        loss, kl, draw = self.encoder_backend.gradient(
            batch, groups, derived_seed(self.seed, _ENCODER_DRAW, i), self.globals,
            self.rate_prior, None if term is None else term.batch_term(record.labels,
                                                                       batch.n_docs),
            elbo=generative, loss_scale=1.0 if term is None else term.loss_scale,
            elbo_reaches_filters=True if term is None else term.elbo_reaches_filters)
        # over the workers' batches, before the check: every worker must agree
        loss, kl, n_docs = self.encoder_backend.average_gradients(
            self.communicator, batch.n_docs, loss, kl)
        report = StepReport(loss, kl, n_docs)
        if not (np.isfinite(report.loss) and np.isfinite(report.kl)):
            return report                      # the driver stops; nothing is changed
        # a classifier clips its softmax's path and the generative heads apart
        self.gradient_norms.append(self.encoder_backend.apply_gradient(
            self.max_grad_norm, separate=term is not None))

        if generative:
            if self._local_chain is not None:
                self._local_chain.step(i, record)
                self._set_globals(self._local_chain.globals)
            else:
                self._encoder_statistics_step(i, batch, draw)
        validation = None if term is None else term.validation
        if validation is not None and validation.due(i):
            self._score_validation(validation, i // validation.every)
        return report

    def _score_validation(self, v: Validation, epoch: int) -> None:
        """Score the held-out documents at the end of ``epoch``; keep the state of the best
        epoch (the first of equal scores); stop when ``patience`` epochs in a row were not
        better."""
        p = self.encoder_backend.class_probabilities(self.globals.phi, v.data)
        accuracy = float(np.mean(np.argmax(p, axis=1) == v.codes))
        self.validation_curve.append(accuracy)
        if self.best is None or accuracy > max(self.validation_curve[:-1]):
            self.best = (epoch, self.encoder_weights(), self.host_globals())
        elif v.patience is not None and epoch - self.best[0] >= int(v.patience):
            self.finished = True

    def _encoder_statistics_step(self, i: int, batch, draw) -> None:
        """``global_statistics="encoder"``: the statistics of the globals from the encoder's
        draw (paper Algorithm 1, module docstring, step 3), then the TLASGR step."""
        g = self.globals
        sampler = self.sampler_for(batch)
        b = sampler.backend
        K1, n_docs = self.layers[0], batch.n_docs
        w, theta = self.encoder_backend.draw_locals(draw)
        rates = self.encoder_backend.draw_rates(draw)
        state = GibbsState(
            globals=g, w=w, m=b.full((batch.n_positions, K1), 0, b.count_dtype), theta=theta,
            c=rates,
            A=b.full((n_docs, K1), 0, b.count_dtype), loglik=b.full(n_docs, 0.0, np.float64),
            sweep=i)
        stats = sampler.statistics_given_locals(state, i)
        stats.kernel_counts = self.encoder_backend.expected_kernel_counts(draw, g.D)
        # self.update read here: tests replace it
        DistributedGlobalUpdate(self.update, self.communicator).apply(b, g, stats,
                                                                      hyper=self.hyper, sweep=i)

    # ---------------------------------------------------------------- checkpoints
    def encoder_weights(self) -> dict:
        return self.encoder_backend.weights()

    def to_arrays(self) -> dict:
        if self._local_chain is not None:   # the globals' chain saves its own state
            arrays = dict(self._local_chain.to_arrays())
        else:
            g = self.host_globals()
            arrays = {"D": g.D, "r": g.r}
            arrays.update({f"phi_{t}": p for t, p in enumerate(g.phi)})
            arrays.update(self.update.to_arrays())
        arrays.update({f"encoder/{k}": v for k, v in self.encoder_weights().items()})
        moments, _ = self.encoder_backend.optimizer_state()
        for index, named in moments.items():
            for key, value in named.items():
                arrays[f"optimizer/{index}/{key}"] = value
        arrays["gradient_norms"] = np.asarray(self.gradient_norms, dtype=np.float64)
        if self.supervision is not None and self.supervision.validation is not None:
            arrays["validation_curve"] = np.asarray(self.validation_curve, dtype=np.float64)
        if self.best is not None:
            _, weights, g = self.best
            arrays.update({f"best/encoder/{k}": v for k, v in weights.items()})
            arrays.update({"best/D": g.D, "best/r": g.r})
            arrays.update({f"best/phi_{t}": p for t, p in enumerate(g.phi)})
        return arrays

    def meta(self) -> dict:
        _, groups = self.encoder_backend.optimizer_state()
        return {"mode": "hybrid", "n_layers": len(self.layers), "param_groups": groups,
                "best_epoch": None if self.best is None else self.best[0],
                "finished": self.finished}

    def load(self, arrays, meta) -> None:
        T = int(meta["n_layers"])
        if self._local_chain is not None:   # the globals' chain restores its own state
            self._local_chain.load(arrays, {"n_layers": T})
            self._set_globals(self._local_chain.globals)
        else:
            self._set_globals(GlobalParameters(arrays["D"],
                                               [arrays[f"phi_{t}"] for t in range(T - 1)],
                                               arrays["r"]))
            self.update.load_arrays(arrays, T)
        weights = {k[len("encoder/"):]: v for k, v in arrays.items() if k.startswith("encoder/")}
        self.gradient_norms = list(np.asarray(arrays.get("gradient_norms", [])).tolist())
        self.validation_curve = list(np.asarray(arrays.get("validation_curve", [])).tolist())
        self.finished = bool(meta.get("finished", False))
        self.best = None
        if meta.get("best_epoch") is not None:
            self.best = (int(meta["best_epoch"]),
                         {k[len("best/encoder/"):]: v for k, v in arrays.items()
                          if k.startswith("best/encoder/")},
                         GlobalParameters(arrays["best/D"],
                                          [arrays[f"best/phi_{t}"] for t in range(T - 1)],
                                          arrays["best/r"]))
        moments: dict = {}
        for key, value in arrays.items():
            if key.startswith("optimizer/"):
                _, index, name = key.split("/")
                moments.setdefault(int(index), {})[name] = value
        self.encoder_backend.load(weights, moments, meta["param_groups"])

    def result(self, trace: TrainingTrace) -> HybridResult:
        """The run's result: the last state, or with validation the best epoch's."""
        globals_, weights, best_epoch = self.host_globals(), self.encoder_weights(), None
        if self.best is not None:
            best_epoch, weights, globals_ = self.best
        return HybridResult(globals_, weights, dict(self.encoder_config), trace,
                            self.update.to_arrays(), len(trace.loss),
                            np.asarray(self.gradient_norms, dtype=np.float64),
                            np.asarray(self.validation_curve, dtype=np.float64), best_epoch)


def fit_hybrid(source, layers, vocab_size: int, hyper: Hyperparameters, *, seed: int,
               n_steps: int, batch_size: int, learning_rate: float = 1e-3, device="cpu",
               encoder_options: dict | None = None, schedule: TLASGRSchedule = TLASGRSchedule(),
               globals_: GlobalParameters | None = None,
               max_grad_norm: float | None = 10.0, global_statistics: str = "gibbs",
               local_sweeps: tuple[int, int] = (5, 5), prior_rates: str = "conditional",
               supervision: Supervision | None = None, checkpoint_dir=None, checkpoint_every: int = 50, resume: bool = False,
               progress=None, on_step=None, communicator=None,
               n_docs_total: int | None = None) -> HybridResult:
    """Fit the globals and the encoder by Algorithm 1 (module docstring).

    ``source``: a ConvData or a block source
    (:class:`~cpgbn.inference.batches.TextFileBlocks`).  Other arguments: those of
    :class:`HybridTrainer` and :func:`~cpgbn.inference.training.train`; with a
    ``communicator``, ``source`` is this worker's shard and ``n_docs_total`` the corpus' size.
    """
    from .minibatch import filter_width_of

    if not hasattr(source, "read_block"):
        source = ConvDataBlocks(source)
    algorithm = HybridTrainer(layers, vocab_size, filter_width_of(source), hyper,
                              n_docs_total=source.n_docs if n_docs_total is None
                              else n_docs_total, seed=seed,
                              learning_rate=learning_rate, device=device,
                              encoder_options=encoder_options, schedule=schedule,
                              globals_=globals_, max_grad_norm=max_grad_norm,
                              global_statistics=global_statistics, local_sweeps=local_sweeps,
                              prior_rates=prior_rates, supervision=supervision,
                              communicator=communicator)
    trace = train(algorithm, Minibatches(source, batch_size, seed), n_steps,
                  checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                  resume=resume, progress=progress, on_step=on_step,
                  communicator=communicator)
    return algorithm.result(trace)


#: Documents per block of :func:`refine_with_gibbs`: the block's Gibbs state (w for each of its
#: positions and kernels) is what inference holds at once, about 200 MB for 1024 IMDB reviews
#: at K_1 = 200, instead of 10 GB for the 25k test reviews together.
REFINE_BLOCK_DOCS = 1024


def _check_precision(precision: str) -> None:
    """``CPGBN.encoder_precision``: one of :data:`ENCODER_PRECISIONS`."""
    check_choice("precision", precision, ENCODER_PRECISIONS)


def encoder_features(encoder_config: dict, encoder_weights: dict, globals_: GlobalParameters,
                     data, *, batch_size: int = 512, device="cpu",
                     head_precision: str = "float32") -> list[np.ndarray]:
    """theta^(1..T) of new documents from the encoder's mean path (no randomness):
    a list of (N, K_t) float64 arrays, t = 1..T, computed ``batch_size`` documents at a time
    by the encoder's chunked ``mean_thetas`` (``head_precision``: the arithmetic of its
    position head)."""
    _check_precision(head_precision)
    encoder = _torch_encoder().from_weights(encoder_config, encoder_weights, device)
    _, thetas = encoder.mean_path(globals_.phi, data, batch_size=batch_size,
                                  head_precision=head_precision, with_w=False)
    return thetas


def refine_with_gibbs(encoder_config: dict, encoder_weights: dict, globals_: GlobalParameters,
                      data, hyper: Hyperparameters, *, n_sweeps: int, seed: int,
                      device="cpu", block_docs: int = REFINE_BLOCK_DOCS,
                      batch_size: int = 512,
                      head_precision: str = "float32") -> list[np.ndarray]:
    """theta^(1..T) after ``n_sweeps`` Gibbs sweeps with the globals fixed, started from the
    encoder's mean path (w, theta^(2..T); its position head at ``head_precision``); the
    average over the sweeps (the first state is the encoder's).  The numba Gibbs sampler; a
    list of (N, K_t) float64 arrays.

    Given the globals the documents are independent, so they are refined ``block_docs`` at a
    time (memory bounded by one block; block b's chain is seeded by (seed, b)), the encoder
    running ``batch_size`` documents at a time within a block."""
    from ..layers.batches import subset_cells
    from .gibbs import GibbsSampler

    if int(n_sweeps) < 1:
        raise CPGBNInputError(f"n_sweeps must be >= 1, got {n_sweeps}")
    _check_precision(head_precision)
    encoder = _torch_encoder().from_weights(encoder_config, encoder_weights, device)
    out = [np.empty((data.n_docs, k)) for k in encoder_config["layers"]]
    for block, lo in enumerate(range(0, data.n_docs, int(block_docs))):
        docs = np.arange(lo, min(data.n_docs, lo + int(block_docs)))
        part = subset_cells(data, docs)
        w, thetas = encoder.mean_path(globals_.phi, part, batch_size=batch_size,
                                      head_precision=head_precision, with_w=True)
        sampler = GibbsSampler(part, hyper, derived_seed(seed, _REFINE, block),
                               learn_globals=False)
        result = sampler.run(sampler.local_state(globals_, 0, w=w, theta=thetas),
                             int(n_sweeps), 0)
        for t, theta in enumerate(result.theta_mean):
            out[t][docs] = theta
    return out
