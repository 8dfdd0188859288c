"""The paper's Table 4: the supervised CPGBN (sCPGBN, :class:`cpgbn.classifier.CPGBNClassifier`)
with 1, 2 and 3 layers, beside the library's n-gram baselines and the paper's numbers.

Protocol (issue 36):

* SUBJ and MR: 10-fold stratified cross-validation, the folds of
  ``cpgbn.datasets.fold_indices(labels, fold, 10, seed=0)``, the folds of the baselines'
  records (``studies.text_baselines``: the same harness and splits); TREC and IMDB: the
  official train/test split.
* Every cell is one (dataset, layers, seed, split) fit of ``CPGBNClassifier`` in the
  paper's form (``settings.PAPER_FORM``: the library's defaults before issue 47) except what
  this script is told (``--epochs``, ``--xi``), on one thread;
  it records the test accuracy, the expected calibration error (15 bins), the wall seconds of
  fit and of predict, the paper's xi of the fit, the command and the commit.  Cells already in
  the record are kept, and a fit checkpoints every 50 steps (``runs/table4/``), so a run
  killed between or within cells resumes where it stopped.  Several processes may run side by
  side (a seed each, say): a cell is added to the record under a lock, the file read again
  (``studies.common.reports.add_cell``).
* xi: ``--xi`` fixed, or ``--tune-xi 10,100,1000``: each value fitted on 80% of the first
  split's training documents (a stratified split seeded by 0) and scored on the other 20%; the
  best validation accuracy gives the xi of every cell of that (dataset, layers).  The test
  documents are never read for it.  The tuning cells are recorded with the rest.

    python -m studies.table4.table4 --datasets subj --layers 200,100,50 --seeds 0 --folds 0-9
    python -m studies.table4.table4 --report        # results/table4.md from the record

In the background, beside other work (a worktree at a fixed commit, yielding the CPU):
``setsid nohup bash studies/table4/run_in_background.sh TREE LOG -- <arguments> &``.

Records: results/table4/table4.json; the table: results/table4.md.
"""
import argparse
import time

import numpy as np
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from cpgbn.classifier import CPGBNClassifier
from cpgbn.evaluate.calibration import expected_calibration_error
from cpgbn.evaluate.provenance import provenance

from studies.common.reports import add_cell, command_line, load_cells
from studies.text_baselines.text_baselines import splits

from .settings import CHECKPOINTS, OUT, PAPER_FORM


def _layers(text: str) -> tuple:
    return tuple(int(k) for k in text.split("-"))


def model(layers, seed, xi, epochs) -> CPGBNClassifier:
    """The paper's form (settings.PAPER_FORM), with ``xi`` and ``epochs`` where given."""
    told = {name: value for name, value in (("xi", xi), ("n_epochs", epochs))
            if value is not None}
    return CPGBNClassifier(layers=layers, random_state=seed, n_threads=1,
                           **{**PAPER_FORM, **told})


def fit_and_score(layers, seed, xi, epochs, train, test, checkpoint=None) -> dict:
    """Fit on ``train`` (texts, labels), score on ``test``: the cell's numbers.  With
    ``checkpoint`` (a folder), the fit saves its state there every 50 steps and a later run
    resumes it (an IMDB fit outlasts a session); ``fit_seconds`` is then the last part's."""
    clf = model(layers, seed, xi, epochs)
    start = time.perf_counter()
    if checkpoint is None:
        clf.fit(train[0], train[1])
    else:
        clf.fit(train[0], train[1], checkpoint_dir=checkpoint, checkpoint_every=50,
                resume=True)
    fitted = time.perf_counter()
    probabilities = clf.predict_proba(test[0])
    predicted_at = time.perf_counter()
    labels = np.asarray(test[1])
    predicted = clf.classes_[np.argmax(probabilities, axis=1)]
    return dict(accuracy=float(np.mean(predicted == labels)),
                ece=float(expected_calibration_error(labels, probabilities, clf.classes_)),
                fit_seconds=round(fitted - start, 1),
                predict_seconds=round(predicted_at - fitted, 2), n_train=len(train[0]),
                n_test=len(test[0]), paper_xi=clf.paper_xi_, n_steps=len(clf.loss_trace_),
                final_loss=float(np.mean(clf.loss_trace_[-10:])))


