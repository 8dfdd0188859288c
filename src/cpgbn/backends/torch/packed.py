"""A minibatch of documents as flat tensors: the ragged layout of :class:`ConvData` on a device.

The encoder (:mod:`cpgbn.backends.torch.encoder`) and the loss (:mod:`cpgbn.backends.torch.elbo`)
read documents of different lengths in one batch without padding them to a common length:
cells (the non-zero entries x_jvl of the V x L_j matrices X_j) and positions (the S_j =
L_j - F + 1 placements of a kernel in document j) are stored one after the other, with offsets,
exactly as :mod:`cpgbn.layers.cells` lays them out for the Gibbs kernels.  Everything a
position or a cell needs from its neighbours is precomputed here as an index into the flat
arrays, with the sentinel index P (the number of positions) standing for "outside the
document": callers append one zero row to a (P, K) tensor and gather.  Every per-document
result therefore depends only on that document's own rows, whatever else is in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...errors import CPGBNInputError
from ...layers.batches import subset_cells
from ...layers.cells import (BERNOULLI_POISSON, FIXED_COUNT, OBSERVED_COUNT, ConvData,
                             from_token_sequences)

__all__ = ["PackedDocuments", "pack", "pack_tokens", "segment_sum", "gather_rows"]


@dataclass(frozen=True)
class PackedDocuments:
    """B documents on one device (C cells, P = sum_j S_j positions, F = filter width).

    Attributes
    ----------
    cell_word : int64 (C,)
        Vocabulary id v of each cell.
    cell_input : float32 (C,)
        The entry x_jvl the encoder sees: 1 for text (the one-hot X_j), the observed count in
        ``OBSERVED_COUNT`` mode (bag-of-words).
    cell_units : float64 (C,)
        The count n of each cell in the likelihood's count modes (the pseudo-count in
        ``FIXED_COUNT`` mode, the observed count in ``OBSERVED_COUNT`` mode); unused (ones) for
        the Bernoulli-Poisson link.
    cell_doc : int64 (C,)
        Document (0..B-1, in batch order) of each cell.
    cell_positions : int64 (C, F)
        cell_positions[c, f] = the flat position p of s = l - f in the cell's document (the
        placement whose filter row f covers column l), or the sentinel P when s is not one of
        the document's positions.  The cell's rate is sum_{f,k} w[p, k] d_{k,v,f}.
    bag_rows, bag_weights, bag_offsets : int64 (E,), float32 (E,), int64 (P,)
        The same (cell, f) pairs grouped by position, for ``embedding_bag``: position p sums
        the rows ``bag_rows[bag_offsets[p]:bag_offsets[p + 1]]`` (row v F + f of a (V F, K)
        table: filter row f of word v) times ``bag_weights`` (the cells' x).  The pairs of
        the sentinel are left out.
    doc_positions : int64 (B + 1,)
        Positions of document j are ``doc_positions[j]:doc_positions[j + 1]``.
    n_positions : int64 (B,)
        S_j.
    position_doc : int64 (P,)
        Document of each position.
    position_window : int64 (P, F)
        position_window[p, o] = the flat position s + o - (F - 1) // 2 of the same document
        (s the local index of p), or the sentinel P outside the document: the F-wide window of
        the convolution over the zero-padded H (paper: C_2 * pad(H)), padded by (F - 1) // 2
        on the left and the rest on the right, so pad(H) has L_j = S_j + F - 1 columns.
    filter_width : int
        F.
    mode, fixed_count : int
        The observation model of :class:`~cpgbn.layers.cells.ConvData`.
    """

    cell_word: torch.Tensor
    cell_input: torch.Tensor
    cell_units: torch.Tensor
    cell_doc: torch.Tensor
    cell_positions: torch.Tensor
    bag_rows: torch.Tensor
    bag_weights: torch.Tensor
    bag_offsets: torch.Tensor
    doc_positions: torch.Tensor
    n_positions: torch.Tensor
    position_doc: torch.Tensor
    position_window: torch.Tensor
    filter_width: int
    mode: int
    fixed_count: int

    @property
    def n_docs(self) -> int:
        return len(self.n_positions)

    @property
    def n_total_positions(self) -> int:
        """P = sum_j S_j (also the sentinel index)."""
        return len(self.position_doc)

    @property
    def n_cells(self) -> int:
        return len(self.cell_word)

    @property
    def device(self) -> torch.device:
        return self.cell_word.device


def segment_sum(values: torch.Tensor, segment: torch.Tensor, n_segments: int) -> torch.Tensor:
    """Rows of ``values`` summed by segment: out[i] = sum of values[r] with segment[r] = i
    (e.g. positions -> documents with ``position_doc``), shape (n_segments, ...)."""
    out = values.new_zeros((n_segments,) + tuple(values.shape[1:]))
    return out.index_add_(0, segment, values)


def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for an integer ``index`` of any shape: rows of ``table`` (n, ...),
    shape ``index.shape + table.shape[1:]`` (e.g. a position's F-window, a cell's F positions,
    a position's document).

    Through ``index_select``, because of its gradient: torch adds the rows of the incoming
    gradient into the table's by ``index_add_``, which on the CPU sums each row's
    contributions in index order, so the gradient is the same, bit for bit, on every run and
    for any thread count.  ``table[index]`` gives the same values, but its gradient
    (``index_put_`` with accumulate) adds with atomic float additions from all threads, in an
    order that changes from run to run (torch's own list of nondeterministic operations says
    so): two hybrid fits with one seed ended with encoder weights 1e-5 apart.  It is faster
    too (2 threads, a batch of 100 reviews of 250 words, K_1 = 200: forward and backward of the
    windows' gather 89 ms against 112 ms, of the cells' 81 ms against 119 ms)."""
    rows = table.index_select(0, index.reshape(-1))
    return rows.view(tuple(index.shape) + tuple(table.shape[1:]))


def _bags(cell_positions: np.ndarray, cell_word: np.ndarray, cell_input: np.ndarray, P: int):
    """The (cell, f) pairs of ``cell_positions`` grouped by position (PackedDocuments'
    bag_rows, bag_weights, bag_offsets).  A stable sort keeps each position's pairs in cell
    order."""
    F = cell_positions.shape[1]
    flat = cell_positions.reshape(-1)
    pairs = np.flatnonzero(flat < P)
    pairs = pairs[np.argsort(flat[pairs], kind="stable")]
    cell, f = np.divmod(pairs, F)
    rows = np.asarray(cell_word, dtype=np.int64)[cell] * F + f
    counts = np.bincount(flat[pairs], minlength=P)
    offsets = np.cumsum(counts) - counts
    return rows, np.asarray(cell_input, dtype=np.float64)[cell], offsets.astype(np.int64)


def pack(data: ConvData, docs=None, device="cpu") -> PackedDocuments:
    """The documents ``docs`` of ``data`` (all when None) as a :class:`PackedDocuments`."""
    if docs is not None:
        data = subset_cells(data, docs)
    if data.mode not in (BERNOULLI_POISSON, FIXED_COUNT, OBSERVED_COUNT):
        raise CPGBNInputError(f"unknown ConvData mode {data.mode!r}")
    F = int(data.filter_width)
    positions = np.asarray(data.doc_positions, dtype=np.int64)
    n_pos = np.diff(positions)
    P = int(positions[-1])
    n_docs = len(n_pos)
    cells = np.asarray(data.doc_cells, dtype=np.int64)
    cell_doc = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(cells))
    col = np.asarray(data.cell_col, dtype=np.int64)
    s = col[:, None] - np.arange(F, dtype=np.int64)[None, :]
    valid = (s >= 0) & (s < n_pos[cell_doc][:, None])
    cell_positions = np.where(valid, positions[cell_doc][:, None] + s, P)
    position_doc = np.repeat(np.arange(n_docs, dtype=np.int64), n_pos)
    local = np.arange(P, dtype=np.int64) - positions[position_doc]
    t = local[:, None] + np.arange(F, dtype=np.int64)[None, :] - (F - 1) // 2
    inside = (t >= 0) & (t < n_pos[position_doc][:, None])
    position_window = np.where(inside, positions[position_doc][:, None] + t, P)
    if data.mode == OBSERVED_COUNT:
        units = np.asarray(data.cell_count, dtype=np.float64)
        cell_input = units
    else:
        cell_input = np.ones(len(col))
        units = np.full(len(col), float(data.fixed_count) if data.mode == FIXED_COUNT else 1.0)
    bag_rows, bag_weights, bag_offsets = _bags(cell_positions, np.asarray(data.cell_word),
                                               cell_input, P)
    dev = torch.device(device)

    def as_long(a):
        return torch.as_tensor(np.ascontiguousarray(a, dtype=np.int64), device=dev)

    return PackedDocuments(
        cell_word=as_long(data.cell_word),
        cell_input=torch.as_tensor(cell_input, dtype=torch.float32, device=dev),
        cell_units=torch.as_tensor(units, dtype=torch.float64, device=dev),
        cell_doc=as_long(cell_doc),
        cell_positions=as_long(cell_positions),
        bag_rows=as_long(bag_rows),
        bag_weights=torch.as_tensor(bag_weights, dtype=torch.float32, device=dev),
        bag_offsets=as_long(bag_offsets),
        doc_positions=as_long(positions),
        n_positions=as_long(n_pos),
        position_doc=as_long(position_doc),
        position_window=as_long(position_window),
        filter_width=F, mode=int(data.mode), fixed_count=int(data.fixed_count))


def pack_tokens(tokens, offsets, filter_width: int, *, token_count="bernoulli-poisson",
                padding: int = 0, device="cpu") -> PackedDocuments:
    """Text documents in the corpus layout (flat token ids, offsets; see
    :class:`cpgbn.text.corpus.Corpus`) as a :class:`PackedDocuments`, through
    :func:`cpgbn.layers.cells.from_token_sequences` (short documents padded to F columns,
    ``padding`` empty columns at both edges)."""
    return pack(from_token_sequences(np.asarray(tokens), np.asarray(offsets), filter_width,
                                     token_count=token_count, padding=padding), device=device)
