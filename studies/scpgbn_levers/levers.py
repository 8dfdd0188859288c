"""What closes the gap between the supervised CPGBN (CPGBNClassifier) and the paper's Table 4 /
NBSVM on SUBJ?  One lever at a time, on the validation split the xi tuning of studies.table4
uses: fold 0's training documents of the 10-fold protocol (``fold_indices(seed=0)``), 80%
fitted and 20% scored (stratified, seeded by 0); the test documents are never read.

Each lever changes one setting of a reference fit (1 layer of 200, the library's defaults:
xi 100 per unit, 10 epochs, vocabulary 8,000, Gibbs statistics for the globals; seed 0, one
thread):

* ``xi``: the cross-entropy's weight, 1 / 10 / 100 / 1000;
* ``epochs``: 3 / 10 / 20 passes;
* ``vocab``: 8,000 words or every word (SUBJ's training folds hold about 21,000);
* ``width``: K_1 = 200 or 400 kernels (the encoder's width follows K_1);
* ``unlabelled``: MR's 10,662 reviews added without labels (``semi_supervised=True``: they
  contribute L_g only): the lever "unlabelled text";
* ``statistics``: the globals' TLASGR statistics from the encoder (the paper's Algorithm 1, the
  labels reach the kernels through them) instead of the Gibbs-style token augmentation;
* ``together``: two of the best levers at once (do their gains add up?);
* and, for reference, NBSVM-bigram and MNB-bigram (the library's baselines) on the same split.

Each cell records validation accuracy, accuracy on 2,000 fitted documents (is the gap one of
fitting or of generalising?), fit seconds, the command and the commit, in its own file
(results/scpgbn_levers/cells/NAME.json) so two processes can run disjoint cells at once.

    python -m studies.scpgbn_levers.levers --cells reference,xi-10,epochs-3
    python -m studies.scpgbn_levers.levers --report     # results/scpgbn_levers.md
"""
import argparse
import json
import time

import numpy as np
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from cpgbn.classifier import CPGBNClassifier
from cpgbn.datasets import load_dataset
from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically

from studies.common.paths import RESULTS
from studies.common.reports import command_line
from studies.text_baselines.text_baselines import splits

CELLS_DIR = RESULTS / "scpgbn_levers" / "cells"
TABLE = RESULTS / "scpgbn_levers.md"
REFERENCE = dict(layers=(200,), xi=100.0, n_epochs=10, vocab_size=8000,
                 global_statistics="gibbs")
#: Every word of a SUBJ training split (about 21,000 types) is under this
ALL_WORDS = 200_000
#: name -> (lever, value shown, changed settings, unlabelled extra corpus)
CELLS = {
    "reference": ("reference", "defaults", {}, None),
    "xi-1": ("xi", 1, dict(xi=1.0), None),
    "xi-10": ("xi", 10, dict(xi=10.0), None),
    "xi-1000": ("xi", 1000, dict(xi=1000.0), None),
    "epochs-3": ("epochs", 3, dict(n_epochs=3), None),
    "epochs-20": ("epochs", 20, dict(n_epochs=20), None),
    "vocab-all": ("vocabulary", "all words", dict(vocab_size=ALL_WORDS), None),
    "width-400": ("width K_1", 400, dict(layers=(400,)), None),
    "unlabelled-mr": ("unlabelled text", "+ MR 10,662 unlabelled", {}, "mr"),
    "statistics-encoder": ("statistics", "encoder (Algorithm 1)",
                           dict(global_statistics="encoder"), None),
    # two of the best levers together: do their gains add up?
    "encoder-xi-10": ("together", "encoder statistics + xi 10",
                      dict(global_statistics="encoder", xi=10.0), None),
    "xi-10-epochs-20": ("together", "xi 10 + 20 epochs", dict(xi=10.0, n_epochs=20), None),
}
#: The n-gram baselines on the same split (scikit-learn pipelines of the library; seconds)
BASELINE_CELLS = ("nbsvm-bigram", "mnb-bigram")


def validation_split(data_dir=None):
    """(fit texts, fit labels), (validation texts, validation labels): table4's tuning split."""
    _, (texts, labels), _ = next(iter(splits("subj", data_dir, 0)))
    fit_x, val_x, fit_y, val_y = train_test_split(list(texts), list(labels), test_size=0.2,
                                                  stratify=list(labels), random_state=0)
    return (fit_x, fit_y), (val_x, val_y)


