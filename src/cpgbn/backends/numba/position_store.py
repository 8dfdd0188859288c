"""Sparse storage of the convolutional layer's per-position fields w and m on the numba backend.

The chain's per-position state, w_jks (float32) and m_jks (int32), is a (P, K_1) field over
P = sum_j S_j positions, but almost all of it sits at one value: on MR about 5% of the w draws
are above the float32 floor and 0.6% of the counts are non-zero once the chain has left its
start (docs/sampler.md).  :class:`PositionStore` keeps only the entries that differ from the
field's *background* (FLOOR for w, 0 for m, 1 for the w = 1 a chain starts from):

* ``pos_count`` int32 (P,)   -- entries stored at each position;
* ``doc_start`` int64 (N,)   -- where document j's entries begin in ``kernel`` / ``value``;
* ``doc_nnz``   int64 (N,)   -- how many entries document j has (the sum of its positions');
* ``kernel``    (capacity,)  -- k of each entry (uint8 while
  K_1 <= 256, uint16 while K_1 <= 65,536, else int32: :func:`kernel_index_dtype`);
* ``value``     (capacity,)  -- w_jks or m_jks of each entry.

A document's entries are contiguous, position after position; documents of one random-stream
block (:data:`cpgbn.blocks.DOC_BLOCK`) share a *region* of the entry arrays, ``region[b]`` to
``region[b + 1]``, with room to grow, so that the sweep's parallel blocks write a new store
without knowing each other's sizes (:mod:`cpgbn.backends.numba.numba_backend` sizes the
regions from the last sweep's and re-runs a block whose region was too small).  A store is
written by one pass and then only read: the mixing diagnostic keeps the previous sweep's m by
reference.  Memory: (1 or 2 bytes + 4) per stored entry, 4 bytes per position and 16 per
document, against 4 bytes per (position, kernel) of a dense field.
"""

from __future__ import annotations

import mmap
import sys
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ...blocks import DOC_BLOCK

__all__ = ["PositionStore", "CHANGE_FIELDS", "kernel_index_dtype", "as_dense", "as_sparse",
           "dense_rows", "compare_stores"]

#: The fields of :func:`compare_stores`' counts, in order (the mixing diagnostic's).
CHANGE_FIELDS = ("moved_twice", "units_now", "units_before", "switched", "occupied_both",
                 "largest")
#: Entries a region gets beyond the last sweep's, as a share of them and per document.
GROWTH_SHARE = 0.25
GROWTH_PER_DOC = 16


def kernel_index_dtype(n_kernels: int) -> np.dtype:
    """The narrowest unsigned integer type that numbers ``n_kernels`` kernels."""
    if n_kernels <= 1 << 8:
        return np.dtype(np.uint8)
    if n_kernels <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


