"""The first (convolutional) layer's per-document draws of the PyTorch Gibbs sweep, block by
block: w | m, a, c^(2) (tied or free positional pooling), the augmentation m | w, D, the
pooling tables, and D | n.  The counterpart of :mod:`cpgbn.backends.numba.conv` and
:mod:`cpgbn.backends.numba.weights`, vectorised over the cells, positions and documents of one
random-stream block (:mod:`cpgbn.backends.torch.blocks`), with temporaries in chunks of at
most ``random.max_elements`` float64 entries.

Pure functions over the corpus' tensors on the device (:class:`DeviceCells`) and a
:class:`~cpgbn.backends.torch.random.TorchRandom` already keyed to the step and block; the
order of the steps and the keys are :class:`~cpgbn.backends.torch.torch_backend.TorchBackend`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import CPGBNInputError
from ...layers.cells import BERNOULLI_POISSON, FIXED_COUNT, OBSERVED_COUNT
from ..numba.conv import FLOOR as FLOOR32
from ..numba.gbn import TINY
from .blocks import Block, document_blocks
from .position_field import DeviceField
from .random import TorchRandom

__all__ = ["FLOOR", "DeviceCells", "segment_sums", "segment_sums_after", "position_rows",
           "draw_w_rows", "split_theta", "draw_w_split_rows", "augment_rows", "position_tables",
           "dirichlet_kernels"]

F64 = torch.float64
F32 = torch.float32
I64 = torch.int64

#: The float32 floor of w and D, as the float64 number it compares equal to (numba compares
#: float64 values with the float32 constant promoted to float64).
FLOOR = float(FLOOR32)
_LOG_FLOOR = math.log(FLOOR)
#: Shapes below this use the floor-aware draw for positions without counts (as numba's conv).
_FAST_SHAPE = 0.1


@dataclass(frozen=True)
class DeviceCells:
    """A ConvData's layout on the device: S_j, each position's and cell's document, each
    cell's word and column (and observed count), and the random-stream blocks.  The
    documents' position offsets stay on the host (chunks of whole documents are cut there)."""

    mode: int
    fixed_count: int
    n_docs: int
    n_positions: int
    n_cells: int
    positions: np.ndarray             # (N + 1,) int64, host
    cell_starts: np.ndarray           # (N + 1,) int64, host: each document's first cell
    S: torch.Tensor                   # (N,) positions per document
    p0: torch.Tensor                  # (N,) each document's first position
    pos_doc: torch.Tensor             # (P,) each position's document
    cell_doc: torch.Tensor            # (C,)
    cell_word: torch.Tensor           # (C,)
    cell_col: torch.Tensor            # (C,) the cell's column (position + f)
    cell_count: torch.Tensor | None   # (C,) observed counts, or None
    doc_n_cells: torch.Tensor         # (N,) cells per document
    blocks: list[Block]

    @classmethod
    def upload(cls, data, device: torch.device, doc_block: int, first_block: int):
        if data.mode not in (OBSERVED_COUNT, BERNOULLI_POISSON, FIXED_COUNT):
            raise CPGBNInputError(f"unknown ConvData mode {data.mode!r}")
        n_docs = data.n_docs
        positions = np.asarray(data.doc_positions, dtype=np.int64)
        S = np.diff(positions)
        cells = np.asarray(data.doc_cells, dtype=np.int64)

        def tensor(array):
            return torch.tensor(np.asarray(array, dtype=np.int64), dtype=I64, device=device)
        return cls(
            mode=data.mode, fixed_count=int(data.fixed_count),
            n_docs=n_docs, n_positions=data.n_positions, n_cells=data.n_cells,
            positions=positions, cell_starts=cells, S=tensor(S), p0=tensor(positions[:-1]),
            pos_doc=tensor(np.repeat(np.arange(n_docs), S)),
            cell_doc=tensor(np.repeat(np.arange(n_docs), np.diff(cells))),
            cell_word=tensor(data.cell_word), cell_col=tensor(data.cell_col),
            cell_count=tensor(data.cell_count) if data.mode == OBSERVED_COUNT else None,
            doc_n_cells=tensor(np.diff(cells)),
            blocks=document_blocks(positions, cells, doc_block, first_block))

    def whole(self) -> Block:
        """Every document as one block (its number unused)."""
        return Block(0, slice(0, self.n_docs), slice(0, self.n_positions),
                     slice(0, self.n_cells))


