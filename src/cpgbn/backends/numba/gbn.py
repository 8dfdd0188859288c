"""numba kernels of the gamma belief stack (layers t = 2..T and the top-layer r).

Notation follows the GBN of Zhou, Cong & Chen (2016) as used by the paper's eq. (2):
theta^(t)_j ~ Gam(Phi^(t+1) theta^(t+1)_j, 1/c^(t+1)_j), with counts m^(t)_j ~ Pois(q^(t)_j theta^(t)_j)
reaching layer t from below (q^(1) = 1, q^(t+1) = ln(1 + q^(t) / c^(t+1)), i.e. -ln(1 - p^(t+1))).

Shapes: ``theta`` float64 (N, K_t); ``phi`` float64 (K_t, K_{t+1}) with columns on the simplex;
count matrices (N, K_t) of any integer type.  Parallel loops run over fixed blocks of documents,
each block with its own RNG stream, so results do not depend on the thread count.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .distributions import crt, dirichlet, gamma, log_gamma, multinomial_cumulative
from .rng import borrow, seed_state

#: Smallest value kept for theta, r and Phi entries: gamma shapes of 1e-6 give variates that
#: underflow, and a zero shape would make a positive count impossible downstream.
TINY = 1e-100
PHI_FLOOR = 1e-30


@njit(cache=True, inline="always")
def draw_gamma(state, shape):
    """Gamma(shape, 1), exact for every shape > 0 (log space below 1), floored at TINY."""
    if shape >= 1.0:
        value = gamma(state, shape)
    else:
        value = np.exp(log_gamma(state, shape))
    return value if value > TINY else TINY


@njit(parallel=True, cache=True)
def draw_doc_gammas(seed, stream, block_size, first_block, shape, counts, rate, out):
    """out[j, k] ~ Gam(shape[j, k] + counts[j, k], 1 / rate[j]) (downward theta draws)."""
    n_docs, n_topics = out.shape
    n_blocks = (n_docs + block_size - 1) // block_size
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, first_block + block)
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            for k in range(n_topics):
                out[j, k] = draw_gamma(state, shape[j, k] + counts[j, k]) / rate[j]


@njit(parallel=True, cache=True)
def draw_doc_scales(seed, stream, block_size, first_block, shape_sum, theta_sum, e0, f0, out):
    """c_j ~ Gam(e0 + shape_sum_j, 1 / (f0 + theta_sum_j)) (gamma rate of each layer, per document)."""
    n_docs = len(out)
    n_blocks = (n_docs + block_size - 1) // block_size
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, first_block + block)
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            out[j] = draw_gamma(state, e0 + shape_sum[j]) / (f0 + theta_sum[j])


@njit(parallel=True, cache=True)
def layer_tables(seed, stream, block_size, first_block, counts, shape, out):
    """out[j, k] ~ CRT(counts[j, k], shape[j, k]): the tables that carry layer t's counts upward."""
    n_docs, n_topics = counts.shape
    n_blocks = (n_docs + block_size - 1) // block_size
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, first_block + block)
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            for k in range(n_topics):
                out[j, k] = crt(state, counts[j, k], max(shape[j, k], TINY))


@njit(cache=True)
def longest_document(doc_positions):
    """max_j S_j (at least 1), from the ragged offsets: the size of per-document work arrays."""
    longest = 1
    for j in range(len(doc_positions) - 1):
        longest = max(longest, doc_positions[j + 1] - doc_positions[j])
    return longest


@njit(parallel=True, cache=True)
def position_tables(seed, stream, block_size, first_block, doc_positions, m, shape, out):
    """out[j, k] = sum_s CRT(m_jks, shape[j, k] / S_j): tables of the pooling layer.

    Under the pooling prior w_jks ~ Gam(a_jk / S_j, 1/c_j), marginalising w leaves one
    NB(a_jk / S_j, p_j) count per position.  The sampler keeps the per-position counts m_jks,
    so the augmentation of a_jk must use every one of them: the law of (m_jk1, ..., m_jkS)
    is NB(A_jk; a_jk, p_j) times a Dirichlet-multinomial factor that also depends on a_jk,
    and CRT(A_jk, a_jk) alone would ignore that factor (tests/test_pooling_crt.py shows
    the shortcut missing the exact posterior while this augmentation matches it).  Each
    CRT(m_jks, a_jk / S_j) is Poisson(q a_jk / S_j) marginally, so the sum is Poisson(q a_jk)
    as the layer above expects.
    """
    n_docs, n_topics = shape.shape
    n_blocks = (n_docs + block_size - 1) // block_size
    max_pos = longest_document(doc_positions)
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, first_block + block)
        listed = np.empty(max_pos * n_topics, dtype=np.int64)
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            p0 = doc_positions[j]
            n_pos = doc_positions[j + 1] - p0
            n_listed = 0
            for s in range(n_pos):
                for k in range(n_topics):
                    if m[p0 + s, k] > 0:
                        listed[n_listed] = s * n_topics + k
                        n_listed += 1
            listed_tables(state, m, p0, n_pos, shape[j], listed, n_listed, out[j])


