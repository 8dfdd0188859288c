"""The Gibbs backends by device: the one place that maps ``CPGBN(device=...)`` to a backend.

``device=None`` is the numba backend (:mod:`cpgbn.backends.numba`); any other value ("cpu",
"cuda", "cuda:1", a torch.device) the PyTorch backend (:mod:`cpgbn.backends.torch`, imported
only when asked for).  An entry says what the layers above need of a backend on a device:

* ``make(data, seed, first_doc=..., device=...)``: the backend over the documents (the
  protocol of :mod:`cpgbn.inference.backend_protocols`), which a
  :class:`~cpgbn.inference.gibbs.GibbsSampler` runs (PyTorch's also takes ``max_elements``
  and ``doc_block``, which :class:`~cpgbn.inference.gibbs.TorchGibbsSampler` passes);
* ``doc_block(device)``: its random streams' document block (a distributed run's shards are
  whole blocks, :func:`cpgbn.modes.sharded.shard_range`);
* ``memory_kind(device)``: the device type of the host-memory estimate
  (:func:`cpgbn.inference.memory.estimate_bytes`: None for numba, "cpu" or "cuda");
* ``check_device_memory(n_positions, n_kernels, device)``: the refusal of a run that the
  device's own memory cannot hold, which the host's check cannot see (a no-op on the host).

A new backend is a folder of :mod:`cpgbn.backends` and one entry here (docs/architecture.md).
The hybrid's and the classifier's encoder has one backend, PyTorch's:
:func:`encoder_backend` gives its class (the protocol
:class:`~cpgbn.inference.backend_protocols.EncoderBackend`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..blocks import DOC_BLOCK

__all__ = ["GibbsBackendEntry", "gibbs_backend", "BACKENDS", "encoder_backend"]


@dataclass(frozen=True)
class GibbsBackendEntry:
    """What a device needs of its Gibbs backend (module docstring)."""

    name: str
    make: Callable
    doc_block: Callable[[object], int]
    memory_kind: Callable[[object], str | None]
    check_device_memory: Callable[[int, int, object], None]


def _numba_make(data, seed: int, *, first_doc: int = 0, device=None, doc_block=None):
    # numba's random-stream block is always DOC_BLOCK (a pilot's doc_block is that one)
    from .numba.numba_backend import NumbaBackend
    return NumbaBackend(data, int(seed), first_doc=first_doc)


def _numba_doc_block(device) -> int:
    return DOC_BLOCK


def _torch_make(data, seed: int, *, first_doc: int = 0, device="cpu",
                max_elements: int | None = None, doc_block: int | None = None):
    from .torch.torch_backend import TorchBackend
    return TorchBackend(data, int(seed), device=device, max_elements=max_elements,
                        first_doc=first_doc, doc_block=doc_block)


def _torch_doc_block(device) -> int:
    from .torch.devices import doc_block_for
    return doc_block_for(device)


def _torch_memory_kind(device) -> str:
    # without importing torch: a bad device is refused where the sampler starts
    return "cuda" if str(getattr(device, "type", device)).startswith("cuda") else "cpu"


def _torch_check_device_memory(n_positions: int, n_kernels: int, device) -> None:
    if _torch_memory_kind(device) == "cuda":
        from .torch.devices import check_device_memory
        check_device_memory(n_positions, n_kernels, device)


#: The entries by name.
BACKENDS = {
    "numba": GibbsBackendEntry("numba", _numba_make, _numba_doc_block,
                               memory_kind=lambda device: None,
                               check_device_memory=lambda n_positions, n_kernels, device: None),
    "torch": GibbsBackendEntry("torch", _torch_make, _torch_doc_block, _torch_memory_kind,
                               _torch_check_device_memory),
}


def gibbs_backend(device) -> GibbsBackendEntry:
    """The entry of the backend that runs the Gibbs sampler on ``device`` (None: numba)."""
    return BACKENDS["numba" if device is None else "torch"]


def encoder_backend() -> type:
    """The class of the encoder's backend (PyTorch's, imported when first asked for): its
    ``for_training`` and ``from_weights`` make one (:mod:`cpgbn.backends.torch.encoder_backend`)."""
    from .torch.encoder_backend import TorchEncoderBackend
    return TorchEncoderBackend
