"""Seconds per Gibbs sweep against corpus size and against the number of kernels.

* size: IMDB training documents 2.5k, 5k, 10k, 25k (the first n of a fixed shuffle), K = 200;
* kernels: K = 50, 100, 200, 400 on the 5k-document subset.
One layer, F = 3, V = 30000 words + OOV, the default token_count; median of timed sweeps after
20 warm-up sweeps, and the peak resident memory of the process after the largest corpus (the first sweeps of a chain are several times slower while its counts
spread out; the steady state is what a run spends its time in).  Writes results/speed/scaling.json and results/speed/scaling.png (two panels, with a straight
line through the origin fitted to each series, to show linear growth in tokens and in K).
The last line of stdout is JSON.

    python benchmarks/scaling.py [--sizes 2500,5000,10000,25000] [--kernels 50,100,200,400]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gibbs_speed import time_cpgbn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2500,5000,10000,25000")
    ap.add_argument("--kernels", default="50,100,200,400")
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from cpgbn.model import DEFAULT_TOKEN_COUNT
    from cpgbn.datasets import load_dataset
    from cpgbn.text import Corpus

    texts, _ = load_dataset("imdb", "train", data_dir=args.data_dir)
    order = np.random.default_rng(0).permutation(len(texts))
    sizes = [int(s) for s in args.sizes.split(",")]
    full = Corpus.from_texts([texts[i] for i in order[:max(sizes)]], vocab_size=30001)
    rows = []
    for n in sizes:
        corpus = full.subset(np.arange(n))
        t = float(np.median(time_cpgbn(corpus, (200,), args.sweeps, args.warmup, DEFAULT_TOKEN_COUNT)))
        rows.append(dict(series="size", n_docs=n, n_tokens=int(corpus.lengths.sum()), K=200,
                         seconds_per_sweep=t))
        print(f"docs {n:6d} tokens {rows[-1]['n_tokens']:9d} K 200: {t:.3f} s/sweep", flush=True)
    import resource
    # the largest corpus ran last: this process's peak RSS is that run's (corpus included)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"peak RSS after the {max(sizes)}-document run: {peak_rss_mb:.0f} MB", flush=True)
    base = full.subset(np.arange(5000))
    for K in (int(k) for k in args.kernels.split(",")):
        t = float(np.median(time_cpgbn(base, (K,), args.sweeps, args.warmup, DEFAULT_TOKEN_COUNT)))
        rows.append(dict(series="kernels", n_docs=5000, n_tokens=int(base.lengths.sum()), K=K,
                         seconds_per_sweep=t))
        print(f"docs   5000 K {K:4d}: {t:.3f} s/sweep", flush=True)
    record = {"rows": rows, "peak_rss_mb_largest_size": peak_rss_mb, "token_count": DEFAULT_TOKEN_COUNT, "command": "python " + " ".join(sys.argv),
              **provenance()}
    (ROOT / "results" / "speed" / "scaling.json").write_text(json.dumps(record, indent=1) + "\n")
    plot(record, ROOT / "results" / "speed" / "scaling.png")
    print(json.dumps(record))


def plot(record, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, series, x_key, label in ((axes[0], "size", "n_tokens", "training tokens (IMDB, K = 200)"),
                                     (axes[1], "kernels", "K", "kernels K (IMDB 5k documents)")):
        rows = [r for r in record["rows"] if r["series"] == series]
        x = np.array([r[x_key] for r in rows], dtype=float)
        y = np.array([r["seconds_per_sweep"] for r in rows])
        slope = float(x @ y / (x @ x))
        ax.plot(x, y, "o", label="measured")
        ax.plot([0, x.max()], [0, slope * x.max()], "--", label="linear through 0")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds per sweep")
        ax.legend()
    fig.suptitle(f"CPGBN Gibbs sweep, {record['machine']} (commit {record['commit']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
