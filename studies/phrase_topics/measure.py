"""Do the kernels read as phrases, beside what a user would run instead?  Issue 48, measured.

A cell is one corpus, one seed and one set of CPGBN settings:

* CPGBN: ``CPGBN(layers=(200,), random_state=SEED)``, every other setting at the library's
  default unless ``--set`` changes it, fitted to the training documents (TREC's training
  questions, the ``make demo`` model's data; all of MR's and SUBJ's sentences, which have no
  official split; a seeded sample of ``IMDB_DOCS`` IMDB training reviews, which fit in a few
  minutes).  Its phrases are the names of the twelve kernels ``cpgbn topics MODEL --kernels 12``
  shows (most used first, usage >= 0.1%): the window of the training documents each kernel
  explains most (:mod:`cpgbn.explain.kernel_windows`).  Over all kernels: how many fix two
  words or more (phrase kernels), and their share of the usage.
* Default settings only, the two phrase lists a user would get otherwise, on the same tokens:
  tomotopy's LDA (``LDA_TOPICS`` topics, the seed, ``LDA_ITER`` iterations, one worker) with
  its labeller (``PMIExtractor`` candidates, ``FoRelevance`` labels, tomotopy's documented
  example settings), the first label of each of its twelve largest topics; and the collocation
  baseline :func:`cpgbn.explain.phrase_quality.collocations` (the twelve bigrams of highest
  NPMI among those occurring 5 times or more).
* Every list is scored on the training documents under the model's vocabulary by
  :func:`cpgbn.explain.phrase_quality.phrase_quality`: support (occurs 3 times or more as
  contiguous words, ``_`` any word), phrases fixing two words or more, their n-gram NPMI.  And
  word coherence (NPMI of the top 10 words over 10-token windows): the words each CPGBN kernel
  explains in the corpus (10 sweeps with the globals fixed) against LDA's top words.

The acceptance: at least 10 of the 12 shown names occur 3 times or more.

    python -m studies.phrase_topics.measure --datasets trec,mr,subj,imdb
    python -m studies.phrase_topics.measure --datasets trec --layers 400 --set eta=0.01
    python -m studies.phrase_topics.measure --report     # results/phrase_topics/measure.md
"""
import argparse
import time

import numpy as np

from cpgbn import CPGBN
from cpgbn.datasets import load_dataset
from cpgbn.evaluate.provenance import provenance
from cpgbn.explain import assign_kernels, kernel_table, sort_kernels
from cpgbn.explain.coherence import assigned_topic_words, npmi
from cpgbn.explain.kernel_table import FOLD_BELOW, shown_kernels
from cpgbn.explain.phrase_quality import collocations, phrase_quality
from cpgbn.files import write_file_atomically

from studies.common.paths import RESULTS
from studies.common.reports import add_cell, command_line, load_cells

RECORD = RESULTS / "phrase_topics" / "measure.json"
TABLE = RECORD.with_suffix(".md")
SHOWN = 12
SPLITS = {"trec": "train", "mr": "all", "subj": "all", "imdb": "train"}
IMDB_DOCS = 2000
LDA_TOPICS, LDA_ITER = 50, 1000
#: Settings a cell may change (``--set name=value``), with their types
SETTINGS = {"token_count": int, "eta": float, "n_iter": int, "burn_in": int,
            "filter_width": int}


def training_texts(dataset, data_dir, seed) -> list[str]:
    texts, _ = load_dataset(dataset, SPLITS[dataset], data_dir=data_dir)
    if dataset == "imdb":
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), IMDB_DOCS, replace=False))
        texts = [texts[i] for i in keep]
    return texts


def cpgbn_phrases(model, corpus) -> dict:
    """The shown kernels' names and the phrase kernels of a fitted model."""
    rows = sort_kernels(kernel_table(model))
    named = [r for r in rows if r.corpus_phrases]
    shown = shown_kernels(rows, SHOWN)
    phrase_rows = [r for r in named if r.n_named_columns >= 2]
    quality = phrase_quality(corpus, [r.name for r in shown])
    return dict(
        shown=[dict(kernel=r.kernel, usage=r.usage, name=r.name,
                    windows=[(p.text, p.count) for p in r.corpus_phrases])
               for r in shown],
        quality=quality.to_dict(),
        names_occurring_3=quality.n_supported,
        n_kernels=len(rows), n_named=len(named), n_phrase_kernels=len(phrase_rows),
        phrase_kernel_usage=float(sum(r.usage for r in phrase_rows)),
        phrase_kernels=[dict(kernel=r.kernel, usage=r.usage, name=r.name)
                        for r in phrase_rows[:SHOWN]],
        phrase_kernel_quality=phrase_quality(corpus, [r.name for r in phrase_rows[:SHOWN]]
                                             ).to_dict() if phrase_rows else None,
        n_folded=sum(r.usage < FOLD_BELOW for r in rows))


