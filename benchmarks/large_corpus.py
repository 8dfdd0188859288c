"""The largest corpus of issue 57: IMDB's training reviews repeated, fitted by the exact sampler.

A fresh process builds ``--repeat`` copies of IMDB's 25,000 training reviews (250,000
documents at 10) and runs ``CPGBN(layers=(K,), random_state=0, n_threads=T, n_iter=N)``
with every other parameter at its default: the memory check before allocating, the pilot
chain (at most ``N`` sweeps), the sparse start and the whole-corpus sweeps, the post-fit
records.  The record gives the seconds of each sweep, the fit's, the peak resident memory
(``ru_maxrss``: interpreter, libraries and texts included), the positions and the estimate the
fit checked (:mod:`cpgbn.inference.memory`), so that the estimate can be read against the
peak.

    python benchmarks/large_corpus.py --data-dir ../shared/data --repeat 10 --n-iter 3 \\
        --out results/speed/large_corpus_imdb250000.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
from cpgbn import CPGBN
from cpgbn.datasets import load_dataset
from cpgbn.inference import memory
repeat, k, threads, data_dir, n_iter = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                        sys.argv[4], int(sys.argv[5]))
texts, _ = load_dataset("imdb", "train", data_dir=data_dir)
texts = list(texts) * repeat
checked = []
check = memory.check_memory
def recording(needed, limit):
    checked.append(int(needed))
    return check(needed, limit)
memory.check_memory = recording
warnings.simplefilter("ignore", UserWarning)   # short documents padded: said once per fit
model = CPGBN(layers=(k,), random_state=0, n_threads=threads, n_iter=n_iter,
              burn_in=max(1, n_iter - 1))
start = time.perf_counter()
model.fit(texts)
fit_seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(dict(docs=len(texts), k=k, threads=threads, n_iter=n_iter,
                      tokens=int(model.n_train_tokens_), fit_seconds=round(fit_seconds, 1),
                      sweep_seconds=[round(float(s), 2) for s in model.sweep_seconds_],
                      loglik_per_token=[round(float(x) / model.n_train_tokens_, 1)
                                        for x in model.loglik_trace_],
                      estimates_gb=[round(b / 2**30, 2) for b in checked],
                      peak_rss_gb=round(peak / 2**30, 2))))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--n-iter", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from records import rows_per_tree, write_record
    rows = rows_per_tree(CHILD, str(HERE.parent / "src"), args.threads,
                         [args.repeat, args.k, args.threads, args.data_dir, args.n_iter])
    record = dict(rows=rows, command="python " + " ".join(sys.argv), **provenance())
    if args.out:
        write_record(args.out, record)


if __name__ == "__main__":
    main()
