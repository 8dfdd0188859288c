"""``cpgbn evaluate``: train, infer the test split and score an SVM, under a protocol; or, for a
labelled file, CPGBN against n-gram baselines on one set of splits
(:mod:`cpgbn.evaluate.user_files`)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ..errors import CPGBNInputError
from ..params import DEFAULT_TOKEN_COUNT
from .common import add_run_args, layer_sizes, positive_float, positive_int, token_count

__all__ = ["add_evaluate_parser", "cmd_evaluate"]


def _seeds(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers like 0,1,2, got {text!r}")


def _baseline_names(text: str) -> tuple[str, ...]:
    """The baselines of ``--baselines``: ``all``, ``none`` or names like svm-bigram,lr-bigram."""
    from ..evaluate.text_baselines import BASELINES
    if text == "all":
        return tuple(BASELINES)
    if text == "none":
        return ()
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [n for n in names if n not in BASELINES] or ([] if names else [text])
    if unknown:
        raise CPGBNInputError(f"--baselines: unknown baseline {unknown[0]!r}; give all, none or "
                              f"names from {', '.join(BASELINES)}")
    return names


#: The options of a labelled file only: (flag, attribute); None when not given
_FILE_OPTIONS = (("--test", "test"), ("--cv", "cv"), ("--baselines", "baselines"),
                 ("--supervised", "supervised"), ("--epochs", "epochs"), ("--xi", "xi"),
                 ("--learning-rate", "learning_rate"),
                 ("--[no-]unsupervised", "unsupervised"))


def _names_a_file(args) -> bool:
    """Whether DATASET is a labelled file (an existing path, or no dataset name and either a
    file-only option or the look of a path) rather than a dataset name."""
    from ..datasets import DATASETS
    data = args.dataset
    if Path(data).exists():
        return True
    if data.lower() in DATASETS:
        return False
    return (any(getattr(args, attr) is not None for _, attr in _FILE_OPTIONS)
            or os.sep in data or data.endswith((".tsv", ".txt", ".gz")))


def _evaluate_file(args) -> int:
    from ..evaluate.user_files import DEFAULT_BASELINES, evaluate_files, table_text
    from ..files import check_file_target, write_file_atomically
    for flag, given in (("--model", args.model != "cpgbn"), ("--save-model", args.save_model),
                        ("--data-dir", args.data_dir),
                        ("--features transductive", args.features == "transductive")):
        if given:
            raise CPGBNInputError(f"{flag} is for a named dataset; a labelled file "
                                  f"({args.dataset}) is evaluated with CPGBN and the baselines")
    if args.test is not None and args.cv is not None:
        raise CPGBNInputError(f"--cv and --test together: give --test {args.test} (one fixed "
                              f"split) or --cv {args.cv} (cross-validation of {args.dataset}), "
                              f"not both")
    if args.cv is not None and args.cv < 2:
        raise CPGBNInputError(f"--cv must be a number of folds >= 2, got {args.cv}")
    baselines = DEFAULT_BASELINES if args.baselines is None else _baseline_names(args.baselines)
    if args.json:
        check_file_target(args.json, "--json")
    kwargs = dict(layers=args.layers, protocol=args.protocol, seeds=args.seeds,
                  n_iter=args.iterations, burn_in=args.burn_in, features=args.features,
                  token_count=args.token_count, filter_width=args.filter_width,
                  padding=args.padding, supervised=bool(args.supervised),
                  unsupervised=args.unsupervised is not False,
                  supervised_params={name: value for name, value in (
                      ("n_epochs", args.epochs), ("xi", args.xi),
                      ("learning_rate", args.learning_rate)) if value is not None},
                  baselines=baselines,
                  n_threads=args.threads, progress=not args.quiet,
                  log=lambda msg: print(msg, flush=True))
    if args.vocab_size is not None:
        kwargs["vocab_size"] = args.vocab_size
    start = time.perf_counter()
    result = evaluate_files(args.dataset, args.test, cv=args.cv, **kwargs)
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    result["command"] = "cpgbn " + " ".join(sys.argv[1:])
    print(table_text(result))
    if args.json:
        write_file_atomically(args.json, lambda fh: fh.write(json.dumps(result, indent=2) + "\n"))
        print(f"wrote {args.json}")
    return 0


def cmd_evaluate(args) -> int:
    from ..evaluate import evaluate
    from ..files import check_file_target, write_file_atomically
    if _names_a_file(args):
        return _evaluate_file(args)
    given = [flag for flag, attr in _FILE_OPTIONS if getattr(args, attr) is not None]
    if given:
        raise CPGBNInputError(f"{', '.join(given)}: for a labelled file (label<TAB>text); "
                              f"{args.dataset!r} is a dataset name (see --protocol)")
    if args.json:
        check_file_target(args.json, "--json")
    if args.padding and args.model != "cpgbn":
        raise CPGBNInputError(f"--padding is for --model cpgbn; {args.model} reads each "
                              "document as one bag of words")
    start = time.perf_counter()
    result = evaluate(args.dataset, layers=args.layers, protocol=args.protocol, seeds=args.seeds,
                      data_dir=args.data_dir, vocab_size=args.vocab_size,
                      token_count=args.token_count, n_iter=args.iterations, burn_in=args.burn_in,
                      filter_width=args.filter_width, n_threads=args.threads,
                      progress=not args.quiet, log=lambda msg: print(msg, flush=True),
                      save_model=args.save_model, model=args.model, features=args.features,
                      model_params={"padding": args.padding} if args.padding else None)
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    result["command"] = "cpgbn " + " ".join(sys.argv[1:])
    # the std is over the seeds' mean accuracies: one seed has none (the record's 0.0 is no
    # measured spread)
    spread = f" +- {100 * result['accuracy_std']:.1f}" if len(set(result["seeds"])) > 1 else ""
    print(f"{result['dataset']} {result['model'].upper()}-{'-'.join(map(str, result['layers']))} "
          f"({result['protocol']} protocol, {result['features']} features, "
          f"seeds {','.join(map(str, result['seeds']))}): "
          f"accuracy {100 * result['accuracy_mean']:.1f}{spread} %")
    if args.json:
        write_file_atomically(args.json, lambda fh: fh.write(json.dumps(result, indent=2) + "\n"))
        print(f"wrote {args.json}")
    return 0


def add_evaluate_parser(sub):
    """Add ``evaluate`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser(
        "evaluate", help="train, infer the test split, SVM accuracy; or a labelled file",
        description="Evaluate CPGBN features on a dataset under a protocol; or, given a "
                    "label<TAB>text file, compare CPGBN features + classifier, n-gram baselines "
                    "and (--supervised) the supervised CPGBN on the same splits and seeds, "
                    "by a test file (--test) or stratified cross-validation (--cv, default 10).")
    p.add_argument("dataset", metavar="DATASET_OR_FILE",
                   help="mr, subj, trec, imdb or elec; or a label<TAB>text file (.gz allowed)")
    # string defaults go through the type, as typed values would: (200,) and [0]
    p.add_argument("--layers", type=layer_sizes, default="200",
                   help="layer widths, e.g. 200 or 200,100,50 (default %(default)s)")
    p.add_argument("--model", choices=["cpgbn", "pgbn", "lda"], default="cpgbn",
                   help="cpgbn, or a bag-of-words baseline in the same harness (pgbn, lda; "
                        "default %(default)s)")
    p.add_argument("--protocol", choices=["authors", "paper"], default="authors",
                   help="authors: fixed splits, RBF SVC, 150+50 sweeps; paper: linear SVM, CV for "
                        "MR/SUBJ, 500+200 sweeps (for a FILE: the sweeps and the classifier of "
                        "the CPGBN features; default %(default)s)")
    p.add_argument("--features", choices=["inductive", "inferred", "transductive"],
                   default="inductive",
                   help="inductive: training features from the training chain (the authors' code); "
                        "inferred: training features inferred again with the learned globals "
                        "fixed, like the test features; transductive (datasets only): one fit "
                        "on training and test texts together (default %(default)s)")
    p.add_argument("--seeds", type=_seeds, default="0",
                   help="seeds like 0,1,2: one run of every model per seed (with --cv, one set "
                        "of folds per seed too; default %(default)s)")
    p.add_argument("--data-dir", default=None, help="folder with the datasets (default: $CPGBN_DATA)")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="vocabulary rows (default: the paper's V_pre + 1; for a FILE 8000)")
    p.add_argument("--token-count", type=token_count, default=DEFAULT_TOKEN_COUNT,
                   help="pseudo-count per token, or 'bernoulli-poisson' (default %(default)s)")
    p.add_argument("--filter-width", type=int, default=3,
                   help="F, word positions per kernel (default %(default)s)")
    p.add_argument("--padding", type=int, default=0,
                   help="empty columns around every document (CPGBN only; default %(default)s)")
    p.add_argument("--iterations", type=int, default=None,
                   help="Gibbs sweeps (default: the protocol's)")
    p.add_argument("--burn-in", type=int, default=None,
                   help="burn-in sweeps (default: the protocol's)")
    p.add_argument("--json", default=None, metavar="OUT.json",
                   help="write the full record here (default: none)")
    p.add_argument("--save-model", default=None, metavar="MODEL_DIR",
                   help="save the model of the last run here, for `cpgbn topics` (default: "
                        "not saved)")
    labelled = p.add_argument_group("a labelled file (FILE)")
    labelled.add_argument("--test", default=None, metavar="TEST.tsv",
                          help="train on FILE, test on this label<TAB>text file (not with "
                               "--cv; default: cross-validation, --cv)")
    labelled.add_argument("--cv", type=int, default=None, metavar="K",
                          help="stratified K-fold cross-validation of FILE (K >= 2), one set of "
                               "folds per seed (default without --test: 10)")
    labelled.add_argument("--baselines", default=None,
                          metavar="all|none|NAME,...",
                          help="n-gram baselines to compare (default: svm-bigram, lr-bigram, "
                               "nbsvm-bigram, mnb-bigram)")
    labelled.add_argument("--supervised", action="store_true", default=None,
                          help="also the supervised CPGBN (cpgbn.classifier.CPGBNClassifier) "
                               "with --layers")
    labelled.add_argument("--unsupervised", action=argparse.BooleanOptionalAction, default=None,
                          help="the row of unsupervised CPGBN features + the protocol's "
                               "classifier (default: on; --no-unsupervised leaves it out)")
    labelled.add_argument("--epochs", type=positive_int, default=None,
                          help="the supervised CPGBN's training epochs (default: its own)")
    labelled.add_argument("--xi", type=positive_float, default=None,
                          help="the supervised CPGBN's weight of the cross-entropy, per unit "
                               "of a document's counts (default: its own)")
    labelled.add_argument("--learning-rate", type=positive_float, default=None,
                          help="the supervised CPGBN's Adam step size (default: its own); a "
                               "few hundred documents learn faster with 0.01")
    add_run_args(p)
    p.set_defaults(func=cmd_evaluate)
    return p
