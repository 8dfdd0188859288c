"""Gibbs sampling of a CPGBN: the order of the conditional draws in one sweep, for any backend.

One sweep (paper section 3.1 and the GBN upward-downward sampler; layer 1 is convolutional):

1. for each document: w | m, a, c^(2) (pooling prior, eq. 3), then every cell is re-augmented,
   m | w, D, giving m_{jks}, A_{jk} = m_{jk..} and the kernel counts n_{kvf};
2. D_k | n ~ Dir(n_k + eta^(1));
3. c^(t+1)_j | theta^(t)_j, theta^(t+1)_j for t = 1..T, while every theta is current;
4. upward pass with theta^(1..T) marginalised: l ~ CRT(m^(t), Phi^(t+1) theta^(t+1)), split
   over layer t+1 (counts for Phi^(t+1) and m^(t+1)); at the top l ~ CRT(m^(T), r); the first
   layer's tables are sum_s CRT(m_jks, a_jk / S_j);
5. Phi^(t) | counts ~ Dir(counts + eta^(t)); r | l ~ Gam(gamma0/K_T + l_.k, 1/(c0 + sum_j q^(T+1)_j));
6. downward pass: theta^(t)_j | m^(t) ~ Gam(Phi^(t+1) theta^(t+1)_j + m^(t)_j, 1/(c^(t+1)_j + q^(t)_j)).

The marginalised steps (4-6) are followed by the draw of the variable they integrate out
(w, hence theta^(1), at the start of the next sweep) before anything conditions on it, so the
sweep is a valid partially collapsed Gibbs sampler; c^(2) conditions on theta^(1) and is drawn
before the marginalisation.  The Geweke tests (``tests/test_geweke*.py``) check this order
against the joint distribution.

The order is written once, in :meth:`GibbsSampler.sweep_on_backend`; a backend
(:mod:`cpgbn.backends`) only draws.  Its interface, as used here: ``data``; ``works_on_host``;
``sweep_context()``; ``to_backend(array, dtype)`` / ``to_numpy(array, dtype)``; array helpers
``ones, full, log1p, row_sums, column_sums, rows_of, stack_shape, total_of``; the initial draws
``initial_kernels, initial_phi, initial_theta1``; and one method per conditional:
``draw_first_layer`` (step 1, returning the kernel counts and the first layer's tables),
``draw_kernels``, ``draw_doc_scales``, ``layer_tables``, ``split_tables``, ``draw_phi``,
``draw_gamma_vector``, ``draw_doc_gammas``.  Each draw takes an explicit stream
(:mod:`cpgbn.inference.streams`).  The counts that the global draws (steps 2 and 5) consume
are sufficient statistics summed over documents: a minibatch or distributed mode replaces only
those draws (and sums the counts across workers first).

With the globals held fixed (``learn_globals=False``) the same sweep infers the local
parameters of new documents (paper section 4: test documents).
"""

from __future__ import annotations

from ..backends.numba.backend import NumbaBackend
from . import streams
from .driver import Collector, RunResult, run_chain
from .state import GibbsState, GlobalParameters, Hyperparameters, state_on, write_back
from .streams import stream

