"""``cpgbn topics``, ``tree``, ``report`` and ``summary``: look at a saved model.

Errors follow the CLI's convention: a :class:`~cpgbn.errors.CPGBNInputError` becomes one line
and exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sklearn.base import is_classifier

from ..errors import CPGBNInputError
from .common import add_data_args, positive_int, read_documents

__all__ = ["add_column_share_arg", "add_report_parser", "add_summary_parser",
           "add_topics_parser", "add_tree_parser", "cmd_report", "cmd_summary", "cmd_topics",
           "cmd_tree", "column_share"]


def _kernel_ids(text: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"kernel ids must be integers like 83,5,199, got {text!r}")
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"kernel ids must be >= 0, got {text!r}")
    return values


def _window(text: str):
    if text in ("doc", "document", "none"):
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"window must be a positive integer or 'doc', got {text!r}") from None


def column_share(text: str) -> float:
    """argparse type of ``--min-column-share``: a fraction in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}")
    return value


def add_column_share_arg(p) -> None:
    """``--min-column-share`` of the commands that print phrase columns."""
    from ..explain.hierarchy import HIDDEN, MIN_COLUMN_SHARE
    p.add_argument("--min-column-share", type=column_share, default=MIN_COLUMN_SHARE, metavar="S",
                   help="hide a phrase column holding less than this share of its kernel's or "
                        f"topic's mass, printing {HIDDEN} instead (default {MIN_COLUMN_SHARE}; 0 shows all)")


