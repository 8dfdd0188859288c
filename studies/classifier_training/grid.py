"""How should sCPGBN be trained?  One setting at a time, on the split of
studies.scpgbn_levers (SUBJ, fold 0's training documents of the 10-fold protocol, 80% fitted
and 20% scored, stratified, seed 0; the test fold is never read).

Every cell is a :class:`cpgbn.CPGBNClassifier` with one layer of 200 kernels, seed 0, one
thread, that changes the settings named in :data:`CELLS` from the library's defaults at the
commit recorded; a fit with a validation split (``validation_fraction``) holds it out of the
80% it is given, so the 20% scored here is never seen by the fit.  A cell records accuracy on
the 20%, fit seconds, steps, the best epoch and validation curve, and the encoder gradient's
norm before the clip (median, 10th and 90th percentile, share of steps clipped), in its own
file (results/classifier_training/cells/NAME.json), so that processes can run disjoint cells.

    python -m studies.classifier_training.grid --cells paper,default
    python -m studies.classifier_training.grid --report   # results/classifier_training.md
"""
import argparse
import contextlib
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from cpgbn.classifier import CPGBNClassifier
from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically

from studies.common.paths import RESULTS
from studies.common.reports import command_line
from studies.scpgbn_levers import levers

CELLS_DIR = RESULTS / "classifier_training" / "cells"
TABLE = RESULTS / "classifier_training.md"
BASE = dict(layers=(200,), random_state=0, n_threads=1)
#: The study's reference: the classifier's defaults when the study began (commit a1060cf)
#: written out, so that a cell means the same when the library's defaults change
REFERENCE = dict(classifier_input="hidden+theta", xi=100.0, generative_every=1,
                 batch_size=100,
                 n_epochs=10, validation_fraction=0.1, patience=3, classifier_pooling="mean",
                 max_grad_norm=10.0)
