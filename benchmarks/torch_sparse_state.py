"""The PyTorch sampler on the CPU before and after its sparse position fields (issue 57 step 3):
seconds per sweep and peak memory of the same sweeps in each library tree, in one run.

Each tree (``--trees``, comma-separated ``src`` folders) runs in a fresh process: the first
``--docs`` IMDB training reviews (V = 8,000 words, token count 200, F = 3), random kernels
D_k ~ Dir(0.05) from numpy's seed 0, ``TorchGibbsSampler(data, Hyperparameters(eta=(0.05,)),
0)`` on the CPU with the tree's default ``max_elements``, the sparse start from those kernels
(8 live kernels a position, as a fit after its pilot starts), then ``--sweeps`` sweeps, one
thread.  The record gives each sweep's seconds, the resident memory before the sampler and
the peak (``VmHWM``: the interpreter, torch and the texts included).  The two trees' chains
differ (the chunking orders the variates): the work per sweep is the same model's.

    python benchmarks/torch_sparse_state.py --data-dir ../shared/data \\
        --trees <before>/src,src --out results/speed/torch_sparse_state_imdb2000.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

CHILD = r"""
import json, sys, time
import numpy as np
from cpgbn.datasets import load_dataset
from cpgbn.inference.gibbs import TorchGibbsSampler
from cpgbn.inference.state import GlobalParameters, Hyperparameters
from cpgbn.layers.cells import from_token_sequences
from cpgbn.text import Corpus

def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) * 1024 / 2**30

n_docs, n_sweeps, data_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
texts, _ = load_dataset("imdb", "train", data_dir=data_dir)
corpus = Corpus.from_texts(list(texts[:n_docs]), vocab_size=8001)
data = from_token_sequences(corpus.tokens, corpus.offsets, 3, 200)
V, K = 8001, 200
D = (np.random.default_rng(0).dirichlet(np.full(V * 3, 0.05), size=K).T
     .reshape(V, 3, K).astype(np.float32))
before = status("VmRSS")
sampler = TorchGibbsSampler(data, Hyperparameters(eta=(0.05,)), 0)
sampler.start_live_kernels = 8
state = sampler.on_backend(sampler.initial_state((K,), V, GlobalParameters(D, [], np.full(K, 1 / K))))
seconds = []
for _ in range(n_sweeps):
    start = time.perf_counter()
    sampler.sweep_on_backend(state)
    seconds.append(round(time.perf_counter() - start, 2))
print(json.dumps(dict(docs=n_docs, positions=int(data.n_positions), k=K,
                      max_elements=sampler.backend.max_elements, sweep_seconds=seconds,
                      median_sweep=float(np.median(seconds)), rss_before_gb=round(before, 3),
                      peak_rss_gb=round(status("VmHWM"), 3))))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--sweeps", type=int, default=4)
    ap.add_argument("--trees", default=str(HERE.parent / "src"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn.evaluate.provenance import provenance
    from records import rows_per_tree, write_record
    rows = rows_per_tree(CHILD, args.trees, 1, [args.docs, args.sweeps, args.data_dir])
    for row in rows:
        print(row, flush=True)
    first, last = rows[0], rows[-1]
    record = dict(rows=rows, ratios_first_to_last=dict(
        sweep_speedup=round(first["median_sweep"] / last["median_sweep"], 3),
        peak_rss=round(last["peak_rss_gb"] / first["peak_rss_gb"], 3)),
        command="python " + " ".join(sys.argv), **provenance())
    if args.out:
        write_record(Path(args.out), record)


if __name__ == "__main__":
    main()
