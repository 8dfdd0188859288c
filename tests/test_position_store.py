"""The numba backend's sparse position state (cpgbn.backends.numba.position_store): the store
is the dense field it stands for, a pass that runs out of room writes the same chain, and a
chain's state is stored in proportion to its entries off the background."""
import sys

import numpy as np
import pytest

import cpgbn.backends.numba.position_store as position_store
from cpgbn.backends.numba.position_store import (PositionStore, as_dense, field_arrays,
                                                 field_from_arrays, kernel_index_dtype,
                                                 unwritten)
from cpgbn.backends.numba.weights import FLOOR
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.mixing import MixingMonitor, MixingTrace
from cpgbn.inference.state import Hyperparameters
from cpgbn.layers.cells import from_token_sequences


def _documents(n_docs=90, vocab=40, seed=0, token_count=50):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, n_docs)
    tokens = rng.integers(0, vocab, lengths.sum()).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return from_token_sequences(tokens, offsets, 3, token_count), vocab


@pytest.mark.parametrize("n_kernels", [7, 300])
def test_a_store_is_the_dense_field_and_its_rows(n_kernels):
    data, _ = _documents()
    rng = np.random.default_rng(1)
    dense = np.where(rng.random((data.n_positions, n_kernels)) < 0.1,
                     rng.integers(1, 9, (data.n_positions, n_kernels)), 0).astype(np.int32)
    store = PositionStore.from_dense(dense, data.doc_positions, 0)
    assert store.kernel.dtype == kernel_index_dtype(n_kernels) == (
        np.uint8 if n_kernels <= 256 else np.uint16)
    assert store.nnz == np.count_nonzero(dense) and store.shape == dense.shape
    np.testing.assert_array_equal(store.toarray(), dense)
    np.testing.assert_array_equal(as_dense(store), dense)
    again = field_from_arrays("m", field_arrays("m", store), data.doc_positions, n_kernels)
    np.testing.assert_array_equal(again.toarray(), dense)
    assert again.nbytes < dense.nbytes


def _chain(data, vocab, layers, beta=None, sweeps=5, monitor=True):
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05,) * len(layers),
                                                 pooling_concentration=beta), seed=5)
    sampler.keep_weights = True
    state = sampler.initial_state(layers, vocab)
    mon, trace = MixingMonitor(), MixingTrace()
    mon.start(sampler.backend, state)
    records = []
    for _ in range(sweeps):
        sampler.sweep(state)
        mon.observe(sampler.backend, state, trace)
        records.append([state.w.toarray(), state.m.toarray(), state.A.copy(),
                        state.globals.D.copy(), *[t.copy() for t in state.theta],
                        state.loglik.copy()])
    return records, trace, state


@pytest.mark.parametrize("layers,beta", [((6,), None), ((6, 3), 0.5)])
def test_a_block_out_of_room_is_written_again_into_the_same_chain(monkeypatch, layers, beta):
    """Regions without any growth margin overflow at almost every sweep; the blocks written
    again draw the same numbers, and their kernel counts are not added twice."""
    data, vocab = _documents()
    roomy, roomy_trace, _ = _chain(data, vocab, layers, beta)
    monkeypatch.setattr(position_store, "GROWTH_SHARE", 0.0)
    monkeypatch.setattr(position_store, "GROWTH_PER_DOC", 0)
    grown = []
    regrow = position_store.regrow

    def counted(store, needed):
        out = regrow(store, needed)
        grown.append(len(out[1]))
        return out

    import cpgbn.backends.numba.numba_backend as numba_backend
    monkeypatch.setattr(numba_backend, "regrow", counted)
    tight, tight_trace, _ = _chain(data, vocab, layers, beta)
    assert sum(grown) > 0
    for a, b in zip(roomy, tight):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert roomy_trace.moved == tight_trace.moved
    assert roomy_trace.switched == tight_trace.switched


def test_a_sweep_keeps_w_only_when_asked():
    data, vocab = _documents()
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05,)), seed=5)
    state = sampler.initial_state((6,), vocab)
    sampler.sweep(state)
    assert state.w is None and state.m.nnz > 0   # the next sweep draws w before reading it
    sampler.draw_weights(state)                  # w for a reader
    assert state.w.nnz > 0
    records, _, _ = _chain(data, vocab, (6,), sweeps=2)
    assert all(r[0].shape == r[1].shape for r in records)


def test_the_stored_state_is_its_entries_off_the_background():
    data, vocab = _documents(n_docs=120, token_count=200)
    records, _, state = _chain(data, vocab, (30,), sweeps=12)
    w, m = records[-1][0], records[-1][1]
    assert state.w.background == FLOOR and state.m.background == 0
    assert state.w.nnz == np.count_nonzero(w > FLOOR) < w.size
    assert state.m.nnz == np.count_nonzero(m) < m.size
    # every stored entry is off the background, each (position, kernel) once
    counts, kernels, values = state.m.to_rows()
    assert (values != 0).all()
    rows = np.repeat(np.arange(len(counts)), counts)
    assert len(np.unique(rows * 1000 + kernels)) == len(kernels)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's overcommit rules")
def test_a_store_may_reserve_more_room_than_the_machine_has():
    """The store written after a fresh one gets room for every pair (250,000 IMDB reviews:
    53 GB of counts); reserved without accounting, only what is written becomes resident."""
    with open("/proc/meminfo", encoding="ascii") as fh:
        total = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemTotal:"))
    room = unwritten(2 * total // 4 + 1, np.int32)   # twice the machine's memory
    room[:1000] = 7
    room[-3:] = 9
    assert room.nbytes > 2 * total and room[0] == 7 and room[-1] == 9
