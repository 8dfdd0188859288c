"""Seconds per Gibbs sweep of the PyTorch sampler on the CPU against the numba sampler, in turns.

The PyTorch backend exists for GPUs; on a CPU it runs the same tensor code, and this measures
what that costs against numba (docs/gpu.md).  TREC's training split (the paper's vocabulary
size, F = 3), structures 200 and 200-100, token_count 200 and 800 (the default), one thread
each: for each configuration both samplers start from their own seed-0 state, take
``--warmup`` untimed sweeps, then alternate a timed sweep each (so both are timed under the
same machine load) ``--sweeps`` times; the medians and their ratio are recorded.  The two
chains differ (other generators); the work per sweep is the same model's.

    python benchmarks/torch_cpu_speed.py [--sweeps 3] [--warmup 1] [--out results/speed/torch_cpu_speed.json]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gibbs_speed import corpus_of  # noqa: E402  (the same corpora)
from records import write_record  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="trec")
    ap.add_argument("--layers", default="200,200-100")
    ap.add_argument("--token-counts", default="200,800")
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=str(HERE.parent / "results" / "speed" / "torch_cpu_speed.json"))
    args = ap.parse_args()
    import torch

    from cpgbn.evaluate.provenance import provenance
    from cpgbn.inference.gibbs import GibbsSampler, TorchGibbsSampler
    from cpgbn.inference.state import Hyperparameters
    from cpgbn.layers.cells import from_token_sequences
    torch.set_num_threads(1)
    corpus = corpus_of(args.dataset, args.data_dir)
    rows = []
    for token_count in (int(t) for t in args.token_counts.split(",")):
        data = from_token_sequences(corpus.tokens, corpus.offsets, 3, token_count)
        for name in args.layers.split(","):
            layers = tuple(int(k) for k in name.split("-"))
            hyper = Hyperparameters(eta=(0.05,) * len(layers))
            samplers = {"numba": GibbsSampler(data, hyper, seed=0),
                        "torch_cpu": TorchGibbsSampler(data, hyper, seed=0, device="cpu")}
            states = {k: s.on_backend(s.initial_state(layers, len(corpus.vocabulary)))
                      for k, s in samplers.items()}
            for _ in range(args.warmup):
                for k, s in samplers.items():
                    s.sweep(states[k])
            times = {k: [] for k in samplers}
            for _ in range(args.sweeps):
                for k, s in samplers.items():
                    start = time.perf_counter()
                    s.sweep(states[k])
                    times[k].append(time.perf_counter() - start)
            med = {k: float(np.median(v)) for k, v in times.items()}
            row = dict(dataset=args.dataset, layers=name, token_count=token_count,
                       seconds_per_sweep=med, sweep_seconds=times,
                       torch_over_numba=med["torch_cpu"] / med["numba"])
            rows.append(row)
            print(f"{args.dataset} {name:8s} token_count {token_count:4d}: numba "
                  f"{med['numba']:.3f} s, torch (CPU) {med['torch_cpu']:.3f} s, "
                  f"ratio {row['torch_over_numba']:.1f}", flush=True)
    record = dict(torch=torch.__version__, threads=1, warmup=args.warmup, sweeps=args.sweeps,
                  rows=rows, command="python " + " ".join(sys.argv),
                  load=os.getloadavg(), **provenance())
    write_record(Path(args.out), record)


if __name__ == "__main__":
    main()
