"""The glue of the minibatch and hybrid inference (issue 35, item 4): what the trainer, the
global updates and the TLASGR step hand each other.  The formulas have tests of their own
(test_elbo, test_encoder, test_tlasgr); these check the wiring, each with an assertion that a
one-line mistake breaks (studies/mutation/mutations.py, origin "issue 35", lists them).

1. With the globals held fixed, HybridTrainer's steps lower the negative ELBO.
2. ``HybridTrainer.step``'s loss and KL are ``elbo_terms``' for the step's draw (reproduced
   from its seed, the groups of documents drawing in turn; the rates c written out here), its
   gradient is that loss's alone, clipped before Adam's step; the encoder then reads the
   chain's globals.
3. ``WeibullConvEncoder.sample`` is random, seeded by its generator, with the Weibull means.
4. What reaches the TLASGR step (recorded on its way; minibatch Gibbs and the hybrid's two
   ``global_statistics``): rho = N / B, the counts averaged over the collected sweeps (the
   D counts' total is the batch's units), r's tables and rate scaled by rho, each eta.
5. TLASGR where eta V F is comparable to rho n~. (where a lost eta shows): a step with zero
   normals against the formula, alone and through the global update; the stationary mean is
   (rho n + eta) / (rho n. + eta V F).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import random_token_documents

from cpgbn.inference import hybrid, updates
from cpgbn.inference.batches import Batch
from cpgbn.inference.minibatch import MinibatchGibbs
from cpgbn.inference.state import GlobalParameters, Hyperparameters
from cpgbn.inference.streams import ENCODER_DRAW, derived_seed
from cpgbn.inference.tlasgr import TLASGRSchedule, TLASGRState, tlasgr_step
from cpgbn.inference.updates import (AccumulateStatistics, SufficientStatistics,
                                     TLASGRGlobalUpdate)
from cpgbn.layers.batches import subset_cells
from cpgbn.simulate import sample_corpus

torch = pytest.importorskip("torch")

from cpgbn.backends.torch.elbo import elbo_terms, expected_kernel_counts  # noqa: E402
from cpgbn.backends.torch.encoder import WeibullConvEncoder  # noqa: E402
from cpgbn.backends.torch.packed import pack, pack_tokens  # noqa: E402
from cpgbn.backends.torch.weibull import weibull_mean  # noqa: E402

# numba (the local Gibbs sweeps) on one thread only in the tests that sweep: its spinning
# threads slow torch down outside pytest-xdist (conftest sets OMP_WAIT_POLICY there)
pytestmark = pytest.mark.usefixtures("torch_one_thread")

V, F, LAYERS = 12, 2, (3, 2)
#: eta^(1) != eta^(2), so that a parameter stepped with the other layer's eta shows; e0, f0
#: and gamma0, c0 away from 1 so that the rates' and r's formulas see each of them
HYPER = Hyperparameters(eta=(0.3, 0.2), e0=2.0, f0=4.0, gamma0=1.3, c0=0.8)


def planted(n_docs=24, seed=0):
    """A small corpus drawn from the model (observed counts: every cell's count is split over
    its candidates, so the kernel counts of a sweep add up to the batch's units exactly) and its
    planted globals."""
    g, _, _, data = sample_corpus(LAYERS, V, F, np.full(n_docs, 10), HYPER, seed=seed)
    assert data.cell_count.sum() > 100
    return g, data


def whole(data):
    return Batch(data, np.arange(data.n_docs))


# ---------------------------------------------------------------------- 1. the loss goes down
class FrozenGlobals:
    """A global update that changes nothing: the encoder trains against fixed globals."""

    def apply(self, backend, globals_, stats, *, hyper, sweep):
        pass


def test_trainer_lowers_the_negative_elbo_with_the_globals_fixed():
    """60 steps of the trainer on the whole planted corpus, its globals held at the planted
    ones: the median reported loss of the last 10 steps is below 0.8 times that of the first
    10 (measured: 220 -> 122; with the optimiser's step left out 261 -> 277, with the
    gradient's sign flipped 1400 -> 1e11).  Medians, because a draw far into a Weibull tail
    (shape < 1) now and then doubles one step's loss."""
    g, data = planted()
    trainer = hybrid.HybridTrainer(LAYERS, V, F, HYPER, n_docs_total=data.n_docs, seed=0,
                                   globals_=g, global_statistics="encoder",
                                   learning_rate=0.01)
    trainer.update = FrozenGlobals()
    losses = [trainer.step(i, whole(data)).loss for i in range(1, 61)]
    assert np.isfinite(losses).all()
    first, last = np.median(losses[:10]), np.median(losses[-10:])
    assert last < 0.8 * first, f"median loss {first:.1f} -> {last:.1f}"
    np.testing.assert_array_equal(trainer.host_globals().D, g.D)   # held fixed indeed


# ---------------------------------------------------------------------- 2. loss = elbo_terms
def rates_by_hand(theta, r, e0, f0):
    """c^(t+1)_j = (e0 + sum_k theta^(t+1)_jk) / (f0 + sum_k theta^(t)_jk), sum_k r_k at the
    top (inference notes, section 3; elbo.conditional_rates), float64."""
    T = len(theta)
    sums = [t.detach().double().sum(dim=1) for t in theta]
    top = torch.as_tensor(r, dtype=torch.float64).sum()
    return [(e0 + (top if t == T - 1 else sums[t + 1])) / (f0 + sums[t]) for t in range(T)]


@dataclass
class Reproduced:
    loss: float
    kl: float
    grads: dict
    draws: list          # (packed group, sample) per group


def reproduce_step(encoder, batch, groups, seed, globals_, e0, f0):
    """What step i's encoder part should compute, on a copy of the encoder before the step:
    one generator seeded by the step's seed, the groups drawing from it in turn, each group's
    negative ELBO (rates written out by hand) summed and divided by the batch's size."""
    encoder = copy.deepcopy(encoder)
    encoder.zero_grad(set_to_none=True)
    generator = torch.Generator().manual_seed(seed)
    loss = kl = 0.0
    draws = []
    for docs in groups:
        packed = pack(batch, None if len(groups) == 1 else docs)
        sample = encoder.sample(packed, globals_.phi, generator=generator)
        rates = rates_by_hand(sample.theta, globals_.r, e0, f0)
        terms = elbo_terms(packed, sample, globals_.D, globals_.phi, globals_.r,
                           [c.to(sample.w.dtype) for c in rates])
        part = terms.negative_elbo.sum() / batch.n_docs
        part.backward()
        loss += float(part.detach())
        kl += float(torch.stack(terms.kl).sum().detach()) / batch.n_docs
        draws.append((packed, sample))
    grads = {name: p.grad.clone() for name, p in encoder.named_parameters()}
    return Reproduced(loss, kl, grads, draws)


def snapshot(trainer):
    """Copies of the globals the encoder sees before a step."""
    g = trainer.globals
    return GlobalParameters(g.D.clone(), [p.clone() for p in g.phi], g.r.clone())


@pytest.mark.usefixtures("numba_one_thread")
@pytest.mark.parametrize("statistics", ["gibbs", "encoder"])
def test_reported_loss_and_gradient_are_the_elbo_of_the_steps_draw(monkeypatch, statistics):
    """Three steps (the globals moving between them): each step's loss and KL equal the
    reproduction's to float32 rounding, its gradient equals the reproduction's (no clip here),
    and after the step the encoder's globals are the chain's.  With "gibbs" the documents go
    in several groups (ENCODER_CHUNK_POSITIONS lowered), with "encoder" in one."""
    monkeypatch.setattr(hybrid, "ENCODER_CHUNK_POSITIONS", 50)
    g, data = planted()
    trainer = hybrid.HybridTrainer(LAYERS, V, F, HYPER, n_docs_total=200, seed=5,
                                   global_statistics=statistics, local_sweeps=(1, 1),
                                   max_grad_norm=None, learning_rate=0.01)
    batch = whole(data)
    groups = (hybrid.document_groups(data.doc_positions, 50) if statistics == "gibbs"
              else [np.arange(data.n_docs)])
    assert len(groups) >= (3 if statistics == "gibbs" else 1)
    for i in (1, 2, 3):
        before = snapshot(trainer)
        want = reproduce_step(trainer.encoder, data, groups,
                              derived_seed(5, ENCODER_DRAW, i), before, HYPER.e0, HYPER.f0)
        report = trainer.step(i, batch)
        assert report.n_docs == data.n_docs
        assert report.loss == pytest.approx(want.loss, rel=2e-5)
        assert report.kl == pytest.approx(want.kl, rel=2e-5)
        for name, p in trainer.encoder.named_parameters():
            torch.testing.assert_close(p.grad, want.grads[name], rtol=1e-4, atol=1e-6,
                                       msg=f"gradient of {name} at step {i}")
        # the encoder's next step sees the globals of the chain's last state
        chain = trainer.to_arrays()
        np.testing.assert_array_equal(trainer.host_globals().D, chain["D"])
        np.testing.assert_array_equal(trainer.host_globals().phi[0], chain["phi_0"])
        assert not np.array_equal(chain["D"], before.D.numpy())   # the globals moved


def test_the_first_step_is_adams_from_the_clipped_gradient():
    """With the gradient's norm clipped far below its value (max_grad_norm = 1e-6), the step
    leaves the clipped gradient on the encoder (norm 1e-6) and moves every weight by Adam's
    first update from it, -lr g / (|g| + eps) (bias-corrected moments g and g^2; eps = 1e-8 is
    then comparable to |g|): an unclipped gradient would move each weight by about -lr sign(g)."""
    g, data = planted()
    trainer = hybrid.HybridTrainer(LAYERS, V, F, HYPER, n_docs_total=data.n_docs, seed=1,
                                   globals_=g, global_statistics="encoder",
                                   learning_rate=0.01, max_grad_norm=1e-6)
    trainer.update = FrozenGlobals()
    before = {name: p.detach().clone() for name, p in trainer.encoder.named_parameters()}
    trainer.step(1, whole(data))
    grads = {name: p.grad for name, p in trainer.encoder.named_parameters()}
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x)
                                                 for x in grads.values()]))
    assert float(norm) == pytest.approx(1e-6, rel=1e-3)
    for name, p in trainer.encoder.named_parameters():
        moved = p.detach() - before[name]
        torch.testing.assert_close(moved, -0.01 * grads[name] / (grads[name].abs() + 1e-8),
                                   rtol=1e-3, atol=1e-7, msg=name)


