"""generalisation.py: variants resolve to evaluate()'s arguments; cells are written once, with
their accuracy and mixing, and tabled."""
import json

import pytest

from cpgbn.errors import CPGBNInputError
from cpgbn.model import DEFAULT_TOKEN_COUNT

from helpers import random_texts
from studies.generalisation import generalisation as study

CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


def _fake_trec(root, n_train=36, n_test=12):
    """A TREC folder (official train/test files) of random texts over the six classes."""
    folder = root / "TREC"
    folder.mkdir(parents=True)
    for split, n, seed in (("train", n_train, 0), ("test", n_test, 1)):
        texts = random_texts(n, seed=seed)
        lines = [f"{CLASSES[i % 6]}\t{t}\n" for i, t in enumerate(texts)]
        (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    return root


def test_variants_resolve_to_evaluate_arguments():
    default = study.evaluate_arguments("cpgbn-default")
    assert default == {"model": "cpgbn", "layers": (200, 100, 50),
                       "token_count": DEFAULT_TOKEN_COUNT, "model_params": {}}
    assert study.evaluate_arguments("pgbn-plain")["token_count"] == 1
    assert study.evaluate_arguments("cpgbn-count-25")["token_count"] == 25
    assert study.evaluate_arguments("lda-200") == {"model": "lda", "layers": (200,),
                                                   "token_count": 1, "model_params": {}}
    assert study.evaluate_arguments("cpgbn-hybrid-1ep-refine2")["model_params"] == {
        "inference": "hybrid", "n_epochs": 1, "learning_rate": 3e-3, "refine_iter": 2}
    # an estimator parameter that evaluate() does not take itself goes to model_params
    assert study.variant(pooling_concentration=0.5)["pooling_concentration"] == 0.5
    study.VARIANTS["tmp-test"] = study.variant(sample_r=False)
    try:
        assert study.evaluate_arguments("tmp-test")["model_params"] == {"sample_r": False}
    finally:
        del study.VARIANTS["tmp-test"]
    with pytest.raises(CPGBNInputError, match="unknown variant 'nope'"):
        study.evaluate_arguments("nope")


def test_cells_are_written_once_with_accuracy_and_mixing(tmp_path, monkeypatch):
    data = _fake_trec(tmp_path / "data")
    out = tmp_path / "out"
    # small layers keep the test fast; the registry's shape is what is exercised
    monkeypatch.setitem(study.VARIANTS, "cpgbn-count-25", study.variant(layers=(6, 3), token_count=25))
    monkeypatch.setitem(study.VARIANTS, "pgbn-plain", study.variant("pgbn", layers=(6,)))
    argv = ["--datasets", "trec", "--variants", "cpgbn-count-25,pgbn-plain", "--seeds", "0",
            "--data-dir", str(data), "--out", str(out), "--n-iter", "6", "--burn-in", "3"]
    study.main(argv)
    records = {r["variant"]: r for r in study.load_records(out)}
    assert set(records) == {"cpgbn-count-25", "pgbn-plain"}
    for record in records.values():
        assert 0.0 <= record["accuracy"] <= 1.0 and record["seed"] == 0
        assert record["dataset"] == "trec" and record["protocol"] == "authors"
        assert len(record["mixing"]["moved"]) == 6 and record["mixing"]["n_collected"] == 3
        assert all(0.0 <= x <= 1.0 for x in record["mixing"]["moved"])
        assert record["command"] and record["commit"] and record["fit_seconds"] >= 0
    assert records["cpgbn-count-25"]["evaluation"]["token_count"] == 25
    assert records["pgbn-plain"]["evaluation"]["model"] == "pgbn"

    # a second run skips the cells it finds (it would fail if it evaluated anything)
    def refuse(*args, **kwargs):
        raise AssertionError("a finished cell was run again")
    monkeypatch.setattr(study, "evaluate", refuse)
    study.main(argv)
    table = (out / "generalisation.md").read_text()
    assert "| cpgbn-count-25 | " in table and "| pgbn-plain | TREC | " in table
    assert json.dumps(study.VARIANTS["pgbn-plain"]) in table


def test_the_committed_report_is_its_records():
    records = study.load_records()
    if not records:
        pytest.skip("no cells recorded yet")
    assert study.report_text(records) == (study.OUT / "generalisation.md").read_text(), (
        "results/generalisation/generalisation.md differs from its cells: run "
        "python -m studies.generalisation.generalisation --report")
