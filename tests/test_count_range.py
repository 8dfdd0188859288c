"""Counts near 2^31: the latent counts m and A are int32, so a document whose units could
pass 2^31 - 1 is refused when its cells are built (never a wrapped count); the kernel counts
sum a word's units over the whole corpus, which the tempered likelihood (``token_count``
pseudo-counts per token) can carry past 2^31 in a large corpus: they widen to int64 and stay
exact, in one process and in the workers' all-reduce."""
from __future__ import annotations

import numpy as np
import pytest

from cpgbn import CPGBN, PGBN
from cpgbn.backends.numba.numba_backend import NumbaBackend
from cpgbn.errors import CPGBNInputError
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import Hyperparameters
from cpgbn.inference.memory import estimate_bytes
from cpgbn.inference.updates import _sum_kernel_counts
from cpgbn.layers.cells import COUNT_LIMIT, from_bag_of_words, from_token_sequences
from cpgbn.modes.gibbs_mode import GibbsMode


def test_a_document_whose_counts_could_pass_int32_is_refused():
    # 3 tokens x 2^30 pseudo-counts = 3 * 2^30 > 2^31 - 1; 1 token x 2^30 would fit
    model = CPGBN(layers=(2,), filter_width=1, token_count=2**30, vocab_size=10, n_iter=2,
                  burn_in=1, random_state=0)
    with pytest.raises(CPGBNInputError, match=r"a document of 3 tokens carries 3,221,225,472 "
                                              r"latent counts .*int32.*lower token_count"):
        model.fit(["a b c", "a"])
    tokens, offsets = np.array([1, 2, 3, 1]), np.array([0, 3, 4])
    data = from_token_sequences(tokens, offsets, 1, token_count=2**29)   # 3 * 2^29 fits
    assert data.largest_word_units() == 2 * 2**29


def test_bag_of_words_counts_past_int32_are_refused_not_wrapped():
    # a word 3 times in one document, times 2^30: the cell's count itself passes int32
    with pytest.raises(CPGBNInputError, match="a cell count of 3,221,225,472"):
        PGBN(layers=(2,), token_count=2**30, vocab_size=10, n_iter=2, burn_in=1).fit(["a a a"])
    # two words of 2^30 each: no cell passes, the document's sum does
    with pytest.raises(CPGBNInputError, match="carries 2,147,483,648 latent counts"):
        from_bag_of_words(np.array([1, 2]), np.array([0, 2]), scale=2**30)


def test_kernel_counts_past_int32_widen_to_int64_and_stay_exact():
    """12 documents of 2 tokens, word 1 in each, 2^29 pseudo-counts per token, one kernel of
    width 1: word 1 sends 12 * 2^29 units, more than 2^31 - 1, into one kernel count of one
    thread's slab (the 12 documents are one block of the random streams, one thread's)."""
    scale, n_docs = 2**29, 12
    tokens = np.concatenate([[1, 2 + j % 4] for j in range(n_docs)])
    data = from_token_sequences(tokens, np.arange(0, 2 * n_docs + 1, 2), 1, token_count=scale)
    assert data.largest_word_units() == n_docs * scale > COUNT_LIMIT
    sizes = (data.n_docs, data.n_positions, data.n_cells, 6, 1, (1,), 2)
    assert (GibbsMode(dict(n_threads=2, device=None)).training_bytes(data, (1,), 6)
            == estimate_bytes(*sizes, wide_kernel_counts=True)
            == estimate_bytes(*sizes) + 6 * 1 * 1 * 4 * 2)   # the wider slabs
    hyper = Hyperparameters(eta=(0.05,), e0=1.0, f0=1.0)
    sampler = GibbsSampler(data, hyper, 3)
    sampler.keep_weights = True   # the augmentation below reads the sweep's w
    assert sampler.backend.kernel_count_dtype == np.int64
    state = sampler.initial_state((1,), 6)
    sampler.sweep(state)
    counts, _ = sampler.backend.draw_first_layer(
        state, prior_shape=sampler._first_layer_shape(state), stream=99, table_stream=-1,
        draw_w=False, with_counts=True)
    total = sampler.backend.total_kernel_counts(counts)
    # every unit of every cell reaches the kernel counts of its word: int32 slabs wrapped here
    np.testing.assert_array_equal(total.sum(axis=(1, 2)),
                                  np.bincount(tokens, minlength=6).astype(np.int64) * scale)
    assert total.sum() == int(state.m.toarray().astype(np.int64).sum()) == len(tokens) * scale
    D = sampler.backend.draw_kernels(state.globals.D, counts, 0.05, stream=100)
    # D_k ~ Dir(n_k + eta) with n_k in the billions: its mean n_k / sum n_k, within a few
    # standard deviations (relative 2^-14 per entry); wrapped counts would be negative
    for k in np.flatnonzero(total.sum(axis=(0, 1))):
        np.testing.assert_allclose(D[..., k], total[..., k] / total[..., k].sum(), atol=1e-3)


class _Mirror:
    """Two workers with the same counts: an all-reduce doubles every array."""

    world_size = 2

    @staticmethod
    def sum(array):
        return array + array


def test_the_workers_kernel_count_sum_widens_past_int32():
    host = NumbaBackend(from_token_sequences(np.array([1, 2]), np.array([0, 2]), 1, 1), 0)
    small = np.zeros((3, 1, 2), dtype=np.int64)
    small[1, 0, 1] = 2**30 - 1
    summed = _sum_kernel_counts(host, _Mirror(), small)
    assert summed.dtype == np.int32 and summed[1, 0, 1] == 2**31 - 2
    large = small.copy()
    large[1, 0, 1] = 2**30
    summed = _sum_kernel_counts(host, _Mirror(), large)
    assert summed.dtype == np.int64 and summed[1, 0, 1] == 2**31
    slab = host.kernel_counts_from_total(summed)
    assert slab.dtype == np.int64 and slab[0, 1, 0, 1] == 2**31
    assert host.kernel_counts_from_total(2 * small).dtype == np.int32


def test_a_streamed_file_is_refused_before_training_not_at_the_documents_block(
        tmp_path, monkeypatch):
    """A minibatch fit of a file: the first pass (vocabulary) finds the longest document, so
    a document past the int32 counts in a late block stops the fit before any training."""
    from cpgbn import TextFile
    from cpgbn.blocks import STREAM_BLOCK_DOCS as BLOCK_DOCS
    from cpgbn.modes.minibatch_modes import MinibatchMode

    def trains(self, training):
        raise AssertionError("training started")
    monkeypatch.setattr(MinibatchMode, "fit", trains)
    path = tmp_path / "big.txt"
    path.write_text("w\n" * (BLOCK_DOCS + 10) + "w v w\n", encoding="utf-8")
    model = CPGBN(layers=(2,), filter_width=1, token_count=2**30, vocab_size=5,
                  inference="minibatch-gibbs", n_epochs=1)
    with pytest.raises(CPGBNInputError, match="a document of 3 tokens carries"):
        model.fit(TextFile(path))
    path.write_text("w\n" * (BLOCK_DOCS + 10) + "w v\n", encoding="utf-8")   # 2 * 2^30 - 1 fits
    with pytest.raises(AssertionError, match="training started"):
        model.set_params(token_count=2**30 - 1).fit(TextFile(path))
