"""Near-empty phrase columns: a column holding less than ``min_column_share`` of a kernel's (or a
topic's) mass is hidden from its words, phrases and sharpness and printed as ``_``."""
import itertools

import numpy as np
import pytest

from cpgbn import CPGBN, CPGBNInputError
from cpgbn.cli import main
from cpgbn.explain import (HIDDEN, MIN_COLUMN_SHARE, best_phrases, column_mass, format_kernel_table,
                           format_tree, kernel_table, phrases_from_columns, sharpness, summary_text,
                           top_words_per_column)
from cpgbn.text import Vocabulary

from helpers import random_texts

V, F = 7, 3
VOCAB = Vocabulary(["<unk>"] + [f"v{i}" for i in range(1, V)])


def kernel_with_thin_column(share=0.02, seed=0):
    """A V x F kernel (sums to 1) whose column 1 holds ``share`` of the mass."""
    rng = np.random.default_rng(seed)
    D = rng.gamma(0.5, size=(V, F))
    D /= D.sum(axis=0)
    D *= np.array([(1 - share) / 2, share, (1 - share) / 2])
    return D


def test_column_mass_is_each_columns_share():
    D = kernel_with_thin_column(0.02)
    np.testing.assert_allclose(column_mass(D), [0.49, 0.02, 0.49])
    np.testing.assert_array_equal(column_mass(np.zeros((V, F))), np.zeros(F))


def test_words_phrases_and_sharpness_leave_out_the_thin_column():
    D = kernel_with_thin_column(0.02)
    columns = top_words_per_column(D, VOCAB, 3, min_column_share=0.1)
    assert [len(c) for c in columns] == [3, 0, 3]
    assert top_words_per_column(D, VOCAB, 3) == top_words_per_column(D, VOCAB, 3, min_column_share=0.01)

    # best phrases: exact top sequences over the shown columns, HIDDEN in the hidden one
    probs = D / D.sum(axis=0)
    brute = sorted(((probs[a, 0] * probs[b, 2], (a, b))
                    for a, b in itertools.product(range(1, V), repeat=2)), key=lambda x: -x[0])
    found = best_phrases(D, VOCAB, top_n=4, beam=4, min_column_share=0.1)
    assert [p.words for p in found] == [(f"v{a}", HIDDEN, f"v{b}") for _, (a, b) in brute[:4]]
    np.testing.assert_allclose([p.weight for p in found], [w for w, _ in brute[:4]])
    assert [p.text for p in phrases_from_columns(top_words_per_column(D, VOCAB, 4, min_column_share=0.1), 3)] \
        == [p.text for p in found[:3]]
    assert all(HIDDEN not in p.words for p in best_phrases(D, VOCAB, top_n=3))

    # sharpness is the mean of the shown columns' top probabilities
    top = probs[1:].max(axis=0)
    assert sharpness(D, min_column_share=0.1) == pytest.approx((top[0] + top[2]) / 2)
    assert sharpness(D) == pytest.approx(top.mean())


def test_a_threshold_above_every_column_hides_everything():
    D = kernel_with_thin_column(0.02)
    assert best_phrases(D, VOCAB, min_column_share=0.9) == []
    assert sharpness(D, min_column_share=0.9) == 0.0
    assert phrases_from_columns([[], [], []]) == []
    for bad in (-0.1, 1.0, 2):
        with pytest.raises(CPGBNInputError, match="min_column_share"):
            top_words_per_column(D, VOCAB, 3, min_column_share=bad)


@pytest.fixture(scope="module")
def thin_model():
    """A fitted model whose kernel 0 puts 1% of its mass on its middle column."""
    model = CPGBN(layers=(5, 2), vocab_size=30, n_iter=6, burn_in=3, random_state=0).fit(
        random_texts(60, seed=4))
    D = model.globals_.D
    D[:, :, 0] *= np.array([0.495, 0.01, 0.495], dtype=D.dtype) / D[:, :, 0].sum(axis=0)
    return model


def test_kernel_table_hides_near_empty_columns(thin_model):
    rows = kernel_table(thin_model, top_words=3)
    row = rows[0]
    assert row.columns[1] == [] and row.n_shown == 2
    np.testing.assert_allclose(row.column_mass, [0.495, 0.01, 0.495], rtol=1e-4)
    assert all(p.words[1] == HIDDEN for p in row.phrases)
    text = format_kernel_table([row], columns=True)
    first_rank = next(line for line in text.splitlines()[1:]
                      if not line.startswith("   in corpus: ")).split()
    assert first_rank[1] == HIDDEN and len(first_rank) == 3
    shown_all = kernel_table(thin_model, top_words=3, min_column_share=0)[0]
    assert shown_all.n_shown == 3 and all(HIDDEN not in p.words for p in shown_all.phrases)
    assert row.to_dict()["column_mass"] == row.column_mass


def test_tree_and_summary_hide_near_empty_columns(thin_model):
    leaves = [node for root in (thin_model.tree(topic=k, children=5) for k in range(2))
              for node in root.children if node.topic == 0]
    assert leaves and all(leaf.columns[1] == [] and leaf.phrase().split()[1] == HIDDEN for leaf in leaves)
    assert "  |  _  |  " in format_tree(leaves[0])
    assert all(c for c in thin_model.tree(topic=0, children=5, min_column_share=0).children[0].columns)
    text = summary_text(thin_model, npmi=False)
    line = next(line for line in text.splitlines() if line.startswith("kernel columns"))
    assert f"less than {100 * MIN_COLUMN_SHARE:g}%" in line and line.split()[2] != "0"


def test_cli_options(thin_model, tmp_path, capsys):
    path = tmp_path / "m"
    thin_model.save(path)
    # the per-column view (--columns): its hidden columns and best phrases; the corpus
    # windows' open slots are another matter (tests/test_kernel_windows.py)
    columns_view = lambda text: "\n".join(line for line in text.splitlines()
                                          if not line.startswith(("kernel ", "   in corpus: ")))
    assert main(["topics", str(path), "--kernels", "5", "--sort", "kernel", "--columns"]) == 0
    out = capsys.readouterr().out
    kernel0 = columns_view(out.split("kernel 1 ")[0])
    assert f" {HIDDEN} " in kernel0
    assert main(["topics", str(path), "--min-column-share", "0", "--columns"]) == 0
    out = columns_view(capsys.readouterr().out)
    assert "best phrase: " in out and f" {HIDDEN} " not in out
    n_kernels = lambda text: sum(line.startswith("kernel ") for line in text.splitlines())
    assert main(["topics", str(path), "--min-columns", "3"]) == 0
    wide = capsys.readouterr().out
    assert n_kernels(wide) == sum(r.n_named_columns >= 3 for r in kernel_table(thin_model))
    assert main(["tree", str(path), "--topics", "2", "--children", "5", "--min-column-share", "0.05"]) == 0
    assert HIDDEN in capsys.readouterr().out
    for bad in (["--min-column-share", "1.5"], ["--min-column-share", "x"], ["--min-columns", "0"]):
        with pytest.raises(SystemExit) as stop:
            main(["topics", str(path), *bad])
        assert stop.value.code == 2
        assert "expected" in capsys.readouterr().err