def labelled_lda(corpus, seed) -> tuple[list[str], list[list[str]], list[float]]:
    """tomotopy's LDA on the corpus's tokens (``<unk>`` kept, so that neighbours stay
    neighbours): the first label and the top 10 words of its ``SHOWN`` largest topics, and
    their shares of the tokens."""
    import tomotopy as tp
    model = tp.LDAModel(k=LDA_TOPICS, seed=seed)
    vocabulary = corpus.vocabulary
    for j in range(len(corpus)):
        tokens = vocabulary.decode(list(corpus.document(j)))
        if tokens:
            model.add_doc(tokens)
    model.train(LDA_ITER, workers=1)
    candidates = tp.label.PMIExtractor(min_cf=10, min_df=5, max_len=5,
                                       max_cand=10000).extract(model)
    labeller = tp.label.FoRelevance(model, candidates, min_df=5, smoothing=1e-2, mu=0.25,
                                    workers=1)
    sizes = np.asarray(model.get_count_by_topics(), dtype=np.float64)
    largest = np.argsort(-sizes, kind="stable")[:SHOWN]
    labels = [labeller.get_topic_labels(int(k), top_n=1)[0][0] for k in largest]
    words = [[w for w, _ in model.get_topic_words(int(k), top_n=11) if w != "<unk>"][:10]
             for k in largest]
    return labels, words, [float(x) for x in sizes[largest] / sizes.sum()]


def word_coherence(corpus, topics) -> float:
    """Mean NPMI of word lists (strings; words outside the vocabulary dropped)."""
    vocabulary = corpus.vocabulary
    ids = [np.array([i for i in vocabulary.encode(t) if i != 0], dtype=np.int64) for t in topics]
    return float(np.nanmean(npmi(ids, corpus)))


def run_cell(dataset, seed, settings, layers, data_dir, threads) -> dict:
    texts = training_texts(dataset, data_dir, seed)
    model = CPGBN(layers=layers, random_state=seed, n_threads=threads, **settings)
    start = time.perf_counter()
    model.fit(texts)
    seconds = time.perf_counter() - start
    corpus = model.encode(texts)
    cell = dict(dataset=dataset, seed=seed, settings=settings, layers=list(layers),
                n_docs=len(texts), fit_seconds=round(seconds, 1), **cpgbn_phrases(model, corpus))
    if not settings and tuple(layers) == (200,):
        assignments = assign_kernels(model, corpus, n_iter=10, burn_in=5)
        usage = np.asarray(model.kernel_usage())
        shown = [k["kernel"] for k in cell["shown"]]
        explained = assigned_topic_words(assignments)
        cell["cpgbn_word_npmi"] = float(np.nanmean(npmi([explained[k] for k in shown], corpus)))
        cell["cpgbn_word_npmi_all"] = float(np.average(
            np.nan_to_num(npmi(explained, corpus), nan=-1.0), weights=usage))
        labels, words, sizes = labelled_lda(corpus, seed)
        cell["lda"] = dict(labels=labels, words=words, sizes=sizes,
                           quality=phrase_quality(corpus, labels).to_dict(),
                           word_npmi=word_coherence(corpus, words))
        cell["collocations"] = collocations(corpus, SHOWN).to_dict()
    return dict(cell, command=command_line(), **provenance())


def _key(dataset, seed, settings, layers) -> str:
    extra = "".join(f"_{k}{v:g}" for k, v in sorted(settings.items()))
    depth = "" if tuple(layers) == (200,) else "_K" + "-".join(map(str, layers))
    return f"{dataset}_seed{seed}{depth}{extra}"


def _listed(quality: dict, i: int) -> str:
    if i >= len(quality["phrases"]):
        return ""
    return f"{' '.join(quality['phrases'][i])} ({quality['counts'][i]})"


def _scores(quality: dict) -> str:
    n = len(quality["phrases"])
    mean = quality["mean_npmi"]
    return (f"{quality['n_supported']} of {n} | {quality['n_multiword']} of {n} | "
            + (f"{mean:+.2f}" if mean is not None else "-"))


