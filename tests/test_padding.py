"""``padding``: empty columns before and after every document, so kernels may overhang the edges.

0 is the paper's model (S_j = L_j - F + 1 positions); p adds p observed all-zero columns on each
side (the authors' code pads), giving S_j = L_j + 2p - F + 1 positions."""
import numpy as np
import pytest

import cpgbn.io
from cpgbn import CPGBN, PGBN, CPGBNInputError
from cpgbn.cli import main
from cpgbn.explain import assign_kernels, top_corpus_phrases
from cpgbn.layers.cells import from_token_sequences

from helpers import phrase_corpus, random_texts

FAST = dict(n_iter=6, burn_in=3, random_state=0, vocab_size=60)


def test_cells_shift_by_the_padding_and_add_positions():
    tokens = np.array([5, 6, 7, 8, 1, 2], dtype=np.int32)
    offsets = np.array([0, 4, 6])
    plain = from_token_sequences(tokens, offsets, 3, 200)
    padded = from_token_sequences(tokens, offsets, 3, 200, padding=2)
    np.testing.assert_array_equal(padded.cell_col, plain.cell_col + 2)
    np.testing.assert_array_equal(padded.cell_word, plain.cell_word)
    # 4 tokens: 4 + 4 - 3 + 1 = 6 positions; 2 tokens: 2 + 4 - 3 + 1 = 4 (unpadded: 2 and 1)
    np.testing.assert_array_equal(np.diff(plain.doc_positions), [2, 1])
    np.testing.assert_array_equal(np.diff(padded.doc_positions), [6, 4])
    np.testing.assert_array_equal(padded.true_length, [4, 2])  # features still divide by L_j
    # the 2-token document is raised to F = 3 only without padding
    assert plain.n_padded() == 1 and padded.n_padded() == 0 and padded.padding == 2


def test_every_placement_covers_a_word_at_full_padding():
    tokens = np.arange(1, 6, dtype=np.int32)
    data = from_token_sequences(tokens, np.array([0, 5]), 3, 1, padding=2)
    starts = np.arange(data.n_positions)
    cols = data.cell_col
    covered = [np.any((cols >= s) & (cols < s + 3)) for s in starts]
    assert all(covered) and data.n_positions == 5 + 3 - 1


@pytest.mark.parametrize("padding, message", [(-1, "padding must be >= 0"),
                                              (3, "padding must be <= filter_width - 1 = 2"),
                                              (1.5, "padding must be an integer"),
                                              (True, "padding must be an integer")])
def test_bad_padding_is_named(padding, message):
    with pytest.raises(CPGBNInputError, match=message):
        CPGBN(padding=padding, **FAST).fit(random_texts(10))


def test_padded_fit_transform_and_reload(tmp_path):
    texts = random_texts(30, min_len=2, max_len=8)
    model = CPGBN(layers=(6, 3), padding=2, **FAST).fit(texts)
    again = CPGBN(layers=(6, 3), padding=2, **FAST).fit(texts)
    np.testing.assert_array_equal(model.train_features_, again.train_features_)
    plain = CPGBN(layers=(6, 3), **FAST).fit(texts)
    assert not np.allclose(model.train_features_, plain.train_features_)
    features = model.transform(texts[:5])
    model.save(tmp_path / "m")
    loaded = CPGBN.load(tmp_path / "m")
    assert loaded.padding == 2
    np.testing.assert_array_equal(loaded.transform(texts[:5]), features)


