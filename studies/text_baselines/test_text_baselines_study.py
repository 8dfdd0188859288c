"""text_baselines.py: a cell's record and the report, on small generated MR- and TREC-like files."""
import json

from helpers import write_tsv
from studies.text_baselines import text_baselines


def _data_dir(tmp_path):
    texts = [f"w{i % 7} not good w{i % 5}" if i % 2 else f"w{i % 7} good not w{i % 5}"
             for i in range(60)]
    labels = ["neg" if i % 2 else "pos" for i in range(60)]
    (tmp_path / "MR").mkdir()
    write_tsv(tmp_path / "MR" / "all.tsv", texts, labels)
    (tmp_path / "TREC").mkdir()
    questions = ["what is a w1 ?", "who is w2 ?", "where is w3 ?"] * 10
    classes = ["DESC", "HUM", "LOC"] * 10
    write_tsv(tmp_path / "TREC" / "train.tsv", questions, classes)
    write_tsv(tmp_path / "TREC" / "test.tsv", questions[:9], classes[:9])
    return tmp_path


def test_cells_and_report(tmp_path):
    data = _data_dir(tmp_path)
    record = {"cells": {}}
    for dataset in ("mr", "trec"):
        for name in ("nbsvm-bigram", "mnb-unigram", "mnb-bigram"):
            cell = text_baselines.run_cell(dataset, name, data_dir=data, seed=0, fold_seed=0,
                                           n_folds=3)
            record["cells"][text_baselines.cell_key(dataset, name, 0, 0)] = cell
    mr = record["cells"]["mr|nbsvm-bigram|seed=0|folds=0"]
    assert [r["split"] for r in mr["runs"]] == ["fold0", "fold1", "fold2"]
    assert sum(r["n_test"] for r in mr["runs"]) == 60
    assert mr["accuracy_mean"] == 1.0  # the bigram carries the label
    assert record["cells"]["mr|mnb-unigram|seed=0|folds=0"]["accuracy_mean"] < 0.8
    trec = record["cells"]["trec|mnb-bigram|seed=0"]
    assert trec["fold_seed"] is None and [r["split"] for r in trec["runs"]] == ["official"]
    assert trec["runs"][0]["n_train"] == 30 and trec["accuracy_mean"] == 1.0
    for cell in record["cells"].values():
        assert {"command", "commit", "seconds", "cpu_seconds", "seed"} <= set(cell)
    json.dumps(record)
    text = text_baselines.report_text(record)
    assert "| nbsvm-bigram | 100.0 +- 0.0 | 100.0 |" in text
    assert "| NBSVM-bi | nbsvm-bigram | 79.4 | 100.0 | +20.6 (0.0) |" in text
    assert "svm-trigram" not in text  # rows only for baselines that ran
    assert all("accuracy_bias_kept" in r for r in mr["runs"])
    assert "| nbsvm-bigram | 100.0 | 100.0 | 100.0 | 100.0 |" in text  # b interpolated, kept
    assert "Fold partitions" not in text
    other = text_baselines.run_cell("mr", "mnb-unigram", data_dir=data, fold_seed=1, n_folds=3)
    assert other["fold_seed"] == 1
    record["cells"][text_baselines.cell_key("mr", "mnb-unigram", 0, 1)] = other
    again = text_baselines.report_text(record)
    assert "| MR | mnb-unigram | " in again and "fold seed 1" in again
    # the main tables still use fold seed 0 only
    assert again.split("## Time")[0] == text.split("## Time")[0]
