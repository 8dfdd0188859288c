"""How the workers of a run talk, and how one process is a group of one.

A run in one process and a data-parallel run of several workers (``cpgbn fit
--distributed``, :mod:`cpgbn.backends.torch.distributed`) are the same code: every layer below
the estimator holds a :class:`Communicator`, and one process holds :class:`SingleProcess`,
whose collectives are identities (the sum of one worker's array is that array; its gather is a
list of one).  So nothing tests whether a communicator is present.  What still depends on the
group is written as such:

* ``communicator.is_root``: what one worker does for all -- writing a checkpoint or a
  model, showing a progress bar, reading the gathered rows;
* ``communicator.world_size > 1``: a group's own algorithm where one process has a plainer
  one that is not bit for bit the same, written here once as a collective that is exact in
  one process (:func:`weighted_mean`: ``loss * n / n`` may round differently;
  :func:`gather_row_arrays`, which copies nothing in one process), or where the data are
  split (a worker reads its shard, :mod:`cpgbn.modes.sharded`).

The functions below are the agreements every run makes (in one process they return at
once): :func:`same_settings` (all workers were started alike), :func:`agree` (a check that may
fail on one worker fails on all), :func:`root_verdict`, :func:`gather_rows`,
:func:`gather_row_arrays`, :func:`deal`, :func:`weighted_mean` and :func:`own_item`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import CPGBNInputError

__all__ = ["Communicator", "SingleProcess", "as_communicator", "same_settings", "root_verdict",
           "agree", "gather_rows", "gather_row_arrays", "deal", "weighted_mean", "own_item"]


class Communicator(Protocol):
    """What the inference layer needs from a group of workers: a sum-reduce, a broadcast from
    the root and a barrier (:class:`SingleProcess`; torch.distributed in
    :mod:`cpgbn.backends.torch.distributed`).  Every worker calls each method in the same
    order with arrays of the same shape and dtype; an array comes back of the type, dtype and
    shape it went in (numpy, or a backend's tensor).  A worker that fails or stops answering
    makes the others raise within the communicator's timeout, never hang."""

    is_root: bool
    rank: int
    world_size: int

    def sum(self, array):
        """The element-wise sum of ``array`` over all workers, returned on every worker."""

    def broadcast(self, array):
        """The root's ``array``, returned on every worker."""

    def barrier(self) -> None:
        """Returns once every worker has called it."""

    def gather(self, value) -> list | None:
        """Every worker's ``value`` (any picklable object), in rank order, on the root; None
        on the others.  For what is read once, not per sweep (a shard's word counts, its
        features at the end)."""

    def broadcast_object(self, value):
        """The root's ``value`` (any picklable object) on every worker."""

    def scatter_object(self, values):
        """Worker r's item of the root's list ``values`` (one picklable object per worker;
        ignored on the others): a checkpoint's rows dealt to the workers that hold them."""


@dataclass
class SingleProcess:
    """The trivial communicator: one worker, which is the root."""

    is_root: bool = True
    rank: int = 0
    world_size: int = 1

    @staticmethod
    def sum(array):
        return array

    @staticmethod
    def broadcast(array):
        return array

    @staticmethod
    def barrier() -> None:
        return None

    @staticmethod
    def gather(value) -> list:
        return [value]

    @staticmethod
    def broadcast_object(value):
        return value

    @staticmethod
    def scatter_object(values):
        return values[0]


def as_communicator(communicator) -> Communicator:
    """The API's ``communicator=None`` (one process) as :class:`SingleProcess`: the one place
    where a missing communicator is read."""
    return SingleProcess() if communicator is None else communicator


def same_settings(settings, communicator) -> None:
    """Every worker raises one line unless all were given the same ``settings`` (the
    parameters that change the chain, the seed's included): a worker started with another
    command line would draw its documents under other conditionals, and the sums would mix
    two models without a word.  ``settings``: a dict, or a function that makes it (called
    only in a group: one process agrees with itself, and a model's fingerprint need not be
    hashed for it)."""
    if communicator.world_size == 1:
        return
    def judge(seen):
        names = sorted({name for one in seen for name in one}, key=str)
        differ = [name for name in names if len({one.get(name) for one in seen}) > 1]
        if not differ:
            return None
        return ("the workers were given different settings: " + "; ".join(
            f"{name} (" + ", ".join(f"rank {r}: {one.get(name, 'unset')}"
                                    for r, one in enumerate(seen)) + ")"
            for name in differ) + "; start every worker with the same command")
    if callable(settings):
        settings = settings()
    root_verdict({name: repr(value) for name, value in settings.items()}, judge, communicator)


def root_verdict(value, judge, communicator) -> None:
    """Every worker's ``value`` goes to the root, whose ``judge(values)`` (rank order) gives
    an error message or None; every worker then raises that one-line CPGBNInputError or
    goes on, so none is left waiting in a collective for one that stopped."""
    values = communicator.gather(value)
    message = communicator.broadcast_object(None if values is None else judge(values))
    if message is not None:
        raise CPGBNInputError(message)


def agree(check, communicator) -> None:
    """Run ``check()`` on every worker; if it raised a CPGBNInputError on any of them, every
    worker raises the first one's (in rank order): the error itself where it was raised (its
    class kept: a MemoryLimitError stays one), a CPGBNInputError of its message elsewhere.
    For a check whose verdict may differ by shard (the memory a shard needs): a worker that
    raised alone would leave the others waiting in the next collective until the timeout."""
    own = None
    try:
        check()
    except CPGBNInputError as error:
        own = error
    messages = communicator.gather(None if own is None else str(own))
    first = communicator.broadcast_object(
        None if messages is None else next((m for m in messages if m is not None), None))
    if first is None:
        return
    if own is not None and str(own) == first:
        raise own
    raise CPGBNInputError(first)


def gather_rows(array: np.ndarray, communicator) -> np.ndarray | None:
    """The workers' rows of ``array`` stacked in rank order (document order) on the root;
    None on the others."""
    parts = communicator.gather(np.ascontiguousarray(array))
    return None if parts is None else np.concatenate(parts, axis=0)


def gather_row_arrays(arrays: dict, is_row, communicator) -> dict:
    """``arrays`` with every array whose name ``is_row`` replaced by the workers' rows of it
    stacked in rank order, on the root; {} on the others (the shared arrays are the root's).
    One process: ``arrays`` itself, no copy (a Gibbs checkpoint's w and m may be most of the
    memory)."""
    if communicator.world_size == 1:
        return arrays
    rows = communicator.gather({k: v for k, v in arrays.items() if is_row(k)})
    if rows is None:
        return {}
    return dict(arrays, **{k: np.concatenate([part[k] for part in rows], axis=0)
                           for k in rows[0]})


def deal(make_parts, communicator):
    """Worker r's item of the list ``make_parts()`` that the root alone makes (one item per
    worker): a checkpoint's rows dealt to the workers that hold them.  An item that is an
    exception is raised on its worker."""
    part = communicator.scatter_object(make_parts() if communicator.is_root else None)
    if isinstance(part, Exception):
        raise part
    return part


def weighted_mean(value: float, weight: int, communicator) -> tuple[float, int]:
    """(the mean of the workers' ``value`` weighted by their ``weight``, the weights' sum) on
    every worker: a loss per document over the union of the workers' batches.  One process:
    ``(value, weight)`` as they are (``value * n / n`` may round differently)."""
    if communicator.world_size == 1:
        return float(value), int(weight)
    summed = communicator.sum(np.array([value * weight, weight], dtype=np.float64))
    return float(summed[0] / summed[1]), int(summed[1])


def own_item(items: list, communicator, refusal):
    """This worker's item of ``items``, one per worker of the group that made them (a
    checkpoint's cursors); the one-line error ``refusal(world_size)`` when this group is of
    another size."""
    if len(items) != communicator.world_size:
        raise CPGBNInputError(refusal(communicator.world_size))
    return items[communicator.rank]
