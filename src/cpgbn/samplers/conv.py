"""numba kernels of the convolutional layer: per-position weights w, token augmentation, kernels D.

Shapes (paper symbols in brackets):

* ``D``      float32 (V, F, K)  kernels [d_{k,v,f}]; for each k the V*F entries sum to 1.  The
  layout keeps the F x K block of one word contiguous, which is what a token reads.
* ``w``      float32 (P, K)     per-position weights [w_{j,k,s}], P = sum_j S_j (ragged).
* ``m``      int32   (P, K)     latent counts per position [m_{j,k,s}], summed over v and f.
* ``A``      int32   (N, K)     counts per document and kernel [m_{j,k,.,.}].
* ``counts`` int32   (T, V, F, K) counts per kernel entry [n_{k,v,f}], one slab per thread.

Every parallel loop runs over fixed blocks of documents (or words); block b draws from its
own stream ``(seed, stream, b)``, so a seed gives the same result for any thread count.
Integer counts are summed into per-thread slabs (integer addition is order-free) and
floating-point sums go through per-block partials added in block order.
"""

from __future__ import annotations

from math import lgamma

import numba
import numpy as np
from numba import njit, prange

from .distributions import (binomial, categorical_cumulative, gamma, gamma_counts_plus, log_gamma,
                            multinomial_cumulative, zero_truncated_poisson)
from .rng import seed_state, standard_exponential, uniform

#: Smallest value stored for w and D.  Gamma draws with shapes of 1e-4 underflow; a floor that
#: is a normal float32 keeps every token's total rate positive and the arithmetic fast.
FLOOR = np.float32(1e-30)
#: Below this many units a token's count is split by repeated categorical draws (binary search
#: on the cumulative weights); above it by one multinomial draw in O(K F).
_SMALL_SPLIT = 24


#: Shapes below this use the floor-aware path for positions without counts (see below).
_FAST_SHAPE = 0.1
_LOG_FLOOR = float(np.log(np.float64(FLOOR)))


@njit(cache=True, inline="always")
def _gamma_above(state, alpha, log_x0):
    """G ~ Gam(alpha, 1) conditioned on G >= x0 = exp(log_x0) < 1, for alpha < 1; exact.

    Rejection from the envelope x^(alpha-1) on [x0, 1] (accept with e^-x) plus e^-x on (1, inf)
    (accept with x^(alpha-1)); each piece is drawn by inversion, in log1p form so that tiny
    alphas keep their precision.  Acceptance is at least 1/e, near 1 for small alpha.
    """
    d = -np.expm1(alpha * log_x0)          # 1 - x0^alpha
    mass_low = d / alpha                    # integral of x^(alpha-1) over [x0, 1]
    mass_high = np.exp(-1.0)                # integral of e^-x over (1, inf)
    while True:
        if uniform(state) * (mass_low + mass_high) < mass_low:
            x = np.exp(np.log1p(-(1.0 - uniform(state)) * d) / alpha)
            if uniform(state) < np.exp(-x):
                return x
        else:
            x = 1.0 + standard_exponential(state)
            if np.log(uniform(state)) < (alpha - 1.0) * np.log(x):
                return x


@njit(cache=True, inline="always")
def _draw_empty_weight(state, alpha, log_rate, p_floor):
    """w ~ Gam(alpha, rate) stored as float32 with the floor, for a position without counts.

    Stored values below FLOOR become FLOOR, so only P(G < x0) with x0 = FLOOR * rate matters
    below it: with probability p_floor = x0^alpha / Gamma(alpha + 1) (exact to O(x0)) the draw is
    the floor; otherwise it is G conditioned on G >= x0.  Same law as flooring a full draw, at
    the cost of one uniform for most positions (empty positions are >99% of all on real text).
    """
    if uniform(state) < p_floor:
        return FLOOR
    value = _gamma_above(state, alpha, _LOG_FLOOR + log_rate) * np.exp(-log_rate)
    return np.float32(value) if value > FLOOR else FLOOR


