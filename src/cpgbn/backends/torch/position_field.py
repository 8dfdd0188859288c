"""Sparse storage of the convolutional layer's per-position fields w and m on the PyTorch backend.

The chain's per-position state, w_jks (float32) and m_jks (int32), is a (P, K_1) field of
which almost every entry sits at one value once the chain has left its start (the float32
floor for w, 0 for m: docs/sampler.md).  :class:`DeviceField` keeps, on the backend's
device, only the entries that differ from the field's *background*, as compressed rows over
the positions:

* ``indptr`` int64 (P + 1,) -- position p's entries are ``indptr[p]:indptr[p + 1]``;
* ``kernel`` (nnz,)         -- k of each entry, increasing within a position (int16 while
  K_1 <= 32,767, else int32: torch indexes with int64, so a reader widens a chunk at a time);
* ``value``  (nnz,)         -- w_jks or m_jks of each entry.

The sweep reads a field a chunk of positions at a time as a dense (chunk, K_1) tensor
(:meth:`DeviceField.rows`) and writes the next field chunk by chunk
(:class:`FieldWriter`), so the dense (P, K_1) field never exists: memory is 6 bytes per stored
entry (int16 kernels) and 8 per position.  The host form is the numba backend's
:class:`~cpgbn.backends.numba.position_store.PositionStore` (:meth:`DeviceField.to_store`,
:meth:`DeviceField.from_field`), so that a state written back, a checkpoint and a resumed
chain are the same whichever backend ran it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..numba.position_store import PositionStore

__all__ = ["DeviceField", "FieldWriter", "kernel_dtype"]

I64 = torch.int64


def kernel_dtype(n_kernels: int) -> torch.dtype:
    """The narrowest signed integer type torch has that numbers ``n_kernels`` kernels."""
    return torch.int16 if n_kernels <= (1 << 15) - 1 else torch.int32


@dataclass(eq=False)
class DeviceField:
    """A (P, K) field on a device stored as its entries that differ from ``background``
    (module docstring)."""

    indptr: torch.Tensor
    kernel: torch.Tensor
    value: torch.Tensor
    n_kernels: int
    background: float

    # ------------------------------------------------------------------ construction
    @classmethod
    def constant(cls, n_positions: int, n_kernels: int, dtype: torch.dtype, background: float,
                 device) -> "DeviceField":
        """Every entry at ``background`` (nothing stored)."""
        return cls(torch.zeros(n_positions + 1, dtype=I64, device=device),
                   torch.zeros(0, dtype=kernel_dtype(n_kernels), device=device),
                   torch.zeros(0, dtype=dtype, device=device), int(n_kernels), float(background))

    @classmethod
    def from_dense(cls, array: torch.Tensor, background: float) -> "DeviceField":
        """The field of a dense (P, K) tensor (its entries != ``background``)."""
        writer = FieldWriter(array.shape[1], array.dtype, background, array.device)
        writer.add(array)
        return writer.finish()

    @classmethod
    def from_field(cls, field, n_positions: int, n_kernels: int, dtype: torch.dtype,
                   background: float, device) -> "DeviceField":
        """A host field on ``device``: a numba PositionStore (its own background), a dense
        (P, K) array (entries != ``background``)."""
        if isinstance(field, PositionStore):
            counts, kernel, value = field.to_rows()
            indptr = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            # sort each position's entries by kernel, the order this form promises
            order = np.lexsort((kernel.astype(np.int64), np.repeat(np.arange(len(counts)),
                                                                    counts)))
            return cls(torch.as_tensor(indptr, device=device),
                       torch.as_tensor(kernel[order].astype(np.int64), device=device)
                       .to(kernel_dtype(n_kernels)),
                       torch.as_tensor(value[order], device=device).to(dtype),
                       int(n_kernels), float(field.background))
        array = torch.as_tensor(np.asarray(field), device=device).to(dtype)
        if tuple(array.shape) != (n_positions, n_kernels):
            raise ValueError(f"a position field must be ({n_positions}, {n_kernels}), got "
                             f"{tuple(array.shape)}")
        return cls.from_dense(array, background)

    # ------------------------------------------------------------------ reading
    @property
    def shape(self) -> tuple[int, int]:
        return int(self.indptr.shape[0]) - 1, self.n_kernels

    @property
    def dtype(self) -> torch.dtype:
        return self.value.dtype

    @property
    def device(self) -> torch.device:
        return self.value.device

    @property
    def nnz(self) -> int:
        return int(self.value.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the stored entries and the position index."""
        return (self.indptr.numel() * self.indptr.element_size()
                + self.kernel.numel() * self.kernel.element_size()
                + self.value.numel() * self.value.element_size())

    def rows(self, lo: int, hi: int) -> torch.Tensor:
        """The dense (hi - lo, K) field of positions ``lo:hi``."""
        out = torch.full((max(hi - lo, 0), self.n_kernels), self.background, dtype=self.dtype,
                         device=self.device)
        if hi <= lo:
            return out
        first, last = int(self.indptr[lo]), int(self.indptr[hi])
        if last > first:
            counts = self.indptr[lo + 1:hi + 1] - self.indptr[lo:hi]
            row = torch.repeat_interleave(torch.arange(hi - lo, device=self.device), counts)
            out[row, self.kernel[first:last].to(I64)] = self.value[first:last]
        return out

    def toarray(self) -> torch.Tensor:
        """The dense (P, K) field (tests and small problems)."""
        return self.rows(0, self.shape[0])

    def row_sums(self, lo: int, hi: int, segments: torch.Tensor, n_segments: int
                 ) -> torch.Tensor:
        """The entries of positions ``lo:hi`` summed by segment (``segments``: each of those
        positions' segment, e.g. its document from 0), an (n_segments, K) tensor of the
        values' dtype (the background counted as 0: a field of counts)."""
        out = torch.zeros((n_segments, self.n_kernels), dtype=self.dtype, device=self.device)
        first, last = int(self.indptr[lo]), int(self.indptr[hi])
        if last > first:
            seg = torch.repeat_interleave(segments, self.indptr[lo + 1:hi + 1] - self.indptr[lo:hi])
            out.view(-1).index_add_(0, seg * self.n_kernels + self.kernel[first:last].to(I64),
                                    self.value[first:last])
        return out

    def to_store(self, doc_positions: np.ndarray, dtype) -> PositionStore:
        """This field on the host, as the numba backend stores it."""
        counts = (self.indptr[1:] - self.indptr[:-1]).to("cpu").numpy().astype(np.int32)
        return PositionStore.from_rows(doc_positions, self.n_kernels, self.background, counts,
                                       self.kernel.to("cpu").numpy(),
                                       self.value.to("cpu").numpy().astype(dtype, copy=False))


