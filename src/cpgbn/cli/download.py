"""``cpgbn download NAME``: fetch a dataset from its public source into the data folder.

Its errors are CPGBNInputError (DataFileError), which :func:`cpgbn.cli.main` prints as one
line with status 2.
"""
from __future__ import annotations

import argparse

from ..datasets.registry import DATASETS

__all__ = ["add_download_parser", "cmd_download"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"timeout must be a positive number of seconds, "
                                         f"got {text!r}")
    return value


def add_download_parser(sub) -> argparse.ArgumentParser:
    """Add ``download`` to the subcommand parser ``sub``; return its parser."""
    from ..datasets.download import DEFAULT_TIMEOUT, MIRROR_ENV

    p = sub.add_parser(
        "download", help="download a dataset from its public source",
        description="Download dataset NAME from its authors' public page, verify the original "
                    "files' sha256, and convert them to the label<TAB>text files the loaders "
                    "read. Nothing is downloaded if the files are already there.")
    p.add_argument("dataset", metavar="NAME", type=str.lower, choices=DATASETS,
                   help="mr, subj, trec or imdb (elec cannot be downloaded: the message says "
                        "where to put its files)")
    p.add_argument("--data-dir", default=None,
                   help="where to put it (default: $CPGBN_DATA, else ~/.cache/cpgbn or "
                        "$XDG_CACHE_HOME/cpgbn)")
    p.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT,
                   help="seconds to wait for the server (default %(default)g)")
    p.add_argument("--mirror", default=None, metavar="URL",
                   help=f"base URL holding the original files (default: ${MIRROR_ENV}, else "
                        f"the datasets' own pages)")
    p.add_argument("--force", action="store_true", help="download even if the files are there")
    p.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    p.set_defaults(func=cmd_download)
    return p


def cmd_download(args) -> int:
    from ..datasets import dataset_info, fetch, has_dataset
    from ..datasets.download import target_dir
    from ..datasets.registry import SPECS

    name = args.dataset
    target = target_dir(args.data_dir)
    if has_dataset(target, name) and not args.force:
        print(f"{name}: already in {target / SPECS[name].folder}; nothing downloaded")
        return 0
    root = fetch(name, args.data_dir, progress=not args.quiet, timeout=args.timeout,
                 mirror=args.mirror, force=args.force)
    files = ", ".join(dataset_info(name)["files"])
    print(f"{name}: downloaded and verified {files} in {root}")
    return 0
