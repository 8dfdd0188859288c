"""PyTorch backend of the Gibbs sweep: the conditionals of the numba backend, vectorised over
cells, positions and documents so that they run on a GPU (``device="cuda"``) or, for CI and
small problems, on the CPU: the backend protocol of :mod:`cpgbn.inference.backend_protocols`, which
:class:`cpgbn.inference.gibbs.GibbsSampler` drives (the order of the steps lives there):

1. w | m, a, c^(2) (pooling prior; the floor-aware exact draw for empty positions; or, with a
   free positional concentration beta, theta^(1) | A and pi | m apart), then every
   cell is re-augmented, m | w, D (zero-truncated Poisson / pseudo-count / observed count, split
   over the candidates (f, k) by one multinomial draw), giving m, A, n and the log-likelihood;
2. D_k | n ~ Dir(n_k + eta^(1));
3. c^(t+1) | theta^(t), theta^(t+1) for t = 1..T, while every theta is current;
4. upward pass: first-layer tables sum_s CRT(m_jks, a_jk / S_j) (CRT(A_jk, a_jk) with a free
   beta), higher layers
   CRT(m^(t), Phi^(t+1) theta^(t+1)), each split over layer t+1;
5. Phi^(t) | counts, r | tables;
6. downward pass theta^(T), ..., theta^(2).

This class keeps the corpus' tensors on the device (:class:`~cpgbn.backends.torch.conv.
DeviceCells`), keys the random streams and walks the blocks; the draws themselves are pure
functions: the first layer's in :mod:`cpgbn.backends.torch.conv`, the stack's in
:mod:`cpgbn.backends.torch.gbn` (as the numba backend's kernels are laid out).

Random numbers
    One ``torch.Generator`` on the device (in :class:`cpgbn.backends.torch.random.TorchRandom`,
    with the exact variates built on it), re-seeded at every step of every sweep from
    ``(seed, sweep, step)`` (the stream codes of :mod:`cpgbn.inference.streams`) and, for the
    steps that draw per document (1, 3, 4, 6), once more for every block of ``doc_block``
    documents (by default 1,024 on the CPU, 16,384 on a GPU:
    :data:`cpgbn.backends.torch.devices.DOC_BLOCKS`), numbered
    globally from ``first_doc``: a block's draws are a function of
    (seed, sweep, step, block) alone, so a shard of a corpus that starts at a multiple of the
    block draws what its documents draw in one process, and data-parallel workers
    (:func:`cpgbn.modes.sharded.shard_range`) make the single process' chain.  The block is large so
    that a GPU sees large tensors; the memory chunks (below) nest inside it.  A run is
    reproducible for a given seed, device type, torch version, ``doc_block`` and
    ``max_elements`` (the chunking changes the order in which variates are consumed; the
    per-document float sums are segment sums in a fixed order, not a GPU's atomic adds:
    :func:`cpgbn.backends.torch.conv.segment_sums`), and a run resumed from a
    checkpoint continues exactly as an uninterrupted one.  It is NOT bit-identical to the numba
    backend (different generators and algorithms): the two agree in distribution, which
    ``tests/test_torch_backend.py`` checks (Geweke test and a two-sample posterior comparison).

Exactness
    Every draw is exact up to floating-point rounding.  Only torch's uniform, exponential and
    ``_standard_gamma`` (Marsaglia-Tsang, used for shapes >= 1 only) are used as primitives;
    shapes < 1 use the boost G(a) = G(a + 1) exp(-E / a) in log space (no underflow for tiny
    shapes), the zero-truncated Poisson is inversion (lam < 10) or Hormann's PTRS rejection,
    the multinomials are inverse-CDF categorical draws (binary search on cumulative weights) per
    unit, a row's uniforms drawn sorted so that its units come out as (column, amount) runs,
    and CRT(m, a) is the sum of its m - 1 Bernoulli(a / (a + i)) variables.  torch's own
    Poisson/binomial are not used: on CUDA, ``torch.poisson`` goes through cuRAND, which
    uses float32 arithmetic above rate 64 and a normal approximation above 4000.

Dtypes
    Storage follows :class:`~cpgbn.inference.state.GibbsState`: w and D float32 with the float32
    floor FLOOR = 1e-30; theta, c, Phi, r float64 with the floors TINY = 1e-100 and PHI_FLOOR.
    The latent counts m and A are int32 on the device as on the host (a document's units
    bound them, and :func:`cpgbn.layers.cells.check_document_units` refuses a document whose
    units pass 2^31 - 1); the kernel counts n, tables and the upper layers' counts are int64
    (a word's units summed over the corpus may pass 2^31 under the tempered likelihood).  All
    arithmetic of the conditionals (candidate weights w d, lambda, cumulative weights, gamma
    shapes, CRT probabilities) is float64, as in the numba kernels: a product of two floored
    float32 values (1e-60) underflows in float32, and TINY is not representable in float32.
    There is no float32 compute mode for that reason; on a GPU the steps are bound by memory
    traffic and indexing rather than by float64 throughput.

Memory
    w and m are sparse fields on the device (:mod:`cpgbn.backends.torch.position_field`):
    their entries off the floor and the non-zero counts, 6 bytes an entry, and w only while a
    chunk of documents is in hand unless the sampler keeps it (``keep_w``).  A sweep reads
    the last m a chunk of whole documents at a time as a dense (positions, K_1) tensor, draws
    the chunk's w, augments the chunk's cells and stores the chunk's new m, so the dense
    (P, K_1) field never exists (what a fit's memory check counts:
    :data:`cpgbn.inference.memory.TORCH_ENTRY_BYTES`).  Temporaries are built in chunks of
    at most ``max_elements`` float64 entries (cells x their most live candidates' weights,
    :func:`cpgbn.backends.torch.conv.augment_rows`; positions x K weights, rows x K_{t+1}
    split weights, padded unit blocks, the kernels' Dirichlet draws).  On the CPU a sweep
    writes its new fields into buffers with room (:class:`~cpgbn.backends.torch.
    position_field.FieldWriter`), so the new m is never held twice.
"""

