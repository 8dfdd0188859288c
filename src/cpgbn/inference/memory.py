"""How much memory a Gibbs run needs, estimated before anything large is allocated.

Bytes for a corpus with N documents, P = sum_j S_j positions, C cells, vocabulary V, filter
width F, layers K_1..K_T and n_threads numba threads:

    positions   2 * P * K_1 * (b + 4) + 8 P        m as two position stores (the one a pass
                                                   reads, the one it writes; the mixing
                                                   diagnostic keeps the old one by reference),
                                                   each at most every (position, kernel) pair:
                                                   b = 1 byte of kernel index while K_1 <= 256,
                                                   2 to 65,536, then 4; int32 counts
    kernels     V * F * K_1 * (4 + 4 * n_threads)  D (float32), per-thread count slabs (int32;
                                                   int64 where a word's units pass 2^31)
              + V * F * K_1 * 8                    running sum of D (training only)
    documents   N * sum_t K_t * 8 * 3              theta, its running sum, shapes/tables
              + N * K_1 * 4 + N * T * 8            A, c
    cells       C * 12                             word, column, count ids

The numba sampler stores w and m sparsely (:mod:`cpgbn.backends.numba.position_store`): the
entries of w above the float32 floor and the non-zero counts, and w of a document only
while the document is in hand (``GibbsSampler.keep_weights``).  The bound above is the
chain's dense start (w = 1, so the first augmentations spread every token over every
candidate: 93% of the pairs hold a count after MR's first one); after a few sweeps m holds
under 1% of the pairs (0.6% on MR).  A sparse start (``sparse_start``: L live kernels per
position, w at the floor elsewhere) holds at most L entries per position in each of the
start's two stores (w's and the first m's: an augmentation places units only where w is
live), and the chain after it fewer (MR and 2,500 IMDB reviews, K_1 = 200, L = 8: at most
2.35 entries per position over the sweeps after the pilot, ``benchmarks/store_occupancy.py``,
docs/speed.md), so its stores are counted at
2 * P * L * (b + 4); a fit's pilot chain (:mod:`cpgbn.inference.pilot`), dense on a sample of
P_pilot positions before it, at 2 * P_pilot * K_1 * (b + 4), the larger of the two.  The
room a store reserves beyond its entries is not resident until written
(:func:`cpgbn.backends.numba.position_store.unwritten`).  Transform (globals fixed) needs neither the count slabs
nor the running sum of D.

The PyTorch sampler (``device`` set) keeps m, and w where it is kept, as sparse fields on
its device too (:mod:`cpgbn.backends.torch.position_field`): per stored entry
:data:`TORCH_ENTRY_BYTES` (the field a sweep reads, the one it writes, the copy a CPU
writer makes when it outgrows its room or a GPU's join of its blocks, and the host's
written-back store), the stored entries counted as for the
numba stores (every pair from the dense start; the sparse start's or the pilot's
otherwise), plus 36 bytes a position (the fields' offsets) and, on the CPU,
:data:`TORCH_TEMPORARIES` float64 temporaries of ``max_elements``; its kernel counts are one
int64 array, not per-thread slabs.  Before the fields (dense w and m on the device, their
next values, the mixing copy, the host's state and its written-back copy: about 34 bytes a
(position, K_1) pair), 2,000 IMDB reviews, K_1 = 200 (527,175 positions), one thread,
peaked at 4.02 GB (``benchmarks/gibbs_memory.py``; the process's peak includes the
interpreter, torch and the texts, 0.45 GB for numba beyond its estimate).  With a GPU the
host holds the written-back store and the GPU the rest, of which
:func:`cpgbn.backends.torch.devices.check_device_memory` checks a lower bound.

The hybrid (:func:`estimate_hybrid_bytes`) never holds all positions' weights: its training
holds the cells, D-sized arrays (D on the host and for torch, the encoder's first table, its
gradient and Adam's two moments, the TLASGR step's temporaries: about 10 of them, float32),
one minibatch's autograd graph (about 40 tensors of ``chunk_positions`` x K_1 floats) and the
training documents' theta^(1..T) and features; its Gibbs refinement runs blocks of
``block_docs`` documents (the transform estimate of one block of average documents).
"""

from __future__ import annotations

import os

from ..errors import MemoryLimitError


#: Bytes per stored entry of the PyTorch sampler's position fields
#: (:class:`~cpgbn.backends.torch.position_field.DeviceField`: an int16 kernel and an int32
#: count), by device type, on the host: on the CPU the field a sweep reads (also the mixing
#: diagnostic's memory), the one it writes and the copy it makes when a sweep outgrows the
#: writer's room (:class:`~cpgbn.backends.torch.position_field.FieldWriter`), and the host's
#: written-back store (:class:`~cpgbn.backends.numba.position_store.PositionStore`: 1-byte
#: kernels while K_1 <= 256); on a GPU the host holds only the written-back store.
TORCH_ENTRY_BYTES = {"cpu": 3 * 6 + 5, "cuda": 5}
#: The largest float64 temporaries of a sweep held at once, in units of ``max_elements``:
#: the w draw's (draw_w_rows and the conditioned gamma hold about 20 chunk-sized arrays at
#: once; 40 IMDB reviews, one sweep: 0.18 GB above the fields at max_elements 2^20 against
#: 2^18), more than the augmentation's live-candidate weights, their sums and index arrays.
TORCH_TEMPORARIES = 20


