"""numba kernels of the convolutional layer: per-position weights w, token augmentation, kernels D.

Shapes (paper symbols in brackets):

* ``D``      float32 (V, F, K)  kernels [d_{k,v,f}]; for each k the V*F entries sum to 1.  The
  layout keeps the F x K block of one word contiguous, which is what a token reads.
* ``w``      float32 (P, K)     per-position weights [w_{j,k,s}], P = sum_j S_j (ragged), kept
  as a position store of the entries above the floor
  (:mod:`cpgbn.backends.numba.position_store`) and unpacked, one document at a time, into
  dense rows while the document is in hand.
* ``m``      int32   (P, K)     latent counts per position [m_{j,k,s}], summed over v and f:
  a position store of the non-zero counts, unpacked the same way.
* ``A``      int32   (N, K)     counts per document and kernel [m_{j,k,.,.}].
* ``counts`` int32   (T, V, F, K) counts per kernel entry [n_{k,v,f}], one slab per thread.

Sparsity.  Almost every w_jks is stored at the floor (a draw below FLOOR): on MR about 6% of
the (position, kernel) pairs are above it.  The sweep therefore keeps, for each position of the
document in hand, the list of its kernels above the floor ("heavy"); a cell's candidates are
split into the heavy ones, weighed one by one, and the light ones, whose total weight is
FLOOR * (sum of the cell's D entries minus the heavy ones), from per-row sums of D.  The light
candidates are only listed when the multinomial sends them a unit, which on real text almost
never happens (they weigh about 1e-30 against the heavy candidates' 1e-3 to 1).
Positions without counts are drawn by walking from one above-floor position to the next with
geometric gaps, instead of one uniform per position (:mod:`cpgbn.backends.numba.weights`).  Both are
decompositions of the same laws.

Every parallel loop runs over fixed blocks of documents (or words); block b draws from its
own stream ``(seed, stream, first_block + b)``, so a seed gives the same result for any thread
count, and a shard of a corpus whose first document starts global block ``first_block`` draws
what the whole corpus draws for the same documents.
Integer counts are summed into per-thread slabs (integer addition is order-free) and
floating-point sums go through per-block partials added in block order.
"""

from __future__ import annotations

from math import lgamma

import numba
import numpy as np
from numba import njit, prange

from ...layers.cells import BERNOULLI_POISSON, FIXED_COUNT, OBSERVED_COUNT
from .distributions import (binomial, categorical_cumulative, multinomial_cumulative,
                            zero_truncated_poisson)
from .rng import borrow, seed_state
from .gbn import listed_tables, pooled_tables
from .shared_shape import gamma_counts_shared
from .weights import FLOOR, draw_document_split, draw_document_weights, list_heavy_kernels

__all__ = ["FLOOR", "cell_units", "split_units", "spread_light_units", "kernel_row_sums",
           "sweep_positions", "draw_kernels", "reset_counts"]

#: Below this many units a token's count is split by repeated categorical draws (binary search
#: on the cumulative weights); above it by one multinomial draw in O(K F).
_SMALL_SPLIT = 24


@njit(cache=True, inline="always")
def cell_units(state, mode, lam, fixed_count, log_fixed_factorial, observed):
    """(units, log-likelihood term) of one cell with total rate lambda = ``lam``.

    BERNOULLI_POISSON, the paper's link: units ~ zero-truncated Poisson(lambda), term
    ln(1 - e^-lambda) + lambda (the cell's -lambda is in the document's -sum w); FIXED_COUNT, a
    pseudo-count: ``fixed_count`` units, term n ln lambda - ln n! (``log_fixed_factorial``);
    OBSERVED_COUNT: ``observed`` units, the same term.
    """
    if mode == BERNOULLI_POISSON:
        return zero_truncated_poisson(state, lam), np.log(-np.expm1(-lam)) + lam
    if mode == FIXED_COUNT:
        return np.int64(fixed_count), fixed_count * np.log(lam) - log_fixed_factorial
    return np.int64(observed), observed * np.log(lam) - lgamma(observed + 1.0)


