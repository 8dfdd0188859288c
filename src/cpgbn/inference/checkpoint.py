"""Checkpoints of a Gibbs run: the sampler state and the collector, written atomically.

A checkpoint directory holds ``checkpoint.json`` (sweep, fingerprint, format) and
``state.npz`` (every array of the state and the collector, with the mixing diagnostic's trace
when it is measured; no pickle).  Since every draw is a function of (seed, sweep, step,
block), a run resumed from a checkpoint ends in exactly the model an uninterrupted run would
have produced.  The fingerprint (a hash of the data and of the
parameters that change the chain) keeps a checkpoint from being resumed with other inputs.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np

from ..errors import CPGBNInputError, ModelFormatError
from ..files import write_directory_atomically
from .driver import Collector
from .mixing import MixingTrace
from .state import GibbsState, GlobalParameters

FORMAT = "cpgbn-checkpoint"
FORMAT_VERSION = 1
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


def save_checkpoint(directory, state: GibbsState, collector: Collector, print_: str) -> None:
    g = state.globals
    arrays = {"D": g.D, "r": g.r, "w": state.w, "m": state.m, "A": state.A, "loglik": state.loglik,
              "trace_loglik": np.asarray(collector.loglik, dtype=np.float64),
              "trace_seconds": np.asarray(collector.seconds, dtype=np.float64)}
    for i, p in enumerate(g.phi):
        arrays[f"phi_{i}"] = p
    if collector.mixing is not None:
        arrays.update(collector.mixing.arrays(state.m.shape[1]))
    for i, (t, c, acc) in enumerate(zip(state.theta, state.c, collector.theta_sum)):
        arrays[f"theta_{i}"], arrays[f"c_{i}"], arrays[f"theta_sum_{i}"] = t, c, acc
    if collector.globals_sum is not None:
        arrays["sum_D"] = collector.globals_sum.D
        arrays["sum_r"] = collector.globals_sum.r
        for i, p in enumerate(collector.globals_sum.phi):
            arrays[f"sum_phi_{i}"] = p
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "sweep": int(state.sweep),
            "n_layers": len(state.theta), "n_collected": int(collector.n_collected),
            "has_globals_sum": collector.globals_sum is not None, "fingerprint": print_}

    def write(tmp: Path) -> None:
        np.savez(tmp / _ARRAYS, **arrays)
        (tmp / _META).write_text(json.dumps(meta), encoding="utf-8")

    write_directory_atomically(directory, write, marker=_META)


def load_checkpoint(directory, print_: str) -> tuple[GibbsState, Collector]:
    """Read a checkpoint; refuse one made from other data or parameters."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / _META).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            raise ModelFormatError(f"{directory} is not a cpgbn checkpoint of format {FORMAT_VERSION}")
        if meta["fingerprint"] != print_:
            raise CPGBNInputError(f"checkpoint {directory} was made with other data or parameters; "
                                  "delete it or run without --resume")
        with np.load(directory / _ARRAYS, allow_pickle=False) as npz:
            a = {k: npz[k] for k in npz.files}
        T = int(meta["n_layers"])
        g = GlobalParameters(a["D"], [a[f"phi_{i}"] for i in range(T - 1)], a["r"])
        state = GibbsState(globals=g, w=a["w"], m=a["m"], theta=[a[f"theta_{i}"] for i in range(T)],
                           c=[a[f"c_{i}"] for i in range(T)], A=a["A"], loglik=a["loglik"],
                           sweep=int(meta["sweep"]))
        g_sum = (GlobalParameters(a["sum_D"], [a[f"sum_phi_{i}"] for i in range(T - 1)], a["sum_r"])
                 if meta["has_globals_sum"] else None)
        collector = Collector([a[f"theta_sum_{i}"] for i in range(T)], g_sum,
                              int(meta["n_collected"]), a["trace_loglik"].tolist(),
                              a["trace_seconds"].tolist(), MixingTrace.from_arrays(a))
    except (OSError, KeyError, ValueError, json.JSONDecodeError, zipfile.BadZipFile) as exc:
        raise ModelFormatError(f"checkpoint {directory} is unreadable ({exc.__class__.__name__}: "
                               f"{exc}); delete it or run without --resume") from None
    return state, collector
