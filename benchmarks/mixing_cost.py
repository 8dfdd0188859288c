"""What the mixing diagnostic costs: its seconds after each sweep beside the sweep's own.

A CPGBN fit on a dataset's training split (the authors' protocol's split, the paper's
vocabulary size, F = 3, the default token_count) times every sweep (``sweep_seconds_``) and,
separately, the diagnostic that follows it (``mixing_.seconds``: one pass over the latent counts
m and the per-kernel feature sums).  The ratio of the medians is the diagnostic's share of a
sweep; the record also holds the diagnostic's ESS and change shares, the command and commit.

    python benchmarks/mixing_cost.py [--datasets trec] [--layers 200-100-50] [--sweeps 60] \
        [--threads 1] [--out results/speed/mixing_cost.json]
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def measure(dataset: str, layers, n_iter: int, threads: int, device=None) -> dict:
    from cpgbn import CPGBN
    from cpgbn.datasets import dataset_info, load_dataset
    texts, _ = load_dataset(dataset, "train")
    model = CPGBN(layers=layers, vocab_size=dataset_info(dataset)["vocab_size"] + 1,
                  n_iter=n_iter, burn_in=n_iter // 2, random_state=0, n_threads=threads,
                  device=device)
    start = time.perf_counter()
    model.fit(texts)
    wall = time.perf_counter() - start
    sweep, mixing = model.sweep_seconds_[1:], model.mixing_.seconds[1:]  # the first compiles
    return {"dataset": dataset, "layers": "-".join(map(str, layers)), "n_iter": n_iter,
            "threads": threads, "device": device, "n_docs": len(texts),
            "median_sweep_seconds": float(np.median(sweep)),
            "median_mixing_seconds": float(np.median(mixing)),
            "ratio": float(np.median(mixing) / np.median(sweep)),
            "total_ratio": float(mixing.sum() / sweep.sum()), "fit_wall_seconds": round(wall, 1),
            "mixing": {k: v for k, v in model.mixing_.as_record().items()
                       if k not in ("moved", "switched", "ess")}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="trec")
    ap.add_argument("--layers", default="200-100-50")
    ap.add_argument("--sweeps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=str(ROOT / "results" / "speed" / "mixing_cost.json"))
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    origin = provenance()
    layers = tuple(int(k) for k in args.layers.split("-"))
    rows = []
    for dataset in args.datasets.split(","):
        row = measure(dataset, layers, args.sweeps, args.threads, args.device)
        rows.append(row)
        print(f"{dataset} {args.layers}: sweep {row['median_sweep_seconds']:.3f}s, diagnostic "
              f"{row['median_mixing_seconds']:.4f}s (ratio {row['ratio']:.3f})", flush=True)
    record = {"rows": rows, "command": " ".join(["python"] + [shlex.quote(a) for a in sys.argv]),
              **origin}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