@njit(cache=True)
def split_units(state, n_units, heavy, heavy_cum, n_heavy, light_total, scratch, rest_cum,
                rest_pos, out_idx, out_cnt):
    """The heavy part of Multinomial(n_units, weight_i / lambda) over a cell's candidates; exact.

    ``heavy[0:n_heavy]`` are the candidates above the floor with inclusive cumulative weights
    ``heavy_cum``; the others ("light") weigh ``light_total`` together.  The light group
    receives Binomial(n, light / lambda) units (almost always 0) and the rest are split over
    the heavy candidates only -- the multinomial's own decomposition, so the law is
    unchanged and the work is proportional to the heavy candidates.  Writes (candidate, count)
    pairs to out_idx/out_cnt and returns (pairs written, units left for the light group); the
    caller spreads those with :func:`spread_light_units`.  ``scratch``, ``rest_cum`` and
    ``rest_pos`` are work arrays of at least ``n_heavy`` entries.
    """
    # views without reference counting (see rng.borrow): no atomic operations per call
    state, heavy, heavy_cum = borrow(state), borrow(heavy), borrow(heavy_cum)
    scratch, rest_cum, rest_pos = borrow(scratch), borrow(rest_cum), borrow(rest_pos)
    out_idx, out_cnt = borrow(out_idx), borrow(out_cnt)
    if n_units <= 0:
        return 0, 0
    if n_heavy == 0:
        return 0, n_units
    n_light = 0
    if light_total > 0.0:
        n_light = binomial(state, n_units, light_total / (light_total + heavy_cum[n_heavy - 1]))
    n_out = 0
    n_heavy_units = n_units - n_light
    if n_heavy_units <= _SMALL_SPLIT:
        for _ in range(n_heavy_units):
            out_idx[n_out] = heavy[categorical_cumulative(state, heavy_cum, n_heavy)]
            out_cnt[n_out] = 1
            n_out += 1
    else:
        # the largest candidate first (the multinomial's conditional binomials may come in any
        # order): it usually takes most units, and the few left are split over the others by
        # categorical draws instead of one binomial per candidate
        top, top_weight, previous = 0, 0.0, 0.0
        for h in range(n_heavy):
            weight = heavy_cum[h] - previous
            previous = heavy_cum[h]
            if weight > top_weight:
                top, top_weight = h, weight
        total = heavy_cum[n_heavy - 1]
        n_top = binomial(state, n_heavy_units, top_weight / total) if top_weight < total \
            else n_heavy_units
        if n_top > 0:
            out_idx[n_out] = heavy[top]
            out_cnt[n_out] = n_top
            n_out += 1
        rest = n_heavy_units - n_top
        if rest > 0:
            # cumulative weights of the others, in place of the top one's slot
            running, previous, i = 0.0, 0.0, 0
            for h in range(n_heavy):
                weight = heavy_cum[h] - previous
                previous = heavy_cum[h]
                if h != top:
                    running += weight
                    rest_cum[i] = running
                    rest_pos[i] = heavy[h]
                    i += 1
            multinomial_cumulative(state, rest, rest_cum, n_heavy - 1, scratch)
            for h in range(n_heavy - 1):
                if scratch[h] > 0:
                    out_idx[n_out] = rest_pos[h]
                    out_cnt[n_out] = scratch[h]
                    n_out += 1
    return n_out, n_light


@njit(cache=True)
def spread_light_units(state, n_light, light_cum, light_idx, n_l, out_idx, out_cnt, n_out):
    """Multinomial(n_light) over the light candidates (cumulative weights ``light_cum``),
    appended to the pairs after ``n_out``; returns the new number of pairs.  Rare."""
    # views without reference counting (see rng.borrow): no atomic operations per call
    state, light_cum, light_idx = borrow(state), borrow(light_cum), borrow(light_idx)
    out_idx, out_cnt = borrow(out_idx), borrow(out_cnt)
    counts = np.empty(n_l, dtype=np.int64)
    multinomial_cumulative(state, n_light, light_cum, n_l, counts)
    for i in range(n_l):
        if counts[i] > 0:
            out_idx[n_out] = light_idx[i]
            out_cnt[n_out] = counts[i]
            n_out += 1
    return n_out