@dataclass(eq=False)
class PositionStore:
    """A (P, K) field stored as its entries that differ from ``background`` (module docstring).

    ``fresh`` marks a store without a sweep's history (the start's w = 1 or m = 0): the next
    store written from it is given room for every (position, kernel) pair.
    """

    doc_positions: np.ndarray
    n_kernels: int
    background: float
    doc_start: np.ndarray
    doc_nnz: np.ndarray
    pos_count: np.ndarray
    kernel: np.ndarray
    value: np.ndarray
    region: np.ndarray
    fresh: bool = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def allocate(cls, doc_positions: np.ndarray, n_kernels: int, dtype, background: float,
                 capacity: np.ndarray) -> "PositionStore":
        """An unwritten store whose block b has room for ``capacity[b]`` entries (np.empty:
        pages are resident only once written)."""
        region = np.zeros(len(capacity) + 1, dtype=np.int64)
        np.cumsum(capacity, out=region[1:])
        n_docs = len(doc_positions) - 1
        return cls(doc_positions, int(n_kernels), background,
                   np.zeros(n_docs, dtype=np.int64), np.zeros(n_docs, dtype=np.int64),
                   np.zeros(int(doc_positions[-1]), dtype=np.int32),
                   unwritten(int(region[-1]), kernel_index_dtype(n_kernels)),
                   unwritten(int(region[-1]), dtype), region)

    @classmethod
    def constant(cls, doc_positions: np.ndarray, n_kernels: int, dtype,
                 background: float) -> "PositionStore":
        """Every entry equal to ``background`` (no entries stored), marked fresh."""
        store = cls.allocate(doc_positions, n_kernels, dtype, background,
                             np.zeros(n_blocks(len(doc_positions) - 1), dtype=np.int64))
        store.fresh = True
        return store

    @classmethod
    def from_dense(cls, array: np.ndarray, doc_positions: np.ndarray, background: float
                   ) -> "PositionStore":
        """The store of a dense (P, K) field (its entries != ``background``)."""
        array = np.ascontiguousarray(array)
        doc_positions = np.asarray(doc_positions, dtype=np.int64)
        if array.ndim != 2 or array.shape[0] != doc_positions[-1]:
            raise ValueError(f"a position field must be ({int(doc_positions[-1])}, K), got "
                             f"{array.shape}")
        pos_count = np.zeros(array.shape[0], dtype=np.int32)
        _count_entries(array, array.dtype.type(background), pos_count)
        return cls.from_rows(doc_positions, array.shape[1], background, pos_count,
                             *_dense_entries(array, background, pos_count))

    @classmethod
    def from_rows(cls, doc_positions: np.ndarray, n_kernels: int, background: float,
                  pos_count: np.ndarray, kernel: np.ndarray, value: np.ndarray
                  ) -> "PositionStore":
        """A store from its compact rows (:meth:`to_rows`), one region per block, no room."""
        doc_positions = np.asarray(doc_positions, dtype=np.int64)
        pos_count = np.ascontiguousarray(pos_count, dtype=np.int32)
        if len(pos_count) != doc_positions[-1] or int(pos_count.sum(dtype=np.int64)) != len(kernel):
            raise ValueError("the stored rows do not match the documents' positions")
        ends = np.concatenate([[0], np.cumsum(pos_count, dtype=np.int64)])
        doc_start = ends[doc_positions[:-1]]
        doc_nnz = ends[doc_positions[1:]] - doc_start
        region = ends[doc_positions[block_edges(len(doc_positions) - 1)]]
        return cls(doc_positions, int(n_kernels), background, doc_start, doc_nnz, pos_count,
                   np.ascontiguousarray(kernel, dtype=kernel_index_dtype(n_kernels)),
                   np.ascontiguousarray(value), np.ascontiguousarray(region, dtype=np.int64))

    # ------------------------------------------------------------------ reading
    @property
    def shape(self) -> tuple[int, int]:
        return int(self.doc_positions[-1]), self.n_kernels

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def nnz(self) -> int:
        """Stored entries."""
        return int(self.doc_nnz.sum())

    @property
    def nbytes(self) -> int:
        """Bytes of the stored entries and the index arrays (the room left in the regions is
        allocated but not resident until written)."""
        entry = self.kernel.itemsize + self.value.itemsize
        return (self.nnz * entry + self.pos_count.nbytes + self.doc_start.nbytes
                + self.doc_nnz.nbytes + self.region.nbytes)

    def arrays(self) -> tuple:
        """What the kernels read and write: (doc_start, doc_nnz, pos_count, kernel, value)."""
        return self.doc_start, self.doc_nnz, self.pos_count, self.kernel, self.value

    def toarray(self) -> np.ndarray:
        """The dense (P, K) field."""
        return self.rows(0, self.shape[0])

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """The dense (hi - lo, K) field of positions ``lo:hi``."""
        out = np.full((max(hi - lo, 0), self.n_kernels), self.background, dtype=self.dtype)
        if hi > lo:
            _scatter_entries(self.doc_positions, self.doc_start, self.pos_count, self.kernel,
                             self.value, lo, hi, out)
        return out

    def to_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pos_count, kernel, value) with the documents' entries packed one after another:
        the form a checkpoint saves, whose rows split at any document boundary."""
        n = self.nnz
        kernel = np.empty(n, dtype=self.kernel.dtype)
        value = np.empty(n, dtype=self.dtype)
        _pack_entries(self.doc_start, self.doc_nnz, self.kernel, self.value, kernel, value)
        return self.pos_count.copy(), kernel, value

    def block_usage(self) -> np.ndarray:
        """Entries stored per random-stream block (int64, one per block)."""
        ends = np.concatenate([[0], np.cumsum(self.doc_nnz, dtype=np.int64)])
        return np.diff(ends[block_edges(len(self.doc_nnz))])


def unwritten(n: int, dtype) -> np.ndarray:
    """``np.empty(n, dtype)`` whose memory becomes resident 4 KiB at a time, as it is written.

    numpy asks the kernel for transparent huge pages on large arrays (``madvise``), so the
    first write into a region's room makes 2 MiB resident: with a region per block of 32
    documents, IMDB's stores held about 2 GB of room that nothing wrote.  An anonymous
    ``mmap`` (stdlib), marked not to use huge pages, is the same array without that.

    The room is reserved without swap accounting (``MAP_NORESERVE`` on Linux): the store
    written after a fresh one gets room for every (position, kernel) pair, and on a large
    corpus that is more than the machine's memory (250,000 IMDB reviews, K = 200: 53 GB of
    int32 counts), which Linux's overcommit heuristic refuses as one mapping although the
    sparse start writes a few entries per position of it."""
    dtype = np.dtype(dtype)
    nbytes = int(n) * dtype.itemsize
    if nbytes < _SMALL_ARRAY:
        return np.empty(n, dtype=dtype)
    if _NORESERVE:
        buffer = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _NORESERVE)
    else:
        buffer = mmap.mmap(-1, nbytes)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        buffer.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(buffer, dtype=dtype, count=int(n))


#: Below this many bytes an array is allocated by numpy (no huge pages are involved).
_SMALL_ARRAY = 1 << 21
#: mmap's MAP_NORESERVE flag (the stdlib names it from Python 3.12; Linux's value before)
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)


def n_blocks(n_docs: int) -> int:
    return -(-int(n_docs) // DOC_BLOCK)


def block_edges(n_docs: int) -> np.ndarray:
    """The first document of every random-stream block, and ``n_docs`` (int64)."""
    return np.minimum(np.arange(n_blocks(n_docs) + 1, dtype=np.int64) * DOC_BLOCK, n_docs)


def next_capacity(previous: PositionStore | None, doc_positions: np.ndarray,
                  n_kernels: int) -> np.ndarray:
    """Room per block for the store a pass writes after ``previous`` (the same field's last
    store): its entries plus :data:`GROWTH_SHARE` and :data:`GROWTH_PER_DOC` per document, at
    most every pair; every pair after a fresh store or none."""
    edges = block_edges(len(doc_positions) - 1)
    dense = np.diff(np.asarray(doc_positions, dtype=np.int64)[edges]) * int(n_kernels)
    if previous is None or previous.fresh:
        return dense
    used = previous.block_usage()
    docs = np.diff(edges)
    room = used + (used * GROWTH_SHARE).astype(np.int64) + GROWTH_PER_DOC * docs
    return np.minimum(room, dense)


def regrow(store: PositionStore, needed: np.ndarray) -> tuple[PositionStore, np.ndarray]:
    """``store`` with room for ``needed[b]`` entries (and the growth margin) in every block
    whose region was too small, the other blocks' entries moved over; returns the new store
    and the blocks that overflowed (to be written again)."""
    capacity = np.diff(store.region)
    over = np.flatnonzero(needed > capacity)
    grown = capacity.copy()
    grown[over] = needed[over] + (needed[over] * GROWTH_SHARE).astype(np.int64) + GROWTH_PER_DOC
    new = PositionStore.allocate(store.doc_positions, store.n_kernels, store.dtype,
                                 store.background, grown)
    # the too-small store is dropped: its per-position and per-document arrays move over
    new.pos_count = store.pos_count
    new.doc_start, new.doc_nnz = store.doc_start, store.doc_nnz
    n_docs = len(store.doc_nnz)
    for b in np.flatnonzero(needed <= capacity):
        lo, hi = store.region[b], store.region[b] + needed[b]
        shift = new.region[b] - store.region[b]
        new.kernel[lo + shift:hi + shift] = store.kernel[lo:hi]
        new.value[lo + shift:hi + shift] = store.value[lo:hi]
        docs = slice(b * DOC_BLOCK, min(n_docs, (b + 1) * DOC_BLOCK))
        new.doc_start[docs] += shift
    return new, over


def as_dense(field) -> np.ndarray:
    """A position field as a dense (P, K) numpy array (a store's :meth:`~PositionStore.toarray`,
    an array as it is)."""
    return field.toarray() if isinstance(field, PositionStore) else np.asarray(field)


def as_sparse(field):
    """A position field whose background is 0 (m) as a scipy CSR (P, K) matrix of its stored
    entries (a store's compact rows are CSR rows; a dense array is converted), indices sorted."""
    from scipy.sparse import csr_matrix
    if not isinstance(field, PositionStore):
        return csr_matrix(np.asarray(field))
    if field.background != 0:
        raise ValueError(f"a sparse matrix holds a field of background 0, not {field.background}")
    counts, kernel, value = field.to_rows()
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    matrix = csr_matrix((value, kernel.astype(np.int32), indptr), shape=field.shape)
    matrix.sort_indices()
    return matrix


def dense_rows(field, lo: int, hi: int) -> np.ndarray:
    """Positions ``lo:hi`` of a position field as a dense (hi - lo, K) array: what a reader of
    a few positions at a time needs, without the whole dense field."""
    return field.rows(lo, hi) if isinstance(field, PositionStore) else np.asarray(field[lo:hi])


def compare_stores(current: PositionStore, previous: PositionStore) -> np.ndarray:
    """How m moved between two stores of the same documents: int64[6], the fields of
    :data:`CHANGE_FIELDS` (sum |m - previous|, sum m, sum previous,
    positions occupied in both whose dominant kernel -- the first of largest count -- differs,
    positions occupied in both, max m); the NumPy expression it equals is
    :func:`cpgbn.inference.mixing.assignment_change_counts`."""
    return _compare(current.n_kernels, current.doc_positions, *current.arrays(),
                    *previous.arrays())


# ---------------------------------------------------------------------- kernels
@njit(parallel=True, cache=True)
def _count_entries(array, background, pos_count):
    for p in prange(array.shape[0]):
        n = 0
        for k in range(array.shape[1]):
            if array[p, k] != background:
                n += 1
        pos_count[p] = n


def _dense_entries(array, background, pos_count):
    ends = np.cumsum(pos_count, dtype=np.int64)
    kernel = np.empty(int(ends[-1]) if len(ends) else 0, dtype=kernel_index_dtype(array.shape[1]))
    value = np.empty(len(kernel), dtype=array.dtype)
    _fill_entries(array, array.dtype.type(background), ends, kernel, value)
    return kernel, value


@njit(parallel=True, cache=True)
def _fill_entries(array, background, ends, kernel, value):
    for p in prange(array.shape[0]):
        e = ends[p - 1] if p > 0 else 0
        for k in range(array.shape[1]):
            if array[p, k] != background:
                kernel[e] = k
                value[e] = array[p, k]
                e += 1


@njit(parallel=True, cache=True)
def _scatter_entries(doc_positions, doc_start, pos_count, kernel, value, lo, hi, out):
    """Write the entries of positions lo:hi into ``out`` (row p - lo), a document per task."""
    first = np.searchsorted(doc_positions, lo, side="right") - 1
    end = np.searchsorted(doc_positions, hi, side="left")   # documents starting before hi
    for j in prange(first, end):
        e = doc_start[j]
        for p in range(doc_positions[j], min(doc_positions[j + 1], hi)):
            if p < lo:
                e += pos_count[p]
                continue
            for _ in range(pos_count[p]):
                out[p - lo, kernel[e]] = value[e]
                e += 1


@njit(cache=True)
def _pack_entries(doc_start, doc_nnz, kernel, value, kernel_out, value_out):
    e = 0
    for j in range(len(doc_start)):
        for i in range(doc_start[j], doc_start[j] + doc_nnz[j]):
            kernel_out[e] = kernel[i]
            value_out[e] = value[i]
            e += 1


@njit(parallel=True, cache=True)
def _compare(n_kernels, doc_positions, start, nnz, count, kernel, value,
             old_start, old_nnz, old_count, old_kernel, old_value):
    n_docs = len(start)
    n_parts = (n_docs + DOC_BLOCK - 1) // DOC_BLOCK
    sums = np.zeros((n_parts, 6), dtype=np.int64)
    for part in prange(n_parts):
        left = np.zeros(n_kernels, dtype=np.int64)  # the previous counts not yet matched
        moved = now = before = switched = both = largest = 0
        for j in range(part * DOC_BLOCK, min(n_docs, (part + 1) * DOC_BLOCK)):
            e, o = start[j], old_start[j]
            for p in range(doc_positions[j], doc_positions[j + 1]):
                e_end, o_end = e + count[p], o + old_count[p]
                # the dominant kernel is the first of largest count, whatever the entries' order
                old_top, old_best = 0, -1
                for i in range(o, o_end):
                    k, y = np.int64(old_kernel[i]), np.int64(old_value[i])
                    left[k] = y
                    before += y
                    if y > old_top or (y == old_top and k < old_best):
                        old_top, old_best = y, k
                top, best = 0, -1
                for i in range(e, e_end):
                    k, x = np.int64(kernel[i]), np.int64(value[i])
                    moved += abs(x - left[k])
                    left[k] = 0
                    now += x
                    if x > top or (x == top and k < best):
                        top, best = x, k
                for i in range(o, o_end):  # the previous counts where m has none
                    k = np.int64(old_kernel[i])
                    moved += left[k]
                    left[k] = 0
                e, o = e_end, o_end
                largest = max(largest, top)
                if best >= 0 and old_best >= 0:
                    both += 1
                    if best != old_best:
                        switched += 1
        sums[part, 0] = moved
        sums[part, 1] = now
        sums[part, 2] = before
        sums[part, 3] = switched
        sums[part, 4] = both
        sums[part, 5] = largest
    out = np.zeros(6, dtype=np.int64)
    for part in range(n_parts):
        for i in range(5):
            out[i] += sums[part, i]
        out[5] = max(out[5], sums[part, 5])
    return out


# ---------------------------------------------------------------------- checkpoints
#: The suffixes of a stored field's checkpoint arrays: per position, per entry, shared.
POSITION_SUFFIX, ENTRY_SUFFIXES, SHARED_SUFFIX = "_counts", ("_kernels", "_values"), "_background"


def field_arrays(name: str, field) -> dict[str, np.ndarray]:
    """A position field's checkpoint arrays: a store's compact rows (``name_counts`` per
    position, ``name_kernels`` and ``name_values`` per entry, ``name_background``), a dense
    field as the one array ``name``."""
    if field is None:   # a w the chain did not keep
        return {}
    if not isinstance(field, PositionStore):
        return {name: field}
    counts, kernel, value = field.to_rows()
    return {name + POSITION_SUFFIX: counts, name + ENTRY_SUFFIXES[0]: kernel,
            name + ENTRY_SUFFIXES[1]: value,
            name + SHARED_SUFFIX: np.array(field.background, dtype=np.float64)}


def field_from_arrays(name: str, arrays: dict, doc_positions: np.ndarray, n_kernels: int):
    """The field :func:`field_arrays` saved: a store, or the dense array of a dense one (the
    PyTorch backend's, or a checkpoint written before the stores)."""
    if name in arrays:
        return arrays[name]
    if name + POSITION_SUFFIX not in arrays:
        return None
    return PositionStore.from_rows(doc_positions, n_kernels,
                                   float(arrays[name + SHARED_SUFFIX]),
                                   arrays[name + POSITION_SUFFIX],
                                   arrays[name + ENTRY_SUFFIXES[0]],
                                   arrays[name + ENTRY_SUFFIXES[1]])
