"""Do the kernels read as phrases?  Issue 48's acceptance, measured on models at the defaults.

For each corpus, ``CPGBN(layers=(200,), random_state=SEED)`` with every other setting at the
library's default is fitted to the training documents (TREC's training questions, the
``make demo`` model's data; all of MR's and SUBJ's sentences, which have no official split),
and the twelve kernels that ``cpgbn topics MODEL --kernels 12`` shows (most used first) are
read by their names: the windows of the training documents each kernel explains most, recorded
by the fit (:mod:`cpgbn.explain.kernel_windows`).  A cell records, per shown kernel, its name
and how often the name occurs in all the training documents as contiguous words (``_`` any
word: counted here from the documents, not taken from the record), and over all kernels how
many fix two or more words (phrase kernels) and how many are folded (usage < 0.1%).  The
acceptance: at least 10 of the 12 shown names occur 3 times or more.

    python -m studies.phrase_topics.measure --datasets trec,mr,subj
    python -m studies.phrase_topics.measure --report     # results/phrase_topics.md
"""
import argparse
import time

import numpy as np

from cpgbn import CPGBN
from cpgbn.datasets import load_dataset
from cpgbn.evaluate.provenance import provenance
from cpgbn.explain import HIDDEN, kernel_table, sort_kernels
from cpgbn.files import write_file_atomically
from cpgbn.text import Corpus

from studies.common.paths import RESULTS
from studies.common.reports import add_cell, command_line, load_cells

RECORD = RESULTS / "phrase_topics" / "measure.json"
TABLE = RESULTS / "phrase_topics.md"
SHOWN = 12
SPLITS = {"trec": "train", "mr": "all", "subj": "all", "imdb": "train"}


def occurrences(model, texts, words) -> int:
    """How often ``words`` (``_`` any word) occur as contiguous tokens of ``texts`` encoded by
    the model's vocabulary."""
    corpus = Corpus.from_texts(texts, vocabulary=model.vocabulary_)
    tokens, offsets = corpus.tokens, corpus.offsets
    F = len(words)
    ids = [None if w == HIDDEN else int(model.vocabulary_.encode([w])[0]) for w in words]
    starts = np.arange(len(tokens) - F + 1)
    ends = np.repeat(offsets[1:], np.diff(offsets))[:len(starts)]   # a window within one doc
    match = starts + F <= ends
    for f, v in enumerate(ids):
        if v is not None:
            match &= tokens[starts + f] == v
    return int(match.sum())


def run_cell(dataset, seed, data_dir, threads) -> dict:
    texts, _ = load_dataset(dataset, SPLITS[dataset], data_dir=data_dir)
    model = CPGBN(layers=(200,), random_state=seed, n_threads=threads)
    start = time.perf_counter()
    model.fit(texts)
    seconds = time.perf_counter() - start
    rows = sort_kernels(kernel_table(model))
    named = [r for r in rows if r.corpus_phrases]
    shown = [r for r in rows if r.usage >= 0.001][:SHOWN]
    kernels = [dict(kernel=r.kernel, usage=r.usage, name=r.name,
                    windows=[(p.text, p.count) for p in r.corpus_phrases],
                    occurs=occurrences(model, texts, r.name.split()) if r.corpus_phrases else 0)
               for r in shown]
    return dict(dataset=dataset, seed=seed, n_docs=len(texts), fit_seconds=round(seconds, 1),
                shown=kernels, names_occurring_3=sum(k["occurs"] >= 3 for k in kernels),
                n_kernels=len(rows), n_named=len(named),
                n_phrase_kernels=sum(r.n_named_columns >= 2 for r in named),
                n_folded=sum(r.usage < 0.001 for r in rows),
                command=command_line(), **provenance())


def report() -> str:
    cells = load_cells(RECORD)["cells"]
    lines = ["# Do the kernels read as phrases? (issue 48)", "",
             "Made by `python -m studies.phrase_topics.measure --report` from "
             f"{RECORD.relative_to(RESULTS.parent)} (protocol: the script's docstring).", "",
             "| corpus | seed | documents | fit s | shown names occurring >= 3 times | kernels "
             "that fix >= 2 words | folded (< 0.1%) |", "|---|---|---|---|---|---|---|"]
    for key in sorted(cells):
        c = cells[key]
        lines.append(f"| {c['dataset']} | {c['seed']} | {c['n_docs']} | {c['fit_seconds']:.0f} | "
                     f"{c['names_occurring_3']} of {len(c['shown'])} | {c['n_phrase_kernels']} of "
                     f"{c['n_kernels']} | {c['n_folded']} |")
    for key in sorted(cells):
        c = cells[key]
        lines += ["", f"## {c['dataset']}, seed {c['seed']}: the {len(c['shown'])} kernels "
                  "`cpgbn topics --kernels 12` shows", "",
                  "| kernel | usage % | name (occurrences) | further windows (count) |",
                  "|---|---|---|---|"]
        for k in c["shown"]:
            further = " \\| ".join(f"{t} ({n})" for t, n in k["windows"][1:])
            lines.append(f"| {k['kernel']} | {100 * k['usage']:.2f} | {k['name']} "
                         f"({k['occurs']}) | {further} |")
    lines += ["", "Commits: " + ", ".join(sorted({c["commit"] for c in cells.values()}))]
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="trec,mr,subj")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    if not args.report:
        record = load_cells(RECORD)
        for dataset in args.datasets.split(","):
            key = f"{dataset}_seed{args.seed}"
            if key in record["cells"]:
                continue
            cell = run_cell(dataset, args.seed, args.data_dir, args.threads)
            add_cell(RECORD, record, key, cell)
            print(key, f"{cell['names_occurring_3']} of {len(cell['shown'])}",
                  f"phrase kernels {cell['n_phrase_kernels']}", f"{cell['fit_seconds']} s",
                  flush=True)
    print(report())


if __name__ == "__main__":
    main()