#: Cells that take the library's defaults at their commit (BASE aside), not the reference
DEFAULT_CELLS = {
    "default": dict(),
    "default-3-layers": dict(layers=(200, 100, 50)),
    "default-generative-every-1": dict(generative_every=1),
    "default-generative-every-32": dict(generative_every=32),
    # the discriminative baseline of the defaults: the same network and training
    "discriminative": dict(generative=False),
    # session 29: the issue's remaining levers on the defaults' network (the default scores
    # what its network alone scores on all three splits, so the cheaper fit measures them):
    # more maps, every word, other filter widths, weight decay (AdamW, decoupled; the
    # library has no such parameter, so ``adamw_weight_decay`` patches the study's optimiser)
    "discriminative-K400": dict(generative=False, layers=(400,)),
    "discriminative-K1000": dict(generative=False, layers=(1000,)),
    "discriminative-vocab-30000": dict(generative=False, vocab_size=30000),
    "discriminative-width-2": dict(generative=False, filter_width=2),
    "discriminative-width-5": dict(generative=False, filter_width=5),
    "discriminative-adamw-0.01": dict(generative=False, adamw_weight_decay=0.01),
    "discriminative-adamw-0.1": dict(generative=False, adamw_weight_decay=0.1),
    "discriminative-K1000-vocab-30000": dict(generative=False, layers=(1000,),
                                             vocab_size=30000),
    # every word (30,000 rows hold all of SUBJ's, MR's and TREC's) and weight decay together
    "discriminative-vocab-30000-adamw-0.1": dict(generative=False, vocab_size=30000,
                                                 adamw_weight_decay=0.1),
    "discriminative-vocab-30000-adamw-1": dict(generative=False, vocab_size=30000,
                                               adamw_weight_decay=1.0),
    "default-vocab-30000": dict(vocab_size=30000),
    "discriminative-vocab-30000-width-2": dict(generative=False, vocab_size=30000,
                                               filter_width=2),
}
#: name -> settings changed from the reference
CELLS = {
    **DEFAULT_CELLS,
    "hidden-xi-1e3": dict(xi=1e3),
    "hidden-xi-1e4": dict(xi=1e4),
    "hidden-xi-1e5": dict(xi=1e5),
    "hidden-only-xi-1e4": dict(xi=1e4, classifier_input="hidden"),
    "hidden-only-xi-1e5": dict(xi=1e5, classifier_input="hidden"),
    "hidden-only-xi-1e6": dict(xi=1e6, classifier_input="hidden"),
    "filters-ce-xi-1e4": dict(xi=1e4, elbo_reaches_filters=False),
    # (recorded, no longer runnable: "hidden-xi-1e4-global-every-4" and
    # "hidden-only-xi-1e5-global-every-4" ran with a1060cf's global_every=4, the globals'
    # step every 4 minibatches and the ELBO's gradient every one)
    # from here on, a classifier clips its softmax's path and its generative heads apart
    # (the cells above ran with one clip of the whole gradient; see the commits)
    "two-clips-hidden-xi-100": dict(xi=100.0, classifier_input="hidden"),
    "two-clips-hidden-xi-1e3": dict(xi=1e3, classifier_input="hidden"),
    "two-clips-hidden-xi-1e4": dict(xi=1e4, classifier_input="hidden"),
    "two-clips-paper": dict(classifier_input="theta", xi=100.0, validation_fraction=0.0),
    "discriminative-hidden": dict(generative=False, classifier_input="hidden"),
    "discriminative-hidden-20-epochs": dict(generative=False, classifier_input="hidden",
                                            n_epochs=20),
    "discriminative-hidden-dropout-0.5": dict(generative=False, classifier_input="hidden",
                                              classifier_dropout=0.5, n_epochs=20),
    "discriminative-hidden-30-epochs-batch-50": dict(generative=False,
                                                     classifier_input="hidden", n_epochs=30,
                                                     batch_size=50),
    "discriminative-hidden-30-epochs-lr-3e-3": dict(generative=False, classifier_input="hidden",
                                                    n_epochs=30, learning_rate=3e-3),
    "discriminative-hidden-30-epochs-no-clip": dict(generative=False, classifier_input="hidden",
                                                    n_epochs=30, max_grad_norm=None),
    "discriminative-max-30-epochs-batch-50": dict(generative=False, classifier_input="hidden",
                                                  classifier_pooling="max", n_epochs=30,
                                                  batch_size=50),
    "discriminative-max-30-epochs-batch-50-patience-5": dict(
        generative=False, classifier_input="hidden", classifier_pooling="max", n_epochs=30,
        batch_size=50, patience=5),
    "discriminative-hidden+theta": dict(generative=False),
}
BASELINE_CELLS = ("nbsvm-bigram",)


def gradient_summary(norms, clip=10.0) -> dict:
    norms = np.asarray(norms, dtype=np.float64)
    if norms.size == 0:
        return {}
    q10, q50, q90 = np.percentile(norms, [10, 50, 90])
    return dict(grad_norm_p10=float(q10), grad_norm_median=float(q50), grad_norm_p90=float(q90),
                clipped_share=float(np.mean(norms > clip)))


def validation_split(dataset: str, data_dir=None):
    """(fit texts, labels), (scored texts, labels): SUBJ's is studies.scpgbn_levers' (fold 0's
    training documents, 80% / 20%); MR's the same cut of its own fold 0; TREC's its training
    split, 80% / 20% stratified, seed 0 (test documents never read)."""
    if dataset == "subj":
        return levers.validation_split(data_dir)
    from sklearn.model_selection import train_test_split

    from cpgbn.datasets import load_dataset
    if dataset == "mr":   # no official split: fold 0's training documents, as SUBJ's
        _, (texts, labels), _ = next(iter(levers.splits("mr", data_dir, 0)))
    else:
        texts, labels = load_dataset(dataset, "train", data_dir=data_dir)
    fit_x, val_x, fit_y, val_y = train_test_split(list(texts), list(labels), test_size=0.2,
                                                  stratify=list(labels), random_state=0)
    return (fit_x, fit_y), (val_x, val_y)


