"""A Gibbs fit's peak memory against the estimate the fit checks before it allocates
(:mod:`cpgbn.inference.memory`), for the numba sampler and the PyTorch sampler on the CPU.

Each sampler fits the first ``--docs`` IMDB training reviews (K_1 = ``--k``, V = 8,000, the
other parameters at their defaults but 3 sweeps, ``--threads`` threads) in a fresh process; the
record holds the process's peak resident memory (``ru_maxrss``: the interpreter, the libraries
and the texts included), the same before the fit (what the estimate does not count), the
positions P, and the estimate of that fit's mode (``training_bytes``), so that the two can be
compared: the estimate must cover what the sampler holds, the peak less the process before
the fit.  ``--trees`` (the ``src`` folders of checkouts, the reference first) runs each sampler
on each tree, for a before and after in one run.

    python benchmarks/gibbs_memory.py --data-dir ../shared/data --out results/speed/gibbs_memory.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

CHILD = r"""
import json, resource, sys, time
from cpgbn import CPGBN
from cpgbn.datasets import load_dataset
backend, n_docs, k, data_dir, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4], int(sys.argv[5])
texts, _ = load_dataset("imdb", "train", data_dir=data_dir or None)
texts = list(texts[:n_docs])
model = CPGBN(layers=(k,), vocab_size=8001, n_iter=3, burn_in=2, random_state=0,
              n_threads=threads, device=None if backend == "numba" else backend)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start = time.perf_counter()
model.fit(texts)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
data = model._data(model.encode(texts), 3)
estimate = model._mode(model._validated()).training_bytes(data, (k,), len(model.vocabulary_))
print(json.dumps(dict(backend=backend, docs=n_docs, k=k, positions=int(data.n_positions),
                      threads=threads, rss_before_fit_gb=round(before / 2**30, 2),
                      peak_rss_gb=round(peak / 2**30, 2), estimate_gb=round(estimate / 2**30, 2),
                      fit_seconds=round(seconds, 1))))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--backends", default="numba,cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--trees", default="src",
                    help="comma-separated src folders of library trees (default: this one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from records import rows_per_tree, write_record
    rows = [row for backend in args.backends.split(",")
            for row in rows_per_tree(CHILD, args.trees, args.threads,
                                     [backend, args.docs, args.k, args.data_dir or "",
                                      args.threads], native_threads=args.threads)]
    record = dict(rows=rows, command="python " + " ".join(sys.argv), **provenance())
    if args.out:
        write_record(Path(args.out), record)


if __name__ == "__main__":
    main()
