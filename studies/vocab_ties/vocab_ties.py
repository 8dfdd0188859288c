"""Where the vocabulary is cut among equally frequent words, does "<unk>" follow the class?

The vocabulary keeps the V most frequent training words; the rest share the "<unk>" row.
At the cut many words have the same count (at large V, the words seen once), and the rule
that breaks those ties picks which of them are kept.  Until commit 9b51456 ties went to the
word seen first.  The MR and SUBJ files list one class after the other, so that rule keeps the
rare words of the first class and drops those of the last: "<unk>" then occurs only in the
last class's training documents, which the classifier learns, and in both classes' test
documents, where the lesson is wrong.  Ties now go by string order, which does not depend on
the order of the documents.

For each dataset, split and V this script gives the share of "<unk>" tokens per class in the
training and test documents under both rules, and how many kept words differ.  No model is
fitted; it takes seconds.

    python -m studies.vocab_ties.vocab_ties
"""
import argparse
import json
from collections import Counter

import numpy as np

from cpgbn.datasets import dataset_info, load_dataset
from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically
from cpgbn.text import Vocabulary, tokenize

from studies.common.paths import ROOT
from studies.common.reports import command_line

OUT = ROOT / "results" / "vocab_ties" / "vocab_ties.json"
GRID = [("mr", (3000, 8000, 20000)), ("subj", (3000, 8000, 20000)), ("trec", (3000, 8000))]


def first_occurrence_words(token_lists, words):
    """The rule before the fix: by frequency, ties to the word seen first."""
    frequency = Counter()
    for tokens in token_lists:
        frequency.update(tokens)  # Counter keeps first-occurrence order; sorted() is stable
    return {w for w, _ in sorted(frequency.items(), key=lambda item: -item[1])[:words]}


def oov_share(token_lists, labels, kept):
    """Mean over each class's documents of the share of tokens outside ``kept``."""
    shares = {}
    for label in sorted(set(labels)):
        rates = [np.mean([t not in kept for t in tokens]) for tokens, y in zip(token_lists, labels)
                 if y == label and tokens]
        shares[label] = round(100 * float(np.mean(rates)), 2)
    return shares


def run(data_dir):
    rows = []
    for dataset, sizes in GRID:
        train, y_train = load_dataset(dataset, "train", data_dir=data_dir)
        test, y_test = load_dataset(dataset, "test", data_dir=data_dir)
        train_tokens = [tokenize(t) for t in train]
        test_tokens = [tokenize(t) for t in test]
        distinct = len({t for tokens in train_tokens for t in tokens})
        for words in sizes:
            old = first_occurrence_words(train_tokens, words)
            new = set(Vocabulary.build(train_tokens, words + 1).tokens[1:])
            for rule, kept in (("first occurrence (before)", old), ("string order (now)", new)):
                rows.append({
                    "dataset": dataset, "V": words, "paper_V": words == dataset_info(dataset)["vocab_size"],
                    "distinct_training_words": distinct, "rule": rule,
                    "kept_words_changed": len(old - new),
                    "oov_train": oov_share(train_tokens, y_train, kept),
                    "oov_test": oov_share(test_tokens, y_test, kept)})
    return rows


def report(record):
    lines = ["# Vocabulary ties and the out-of-vocabulary row", "",
             "Made by `studies/vocab_ties/vocab_ties.py` (record with command and commit in "
             "`vocab_ties.json`). Authors' splits. % of tokens that map to `<unk>`, averaged over "
             "each class's documents, in the training and the test documents. *changed*: kept "
             "words that differ between the two rules. A training share that differs between "
             "classes while the test shares do not is a label leak: the classifier learns it from "
             "the training features and it fails on the test features.", "",
             "| dataset | V | distinct training words | rule | changed | <unk> % train, per class "
             "| <unk> % test, per class |", "|---|---|---|---|---|---|---|"]
    for row in record["rows"]:
        fmt = lambda shares: ", ".join(f"{k} {v:.2f}" for k, v in shares.items())  # noqa: E731
        v = f"{row['V']} (paper)" if row["paper_V"] else str(row["V"])
        lines.append(f"| {row['dataset']} | {v} | {row['distinct_training_words']} | {row['rule']} "
                     f"| {row['kept_words_changed']} | {fmt(row['oov_train'])} | {fmt(row['oov_test'])} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=None, help="datasets folder (default: $CPGBN_DATA)")
    args = ap.parse_args()
    record = {"command": command_line(), **provenance(), "rows": run(args.data_dir)}
    write_file_atomically(OUT, lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))
    md = report(record)
    write_file_atomically(OUT.with_suffix(".md"), lambda fh: fh.write(md))
    print(md)


if __name__ == "__main__":
    main()
