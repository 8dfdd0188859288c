"""Minibatch inference (issue 25): pluggable global updates, minibatch Gibbs with TLASGR, the
hybrid encoder + TLASGR mode, the shared training loop (streaming blocks, checkpoints and exact
resume, the non-finite-loss stop)."""
from __future__ import annotations

import gzip
import tracemalloc

import numpy as np
import pytest

from cpgbn.backends.numba.position_store import as_dense
from cpgbn.errors import CPGBNInputError, DataFileError
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.minibatch import MinibatchGibbs, fit_minibatch_gibbs
from cpgbn.inference.state import Hyperparameters
from cpgbn.inference.batches import (Batch, ConvDataBlocks, Minibatches, TextFileBlocks,
                                     text_encoder)
from cpgbn.inference.checkpoint import read_checkpoint
from cpgbn.inference.training import NonFiniteLossError
from cpgbn.inference.communicator import SingleProcess
from cpgbn.inference.updates import (DistributedGlobalUpdate, GibbsGlobalUpdate,
                                     TLASGRGlobalUpdate)
from cpgbn.simulate import sample_corpus
from cpgbn.text.readers import read_line_blocks, read_lines
from cpgbn.text.vocabulary import Vocabulary

V, F = 12, 2


@pytest.fixture(autouse=True)
def _one_thread(numba_one_thread):
    """One numba thread (conftest)."""


def small_corpus(n_docs=40, layers=(3, 2), seed=0):
    hyper = Hyperparameters(eta=(0.3, 0.3), e0=1.0, f0=1.0)
    _, _, _, data = sample_corpus(layers, V, F, np.full(n_docs, 8), hyper, seed=seed)
    return data, hyper


def on_simplex(a, axis_sum):
    return (a >= 0).all() and np.allclose(a.sum(axis=axis_sum), 1.0, atol=1e-5)


# ---------------------------------------------------------------------- global updates
def test_distributed_wrapper_on_one_worker_is_the_exact_chain():
    """Summing the statistics through a communicator (the kernel counts as one (V, F, K)
    total instead of per-thread slabs) and broadcasting leaves the exact chain unchanged."""
    data, hyper = small_corpus()
    chains = []
    for update in (None, DistributedGlobalUpdate(GibbsGlobalUpdate(), SingleProcess())):
        sampler = GibbsSampler(data, hyper, 3, global_update=update)
        state = sampler.initial_state((3, 2), V)
        for _ in range(3):
            sampler.sweep(state)
        chains.append(state)
    a, b = chains
    np.testing.assert_array_equal(a.globals.D, b.globals.D)
    np.testing.assert_array_equal(a.globals.phi[0], b.globals.phi[0])
    np.testing.assert_array_equal(a.globals.r, b.globals.r)
    np.testing.assert_array_equal(a.theta[1], b.theta[1])


def test_a_wrapped_update_saves_and_restores_the_update_it_wraps():
    """A checkpoint of a distributed update is its inner update's: a minibatch-Gibbs chain
    with its TLASGR update wrapped resumes to the state of the unwrapped one."""
    data, hyper = small_corpus(n_docs=30)
    chain = MinibatchGibbs((3, 2), V, F, hyper, n_docs_total=data.n_docs, seed=1, burn_in=1,
                           collect=1)
    for i in (1, 2):
        chain.step(i, Batch(data, np.arange(data.n_docs)))
    inner = chain.update.to_arrays()
    assert inner and all(k.startswith("tlasgr_") for k in inner)
    wrapped = DistributedGlobalUpdate(chain.update, SingleProcess())
    saved = wrapped.to_arrays()
    assert saved.keys() == inner.keys()
    fresh = TLASGRGlobalUpdate(data.n_docs, 1)
    DistributedGlobalUpdate(fresh, SingleProcess()).load_arrays(saved, 2)
    for key, value in fresh.to_arrays().items():
        np.testing.assert_array_equal(value, inner[key])


