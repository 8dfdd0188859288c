"""Loaders for the paper's text-classification datasets: MR, SUBJ, TREC, IMDB and ELEC.

The data files live outside the package (see the data folder's README for their format and
provenance).  A loader finds them in the folder it is given, else in ``$CPGBN_DATA``, else in
the user cache (``~/.cache/cpgbn``), where ``cpgbn download NAME`` (or ``CPGBN_DOWNLOAD=1``)
puts them; see :mod:`cpgbn.datasets.download`.  ELEC cannot be downloaded: a user who has
Johnson & Zhang's files puts them in ``<data folder>/ELEC/`` (``elec-25k-train.txt.tok`` and
``elec-test.txt.tok``, one document per line, beside ``elec-25k-train.cat`` and
``elec-test.cat``, one label per line).  TREC, IMDB and ELEC come with official train/test
splits (ELEC's: 25,000 / 25,000).  MR and SUBJ do not; by default they are split
the way the CPGBN authors' notebooks did it, so results compare with the paper:

* MR: within each label, rows 0-499 are test and rows 500-5299 train (9,600 / 1,000; the
  last 31 rows of each label are unused);
* SUBJ: within each label, rows 0-4499 are train and rows 4500-4999 test (9,000 / 1,000).

``protocol="cv"`` gives stratified k-fold cross-validation instead, the usual protocol in
the wider literature.  Every split is returned in file order.
"""
from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cpgbn.datasets.registry import (DOWNLOAD_ENV, DOWNLOADABLE, ENV_VAR, PROTOCOLS, SPECS,
                                     SPLITS, DatasetSpec, cache_dir, check_name, dataset_files,
                                     has_dataset)
from cpgbn.errors import CPGBNInputError, DataFileError
from cpgbn.text.readers import read_labeled, read_lines

__all__ = ["fold_indices", "load_dataset", "resolve_data_dir"]


def resolve_data_dir(data_dir: str | os.PathLike | None = None, *, name: str | None = None,
                     download: bool | str | None = None) -> Path:
    """The data folder: ``data_dir`` if given, else ``$CPGBN_DATA``; it must exist.

    With a dataset ``name``, and neither of those set, the user cache (:func:`~cpgbn.datasets.registry.cache_dir`) is
    used if it holds that dataset.  Otherwise the dataset is downloaded there (into the
    given folder, if one was given and lacks the dataset) when ``download`` says so:
    True/False, "ask" (ask on the terminal, if there is one), or None for ``$CPGBN_DOWNLOAD``
    (1, 0 or ask; unset means 0).  If it is not downloaded, a DataFileError says how to get it.
    """
    key = None if name is None else check_name(name)
    if data_dir is not None:
        path, origin = Path(data_dir), "data directory"
    elif os.environ.get(ENV_VAR):
        path, origin = Path(os.environ[ENV_VAR]), f"{ENV_VAR} directory"
    elif key is None:
        raise DataFileError(
            "no data directory: pass --data-dir or set CPGBN_DATA "
            "(for development: ../shared/data), or run `cpgbn download NAME`"
        )
    else:
        cache = cache_dir()
        if has_dataset(cache, key):
            return cache
        if key not in DOWNLOADABLE:
            raise DataFileError(f"no data directory with {key}: {_where_to_put(key)}")
        if _download_wanted(download, key, cache):
            return _fetch(key, cache)
        raise DataFileError(
            f"no data directory with {key}: pass --data-dir or set CPGBN_DATA "
            f"(for development: ../shared/data), or run `cpgbn download {key}` to download it "
            f"into {cache} (CPGBN_DOWNLOAD=1 downloads automatically)"
        )
    if not path.exists():
        raise DataFileError(f"{path}: no such {origin}")
    if not path.is_dir():
        raise DataFileError(f"{path}: {origin} is not a directory")
    if key is not None:
        spec = SPECS[key]
        needed = (*spec.files.values(), *spec.label_files.values())  # fine labels: when read
        missing = [path / spec.folder / f for f in needed if not (path / spec.folder / f).is_file()]
        if missing and key not in DOWNLOADABLE:
            raise DataFileError(f"{missing[0]}: no such file; cpgbn cannot download {key}: "
                                f"{_where_to_put(key, path)}")
        if missing:
            if _download_wanted(download, key, path):
                return _fetch(key, path)
            where = f" --data-dir {path}" if data_dir is not None else ""
            raise DataFileError(f"{missing[0]}: no such file; run `cpgbn download {key}{where}` "
                                f"to download {key}")
    return path


def _where_to_put(key: str, data_dir: Path | None = None) -> str:
    """How to provide a dataset that cannot be downloaded (one line)."""
    spec = SPECS[key]
    where = (f"{data_dir / spec.folder}" if data_dir is not None
             else f"$CPGBN_DATA/{spec.folder}/ (or <--data-dir>/{spec.folder}/)")
    return (f"put {', '.join(dataset_files(key))} from {spec.obtain} in {where}")


def _fetch(key: str, path: Path) -> Path:
    from cpgbn.datasets.download import fetch  # the download machinery only when it is needed

    return fetch(key, path)


def _download_wanted(download: bool | str | None, key: str, target: Path) -> bool:
    if isinstance(download, bool):
        return download
    origin = DOWNLOAD_ENV if download is None else "download"
    value = (os.environ.get(DOWNLOAD_ENV, "") if download is None else str(download))
    value = value.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    if value == "ask":
        return _ask(key, target)
    raise CPGBNInputError(f"{origin} must be 1, 0 or ask, got {value!r}")


