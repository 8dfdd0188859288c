"""A whole Gibbs fit and a transform, as a user runs them, on one library tree against another.

Issue 57's measure of the sparse start: each tree (``--trees``, the ``src`` folders of two
checkouts, the reference first) runs, in a fresh process, ``CPGBN(layers=(K,),
random_state=0, n_threads=T).fit(texts)`` with every other parameter at its default (200
sweeps, the post-fit records included; ``--n-iter`` for fewer), then ``transform`` of the
first ``--transform-docs`` of the same texts (the tree's default sweeps with the globals
fixed: 200 until settings.TRANSFORM_SWEEPS made them 50).
``--dataset mr``: MR's 10,662 sentences; ``imdb``: the first ``--docs`` IMDB training
reviews.  The record gives each
tree's fit and transform seconds, the training sweeps' seconds, the peak resident memory
(``ru_maxrss``) and the ratios of the reference to the last tree (speed-ups).  Run it once
before the record (or over another corpus with the same K): a tree whose numba cache is cold
compiles its kernels inside the timed fit (MR's first sweep: 24.8 s against 5.9 s warm).

    python benchmarks/whole_fit.py --data-dir ../shared/data --dataset mr \\
        --trees /path/to/before/src,src --out results/speed/whole_fit_mr.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

CHILD = r"""
import json, resource, subprocess, sys, time, warnings
from pathlib import Path
import numpy as np
import cpgbn
from cpgbn import CPGBN
from cpgbn.datasets import load_dataset
dataset, n_docs, k, threads, n_transform, data_dir, n_iter = sys.argv[1], int(sys.argv[2]), \
    int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], int(sys.argv[7])
texts, _ = load_dataset(dataset, "train" if dataset == "imdb" else "all", data_dir=data_dir)
texts = list(texts[:n_docs]) if n_docs else list(texts)
warnings.simplefilter("ignore", UserWarning)   # short documents padded: said once per fit
model = CPGBN(layers=(k,), random_state=0, n_threads=threads, n_iter=n_iter,
              burn_in=min(150, n_iter * 3 // 4))
start = time.perf_counter()
model.fit(texts)
fit_seconds = time.perf_counter() - start
start = time.perf_counter()
features = model.transform(texts[:n_transform])
transform_seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                        cwd=Path(cpgbn.__file__).parent).stdout.strip()
ll = np.asarray(model.loglik_trace_) / model.n_train_tokens_
print(json.dumps(dict(commit=commit, docs=len(texts), k=k, fit_seconds=round(fit_seconds, 1),
                      sweeps_seconds=round(float(np.sum(model.sweep_seconds_)), 1),
                      first_sweeps=[round(float(s), 3) for s in model.sweep_seconds_[:5]],
                      median_sweep=round(float(np.median(model.sweep_seconds_)), 3),
                      loglik_per_token_150=round(float(ll[min(149, len(ll) - 1)]), 1),
                      loglik_per_token_200=round(float(ll[-1]), 1),
                      transform_docs=len(features), transform_seconds=round(transform_seconds, 1),
                      peak_rss_gb=round(peak / 2**30, 3))))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--dataset", choices=["mr", "imdb"], default="mr")
    ap.add_argument("--docs", type=int, default=0, help="the first N documents (0: all)")
    ap.add_argument("--transform-docs", type=int, default=2000)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--n-iter", type=int, default=200,
                    help="sweeps (the default 200; burn-in 150, or 3/4 of fewer)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trees", required=True,
                    help="comma-separated src folders, the reference first")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from records import rows_per_tree, write_record
    rows = rows_per_tree(CHILD, args.trees, args.threads,
                         [args.dataset, args.docs, args.k, args.threads, args.transform_docs,
                          args.data_dir, args.n_iter])
    first, last = rows[0], rows[-1]
    ratios = dict(fit_speedup=round(first["fit_seconds"] / last["fit_seconds"], 3),
                  transform_speedup=round(first["transform_seconds"] / last["transform_seconds"],
                                          3),
                  peak_rss=round(last["peak_rss_gb"] / first["peak_rss_gb"], 3))
    record = dict(rows=rows, ratios_reference_to_last=ratios, dataset=args.dataset,
                  threads=args.threads, command="python " + " ".join(sys.argv), **provenance())
    print(json.dumps(ratios))
    if args.out:
        write_record(args.out, record)


if __name__ == "__main__":
    main()
