"""Which features should a hybrid-fitted CPGBN give new documents?  One fit, every feature path.

Issue 25 asks for hybrid features within 1.5 points of the Gibbs features.  Per (dataset, seed)
this study fits one model with ``inference="hybrid"`` (200-100-50, 5 epochs, learning rate 3e-3,
the generalisation study's ``cpgbn-hybrid-5ep`` variant) on the training split of the authors'
protocol, then computes the training and test features of that one model in several ways and
scores each with the protocol's classifier (RBF SVC on theta^(1) / L):

* ``encoder``: the encoder's mean path (``transform`` with ``refine_iter=0``);
* ``refine-k``: k Gibbs sweeps with the globals fixed, started at the encoder's state, averaged
  (``refine_iter=k``);
* ``gibbs-k``: k Gibbs sweeps with the globals fixed from the sampler's own start (w = 1),
  averaged, no burn-in (``infer(n_iter=k, burn_in=0)``): the control that says what the
  encoder's start is worth;
* ``gibbs-200``: the protocol's inference, 200 sweeps, the last 50 averaged.

Seconds are those of the training plus test features of each path on this machine (the
numba and torch threads as the record says).  Records: ``results/hybrid_features/cells/``,
table ``results/hybrid_features/hybrid_features.md``.

    python -m studies.hybrid_features.hybrid_features --datasets trec --seeds 0
    python -m studies.hybrid_features.hybrid_features --report
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from cpgbn.datasets import dataset_info, load_dataset
from cpgbn.evaluate.protocols import PROTOCOLS, make_classifier
from cpgbn.evaluate.provenance import provenance
from cpgbn.model import CPGBN, DEFAULT_TOKEN_COUNT

from studies.common.paths import RESULTS
from studies.common.reports import command_line, mean_std, save_record

OUT = RESULTS / "hybrid_features"
PROTOCOL = PROTOCOLS["authors"]
#: The hybrid fit (the generalisation study's cpgbn-hybrid-5ep variant).
FIT = dict(layers=(200, 100, 50), token_count=DEFAULT_TOKEN_COUNT, inference="hybrid",
           n_epochs=5, learning_rate=3e-3)
SWEEPS = (2, 5, 10, 20)
PATHS = (["encoder"] + [f"refine-{k}" for k in SWEEPS] + [f"gibbs-{k}" for k in SWEEPS]
         + ["gibbs-200"])


def features(model: CPGBN, path: str, texts) -> np.ndarray:
    """The features of ``texts`` by feature path ``path`` (module docstring)."""
    kind, _, sweeps = path.partition("-")
    if kind == "encoder":
        return model.set_params(refine_iter=0).transform(texts)
    if kind == "refine":
        return model.set_params(refine_iter=int(sweeps)).transform(texts)
    n_iter = int(sweeps)
    burn_in = PROTOCOL.burn_in if n_iter == PROTOCOL.n_iter else 0
    inferred = model.infer(texts, n_iter=n_iter, burn_in=burn_in)
    theta1 = inferred.result.theta_mean[0]
    return theta1 / np.maximum(inferred.data.true_length, 1)[:, None]


def run_cell(dataset: str, seed: int, data_dir=None, *, paths=PATHS, path_features=None,
             fit: dict = FIT, describe=None) -> dict:
    """Fit one hybrid model (``fit``: estimator parameters) on the dataset's training split and
    score the features of every path in ``paths`` (``path_features(model, path, texts)``,
    default :func:`features`); ``describe(f_train)`` may add fields to each path's row."""
    path_features = features if path_features is None else path_features
    origin = provenance()
    x_train, y_train = load_dataset(dataset, "train", data_dir=data_dir)
    x_test, y_test = load_dataset(dataset, "test", data_dir=data_dir)
    model = CPGBN(vocab_size=dataset_info(dataset)["vocab_size"] + 1, random_state=seed,
                  n_iter=PROTOCOL.n_iter, burn_in=PROTOCOL.burn_in, progress=False, **fit)
    start = time.perf_counter()
    model.fit(x_train)
    fit_seconds = time.perf_counter() - start
    rows = {}
    for path in paths:
        start = time.perf_counter()
        f_train = path_features(model, path, x_train)
        f_test = path_features(model, path, x_test)
        seconds = time.perf_counter() - start
        classifier = make_classifier(PROTOCOL.classifier, seed).fit(f_train, y_train)
        rows[path] = {"accuracy": float(classifier.score(f_test, np.asarray(y_test))),
                      "feature_seconds": round(seconds, 2)}
        if describe is not None:
            rows[path].update(describe(f_train))
        print(dataset, seed, path, rows[path], flush=True)
    return {"dataset": dataset, "seed": int(seed), "protocol": PROTOCOL.name,
            "fit": {k: list(v) if isinstance(v, tuple) else v for k, v in fit.items()},
            "fit_seconds": round(fit_seconds, 1), "paths": rows,
            "n_train": len(y_train), "n_test": len(y_test), "command": command_line(), **origin}


def report(records: list[dict]) -> str:
    datasets = sorted({r["dataset"] for r in records})
    lines = ["# Feature paths of a hybrid-fitted CPGBN", "",
             "Made by `studies/hybrid_features/hybrid_features.py` (module docstring: the paths). "
             "One hybrid fit per (dataset, seed): 200-100-50, 5 epochs, learning rate 3e-3; "
             "authors' protocol (fixed split, RBF SVC on theta^(1)/L). Accuracy %, mean +- std "
             "over seeds; seconds: training plus test features, median over seeds.", "",
             "| path | " + " | ".join(d.upper() + " acc" for d in datasets) + " | "
             + " | ".join(d.upper() + " s" for d in datasets) + " |",
             "|---|" + "---|" * (2 * len(datasets))]
    for path in PATHS:
        acc, sec = [], []
        for d in datasets:
            cells = [r["paths"][path] for r in records if r["dataset"] == d and path in r["paths"]]
            acc.append(f"{mean_std([100 * c['accuracy'] for c in cells])} (n={len(cells)})"
                       if cells else "-")
            sec.append(f"{np.median([c['feature_seconds'] for c in cells]):.1f}" if cells else "-")
        lines.append(f"| {path} | " + " | ".join(acc + sec) + " |")
    lines += ["", "Records (command, commit, machine, seed) in `cells/`.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="trec,subj,mr")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report", action="store_true", help="only rewrite the table")
    args = parser.parse_args(argv)
    cells = args.out / "cells"
    if not args.report:
        for dataset in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                path = cells / f"{dataset}--seed{seed}.json"
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    save_record(path, run_cell(dataset, seed, args.data_dir))
    records = [json.loads(p.read_text()) for p in sorted(cells.glob("*.json"))]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hybrid_features.md").write_text(report(records))


if __name__ == "__main__":
    main()
