"""Fit time of the classifier against its discriminative baseline, in the same run (issue 47:
at most 3 times, SUBJ, one 80/20 split, one layer, 2 cores).

The split is studies.scpgbn_levers' (SUBJ, fold 0's training documents, 80% fitted, 20%
scored). In turns, ``--repeats`` times: ``CPGBNClassifier`` with the library's defaults and
``generative=False`` (the same network by the cross-entropy alone), each fit in a fresh
subprocess (its numba and torch start-up included, as a user's fit has them), ``--threads``
threads; records fit seconds, steps, best epoch and accuracy on the 20%, and the ratio of the
medians.  The last line of stdout is JSON; ``--out`` writes it.

    python benchmarks/classifier_fit_ratio.py --data-dir ../shared/data --threads 2
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def one_fit(args) -> dict:
    from threadpoolctl import threadpool_limits

    from cpgbn.classifier import CPGBNClassifier
    from studies.scpgbn_levers.levers import validation_split
    (fit_x, fit_y), (val_x, val_y) = validation_split(args.data_dir)
    model = CPGBNClassifier(layers=(200,), random_state=0, n_threads=args.threads,
                            generative=args.model == "default")
    with threadpool_limits(limits=args.threads):
        start = time.perf_counter()
        model.fit(list(fit_x), list(fit_y))
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        accuracy = float(model.score(val_x, val_y))
        predict = time.perf_counter() - start
    return dict(model=args.model, seconds=round(seconds, 2), predict_seconds=round(predict, 2),
                steps=len(model.loss_trace_), best_epoch=getattr(model, "best_epoch_", None),
                accuracy=accuracy)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=None)
    p.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.model is not None:     # one fit, in its own process
        print(json.dumps(one_fit(args)))
        return
    import statistics

    from records import write_record

    from cpgbn.evaluate.provenance import provenance
    fits = []
    for _ in range(args.repeats):
        for model in ("discriminative", "default"):
            cmd = [sys.executable, __file__, "--model", model, "--threads", str(args.threads)]
            cmd += ["--data-dir", args.data_dir] if args.data_dir else []
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(done.stderr[-3000:])
            fits.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(fits[-1], flush=True)
    median = {m: statistics.median(f["seconds"] for f in fits if f["model"] == m)
              for m in ("discriminative", "default")}
    record = dict(benchmark="classifier_fit_ratio", threads=args.threads, fits=fits,
                  median_seconds=median, ratio=round(median["default"] / median["discriminative"],
                                                     2),
                  command="python benchmarks/classifier_fit_ratio.py " + " ".join(
                      argv if argv is not None else sys.argv[1:]), **provenance())
    if args.out:
        write_record(Path(args.out), record)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
