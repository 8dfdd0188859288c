"""results/table4.md from the records of studies.table4 and studies.text_baselines."""
import json
from collections import defaultdict

import numpy as np

from cpgbn.files import write_file_atomically

from studies.common.reports import load_cells

from .settings import BASELINE_RECORD, BASELINES, DATASETS, OUT, PAPER, TABLE

#: What a complete row holds: splits per dataset (10 folds for SUBJ and MR) times seeds.
SPLITS = {"subj": 10, "mr": 10, "trec": 1, "imdb": 1}
SEEDS_WANTED = 3


def _cell(values, wanted) -> str:
    if not values:
        return "-"
    pct = 100 * np.asarray(values)
    text = f"{pct.mean():.1f}" + (f" +- {pct.std(ddof=1):.1f}" if len(pct) > 1 else "")
    return text + ("" if len(values) >= wanted else f" ({len(values)}/{wanted})")


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
    lines = [
        "# Table 4: the supervised CPGBN (sCPGBN) against the n-gram baselines",
        "",
        "Made by `python -m studies.table4.table4 --report` from results/table4/table4.json "
        "(sCPGBN: `CPGBNClassifier`, one thread per fit) and "
        "results/text_baselines/text_baselines.json (the baselines, seed 0, same folds: "
        "`fold_indices(seed=0)`, 10-fold CV for SUBJ and MR; official splits for TREC and "
        "IMDB).  Accuracy %, mean +- std over splits x seeds; `(n/m)`: n of the m cells of a "
        f"complete row (10 folds x {SEEDS_WANTED} seeds for SUBJ and MR, {SEEDS_WANTED} seeds "
        "elsewhere) are done.  Paper: its Table 4 (no MR or TREC there).",
        "",
        "| model | " + " | ".join(d.upper() for d in DATASETS) + " |",
        "|---|" + "---|" * len(DATASETS),
    ]
    for depth in (1, 2, 3):
        name = {1: "200", 2: "200-100", 3: "200-100-50"}[depth]
        lines.append(f"| sCPGBN {name} | " + " | ".join(
            _cell(rows[depth][d], SPLITS[d] * SEEDS_WANTED) for d in DATASETS) + " |")
        lines.append(f"| paper sCPGBN {name} | " + " | ".join(
            f"{PAPER[depth][d]:.1f}" if d in PAPER[depth] else "-" for d in DATASETS) + " |")
    for baseline in BASELINES:
        values = []
        for d in DATASETS:
            found = [c for k, c in baselines.items()
                     if c["dataset"] == d and c["baseline"] == baseline and c.get("seed") == 0
                     and c.get("fold_seed") in (0, None)]
            values.append(f"{100 * found[0]['accuracy_mean']:.1f}" if found else "-")
        lines.append(f"| {baseline} | " + " | ".join(values) + " |")
    lines += ["", "## Settings and time of each sCPGBN row", "",
              "| layers | dataset | cells | xi (per unit) | epochs | mean ECE | fit s (mean) "
              "| predict s (mean) | commits |", "|---|---|---|---|---|---|---|---|---|"]
    for (depth, dataset), m in sorted(meta.items()):
        lines.append(
            f"| {depth} | {dataset} | {len(rows[depth][dataset])} | "
            f"{', '.join(f'{x:g}' for x in sorted(m['xi']))} | "
            f"{', '.join(map(str, sorted(m['epochs'])))} | {np.mean(list(m['ece'])):.3f} | "
            f"{np.mean(list(m['fit_seconds'])):.0f} | {np.mean(list(m['predict_seconds'])):.1f} | "
            f"{', '.join(sorted(m['commit']))} |")
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
