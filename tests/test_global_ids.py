"""Documents keep their identity from the source to the training step: the batch record carries
each document's global id and label, and the random streams are keyed by global document
blocks, so a part of the corpus swept on its own draws what it draws inside the whole corpus."""
import numpy as np
import pytest

import cpgbn.blocks
from cpgbn import CPGBN, TextFile
from cpgbn.backends.numba.numba_backend import DOC_BLOCK
from cpgbn.backends.numba.position_store import as_dense
from cpgbn.errors import CPGBNInputError
from cpgbn.inference.batches import Batch, ConvDataBlocks, Minibatches
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.minibatch import MinibatchGibbs
from cpgbn.layers.batches import subset_cells

from helpers import random_texts, write_tsv

LOCALS = ("w", "m", "A", "loglik")


def _document_rows(data, docs, array):
    """The rows of a per-position array (w, m) belonging to documents ``docs``."""
    positions = np.asarray(data.doc_positions)
    return np.concatenate([array[positions[j]:positions[j + 1]] for j in docs])


def test_two_halves_swept_apart_draw_what_the_whole_corpus_draws():
    texts = random_texts(3 * DOC_BLOCK + 5, seed=4)
    model = CPGBN(layers=(6, 3), vocab_size=40, n_iter=12, burn_in=6, random_state=2,
                  n_threads=2).fit(texts)
    data = model.infer(texts, n_iter=1, burn_in=0).data
    seed, split = 11, 2 * DOC_BLOCK
    halves = [(0, np.arange(split)), (split, np.arange(split, data.n_docs))]

    def one_sweep(part, first_doc):
        sampler = GibbsSampler(part, model.hyper_, seed, learn_globals=False,
                               first_doc=first_doc)
        sampler.keep_weights = True   # w is compared below
        state = sampler.initial_state(model.layers_, len(model.vocabulary_), model.globals_)
        return sampler.sweep(state)

    whole = one_sweep(data, 0)
    for first_doc, docs in halves:
        half = one_sweep(subset_cells(data, docs), first_doc)
        for name in ("w", "m"):
            np.testing.assert_array_equal(
                as_dense(getattr(half, name)),
                _document_rows(data, docs, as_dense(getattr(whole, name))))
        for name in ("A", "loglik"):
            np.testing.assert_array_equal(getattr(half, name), getattr(whole, name)[docs])
        for t in range(2):
            np.testing.assert_array_equal(half.theta[t], whole.theta[t][docs])
            np.testing.assert_array_equal(half.c[t], whole.c[t][docs])
    # the streams are the global block's: the second half numbered from 0 draws other numbers
    unaligned = one_sweep(subset_cells(data, halves[1][1]), 0)
    assert not np.array_equal(unaligned.theta[0], whole.theta[0][halves[1][1]])


def test_a_shard_must_start_at_a_block_of_the_random_streams():
    texts = random_texts(10, seed=1)
    model = CPGBN(layers=(3,), vocab_size=20, n_iter=3, burn_in=1, random_state=0).fit(texts)
    data = model.infer(texts, n_iter=1, burn_in=0).data
    with pytest.raises(CPGBNInputError, match="multiple of 32"):
        GibbsSampler(data, model.hyper_, 0, learn_globals=False, first_doc=5)


def _recording_steps(monkeypatch):
    """Every batch that reaches a MinibatchGibbs step, recorded."""
    seen = []
    step = MinibatchGibbs.step

    def recording(self, i, batch):
        seen.append(batch)
        return step(self, i, batch)

    monkeypatch.setattr(MinibatchGibbs, "step", recording)
    return seen


def _check_aligned(batches, labels, lengths, n_docs, n_epochs):
    ids = np.concatenate([b.ids for b in batches])
    assert sorted(ids.tolist()) == sorted(list(range(n_docs)) * n_epochs)
    for batch in batches:
        assert isinstance(batch, Batch)
        np.testing.assert_array_equal(batch.labels, np.asarray(labels)[batch.ids])
        np.testing.assert_array_equal(batch.data.true_length, np.asarray(lengths)[batch.ids])


def _labelled_corpus(n_docs):
    """Texts of lengths that vary with the line, labelled by their line's number."""
    words = [f"w{i}" for i in range(9)]
    texts = [" ".join(words[(j + k) % 9] for k in range(3 + j % 7)) for j in range(n_docs)]
    return texts, [f"line{j + 1}" for j in range(n_docs)], [3 + j % 7 for j in range(n_docs)]


def test_a_labelled_file_reaches_every_step_with_its_ids_and_labels(tmp_path, monkeypatch):
    texts, labels, lengths = _labelled_corpus(45)
    path = tmp_path / "train.tsv"
    write_tsv(path, texts, labels)
    monkeypatch.setattr(cpgbn.blocks, "STREAM_BLOCK_DOCS", 7)   # several blocks
    seen = _recording_steps(monkeypatch)
    CPGBN(layers=(3,), vocab_size=12, inference="minibatch-gibbs", batch_size=4, n_epochs=2,
          n_iter=2, burn_in=1, random_state=0).fit(TextFile(path))
    assert len(seen) == 2 * (6 * 2 + 1)   # per epoch: 6 blocks of 7 in 2 batches, 1 of 3
    _check_aligned(seen, labels, lengths, 45, 2)
    assert all(len(set((b.ids // 7).tolist())) == 1 for b in seen)   # a batch within a block


def test_labels_given_in_memory_travel_with_their_documents(monkeypatch):
    texts, labels, lengths = _labelled_corpus(30)
    seen = _recording_steps(monkeypatch)
    CPGBN(layers=(3,), vocab_size=12, inference="minibatch-gibbs", batch_size=8, n_epochs=1,
          n_iter=2, burn_in=1, random_state=0).fit(texts, labels)
    _check_aligned(seen, labels, lengths, 30, 1)
    with pytest.raises(CPGBNInputError, match="one label per document"):
        CPGBN(layers=(3,), vocab_size=12, inference="minibatch-gibbs").fit(texts, labels[:-1])


def test_minibatches_carry_the_ids_and_labels_of_their_block():
    texts, labels, _ = _labelled_corpus(25)
    model = CPGBN(layers=(3,), vocab_size=12, n_iter=2, burn_in=1, random_state=0).fit(texts)
    data = model.infer(texts, n_iter=1, burn_in=0).data
    stream = Minibatches(ConvDataBlocks(data, block_docs=10, labels=labels), 4, seed=3)
    for _ in range(8):
        batch = stream.next()
        np.testing.assert_array_equal(batch.labels, np.asarray(labels)[batch.ids])
        expected = subset_cells(data, batch.ids)
        np.testing.assert_array_equal(batch.data.cell_word, expected.cell_word)
