"""One worker's part of a distributed fit: its shard of the corpus and the shared vocabulary.

``CPGBN(...).fit(X, communicator=comm)`` on every worker (``cpgbn fit --distributed`` under
torchrun) trains the exact Gibbs sampler data-parallel
(:mod:`cpgbn.backends.torch.distributed`, architecture.md).  Before the chain starts:

* :func:`read_shard`: the worker's documents, the global ids :func:`shard_range` gives it.
  A :class:`~cpgbn.text.TextFile` is counted in one streaming pass, then only the shard's
  lines are kept (the lines before are read past a block at a time); texts in memory (the
  same list on every worker) are sliced.
  The workers first compare what they read (:func:`same_corpus`: the count and a digest of
  the texts and labels), so another copy of the file on one machine is an error, not a
  corpus with documents dropped or repeated.
* :func:`shared_vocabulary`: each worker counts the tokens of its shard, the root adds the
  counts and ranks them as one process ranks the whole corpus'
  (:meth:`~cpgbn.text.vocabulary.Vocabulary.from_frequencies`: integer counts, ties by
  string), and broadcasts the vocabulary, so every worker encodes with the single process'
  vocabulary.  An empty document anywhere makes every worker raise the same one-line error.

After the chain the root collects the workers' rows of per-document arrays (the training
features) in rank order, which is document order
(:func:`cpgbn.inference.communicator.gather_rows`, which every run calls: in one process it
returns the rows it is given).

The layout (:func:`shard_range`): worker ``rank`` of ``world_size`` holds the documents with
global ids ``start .. stop - 1``, consecutive whole blocks of the sampler's random-stream
block (the numba backend's :data:`~cpgbn.blocks.DOC_BLOCK` documents; the PyTorch backend's
blocks are larger multiples of it), as many blocks per worker as an even split gives, in rank
order.  A shard starts at a multiple of the block, so its sampler (``GibbsSampler(shard, ...,
first_doc=start)``) numbers its streams as the whole corpus does, and its documents draw what
they draw in one process; the statistics summed over the workers are then the whole corpus'
(:class:`~cpgbn.inference.updates.DistributedGlobalUpdate`).  The layout is a function of
(n_docs, world_size, block) alone: a file is split by line ranges with it, each worker
reading only its lines.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..errors import CPGBNInputError, empty_document_error
from ..inference.communicator import root_verdict
from ..blocks import DOC_BLOCK
from ..text.documents import Documents
from ..text.stream import documents_digest
from ..text.tokenize import tokenize
from ..text.vocabulary import Vocabulary

__all__ = ["Shard", "read_shard", "same_corpus", "shared_vocabulary", "shard_range"]


def shard_range(n_docs: int, rank: int, world_size: int,
                block: int = DOC_BLOCK) -> tuple[int, int]:
    """(start, stop): the global ids of worker ``rank``'s documents (module docstring), in
    whole blocks of ``block`` documents (the sampler's random-stream block: numba's
    :data:`DOC_BLOCK`, or the PyTorch backend's larger one).

    Blocks are dealt evenly (the first ``n_blocks % world_size`` workers get one more); the
    last block may be short.  Every worker needs one block at least, so a corpus of N
    documents runs on at most ceil(N / block) workers.
    """
    n_docs, rank, world_size, block = int(n_docs), int(rank), int(world_size), int(block)
    if world_size < 1 or not 0 <= rank < world_size:
        raise CPGBNInputError(f"rank must be in [0, world_size), got rank {rank} of "
                              f"{world_size}")
    n_blocks = -(-n_docs // block)
    if n_blocks < world_size:
        raise CPGBNInputError(f"a corpus of {n_docs} documents splits into {n_blocks} "
                              f"block(s) of {block}, fewer than the {world_size} "
                              f"workers: use at most {max(n_blocks, 1)} worker(s)")
    per, extra = divmod(n_blocks, world_size)
    first = rank * per + min(rank, extra)
    last = first + per + (rank < extra)
    return first * block, min(last * block, n_docs)


@dataclass
class Shard:
    """A worker's documents: ``texts`` (and ``labels`` or None) of global ids
    ``start .. stop - 1`` of a corpus of ``n_docs``."""

    texts: list
    labels: list | None
    start: int
    stop: int
    n_docs: int


def read_shard(X, y, communicator, block: int = DOC_BLOCK) -> Shard:
    """This worker's shard of the documents ``X`` (a TextFile, or texts held by every
    worker; :class:`~cpgbn.text.documents.Documents`) and of the labels ``y`` (one per
    document of the corpus, or None), in whole blocks of ``block`` documents (the
    sampler's: ``InferenceMode.shard_block``)."""
    rank, world = communicator.rank, communicator.world_size
    documents = Documents.of(X)
    n_docs, digest = documents.count()
    error = None
    if y is not None and len(y) != n_docs:
        error = f"y must hold one label per document: {n_docs} documents, {len(y)} labels"
    elif y is not None:
        digest = documents_digest([""] * n_docs, y).hexdigest() + digest
    same_corpus(n_docs, digest, communicator, error)
    start, stop = shard_range(n_docs, rank, world, block)
    texts, labels = documents.line_range(start, stop)
    if y is not None:
        labels = list(y[start:stop])
    return Shard(texts, labels, start, stop, n_docs)


def same_corpus(n_docs: int, digest: str, communicator, error: str | None = None) -> None:
    """Every worker raises one line unless all read the same documents (count and digest of
    texts and labels): each takes its line range of what it read, so a machine with another
    copy of the file would otherwise drop or repeat documents without a word.  ``error``: a
    worker's own objection to its data, which every worker raises (the first, by rank)."""
    def judge(seen):
        errors = [e for _, _, e in seen if e is not None]
        if errors:
            return errors[0]
        if len(set(seen)) == 1:
            return None
        ranks = ", ".join(f"rank {r}: {n:,} documents (digest {d[:12]})"
                          for r, (n, d, _) in enumerate(seen))
        return (f"the workers read different corpora ({ranks}); give every worker the same "
                "data (the same file on every machine)")
    root_verdict((n_docs, digest, error), judge, communicator)


def shared_vocabulary(shard: Shard, vocab_size: int | None,
                      communicator) -> tuple[Vocabulary, int]:
    """(the vocabulary of the whole corpus, its number of tokens), the same on every worker
    (module docstring)."""
    counts: Counter[str] = Counter()
    n_tokens, empty = 0, []
    for j, text in enumerate(shard.texts):
        if not isinstance(text, str):
            raise CPGBNInputError(f"document {shard.start + j + 1} is {type(text).__name__}, "
                                  f"not str")
        tokens = tokenize(text)
        counts.update(tokens)
        n_tokens += len(tokens)
        if not tokens:
            empty.append(shard.start + j + 1)
    parts = communicator.gather((counts, n_tokens, empty))
    message = None
    if communicator.is_root:
        total: Counter[str] = Counter()
        for part_counts, _, _ in parts:
            total.update(part_counts)
        lines = [line for _, _, part_empty in parts for line in part_empty]
        if lines:
            message = str(empty_document_error(lines[0], len(lines)))
        size = max(len(total) + 1, 2) if vocab_size is None else vocab_size
        shared = (Vocabulary.from_frequencies(total, size).to_dict(),
                  sum(part[1] for part in parts), message)
    else:
        shared = None
    vocabulary, n_total, message = communicator.broadcast_object(shared)
    if message is not None:
        raise CPGBNInputError(message)
    return Vocabulary.from_dict(vocabulary), int(n_total)