@njit(cache=True)
def sample_empty_weights(seed, alpha, rate, n):
    """n draws of :func:`_draw_empty_weight` (for tests: compare with flooring Gam(alpha)/rate)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    log_rate = np.log(rate)
    p_floor = np.exp(alpha * (_LOG_FLOOR + log_rate) - lgamma(alpha + 1.0))
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        out[i] = _draw_empty_weight(state, alpha, log_rate, p_floor)
    return out


@njit(cache=True)
def split_units(state, n_units, cum, size, heavy, heavy_cum, n_heavy, light_total, scratch,
                out_idx, out_cnt):
    """Multinomial(n_units, w_i / lambda) over a cell's candidates, exactly, in O(heavy) work.

    ``cum[0:size]`` are the inclusive cumulative weights of all candidates; ``heavy[0:n_heavy]``
    (ascending) are the candidates whose w is above the floor, with cumulative weights
    ``heavy_cum``; the others ("light", w at the floor) weigh ``light_total`` together.  The
    light group receives Binomial(n, light / lambda) units (almost always 0), spread over its
    members by their weights; the heavy units are split over the heavy candidates only.  This
    is the multinomial's own decomposition, so the law is unchanged; the work is proportional
    to the ~7% heavy candidates instead of all K F.  Writes (candidate, count) pairs to
    out_idx/out_cnt and returns how many.
    """
    if n_units <= 0:
        return 0
    if n_heavy == 0:
        n_light = n_units
    elif light_total <= 0.0:
        n_light = 0
    else:
        n_light = binomial(state, n_units, light_total / (light_total + heavy_cum[n_heavy - 1]))
    n_out = 0
    n_heavy_units = n_units - n_light
    if n_heavy_units > 0:
        if n_heavy_units <= _SMALL_SPLIT:
            for _ in range(n_heavy_units):
                out_idx[n_out] = heavy[categorical_cumulative(state, heavy_cum, n_heavy)]
                out_cnt[n_out] = 1
                n_out += 1
        else:
            multinomial_cumulative(state, n_heavy_units, heavy_cum, n_heavy, scratch)
            for h in range(n_heavy):
                if scratch[h] > 0:
                    out_idx[n_out] = heavy[h]
                    out_cnt[n_out] = scratch[h]
                    n_out += 1
    if n_light > 0:
        # rare: cumulative weights of the light candidates, then one multinomial over them
        light_cum = np.empty(size, dtype=np.float64)
        light_pos = np.empty(size, dtype=np.int64)
        n_l, h, running, previous = 0, 0, 0.0, 0.0
        for i in range(size):
            weight = cum[i] - previous
            previous = cum[i]
            if h < n_heavy and heavy[h] == i:
                h += 1
                continue
            running += weight
            light_cum[n_l] = running
            light_pos[n_l] = i
            n_l += 1
        counts = np.empty(n_l, dtype=np.int64)
        multinomial_cumulative(state, n_light, light_cum, n_l, counts)
        for i in range(n_l):
            if counts[i] > 0:
                out_idx[n_out] = light_pos[i]
                out_cnt[n_out] = counts[i]
                n_out += 1
    return n_out


@njit(cache=True)
def sample_split(seed, weights, heavy_mask, n_units, reps):
    """reps draws of :func:`split_units` as a (reps, len(weights)) count matrix (for tests)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, 0, 0)
    size = len(weights)
    cum = np.cumsum(weights)
    heavy = np.empty(size, dtype=np.int64)
    heavy_cum = np.empty(size, dtype=np.float64)
    n_heavy, running, light = 0, 0.0, 0.0
    for i in range(size):
        if heavy_mask[i]:
            running += weights[i]
            heavy[n_heavy] = i
            heavy_cum[n_heavy] = running
            n_heavy += 1
        else:
            light += weights[i]
    out = np.zeros((reps, size), dtype=np.int64)
    scratch = np.empty(size, dtype=np.int64)
    out_idx = np.empty(size + n_units, dtype=np.int64)
    out_cnt = np.empty(size + n_units, dtype=np.int64)
    for r in range(reps):
        n = split_units(state, n_units, cum, size, heavy, heavy_cum, n_heavy, light, scratch,
                        out_idx, out_cnt)
        for t in range(n):
            out[r, out_idx[t]] += out_cnt[t]
    return out


