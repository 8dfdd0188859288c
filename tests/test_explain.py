"""Phrase topics at every layer and topic trees, on a small fitted 3-layer model."""
import numpy as np
import pytest

from cpgbn import CPGBN, CPGBNInputError
from cpgbn.cli import main
from cpgbn.explain import format_tree, kernel_weights, phrase_matrix

from helpers import random_texts


@pytest.fixture(scope="module")
def model():
    return CPGBN(layers=(6, 4, 2), vocab_size=30, n_iter=8, burn_in=4, random_state=0).fit(
        random_texts(80, seed=3))


def test_kernel_weights_are_on_the_simplex_and_compose_phi(model):
    g = model.globals_
    for layer, width in enumerate(model.layers_, start=1):
        for k in range(width):
            u = kernel_weights(g, layer, k)
            assert u.shape == (6,) and np.all(u >= 0) and u.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(kernel_weights(g, 3, 1), g.phi[0] @ g.phi[1][:, 1])


def test_phrase_matrix_layer_one_is_the_kernel(model):
    g = model.globals_
    np.testing.assert_allclose(phrase_matrix(g, 1, 2), g.D[:, :, 2], rtol=1e-6)
    assert phrase_matrix(g, 3, 0).sum() == pytest.approx(1.0, rel=1e-5)


def test_phrases_for_deep_topics(model):
    cols = model.columns(layer=2, topic=3, top_n=5)
    assert len(cols) == 3 and all(len(c) == 5 for c in cols)
    assert all(p1 >= p2 for col in cols for (_, p1), (_, p2) in zip(col, col[1:]))
    assert model.columns(2) == model.columns(layer=1, topic=2)
    with pytest.raises(CPGBNInputError, match="layer"):
        model.columns(layer=4, topic=0)
    with pytest.raises(CPGBNInputError, match="topic"):
        model.columns(layer=3, topic=2)
    with pytest.raises(CPGBNInputError):
        model.columns(1, layer=2, topic=1)


def test_tree_structure(model):
    root = model.tree(topic=1, children=2, top_n=2)
    assert (root.layer, root.topic) == (3, 1)
    assert len(root.children) == 2 and all(c.layer == 2 for c in root.children)
    leaves = [g for c in root.children for g in c.children]
    assert len(leaves) == 4 and all(leaf.layer == 1 and not leaf.children for leaf in leaves)
    column = model.globals_.phi[1][:, 1]
    assert [c.topic for c in root.children] == list(np.argsort(-column, kind="stable")[:2])
    text = format_tree(root)
    assert text.count("\n") == 6 and "layer 1 topic" in text
    assert root.to_dict()["children"][0]["layer"] == 2


def test_tree_command(model, tmp_path, capsys):
    model.save(tmp_path / "m")
    assert main(["tree", str(tmp_path / "m"), "--topics", "2", "--children", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("layer 3 topic") == 2 and "layer 1 topic" in out
    assert main(["tree", str(tmp_path / "m"), "--layer", "5"]) == 2
    assert "layer must be between 1 and 3" in capsys.readouterr().err


def test_display_counts_must_be_positive(model, tmp_path, capsys):
    model.save(tmp_path / "m")
    for command, option in [("topics", "--kernels"), ("topics", "--top"), ("topics", "--phrases"),
                            ("tree", "--topics"), ("tree", "--children"), ("tree", "--top")]:
        with pytest.raises(SystemExit) as stop:
            main([command, str(tmp_path / "m"), option, "-2"])
        assert stop.value.code == 2
        assert f"argument {option}: expected a positive integer" in capsys.readouterr().err
