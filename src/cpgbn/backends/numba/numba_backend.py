"""The numba backend: the draws of one Gibbs sweep as calls of the kernels in this package.

:class:`NumbaBackend` implements the backend protocol of :mod:`cpgbn.inference.backend_protocols`, which
:mod:`cpgbn.inference.gibbs` and the global updates drive (the order of the steps lives there,
once, for every backend).  Arrays are numpy arrays in the
dtypes of :class:`cpgbn.inference.state.GibbsState`; every draw writes into the array it is
given (``out``) and returns it, so callers that hold a reference see the new value.

Random numbers: every kernel derives its streams from ``(seed, stream, block)``, blocks of
:data:`DOC_BLOCK` documents or :data:`WORD_BLOCK` vocabulary rows, so a seed gives the same
draws for any number of threads; a TLASGR step's normals come in blocks of :data:`COLUMN_BLOCK`
columns, each from its own stream.  A document block is numbered globally: the backend of a
shard of the corpus whose first document has global id ``first_doc`` (a multiple of
:data:`DOC_BLOCK`) numbers its blocks from ``first_doc / DOC_BLOCK``, so its documents draw
exactly what they draw inside the whole corpus (the local steps; the global draws see only the
shard's statistics).
"""

from __future__ import annotations

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

from ...errors import CPGBNInputError
from ...layers.cells import counts_dtype
from ...blocks import DOC_BLOCK  # documents per RNG block: part of what a seed means
from . import conv, gbn
from .weights import FLOOR
from .openmp import import_torch_first
from .position_store import PositionStore, compare_stores, next_capacity, regrow
from .shared_shape import shared_shape_table
from .sparse_start import sparse_start_weights

#: Vocabulary rows per RNG block of the kernel draw.
WORD_BLOCK = 256
#: Columns per block of a TLASGR step of a global (its float64 temporaries are a block's, not
#: six copies of D: 0.9 GB on IMDB) and per RNG stream of the step's normals; also the
#: block of ``inference.tlasgr``'s arithmetic on host arrays, which imports it from here.
COLUMN_BLOCK = 16

_blas_controller: ThreadpoolController | None = None


def one_blas_thread():
    """A context in which numpy's BLAS runs on one thread.

    The stack's matrix products (Phi theta, 10^8 flops at most) are cheap on one core, but
    OpenBLAS's worker threads keep spinning for a while after each product and take the cores
    from the numba kernels that follow: on 2 cores the w draw of a three-layer MR model ran at
    0.09 s instead of 0.05.
    """
    global _blas_controller
    if _blas_controller is None:
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


