"""Where a numba Gibbs sweep spends its time: seconds per sweep in each kernel.

Runs the training sweep of CPGBN on one dataset (the authors' training split, the paper's V,
F = 3, the default token_count) and times every numba kernel the driver calls, by wrapping them
for the timed sweeps.  ``sweep_positions`` draws w, augments the tokens and draws the pooling
tables in one pass; to split the w draw from the rest, the w draw alone
(``GibbsSampler.draw_weights``, the same code without augmentation) is timed separately.  Medians over the timed sweeps after warm-up; writes
results/speed/sweep_profile.json (the last line of stdout is the JSON).

    python benchmarks/profile_sweep.py [--dataset mr] [--layers 200] [--sweeps 7]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gibbs_speed import corpus_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {"conv": ("sweep_positions", "draw_kernels", "reset_counts", "kernel_row_sums"),
           "gbn": ("layer_tables", "split_tables", "draw_phi", "draw_doc_gammas",
                   "draw_doc_scales", "draw_gamma_vector")}


def main():
    from cpgbn.evaluate.provenance import provenance
    from cpgbn.inference.gibbs import GibbsSampler
    from cpgbn.inference.state import Hyperparameters
    from cpgbn.layers.cells import from_token_sequences
    from cpgbn.model import DEFAULT_TOKEN_COUNT
    from cpgbn.backends.numba import conv, gbn

    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="mr")
    ap.add_argument("--layers", default="200")
    ap.add_argument("--sweeps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    origin = provenance()
    layers = tuple(int(k) for k in args.layers.split("-"))
    corpus = corpus_of(args.dataset, args.data_dir)
    data = from_token_sequences(corpus.tokens, corpus.offsets, 3, DEFAULT_TOKEN_COUNT)
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05,) * len(layers)), seed=0)
    state = sampler.initial_state(layers, len(corpus.vocabulary))
    for _ in range(args.warmup):
        sampler.sweep(state)

    per_sweep: dict[str, list[float]] = {}
    modules = {"conv": conv, "gbn": gbn}

    def timed(name, function):
        def wrapper(*a, **k):
            start = time.perf_counter()
            out = function(*a, **k)
            per_sweep[name][-1] += time.perf_counter() - start
            return out
        return wrapper

    originals = {(m, n): getattr(modules[m], n) for m, names in KERNELS.items() for n in names}
    for (m, n), function in originals.items():
        setattr(modules[m], n, timed(n, function))
    totals = []
    try:
        for _ in range(args.sweeps):
            for _, n in originals:
                per_sweep.setdefault(n, []).append(0.0)
            start = time.perf_counter()
            sampler.sweep(state)
            totals.append(time.perf_counter() - start)
    finally:
        for (m, n), function in originals.items():
            setattr(modules[m], n, function)
    w_only = []
    for _ in range(args.sweeps):
        start = time.perf_counter()
        sampler.draw_weights(state)
        w_only.append(time.perf_counter() - start)

    steps = {n: float(np.median(v)) for n, v in per_sweep.items() if np.median(v) > 0}
    record = dict(dataset=args.dataset, layers=args.layers, token_count=DEFAULT_TOKEN_COUNT,
                  sweep_seconds=float(np.median(totals)), steps=steps,
                  draw_w_alone_seconds=float(np.median(w_only)),
                  positions=int(data.n_positions), kernel_entries=int(np.prod(state.globals.D.shape)),
                  fraction_w_above_floor=float(np.mean(state.w > conv.FLOOR)),
                  fraction_m_nonzero=float(np.mean(state.m > 0)),
                  command="python " + " ".join(sys.argv), **origin)
    for name, seconds in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"{name:20s} {seconds:.4f} s")
    print(f"{'(w draw alone)':20s} {record['draw_w_alone_seconds']:.4f} s")
    print(f"{'sweep':20s} {record['sweep_seconds']:.4f} s")
    out = ROOT / "results" / "speed" / "sweep_profile.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
