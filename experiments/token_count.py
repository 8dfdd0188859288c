"""Choose the default ``token_count``: TREC accuracy for the exact link and several pseudo-counts.

Authors' protocol (fixed split, 200 sweeps / 150 burn-in, RBF SVC on theta^(1)/L), one layer
of 200 kernels, V = 8000 words + OOV.  Resumable: finished cells are kept in the JSON file.

    python experiments/token_count.py [--seeds 0] [--counts bernoulli-poisson,25,100,200]
"""
import argparse
import json
import sys
import time
from pathlib import Path

from cpgbn.evaluate import evaluate
from vocab_fix import MARK, add_note, stale_record

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--counts", default="bernoulli-poisson,25,100,200")
    ap.add_argument("--layers", default="200")
    ap.add_argument("--out", default=str(ROOT / "results" / "token_count.json"))
    args = ap.parse_args()
    out = Path(args.out)
    record = json.loads(out.read_text()) if out.exists() else {"cells": {}}
    layers = tuple(int(x) for x in args.layers.split(","))
    for count in args.counts.split(","):
        tc = count if count == "bernoulli-poisson" else int(count)
        key = f"{args.layers}|{count}|{args.seeds}"
        done = record["cells"].get(key)
        if done and not stale_record(done):
            continue  # (a result of the old vocabulary rule is run again)
        start = time.perf_counter()
        res = evaluate("trec", layers=layers, protocol="authors",
                       seeds=[int(s) for s in args.seeds.split(",")], token_count=tc)
        res["wall_seconds"] = round(time.perf_counter() - start, 1)
        res["command"] = "python " + " ".join(sys.argv)
        record["cells"][key] = res
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"{key}: {100 * res['accuracy_mean']:.1f}%  ({res['wall_seconds']}s)", flush=True)
    write_report(record, out.with_suffix(".md"))


def write_report(record, path):
    """One row per (layers, token_count), pooling the seeds of every cell."""
    import numpy as np
    groups = {}
    for key, res in record["cells"].items():
        layers_s, count, _ = key.split("|")
        groups.setdefault((layers_s, count), []).append(res)
    lines = ["# token_count study (TREC, authors' protocol)", "",
             "Made by `experiments/token_count.py`; the records (command, commit, seeds, timing) are "
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
        std = f" +- {acc.std(ddof=1):.1f}" if len(acc) > 1 else ""
        sweep = np.mean([r["median_sweep_seconds"] for r in runs])
        commits = ",".join(sorted({res["commit"] for res in cells}))
        mark = MARK if any(stale_record(res) for res in cells) else ""
        lines.append(f"| {layers_s} | {count} | {seeds} | {acc.mean():.1f}{std}{mark} | {sweep:.2f} "
                     f"| {commits} |")
    add_note(lines)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
