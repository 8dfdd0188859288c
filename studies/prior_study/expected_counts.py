"""Study only: the authors' fractional expected counts in place of the sampled token split.

The authors' GPU code does not draw the multinomial split of a token's pseudo-count over its
candidates (f, k); it adds the expected counts, count * w_{j,k,s} d_{k,v,f} / lambda, as
fractions (notes, section 3, step 1).  That is not a Gibbs step, and the CRT of the upward pass
is not defined for a fractional count, so the library does not offer it.  This module has
backends that do it, subclasses of the library's, and an estimator whose Gibbs sampler runs on
them (:class:`ExpectedCountsCPGBN`: ``CPGBN(inference=ExpectedCountsGibbs)``, the library's
schedule given this study's backend as its ``backend`` argument), to test whether that approximation explains the paper's MR figure
(``prior_study.py --expected-counts --device cuda``; the PyTorch sampler on 2 CPU cores takes
about 8 s per sweep on 3000 MR documents once w has left its start, too slow for the study).

What the patch changes:

* m (per position), A (per document) and n (per kernel entry) are float64 sums of fractions;
  shares of a unit below ``DROP`` are left out (a w draw with shape alpha + 1e-9 instead of
  alpha is the same draw in all but name, and dropping them keeps the w step sparse);
* the first-layer tables are CRT(round(m_jks), a_jk / S_j): the nearest whole count;
* everything after the tables (the split over layer 2, Phi, r, the downward pass) is unchanged.

With ``token_count="bernoulli-poisson"`` the number of units of a token is still drawn; the
authors' code and this study use an integer pseudo-count.

Two backends make the same changes, subclasses of the library's: the PyTorch one (fast on a
GPU; :func:`expected_counts_torch_backend`, the estimator's with ``device``) and
:class:`ExpectedCountsNumbaBackend` (the estimator's without) (on a CPU: measured on one
core shared with other runs, about 2.2 s per sweep on 5,000 MR sentences where the library's
sampler falls to 0.6, and 20-23 minutes per MR seed under the authors' protocol; its position
step is written plainly, every w_jks drawn, instead of the library's sparse walk, which needs
integer m).
"""
from __future__ import annotations

import functools
from dataclasses import replace
from math import lgamma

import numba
import numpy as np

from cpgbn.backends.numba.numba_backend import DOC_BLOCK, NumbaBackend
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.model import CPGBN
from cpgbn.modes.gibbs_mode import GibbsMode
from cpgbn.params import CPGBN_PARAMETERS, declare_init
from cpgbn.backends.numba.conv import cell_units
from cpgbn.backends.numba.distributions import crt, gamma
from cpgbn.backends.numba.gbn import TINY
from cpgbn.backends.numba.rng import seed_state
from cpgbn.backends.numba.weights import FLOOR, draw_scaled_gamma
from cpgbn.layers.cells import OBSERVED_COUNT

DROP = 1e-6
#: Smallest share kept with the authors' w step (their float32 sums keep shares this small).
REDISTRIBUTE_DROP = 1e-12
#: The authors' guard in w_jks = theta_jk m_jks / (A_jk + AUTHORS_EPS).
AUTHORS_EPS = 1e-4


