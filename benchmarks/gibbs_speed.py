"""Seconds per Gibbs sweep of CPGBN on MR, TREC and SUBJ, beside tomotopy LDA on the same tokens.

For each dataset (the authors' training split, the paper's vocabulary size, F = 3) and each
structure (200, 200-100, 200-100-50): 20 warm-up sweeps (JIT compilation included; the first
sweeps of a chain are several times slower while its counts spread out), then the median of
timed full training sweeps.  In the same run and with the same thread count,
tomotopy's collapsed-Gibbs LDA with K = 200 on the same token ids gives the bag-of-words
reference: the two take turns (an untimed then a timed sweep of each, so that neither is timed
on caches the other has just evicted), so both are measured under the same machine load, and
the ratio of the medians is printed.  Peak resident memory is measured per configuration in a
fresh subprocess.  The paper's GTX 1080Ti times are printed beside ours.  The last line of
stdout is JSON.

    python benchmarks/gibbs_speed.py [--datasets mr,trec,subj] [--sweeps 9] [--threads 2]
    python benchmarks/gibbs_speed.py --datasets mr --structures 200 --no-memory --out /tmp/r.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

PAPER_SECONDS = {("mr", "200"): 3.58, ("mr", "200-100"): 8.19, ("mr", "200-100-50"): 10.44,
                 ("trec", "200"): 0.98, ("trec", "200-100"): 1.99, ("trec", "200-100-50"): 2.59,
                 ("subj", "200"): 3.53, ("subj", "200-100"): 6.56, ("subj", "200-100-50"): 7.87}
STRUCTURES = ((200,), (200, 100), (200, 100, 50))


def corpus_of(dataset: str, data_dir=None):
    from cpgbn.datasets import dataset_info, load_dataset
    from cpgbn.text import Corpus
    texts, _ = load_dataset(dataset, "train", data_dir=data_dir)
    return Corpus.from_texts(texts, vocab_size=dataset_info(dataset)["vocab_size"] + 1)


def cpgbn_sweeper(corpus, layers, warmup: int, token_count: int):
    """A function running one CPGBN training sweep, after ``warmup`` sweeps."""
    from cpgbn.inference.gibbs import GibbsSampler
    from cpgbn.inference.state import Hyperparameters
    from cpgbn.layers.cells import from_token_sequences
    data = from_token_sequences(corpus.tokens, corpus.offsets, 3, token_count)
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05,) * len(layers)), seed=0)
    state = sampler.initial_state(layers, len(corpus.vocabulary))
    for _ in range(warmup):
        sampler.sweep(state)
    return lambda: sampler.sweep(state)


def time_cpgbn(corpus, layers, sweeps: int, warmup: int, token_count: int) -> list[float]:
    sweep = cpgbn_sweeper(corpus, layers, warmup, token_count)
    return [_seconds(sweep) for _ in range(sweeps)]


def tomotopy_sweeper(corpus, warmup: int, threads: int):
    """A function running one tomotopy LDA-200 iteration on the same token ids, or None."""
    try:
        import tomotopy as tp
    except ImportError:
        return None
    model = tp.LDAModel(k=200, seed=0)
    ids = corpus.tokens.astype(str)
    for j in range(len(corpus)):
        words = ids[corpus.offsets[j]:corpus.offsets[j + 1]].tolist()
        if words:
            model.add_doc(words)
    model.train(warmup, workers=threads)
    return lambda: model.train(1, workers=threads)


def _seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def peak_memory_mb(dataset: str, layers, data_dir, token_count: int) -> float:
    """Peak RSS of a fresh process that builds the corpus and runs two sweeps.

    Read from VmHWM (the peak of the process's own address space): getrusage's ru_maxrss
    survives fork and exec on Linux, so a child would report this benchmark's own peak if
    that were larger.
    """
    code = ("import sys, resource; sys.path.insert(0, %r); import gibbs_speed as g; "
            "c = g.corpus_of(%r, %r); g.time_cpgbn(c, %r, 1, 1, %d); "
            "print(g.own_peak_rss_kib())"
            % (os.path.dirname(os.path.abspath(__file__)), dataset, data_dir, tuple(layers),
               token_count))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024.0


def own_peak_rss_kib() -> int:
    """This process's peak resident set in KiB (VmHWM on Linux, else ru_maxrss)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="mr,trec,subj")
    ap.add_argument("--sweeps", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--structures", default="200,200-100,200-100-50",
                    help="comma-separated layer structures (default: all three)")
    ap.add_argument("--out", default=None,
                    help="JSON record to write (default results/speed/speed.json, with results/speed/speed.md)")
    args = ap.parse_args()
    import numba

    from cpgbn.evaluate.provenance import provenance
    from cpgbn.model import DEFAULT_TOKEN_COUNT
    structures = [tuple(int(k) for k in text.split("-")) for text in args.structures.split(",")]
    unknown = [st for st in structures if st not in STRUCTURES]
    if unknown:
        ap.error(f"--structures: {unknown} not among {STRUCTURES}")
    threads = args.threads or numba.get_num_threads()
    numba.set_num_threads(threads)
    rows = []
    for dataset in args.datasets.split(","):
        corpus = corpus_of(dataset, args.data_dir)
        lda_sweep = tomotopy_sweeper(corpus, args.warmup, threads)
        for layers in structures:
            name = "-".join(map(str, layers))
            sweep = cpgbn_sweeper(corpus, layers, args.warmup, DEFAULT_TOKEN_COUNT)
            # the two samplers take turns, so that both see the same machine (shared machines
            # drift by 20-30% over minutes); each turn is an untimed sweep then a timed one, so
            # that neither is timed on caches the other has just evicted (tomotopy's counts fit
            # in a 32 MB L3, and a CPGBN sweep streams hundreds of MB through it)
            times, lda = [], []
            for _ in range(args.sweeps):
                sweep()
                times.append(_seconds(sweep))
                if lda_sweep is not None:
                    lda_sweep()
                    lda.append(_seconds(lda_sweep))
            median = float(np.median(times))
            lda_median = float(np.median(lda)) if lda else None
            row = dict(dataset=dataset, layers=name, seconds_per_sweep=median,
                       sweeps_timed=len(times), paper_gpu_seconds=PAPER_SECONDS[(dataset, name)],
                       tomotopy_lda200_seconds=lda_median,
                       ratio_to_lda=median / lda_median if lda_median else None,
                       n_docs=len(corpus), n_tokens=int(corpus.lengths.sum()),
                       vocab_size=len(corpus.vocabulary))
            if not args.no_memory:
                row["peak_rss_mb"] = peak_memory_mb(dataset, layers, args.data_dir,
                                                    DEFAULT_TOKEN_COUNT)
            rows.append(row)
            ratio = f"{row['ratio_to_lda']:.1f}x LDA" if lda_median else "no tomotopy"
            print(f"{dataset:5s} {name:11s} {median:7.3f} s/sweep (paper GPU {row['paper_gpu_seconds']:5.2f}) "
                  f"{ratio}" + (f"  peak {row['peak_rss_mb']:.0f} MB" if "peak_rss_mb" in row else ""),
                  flush=True)
    record = {"threads": threads, "token_count": DEFAULT_TOKEN_COUNT, "rows": rows,
              "command": "python " + " ".join(sys.argv), **provenance()}
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results",
                               "speed", "speed.json")
    out = args.out or default_out
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1)
    if args.out is None:
        write_report(record, os.path.join(os.path.dirname(out), "speed.md"))
    print(json.dumps(record))