def tune_xi(record, dataset, layers, grid, epochs, data_dir) -> float:
    """The xi of ``grid`` with the best accuracy on a validation split of the first split's
    training documents (module docstring); each value's cell recorded."""
    _, (texts, labels), _ = next(iter(splits(dataset, data_dir, 0)))
    fit_x, val_x, fit_y, val_y = train_test_split(list(texts), list(labels), test_size=0.2,
                                                  stratify=list(labels), random_state=0)
    scores = {}
    for xi in grid:
        key = f"tune|{dataset}|{'-'.join(map(str, layers))}|xi={xi:g}|epochs={epochs}"
        if key not in record["cells"]:
            cell = fit_and_score(layers, 0, xi, epochs, (fit_x, fit_y), (val_x, val_y))
            add_cell(OUT, record, key, dict(kind="tune", dataset=dataset, layers=list(layers),
                                            xi=xi, epochs=epochs, seed=0, **cell,
                                            command=command_line(), **provenance()))
            print(key, f"validation {100 * cell['accuracy']:.1f}", flush=True)
        scores[xi] = record["cells"][key]["accuracy"]
    return max(grid, key=lambda xi: (scores[xi], -xi))


def run(datasets, layer_sets, seeds, folds, xi, grid, epochs, data_dir) -> None:
    record = load_cells(OUT)
    for dataset in datasets:
        for layers in layer_sets:
            chosen = tune_xi(record, dataset, layers, grid, epochs, data_dir) if grid else xi
            for seed in seeds:
                for index, (split, train, test) in enumerate(splits(dataset, data_dir, 0)):
                    if dataset in ("subj", "mr") and index not in folds:
                        continue
                    key = (f"{dataset}|{'-'.join(map(str, layers))}|seed={seed}|{split}"
                           f"|xi={chosen:g}|epochs={epochs}")
                    if key in record["cells"]:
                        continue
                    checkpoint = CHECKPOINTS / key.replace("|", "_").replace("=", "-")
                    cell = fit_and_score(layers, seed, chosen, epochs, train, test, checkpoint)
                    add_cell(OUT, record, key, dict(
                        kind="test", dataset=dataset, layers=list(layers), seed=seed,
                        split=split, xi=chosen, xi_tuned_over=list(grid) if grid else None,
                        epochs=epochs, **cell, command=command_line(), **provenance()))
                    print(key, f"{100 * cell['accuracy']:.1f}", f"{cell['fit_seconds']} s",
                          flush=True)


def _folds(text: str) -> set:
    if "-" in text:
        lo, hi = text.split("-")
        return set(range(int(lo), int(hi) + 1))
    return {int(f) for f in text.split(",")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="subj")
    p.add_argument("--layers", default="200,200-100,200-100-50",
                   help="comma-separated layer sets, e.g. 200,200-100-50")
    p.add_argument("--seeds", default="0")
    p.add_argument("--folds", default="0-9", help="CV folds to run (MR, SUBJ)")
    p.add_argument("--xi", type=float, default=None, help="fixed xi (default: the library's)")
    p.add_argument("--tune-xi", default=None, metavar="GRID", help="e.g. 10,100,1000")
    p.add_argument("--epochs", type=int, default=None, help="default: the library's")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--report", action="store_true", help="write results/table4.md only")
    args = p.parse_args(argv)
    if not args.report:
        defaults = CPGBNClassifier().get_params()
        with threadpool_limits(limits=1):
            run(args.datasets.split(","), [_layers(t) for t in args.layers.split(",")],
                [int(s) for s in args.seeds.split(",")], _folds(args.folds),
                defaults["xi"] if args.xi is None else args.xi,
                None if args.tune_xi is None else [float(v) for v in args.tune_xi.split(",")],
                defaults["n_epochs"] if args.epochs is None else args.epochs, args.data_dir)
    from .report import write_table
    write_table()


if __name__ == "__main__":
    main()