@functools.cache
def expected_counts_torch_backend():
    """The PyTorch backend with the expected split and the rounded first-layer tables (a
    subclass, built on demand so that this module imports without torch)."""
    import torch

    from cpgbn.backends.torch.position_field import DeviceField
    from cpgbn.backends.torch.torch_backend import TorchBackend

    class ExpectedCountsTorchBackend(TorchBackend):
        count_dtype = np.float64

        def split_units(self, cum, units):
            weights = torch.diff(cum, dim=1, prepend=torch.zeros_like(cum[:, :1]))
            share = units.to(torch.float64)[:, None] * weights / cum[:, -1:]
            rows, cols = (share > DROP).nonzero(as_tuple=True)
            return rows, cols, share[rows, cols]

        def position_tables(self, m, shape, block=None, **kwargs):
            return super().position_tables(torch.round(m).to(torch.int64), shape, block,
                                           **kwargs)

        def assignment_changes(self, m, memory):
            # the mixing diagnostic counts whole units: of the expected counts, their rounding
            return super().assignment_changes(_rounded(m), memory)

    def _rounded(m):
        if isinstance(m, DeviceField):   # the stored entries rounded (a zero stays stored)
            return DeviceField(m.indptr, m.kernel, torch.round(m.value).to(torch.int64),
                               m.n_kernels, m.background)
        return torch.round(m).to(torch.int64)

    return ExpectedCountsTorchBackend


class ExpectedCountsNumbaBackend(NumbaBackend):
    """The numba backend with float64 m, A and n, the expected split of every token's units and
    the tables CRT(round m_jks, a_jk / S_j) (see the module docstring).

    The library's position kernel and kernel draw take integer counts, so both are replaced by
    the plain kernels below.  The gamma belief stack above the first layer's tables is the
    library's.  ``redistribute = True`` (:class:`RedistributedNumbaBackend`) also replaces the
    w step by the authors' (notes, section 3, step 6): theta^(1)_jk ~ Gam(A_jk + a_jk, 1/(1 + c_j))
    and w_jks = theta^(1)_jk m_jks / (A_jk + 1e-4), with pooled tables CRT(round(A_jk), a_jk) to
    match that prior, and shares down to ``REDISTRIBUTE_DROP`` kept (the authors' float32 sums
    keep them).  A kernel whose expected count in a document falls far below 1e-4 is scaled
    down by A / (A + 1e-4) at every sweep until it vanishes (zero is absorbing), so which
    kernels survive in a document depends on the prior a_jk from the layers above.  Not a
    sampler either.
    """

    count_dtype = np.float64
    redistribute = False

    # this study's position kernel reads and writes dense w and m, not the library's stores
    def initial_weights(self, n_kernels):
        return np.ones((self.data.n_positions, n_kernels), dtype=np.float32)

    def zero_counts(self, n_kernels):
        return np.zeros((self.data.n_positions, n_kernels), dtype=np.float64)

    def assignment_changes(self, m, memory):
        # the mixing diagnostic counts whole units: of the expected counts, their rounding
        # (as the PyTorch backend's above)
        return super().assignment_changes(np.round(m).astype(np.int32), memory)

    def draw_first_layer(self, state, *, prior_shape, stream, table_stream, draw_w=True,
                         augment=True, with_counts=False, with_tables=False,
                         pooling_concentration=None, keep_w=True):
        if pooling_concentration is not None:
            raise NotImplementedError("the expected-counts study has the tied pooling prior only")
        data, g = self.data, state.globals
        counts = (self.count_slabs(g.D.shape) if with_counts
                  else np.zeros((0, 0, 0, 0), dtype=np.float64))
        tables = (np.empty((data.n_docs, g.D.shape[2]), dtype=np.int64) if draw_w and augment
                  else np.empty((0, g.D.shape[2]), dtype=np.int64))
        expected_positions(self.seed, stream, DOC_BLOCK, data.doc_cells, data.doc_positions,
                           data.cell_word, data.cell_col, data.cell_count, data.mode,
                           data.fixed_count, g.D, prior_shape, 1.0 + state.c[0], draw_w, augment,
                           state.w, state.m, state.theta[0], state.A, counts, state.loglik,
                           tables, self.redistribute,
                           REDISTRIBUTE_DROP if self.redistribute else DROP)
        return (counts if with_counts else None), (tables if draw_w and augment else None)

    def draw_kernels(self, D, counts, eta, stream):
        expected_dirichlet(self.seed, stream, counts, float(eta), D)
        return D