def report_text(record: dict) -> str:
    """The markdown report of a record (``{"cells": ...}``)."""
    cells = record["cells"]
    defaults = {k: c for k, c in cells.items() if not c.get("settings") and "lda" in c}
    lines = ["# Do the kernels read as phrases? (issue 48)", "",
             "Made by `python -m studies.phrase_topics.measure --report` from "
             f"{RECORD.relative_to(RESULTS.parent)} (protocol: the script's docstring). "
             "Support: phrases occurring 3 times or more as contiguous words (`_` any word); "
             "multi-word: phrases fixing two words or more; NPMI: their n-gram NPMI "
             "(cpgbn.explain.phrase_quality). Word NPMI: top 10 words over 10-token windows.", "",
             "## Twelve phrases each: CPGBN's kernel names, labelled LDA, collocations", "",
             "| corpus | phrases | support | multi-word | NPMI | word NPMI |",
             "|---|---|---|---|---|---|"]
    for key in sorted(defaults):
        c = defaults[key]
        name = f"{c['dataset']} ({c['n_docs']} docs)"
        lines.append(f"| {name} | CPGBN-200 kernel names | {_scores(c['quality'])} | "
                     f"{c['cpgbn_word_npmi']:+.3f} |")
        if c.get("phrase_kernel_quality"):
            lines.append(f"| {name} | CPGBN-200 phrase kernels' names (the {len(c['phrase_kernels'])} "
                         f"most used of {c['n_phrase_kernels']}) | "
                         f"{_scores(c['phrase_kernel_quality'])} | |")
        lines.append(f"| {name} | tomotopy LDA-{LDA_TOPICS} labels | "
                     f"{_scores(c['lda']['quality'])} | {c['lda']['word_npmi']:+.3f} |")
        lines.append(f"| {name} | collocations (NPMI, >= 5 times) | "
                     f"{_scores(c['collocations'])} | |")
    lines += ["", "## CPGBN settings: how many kernels read as phrases", "",
              "| corpus | layers | settings | fit s | shown names occurring >= 3 times | shown names "
              "fixing >= 2 words | phrase kernels | their usage % | folded (< 0.1%) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(cells):
        c = cells[key]
        settings = ", ".join(f"{k}={v:g}" for k, v in sorted(c.get("settings", {}).items()))
        lines.append(f"| {c['dataset']} | {'-'.join(map(str, c.get('layers', [200])))} | "
                     f"{settings or 'defaults'} | {c['fit_seconds']:.0f} | "
                     f"{c['names_occurring_3']} of {len(c['shown'])} | "
                     f"{c['quality']['n_multiword']} of {len(c['shown'])} | "
                     f"{c['n_phrase_kernels']} of {c['n_kernels']} | "
                     f"{100 * c['phrase_kernel_usage']:.1f} | {c['n_folded']} |")
    for key in sorted(defaults):
        c = defaults[key]
        lines += ["", f"## {c['dataset']}: the twelve phrases of each, side by side", "",
                  "| rank | CPGBN kernel name (occurrences) | CPGBN phrase kernel | "
                  f"tomotopy LDA-{LDA_TOPICS} label | collocation |", "|---|---|---|---|---|"]
        phrase_list = c.get("phrase_kernel_quality") or {"phrases": []}
        for i in range(SHOWN):
            lines.append(f"| {i + 1} | {_listed(c['quality'], i)} | {_listed(phrase_list, i)} | "
                         f"{_listed(c['lda']['quality'], i)} | {_listed(c['collocations'], i)} |")
    lines += ["", "Commits: " + ", ".join(sorted({c["commit"] for c in cells.values()}))]
    return "\n".join(lines) + "\n"


def report() -> str:
    text = report_text(load_cells(RECORD))
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def _parse_settings(items) -> dict:
    settings = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in SETTINGS or not value:
            raise SystemExit(f"--set takes name=value with name one of {', '.join(SETTINGS)}")
        settings[name] = SETTINGS[name](value)
    return settings


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="trec,mr,subj,imdb")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", default="200", help="kernels per layer, e.g. 400 (default 200)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a CPGBN setting: {', '.join(SETTINGS)}")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    if not args.report:
        settings = _parse_settings(args.set)
        layers = tuple(int(x) for x in args.layers.split("-"))
        record = load_cells(RECORD)
        for dataset in args.datasets.split(","):
            key = _key(dataset, args.seed, settings, layers)
            if key in record["cells"] and "quality" in record["cells"][key]:
                continue
            cell = run_cell(dataset, args.seed, settings, layers, args.data_dir, args.threads)
            add_cell(RECORD, record, key, cell)
            print(key, f"{cell['names_occurring_3']} of {len(cell['shown'])}",
                  f"phrase kernels {cell['n_phrase_kernels']}", f"{cell['fit_seconds']} s",
                  flush=True)
    print(report())


if __name__ == "__main__":
    main()