class NumbaBackend:
    """Gibbs draws of a CPGBN on the CPU with numba kernels, parallel over documents.

    Parameters
    ----------
    data : ConvData
        The cells of the documents (re-assignable, as the Geweke test does between sweeps).
    seed : int
        Every draw is a function of (seed, stream, block).
    first_doc : int, default 0
        The global id of ``data``'s first document (a multiple of :data:`DOC_BLOCK`).
    """

    name = "numba"
    #: Works on the numpy arrays of a GibbsState in place (no device copies).
    works_on_host = True
    #: dtype of the latent counts m and A (whole numbers; the kernel counts' slabs are
    #: ``kernel_count_dtype``, int64 where a word's units could pass 2^31).
    count_dtype = np.int32
    #: Columns per block of the TLASGR arithmetic on a global (host memory).
    column_block = COLUMN_BLOCK

    def __init__(self, data, seed: int, *, first_doc: int = 0):
        if int(first_doc) < 0 or int(first_doc) % DOC_BLOCK:
            raise CPGBNInputError(f"first_doc must be a non-negative multiple of {DOC_BLOCK} "
                                  f"(the random streams' document block), got {first_doc}")
        import_torch_first()  # before a kernel starts numba's pool (backends.numba.openmp)
        self.data = data
        self.seed = int(seed)
        #: The global number of the first document block (module docstring).
        self.first_block = int(first_doc) // DOC_BLOCK
        self._count_slabs = None
        self._slabs_zero = False  # True once draw_kernels has summed and zeroed the slabs

    @property
    def data(self):
        return self._data

    @data.setter
    def data(self, data) -> None:
        self._data = data
        #: int32 slabs while no word's units can pass 2^31 in one (the tempered likelihood
        #: of a large corpus can), int64 past it: numba compiles the kernels for either.
        self.kernel_count_dtype = counts_dtype(data.largest_word_units())

    # ------------------------------------------------------------------ arrays
    def sweep_context(self):
        """Held around every sweep: BLAS on one thread (see :func:`one_blas_thread`)."""
        return one_blas_thread()

    @staticmethod
    def holds(array) -> bool:
        return isinstance(array, np.ndarray)

    def to_backend(self, array: np.ndarray, dtype) -> np.ndarray:
        """Arrays are numpy arrays already: no copy."""
        return array

    def to_numpy(self, array: np.ndarray, dtype) -> np.ndarray:
        return array

    @staticmethod
    def field_to_backend(field, dtype, background: float):
        """Position fields live on the host already (a store or a dense array): as they are."""
        return field

    @staticmethod
    def empty_like(array: np.ndarray) -> np.ndarray:
        return np.empty_like(array)

    def ones(self, n: int) -> np.ndarray:
        return np.ones(n)

    @staticmethod
    def full(shape, value, dtype) -> np.ndarray:
        return np.full(shape, value, dtype=dtype)

    @staticmethod
    def log1p(x: np.ndarray) -> np.ndarray:
        return np.log1p(x)

    @staticmethod
    def row_sums(x: np.ndarray) -> np.ndarray:
        return x.sum(axis=1)

    @staticmethod
    def column_sums(x: np.ndarray) -> np.ndarray:
        return x.sum(axis=0)

    @staticmethod
    def rows_of(vector: np.ndarray, n_rows: int) -> np.ndarray:
        """``vector`` repeated as ``n_rows`` rows, contiguous (the kernels read it by row)."""
        return np.ascontiguousarray(np.broadcast_to(vector, (n_rows, len(vector))))

    @staticmethod
    def total_of(vector: np.ndarray, n: int) -> np.ndarray:
        """sum(vector) for each of n documents (the top layer's sum_k r_k)."""
        return vector.sum() * np.ones(n)

    @staticmethod
    def stack_shape(theta_above: np.ndarray, phi: np.ndarray) -> np.ndarray:
        """Phi^(t+1) theta^(t+1)_j for every document: (N, K_t), one block of
        :data:`DOC_BLOCK` documents at a time: a BLAS product's rounding may depend on the
        matrix's size (small-matrix kernels), and a block has the same size in a shard as in
        the whole corpus, so data-parallel workers compute one process' numbers."""
        out = np.empty((theta_above.shape[0], phi.shape[0]))
        for lo in range(0, theta_above.shape[0], DOC_BLOCK):
            np.matmul(theta_above[lo:lo + DOC_BLOCK], phi.T, out=out[lo:lo + DOC_BLOCK])
        return out

    # ------------------------------------------------------------------ initialisation
    def initial_kernels(self, vocab_size: int, filter_width: int, n_kernels: int,
                        stream: int) -> np.ndarray:
        """D_k ~ Dir(1) over the V F entries of each kernel."""
        D = np.empty((vocab_size, filter_width, n_kernels), dtype=np.float32)
        conv.draw_kernels(self.seed, stream,
                          np.zeros((1, vocab_size, filter_width, n_kernels), dtype=np.int32),
                          shared_shape_table(1.0), D, WORD_BLOCK)
        return D

    def initial_phi(self, rows: int, cols: int, stream: int) -> np.ndarray:
        """Phi columns ~ Dir(1)."""
        phi = np.empty((rows, cols), dtype=np.float64)
        gbn.draw_phi(self.seed, stream, np.zeros(phi.shape, dtype=np.int64), 1.0, phi)
        return phi

    def initial_theta1(self, n_kernels: int) -> np.ndarray:
        """theta^(1)_jk = S_j, the sum of w = 1 over the document's positions."""
        data = self.data
        return np.repeat((data.doc_length - data.filter_width + 1).astype(np.float64)[:, None],
                         n_kernels, axis=1)

    # ------------------------------------------------------------------ step 1
    def draw_first_layer(self, state, *, prior_shape, stream: int, table_stream: int,
                         draw_w: bool = True, augment: bool = True, with_counts: bool = False,
                         with_tables: bool = False, pooling_concentration: float | None = None,
                         keep_w: bool = True):
        """w | m, a, c^(2), then m | w, D for every cell (see :func:`conv.sweep_positions`).

        Writes w, theta^(1), m, A and loglik of ``state``.  Returns ``(counts, tables)``: the
        kernel counts n (per-thread slabs, for :meth:`draw_kernels`) or None, and the pooling
        layer's tables sum_s CRT(m_jks, a_jk / S_j) or None.  The tables are drawn in the same
        pass (``stream``; ``table_stream`` is unused here), and always when w is drawn after
        an augmentation: they share the documents' random streams, so leaving them out would
        change the other draws of a seed.  ``pooling_concentration`` beta (None: the tied prior)
        draws theta^(1) ~ Gam(a + A, 1/(1 + c^(2))), pi_jk ~ Dir(beta + m_jk.), w = theta^(1) pi,
        and the tables CRT(A_jk, a_jk).
        """
        data, g = self.data, state.globals
        K = g.D.shape[2]
        counts = self.count_slabs(g.D.shape) if with_counts else self._no_counts()
        # the tables share the documents' random streams with w and m, so a full sweep always
        # draws them (whatever ``with_tables`` says): a seed then means one chain at any depth
        tables = np.empty((data.n_docs, K), dtype=np.int64) if draw_w and augment else None
        row_sums = np.empty(g.D.shape[:2], dtype=np.float64)
        if augment:
            conv.kernel_row_sums(g.D, row_sums)
        if state.w is None and not draw_w:
            raise CPGBNInputError("this pass reads w, which the last one did not keep "
                                  "(keep_w=False): draw it first")
        w_in = None if state.w is None else self.as_store(state.w, FLOOR, np.float32)
        m_in = self.as_store(state.m, 0, self.count_dtype)
        positions = data.doc_positions
        # a full pass does not read w, and without ``keep_w`` no one reads the w it draws
        # before the next pass draws it again: each document's w then lives while the
        # document is in hand, and the state's w is None
        store_w = draw_w and (keep_w or not augment)
        if draw_w:   # the old store goes before the new one is made
            w_room = next_capacity(w_in, positions, K)
            state.w = w_in = None
            w_out = PositionStore.allocate(positions, K, np.float32, FLOOR,
                                           w_room if store_w else np.zeros_like(w_room))
        else:
            w_out = w_in
        # what the pass reads as w: the old store, or (a pass that draws w, which reads none)
        # the new one, as an argument of the right type
        w_read = w_out if w_in is None else w_in
        m_out = (PositionStore.allocate(positions, K, self.count_dtype, 0,
                                        next_capacity(m_in, positions, K))
                 if augment else m_in)
        n_blocks = len(w_out.region) - 1
        needed = np.zeros((n_blocks, 2), dtype=np.int64)
        blocks = np.arange(n_blocks, dtype=np.int64)
        beta = 0.0 if pooling_concentration is None else float(pooling_concentration)
        slabs = counts
        while len(blocks):
            conv.sweep_positions(
                self.seed, stream, DOC_BLOCK, self.first_block, blocks, data.doc_cells,
                positions, data.cell_word, data.cell_col, data.cell_count, data.mode,
                data.fixed_count, g.D, row_sums, prior_shape, 1.0 + state.c[0], draw_w, augment,
                store_w, w_read.arrays(), w_read.background, m_in.arrays(), w_out.arrays(),
                w_out.region, m_out.arrays(), m_out.region, state.theta[0], state.A, slabs,
                state.loglik,
                tables if tables is not None else np.empty((0, K), dtype=np.int64),
                beta, needed)
            # a block whose region was too small is written again into a larger one: its
            # streams make the same draws, and its kernel counts were added the first time
            over = []
            if store_w and (needed[:, 0] > np.diff(w_out.region)).any():
                w_out, w_over = regrow(w_out, needed[:, 0])
                over.append(w_over)
            if augment and (needed[:, 1] > np.diff(m_out.region)).any():
                m_out, m_over = regrow(m_out, needed[:, 1])
                over.append(m_over)
            blocks = np.unique(np.concatenate(over)) if over else blocks[:0]
            slabs = self._no_counts()
        if draw_w:
            state.w = w_out if store_w else None
        if augment:
            state.m = m_out
        return (counts if with_counts else None), tables

    def as_store(self, field, background: float, dtype) -> PositionStore:
        """A position field (w or m) as this backend keeps it: a dense (P, K) array (a test's,
        a checkpoint's of an older version, the hybrid's w) becomes a store."""
        data = self.data
        if isinstance(field, PositionStore):
            if field.shape[0] != data.n_positions:
                raise CPGBNInputError(f"a position field of {field.shape[0]} positions for "
                                      f"documents of {data.n_positions}")
            return field
        field = np.asarray(field)
        if field.ndim != 2 or field.shape[0] != data.n_positions:
            raise CPGBNInputError(f"a position field must be ({data.n_positions}, K), got "
                                  f"{field.shape}")
        return PositionStore.from_dense(field.astype(dtype, copy=False), data.doc_positions,
                                        background)

    def initial_weights(self, n_kernels: int) -> PositionStore:
        """w = 1 at every (position, kernel): the start of a chain, nothing stored."""
        return PositionStore.constant(self.data.doc_positions, n_kernels, np.float32, 1.0)

    def sparse_start(self, D: np.ndarray, n_live: int) -> tuple[PositionStore, np.ndarray]:
        """The sparse start from kernels ``D``: w = 1 at each position's ``n_live`` kernels of
        largest window score, the floor elsewhere, and its theta^(1)
        (:mod:`cpgbn.backends.numba.sparse_start`)."""
        return sparse_start_weights(self.data, D, n_live)

    def zero_counts(self, n_kernels: int) -> PositionStore:
        """m = 0 at every (position, kernel), nothing stored."""
        return PositionStore.constant(self.data.doc_positions, n_kernels, self.count_dtype, 0)

    def count_slabs(self, shape) -> np.ndarray:
        """Zeroed per-thread slabs (n_threads, V, F, K) for the kernel counts n of one sweep
        (each thread adds into its own slab; :meth:`draw_kernels` sums and re-zeroes them)."""
        n_threads = numba.get_num_threads()
        slabs = self._count_slabs
        if (slabs is None or slabs.shape[0] != n_threads or slabs.shape[1:] != shape
                or slabs.dtype != self.kernel_count_dtype):
            slabs = np.zeros((n_threads,) + tuple(shape), dtype=self.kernel_count_dtype)
            self._count_slabs = slabs
        elif not self._slabs_zero:  # a sweep stopped between the augmentation and the D draw
            conv.reset_counts(slabs)
        self._slabs_zero = False
        return slabs

    def _no_counts(self) -> np.ndarray:
        return np.zeros((0, 0, 0, 0), dtype=self.kernel_count_dtype)

    # ------------------------------------------------------------------ step 2
    def draw_kernels(self, D: np.ndarray, counts: np.ndarray, eta: float, stream: int):
        """D_k ~ Dir(n_k + eta^(1)) from the per-thread count slabs (summed, then zeroed)."""
        conv.draw_kernels(self.seed, stream, counts, shared_shape_table(eta), D, WORD_BLOCK)
        if counts is self._count_slabs:
            self._slabs_zero = True
        return D

    # ------------------------------------------------------------------ statistics
    @staticmethod
    def total_kernel_counts(counts: np.ndarray) -> np.ndarray:
        """The (V, F, K) sum of the per-thread count slabs (int64), or a total as given.  The
        slabs are left as they are (the next :meth:`count_slabs` zeroes them)."""
        return counts.sum(axis=0, dtype=np.int64) if counts.ndim == 4 else counts

    @staticmethod
    def kernel_counts_from_total(total: np.ndarray) -> np.ndarray:
        """A (V, F, K) total of whole counts as one slab for :meth:`draw_kernels` (int32 while
        every count fits)."""
        return np.ascontiguousarray(total, dtype=counts_dtype(int(total.max(initial=0))))[None]

    @staticmethod
    def as_float(x) -> np.ndarray:
        """``x`` as float64 (statistics averaged over sweeps)."""
        return np.asarray(x, dtype=np.float64)

    @staticmethod
    def column_normals(n_rows: int, n_columns: int, key: tuple):
        """The standard normals of a TLASGR step, drawn when asked, one block of columns at a
        time: columns lo..hi-1 from the stream SeedSequence(key + (lo,)), so the step never
        holds a whole (n_rows, n_columns) array of them (the streams depend on the blocks the
        step asks for: :data:`COLUMN_BLOCK`)."""
        return lambda lo, hi: np.random.default_rng(
            np.random.SeedSequence([*key, lo])).standard_normal((n_rows, hi - lo))

    # ------------------------------------------------------------------ steps 3-6
    def draw_doc_scales(self, shape_sum, theta_sum, e0: float, f0: float, stream: int, out):
        """c_j ~ Gam(e0 + shape_sum_j, 1 / (f0 + theta_sum_j))."""
        gbn.draw_doc_scales(self.seed, stream, DOC_BLOCK, self.first_block, shape_sum, theta_sum, e0, f0, out)
        return out

    def layer_tables(self, counts, shape, stream: int):
        """l_jk ~ CRT(counts_jk, shape_jk)."""
        tables = np.empty(counts.shape, dtype=np.int64)
        gbn.layer_tables(self.seed, stream, DOC_BLOCK, self.first_block, counts, shape, tables)
        return tables

    def split_tables(self, tables, phi, theta_above, stream: int, with_counts: bool):
        """Split l_jk over k' in proportion to Phi[k, k'] theta_above[j, k']: returns the counts
        of the layer above (N, K_{t+1}) and, with ``with_counts``, the counts of Phi."""
        m_next = np.empty((tables.shape[0], phi.shape[1]), dtype=np.int64)
        slabs = (np.zeros((numba.get_num_threads(),) + phi.shape, dtype=np.int64)
                 if with_counts else np.zeros((0, 0, 0), dtype=np.int64))
        gbn.split_tables(self.seed, stream, DOC_BLOCK, self.first_block, tables, phi, theta_above, m_next, slabs)
        return m_next, (slabs.sum(axis=0) if with_counts else None)

    def draw_phi(self, phi, counts, eta: float, stream: int):
        """Phi[:, k'] ~ Dir(counts[:, k'] + eta^(t))."""
        gbn.draw_phi(self.seed, stream, counts, eta, phi)
        return phi

    def draw_gamma_vector(self, shape, rate: float, stream: int, out):
        """out_k ~ Gam(shape_k, 1 / rate) (the top layer's r)."""
        gbn.draw_gamma_vector(self.seed, stream, shape, rate, out)
        return out

    def draw_doc_gammas(self, shape, counts, rate, stream: int, out):
        """theta_jk ~ Gam(shape_jk + counts_jk, 1 / rate_j)."""
        gbn.draw_doc_gammas(self.seed, stream, DOC_BLOCK, self.first_block, shape, counts, rate, out)
        return out

    # ------------------------------------------------------------------ mixing diagnostic
    def assignment_changes(self, m, memory):
        """How m moved since the last call: int64[6] sums of
        :data:`.position_store.CHANGE_FIELDS`, and the backend's memory of this m for the next
        call (``memory`` None at the first call: the sums then compare m with zeros).  A pass
        writes a new store and never changes one, so the memory is the store itself, not a
        copy."""
        m = self.as_store(m, 0, self.count_dtype)
        if memory is None:
            memory = PositionStore.constant(m.doc_positions, m.n_kernels, m.dtype, 0)
        return compare_stores(m, memory), m