@njit(cache=True)
def sample_split(seed, weights, heavy_mask, n_units, reps):
    """reps draws of the heavy/light split as a (reps, len(weights)) count matrix (for tests)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    size = len(weights)
    heavy = np.empty(size, dtype=np.int64)
    heavy_cum = np.empty(size, dtype=np.float64)
    light_idx = np.empty(size, dtype=np.int64)
    light_cum = np.empty(size, dtype=np.float64)
    n_heavy, n_l, running, light = 0, 0, 0.0, 0.0
    for i in range(size):
        if heavy_mask[i]:
            running += weights[i]
            heavy[n_heavy] = i
            heavy_cum[n_heavy] = running
            n_heavy += 1
        else:
            light += weights[i]
            light_idx[n_l] = i
            light_cum[n_l] = light
            n_l += 1
    out = np.zeros((reps, size), dtype=np.int64)
    scratch = np.empty(size, dtype=np.int64)
    rest_cum = np.empty(size, dtype=np.float64)
    rest_pos = np.empty(size, dtype=np.int64)
    out_idx = np.empty(size + n_units, dtype=np.int64)
    out_cnt = np.empty(size + n_units, dtype=np.int64)
    for r in range(reps):
        n, n_light = split_units(state, n_units, heavy, heavy_cum, n_heavy, light, scratch,
                                 rest_cum, rest_pos, out_idx, out_cnt)
        if n_light > 0:
            n = spread_light_units(state, n_light, light_cum, light_idx, n_l, out_idx, out_cnt, n)
        for t in range(n):
            out[r, out_idx[t]] += out_cnt[t]
    return out


@njit(parallel=True, cache=True)
def kernel_row_sums(D, out):
    """out[v, f] = sum_k D[v, f, k] (float64): the light candidates' weights of a cell come from it."""
    n_words, filter_width, n_kernels = D.shape
    for v in prange(n_words):
        for f in range(filter_width):
            total = 0.0
            for k in range(n_kernels):
                total += D[v, f, k]
            out[v, f] = total


@njit(cache=True)
def _light_candidates(w, D, p0, v, col, f_lo, f_hi, light_idx, light_cum):
    """The cell's candidates at the floor, with inclusive cumulative weights; returns (count, total)."""
    # views without reference counting (see rng.borrow): no atomic operations per call
    w, D, light_idx, light_cum = borrow(w), borrow(D), borrow(light_idx), borrow(light_cum)
    n_kernels = D.shape[2]
    n_l = 0
    running = 0.0
    for f in range(f_lo, f_hi + 1):
        row = p0 + col - f
        for k in range(n_kernels):
            if w[row, k] <= FLOOR:
                running += np.float64(w[row, k]) * np.float64(D[v, f, k])
                light_idx[n_l] = (f - f_lo) * n_kernels + k
                light_cum[n_l] = running
                n_l += 1
    return n_l, running


