"""The runtime around a mode's work: the thread counts of numba and torch for the length of a
fit or a transform (restored afterwards), and the one-line error when PyTorch is missing.
Used by every mode; no state of the model is read here."""

from __future__ import annotations

import contextlib

from ..backends.numba.openmp import import_torch_first
from ..errors import CPGBNInputError

__all__ = ["numba_threads", "torch_threads", "require_torch"]


@contextlib.contextmanager
def numba_threads(n_threads):
    """numba's threads set to ``n_threads`` (None: unchanged), restored afterwards."""
    import numba

    import_torch_first()  # asking numba for its threads starts its pool (backends.numba.openmp)
    previous = numba.get_num_threads()
    if n_threads is not None:
        numba.set_num_threads(min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


_TORCH_HINT = "needs PyTorch: pip install 'cpgbn[torch]'"


def require_torch(what: str) -> None:
    """Raise a CPGBNInputError with the extra's install hint when torch cannot be imported."""
    import importlib
    try:   # by name: only whether it imports matters here, no name of it is used
        importlib.import_module("torch")
    except ImportError:
        raise CPGBNInputError(f"{what} {_TORCH_HINT}") from None


@contextlib.contextmanager
def torch_threads(n_threads):
    """numba's and torch's intra-op threads set to ``n_threads`` (None: unchanged), restored
    afterwards."""
    if n_threads is None:
        with numba_threads(None):
            yield
        return
    import torch
    previous = torch.get_num_threads()
    torch.set_num_threads(int(n_threads))
    try:
        with numba_threads(n_threads):
            yield
    finally:
        torch.set_num_threads(previous)
