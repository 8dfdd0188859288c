"""Where the time of a hybrid model's refined features goes (``transform`` with ``refine_iter``).

``refine_iter=R`` starts a Gibbs chain per block of documents from the encoder's mean path and
runs R sweeps with the globals fixed (``cpgbn.inference.hybrid.refine_with_gibbs``).  This
script profiles that ``transform`` (cProfile, one process) on every ``--every``-th IMDB test
review with a model saved by ``benchmarks/hybrid_imdb.py`` (its ``train`` phase: ``--model``)
and reports the seconds of its parts: the encoder's start (its backend's ``mean_path``), the
numba position sweeps (``sweep_positions``: the first augmentation m | w, then one per sweep)
and the rest (tokenizing, allocation, the upper layers).  A warm-up ``transform`` of 100 reviews compiles
or loads numba's kernels first.  ``--encoder-precision`` sets the encoder's head arithmetic.

    python benchmarks/refine_profile.py --data-dir ../shared/data --model MODEL_DIR --threads 1
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

PARTS = {"encoder_start": "mean_path", "position_sweeps": "sweep_positions"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("CPGBN_DATA"))
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--every", type=int, default=5, help="profile every N-th test review")
    parser.add_argument("--refine", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--encoder-precision", default="float32")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from cpgbn.datasets import load_dataset
    from cpgbn.evaluate.provenance import provenance
    from cpgbn.model import CPGBN

    model = CPGBN.load(args.model).set_params(n_threads=args.threads, refine_iter=args.refine,
                                              encoder_precision=args.encoder_precision)
    texts, _ = load_dataset("imdb", "test", data_dir=args.data_dir)
    texts = texts[::args.every]
    model.transform(texts[:100])
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    model.transform(texts)
    profiler.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats      # (file, line, name) -> (cc, nc, tt, ct, callers)
    parts = {}
    for part, name in PARTS.items():
        rows = [(calls, cumulative) for (_, _, function), (_, calls, _, cumulative, _)
                in stats.items() if function == name]
        parts[part] = {"seconds": round(sum(c for _, c in rows), 2),
                       "calls": int(sum(n for n, _ in rows))}
    parts["rest"] = {"seconds": round(total - sum(p["seconds"] for p in parts.values()), 2)}
    for part in parts.values():
        part["share"] = round(part["seconds"] / total, 3)
    record = {"n_docs": len(texts), "refine_iter": args.refine, "threads": args.threads,
              "encoder_precision": args.encoder_precision, "seconds": round(total, 2),
              "parts": parts, "model": str(args.model),
              "command": "python " + " ".join(sys.argv), **provenance()}
    print(json.dumps(record, indent=1))
    if args.out is not None:
        from records import write_record   # here: it imports cpgbn
        write_record(args.out, record)


if __name__ == "__main__":
    main()