def test_distributed_sums_statistics_across_workers():
    """Two workers, each with half of the documents: the root's update sees the sums of the
    two halves' statistics (a recording update checks it) and both end with its globals."""

    class Recorder:
        def __init__(self):
            self.seen = []

        def apply(self, backend, g, stats, *, hyper, sweep):
            self.seen.append(stats)
            g.D = g.D * 0 + 1.0 / (g.D.shape[0] * g.D.shape[1])   # a recognisable new value

    class TwoWorkers:
        """Worker statistics are gathered first (a sequential stand-in for an all-reduce)."""

        rank, world_size = 0, 2

        def __init__(self, other_stats, is_root):
            self.other, self.is_root, self.calls = other_stats, is_root, 0

        def sum(self, array):
            partner = self.other[self.calls]
            self.calls += 1
            return array + partner

        def broadcast(self, array):
            return array

    data, hyper = small_corpus()
    half = data.n_docs // 2
    from cpgbn.layers.batches import subset_cells
    parts = [subset_cells(data, np.arange(half)), subset_cells(data, np.arange(half, data.n_docs))]

    # each worker's own statistics, as its local part produces them
    own = []
    for part in parts:
        recorder = Recorder()
        sampler = GibbsSampler(part, hyper, 5, global_update=recorder)
        state = sampler.initial_state((3, 2), V)
        sampler.sweep(state)
        s = recorder.seen[0]
        counts = sampler.backend.total_kernel_counts(s.kernel_counts).copy()
        # in the order of the update's calls: the largest count (which decides the kernel
        # counts' dtype), the counts, Phi's, r's tables and the exact rate's bins, n_docs
        own.append([np.array(counts.max()), counts, s.phi_counts[0].copy(), s.r_tables.copy(),
                    s.r_rate.bins.copy(), np.array(s.n_docs)])
    recorder = Recorder()
    comm = TwoWorkers(own[1], is_root=True)
    sampler = GibbsSampler(parts[0], hyper, 5,
                           global_update=DistributedGlobalUpdate(recorder, comm))
    state = sampler.initial_state((3, 2), V)
    sampler.sweep(state)
    seen = recorder.seen[0]
    np.testing.assert_array_equal(seen.kernel_counts[0], own[0][1] + own[1][1])
    np.testing.assert_array_equal(seen.phi_counts[0], own[0][2] + own[1][2])
    np.testing.assert_array_equal(seen.r_tables, own[0][3] + own[1][3])
    np.testing.assert_array_equal(seen.r_rate.bins, own[0][4] + own[1][4])
    assert seen.n_docs == data.n_docs
    assert np.allclose(state.globals.D, 1.0 / (V * F))


# ---------------------------------------------------------------------- minibatch Gibbs
def test_minibatch_gibbs_keeps_globals_on_the_simplex_and_learns():
    data, hyper = small_corpus(n_docs=60)
    result = fit_minibatch_gibbs(data, (3, 2), V, hyper, seed=0, n_steps=6, batch_size=20,
                                 burn_in=2, collect=2, progress=False)
    g = result.globals
    assert on_simplex(g.D.reshape(V * F, -1), 0)
    assert on_simplex(g.phi[0], 0)
    assert (g.r > 0).all() and np.isfinite(g.r).all()
    assert result.n_steps == 6 and np.isfinite(result.trace.loss).all()
    assert int(result.tlasgr["tlasgr_0_n_updates"]) == 6
    # the globals moved away from their start (the TLASGR steps did something)
    start = fit_minibatch_gibbs(data, (3, 2), V, hyper, seed=0, n_steps=1, batch_size=20,
                                burn_in=0, collect=1, progress=False)
    assert np.abs(start.globals.D - g.D).sum() > 0.1


def _interrupt_after(step):
    def hook(i, report):
        if i == step:
            raise KeyboardInterrupt
    return hook