class RedistributedNumbaBackend(ExpectedCountsNumbaBackend):
    """:class:`ExpectedCountsNumbaBackend` with the authors' w step."""

    redistribute = True


class ExpectedCountsGibbs(GibbsMode):
    """The Gibbs mode whose sampler (fit and transform) draws on this study's backends:
    :class:`ExpectedCountsNumbaBackend` without ``device``, the PyTorch one
    (:func:`expected_counts_torch_backend`) with it (the library's schedule, given the backend
    as its ``backend`` argument)."""

    #: The numba backend of this mode's sampler.
    numba_backend = ExpectedCountsNumbaBackend
    #: The sampler built over the backend (the library's schedule; tests put a recording
    #: subclass here).
    sampler_class = GibbsSampler

    def sampler(self, data, hyper, seed: int, *, learn_globals: bool, first_doc: int = 0):
        device = self.settings["device"]
        if first_doc:
            raise ValueError("this study's samplers run in one process (first_doc 0)")
        if device is None:
            backend = self.numba_backend(data, int(seed))
        elif self.numba_backend is RedistributedNumbaBackend:
            raise ValueError("the redistributed w step is written for the numba sampler: "
                             "leave out device")
        else:
            backend = expected_counts_torch_backend()(data, int(seed), device=device)
        return self.sampler_class(data, hyper, seed, learn_globals=learn_globals,
                                  backend=backend)


class RedistributedGibbs(ExpectedCountsGibbs):
    """:class:`ExpectedCountsGibbs` with the authors' w step (:class:`RedistributedNumbaBackend`;
    the numba sampler only)."""

    numba_backend = RedistributedNumbaBackend


def estimator_for(mode: type) -> type:
    """A CPGBN subclass whose ``inference`` defaults to ``mode`` (a Gibbs mode of this study),
    for :func:`cpgbn.evaluate.protocols.evaluate`'s ``estimator``."""
    parameters = tuple(replace(p, default=mode) if p.name == "inference" else p
                       for p in CPGBN_PARAMETERS)
    return type(f"{mode.__name__}CPGBN", (CPGBN,),
                {"__init__": declare_init(parameters), "mode": mode,
                 "__module__": __name__,
                 "__doc__": f"CPGBN fitted by :class:`{mode.__name__}`."})


#: CPGBN with the expected counts, and with the authors' w step too.
ExpectedCountsCPGBN = estimator_for(ExpectedCountsGibbs)
RedistributedCPGBN = estimator_for(RedistributedGibbs)