# ---------------------------------------------------------------------- topics and tree
def cmd_topics(args) -> int:
    from ..load import load_estimator
    model = load_estimator(args.model_dir)
    rows = _topic_rows(model, args)
    if args.json:
        import json
        from ..explain import HIDDEN
        V, F, _ = model.globals_.D.shape
        record = {"model": str(args.model_dir), "layers": [int(k) for k in model.layers_],
                  "vocab_size": int(V), "filter_width": int(F), "sort": args.sort,
                  "min_column_share": args.min_column_share, "hidden": HIDDEN,
                  "kernels": [row.to_dict() for row in rows]}
        print(json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        from ..explain.kernel_table import FOLD_BELOW, format_kernel_table
        shown, folded = rows, []
        if args.kernels is None and args.ids is None and not args.all:
            shown = [row for row in rows if row.usage >= FOLD_BELOW]
            folded = [row for row in rows if row.usage < FOLD_BELOW]
        print(format_kernel_table(shown, columns=args.columns or None))
        if folded:
            print(f"({len(folded)} more kernels explain < {100 * FOLD_BELOW:g}% of the corpus "
                  f"each, {100 * sum(r.usage for r in folded):.1f}% together; --all lists them)")
    return 0


def _topic_rows(model, args) -> list:
    """The kernels ``cpgbn topics`` shows, in its order: one selection for the text and the
    JSON view, so that both list the same kernels with the same phrases."""
    from ..explain import kernel_table, sort_kernels
    if args.ids is not None:
        n_kernels = model.layers_[0]
        bad = [k for k in args.ids if k >= n_kernels]
        if bad:
            raise CPGBNInputError(f"--ids: the model has kernels 0..{n_kernels - 1}, got {bad}")
    rows = sort_kernels(kernel_table(model, top_words=args.top, top_phrases=args.phrases,
                                     hide_unknown=not args.show_unknown,
                                     min_column_share=args.min_column_share), args.sort)
    if args.min_columns is not None:
        rows = [row for row in rows if row.n_named_columns >= args.min_columns]
    if args.ids is not None:   # in the order given; a kernel --min-columns left out stays out
        by_id = {row.kernel: row for row in rows}
        rows = [by_id[k] for k in args.ids if k in by_id]
    if args.kernels is not None:
        rows = rows[:args.kernels]
    return rows


def cmd_tree(args) -> int:
    from ..explain import check_layer, format_tree
    from ..load import load_estimator
    model = load_estimator(args.model_dir)
    layer = len(model.layers_) if args.layer is None else check_layer(model.layers_, args.layer)
    topics = range(model.layers_[layer - 1]) if args.topic is None else [args.topic]
    if args.topic is None and args.topics is not None:
        weights = model.globals_.r if layer == len(model.layers_) else None
        order = list(topics) if weights is None else list(weights.argsort()[::-1])
        topics = order[:args.topics]
    nodes = [model.tree(layer=layer, topic=int(k), children=args.children, top_n=args.top,
                        min_column_share=args.min_column_share) for k in topics]
    for node in nodes:
        print(format_tree(node))
        print()
    if args.svg:
        from ..explain import save_tree_svg
        save_tree_svg(nodes, args.svg)
        print(f"wrote {args.svg}")
    return 0


def add_topics_parser(sub):
    """Add ``topics`` to the subcommand parser ``sub``; return its parser."""
    from ..explain.hierarchy import HIDDEN
    p = sub.add_parser("topics", help="phrase table of a saved model",
                       description="Per kernel (most used first), the windows of the training "
                                   "documents it explains most, with how often each occurs (_: "
                                   "an open slot, any word); --columns adds the top words of "
                                   "each column and the best phrases; --json for a program.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model saved by `cpgbn fit`")
    p.add_argument("--top", type=positive_int, default=4, help="words per column (default 4)")
    p.add_argument("--kernels", type=positive_int, default=None,
                   help="show only the first N kernels in the --sort order (default: all)")
    p.add_argument("--ids", type=_kernel_ids, default=None,
                   help="show these kernels, in this order (e.g. 83,5,199; default: every "
                        "kernel, in the --sort order)")
    p.add_argument("--show-unknown", action="store_true", help="include the out-of-vocabulary token")
    p.add_argument("--phrases", type=positive_int, default=3, help="best phrases per kernel (default 3)")
    p.add_argument("--sort", choices=["usage", "sharpness", "kernel"], default="usage",
                   help="order of the kernels (default: usage, most used first)")
    add_column_share_arg(p)
    p.add_argument("--min-columns", type=positive_int, default=None, metavar="N",
                   help="only kernels whose name fixes at least N words (2: phrase kernels, "
                        "not single words; for a model without recorded windows, N shown "
                        "columns; default: any)")
    p.add_argument("--columns", action="store_true",
                   help="also the per-column view of the paper's Table 3: the top words of "
                        "each column and the best phrases (default: only for a model without "
                        "recorded windows)")
    p.add_argument("--all", action="store_true",
                   help="list the kernels that explain < 0.1%% of the corpus each too "
                        "(default: folded into one line)")
    p.add_argument("--json", action="store_true",
                   help="print the same kernels, columns and phrases as JSON on stdout: per "
                        f"kernel its usage, columns and phrases as token lists, {HIDDEN} at an "
                        "open slot (default: the text table)")
    p.set_defaults(func=cmd_topics)
    return p


def add_tree_parser(sub):
    """Add ``tree`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("tree", help="topic trees of a saved model",
                       description="For topics of a layer (default: the top one, heaviest r first), "
                                   "their children down to layer 1, each with its phrase columns.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model saved by `cpgbn fit`")
    p.add_argument("--layer", type=int, default=None, help="layer of the roots (default: top)")
    p.add_argument("--topic", type=int, default=None, help="one root topic (default: several)")
    p.add_argument("--topics", type=positive_int, default=3,
                   help="how many roots when --topic is not given (default %(default)s)")
    p.add_argument("--children", type=positive_int, default=3, help="children per node (default 3)")
    p.add_argument("--top", type=positive_int, default=3, help="words per phrase column (default 3)")
    p.add_argument("--svg", default=None, metavar="TREES.svg",
                   help="also draw the trees into this SVG file (default: none)")
    add_column_share_arg(p)
    p.set_defaults(func=cmd_tree)
    return p


# ---------------------------------------------------------------------- report and summary
def _load(args):
    from ..load import load_estimator
    model = load_estimator(args.model_dir)
    model.set_params(n_threads=args.threads)
    texts = labels = None
    if args.data is not None:
        texts, labels = read_documents(args.data, args.split, args.data_dir, args.format)
        if len(texts) == 0:
            raise CPGBNInputError(f"{args.data} has no documents")
    return model, texts, labels


def cmd_report(args) -> int:
    from ..explain.report import build_report, write_report
    from ..files import check_file_target
    out = Path(args.out)
    check_file_target(out)
    model, texts, labels = _load(args)
    explain, explain_note = _texts_to_explain(args, model, texts)
    html = build_report(model, texts, labels, title=args.title, source=str(args.model_dir),
                        top_words=args.top, top_phrases=args.phrases, trees=args.trees,
                        children=args.children, tree_layer=args.layer, npmi=not args.no_npmi,
                        lda=not args.no_lda, window=args.window, lda_iter=args.lda_iter,
                        sweeps=args.sweeps, burn_in=args.sweeps // 2,
                        hide_unknown=not args.show_unknown,
                        min_column_share=args.min_column_share,
                        explain=explain, explain_note=explain_note)
    write_report(html, out)
    print(f"wrote {out} ({len(html.encode('utf-8')) / 1024:.0f} KiB)")
    return 0


def _texts_to_explain(args, model, texts) -> tuple[list, str]:
    """(texts, where they come from): ``report --explain TEXT`` (repeated) and, for a
    classifier, the first ``--explain-docs`` documents of ``--test`` (documents the model did
    not train on) when given, else of DATA (which it trained on: the note says so)."""
    chosen = list(args.explain or [])
    note = ""
    if is_classifier(model) and args.explain_docs > 0:
        if args.test is not None:
            held_out, _ = read_documents(args.test, "test", args.data_dir, args.format)
            chosen += list(held_out[:args.explain_docs])
            note = (f"The first {min(args.explain_docs, len(held_out))} documents of "
                    f"{args.test}, which the model did not train on.")
        elif texts is not None:
            chosen += list(texts[:args.explain_docs])
            note = (f"The first {min(args.explain_docs, len(texts))} documents of {args.data}: "
                    "the model trained on them (pass --test for held-out ones).")
    return chosen, note


def cmd_summary(args) -> int:
    from ..explain.summary import summary_text
    model, texts, labels = _load(args)
    text = summary_text(model, texts, top=args.top, npmi=not args.no_npmi, lda=not args.no_lda,
                        window=args.window, lda_iter=args.lda_iter, sweeps=args.sweeps,
                        labels=labels, min_column_share=args.min_column_share)
    print(text)
    return 0


def _add_optional_data_args(p):
    p.add_argument("data", metavar="DATA", nargs="?", default=None,
                   help="the training documents (a file or a dataset name: mr, subj, trec, imdb, "
                        "elec); adds corpus phrases, NPMI coherence and per-class usage")
    add_data_args(p, split_help="split of a named dataset (default: train)")


def _add_coherence_args(p):
    p.add_argument("--window", type=_window, default=10,
                   help="NPMI co-occurrence window in tokens, or 'doc' for whole documents (default 10)")
    p.add_argument("--no-npmi", action="store_true", help="skip the coherence computation")
    p.add_argument("--no-lda", action="store_true", help="skip the LDA comparison")
    p.add_argument("--lda-iter", type=positive_int, default=50,
                   help="LDA variational iterations for the comparison (default 50)")
    p.add_argument("--threads", type=positive_int, default=None, help="numba threads (default: all cores)")


def add_report_parser(sub):
    """Add ``report`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("report", help="self-contained HTML report of a saved model",
                       description="Write one HTML file (no network resources) with the model "
                                   "summary, training plots, the phrase table (search, sort), "
                                   "topic trees and, given DATA, corpus phrases, NPMI coherence "
                                   "vs LDA and per-class usage.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model saved by `cpgbn fit`")
    _add_optional_data_args(p)
    p.add_argument("--out", required=True, metavar="REPORT.html", help="the HTML file to write")
    p.add_argument("--title", default=None, help="page title (default: the model's layers)")
    p.add_argument("--top", type=positive_int, default=4, help="words per phrase column (default 4)")
    p.add_argument("--phrases", type=positive_int, default=3,
                   help="best phrases and corpus phrases per kernel (default 3)")
    p.add_argument("--trees", type=positive_int, default=3, help="topic trees to draw (default 3)")
    p.add_argument("--children", type=positive_int, default=3, help="children per tree node (default 3)")
    p.add_argument("--layer", type=positive_int, default=None, help="layer of the tree roots (default: top)")
    p.add_argument("--sweeps", type=positive_int, default=10,
                   help="inference sweeps on DATA for the corpus phrases (half burn-in; default 10)")
    p.add_argument("--show-unknown", action="store_true", help="include the out-of-vocabulary token")
    p.add_argument("--explain", action="append", default=None, metavar="TEXT",
                   help="a classifier (fit --supervised): show this text with the phrases that "
                        "moved its prediction highlighted (repeat for more; default: none)")
    p.add_argument("--explain-docs", type=int, default=3, metavar="N",
                   help="a classifier: also explain the first N documents of --test, else "
                        "of DATA (default 3)")
    p.add_argument("--test", default=None, metavar="TEST",
                   help="a classifier: documents it did not train on (a file, or a dataset "
                        "name for its test split), from which --explain-docs draws "
                        "(default: none, DATA's documents are explained)")
    add_column_share_arg(p)
    _add_coherence_args(p)
    p.set_defaults(func=cmd_report)
    return p


def add_summary_parser(sub):
    """Add ``summary`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("summary", help="one-screen summary of a saved model",
                       description="Model, training, usage and the most used kernels' phrases; "
                                   "given DATA (the training documents), also the data size and "
                                   "NPMI coherence of the kernels vs LDA.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model saved by `cpgbn fit`")
    _add_optional_data_args(p)
    p.add_argument("--top", type=positive_int, default=5, help="kernels to list (default 5)")
    p.add_argument("--sweeps", type=positive_int, default=10,
                   help="inference sweeps on DATA for phrase widths and corpus phrases "
                        "(half burn-in; default 10)")
    add_column_share_arg(p)
    _add_coherence_args(p)
    p.set_defaults(func=cmd_summary)
    return p
