"""The sparse start (cpgbn.backends.numba.sparse_start) and the pilot chain of a Gibbs fit
(cpgbn.inference.pilot): each position starts live on the kernels its window's words favour,
a chain from given globals starts there, and the pilot samples whole blocks of documents so
that shards sample what one process does."""
import numpy as np
import pytest

from cpgbn.backends.numba.sparse_start import sparse_start_weights
from cpgbn.backends.numba.weights import FLOOR
from cpgbn.inference import pilot
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import Hyperparameters
from cpgbn.layers.batches import subset_cells
from cpgbn.layers.cells import from_token_sequences


def _documents(n_docs=90, vocab=40, seed=0, token_count=50, longest=30):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, longest, n_docs)
    tokens = rng.integers(0, vocab, lengths.sum()).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return from_token_sequences(tokens, offsets, 3, token_count), vocab


def _window_scores(data, D):
    """score[p, k] = sum_f D[v(s + f), f, k] for every position, from each document's one-hot
    matrix (a second route to the kernel's sum over cells)."""
    V, F, K = D.shape
    rows = []
    for j in range(data.n_docs):
        n_pos = data.doc_positions[j + 1] - data.doc_positions[j]
        cells = slice(data.doc_cells[j], data.doc_cells[j + 1])
        onehot = np.zeros((V, n_pos + F - 1))
        onehot[data.cell_word[cells], data.cell_col[cells]] = 1.0
        windows = np.stack([onehot[:, f:f + n_pos] for f in range(F)], axis=1)   # (V, F, S)
        rows.append(np.einsum("vfs,vfk->sk", windows, D.astype(np.float64)))
    return np.concatenate(rows)


@pytest.mark.parametrize("n_kernels,n_live", [(12, 3), (300, 8)])
def test_each_position_starts_live_on_its_strongest_kernels(n_kernels, n_live):
    data, vocab = _documents()
    D = np.random.default_rng(1).dirichlet(np.ones(vocab * 3), n_kernels).T.reshape(
        vocab, 3, n_kernels).astype(np.float32)
    w, theta = sparse_start_weights(data, D, n_live)
    dense = w.toarray()
    assert w.background == FLOOR and w.nnz == data.n_positions * n_live
    scores = _window_scores(data, D)
    expected = np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :n_live], axis=1)
    live = np.sort(np.argsort(~(dense > FLOOR), axis=1, kind="stable")[:, :n_live], axis=1)
    np.testing.assert_array_equal(live, expected)
    assert set(np.unique(dense)) == {FLOOR, np.float32(1.0)}
    # theta^(1) of the start: its w summed over each document's positions
    doc_of = np.repeat(np.arange(data.n_docs), np.diff(data.doc_positions))
    sums = np.zeros((data.n_docs, n_kernels))
    np.add.at(sums, doc_of, dense.astype(np.float64))
    np.testing.assert_allclose(theta, sums, rtol=1e-6)


def _fitted_globals(data, vocab, layers, sweeps=4):
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05,) * len(layers)), seed=3)
    state = sampler.initial_state(layers, vocab)
    for _ in range(sweeps):
        sampler.sweep(state)
    return state.globals


def test_a_chain_from_given_globals_starts_sparse_and_places_its_units_there():
    data, vocab = _documents()
    layers = (20, 5)
    g = _fitted_globals(data, vocab, layers)
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05, 0.05)), seed=4,
                           learn_globals=False)
    sampler.keep_weights = True
    state = sampler.initial_state(layers, vocab, g)
    w, m = state.w.toarray(), state.m.toarray()
    assert state.w.nnz == data.n_positions * sampler.start_live_kernels
    assert (m[w <= FLOOR] == 0).all() and m.sum() > 0
    doc_of = np.repeat(np.arange(data.n_docs), np.diff(data.doc_positions))
    A = np.zeros_like(state.A)
    np.add.at(A, doc_of, m)
    np.testing.assert_array_equal(state.A, A)
    for _ in range(3):   # and the chain goes on from there
        sampler.sweep(state)
    assert np.isfinite(state.loglik).all()
    # without live kernels, the dense start of old
    sampler.start_live_kernels = None
    dense = sampler.initial_state(layers, vocab, g)
    assert dense.w.nnz == 0 and dense.w.background == 1.0
    assert np.count_nonzero(dense.m.toarray()) > np.count_nonzero(m)


