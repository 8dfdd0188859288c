"""Training features from the training chain, or inferred again with the learned globals fixed?

Under the authors' protocol the classifier is trained on the averages of theta^(1) collected
while D and Phi were still moving (the training chain) and tested on features inferred with the
posterior-mean globals fixed (notes section 4).  ``evaluate(features="inferred")`` instead infers
the training documents again exactly as the test documents are.  This script measures the two on
the *same* fit, so each seed gives a paired difference: one fit per (configuration, seed), then
the authors' classifier (RBF ``SVC()`` on theta^(1)/L) trained once on each kind of training
features and scored on the same test features.

Every (dataset, layers, V, sweeps, seed) is one resumable cell of results/feature_source/feature_source.json;
results/feature_source/feature_source.md gives the means, the paired difference and its spread over seeds.

    python -m studies.feature_source.feature_source                     # the default grid
    python -m studies.feature_source.feature_source --only "mr|200-100-50|3000|700" --seeds 0,1,2
"""
import argparse
import sys
import time
import warnings

import numpy as np

from cpgbn.evaluate.protocols import PROTOCOLS, make_classifier
from cpgbn.evaluate.provenance import provenance
from cpgbn.model import CPGBN, DEFAULT_TOKEN_COUNT
from cpgbn.datasets import load_dataset

from studies.common.paths import ROOT
from studies.common.reports import command_line, load_cells, mean_std, save_record
from studies.common.vocab_fix import MARK, add_note, stale_record

OUT = ROOT / "results" / "feature_source" / "feature_source.json"
PAPER = {"mr": 63.6, "trec": 74.4, "subj": 81.5}  # Table 2, CPGBN 200-100-50
# (dataset, layers, V (words, without the out-of-vocabulary row), training sweeps)
GRID = [("trec", "200-100-50", 8000, 200), ("mr", "200-100-50", 20000, 200),
        ("mr", "200-100-50", 3000, 200), ("subj", "200-100-50", 8000, 200)]
DEFAULT_SEEDS = {"mr": "0,1,2,3,4", "trec": "0,1,2", "subj": "0,1,2"}


def key_of(dataset, layers, vocab, sweeps, seed):
    return f"{dataset}|{layers}|{vocab}|{sweeps}|seed={seed}"


def run_cell(dataset, layers, vocab, sweeps, seed, data_dir):
    """One fit; the authors' classifier on chain and on inferred training features."""
    origin = provenance()
    proto = PROTOCOLS["authors"]
    (x_train, y_train), (x_test, y_test) = (load_dataset(dataset, split, data_dir=data_dir)
                                            for split in ("train", "test"))
    burn_in = sweeps - (proto.n_iter - proto.burn_in)  # always 50 collected sweeps
    model = CPGBN(layers=tuple(int(k) for k in layers.split("-")), vocab_size=vocab + 1,
                  token_count=DEFAULT_TOKEN_COUNT, n_iter=sweeps, burn_in=burn_in,
                  transform_iter=proto.n_iter, transform_burn_in=proto.burn_in, random_state=seed)
    start = time.perf_counter()
    with warnings.catch_warnings():  # the few documents shorter than F are padded (warned)
        warnings.simplefilter("ignore", UserWarning)
        chain = model.fit_transform(x_train)
        fit_seconds = time.perf_counter() - start
        inferred = model.transform(x_train)
        test = model.transform(x_test)
    accuracy = {name: float(make_classifier(proto.classifier, seed).fit(features, y_train)
                            .score(test, np.asarray(y_test)))
                for name, features in (("chain", chain), ("inferred", inferred))}
    return dict(dataset=dataset, layers=layers, vocab_words=vocab, n_iter=sweeps, burn_in=burn_in,
                transform_iter=proto.n_iter, transform_burn_in=proto.burn_in,
                token_count=DEFAULT_TOKEN_COUNT, seed=seed, protocol="authors",
                classifier=proto.classifier, accuracy=accuracy, fit_seconds=round(fit_seconds, 1),
                wall_seconds=round(time.perf_counter() - start, 1), **origin)


def report_text(record) -> str:
    groups = {}
    for cell in record["cells"].values():
        config = (cell["dataset"], cell["layers"], cell["vocab_words"], cell["n_iter"])
        groups.setdefault(config, []).append(cell)
    lines = ["# Training features: the training chain's averages or inferred with the globals fixed",
             "", "Made by `studies/feature_source/feature_source.py`; records (command, commit, seconds) in "
             "`feature_source.json`. Authors' protocol (fixed split, RBF `SVC()` on theta^(1)/L, "
             "50 collected sweeps; test documents inferred with the posterior-mean globals fixed, "
             "150 + 50 sweeps), token_count = 200. Both columns come from the same fit per seed: "
             "*chain* trains the classifier on the training chain's averages (the authors' code, "
             "`evaluate(features=\"inductive\")`), *inferred* on the training documents inferred "
             "again like the test documents (`evaluate(features=\"inferred\")`). Difference: "
             "inferred - chain, mean +- std over seeds.", "",
             "| dataset | layers | V | sweeps | seeds | chain % | inferred % | difference | paper % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for config in sorted(groups):
        dataset, layers, vocab, sweeps = config
        cells = sorted(groups[config], key=lambda c: c["seed"])
        chain = np.array([100 * c["accuracy"]["chain"] for c in cells])
        inferred = np.array([100 * c["accuracy"]["inferred"] for c in cells])
        mark = MARK if any(stale_record(c) for c in cells) else ""
        lines.append(f"| {dataset.upper()} | {layers} | {vocab} | {sweeps} | "
                     f"{','.join(str(c['seed']) for c in cells)}{mark} | {mean_std(chain)} | {mean_std(inferred)} | "
                     f"{mean_std(inferred - chain)} | {PAPER.get(dataset, '') if layers == '200-100-50' else ''} |")
    add_note(lines)
    return "\n".join(lines) + "\n"


def report(record):
    """Write :func:`report_text` beside the record file."""
    OUT.with_suffix(".md").write_text(report_text(record))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="one configuration 'dataset|layers|V|sweeps'")
    ap.add_argument("--seeds", default=None, help="default: five seeds on MR, three elsewhere")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--report", action="store_true", help="only rewrite feature_source.md")
    args = ap.parse_args()
    if args.only:
        parts = args.only.split("|")
        if len(parts) != 4:
            sys.exit(f"--only needs 'dataset|layers|V|sweeps', got {args.only!r}")
        configs = [(parts[0], parts[1], int(parts[2]), int(parts[3]))]
    else:
        configs = GRID
    for dataset, layers, vocab, sweeps in configs if not args.report else []:
        for seed in (int(s) for s in (args.seeds or DEFAULT_SEEDS[dataset]).split(",")):
            key = key_of(dataset, layers, vocab, sweeps, seed)
            done = load_cells(OUT)["cells"].get(key)
            if done and not stale_record(done):
                continue  # (a result of the old vocabulary rule is run again)
            cell = run_cell(dataset, layers, vocab, sweeps, seed, args.data_dir)
            cell["command"] = command_line()
            record = load_cells(OUT)  # other processes may have added cells meanwhile
            record["cells"][key] = cell
            save_record(OUT, record)
            print(f"{key}: chain {100 * cell['accuracy']['chain']:.1f}%, inferred "
                  f"{100 * cell['accuracy']['inferred']:.1f}% ({cell['wall_seconds']}s)", flush=True)
    report(load_cells(OUT))


if __name__ == "__main__":
    main()