def test_minibatch_gibbs_resume_is_exact(tmp_path):
    data, hyper = small_corpus(n_docs=50)
    kw = dict(seed=2, n_steps=5, batch_size=20, burn_in=1, collect=2, progress=False)
    whole = fit_minibatch_gibbs(data, (3, 2), V, hyper, **kw)
    with pytest.raises(KeyboardInterrupt):
        fit_minibatch_gibbs(data, (3, 2), V, hyper, checkpoint_dir=tmp_path / "ck",
                            checkpoint_every=2, on_step=_interrupt_after(3), **kw)
    assert read_checkpoint(tmp_path / "ck").step == 2
    resumed = fit_minibatch_gibbs(data, (3, 2), V, hyper, checkpoint_dir=tmp_path / "ck",
                                  checkpoint_every=2, resume=True, **kw)
    np.testing.assert_array_equal(whole.globals.D, resumed.globals.D)
    np.testing.assert_array_equal(whole.globals.phi[0], resumed.globals.phi[0])
    np.testing.assert_array_equal(whole.globals.r, resumed.globals.r)
    np.testing.assert_array_equal(whole.trace.loss, resumed.trace.loss)
    for key, value in whole.tlasgr.items():
        np.testing.assert_array_equal(value, resumed.tlasgr[key])


# ---------------------------------------------------------------------- hybrid
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("statistics", ["gibbs", "encoder"])
def test_hybrid_resume_is_exact_and_reproducible(tmp_path, statistics):
    from cpgbn.inference.hybrid import fit_hybrid

    data, hyper = small_corpus(n_docs=50)
    kw = dict(seed=4, n_steps=5, batch_size=20, learning_rate=0.01, progress=False,
              global_statistics=statistics, local_sweeps=(2, 2))
    whole = fit_hybrid(data, (3, 2), V, hyper, **kw)
    again = fit_hybrid(data, (3, 2), V, hyper, **kw)
    with pytest.raises(KeyboardInterrupt):
        fit_hybrid(data, (3, 2), V, hyper, checkpoint_dir=tmp_path / "ck", checkpoint_every=2,
                   on_step=_interrupt_after(3), **kw)
    resumed = fit_hybrid(data, (3, 2), V, hyper, checkpoint_dir=tmp_path / "ck",
                         checkpoint_every=2, resume=True, **kw)
    for other in (again, resumed):
        np.testing.assert_array_equal(whole.globals.D, other.globals.D)
        np.testing.assert_array_equal(whole.globals.phi[0], other.globals.phi[0])
        np.testing.assert_array_equal(whole.globals.r, other.globals.r)
        assert whole.encoder_weights.keys() == other.encoder_weights.keys()
        for name, value in whole.encoder_weights.items():
            np.testing.assert_array_equal(value, other.encoder_weights[name])
        np.testing.assert_array_equal(whole.trace.loss, other.trace.loss)
    assert on_simplex(whole.globals.D.reshape(V * F, -1), 0)
    assert on_simplex(whole.globals.phi[0], 0)
    assert np.isfinite(whole.trace.kl).all() and (np.asarray(whole.trace.kl) > 0).all()


def test_hybrid_non_finite_loss_stops_with_one_line_and_keeps_checkpoint(tmp_path):
    from cpgbn.inference.hybrid import HybridTrainer
    from cpgbn.inference.training import train

    data, hyper = small_corpus(n_docs=40)
    trainer = HybridTrainer((3, 2), V, F, hyper, n_docs_total=data.n_docs, seed=0)

    def diverge(i, report):
        if i == 2:   # a diverged encoder: its first-layer weights become NaN
            with torch.no_grad():
                trainer.encoder.conv1.weight.fill_(float("nan"))

    with pytest.raises(NonFiniteLossError) as info:
        train(trainer, Minibatches(ConvDataBlocks(data), 10, 0), 6,
              checkpoint_dir=tmp_path / "ck", checkpoint_every=1, progress=False,
              on_step=diverge)
    message = str(info.value)
    assert "step 3" in message and "\n" not in message and "step 2" in message
    saved = read_checkpoint(tmp_path / "ck")
    step, arrays = saved.step, saved.arrays
    assert step == 2 and len(arrays["trace_loss"]) == 2
    assert all(np.isfinite(v).all() for k, v in arrays.items() if k.startswith("encoder/"))