def fit_and_score(model, split) -> dict:
    """Fit ``model`` on the split's first part and score it on its second: accuracy, fit and
    predict seconds, and, for a :class:`CPGBNClassifier`, its steps, best epoch, validation
    curve and gradient summary (the measurement every cell of this study and of
    studies.long_documents shares)."""
    (fit_x, fit_y), (val_x, val_y) = split
    start = time.perf_counter()
    model.fit(list(fit_x), list(fit_y))
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    accuracy = float(model.score(list(val_x), list(val_y)))
    predict_seconds = time.perf_counter() - start
    measured = dict(n_fit=len(fit_x), accuracy=accuracy, fit_seconds=round(fit_seconds, 1),
                    predict_seconds=round(predict_seconds, 2))
    if isinstance(model, CPGBNClassifier):
        curve = getattr(model, "validation_curve_", None)
        measured.update(n_steps=len(model.loss_trace_),
                        best_epoch=getattr(model, "best_epoch_", None),
                        validation_curve=None if curve is None else [round(float(a), 4)
                                                                     for a in curve],
                        **gradient_summary(model.gradient_norms_))
    return measured


def recorded_settings(settings: dict) -> dict:
    """``settings`` as JSON writes them (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}


def run_cell(name, data_dir=None, dataset="subj", seed=0) -> dict:
    settings = dict(BASE, **CELLS[name]) if name in DEFAULT_CELLS else \
        dict(BASE, **REFERENCE, **CELLS[name])
    settings["random_state"] = seed
    decay = settings.pop("adamw_weight_decay", None)
    with _adamw(decay):
        measured = fit_and_score(CPGBNClassifier(**settings), validation_split(dataset, data_dir))
    if decay is not None:
        settings["adamw_weight_decay"] = decay
    return dict(name=name, dataset=dataset, seed=seed, settings=recorded_settings(settings),
                **measured, command=command_line(), **provenance())


@contextlib.contextmanager
def _adamw(weight_decay):
    """The encoder's optimiser replaced by AdamW with ``weight_decay`` while the block runs
    (a measurement of a lever the library does not offer; None: unchanged)."""
    if weight_decay is None:
        yield
        return
    import torch

    from cpgbn.backends.torch import hybrid
    original = hybrid.adam
    hybrid.adam = lambda params, learning_rate: torch.optim.AdamW(
        list(params), lr=learning_rate, weight_decay=weight_decay)
    try:
        yield
    finally:
        hybrid.adam = original


def run_baseline(name, data_dir=None, dataset="subj") -> dict:
    from cpgbn.evaluate.text_baselines import make_baseline
    measured = fit_and_score(make_baseline(name, random_state=0),
                             validation_split(dataset, data_dir))
    return dict(name=name, dataset=dataset, settings={}, **measured, command=command_line(),
                **provenance())


def write_table() -> str:
    cells = [json.loads(p.read_text()) for p in sorted(CELLS_DIR.glob("*.json"))]
    order = list(CELLS) + list(BASELINE_CELLS)
    cells.sort(key=lambda c: (c.get("dataset", "subj") != "subj", c.get("dataset", "subj"),
                              order.index(c["name"]) if c["name"] in order else len(order),
                              c.get("seed", 0)))
    lines = [
        "# Training sCPGBN: which settings serve the classifier?",
        "",
        "Made by `python -m studies.classifier_training.grid --report` from "
        "results/classifier_training/cells/ (the study's docstring has the protocol).  SUBJ, "
        "fold 0's training documents of the 10-fold protocol: 80% (7,200) given to the fit, "
        "20% (1,800) scored; TREC: its training questions, 80% (4,361) fitted and 20% (1,091) "
        "scored; MR: fold 0's training documents cut as SUBJ's, 80% (7,676) fitted and 20% "
        "(1,919) scored; 1 layer of 200 kernels unless named, seed 0, one thread per fit.  "
        "One seed: the binomial standard error of an accuracy near 0.9 on 1,800 documents is "
        "0.7 points.  Seconds are wall time with two fits sharing the 2 cores (or on the "
        "machine named in the cell's record): a rough cost.  Gradient norms: the encoder's, "
        "before the clip at 10, over the steps.",
        "",
        "| dataset | cell | accuracy % | fit s | steps | best epoch | validation curve % | "
        "grad norm median (p10-p90) | clipped |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        curve = c.get("validation_curve")
        curve = "-" if not curve else " ".join(f"{100 * a:.1f}" for a in curve)
        grad = ("-" if "grad_norm_median" not in c else
                f"{c['grad_norm_median']:.3g} ({c['grad_norm_p10']:.3g}-{c['grad_norm_p90']:.3g})")
        clipped = "-" if "clipped_share" not in c else f"{100 * c['clipped_share']:.0f}%"
        name = c["name"] + (f" (seed {c['seed']})" if c.get("seed") else "")
        lines.append(f"| {c.get('dataset', 'subj')} | {name} | {100 * c['accuracy']:.1f} | {c['fit_seconds']:.0f} | "
                     f"{c.get('n_steps', 0)} | {c.get('best_epoch') or '-'} | {curve} | {grad} | "
                     f"{clipped} |")
    lines += ["", "Settings per cell: `CELLS` in studies/classifier_training/grid.py, each a change "
              "of the study's reference (the classifier's defaults when the study began: "
              "softmax on h^(1) and theta, xi 100 per unit, globals every step, batch 100, 10 "
              "epochs, validation 10% with patience 3, clip 10), except `default`, "
              "`default-3-layers` and `discriminative`, which take the library's defaults at "
              "their commit.  The cells before the `two-clips` ones clipped the whole gradient "
              "at once (commit a1060cf and its working tree, a0f2826+dirty); from 697e79d the "
              "softmax's path and the heads are clipped apart.  Commits:", ""]
    lines += sorted({f"    {c.get('dataset', 'subj')} {c['name']}: {c['commit']}  "
                     f"({c['command']})" for c in cells})
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = list(CELLS) + list(BASELINE_CELLS)
    p.add_argument("--cells", default=",".join(names), help="comma-separated: " + ", ".join(names))
    p.add_argument("--data-dir", default=None)
    p.add_argument("--dataset", default="subj", choices=("subj", "trec", "mr"))
    p.add_argument("--seed", type=int, default=0,
                   help="the classifier's seed (the split stays seed 0's; default 0)")
    p.add_argument("--report", action="store_true", help="write the table only")
    args = p.parse_args(argv)
    # the commit of the code this process loads (cached): not of a later commit made while
    # its cells run
    from cpgbn.evaluate.provenance import source_commit
    source_commit()
    if not args.report:
        CELLS_DIR.mkdir(parents=True, exist_ok=True)
        for name in args.cells.split(","):
            if name not in names:
                p.error(f"unknown cell {name!r}: one of {', '.join(names)}")
            prefix = "" if args.dataset == "subj" else f"{args.dataset}-"
            suffix = "" if args.seed == 0 else f"-seed{args.seed}"
            path = CELLS_DIR / f"{prefix}{name}{suffix}.json"
            if path.exists():
                continue
            with threadpool_limits(limits=1):
                cell = (run_baseline(name, args.data_dir, args.dataset)
                        if name in BASELINE_CELLS else
                        run_cell(name, args.data_dir, args.dataset, args.seed))
            write_file_atomically(path, lambda fh: fh.write(json.dumps(cell, indent=1) + "\n"))
            print(name, f"accuracy {100 * cell['accuracy']:.1f}", f"{cell['fit_seconds']} s",
                  flush=True)
    print(write_table())


if __name__ == "__main__":
    main()
