"""Gibbs sampling of a CPGBN: the order of the conditional draws in one sweep, for any backend.

One sweep (paper section 3.1 and the GBN upward-downward sampler; layer 1 is convolutional):

1. for each document: w | m, a, c^(2) (pooling prior, eq. 3), then every cell is re-augmented,
   m | w, D, giving m_{jks}, A_{jk} = m_{jk..} and the kernel counts n_{kvf};
   with a free positional concentration beta (``Hyperparameters.pooling_concentration``, below)
   w is theta^(1) pi with theta^(1) | A and pi | m drawn apart;
2. D_k | n ~ Dir(n_k + eta^(1));
3. c^(t+1)_j | theta^(t)_j, theta^(t+1)_j for t = 1..T, while every theta is current;
4. upward pass with theta^(1..T) marginalised: l ~ CRT(m^(t), Phi^(t+1) theta^(t+1)), split
   over layer t+1 (counts for Phi^(t+1) and m^(t+1)); at the top l ~ CRT(m^(T), r); the first
   layer's tables are sum_s CRT(m_jks, a_jk / S_j) (CRT(A_jk, a_jk) with a free beta);
5. Phi^(t) | counts ~ Dir(counts + eta^(t)); r | l ~ Gam(gamma0/K_T + l_.k, 1/(c0 + sum_j q^(T+1)_j));
6. downward pass: theta^(t)_j | m^(t) ~ Gam(Phi^(t+1) theta^(t+1)_j + m^(t)_j, 1/(c^(t+1)_j + q^(t)_j)).

The pooling layer with a free positional concentration beta (``pooling_concentration``):
theta^(1)_jk ~ Gam(a_jk, 1/c^(2)_j), pi_jk ~ Dir(beta 1_{S_j}), w_jks = theta^(1)_jk pi_jks.
The conditionals, derived here because the paper has only the tied prior.  A kernel sums to
1 over its V*F entries and every placement lies inside the document, so the counts at
position s, m_jks = sum_{v,f} m_jkvfs with m_jkvfs ~ Pois(w_jks d_kvf), are Pois(w_jks) given w,
and the likelihood of w given m is prod_s w_jks^{m_jks} e^{-w_jks} (times terms free of w).  With
w_jks = theta pi_s and sum_s pi_s = 1 this is theta^{A_jk} e^{-theta} prod_s pi_s^{m_jks}, so
with the prior theta^{a_jk - 1} e^{-c^(2)_j theta} prod_s pi_s^{beta - 1} the two factor:
theta^(1)_jk | . ~ Gam(a_jk + A_jk, 1/(1 + c^(2)_j)) and pi_jk | . ~ Dir(beta + m_jk1, ...,
beta + m_jkS_j), drawn independently (the prior is on (theta, pi) itself, so no Jacobian enters;
the augmentation then reads w = theta pi, floored as the tied prior's w).  Integrating theta and pi
out, p(m_jk. | a_jk) = NB(A_jk; a_jk, 1/(1 + c^(2)_j)) DirMult(m_jk. | A_jk, beta): only the
negative binomial depends on a_jk, so the first layer's tables are CRT(A_jk, a_jk) exactly (the
tied prior's Dirichlet-multinomial has concentration a_jk / S_j, hence its sum_s CRT(m_jks,
a_jk / S_j)), and q^(2) = ln(1 + 1/c^(2)) is unchanged.  c^(2)_j sees theta^(1)_j only through
prod_k c^{a_jk} e^{-c theta^(1)_jk}, as in the tied model, so its conditional
Gam(e0 + sum_k a_jk, 1/(f0 + sum_k theta^(1)_jk)) is unchanged too; with the free split it reads
the drawn theta^(1) (not sum_s w, which the floor raises by at most S_j FLOOR).  The tied prior
is the special case beta = a_jk / S_j (i.i.d. Gam(a_jk / S_j) weights sum to Gam(a_jk) and split
as Dir(a_jk / S_j)), which is why it needs the per-position tables.

The marginalised steps (4-6) are followed by the draw of the variable they integrate out
(w, hence theta^(1), at the start of the next sweep) before anything conditions on it, so the
sweep is a valid partially collapsed Gibbs sampler; c^(2) conditions on theta^(1) and is drawn
before the marginalisation.  The Geweke tests (``tests/test_geweke*.py``) check this order
against the joint distribution.

The order is written once, in :meth:`GibbsSampler.sweep_on_backend`; a backend
(:mod:`cpgbn.backends`) only draws.  What the schedule calls on it is declared in
:class:`cpgbn.inference.backend_protocols.Backend`: the documents (``data``), array helpers, the initial
draws and one method per conditional (``draw_first_layer`` for step 1, returning the kernel
counts and the first layer's tables; ``draw_kernels``, ``draw_doc_scales``, ``layer_tables``,
``split_tables``, ``draw_phi``, ``draw_gamma_vector``, ``draw_doc_gammas``).  Each draw takes
an explicit stream (:mod:`cpgbn.inference.streams`).  The backend is an argument of the
sampler (``backend=``; the numba one when it is left out).

The global draws (steps 2 and 5) are pluggable (:mod:`cpgbn.inference.updates`): the local
steps reduce the documents to sufficient statistics summed over them (kernel counts, Phi
counts, r's tables and rate), and a *global update* object consumes them once per sweep, after
the upward pass and before the downward one (no local draw of steps 3-4 reads D, or a Phi^(t)
or r after its redraw, and every draw has its own stream, so the exact draws give the same
chain as when they were made in place).  The default, :class:`GibbsGlobalUpdate`, makes the
exact draws; a minibatch mode accumulates the statistics with the globals fixed and takes
TLASGR steps (:mod:`cpgbn.inference.minibatch`); a distributed mode sums the statistics across
workers first (:class:`~cpgbn.inference.updates.DistributedGlobalUpdate`).

With the globals held fixed (``learn_globals=False``) the same sweep infers the local
parameters of new documents (paper section 4: test documents).
"""

