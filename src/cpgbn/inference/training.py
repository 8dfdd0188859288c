"""The training loop, written once for every inference algorithm: steps, progress, the trace,
checkpoints with exact resume, and the non-finite-loss stop.

An *algorithm* takes one step per batch and carries its own state; :func:`train` drives it.
Full-batch Gibbs (:class:`~cpgbn.inference.driver.GibbsChain`: a step is a sweep over the
whole corpus), minibatch Gibbs (:class:`~cpgbn.inference.minibatch.MinibatchGibbs`) and the
hybrid (:class:`~cpgbn.inference.hybrid.HybridTrainer`) are such algorithms.  The protocol
(:class:`Algorithm`):

* ``step(i, batch) -> StepReport``: step i (1-based) on a :class:`~cpgbn.inference.batches.
  Batch`, drawing its random numbers from streams derived from (seed, i) only, so that a run
  resumed from the checkpoint after step i repeats steps i+1, ... exactly;
* ``config()``: a JSON-able dict of what changes the run (part of the checkpoint's
  fingerprint);
* ``non_finite_hint`` (optional): what the non-finite-loss error suggests (default "check the
  data"; the hybrid's names its learning rate);
* ``to_arrays()`` / ``meta()``: what a checkpoint saves of the algorithm (numpy arrays, and
  JSON-able values); ``load(arrays, meta)`` restores it.  A wrapper (a distributed update, a
  classifier head) composes by adding its own arrays and meta to those of what it wraps.

Batches come from a stream (:mod:`cpgbn.inference.batches`: :class:`~cpgbn.inference.batches.
Minibatches` or :class:`~cpgbn.inference.batches.WholeCorpus`) whose ``cursor`` the checkpoint
keeps.  Every ``checkpoint_every`` steps (and at the end) the algorithm's arrays, the cursor and
the trace are written atomically (:mod:`cpgbn.inference.checkpoint`), by the process that owns
the checkpoint only (``communicator.is_root``): a run killed with ``kill -9`` keeps the previous
complete checkpoint.  A non-finite loss raises :class:`NonFiniteLossError` naming the step,
before anything of that step is saved.  Progress: a bar with documents/s and the loss
(:mod:`cpgbn.progress`: tqdm's on a terminal, lines otherwise).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

from ..errors import CPGBNInputError
from . import checkpoint
from .batches import Batch, Cursor
from .communicator import as_communicator, own_item

__all__ = ["NonFiniteLossError", "StepReport", "Algorithm", "TrainingTrace", "train"]


class NonFiniteLossError(CPGBNInputError):
    """Training produced a non-finite loss (one-line message naming the step)."""


@dataclass
class StepReport:
    """What one step tells the loop: the loss per document (negative ELBO for the hybrid,
    negative log-likelihood for the Gibbs algorithms), the KL per document (None when there is
    none), the batch's size, and the seconds the step's own work took (None: the loop times the
    whole call; a Gibbs sweep leaves its diagnostic out)."""

    loss: float
    kl: float | None
    n_docs: int
    seconds: float | None = None


class Algorithm(Protocol):
    """What :func:`train` calls and reads (module docstring)."""

    #: Whether each worker's ``to_arrays`` holds rows of its own documents, which the root
    #: gathers and ``load`` deals back (the Gibbs chain), instead of the same state on every
    #: worker (the minibatch algorithms).
    deals_rows: bool
    #: Whether the run ends before ``n_steps`` (validation's patience ran out).
    finished: bool
    #: What the error of a non-finite loss suggests.
    non_finite_hint: str

    def step(self, i: int, batch: Batch) -> StepReport: ...

    def config(self) -> dict: ...

    def to_arrays(self) -> dict: ...

    def meta(self) -> dict: ...

    def load(self, arrays: dict, meta: dict) -> None: ...


@dataclass
class TrainingTrace:
    """Per step: loss and KL per document (NaN when the algorithm has no KL), seconds."""

    loss: list = field(default_factory=list)
    kl: list = field(default_factory=list)
    seconds: list = field(default_factory=list)

    def to_arrays(self) -> dict:
        return {f"trace_{k}": np.asarray(v, dtype=np.float64) for k, v in asdict(self).items()}

    @classmethod
    def from_arrays(cls, arrays) -> "TrainingTrace":
        return cls(*(arrays[f"trace_{k}"].tolist() for k in ("loss", "kl", "seconds")))


def _progress_bar(progress, total: int, initial: int, desc: str, unit: str):
    if progress is False or initial >= total:
        return None
    if hasattr(progress, "update"):
        return progress   # the caller's bar
    if callable(progress):
        return progress(total, initial)   # the caller's factory
    from ..progress import progress_bar
    return progress_bar(total=int(total), initial=initial, desc=desc, unit=unit, leave=False)


def train(algorithm, batches, n_steps: int, *, checkpoint_dir=None, checkpoint_every: int = 50,
          resume: bool = False, progress=None, desc: str = "minibatches", unit: str = "batch",
          on_step=None, first_step: int = 0, communicator=None,
          save_at_end: bool = True) -> TrainingTrace:
    """Run ``algorithm.step`` on batches from ``batches`` until ``n_steps`` steps are done.

    Parameters
    ----------
    algorithm : an :class:`Algorithm`.
    batches : a stream of batches (``next()``, ``cursor``, ``identity()``).
    n_steps : int -- the total number of steps (a resumed run continues to it).
    checkpoint_dir : directory or None; ``checkpoint_every`` steps between checkpoints, and
        one at the end unless ``save_at_end`` is False (a caller that deletes it right away).
    resume : continue from ``checkpoint_dir`` when it holds a checkpoint of the same run.
    progress : None or True (:func:`cpgbn.progress.progress_bar`: a tqdm bar when stderr is a
        terminal, else a progress line at most every 30 s), False (none), a bar of the
        caller's (an object with ``update(n)``), or a factory ``progress(total, initial) ->
        bar``; ``desc`` and ``unit`` label a bar made here.
    on_step : optional ``on_step(i, report)`` after each step (tests stop a run with it).
    first_step : the steps the algorithm has already taken (a chain continued by hand).
    communicator : with several processes, only ``communicator.is_root`` reads and writes
        checkpoints; every worker's ``to_arrays`` is called when one is due (the algorithm
        gathers its rows to the root), and every worker's ``load`` on resume (with the
        checkpoint's arrays, or, for an algorithm that ``deals_rows``, the others' with the
        trace alone: the root's ``load`` deals the rows).

    Returns the trace of the steps run here (with a resumed run, the steps before it too).
    Raises :class:`NonFiniteLossError` on a non-finite loss, leaving the last checkpoint as it
    was.
    """
    if int(n_steps) < 1:
        raise CPGBNInputError(f"n_steps must be >= 1, got {n_steps}")
    if int(checkpoint_every) < 1:
        raise CPGBNInputError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    communicator = as_communicator(communicator)
    deals_rows = algorithm.deals_rows
    writes = checkpoint_dir is not None and communicator.is_root
    print_ = checkpoint.fingerprint({"config": algorithm.config(),
                                     "batches": batches.identity()})
    step, trace = int(first_step), TrainingTrace()
    saved = None
    if resume:
        saved = _read_shared(checkpoint_dir, print_, communicator, deals_rows)
    if saved is not None:
        step, trace = saved.step, TrainingTrace.from_arrays(saved.arrays)
        batches.cursor = _own_cursor(saved.cursor, communicator)
        algorithm.load(saved.arrays, saved.meta)
    last_saved = step if resume else None
    bar = _progress_bar(progress, n_steps, step, desc, unit)
    # an algorithm may end the run before n_steps (validation's patience): ``finished``
    stopped = lambda: bool(algorithm.finished)  # noqa: E731
    try:
        while step < n_steps and not stopped():
            i = step + 1
            batch = batches.next()
            start = time.perf_counter()
            report = algorithm.step(i, batch)
            seconds = time.perf_counter() - start if report.seconds is None else report.seconds
            if not (math.isfinite(report.loss) and (report.kl is None or math.isfinite(report.kl))):
                where = (f"the last good checkpoint (step {last_saved}) in {checkpoint_dir} is "
                         "kept" if checkpoint_dir is not None and last_saved is not None
                         else "no checkpoint was written")
                raise NonFiniteLossError(
                    f"training stopped at step {i}: the loss is not finite (loss {report.loss}, "
                    f"KL {report.kl}); {where}; "
                    f"{algorithm.non_finite_hint}")
            step = i
            trace.loss.append(report.loss)
            trace.kl.append(math.nan if report.kl is None else report.kl)
            trace.seconds.append(seconds)
            last = step == n_steps or stopped()
            if checkpoint_dir is not None and ((step % checkpoint_every == 0 and not last)
                                               or (last and save_at_end)):
                # every worker of a group takes part: its cursor, and its rows when the
                # algorithm deals rows, go to the root (the others' state is the root's)
                if writes or deals_rows:
                    arrays = dict(algorithm.to_arrays())
                cursor = asdict(batches.cursor)
                workers = communicator.gather(cursor)
                if workers is not None and any(w != cursor for w in workers):
                    cursor["workers"] = workers   # each at its own place in its shard
                if writes:
                    arrays.update(trace.to_arrays())
                    checkpoint.save_checkpoint(checkpoint_dir, step=step, cursor=cursor,
                                               meta=algorithm.meta(), arrays=arrays,
                                               print_=print_)
                last_saved = step
            if bar is not None:
                if hasattr(bar, "set_postfix"):
                    postfix = {"docs/s": f"{report.n_docs / max(seconds, 1e-9):.0f}",
                               "loss": f"{report.loss:.4g}"}
                    if report.kl is not None:
                        postfix["KL"] = f"{report.kl:.4g}"
                    bar.set_postfix(postfix, refresh=False)
                bar.update(1)
            if on_step is not None:
                on_step(step, report)
    finally:
        if bar is not None and bar is not progress:
            bar.close()
    return trace


def _own_cursor(saved: dict, communicator) -> Cursor:
    """This worker's place in its batch stream from a checkpoint's cursor.  A group's
    checkpoint keeps every worker's (``workers``) where they differ: when they agree (a
    full-batch chain, whose stream has one place) any number of workers resumes it; when they
    differ (minibatches of each worker's shard) only as many workers as wrote it."""
    saved = dict(saved)
    workers = saved.pop("workers", None)
    if workers is None or all(w == workers[0] for w in workers):
        return Cursor(**saved)
    return Cursor(**own_item(
        workers, communicator, lambda world: (
            f"this checkpoint was written by {len(workers)} workers, each at its own place in "
            f"its shard's minibatches; resume it with {len(workers)} workers, not {world}")))


def _read_shared(directory, print_: str, communicator, deals_rows: bool):
    """The checkpoint of a run (one process: a group of one), read by the root alone (the
    directory need be on the root's disk only): every worker gets the step, cursor, meta and trace, and the
    algorithm's arrays (the same state on every worker: the minibatch algorithms), or, when
    the algorithm ``deals_rows`` (each worker holds rows of its own documents: the Gibbs
    chain), the arrays stay on the root, whose ``load`` deals each worker its part.  None when
    there is no checkpoint; a refused one raises the root's one-line error on every worker."""
    found = own = None
    if communicator.is_root and checkpoint.has_checkpoint(directory):
        try:
            found = checkpoint.read_checkpoint(directory, print_)
        except CPGBNInputError as exc:
            own = exc
    error = None if own is None else str(own)
    head = None if found is None else (found.step, found.cursor, found.meta,
                                       {k: v for k, v in found.arrays.items()
                                        if k.startswith("trace_") or not deals_rows})
    head, error = communicator.broadcast_object((head, error))
    if own is not None:   # the root's error as it was raised (its class kept)
        raise own
    if error is not None:
        raise CPGBNInputError(error)
    if head is None:
        return None
    step, cursor, meta, trace = head
    return checkpoint.Checkpoint(step, cursor, meta,
                                 found.arrays if found is not None else dict(trace))
