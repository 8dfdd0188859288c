"""The classifier side of Table 2: feature normalisation, layers used and SVM, on fixed features.

Table 2 fixes the classifier (authors' protocol: RBF ``SVC()`` on theta^(1)/L_j).  This script
fits one model per (dataset, layers, seed) on the authors' split, keeps the training chain's
and the test inference's averaged theta of every layer, and scores a grid of classifiers on the
same features, so that the share of the gap to the paper that is due to the classifier can be
read off.  Records (with command, commit and seconds) go to results/classifier_study/classifier_study.json,
a table to results/classifier_study/classifier_study.md.

    python -m studies.classifier_study.classifier_study --dataset mr --layers 200-100-50 --seeds 0,1 [--token-count 200]

A cell is run again when the grid has gained a classifier or normalisation since it was made.
"""
import argparse
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC

from cpgbn import CPGBN
from cpgbn.model import DEFAULT_TOKEN_COUNT
from cpgbn.evaluate.provenance import provenance
from cpgbn.datasets import dataset_info, load_dataset

from studies.common.paths import ROOT
from studies.common.reports import command_line, load_cells, save_record

OUT = ROOT / "results" / "classifier_study" / "classifier_study.json"

# SVC()'s default gamma was 1 / n_features ("auto") until scikit-learn 0.22 and is
# 1 / (n_features * X.var()) ("scale") since; the authors' Python 2 code ran on <= 0.20.
CLASSIFIERS = {
    "rbf-svc C=1 (authors)": lambda seed: SVC(),
    "rbf-svc gamma=auto (SVC() before sklearn 0.22)": lambda seed: SVC(gamma="auto"),
    "rbf-svc C=10": lambda seed: SVC(C=10.0),
    "scaled rbf-svc C=1": lambda seed: make_pipeline(StandardScaler(), SVC()),
    "scaled linear-svm (paper)": lambda seed: make_pipeline(
        StandardScaler(), LinearSVC(C=1.0, max_iter=20000, random_state=seed)),
    "scaled logistic C=0.1": lambda seed: make_pipeline(
        StandardScaler(), LogisticRegression(C=0.1, max_iter=5000)),
}


def normalise(thetas, lengths, how):
    feats = np.hstack(thetas)
    if how == "theta/L (authors)":
        return feats / np.maximum(lengths, 1)[:, None]
    if how == "proportions per layer":
        return np.hstack([t / np.maximum(t.sum(axis=1, keepdims=True), 1e-300) for t in thetas])
    if how == "log(1 + theta)":
        return np.log1p(feats)
    raise ValueError(how)


NORMALISATIONS = ("theta/L (authors)", "proportions per layer", "log(1 + theta)")


def run(dataset, layers, seed, token_count):
    origin = provenance()
    x_train, y_train = load_dataset(dataset, "train")
    x_test, y_test = load_dataset(dataset, "test")
    start = time.perf_counter()
    model = CPGBN(layers=layers, vocab_size=dataset_info(dataset)["vocab_size"] + 1,
                  n_iter=200, burn_in=150, random_state=seed, token_count=token_count)
    model.fit(x_train)
    train_thetas = model.train_theta_
    test_features = model.transform(x_test, all_layers=True)
    train_lengths, test_lengths = _lengths(model, x_train), _lengths(model, x_test)
    split = np.cumsum(layers)[:-1]
    test_thetas = np.split(test_features * test_lengths[:, None], split, axis=1)
    fit_seconds = time.perf_counter() - start
    scores = {}
    for which, n_layers in (("layer 1", 1), ("all layers", len(layers))):
        for how in NORMALISATIONS:
            f_train = normalise(train_thetas[:n_layers], train_lengths, how)
            f_test = normalise(test_thetas[:n_layers], test_lengths, how)
            for name, make in CLASSIFIERS.items():
                clf = make(seed).fit(f_train, y_train)
                scores[f"{which} | {how} | {name}"] = float(clf.score(f_test, np.asarray(y_test)))
    return dict(dataset=dataset, layers=list(layers), seed=seed, scores=scores,
                fit_seconds=round(fit_seconds, 1), token_count=model.token_count,
                vocab_size=model.vocab_size, command=command_line(), **origin)


def _lengths(model, texts):
    """L_j as the features use it (tokens of the document after encoding, at least 1)."""
    from cpgbn.text import Corpus
    corpus = Corpus.from_texts(texts, vocabulary=model.vocabulary_)
    return np.maximum(corpus.lengths, 1).astype(float)


def _score_keys():
    return {f"{which} | {how} | {name}" for which in ("layer 1", "all layers")
            for how in NORMALISATIONS for name in CLASSIFIERS}


def report_text(record) -> str:
    lines = ["# Classifier study: the same features, different classifiers", "",
             "Made by `studies/classifier_study/classifier_study.py` (records in `classifier_study.json`). "
             "Authors' split; features averaged over the collected sweeps of the training chain "
             "(train) and of inference with the globals fixed (test). Accuracy %, mean over seeds "
             "(n in the header).", ""]
    groups = {}
    for cell in record["cells"].values():
        groups.setdefault((cell["dataset"], "-".join(map(str, cell["layers"])),
                           cell["token_count"]), []).append(cell)
    for (dataset, layers, token_count), cells in sorted(groups.items()):
        lines += [f"## {dataset.upper()} {layers}, token_count {token_count} (n = {len(cells)}: seeds "
                  f"{', '.join(str(c['seed']) for c in cells)}; commits "
                  f"{', '.join(sorted({c['commit'] for c in cells}))})", "",
                  "| features | normalisation | " + " | ".join(CLASSIFIERS) + " |",
                  "|---|---|" + "---|" * len(CLASSIFIERS)]
        for which in ("layer 1", "all layers"):
            for how in NORMALISATIONS:
                row = []
                for name in CLASSIFIERS:
                    key = f"{which} | {how} | {name}"
                    have = [c["scores"][key] for c in cells if key in c["scores"]]
                    row.append(f"{100 * np.mean(have):.1f}" if len(have) == len(cells) else "-")
                lines.append(f"| {which} | {how} | " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def report(record):
    """Write :func:`report_text` beside the record file."""
    OUT.with_suffix(".md").write_text(report_text(record))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="mr")
    ap.add_argument("--layers", default="200-100-50")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--token-count", type=int, default=DEFAULT_TOKEN_COUNT)
    args = ap.parse_args()
    record = load_cells(OUT)
    layers = tuple(int(k) for k in args.layers.split("-"))
    for seed in (int(s) for s in args.seeds.split(",")):
        key = f"{args.dataset}|{args.layers}|seed={seed}"
        if args.token_count != 200:  # (the keys of the first runs, all at 200, have no count)
            key += f"|token_count={args.token_count}"
        done = record["cells"].get(key)
        if done is None or set(done["scores"]) != _score_keys():  # new cell, or new columns
            record["cells"][key] = run(args.dataset, layers, seed, args.token_count)
            save_record(OUT, record)
            best = max(record["cells"][key]["scores"].items(), key=lambda kv: kv[1])
            print(f"{key}: authors' classifier "
                  f"{100 * record['cells'][key]['scores']['layer 1 | theta/L (authors) | rbf-svc C=1 (authors)']:.1f}%, "
                  f"best {100 * best[1]:.1f}% ({best[0]})", flush=True)
    report(record)


if __name__ == "__main__":
    main()