class FieldWriter:
    """Builds a :class:`DeviceField` from dense chunks of consecutive positions, first to last:
    ``add(rows)`` keeps their entries that differ from the background, ``finish()`` joins them.

    On the CPU each chunk's entries are copied at once into one buffer with room for
    ``capacity`` entries (grown by doubling when a sweep stores more), so that the field is
    never held twice, as chunks and joined: the room beyond the entries written is allocated
    but not resident until written, like a numba
    :class:`~cpgbn.backends.numba.position_store.PositionStore`'s.  On a GPU, whose memory
    is committed when allocated, the chunks are joined by one concatenation."""

    def __init__(self, n_kernels: int, dtype: torch.dtype, background: float, device,
                 capacity: int = 0):
        self.n_kernels, self.dtype, self.background = int(n_kernels), dtype, float(background)
        self.device = torch.device(device)
        self._counts, self._kernels, self._values = [], [], []
        self._in_place = self.device.type == "cpu"
        self._used = 0
        if self._in_place:
            self._kernel_buffer = torch.empty(int(capacity), dtype=kernel_dtype(self.n_kernels),
                                              device=self.device)
            self._value_buffer = torch.empty(int(capacity), dtype=dtype, device=self.device)

    def add(self, rows: torch.Tensor) -> None:
        stored = rows != self.background
        position, kernel = stored.nonzero(as_tuple=True)   # row-major: kernels increase
        self._counts.append(stored.sum(dim=1, dtype=I64))
        values = rows[position, kernel].to(self.dtype)
        if not self._in_place:
            self._kernels.append(kernel.to(kernel_dtype(self.n_kernels)))
            self._values.append(values)
            return
        end = self._used + kernel.numel()
        if end > self._value_buffer.numel():
            self._grow(end)
        self._kernel_buffer[self._used:end] = kernel
        self._value_buffer[self._used:end] = values
        self._used = end

    def _grow(self, needed: int) -> None:
        size = max(needed, 2 * self._value_buffer.numel())
        for name in ("_kernel_buffer", "_value_buffer"):
            old = getattr(self, name)
            new = torch.empty(size, dtype=old.dtype, device=self.device)
            new[:self._used] = old[:self._used]
            setattr(self, name, new)

    def finish(self) -> DeviceField:
        counts = (torch.cat(self._counts) if self._counts
                  else torch.zeros(0, dtype=I64, device=self.device))
        indptr = torch.zeros(counts.shape[0] + 1, dtype=I64, device=self.device)
        torch.cumsum(counts, 0, out=indptr[1:])
        if self._in_place:
            kernel, value = self._kernel_buffer[:self._used], self._value_buffer[:self._used]
            del self._kernel_buffer, self._value_buffer
        else:
            kernel = (torch.cat(self._kernels) if self._kernels
                      else torch.zeros(0, dtype=kernel_dtype(self.n_kernels), device=self.device))
            value = (torch.cat(self._values) if self._values
                     else torch.zeros(0, dtype=self.dtype, device=self.device))
        self._counts, self._kernels, self._values = [], [], []
        return DeviceField(indptr, kernel, value, self.n_kernels, self.background)
