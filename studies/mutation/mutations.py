"""The mutation table: one-line bugs planted, one at a time, in a copy of the sampler.

Each record names a file relative to ``src/cpgbn``, an exact snippet that must occur exactly
once in it, and its replacement.  When the code moves, re-target ``path`` and ``old``: the
runner refuses a snippet that is not found, or found more than once (``tests`` beside this
file checks every snippet against the current sources).

``target`` says which conditional or speed path the bug sits in; ``origin`` is "issue 22"
for the bugs listed in the issue (caught or missed by the tests of the time) and "added" for
the ones chosen here (one in each speed path: the walk over the floor, the binomial unit
split, the shared-shape ziggurat of the kernel draw, the thinned CRT), and one deliberate hang.

``tests`` names the test files that should catch the bug.  Empty (the sampler's mutations):
the statistical tests, tier by tier (tests/test_geweke.py and tests/test_recovery.py; the
runner's ``TEST_FILES``).  Otherwise the files run whole, as ``make test`` runs them (marker
``not long``), and every failing test is reported.  Origin "issue 35": the glue of the
minibatch and hybrid inference (the trainer, the global updates, the TLASGR step), caught by
tests/test_hybrid_glue.py, each run with the existing test file of its module.
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
    tests: tuple[str, ...] = ()


GLUE = "tests/test_hybrid_glue.py"
#: issue 35's mutations: the glue tests and the existing tests of the mutated module
TLASGR_TESTS = (GLUE, "tests/test_tlasgr.py")
UPDATE_TESTS = (GLUE, "tests/test_minibatch_inference.py")
TRAINER_TESTS = (GLUE, "tests/test_minibatch_inference.py", "tests/test_elbo.py")
ENCODER_TESTS = (GLUE, "tests/test_encoder.py", "tests/test_minibatch_inference.py")


def glue(id, path, old, new, description, target, tests) -> Mutation:
    return Mutation(id, path, old, new, description, target, "issue 35", tests)


#: issue 47's mutations: the classifier's training, caught by its tests
CLASSIFIER_TESTS = ("tests/test_classifier_training.py", "tests/test_classifier.py")


def classifier(id, path, old, new, description, target) -> Mutation:
    return Mutation(id, path, old, new, description, target, "issue 47", CLASSIFIER_TESTS)


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
             "ExactSum.of(b.to_numpy(q[T], np.float64))",
             "ExactSum.of(b.to_numpy(q[T - 1], np.float64))",
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
    Mutation("w_rate_c", "backends/numba/numba_backend.py",
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
    Mutation("upper_split_drops_theta_above", "inference/gibbs.py",
             "m_next, counts = b.split_tables(tables, phi, state.theta[t],",
             "m_next, counts = b.split_tables(tables, phi, state.theta[t] if t == 1 "
             "else state.theta[t] * 0 + 1,",
             "the tables of layer 2 and above split over the topics above in proportion to "
             "Phi^(t+1) alone (theta^(t+1) dropped from the weights)",
             "upward pass, split of layer-2+ tables", "issue 49"),
    Mutation("gamma_never_accepts", "backends/numba/distributions.py",
             "if v <= 0.0:",
             "if v <= 10.0:",
             "deliberate hang: the gamma draw's rejection loop (Marsaglia-Tsang) never accepts",
             "every gamma draw (checks that a hang in compiled code fails in time)"),
    # ---- issue 35: the glue of the minibatch and hybrid inference
    glue("tlasgr_drift_drops_eta", "inference/tlasgr.py",
         "drift = (rho * counts + eta) - (rho * counts.sum(0) + eta * n_rows) * phi",
         "drift = rho * counts - (rho * counts.sum(0) + eta * n_rows) * phi",
         "TLASGR drift without the prior's + eta per entry", "TLASGR step", TLASGR_TESTS),
    # (not here: eta instead of eta V F in the drift's term on phi, an equivalent mutant: the
    # projection onto the simplex removes any multiple of phi from the step, so that term's
    # coefficient is whatever makes the drift sum to 0; results/mutation/README.md)
    glue("tlasgr_drift_counts_not_scaled", "inference/tlasgr.py",
         "drift = (rho * counts + eta) - (rho * counts.sum(0) + eta * n_rows) * phi",
         "drift = (counts + eta) - (rho * counts.sum(0) + eta * n_rows) * phi",
         "TLASGR drift with the minibatch's counts n~ instead of rho n~", "TLASGR step",
         TLASGR_TESTS),
    glue("tlasgr_no_precision_floor", "inference/tlasgr.py",
         "effective = arrays.to_backend(np.maximum(precision, eta * columns.shape[0]), "
         "np.float64)",
         "effective = arrays.to_backend(precision, np.float64)",
         "the step divides by M_k instead of max(M_k, eta V F)", "TLASGR step", TLASGR_TESTS),
    glue("tlasgr_step_size_previous_i", "inference/tlasgr.py",
         "schedule.step_size(i)",
         "schedule.step_size(state.n_updates)",
         "step size eps_{i-1} instead of eps_i", "TLASGR schedule", TLASGR_TESTS),
    glue("tlasgr_precision_without_rho", "inference/tlasgr.py",
         "precision = next_precision(state, arrays.to_numpy(column_counts.sum(0), "
         "np.float64), rho,",
         "precision = next_precision(state, arrays.to_numpy(column_counts.sum(0), "
         "np.float64), 1.0,",
         "the preconditioner M averages n~._k instead of rho n~._k", "TLASGR preconditioner",
         TLASGR_TESTS),
    glue("rho_inverted", "inference/updates.py",
         "rho = self.n_docs_total / float(stats.n_docs)",
         "rho = float(stats.n_docs) / self.n_docs_total",
         "rho = B / N instead of N / B", "TLASGR global update", UPDATE_TESTS),
    glue("accumulate_sum_not_mean", "inference/updates.py",
         "n = float(self.n_sweeps)",
         "n = 1.0",
         "the collected sweeps' statistics summed instead of averaged", "AccumulateStatistics",
         UPDATE_TESTS),
    glue("accumulate_keeps_last_sweep", "inference/updates.py",
         "self.kernel_counts = self.kernel_counts + total",
         "self.kernel_counts = total",
         "the kernel counts of the last collected sweep only, divided by the sweeps' number",
         "AccumulateStatistics", UPDATE_TESTS),
    glue("tlasgr_r_tables_not_scaled", "inference/updates.py",
         "shape = hyper.gamma0 / len(g.r) + rho * backend.as_float(stats.r_tables)",
         "shape = hyper.gamma0 / len(g.r) + backend.as_float(stats.r_tables)",
         "r's shape from the minibatch's tables without rho", "TLASGR global update (r)",
         UPDATE_TESTS),
    glue("tlasgr_r_rate_not_scaled", "inference/updates.py",
         "g.r = backend.draw_gamma_vector(shape, hyper.c0 + rho * float(stats.r_rate),",
         "g.r = backend.draw_gamma_vector(shape, hyper.c0 + float(stats.r_rate),",
         "r's rate c0 + sum_j q_j without rho", "TLASGR global update (r)", UPDATE_TESTS),
    glue("tlasgr_phi_with_kernel_eta", "inference/updates.py",
         "etas = [hyper.eta[0]] + [phi_eta(hyper, t) for t in range(1, len(g.phi) + 1)]",
         "etas = [hyper.eta[0]] * (len(g.phi) + 1)",
         "every Phi^(t) stepped with eta^(1)", "TLASGR global update", UPDATE_TESTS),
    glue("minibatch_collects_burn_in", "inference/minibatch.py",
         "burn.sweep_on_backend(state)",
         "collect.sweep_on_backend(state)",
         "the burn-in sweeps' statistics enter the average", "minibatch Gibbs", UPDATE_TESTS),
    glue("draw_seed_constant", "inference/hybrid.py",
         "batch, groups, derived_seed(self.seed, _ENCODER_DRAW, i), self.globals,",
         "batch, groups, derived_seed(self.seed, _ENCODER_DRAW), self.globals,",
         "the encoder's draw seeded alike at every step", "hybrid trainer", TRAINER_TESTS),
    glue("trainer_never_steps", "inference/hybrid.py",
         "self.encoder_backend.apply_gradient(\n            self.max_grad_norm, "
         "separate=term is not None)",
         "0.0",
         "the optimiser's step left out: the encoder never learns", "hybrid trainer",
         TRAINER_TESTS),
    glue("encoder_reads_stale_globals", "inference/hybrid.py",
         "self._local_chain.step(i, record)\n                "
         "self._set_globals(self._local_chain.globals)",
         "self._local_chain.step(i, record)",
         "the encoder keeps its first copy of the globals (\"gibbs\")", "hybrid trainer",
         TRAINER_TESTS),
    glue("encoder_statistics_rates_one", "inference/hybrid.py",
         "c=rates,",
         "c=[b.full(n_docs, 1.0, np.float64) for _ in rates],",
         "the encoder's statistics with the rates c at 1 instead of the ELBO's",
         "hybrid trainer (\"encoder\" statistics)", TRAINER_TESTS),
    glue("encoder_statistics_sampled_counts", "inference/hybrid.py",
         "stats.kernel_counts = self.encoder_backend.expected_kernel_counts(draw, g.D)",
         "stats.kernel_counts = stats.kernel_counts",
         "the sampled kernel counts instead of their expectation given w and D",
         "hybrid trainer (\"encoder\" statistics)", TRAINER_TESTS),
    glue("loss_sign_flipped", "backends/torch/encoder_backend.py",
         "(loss * loss_scale).backward()",
         "(-loss * loss_scale).backward()",
         "the gradient of the ELBO instead of the negative ELBO", "encoder step",
         TRAINER_TESTS),
    glue("gradient_not_zeroed", "backends/torch/encoder_backend.py",
         "self.optimizer.zero_grad(set_to_none=True)",
         "pass",
         "the gradient accumulates over steps", "encoder step", TRAINER_TESTS),
    glue("clip_after_step", "backends/torch/encoder_backend.py",
         "norm = float(torch.nn.utils.clip_grad_norm_([p for _, p in named], limit))",
         "self.optimizer.step()\n            "
         "norm = float(torch.nn.utils.clip_grad_norm_([p for _, p in named], limit))",
         "Adam steps before the clip: it takes the unclipped gradient",
         "encoder step", TRAINER_TESTS),
    glue("elbo_rates_not_passed", "backends/torch/encoder_backend.py",
         "terms = elbo_terms(packed, sample, g.D, g.phi, g.r, rates)",
         "terms = elbo_terms(packed, sample, g.D, g.phi, g.r)",
         "the ELBO with the rates c at 1 (the conditional rates computed, not passed)",
         "encoder step", TRAINER_TESTS),
    glue("loss_of_last_group_only", "backends/torch/encoder_backend.py",
         "loss, kl = loss + part_loss, kl + part_kl",
         "loss, kl = part_loss, part_kl",
         "the reported loss and KL of the last group of documents only", "encoder step",
         TRAINER_TESTS),
    glue("conditional_rates_own_layer", "backends/torch/elbo.py",
         "above = top if t == T else theta[t].sum(dim=1)",
         "above = top if t == T else theta[t - 1].sum(dim=1)",
         "c^(t+1)'s conditional mean with the layer's own theta^(t) in the shape",
         "ELBO's prior rates", TRAINER_TESTS),
    glue("draw_ignores_generator", "backends/torch/encoder.py",
         "return weibull_rsample(shape, scale, generator=generator)",
         "return weibull_rsample(shape, scale)",
         "the encoder's draws from torch's global generator, not the step's",
         "encoder draws", ENCODER_TESTS),
    classifier("cross_entropy_without_xi", "backends/torch/encoder_backend.py",
               "else loss + xi * cross_entropy",
               "else loss + cross_entropy",
               "L_g + L_c: the cross-entropy's weight xi dropped beside the ELBO",
               "classifier loss"),
    classifier("softmax_reads_the_draw", "backends/torch/encoder_backend.py",
               "thetas = (self.encoder.sample(packed, g.phi, mean=True, output=output).theta",
               "thetas = (self.encoder.sample(packed, g.phi, generator=generator, "
               "output=output).theta",
               "the softmax trained on a draw's theta, not the mean path it predicts from",
               "classifier loss"),
    classifier("hidden_not_log_compressed", "backends/torch/encoder.py",
               "parts.append(torch.log1p(hidden))",
               "parts.append(hidden)",
               "the softmax reads h^(1) raw instead of ln(1 + h^(1))", "classifier input"),
    classifier("loss_scale_ignored", "backends/torch/encoder_backend.py",
               "(loss * loss_scale).backward()",
               "loss.backward()",
               "the gradient of the loss per document, not per unit (the clip sees another "
               "norm)", "classifier loss"),
    classifier("validation_keeps_the_last_epoch", "inference/hybrid.py",
               "if self.best is None or accuracy > max(self.validation_curve[:-1]):",
               "if True:",
               "every epoch replaces the kept state: the last, not the best", "model selection"),
    classifier("patience_ignored", "inference/hybrid.py",
               "elif v.patience is not None and epoch - self.best[0] >= int(v.patience):",
               "elif False:",
               "the run never stops early", "model selection"),
    classifier("validation_split_leaks", "modes/supervised.py",
               "fitted = split[0]",
               "fitted = np.arange(training.data.n_docs)",
               "the held-out documents are fitted too", "model selection"),
    classifier("classes_sorted_as_strings", "classifier.py",
               "classes = np.unique(np.asarray(known))",
               "classes = np.unique(np.asarray(known).astype(str))",
               "integer labels sorted and returned as strings ('10' before '2')",
               "labels"),
]

