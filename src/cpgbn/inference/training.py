"""The training loop of the minibatch algorithms, written once: streaming minibatches,
progress, checkpoints with exact resume, and the non-finite-loss stop.

An *algorithm* (:class:`~cpgbn.inference.minibatch.MinibatchGibbs`,
:class:`~cpgbn.inference.hybrid.HybridTrainer`) takes one step per minibatch and carries its
own state; :func:`train` drives it:

* minibatches come from a :class:`Minibatches` stream over a *block source*: a corpus in memory
  (:class:`ConvDataBlocks`) or a one-document-per-line file read a block of lines at a time
  (:class:`TextFileBlocks`, which holds one block and one byte offset per block, never the
  file).  Every epoch visits the blocks in a seeded order and shuffles each block's documents
  with a generator seeded by (seed, epoch, block) before cutting it into minibatches, so the
  sequence of minibatches is a function of the seed and the file, and a :class:`Cursor` of
  three integers says where the stream stands;
* step i (1-based) draws its random numbers from streams derived from (seed, i) only, so a run
  resumed from the checkpoint after step i repeats steps i+1, ... exactly;
* every ``checkpoint_every`` steps (and at the end) the algorithm's arrays, the cursor and the
  trace are written atomically (``checkpoint.json`` + ``state.npz``, no pickle): a run killed
  with ``kill -9`` keeps the previous complete checkpoint;
* a non-finite loss raises :class:`NonFiniteLossError` naming the step, before anything of that
  step is saved, so the last good checkpoint stays as it was;
* progress: a tqdm bar with documents/s, loss and KL per document.
"""

from __future__ import annotations

import json
import math
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CPGBNInputError, ModelFormatError, empty_document_error
from ..layers.batches import subset_cells
from ..layers.cells import ConvData, from_token_sequences
from .checkpoint import fingerprint