from __future__ import annotations

from numbers import Real

import numpy as np

from ..backends.numba.numba_backend import NumbaBackend
from ..errors import CPGBNInputError
from . import streams
from .backend_protocols import Backend
from .communicator import as_communicator
from .driver import Collector, RunResult, run_chain
from .exact import ExactSum
from .state import GibbsState, GlobalParameters, Hyperparameters, state_on, write_back
from .streams import stream
from .updates import DistributedGlobalUpdate, GibbsGlobalUpdate, SufficientStatistics

__all__ = ["GibbsSampler", "TorchGibbsSampler", "Collector", "RunResult", "START_LIVE_KERNELS"]

#: Live kernels per position in the sparse start (:attr:`GibbsSampler.start_live_kernels`).
#: Measured on TREC (K = 200, seed 0, kernels of a 15-sweep dense chain): 8 live kernels
#: reach 75.8% against the dense start's 77.4%, every sweep at most 0.10 s against a first
#: dense sweep of 1.28 s (issue 57).
START_LIVE_KERNELS = 8


class GibbsSampler:
    """Runs Gibbs sweeps of a T-layer CPGBN over one corpus.

    Parameters
    ----------
    data : ConvData
        The cells of the documents (re-assignable: ``sampler.data = other``).
    hyper : Hyperparameters
    seed : int
        The RNG seed; every draw is a function of (seed, sweep, step, block).
    learn_globals : bool
        Draw D, Phi and r (training) or keep them fixed (inference for new documents).
    global_update : an update object (:mod:`cpgbn.inference.updates`) or None
        What a sweep does with its sufficient statistics; None: the exact Gibbs draws
        (:class:`~cpgbn.inference.updates.GibbsGlobalUpdate`) when ``learn_globals``, no
        statistics at all otherwise.  An update that keeps the globals fixed
        (:class:`~cpgbn.inference.updates.AccumulateStatistics`) goes with
        ``learn_globals=False``.
    backend : a :class:`~cpgbn.inference.backend_protocols.Backend` over ``data``, or None for
        :class:`~cpgbn.backends.numba.numba_backend.NumbaBackend` (built over ``data``, ``seed`` and
        ``first_doc``).
    first_doc : int, default 0
        The global id of ``data``'s first document in a larger corpus (a multiple of the
        backend's document block: 32 for numba): the documents then draw the numbers they
        draw in the whole corpus (streams keyed by the global block), so shards of a corpus
        swept apart, with the same globals, give the whole corpus' local draws.
    communicator : a :class:`~cpgbn.inference.communicator.Communicator` or None (one process)
        This sampler is one of several workers, each over its shard of the corpus (a range of
        global ids from ``first_doc``, :func:`cpgbn.modes.sharded.shard_range`): the global
        update sums the statistics over them first (:class:`~cpgbn.inference.updates.
        DistributedGlobalUpdate` around ``global_update``, the exact draws by default), and
        :meth:`run` sums the trace.  Every worker then holds the globals, and its documents
        the local variables, that one process over the whole corpus draws (either backend:
        :class:`TorchGibbsSampler` takes ``first_doc`` and ``communicator`` too).

    ``sweep`` and ``draw_weights`` take a numpy :class:`GibbsState` (moved to the backend and
    written back in place) or a state already on the backend; ``run`` moves the state once.
    """

    def __init__(self, data, hyper: Hyperparameters, seed: int, *, learn_globals: bool = True,
                 backend: Backend | None = None, global_update=None, first_doc: int = 0,
                 communicator=None):
        beta = hyper.pooling_concentration
        if beta is not None and (isinstance(beta, bool) or not isinstance(beta, Real)
                                 or not 0 < beta < float("inf")):
            raise CPGBNInputError(f"pooling_concentration must be None or a positive number, "
                                  f"got {beta!r}")
        self.hyper = hyper
        self.seed = int(seed)
        self.learn_globals = learn_globals
        self.backend = (NumbaBackend(data, self.seed, first_doc=first_doc) if backend is None
                        else backend)
        if global_update is None and learn_globals:
            global_update = GibbsGlobalUpdate()
        self.communicator = as_communicator(communicator)
        if global_update is not None:   # a group sums its workers' statistics first
            global_update = DistributedGlobalUpdate(global_update, self.communicator)
        self.global_update = global_update
        #: Keep the w of every sweep in the state (a reader of ``state.w`` between sweeps,
        #: such as an ``on_sweep`` hook, needs it; :meth:`draw_weights` always keeps it).
        #: Without it the numba backend holds each document's w only while the document is
        #: in hand and ``state.w`` is None after a sweep (the next sweep draws w from m
        #: before anything reads it); the PyTorch backend keeps w either way.
        self.keep_weights = False
        #: Kernels live at each position when a chain starts from given globals
        #: (:meth:`initial_state` with ``globals_``: inference with fitted kernels, a fit after
        #: its pilot chain): w = 1 at the ``start_live_kernels`` kernels of largest window
        #: score and the floor elsewhere (:mod:`cpgbn.backends.numba.sparse_start`).  None:
        #: w = 1 everywhere, the dense start, which a chain from random kernels always takes.
        self.start_live_kernels: int | None = START_LIVE_KERNELS

    @property
    def data(self):
        return self.backend.data

    @data.setter
    def data(self, data) -> None:
        self.backend.data = data

    def on_backend(self, state: GibbsState) -> GibbsState:
        """``state`` with its arrays on the backend (itself for the numba backend); ``sweep``,
        ``draw_weights`` and ``run`` accept either, and :meth:`to_numpy` brings it back."""
        return state_on(self.backend, state)

    def to_numpy(self, state: GibbsState, out: GibbsState | None = None) -> GibbsState:
        """A state on the backend as numpy arrays (into ``out`` in place when given)."""
        return write_back(self.backend, state, out, with_globals=out is None or self.learn_globals)

    # ------------------------------------------------------------------ initialisation
    def initial_state(self, layers: tuple[int, ...], vocab_size: int,
                      globals_: GlobalParameters | None = None, *,
                      on_backend: bool = False) -> GibbsState:
        """A starting state: random kernels and Phi (Dir(1) draws) and w = 1, or the given
        ``globals_`` and the sparse start from their kernels (:attr:`start_live_kernels`), then
        one augmentation.  Returned as numpy arrays (a given ``globals_`` kept as the object),
        or, ``on_backend``, as the backend holds it (what :meth:`on_backend` of the numpy
        state gives, without the host's copy: a chain that never hands its local state back,
        such as the pilot's, then never holds it twice)."""
        b = self.backend
        if globals_ is None:
            F, K1 = self.data.filter_width, layers[0]
            D = b.initial_kernels(vocab_size, F, K1, stream(-1, streams.INIT))
            phi = [b.initial_phi(layers[t - 1], layers[t], stream(-1, streams.INIT + t))
                   for t in range(1, len(layers))]
            r = b.full(layers[-1], self.hyper.gamma0 / layers[-1], np.float64)
            g = GlobalParameters(D, phi, r)
        else:
            g = GlobalParameters(b.to_backend(globals_.D, np.float32),
                                 [b.to_backend(p, np.float64) for p in globals_.phi],
                                 b.to_backend(globals_.r, np.float64))
        state = self._fresh_state(g, stream(-1, streams.CONV), sweep=0,
                                  sparse=globals_ is not None)
        if on_backend:
            return state
        host = write_back(b, state)
        if globals_ is not None:
            host.globals = globals_  # the caller's object, as given
        return host

    def local_state(self, globals_: GlobalParameters, sweep: int, *, w=None,
                    theta=None) -> GibbsState:
        """A fresh local state of the current documents on the backend, sharing ``globals_``
        (arrays on the backend, not copied): w = 1 (or ``w``, (P, K_1), with ``theta``, the
        list theta^(1..T)), one augmentation from the stream (sweep, LOCAL_INIT); its sweeps
        continue from ``sweep``.  Minibatch modes start each minibatch's chain with it, with a
        sweep index of their own so that no two minibatches share random streams; the hybrid
        mode's Gibbs refinement starts from the encoder's w and theta."""
        return self._fresh_state(globals_, stream(sweep, streams.LOCAL_INIT), sweep=sweep,
                                 w=w, theta=theta)

    def _fresh_state(self, g: GlobalParameters, init_stream: int, sweep: int, w=None,
                     theta=None, sparse: bool = False) -> GibbsState:
        """w = 1, theta^(1) = S_j (or, ``sparse`` with :attr:`start_live_kernels` set, the
        sparse start from ``g.D`` and its theta^(1)), upper theta = 1 (or the given w and
        theta), c = 1, then m | w, D (no w draw)."""
        b, data = self.backend, self.data
        layers, n_docs = g.layers, data.n_docs
        K1 = layers[0]
        if (w is None) != (theta is None):
            raise CPGBNInputError("give both w and theta, or neither")
        if w is None:
            n_live = self.start_live_kernels
            if sparse and n_live is not None and n_live < K1:
                w, theta1 = b.sparse_start(g.D, int(n_live))
            else:
                w, theta1 = b.initial_weights(K1), b.initial_theta1(K1)
            theta = [theta1] + [b.full((n_docs, k), 1.0, np.float64) for k in layers[1:]]
        else:
            w = b.to_backend(np.ascontiguousarray(w, dtype=np.float32), np.float32)
            theta = [b.to_backend(np.ascontiguousarray(t, dtype=np.float64), np.float64)
                     for t in theta]
            if tuple(w.shape) != (data.n_positions, K1) or len(theta) != len(layers):
                raise CPGBNInputError(f"w must be ({data.n_positions}, {K1}) and theta a list "
                                      f"of {len(layers)} arrays")
        state = GibbsState(
            globals=g,
            w=w,
            m=b.zero_counts(K1),
            theta=theta,
            c=[b.full(n_docs, 1.0, np.float64) for _ in layers],
            A=b.full((n_docs, K1), 0, b.count_dtype),
            loglik=b.full(n_docs, 0.0, np.float64),
            sweep=sweep,
        )
        with b.sweep_context():
            b.draw_first_layer(state, prior_shape=self._first_layer_shape(state),
                               stream=init_stream, table_stream=-1, draw_w=False,
                               pooling_concentration=self.hyper.pooling_concentration)
        return state

    def _first_layer_shape(self, state: GibbsState):
        """a_jk: (Phi^(2) theta^(2)_j)_k, or r_k when T = 1."""
        if state.n_layers == 1:
            return self.backend.rows_of(state.globals.r, self.data.n_docs)
        return self.backend.stack_shape(state.theta[1], state.globals.phi[0])

    # ------------------------------------------------------------------ one sweep
    def sweep(self, state: GibbsState) -> GibbsState:
        """Advance ``state`` by one full Gibbs sweep (in place) and return it."""
        current = state_on(self.backend, state)
        self.sweep_on_backend(current)
        return write_back(self.backend, current, state, with_globals=self.learn_globals)

    def sweep_on_backend(self, state: GibbsState) -> None:
        """One sweep of a state whose arrays are on the backend (steps 1-6 above).

        The local steps 1, 3 and 4 reduce the documents to their sufficient statistics; the
        global update (steps 2 and 5: by default the exact draws) consumes them; step 6 draws
        theta downward given the new globals.
        """
        s = state.sweep
        with self.backend.sweep_context():
            stats, counts_up, q = self._local_upward(state, s)
            if stats is not None:
                self.global_update.apply(self.backend, state.globals, stats, hyper=self.hyper,
                                         sweep=s)
            del stats
            self._downward(state, counts_up, q, s)
        state.sweep += 1

    def statistics_given_locals(self, state: GibbsState, step: int) -> SufficientStatistics:
        """The sufficient statistics of the current documents given their local variables
        (w, theta^(2..T), c) as they are in ``state``, none of them redrawn: m | w, D, then the
        upward pass (tables and splits), with the streams of sweep ``step``.  The hybrid
        inference feeds it the encoder's draws (Algorithm 1's counts for D and, propagated
        upward, for Phi).  Needs a ``global_update`` (what the statistics are for) and the
        PyTorch backend."""
        if self.global_update is None:
            raise CPGBNInputError("statistics_given_locals needs a sampler with a global_update")
        if self.backend.works_on_host:
            # the numba kernels draw the pooling layer's tables only in the pass that draws w
            raise CPGBNInputError("statistics_given_locals needs the PyTorch backend")
        with self.backend.sweep_context():
            stats, _, _ = self._local_upward(state, step, draw_w=False, draw_scales=False)
        return stats

    def _local_upward(self, state: GibbsState, s: int, *, draw_w: bool = True,
                      draw_scales: bool = True):
        """Steps 1, 3 and 4 of sweep ``s``: returns (statistics or None, the counts m^(t) of
        every layer, q^(1..T+1)).  Statistics are gathered when there is a global update."""
        b, hyper, g = self.backend, self.hyper, state.globals
        T, n_docs = state.n_layers, self.data.n_docs
        collect = self.global_update is not None
        # 1. w | m, a, c^(2); m | w, D; the kernel counts n and the first layer's tables
        kernel_counts, tables = b.draw_first_layer(
            state, prior_shape=self._first_layer_shape(state), stream=stream(s, streams.CONV),
            table_stream=stream(s, streams.UPWARD), draw_w=draw_w, with_counts=collect,
            with_tables=T > 1 or (collect and hyper.sample_r),
            pooling_concentration=hyper.pooling_concentration, keep_w=self.keep_weights)

        # 3. c^(t+1) | theta^(t), theta^(t+1), all current
        if draw_scales:
            for t in range(1, T + 1):
                above = b.total_of(g.r, n_docs) if t == T else b.row_sums(state.theta[t])
                state.c[t - 1] = b.draw_doc_scales(above, b.row_sums(state.theta[t - 1]),
                                                   hyper.e0, hyper.f0,
                                                   stream(s, streams.SCALES + t), out=state.c[t - 1])
        q = [b.ones(n_docs)]  # q^(t), t = 1..T+1
        for t in range(1, T + 1):
            q.append(b.log1p(q[t - 1] / state.c[t - 1]))

        # 4. upward pass with theta marginalised: the counts of every layer and of every Phi
        counts_up = [state.A]  # m^(t), t = 1..T
        phi_counts = []
        for t in range(1, T):
            phi = g.phi[t - 1]
            if t > 1:
                tables = b.layer_tables(counts_up[-1], b.stack_shape(state.theta[t], phi),
                                        stream(s, streams.UPWARD + t))
            m_next, counts = b.split_tables(tables, phi, state.theta[t],
                                            stream(s, streams.SPLIT + t), with_counts=collect)
            phi_counts.append(counts)
            counts_up.append(m_next)
        if not collect:
            return None, counts_up, q
        r_tables = r_rate = None
        if hyper.sample_r:
            if T > 1:
                tables = b.layer_tables(counts_up[-1], b.rows_of(g.r, n_docs),
                                        stream(s, streams.UPWARD + T))
            # r's rate exactly, so that its sum over workers is one process' number
            r_tables, r_rate = b.column_sums(tables), ExactSum.of(b.to_numpy(q[T], np.float64))
        return SufficientStatistics(kernel_counts, phi_counts, r_tables, r_rate, n_docs), \
            counts_up, q

    def _downward(self, state: GibbsState, counts_up, q, s: int) -> None:
        """6. downward pass theta^(T), ..., theta^(2) given the (new) globals."""
        b, g = self.backend, state.globals
        n_docs = self.data.n_docs
        for t in range(state.n_layers, 1, -1):
            shape = (b.rows_of(g.r, n_docs) if t == state.n_layers
                     else b.stack_shape(state.theta[t], g.phi[t - 1]))
            state.theta[t - 1] = b.draw_doc_gammas(shape, counts_up[t - 1],
                                                   state.c[t - 1] + q[t - 1],
                                                   stream(s, streams.DOWNWARD + t),
                                                   out=state.theta[t - 1])

    # ------------------------------------------------------------------ runs
    def run(self, state: GibbsState, n_iter: int, burn_in: int, *, progress=None,
            collect_globals: bool | None = None, collector: Collector | None = None,
            on_sweep=None, monitor=None, **checkpointing) -> RunResult:
        """Run sweeps until ``state.sweep == n_iter``; average theta (and the globals) over the
        sweeps after ``burn_in``; ``monitor`` measures the mixing; ``checkpointing``:
        ``checkpoint_dir``, ``checkpoint_every``, ``resume``, ``identity``, ``labels`` (see
        :func:`cpgbn.inference.driver.run_chain`)."""
        if collect_globals is None:
            collect_globals = self.learn_globals
        return run_chain(self, state, n_iter, burn_in, progress=progress,
                         collect_globals=collect_globals, collector=collector, on_sweep=on_sweep,
                         monitor=monitor, communicator=self.communicator, **checkpointing)

    # ------------------------------------------------------------------ helpers
    def draw_weights(self, state: GibbsState) -> GibbsState:
        """Redraw w | m, a, c^(2) alone (no augmentation), so that w is current again.

        At the end of a sweep, w was drawn before the stack's marginalised updates, so the
        tuple (w, theta^(2..T), Phi, r) is not yet a joint draw; every variable is current when
        it is drawn, so averages over the chain are unaffected.  Call this before reading w
        together with the stack (the Geweke test does).
        """
        current = state_on(self.backend, state)
        with self.backend.sweep_context():
            self.backend.draw_first_layer(current, prior_shape=self._first_layer_shape(current),
                                          stream=stream(current.sweep, streams.REFRESH),
                                          table_stream=-1, augment=False,
                                          pooling_concentration=self.hyper.pooling_concentration)
        return write_back(self.backend, current, state, with_globals=False)