# ---------------------------------------------------------------------- 3. the encoder's draws
def test_encoder_draws_are_seeded_random_and_have_the_weibull_means():
    """Two generators give different draws, one seed the same draws; over 4000 draws the top
    layer's mean is the Weibull mean of its q (``sample(mean=True)``'s theta^(T)), and w's mean
    given the draw of theta^(2) is the Weibull mean of its drawn shape (w's shape depends on
    theta^(2), so the mean path's w, the Weibull mean at E[theta^(2)], is not E[w]); with one
    layer w's mean is the mean path's.  Every |z| < 5, z from the draws' standard errors."""
    V_, F_ = 11, 3
    tokens, offsets = random_token_documents([4, 7, 3], V_, 5)
    batch = pack_tokens(tokens, offsets, F_)
    phi = [np.random.default_rng(0).dirichlet(np.ones(4), 3).T]

    def encoder(layers):
        torch.manual_seed(0)
        return WeibullConvEncoder(V_, layers, F_).double()

    enc = encoder((4, 3))
    with torch.no_grad():
        out = enc(batch)

        a, b, a2 = (enc.sample(batch, phi, output=out,
                               generator=torch.Generator().manual_seed(seed))
                    for seed in (1, 2, 1))
        for x, y, x2 in zip([a.w] + a.theta, [b.w] + b.theta, [a2.w] + a2.theta):
            assert (x != y).all()
            torch.testing.assert_close(x, x2, rtol=0, atol=0)

        def z_scores(values, target):
            values = torch.stack(values)
            return (values.mean(0) - target) / (values.std(0) / len(values) ** 0.5)

        n = 4000
        generator = torch.Generator().manual_seed(3)
        draws = [enc.sample(batch, phi, output=out, generator=generator) for _ in range(n)]
        mean = enc.sample(batch, phi, output=out, mean=True)
        z_top = z_scores([d.theta[1] for d in draws], mean.theta[1])
        z_w = z_scores([d.w - weibull_mean(d.w_shape, d.w_scale) for d in draws], 0.0)
        single = encoder((4,))
        draws1 = [single.sample(batch, [], generator=generator).w for _ in range(n // 2)]
        z_w1 = z_scores(draws1, single.sample(batch, [], mean=True).w)
    for name, z in (("theta^(2)", z_top), ("w | theta^(2)", z_w), ("w (T = 1)", z_w1)):
        assert z.abs().max() < 5, f"{name}: max |z| {z.abs().max():.1f}"


# ---------------------------------------------------------------------- 4. what reaches TLASGR
class Recording:
    """Records, by monkeypatching, what reaches the TLASGR update: every call of
    ``tlasgr_step`` (parameter shape, counts, rho, eta), r's draw (shape and rate, through a
    proxy of the backend), the statistics handed to ``TLASGRGlobalUpdate.apply``, and the
    per-sweep statistics that ``AccumulateStatistics`` averages."""

    def __init__(self, monkeypatch):
        self.steps, self.r_draws, self.applied, self.sweeps = [], [], [], []
        real_step, real_apply = updates.tlasgr_step, TLASGRGlobalUpdate.apply
        real_accumulate = AccumulateStatistics.apply
        record = self

        def step(phi, counts, state, **kw):
            record.steps.append(dict(shape=tuple(phi.shape), counts=host(counts),
                                     rho=kw["rho"], eta=kw["eta"]))
            return real_step(phi, counts, state, **kw)

        class Proxy:
            def __init__(self, backend):
                self._backend = backend

            def __getattr__(self, name):
                return getattr(self._backend, name)

            def draw_gamma_vector(self, shape, rate, stream, out=None):
                record.r_draws.append(dict(shape=host(shape), rate=float(rate)))
                return self._backend.draw_gamma_vector(shape, rate, stream, out=out)

        def apply(update, backend, g, stats, *, hyper, sweep):
            record.applied.append(dict(n_docs=stats.n_docs, n_total=update.n_docs_total))
            return real_apply(update, Proxy(backend), g, stats, hyper=hyper, sweep=sweep)

        def accumulate(kept, backend, g, stats, *, hyper, sweep):
            record.sweeps.append(dict(
                kernel=host(backend.total_kernel_counts(stats.kernel_counts)),
                phi=[host(c) for c in stats.phi_counts], r_tables=host(stats.r_tables),
                r_rate=float(stats.r_rate)))
            return real_accumulate(kept, backend, g, stats, hyper=hyper, sweep=sweep)

        monkeypatch.setattr(updates, "tlasgr_step", step)
        monkeypatch.setattr(TLASGRGlobalUpdate, "apply", apply)
        monkeypatch.setattr(AccumulateStatistics, "apply", accumulate)


def host(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy().copy()
    return np.array(x, dtype=np.float64)


def check_tlasgr_inputs(record, step, *, rho, units):
    """The common checks of one step's TLASGR inputs: D then Phi^(2), rho = N / B each, eta^(1)
    and eta^(2), the D counts' total the batch's units."""
    d_call, phi_call = record.steps[2 * step], record.steps[2 * step + 1]
    assert d_call["shape"] == (V, F, LAYERS[0]) and phi_call["shape"] == LAYERS
    assert d_call["rho"] == phi_call["rho"] == rho
    assert (d_call["eta"], phi_call["eta"]) == HYPER.eta
    assert d_call["counts"].sum() == pytest.approx(units, rel=1e-9)
    # Phi^(2)'s counts are layer 1's tables, each seating one unit at least
    assert 0 < phi_call["counts"].sum() <= units
    return d_call, phi_call


def check_r_draw(record, step, r_tables, r_rate, rho, rel=1e-12):
    """r drawn from Gam(gamma0 / K_T + rho l_.k, 1 / (c0 + rho sum_j q_j))."""
    draw = record.r_draws[step]
    np.testing.assert_allclose(draw["shape"], HYPER.gamma0 / LAYERS[-1] + rho * r_tables,
                               rtol=1e-12)
    assert draw["rate"] == pytest.approx(HYPER.c0 + rho * r_rate, rel=rel)


def check_tables_below_counts(phi_counts, r_tables):
    """r's tables of unit k seat the units split onto column k of Phi^(2), one at least."""
    column = phi_counts.sum(axis=0)
    assert (r_tables <= column + 1e-9).all() and (r_tables[column > 0] >= 1).all()


@pytest.mark.usefixtures("numba_one_thread")
@pytest.mark.parametrize("algorithm", ["minibatch", "hybrid"])
def test_tlasgr_gets_the_average_of_the_collected_sweeps_scaled_by_n_over_b(monkeypatch,
                                                                            algorithm):
    """Minibatch Gibbs and the hybrid with ``global_statistics="gibbs"``: two steps on
    batches of 8 out of N = 400 (rho = 50), 1 burn-in and 3 collected sweeps.  What reaches
    the step is the average of the three collected sweeps (their kernel counts placed at the
    batch's words; the total is the batch's units, not three times them), r's draw scales the
    averaged tables and rate by rho."""
    g, data = planted()
    record = Recording(monkeypatch)
    kw = dict(n_docs_total=400, seed=2, globals_=g)
    if algorithm == "minibatch":
        chain = MinibatchGibbs(LAYERS, V, F, HYPER, burn_in=1, collect=3, **kw)
    else:
        chain = hybrid.HybridTrainer(LAYERS, V, F, HYPER, local_sweeps=(1, 3), **kw)
    for step, docs in enumerate([np.arange(8), np.arange(8, 16)]):
        batch = subset_cells(data, docs)
        chain.step(step + 1, Batch(batch, docs))
        units = float(batch.cell_count.sum())
        sweeps = record.sweeps[3 * step: 3 * step + 3]
        assert len(record.sweeps) == 3 * (step + 1)            # the collected sweeps only
        assert record.applied[step] == dict(n_docs=8, n_total=400)
        d_call, phi_call = check_tlasgr_inputs(record, step, rho=50.0, units=units)
        words = np.unique(batch.cell_word)
        mean_kernel = np.mean([s["kernel"] for s in sweeps], axis=0)
        np.testing.assert_allclose(d_call["counts"][words], mean_kernel, rtol=1e-12)
        assert not np.delete(d_call["counts"], words, axis=0).any()
        for s in sweeps:
            assert s["kernel"].sum() == units                 # each sweep splits every unit
            check_tables_below_counts(s["phi"][0], s["r_tables"])
        np.testing.assert_allclose(phi_call["counts"], np.mean([s["phi"][0] for s in sweeps],
                                                               axis=0), rtol=1e-12)
        check_r_draw(record, step, np.mean([s["r_tables"] for s in sweeps], axis=0),
                     np.mean([s["r_rate"] for s in sweeps]), rho=50.0)
    assert len(record.steps) == 4 and len(record.r_draws) == 2


def test_tlasgr_gets_the_encoders_statistics_scaled_by_n_over_b(monkeypatch):
    """The hybrid with ``global_statistics="encoder"``: the D counts that reach the step are
    E[n | w, D] at the step's own draw (reproduced from its seed; their total is the batch's
    units), r's rate is sum_j q^(T+1)_j with q from the draw's conditional rates (q^(1) = 1,
    q^(t+1) = ln(1 + q^(t) / c^(t+1))), and both reach TLASGR scaled by rho = N / B."""
    g, data = planted()
    record = Recording(monkeypatch)
    trainer = hybrid.HybridTrainer(LAYERS, V, F, HYPER, n_docs_total=400, seed=3, globals_=g,
                                   global_statistics="encoder")
    for step, docs in enumerate([np.arange(8), np.arange(8, 16)]):
        batch = subset_cells(data, docs)
        before = snapshot(trainer)
        want = reproduce_step(trainer.encoder, batch, [np.arange(8)],
                              derived_seed(3, ENCODER_DRAW, step + 1), before, HYPER.e0,
                              HYPER.f0)
        trainer.step(step + 1, Batch(batch, docs))
        (packed, sample), = want.draws
        d_call, phi_call = check_tlasgr_inputs(record, step, rho=50.0,
                                               units=float(batch.cell_count.sum()))
        np.testing.assert_allclose(d_call["counts"],
                                   host(expected_kernel_counts(packed, sample.w, before.D)),
                                   rtol=1e-6, atol=1e-9)
        q = torch.ones(8, dtype=torch.float64)
        for c in rates_by_hand(sample.theta, before.r, HYPER.e0, HYPER.f0):
            q = torch.log1p(q / c)
        r_rate = float(q.sum())
        draw = record.r_draws[step]
        r_tables = (draw["shape"] - HYPER.gamma0 / LAYERS[-1]) / 50.0
        np.testing.assert_allclose(r_tables, np.round(r_tables), atol=1e-9)   # whole tables
        check_tables_below_counts(phi_call["counts"], r_tables)
        # the trainer's rates are float32 (the draw's dtype), these float64
        check_r_draw(record, step, r_tables, r_rate, rho=50.0, rel=1e-6)
    assert len(record.steps) == 4 and len(record.r_draws) == 2


# ---------------------------------------------------------------------- 5. TLASGR, eta V F ~ rho n
#: rho n~. per column 6, 12, 24, 90 against eta V F = 0.5 * 30 = 15: the preconditioner's
#: floor eta V F is active in the first two columns, the prior and the data weigh alike.
RHO, ETA, VF_SHAPE = 3.0, 0.5, (10, 3)


def step_by_hand(phi, counts, precision, i, schedule, rho=RHO, eta=ETA):
    """Inference notes, section 6, with the normals at zero: M_i = (1 - varrho_i) M_{i-1} +
    varrho_i rho n~._k, varrho_i = (tau_FR + i)^-kappa_FR (capped at 1), eps_i = eps0
    ((tau0 + i) / (tau0 + 1))^-kappa0, phi + eps_i / max(M_k, eta n) [(rho n~ + eta) -
    (rho n~._k + eta n) phi] (n = V F entries per column); no entry is clipped here."""
    flat, n = phi.reshape(-1, phi.shape[-1]), counts.reshape(-1, phi.shape[-1])
    n_rows = flat.shape[0]
    varrho = min(1.0, (schedule.tau_fr + i) ** -schedule.kappa_fr)
    precision = (1 - varrho) * precision + varrho * rho * n.sum(0)
    eps = schedule.eps0 * ((schedule.tau0 + i) / (schedule.tau0 + 1)) ** -schedule.kappa0
    drift = rho * n + eta - (rho * n.sum(0) + eta * n_rows) * flat
    new = flat + eps / np.maximum(precision, eta * n_rows) * drift
    assert (new > 0).all()
    return new.reshape(phi.shape), precision


def comparable_counts(rng):
    totals = np.array([2, 4, 8, 30])                     # times rho: 6, 12, 24, 90
    return np.stack([rng.multinomial(t, np.full(30, 1 / 30)) for t in totals], axis=1) \
        .reshape(*VF_SHAPE, 4).astype(float)


def test_tlasgr_step_without_noise_is_the_formula():
    """Two steps (M initialised, then averaged; eps_1 then eps_2) of ``tlasgr_step`` with the
    normals at zero equal the formula written out, to rounding.  (The drift's term on phi is
    also what the projection onto the simplex makes it: a multiple of phi added to the step is
    projected away, so an error in that coefficient alone cannot show.)"""
    rng = np.random.default_rng(0)
    schedule = TLASGRSchedule(eps0=0.3)
    phi = rng.dirichlet(np.full(30, 2.0), 4).T.reshape(*VF_SHAPE, 4)
    state, precision = TLASGRState.initial(4), np.zeros(4)
    for i in (1, 2):
        counts = comparable_counts(rng)
        want, precision = step_by_hand(phi, counts, precision, i, schedule)
        phi, state = tlasgr_step(phi, counts, state, rho=RHO, eta=ETA,
                                 normal=np.zeros((30, 4)), schedule=schedule)
        np.testing.assert_allclose(phi, want, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(state.precision, precision, rtol=1e-12)
        assert state.n_updates == i


class NoNoiseHost:
    """A host backend for TLASGRGlobalUpdate whose normals are zeros and whose r draw is the
    gamma's mean shape / rate: the update becomes a deterministic function to check."""

    column_block = 16

    @staticmethod
    def as_float(x):
        return np.asarray(x, dtype=np.float64)

    to_numpy = to_backend = staticmethod(lambda x, dtype: np.asarray(x, dtype=dtype))
    empty_like = staticmethod(np.empty_like)
    total_kernel_counts = staticmethod(lambda counts: counts)

    @staticmethod
    def column_normals(n_rows, n_columns, key):
        return lambda lo, hi: np.zeros((n_rows, hi - lo))

    @staticmethod
    def draw_gamma_vector(shape, rate, stream, out=None):
        return np.asarray(shape) / rate


def test_tlasgr_global_update_without_noise_is_the_formula():
    """One TLASGRGlobalUpdate step with zero normals and r at its conditional mean: D with
    eta^(1) and Phi^(2) with eta^(2), both with rho = N / B; r = (gamma0 / K_T + rho l_.k) /
    (c0 + rho sum_j q_j)."""
    rng = np.random.default_rng(1)
    hyper = Hyperparameters(eta=(ETA, 0.9), gamma0=1.3, c0=0.8)
    n_total, n_batch = 30, 10                        # rho = 3
    D = rng.dirichlet(np.full(30, 2.0), 4).T.reshape(*VF_SHAPE, 4)
    phi = rng.dirichlet(np.full(4, 2.0), 3).T
    g = GlobalParameters(D.copy(), [phi.copy()], np.ones(3))
    stats = SufficientStatistics(comparable_counts(rng), [rng.poisson(2.0, (4, 3)) + 0.5],
                                 np.array([1.0, 4.0, 2.5]), 6.5, n_batch)
    schedule = TLASGRSchedule(eps0=0.3)
    TLASGRGlobalUpdate(n_total, 0, schedule=schedule).apply(NoNoiseHost(), g, stats,
                                                            hyper=hyper, sweep=1)
    want_D, _ = step_by_hand(D, stats.kernel_counts, np.zeros(4), 1, schedule)
    want_phi, _ = step_by_hand(phi, stats.phi_counts[0], np.zeros(3), 1, schedule, eta=0.9)
    np.testing.assert_allclose(g.D, want_D, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g.phi[0], want_phi, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g.r, (1.3 / 3 + RHO * stats.r_tables) / (0.8 + RHO * 6.5),
                               rtol=1e-12)


def test_tlasgr_stationary_mean_is_the_conditional_posterior_mean():
    """300 independent copies of one 10-entry column, 400 steps each with fixed counts n (two
    entries without counts) at a constant step: the time average after 100 steps of burn-in
    is (rho n + eta) / (rho n. + eta n) within 5 standard errors (from the copies' spread),
    and many standard errors from rho n / rho n. (eta dropped).  eta n = 50 > rho n. = 30:
    the prior weighs more than the data, and the preconditioner's floor is active."""
    rng = np.random.default_rng(2)
    n = np.array([0, 0, 1, 1, 2, 2, 3, 2, 1, 3], dtype=float)
    rho, eta, copies = 2.0, 5.0, 300
    target = (rho * n + eta) / (rho * n.sum() + eta * len(n))
    phi = rng.dirichlet(np.full(len(n), 5.0), copies).T
    counts = np.repeat(n[:, None], copies, axis=1)
    state = TLASGRState.initial(copies)
    schedule = TLASGRSchedule(eps0=0.1, kappa0=0.0)
    total = np.zeros_like(phi)
    for i in range(400):
        phi, state = tlasgr_step(phi, counts, state, rho=rho, eta=eta, rng=rng,
                                 schedule=schedule)
        if i >= 100:
            total += phi
    averages = total / 300                                    # one per copy: independent
    error = averages.std(axis=1, ddof=1) / np.sqrt(copies)
    z = (averages.mean(axis=1) - target) / error
    assert np.abs(z).max() < 5, f"z {np.round(z, 1)}"
    without_eta = n / n.sum()
    assert (np.abs(without_eta - target) / error).max() > 50