class _Totals:
    """A communicator whose sum is the whole corpus' (a shard's view of plan_pilot)."""

    def __init__(self, totals):
        self.totals = np.asarray(totals)

    def sum(self, array):
        return self.totals


def test_the_pilot_samples_whole_blocks_and_shards_sample_what_one_process_does():
    data, _ = _documents(n_docs=700, longest=12)
    one = pilot.plan_pilot(data, 0, 32)
    assert one.stride >= 2
    chosen_blocks = np.unique(one.docs // 32)
    np.testing.assert_array_equal(chosen_blocks, np.arange(0, 22, one.stride))
    assert len(one.docs) <= pilot.PILOT_SHARE * data.n_docs + 32
    totals = [data.n_docs, data.n_positions]
    ids, firsts = [], []
    for lo, hi in [(0, 96), (96, 416), (416, 700)]:   # shards of whole blocks, the last short
        plan = pilot.plan_pilot(subset_cells(data, np.arange(lo, hi)), lo, 32, _Totals(totals))
        assert plan.stride == one.stride
        ids.append(lo + plan.docs)
        firsts.append(plan.first_doc)
    np.testing.assert_array_equal(np.concatenate(ids), one.docs)
    # each shard numbers its sample from where the whole sample has it
    np.testing.assert_array_equal(firsts, [np.searchsorted(one.docs, i[0]) for i in ids])
    assert pilot.plan_pilot(subset_cells(data, np.arange(200)), 0, 32) is None   # 7 blocks


def test_a_gibbs_fit_of_eight_blocks_or_more_starts_from_its_pilot(monkeypatch):
    from cpgbn import CPGBN
    from helpers import random_texts

    calls = []
    original = pilot.run_pilot

    def counted(*args, **kwargs):
        calls.append(args[2].stride)
        return original(*args, **kwargs)

    monkeypatch.setattr("cpgbn.modes.gibbs_mode.run_pilot", counted)
    texts = random_texts(300, seed=2)
    models = [CPGBN(layers=(12,), vocab_size=40, n_iter=4, burn_in=2, random_state=1,
                    n_threads=1).fit(texts) for _ in range(2)]
    assert len(calls) == 2
    np.testing.assert_array_equal(models[0].globals_.D, models[1].globals_.D)
    np.testing.assert_array_equal(models[0].transform(texts[:20]),
                                  models[1].transform(texts[:20]))


def test_a_pytorch_fit_of_one_of_its_blocks_still_gets_a_pilot(monkeypatch):
    """The pilot's sample and streams are in numba's blocks of 32 documents on every backend:
    300 documents are one block of the PyTorch backend's 1,024 on the CPU, but nine of the
    pilot's, so the fit runs its pilot (over blocks of 32 of the PyTorch sampler) and starts
    sparse, reproducibly for a seed."""
    pytest.importorskip("torch")
    from cpgbn import CPGBN
    from helpers import random_texts

    blocks = []
    original = pilot.run_pilot

    def counted(make_sampler, *args, **kwargs):
        def made(data, first_doc):
            sampler = make_sampler(data, first_doc)
            blocks.append(sampler.backend.doc_block)
            return sampler
        return original(made, *args, **kwargs)

    monkeypatch.setattr("cpgbn.modes.gibbs_mode.run_pilot", counted)
    texts = random_texts(300, seed=2)
    models = [CPGBN(layers=(12,), vocab_size=40, n_iter=4, burn_in=2, random_state=1,
                    n_threads=1, device="cpu").fit(texts) for _ in range(2)]
    assert blocks == [32, 32]
    np.testing.assert_array_equal(models[0].globals_.D, models[1].globals_.D)