@njit(parallel=True, cache=True)
def sweep_positions(seed, stream, block_size, first_block, blocks, doc_cells, doc_positions,
                    cell_word, cell_col, cell_count, mode, fixed_count, D, D_row_sums,
                    prior_shape, rate, draw_w, augment, store_w, w_in, w_background, m_in, w_out,
                    w_region, m_out, m_region, theta, A, counts, loglik, tables,
                    pooling_concentration, needed):
    """One pass over the documents of ``blocks``: draw w | m, then re-augment every cell m | w, D.

    w and m are position stores (:mod:`cpgbn.backends.numba.position_store`): ``w_in`` and
    ``m_in`` the fields as they are (``PositionStore.arrays()``; ``w_background`` the value of
    w's unstored entries), ``w_out`` and ``m_out`` the stores this pass writes, block b's
    entries from ``w_region[b]`` (``m_region[b]``) on.  A document's rows are unpacked into
    dense per-block rows, drawn there by the same kernels as ever, and packed again, so a
    store changes where the chain's numbers live, not the numbers.  ``needed[b]`` receives the
    entries block b wrote (w, m): where it passes the region, the entries past it are not
    written and the caller writes the block again into a larger one (the block's streams make
    the same draws; give it ``counts`` without slabs then, as they were added already).
    ``store_w=False`` draws w without storing it (each document's w lives while the document
    is in hand: no one reads it before the next pass draws it again).

    For document j (prior shape a_jk, rate 1 + c_j^(2)):

    1. if ``draw_w``: w_jks ~ Gam(m_jks + a_jk / S_j, 1 / rate_j) for every position s and
       kernel k (the pooling prior, paper eq. 3; :func:`draw_document_weights`);
       theta^(1)_jk = sum_s w_jks.  With ``pooling_concentration`` beta > 0 instead
       theta^(1)_jk ~ Gam(a_jk + A_jk, 1 / rate_j), pi_jk ~ Dir(beta + m_jk.) and
       w_jks = theta^(1)_jk pi_jks (:func:`draw_document_split`);
    2. for each cell (v, l): candidates are (f, k) with s = l - f a valid position, weight
       w_jks d_kvf; lambda = sum of weights; the cell's count is zero-truncated Poisson(lambda)
       (Bernoulli-Poisson link), the pseudo-count, or the observed count; it is split over the
       candidates by one multinomial draw and added to m, A and (if ``counts`` has a slab per
       thread) to n_kvf.  Heavy candidates are weighed one by one, the light ones in total:
       FLOOR * (D_row_sums[v, f] - their heavy entries), clamped at 0 (the subtraction
       rounds at 1e-16 of the row sum; when a cell has no heavy candidate its light total is
       summed exactly).
    3. loglik_j = sum over cells of the cell term minus sum_{k,s} w_jks (the rate of all
       other cells, since each kernel sums to 1): ln(1 - e^-lambda) + lambda for the
       Bernoulli-Poisson link, n ln lambda - ln n! for counts.

    4. if ``tables`` has a row per document: the pooling layer's tables
       tables_jk = sum_s CRT(m_jks, a_jk / S_j) of the new counts
       (:func:`cpgbn.backends.numba.gbn.listed_tables` over the counts placed in step 2; the upward
       pass's first step), while the document's rows of m are in cache; with
       ``pooling_concentration`` > 0, tables_jk = CRT(A_jk, a_jk)
       (:func:`cpgbn.backends.numba.gbn.pooled_tables`).

    ``counts`` of shape (0, 0, 0, 0) skips the kernel counts (inference with D fixed);
    ``tables`` of shape (0, K) skips step 4; ``augment=False`` only draws w (and theta),
    leaving m, A and loglik as they were (``m_out`` is not written), and ``draw_w=False``
    leaves w (``w_out`` is not written).  ``pooling_concentration`` <= 0 is the tied pooling
    prior (beta = a_jk / S_j), whose draws do not depend on the branch added for beta.
    """
    n_docs = len(doc_positions) - 1
    n_kernels = D.shape[2]
    filter_width = D.shape[1]
    n_candidates = filter_width * n_kernels
    update_counts = counts.shape[0] > 0
    want_tables = tables.shape[0] > 0
    log_fixed_factorial = lgamma(fixed_count + 1.0)
    free_split = pooling_concentration > 0.0
    w_start_in, _, w_count_in, w_kernel_in, w_value_in = w_in
    m_start_in, _, m_count_in, m_kernel_in, m_value_in = m_in
    w_start_out, w_nnz_out, w_count_out, w_kernel_out, w_value_out = w_out
    m_start_out, m_nnz_out, m_count_out, m_kernel_out, m_value_out = m_out
    fill = np.float32(w_background)
    for bi in prange(len(blocks)):
        block = blocks[bi]
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, first_block + block)
        lo, hi = block * block_size, min(n_docs, (block + 1) * block_size)
        max_pos = 1
        for j in range(lo, hi):
            max_pos = max(max_pos, doc_positions[j + 1] - doc_positions[j])
        # the document in hand, dense: what the kernels below read and write (rows 0..S_j-1)
        w_rows = np.empty((max_pos, n_kernels), dtype=np.float32)
        m_rows = np.zeros((max_pos, n_kernels), dtype=m_value_in.dtype)
        heavy_k = np.empty((max_pos, n_kernels), dtype=np.int32)
        n_heavy_at = np.empty(max_pos, dtype=np.int32)
        weight_scratch = np.empty((4, n_kernels), dtype=np.float64)
        log_split = np.empty((max_pos if free_split else 0, n_kernels), dtype=np.float64)
        slow = np.empty(n_kernels, dtype=np.int32)
        nonzero = np.empty(max_pos * n_kernels, dtype=np.int64)
        position_first = np.empty(max_pos + 1, dtype=np.int64)
        split = np.empty(n_candidates, dtype=np.int64)
        rest_cum = np.empty(n_candidates, dtype=np.float64)
        rest_pos = np.empty(n_candidates, dtype=np.int64)
        heavy = np.empty(n_candidates, dtype=np.int64)
        heavy_cum = np.empty(n_candidates, dtype=np.float64)
        light_idx = np.empty(n_candidates, dtype=np.int64)
        light_cum = np.empty(n_candidates, dtype=np.float64)
        out_idx = np.empty(2 * n_candidates, dtype=np.int64)
        out_cnt = np.empty(2 * n_candidates, dtype=np.int64)
        slab = numba.get_thread_id() if update_counts else 0
        # views without reference counts of the arrays that every document passes on: the
        # atomic increments on arrays shared by the threads cost a fifth of a sweep
        # (the arguments outlive the call; the per-block arrays are borrowed by the callees)
        m_b, w_b, theta_b = borrow(m_rows), borrow(w_rows), borrow(theta)
        prior_b, tables_b, D_b = borrow(prior_shape), borrow(tables), borrow(D)
        w_write, w_end = w_region[block], w_region[block + 1]
        m_write, m_end = m_region[block], m_region[block + 1]
        w_first, m_first = w_write, m_write
        for j in range(lo, hi):
            p0 = doc_positions[j]
            n_pos = doc_positions[j + 1] - p0
            if draw_w:  # the w draw reads the document's counts
                _unpack(m_rows, m_start_in[j], m_count_in, m_kernel_in, m_value_in, p0, n_pos)
            n_nonzero = -1  # not listed
            if draw_w and free_split:  # m is then reset at every position (n_nonzero = -1)
                draw_document_split(state, m_b, w_b, 0, n_pos, prior_b[j], np.log(rate[j]),
                                    pooling_concentration, theta_b[j], weight_scratch, log_split,
                                    heavy_k, n_heavy_at)
            elif draw_w:
                n_nonzero = draw_document_weights(state, m_b, w_b, 0, n_pos, prior_b[j],
                                                  np.log(rate[j]), theta_b[j], weight_scratch,
                                                  slow, heavy_k, n_heavy_at, nonzero)
            if store_w:
                w_start_out[j] = w_write
                w_write = _pack_heavy(w_rows, heavy_k, n_heavy_at, n_pos, p0, w_count_out,
                                      w_kernel_out, w_value_out, w_write, w_end)
                w_nnz_out[j] = w_write - w_start_out[j]
            if not augment:
                if draw_w:  # the rows back to zero for the next document
                    _clear(m_rows, m_start_in[j], m_count_in, m_kernel_in, p0, n_pos)
                continue
            if not draw_w:
                for s in range(n_pos):
                    for k in range(n_kernels):
                        w_rows[s, k] = fill
                _unpack(w_rows, w_start_in[j], w_count_in, w_kernel_in, w_value_in, p0, n_pos)
                list_heavy_kernels(w_b, 0, n_pos, heavy_k, n_heavy_at)
            total_w = 0.0
            for k in range(n_kernels):
                A[j, k] = 0
                total_w += theta[j, k]
            if n_nonzero >= 0:
                for i in range(n_nonzero):
                    s, k = divmod(nonzero[i], n_kernels)
                    m_rows[s, k] = 0
            else:
                for s in range(n_pos):
                    for k in range(n_kernels):
                        m_rows[s, k] = 0
            # from here ``nonzero`` lists the new counts, as they are placed (for the tables)
            n_nonzero = 0
            ll = -total_w
            for c in range(doc_cells[j], doc_cells[j + 1]):
                v = cell_word[c]
                col = cell_col[c]
                f_lo = max(0, col - n_pos + 1)
                f_hi = min(filter_width - 1, col)
                heavy_total = 0.0
                light_d = 0.0
                n_heavy = 0
                for f in range(f_lo, f_hi + 1):
                    s = col - f
                    d_heavy = 0.0
                    for h in range(n_heavy_at[s]):
                        k = heavy_k[s, h]
                        d = np.float64(D[v, f, k])
                        heavy_total += np.float64(w_rows[s, k]) * d
                        d_heavy += d
                        heavy[n_heavy] = (f - f_lo) * n_kernels + k
                        heavy_cum[n_heavy] = heavy_total
                        n_heavy += 1
                    light_d += max(D_row_sums[v, f] - d_heavy, 0.0)
                light_total = np.float64(FLOOR) * light_d
                n_l = 0
                if n_heavy == 0:
                    # every candidate at the floor: weigh them exactly
                    n_l, light_total = _light_candidates(w_b, D_b, 0, v, col, f_lo, f_hi,
                                                         light_idx, light_cum)
                lam = heavy_total + light_total
                n_units, cell_ll = cell_units(state, mode, lam, fixed_count, log_fixed_factorial,
                                              cell_count[c] if mode == OBSERVED_COUNT else 0)
                ll += cell_ll
                if n_units + n_candidates > len(out_idx):
                    out_idx = np.empty(2 * (n_units + n_candidates), dtype=np.int64)
                    out_cnt = np.empty(2 * (n_units + n_candidates), dtype=np.int64)
                n_pairs, n_light = split_units(state, n_units, heavy, heavy_cum, n_heavy,
                                               light_total, split, rest_cum, rest_pos,
                                               out_idx, out_cnt)
                if n_light > 0:
                    if n_heavy > 0:
                        n_l, _ = _light_candidates(w_b, D_b, 0, v, col, f_lo, f_hi, light_idx,
                                                   light_cum)
                    n_pairs = spread_light_units(state, n_light, light_cum, light_idx, n_l,
                                                 out_idx, out_cnt, n_pairs)
                for t in range(n_pairs):
                    idx = out_idx[t]
                    n_here = out_cnt[t]
                    f = f_lo + idx // n_kernels
                    k = idx % n_kernels
                    if m_rows[col - f, k] == 0:
                        nonzero[n_nonzero] = (col - f) * n_kernels + k
                        n_nonzero += 1
                    m_rows[col - f, k] += n_here
                    A[j, k] += n_here
                    if update_counts:
                        counts[slab, v, f, k] += n_here
            loglik[j] = ll
            if want_tables and free_split:
                pooled_tables(state, A[j], prior_b[j], tables_b[j])
            elif want_tables:
                listed_tables(state, m_b, 0, n_pos, prior_b[j], nonzero, n_nonzero, tables_b[j])
            m_start_out[j] = m_write
            m_write = _pack_listed(m_rows, nonzero, n_nonzero, n_pos, p0, position_first,
                                   m_count_out, m_kernel_out, m_value_out, m_write, m_end)
            m_nnz_out[j] = n_nonzero
        needed[block, 0] = w_write - w_first
        needed[block, 1] = m_write - m_first


