"""How a corpus is split over the workers of a data-parallel Gibbs chain.

Worker ``rank`` of ``world_size`` holds the documents with global ids ``start .. stop - 1``
(:func:`shard_range`): consecutive whole blocks of the sampler's random-stream block (the
numba backend's :data:`DOC_BLOCK` documents; the PyTorch backend's blocks are larger
multiples of it), as many blocks per worker as an even split gives, in rank order.  A shard
starts at a multiple of the block, so its sampler
(``GibbsSampler(shard, ..., first_doc=start)``) numbers its streams as the whole corpus
does, and its documents draw what they draw in one process; the statistics summed over the
workers are then the whole corpus' (:class:`~cpgbn.inference.updates.DistributedGlobalUpdate`).
The layout is a function of (n_docs, world_size, block) alone: a file is split by line
ranges with it, each worker reading only its lines.
"""

from __future__ import annotations

from ..blocks import DOC_BLOCK
from ..errors import CPGBNInputError

__all__ = ["DOC_BLOCK", "shard_range"]


def shard_range(n_docs: int, rank: int, world_size: int,
                block: int = DOC_BLOCK) -> tuple[int, int]:
    """(start, stop): the global ids of worker ``rank``'s documents (module docstring), in
    whole blocks of ``block`` documents (the sampler's random-stream block: numba's
    :data:`DOC_BLOCK`, or the PyTorch backend's larger one).

    Blocks are dealt evenly (the first ``n_blocks % world_size`` workers get one more); the
    last block may be short.  Every worker needs one block at least, so a corpus of N
    documents runs on at most ceil(N / block) workers.
    """
    n_docs, rank, world_size, block = int(n_docs), int(rank), int(world_size), int(block)
    if world_size < 1 or not 0 <= rank < world_size:
        raise CPGBNInputError(f"rank must be in [0, world_size), got rank {rank} of "
                              f"{world_size}")
    n_blocks = -(-n_docs // block)
    if n_blocks < world_size:
        raise CPGBNInputError(f"a corpus of {n_docs} documents splits into {n_blocks} "
                              f"block(s) of {block}, fewer than the {world_size} "
                              f"workers: use at most {max(n_blocks, 1)} worker(s)")
    per, extra = divmod(n_blocks, world_size)
    first = rank * per + min(rank, extra)
    last = first + per + (rank < extra)
    return first * block, min(last * block, n_docs)
