"""Minibatches of documents in the cell layout (:class:`~cpgbn.layers.cells.ConvData`).

Minibatch inference (TLASGR-MCMC with the Weibull encoder, or with local Gibbs sweeps) works on
a few documents of the corpus at a time; :func:`subset_cells` cuts them out of the corpus's
cells, keeping every per-document field, so that a minibatch is an ordinary ConvData.  Numpy
only: the numba and the PyTorch paths both use it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import CPGBNInputError
from .cells import OBSERVED_COUNT, ConvData

__all__ = ["subset_cells", "restrict_vocabulary"]


def subset_cells(data: ConvData, docs) -> ConvData:
    """The documents ``docs`` of ``data`` (in that order, repeats allowed), as a ConvData.

    Equals the ConvData built from those documents alone (same observation model, filter
    width and edge padding); cells, lengths and positions get new offsets.
    """
    docs = np.asarray(docs)
    if docs.ndim != 1 or (docs.size and not np.issubdtype(docs.dtype, np.integer)):
        raise CPGBNInputError("docs must be a 1-D array of document indices")
    docs = docs.astype(np.int64)
    if docs.size and (docs.min() < 0 or docs.max() >= data.n_docs):
        raise CPGBNInputError(f"document index out of range for {data.n_docs} documents")
    cells = np.asarray(data.doc_cells, dtype=np.int64)
    n_cells = cells[docs + 1] - cells[docs]
    doc_cells = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(n_cells, out=doc_cells[1:])
    take = np.arange(doc_cells[-1], dtype=np.int64) + np.repeat(cells[docs] - doc_cells[:-1],
                                                                n_cells)
    lengths = np.asarray(data.doc_length, dtype=np.int64)[docs]
    positions = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(lengths - data.filter_width + 1, out=positions[1:])
    counts = data.cell_count[take] if data.mode == OBSERVED_COUNT else data.cell_count
    return ConvData(
        cell_word=data.cell_word[take], cell_col=data.cell_col[take], cell_count=counts,
        doc_cells=doc_cells, doc_length=lengths, doc_positions=positions,
        filter_width=data.filter_width, mode=data.mode, fixed_count=data.fixed_count,
        true_length=np.asarray(data.true_length, dtype=np.int64)[docs], padding=data.padding)


def restrict_vocabulary(data: ConvData) -> tuple[np.ndarray, ConvData]:
    """(words, local): the distinct vocabulary ids of ``data``'s cells, sorted, and the same
    documents with every cell's word renumbered to its index in ``words``.

    Given the kernels, a document's local conditionals read only the rows D[v] of its own
    words, so a minibatch can be swept against ``D[words]`` (U rows instead of V): the kernel
    counts it returns are then the rows ``words`` of the (V, F, K_1) counts, all others zero.
    For a batch of 100 IMDB reviews U is about a fifth of V = 30,000, and the per-sweep work
    that scales with the kernels' size (count slabs, row sums) shrinks with it.
    """
    words, local = np.unique(np.asarray(data.cell_word), return_inverse=True)
    return words, replace(data, cell_word=local.astype(np.asarray(data.cell_word).dtype))