def estimate_bytes(n_docs: int, n_positions: int, n_cells: int, vocab_size: int, filter_width: int,
                   layers, n_threads: int, training: bool = True,
                   device_type: str | None = None, wide_kernel_counts: bool = False, *,
                   sparse_start: int | None = None, dense_positions: int = 0) -> int:
    """Host bytes of a Gibbs run (module docstring); ``device_type``: None for the numba
    sampler, else the PyTorch sampler's ("cpu", "cuda"); ``wide_kernel_counts``: the numba
    sampler's count slabs are int64 (a word's units could pass 2^31: 8 bytes, not 4).

    ``sparse_start`` (numba): the chain starts sparse with that many live kernels per
    position (a fit after its pilot, inference with fitted kernels), so two stores are
    counted at that many entries per position instead of every pair (module docstring), and
    ``dense_positions``: the positions of the dense pilot chain run before it (its stores at
    every pair; the larger of the two is the bound)."""
    K1 = layers[0]
    if device_type is None:   # positions; D, per-thread count slabs, the running sum of D
        slab = 8 if wide_kernel_counts else 4
        index = 1 if K1 <= 1 << 8 else 2 if K1 <= 1 << 16 else 4
        if sparse_start is None or sparse_start >= K1:
            total = 2 * n_positions * K1 * (index + 4) + 8 * n_positions
        else:
            total = max(2 * n_positions * int(sparse_start) * (index + 4),
                        2 * int(dense_positions) * K1 * (index + 4)) + 8 * n_positions
        total += vocab_size * filter_width * K1 * (4 + (slab * n_threads + 8 if training else 0))
    else:                     # positions; D, the kernel counts (int64), the running sum of D
        from ..backends.torch.devices import MAX_ELEMENTS
        stored = _stored_entries(n_positions, K1, sparse_start, dense_positions)
        total = stored * TORCH_ENTRY_BYTES[device_type] + n_positions * (3 * 8 + 4 + 8)
        if device_type == "cpu":
            total += TORCH_TEMPORARIES * 8 * MAX_ELEMENTS["cpu"]
        total += vocab_size * filter_width * K1 * (4 + (16 if training else 0))
    total += n_docs * sum(layers) * 8 * 3 + n_docs * K1 * 4 + n_docs * len(layers) * 8
    total += n_cells * 12
    return int(total)


def _stored_entries(n_positions: int, n_kernels: int, sparse_start: int | None,
                    dense_positions: int) -> int:
    """The most (position, kernel) entries a chain's position fields store: every pair from
    the dense start, else the larger of the sparse start's live kernels and the pilot's
    dense sample (module docstring)."""
    if sparse_start is None or sparse_start >= n_kernels:
        return n_positions * n_kernels
    return max(n_positions * int(sparse_start), int(dense_positions) * n_kernels)


def estimate_hybrid_bytes(n_docs: int, n_positions: int, n_cells: int, vocab_size: int,
                          filter_width: int, layers, *, chunk_positions: int,
                          refine_block_docs: int = 0) -> int:
    """Bytes of a hybrid fit (module docstring); ``refine_block_docs`` > 0 adds one block of
    Gibbs refinement.  On IMDB's 25k training reviews (200-100-50, V = 30,001) it gives about
    1.2 GB, against a measured peak of 1.86 GB of which 0.4 GB is the interpreter, torch and
    the texts (docs/hybrid.md)."""
    K1 = layers[0]
    total = vocab_size * filter_width * K1 * 4 * 10
    total += chunk_positions * K1 * 4 * 40
    total += n_docs * sum(layers) * 8 * 2 + n_cells * 12
    if refine_block_docs > 0 and n_docs > 0:
        block = min(refine_block_docs, n_docs)
        total += estimate_bytes(block, n_positions * block // n_docs, n_cells * block // n_docs,
                                vocab_size, filter_width, layers, 1, training=False)
    return int(total)


def available_bytes() -> int | None:
    """Memory available to a new allocation (Linux MemAvailable, else free physical pages)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n: int) -> str:
    return f"{n / 2**30:.2f} GB"


def check_memory(needed: int, limit: int | None) -> None:
    """Refuse, with the estimate in the message, a run that cannot fit."""
    if limit is not None and needed > limit:
        raise MemoryLimitError(f"this run needs about {_gb(needed)} of memory, more than "
                              f"memory_limit={_gb(limit)}; use fewer kernels, a smaller vocabulary "
                              "or fewer documents")
    available = available_bytes()
    if available is not None and needed > available:
        raise MemoryLimitError(f"this run needs about {_gb(needed)} of memory but only "
                              f"{_gb(available)} is available; use fewer kernels, a smaller "
                              "vocabulary or fewer documents")
