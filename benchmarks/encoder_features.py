"""Where the time of the hybrid's encoder features goes (issue 25: 25k IMDB test reviews < 30 s).

An encoder of IMDB's size (V = 30,001, 200-100-50, F = 3; random weights and globals: the
arithmetic does not depend on their values) computes theta^(1..T) for the first ``--docs`` IMDB
test reviews in batches of 512, by two paths:

* ``sample``: ``WeibullConvEncoder.sample(mean=True)``, the whole batch's (positions x K_1)
  shapes, scales and means at once;
* ``mean_thetas``: the chunked feature path that ``transform`` uses;
* ``mean_thetas_bfloat16``: the same with its position head in bfloat16
  (``CPGBN(encoder_precision="bfloat16")``).

Each path's seconds (median of ``--repeats``), ``mean_thetas``' seconds at other chunk sizes,
the seconds of what precedes the encoder in ``transform`` (tokenizing the reviews with a fixed
vocabulary; building their cells and packing the batches), and torch's profile of
``mean_thetas``: the share of each operator, so the floor set by the one matrix product per
position is visible.

Both are measured in two fresh processes that differ only in what starts first: torch, as
cpgbn arranges, or numba's thread pool (``numba.get_num_threads()`` before torch is
imported), the order that made the features 20x slower (the OpenMP note in
``cpgbn/backends/numba/openmp.py``).

    python benchmarks/encoder_features.py --data-dir ../shared/data --out results/speed/encoder_features.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LAYERS = (200, 100, 50)
V, F, BATCH = 30_001, 3, 512
CHUNKS = (1024, 2048, 4096, 8192)


def batches(args):
    """(packed batches of the first ``--docs`` test reviews, seconds of tokenizing them with
    a fixed vocabulary, seconds of building their cells and packing them)."""
    from cpgbn.backends.torch.packed import pack_tokens
    from cpgbn.datasets import load_dataset
    from cpgbn.text import Corpus

    texts, _ = load_dataset("imdb", "test", data_dir=args.data_dir)
    vocabulary = Corpus.from_texts(texts[:args.docs], vocab_size=V).vocabulary
    start = time.perf_counter()          # what transform does: encode with the fitted vocabulary
    corpus = Corpus.from_texts(texts[:args.docs], vocabulary=vocabulary)
    tokenize_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = []
    for lo in range(0, len(corpus), BATCH):
        hi = min(len(corpus), lo + BATCH)
        offsets = corpus.offsets[lo:hi + 1]
        out.append(pack_tokens(corpus.tokens[offsets[0]:offsets[-1]], offsets - offsets[0], F))
    return out, tokenize_seconds, time.perf_counter() - start


def measure(args) -> dict:
    """The timings and profile in this process (the import order is set by the caller)."""
    import torch
    from torch.profiler import profile

    from cpgbn.backends.torch.encoder import WeibullConvEncoder

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    encoder = WeibullConvEncoder(V, LAYERS, F).eval()
    rng = np.random.default_rng(0)
    phi = [rng.dirichlet(np.ones(LAYERS[t - 1]), LAYERS[t]).T.astype(np.float32)
           for t in range(1, len(LAYERS))]
    data, tokenize_seconds, pack_seconds = batches(args)
    n_positions = int(sum(b.n_total_positions for b in data))

    def by_sample():
        with torch.no_grad():
            return [encoder.sample(b, phi, mean=True).theta for b in data]

    def by_chunks():
        return [encoder.mean_thetas(b, phi) for b in data]

    def seconds(path):
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            path()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    timing = {"sample": seconds(by_sample), "mean_thetas": seconds(by_chunks),
              "mean_thetas_bfloat16": seconds(
                  lambda: [encoder.mean_thetas(b, phi, head_dtype=torch.bfloat16) for b in data])}
    chunks = {}
    for chunk in CHUNKS:     # positions per block of the chunked path (default 2048)
        chunks[str(chunk)] = round(seconds(
            lambda: [encoder.mean_thetas(b, phi, chunk_positions=chunk) for b in data]), 3)
    with profile() as prof:
        by_chunks()
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in ops)
    return {"positions": n_positions, "seconds": {k: round(v, 3) for k, v in timing.items()},
            "tokenize_seconds": round(tokenize_seconds, 3),
            "cells_and_pack_seconds": round(pack_seconds, 3),
            "mean_thetas_seconds_by_chunk_positions": chunks,
            "mean_thetas_profile_shares": {e.key: round(e.self_cpu_time_total / total, 3)
                                           for e in ops[:8]}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("CPGBN_DATA"))
    parser.add_argument("--docs", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--order", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.order is not None:                       # inside a measuring subprocess
        if args.order == "numba-first":
            import numba
            numba.get_num_threads()                  # starts numba's thread pool
        import cpgbn  # noqa: F401                   # (torch comes first in measure() unless numba has)
        print(json.dumps(measure(args)))
        return
    from cpgbn.evaluate.provenance import provenance

    orders = {}
    for order in ("torch-first", "numba-first"):
        command = [sys.executable, str(Path(__file__).resolve()), "--order", order,
                   "--data-dir", str(args.data_dir), "--docs", str(args.docs),
                   "--threads", str(args.threads), "--repeats", str(args.repeats)]
        out = subprocess.run(command, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{order} failed:\n{out.stderr[-3000:]}")
        orders[order] = json.loads(out.stdout.strip().splitlines()[-1])
        print(order, json.dumps(orders[order]), flush=True)
    positions = orders["torch-first"]["positions"]
    record = {"docs": args.docs, "positions": positions, "threads": args.threads,
              "position_head_gflop": round(2.0 * positions * F * LAYERS[0] * 2 * LAYERS[0]
                                           / 1e9, 1),
              "orders": orders, "command": "python " + " ".join(sys.argv), **provenance()}
    print(json.dumps(record, indent=1))
    if args.out is not None:
        from records import write_record   # here: it imports cpgbn
        write_record(args.out, record)


if __name__ == "__main__":
    main()
