"""The paper's datasets: their files, classes, splits and where the data folder is.

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

__all__ = ["CACHE_ENV", "DATASETS", "DOWNLOADABLE", "DOWNLOAD_ENV", "ENV_VAR", "PROTOCOLS",
           "SPECS", "SPLITS", "DatasetSpec", "cache_dir", "check_name", "dataset_info",
           "dataset_files", "has_dataset"]

DATASETS = ("mr", "subj", "trec", "imdb", "elec")
#: The datasets ``cpgbn download`` can fetch; the others a user must put in the data folder.
DOWNLOADABLE = ("mr", "subj", "trec", "imdb")
SPLITS = ("train", "test", "all")
PROTOCOLS = ("authors", "cv")
ENV_VAR = "CPGBN_DATA"
DOWNLOAD_ENV = "CPGBN_DOWNLOAD"
CACHE_ENV = "XDG_CACHE_HOME"


@dataclass(frozen=True)
class DatasetSpec:
    """The files and label set of one dataset, under ``<data folder>/<folder>/``.

    ``files`` are ``label<TAB>text`` files, unless ``label_files`` is given: then ``files`` hold
    one document per line and ``label_files`` one label per line, line for line (Johnson &
    Zhang's ``.txt.tok`` and ``.cat`` files).  ``obtain``: how a user gets a dataset that
    ``cpgbn download`` cannot fetch.
    """

    folder: str
    files: dict[str, str]  # split name -> file name; "all" for a single unsplit file
    classes: tuple[str, ...]
    vocab_size: int  # the paper's V_pre
    authors_rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # per-label rows
    fine_files: dict[str, str] = field(default_factory=dict)
    n_fine_classes: int = 0
    label_files: dict[str, str] = field(default_factory=dict)  # split name -> labels, one a line
    obtain: str = ""


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
    # Johnson & Zhang (NAACL 2015): Amazon electronics reviews, 25,000 + 25,000; "1" is negative,
    # "2" positive.  Not redistributable here, so never downloaded.
    "elec": DatasetSpec("ELEC", {"train": "elec-25k-train.txt.tok", "test": "elec-test.txt.tok"},
                        ("1", "2"), 30000,
                        label_files={"train": "elec-25k-train.cat", "test": "elec-test.cat"},
                        obtain="Johnson & Zhang's elec2.tar.gz (riejohnson.com/cnn_data.html)"),
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


def dataset_files(name: str) -> list[str]:
    """The file names of dataset ``name`` inside its folder: texts, labels, fine labels."""
    spec = SPECS[check_name(name)]
    return [*spec.files.values(), *spec.label_files.values(), *spec.fine_files.values()]


def has_dataset(data_dir: str | os.PathLike, name: str) -> bool:
    """Whether ``data_dir`` holds every file of dataset ``name`` (as ``cpgbn download`` writes)."""
    folder = Path(data_dir) / SPECS[check_name(name)].folder
    return all((folder / f).is_file() for f in dataset_files(name))


def dataset_info(name: str) -> dict[str, Any]:
    """Files, classes, splits and the recommended vocabulary size of a dataset (plain dict)."""
    key = check_name(name)
    spec = SPECS[key]
    info: dict[str, Any] = {
        "name": key,
        "files": [f"{spec.folder}/{f}" for f in dataset_files(key)],
        "classes": list(spec.classes),
        "n_classes": len(spec.classes),
        "vocab_size": spec.vocab_size,
        "protocols": list(PROTOCOLS) if spec.authors_rows else ["authors"],
        "official_split": not spec.authors_rows,
        "downloadable": key in DOWNLOADABLE,
    }
    if spec.authors_rows:
        n_classes = len(spec.classes)
        info["split_sizes"] = {s: n_classes * (b - a) for s, (a, b) in spec.authors_rows.items()}
    if spec.n_fine_classes:
        info["n_fine_classes"] = spec.n_fine_classes
    return info
