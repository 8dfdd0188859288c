"""How many sweeps ``transform`` needs: features of held-out documents from chains of fewer
sweeps than the default 200 (issue 57: a transform costs its sweeps, and from the fitted
kernels' sparse start it has no warm-up left to remove).

Protocol, on training data only (no test document is read): the training documents of a
dataset (TREC's official training split, SUBJ's and MR's authors' training split; with
``--docs N`` a stratified sample of N of them, as for IMDB's long reviews) are split
80/20 into fit and validation documents (stratified, ``train_test_split(random_state=0)``).
``CPGBN(layers=(200,), random_state=seed, n_threads=1)`` is fitted on the fit documents at its
defaults (200 sweeps, 150 of burn-in), an RBF ``SVC()`` (the authors' protocol) is trained on
its ``train_features_``, and the validation documents are transformed with ``n_iter`` T and
``burn_in`` 3T/4 for each T of ``--sweeps``, plus T = 200 with another transform seed (the
chain's own noise at the default).  Each cell records the validation accuracy, the transform's
seconds and the mean absolute difference of its features from the default's relative to
their mean.

    python -m studies.transform_sweeps.transform_sweeps --data-dir ../shared/data \\
        --datasets trec,subj,mr --seeds 0,1,2
    python -m studies.transform_sweeps.transform_sweeps --data-dir ../shared/data \
        --datasets imdb --docs 2500 --seeds 0,1,2
    python -m studies.transform_sweeps.transform_sweeps --report
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from studies.common.paths import ROOT
from studies.common.reports import add_cell, load_cells

RECORD = ROOT / "results" / "transform_sweeps" / "transform_sweeps.json"
REPORT = ROOT / "results" / "transform_sweeps.md"
#: The reference chain: transform's default when the study ran (200 sweeps, 150 of burn-in);
#: settings.TRANSFORM_SWEEPS has been 50 since, from this study's cells
DEFAULT_SWEEPS = 200


def run_cell(dataset: str, seed: int, sweeps: list[int], data_dir, k: int = 200,
             docs: int | None = None) -> dict:
    from sklearn.model_selection import train_test_split

    from cpgbn import CPGBN
    from cpgbn.datasets import load_dataset
    from cpgbn.evaluate.protocols import make_classifier
    from cpgbn.evaluate.provenance import provenance
    from cpgbn.modes.base import features as feature_matrix

    texts, labels = load_dataset(dataset, "train", data_dir=data_dir)
    if docs is not None and docs < len(texts):   # a stratified sample of the training documents
        texts, _, labels, _ = train_test_split(list(texts), list(labels), train_size=docs,
                                               stratify=list(labels), random_state=0)
    fit_x, val_x, fit_y, val_y = train_test_split(list(texts), list(labels), test_size=0.2,
                                                  stratify=list(labels), random_state=0)
    start = time.perf_counter()
    model = CPGBN(layers=(k,), random_state=seed, n_threads=1, transform_iter=DEFAULT_SWEEPS,
                  transform_burn_in=3 * DEFAULT_SWEEPS // 4).fit(fit_x)
    fit_seconds = time.perf_counter() - start
    svc = make_classifier("rbf-svc", seed).fit(model.train_features_, fit_y)

    def scored(n_iter: int, transform_seed=None) -> tuple[float, float, np.ndarray]:
        # CPGBN.infer is transform's chain (the same seed by default) with n_iter, burn_in and
        # seed open; its theta means become features as transform makes them
        start = time.perf_counter()
        inferred = model.infer(val_x, n_iter=n_iter, burn_in=3 * n_iter // 4, seed=transform_seed)
        seconds = time.perf_counter() - start
        features = feature_matrix(inferred.result.theta_mean, inferred.data, "length")
        return float(np.mean(svc.predict(features) == np.asarray(val_y))), seconds, features

    reference = scored(DEFAULT_SWEEPS)
    if not np.array_equal(reference[2], model.transform(val_x)):
        raise RuntimeError("infer at the defaults no longer gives transform's features")
    other_seed = scored(DEFAULT_SWEEPS, transform_seed=seed + 1000)
    scale = float(np.mean(np.abs(reference[2])))

    def row(result) -> dict:
        return dict(accuracy=result[0], seconds=round(result[1], 2),
                    feature_difference=round(float(np.mean(np.abs(result[2] - reference[2])))
                                             / scale, 4))

    rows = {str(t): row(reference if t == DEFAULT_SWEEPS else scored(t)) for t in sweeps}
    return dict(fit_seconds=round(fit_seconds, 1), n_fit=len(fit_x), n_validation=len(val_x),
                rows=rows, default_other_seed=row(other_seed), **provenance())


def report(record: dict) -> str:
    cells = record["cells"]
    lines = ["# Transform sweeps: held-out features from shorter chains", "",
             "Made by `python -m studies.transform_sweeps.transform_sweeps --report` (protocol: "
             "its docstring; validation documents of the training data only). Validation "
             "accuracy %, mean over seeds; the features' mean absolute difference from the "
             "200-sweep transform's relative to their mean; transform seconds (one thread, "
             "median). \"200, other seed\": the default again with another transform seed, "
             "the chain's own noise.", "",
             "| dataset | sweeps (burn-in) | accuracy % (seeds) | feature difference | s |",
             "|---|---|---|---|---|"]
    def corpus(key: str) -> str:   # "imdb|seed=0|docs=2500" -> "imdb (2500 docs)"
        parts = key.split("|")
        return parts[0] + "".join(f" ({p[5:]} docs)" for p in parts[2:] if p.startswith("docs="))

    for dataset in sorted({corpus(k) for k in cells}):
        mine = [c for k, c in sorted(cells.items()) if corpus(k) == dataset]
        names = sorted({t for c in mine for t in c["rows"]}, key=int, reverse=True)
        entries = [(f"{t} ({3 * int(t) // 4})", [c["rows"][t] for c in mine if t in c["rows"]])
                   for t in names]
        entries.insert(1, ("200, other seed", [c["default_other_seed"] for c in mine]))
        for label, rows in entries:
            acc = [100 * r["accuracy"] for r in rows]
            lines.append(f"| {dataset} | {label} | {np.mean(acc):.2f} "
                         f"({', '.join(f'{a:.1f}' for a in acc)}) | "
                         f"{np.mean([r['feature_difference'] for r in rows]):.3f} | "
                         f"{np.median([r['seconds'] for r in rows]):.1f} |")
    commits = sorted({c["commit"] for c in cells.values()})
    return "\n".join(lines) + f"\n\nCommits: {', '.join(commits)}.\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--datasets", default="trec,subj")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--sweeps", default="200,100,50,25")
    p.add_argument("--k", type=int, default=200, help="K_1 (a test's small model)")
    p.add_argument("--docs", type=int, default=None,
                   help="a stratified sample of this many training documents")
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    record = load_cells(RECORD)
    if not args.report:
        sweeps = [int(s) for s in args.sweeps.split(",")]
        for dataset in args.datasets.split(","):
            for seed in map(int, args.seeds.split(",")):
                key = f"{dataset}|seed={seed}" + (f"|docs={args.docs}" if args.docs else "")
                if key in record["cells"]:
                    continue
                cell = run_cell(dataset, seed, sweeps, args.data_dir, args.k, args.docs)
                add_cell(RECORD, record, key, cell)
                print(key, {t: r["accuracy"] for t, r in cell["rows"].items()}, flush=True)
    if record["cells"]:
        text = report(record)
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(text)
        print(text)


if __name__ == "__main__":
    main()
