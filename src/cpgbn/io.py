"""Saving and loading fitted models: a directory with ``model.json``, ``arrays.npz`` and
``timings.json``.

* No pickle anywhere: JSON for metadata and the vocabulary, ``np.load(allow_pickle=False)``
  for arrays, so loading a model never executes code.
* Versioned: ``format_version`` is checked on load; a newer format is refused with a message
  naming both versions; the library version that wrote the model is recorded.  Version 2 added
  the ``padding`` parameter (a version-1 model has none: padding 0); version 3 the minibatch
  inference modes: their parameters (absent: ``inference="gibbs"``), per-step traces and, for
  ``inference="hybrid"``, the encoder (its config in the JSON, its weights as arrays named
  ``encoder/<parameter>`` in the npz) and ``pooling_concentration`` (absent: None, the tied
  pooling prior).  The mixing diagnostic (``mixing_*`` arrays,
  ``mixing_n_collected``) is optional within versions 2 and 3: a model saved before it
  loads without ``mixing_``, and an older reader ignores it.  Version 4 moved the fit's
  wall-clock times (``sweep_seconds_``, ``step_seconds_``, the mixing diagnostic's seconds)
  out of ``model.json`` and ``arrays.npz`` into ``timings.json``, so that those two files are
  a function of the data, the parameters and the seed alone: two fits with one seed save them
  byte for byte the same (numpy dates every entry of the npz 1980-01-01).  Times are read
  from wherever a model of any version has them; a model without them loads with none.
  A classifier (:class:`cpgbn.classifier.CPGBNClassifier`, version 4 and later) adds its
  ``classes`` (JSON numbers or strings), ``paper_xi`` and ``estimator``, the class that saved it; a model
  without ``estimator`` was saved by :class:`~cpgbn.model.CPGBN` or :class:`~cpgbn.pgbn.PGBN`.
* Atomic: everything is written to a temporary sibling directory that replaces the target
  by rename, so an interrupted save leaves the old model (or nothing), never half a model.
* Checked: the sha256 of ``arrays.npz`` is stored in ``model.json``; truncation or corruption
  is reported as such.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np

from .version import VERSION
from .errors import ModelFormatError
from .files import MODEL_MARKER, write_directory_atomically
from .inference.mixing import Mixing
from .inference.state import GlobalParameters, Hyperparameters
from .modes.base import SAVED_ARRAYS, SAVED_JSON, SAVED_TIMINGS, FittedState
from .text.vocabulary import Vocabulary

FORMAT = "cpgbn-model"
FORMAT_VERSION = 4
_META = MODEL_MARKER
_ARRAYS = "arrays.npz"
_ENCODER = "encoder/"
_TIMINGS = "timings.json"
_MIXING_SECONDS = "mixing_seconds"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _jsonable(value):
    if isinstance(value, type):   # a mode class given as ``inference``: saved by its mode's name
        return getattr(value, "name", value.__name__)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _json_value(saved):
    """A ``saved_as="json"`` fitted value as the estimator holds it: the classes as an
    array, numbers as they are."""
    return np.asarray(saved) if isinstance(saved, list) else saved


def save_model(params: dict, fitted: FittedState, directory, *,
               estimator: str | None = None) -> None:
    """Write an estimator's parameters and its :class:`~cpgbn.modes.FittedState` to
    ``directory`` (module docstring); ``estimator``: the class name a loader must match (None:
    CPGBN or PGBN, whose parameters tell them apart)."""
    g: GlobalParameters = fitted.globals_
    arrays = {"D": g.D, "r": g.r, "kernel_usage": fitted.kernel_usage_}
    for i, p in enumerate(g.phi):
        arrays[f"phi_{i + 2}"] = p
    mixing = fitted.mixing_
    mixing_seconds = None
    if mixing is not None:   # the diagnostic's own wall-clock times go with the fit's
        mixing_arrays = mixing.arrays()
        mixing_seconds = [float(x) for x in mixing_arrays.pop(_MIXING_SECONDS)]
        arrays.update(mixing_arrays)
    for name in SAVED_ARRAYS:   # per-step traces; integer arrays (word ids) stay integers
        if getattr(fitted, name) is not None:
            value = np.asarray(getattr(fitted, name))
            arrays[name] = value if value.dtype.kind in "iu" else value.astype(np.float64)
    weights = fitted.encoder_weights_
    if weights is not None:
        arrays.update({f"{_ENCODER}{name}": np.asarray(w) for name, w in weights.items()})

    def write(tmp: Path) -> None:
        np.savez(tmp / _ARRAYS, **arrays)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "library_version": VERSION,
            "arrays_sha256": _sha256(tmp / _ARRAYS),
            "params": {k: _jsonable(v) for k, v in params.items()},
            "layers": list(fitted.layers_),
            "hyper": {k: _jsonable(v) for k, v in vars(fitted.hyper_).items()},
            "seed": int(fitted.seed_),
            "n_train_tokens": int(fitted.n_train_tokens_),
            "loglik_trace": [float(x) for x in fitted.loglik_trace_],
            "mixing_n_collected": None if mixing is None else int(mixing.n_collected),
            "vocabulary": fitted.vocabulary_.to_dict(),
        }
        if estimator is not None:
            meta["estimator"] = estimator
        if weights is not None:
            meta["encoder_config"] = {k: _jsonable(v) for k, v in fitted.encoder_config_.items()}
        for name, key in SAVED_JSON.items():   # a classifier's classes (numbers or strings), ...
            value = getattr(fitted, name)
            if value is not None:
                meta[key] = np.asarray(value).tolist()
        with open(tmp / _META, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
        timings = {name: None if getattr(fitted, name) is None
                   else [float(x) for x in getattr(fitted, name)] for name in SAVED_TIMINGS}
        timings[_MIXING_SECONDS] = mixing_seconds
        with open(tmp / _TIMINGS, "w", encoding="utf-8") as fh:
            json.dump(timings, fh)

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
            f"{meta.get('library_version', '?')}); this cpgbn {VERSION} reads format "
            f"version {FORMAT_VERSION} or older: upgrade cpgbn")
    if version < 1:
        raise ModelFormatError(f"model in {directory} has unknown format version {version}")
    return meta


def _read_timings(directory: Path, meta: dict, arrays: dict) -> dict:
    """The fit's wall-clock times (and the mixing diagnostic's): from ``timings.json``
    (version 4), or where versions 1-3 kept them (``model.json``'s "sweep_seconds", the npz's
    ``step_seconds_`` and ``mixing_seconds``); none when the file is missing (times are not
    part of the model)."""
    path = directory / _TIMINGS
    if path.is_file():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelFormatError(f"{path} is corrupted or truncated "
                                   f"({exc.__class__.__name__})") from None
    else:
        saved = {"sweep_seconds_": meta.get("sweep_seconds"),
                 "step_seconds_": arrays.get("step_seconds_")}
    timings = {name: None if saved.get(name) is None
               else np.asarray(saved[name], dtype=np.float64)
               for name in (*SAVED_TIMINGS, _MIXING_SECONDS)}
    if timings["sweep_seconds_"] is None:   # a field every fitted state has
        timings["sweep_seconds_"] = np.zeros(0)
    return timings


def load_model(directory, *, estimator: str | None = None) -> tuple[dict, FittedState]:
    """(the estimator's parameters, its fitted state) from a model directory; ``estimator``:
    the class name of the loader (None: CPGBN or PGBN), which must be the one that saved it."""
    directory = Path(directory)
    meta = _read_meta(directory)
    saved_by = meta.get("estimator")
    if saved_by != estimator:
        loader = estimator or "CPGBN"
        raise ModelFormatError(f"the model in {directory} was saved by {saved_by or 'CPGBN'}: "
                               f"load it with {saved_by or 'CPGBN'}.load, not {loader}.load")
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
        timings = _read_timings(directory, meta, arrays)
        mixing_seconds = timings.pop(_MIXING_SECONDS)
        if "mixing_moved" in arrays and _MIXING_SECONDS not in arrays:   # version 4
            arrays[_MIXING_SECONDS] = (np.zeros(len(arrays["mixing_moved"]))
                                       if mixing_seconds is None else mixing_seconds)
        encoder_weights = {k[len(_ENCODER):]: v for k, v in arrays.items()
                           if k.startswith(_ENCODER)}
        encoder_config = meta.get("encoder_config")
        if bool(encoder_weights) != (encoder_config is not None):
            raise ValueError("the encoder's weights and config must come together")
        fitted = FittedState.of(
            vocabulary_=vocabulary, layers_=layers, hyper_=hyper, seed_=int(meta["seed"]),
            globals_=g, kernel_usage_=np.asarray(arrays["kernel_usage"], dtype=np.float64),
            n_train_tokens_=int(meta["n_train_tokens"]),
            loglik_trace_=np.asarray(meta["loglik_trace"], dtype=np.float64),
            mixing_=Mixing.from_arrays(arrays, meta.get("mixing_n_collected") or 0),
            **{name: arrays[name] for name in SAVED_ARRAYS if name in arrays},
            **timings,
            encoder_config_=encoder_config,
            encoder_weights_=encoder_weights if encoder_config is not None else None,
            **{name: _json_value(meta[key]) for name, key in SAVED_JSON.items()
               if meta.get(key) is not None},
            format_version_=meta["format_version"],
            saved_by_version_=meta.get("library_version"))
    except (KeyError, TypeError, ValueError, zipfile.BadZipFile, OSError) as exc:
        raise ModelFormatError(f"model in {directory} is corrupted: {exc.__class__.__name__}: {exc}") from None
    if g.layers != layers or g.D.shape[0] != len(vocabulary):
        raise ModelFormatError(f"model in {directory} is inconsistent: array shapes do not match "
                               "its layers and vocabulary")
    return params, fitted



def saved_estimator(directory) -> str | None:
    """The class that saved the model in ``directory`` (None: CPGBN or PGBN)."""
    return _read_meta(Path(directory)).get("estimator")
