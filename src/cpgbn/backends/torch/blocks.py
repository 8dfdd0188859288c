"""The documents of a PyTorch backend cut into random-stream blocks.

The steps that draw per document re-seed the backend's generator for every block, from
(seed, sweep, step, block) with the block numbered globally (a shard's first document has
global id ``first_doc``, a multiple of the block), and draw the block's variates in one go
(:class:`~cpgbn.backends.torch.torch_backend.TorchBackend`).  A block's draws are then a function
of its documents and that key alone: a shard swept apart draws what the whole corpus draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Block", "document_blocks", "Augmented", "concatenated"]


@dataclass(frozen=True)
class Block:
    """One random-stream block: its global number (the streams' key) and its documents,
    positions and cells as slices of the backend's data."""

    index: int
    docs: slice
    positions: slice
    cells: slice


def document_blocks(doc_positions, doc_cells, doc_block: int, first_block: int) -> list[Block]:
    """The blocks of ``doc_block`` documents of cells laid out by ``doc_positions`` and
    ``doc_cells`` (offsets per document, n_docs + 1 each), numbered from ``first_block``; no
    documents give one empty block, so that every step still runs (on nothing) once."""
    positions, cells = np.asarray(doc_positions), np.asarray(doc_cells)
    n_docs = len(positions) - 1
    blocks = []
    for b, lo in enumerate(range(0, max(n_docs, 1), doc_block)):
        hi = min(lo + doc_block, n_docs)
        blocks.append(Block(first_block + b, slice(lo, hi),
                            slice(int(positions[lo]), int(positions[hi])),
                            slice(int(cells[lo]), int(cells[hi]))))
    return blocks


@dataclass
class Augmented:
    """What the augmentation m | w, D fills in, block by block (zeros to start with): the
    counts m (P, K) and A (N, K), the kernel counts n (flat V*F*K, or None when not asked
    for) and the documents' log-likelihoods."""

    m: torch.Tensor
    A: torch.Tensor
    n: torch.Tensor | None
    loglik: torch.Tensor


def concatenated(parts: list) -> torch.Tensor:
    """The blocks' rows stacked (the only block's tensor as it is)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)
