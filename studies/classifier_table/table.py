"""The classifier against its network alone, the paper's form and NBSVM-bigram on the test
protocols of Table 4 (issue 47's acceptance record).

Models, each seeded by the cell's seed:

* ``default``: ``CPGBNClassifier`` with the library's defaults (at the commit the cell records);
* ``paper``: the paper's form as the library trained it before issue 47: softmax on
  theta^(1..T), xi 100 per unit, the ELBO and the globals every minibatch of 100, 10 epochs,
  the last one kept, 8,000 vocabulary rows, filter width 3;
* ``network``: ``generative=False``, the defaults' network trained by the cross-entropy alone;
* ``nbsvm-bigram``: the library's baseline (no layers: one cell per split and seed).

Splits: SUBJ and MR by 10-fold cross-validation (``fold_indices`` seeded by 0, the folds of
studies/table4), TREC and IMDB by their official splits.  Every (dataset, layers, model, seed,
split) is one cell file in results/classifier_table/cells/ (accuracy on the split's test
documents, fit and predict seconds, best epoch, command, commit), so a run stopped anywhere
resumes by skipping the cells it has; ``--report`` writes results/classifier_table.md.

    python -m studies.classifier_table.table --datasets subj --layers 200 --models default,network,nbsvm-bigram --seeds 0 --folds 0-9
"""
import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from cpgbn.files import write_file_atomically

from studies.common.paths import RESULTS
from studies.common.reports import command_line
from studies.table4.settings import CLASSIFIER_CELLS, PAPER_FORM
from studies.text_baselines.text_baselines import splits

CELLS = CLASSIFIER_CELLS
TABLE = RESULTS / "classifier_table.md"
MODELS = {
    "default": {},
    "paper": PAPER_FORM,
    "network": dict(generative=False),
}
#: The paper's Table 4 (sCPGBN, 1 / 2 / 3 layers) where it has the dataset
PAPER = {"subj": {1: 93.4, 2: 93.7, 3: 93.8}, "imdb": {1: 91.8, 2: 92.4, 3: 92.6}}


def run_cell(dataset, layers, model, seed, split, train, test, threads) -> dict:
    from cpgbn.evaluate.provenance import provenance
    if model == "nbsvm-bigram":
        from cpgbn.evaluate.text_baselines import make_baseline
        estimator = make_baseline(model, random_state=seed)
    else:
        from cpgbn.classifier import CPGBNClassifier
        estimator = CPGBNClassifier(layers=layers, random_state=seed, n_threads=threads,
                                    **MODELS[model])
    with threadpool_limits(limits=threads):
        start = time.perf_counter()
        estimator.fit(list(train[0]), list(train[1]))
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        accuracy = float(np.mean(estimator.predict(list(test[0])) == np.asarray(test[1])))
        predict_seconds = time.perf_counter() - start
    return dict(dataset=dataset, layers=list(layers), model=model, seed=seed, split=split,
                accuracy=accuracy, fit_seconds=round(fit_seconds, 1),
                predict_seconds=round(predict_seconds, 2), threads=threads,
                best_epoch=getattr(estimator, "best_epoch_", None),
                command=command_line(), **provenance())


def _path(dataset, layers, model, seed, split):
    width = "-".join(map(str, layers)) if model != "nbsvm-bigram" else "none"
    return CELLS / f"{dataset}_{width}_{model}_seed{seed}_{split}.json"


#: The paper's form as studies/table4 ran it on the same splits and seeds (the same training
#: as ``paper`` but xi, 10 or 100 per unit, chosen on a validation split per dataset and
#: depth): its cells fill this table's paper-form rows where ``paper`` has none
TABLE4 = RESULTS / "table4" / "table4.json"
TABLE4_MODEL = "paper (table4 study, xi tuned)"


def _table4_cells() -> list:
    if not TABLE4.exists():
        return []
    cells = json.loads(TABLE4.read_text())["cells"].values()
    return [dict(c, model=TABLE4_MODEL) for c in cells if c.get("kind") != "tune"]


def report() -> str:
    cells = [json.loads(p.read_text()) for p in sorted(CELLS.glob("*.json"))]
    cells += _table4_cells()
    groups: dict = {}
    for c in cells:
        key = (c["dataset"], "-".join(map(str, c["layers"])) if c["model"] != "nbsvm-bigram"
               else "-", c["model"])
        groups.setdefault(key, []).append(c)
    lines = ["# The classifier against its network, the paper's form and NBSVM-bigram",
             "", "Made by `python -m studies.classifier_table.table --report` from "
             "results/classifier_table/cells/ (protocol: the script's docstring).  Accuracy % "
             "on the test documents: mean +- std over every split and seed run (ddof 1), the "
             "number of cells, median fit seconds; the paper's Table 4 where it has the row.",
             "", "| dataset | layers | model | accuracy % | cells | seeds | fit s (median) | "
             "paper |", "|---|---|---|---|---|---|---|---|"]
    for (dataset, width, model), group in sorted(groups.items()):
        acc = 100 * np.array([c["accuracy"] for c in group])
        spread = f" +- {acc.std(ddof=1):.1f}" if len(acc) > 1 else ""
        seeds = ",".join(str(s) for s in sorted({c["seed"] for c in group}))
        n_layers = width.count("-") + 1 if width != "-" else None
        paper = (PAPER.get(dataset, {}).get(n_layers, "-")
                 if model in ("default", "paper", TABLE4_MODEL) else "-")
        lines.append(f"| {dataset} | {width} | {model} | {acc.mean():.1f}{spread} | "
                     f"{len(group)} | {seeds} | "
                     f"{np.median([c['fit_seconds'] for c in group]):.0f} | {paper} |")
    lines += ["", f"Rows \"{TABLE4_MODEL}\": the cells of {TABLE4.relative_to(RESULTS.parent)} "
              "(studies/table4), the paper's form on the same splits with xi chosen on a "
              "validation split.", "",
              "Commits: " + ", ".join(sorted({c["commit"] for c in cells}))]
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def _folds(text):
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="subj")
    p.add_argument("--layers", default="200,200-100-50")
    p.add_argument("--models", default="default,network,paper,nbsvm-bigram")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--folds", default="0-9", help="CV folds to run (MR, SUBJ)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    from cpgbn.evaluate.provenance import source_commit
    source_commit()   # the commit of the code this process loaded
    if not args.report:
        CELLS.mkdir(parents=True, exist_ok=True)
        folds = _folds(args.folds)
        for dataset in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                for split, train, test in splits(dataset, args.data_dir, 0):
                    if split.startswith("fold") and int(split[4:]) not in folds:
                        continue
                    for model in args.models.split(","):
                        layer_sets = ([(200,)] if model == "nbsvm-bigram" else
                                      [tuple(int(k) for k in s.split("-"))
                                       for s in args.layers.split(",")])
                        for layers in layer_sets:
                            path = _path(dataset, layers, model, seed, split)
                            if path.exists():
                                continue
                            cell = run_cell(dataset, layers, model, seed, split, train, test,
                                            args.threads)
                            write_file_atomically(
                                path, lambda fh: fh.write(json.dumps(cell, indent=1) + "\n"))
                            print(path.name, f"{100 * cell['accuracy']:.1f}",
                                  f"{cell['fit_seconds']} s", flush=True)
    print(report())


if __name__ == "__main__":
    main()
