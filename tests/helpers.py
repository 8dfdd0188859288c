"""Synthetic corpora and test aids shared by the estimator and CLI tests (no real data)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

#: 40 distinct plain words ("w00" .. "w39"); the tokenizer keeps each as one token.
WORDS = [f"w{i:02d}" for i in range(40)]


def random_texts(n_docs: int = 60, min_len: int = 5, max_len: int = 12, seed: int = 0,
                 words=WORDS) -> list[str]:
    """``n_docs`` documents of ``min_len``..``max_len`` words drawn uniformly from ``words``."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=int(rng.integers(min_len, max_len + 1))))
            for _ in range(n_docs)]


def random_labeled(n_docs: int = 60, seed: int = 0, **kwargs) -> tuple[list[str], list[str]]:
    """``random_texts`` with two alternating labels, "pos" and "neg"."""
    texts = random_texts(n_docs, seed=seed, **kwargs)
    return texts, ["pos" if i % 2 else "neg" for i in range(n_docs)]


def write_tsv(path: Path, texts, labels) -> Path:
    """Write ``label<TAB>text`` lines (UTF-8, "\\n" terminated)."""
    path = Path(path)
    path.write_text("".join(f"{y}\t{x}\n" for x, y in zip(texts, labels)), encoding="utf-8")
    return path


# Two classes whose documents are built from disjoint 3-word phrases, with shared filler words.
_PHRASES = {
    "red": ["red apple pie", "warm cherry jam", "sweet berry tart", "fresh peach cake"],
    "blue": ["cold steel rail", "heavy iron gate", "sharp copper wire", "loud brass bell"],
}
_FILLER = ["the", "a", "and", "of", "with", "on", "very", "some"]


def phrase_corpus(n_docs: int, seed: int) -> tuple[list[str], list[str]]:
    """An easy two-class task: each document strings together 2-3 phrases of its class, in
    random order, with 0-2 filler words (shared by both classes) before each phrase.

    Labels alternate, so any prefix is balanced.  The classes share no phrase word, so a
    model that learns the phrases separates them almost perfectly.
    """
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n_docs):
        label = "red" if i % 2 == 0 else "blue"
        words: list[str] = []
        for p in rng.choice(len(_PHRASES[label]), size=int(rng.integers(2, 4)), replace=False):
            words += list(rng.choice(_FILLER, size=int(rng.integers(0, 3))))
            words += _PHRASES[label][p].split()
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def files_under(root: Path) -> set[str]:
    """Every path below ``root`` (files and folders, hidden ones included), relative to it."""
    root = Path(root)
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def random_token_documents(lengths, vocab_size: int, seed: int = 0):
    """(tokens int32, offsets int64) of documents with the given lengths, ids uniform on
    0..vocab_size - 1 (the flat layout of :class:`cpgbn.text.Corpus`)."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return rng.integers(0, vocab_size, offsets[-1]).astype(np.int32), offsets


@contextmanager
def interrupted_at_step(monkeypatch, algorithm, step_index: int):
    """In the block, a minibatch algorithm's ``step`` (``HybridTrainer``, ``MinibatchGibbs``)
    raises KeyboardInterrupt at step ``step_index``, as a kill would stop a fit there; the
    block must end in that interrupt, and the step is restored after it."""
    step = algorithm.step

    def dies(self, i, batch):
        if i == step_index:
            raise KeyboardInterrupt
        return step(self, i, batch)

    monkeypatch.setattr(algorithm, "step", dies)
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        monkeypatch.setattr(algorithm, "step", step)


def cpgbn_command() -> list[str]:
    """The command line that starts the ``cpgbn`` CLI of this interpreter's environment."""
    script = Path(sys.executable).with_name("cpgbn")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "cpgbn.cli"]


def checkpoint_step(path: Path) -> int:
    """The step (sweep) of the checkpoint in ``path``; -1 while none is complete."""
    try:
        return json.loads((Path(path) / "checkpoint.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return -1


def kill_9_after_checkpoint(command: list[str], checkpoint: Path, at_least: int, *,
                            poll: float = 0.05, limit: float = 300.0) -> int:
    """Start ``command`` (a ``cpgbn fit``), wait until its checkpoint has reached step
    ``at_least``, kill it with SIGKILL and return the step the checkpoint holds."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + limit
    while checkpoint_step(checkpoint) < at_least and proc.poll() is None \
            and time.time() < deadline:
        time.sleep(poll)
    assert proc.poll() is None, "the fit finished before it could be interrupted"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return checkpoint_step(checkpoint)
