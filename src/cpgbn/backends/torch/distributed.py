"""torch.distributed as the inference layer's communicator: sum-reduce, broadcast, barrier.

:class:`TorchCommunicator` implements :class:`cpgbn.inference.communicator.Communicator` over a
torch.distributed process group, so that the data-parallel Gibbs sampler (a shard of documents
per worker, :class:`~cpgbn.inference.updates.DistributedGlobalUpdate`) runs under ``torchrun``
on one machine or several.  Arrays go in and come back as they were given: numpy arrays
(the numba backend's) travel through gloo on the CPU; tensors on a GPU through NCCL (the
group is ``cpu:gloo,cuda:nccl`` when the worker has a GPU of its own, so each array takes the
transport of its device; gloo alone otherwise).  Nothing the caller passes is modified.

Failures are the point of most of this module.  torch's default timeout is 30 minutes and its
errors name a socket, not a worker; here every operation has the timeout given at
construction (the process group's, for gloo's collectives; the store's, for the rendezvous),
and a failure raises :class:`~cpgbn.errors.WorkerError` with one line that names the rank(s)
at fault:

* at the start, the ranks that did not join within the timeout (each worker writes a key
  ``joined/<rank>`` into the rendezvous store, and the missing keys name the absent ones);
* during the run, before each collective a worker writes how many it has entered
  (``at/<rank>``, one small write to the store: the store is torch's TCPStore at
  ``MASTER_ADDR:MASTER_PORT``, hosted by rank 0 or by torchrun's agent); when a collective
  fails (a worker died: gloo sees its sockets close at once; a worker hangs: gloo gives up
  after the timeout), the survivors read those counts and name the ranks that are behind;
  a store that no longer answers means that its host, rank 0, is gone.

The keys live under ``cpgbn/<attempt>/`` (torchrun's ``TORCHELASTIC_RESTART_COUNT``), so the
workers restarted by ``torchrun --max-restarts`` never read a previous attempt's keys from
the agent's store, which outlives them.
"""

from __future__ import annotations

import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from ...errors import CPGBNInputError, WorkerError, one_line

__all__ = ["TorchCommunicator", "DEFAULT_TIMEOUT_S"]

#: Seconds a worker waits for the others at the rendezvous and in every collective.
DEFAULT_TIMEOUT_S = 60.0
#: Seconds a failed worker spends asking the store which ranks are behind.
_DIAGNOSIS_TIMEOUT_S = 2.0
#: Characters of torch's own message kept at the end of an error line.
_REASON_CHARS = 200


def _environment_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is not None:
            return default
        raise CPGBNInputError(f"a distributed run needs torchrun's environment: {name} is not "
                              f"set (start it with torchrun --nproc-per-node N ...)")
    try:
        return int(value)
    except ValueError:
        raise CPGBNInputError(f"{name} must be an integer, got {value!r}") from None


