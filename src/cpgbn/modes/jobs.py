"""A fit's job, built in one place: the three ways the training documents reach a mode (and
the ways a transform's documents do, :func:`transform_blocks`).

:meth:`CPGBN.fit <cpgbn.model.CPGBN.fit>` reads its settings, picks the mode
(:func:`~cpgbn.modes.mode_for`), builds the job here and hands it to ``mode.fit``:

* :func:`job_from_texts` -- documents in memory (strings, a Corpus, or a TextFile read whole
  where the mode holds every position): the cells of the whole corpus;
* :func:`job_from_file` -- a :class:`~cpgbn.text.stream.TextFile` streamed by a minibatch
  mode: one pass builds the vocabulary, then a block of lines is encoded at a time;
* :func:`job_from_shard` -- one worker of a distributed fit: its shard's cells, the whole
  corpus' vocabulary (:mod:`cpgbn.modes.sharded`).

What the estimator contributes is a :class:`JobSettings`: its validated settings, the seed,
the checkpointing, the parameters that change the chain, and how it makes a corpus and a
corpus' cells (CPGBN's convolutional cells or PGBN's word counts), so that no function here
reaches into the estimator.  The labels are checked here, once, for every path.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import blocks
from ..errors import CPGBNInputError, empty_document_error
from ..layers.cells import ConvData, ObservationModel
from ..text.corpus import Corpus
from ..text.documents import Documents, labels_per_document
from .base import Checkpointing, InferenceMode, Training

__all__ = ["JobSettings", "job_from_texts", "job_from_file", "job_from_shard",
           "transform_blocks"]


@dataclass(frozen=True)
class JobSettings:
    """What an estimator gives the job builders."""

    settings: dict
    """The estimator's validated settings (``layers``, ``hyper``, ``vocab_size``,
    ``filter_width``, ...)."""
    seed: int
    checkpointing: Checkpointing
    chain_params: dict
    """The parameters that change the chain (fingerprints of checkpoints)."""
    corpus: Callable[[object, int | None], Corpus]
    """``corpus(X, vocab_size)``: documents (strings or a Corpus) as a Corpus with a new
    vocabulary of at most ``vocab_size`` rows."""
    cells: Callable[[Corpus], ConvData]
    """A corpus' cells, as the sampler reads them."""
    check_memory: Callable[[int | None], None]
    """Raises when a job of that many bytes is past the memory limit."""
    observation: ObservationModel
    padding: int
    block_docs: int = blocks.STREAM_BLOCK_DOCS
    """Documents per block of a streamed file and of the minibatch block stream."""

    def training(self, vocabulary, n_tokens: int, **job) -> Training:
        s = self.settings
        return Training(vocabulary, s["layers"], s["hyper"], self.seed, n_tokens,
                        self.chain_params, checkpointing=self.checkpointing,
                        block_docs=self.block_docs, **job)


def job_from_texts(spec: JobSettings, mode: InferenceMode, X, y=None
                   ) -> tuple[Training, Corpus]:
    """The job of a fit on the documents ``X`` in memory (a TextFile is read whole), and
    their corpus (what the fit's record of kernel windows reads)."""
    X, carried = Documents.of(X).read()
    y = carried if y is None else y
    corpus = spec.corpus(X, spec.settings["vocab_size"])
    if len(corpus) == 0:
        raise CPGBNInputError("cannot fit on an empty corpus (0 documents)")
    empty = np.flatnonzero(corpus.lengths == 0)
    if len(empty):
        raise empty_document_error(int(empty[0]) + 1, len(empty))
    labels = labels_per_document(y, len(corpus))
    data = spec.cells(corpus)
    spec.check_memory(mode.training_bytes(data, spec.settings["layers"], len(corpus.vocabulary)))
    training = spec.training(corpus.vocabulary, int(corpus.lengths.sum()), data=data,
                             labels=labels)
    return training, corpus


def job_from_file(spec: JobSettings, mode: InferenceMode, documents: Documents) -> Training:
    """The job of a fit that streams the file of ``documents`` a block at a time (one pass
    first)."""
    from ..text.stream import scan_text_file
    text_file = documents.file
    filter_width = spec.settings["filter_width"]
    scan = scan_text_file(text_file, spec.settings["vocab_size"], block_lines=spec.block_docs,
                          short_below=filter_width - 2 * spec.padding)
    spec.observation.check_document(scan.longest)   # before training, not at its block
    if scan.n_short:
        warnings.warn(f"{scan.n_short} document(s) shorter than filter_width={filter_width} "
                      "are padded with empty columns", stacklevel=3)
    vocabulary = scan.vocabulary

    def encode(texts, first_line):   # a block's cells, as an in-memory fit builds them
        with warnings.catch_warnings():   # short documents: counted by the scan
            warnings.simplefilter("ignore", UserWarning)
            return spec.cells(Corpus.from_texts(texts, vocabulary=vocabulary))
    encode.filter_width = filter_width   # what the block source reports as F

    return spec.training(vocabulary, scan.n_tokens, file=text_file, scan=scan, encode=encode)


def job_from_shard(spec: JobSettings, mode: InferenceMode, X, y, communicator) -> Training:
    """The job of one worker of a distributed fit: its shard's cells, the whole corpus'
    vocabulary (:mod:`cpgbn.modes.sharded`)."""
    from ..inference.communicator import agree
    from .sharded import read_shard, shared_vocabulary
    if not mode.distributes:
        raise CPGBNInputError(f"inference={mode.name!r} does not run distributed yet; "
                              f"use inference='gibbs', 'minibatch-gibbs' or 'hybrid'")
    shard = read_shard(X, y, communicator, mode.shard_block())
    vocabulary, n_tokens = shared_vocabulary(shard, spec.settings["vocab_size"], communicator)
    built = []

    def build():   # a shard's document past the int32 counts: every worker refuses it
        with warnings.catch_warnings():
            if not communicator.is_root:   # each short document is reported once
                warnings.simplefilter("ignore", UserWarning)
            built.append(spec.cells(Corpus.from_texts(shard.texts, vocabulary=vocabulary)))
    agree(build, communicator)
    data = built[0]
    agree(lambda: spec.check_memory(mode.training_bytes(data, spec.settings["layers"],
                                                        len(vocabulary))), communicator)
    labels = labels_per_document(shard.labels, len(shard.texts))
    return spec.training(vocabulary, n_tokens, data=data, labels=labels,
                         first_doc=shard.start, communicator=communicator)


def transform_blocks(mode: InferenceMode, X, communicator):
    """The documents ``X`` of a ``transform``, as (documents, global id of the first) per
    block: a worker's shard when several share the work (each returns its rows to the root),
    a TextFile a block at a time where the mode's features of a document do not depend on
    the others' (:meth:`~cpgbn.modes.base.InferenceMode.streams_transform`), else all of them
    at once."""
    documents = Documents.of(X)
    if communicator.world_size > 1:
        from .sharded import read_shard
        refusal = mode.transform_refusal()
        if refusal is not None:
            raise CPGBNInputError(refusal)
        shard = read_shard(documents, None, communicator, mode.shard_block())
        return [(shard.texts, shard.start)]
    if documents.streamed and mode.streams_transform():
        return ((texts, 0) for texts in documents.blocks(blocks.STREAM_BLOCK_DOCS))
    return [(documents, 0)]
