"""transform_sweeps.py on a small generated TREC-like file: the cells' rows, the default's
check against transform, resumption and the report (the real datasets are the study's run)."""
from helpers import write_tsv

from studies.transform_sweeps import transform_sweeps as study


def test_cells_resume_and_report(tmp_path, monkeypatch):
    texts = [f"how many w{i % 7} are there" if i % 2 else f"who wrote the w{i % 5} book"
             for i in range(120)]
    labels = ["NUM" if i % 2 else "HUM" for i in range(120)]
    (tmp_path / "TREC").mkdir()
    write_tsv(tmp_path / "TREC" / "train.tsv", texts, labels)
    write_tsv(tmp_path / "TREC" / "test.tsv", texts[:4], labels[:4])   # never read
    monkeypatch.setattr(study, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(study, "REPORT", tmp_path / "report.md")
    args = ["--datasets", "trec", "--seeds", "0", "--sweeps", "200,20", "--k", "4",
            "--data-dir", str(tmp_path)]
    study.main(args)
    cell = study.load_cells(tmp_path / "record.json")["cells"]["trec|seed=0"]
    assert (cell["n_fit"], cell["n_validation"]) == (96, 24)
    assert set(cell["rows"]) == {"200", "20"}
    assert cell["rows"]["200"]["feature_difference"] == 0.0
    assert cell["rows"]["20"]["feature_difference"] > 0.0
    assert cell["default_other_seed"]["feature_difference"] > 0.0
    # two separable classes: the default's features classify the validation documents
    assert cell["rows"]["200"]["accuracy"] > 0.9
    report = (tmp_path / "report.md").read_text()
    assert "| trec | 200 (150) |" in report and "| trec | 200, other seed |" in report
    # a second run finds the cell done and fits nothing
    monkeypatch.setattr(study, "run_cell", lambda *a, **k: 1 / 0)
    study.main(args)
    # --docs: a stratified sample of the training documents, its own cell and report row
    monkeypatch.undo()
    monkeypatch.setattr(study, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(study, "REPORT", tmp_path / "report.md")
    study.main(args + ["--docs", "60"])
    sampled = study.load_cells(tmp_path / "record.json")["cells"]["trec|seed=0|docs=60"]
    assert (sampled["n_fit"], sampled["n_validation"]) == (48, 12)
    assert "| trec (60 docs) | 200 (150) |" in (tmp_path / "report.md").read_text()
