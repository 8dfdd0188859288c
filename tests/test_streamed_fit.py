"""A corpus streamed from a file (``fit(TextFile(path))``, :mod:`cpgbn.text.stream`): the scan
builds the in-memory vocabulary; the minibatch modes trained on blocks of the file end in the
model the same texts in a list give (one block and several); transform and fit_transform of a
file; empty lines, bad files and a resumed streamed fit."""
from __future__ import annotations

import gzip
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cpgbn.blocks
from cpgbn import CPGBN, PGBN, CPGBNInputError, DataFileError, TextFile
from cpgbn.text import Corpus
from cpgbn.text.stream import scan_text_file
from helpers import interrupted_at_step, random_labeled, random_texts, write_tsv

torch = pytest.importorskip("torch")

TEXTS = random_texts(40, seed=0)
FAST = dict(layers=(4, 2), vocab_size=30, n_iter=6, burn_in=3, random_state=0, n_threads=1,
            batch_size=16, n_epochs=2, learning_rate=0.01)
MODES = ("minibatch-gibbs", "hybrid")


@pytest.fixture(autouse=True)
def _one_thread(numba_one_thread, torch_one_thread):
    """One numba and one torch thread (conftest)."""


def write_lines(path, texts):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(t + "\n" for t in texts))
    return path


def assert_same_model(a, b, usage_atol=0.0):
    np.testing.assert_array_equal(a.globals_.D, b.globals_.D)
    for pa, pb in zip(a.globals_.phi, b.globals_.phi, strict=True):
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.globals_.r, b.globals_.r)
    np.testing.assert_array_equal(a.loss_trace_, b.loss_trace_)
    assert a.vocabulary_ == b.vocabulary_ and a.n_train_tokens_ == b.n_train_tokens_
    np.testing.assert_allclose(a.kernel_usage_, b.kernel_usage_, rtol=1e-9, atol=usage_atol)
    for name in getattr(a, "encoder_weights_", {}) or {}:
        np.testing.assert_array_equal(a.encoder_weights_[name], b.encoder_weights_[name])


# ---------------------------------------------------------------------- the scan
@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from("a b c dd e f gg h".split()), min_size=1, max_size=6)
                .map(" ".join), min_size=1, max_size=30),
       st.integers(2, 12), st.integers(1, 7))
def test_the_scan_builds_the_in_memory_vocabulary(tmp_path_factory, texts, size, block):
    path = write_lines(tmp_path_factory.mktemp("scan") / "docs.txt", texts)
    scan = scan_text_file(TextFile(path), size, block_lines=block, short_below=3)
    corpus = Corpus.from_texts(texts, vocab_size=size)
    assert scan.vocabulary == corpus.vocabulary
    assert (scan.n_docs, scan.n_tokens) == (len(texts), int(corpus.lengths.sum()))
    assert scan.n_short == int((corpus.lengths < 3).sum())


def test_the_scan_reads_tsv_and_gzip_and_its_digest_follows_the_text(tmp_path):
    texts, labels = random_labeled(12, seed=3)
    tsv = write_tsv(tmp_path / "d.tsv", texts, labels)
    gz = write_lines(tmp_path / "d.txt.gz", texts)
    a, b = scan_text_file(TextFile(tsv), None), scan_text_file(TextFile(gz), None)
    assert TextFile(tsv).labeled and not TextFile(gz).labeled
    assert a.vocabulary == b.vocabulary == Corpus.from_texts(texts).vocabulary
    assert a.digest == b.digest   # the documents, not the labels or the compression
    c = scan_text_file(TextFile(write_lines(tmp_path / "e.txt", texts[:-1] + ["other words"])), None)
    assert c.digest != a.digest


def test_an_empty_line_is_named_before_training(tmp_path):
    path = write_lines(tmp_path / "d.txt", TEXTS[:5] + ["  "] + TEXTS[5:])
    with pytest.raises(CPGBNInputError, match=r"training document 6 \(line 6 of .*d\.txt\) has no "
                                              r"tokens \(1 empty document"):
        CPGBN(inference="hybrid", **FAST).fit(TextFile(path))


def test_bad_files_and_formats_are_one_line_errors(tmp_path):
    with pytest.raises(DataFileError, match="no such file"):
        CPGBN(inference="hybrid", **FAST).fit(TextFile(tmp_path / "missing.txt"))
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"fine words\n\xff\xfe broken\n")
    with pytest.raises(DataFileError, match="line 2: not valid UTF-8"):
        CPGBN(inference="hybrid", **FAST).fit(TextFile(binary))
    with pytest.raises(CPGBNInputError, match="format must be one of"):
        TextFile(binary, "csv")


