"""What a device means to the PyTorch backend: which devices are valid, how large a memory
chunk and a random-stream block of documents are on each kind.

Both sizes are part of what a seed means on a device type (the chunking orders the variates
a generator hands out; the blocks key its seeds: :mod:`cpgbn.backends.torch.blocks`), which
is why a chain is reproducible per device type and not across them.
"""

from __future__ import annotations

import torch

from ...errors import CPGBNInputError

__all__ = ["resolve_device", "DOC_BLOCKS", "doc_block_for", "MAX_ELEMENTS"]

#: Documents per random-stream block by device type: multiples of the numba backend's
#: 32-document block, so that shards of whole blocks hash as the corpus fingerprint does.  A
#: block is a round of the per-document steps' kernel launches, so on a GPU it is large (MR's
#: 9,600 or SUBJ's 10,000 documents are one block: as many launches as one stream per step
#: took); on the CPU the memory chunks are smaller than a block anyway.  A distributed fit has
#: at most one worker per block.
DOC_BLOCKS = {"cpu": 1024, "cuda": 16384}

#: The largest float64 temporary built at once by default, by device type.
MAX_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 26}


def resolve_device(device) -> torch.device:
    """``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device``; CPGBNInputError if CUDA is
    requested but absent."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CPGBNInputError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, "
                              f"got {device!r}") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CPGBNInputError(
                f"device={device!r} was requested but CUDA is not available to torch "
                f"{torch.__version__} (no GPU visible, or a CPU-only build); use device='cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise CPGBNInputError(f"device={device!r}: only {torch.cuda.device_count()} CUDA "
                                  "device(s) are visible")
    elif dev.type != "cpu":
        raise CPGBNInputError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return dev


def doc_block_for(device) -> int:
    """The default random-stream block (documents) of the PyTorch backend on ``device``."""
    return DOC_BLOCKS[resolve_device(device).type]