__all__ = ["GibbsSampler", "TorchGibbsSampler", "Collector", "RunResult"]


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
    backend : a backend object, or None for :class:`~cpgbn.backends.numba.backend.NumbaBackend`
        (built over ``data`` and ``seed``).

    ``sweep`` and ``draw_weights`` take a numpy :class:`GibbsState` (moved to the backend and
    written back in place) or a state already on the backend; ``run`` moves the state once.
    """

    def __init__(self, data, hyper: Hyperparameters, seed: int, *, learn_globals: bool = True,
                 backend=None):
        self.hyper = hyper
        self.seed = int(seed)
        self.learn_globals = learn_globals
        self.backend = NumbaBackend(data, self.seed) if backend is None else backend

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
                      globals_: GlobalParameters | None = None) -> GibbsState:
        """A starting state: random kernels and Phi (Dir(1) draws) unless given, w = 1, one
        augmentation.  Returned as numpy arrays; a given ``globals_`` is kept as the object."""
        import numpy as np

        b, data = self.backend, self.data
        n_docs, F, K1 = data.n_docs, data.filter_width, layers[0]
        if globals_ is None:
            D = b.initial_kernels(vocab_size, F, K1, stream(-1, streams.INIT))
            phi = [b.initial_phi(layers[t - 1], layers[t], stream(-1, streams.INIT + t))
                   for t in range(1, len(layers))]
            r = b.full(layers[-1], self.hyper.gamma0 / layers[-1], np.float64)
            g = GlobalParameters(D, phi, r)
        else:
            g = GlobalParameters(b.to_backend(globals_.D, np.float32),
                                 [b.to_backend(p, np.float64) for p in globals_.phi],
                                 b.to_backend(globals_.r, np.float64))
        state = GibbsState(
            globals=g,
            w=b.full((data.n_positions, K1), 1.0, np.float32),
            m=b.full((data.n_positions, K1), 0, b.count_dtype),
            theta=[b.initial_theta1(K1)] + [b.full((n_docs, k), 1.0, np.float64)
                                            for k in layers[1:]],
            c=[b.full(n_docs, 1.0, np.float64) for _ in layers],
            A=b.full((n_docs, K1), 0, b.count_dtype),
            loglik=b.full(n_docs, 0.0, np.float64),
            sweep=0,
        )
        with b.sweep_context():
            b.draw_first_layer(state, prior_shape=self._first_layer_shape(state),
                               stream=stream(-1, streams.CONV), table_stream=-1, draw_w=False)
        host = write_back(b, state)
        if globals_ is not None:
            host.globals = globals_  # the caller's object, as given
        return host

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
        """One sweep of a state whose arrays are on the backend (steps 1-6 above)."""
        b, hyper, g = self.backend, self.hyper, state.globals
        T, s, learn = state.n_layers, state.sweep, self.learn_globals
        n_docs = self.data.n_docs
        with b.sweep_context():
            # 1. w | m, a, c^(2); m | w, D; the kernel counts n and the first layer's tables
            kernel_counts, tables = b.draw_first_layer(
                state, prior_shape=self._first_layer_shape(state), stream=stream(s, streams.CONV),
                table_stream=stream(s, streams.UPWARD), with_counts=learn,
                with_tables=T > 1 or (learn and hyper.sample_r))
            # 2. D | n
            if learn:
                g.D = b.draw_kernels(g.D, kernel_counts, hyper.eta[0],
                                     stream(s, streams.KERNELS))
            del kernel_counts

            # 3. c^(t+1) | theta^(t), theta^(t+1), all current
            for t in range(1, T + 1):
                above = b.total_of(g.r, n_docs) if t == T else b.row_sums(state.theta[t])
                state.c[t - 1] = b.draw_doc_scales(above, b.row_sums(state.theta[t - 1]),
                                                   hyper.e0, hyper.f0,
                                                   stream(s, streams.SCALES + t), out=state.c[t - 1])
            q = [b.ones(n_docs)]  # q^(t), t = 1..T+1
            for t in range(1, T + 1):
                q.append(b.log1p(q[t - 1] / state.c[t - 1]))

            # 4-5. upward pass with theta marginalised, then the stack's globals
            counts_up = [state.A]  # m^(t), t = 1..T
            for t in range(1, T):
                phi = g.phi[t - 1]
                if t > 1:
                    tables = b.layer_tables(counts_up[-1], b.stack_shape(state.theta[t], phi),
                                            stream(s, streams.UPWARD + t))
                m_next, phi_counts = b.split_tables(tables, phi, state.theta[t],
                                                    stream(s, streams.SPLIT + t), with_counts=learn)
                if learn:
                    g.phi[t - 1] = b.draw_phi(phi, phi_counts, hyper.eta[min(t, len(hyper.eta) - 1)],
                                              stream(s, streams.PHI + t))
                counts_up.append(m_next)
            if learn and hyper.sample_r:
                if T > 1:
                    tables = b.layer_tables(counts_up[-1], b.rows_of(g.r, n_docs),
                                            stream(s, streams.UPWARD + T))
                shape = hyper.gamma0 / len(g.r) + b.column_sums(tables)
                g.r = b.draw_gamma_vector(shape, hyper.c0 + q[T].sum(), stream(s, streams.R),
                                          out=g.r)

            # 6. downward pass theta^(T), ..., theta^(2)
            for t in range(T, 1, -1):
                shape = (b.rows_of(g.r, n_docs) if t == T
                         else b.stack_shape(state.theta[t], g.phi[t - 1]))
                state.theta[t - 1] = b.draw_doc_gammas(shape, counts_up[t - 1],
                                                       state.c[t - 1] + q[t - 1],
                                                       stream(s, streams.DOWNWARD + t),
                                                       out=state.theta[t - 1])
        state.sweep += 1

    # ------------------------------------------------------------------ runs
    def run(self, state: GibbsState, n_iter: int, burn_in: int, *, progress=None,
            collect_globals: bool | None = None, collector: Collector | None = None,
            on_sweep=None) -> RunResult:
        """Run sweeps until ``state.sweep == n_iter``; average theta (and the globals) over the
        sweeps after ``burn_in`` (see :func:`cpgbn.inference.driver.run_chain`)."""
        if collect_globals is None:
            collect_globals = self.learn_globals
        return run_chain(self, state, n_iter, burn_in, progress=progress,
                         collect_globals=collect_globals, collector=collector, on_sweep=on_sweep)

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
                                          table_stream=-1, augment=False)
        return write_back(self.backend, current, state, with_globals=False)


class TorchGibbsSampler(GibbsSampler):
    """:class:`GibbsSampler` on the PyTorch backend (:mod:`cpgbn.backends.torch`).

    Same conditionals in the same order; reproducible for a seed, device type, torch version
    and ``max_elements``, equal to the numba sampler in distribution, not bit for bit.
    ``device``: "cpu", "cuda", "cuda:N" or a torch.device; ``max_elements``: the largest
    float64 temporary built at once (default 2**22 on the CPU, 2**26 on a GPU).
    """

    def __init__(self, data, hyper: Hyperparameters, seed: int, *, learn_globals: bool = True,
                 device="cpu", max_elements: int | None = None):
        from ..backends.torch.backend import TorchBackend
        super().__init__(data, hyper, seed, learn_globals=learn_globals,
                         backend=TorchBackend(data, int(seed), device=device,
                                              max_elements=max_elements))

    @property
    def device(self):
        return self.backend.device
