"""``cpgbn fit`` and ``cpgbn transform``: train a model, and infer features with a saved one."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..errors import CPGBNInputError
from ..params import CLASSIFIER_PARAMETERS, DEFAULT_TOKEN_COUNT
from .common import (DATA_HELP, add_data_args, add_inference_args, add_run_args, data_file,
                     inference_params, layer_sizes, positive_float, read_documents, token_count)

__all__ = ["add_fit_parser", "add_transform_parser", "cmd_fit", "cmd_transform"]

#: ``fit --supervised``'s default xi: the classifier's (cpgbn.params)
CLASSIFIER_XI = next(p.default for p in CLASSIFIER_PARAMETERS if p.name == "xi")


def cmd_fit(args) -> int:
    from ..files import check_replaceable
    from ..modes import mode_class, registered_mode
    if args.supervised:
        if args.inference not in ("gibbs", "hybrid"):   # gibbs: the option's default
            raise CPGBNInputError(f"--supervised trains the hybrid inference's encoder; "
                                  f"leave --inference out (got {args.inference})")
        mode = registered_mode("supervised")
    else:
        mode = mode_class(args.inference)
    if args.semi_supervised and not args.supervised:
        raise CPGBNInputError("--semi-supervised is an option of --supervised")
    if args.distributed:
        return _fit_distributed(args, mode)
    check_replaceable(args.out)
    # the minibatch modes read a file a block of lines at a time
    streamed = data_file(args.data, args.format) if mode.streams_files else None
    if args.semi_supervised:
        if streamed is None:
            raise CPGBNInputError("--semi-supervised reads a file whose unlabelled lines have "
                                  "an empty label (<TAB>text); give the file's path")
        from ..text import TextFile
        streamed = TextFile(streamed.path, streamed.format, missing_labels=True)
    labels = None   # a streamed labelled file carries its own
    if streamed is None:
        texts, labels = read_documents(args.data, args.split, args.data_dir, args.format)
        if args.supervised and labels is None:
            raise CPGBNInputError(f"--supervised needs labels: {args.data} has none (give "
                                  "label<TAB>text lines, a .tsv file or --format tsv)")
    else:
        texts = streamed
    model = _estimator(args)
    checkpoint = Path(f"{args.out}.checkpoint")
    if args.resume and (checkpoint / "checkpoint.json").is_file():
        print(f"resuming from {checkpoint}", file=sys.stderr)
    start = time.perf_counter()
    model.fit(texts, labels, checkpoint_dir=checkpoint, checkpoint_every=args.checkpoint_every,
              resume=args.resume)
    seconds = time.perf_counter() - start
    model.save(args.out)
    documents = (f"{len(texts)} documents" if streamed is None
                 else f"{streamed.path} (streamed in blocks)")
    named, figure = _summary(model, mode, args)
    _report(model, named, documents, seconds, figure, args.out)
    return 0


def _estimator(args):
    from ..model import CPGBN
    if args.supervised:
        from ..classifier import CPGBNClassifier
        params = inference_params(args)
        params.pop("inference")
        return CPGBNClassifier(
            layers=args.layers, filter_width=args.filter_width, vocab_size=args.vocab_size,
            token_count=args.token_count, padding=args.padding, eta=args.eta, xi=args.xi,
            semi_supervised=args.semi_supervised,
            random_state=args.seed, n_threads=args.threads, device=args.device,
            progress=not args.quiet, **params)
    return CPGBN(layers=args.layers, filter_width=args.filter_width, vocab_size=args.vocab_size,
                 token_count=args.token_count, padding=args.padding, eta=args.eta,
                 pooling_concentration=args.pooling_concentration, n_iter=args.iterations,
                 burn_in=args.iterations * 3 // 4 if args.burn_in is None else args.burn_in,
                 random_state=args.seed, n_threads=args.threads, device=args.device,
                 progress=not args.quiet, **inference_params(args))


def _report(model, named: str, documents: str, seconds: float, figure: str, out) -> None:
    print(f"fitted CPGBN {'-'.join(map(str, model.layers_))}{named} on {documents} "
          f"({model.n_train_tokens_} tokens, V={len(model.vocabulary_)}) in {seconds:.1f}s; "
          f"{figure} ({model.observation_model.describe()}); saved to {out}")


def _fit_distributed(args, mode) -> int:
    """``fit --distributed``: this process is one worker (torchrun's environment); it reads
    its lines of DATA, and the root saves the model and reports, once, after the group has
    closed (so saving a large model runs under no worker's timeout)."""
    from ..errors import CPGBNInputError
    from ..files import check_replaceable
    if not mode.distributes:
        raise CPGBNInputError(f"--distributed does not run --inference {args.inference}")
    source = _worker_source(args)
    from ..backends.torch.distributed import TorchCommunicator
    model = _estimator(args)
    comm = TorchCommunicator.from_environment(timeout=args.timeout)
    if comm.is_root:
        check_replaceable(args.out)   # only the root writes
    checkpoint = Path(f"{args.out}.checkpoint")   # on the root's disk; the root reads it
    if comm.is_root and args.resume and (checkpoint / "checkpoint.json").is_file():
        print(f"resuming from {checkpoint}", file=sys.stderr)
    start = time.perf_counter()
    with comm:
        model.fit(source, communicator=comm, checkpoint_dir=checkpoint,
                  checkpoint_every=args.checkpoint_every, resume=args.resume)
    if comm.is_root:
        seconds = time.perf_counter() - start
        model.save(args.out)
        documents = f"{len(model.train_features_)} documents ({comm.world_size} workers)"
        named, figure = _summary(model, mode, args)
        _report(model, named, documents, seconds, figure, args.out)
    _leave_worker()


def _worker_source(args):
    """DATA as the file a distributed worker reads its lines of (a dataset name is refused)."""
    source = data_file(args.data, args.format)
    if source is None:
        raise CPGBNInputError("--distributed reads a data file, each worker its own lines; "
                              "give the file's path, not a dataset name")
    if getattr(args, "semi_supervised", False):   # unlabelled lines: an empty label
        from ..text import TextFile
        source = TextFile(source.path, source.format, missing_labels=True)
    return source


def _leave_worker() -> None:
    """End a distributed worker whose work is saved.  Leave now rather than through the
    interpreter's finalisation, in which gloo's threads, destroyed with the objects that held
    them, now and then abort the process ("terminate called without an active exception",
    seen once in about twenty runs here; pytorch/pytorch PR 179291 describes the same
    finalisation crash): torchrun would count a finished worker as failed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _summary(model, mode, args) -> tuple[str, str]:
    """(what was fitted, beside the layers; its figure of merit) for the report line."""
    if args.supervised:
        return (f" classifier (sCPGBN, xi {args.xi:g})",
                f"{len(model.loss_trace_)} minibatch steps; classes "
                f"{', '.join(map(str, model.classes_))}")
    if mode.loss_name is None:   # the Gibbs chain's log-likelihood
        return "", f"log-likelihood per token {model.log_likelihood():.4f}"
    # the minibatch modes' loss, named (it is no log-likelihood)
    return (f" ({args.inference})", f"{len(model.loss_trace_)} minibatch steps; last step's "
            f"{mode.loss_name} {model.loss_trace_[-1]:.4g}")


def cmd_transform(args) -> int:
    from ..files import check_file_target
    from ..load import load_estimator
    check_file_target(args.out)
    model = load_estimator(args.model_dir)
    model.set_params(progress=not args.quiet, n_threads=args.threads)
    if args.iterations is not None:
        burn_in = args.iterations * 3 // 4 if args.burn_in is None else args.burn_in
        model.set_params(transform_iter=args.iterations, transform_burn_in=burn_in)
    if args.refine_iter is not None:
        model.set_params(refine_iter=args.refine_iter)
    if args.encoder_precision is not None:
        model.set_params(encoder_precision=args.encoder_precision)
    if args.distributed:   # one worker: its lines of DATA; the root writes every row
        source = _worker_source(args)
        from ..backends.torch.distributed import TorchCommunicator
        with TorchCommunicator.from_environment(timeout=args.timeout) as comm:
            features = model.transform(source, all_layers=args.all_layers,
                                       communicator=comm)
        if comm.is_root:
            _write_features(args.out, features, f" ({comm.world_size} workers)")
        _leave_worker()
    texts, _ = read_documents(args.data, args.split, args.data_dir, args.format)
    features = model.transform(texts, all_layers=args.all_layers)
    _write_features(args.out, features, "")
    return 0


def _write_features(out, features, workers: str) -> None:
    import numpy as np

    from ..files import write_file_atomically
    write_file_atomically(out, lambda fh: np.save(fh, features), binary=True)
    print(f"wrote features of {features.shape[0]} documents x {features.shape[1]}{workers} "
          f"to {out}")


def add_fit_parser(sub):
    """Add ``fit`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("fit", help="fit a model and save it",
                       description="Fit CPGBN on DATA (a file or a dataset name) and save it.")
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    add_data_args(p)
    # a string default goes through the type, as a typed value would: (200,), shown as 200
    p.add_argument("--layers", type=layer_sizes, default="200",
                   help="layer widths, e.g. 200 or 200,100,50 (default %(default)s)")
    p.add_argument("--filter-width", type=int, default=3,
                   help="F, word positions per kernel (default %(default)s)")
    p.add_argument("--vocab-size", type=int, default=8000,
                   help="vocabulary rows including the out-of-vocabulary row (default "
                        "%(default)s)")
    p.add_argument("--token-count", type=token_count, default=DEFAULT_TOKEN_COUNT,
                   help="pseudo-count per token, or 'bernoulli-poisson' (default %(default)s)")
    p.add_argument("--padding", type=int, default=0,
                   help="empty columns before and after every document, so kernels may overhang "
                        "the edges (0 to F-1; default %(default)s, the paper's model)")
    p.add_argument("--eta", type=float, default=0.05,
                   help="Dirichlet concentration (default %(default)s)")
    p.add_argument("--pooling-concentration", type=positive_float, default=None, metavar="BETA",
                   help="the pooling layer's own positional concentration, in count units "
                        "(default: the paper's tied prior)")
    p.add_argument("--iterations", type=int, default=200,
                   help="Gibbs sweeps (default %(default)s); in the minibatch modes those of "
                        "inference (transform)")
    p.add_argument("--burn-in", type=int, default=None,
                   help="sweeps before averaging (default: 3/4 of --iterations)")
    add_inference_args(p)
    p.add_argument("--supervised", action="store_true",
                   help="fit the classifier (sCPGBN: the hybrid inference with a softmax on "
                        "the thetas) on DATA's labels; `cpgbn predict` and `cpgbn explain` "
                        "read it (needs PyTorch)")
    p.add_argument("--xi", type=positive_float, default=CLASSIFIER_XI,
                   help="with --supervised: the weight of the cross-entropy in the loss "
                        "L_g + xi L_c (default %(default)g)")
    p.add_argument("--semi-supervised", action="store_true",
                   help="with --supervised: lines with an empty label (<TAB>text) are "
                        "unlabelled documents that train the model too (default: an error)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="where to save the model")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="save the sampler state to MODEL_DIR.checkpoint every N sweeps, or N "
                        "minibatch steps in the minibatch modes (default %(default)s)")
    p.add_argument("--device", default=None,
                   help="run the PyTorch sampler on this device (cpu, cuda, cuda:1); default: numba")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted fit from MODEL_DIR.checkpoint (same result as an "
                        "uninterrupted run)")
    p.add_argument("--distributed", action="store_true",
                   help="one worker of a data-parallel fit, under torchrun "
                        "--nproc-per-node N: each worker reads its lines of DATA; a Gibbs "
                        "model equals one process', the minibatch modes train on every "
                        "worker's batches at once; rank 0 saves the model and checkpoints; "
                        "--resume continues them with any number of workers (under torchrun "
                        "--max-restarts N, a restarted group resumes by itself)")
    p.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS",
                   help="with --distributed: how long a worker waits for the others before it "
                        "stops with an error naming them (default %(default)g)")
    add_run_args(p)
    p.set_defaults(func=cmd_fit)
    return p


def add_transform_parser(sub):
    """Add ``transform`` to the subcommand parser ``sub``; return its parser."""
    p = sub.add_parser("transform", help="document features from a saved model",
                       description="Infer features (mean theta^(1) / L) of DATA with a saved model.")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model saved by `cpgbn fit`")
    p.add_argument("data", metavar="DATA", help=DATA_HELP)
    add_data_args(p)
    p.add_argument("--out", required=True, metavar="FEATURES.npy",
                   help="the numpy file to write: one row of features per document")
    p.add_argument("--all-layers", action="store_true", help="concatenate the features of every layer")
    p.add_argument("--iterations", type=int, default=None, help="sweeps (default: as in training)")
    p.add_argument("--burn-in", type=int, default=None,
                   help="burn-in sweeps (with --iterations; default: 3/4 of --iterations)")
    p.add_argument("--refine-iter", type=int, default=None,
                   help="a model fitted with --inference hybrid: Gibbs sweeps after the "
                        "encoder's mean (default: as saved, 0)")
    p.add_argument("--encoder-precision", choices=("float32", "bfloat16"), default=None,
                   help="a model fitted with --inference hybrid: the arithmetic of the encoder's "
                        "position head; bfloat16 is faster on CPUs with bfloat16 dot products "
                        "(default: as saved, float32)")
    p.add_argument("--distributed", action="store_true",
                   help="one worker of a distributed transform under torchrun "
                        "--nproc-per-node N: each worker reads its lines of DATA, rank 0 "
                        "writes every document's features (those of one process)")
    p.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS",
                   help="with --distributed: how long a worker waits for the others "
                        "(default %(default)g)")
    add_run_args(p)
    p.set_defaults(func=cmd_transform)
    return p
