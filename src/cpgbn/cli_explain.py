"""``cpgbn report`` and ``cpgbn summary``: look at a saved model (wired in by :mod:`cpgbn.cli`).

``add_parsers(sub)`` adds both subcommands to the ``cpgbn`` parser.  Errors follow the CLI's
convention: a :class:`~cpgbn.errors.CPGBNInputError` becomes one line and exit status 2.
"""

from __future__ import annotations

from pathlib import Path

from .errors import CPGBNInputError


def _window(text: str):
    if text in ("doc", "document", "none"):
        return None
    import argparse
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"window must be a positive integer or 'doc', got {text!r}") from None


def column_share(text: str) -> float:
    """argparse type of ``--min-column-share``: a fraction in [0, 1)."""
    import argparse
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}")
    return value


def add_column_share_arg(p) -> None:
    from .explain.hierarchy import HIDDEN, MIN_COLUMN_SHARE
    p.add_argument("--min-column-share", type=column_share, default=MIN_COLUMN_SHARE, metavar="S",
                   help="hide a phrase column holding less than this share of its kernel's or "
                        f"topic's mass, printing {HIDDEN} instead (default {MIN_COLUMN_SHARE}; 0 shows all)")


def positive_int(text: str) -> int:
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _load(args):
    from .cli import _read_documents
    from .model import CPGBN
    model = CPGBN.load(args.model_dir)
    model.set_params(n_threads=args.threads)
    texts = labels = None
    if args.data is not None:
        texts, labels = _read_documents(args.data, args.split, args.data_dir, args.format)
        if len(texts) == 0:
            raise CPGBNInputError(f"{args.data} has no documents")
    return model, texts, labels


def cmd_report(args) -> int:
    from .explain.report import build_report, write_report
    from .files import check_file_target
    out = Path(args.out)
    check_file_target(out)
    model, texts, labels = _load(args)
    html = build_report(model, texts, labels, title=args.title, source=str(args.model_dir),
                        top_words=args.top, top_phrases=args.phrases, trees=args.trees,
                        children=args.children, tree_layer=args.layer, npmi=not args.no_npmi,
                        lda=not args.no_lda, window=args.window, lda_iter=args.lda_iter,
                        sweeps=args.sweeps, burn_in=args.sweeps // 2,
                        hide_unknown=not args.show_unknown,
                        min_column_share=args.min_column_share)
    write_report(html, out)
    print(f"wrote {out} ({len(html.encode('utf-8')) / 1024:.0f} KiB)")
    return 0


def cmd_summary(args) -> int:
    from .explain.summary import summary_text
    model, texts, labels = _load(args)
    text = summary_text(model, texts, top=args.top, npmi=not args.no_npmi, lda=not args.no_lda,
                        window=args.window, lda_iter=args.lda_iter, sweeps=args.sweeps,
                        labels=labels, min_column_share=args.min_column_share)
    print(text)
    return 0


def _add_data_args(p):
    from .cli import _add_data_args as add_split_dir_format
    p.add_argument("data", metavar="DATA", nargs="?", default=None,
                   help="the training documents (a file or a dataset name: mr, subj, trec, imdb); "
                        "adds corpus phrases, NPMI coherence and per-class usage")
    add_split_dir_format(p, split_help="split of a named dataset (default: train)")


def _add_coherence_args(p):
    p.add_argument("--window", type=_window, default=10,
                   help="NPMI co-occurrence window in tokens, or 'doc' for whole documents (default 10)")
    p.add_argument("--no-npmi", action="store_true", help="skip the coherence computation")
    p.add_argument("--no-lda", action="store_true", help="skip the LDA comparison")
    p.add_argument("--lda-iter", type=positive_int, default=50,
                   help="LDA variational iterations for the comparison (default 50)")
    p.add_argument("--threads", type=positive_int, default=None, help="numba threads (default: all cores)")


def add_parsers(sub) -> None:
    """Add ``report`` and ``summary`` to the ``cpgbn`` subcommand parser ``sub``."""
    p = sub.add_parser("report", help="self-contained HTML report of a saved model",
                       description="Write one HTML file (no network resources) with the model "
                                   "summary, training plots, the phrase table (search, sort), "
                                   "topic trees and, given DATA, corpus phrases, NPMI coherence "
                                   "vs LDA and per-class usage.")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    _add_data_args(p)
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
    add_column_share_arg(p)
    _add_coherence_args(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("summary", help="one-screen summary of a saved model",
                       description="Model, training, usage and the most used kernels' phrases; "
                                   "given DATA (the training documents), also the data size and "
                                   "NPMI coherence of the kernels vs LDA.")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    _add_data_args(p)
    p.add_argument("--top", type=positive_int, default=5, help="kernels to list (default 5)")
    p.add_argument("--sweeps", type=positive_int, default=10,
                   help="inference sweeps on DATA for phrase widths and corpus phrases "
                        "(half burn-in; default 10)")
    add_column_share_arg(p)
    _add_coherence_args(p)
    p.set_defaults(func=cmd_summary)