def test_hybrid_step_groups_documents_without_changing_the_gradient(monkeypatch):
    """The encoder's step accumulates the loss and gradient over groups of documents
    (ENCODER_CHUNK_POSITIONS); with the draws replaced by the (deterministic) mean path, the
    loss and every gradient equal those of the whole batch at once."""
    import cpgbn.inference.hybrid as hybrid

    data, hyper = small_corpus(n_docs=20)
    results = []
    for chunk in (10**9, 9):
        monkeypatch.setattr(hybrid, "ENCODER_CHUNK_POSITIONS", chunk)
        trainer = hybrid.HybridTrainer((3, 2), V, F, hyper, n_docs_total=data.n_docs, seed=0,
                                       max_grad_norm=None)
        sample = trainer.encoder.sample
        monkeypatch.setattr(trainer.encoder, "sample",
                            lambda packed, phi, generator=None, output=None: sample(
                                packed, phi, mean=True, output=output))
        report = trainer.step(1, Batch(data, np.arange(data.n_docs)))
        results.append((report, {k: p.grad.clone() for k, p in
                                  trainer.encoder.named_parameters()}))
    assert len(hybrid.document_groups(data.doc_positions, 9)) > 5
    (whole, grads_whole), (grouped, grads_grouped) = results
    assert grouped.loss == pytest.approx(whole.loss, rel=1e-6)
    assert grouped.kl == pytest.approx(whole.kl, rel=1e-6)
    for name, grad in grads_whole.items():
        torch.testing.assert_close(grads_grouped[name], grad, rtol=1e-4, atol=1e-6)


def test_document_groups_cover_the_batch_in_order():
    from cpgbn.inference.hybrid import document_groups

    positions = np.array([0, 3, 5, 20, 21, 22])
    groups = document_groups(positions, 5)
    assert [list(g) for g in groups] == [[0, 1], [2], [3, 4]]
    assert [list(g) for g in document_groups(positions, 1)] == [[0], [1], [2], [3], [4]]
    assert document_groups(np.array([0]), 4) == []


def test_hybrid_options_are_checked():
    from cpgbn.inference.hybrid import HybridTrainer

    data, hyper = small_corpus(n_docs=10)
    kw = dict(n_docs_total=10, seed=0)
    for bad, name in [(dict(global_statistics="mean"), "global_statistics"),
                      (dict(local_sweeps=(2, 0)), "local_sweeps"),
                      (dict(max_grad_norm=0.0), "max_grad_norm")]:
        with pytest.raises(CPGBNInputError, match=name):
            HybridTrainer((3, 2), V, F, hyper, **kw, **bad)


def test_hybrid_gibbs_statistics_are_minibatch_gibbs_globals():
    """With ``global_statistics="gibbs"`` the globals' chain is minibatch Gibbs with the same
    local sweeps and seed, whatever the encoder does (the encoder only reads the globals)."""
    from cpgbn.inference.hybrid import fit_hybrid

    data, hyper = small_corpus(n_docs=40)
    kw = dict(seed=3, n_steps=4, batch_size=20, progress=False)
    hybrid = fit_hybrid(data, (3, 2), V, hyper, local_sweeps=(2, 3), learning_rate=0.05, **kw)
    plain = fit_minibatch_gibbs(data, (3, 2), V, hyper, burn_in=2, collect=3, **kw)
    np.testing.assert_allclose(hybrid.globals.D, plain.globals.D, rtol=1e-6)
    np.testing.assert_allclose(hybrid.globals.phi[0], plain.globals.phi[0], rtol=1e-12)
    np.testing.assert_allclose(hybrid.globals.r, plain.globals.r, rtol=1e-12)
    assert not np.allclose(hybrid.globals.D, fit_hybrid(data, (3, 2), V, hyper,
                                                        local_sweeps=(2, 3),
                                                        global_statistics="encoder",
                                                        **kw).globals.D)