def write_report(record, path):
    """results/speed/speed.md: our seconds per sweep beside the paper's GPU and tomotopy LDA."""
    lines = ["# Gibbs sweep speed", "",
             f"Made by `{record['command']}` at commit {record['commit']} on {record['machine']}, "
             f"{record['threads']} threads, token_count={record['token_count']}; medians of timed "
             "sweeps after warm-up. tomotopy LDA (K = 200, same token ids, same threads) is timed in "
             "the same run, taking turns with CPGBN (an untimed then a timed sweep of each), so "
             "each row's ratio compares sweeps made under the same machine load. Scaling with "
             "corpus size and K: `results/speed/scaling.png` "
             "(`benchmarks/scaling.py`).", "",
             "| dataset | CPGBN | s/sweep (ours, CPU) | paper (GTX 1080Ti) | speed-up | tomotopy LDA-200 s/sweep | ours / LDA | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in record["rows"]:
        lda = f"{r['tomotopy_lda200_seconds']:.3f}" if r["tomotopy_lda200_seconds"] else "-"
        ratio = f"{r['ratio_to_lda']:.1f}" if r["ratio_to_lda"] else "-"
        lines.append(f"| {r['dataset'].upper()} | {r['layers']} | {r['seconds_per_sweep']:.3f} | "
                     f"{r['paper_gpu_seconds']:.2f} | {r['paper_gpu_seconds'] / r['seconds_per_sweep']:.1f}x | "
                     f"{lda} | {ratio} | {r.get('peak_rss_mb', float('nan')):.0f} |")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
