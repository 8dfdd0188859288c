"""Saving and loading fitted models: a directory with ``model.json`` and ``arrays.npz``.

* No pickle anywhere: JSON for metadata and the vocabulary, ``np.load(allow_pickle=False)``
  for arrays, so loading a model never executes code.
* Versioned: ``format_version`` is checked on load; a newer format is refused with a message
  naming both versions; the library version that wrote the model is recorded.  Version 2 added
  the ``padding`` parameter (a version-1 model has none: padding 0).
* Atomic: everything is written to a temporary sibling directory that replaces the target
  by rename, so an interrupted save leaves the old model (or nothing), never half a model.
* Checked: the sha256 of ``arrays.npz`` is stored in ``model.json``; truncation or corruption
  is reported as such.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ._version import __version__
from .errors import CPGBNInputError, ModelFormatError
from .inference.state import GlobalParameters, Hyperparameters
from .text.vocabulary import Vocabulary

FORMAT = "cpgbn-model"
FORMAT_VERSION = 2
_META = "model.json"
_ARRAYS = "arrays.npz"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _jsonable(value):
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def write_file_atomically(path, write, *, binary: bool = False) -> Path:
    """Call ``write(fh)`` on a temporary sibling of ``path``, then rename it into place.

    The file gets the permissions of any new file (the umask applies, not the temporary
    file's private mode); on failure nothing is left behind.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:  # name the file the caller asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename in (tmp, None):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


def check_file_target(path, option: str = "--out") -> None:
    """Raise :class:`CPGBNInputError` at once, before any long work, when ``path`` cannot
    become a file: it is a directory, or its nearest existing ancestor is not a writable
    directory.  (What only the write can tell, a full disk say, still fails then.)"""
    target = Path(path)
    if target.is_dir():
        raise CPGBNInputError(f"{option} {target} is a directory; give a file name")
    _check_creatable(target, option)


def _check_creatable(target: Path, option: str = "") -> None:
    """Raise unless the nearest existing ancestor of ``target`` is a writable directory."""
    existing = next(p for p in (target.parent, *target.parent.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        name = f"{option} {target}" if option else str(target)
        raise CPGBNInputError(f"{name}: cannot create it ({existing} is not a writable directory)")


def check_replaceable(directory, marker: str = _META) -> None:
    """Raise unless ``directory`` is free or holds an earlier save (never delete anything else)."""
    target = Path(directory)
    if target.exists() and not (target.is_dir() and (target / marker).is_file()):
        kind = "file" if not target.is_dir() else "directory that is not a saved cpgbn model"
        raise CPGBNInputError(f"refusing to overwrite {target}: it is a {kind}; choose another path")
    _check_creatable(target)


def write_directory_atomically(directory, write, *, marker: str = _META) -> None:
    """Call ``write(tmp_dir)`` then move ``tmp_dir`` into place at ``directory`` by rename.

    An existing ``directory`` is replaced only if it holds ``marker`` (i.e. it is an earlier
    save); anything else there is refused rather than deleted.
    """
    target = Path(directory)
    check_replaceable(target, marker)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as exc:  # name the directory the caller asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    try:
        write(tmp)
        for child in tmp.iterdir():
            _fsync_file(child)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def save_model(model, directory) -> None:
    g: GlobalParameters = model.globals_
    arrays = {"D": g.D, "r": g.r, "kernel_usage": model.kernel_usage()}
    for i, p in enumerate(g.phi):
        arrays[f"phi_{i + 2}"] = p

    def write(tmp: Path) -> None:
        np.savez(tmp / _ARRAYS, **arrays)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "library_version": __version__,
            "arrays_sha256": _sha256(tmp / _ARRAYS),
            "params": {k: _jsonable(v) for k, v in model.get_params().items()},
            "layers": list(model.layers_),
            "hyper": {k: _jsonable(v) for k, v in vars(model.hyper_).items()},
            "seed": int(model.seed_),
            "n_train_tokens": int(model.n_train_tokens_),
            "loglik_trace": [float(x) for x in model.loglik_trace_],
            "sweep_seconds": [float(x) for x in model.sweep_seconds_],
            "vocabulary": model.vocabulary_.to_dict(),
        }
        with open(tmp / _META, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)

    write_directory_atomically(directory, write)


def _read_meta(directory: Path) -> dict:
    if not directory.exists():
        raise ModelFormatError(f"model directory {directory} does not exist")
    if not directory.is_dir():
        raise ModelFormatError(f"{directory} is not a model directory (it is a file)")
    meta_path = directory / _META
    if not meta_path.is_file():
        raise ModelFormatError(f"{directory} is not a cpgbn model: {_META} is missing")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{meta_path} is corrupted or truncated ({exc.__class__.__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFormatError(f"{meta_path} is not a cpgbn model file")
    version = meta.get("format_version")
    if not isinstance(version, int):
        raise ModelFormatError(f"{meta_path} has no valid format_version")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"model in {directory} has format version {version} (written by cpgbn "
            f"{meta.get('library_version', '?')}); this cpgbn {__version__} reads format "
            f"version {FORMAT_VERSION} or older: upgrade cpgbn")
    if version < 1:
        raise ModelFormatError(f"model in {directory} has unknown format version {version}")
    return meta


def load_model(cls, directory):
    directory = Path(directory)
    meta = _read_meta(directory)
    arrays_path = directory / _ARRAYS
    if not arrays_path.is_file():
        raise ModelFormatError(f"model in {directory} is incomplete: {_ARRAYS} is missing")
    if _sha256(arrays_path) != meta.get("arrays_sha256"):
        raise ModelFormatError(f"{arrays_path} is corrupted or truncated (checksum mismatch)")
    try:
        with np.load(arrays_path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        vocabulary = Vocabulary.from_dict(meta["vocabulary"])
        layers = tuple(int(k) for k in meta["layers"])
        phi = [arrays[f"phi_{t}"] for t in range(2, len(layers) + 1)]
        g = GlobalParameters(arrays["D"].astype(np.float32), phi, arrays["r"])
        hyper_fields = dict(meta["hyper"])
        hyper_fields["eta"] = tuple(hyper_fields["eta"])
        hyper = Hyperparameters(**hyper_fields)
        params = dict(meta["params"])
        params["layers"] = tuple(params["layers"]) if isinstance(params["layers"], list) else params["layers"]
        if isinstance(params.get("eta"), list):
            params["eta"] = tuple(params["eta"])
        seed = int(meta["seed"])
        n_train_tokens = int(meta["n_train_tokens"])
        loglik_trace = np.asarray(meta["loglik_trace"], dtype=np.float64)
        sweep_seconds = np.asarray(meta["sweep_seconds"], dtype=np.float64)
        usage = np.asarray(arrays["kernel_usage"], dtype=np.float64)
        model = cls(**params)
    except (KeyError, TypeError, ValueError, zipfile.BadZipFile, OSError) as exc:
        raise ModelFormatError(f"model in {directory} is corrupted: {exc.__class__.__name__}: {exc}") from None
    if g.layers != layers or g.D.shape[0] != len(vocabulary):
        raise ModelFormatError(f"model in {directory} is inconsistent: array shapes do not match "
                               "its layers and vocabulary")
    model.globals_ = g
    model.vocabulary_ = vocabulary
    model.layers_ = layers
    model.hyper_ = hyper
    model.seed_ = seed
    model.n_train_tokens_ = n_train_tokens
    model.loglik_trace_ = loglik_trace
    model.sweep_seconds_ = sweep_seconds
    model.kernel_usage_ = usage
    model.format_version_ = meta["format_version"]
    model.saved_by_version_ = meta.get("library_version")
    return model
