"""What a fit's process holds that the memory estimate does not count: the resident memory
after the texts are loaded and after a fit of ``--tiny`` of them (torch imported, numba's
kernels loaded, every buffer of that fit small), one fresh process per backend.

``benchmarks/gibbs_memory.py`` compares a fit's peak with its estimate
(``cpgbn.inference.memory``); the estimate counts the sampler's arrays and stores only, so the
part of the peak it must cover is the peak less this level.

    python benchmarks/fit_runtime_memory.py --data-dir ../shared/data \\
        --out results/speed/fit_runtime_memory.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

CHILD = r"""
import json, resource, sys, warnings
from cpgbn import CPGBN
from cpgbn.datasets import load_dataset
backend, n_docs, tiny, k, data_dir, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
warnings.simplefilter("ignore", UserWarning)   # short documents padded
rss = lambda: round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
texts, _ = load_dataset("imdb", "train", data_dir=data_dir or None)
texts = list(texts[:n_docs])
loaded = rss()
CPGBN(layers=(k,), vocab_size=8001, n_iter=1, burn_in=0, random_state=0, n_threads=threads,
      device=None if backend == "numba" else backend).fit(texts[:tiny])
print(json.dumps(dict(backend=backend, docs_loaded=n_docs, tiny_fit_docs=tiny, k=k,
                      threads=threads, rss_texts_loaded_gb=loaded, rss_after_tiny_fit_gb=rss())))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--docs", type=int, default=2000, help="texts loaded (as gibbs_memory.py)")
    ap.add_argument("--tiny", type=int, default=20, help="documents of the small fit")
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backends", default="numba,cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from records import rows_per_tree, write_record
    rows = [row for backend in args.backends.split(",")
            for row in rows_per_tree(CHILD, str(HERE.parent / "src"), args.threads,
                                     [backend, args.docs, args.tiny, args.k,
                                      args.data_dir or "", args.threads],
                                     native_threads=args.threads)]
    record = dict(rows=rows, command="python " + " ".join(sys.argv), **provenance())
    if args.out:
        write_record(Path(args.out), record)


if __name__ == "__main__":
    main()