class TorchCommunicator:
    """One worker of a torch.distributed group (module docstring).

    Parameters
    ----------
    rank, world_size : this worker's number and the number of workers.
    master_addr, master_port : where the rendezvous store listens (rank 0 hosts it unless
        ``agent_store``).
    timeout : seconds; the limit on the rendezvous and on every collective.
    backend : a torch.distributed backend string, or None: ``"cpu:gloo,cuda:nccl"`` when
        this worker has a GPU of its own (``local_rank`` below the number of visible GPUs;
        it becomes the worker's current device), else ``"gloo"`` (which carries CUDA tensors
        too, through the host: more workers on a machine than GPUs, or none).
    local_rank : this worker's number on its machine (its GPU).
    agent_store : the store is torchrun's agent's (every worker is its client).
    attempt : the run's attempt (restart) number, which keeps attempts' keys apart.

    Attributes: ``rank``, ``world_size``, ``is_root`` (rank 0), ``timeout`` (seconds),
    ``bytes_summed`` and ``bytes_broadcast`` (payload bytes of this worker's calls so far).
    """

    def __init__(self, *, rank: int, world_size: int, master_addr: str, master_port: int,
                 timeout: float = DEFAULT_TIMEOUT_S, backend: str | None = None,
                 local_rank: int = 0, agent_store: bool = False, attempt: int = 0):
        if not dist.is_available():
            raise CPGBNInputError("this build of PyTorch has no torch.distributed")
        if not 1 <= int(world_size) or not 0 <= int(rank) < int(world_size):
            raise CPGBNInputError(f"rank must be in [0, world_size), got rank {rank} of "
                                  f"{world_size}")
        if not float(timeout) > 0:
            raise CPGBNInputError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if dist.is_initialized():
            raise CPGBNInputError("torch.distributed is initialised already in this process")
        self.rank, self.world_size = int(rank), int(world_size)
        self.is_root = self.rank == 0
        self.timeout = float(timeout)
        self.where = f"{master_addr}:{int(master_port)}"
        self.bytes_summed = self.bytes_broadcast = 0
        self._calls = 0
        self._host_store = self.is_root and not agent_store
        own_gpu = torch.cuda.is_available() and int(local_rank) < torch.cuda.device_count()
        if backend is None:
            backend = "cpu:gloo,cuda:nccl" if own_gpu else "gloo"
        if "nccl" in backend:
            if not own_gpu:
                raise CPGBNInputError(
                    f"rank {rank}: NCCL needs a GPU per worker, and LOCAL_RANK {local_rank} has "
                    f"none ({torch.cuda.device_count() if torch.cuda.is_available() else 0} "
                    f"visible): start at most as many workers per machine as it has GPUs")
            torch.cuda.set_device(int(local_rank))
        limit = timedelta(seconds=self.timeout)
        self._store = self._rendezvous(master_addr, int(master_port), limit, int(attempt))
        try:
            dist.init_process_group(backend, store=dist.PrefixStore("pg/", self._store),
                                    rank=self.rank, world_size=self.world_size, timeout=limit)
        except Exception as error:  # torch raises RuntimeError and DistError subclasses
            raise WorkerError(f"rank {self.rank}: the {backend} process group did not start "
                              f"within {self.timeout:g} s: {self._reason(error)}") from error

    @classmethod
    def from_environment(cls, *, timeout: float = DEFAULT_TIMEOUT_S,
                         backend: str | None = None) -> "TorchCommunicator":
        """A worker set up from torchrun's environment: ``RANK``, ``WORLD_SIZE``,
        ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK`` (and its agent's store and restart
        count, when torchrun gives them)."""
        addr = os.environ.get("MASTER_ADDR")
        if not addr:
            _environment_int("MASTER_ADDR")  # raises the one-line error
        return cls(rank=_environment_int("RANK"), world_size=_environment_int("WORLD_SIZE"),
                   master_addr=addr, master_port=_environment_int("MASTER_PORT"),
                   local_rank=_environment_int("LOCAL_RANK", 0), timeout=timeout,
                   backend=backend,
                   agent_store=os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
                   attempt=_environment_int("TORCHELASTIC_RESTART_COUNT", 0))

    # ------------------------------------------------------------------ start and end
    def _rendezvous(self, addr: str, port: int, limit: timedelta, attempt: int):
        try:
            store = dist.TCPStore(addr, port, self.world_size, self._host_store, limit,
                                  wait_for_workers=False, multi_tenant=True)
        except Exception as error:
            host = "this worker could not listen there" if self._host_store else \
                "is its host (rank 0 or torchrun) running?"
            raise WorkerError(f"rank {self.rank} could not reach the rendezvous store at "
                              f"{self.where} within {self.timeout:g} s ({host}): "
                              f"{self._reason(error)}") from error
        store = dist.PrefixStore(f"cpgbn/{attempt}/", store)
        try:
            store.set(f"joined/{self.rank}", "1")
            store.wait([f"joined/{r}" for r in range(self.world_size)], limit)
        except Exception as error:
            raise WorkerError(self._join_failure(store, error)) from error
        return store

    def _join_failure(self, store, error) -> str:
        try:
            missing = [r for r in range(self.world_size) if not store.check([f"joined/{r}"])]
        except Exception:
            return (f"rank {self.rank}: the rendezvous store at {self.where} stopped answering "
                    f"before every worker joined (rank 0 gone?): {self._reason(error)}")
        return (f"{_ranks(missing)} did not join within {self.timeout:g} s (rendezvous at "
                f"{self.where}, {self.world_size} workers expected)")

    def close(self) -> None:
        """Waits for every worker, then leaves the group.  The store's host leaves last, so
        that no worker loses the store while it still reads it."""
        if not dist.is_initialized():
            return
        self.barrier()
        try:
            self._store.set(f"left/{self.rank}", "1")
            if self._host_store:
                self._store.wait([f"left/{r}" for r in range(self.world_size)],
                                 timedelta(seconds=self.timeout))
        except Exception:
            pass  # the work is done and saved; a worker gone now changes nothing
        dist.destroy_process_group()

    def abort(self) -> None:
        """Leaves the group at once, waiting for no one (after an error)."""
        if dist.is_initialized():
            dist.destroy_process_group()

    def __enter__(self) -> "TorchCommunicator":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    # ------------------------------------------------------------------ the protocol
    def sum(self, array):
        """The element-wise sum of ``array`` over the workers (all-reduce), as a new array
        of the same type, dtype and shape."""
        tensor, back = self._tensor(array)
        self.bytes_summed += tensor.numel() * tensor.element_size()
        self._collective("all-reduce", lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM))
        return back(tensor)

    def broadcast(self, array):
        """Rank 0's ``array`` on every worker (a new array; every worker passes one of the
        same shape and dtype)."""
        tensor, back = self._tensor(array)
        self.bytes_broadcast += tensor.numel() * tensor.element_size()
        self._collective("broadcast", lambda: dist.broadcast(tensor, src=0))
        return back(tensor)

    def barrier(self) -> None:
        """Returns once every worker has called it (an all-reduce of one number on the
        CPU, so that it has the collectives' timeout and diagnosis whatever the backend)."""
        one = torch.ones(1, dtype=torch.int64)
        self._collective("barrier", lambda: dist.all_reduce(one))

    def gather(self, value) -> list | None:
        """Every worker's ``value`` (pickled), in rank order, on rank 0; None elsewhere."""
        out = [None] * self.world_size if self.is_root else None
        self._collective("gather", lambda: dist.gather_object(value, out, dst=0))
        return out

    def broadcast_object(self, value):
        """Rank 0's ``value`` (pickled) on every worker."""
        box = [value]
        self._collective("broadcast", lambda: dist.broadcast_object_list(box, src=0))
        return box[0]

    def scatter_object(self, values):
        """Worker r's item of rank 0's list ``values`` (pickled), on worker r."""
        box = [None]
        items = list(values) if self.is_root else None
        if items is not None and len(items) != self.world_size:
            raise CPGBNInputError(f"scatter_object needs one item per worker ({self.world_size}), "
                                  f"got {len(items)}")
        self._collective("scatter", lambda: dist.scatter_object_list(box, items, src=0))
        return box[0]

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _tensor(array):
        """A contiguous tensor copy of ``array`` to reduce in place, and the function that
        turns the result back into the caller's type and shape."""
        if torch.is_tensor(array):
            shape = array.shape
            return array.detach().clone().contiguous().reshape(-1), lambda t: t.reshape(shape)
        values = np.asarray(array)
        # a 1-D copy: the collective writes into it, and a 0-d array becomes one element
        tensor = torch.from_numpy(np.array(values, order="C", copy=True).reshape(-1))
        return tensor, lambda t: t.numpy().reshape(values.shape)

    def _collective(self, what: str, operation) -> None:
        self._calls += 1
        try:
            self._store.set(f"at/{self.rank}", str(self._calls))
            operation()
        except Exception as error:
            raise WorkerError(self._diagnosis(what, error)) from error

    def _diagnosis(self, what: str, error: Exception) -> str:
        """One line: which ranks did not reach this worker's current collective."""
        head = (f"distributed run failed on rank {self.rank} at {what} #{self._calls} "
                f"(timeout {self.timeout:g} s)")
        try:
            self._store.set_timeout(timedelta(seconds=_DIAGNOSIS_TIMEOUT_S))
            reached = {r: int(self._store.get(f"at/{r}")) if self._store.check([f"at/{r}"])
                       else 0 for r in range(self.world_size) if r != self.rank}
        except Exception:
            return (f"{head}: the rendezvous store at {self.where} no longer answers, so its "
                    f"host (rank 0, or torchrun's agent) is gone; {self._reason(error)}")
        behind = {r: n for r, n in reached.items() if n < self._calls}
        if not behind:
            return f"{head}: another worker left the collective; {self._reason(error)}"
        stuck = ", ".join(f"{r} at #{n}" for r, n in sorted(behind.items()))
        return (f"{head}: {_ranks(sorted(behind))} did not reach it (dead or hung: rank "
                f"{stuck}); {self._reason(error)}")

    @staticmethod
    def _reason(error: Exception) -> str:
        text = one_line(error)
        return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


def _ranks(ranks) -> str:
    ranks = list(ranks)
    return (f"rank {ranks[0]}" if len(ranks) == 1
            else "ranks " + ", ".join(str(r) for r in ranks))
