"""results/table4.md from the records of studies.table4 (the paper's form), studies.classifier_table
(the classifier as it is today, its network alone, NBSVM-bigram on the same splits) and
studies.text_baselines."""
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from cpgbn.files import write_file_atomically

from studies.common.reports import load_cells

from .settings import BASELINE_RECORD, BASELINES, CLASSIFIER_CELLS, DATASETS, OUT, PAPER, TABLE

#: What a complete row holds: splits per dataset (10 folds for SUBJ and MR) times seeds.
SPLITS = {"subj": 10, "mr": 10, "trec": 1, "imdb": 1}
SEEDS_WANTED = 3


def _cell(values, wanted) -> str:
    if not values:
        return "-"
    pct = 100 * np.asarray(values)
    text = f"{pct.mean():.1f}" + (f" +- {pct.std(ddof=1):.1f}" if len(pct) > 1 else "")
    return text + ("" if len(values) >= wanted else f" ({len(values)}/{wanted})")


#: The classifier table's rows in this table: (model, layers, label)
TODAY = (("default", (200,), "CPGBNClassifier() 200"),
         ("default", (200, 100, 50), "CPGBNClassifier() 200-100-50"),
         ("network", (200,), "its network alone 200"),
         ("network", (200, 100, 50), "its network alone 200-100-50"))


def _classifier_cells() -> list:
    return [json.loads(p.read_text()) for p in sorted(Path(CLASSIFIER_CELLS).glob("*.json"))]


def _today_rows(cells) -> tuple[list, list]:
    """The accuracy rows of the classifier table's models and their seconds' rows."""
    accuracy, seconds = [], []
    for model, layers, label in TODAY + (("nbsvm-bigram", None, "nbsvm-bigram (same splits)"),):
        found = {d: [c for c in cells if c["model"] == model and c["dataset"] == d
                     and (layers is None or tuple(c["layers"]) == layers)] for d in DATASETS}
        accuracy.append(f"| {label} | " + " | ".join(
            _cell([c["accuracy"] for c in found[d]], SPLITS[d] * SEEDS_WANTED)
            for d in DATASETS) + " |")
        seconds.append(f"| {label} | " + " | ".join(_seconds(found[d]) for d in DATASETS) + " |")
    return accuracy, seconds


def _seconds(cells) -> str:
    if not cells:
        return "-"
    threads = ",".join(str(t) for t in sorted({c.get("threads", 1) for c in cells}))
    return (f"{np.median([c['fit_seconds'] for c in cells]):.0f} / "
            f"{np.median([c['predict_seconds'] for c in cells]):.2f} ({threads})")