__all__ = ["NonFiniteLossError", "StepReport", "Cursor", "ConvDataBlocks", "TextFileBlocks",
           "text_encoder", "Minibatches", "TrainingTrace", "train", "derived_seed",
           "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "cpgbn-minibatch-checkpoint"
CHECKPOINT_VERSION = 1
_META = "checkpoint.json"
_ARRAYS = "state.npz"


class NonFiniteLossError(CPGBNInputError):
    """Training produced a non-finite loss (one-line message naming the step)."""


def derived_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed that is a function of (seed, parts) alone (numpy's SeedSequence)."""
    state = np.random.SeedSequence([int(seed)] + [int(p) for p in parts]).generate_state(
        1, np.uint64)[0]
    return int(state >> np.uint64(1))


@dataclass
class StepReport:
    """What one step tells the driver: per-document loss (negative ELBO for the hybrid,
    negative log-likelihood for minibatch Gibbs), per-document KL (None when there is none),
    and the minibatch's size."""

    loss: float
    kl: float | None
    n_docs: int


# ---------------------------------------------------------------------- block sources
class ConvDataBlocks:
    """A corpus in memory as blocks of ``block_docs`` consecutive documents."""

    def __init__(self, data: ConvData, block_docs: int = 4096):
        if int(block_docs) < 1:
            raise CPGBNInputError(f"block_docs must be >= 1, got {block_docs}")
        if data.n_docs < 1:
            raise CPGBNInputError("cannot train on an empty corpus (0 documents)")
        self.data, self.block_docs = data, int(block_docs)

    @property
    def n_docs(self) -> int:
        return self.data.n_docs

    @property
    def n_blocks(self) -> int:
        return -(-self.data.n_docs // self.block_docs)

    def identity(self) -> dict:
        return {"kind": "memory", "n_docs": self.data.n_docs, "n_cells": self.data.n_cells,
                "block_docs": self.block_docs}

    def read_block(self, block: int):
        """(ConvData of block ``block``, index of its first document)."""
        start = block * self.block_docs
        stop = min(self.data.n_docs, start + self.block_docs)
        return subset_cells(self.data, np.arange(start, stop)), start


def text_encoder(vocabulary, filter_width: int, token_count="bernoulli-poisson",
                 padding: int = 0):
    """``encode(texts, first_line) -> ConvData`` for :class:`TextFileBlocks`: tokenize, encode
    with ``vocabulary`` (unknown words -> 0), cells as the Gibbs path builds them; an empty
    document raises the Gibbs path's one-line error, naming its line of the file."""
    from ..text.corpus import Corpus

    def encode(texts, first_line: int) -> ConvData:
        corpus = Corpus.from_texts(texts, vocabulary=vocabulary)
        empty = np.flatnonzero(corpus.lengths == 0)
        if len(empty):
            raise empty_document_error(first_line + int(empty[0]))
        return from_token_sequences(corpus.tokens, corpus.offsets, filter_width, token_count,
                                    padding)

    encode.filter_width = int(filter_width)
    return encode


class TextFileBlocks:
    """A one-document-per-line file (``label<TAB>text`` with ``labeled=True``; ``.gz`` read
    through) as blocks of ``block_docs`` lines, each turned into a ConvData by ``encode``
    (:func:`text_encoder`).  Holds one block at a time.

    The first use indexes the file in one streaming pass (:func:`~cpgbn.text.readers.
    index_line_blocks`: N for rho = N / |batch|, and one byte offset per block, so blocks can
    be visited in any order).  ``max_block_docs`` records the most documents held at once.
    """

    def __init__(self, path, encode, block_docs: int = 4096, *, labeled: bool = False):
        if int(block_docs) < 1:
            raise CPGBNInputError(f"block_docs must be >= 1, got {block_docs}")
        self.path, self.encode = Path(path), encode
        self.block_docs, self.labeled = int(block_docs), bool(labeled)
        #: F of the cells ``encode`` builds (set by :func:`text_encoder`)
        self.filter_width = getattr(encode, "filter_width", None)
        self._index = None
        self.max_block_docs = 0

    def _indexed(self):
        if self._index is None:
            from ..text.readers import index_line_blocks
            self._index = index_line_blocks(self.path, self.block_docs)
        return self._index

    @property
    def n_docs(self) -> int:
        return self._indexed()[1]

    @property
    def n_blocks(self) -> int:
        return len(self._indexed()[0])

    def identity(self) -> dict:
        stat = self.path.stat()
        return {"kind": "file", "path": str(self.path.resolve()), "size": stat.st_size,
                "n_docs": self.n_docs, "block_docs": self.block_docs}

    def read_block(self, block: int):
        """(ConvData of block ``block``, index of its first document)."""
        from ..text.readers import read_line_blocks
        offsets, _ = self._indexed()
        first_doc = block * self.block_docs
        blocks = read_line_blocks(self.path, self.block_docs, labeled=self.labeled,
                                  start=offsets[block], first_line=first_doc + 1)
        lines = next(blocks, None)
        blocks.close()
        if lines is None:
            raise CPGBNInputError(f"{self.path}: no documents at byte {offsets[block]} (the "
                                  "file changed since it was indexed?)")
        self.max_block_docs = max(self.max_block_docs, len(lines.texts))
        return self.encode(lines.texts, lines.first_line), first_doc


# ---------------------------------------------------------------------- minibatches
@dataclass
class Cursor:
    """Where a minibatch stream stands: the next minibatch is number ``batch`` of the
    ``block``-th block visited in epoch ``epoch``."""

    epoch: int = 0
    block: int = 0
    batch: int = 0


class Minibatches:
    """Minibatches of ``batch_size`` documents from a block source (module docstring).

    Each epoch visits the blocks in an order drawn from (seed, epoch) and shuffles each block's
    documents with a generator seeded by (seed, epoch, block), so that a file sorted by class
    still gives mixed minibatches when it spans several blocks.  A block of n documents gives
    ceil(n / batch_size) minibatches (the last one smaller when n is not a multiple).
    :meth:`next` returns (ConvData, indices in the corpus) and advances ``cursor``.
    """

    def __init__(self, source, batch_size: int, seed: int, cursor: Cursor | None = None):
        if int(batch_size) < 1:
            raise CPGBNInputError(f"batch_size must be >= 1, got {batch_size}")
        self.source, self.batch_size, self.seed = source, int(batch_size), int(seed)
        self.cursor = Cursor() if cursor is None else cursor
        self._block = None  # (key, data, first_doc, order)
        self._order = None  # (epoch, block order)

    def _current_block(self):
        c = self.cursor
        if self._order is None or self._order[0] != c.epoch:
            rng = np.random.default_rng(derived_seed(self.seed, 0xB1, c.epoch))
            self._order = (c.epoch, rng.permutation(self.source.n_blocks))
        block = int(self._order[1][c.block])
        key = (c.epoch, block)
        if self._block is None or self._block[0] != key:
            self._block = None  # drop the old block before reading the next one
            data, first_doc = self.source.read_block(block)
            order = np.random.default_rng(derived_seed(self.seed, 0xB10C, c.epoch, block)) \
                .permutation(data.n_docs)
            self._block = (key, data, first_doc, order)
        return self._block

    def next(self):
        _, data, first_doc, order = self._current_block()
        c = self.cursor
        docs = np.sort(order[c.batch * self.batch_size:(c.batch + 1) * self.batch_size])
        if (c.batch + 1) * self.batch_size < data.n_docs:
            self.cursor = Cursor(c.epoch, c.block, c.batch + 1)
        elif c.block + 1 < self.source.n_blocks:
            self.cursor = Cursor(c.epoch, c.block + 1, 0)
        else:
            self.cursor = Cursor(c.epoch + 1, 0, 0)
        return subset_cells(data, docs), first_doc + docs


# ---------------------------------------------------------------------- the loop
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


def _save(directory, algorithm, step: int, cursor: Cursor, trace: TrainingTrace,
          print_: str) -> None:
    from ..files import write_directory_atomically

    arrays = dict(algorithm.to_arrays())
    arrays.update(trace.to_arrays())
    meta = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, "step": step,
            "cursor": asdict(cursor), "algorithm": algorithm.meta(), "fingerprint": print_}

    def write(tmp: Path) -> None:
        np.savez(tmp / _ARRAYS, **arrays)
        (tmp / _META).write_text(json.dumps(meta), encoding="utf-8")

    write_directory_atomically(directory, write, marker=_META)


def read_checkpoint(directory, print_: str | None = None):
    """(step, Cursor, TrainingTrace, algorithm meta, arrays) of a checkpoint directory; with
    ``print_``, refuse one made with other data or parameters."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / _META).read_text(encoding="utf-8"))
        if meta.get("format") != CHECKPOINT_FORMAT or \
                meta.get("format_version") != CHECKPOINT_VERSION:
            raise ModelFormatError(f"{directory} is not a cpgbn minibatch checkpoint of format "
                                   f"{CHECKPOINT_VERSION}")
        if print_ is not None and meta["fingerprint"] != print_:
            raise CPGBNInputError(f"checkpoint {directory} was made with other data or "
                                  "parameters; delete it or run without resume")
        with np.load(directory / _ARRAYS, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return (int(meta["step"]), Cursor(**meta["cursor"]), TrainingTrace.from_arrays(arrays),
                meta["algorithm"], arrays)
    except (OSError, KeyError, TypeError, ValueError, json.JSONDecodeError,
            zipfile.BadZipFile) as exc:
        if isinstance(exc, CPGBNInputError):
            raise
        raise ModelFormatError(f"checkpoint {directory} is unreadable ({exc.__class__.__name__}: "
                               f"{exc}); delete it or run without resume") from None


def train(algorithm, source, n_steps: int, *, batch_size: int, seed: int,
          checkpoint_dir=None, checkpoint_every: int = 50, resume: bool = False,
          progress: bool | None = None, on_step=None) -> TrainingTrace:
    """Run ``algorithm.step`` on minibatches until ``n_steps`` steps are done.

    Parameters
    ----------
    algorithm : an object with ``step(i, batch) -> StepReport``, ``to_arrays()``, ``meta()``,
        ``load(arrays, meta)`` and ``config()`` (a JSON-able dict of what changes the run).
    source : a block source (:class:`ConvDataBlocks`, :class:`TextFileBlocks`).
    n_steps : int -- the total number of minibatch steps (a resumed run continues to it).
    batch_size, seed : the minibatch stream's (:class:`Minibatches`).
    checkpoint_dir : directory or None; ``checkpoint_every`` steps between checkpoints (one is
        always written at the end).
    resume : continue from ``checkpoint_dir`` when it holds a checkpoint of the same run.
    progress : tqdm bar (None: only when stderr is a terminal; False: none).
    on_step : optional ``on_step(i, report)`` after each step (tests stop a run with it).

    Returns the trace of every step (with a resumed run, the steps before it too).  Raises
    :class:`NonFiniteLossError` on a non-finite loss, leaving the last checkpoint as it was.
    """
    if int(n_steps) < 1:
        raise CPGBNInputError(f"n_steps must be >= 1, got {n_steps}")
    if int(checkpoint_every) < 1:
        raise CPGBNInputError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    print_ = fingerprint({"config": algorithm.config(), "source": source.identity(),
                          "batch_size": int(batch_size), "seed": int(seed)})
    step, cursor, trace = 0, Cursor(), TrainingTrace()
    if resume and checkpoint_dir is not None and (Path(checkpoint_dir) / _META).exists():
        step, cursor, trace, meta, arrays = read_checkpoint(checkpoint_dir, print_)
        algorithm.load(arrays, meta)
    batches = Minibatches(source, batch_size, seed, cursor)
    last_saved = step if resume else None
    bar = None
    if progress is not False and step < n_steps:
        from tqdm.auto import tqdm
        bar = tqdm(total=int(n_steps), initial=step, desc="minibatches", unit="batch",
                   leave=False, disable=None if progress is None else not progress)
    try:
        while step < n_steps:
            i = step + 1
            batch, _ = batches.next()
            start = time.perf_counter()
            report = algorithm.step(i, batch)
            seconds = time.perf_counter() - start
            if not (math.isfinite(report.loss) and (report.kl is None or math.isfinite(report.kl))):
                where = (f"the last good checkpoint (step {last_saved}) in {checkpoint_dir} is "
                         "kept" if checkpoint_dir is not None and last_saved is not None
                         else "no checkpoint was written")
                raise NonFiniteLossError(
                    f"training stopped at step {i}: the loss is not finite (loss {report.loss}, "
                    f"KL {report.kl}); {where}; lower the learning rate or check the data")
            step = i
            trace.loss.append(report.loss)
            trace.kl.append(math.nan if report.kl is None else report.kl)
            trace.seconds.append(seconds)
            if checkpoint_dir is not None and (step % checkpoint_every == 0 or step == n_steps):
                _save(checkpoint_dir, algorithm, step, batches.cursor, trace, print_)
                last_saved = step
            if bar is not None:
                postfix = {"docs/s": f"{report.n_docs / max(seconds, 1e-9):.0f}",
                           "loss": f"{report.loss:.4g}"}
                if report.kl is not None:
                    postfix["KL"] = f"{report.kl:.4g}"
                bar.set_postfix(postfix, refresh=False)
                bar.update(1)
            if on_step is not None:
                on_step(step, report)
    finally:
        if bar is not None:
            bar.close()
    return trace
