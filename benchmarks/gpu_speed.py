"""Seconds per Gibbs sweep of the PyTorch backend on a CUDA device, with a per-step profile.

For each dataset (the authors' training split, the paper's vocabulary size, F = 3, the default
token_count) and each structure: ``--warmup`` sweeps, then the median of ``--sweeps`` timed
full training sweeps (each ends with a device synchronisation).  With ``--profile`` one extra
pass times every step of the sweep separately (synchronising around each one, so the steps'
sum is a little above the sweep time) and records each step's peak device memory (what sets the
configuration's peak).  Peak device memory is ``torch.cuda.max_memory_allocated`` per
configuration, also apart for the set-up (the sampler, its first state, the upload) and the
timed sweeps.  Writes ``results/speed/gpu_speed.json`` (or ``--out``) and prints a table; the last
line of stdout is JSON.

    python benchmarks/gpu_speed.py --datasets mr,trec,imdb [--layers 200,200-100-50] [--profile]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gibbs_speed import PAPER_SECONDS, corpus_of  # noqa: E402  (same corpora and paper times)

#: The sweep's kernels timed by --profile, as (module of cpgbn.backends.torch, function):
#: per random-stream block where the step draws per document.
PROFILED_STEPS = (("conv", "draw_w"), ("conv", "draw_w_split"), ("conv", "augment"),
                  ("conv", "dirichlet_kernels"),
                  ("conv", "position_tables"), ("gbn", "split_tables"),
                  ("gbn", "dirichlet_columns"))


def _timed(fn, totals, peaks, name, sync, device):
    import torch
    cuda = device.type == "cuda"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        sync()
        totals[name] += time.perf_counter() - start
        if cuda:
            peaks[name] = max(peaks.get(name, 0.0),
                              torch.cuda.max_memory_allocated(device) / 2**20)
        return out
    return wrapper


def time_configuration(corpus, layers, device, sweeps, warmup, token_count, profile,
                       doc_block=None):
    import torch

    from cpgbn.inference.state import Hyperparameters
    from cpgbn.inference.gibbs import TorchGibbsSampler
    from cpgbn.layers.cells import from_token_sequences
    data = from_token_sequences(corpus.tokens, corpus.offsets, 3, token_count)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    sampler = TorchGibbsSampler(data, Hyperparameters(eta=(0.05,) * len(layers)), seed=0,
                                device=device, doc_block=doc_block)
    state = sampler.on_backend(sampler.initial_state(layers, len(corpus.vocabulary)))
    sync = functools.partial(torch.cuda.synchronize, device) if cuda else (lambda: None)
    setup_mb = None
    if cuda:   # the set-up's peak apart from the sweeps' (which step sets which)
        sync()
        setup_mb = torch.cuda.max_memory_allocated(device) / 2**20
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(warmup):
        sampler.sweep(state)
    sync()
    times = []
    for _ in range(sweeps):
        start = time.perf_counter()
        sampler.sweep(state)
        sync()
        times.append(time.perf_counter() - start)
    steps, step_peaks = {}, {}
    sweeps_mb = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None
    peak_mb = max(setup_mb, sweeps_mb) if cuda else None
    if profile:
        totals = defaultdict(float)
        import importlib
        modules = {name: importlib.import_module(f"cpgbn.backends.torch.{name}")
                   for name, _ in PROFILED_STEPS}
        originals = {(m, f): getattr(modules[m], f) for m, f in PROFILED_STEPS}
        for (m, f), fn in originals.items():   # the backend calls them as module attributes
            setattr(modules[m], f, _timed(fn, totals, step_peaks, f, sync, device))
        try:
            sync()
            start = time.perf_counter()
            sampler.sweep(state)
            sync()
            totals["whole sweep"] = time.perf_counter() - start
        finally:
            for (m, f), fn in originals.items():
                setattr(modules[m], f, fn)
        steps = dict(totals)
    return dict(times=times, steps=steps, step_peak_gpu_mb=step_peaks, peak_gpu_mb=peak_mb,
                setup_peak_gpu_mb=setup_mb, sweeps_peak_gpu_mb=sweeps_mb,
                n_cells=int(data.n_cells), n_positions=int(data.n_positions))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="mr,trec,imdb")
    ap.add_argument("--layers", default="200,200-100,200-100-50")
    ap.add_argument("--sweeps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--doc-block", type=int, default=None,
                    help="documents per random-stream block (default: the library's); a "
                         "block larger than the corpus draws each step from one stream")
    ap.add_argument("--token-count", type=int, default=None,
                    help="the cells' token count (default: the library's)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--commit", default=None,
                    help="the source commit to record where git is absent (a copied tree)")
    args = ap.parse_args()
    import torch

    from cpgbn.evaluate.provenance import provenance
    from cpgbn.model import DEFAULT_TOKEN_COUNT
    device = torch.device(args.device)
    token_count = args.token_count or DEFAULT_TOKEN_COUNT
    rows = []
    for dataset in args.datasets.split(","):
        corpus = corpus_of(dataset, args.data_dir)
        for name in args.layers.split(","):
            layers = tuple(int(k) for k in name.split("-"))
            res = time_configuration(corpus, layers, device, args.sweeps, args.warmup,
                                     token_count, args.profile, args.doc_block)
            median = float(np.median(res["times"]))
            paper = PAPER_SECONDS.get((dataset, name))
            row = dict(dataset=dataset, layers=name, seconds_per_sweep=median,
                       sweep_seconds=res["times"], paper_gpu_seconds=paper,
                       peak_gpu_mb=res["peak_gpu_mb"], step_seconds=res["steps"],
                       step_peak_gpu_mb=res["step_peak_gpu_mb"],
                       setup_peak_gpu_mb=res["setup_peak_gpu_mb"],
                       sweeps_peak_gpu_mb=res["sweeps_peak_gpu_mb"],
                       n_docs=len(corpus), n_tokens=int(corpus.lengths.sum()),
                       n_cells=res["n_cells"], n_positions=res["n_positions"],
                       vocab_size=len(corpus.vocabulary))
            rows.append(row)
            steps = " ".join(f"{k}={v * 1000:.1f}ms" for k, v in res["steps"].items())
            print(f"{dataset:5s} {name:11s} {median:8.4f} s/sweep"
                  + (f" (paper GTX 1080Ti {paper:.2f})" if paper else "")
                  + (f" peak {row['peak_gpu_mb']:.0f} MiB (set-up {row['setup_peak_gpu_mb']:.0f}, "
                     f"sweeps {row['sweeps_peak_gpu_mb']:.0f})" if row["peak_gpu_mb"] else "")
                  + f" {steps}"
                  + "".join(f" {k}:peak={v:.0f}MiB" for k, v in res["step_peak_gpu_mb"].items()),
                  flush=True)
    record = {"device": (torch.cuda.get_device_name(device) if device.type == "cuda"
                         else "cpu"), "torch": torch.__version__, "doc_block": args.doc_block,
              "token_count": token_count, "warmup": args.warmup, "rows": rows,
              "command": "python " + " ".join(sys.argv), **provenance()}
    if args.commit and record["commit"] == "unknown":
        record["commit"] = args.commit
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results",
                                   "speed", "gpu_speed.json")
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1)
    print(json.dumps({k: v for k, v in record.items() if k != "rows"}))


if __name__ == "__main__":
    main()
