"""The backend protocols: what ``inference/`` calls on a backend, declared once.

The schedules in this package (:mod:`.gibbs`, :mod:`.updates`, :mod:`.tlasgr`, :mod:`.hybrid`,
:mod:`.driver`, :mod:`.mixing`, :mod:`.state`) hold the order of the steps; a backend holds the
arrays and makes the draws.  Two protocols say which members they use:

* :class:`Backend`: the draws of a Gibbs sweep (paper section 3.1, one method per
  conditional), the array helpers the schedule and the global updates compute with, and the
  standard normals of a TLASGR-MCMC step.  :class:`~cpgbn.backends.numba.numba_backend.NumbaBackend`
  (the default, numpy arrays on the CPU) and :class:`~cpgbn.backends.torch.torch_backend.TorchBackend`
  (tensors on a GPU or the CPU) implement it.
* :class:`EncoderBackend`: the tensor side of the hybrid inference (paper Algorithm 1): the
  Weibull convolutional encoder, its gradient step on the negative ELBO, its mean path for
  features, and the checkpoint of its weights and optimiser.
  :class:`~cpgbn.backends.torch.encoder_backend.TorchEncoderBackend` implements it.

The protocols live here, beside their caller, rather than in ``backends/``: a backend imports
nothing from ``inference/`` (it satisfies a protocol by its members alone, as
``typing.Protocol`` allows), while the annotations here may name the state types of
:mod:`.state`.  A backend is chosen by an argument (``GibbsSampler(backend=...)``, the
estimator's ``device``), never by rebinding a module's global name.

Arrays are the backend's own (numpy arrays, or tensors on its device); ``dtype`` arguments are
numpy dtypes naming the host type of a :class:`~cpgbn.inference.state.GibbsState` field, which a
backend may widen on its device (counts as int64).  Every draw takes an explicit ``stream``
(:mod:`cpgbn.inference.streams`) and may write into ``out`` or return a new array; callers use
the returned value.  ``tests/test_backend_protocol.py`` checks that each implementation has every
member, with the protocol's parameters.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager, Protocol, runtime_checkable

import numpy as np

from .state import GibbsState

__all__ = ["Backend", "EncoderBackend", "protocol_members"]


@runtime_checkable
class Backend(Protocol):
    """What a Gibbs sweep, the global updates and the run loop call on a backend."""

    #: The cells of the documents (:class:`~cpgbn.layers.cells.ConvData`); re-assignable, as
    #: minibatch modes point one backend at each minibatch in turn.
    data: Any
    #: True when the state's arrays are the host's numpy arrays, worked on in place (no copies
    #: to and from a device; :func:`cpgbn.inference.state.state_on`).
    works_on_host: bool
    #: Host dtype of the whole-number counts m, A and n (a float type for a backend that keeps
    #: fractional counts).
    count_dtype: Any
    #: Columns per block of column-wise arithmetic on a global (the TLASGR step: a few float64
    #: copies of a block instead of the whole of D) and per stream of its normals; None: all
    #: columns at once.
    column_block: int | None

    # ------------------------------------------------------------------ arrays
    def sweep_context(self) -> ContextManager:
        """Held around every sweep (numba: BLAS on one thread)."""

    def holds(self, array) -> bool:
        """Whether ``array`` is already one of this backend's arrays."""

    def to_backend(self, array: np.ndarray, dtype):
        """A numpy array as this backend's array of host type ``dtype``."""

    def to_numpy(self, array, dtype) -> np.ndarray:
        """This backend's array as a numpy array of ``dtype`` (a position field as a
        :class:`~cpgbn.backends.numba.position_store.PositionStore`)."""

    def field_to_backend(self, field, dtype, background: float):
        """A host position field (a PositionStore, a dense (P, K_1) array whose entries equal
        to ``background`` need not be stored, or None) in this backend's form."""

    def ones(self, n: int):
        """n float64 ones."""

    def full(self, shape, value, dtype):
        """An array of ``shape`` filled with ``value``."""

    def empty_like(self, array):
        """An uninitialised array of ``array``'s shape, dtype and device."""

    def initial_weights(self, n_kernels: int):
        """w = 1 at every (position, kernel) of ``data``: a dense (P, K_1) array, or the
        backend's position store (numba: :class:`~cpgbn.backends.numba.position_store.
        PositionStore`, whose ``toarray`` is the dense field)."""

    def sparse_start(self, D, n_live: int):
        """The sparse start from kernels ``D`` (:mod:`cpgbn.backends.numba.sparse_start`):
        ``(w, theta1)``, w = 1 at each position's ``n_live`` kernels of largest window score
        and the floor elsewhere (in the form of :meth:`initial_weights`), theta^(1) its sum
        over each document's positions."""

    def zero_counts(self, n_kernels: int):
        """m = 0 at every (position, kernel) of ``data``, in the form of :meth:`initial_weights`."""

    def as_float(self, x):
        """``x`` (an array of this backend, or numpy) as float64 on the backend."""

    def log1p(self, x):
        """ln(1 + x) elementwise."""

    def row_sums(self, x):
        """Sums over axis 1."""

    def column_sums(self, x):
        """Sums over axis 0 (float64 or whole numbers)."""

    def rows_of(self, vector, n_rows: int):
        """``vector`` as ``n_rows`` identical rows: r_k for every document."""

    def total_of(self, vector, n: int):
        """sum(vector) for each of n documents: the top layer's sum_k r_k."""

    def stack_shape(self, theta_above, phi):
        """Phi^(t+1) theta^(t+1)_j for every document: (N, K_t)."""

    # ------------------------------------------------------------------ initialisation
    def initial_kernels(self, vocab_size: int, filter_width: int, n_kernels: int, stream: int):
        """D_k ~ Dir(1) over the V F entries of each kernel: float32 (V, F, K_1)."""

    def initial_phi(self, rows: int, cols: int, stream: int):
        """Phi columns ~ Dir(1): float64 (rows, cols)."""

    def initial_theta1(self, n_kernels: int):
        """theta^(1)_jk = S_j (the pooled w = 1): float64 (N, K_1)."""

    # ------------------------------------------------------------------ the draws of a sweep
    def draw_first_layer(self, state: GibbsState, *, prior_shape, stream: int,
                         table_stream: int, draw_w: bool = True, augment: bool = True,
                         with_counts: bool = False, with_tables: bool = False,
                         pooling_concentration: float | None = None, keep_w: bool = True):
        """Step 1: w | m, a, c^(2), then m | w, D for every cell, writing w, theta^(1), m, A
        and loglik of ``state``.  Returns (kernel counts n or None, the first layer's tables
        sum_s CRT(m_jks, a_jk / S_j), or CRT(A_jk, a_jk) with a free beta, or None)."""

    def draw_kernels(self, D, counts, eta: float, stream: int):
        """Step 2: D_k ~ Dir(n_k + eta^(1)); returns the new D."""

    def draw_doc_scales(self, shape_sum, theta_sum, e0: float, f0: float, stream: int, out):
        """Step 3: c_j ~ Gam(e0 + shape_sum_j, 1 / (f0 + theta_sum_j))."""

    def layer_tables(self, counts, shape, stream: int):
        """Step 4: l_jk ~ CRT(counts_jk, shape_jk)."""

    def split_tables(self, tables, phi, theta_above, stream: int, with_counts: bool):
        """Step 4: l_jk split over k' in proportion to Phi[k, k'] theta_above[j, k']; returns
        (the counts of the layer above, the counts of Phi or None)."""

    def draw_phi(self, phi, counts, eta: float, stream: int):
        """Step 5: Phi[:, k'] ~ Dir(counts[:, k'] + eta^(t)); returns the new Phi."""

    def draw_gamma_vector(self, shape, rate, stream: int, out):
        """Step 5: r_k ~ Gam(shape_k, 1 / rate); returns the new r."""

    def draw_doc_gammas(self, shape, counts, rate, stream: int, out):
        """Step 6: theta_jk ~ Gam(shape_jk + counts_jk, 1 / rate_j)."""

    # ------------------------------------------------------------------ statistics
    def total_kernel_counts(self, counts):
        """The kernel counts of :meth:`draw_first_layer` as one (V, F, K_1) array."""

    def kernel_counts_from_total(self, total):
        """A (V, F, K_1) total of whole counts in the layout :meth:`draw_kernels` takes."""

    def column_normals(self, n_rows: int, n_columns: int,
                       key: tuple[int, ...]) -> Callable[[int, int], Any]:
        """Standard normals for one TLASGR step of an (n_rows, n_columns) global, a function of
        ``key`` alone: ``normals(lo, hi)`` gives the float64 (n_rows, hi - lo) normals of
        columns lo..hi-1, asked once per block of :attr:`column_block` columns."""

    # ------------------------------------------------------------------ mixing diagnostic
    def assignment_changes(self, m, memory):
        """How m moved since the last call: int64[6] sums (:data:`cpgbn.backends.numba.
        position_store.CHANGE_FIELDS`) as numpy, and the memory of this m for the next call
        (None at the first)."""