def test_overhanging_kernels_explain_the_edge_words():
    """At padding 0 a document's first word can only be column 0 of a kernel; with padding
    F - 1 every column can explain it, and the grams of edge placements are shorter."""
    texts, _ = phrase_corpus(40, seed=1)
    first = [t.split()[0] for t in texts]
    for padding in (0, 2):
        model = CPGBN(layers=(8,), padding=padding, **FAST).fit(texts)
        assignments = assign_kernels(model, texts, n_iter=4, burn_in=2)
        grams = assignments.grams
        starts = assignments.doc_positions[:-1]
        if padding == 0:
            assert np.all(grams[starts] >= 0)
        else:
            # the first placement of each document covers only its first word, in column 2
            assert np.all(grams[starts, :2] == -1)
            vocab = model.vocabulary_
            np.testing.assert_array_equal(grams[starts, 2], vocab.encode(first))
        phrases = top_corpus_phrases(assignments, model.vocabulary_, top_n=2)
        assert any(p for p in phrases)
        assert 0.999 < assignments.column_share.sum(axis=1).max() < 1.001


def test_pgbn_has_no_padding():
    assert "padding" not in PGBN().get_params()
    PGBN(layers=(4,), **FAST).fit(random_texts(10))


def test_cli_padding(tmp_path, capsys):
    data = tmp_path / "docs.txt"
    data.write_text("\n".join(random_texts(20)) + "\n")
    assert main(["fit", str(data), "--layers", "4", "--padding", "3", "--iterations", "4",
                 "--out", str(tmp_path / "m"), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "padding must be <= filter_width - 1 = 2" in err and "Traceback" not in err
    assert main(["fit", str(data), "--layers", "4", "--padding", "1", "--iterations", "4",
                 "--vocab-size", "50", "--out", str(tmp_path / "m"), "--quiet"]) == 0
    assert CPGBN.load(tmp_path / "m").padding == 1


def test_summary_names_the_padding():
    from cpgbn.explain import summary_text
    texts = random_texts(12)
    padded = summary_text(CPGBN(layers=(4,), padding=2, **FAST).fit(texts))
    assert "filter width F = 3, 2 empty columns around every document (padding)" in padded
    assert "padding" not in summary_text(CPGBN(layers=(4,), **FAST).fit(texts))


def test_a_format_1_model_loads_with_no_padding(tmp_path):
    """Models saved before ``padding`` existed (format version 1) load as padding 0; models are
    now saved as format 2 or later, which older readers refuse with "upgrade cpgbn" (they
    would not know the parameter)."""
    import json
    model = CPGBN(layers=(4,), **FAST).fit(random_texts(12))
    model.save(tmp_path / "m")
    meta_path = tmp_path / "m" / "model.json"
    meta = json.loads(meta_path.read_text())
    assert meta["format_version"] == cpgbn.io.FORMAT_VERSION >= 2
    del meta["params"]["padding"]
    meta["format_version"] = 1
    meta_path.write_text(json.dumps(meta))
    old = CPGBN.load(tmp_path / "m")
    assert old.padding == 0 and old.format_version_ == 1
    np.testing.assert_array_equal(old.transform(random_texts(3)), model.transform(random_texts(3)))


def test_the_pytorch_sampler_takes_the_padded_cells():
    pytest.importorskip("torch")
    texts = random_texts(12, min_len=2, max_len=6)
    model = CPGBN(layers=(4, 2), padding=2, device="cpu", **FAST).fit(texts)
    features = model.transform(texts)
    assert features.shape == (12, 4) and np.all(np.isfinite(features)) and features.sum() > 0


def test_report_of_a_padded_model():
    from cpgbn.explain.report import build_report
    texts, labels = phrase_corpus(30, seed=2)
    model = CPGBN(layers=(6, 3), padding=2, **FAST).fit(texts)
    html = build_report(model, texts, labels, lda=False, npmi=False, sweeps=4, burn_in=2)
    assert "2 empty columns around every document (padding)" in html


@pytest.mark.parametrize("baseline", ["pgbn", "lda"])
def test_cli_padding_is_refused_for_the_baselines(baseline, capsys):
    assert main(["evaluate", "trec", "--model", baseline, "--padding", "2", "--data-dir",
                 "/no/such/dir"]) == 2
    err = capsys.readouterr().err
    assert f"--padding is for --model cpgbn; {baseline} reads each document" in err
    assert "Traceback" not in err