def segment_sums(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Rows of ``values`` summed over consecutive segments of ``lengths`` rows, each from 0:
    left to right on the CPU, the order (and bits) of ``index_add_`` there.  On a GPU,
    ``index_add_`` adds floats atomically, in an order that may change from run to run;
    torch's segment_reduce reduces each segment without atomics (that a GPU's repeat gives
    the same bits is tested where a GPU exists: tests/test_torch_backend.py)."""
    if values.shape[0] == 0:   # torch refuses to reduce nothing
        return values.new_zeros((lengths.shape[0],) + tuple(values.shape[1:]))
    return torch.segment_reduce(values, "sum", lengths=lengths, axis=0)


def segment_sums_after(first: torch.Tensor, values: torch.Tensor, segment: torch.Tensor,
                       lengths: torch.Tensor) -> torch.Tensor:
    """(((first_j + v_1) + v_2) + ...) over the 1-D ``values`` of each segment j
    (``segment``: the sorted segment of each value, from 0; ``lengths``: values per segment):
    what ``first.index_add_(0, segment, values)`` gives on the CPU, in a fixed order on a
    GPU too.  Each segment's first term is put before its values and the whole summed
    from 0."""
    n_values, n_segments = values.shape[0], first.shape[0]
    starts = torch.cumsum(lengths, 0) - lengths          # integers: exact on any device
    laid = torch.empty(n_values + n_segments, dtype=values.dtype, device=values.device)
    laid[starts + torch.arange(n_segments, device=values.device)] = first
    laid[torch.arange(n_values, device=values.device) + segment + 1] = values
    return segment_sums(laid, lengths + 1)


def position_chunks(K: int, positions: slice, max_elements: int):
    """(start, end) of runs of at most ``max_elements`` / K of the ``positions``."""
    step = max(1, max_elements // max(K, 1))
    for start in range(positions.start, positions.stop, step):
        yield start, min(positions.stop, start + step)


def document_chunks(cells: DeviceCells, K: int, docs: slice, max_elements: int):
    """(first position, end position, first document, end document) of runs of whole
    documents of ``docs`` with at most ``max_elements`` / K positions (or one longer
    document)."""
    positions, d_end = cells.positions, docs.stop
    step = max(1, max_elements // max(K, 1))
    d_lo = docs.start
    while d_lo < d_end:
        d_hi = int(np.searchsorted(positions, positions[d_lo] + step, side="right")) - 1
        d_hi = min(max(d_hi, d_lo + 1), d_end)
        yield int(positions[d_lo]), int(positions[d_hi]), d_lo, d_hi
        d_lo = d_hi


def position_rows(field, lo: int, hi: int) -> torch.Tensor:
    """Positions ``lo:hi`` of a position field (a :class:`~cpgbn.backends.torch.position_field.
    DeviceField`, or a dense (P, K) tensor such as the hybrid's encoder draws) as a dense
    (hi - lo, K) tensor."""
    return field.rows(lo, hi) if isinstance(field, DeviceField) else field[lo:hi]


def draw_w_rows(cells: DeviceCells, random: TorchRandom, lo: int, hi: int, docs: slice,
                m_rows: torch.Tensor, c2: torch.Tensor, prior_shape: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """w_jks ~ Gam(m_jks + a_jk / S_j, 1 / (1 + c_j)) (the paper's tied pooling; ``c2`` is
    c^(2)), floored, for the positions ``lo:hi`` of the whole documents ``docs`` (``m_rows``:
    their counts): (w float32 (hi - lo, K), theta^(1) = sum_s w of the documents).  Positions
    without counts and a small shape use the exact floor-aware draw (P(w <= FLOOR) in closed
    form, else a gamma conditioned above the floor).  The draws run in chunks of at most
    ``max_elements`` / K positions (which set the order of the variates)."""
    device = random.device
    K = m_rows.shape[1]
    alpha_doc = prior_shape[docs] / cells.S[docs].to(F64)[:, None]
    log_rate_doc = torch.log(1.0 + c2[docs])
    w = torch.empty((hi - lo, K), dtype=F32, device=device)
    for a_lo, a_hi in position_chunks(K, slice(lo, hi), random.max_elements):
        doc = cells.pos_doc[a_lo:a_hi] - docs.start
        alpha = alpha_doc[doc]
        log_rate = log_rate_doc[doc][:, None].expand(-1, K)
        counts = m_rows[a_lo - lo:a_hi - lo]
        fast = (counts == 0) & (alpha < _FAST_SHAPE)
        value = torch.empty(alpha.shape, dtype=F64, device=device)
        gen = (~fast).nonzero(as_tuple=True)
        if gen[0].numel():
            value[gen] = torch.exp(random.log_gamma(counts[gen].to(F64) + alpha[gen])
                                   - log_rate[gen])
        idx = fast.nonzero(as_tuple=True)
        if idx[0].numel():
            a, lr = alpha[idx], log_rate[idx]
            p_floor = torch.exp(a * (_LOG_FLOOR + lr) - torch.lgamma(a + 1.0))
            above = random.uniform(a.numel()) >= p_floor
            v = torch.full(a.shape, FLOOR, dtype=F64, device=device)
            sel = above.nonzero(as_tuple=True)[0]
            if sel.numel():
                v[sel] = random.gamma_above(a[sel], _LOG_FLOOR + lr[sel]) * torch.exp(-lr[sel])
            value[idx] = v
        w[a_lo - lo:a_hi - lo] = torch.where(value > FLOOR, value, FLOOR).to(F32)
    return w, segment_sums(w.to(F64), cells.S[docs])


def split_theta(random: TorchRandom, A: torch.Tensor, c2: torch.Tensor,
                prior_shape: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A free positional concentration's theta^(1)_jk ~ Gam(a_jk + A_jk, 1 / (1 + c_j)) of
    one block's documents (A: their counts summed over positions): (log theta^(1), theta^(1)
    floored at TINY)."""
    log_theta = random.log_gamma(prior_shape + A.to(F64)) - torch.log1p(c2)[:, None]
    return log_theta, torch.exp(log_theta).clamp_min(TINY)


def draw_w_split_rows(cells: DeviceCells, random: TorchRandom, lo: int, hi: int, docs: slice,
                      m_rows: torch.Tensor, log_theta: torch.Tensor, beta: float
                      ) -> torch.Tensor:
    """pi_jk ~ Dir(beta + m_jk1, ..., beta + m_jkS) as normalised log-gamma variates and
    w = theta^(1) pi floored (numba: weights.draw_document_split) for the positions ``lo:hi``
    of the whole documents ``docs`` (``log_theta``: their rows of :func:`split_theta`)."""
    device = random.device
    K = m_rows.shape[1]
    doc = cells.pos_doc[lo:hi] - docs.start
    lg = random.log_gamma(beta + m_rows.to(F64))           # (P_c, K)
    top = torch.full((docs.stop - docs.start, K), -math.inf, dtype=F64, device=device)
    top.scatter_reduce_(0, doc[:, None].expand(-1, K), lg, reduce="amax")
    total = segment_sums(torch.exp(lg - top[doc]), cells.S[docs])
    shift = log_theta - top - torch.log(total)
    live = log_theta > _LOG_FLOOR  # otherwise every w_jks is at the floor
    value = torch.where(live[doc], torch.exp(lg + shift[doc]), 0.0)
    return torch.where(value > FLOOR, value, FLOOR).to(F32)


def augment_rows(cells: DeviceCells, random: TorchRandom, lo: int, docs: slice, D: torch.Tensor,
                 w_rows: torch.Tensor, theta: torch.Tensor, m_rows: torch.Tensor,
                 A: torch.Tensor, n: torch.Tensor | None, loglik: torch.Tensor,
                 split_units) -> None:
    """m | w, D for every cell of the whole documents ``docs`` (their positions from ``lo``;
    ``w_rows``: their weights): the counts added into ``m_rows`` (zeros there), ``A`` and the
    kernel counts ``n`` (flat V*F*K, or None), the documents' log-likelihoods written into
    ``loglik``.  A cell's units (a zero-truncated Poisson under Bernoulli-Poisson, else its
    count) go to the candidates (f, k) by ``split_units(cumulative weights, units)`` ->
    (rows, columns, amounts): the backend's multinomial, which a study may replace."""
    device = random.device
    V, F, K = D.shape
    m, A_flat = m_rows.reshape(-1), A.reshape(-1)
    cell_lls = []
    f_range = torch.arange(F, device=device)
    step = max(1, random.max_elements // (F * K))
    c_lo, c_hi = int(cells.cell_starts[docs.start]), int(cells.cell_starts[docs.stop])
    for a_lo in range(c_lo, c_hi, step):
        a_hi = min(c_hi, a_lo + step)
        doc = cells.cell_doc[a_lo:a_hi]
        word = cells.cell_word[a_lo:a_hi]
        col = cells.cell_col[a_lo:a_hi]
        s = col[:, None] - f_range[None, :]                          # (C, F)
        valid = (s >= 0) & (s < cells.S[doc][:, None])
        rows = torch.where(valid, cells.p0[doc][:, None] + s - lo, 0)
        weights = w_rows[rows].to(F64) * D[word].to(F64)        # (C, F, K)
        weights = torch.where(valid[:, :, None], weights, 0.0).reshape(a_hi - a_lo, F * K)
        cum = torch.cumsum(weights, dim=1)
        del weights
        lam = cum[:, -1]
        if cells.mode == BERNOULLI_POISSON:
            units = random.zero_truncated_poisson(lam)
            cell_ll = torch.log(-torch.expm1(-lam)) + lam
        else:
            if cells.mode == FIXED_COUNT:
                units = torch.full((a_hi - a_lo,), cells.fixed_count, dtype=I64, device=device)
            else:
                units = cells.cell_count[a_lo:a_hi]
            uf = units.to(F64)
            cell_ll = uf * torch.log(lam) - torch.lgamma(uf + 1.0)
        cell_lls.append(cell_ll)
        r_u, c_u, amount = split_units(cum, units)
        del cum
        f_u = torch.div(c_u, K, rounding_mode="floor")
        k_u = c_u - f_u * K
        d_u = doc[r_u]
        # m and A may be narrower than the kernel counts n (int32 against int64)
        m.index_add_(0, (cells.p0[d_u] + col[r_u] - f_u - lo) * K + k_u, amount.to(m.dtype))
        A_flat.index_add_(0, d_u * K + k_u, amount.to(A_flat.dtype))
        if n is not None:
            n.index_add_(0, word[r_u] * (F * K) + c_u, amount.to(n.dtype))
    loglik[docs] = segment_sums_after(
        -theta[docs].sum(dim=1), torch.cat(cell_lls) if cell_lls else theta.new_zeros(0),
        cells.cell_doc[c_lo:c_hi] - docs.start, cells.doc_n_cells[docs])


def position_tables(cells: DeviceCells, random: TorchRandom, m: torch.Tensor,
                    shape: torch.Tensor, block: Block) -> torch.Tensor:
    """tables[j, k] = sum_s CRT(m_jks, max(a_jk / S_j, TINY)) (numba: gbn.position_tables)
    of the documents of ``block`` (m: their positions' rows, dense or a field; shape: their
    rows)."""
    docs, first = block.docs, block.positions.start
    n_docs, K = shape.shape
    a_doc = shape / cells.S[docs].to(F64)[:, None]
    tables = torch.zeros(n_docs * K, dtype=I64, device=random.device)
    for lo, hi in position_chunks(K, block.positions, random.max_elements):
        mm = position_rows(m, lo - first, hi - first)
        p, k = (mm > 0).nonzero(as_tuple=True)
        if p.numel() == 0:
            continue
        doc = cells.pos_doc[lo:hi][p] - docs.start
        t = random.crt(mm[p, k], a_doc[doc, k].clamp_min(TINY))
        tables.index_add_(0, doc * K + k, t)
    return tables.reshape(n_docs, K)


def dirichlet_kernels(random: TorchRandom, counts: torch.Tensor, eta: float) -> torch.Tensor:
    """D_k ~ Dir(n_k + eta) over the V*F entries of each kernel, floored, float32: the
    kernels a few at a time (at most ``max_elements`` float64 entries of variates at once, as
    the first layer's temporaries), which sets the order of the variates."""
    V, F, K = counts.shape
    flat = counts.reshape(V * F, K)
    D = torch.empty((V * F, K), dtype=F32, device=counts.device)
    step = max(1, random.max_elements // max(V * F, 1))
    for lo in range(0, K, step):
        hi = min(K, lo + step)
        lg = random.log_gamma(flat[:, lo:hi].to(F64) + eta)
        part = torch.exp(lg - torch.logsumexp(lg, dim=0, keepdim=True))
        D[:, lo:hi] = torch.where(part > FLOOR, part, FLOOR).to(F32)
    return D.reshape(V, F, K)