@njit(cache=True)
def listed_tables(state, m, p0, n_pos, shape, listed, n_listed, out):
    """out[k] = sum_s CRT(m_jks, shape[k] / S_j) for one document (rows p0 .. p0 + S_j - 1 of m),
    over a list of its nonzero counts.

    ``listed[:n_listed]`` holds s * K + k for every (s, k) with m_jks > 0, each once, in any
    order (the Gibbs sweep records them as it places the counts, while the document's rows of
    m are in cache; :func:`position_tables` scans m for them), so the work is proportional to
    the nonzero counts, not to S_j * K.
    """
    state, m, shape = borrow(state), borrow(m), borrow(shape)
    listed, out = borrow(listed), borrow(out)
    n_topics = shape.shape[0]
    for k in range(n_topics):
        out[k] = 0
    for i in range(n_listed):
        s, k = divmod(listed[i], n_topics)
        out[k] += crt(state, m[p0 + s, k], max(shape[k] / n_pos, TINY))


@njit(cache=True)
def pooled_tables(state, counts, shape, out):
    """out[k] = CRT(counts[k], shape[k]) for one document: the pooling layer's tables when the
    positional split has its own concentration (its Dirichlet-multinomial factor is then
    free of a_jk, so the summed counts A_jk carry everything about a_jk)."""
    state, counts, shape, out = borrow(state), borrow(counts), borrow(shape), borrow(out)
    for k in range(shape.shape[0]):
        out[k] = crt(state, counts[k], max(shape[k], TINY))


@njit(parallel=True, cache=True)
def split_tables(seed, stream, block_size, first_block, tables, phi, theta_above, m_out, phi_counts):
    """Split each l_jk over the topics k' of the layer above, in proportion to Phi[k, k'] theta_above[j, k'].

    The split counts are summed over k into ``m_out[j, k']`` (the counts reaching layer t+1)
    and over j into ``phi_counts[slab, k, k']`` (one slab per thread; an empty first axis skips
    them, for inference with Phi fixed).
    """
    n_docs, n_below = tables.shape
    n_above = phi.shape[1]
    n_blocks = (n_docs + block_size - 1) // block_size
    update_counts = phi_counts.shape[0] > 0
    for block in prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, first_block + block)
        cum = np.empty(n_above, dtype=np.float64)
        split = np.empty(n_above, dtype=np.int64)
        slab = numba.get_thread_id() if update_counts else 0
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            for kk in range(n_above):
                m_out[j, kk] = 0
            for k in range(n_below):
                if tables[j, k] == 0:
                    continue
                running = 0.0
                for kk in range(n_above):
                    running += phi[k, kk] * theta_above[j, kk]
                    cum[kk] = running
                multinomial_cumulative(state, tables[j, k], cum, n_above, split)
                for kk in range(n_above):
                    if split[kk] > 0:
                        m_out[j, kk] += split[kk]
                        if update_counts:
                            phi_counts[slab, k, kk] += split[kk]


@njit(cache=True)
def draw_phi(seed, stream, counts, eta, phi):
    """Each column Phi[:, k'] ~ Dir(eta + counts[:, k']) (simplex-constrained connection weights)."""
    n_below, n_above = phi.shape
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, stream, 0)
    alpha = np.empty(n_below, dtype=np.float64)
    column = np.empty(n_below, dtype=np.float64)
    for kk in range(n_above):
        for k in range(n_below):
            alpha[k] = eta + counts[k, kk]
        dirichlet(state, alpha, column)
        total = 0.0
        for k in range(n_below):
            column[k] = max(column[k], PHI_FLOOR)
            total += column[k]
        for k in range(n_below):
            phi[k, kk] = column[k] / total


@njit(cache=True)
def draw_gamma_vector(seed, stream, shape, rate, out):
    """out[k] ~ Gam(shape[k], 1 / rate) (the top-layer r)."""
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, stream, 0)
    for k in range(len(out)):
        out[k] = draw_gamma(state, shape[k]) / rate