def write_table() -> str:
    cells = load_cells(OUT)["cells"]
    tests = [c for c in cells.values() if c["kind"] == "test"]
    rows = defaultdict(lambda: defaultdict(list))
    meta = defaultdict(lambda: defaultdict(set))
    for c in tests:
        depth = len(c["layers"])
        rows[depth][c["dataset"]].append(c["accuracy"])
        for name in ("xi", "epochs", "commit"):
            meta[(depth, c["dataset"])][name].add(c[name])
        meta[(depth, c["dataset"])]["fit_seconds"].add(c["fit_seconds"])
        meta[(depth, c["dataset"])]["predict_seconds"].add(c["predict_seconds"])
        meta[(depth, c["dataset"])]["ece"].add(c["ece"])
    baselines = json.loads(BASELINE_RECORD.read_text())["cells"] if BASELINE_RECORD.exists() else {}
    today, today_seconds = _today_rows(_classifier_cells())
    lines = [
        "# Table 4: the classifier, the paper's form and the n-gram baselines",
        "",
        "Made by `python -m studies.table4.table4 --report` from "
        "results/classifier_table/cells/ (`python -m studies.classifier_table.table`: "
        "`CPGBNClassifier` with today's defaults, its network trained alone "
        "(`generative=False`), NBSVM-bigram), results/table4/table4.json (the paper's form, "
        "`settings.PAPER_FORM`: a softmax on theta, xi per unit chosen on a validation split "
        "of the training documents, 10 epochs) and results/text_baselines/text_baselines.json "
        "(the other baselines, seed 0).  The same splits everywhere: 10-fold CV for SUBJ and "
        "MR (`fold_indices(seed=0)`), the official splits for TREC and IMDB; seeds 0, 1, 2.  "
        "Accuracy % on the test documents, mean +- std over splits x seeds; `(n/m)`: n of the "
        f"m cells of a complete row (10 folds x {SEEDS_WANTED} seeds for SUBJ and MR, "
        f"{SEEDS_WANTED} seeds elsewhere) are done.  \"paper\": its Table 4 (sCPGBN; no MR "
        "or TREC there).",
        "",
        "| model | " + " | ".join(d.upper() for d in DATASETS) + " |",
        "|---|" + "---|" * len(DATASETS),
    ] + today
    for depth in (1, 3):
        name = {1: "200", 3: "200-100-50"}[depth]
        lines.append(f"| paper's form {name} | " + " | ".join(
            _cell(rows[depth][d], SPLITS[d] * SEEDS_WANTED) for d in DATASETS) + " |")
    for depth in (1, 2, 3):
        name = {1: "200", 2: "200-100", 3: "200-100-50"}[depth]
        lines.append(f"| paper: sCPGBN {name} | " + " | ".join(
            f"{PAPER[depth][d]:.1f}" if d in PAPER[depth] else "-" for d in DATASETS) + " |")
    for baseline in BASELINES:
        values = []
        for d in DATASETS:
            found = [c for k, c in baselines.items()
                     if c["dataset"] == d and c["baseline"] == baseline and c.get("seed") == 0
                     and c.get("fold_seed") in (0, None)]
            values.append(f"{100 * found[0]['accuracy_mean']:.1f}" if found else "-")
        lines.append(f"| {baseline} | " + " | ".join(values) + " |")
    lines += ["", "## Seconds of the classifier table's rows", "",
              "Median fit / predict seconds of a cell (threads per fit in brackets), on this "
              "project's 2-core machine, one cell at a time.", "",
              "| model | " + " | ".join(d.upper() for d in DATASETS) + " |",
              "|---|" + "---|" * len(DATASETS)] + today_seconds
    lines += ["", "## Settings and time of each paper's-form row", "",
              "| layers | dataset | cells | xi (per unit) | epochs | mean ECE | fit s (mean) "
              "| predict s (mean) | commits |", "|---|---|---|---|---|---|---|---|---|"]
    for (depth, dataset), m in sorted(meta.items()):
        lines.append(
            f"| {depth} | {dataset} | {len(rows[depth][dataset])} | "
            f"{', '.join(f'{x:g}' for x in sorted(m['xi']))} | "
            f"{', '.join(map(str, sorted(m['epochs'])))} | {np.mean(list(m['ece'])):.3f} | "
            f"{np.mean(list(m['fit_seconds'])):.0f} | {np.mean(list(m['predict_seconds'])):.1f} | "
            f"{', '.join(sorted(m['commit']))} |")
    if any(dataset == "imdb" for _, dataset in meta):
        lines += ["", "An IMDB fit outlasts a 3-hour session, so its cell resumes from the fit's "
                  "checkpoint (`table4.py`): a resumed cell's fit seconds are its last part's "
                  "only, run beside other work, and are not the fit's time."]
    tunes = [c for c in cells.values() if c["kind"] == "tune"]
    if tunes:
        lines += ["", "## xi chosen on a validation split of the training data", "",
                  "80% of the first split's training documents fitted, 20% scored (seed 0); "
                  "the test documents are not read.", "",
                  "| dataset | layers | xi | validation accuracy | paper's xi |",
                  "|---|---|---|---|---|"]
        for c in sorted(tunes, key=lambda c: (c["dataset"], len(c["layers"]), c["xi"])):
            lines.append(f"| {c['dataset']} | {'-'.join(map(str, c['layers']))} | {c['xi']:g} | "
                         f"{100 * c['accuracy']:.1f} | {c['paper_xi']:.3g} |")
    commands = sorted({c["command"] for c in cells.values()})
    lines += ["", "Commands:", ""] + [f"    {c}" for c in commands]
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text
