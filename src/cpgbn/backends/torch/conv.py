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
           "draw_w_rows", "split_theta", "draw_w_split_rows", "kernel_sums", "augment_rows",
           "position_tables", "dirichlet_kernels"]

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


def kernel_sums(D: torch.Tensor) -> torch.Tensor:
    """sum_k D[v, f, k] in float64, (V, F): the weight of a (word, column) pair's floor
    bucket per unit of the floor (:func:`augment_rows`), computed once per sweep."""
    return D.to(F64).sum(dim=2)


def augment_rows(cells: DeviceCells, random: TorchRandom, lo: int, docs: slice, D: torch.Tensor,
                 w_rows: torch.Tensor, theta: torch.Tensor, m_rows: torch.Tensor,
                 A: torch.Tensor, n: torch.Tensor | None, loglik: torch.Tensor,
                 split_units, D_sums: torch.Tensor) -> None:
    """m | w, D for every cell of the whole documents ``docs`` (their positions from ``lo``;
    ``w_rows``: their weights): the counts added into ``m_rows`` (zeros there), ``A`` and the
    kernel counts ``n`` (flat V*F*K, or None), the documents' log-likelihoods written into
    ``loglik``.

    A cell (v, column) splits its units (a zero-truncated Poisson under Bernoulli-Poisson,
    else its count) over the candidates (f, k) of its window, with weights w_{s k} D[v, f, k]
    (s = column - f).  Most w sit at the floor, so the weights are taken apart as the numba
    backend takes them (docs/sampler.md, "Sparse augmentation"): (w - FLOOR) D over the live
    candidates (w above the floor), plus one floor bucket FLOOR sum_{f valid} sum_k D[v, f, k]
    (``D_sums``: :func:`kernel_sums`, once per sweep).  The units go to the live candidates
    and the bucket by one multinomial, and the bucket's units to every valid (f, k) in
    proportion to D[v, f, k]: the same law as one multinomial over all K x F candidates,
    with work and memory in proportion to the live candidates (a row of (cells, most live
    candidates of the chunk) weights, never cells x F x K).  Both splits go through
    ``split_units(cumulative weights, units)`` -> (rows, columns, amounts): the backend's
    multinomial, which a study may replace."""
    device = random.device
    V, F, K = D.shape
    m, A_flat = m_rows.reshape(-1), A.reshape(-1)
    cell_lls = []
    f_range = torch.arange(F, device=device)
    c_lo, c_hi = int(cells.cell_starts[docs.start]), int(cells.cell_starts[docs.stop])
    if c_hi == c_lo:
        loglik[docs] = -theta[docs].sum(dim=1)
        return
    # the positions' live kernels (row-major) and their excess over the floor
    live = w_rows > FLOOR
    n_live = live.sum(dim=1)
    first_live = torch.cumsum(n_live, 0) - n_live
    _, live_kernel = live.nonzero(as_tuple=True)
    excess = w_rows[live].to(F64) - FLOOR
    del live
    # every cell's window: its rows (positions from lo) and live candidates per filter column
    doc = cells.cell_doc[c_lo:c_hi]
    s = cells.cell_col[c_lo:c_hi, None] - f_range[None, :]               # (C, F)
    valid = (s >= 0) & (s < cells.S[doc][:, None])
    window = torch.where(valid, cells.p0[doc][:, None] + s - lo, 0)
    n_window = torch.where(valid, n_live[window], 0)                      # (C, F)
    width = int(n_window.sum(dim=1).max()) + 1                            # + the floor bucket
    step = max(1, random.max_elements // width)
    for a_lo in range(0, c_hi - c_lo, step):
        a_hi = min(c_hi - c_lo, a_lo + step)
        C = a_hi - a_lo
        word = cells.cell_word[c_lo + a_lo:c_lo + a_hi]
        rows, lengths = window[a_lo:a_hi], n_window[a_lo:a_hi]
        # the chunk's live candidates, cell by cell, f by f, kernels increasing
        flat_lengths = lengths.reshape(-1)
        pair = torch.repeat_interleave(torch.arange(C * F, device=device), flat_lengths)
        pair_first = torch.cumsum(flat_lengths, 0) - flat_lengths
        offset = torch.arange(pair.numel(), device=device) - pair_first[pair]
        entry = first_live[rows.reshape(-1)[pair]] + offset
        cell = torch.div(pair, F, rounding_mode="floor")
        f = pair - cell * F
        k = live_kernel[entry]
        slot = (torch.cumsum(lengths, 1) - lengths).reshape(-1)[pair] + offset
        del pair, pair_first, offset
        weights = torch.zeros((C, width), dtype=F64, device=device)
        weights[cell, slot] = excess[entry] * D[word[cell], f, k].to(F64)
        weights[:, -1] = FLOOR * torch.where(valid[a_lo:a_hi], D_sums[word[:, None], f_range],
                                             0.0).sum(dim=1)
        candidate = torch.zeros((C, width), dtype=I64, device=device)
        candidate[cell, slot] = f * K + k
        del cell, slot, entry, f, k
        cum = torch.cumsum(weights, dim=1)
        del weights
        lam = cum[:, -1]
        if cells.mode == BERNOULLI_POISSON:
            units = random.zero_truncated_poisson(lam)
            cell_ll = torch.log(-torch.expm1(-lam)) + lam
        else:
            if cells.mode == FIXED_COUNT:
                units = torch.full((C,), cells.fixed_count, dtype=I64, device=device)
            else:
                units = cells.cell_count[c_lo + a_lo:c_lo + a_hi]
            uf = units.to(F64)
            cell_ll = uf * torch.log(lam) - torch.lgamma(uf + 1.0)
        cell_lls.append(cell_ll)
        r_u, s_u, amount = split_units(cum, units)
        del cum
        in_bucket = s_u == width - 1
        if bool(in_bucket.any()):
            r_b, a_b = r_u[in_bucket], amount[in_bucket]
            kept = ~in_bucket
            r_u, c_u, amount = r_u[kept], candidate[r_u[kept], s_u[kept]], amount[kept]
            r_f, c_f, a_f = _spread_floor_units(random, D, valid[a_lo:a_hi], word, r_b, a_b,
                                                split_units)
            r_u, c_u = torch.cat([r_u, r_f]), torch.cat([c_u, c_f])
            amount = torch.cat([amount, a_f])
        else:
            c_u = candidate[r_u, s_u]
        del candidate
        f_u = torch.div(c_u, K, rounding_mode="floor")
        k_u = c_u - f_u * K
        r_c = c_lo + a_lo + r_u
        d_u = cells.cell_doc[r_c]
        # m and A may be narrower than the kernel counts n (int32 against int64)
        m.index_add_(0, (cells.p0[d_u] + cells.cell_col[r_c] - f_u - lo) * K + k_u,
                     amount.to(m.dtype))
        A_flat.index_add_(0, d_u * K + k_u, amount.to(A_flat.dtype))
        if n is not None:
            n.index_add_(0, cells.cell_word[r_c] * (F * K) + c_u, amount.to(n.dtype))
    loglik[docs] = segment_sums_after(
        -theta[docs].sum(dim=1), torch.cat(cell_lls), doc - docs.start, cells.doc_n_cells[docs])


def _spread_floor_units(random: TorchRandom, D: torch.Tensor, valid: torch.Tensor,
                        word: torch.Tensor, rows: torch.Tensor, units: torch.Tensor,
                        split_units):
    """The floor bucket's units of the cells ``rows`` (of a chunk: their words ``word[rows]``,
    valid columns ``valid[rows]``) split over every valid (f, k) in proportion to
    D[v, f, k]: (rows, candidates f * K + k, amounts), a few cells at a time."""
    V, F, K = D.shape
    out_rows, out_cols, out_amounts = [], [], []
    step = max(1, random.max_elements // (F * K))
    for lo in range(0, rows.numel(), step):
        r = rows[lo:lo + step]
        weights = torch.where(valid[r][:, :, None], D[word[r]].to(F64), 0.0)
        cum = torch.cumsum(weights.reshape(r.numel(), F * K), dim=1)
        del weights
        r_u, c_u, amount = split_units(cum, units[lo:lo + step])
        out_rows.append(r[r_u])
        out_cols.append(c_u)
        out_amounts.append(amount)
    return torch.cat(out_rows), torch.cat(out_cols), torch.cat(out_amounts)


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