class TorchGibbsSampler(GibbsSampler):
    """:class:`GibbsSampler` on the PyTorch backend (:mod:`cpgbn.backends.torch`).

    Same conditionals in the same order; reproducible for a seed, device type, torch version
    and ``max_elements``, equal to the numba sampler in distribution, not bit for bit.
    ``device``: "cpu", "cuda", "cuda:N" or a torch.device; ``max_elements``: the largest
    float64 temporary built at once (default 2**20 on the CPU, 2**26 on a GPU).
    ``first_doc`` and ``communicator`` as :class:`GibbsSampler`'s, with the PyTorch backend's
    random-stream block of ``doc_block`` documents (default
    :data:`cpgbn.backends.torch.devices.DOC_BLOCKS`: 1,024 on the CPU, 16,384 on a GPU) in
    place of numba's 32: shards of whole blocks make the single process' chain.
    """

    def __init__(self, data, hyper: Hyperparameters, seed: int, *, learn_globals: bool = True,
                 device="cpu", max_elements: int | None = None, first_doc: int = 0,
                 doc_block: int | None = None, communicator=None):
        from ..backends.device_registry import BACKENDS
        backend = BACKENDS["torch"].make(data, seed, first_doc=first_doc, device=device,
                                         max_elements=max_elements, doc_block=doc_block)
        super().__init__(data, hyper, seed, learn_globals=learn_globals, backend=backend,
                         communicator=communicator)

    @property
    def device(self):
        return self.backend.device