def test_encoder_features_and_gibbs_refinement():
    from cpgbn.inference.hybrid import encoder_features, fit_hybrid, refine_with_gibbs

    data, hyper = small_corpus(n_docs=30)
    fit = fit_hybrid(data, (3, 2), V, hyper, seed=0, n_steps=2, batch_size=15,
                     progress=False)
    mean = encoder_features(fit.encoder_config, fit.encoder_weights, fit.globals, data,
                            batch_size=7)
    again = encoder_features(fit.encoder_config, fit.encoder_weights, fit.globals, data)
    assert [m.shape for m in mean] == [(30, 3), (30, 2)]
    for a, b in zip(mean, again):   # deterministic and independent of the batch size
        np.testing.assert_allclose(a, b, rtol=1e-5)
    refined = refine_with_gibbs(fit.encoder_config, fit.encoder_weights, fit.globals, data,
                                hyper, n_sweeps=2, seed=0)
    assert [m.shape for m in refined] == [(30, 3), (30, 2)]
    assert all(np.isfinite(m).all() and (m > 0).all() for m in refined)

    # in blocks: block b's documents are refined as if alone, with the chain seeded by (seed, b)
    from cpgbn.layers.batches import subset_cells
    blocked = refine_with_gibbs(fit.encoder_config, fit.encoder_weights, fit.globals, data,
                                hyper, n_sweeps=2, seed=0, block_docs=12, batch_size=5)
    first = refine_with_gibbs(fit.encoder_config, fit.encoder_weights, fit.globals,
                              subset_cells(data, np.arange(12)), hyper, n_sweeps=2, seed=0)
    for a, b in zip(blocked, first):
        np.testing.assert_allclose(a[:12], b, rtol=1e-5)
    assert [m.shape for m in blocked] == [(30, 3), (30, 2)]
    assert all(np.isfinite(m).all() and (m > 0).all() for m in blocked)


