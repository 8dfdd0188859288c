"""What a device means to the PyTorch backend: which devices are valid, how large a memory
chunk and a random-stream block of documents are on each kind.

Both sizes are part of what a seed means on a device type (the chunking orders the variates
a generator hands out; the blocks key its seeds: :mod:`cpgbn.backends.torch.blocks`), which
is why a chain is reproducible per device type and not across them.
"""

from __future__ import annotations

import torch

from ...errors import CPGBNInputError
from ...blocks import TORCH_DOC_BLOCKS

__all__ = ["resolve_device", "DOC_BLOCKS", "doc_block_for", "MAX_ELEMENTS",
           "DEVICE_POSITION_BYTES", "check_device_memory"]

#: Documents per random-stream block by device type (:mod:`cpgbn.blocks`).
DOC_BLOCKS = TORCH_DOC_BLOCKS

#: The largest float64 temporary built at once by default, by device type.  On the CPU 2^18:
#: the allocator keeps a sweep's freed chunks resident, so the peak grows with the chunk.
#: 2^20 against 2^22 took a sweep of 2,000 IMDB reviews from 1.22 to 0.80 GB (docs/gpu.md);
#: 2^18 against 2^20 took a whole fit of them (3 sweeps and the post-fit records) from 1.42
#: to 1.08 GB at 1.08 times the time, inside the run-to-run noise
#: (results/speed/gibbs_memory_torch_chunks.json).
MAX_ELEMENTS = {"cpu": 1 << 18, "cuda": 1 << 26}


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


#: Device bytes per position that the PyTorch sampler holds at once in every sweep: the
#: offsets of the m field it reads and of the one it writes (int64 each).  A lower bound: the
#: stored entries, the cells and the chunked temporaries (``max_elements``) come on top.
DEVICE_POSITION_BYTES = 16


def check_device_memory(n_positions: int, n_kernels: int, device) -> None:
    """Refuse, before anything is uploaded, a PyTorch sampler on a GPU whose free memory
    cannot hold even :data:`DEVICE_POSITION_BYTES` a position and two float64 temporaries of
    ``max_elements``: such a run would fail in its first sweep.  Only a certain failure is
    refused (the bound is a lower one); a run above it may still run out, which the command
    line reports in one line."""
    device = resolve_device(device)   # CUDA missing: that one-line error first
    if device.type != "cuda":
        return
    needed = n_positions * DEVICE_POSITION_BYTES + 2 * 8 * MAX_ELEMENTS["cuda"]
    free, total = torch.cuda.mem_get_info(device)
    if needed > free:
        raise CPGBNInputError(
            f"this run needs more than {needed / 2**30:.2f} GB of GPU memory "
            f"({n_positions:,} positions, {n_kernels} kernels: the latent counts' offsets and "
            f"the sweep's temporaries) but {device} has {free / 2**30:.2f} GB free of "
            f"{total / 2**30:.2f} GB; use fewer documents, several GPUs (--distributed) or "
            "inference='hybrid'")