@njit(cache=True)
def _unpack(rows, start, pos_count, kernel, value, p0, n_pos):
    """Rows 0..n_pos-1 of ``rows`` get a document's stored entries (the others untouched)."""
    rows, pos_count, kernel, value = borrow(rows), borrow(pos_count), borrow(kernel), borrow(value)
    e = start
    for s in range(n_pos):
        for _ in range(pos_count[p0 + s]):
            rows[s, kernel[e]] = value[e]
            e += 1


@njit(cache=True)
def _clear(rows, start, pos_count, kernel, p0, n_pos):
    """The entries :func:`_unpack` wrote back to zero."""
    rows, pos_count, kernel = borrow(rows), borrow(pos_count), borrow(kernel)
    e = start
    for s in range(n_pos):
        for _ in range(pos_count[p0 + s]):
            rows[s, kernel[e]] = 0
            e += 1


@njit(cache=True)
def _pack_heavy(w_rows, heavy_k, n_heavy_at, n_pos, p0, pos_count, kernel, value, write, end):
    """A document's w above the floor (the heavy lists) into a store from ``write``; returns
    the next free entry (past ``end``: the entries past it are not written)."""
    w_rows, heavy_k, n_heavy_at = borrow(w_rows), borrow(heavy_k), borrow(n_heavy_at)
    pos_count, kernel, value = borrow(pos_count), borrow(kernel), borrow(value)
    for s in range(n_pos):
        n = n_heavy_at[s]
        pos_count[p0 + s] = n
        if write + n <= end:
            for h in range(n):
                k = heavy_k[s, h]
                kernel[write + h] = k
                value[write + h] = w_rows[s, k]
        write += n
    return write


