"""``cpgbn predict`` and ``cpgbn explain``: use and read a classifier saved by
``cpgbn fit --supervised`` (:class:`cpgbn.classifier.CPGBNClassifier`)."""
from __future__ import annotations

import sys

from ..errors import CPGBNInputError, ModelFormatError
from .common import add_data_args, add_run_args, positive_int, read_documents

__all__ = ["add_explain_parser", "add_predict_parser", "cmd_explain", "cmd_predict",
           "load_classifier"]


def load_classifier(model_dir: str):
    """The classifier saved in ``model_dir``, or a one-line error that says what is there."""
    from ..classifier import CPGBNClassifier
    try:
        return CPGBNClassifier.load(model_dir)
    except ModelFormatError as exc:
        if "saved by CPGBN:" in str(exc) or "saved by PGBN" in str(exc):
            raise CPGBNInputError(f"{model_dir} holds a model fitted without labels; predict "
                                  "and explain need a classifier (cpgbn fit DATA.tsv "
                                  "--supervised --out MODEL_DIR)") from None
        raise


def cmd_predict(args) -> int:
    import numpy as np

    from ..files import check_file_target, write_file_atomically
    if args.out:
        check_file_target(args.out, "--out")
    model = load_classifier(args.model_dir)
    model.set_params(n_threads=args.threads)
    texts, labels = read_documents(args.data, args.split, args.data_dir, args.format)
    probabilities = model.predict_proba(texts)
    predicted = model.classes_[np.argmax(probabilities, axis=1)]
    if args.out:
        header = "predicted\t" + "\t".join(f"p({c})" for c in model.classes_) + "\n"

        def write(fh):
            fh.write(header)
            for label, row in zip(predicted, probabilities):
                fh.write(f"{label}\t" + "\t".join(f"{p:.6f}" for p in row) + "\n")
        write_file_atomically(args.out, write)
        print(f"wrote the predictions of {len(texts)} documents to {args.out}")
    if labels is not None:
        accuracy = model.score(texts, labels) if len(texts) else float("nan")
        print(f"accuracy {100 * accuracy:.2f} % on {len(texts)} labelled documents")
    elif not args.out:
        for label in predicted:
            print(label)
    return 0


def cmd_explain(args) -> int:
    from ..explain.classes import (class_phrases, class_units, explain_document,
                                   format_class_phrases, format_class_units, format_document)
    model = load_classifier(args.model_dir)
    model.set_params(n_threads=args.threads)
    if args.text is None or args.classes:
        phrases = class_phrases(model, top=2 * args.top)
        if phrases is not None:
            print(format_class_phrases(phrases))
            print()
        print(format_class_units(class_units(model, top=args.top, phrases=args.phrases,
                                             rank=args.rank)))
    if args.text is not None:
        if args.classes:
            print()
        if args.as_class is not None and args.as_class not in map(str, model.classes_):
            raise CPGBNInputError(f"--as-class must be one of "
                                  f"{', '.join(map(str, model.classes_))}, got {args.as_class!r}")
        target = None if args.as_class is None else next(
            c for c in model.classes_ if str(c) == args.as_class)
        text = sys.stdin.read() if args.text == "-" else args.text
        print(format_document(explain_document(model, text, top=args.top,
                                               explained_class=target)))
    return 0


def add_predict_parser(sub):
    """Add ``predict`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("predict", help="classify documents with a saved classifier",
                       description="Predict the classes of DATA with a classifier (cpgbn fit "
                                   "--supervised); a labelled DATA also prints the accuracy.")
    p.add_argument("model_dir", metavar="MODEL_DIR",
                   help="a classifier saved by `cpgbn fit --supervised`")
    p.add_argument("data", metavar="DATA",
                   help="a text file, a dataset name, or '-' for standard input (one document "
                        "per line)")
    add_data_args(p, split_help="split of a named dataset (default %(default)s)", split="test")
    p.add_argument("--out", default=None, metavar="OUT.tsv",
                   help="write each document's predicted class and probabilities here "
                        "(default: none; unlabelled DATA prints the predicted classes)")
    add_run_args(p)
    p.set_defaults(func=cmd_predict)
    return p


def add_explain_parser(sub):
    """Add ``explain`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("explain", help="why a classifier decides as it does",
                       description="Without TEXT: per class, the kernels and topics that push "
                                   "towards it, with their phrases.  With TEXT ('-': standard "
                                   "input): the prediction and the phrases of TEXT that moved "
                                   "it most.")
    p.add_argument("model_dir", metavar="MODEL_DIR",
                   help="a classifier saved by `cpgbn fit --supervised`")
    p.add_argument("text", metavar="TEXT", nargs="?", default=None,
                   help="a document to explain, '-' for standard input (default: none, the "
                        "units of every class)")
    p.add_argument("--top", type=positive_int, default=5,
                   help="units per class, or phrases of TEXT (default 5)")
    p.add_argument("--phrases", type=positive_int, default=2,
                   help="phrases shown per unit (default 2)")
    p.add_argument("--rank", choices=["push", "weight"], default="push",
                   help="order of a class's units: push, the softmax weight times the unit's "
                        "mean input over the training documents, or the weight alone "
                        "(default push)")
    p.add_argument("--classes", action="store_true",
                   help="with TEXT: print the units of every class too")
    p.add_argument("--as-class", default=None, metavar="CLASS",
                   help="with TEXT: explain towards this class (default: the predicted one)")
    add_run_args(p)
    p.set_defaults(func=cmd_explain)
    return p
