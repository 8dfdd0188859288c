"""The ``cpgbn`` command line: a thin layer that parses, calls the library and prints.

Every user error (bad file, bad parameter, bad model directory) is a CPGBNInputError: the
command prints ``cpgbn: error: <one line>`` and exits with status 2.  A worker of a
distributed fit that fails, dies or hangs (a WorkerError) is reported on one line too, with
status 1, as is running out of memory (the host's, or a GPU's: torch's OutOfMemoryError),
which a fit's memory estimate did not foresee.  Output files are written atomically, so a
failed command leaves nothing half-written.

One module per command group, each adding its subcommands to the parser built here:
:mod:`~cpgbn.cli.fit` (fit, transform), :mod:`~cpgbn.cli.explain` (topics, tree, report,
summary), :mod:`~cpgbn.cli.classify` (predict, explain), :mod:`~cpgbn.cli.evaluate` and
:mod:`~cpgbn.cli.download`; the argument types and
document reading they share are in :mod:`~cpgbn.cli.common`.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from ..version import VERSION
from ..errors import CPGBNInputError, WorkerError
from . import classify, download, evaluate, explain, fit

__all__ = ["EXIT_USAGE", "SUBCOMMANDS", "build_parser", "main"]

EXIT_USAGE = 2

#: The subcommands, in the order ``cpgbn --help`` lists them.
SUBCOMMANDS = (fit.add_fit_parser, fit.add_transform_parser, explain.add_topics_parser,
               explain.add_tree_parser, download.add_download_parser, explain.add_report_parser,
               explain.add_summary_parser, evaluate.add_evaluate_parser,
               classify.add_predict_parser, classify.add_explain_parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cpgbn", description="Convolutional Poisson Gamma Belief Network: phrase-level deep "
                                  "topic models fitted by Gibbs sampling.")
    parser.add_argument("--version", action="version", version=f"cpgbn {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_parser in SUBCOMMANDS:
        add_parser(sub)
    return parser


def _one_line_warning(message, category, filename, lineno, line=None):
    return f"cpgbn: warning: {message}\n"


def _one_of_several_workers(args) -> str | None:
    """The one-line error of a command run in one of several torchrun workers without
    --distributed (each would run the whole job alone, all writing one output), else None."""
    world = os.environ.get("WORLD_SIZE", "1")
    if getattr(args, "distributed", False) or not world.isdigit() or int(world) < 2:
        return None
    fix = ("add --distributed" if hasattr(args, "distributed")
           else f"cpgbn {args.command} runs in one process: start it without torchrun")
    return (f"this process is one of {world} workers started by torchrun (WORLD_SIZE={world}) "
            f"but --distributed is not set: each would run `cpgbn {args.command}` on the whole "
            f"data alone and write the same output; {fix}")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "transform" and args.burn_in is not None and args.iterations is None:
        parser.error("--burn-in needs --iterations")
    # a named dataset that is nowhere on disk: offer to download it when a person is at a terminal
    os.environ.setdefault("CPGBN_DOWNLOAD", "ask")
    previous_format = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        refusal = _one_of_several_workers(args)
        if refusal is not None:
            raise CPGBNInputError(refusal)
        return args.func(args)
    except CPGBNInputError as exc:
        print(f"cpgbn: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WorkerError as exc:   # a distributed run's worker failed: not the input's fault
        print(f"cpgbn: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:   # the reader of stdout left (| head): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())   # so that exiting flushes nowhere
        return 141
    except OSError as exc:
        print(f"cpgbn: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
              file=sys.stderr)
        return EXIT_USAGE
    except (MemoryError, RuntimeError) as exc:
        if type(exc).__name__ == "OutOfMemoryError":   # torch's, for a GPU's memory
            hint, where = "or free the GPU (nvidia-smi lists who holds it)", "GPU "
        elif isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
            hint, where = "or --inference hybrid (it holds minibatches)", ""  # host; torch's CPU
        else:
            raise
        print(f"cpgbn: error: out of {where}memory; use fewer kernels, a smaller vocabulary or "
              f"fewer documents, {hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cpgbn: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = previous_format
