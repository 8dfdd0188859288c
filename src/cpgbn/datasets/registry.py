"""The paper's four datasets: their files, classes, splits and where the data folder is.

Light on purpose (standard library only): the loaders (:mod:`cpgbn.datasets.loaders`), the
download machinery (:mod:`cpgbn.datasets.download`) and the command line all start from
these facts, and none of them needs the others to read them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpgbn.errors import DataFileError

__all__ = ["CACHE_ENV", "DATASETS", "DOWNLOAD_ENV", "ENV_VAR", "PROTOCOLS", "SPECS", "SPLITS",
           "DatasetSpec", "cache_dir", "check_name", "dataset_info", "has_dataset"]

DATASETS = ("mr", "subj", "trec", "imdb")
SPLITS = ("train", "test", "all")
PROTOCOLS = ("authors", "cv")
ENV_VAR = "CPGBN_DATA"
DOWNLOAD_ENV = "CPGBN_DOWNLOAD"
CACHE_ENV = "XDG_CACHE_HOME"


@dataclass(frozen=True)
class DatasetSpec:
    """The files and label set of one dataset, under ``<data folder>/<folder>/``."""

    folder: str
    files: dict[str, str]  # split name -> file name; "all" for a single unsplit file
    classes: tuple[str, ...]
    vocab_size: int  # the paper's V_pre
    authors_rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # per-label rows
    fine_files: dict[str, str] = field(default_factory=dict)
    n_fine_classes: int = 0


SPECS = {
    "mr": DatasetSpec("MR", {"all": "all.tsv"}, ("neg", "pos"), 20000,
                      authors_rows={"test": (0, 500), "train": (500, 5300)}),
    "subj": DatasetSpec("SUBJ", {"all": "all.tsv"}, ("obj", "subj"), 20000,
                        authors_rows={"train": (0, 4500), "test": (4500, 5000)}),
    "trec": DatasetSpec("TREC", {"train": "train.tsv", "test": "test.tsv"},
                        ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"), 8000,
                        fine_files={"train": "train_fine.tsv", "test": "test_fine.tsv"},
                        n_fine_classes=50),
    "imdb": DatasetSpec("IMDB", {"train": "train.tsv.gz", "test": "test.tsv.gz"},
                        ("neg", "pos"), 30000),
}


def check_name(name) -> str:
    """The dataset key of ``name`` (case-insensitive); DataFileError if unknown."""
    key = name.lower() if isinstance(name, str) else None
    if key not in SPECS:
        raise DataFileError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return key


def cache_dir() -> Path:
    """The user cache for downloaded datasets: ``$XDG_CACHE_HOME/cpgbn`` or ``~/.cache/cpgbn``."""
    base = os.environ.get(CACHE_ENV, "")
    if base and os.path.isabs(base):  # the XDG spec says to ignore a relative path
        return Path(base) / "cpgbn"
    return Path.home() / ".cache" / "cpgbn"


def has_dataset(data_dir: str | os.PathLike, name: str) -> bool:
    """Whether ``data_dir`` holds every file of dataset ``name`` (as ``cpgbn download`` writes)."""
    spec = SPECS[check_name(name)]
    folder = Path(data_dir) / spec.folder
    return all((folder / f).is_file() for f in (*spec.files.values(), *spec.fine_files.values()))


def dataset_info(name: str) -> dict[str, Any]:
    """Files, classes, splits and the recommended vocabulary size of a dataset (plain dict)."""
    key = check_name(name)
    spec = SPECS[key]
    info: dict[str, Any] = {
        "name": key,
        "files": [f"{spec.folder}/{f}" for f in (*spec.files.values(), *spec.fine_files.values())],
        "classes": list(spec.classes),
        "n_classes": len(spec.classes),
        "vocab_size": spec.vocab_size,
        "protocols": list(PROTOCOLS) if spec.authors_rows else ["authors"],
        "official_split": not spec.authors_rows,
    }
    if spec.authors_rows:
        n_classes = len(spec.classes)
        info["split_sizes"] = {s: n_classes * (b - a) for s, (a, b) in spec.authors_rows.items()}
    if spec.n_fine_classes:
        info["n_fine_classes"] = spec.n_fine_classes
    return info