@njit(cache=True)
def _pack_listed(m_rows, listed, n_listed, n_pos, p0, first, pos_count, kernel, value, write,
                 end):
    """A document's counts (offsets s * K + k in ``listed``) into a store from ``write``,
    grouped by position (in the order listed); the rows are left at zero.  Returns the next free
    entry, as :func:`_pack_heavy`."""
    m_rows, listed, first = borrow(m_rows), borrow(listed), borrow(first)
    pos_count, kernel, value = borrow(pos_count), borrow(kernel), borrow(value)
    n_kernels = m_rows.shape[1]
    for s in range(n_pos):
        pos_count[p0 + s] = 0
    for i in range(n_listed):
        pos_count[p0 + listed[i] // n_kernels] += 1
    fits = write + n_listed <= end
    if fits:
        first[0] = write
        for s in range(n_pos):
            first[s + 1] = first[s] + pos_count[p0 + s]
        for i in range(n_listed):
            s, k = divmod(listed[i], n_kernels)
            kernel[first[s]] = k
            value[first[s]] = m_rows[s, k]
            first[s] += 1
    for i in range(n_listed):
        s, k = divmod(listed[i], n_kernels)
        m_rows[s, k] = 0
    return write + n_listed


@njit(parallel=True, cache=True)
def draw_kernels(seed, stream, counts, eta_table, D, block_words):
    """D_k ~ Dir(n_k + eta) over all V*F entries of each kernel (paper: D_k(:) ~ Dir(eta 1_{VF})).

    ``counts`` holds one (V, F, K) slab per thread; they are summed here and left at zero.
    ``eta_table`` is :func:`cpgbn.backends.numba.shared_shape.shared_shape_table` (eta): the entries
    without counts (almost all) share the shape eta and come from its ziggurat.  Gamma variates
    are drawn per block of words, normalised by per-kernel totals summed in block order.
    """
    n_words, filter_width, n_kernels = D.shape
    n_slabs = counts.shape[0]
    n_blocks = (n_words + block_words - 1) // block_words
    partial = np.zeros((n_blocks, n_kernels), dtype=np.float64)
    inverse_totals = np.empty(n_kernels, dtype=np.float64)
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, block)
        row_counts = np.empty(n_kernels, dtype=np.int64)
        row = np.empty(n_kernels, dtype=np.float64)
        work = np.empty(n_kernels, dtype=np.float64)
        for v in range(block * block_words, min(n_words, (block + 1) * block_words)):
            for f in range(filter_width):
                # slab by slab, so that each loop runs along k (vectorised)
                for k in range(n_kernels):
                    row_counts[k] = 0
                for t in range(n_slabs):
                    for k in range(n_kernels):
                        row_counts[k] += counts[t, v, f, k]
                        counts[t, v, f, k] = 0  # leaves the slabs ready for the next sweep
                # one call per row: most counts are 0 and share the shape eta
                gamma_counts_shared(state, row_counts, eta_table, row, work)
                for k in range(n_kernels):
                    # stored unnormalised; float32 keeps 1e-38..3e38, far beyond these values
                    D[v, f, k] = row[k]
                    partial[block, k] += row[k]
    for k in range(n_kernels):
        total = 0.0
        for block in range(n_blocks):
            total += partial[block, k]
        inverse_totals[k] = 1.0 / total  # a product per entry, not a division
    for v in prange(n_words):
        for f in range(filter_width):
            for k in range(n_kernels):
                value = D[v, f, k] * inverse_totals[k]
                D[v, f, k] = value if value > FLOOR else FLOOR


@njit(parallel=True, cache=True)
def reset_counts(counts):
    """Zero the per-thread count slabs (in parallel: they are large)."""
    n_slabs, n_words = counts.shape[0], counts.shape[1]
    for v in prange(n_words):
        for t in range(n_slabs):
            counts[t, v] = 0
