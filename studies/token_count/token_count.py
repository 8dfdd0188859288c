"""Choose the default ``token_count``: TREC accuracy for the exact link and several pseudo-counts.

Authors' protocol (fixed split, 200 sweeps / 150 burn-in, RBF SVC on theta^(1)/L), one layer
of 200 kernels, V = 8000 words + OOV.  Resumable: finished cells are kept in the JSON file.

    python -m studies.token_count.token_count [--seeds 0] [--counts bernoulli-poisson,25,100,200]
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np

from cpgbn.evaluate import evaluate

from studies.common.paths import RESULTS, ROOT
from studies.common.reports import command_line, mean_std
from studies.common.vocab_fix import MARK, add_note, stale_record


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", action="store_true", help="only rewrite token_count.md")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--counts", default="bernoulli-poisson,25,100,200")
    ap.add_argument("--layers", default="200")
    ap.add_argument("--out", default=str(ROOT / "results" / "token_count" / "token_count.json"))
    args = ap.parse_args()
    out = Path(args.out)
    record = json.loads(out.read_text()) if out.exists() else {"cells": {}}
    layers = tuple(int(x) for x in args.layers.split(","))
    for count in [] if args.report else args.counts.split(","):
        tc = count if count == "bernoulli-poisson" else int(count)
        key = f"{args.layers}|{count}|{args.seeds}"
        done = record["cells"].get(key)
        if done and not stale_record(done):
            continue  # (a result of the old vocabulary rule is run again)
        start = time.perf_counter()
        res = evaluate("trec", layers=layers, protocol="authors",
                       seeds=[int(s) for s in args.seeds.split(",")], token_count=tc)
        res["wall_seconds"] = round(time.perf_counter() - start, 1)
        res["command"] = command_line()
        record["cells"][key] = res
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"{key}: {100 * res['accuracy_mean']:.1f}%  ({res['wall_seconds']}s)", flush=True)
    write_report(record, out.with_suffix(".md"))


def report_text(record) -> str:
    """One row per (layers, token_count), pooling the seeds of every cell."""
    groups = {}
    for key, res in record["cells"].items():
        layers_s, count, _ = key.split("|")
        groups.setdefault((layers_s, count), []).append(res)
    lines = ["# token_count study (TREC, authors' protocol)", "",
             "Made by `studies/token_count/token_count.py`; the records (command, commit, seeds, timing) are "
             "in `token_count.json`. Accuracy: mean +- std over seeds.", "",
             "| layers | token_count | seeds | accuracy % | s/sweep | commits |",
             "|---|---|---|---|---|---|"]

    def order(item):
        count = item[0][1]
        return (item[0][0], -1 if count == "bernoulli-poisson" else int(count))

    for (layers_s, count), cells in sorted(groups.items(), key=order):
        runs = [r for res in cells for r in res["runs"]]
        acc = np.array([100 * r["accuracy"] for r in runs])
        seeds = ",".join(str(r["seed"]) for r in runs)
        sweep = np.mean([r["median_sweep_seconds"] for r in runs])
        commits = ",".join(sorted({res["commit"] for res in cells}))
        mark = MARK if any(stale_record(res) for res in cells) else ""
        lines.append(f"| {layers_s} | {count} | {seeds} | {mean_std(acc)}{mark} | {sweep:.2f} "
                     f"| {commits} |")
    lines += ["", *across_datasets()]
    add_note(lines)
    return "\n".join(lines) + "\n"


def write_report(record, path):
    """Write :func:`report_text` to ``path``."""
    path.write_text(report_text(record))


COUNTS = (200, 400, 800, 1600)


def across_datasets():
    """The default's evidence on all three datasets: accuracy % (mean +- std over seeds 0-2) per
    (dataset, layers, count) at the paper's V and eta = 0.05, authors' protocol, from the
    records that hold them: this file (TREC), ``prior_study.json`` (SUBJ and MR) and, where a
    count has no prior_study cells, ``table2.json``.  Never mixes two files in one cell."""
    from studies.prior_study import prior_study
    from studies.table2 import table2
    results = RESULTS
    token = json.loads((results / "token_count" / "token_count.json").read_text())["cells"]
    prior = json.loads((results / "prior_study" / "prior_study.json").read_text())["cells"]
    cells2 = json.loads((results / "table2" / "table2.json").read_text())["cells"]
    seeds = (0, 1, 2)

    def from_token(layers, count):
        runs = {r["seed"]: r["accuracy"] for key, res in token.items()
                if key.split("|")[:2] == [",".join(map(str, layers)), str(count)]
                for r in res["runs"]}
        return [runs[s] for s in seeds if s in runs]

    def from_prior(dataset, layers, count):
        keys = [prior_study.key_of(dataset, "-".join(map(str, layers)), 20000, count, 0.05, s)
                for s in seeds]
        return [prior[k]["accuracy_mean"] for k in keys if k in prior]

    def from_table2(dataset, layers, count):
        keys = [table2.key_of("authors", dataset, "cpgbn", layers, s, count) for s in seeds]
        return [cells2[k]["accuracy_mean"] for k in keys if k in cells2]

    lines = ["## All three datasets (the choice of the default)", "",
             "Authors' protocol, the paper's V (TREC 8000, SUBJ and MR 20000 words), eta = 0.05, "
             "seeds 0, 1, 2 (n shown when fewer); each cell from one record file "
             "(TREC: this study; SUBJ and MR: `prior_study.json`, else `table2.json`).", "",
             "| dataset | layers | " + " | ".join(f"count {c}" for c in COUNTS) + " |",
             "|---|---|" + "---|" * len(COUNTS)]
    for dataset in ("trec", "subj", "mr"):
        for layers in ((200,), (200, 100), (200, 100, 50)):
            row = []
            for count in COUNTS:
                if dataset == "trec":
                    accs = from_token(layers, count)
                else:
                    accs = from_prior(dataset, layers, count) or from_table2(dataset, layers, count)
                if not accs:
                    row.append("-")
                    continue
                row.append(mean_std(100 * np.array(accs))
                           + (f" (n={len(accs)})" if len(accs) < len(seeds) else ""))
            if set(row) != {"-"}:
                lines.append(f"| {dataset.upper()} | {'-'.join(map(str, layers))} | "
                             + " | ".join(row) + " |")
    return lines

if __name__ == "__main__":
    main()