def run_cell(name, data_dir=None) -> dict:
    lever, value, changes, extra = CELLS[name]
    settings = dict(REFERENCE, **changes)
    (fit_x, fit_y), (val_x, val_y) = validation_split(data_dir)
    texts, labels = list(fit_x), list(fit_y)
    if extra is not None:
        more, _ = load_dataset(extra, "all", data_dir=data_dir)
        texts += list(more)
        labels += [None] * len(more)
    model = CPGBNClassifier(**settings, semi_supervised=extra is not None, random_state=0,
                            n_threads=1)
    start = time.perf_counter()
    model.fit(texts, labels)
    seconds = time.perf_counter() - start
    return dict(name=name, lever=lever, value=value,
                settings={k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
                unlabelled=extra, n_fit=len(fit_x), n_unlabelled=len(texts) - len(fit_x),
                validation_accuracy=float(model.score(val_x, val_y)),
                fit_accuracy=float(model.score(fit_x[:2000], fit_y[:2000])),
                fit_seconds=round(seconds, 1), n_steps=len(model.loss_trace_),
                vocabulary=len(model.vocabulary_), paper_xi=model.paper_xi_,
                command=command_line(), **provenance())


def run_baseline(name, data_dir=None) -> dict:
    from cpgbn.evaluate.text_baselines import make_baseline
    (fit_x, fit_y), (val_x, val_y) = validation_split(data_dir)
    model = make_baseline(name, random_state=0)
    start = time.perf_counter()
    model.fit(fit_x, fit_y)
    seconds = time.perf_counter() - start
    return dict(name=name, lever="baseline", value=name, settings={}, unlabelled=None,
                n_fit=len(fit_x), n_unlabelled=0,
                validation_accuracy=float(model.score(val_x, val_y)),
                fit_accuracy=float(model.score(fit_x[:2000], fit_y[:2000])),
                fit_seconds=round(seconds, 1), n_steps=0, vocabulary=0, paper_xi=None,
                command=command_line(), **provenance())


def write_table() -> str:
    cells = [json.loads(p.read_text()) for p in sorted(CELLS_DIR.glob("*.json"))]
    order = list(CELLS) + list(BASELINE_CELLS)
    cells.sort(key=lambda c: order.index(c["name"]) if c["name"] in order else len(order))
    lines = [
        "# sCPGBN on SUBJ: which lever closes the gap?",
        "",
        "Made by `python -m studies.scpgbn_levers.levers --report` from "
        "results/scpgbn_levers/cells/ (the study's docstring has the protocol).  SUBJ, fold 0's "
        "training documents of the 10-fold protocol: 80% fitted, 20% (1,800 documents) scored; "
        "1 layer of 200 kernels, seed 0, one thread; every cell changes one setting of the "
        "reference (xi 100 per unit, 10 epochs, 8,000 words, Gibbs statistics).  One seed: "
        "the binomial standard error of a validation accuracy near 0.9 on 1,800 documents is "
        "0.7 points.  Fit seconds are wall time with two such fits sharing the 2 cores, and "
        "include any time a cell's process was paused (SIGSTOP) while a benchmark needed the "
        "machine: a rough cost, not a timing.",
        "",
        "| lever | value | validation % | fitted docs % | fit s | steps | vocabulary | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(f"| {c['lever']} | {c['value']} | {100 * c['validation_accuracy']:.1f} | "
                     f"{100 * c['fit_accuracy']:.1f} | {c['fit_seconds']:.0f} | {c['n_steps']} | "
                     f"{c['vocabulary']} | {c['commit']} |")
    lines += ["", "Commands:", ""]
    lines += sorted({f"    {c['command']}" for c in cells})
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = list(CELLS) + list(BASELINE_CELLS)
    p.add_argument("--cells", default=",".join(names), help="comma-separated: " + ", ".join(names))
    p.add_argument("--data-dir", default=None)
    p.add_argument("--report", action="store_true", help="write results/scpgbn_levers.md only")
    args = p.parse_args(argv)
    if not args.report:
        CELLS_DIR.mkdir(parents=True, exist_ok=True)
        for name in args.cells.split(","):
            if name not in names:
                p.error(f"unknown cell {name!r}: one of {', '.join(names)}")
            path = CELLS_DIR / f"{name}.json"
            if path.exists():
                continue
            with threadpool_limits(limits=1):
                cell = (run_baseline if name in BASELINE_CELLS else run_cell)(name, args.data_dir)
            write_file_atomically(path, lambda fh: fh.write(json.dumps(cell, indent=1) + "\n"))
            print(name, f"validation {100 * cell['validation_accuracy']:.1f}",
                  f"fitted {100 * cell['fit_accuracy']:.1f}", f"{cell['fit_seconds']} s",
                  flush=True)
    print(write_table())


if __name__ == "__main__":
    main()
