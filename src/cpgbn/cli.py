"""The ``cpgbn`` command line: a thin layer that parses, calls the library and prints.

Every user error (bad file, bad parameter, bad model directory) is a CPGBNInputError: the
command prints ``cpgbn: error: <one line>`` and exits with status 2.  Output files are written
atomically, so a failed command leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

from ._version import __version__
from .errors import CPGBNInputError

EXIT_USAGE = 2


def _layers(text: str) -> tuple[int, ...]:
    parts = [p for p in text.replace("-", ",").split(",") if p.strip()]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers must be integers like 200 or 200,100,50, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every layer size must be >= 1, got {text!r}")
    return values


def _kernel_ids(text: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"kernel ids must be integers like 83,5,199, got {text!r}")
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"kernel ids must be >= 0, got {text!r}")
    return values


def _seeds(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers like 0,1,2, got {text!r}")


def _token_count(text: str):
    if text == "bernoulli-poisson":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"token count must be an integer or 'bernoulli-poisson', got {text!r}")


def _read_documents(data: str, split: str, data_dir, fmt: str):
    """(texts, labels or None) from a file path or a dataset name."""
    from .datasets import DATASETS, load_dataset
    from .text import read_labeled, read_lines
    path = Path(data)
    if path.exists() or fmt != "auto" or os.sep in data or data.endswith((".tsv", ".txt", ".gz")):
        if fmt == "auto":
            name = path.name.lower()
            fmt = "tsv" if name.endswith((".tsv", ".tsv.gz")) else "lines"
        if fmt == "tsv":
            return read_labeled(path)
        return read_lines(path), None
    if data.lower() in DATASETS:
        return load_dataset(data, split, data_dir=data_dir)
    raise CPGBNInputError(f"{data!r} is neither an existing file nor a dataset name "
                          f"({', '.join(DATASETS)})")


# ---------------------------------------------------------------------- commands
def cmd_fit(args) -> int:
    from .explain.summary import observation_model
    from .io import check_replaceable
    from .model import CPGBN
    check_replaceable(args.out)
    texts, _ = _read_documents(args.data, args.split, args.data_dir, args.format)
    model = CPGBN(layers=args.layers, filter_width=args.filter_width, vocab_size=args.vocab_size,
                  token_count=args.token_count, padding=args.padding, eta=args.eta,
                  n_iter=args.iterations,
                  burn_in=args.iterations * 3 // 4 if args.burn_in is None else args.burn_in,
                  random_state=args.seed, n_threads=args.threads, device=args.device,
                  progress=not args.quiet)
    checkpoint = Path(f"{args.out}.checkpoint")
    if args.resume and (checkpoint / "checkpoint.json").is_file():
        print(f"resuming from {checkpoint}", file=sys.stderr)
    start = time.perf_counter()
    model.fit(texts, checkpoint_dir=checkpoint, checkpoint_every=args.checkpoint_every,
              resume=args.resume)
    seconds = time.perf_counter() - start
    model.save(args.out)
    print(f"fitted CPGBN {'-'.join(map(str, model.layers_))} on {len(texts)} documents "
          f"({model.n_train_tokens_} tokens, V={len(model.vocabulary_)}) in {seconds:.1f}s; "
          f"log-likelihood per token {model.log_likelihood():.4f} "
          f"({observation_model(model.token_count)}); saved to {args.out}")
    return 0


def cmd_transform(args) -> int:
    from .io import check_file_target, write_file_atomically
    from .model import CPGBN
    check_file_target(args.out)
    model = CPGBN.load(args.model_dir)
    model.set_params(progress=not args.quiet, n_threads=args.threads)
    if args.iterations is not None:
        burn_in = args.iterations * 3 // 4 if args.burn_in is None else args.burn_in
        model.set_params(transform_iter=args.iterations, transform_burn_in=burn_in)
    texts, _ = _read_documents(args.data, args.split, args.data_dir, args.format)
    features = model.transform(texts, all_layers=args.all_layers)
    import numpy as np
    write_file_atomically(args.out, lambda fh: np.save(fh, features), binary=True)
    print(f"wrote features of {features.shape[0]} documents x {features.shape[1]} to {args.out}")
    return 0


def cmd_topics(args) -> int:
    from .explain import format_kernel_table, kernel_table, sort_kernels
    from .model import CPGBN
    model = CPGBN.load(args.model_dir)
    if args.ids is not None:
        n_kernels = model.layers_[0]
        bad = [k for k in args.ids if k >= n_kernels]
        if bad:
            raise CPGBNInputError(f"--ids: the model has kernels 0..{n_kernels - 1}, got {bad}")
    rows = sort_kernels(kernel_table(model, top_words=args.top, top_phrases=args.phrases,
                                     hide_unknown=not args.show_unknown,
                                     min_column_share=args.min_column_share), args.sort)
    if args.min_columns is not None:
        rows = [row for row in rows if row.n_shown >= args.min_columns]
    if args.ids is not None:
        by_id = {row.kernel: row for row in rows}
        rows = [by_id[k] for k in args.ids]
    if args.kernels is not None:
        rows = rows[:args.kernels]
    print(format_kernel_table(rows))
    return 0


def cmd_tree(args) -> int:
    from .explain import check_layer, format_tree
    from .model import CPGBN
    model = CPGBN.load(args.model_dir)
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
        from .explain import save_tree_svg
        save_tree_svg(nodes, args.svg)
        print(f"wrote {args.svg}")
    return 0


def cmd_evaluate(args) -> int:
    from .evaluate import evaluate
    from .io import check_file_target, write_file_atomically
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


# ---------------------------------------------------------------------- parser
def _add_data_args(p, *, split_help="split of a named dataset"):
    p.add_argument("--split", default="train", choices=["train", "test", "all"], help=split_help)
    p.add_argument("--data-dir", default=None,
                   help="folder with the named datasets (default: $CPGBN_DATA)")
    p.add_argument("--format", default="auto", choices=["auto", "tsv", "lines"],
                   help="file layout: label<TAB>text (tsv) or one document per line (default: by "
                        "extension, .tsv/.tsv.gz = tsv)")


def _add_run_args(p):
    p.add_argument("--threads", type=int, default=None, help="numba threads (default: all cores)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cpgbn", description="Convolutional Poisson Gamma Belief Network: phrase-level deep "
                                  "topic models fitted by Gibbs sampling.")
    parser.add_argument("--version", action="version", version=f"cpgbn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    from .cli_explain import add_column_share_arg, positive_int

    p = sub.add_parser("fit", help="fit a model and save it",
                       description="Fit CPGBN on DATA (a file or a dataset name) and save it.")
    p.add_argument("data", metavar="DATA", help="a text file (.tsv: label<TAB>text, else one "
                                                "document per line) or a dataset: mr, subj, trec, imdb")
    _add_data_args(p)
    p.add_argument("--layers", type=_layers, default=(200,), help="layer widths, e.g. 200 or 200,100,50")
    p.add_argument("--filter-width", type=int, default=3, help="F, word positions per kernel (default 3)")
    p.add_argument("--vocab-size", type=int, default=8000,
                   help="vocabulary rows including the out-of-vocabulary row (default 8000)")
    p.add_argument("--token-count", type=_token_count, default=None,
                   help="pseudo-count per token, or 'bernoulli-poisson' (default: library default)")
    p.add_argument("--padding", type=int, default=0,
                   help="empty columns before and after every document, so kernels may overhang "
                        "the edges (0 to F-1; default 0, the paper's model)")
    p.add_argument("--eta", type=float, default=0.05, help="Dirichlet concentration (default 0.05)")
    p.add_argument("--iterations", type=int, default=200, help="Gibbs sweeps (default 200)")
    p.add_argument("--burn-in", type=int, default=None,
                   help="sweeps before averaging (default: 3/4 of --iterations)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="where to save the model")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="save the sampler state to MODEL_DIR.checkpoint every N sweeps (default 10)")
    p.add_argument("--device", default=None,
                   help="run the PyTorch sampler on this device (cpu, cuda, cuda:1); default: numba")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted fit from MODEL_DIR.checkpoint (same result as an "
                        "uninterrupted run)")
    _add_run_args(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("transform", help="document features from a saved model",
                       description="Infer features (mean theta^(1) / L) of DATA with a saved model.")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("data", metavar="DATA")
    _add_data_args(p)
    p.add_argument("--out", required=True, metavar="FEATURES.npy")
    p.add_argument("--all-layers", action="store_true", help="concatenate the features of every layer")
    p.add_argument("--iterations", type=int, default=None, help="sweeps (default: as in training)")
    p.add_argument("--burn-in", type=int, default=None, help="burn-in sweeps (with --iterations)")
    _add_run_args(p)
    p.set_defaults(func=cmd_transform)

    p = sub.add_parser("topics", help="phrase table of a saved model",
                       description="Per kernel (most used first), the top words of each column.")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("--top", type=positive_int, default=4, help="words per column (default 4)")
    p.add_argument("--kernels", type=positive_int, default=None,
                   help="show only the first N kernels in the --sort order")
    p.add_argument("--ids", type=_kernel_ids, default=None,
                   help="show these kernels, in this order (e.g. 83,5,199)")
    p.add_argument("--show-unknown", action="store_true", help="include the out-of-vocabulary token")
    p.add_argument("--phrases", type=positive_int, default=3, help="best phrases per kernel (default 3)")
    p.add_argument("--sort", choices=["usage", "sharpness", "kernel"], default="usage",
                   help="order of the kernels (default: usage, most used first)")
    add_column_share_arg(p)
    p.add_argument("--min-columns", type=positive_int, default=None, metavar="N",
                   help="only kernels with at least N shown columns (2: phrase kernels, not "
                        "single words)")
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("tree", help="topic trees of a saved model",
                       description="For topics of a layer (default: the top one, heaviest r first), "
                                   "their children down to layer 1, each with its phrase columns.")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("--layer", type=int, default=None, help="layer of the roots (default: top)")
    p.add_argument("--topic", type=int, default=None, help="one root topic (default: several)")
    p.add_argument("--topics", type=positive_int, default=3, help="how many roots when --topic is not given")
    p.add_argument("--children", type=positive_int, default=3, help="children per node (default 3)")
    p.add_argument("--top", type=positive_int, default=3, help="words per phrase column (default 3)")
    p.add_argument("--svg", default=None, metavar="TREES.svg", help="also draw the trees into this SVG file")
    add_column_share_arg(p)
    p.set_defaults(func=cmd_tree)

    from .cli_download import add_parser as add_download_parser
    add_download_parser(sub)
    from .cli_explain import add_parsers as add_explain_parsers
    add_explain_parsers(sub)

    p = sub.add_parser("evaluate", help="train, infer the test split, SVM accuracy",
                       description="Evaluate CPGBN features on a dataset under a protocol.")
    p.add_argument("dataset", metavar="DATASET", help="mr, subj, trec or imdb")
    p.add_argument("--layers", type=_layers, default=(200,))
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
    p.add_argument("--token-count", type=_token_count, default=None)
    p.add_argument("--filter-width", type=int, default=3)
    p.add_argument("--padding", type=int, default=0,
                   help="empty columns around every document (CPGBN only; default 0)")
    p.add_argument("--iterations", type=int, default=None, help="override the protocol's sweeps")
    p.add_argument("--burn-in", type=int, default=None, help="override the protocol's burn-in")
    p.add_argument("--json", default=None, metavar="OUT.json", help="write the full record here")
    p.add_argument("--save-model", default=None, metavar="MODEL_DIR",
                   help="save the model of the last run here (for `cpgbn topics`)")
    _add_run_args(p)
    p.set_defaults(func=cmd_evaluate)
    return parser


def _one_line_warning(message, category, filename, lineno, line=None):
    return f"cpgbn: warning: {message}\n"


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "token_count", "absent") is None:
        from .model import DEFAULT_TOKEN_COUNT
        args.token_count = DEFAULT_TOKEN_COUNT
    if args.command == "transform" and args.burn_in is not None and args.iterations is None:
        parser.error("--burn-in needs --iterations")
    # a named dataset that is nowhere on disk: offer to download it when a person is at a terminal
    os.environ.setdefault("CPGBN_DOWNLOAD", "ask")
    previous_format = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        return args.func(args)
    except CPGBNInputError as exc:
        print(f"cpgbn: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"cpgbn: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("cpgbn: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = previous_format


if __name__ == "__main__":
    sys.exit(main())
