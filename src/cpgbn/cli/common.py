"""What the ``cpgbn`` subcommands share: argument types and groups, and reading documents.

The argument types raise ``argparse.ArgumentTypeError`` with a message that names the bad
value; argparse turns it into ``cpgbn <command>: error: argument --x: <message>`` and exit
status 2, as for every other usage error.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..datasets.registry import DATASETS
from ..errors import CPGBNInputError
from ..modes import MODES

__all__ = ["DATA_HELP", "add_data_args", "add_inference_args", "add_run_args", "data_file",
           "inference_params", "layer_sizes", "positive_float", "positive_int", "read_documents",
           "token_count"]


#: The help of a DATA argument that :func:`read_documents` reads.
DATA_HELP = ("a text file (.tsv: label<TAB>text, else one document per line) or a dataset: "
             + ", ".join(DATASETS))


def layer_sizes(text: str) -> tuple[int, ...]:
    """argparse type of ``--layers``: widths like ``200`` or ``200,100,50`` (or ``200-100-50``)."""
    parts = [p for p in text.replace("-", ",").split(",") if p.strip()]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers must be integers like 200 or 200,100,50, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every layer size must be >= 1, got {text!r}")
    return values


def token_count(text: str):
    """argparse type of ``--token-count``: an integer or ``bernoulli-poisson``."""
    if text == "bernoulli-poisson":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"token count must be an integer or 'bernoulli-poisson', got {text!r}")


def positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type of a finite number that must be > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def add_inference_args(p):
    """``--inference``, ``--batch-size``, ``--epochs`` and ``--learning-rate``: how a model is
    fitted (:func:`inference_params` turns them into estimator parameters)."""
    p.add_argument("--inference", choices=MODES, default="gibbs",
                   help="gibbs: full-batch Gibbs sampling (default); minibatch-gibbs: local Gibbs "
                        "sweeps + TLASGR-MCMC per minibatch; hybrid: the paper's Weibull encoder "
                        "+ TLASGR-MCMC (needs PyTorch)")
    p.add_argument("--batch-size", type=positive_int, default=100,
                   help="documents per minibatch (minibatch modes; default %(default)s)")
    p.add_argument("--epochs", type=positive_int, default=10,
                   help="passes over the training documents (minibatch modes; default "
                        "%(default)s)")
    p.add_argument("--learning-rate", type=positive_float, default=1e-3,
                   help="the encoder's Adam step size (hybrid; default %(default)g)")


def inference_params(args) -> dict:
    """The estimator parameters of :func:`add_inference_args`'s options."""
    return dict(inference=args.inference, batch_size=args.batch_size, n_epochs=args.epochs,
                learning_rate=args.learning_rate)


def add_data_args(p, *, split_help="split of a named dataset (default %(default)s)",
                  split="train"):
    """``--split`` (default ``split``), ``--data-dir`` and ``--format``: how
    :func:`read_documents` reads DATA."""
    p.add_argument("--split", default=split, choices=["train", "test", "all"], help=split_help)
    p.add_argument("--data-dir", default=None,
                   help="folder with the named datasets (default: $CPGBN_DATA)")
    p.add_argument("--format", default="auto", choices=["auto", "tsv", "lines"],
                   help="file layout: label<TAB>text (tsv) or one document per line (default: by "
                        "extension, .tsv/.tsv.gz = tsv)")


def add_run_args(p):
    """``--threads`` and ``--quiet`` of the commands that run the sampler."""
    p.add_argument("--threads", type=int, default=None,
                   help="numba threads, and torch's for the hybrid inference (default: all cores)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def data_file(data: str, fmt: str):
    """DATA as a :class:`~cpgbn.text.TextFile` when it names a file (not a dataset), else None."""
    from ..text import TextFile
    if Path(data).exists() or fmt != "auto" or os.sep in data or \
            data.endswith((".tsv", ".txt", ".gz")):
        return TextFile(data, fmt)
    return None


def read_documents(data: str, split: str, data_dir, fmt: str):
    """(texts, labels or None) from a file path, a dataset name, or "-": standard input, one
    document per line (``--format tsv``: label<TAB>text lines)."""
    from ..datasets import DATASETS, load_dataset
    if data == "-":
        return _read_stdin(fmt)
    source = data_file(data, fmt)
    if source is not None:
        return source.read()
    if data.lower() in DATASETS:
        return load_dataset(data, split, data_dir=data_dir)
    raise CPGBNInputError(f"{data!r} is neither an existing file nor a dataset name "
                          f"({', '.join(DATASETS)})")


def _read_stdin(fmt: str):
    """(texts, labels or None) of standard input's lines (blank lines skipped)."""
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    lines = [line for line in lines if line.strip()]
    if fmt != "tsv":
        return lines, None
    labels, texts = [], []
    for number, line in enumerate(lines, start=1):
        label, tab, text = line.partition("\t")
        if not tab:
            raise CPGBNInputError(f"standard input line {number} has no TAB: --format tsv reads "
                                  "label<TAB>text lines")
        labels.append(label)
        texts.append(text)
    return texts, labels