# ---------------------------------------------------------------------- the same model
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block_docs", [4096, 7])
def test_a_streamed_fit_is_the_in_memory_fit(mode, block_docs, tmp_path, monkeypatch):
    """The same blocks and minibatches from the file as from the list: the same model (and
    with blocks of 7 documents, six blocks visited in a seeded order, the file is really read
    block by block).  kernel_usage_ sums the training documents' transform block by block:
    the encoder's mean path is deterministic, but minibatch Gibbs infers each block with its
    own chain, so with several blocks its usage only agrees up to Gibbs noise."""
    monkeypatch.setattr(cpgbn.blocks, "STREAM_BLOCK_DOCS", block_docs)
    path = write_lines(tmp_path / "d.txt", TEXTS)
    listed = CPGBN(inference=mode, **FAST).fit(TEXTS)
    streamed = CPGBN(inference=mode, **FAST).fit(TextFile(path))
    noisy = mode == "minibatch-gibbs" and block_docs < len(TEXTS)
    assert_same_model(streamed, listed, usage_atol=0.01 if noisy else 0.0)
    assert not hasattr(streamed, "train_features_") and not hasattr(streamed, "train_theta_")
    new = random_texts(6, seed=9)
    np.testing.assert_array_equal(streamed.transform(new), listed.transform(new))


def test_pgbn_streams_its_bags_of_words(tmp_path):
    path = write_lines(tmp_path / "d.txt", TEXTS)
    listed = PGBN(inference="hybrid", **FAST).fit(TEXTS)
    assert_same_model(PGBN(inference="hybrid", **FAST).fit(TextFile(path)), listed)


def test_transform_and_fit_transform_of_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(cpgbn.blocks, "STREAM_BLOCK_DOCS", 7)
    path = write_lines(tmp_path / "d.txt", TEXTS)
    model = CPGBN(inference="hybrid", **FAST)
    features = model.fit_transform(TextFile(path))
    assert features.shape == (len(TEXTS), 4)
    np.testing.assert_allclose(features, model.transform(TEXTS), rtol=1e-12)
    # the upper layers come from the encoder's float32 matrix products, whose rounding may
    # depend on how many documents share a batch (7 per block here, 40 at once in memory):
    # one float32 ulp apart on some CPUs (CI's, at 5f3868a), equal elsewhere
    np.testing.assert_allclose(model.transform(TextFile(path), all_layers=True),
                               model.transform(TEXTS, all_layers=True), rtol=1e-6, atol=0)
    model.set_params(refine_iter=2)   # refinement reads the file whole: the same features
    np.testing.assert_array_equal(model.transform(TextFile(path)), model.transform(TEXTS))
    gibbs = CPGBN(**FAST).fit(TextFile(path))   # the Gibbs sampler reads it whole
    np.testing.assert_array_equal(gibbs.train_features_, CPGBN(**FAST).fit(TEXTS).train_features_)


def test_a_streamed_fit_warns_once_about_short_documents(tmp_path):
    path = write_lines(tmp_path / "d.txt", TEXTS + ["two words"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CPGBN(inference="hybrid", **FAST).fit(TextFile(path))
    padded = [w for w in caught if "padded" in str(w.message)]
    assert len(padded) == 1 and "1 document(s) shorter than filter_width=3" in str(padded[0].message)


def test_an_interrupted_streamed_fit_resumes_to_the_same_model(tmp_path, monkeypatch):
    from cpgbn.inference.hybrid import HybridTrainer

    monkeypatch.setattr(cpgbn.blocks, "STREAM_BLOCK_DOCS", 7)
    path = write_lines(tmp_path / "d.txt", TEXTS)
    whole = CPGBN(inference="hybrid", **FAST).fit(TextFile(path))
    ck = tmp_path / "ck"
    with interrupted_at_step(monkeypatch, HybridTrainer, 5):
        CPGBN(inference="hybrid", **FAST).fit(TextFile(path), checkpoint_dir=ck,
                                              checkpoint_every=2)
    other = write_lines(tmp_path / "other.txt", TEXTS[:-1] + ["a different last line here"])
    with pytest.raises(CPGBNInputError, match="other data or parameters"):
        CPGBN(inference="hybrid", **FAST).fit(TextFile(other), checkpoint_dir=ck, resume=True)
    moved = path.rename(tmp_path / "moved.txt")   # the file's text, not its name, is checked
    resumed = CPGBN(inference="hybrid", **FAST).fit(TextFile(moved), checkpoint_dir=ck,
                                                    checkpoint_every=2, resume=True)
    assert not ck.exists()
    assert_same_model(resumed, whole)