@njit(cache=True, inline="always")
def _draw_scaled_gamma(state, shape, log_rate):
    """Gamma(shape, rate) as float32, floored: exact in log space for the tiny shapes of empty positions."""
    if shape >= 1.0:
        value = gamma(state, shape) * np.exp(-log_rate)
    else:
        value = np.exp(log_gamma(state, shape) - log_rate)
    if value < FLOOR:
        return FLOOR
    return np.float32(value)


@njit(parallel=True, cache=True)
def sweep_positions(seed, stream, block_size, doc_cells, doc_positions, cell_word, cell_col,
                    cell_count, mode, fixed_count, D, prior_shape, rate, draw_w,
                    augment, w, m, theta, A, counts, loglik):
    """One pass over all documents: draw w | m, then re-augment every cell m | w, D.

    For document j (prior shape a_jk, rate 1 + c_j^(2)):

    1. if ``draw_w``: w_jks ~ Gam(m_jks + a_jk / S_j, 1 / rate_j) for every position s and
       kernel k (the pooling prior, paper eq. 3); theta^(1)_jk = sum_s w_jks;
    2. for each cell (v, l): candidates are (f, k) with s = l - f a valid position, weight
       w_jks d_kvf; lambda = sum of weights; the cell's count is zero-truncated Poisson(lambda)
       (Bernoulli-Poisson link), the pseudo-count, or the observed count; it is split over the
       candidates by one multinomial draw and added to m, A and (if ``counts`` has a slab per
       thread) to n_kvf.
    3. loglik_j = sum over cells of the cell term minus sum_{k,s} w_jks (the rate of all
       other cells, since each kernel sums to 1): ln(1 - e^-lambda) + lambda for the
       Bernoulli-Poisson link, n ln lambda - ln n! for counts.

    ``counts`` of shape (0, 0, 0, 0) skips the kernel counts (inference with D fixed);
    ``augment=False`` only draws w (and theta), leaving m, A and loglik as they were.
    """
    n_docs = len(doc_positions) - 1
    n_kernels = D.shape[2]
    filter_width = D.shape[1]
    n_blocks = (n_docs + block_size - 1) // block_size
    update_counts = counts.shape[0] > 0
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, block)
        cum = np.empty(filter_width * n_kernels, dtype=np.float64)
        split = np.empty(filter_width * n_kernels, dtype=np.int64)
        heavy = np.empty(filter_width * n_kernels, dtype=np.int64)
        heavy_cum = np.empty(filter_width * n_kernels, dtype=np.float64)
        out_idx = np.empty(2 * filter_width * n_kernels, dtype=np.int64)
        out_cnt = np.empty(2 * filter_width * n_kernels, dtype=np.int64)
        alpha = np.empty(n_kernels, dtype=np.float64)
        p_floor = np.empty(n_kernels, dtype=np.float64)
        slab = numba.get_thread_id() if update_counts else 0
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            p0 = doc_positions[j]
            n_pos = doc_positions[j + 1] - p0
            if draw_w:
                log_rate = np.log(rate[j])
                for k in range(n_kernels):
                    theta[j, k] = 0.0
                    alpha[k] = prior_shape[j, k] / n_pos
                    p_floor[k] = (np.exp(alpha[k] * (_LOG_FLOOR + log_rate) - lgamma(alpha[k] + 1.0))
                                  if alpha[k] < _FAST_SHAPE else 0.0)
                for s in range(n_pos):
                    for k in range(n_kernels):
                        if m[p0 + s, k] == 0 and alpha[k] < _FAST_SHAPE:
                            value = _draw_empty_weight(state, alpha[k], log_rate, p_floor[k])
                        else:
                            value = _draw_scaled_gamma(state, m[p0 + s, k] + alpha[k], log_rate)
                        w[p0 + s, k] = value
                        theta[j, k] += value
            if not augment:
                continue
            total_w = 0.0
            for k in range(n_kernels):
                A[j, k] = 0
                total_w += theta[j, k]
            for s in range(n_pos):
                for k in range(n_kernels):
                    m[p0 + s, k] = 0
            ll = -total_w
            for c in range(doc_cells[j], doc_cells[j + 1]):
                v = cell_word[c]
                col = cell_col[c]
                f_lo = max(0, col - n_pos + 1)
                f_hi = min(filter_width - 1, col)
                size = (f_hi - f_lo + 1) * n_kernels
                running = 0.0
                light_total = 0.0
                heavy_total = 0.0
                n_heavy = 0
                i = 0
                for f in range(f_lo, f_hi + 1):
                    row = p0 + col - f
                    for k in range(n_kernels):
                        w_k = w[row, k]
                        weight = np.float64(w_k) * np.float64(D[v, f, k])
                        running += weight
                        cum[i] = running
                        if w_k > FLOOR:
                            heavy_total += weight
                            heavy[n_heavy] = i
                            heavy_cum[n_heavy] = heavy_total
                            n_heavy += 1
                        else:
                            light_total += weight
                        i += 1
                lam = running
                if mode == 0:
                    n_units = zero_truncated_poisson(state, lam)
                    ll += np.log(-np.expm1(-lam)) + lam
                else:
                    n_units = fixed_count if mode == 1 else cell_count[c]
                    ll += n_units * np.log(lam) - lgamma(n_units + 1.0)
                if n_units > len(out_idx):
                    out_idx = np.empty(2 * n_units, dtype=np.int64)
                    out_cnt = np.empty(2 * n_units, dtype=np.int64)
                n_pairs = split_units(state, n_units, cum, size, heavy, heavy_cum, n_heavy,
                                      light_total, split, out_idx, out_cnt)
                for t in range(n_pairs):
                    idx = out_idx[t]
                    n_here = out_cnt[t]
                    f = f_lo + idx // n_kernels
                    k = idx % n_kernels
                    m[p0 + col - f, k] += n_here
                    A[j, k] += n_here
                    if update_counts:
                        counts[slab, v, f, k] += n_here
            loglik[j] = ll


