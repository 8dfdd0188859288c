"""The one checkpoint format of every training run, written atomically.

A checkpoint directory holds ``checkpoint.json`` (format, step, the batch stream's cursor, the
algorithm's JSON-able ``meta()``, the fingerprint) and ``state.npz`` (the algorithm's
``to_arrays()`` and the training trace; no pickle).  The training loop
(:func:`cpgbn.inference.training.train`) writes it every ``checkpoint_every`` steps and at the
end, and only in the process that owns it (the root of a group of workers).  Since every draw
is a function of (seed, step, stream, block), a run resumed from a checkpoint ends in exactly
the state an uninterrupted one reaches.  The fingerprint (a hash of the algorithm's
configuration and of the data and parameters) keeps a checkpoint from being resumed with other
inputs.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CPGBNInputError, ModelFormatError
from ..files import write_directory_atomically
from ..blocks import DOC_BLOCK

__all__ = ["FORMAT", "FORMAT_VERSION", "Checkpoint", "fingerprint", "corpus_identity",
           "has_checkpoint", "save_checkpoint", "read_checkpoint"]

FORMAT = "cpgbn-checkpoint"
#: 2: one format for every mode (version 1 was the Gibbs chain's own; the minibatch modes had
#: "cpgbn-minibatch-checkpoint" version 1).  Older checkpoints are refused with a message.
FORMAT_VERSION = 2
_META = "checkpoint.json"
_ARRAYS = "state.npz"


def fingerprint(*parts) -> str:
    """sha256 over arrays (their bytes, dtype and shape) and JSON-able values."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            digest.update(str((part.dtype.str, part.shape)).encode())
            digest.update(np.ascontiguousarray(part).tobytes())
        else:
            digest.update(json.dumps(part, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def corpus_identity(data, first_doc: int, communicator, *extra) -> str:
    """A fingerprint of the whole corpus' cells (and of ``extra``: the vocabulary, the
    parameters) that does not depend on how the documents are split over workers: each
    worker hashes its blocks of :data:`DOC_BLOCK` documents (a shard is whole blocks), the
    root hashes the blocks' hashes in order and every worker gets the result.  A checkpoint
    written by any number of workers (one process included) is resumed by any other."""
    if first_doc % DOC_BLOCK:
        raise CPGBNInputError(f"a shard starts at a multiple of {DOC_BLOCK} documents, not "
                              f"at {first_doc}")
    hashes = []
    for start in range(0, data.n_docs, DOC_BLOCK):
        stop = min(start + DOC_BLOCK, data.n_docs)
        lo, hi = int(data.doc_cells[start]), int(data.doc_cells[stop])
        hashes.append(fingerprint(data.cell_word[lo:hi], data.cell_col[lo:hi],
                                  np.asarray(data.cell_count[lo:hi]),
                                  np.diff(data.doc_cells[start:stop + 1]),
                                  data.doc_length[start:stop]))
    parts = communicator.gather(hashes)
    whole = None if parts is None else fingerprint([h for part in parts for h in part], *extra)
    return communicator.broadcast_object(whole)


@dataclass
class Checkpoint:
    """What a checkpoint holds: the steps done, the batch stream's cursor (a dict), the
    algorithm's ``meta()`` and every array (the algorithm's and the trace's)."""

    step: int
    cursor: dict
    meta: dict
    arrays: dict


def has_checkpoint(directory) -> bool:
    """Whether ``directory`` holds a (complete) checkpoint."""
    return directory is not None and (Path(directory) / _META).is_file()


def save_checkpoint(directory, *, step: int, cursor: dict, meta: dict, arrays: dict,
                    print_: str) -> None:
    """Write a checkpoint (atomically: a run killed meanwhile keeps the previous one)."""
    record = {"format": FORMAT, "format_version": FORMAT_VERSION, "step": int(step),
              "cursor": cursor, "algorithm": meta, "fingerprint": print_}

    def write(tmp: Path) -> None:
        np.savez(tmp / _ARRAYS, **arrays)
        (tmp / _META).write_text(json.dumps(record), encoding="utf-8")

    write_directory_atomically(directory, write, marker=_META)


def read_checkpoint(directory, print_: str | None = None) -> Checkpoint:
    """Read a checkpoint; with ``print_``, refuse one made with other data or parameters."""
    directory = Path(directory)
    try:
        record = json.loads((directory / _META).read_text(encoding="utf-8"))
        if record.get("format") != FORMAT or record.get("format_version") != FORMAT_VERSION:
            raise ModelFormatError(f"{directory} is not a cpgbn checkpoint of format "
                                   f"{FORMAT_VERSION} (written by another cpgbn version?); "
                                   "delete it or run without resume")
        if print_ is not None and record["fingerprint"] != print_:
            raise CPGBNInputError(f"checkpoint {directory} was made with other data or "
                                  "parameters; delete it or run without resume")
        with np.load(directory / _ARRAYS, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return Checkpoint(int(record["step"]), dict(record["cursor"]),
                          dict(record["algorithm"]), arrays)
    except (OSError, KeyError, TypeError, ValueError, json.JSONDecodeError,
            zipfile.BadZipFile) as exc:
        if isinstance(exc, CPGBNInputError):
            raise
        raise ModelFormatError(f"checkpoint {directory} is unreadable ({exc.__class__.__name__}: "
                               f"{exc}); delete it or run without resume") from None
