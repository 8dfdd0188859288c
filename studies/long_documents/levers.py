"""Issue 59's long-document levers: which change of the classifier's network closes its gap on
IMDB's reviews, measured on a validation split of IMDB's training reviews (the test reviews
are never read).

Split: :func:`studies.classifier_training.grid.validation_split` for "imdb": IMDB's 25,000
training reviews, 80% (20,000) given to the fit, 20% (5,000) scored, stratified, seed 0.  The
fit holds out its own 10% for early stopping, as the library does.

Cells (:data:`LIBRARY_CELLS`: ``CPGBNClassifier`` with today's defaults and one change; the
library's classifier scores what its network trained alone scores on every split measured so
far (docs/classifier.md), so most levers are measured on the cheaper ``generative=False``
fit, and a lever that wins is checked on the default classifier itself):

* ``default``, ``network-alone``: the classifier and its network (mean pooling, 200 maps,
  8,000 words, at most 30 epochs, patience 3).
* ``network-alone-max``: max pooling over the positions (``classifier_pooling="max"``).
* ``network-alone-maps-500``, ``-maps-1000``: more feature maps (``layers=(500,)``, ...).
* ``network-alone-words-30000``: every word up to 30,000 rows (``vocab_size=30000``).
* ``network-alone-no-patience``: every one of the 30 epochs, the best kept.
* ``network-alone-max-maps-1000-words-30000``: Johnson & Zhang's one-hot CNN shape (max
  pooling, 1,000 maps, 30,000 words) on the library's network.
* ``default-max``: the default classifier with max pooling (the check of a winner).

:data:`COPY_CELLS` run the study copy of the network
(:mod:`studies.classifier_training.network_levers`, checked equal to the library's by its
test) for the lever the library does not offer: the mean of each map's k largest positions
(``copy-top-10``), beside the copy with the library's mean (``copy-mean``), so that the two
differ in the pooling alone.  ``nbsvm-bigram``: the baseline a user would run, same split.

Each cell is recorded in results/long_documents/cells/<cell>_seed<seed>.json (command,
commit, seconds, the validation curve) and skipped when that file exists, so the study resumes
cell by cell; one thread per fit; ``--report`` writes results/long_documents.md.

    python -m studies.long_documents.levers --data-dir ../shared/data
    python -m studies.long_documents.levers --report
"""
import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically

from studies.classifier_training import network_levers as copy_network
from studies.classifier_training.grid import (fit_and_score, gradient_summary, recorded_settings,
                                              validation_split)
from studies.common.paths import RESULTS
from studies.common.reports import command_line

CELLS_DIR = RESULTS / "long_documents" / "cells"
TABLE = RESULTS / "long_documents.md"
DATASET = "imdb"
#: the library's settings every cell shares (the defaults otherwise)
BASE = dict(layers=(200,), n_threads=1)
#: name -> the change of CPGBNClassifier's defaults, in the order they run (cheapest first)
LIBRARY_CELLS = {
    "default": dict(),
    "network-alone": dict(generative=False),
    "network-alone-max": dict(generative=False, classifier_pooling="max"),
    "network-alone-no-patience": dict(generative=False, patience=None),
    "network-alone-words-30000": dict(generative=False, vocab_size=30000),
    "network-alone-maps-500": dict(generative=False, layers=(500,)),
    "network-alone-maps-1000": dict(generative=False, layers=(1000,)),
    "network-alone-max-maps-1000-words-30000": dict(generative=False, classifier_pooling="max",
                                                    layers=(1000,), vocab_size=30000),
    "default-max": dict(classifier_pooling="max"),
}
#: name -> the study copy's pooling (its training is the library's defaults')
COPY_CELLS = {"copy-mean": "mean", "copy-top-10": 10}
BASELINE = "nbsvm-bigram"
#: the order of a full run: the baseline, the references, then the levers by cost
ORDER = (BASELINE, "default", "network-alone", "network-alone-max", "copy-mean", "copy-top-10",
         "network-alone-no-patience", "network-alone-words-30000", "network-alone-maps-500",
         "network-alone-maps-1000", "network-alone-max-maps-1000-words-30000", "default-max")
assert set(ORDER) == set(LIBRARY_CELLS) | set(COPY_CELLS) | {BASELINE}


def cell_path(name: str, seed: int):
    return CELLS_DIR / f"{name}_seed{seed}.json"


def _record(name, seed, settings, measured):
    return dict(name=name, dataset=DATASET, seed=seed, settings=settings, **measured,
                command=command_line(), **provenance())


def run_library_cell(name, seed, split, limit=None):
    from cpgbn import CPGBNClassifier
    settings = dict(BASE, **LIBRARY_CELLS[name], random_state=seed)
    if limit is not None:   # a smoke run: few documents, one epoch
        settings.update(n_epochs=1)
    return _record(name, seed, recorded_settings(settings),
                   fit_and_score(CPGBNClassifier(**settings), split))


def run_copy_cell(name, seed, split, limit=None):
    import torch
    (fit_x, fit_y), (val_x, val_y) = split
    training = dict(copy_network.TRAINING)
    if limit is not None:
        training.update(n_epochs=1)
    classes = np.unique(np.asarray(fit_y))
    fit_codes = np.searchsorted(classes, np.asarray(fit_y))
    val_codes = np.searchsorted(classes, np.asarray(val_y))
    torch.manual_seed(seed)
    np.random.seed(seed)
    start = time.perf_counter()
    fitted, scored, V = copy_network.encode(fit_x, val_x, training["vocab_size"])
    network = copy_network.build_network(V, len(classes), (3,), training["maps"],
                                         pooling=COPY_CELLS[name])
    best_epoch, curve, n_steps, norms = copy_network.fit(network, fitted, fit_codes, seed,
                                                         **training)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    accuracy = copy_network.accuracy(network, scored, val_codes)
    predict_seconds = time.perf_counter() - start
    measured = dict(n_fit=len(fit_x), accuracy=float(accuracy),
                    fit_seconds=round(fit_seconds, 1), predict_seconds=round(predict_seconds, 2),
                    n_steps=n_steps, best_epoch=best_epoch,
                    validation_curve=[round(float(a), 4) for a in curve],
                    **gradient_summary(norms, training["max_grad_norm"]))
    return _record(name, seed, dict(training, pooling=COPY_CELLS[name], n_threads=1), measured)


