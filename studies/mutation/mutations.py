"""The mutation table: one-line bugs planted, one at a time, in a copy of the sampler.

Each record names a file relative to ``src/cpgbn``, an exact snippet that must occur exactly
once in it, and its replacement.  When the code moves, re-target ``path`` and ``old``: the
runner refuses a snippet that is not found, or found more than once (``tests`` beside this
file checks every snippet against the current sources).

``target`` says which conditional or speed path the bug sits in; ``origin`` is "issue 22"
for the bugs listed in the issue (caught or missed by the tests of the time) and "added" for
the ones chosen here (one in each speed path: the walk over the floor, the binomial unit
split, the shared-shape ziggurat of the kernel draw, the thinned CRT), and one deliberate hang.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    id: str
    path: str
    old: str
    new: str
    description: str
    target: str
    origin: str = "added"


MUTATIONS = [
    Mutation("w_shape_no_1_over_S", "backends/numba/weights.py",
             "alpha[k] = prior_shape[k] * per_position",
             "alpha[k] = prior_shape[k]",
             "w's gamma shape a_jk instead of a_jk / S_j", "w | m (pooling prior)", "issue 22"),
    Mutation("theta_rate_1_plus_c", "inference/gibbs.py",
             "state.c[t - 1] + q[t - 1],",
             "1.0 + state.c[t - 1],",
             "theta^(t) rate 1 + c^(t+1) instead of c^(t+1) + q^(t)", "theta^(t) downward",
             "issue 22"),
    Mutation("candidate_range_off_by_one", "backends/numba/conv.py",
             "f_lo = max(0, col - n_pos + 1)",
             "f_lo = max(0, col - n_pos + 2)",
             "a cell's candidates miss the last position's kernel column",
             "augmentation m | w, D", "issue 22"),
    Mutation("c_shape_no_sum_a", "backends/numba/gbn.py",
             "draw_gamma(state, e0 + shape_sum[j])",
             "draw_gamma(state, e0)",
             "c^(t+1) shape e0 instead of e0 + sum_k a_jk", "c^(t+1)", "issue 22"),
    Mutation("pooling_crt_no_1_over_S", "backends/numba/gbn.py",
             "max(shape[k] / n_pos, TINY)",
             "max(shape[k], TINY)",
             "pooling-layer CRT concentration a_jk instead of a_jk / S_j",
             "upward pass, pooling tables", "issue 22"),
    Mutation("D_dirichlet_drops_eta_on_counts", "backends/numba/shared_shape.py",
             "out[i] = log_gamma_inline(state, n + a)",
             "out[i] = log_gamma_inline(state, n + 0.0)",
             "D_k ~ Dir(n_k + eta 1(n_k = 0)): eta dropped on the entries with counts",
             "D | n", "issue 22"),
    Mutation("r_rate_q_wrong_layer", "inference/gibbs.py",
             "r_tables, r_rate = b.column_sums(tables), q[T].sum()",
             "r_tables, r_rate = b.column_sums(tables), q[T - 1].sum()",
             "r's rate c0 + sum_j q^(T) instead of q^(T+1)", "r", "issue 22"),
    Mutation("theta_rate_q_layer_above", "inference/gibbs.py",
             "state.c[t - 1] + q[t - 1],",
             "state.c[t - 1] + q[t],",
             "theta^(t) rate c^(t+1) + q^(t+1) instead of q^(t)", "theta^(t) downward",
             "issue 22"),
    Mutation("eta_wrong_layer", "inference/updates.py",
             "return hyper.eta[min(t, len(hyper.eta) - 1)]",
             "return hyper.eta[t - 1]",
             "Phi^(t+1) drawn with eta^(t) (the layer below's concentration)", "Phi^(t)",
             "issue 22"),
    Mutation("w_rate_c", "backends/numba/backend.py",
             "prior_shape, 1.0 + state.c[0], draw_w,",
             "prior_shape, state.c[0], draw_w,",
             "w's rate c^(2) instead of 1 + c^(2) (hung the recovery test)", "w | m",
             "issue 22"),
    Mutation("p_floor_no_gamma_factor", "backends/numba/weights.py",
             "log_p_floor[k] = p_low[k] - log_p_floor[k]",
             "log_p_floor[k] = p_low[k]",
             "p_floor = x0^a without its 1 / Gamma(1 + a)", "speed path: walk over the floor",
             "issue 22"),
    # ---- added
    Mutation("walk_gap_off_by_one", "backends/numba/weights.py",
             "s += 1.0 + np.floor(exponential_inline(state) * gap_scale)",
             "s += np.floor(exponential_inline(state) * gap_scale)",
             "the walk's gap counts the failures but not the step to the next position",
             "speed path: walk over the floor"),
    Mutation("split_rest_exclusive_cumsum", "backends/numba/conv.py",
             "rest_cum[i] = running",
             "rest_cum[i] = running - weight",
             "above 24 units, the others' cumulative weights exclude their own weight",
             "speed path: binomial unit split (> 24 units)"),
    Mutation("split_top_binomial_n_minus_1", "backends/numba/conv.py",
             "binomial(state, n_heavy_units, top_weight / total)",
             "binomial(state, n_heavy_units - 1, top_weight / total)",
             "above 24 units, the largest candidate's binomial has one trial too few",
             "speed path: binomial unit split (> 24 units)"),
    Mutation("ziggurat_drops_log_a", "backends/numba/shared_shape.py",
             "out[i] = log_a + _log_ratio(state, table)",
             "out[i] = _log_ratio(state, table)",
             "the kernel entries without counts get G / eta instead of G",
             "speed path: shared-shape ziggurat (D | n)"),
    Mutation("crt_thinning_off_by_one", "backends/numba/distributions.py",
             "if uniform_inline(state) * (a + j - 1.0) < a + i:",
             "if uniform_inline(state) * (a + j) < a + i:",
             "large-m CRT: acceptance (a + i) / (a + j) instead of / (a + j - 1)",
             "speed path: thinned CRT (large counts)"),
    Mutation("c_prior_e0_f0_swapped", "inference/gibbs.py",
             "hyper.e0, hyper.f0,",
             "hyper.f0, hyper.e0,",
             "c^(t+1)'s prior shape and rate swapped", "c^(t+1)"),
    # ---- the free positional split (pooling_concentration; the Geweke ``split`` cases)
    Mutation("free_split_tied_tables", "backends/numba/conv.py",
             "if want_tables and free_split:",
             "if want_tables and free_split and False:",
             "free split: the tied prior's tables sum_s CRT(m_jks, a_jk / S_j) instead of "
             "CRT(A_jk, a_jk)", "upward pass, pooling tables (free split)"),
    Mutation("free_split_dirichlet_drops_beta_on_counts", "backends/numba/weights.py",
             "value = log_gamma(state, beta + m[p0 + s, k])",
             "value = log_gamma(state, beta if m[p0 + s, k] == 0 else m[p0 + s, k] + 0.0)",
             "free split: pi ~ Dir(m + beta 1(m = 0)), beta dropped where there are counts",
             "pi | m (free split)"),
    Mutation("free_split_theta_shape_over_S", "backends/numba/weights.py",
             "value = log_gamma(state, prior_shape[k] + total[k]) - log_rate",
             "value = log_gamma(state, prior_shape[k] / n_pos + total[k]) - log_rate",
             "free split: theta^(1) shape a_jk / S_j + A_jk instead of a_jk + A_jk",
             "theta^(1) | A (free split)"),
    Mutation("gamma_never_accepts", "backends/numba/distributions.py",
             "if v <= 0.0:",
             "if v <= 10.0:",
             "deliberate hang: the gamma draw's rejection loop (Marsaglia-Tsang) never accepts",
             "every gamma draw (checks that a hang in compiled code fails in time)"),
]
