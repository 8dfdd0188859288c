"""``cpgbn evaluate``: train, infer the test split and score an SVM, under a protocol."""
from __future__ import annotations

import argparse
import json
import sys
import time

from ..errors import CPGBNInputError
from .common import add_run_args, layer_sizes, token_count

__all__ = ["add_evaluate_parser", "cmd_evaluate"]


def _seeds(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers like 0,1,2, got {text!r}")


def cmd_evaluate(args) -> int:
    from ..evaluate import evaluate
    from ..files import check_file_target, write_file_atomically
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
    print(f"{result['dataset']} {result['model'].upper()}-{'-'.join(map(str, result['layers']))} "
          f"({result['protocol']} protocol, {result['features']} features, "
          f"seeds {','.join(map(str, result['seeds']))}): "
          f"accuracy {100 * result['accuracy_mean']:.1f} +- {100 * result['accuracy_std']:.1f} %")
    if args.json:
        write_file_atomically(args.json, lambda fh: fh.write(json.dumps(result, indent=2) + "\n"))
        print(f"wrote {args.json}")
    return 0


def add_evaluate_parser(sub):
    """Add ``evaluate`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("evaluate", help="train, infer the test split, SVM accuracy",
                       description="Evaluate CPGBN features on a dataset under a protocol.")
    p.add_argument("dataset", metavar="DATASET", help="mr, subj, trec or imdb")
    p.add_argument("--layers", type=layer_sizes, default=(200,))
    p.add_argument("--model", choices=["cpgbn", "pgbn", "lda"], default="cpgbn",
                   help="cpgbn, or a bag-of-words baseline in the same harness (pgbn, lda)")
    p.add_argument("--protocol", choices=["authors", "paper"], default="authors",
                   help="authors: fixed splits, RBF SVC, 150+50 sweeps; paper: linear SVM, CV for "
                        "MR/SUBJ, 500+200 sweeps")
    p.add_argument("--features", choices=["inductive", "inferred", "transductive"],
                   default="inductive",
                   help="inductive: training features from the training chain (the authors' code); "
                        "inferred: training features inferred again with the learned globals "
                        "fixed, like the test features; transductive: one fit on training and "
                        "test texts together")
    p.add_argument("--seeds", type=_seeds, default=[0])
    p.add_argument("--data-dir", default=None, help="folder with the datasets (default: $CPGBN_DATA)")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="vocabulary rows (default: the paper's V_pre + 1)")
    p.add_argument("--token-count", type=token_count, default=None)
    p.add_argument("--filter-width", type=int, default=3)
    p.add_argument("--padding", type=int, default=0,
                   help="empty columns around every document (CPGBN only; default 0)")
    p.add_argument("--iterations", type=int, default=None, help="override the protocol's sweeps")
    p.add_argument("--burn-in", type=int, default=None, help="override the protocol's burn-in")
    p.add_argument("--json", default=None, metavar="OUT.json", help="write the full record here")
    p.add_argument("--save-model", default=None, metavar="MODEL_DIR",
                   help="save the model of the last run here (for `cpgbn topics`)")
    add_run_args(p)
    p.set_defaults(func=cmd_evaluate)
    return p
