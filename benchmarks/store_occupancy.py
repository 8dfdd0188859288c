"""How many entries per position the numba sampler's count store holds over a fit's sweeps.

The memory estimate of a sparse start (:mod:`cpgbn.inference.memory`) counts each store at
its live kernels per position; this measures what a fit holds: ``CPGBN(layers=(K,),
random_state=0, n_threads=1).fit(texts)`` at the defaults (the pilot, the sparse start, 200
sweeps, the post-fit records), the stored entries of m divided by the positions after every
sweep of every chain the fit runs (the pilot's first, then the whole corpus's).

    python benchmarks/store_occupancy.py --data-dir ../shared/data --dataset imdb --docs 2500 \\
        --out results/speed/store_occupancy_imdb2500.json
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--dataset", choices=["mr", "imdb"], default="mr")
    ap.add_argument("--docs", type=int, default=0, help="the first N documents (0: all)")
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from cpgbn import CPGBN
    from cpgbn.datasets import load_dataset
    from cpgbn.evaluate.provenance import provenance
    from cpgbn.inference.gibbs import GibbsSampler
    from records import write_record

    texts, _ = load_dataset(args.dataset, "train" if args.dataset == "imdb" else "all",
                            data_dir=args.data_dir)
    texts = list(texts[:args.docs]) if args.docs else list(texts)
    chains: list = []   # one list per chain, (positions, entries) after each sweep
    sweep = GibbsSampler.sweep_on_backend

    def counted(sampler, state):
        sweep(sampler, state)
        if state.sweep == 1:
            chains.append([])
        chains[-1].append((int(sampler.data.n_positions), int(state.m.nnz)))

    GibbsSampler.sweep_on_backend = counted
    warnings.simplefilter("ignore", UserWarning)
    CPGBN(layers=(args.k,), random_state=0, n_threads=1).fit(texts)
    per_position = [[round(nnz / p, 3) for p, nnz in chain] for chain in chains]
    record = dict(dataset=args.dataset, docs=len(texts), k=args.k,
                  positions=[chain[0][0] for chain in chains],
                  entries_per_position=per_position,
                  max_after_the_first_chain=max(max(c) for c in per_position[1:]),
                  command="python " + " ".join(sys.argv), **provenance())
    print({key: value for key, value in record.items() if key != "entries_per_position"})
    if args.out:
        write_record(args.out, record)


if __name__ == "__main__":
    main()