def _ask(key: str, target: Path) -> bool:
    """Offer the download on the terminal; False without one (or on end of input)."""
    import sys

    from cpgbn.datasets.download import SOURCES

    try:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive:
        return False
    source = SOURCES[key]
    print(f"cpgbn: {key} is not in {target}. Download it ({source.size}) from "
          f"{source.home} into {target}? [Y/n] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return bool(answer) and answer.strip().lower() in ("", "y", "yes")


def load_dataset(
    name: str,
    split: str = "train",
    *,
    data_dir: str | os.PathLike | None = None,
    protocol: str = "authors",
    fold: int = 0,
    n_folds: int = 10,
    seed: int = 0,
    fine: bool = False,
) -> tuple[list[str], list[str]]:
    """Load one split of a dataset as ``(texts, labels)``, in file order.

    ``split`` is "train", "test" or "all".  ``protocol="authors"`` uses the official
    split (TREC, IMDB, ELEC) or the CPGBN authors' fixed split (MR, SUBJ).  ``protocol="cv"``
    (MR and SUBJ only) uses ``StratifiedKFold(n_folds, shuffle=True,
    random_state=seed)``: fold ``fold`` is the test set and the other folds the training
    set.  ``fine=True`` selects TREC's 50 fine-grained labels.
    """
    key = check_name(name)
    spec = SPECS[key]
    if split not in SPLITS:
        raise CPGBNInputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if protocol not in PROTOCOLS:
        raise DataFileError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if protocol == "cv" and not spec.authors_rows:
        raise DataFileError(
            f"{key} has an official train/test split; protocol 'cv' is only for mr and subj")
    if fine and not spec.fine_files:
        raise CPGBNInputError(f"fine labels exist only for trec, not {key}")
    folder = resolve_data_dir(data_dir, name=key) / spec.folder
    if spec.label_files:
        return _load_separate_labels(folder, spec, split)
    if not spec.authors_rows:
        return _load_official(folder, spec.fine_files if fine else spec.files, split)
    path = folder / spec.files["all"]
    texts, labels = read_labeled(path)
    if split == "all":
        return texts, labels
    if protocol == "cv":
        index = _cv_indices(labels, split, fold, n_folds, seed)
    else:
        index = _authors_indices(labels, spec.authors_rows[split], path)
    return [texts[i] for i in index], [labels[i] for i in index]


def fold_indices(labels: Sequence[str], fold: int, n_folds: int = 10,
                 seed: int = 0) -> tuple[list[int], list[int]]:
    """(train rows, test rows) of stratified fold ``fold``, as indices into ``labels`` -- the
    labels of ``load_dataset(name, "all")`` -- for the same folds as ``protocol="cv"``."""
    return (_cv_indices(labels, "train", fold, n_folds, seed),
            _cv_indices(labels, "test", fold, n_folds, seed))


def _load_official(folder: Path, files: dict[str, str], split: str) -> tuple[list[str], list[str]]:
    parts = ("train", "test") if split == "all" else (split,)
    texts: list[str] = []
    labels: list[str] = []
    for part in parts:
        part_texts, part_labels = read_labeled(folder / files[part])
        texts += part_texts
        labels += part_labels
    return texts, labels


def _load_separate_labels(folder: Path, spec: DatasetSpec,
                          split: str) -> tuple[list[str], list[str]]:
    """An official split whose texts (one document per line) and labels (one per line) are in
    two files, line for line; a label file of another length is a DataFileError naming both."""
    texts: list[str] = []
    labels: list[str] = []
    for part in ("train", "test") if split == "all" else (split,):
        text_path, label_path = folder / spec.files[part], folder / spec.label_files[part]
        part_texts, part_labels = read_lines(text_path), read_lines(label_path)
        if len(part_texts) != len(part_labels):
            raise DataFileError(f"{label_path} has {len(part_labels)} labels but {text_path} has "
                                f"{len(part_texts)} documents; the files must match line for "
                                f"line")
        for number, label in enumerate(part_labels, start=1):
            label = label.strip()
            if not label:
                raise DataFileError(f"{label_path}: line {number}: empty label")
            labels.append(label)
        texts += part_texts
    return texts, labels


def _authors_indices(labels: Sequence[str], rows: tuple[int, int], path: Path) -> list[int]:
    """Rows ``start..stop-1`` of every label (counted within the label), in file order."""
    start, stop = rows
    by_label: dict[str, list[int]] = defaultdict(list)
    for i, label in enumerate(labels):
        by_label[label].append(i)
    chosen: list[int] = []
    for label, positions in by_label.items():
        if len(positions) < stop:
            raise DataFileError(
                f"{path}: label {label!r} has {len(positions)} rows; "
                f"the authors' split needs at least {stop}")
        chosen += positions[start:stop]
    return sorted(chosen)


def _cv_indices(labels: Sequence[str], split: str, fold: int, n_folds: int,
                seed: int) -> list[int]:
    """Train or test rows of stratified fold ``fold`` of ``n_folds``, in file order."""
    from sklearn.model_selection import StratifiedKFold  # only the cv protocol needs it

    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise CPGBNInputError(f"n_folds must be an integer >= 2, got {n_folds!r}")
    if isinstance(fold, bool) or not isinstance(fold, (int, np.integer)) \
            or not 0 <= fold < n_folds:
        raise CPGBNInputError(f"fold must be in 0..{n_folds - 1}, got {fold!r}")
    y = np.asarray(labels, dtype=object)
    splitter = StratifiedKFold(n_splits=int(n_folds), shuffle=True, random_state=seed)
    try:
        train, test = next(
            parts for k, parts in enumerate(splitter.split(np.zeros(len(y)), y)) if k == fold)
    except ValueError as exc:  # e.g. more folds than members of a class
        reason = " ".join(str(exc).split())
        raise CPGBNInputError(f"cannot make {n_folds} stratified folds: {reason}") from None
    chosen = train if split == "train" else test
    return sorted(int(i) for i in chosen)