# ---------------------------------------------------------------------- streaming
def test_block_reader_holds_one_block(tmp_path):
    path = tmp_path / "big.txt"
    lines = [f"document {i} " + "word " * (i % 17) for i in range(20000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    size = path.stat().st_size
    tracemalloc.start()
    n, first_lines = 0, []
    for block in read_line_blocks(path, 100):
        assert len(block.texts) <= 100
        first_lines.append(block.texts[0])
        n += len(block.texts)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 20000
    assert peak < size / 10, f"peak {peak} bytes for a {size}-byte file"
    assert first_lines == lines[::100]
    # resuming at a block's end offset reads the rest, with its line numbers
    blocks = list(read_line_blocks(path, 3000))
    rest = list(read_line_blocks(path, 3000, start=blocks[2].end, first_line=9001))
    assert [b.texts for b in rest] == [b.texts for b in blocks[3:]]
    assert rest[0].first_line == 9001


def test_block_reader_gzip_and_labels(tmp_path):
    path = tmp_path / "l.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(f"c{i % 3}\ttext {i}\n" for i in range(25)))
    blocks = list(read_line_blocks(path, 10, labeled=True))
    assert [len(b.texts) for b in blocks] == [10, 10, 5]
    assert blocks[2].labels == ["c2", "c0", "c1", "c2", "c0"] and blocks[2].texts[0] == "text 20"
    again = list(read_line_blocks(path, 10, labeled=True, start=blocks[0].end, first_line=11))
    assert again[0].texts == blocks[1].texts


def test_text_file_minibatches_cover_each_document_once_per_epoch(tmp_path):
    path = tmp_path / "docs.txt"
    texts = [f"w{i % 7} w{(i * 3) % 7} w{(i * 5) % 7} end" for i in range(53)]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    vocab = Vocabulary.build([t.split() for t in texts], 20)
    source = TextFileBlocks(path, text_encoder(vocab, 2), block_docs=20)
    assert source.n_docs == 53
    stream = Minibatches(source, batch_size=8, seed=1)
    seen = []
    while stream.cursor.epoch == 0:
        batch = stream.next()
        indices = batch.ids
        assert batch.n_docs == len(indices) <= 8
        seen.extend(indices.tolist())
    assert sorted(seen) == list(range(53))
    assert source.max_block_docs == 20
    # blocks are visited in a seeded order per epoch: a file sorted by class gets mixed
    whole_blocks = Minibatches(source, batch_size=20, seed=1)
    orders = []
    for _ in range(4):
        epoch = whole_blocks.cursor.epoch
        order = []
        while whole_blocks.cursor.epoch == epoch:
            order.append(int(whole_blocks.next().ids.min()) // 20)
        assert sorted(order) == [0, 1, 2]
        orders.append(order)
    assert any(order != [0, 1, 2] for order in orders)


def test_a_file_edited_while_it_is_read_in_blocks_stops_the_run(tmp_path):
    """Blocks are read at byte offsets found by one indexing pass: after an edit they would
    start inside other lines (documents cut, dropped or repeated), so a block read after the
    file's size or modification time changed is refused; the same edit in the same number
    of bytes is caught by the time."""
    import os
    path = tmp_path / "docs.txt"
    texts = [f"w{i % 7} w{(i * 3) % 7} end" for i in range(50)]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    vocab = Vocabulary.build([t.split() for t in texts], 20)
    source = TextFileBlocks(path, text_encoder(vocab, 2), block_docs=20)
    assert source.read_block(1).ids[0] == 20
    with open(path, "a", encoding="utf-8") as fh:   # a line appended
        fh.write("w1 w2 end\n")
    with pytest.raises(CPGBNInputError, match=r"docs.txt changed while it was being read in "
                                              r"blocks \(size 500 -> 510 bytes"):
        source.read_block(2)
    source = TextFileBlocks(path, text_encoder(vocab, 2), block_docs=20)
    source.read_block(0)
    same_size = path.read_text(encoding="utf-8").replace("w1 w2", "w2 w1", 1)
    stat = path.stat()
    path.write_text(same_size, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(CPGBNInputError, match="size 510 -> 510 bytes, or its modification"):
        source.read_block(1)


def test_text_file_errors_match_the_gibbs_path(tmp_path):
    vocab = Vocabulary.build([["a", "b"]], 5)
    empty_doc = tmp_path / "empty_doc.txt"
    empty_doc.write_text("a b\n\nb a\n", encoding="utf-8")
    source = TextFileBlocks(empty_doc, text_encoder(vocab, 2), block_docs=10)
    with pytest.raises(CPGBNInputError, match="training document 2 .line 2.*no tokens"):
        Minibatches(source, 2, 0).next()
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"a b\n\xff\xfe\x00\x01\n")
    with pytest.raises(DataFileError, match="line 2: not valid UTF-8"):
        Minibatches(TextFileBlocks(binary, text_encoder(vocab, 2)), 2, 0).next()
    with pytest.raises(DataFileError, match="line 2: not valid UTF-8"):
        read_lines(binary)
    nothing = tmp_path / "nothing.txt"
    nothing.write_bytes(b"")
    with pytest.raises(DataFileError, match="empty file"):
        TextFileBlocks(nothing, text_encoder(vocab, 2)).n_docs


@pytest.mark.slow
def test_hybrid_global_step_recovers_planted_globals_from_true_locals():
    """The global half of Algorithm 1, isolated from the encoder: fed the simulated corpus's own
    w, theta and c (test_recovery's planted 2-layer corpus), the hybrid's statistics (the
    schedule's local part on the PyTorch backend, Rao-Blackwellised kernel counts) and TLASGR
    steps recover D and Phi^(2) within test_recovery's tolerances.  Measured (seed 0, batches of
    50): worst kernel TV 0.104 / 0.098 / 0.098 after 50 / 100 / 300 steps, Phi^(2) 0.039 - 0.049,
    r near the planted 2 (full Gibbs on this corpus: 0.086 and 0.067)."""
    import test_recovery as recovery
    from itertools import permutations

    from cpgbn.backends.torch.elbo import expected_kernel_counts
    from cpgbn.backends.torch.packed import pack
    from cpgbn.inference.hybrid import HybridTrainer
    from cpgbn.inference.state import GibbsState, GlobalParameters

    K1, K2 = 4, 2
    D = recovery.planted_kernels(K1)
    phi = np.array([[0.45, 0.05], [0.45, 0.05], [0.05, 0.45], [0.05, 0.45]])
    hyper = Hyperparameters(eta=(recovery.ETA,) * 2, e0=recovery.E0, f0=recovery.F0)
    planted = GlobalParameters(D.astype(np.float32), [phi.copy()], np.full(K2, recovery.R_PLANTED))
    _, local, _, data = sample_corpus((K1, K2), recovery.V, recovery.F,
                                      np.full(recovery.N_DOCS, recovery.DOC_LENGTH), hyper,
                                      seed=1, globals_=planted)
    trainer = HybridTrainer((K1, K2), recovery.V, recovery.F, hyper, n_docs_total=data.n_docs,
                            seed=0, global_statistics="encoder")
    start_tv, _ = recovery.match_kernels(D, trainer.globals.D.numpy())
    assert start_tv.min() > 0.5
    batches, positions = Minibatches(ConvDataBlocks(data), 50, 0), data.doc_positions
    for i in range(1, 61):
        record = batches.next()
        batch, docs = record.data, record.ids
        rows = np.concatenate([np.arange(positions[j], positions[j + 1]) for j in docs])
        sampler = trainer.sampler_for(batch)
        b = sampler.backend
        w = torch.as_tensor(local.w[rows], dtype=torch.float32)
        state = GibbsState(globals=trainer.globals, w=w,
                           m=b.full((batch.n_positions, K1), 0, b.count_dtype),
                           theta=[torch.as_tensor(t[docs], dtype=torch.float64)
                                  for t in local.theta],
                           c=[torch.as_tensor(c[docs]) for c in local.c],
                           A=b.full((batch.n_docs, K1), 0, b.count_dtype),
                           loglik=b.full(batch.n_docs, 0.0, np.float64), sweep=i)
        stats = sampler.statistics_given_locals(state, i)
        stats.kernel_counts = expected_kernel_counts(pack(batch), w, trainer.globals.D)
        trainer.update.apply(b, trainer.globals, stats, hyper=hyper, sweep=i)
    distances, order = recovery.match_kernels(D, trainer.globals.D.numpy())
    assert (distances < recovery.KERNEL_TV_TOL).all(), f"kernel TV {np.round(distances, 3)}"
    learned = trainer.globals.phi[0].numpy()[order]
    phi_tv = min(max(recovery.tv(phi[:, j], learned[:, p[j]]) for j in range(K2))
                 for p in permutations(range(K2)))
    assert phi_tv < recovery.PHI_TV_TOL, f"Phi^(2) column TV {phi_tv:.3f}"


def test_minibatch_sweeps_on_the_batch_words_only_are_exact():
    """A batch swept against D[words] (its own words) gives the same local chain and the same
    kernel counts, on those rows, as against the whole D (zeros on the other rows)."""
    from cpgbn.inference.minibatch import initial_globals
    from cpgbn.inference.state import GlobalParameters
    from cpgbn.inference.updates import AccumulateStatistics
    from cpgbn.layers.batches import restrict_vocabulary, subset_cells

    data, hyper = small_corpus(n_docs=40)
    batch = subset_cells(data, np.arange(8))
    g = initial_globals((3, 2), V, 2, hyper, 5)
    words, local = restrict_vocabulary(batch)
    assert 0 < len(words) < V                         # some words are absent: a real test
    np.testing.assert_array_equal(words[local.cell_word], batch.cell_word)

    def chain(cells, globals_):
        sampler = GibbsSampler(cells, hyper, 11, learn_globals=False)
        sampler.keep_weights = True   # w is compared below
        state = sampler.local_state(globals_, 0)
        kept = AccumulateStatistics()
        sampler.global_update = kept
        for _ in range(3):
            sampler.sweep_on_backend(state)
        return state, kept.mean()

    full_state, full = chain(batch, g)
    part_state, part = chain(local, GlobalParameters(np.ascontiguousarray(g.D[words]),
                                                     g.phi, g.r))
    np.testing.assert_array_equal(as_dense(part_state.m), as_dense(full_state.m))
    np.testing.assert_array_equal(as_dense(part_state.w), as_dense(full_state.w))
    np.testing.assert_array_equal(part.kernel_counts, full.kernel_counts[words])
    assert not np.delete(full.kernel_counts, words, axis=0).any()
    for a, b in zip(part.phi_counts, full.phi_counts):
        np.testing.assert_array_equal(a, b)
