"""table4.py: xi tuned on a validation split, test cells recorded and resumed, the table, on a
small generated MR-like file (the real datasets are the study's own run)."""
from helpers import write_tsv

from studies.table4 import report, table4


def test_tuning_cells_and_table(tmp_path, monkeypatch):
    texts = [f"w{i % 7} not good w{i % 5}" if i % 2 else f"w{i % 7} good not w{i % 5}"
             for i in range(100)]
    labels = ["neg" if i % 2 else "pos" for i in range(100)]
    (tmp_path / "MR").mkdir()
    write_tsv(tmp_path / "MR" / "all.tsv", texts, labels)
    monkeypatch.setattr(table4, "OUT", tmp_path / "table4.json")
    monkeypatch.setattr(table4, "CHECKPOINTS", tmp_path / "checkpoints")
    monkeypatch.setattr(report, "OUT", tmp_path / "table4.json")
    monkeypatch.setattr(report, "TABLE", tmp_path / "table4.md")
    args = ["--datasets", "mr", "--layers", "3", "--folds", "0,1", "--tune-xi", "1,100",
            "--epochs", "20", "--data-dir", str(tmp_path)]
    table4.main(args)
    cells = table4.load_cells(tmp_path / "table4.json")["cells"]
    tunes = [c for c in cells.values() if c["kind"] == "tune"]
    tests = [c for c in cells.values() if c["kind"] == "test"]
    assert sorted(c["xi"] for c in tunes) == [1.0, 100.0]
    assert all(c["n_train"] == 72 and c["n_test"] == 18 for c in tunes)   # 80/20 of fold 0's
    assert [c["split"] for c in tests] == ["fold0", "fold1"]
    best = max(tunes, key=lambda c: (c["accuracy"], -c["xi"]))["xi"]
    assert {c["xi"] for c in tests} == {best}
    for c in tests:
        assert {"command", "commit", "fit_seconds", "predict_seconds", "ece", "paper_xi"} <= set(c)
    table = (tmp_path / "table4.md").read_text()
    assert "| paper's form 200 |" in table and "(2/30)" in table
    # a second run finds every cell done and fits nothing
    monkeypatch.setattr(table4, "fit_and_score", lambda *a, **k: 1 / 0)
    table4.main(args)
