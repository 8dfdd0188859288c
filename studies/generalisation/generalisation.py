"""Which change lets CPGBN's features generalise on topical corpora?  Candidates side by side.

On SUBJ the bag-of-words PGBN (plain counts) beats CPGBN by 6-8 points (results/table2), and
at the default pseudo-count CPGBN's chain nearly freezes (issue 23).  Every candidate change is
a *variant*: a named dict of estimator parameters (the model class included), registered in
:data:`VARIANTS`.  A cell is (dataset, variant, seed) under the authors' protocol (fixed
splits, 200 sweeps with 150 burn-in for training and test documents, RBF SVC on theta^(1)/L);
its record, one JSON file under ``results/generalisation/cells/``, holds the accuracy, the
training chain's mixing diagnostic (:mod:`cpgbn.inference.mixing`: per-sweep change shares,
ESS of the features), timings, command, commit and seed.  A cell whose file exists is done
(runs resume, and cells run on other machines are merged by copying their files);
``results/generalisation/generalisation.md`` tables them.

    python -m studies.generalisation.generalisation --datasets trec,mr \
        --variants cpgbn-default,pgbn-plain --seeds 0
    python -m studies.generalisation.generalisation --device cuda --datasets imdb  # on a GPU
    python -m studies.generalisation.generalisation --report     # only rewrite the table
    python -m studies.generalisation.generalisation --list       # the registered variants
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from cpgbn.errors import CPGBNInputError
from cpgbn.evaluate import evaluate
from cpgbn.files import write_file_atomically
from cpgbn.model import DEFAULT_TOKEN_COUNT

from studies.common.paths import RESULTS
from studies.common.reports import command_line, mean_std

OUT = RESULTS / "generalisation"
DATASETS = ("subj", "imdb", "trec", "mr")
PROTOCOL = "authors"
#: evaluate()'s own arguments; every other key of a variant is an estimator parameter
#: (evaluate's ``model_params``), checked against the estimator when the cell runs.
EVALUATE_KEYS = ("model", "layers", "token_count", "filter_width", "eta")


def variant(model: str = "cpgbn", layers=(200, 100, 50), **params) -> dict:
    """A variant's parameters: the model ("cpgbn", "pgbn" or "lda"), its layers, and any estimator
    parameter (``token_count`` defaults to the model's: the default for CPGBN, plain counts,
    1, for PGBN)."""
    params.setdefault("token_count", DEFAULT_TOKEN_COUNT if model == "cpgbn" else 1)
    return {"model": model, "layers": list(layers), **params}


#: The candidates.  Add one as ``"name": variant(...)``.
#: A name is part of every record's file name: never reuse one for other parameters.
VARIANTS = {
    "cpgbn-default": variant(),                              # 200-100-50 at token_count 800
    "pgbn-plain": variant("pgbn"),                           # as results/table2's PGBN, tc = 1
    "cpgbn-count-25": variant(token_count=25),
    "cpgbn-count-100": variant(token_count=100),
    # the positional split's own concentration beta, in count units (a token carries
    # token_count = 800 units): beta >> the counts of a position makes w_jks ~ theta^(1)_jk / S_j,
    # the document's kernel weights shared by all of its positions
    "cpgbn-pooling-10": variant(pooling_concentration=10.0),
    "cpgbn-pooling-100": variant(pooling_concentration=100.0),
    "cpgbn-pooling-1000": variant(pooling_concentration=1000.0),
    "cpgbn-pooling-10000": variant(pooling_concentration=1e4),
    "cpgbn-pooling-100000": variant(pooling_concentration=1e5),
    # the hybrid (TLASGR globals from minibatch Gibbs statistics, Weibull encoder): features
    # from the encoder's mean path, or from 20 Gibbs sweeps started there
    "cpgbn-hybrid-5ep": variant(inference="hybrid", n_epochs=5, learning_rate=3e-3),
    "cpgbn-hybrid-5ep-refine20": variant(inference="hybrid", n_epochs=5, learning_rate=3e-3,
                                         refine_iter=20),
    # IMDB's 25k reviews make one epoch 250 minibatch steps (TREC's five epochs: 275), and
    # two sweeps from the encoder matched the Gibbs features on TREC and SUBJ (hybrid_features)
    "cpgbn-hybrid-1ep-refine2": variant(inference="hybrid", n_epochs=1, learning_rate=3e-3,
                                        refine_iter=2),
    # scikit-learn's variational LDA, 200 topics: the other bag-of-words baseline
    "lda-200": variant("lda", layers=(200,)),
}


def evaluate_arguments(name: str) -> dict:
    """The keyword arguments of :func:`cpgbn.evaluate.evaluate` for variant ``name``."""
    if name not in VARIANTS:
        raise CPGBNInputError(f"unknown variant {name!r}; registered: {', '.join(VARIANTS)}")
    params = dict(VARIANTS[name])
    kwargs = {key: params.pop(key) for key in EVALUATE_KEYS if key in params}
    kwargs["layers"] = tuple(kwargs["layers"])
    return dict(kwargs, model_params=params)


def cell_path(out: Path, dataset: str, name: str, seed: int) -> Path:
    return Path(out) / "cells" / f"{dataset}--{name}--seed{seed}.json"


def run_cell(dataset: str, name: str, seed: int, *, out: Path = OUT, data_dir=None, device=None,
             n_iter: int | None = None, burn_in: int | None = None, n_threads=None) -> dict | None:
    """Run one cell and write its record; None when its record exists already.  ``n_iter`` and
    ``burn_in`` (default: the protocol's) are for tests only."""
    path = cell_path(out, dataset, name, seed)
    if path.exists():
        return None
    start = time.perf_counter()
    result = evaluate(dataset, protocol=PROTOCOL, seeds=[seed], data_dir=data_dir, device=device,
                      n_iter=n_iter, burn_in=burn_in, n_threads=n_threads,
                      **evaluate_arguments(name))
    record = {"dataset": dataset, "variant": name, "variant_params": VARIANTS[name],
              "seed": int(seed), "protocol": PROTOCOL, "accuracy": result["accuracy_mean"],
              "mixing": result["runs"][0].get("mixing"),
              "fit_seconds": result["runs"][0]["fit_seconds"],
              "transform_seconds": result["runs"][0]["transform_seconds"],
              "median_sweep_seconds": result["runs"][0]["median_sweep_seconds"],
              "wall_seconds": round(time.perf_counter() - start, 1),
              "command": command_line(), "evaluation": result}
    for key in ("commit", "date", "machine", "library_version"):
        record[key] = result[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomically(path, lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))
    return record


def load_records(out: Path = OUT) -> list[dict]:
    folder = Path(out) / "cells"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _percent(values, digits=2) -> str:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return f"{100 * np.mean(values):.{digits}f}" if values else "-"


def report_text(records: list[dict]) -> str:
    """Accuracy per (variant, dataset), then the mixing of the same cells."""
    groups = {}
    for r in records:
        groups.setdefault((r["variant"], r["dataset"]), []).append(r)
    names = [n for n in VARIANTS if any(v == n for v, _ in groups)] + sorted(
        {v for v, _ in groups} - set(VARIANTS))
    datasets = [d for d in DATASETS if any(ds == d for _, ds in groups)]
    lines = ["# Generalisation: candidate changes to CPGBN on four corpora", "",
             "Made by `studies/generalisation/generalisation.py`; one record per cell (accuracy, "
             "mixing diagnostic, timings, command, commit, seed) in `cells/`. Authors' protocol: "
             "fixed splits (IMDB the official 25k/25k), 200 sweeps with 150 burn-in for training "
             "and test documents, RBF SVC on theta^(1)/L, the paper's vocabulary sizes. "
             "Variants (estimator parameters) are listed at the end.", "",
             "## Accuracy % (mean +- std over seeds, n = seeds)", "",
             "| variant | " + " | ".join(d.upper() for d in datasets) + " |",
             "|---|" + "---|" * len(datasets)]
    for name in names:
        cols = []
        for d in datasets:
            cells = groups.get((name, d), [])
            cols.append(f"{mean_std([100 * c['accuracy'] for c in cells])} (n={len(cells)})"
                        if cells else "-")
        lines.append(f"| {name} | " + " | ".join(cols) + " |")
    lines += ["", "## Mixing of the training chain (mean over seeds)", "",
              "moved: share of token units whose (position, kernel) assignment changed per sweep, "
              "a lower bound (0.5 sum |m_t - m_{t-1}| / sum m); switched: share of occupied "
              "positions whose dominant kernel changed; both medians over the 50 averaged sweeps. "
              "ESS: effective sample size (Geyer) of each kernel's summed training features over "
              "those 50 sweeps, median and minimum over kernels. s/sweep: median training sweep "
              "(machine and device in the records).", "",
              "| variant | dataset | moved % | switched % | ESS median | ESS min | s/sweep | seeds |",
              "|---|---|---|---|---|---|---|---|"]
    for name in names:
        for d in datasets:
            # the minibatch modes run no full Gibbs chain: no mixing, no sweep time
            cells = [c for c in groups.get((name, d), []) if c.get("mixing")]
            if not cells:
                continue
            mixing = [c["mixing"] for c in cells]

            def mean_of(key):
                values = [m.get(key) for m in mixing if m.get(key) is not None]
                return f"{np.mean(values):.1f}" if values else "-"
            lines.append(f"| {name} | {d.upper()} | "
                         f"{_percent([m.get('moved_median') for m in mixing])} | "
                         f"{_percent([m.get('switched_median') for m in mixing])} | "
                         f"{mean_of('ess_median')} | {mean_of('ess_min')} | "
                         f"{np.mean([c['median_sweep_seconds'] for c in cells]):.3f} | "
                         f"{','.join(str(c['seed']) for c in sorted(cells, key=lambda c: c['seed']))} |")
    lines += ["", "## Variants", "", "| variant | parameters |", "|---|---|"]
    for name in names:
        params = VARIANTS.get(name) or groups[next(k for k in groups if k[0] == name)][0][
            "variant_params"]
        lines.append(f"| {name} | `{json.dumps(params)}` |")
    return "\n".join(lines) + "\n"


def report(out: Path = OUT) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "generalisation.md").write_text(report_text(load_records(out)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default=None, help="torch device (default: the numba sampler)")
    ap.add_argument("--threads", type=int, default=None, help="numba threads")
    ap.add_argument("--out", default=str(OUT), help="results folder (default results/generalisation)")
    ap.add_argument("--report", action="store_true", help="only rewrite the table")
    ap.add_argument("--list", action="store_true", help="print the registered variants")
    ap.add_argument("--n-iter", type=int, default=None, help=argparse.SUPPRESS)  # tests only
    ap.add_argument("--burn-in", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.list:
        for name, params in VARIANTS.items():
            print(f"{name}: {json.dumps(params)}")
        return
    if not args.report:
        names = args.variants.split(",")
        for name in names:
            evaluate_arguments(name)  # unknown names fail before anything runs
        for dataset in args.datasets.split(","):
            for name in names:
                for seed in (int(s) for s in args.seeds.split(",")):
                    record = run_cell(dataset, name, seed, out=out, data_dir=args.data_dir,
                                      device=args.device, n_iter=args.n_iter,
                                      burn_in=args.burn_in, n_threads=args.threads)
                    label = f"{dataset} {name} seed={seed}"
                    if record is None:
                        print(f"{label}: done already", flush=True)
                        continue
                    mixing = record["mixing"] or {}
                    ess = mixing.get("ess_median")
                    print(f"{label}: {100 * record['accuracy']:.1f}%, moved "
                          f"{_percent([mixing.get('moved_median')])}%, ESS median "
                          f"{'-' if ess is None else f'{ess:.1f}'} ({record['wall_seconds']}s)",
                          flush=True)
                    report(out)
    report(out)


if __name__ == "__main__":
    main()