@runtime_checkable
class EncoderBackend(Protocol):
    """What the hybrid inference's schedule (:mod:`.hybrid`) calls on its encoder's side.

    ``globals_`` arguments are :class:`~cpgbn.inference.state.GlobalParameters` of this
    backend's arrays (:meth:`to_device`); a *draw* is the opaque record of the encoder's last
    reparameterised sample of a batch, which the paper's form of step 3 turns into statistics.
    """

    #: The encoder's network (a ``torch.nn.Module``): read by tests and diagnostics.
    encoder: Any
    #: Where the tensors live, in words ("cpu", "cuda"); recorded in a run's configuration.
    device_type: str

    def to_device(self, array: np.ndarray, dtype):
        """A numpy array on the encoder's device as ``dtype``."""

    def to_host(self, array) -> np.ndarray:
        """A copy of a device array in numpy."""

    def gibbs_backend(self, data, seed: int) -> Backend:
        """The Gibbs draws (:class:`Backend`) on the encoder's device over ``data``."""

    def gradient(self, batch, groups: list, seed: int, globals_, rate_prior=None,
                 supervision=None, *, elbo: bool = True, loss_scale: float = 1.0,
                 elbo_reaches_filters: bool = True):
        """Algorithm 1, steps 1-2 before the update: zero the gradient, then, group of
        documents by group (index arrays into ``batch``, drawing from one generator seeded by
        ``seed`` in turn), draw w and theta^(2..T) from q and add the group's share of the
        batch's mean negative ELBO to the gradient, its prior rates c the conditional means
        at the draw for ``rate_prior`` = (e0, f0) (None: 1).  Returns (loss, KL) per document
        of the batch as floats and the last group's draw.  ``supervision`` = (class codes, xi)
        adds xi times the cross-entropy (sCPGBN); ``elbo=False`` leaves the ELBO out (no
        draw); the loss's gradient is taken times ``loss_scale``; ``elbo_reaches_filters=
        False`` stops the ELBO's gradient at the first hidden layer."""

    def average_gradients(self, communicator, n_docs: int, loss: float,
                          kl: float) -> tuple[float, float, int]:
        """Data-parallel training: replace the accumulated gradient by the mean over the
        workers' batches (each weighted by its ``n_docs``), the same on every worker; returns
        (loss, KL) per document over all the batches and their number of documents.  A group
        of one (:class:`~cpgbn.inference.communicator.SingleProcess`) keeps its gradient and
        returns its own (loss, KL, n_docs) as they are."""

    def apply_gradient(self, max_grad_norm: float | None, *, separate: bool = False) -> float:
        """One optimiser step (Adam) on the accumulated gradient, its norm clipped first (the
        softmax's path and the rest apart with ``separate``); the norm before the clip."""

    def draw_locals(self, draw) -> tuple:
        """A draw's w (float32 (P, K_1)) and theta^(1..T) (float64), detached: the local
        variables of the documents as a Gibbs state holds them."""

    def draw_rates(self, draw) -> list:
        """The rates c^(2..T+1) of a draw's documents as :meth:`gradient` took them (float64
        (B,) arrays of this backend)."""

    def expected_kernel_counts(self, draw, D):
        """E[n_{k,v,f} | w, D] over a draw's documents, float64 (V, F, K_1)."""

    def mean_path(self, phi, data, *, batch_size: int, head_precision: str,
                  with_w: bool) -> tuple:
        """The encoder's deterministic mean path over ``data``, ``batch_size`` documents at a
        time: (w as float32 (P, K_1) numpy or None, theta^(1..T) as float64 numpy arrays)."""

    def class_probabilities(self, phi, data, *, batch_size: int = 512,
                            head_precision: str = "float32") -> np.ndarray:
        """A supervised encoder's softmax on the mean path of ``data``: (N, C) float64
        probabilities, no randomness."""

    def softmax_inputs(self, phi, data, *, batch_size: int = 512,
                       head_precision: str = "float32") -> np.ndarray:
        """(N, units) float64: what the softmax reads of each document of ``data`` on the
        mean path, in the order of the softmax's weight columns."""

    def class_attributions(self, phi, data, targets) -> np.ndarray:
        """(P, K_1) float64: how much each position and unit of ``data`` moved its document
        towards its class of ``targets`` (the gradient of the target's log-odds times the
        input, at the mean path)."""

    def weights(self) -> dict:
        """The encoder's parameters as numpy arrays by ``state_dict`` name."""

    def optimizer_state(self) -> tuple:
        """The optimiser's moments ({parameter index: {name: numpy array}}) and its parameter
        groups (JSON-able)."""

    def load(self, weights: dict, moments: dict, param_groups) -> None:
        """Restore :meth:`weights` and :meth:`optimizer_state`."""


def protocol_members(protocol: type) -> list[str]:
    """The names a protocol declares (annotated attributes and methods), in order."""
    names = list(getattr(protocol, "__annotations__", {}))
    names += [name for name, value in vars(protocol).items()
              if callable(value) and not name.startswith("_")]
    return names
