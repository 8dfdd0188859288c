"""Hybrid training streamed from disk: peak memory against corpus size (issue 25).

Issue 25 asks that a streamed synthetic corpus of 1M documents trains with resident memory flat
in the corpus size.  For each size N (``--sizes``) this writes a one-document-per-line file of N
synthetic documents (``--doc-length`` tokens ``w1``..``w{V-1}`` drawn from a Zipf law with
exponent 1.1, the long-tailed frequencies of text), then, in a fresh process, trains
``fit_hybrid`` for a fixed number of steps (``--steps`` minibatches of ``--batch-size``) on
:class:`~cpgbn.inference.batches.TextFileBlocks` over that file (blocks of 4096 lines, the
vocabulary from the scan), and records the process's peak resident memory (VmHWM), the
training documents per second and the documents of the largest block held.  The process
first makes the streamed fit's scan of the file (:func:`cpgbn.text.stream.scan_text_file`:
vocabulary, sizes, digest; its seconds are recorded), so the peak includes it.  The same number of
steps at every N, so only the corpus size changes (rho = N / |batch| scales the statistics; the
file is indexed once, one byte offset per block).

    python benchmarks/hybrid_streaming.py --out results/speed/hybrid_streaming.json

writes the JSON record, a table (``.md``) and the chart (``.png``) beside it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]


def own_peak_rss_mb() -> float:
    from gibbs_speed import own_peak_rss_kib
    return own_peak_rss_kib() / 1024.0


def write_corpus(path: Path, n_docs: int, vocab_size: int, doc_length: int, seed: int) -> None:
    """``n_docs`` lines of ``doc_length`` Zipf-distributed tokens, written 10,000 at a time."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab_size, dtype=np.float64)
    p = ranks ** -1.1
    p /= p.sum()
    words = np.array([f"w{i}" for i in range(1, vocab_size)])
    with open(path, "w") as handle:
        for lo in range(0, n_docs, 10_000):
            n = min(10_000, n_docs - lo)
            ids = rng.choice(vocab_size - 1, size=(n, doc_length), p=p)
            handle.write("\n".join(" ".join(row) for row in words[ids]) + "\n")


def phase_train(args) -> dict:
    from cpgbn.inference.hybrid import fit_hybrid
    from cpgbn.inference.state import Hyperparameters
    from cpgbn.inference.batches import TextFileBlocks, text_encoder
    from cpgbn.model import DEFAULT_TOKEN_COUNT
    from cpgbn.text.stream import TextFile, scan_text_file

    import torch
    torch.set_num_threads(args.threads)
    import numba
    numba.set_num_threads(args.threads)
    layers = tuple(int(k) for k in args.layers.split(","))
    start = time.perf_counter()   # the streamed fit's first pass: vocabulary, sizes, digest
    scan = scan_text_file(TextFile(args.file), args.vocab_size)
    scan_seconds = time.perf_counter() - start
    source = TextFileBlocks(args.file, text_encoder(scan.vocabulary, args.filter_width,
                                                    DEFAULT_TOKEN_COUNT))
    hyper = Hyperparameters(eta=(0.05,) * len(layers))
    start = time.perf_counter()
    result = fit_hybrid(source, layers, len(scan.vocabulary), hyper, seed=args.seed,
                        n_steps=args.steps, batch_size=args.batch_size, progress=False)
    seconds = time.perf_counter() - start
    return {"n_docs": source.n_docs, "steps": args.steps, "seconds": round(seconds, 1),
            "scan_seconds": round(scan_seconds, 1),
            "docs_per_second": round(args.steps * args.batch_size / seconds, 1),
            "max_block_docs": source.max_block_docs,
            "last_loss": float(np.median(result.trace.loss[-10:])),
            "peak_rss_mb": round(own_peak_rss_mb(), 1)}


def run_size(args, n_docs: int, work: Path) -> dict:
    path = work / f"corpus-{n_docs}.txt"
    start = time.perf_counter()
    write_corpus(path, n_docs, args.vocab_size, args.doc_length, args.seed)
    written = time.perf_counter() - start
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", "train", "--file",
               str(path)] + args.passthrough
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"N = {n_docs} failed:\n{out.stderr[-3000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row.update(file_mb=round(path.stat().st_size / 2**20, 1), write_seconds=round(written, 1))
    path.unlink()
    print(json.dumps(row), flush=True)
    return row


def write_report(record: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = record["rows"]
    lines = ["# Hybrid training streamed from disk: peak memory against corpus size", "",
             f"Made by `{record['command']}` at commit {record['commit']} on "
             f"{record['machine']}, {record['threads']} threads, seed {record['seed']}. Layers "
             f"{record['layers']}, V = {record['vocab_size']}, F = {record['filter_width']}, "
             f"{record['doc_length']} Zipf tokens per document; {record['steps']} steps of "
             f"{record['batch_size']} documents at every size, each size a fresh process.", "",
             "| documents | file MB | peak RSS MB | scan s | training docs/s | largest block "
             "held |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n_docs']:,} | {r['file_mb']} | {r['peak_rss_mb']} | "
                     f"{r['scan_seconds']} | {r['docs_per_second']} | {r['max_block_docs']} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([r["n_docs"] for r in rows], [r["peak_rss_mb"] for r in rows], "o-",
            label="peak RSS (training process)")
    ax.plot([r["n_docs"] for r in rows], [r["file_mb"] for r in rows], "s--", color="grey",
            label="corpus file")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("documents in the corpus")
    ax.set_ylabel("MB")
    ax.set_title("Streamed hybrid training")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--layers", default="100,50")
    parser.add_argument("--vocab-size", type=int, default=5000)
    parser.add_argument("--filter-width", type=int, default=3)
    parser.add_argument("--doc-length", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.passthrough = ["--steps", str(args.steps), "--batch-size", str(args.batch_size),
                        "--layers", args.layers, "--vocab-size", str(args.vocab_size),
                        "--filter-width", str(args.filter_width), "--threads",
                        str(args.threads), "--seed", str(args.seed)]
    if args.phase is not None:              # inside the training subprocess
        print(json.dumps(phase_train(args)))
        return
    from cpgbn.evaluate.provenance import provenance
    origin = provenance()
    with tempfile.TemporaryDirectory() as work:
        rows = [run_size(args, int(n), Path(work)) for n in args.sizes.split(",")]
    record = {"rows": rows, "steps": args.steps, "batch_size": args.batch_size,
              "layers": args.layers, "vocab_size": args.vocab_size,
              "filter_width": args.filter_width, "doc_length": args.doc_length,
              "threads": args.threads, "seed": args.seed,
              "command": "python " + " ".join(sys.argv), **origin}
    print(json.dumps(record))
    if args.out is not None:
        from records import write_record   # here: it imports cpgbn
        write_record(args.out, record)
        write_report(record, args.out)


if __name__ == "__main__":
    main()