from __future__ import annotations

import contextlib

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("the PyTorch backend needs torch: pip install 'cpgbn[torch]'") from exc

from ...errors import CPGBNInputError
from ...blocks import DOC_BLOCK as NUMBA_DOC_BLOCK
from ..numba.gbn import TINY
from . import conv, gbn
from .blocks import Block, concatenated
from .conv import FLOOR
from .devices import DOC_BLOCKS, MAX_ELEMENTS, resolve_device
from .mixing import assignment_changes
from .position_field import DeviceField, FieldWriter
from .random import TorchRandom

__all__ = ["TorchBackend", "resolve_device", "FLOOR"]

F64 = torch.float64
F32 = torch.float32
I32 = torch.int32
I64 = torch.int64
#: The kernel counts' dtype for integer latent counts (a study's float counts stay float).
KERNEL_COUNTS = {I32: I64}
#: torch dtype of each host dtype of a GibbsState field.
_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(np.int32): I32,
           np.dtype(np.int64): I64}


def _stored(field) -> int:
    """Entries a position field holds: a DeviceField's stored ones, a dense tensor's all."""
    if field is None:
        return 0
    return field.nnz if isinstance(field, DeviceField) else int(field.numel())


class TorchBackend:
    """Gibbs draws of a CPGBN with PyTorch tensors on ``device`` (the backend protocol of
    :mod:`cpgbn.inference.backend_protocols`); see the module docstring for random numbers, dtypes and
    memory.

    Parameters
    ----------
    data : ConvData
        The cells of the documents (re-assignable: ``backend.data = other`` uploads new cells).
    seed : int
    device : "cpu", "cuda", "cuda:N" or torch.device
        Where the tensors live.  ``"cuda"`` without a usable GPU raises CPGBNInputError.
    max_elements : int or None
        Largest float64 temporary built at once (default 2**20 on the CPU, 2**26 on a GPU).
    first_doc : int, default 0
        The global id of ``data``'s first document in a larger corpus (a multiple of
        ``doc_block``): a worker's shard then draws the whole corpus' numbers.
    doc_block : int or None
        Documents per random-stream block (a multiple of 32; None: the device type's
        :data:`~cpgbn.backends.torch.devices.DOC_BLOCKS`); part of what a seed means.
    """

    name = "torch"
    #: States live on the device: GibbsState fields are tensors there.
    works_on_host = False
    #: dtype of the latent counts m and A (on the device and on the host).
    count_dtype = np.int32
    #: The TLASGR arithmetic on a global takes all its columns at once (one pass of kernels).
    column_block = None

    def __init__(self, data, seed: int, *, device="cpu", max_elements: int | None = None,
                 first_doc: int = 0, doc_block: int | None = None):
        self.device = resolve_device(device)
        self.seed = int(seed)
        if doc_block is None:
            doc_block = DOC_BLOCKS[self.device.type]
        if isinstance(doc_block, bool) or int(doc_block) < 1 or int(doc_block) % NUMBA_DOC_BLOCK:
            raise CPGBNInputError(f"doc_block must be a positive multiple of {NUMBA_DOC_BLOCK}, "
                                  f"got {doc_block!r}")
        self.doc_block = int(doc_block)
        if int(first_doc) < 0 or int(first_doc) % self.doc_block:
            raise CPGBNInputError(f"first_doc must be a non-negative multiple of "
                                  f"{self.doc_block} (the random streams' document block), "
                                  f"got {first_doc}")
        self.first_block = int(first_doc) // self.doc_block
        if max_elements is None:
            max_elements = MAX_ELEMENTS[self.device.type]
        if int(max_elements) < 1:
            raise CPGBNInputError(f"max_elements must be >= 1, got {max_elements}")
        self.max_elements = int(max_elements)
        self.random = TorchRandom(self.seed, self.device, self.max_elements)
        #: The first layer's pooling tables draw from a generator of their own, keyed as the
        #: main one, so that a block's tables can be drawn chunk by chunk beside its counts.
        self.table_random = TorchRandom(self.seed, self.device, self.max_elements)
        self.data = data

    # ------------------------------------------------------------------ data
    @property
    def data(self):
        return self._data

    @data.setter
    def data(self, data) -> None:
        self._data = data
        self._cells = conv.DeviceCells.upload(data, self.device, self.doc_block,
                                              self.first_block)

    # ------------------------------------------------------------------ arrays
    @staticmethod
    def sweep_context():
        return contextlib.nullcontext()

    @staticmethod
    def holds(array) -> bool:
        """Whether ``array`` is already a tensor (or a position field) of this backend's kind."""
        return isinstance(array, (torch.Tensor, DeviceField))

    def to_backend(self, array, dtype) -> torch.Tensor:
        """A device copy of a numpy array in the device dtype of host ``dtype``."""
        return torch.tensor(np.asarray(array), dtype=_DTYPES[np.dtype(dtype)], device=self.device)

    def to_numpy(self, array, dtype):
        """A tensor as a numpy array of ``dtype``; a position field as the host's
        :class:`~cpgbn.backends.numba.position_store.PositionStore` (a new object)."""
        if isinstance(array, DeviceField):
            return array.to_store(np.asarray(self.data.doc_positions, dtype=np.int64), dtype)
        return array.detach().to("cpu").numpy().astype(dtype, copy=False)

    def ones(self, n: int) -> torch.Tensor:
        return torch.ones(n, dtype=F64, device=self.device)

    @staticmethod
    def empty_like(array: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(array)

    def full(self, shape, value, dtype) -> torch.Tensor:
        return torch.full(shape if isinstance(shape, tuple) else (shape,), value,
                          dtype=_DTYPES[np.dtype(dtype)], device=self.device)

    def initial_weights(self, n_kernels: int) -> DeviceField:
        """w = 1 at every (position, kernel): the start of a chain (a field of background 1,
        nothing stored)."""
        return DeviceField.constant(self.data.n_positions, n_kernels, F32, 1.0, self.device)

    def sparse_start(self, D: torch.Tensor, n_live: int):
        """The numba backend's sparse start (the same live kernels, chosen on the host from
        the documents' cells), as a field on the device and its theta^(1)."""
        from ..numba.sparse_start import sparse_start_weights
        store, theta = sparse_start_weights(self.data, self.to_numpy(D, np.float32), n_live)
        return (DeviceField.from_field(store, self.data.n_positions, D.shape[2], F32, FLOOR,
                                       self.device),
                self.to_backend(theta, np.float64))

    def zero_counts(self, n_kernels: int) -> DeviceField:
        """m = 0 at every (position, kernel)."""
        return DeviceField.constant(self.data.n_positions, n_kernels,
                                    _DTYPES[np.dtype(self.count_dtype)], 0, self.device)

    def field_to_backend(self, field, dtype, background: float):
        """A host position field (a numba PositionStore, or a dense (P, K) array whose
        entries equal to ``background`` are not stored; None for a w not kept) as a
        :class:`DeviceField` of host type ``dtype``."""
        if field is None or isinstance(field, DeviceField):
            return field
        n_kernels = field.shape[1]
        return DeviceField.from_field(field, self.data.n_positions, n_kernels,
                                      _DTYPES[np.dtype(dtype)], background, self.device)

    @staticmethod
    def log1p(x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(x)

    def row_sums(self, x: torch.Tensor) -> torch.Tensor:
        """Each document's row of ``x`` summed, block by block: a reduction's order of sums
        may depend on the tensor's size (on a GPU), and a block has the same size in a shard
        as in the whole corpus, so workers sum as one process does."""
        return self._each_block(lambda rows: rows.sum(dim=1), x)

    @staticmethod
    def column_sums(x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=0).to(F64)

    @staticmethod
    def rows_of(vector: torch.Tensor, n_rows: int) -> torch.Tensor:
        return vector.unsqueeze(0).expand(n_rows, vector.shape[0])

    @staticmethod
    def total_of(vector: torch.Tensor, n: int) -> torch.Tensor:
        return vector.sum().expand(n)

    def stack_shape(self, theta_above: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
        """Phi^(t+1) theta^(t+1)_j for every document, block by block (as :meth:`row_sums`:
        a matrix product's rounding may depend on its size)."""
        return self._each_block(lambda rows: rows @ phi.T, theta_above)

    # ------------------------------------------------------------------ initialisation
    def initial_kernels(self, vocab_size: int, filter_width: int, n_kernels: int,
                        stream: int) -> torch.Tensor:
        self.random.reseed(stream)
        return conv.dirichlet_kernels(
            self.random,
            torch.zeros((vocab_size, filter_width, n_kernels), dtype=I64, device=self.device), 1.0)

    def initial_phi(self, rows: int, cols: int, stream: int) -> torch.Tensor:
        self.random.reseed(stream)
        return gbn.dirichlet_columns(
            self.random, torch.zeros((rows, cols), dtype=I64, device=self.device), 1.0)

    def initial_theta1(self, n_kernels: int) -> torch.Tensor:
        S = self._cells.S.to(F64)
        return S[:, None].expand(self.data.n_docs, n_kernels).clone()

    # ------------------------------------------------------------------ the draws
    def draw_first_layer(self, state, *, prior_shape, stream: int, table_stream: int,
                         draw_w: bool = True, augment: bool = True, with_counts: bool = False,
                         with_tables: bool = False, pooling_concentration: float | None = None,
                         keep_w: bool = True):
        """w | m, a, c^(2) (``stream``), then m | w, D; the pooling tables
        sum_s CRT(m_jks, a_jk / S_j) from ``table_stream`` when ``with_tables``.  Returns
        (kernel counts n or None, tables or None).  With ``pooling_concentration`` beta:
        theta^(1) ~ Gam(a + A, 1/(1 + c^(2))), pi_jk ~ Dir(beta + m_jk.), w = theta^(1) pi, and
        the tables CRT(A_jk, a_jk).  Block by block (module docstring), and within a block
        chunk by chunk of whole documents: a chunk's w, then its m, from ``(stream, block)``;
        the block's tables from ``(table_stream, block)``.  w and m are read and written as
        :class:`~cpgbn.backends.torch.position_field.DeviceField` s (dense tensors are read
        too: the hybrid's encoder draws); the w drawn is kept in ``state.w`` only with
        ``keep_w`` (or when nothing is augmented), else ``state.w`` is None after the pass."""
        n_docs, K = state.A.shape
        if state.w is None and not draw_w:
            raise CPGBNInputError("the state holds no w (a sweep with keep_w=False): draw it "
                                  "first")
        cells, random = self._cells, self.random
        theta = state.theta[0]
        if draw_w:
            theta = torch.empty((n_docs, K), dtype=F64, device=self.device)
        store_w = draw_w and (keep_w or not augment)
        counts_dtype = _DTYPES[np.dtype(self.count_dtype)]
        if augment:
            V, F, _ = state.globals.D.shape
            D_sums = conv.kernel_sums(state.globals.D)   # the floor buckets', once a sweep
            A = torch.zeros((n_docs, K), dtype=counts_dtype, device=self.device)
            n = (torch.zeros(V * F * K, dtype=KERNEL_COUNTS.get(counts_dtype, counts_dtype),
                             device=self.device) if with_counts else None)
            loglik = torch.empty(n_docs, dtype=F64, device=self.device)
        tables = [] if augment and with_tables else None
        tied_tables = tables is not None and pooling_concentration is None
        split = draw_w and pooling_concentration is not None
        # room for what the fields held before, with a margin (the writers grow beyond it),
        # never beyond the dense P x K: no reservation larger than a dense field's
        room = min(2 * max(_stored(state.m), _stored(state.w)) + cells.n_positions,
                   cells.n_positions * K)
        w_writer = FieldWriter(K, F32, FLOOR, self.device, room) if store_w else None
        m_writer = FieldWriter(K, counts_dtype, 0, self.device, room) if augment else None
        for block in cells.blocks:
            random.reseed(stream, block.index)
            if tables is not None:   # the tables' own generator: they interleave with the chunks
                self.table_random.reseed(table_stream, block.index)
            if split:
                log_theta, theta[block.docs] = conv.split_theta(
                    random, self._document_sums(state.m, block), state.c[0][block.docs],
                    prior_shape[block.docs])
            for lo, hi, d_lo, d_hi in conv.document_chunks(cells, K, block.docs,
                                                           random.max_elements):
                docs = slice(d_lo, d_hi)
                if split:
                    rows = slice(d_lo - block.docs.start, d_hi - block.docs.start)
                    w_rows = conv.draw_w_split_rows(
                        cells, random, lo, hi, docs, conv.position_rows(state.m, lo, hi),
                        log_theta[rows], float(pooling_concentration))
                elif draw_w:
                    w_rows, theta[docs] = conv.draw_w_rows(
                        cells, random, lo, hi, docs, conv.position_rows(state.m, lo, hi),
                        state.c[0], prior_shape)
                else:
                    w_rows = conv.position_rows(state.w, lo, hi)
                if w_writer is not None:
                    w_writer.add(w_rows)
                if augment:
                    m_rows = torch.zeros((hi - lo, K), dtype=counts_dtype, device=self.device)
                    conv.augment_rows(cells, random, lo, docs, state.globals.D, w_rows, theta,
                                      m_rows, A, n, loglik, self.split_units, D_sums)
                    if tied_tables:
                        tables.append(self.position_tables(
                            m_rows, prior_shape[docs], Block(block.index, docs, slice(lo, hi),
                                                             slice(0, 0)),
                            random=self.table_random))
                    m_writer.add(m_rows)
                    del m_rows
                del w_rows
            if tables is not None and not tied_tables:
                tables.append(self.table_random.crt(
                    A[block.docs], prior_shape[block.docs].clamp_min(TINY)))
        if draw_w:
            state.w = w_writer.finish() if store_w else None
            state.theta[0] = theta
        if not augment:
            return None, None
        state.m, state.A, state.loglik = m_writer.finish(), A, loglik
        return (None if n is None else n.reshape(state.globals.D.shape),
                None if tables is None else concatenated(tables))

    def _document_sums(self, m, block: Block) -> torch.Tensor:
        """The counts of the documents of ``block`` summed over their positions, (docs, K)."""
        lo, hi = block.positions.start, block.positions.stop
        segments = self._cells.pos_doc[lo:hi] - block.docs.start
        n = block.docs.stop - block.docs.start
        if isinstance(m, DeviceField):
            return m.row_sums(lo, hi, segments, n)
        out = torch.zeros((n, m.shape[1]), dtype=m.dtype, device=self.device)
        out.index_add_(0, segments, m[lo:hi])
        return out

    def draw_kernels(self, D, counts, eta: float, stream: int) -> torch.Tensor:
        self.random.reseed(stream)
        return conv.dirichlet_kernels(self.random, counts, eta)

    @staticmethod
    def total_kernel_counts(counts: torch.Tensor) -> torch.Tensor:
        """The kernel counts are one (V, F, K) tensor already."""
        return counts

    @staticmethod
    def kernel_counts_from_total(total: torch.Tensor) -> torch.Tensor:
        return total

    def as_float(self, x) -> torch.Tensor:
        """``x`` as a float64 tensor on the device (statistics averaged over sweeps)."""
        return torch.as_tensor(x, device=self.device).to(F64)

    def column_normals(self, n_rows: int, n_columns: int, key: tuple):
        """The standard normals of a TLASGR step: one float64 (n_rows, n_columns) draw on the
        device from a generator seeded by SeedSequence(key), made at the first call; each call
        returns its columns lo..hi-1."""
        drawn = []

        def normals(lo: int, hi: int) -> torch.Tensor:
            if not drawn:
                seed = np.random.SeedSequence(list(key)).generate_state(1, np.uint64)[0]
                generator = torch.Generator(device=self.device)
                generator.manual_seed(int(seed >> np.uint64(1)))   # torch takes a signed int64
                drawn.append(torch.randn((n_rows, n_columns), dtype=F64, device=self.device,
                                         generator=generator))
            return drawn[0][:, lo:hi]
        return normals

    def _each_block(self, compute, *rows, stream: int | None = None) -> torch.Tensor:
        """``compute`` applied to every block's rows of the per-document arrays ``rows``
        (drawing from the block's part of ``stream`` when given), stacked."""
        parts = []
        for block in self._cells.blocks:
            if stream is not None:
                self.random.reseed(stream, block.index)
            parts.append(compute(*(r[block.docs] for r in rows)))
        return concatenated(parts)

    def draw_doc_scales(self, shape_sum, theta_sum, e0: float, f0: float, stream: int, out=None):
        return self._each_block(
            lambda a, t: self.random.gamma(e0 + a).clamp_min(TINY) / (f0 + t),
            shape_sum, theta_sum, stream=stream)

    def layer_tables(self, counts, shape, stream: int) -> torch.Tensor:
        return self._each_block(lambda m, a: self.random.crt(m, a.clamp_min(TINY)),
                                counts, shape, stream=stream)

    def split_tables(self, tables, phi, theta_above, stream: int, with_counts: bool):
        m_next, phi_counts = [], None
        for block in self._cells.blocks:
            self.random.reseed(stream, block.index)
            rows, counts = gbn.split_tables(self.random, tables[block.docs], phi,
                                            theta_above[block.docs])
            m_next.append(rows)
            phi_counts = counts if phi_counts is None else phi_counts + counts
        return concatenated(m_next), (phi_counts if with_counts else None)

    def draw_phi(self, phi, counts, eta: float, stream: int) -> torch.Tensor:
        self.random.reseed(stream)
        return gbn.dirichlet_columns(self.random, counts, eta)

    def draw_gamma_vector(self, shape, rate, stream: int, out=None) -> torch.Tensor:
        self.random.reseed(stream)
        return self.random.gamma(shape).clamp_min(TINY) / rate

    def draw_doc_gammas(self, shape, counts, rate, stream: int, out=None) -> torch.Tensor:
        return self._each_block(
            lambda a, m, c: self.random.gamma(a + m.to(F64)).clamp_min(TINY) / c[:, None],
            shape, counts, rate, stream=stream)

    def split_units(self, cum: torch.Tensor, units: torch.Tensor):
        """Multinomial(units[i]) over the candidates of every cell i (inclusive cumulative
        weights ``cum``): (cell rows, candidate columns, amounts), the draw's nonzero entries
        (:meth:`~cpgbn.backends.torch.random.TorchRandom.unit_counts`)."""
        return self.random.unit_counts(cum, units)

    def position_tables(self, m: torch.Tensor, shape: torch.Tensor,
                        block: Block | None = None, random: TorchRandom | None = None
                        ) -> torch.Tensor:
        """tables[j, k] = sum_s CRT(m_jks, max(a_jk / S_j, TINY)) of the documents of
        ``block`` (m: their positions' rows, shape: their rows), or of every document when
        ``block`` is None (:func:`cpgbn.backends.torch.conv.position_tables`), from
        ``random`` (default: the backend's generator)."""
        return conv.position_tables(self._cells, self.random if random is None else random,
                                    m, shape,
                                    self._cells.whole() if block is None else block)

    # ------------------------------------------------------------------ mixing diagnostic
    def assignment_changes(self, m: torch.Tensor, memory):
        """How m moved since the last call (:func:`cpgbn.backends.torch.mixing.
        assignment_changes`, in chunks of ``max_elements``)."""
        return assignment_changes(m, memory, self.max_elements)