@numba.njit(parallel=True, cache=True)
def expected_positions(seed, stream, block_size, doc_cells, doc_positions, cell_word, cell_col,
                       cell_count, mode, fixed_count, D, prior_shape, rate, draw_w, augment, w, m,
                       theta, A, counts, loglik, tables, redistribute, drop):
    """w | m as the library (every w_jks drawn) or, with ``redistribute``, the authors' step,
    then the expected split of each token's units into float m, A and n (shares above
    ``drop``), and the tables CRT(round(m_jks), a_jk / S_j) (pooled with ``redistribute``)."""
    n_docs = len(doc_positions) - 1
    n_kernels, filter_width = D.shape[2], D.shape[1]
    n_blocks = (n_docs + block_size - 1) // block_size
    update_counts = counts.shape[0] > 0
    want_tables = tables.shape[0] > 0
    log_fixed_factorial = lgamma(fixed_count + 1.0)
    for block in numba.prange(n_blocks):
        state = np.empty(4, dtype=np.uint64)
        seed_state(state, seed, stream, block)
        weights = np.empty(filter_width * n_kernels, dtype=np.float64)
        slab = numba.get_thread_id() if update_counts else 0
        for j in range(block * block_size, min(n_docs, (block + 1) * block_size)):
            p0 = doc_positions[j]
            n_pos = doc_positions[j + 1] - p0
            if draw_w and redistribute:
                for k in range(n_kernels):
                    pooled = gamma(state, A[j, k] + max(prior_shape[j, k], TINY)) / rate[j]
                    factor = pooled / (A[j, k] + AUTHORS_EPS)
                    theta[j, k] = 0.0
                    for s in range(n_pos):
                        value = np.float32(m[p0 + s, k] * factor)
                        w[p0 + s, k] = value
                        theta[j, k] += value
            elif draw_w:
                log_rate = np.log(rate[j])
                for k in range(n_kernels):
                    theta[j, k] = 0.0
                for s in range(n_pos):
                    for k in range(n_kernels):
                        value = draw_scaled_gamma(
                            state, m[p0 + s, k] + prior_shape[j, k] / n_pos, log_rate)
                        w[p0 + s, k] = value
                        theta[j, k] += value
            if not augment:
                continue
            ll = 0.0
            for k in range(n_kernels):
                A[j, k] = 0.0
                ll -= theta[j, k]
            for s in range(n_pos):
                for k in range(n_kernels):
                    m[p0 + s, k] = 0.0
            for c in range(doc_cells[j], doc_cells[j + 1]):
                v = cell_word[c]
                col = cell_col[c]
                f_lo = max(0, col - n_pos + 1)
                f_hi = min(filter_width - 1, col)
                lam = 0.0
                i = 0
                for f in range(f_lo, f_hi + 1):
                    for k in range(n_kernels):
                        weight = np.float64(w[p0 + col - f, k]) * np.float64(D[v, f, k])
                        weights[i] = weight
                        lam += weight
                        i += 1
                if lam <= 0.0:  # every candidate's w has vanished: split evenly (authors' kernel)
                    for c2 in range(i):
                        weights[c2] = 1.0
                    lam = float(i)
                n_units, cell_ll = cell_units(state, mode, lam, fixed_count, log_fixed_factorial,
                                              cell_count[c] if mode == OBSERVED_COUNT else 0)
                ll += cell_ll
                scale = n_units / lam
                i = 0
                for f in range(f_lo, f_hi + 1):
                    for k in range(n_kernels):
                        share = weights[i] * scale
                        i += 1
                        if share > drop:
                            m[p0 + col - f, k] += share
                            A[j, k] += share
                            if update_counts:
                                counts[slab, v, f, k] += share
            loglik[j] = ll
            if want_tables and redistribute:
                for k in range(n_kernels):
                    whole = np.int64(np.round(A[j, k]))
                    tables[j, k] = 0 if whole <= 0 else crt(state, whole,
                                                            max(prior_shape[j, k], TINY))
            elif want_tables:
                for k in range(n_kernels):
                    tables[j, k] = 0
                    shape = max(prior_shape[j, k] / n_pos, TINY)
                    for s in range(n_pos):
                        whole = np.int64(np.round(m[p0 + s, k]))
                        if whole > 0:
                            tables[j, k] += crt(state, whole, shape)


@numba.njit(cache=True)
def expected_dirichlet(seed, stream, counts, eta, D):
    """D_k ~ Dir(n_k + eta) with fractional n, in one stream; the slabs are left at zero."""
    n_words, filter_width, n_kernels = D.shape
    totals = np.zeros(n_kernels, dtype=np.float64)
    values = np.empty((n_words, filter_width, n_kernels), dtype=np.float64)
    state = np.empty(4, dtype=np.uint64)
    seed_state(state, seed, stream, 0)
    for v in range(n_words):
        for f in range(filter_width):
            for k in range(n_kernels):
                n = 0.0
                for t in range(counts.shape[0]):
                    n += counts[t, v, f, k]
                    counts[t, v, f, k] = 0
                value = gamma(state, n + eta)
                values[v, f, k] = value
                totals[k] += value
    for v in range(n_words):
        for f in range(filter_width):
            for k in range(n_kernels):
                value = values[v, f, k] / totals[k]
                D[v, f, k] = value if value > FLOOR else FLOOR
