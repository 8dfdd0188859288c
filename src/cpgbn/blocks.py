"""The block sizes that several layers of the library agree on, written once.

Random-stream blocks (part of what a seed means: changing one changes the draws):

* :data:`DOC_BLOCK` -- the numba backend's documents per random-stream block.  A document
  block is numbered globally, so a distributed fit's shards are whole blocks
  (:func:`cpgbn.modes.sharded.shard_range`) and each document draws what it draws in one
  process;
* :data:`TORCH_DOC_BLOCKS` -- the PyTorch backend's, by device type: multiples of
  :data:`DOC_BLOCK`, so that shards of whole blocks hash as the corpus fingerprint does
  (:func:`cpgbn.inference.checkpoint.corpus_identity`).

Streaming:

* :data:`STREAM_BLOCK_DOCS` -- documents a stream holds at once: a text file is read (and its
  vocabulary scanned) this many lines at a time, and the minibatch modes' stream of blocks
  (:mod:`cpgbn.inference.batches`) visits blocks of this many documents, shuffling within
  and across them each epoch, so it is part of what a minibatch mode's seed means too.  A
  fit's job carries its own (``Training.block_docs``); this is the default.

Plain numbers with no imports, so any layer may read them, as :mod:`cpgbn.errors` is read: a
module of its own at the top of the package (inside ``backends/`` the numba backend's import
of it and the device registry's import of the numba backend would make a cycle of units).
"""

__all__ = ["DOC_BLOCK", "TORCH_DOC_BLOCKS", "STREAM_BLOCK_DOCS"]

#: Documents per random-stream block of the numba backend.
DOC_BLOCK = 32

#: Documents per random-stream block of the PyTorch backend, by device type.  A block is a
#: round of the per-document steps' kernel launches, so on a GPU it is large (MR's 9,600 or
#: SUBJ's 10,000 documents are one block: as many launches as one stream per step took); on
#: the CPU the memory chunks are smaller than a block anyway.  A distributed fit has at most
#: one worker per block.
TORCH_DOC_BLOCKS = {"cpu": 1024, "cuda": 16384}

#: Documents per block of a streamed file and of the minibatch modes' block stream.
STREAM_BLOCK_DOCS = 4096