def run_baseline(seed, split, limit=None):
    from cpgbn.evaluate.text_baselines import make_baseline
    return _record(BASELINE, seed, {}, fit_and_score(make_baseline(BASELINE, random_state=seed),
                                                     split))


def run_cell(name, seed, split, limit=None) -> dict:
    if limit is not None:
        (fx, fy), (vx, vy) = split
        split = (fx[:limit], fy[:limit]), (vx[:limit], vy[:limit])
    if name == BASELINE:
        return run_baseline(seed, split, limit)
    if name in COPY_CELLS:
        return run_copy_cell(name, seed, split, limit)
    return run_library_cell(name, seed, split, limit)


def _describe(cell) -> str:
    if cell["name"] == BASELINE:
        return "NBSVM-bigram (`make_baseline`)"
    if cell["name"] in COPY_CELLS:
        pooling = cell["settings"]["pooling"]
        return ("the study's copy of the network, mean pooling" if pooling == "mean" else
                f"the study's copy, the mean of each map's {pooling} largest positions")
    change = LIBRARY_CELLS[cell["name"]]
    return "`CPGBNClassifier(" + ", ".join(f"{k}={v!r}" for k, v in change.items()) + ")`"


def write_table() -> str:
    cells = [json.loads(p.read_text()) for p in sorted(CELLS_DIR.glob("*_seed*.json"))]
    cells.sort(key=lambda c: (ORDER.index(c["name"]), c["seed"]))
    reference = {c["seed"]: c["accuracy"] for c in cells if c["name"] == "network-alone"}
    lines = [
        "# Long documents: the classifier's levers on IMDB",
        "",
        "Made by `python -m studies.long_documents.levers --report` from "
        "results/long_documents/cells/ (the study's docstring has the protocol).  IMDB's "
        "25,000 training reviews: 80% (20,000) fitted, 10% of them the fit's own early-stopping "
        "split, and 20% (5,000) scored (stratified, seed 0); the test reviews are not read.  "
        "Accuracy in % on the scored 5,000 (binomial standard error about 0.4 points near 89%); "
        "the change against the network alone of the same seed.  One thread per fit; seconds "
        "are wall time beside other jobs on the project's 2-core machine: a rough cost.",
        "",
        "| cell | what changes | accuracy % | against the network alone | fit s | steps | "
        "best epoch | validation curve % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        curve = " ".join(f"{100 * a:.1f}" for a in c.get("validation_curve") or []) or "-"
        base = reference.get(c["seed"])
        delta = "-" if base is None or c["name"] == "network-alone" else \
            f"{100 * (c['accuracy'] - base):+.1f}"
        name = c["name"] + (f" (seed {c['seed']})" if c["seed"] else "")
        lines.append(f"| {name} | {_describe(c)} | {100 * c['accuracy']:.1f} | {delta} | "
                     f"{c['fit_seconds']:.0f} | {c.get('n_steps', '-')} | "
                     f"{c.get('best_epoch') or '-'} | {curve} |")
    missing = [n for n in ORDER if not any(c["name"] == n for c in cells)]
    if missing:
        lines += ["", "Not run yet: " + ", ".join(missing) + "."]
    lines += ["", "Commits and commands:", ""]
    lines += [f"    {c['name']} seed {c['seed']}: {c['commit']}  ({c['command']})" for c in cells]
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default=",".join(ORDER),
                   help="comma-separated, of " + ", ".join(ORDER) + " (default all, in order)")
    p.add_argument("--seed", type=int, default=0,
                   help="the fits' seed (the 80/20 split stays seed 0's; default 0)")
    p.add_argument("--data-dir", default=None, help="the datasets' folder (default $CPGBN_DATA)")
    p.add_argument("--report", action="store_true", help="write the table only")
    # a smoke run: the first LIMIT fitted and scored reviews, one epoch, printed, not recorded
    p.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = args.cells.split(",")
    for name in names:
        if name not in ORDER:
            p.error(f"unknown cell {name!r}: one of {', '.join(ORDER)}")
    from cpgbn.evaluate.provenance import source_commit
    source_commit()   # the commit this process loads, not one made while its cells run
    if not args.report:
        import torch
        torch.set_num_threads(1)
        todo = [n for n in names if args.limit is not None or not cell_path(n, args.seed).exists()]
        split = validation_split(DATASET, args.data_dir) if todo else None
        for name in todo:
            with threadpool_limits(limits=1):
                cell = run_cell(name, args.seed, split, args.limit)
            if args.limit is not None:
                print(json.dumps({k: cell.get(k) for k in ("name", "accuracy", "fit_seconds",
                                                       "n_steps")}), flush=True)
                continue
            path = cell_path(name, args.seed)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file_atomically(path, lambda fh: fh.write(json.dumps(cell, indent=1) + "\n"))
            print(name, f"seed {args.seed}", f"accuracy {100 * cell['accuracy']:.1f}",
                  f"{cell['fit_seconds']} s", f"best epoch {cell.get('best_epoch')}", flush=True)
        if args.limit is not None:
            return
    print(write_table())


if __name__ == "__main__":
    main()