@njit(parallel=True, cache=True)
def draw_kernels(seed, stream, counts, eta, D, block_words):
    """D_k ~ Dir(n_k + eta) over all V*F entries of each kernel (paper: D_k(:) ~ Dir(eta 1_{VF})).

    ``counts`` holds one (V, F, K) slab per thread; they are summed here.  Gamma variates are
    drawn per block of words, normalised by per-kernel totals summed in block order.
    """
    n_words, filter_width, n_kernels = D.shape
    n_slabs = counts.shape[0]
    n_blocks = (n_words + block_words - 1) // block_words
    partial = np.zeros((n_blocks, n_kernels), dtype=np.float64)
    totals = np.empty(n_kernels, dtype=np.float64)
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, block)
        row_counts = np.empty(n_kernels, dtype=np.int64)
        row = np.empty(n_kernels, dtype=np.float64)
        for v in range(block * block_words, min(n_words, (block + 1) * block_words)):
            for f in range(filter_width):
                for k in range(n_kernels):
                    n_vfk = 0
                    for t in range(n_slabs):
                        n_vfk += counts[t, v, f, k]
                    row_counts[k] = n_vfk
                    # one call per row: most counts are 0 and share the shape eta
                gamma_counts_plus(state, row_counts, eta, row)
                for k in range(n_kernels):
                    # stored unnormalised; float32 keeps 1e-38..3e38, far beyond these values
                    D[v, f, k] = row[k]
                    partial[block, k] += row[k]
    for k in range(n_kernels):
        total = 0.0
        for block in range(n_blocks):
            total += partial[block, k]
        totals[k] = total
    for v in prange(n_words):
        for f in range(filter_width):
            for k in range(n_kernels):
                value = D[v, f, k] / totals[k]
                D[v, f, k] = value if value > FLOOR else FLOOR


@njit(parallel=True, cache=True)
def reset_counts(counts):
    """Zero the per-thread count slabs (in parallel: they are large)."""
    n_slabs, n_words = counts.shape[0], counts.shape[1]
    for v in prange(n_words):
        for t in range(n_slabs):
            counts[t, v] = 0


@njit(parallel=True, cache=True)
def sum_count_slabs(counts, out):
    """out[v, f, k] = sum over slabs of counts[t, v, f, k]."""
    n_slabs, n_words = counts.shape[0], counts.shape[1]
    for v in prange(n_words):
        out[v] = 0
        for t in range(n_slabs):
            out[v] += counts[t, v]
