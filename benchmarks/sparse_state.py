"""The exact sampler's peak memory and sweep times on one library tree against another, in one run.

Issue 57's measure of the sparse position state: each tree (``--trees``, the ``src`` folders
of two checkouts, e.g. a worktree of the commit before the change and this one) fits the
first ``--docs`` IMDB training reviews (K_1 = ``--k``, V = 20,001, the default token count,
``--sweeps`` sweeps, ``--threads`` numba threads) through the sampler's own loop in a fresh
process, which records its peak resident memory (``ru_maxrss``: the interpreter, the
libraries and the texts included), every sweep's seconds and the stored entries; the record
gives each tree's numbers and the ratios of the last tree to the first.

    python benchmarks/sparse_state.py --data-dir ../shared/data --docs 25000 \\
        --trees /path/to/before/src,src --out results/speed/sparse_state_imdb.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

CHILD = r"""
import json, resource, subprocess, sys, time
from pathlib import Path
import numpy as np
import cpgbn
from cpgbn.datasets import load_dataset
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import Hyperparameters
from cpgbn.layers.cells import from_token_sequences
from cpgbn.model import DEFAULT_TOKEN_COUNT
from cpgbn.text import Corpus
n_docs, k, sweeps, data_dir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
texts, _ = load_dataset("imdb", "train", data_dir=data_dir)
texts = list(texts[:n_docs])
corpus = Corpus.from_texts(texts, vocab_size=20001)
vocabulary = corpus.vocabulary
data = from_token_sequences(corpus.tokens, corpus.offsets, 3, DEFAULT_TOKEN_COUNT)
del texts
sampler = GibbsSampler(data, Hyperparameters(eta=(0.05,)), seed=0)
start = time.perf_counter()
state = sampler.initial_state((k,), len(vocabulary))
seconds = [time.perf_counter() - start]
for _ in range(sweeps):
    start = time.perf_counter()
    sampler.sweep(state)
    seconds.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
def stored(field, background):
    # a store's entries; a dense array's entries off the background; None: w not kept
    if field is None:
        return None
    return int(field.nnz) if hasattr(field, "nnz") else int(np.count_nonzero(field != background))
entries = dict(w=stored(state.w, np.float32(1e-30)), m=stored(state.m, 0),
               pairs=int(data.n_positions) * k)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                        cwd=Path(cpgbn.__file__).parent).stdout.strip()
print(json.dumps(dict(commit=commit, docs=n_docs, k=k, positions=int(data.n_positions),
                      peak_rss_gb=round(peak / 2**30, 3), init_seconds=round(seconds[0], 3),
                      sweep_seconds=[round(s, 3) for s in seconds[1:]], entries=entries)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--docs", type=int, default=2500)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--sweeps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trees", required=True,
                    help="comma-separated src folders, the reference first")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from records import rows_per_tree, write_record
    rows = rows_per_tree(CHILD, args.trees, args.threads,
                         [args.docs, args.k, args.sweeps, args.data_dir])
    first, last = rows[0], rows[-1]
    steady = lambda r: sorted(r["sweep_seconds"][-3:])[1]   # noqa: E731  (median of the last 3)
    ratios = dict(peak_rss=round(last["peak_rss_gb"] / first["peak_rss_gb"], 3),
                  steady_sweep=round(steady(last) / steady(first), 3),
                  all_sweeps=round(sum(last["sweep_seconds"]) / sum(first["sweep_seconds"]), 3))
    record = dict(rows=rows, ratios_last_to_first=ratios, threads=args.threads,
                  command="python " + " ".join(sys.argv), **provenance())
    print(json.dumps(ratios))
    if args.out:
        write_record(args.out, record)


if __name__ == "__main__":
    main()
