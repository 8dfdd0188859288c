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
        if key in record["cells"]:
            continue
        start = time.perf_counter()
        res = evaluate("trec", layers=layers, protocol="authors",
                       seeds=[int(s) for s in args.seeds.split(",")], token_count=tc)
        res["wall_seconds"] = round(time.perf_counter() - start, 1)
        res["command"] = "python " + " ".join(sys.argv)
        record["cells"][key] = res
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"{key}: {100 * res['accuracy_mean']:.1f}%  ({res['wall_seconds']}s)", flush=True)
    lines = ["# token_count study (TREC, authors' protocol)", "",
             "Made by `experiments/token_count.py`; each row: command, commit and seeds in "
             "`token_count.json`.", "",
             "| layers | token_count | seeds | accuracy % | mean s/sweep | commit |",
             "|---|---|---|---|---|---|"]
    for key, res in record["cells"].items():
        layers_s, count, seeds = key.split("|")
        sweep = sum(r["median_sweep_seconds"] for r in res["runs"]) / len(res["runs"])
        acc = f"{100 * res['accuracy_mean']:.1f}"
        if len(res["seeds"]) > 1:
            acc += f" +- {100 * res['accuracy_std']:.1f}"
        lines.append(f"| {layers_s} | {count} | {seeds} | {acc} | {sweep:.2f} | {res['commit']} |")
    (out.with_suffix(".md")).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
