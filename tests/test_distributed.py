"""Data-parallel Gibbs on torch.distributed: workers over shards of the corpus make the single
process' chain bit for bit, and a worker that never joins or dies stops the others within the
timeout with one line naming it.

The workers are real processes (``distributed_worker.py``) with torchrun's environment, on
127.0.0.1 with gloo; the single-process reference runs here first, which also fills the numba
cache that the workers load from (they inherit NUMBA_CACHE_DIR).
"""
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cpgbn
from cpgbn.errors import CPGBNInputError
from cpgbn.inference.exact import ExactSum
from cpgbn.blocks import DOC_BLOCK
from cpgbn.modes.sharded import shard_range
from cpgbn.inference.communicator import SingleProcess

import distributed_worker as worker

pytest.importorskip("torch.distributed")

WORKER = Path(worker.__file__)


# ---------------------------------------------------------------------- without processes
def test_exact_sums_are_correctly_rounded_whatever_the_split():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(500) * 1e12, rng.random(500),
                        -rng.random(300) * 1e-3, [2.0 ** -1074, 1e300, -1e300]])
    rng.shuffle(x)
    total = float(ExactSum.of(x))
    assert total == math.fsum(x)
    for cut in (0, 1, 333, len(x)):
        parts = ExactSum.of(x[:cut]) + ExactSum.of(x[cut:])
        assert float(parts) == total
        assert float(ExactSum(parts.bins.copy())) == total   # rebuilt from an all-reduce
    assert np.isnan(float(ExactSum.of([np.inf, -np.inf, 1.0])))
    assert float(ExactSum.of([np.inf, 1.0])) == np.inf
    assert float(ExactSum.of([1e308, 1e308])) == np.inf
    assert float(ExactSum.of([])) == 0.0


def test_shards_are_whole_blocks_that_cover_the_corpus_in_order():
    for n_docs, world in [(110, 2), (110, 4), (1000, 3), (32, 1), (33, 2)]:
        ranges = [shard_range(n_docs, r, world) for r in range(world)]
        assert ranges[0][0] == 0 and ranges[-1][1] == n_docs
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(start % DOC_BLOCK == 0 and stop > start for start, stop in ranges)
    with pytest.raises(CPGBNInputError, match="use at most 4 worker"):
        shard_range(110, 0, 5)
    # the PyTorch sampler's blocks of 1,024 documents
    assert [shard_range(2100, r, 2, 1024) for r in range(2)] == [(0, 2048), (2048, 2100)]
    assert [shard_range(3000, r, 3, 1024) for r in range(3)] == [(0, 1024), (1024, 2048),
                                                                (2048, 3000)]
    with pytest.raises(CPGBNInputError, match="block\\(s\\) of 1024"):
        shard_range(1100, 0, 3, 1024)
    with pytest.raises(CPGBNInputError, match="rank must be"):
        shard_range(110, 2, 2)


class _ThreadWorker:
    """One of two in-process workers (threads) exchanging objects as a communicator's
    ``gather`` and ``broadcast_object`` do: enough for the label checks."""

    world_size = 2

    def __init__(self, shared, rank):
        self.shared, self.rank, self.is_root = shared, rank, rank == 0

    def _exchange(self, value):
        box, barrier = self.shared
        box[self.rank] = value
        barrier.wait()
        seen = list(box)
        barrier.wait()
        return seen

    def gather(self, value):
        seen = self._exchange(value)
        return seen if self.is_root else None

    def broadcast_object(self, value):
        return self._exchange(value)[0]


def _two_workers(job, shards):
    """``job(shard, first_doc, communicator)`` on two threads: each one's result or error."""
    import threading
    shared = ([None, None], threading.Barrier(2, timeout=10))
    out = [None, None]

    def run(rank):
        try:
            out[rank] = job(*shards[rank], _ThreadWorker(shared, rank))
        except Exception as error:   # the test compares the errors
            out[rank] = error
    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_a_distributed_classifier_takes_the_whole_corpus_classes_and_its_errors():
    """Each worker's shard of a label-sorted corpus holds one class: both get the union.  The
    labels' digest does not depend on the split (a numpy array of strings is as wide as its
    shard's longest label); a missing label, mixed types or one class overall make both
    workers raise one process' one-line error."""
    from cpgbn.classifier import check_labels, shared_labels

    def job(labels, first_doc, comm):
        return shared_labels(labels, len(labels), first_doc, semi_supervised=False,
                             communicator=comm)

    def split(labels, at):
        return [(labels[:at], 0), (labels[at:], at)]

    labels = ["neg"] * 64 + ["positive"] * 36
    digests = set()
    for at in (32, 64):   # each shard's labels as an array of its own (the estimator's)
        shards = [(np.array(part), first) for part, first in split(labels, at)]
        for (mine, classes, digest), (expected, _) in zip(_two_workers(job, shards), shards):
            assert classes.tolist() == ["neg", "positive"]
            assert mine.tolist() == expected.tolist()
            digests.add(digest)
    assert len(digests) == 1

    def same_error(labels, at, single):
        with pytest.raises(CPGBNInputError) as expected:
            check_labels(labels, len(labels), semi_supervised=False)
        assert single in str(expected.value)
        for error in _two_workers(job, split(labels, at)):
            assert isinstance(error, CPGBNInputError) and str(error) == str(expected.value)

    same_error(labels[:67] + [None] + labels[68:], 64, "document 68 has no label (1 of 100")
    same_error([1] * 64 + ["positive"] * 36, 64, "the labels mix types")
    same_error(["neg"] * 100, 64, "one class ('neg')")


def test_a_check_that_fails_on_one_worker_fails_on_every_worker():
    """inference.communicator.agree: the memory a shard needs may exceed the limit on one worker only;
    every worker then raises that worker's one-line error (none waits in a collective)."""
    from cpgbn.inference.communicator import agree

    def job(limit, _, comm):
        def check():
            if limit:
                raise CPGBNInputError(f"needs {limit} GB")
        agree(check, comm)
        return "ran"

    assert _two_workers(job, [(0, 0), (0, 0)]) == ["ran", "ran"]
    out = _two_workers(job, [(0, 0), (3, 0)])
    assert [str(e) for e in out] == ["needs 3 GB"] * 2
    assert all(isinstance(e, CPGBNInputError) for e in out)


def test_workers_that_read_different_corpora_stop_with_one_line(tmp_path):
    """Each worker takes its line range of the file it reads: a machine with another copy
    (a line more, or one text or label changed) would drop or repeat documents silently, so
    the workers compare the count and digest of what they read first, in memory or from a
    file; the same data passes."""
    from cpgbn.modes.sharded import read_shard
    from cpgbn.text import TextFile
    from helpers import write_tsv

    texts = [f"doc {i} words" for i in range(70)]
    labels = ["a", "b"] * 35

    def job(x, y, comm):
        return read_shard(x, y, comm).stop
    assert _two_workers(job, [(texts, None)] * 2) == [64, 70]
    for other in (texts + ["one more"], texts[:5] + ["doc 5 wordz"] + texts[6:]):
        out = _two_workers(job, [(texts, None), (other, None)])
        assert all(isinstance(e, CPGBNInputError) for e in out), out
        assert str(out[0]) == str(out[1])
        assert str(out[0]).startswith("the workers read different corpora (rank 0: 70 "
                                      "documents (digest ")
    changed = labels[:-1] + ["a"]
    out = _two_workers(job, [(texts, labels), (texts, changed)])
    assert all(isinstance(e, CPGBNInputError) for e in out), out
    out = _two_workers(job, [(texts, labels), (texts, labels[:-1])])   # one worker's y short
    assert [str(e) for e in out] == ["y must hold one label per document: 70 documents, "
                                     "69 labels"] * 2
    files = [TextFile(write_tsv(tmp_path / f"{name}.tsv", texts, y))
             for name, y in (("one", labels), ("same", labels), ("other", changed))]
    assert _two_workers(job, [(files[0], None), (files[1], None)]) == [64, 70]
    out = _two_workers(job, [(files[0], None), (files[2], None)])
    assert all(isinstance(e, CPGBNInputError) and "different corpora" in str(e)
               for e in out), out


def test_workers_given_different_settings_stop_with_one_line():
    """A worker started with another command line (a pseudo-count, a layer size, a seed)
    would draw its shard under other conditionals while the sums mix the two: every worker
    names the settings that differ, rank by rank, before reading any document."""
    from cpgbn import CPGBN
    common = dict(layers=(4,), vocab_size=20, n_iter=2, burn_in=1)

    def job(model, _, comm):
        return model.fit(["w v u"] * 40, communicator=comm)
    out = _two_workers(job, [(CPGBN(random_state=0, **common), 0),
                             (CPGBN(random_state=None, token_count=200, **common), 0)])
    assert all(isinstance(e, CPGBNInputError) for e in out), out
    assert str(out[0]) == str(out[1]) == (
        "the workers were given different settings: random_state (rank 0: 0, rank 1: None); "
        "token_count (rank 0: 800, rank 1: 200); start every worker with the same command")
    # a transform: one worker holds a model fitted with another seed (a stale copy)
    texts = ["w v u", "u w", "v v w"] * 20
    models = [CPGBN(random_state=seed, **common).fit(texts) for seed in (0, 1)]
    out = _two_workers(lambda model, _, comm: model.transform(texts, communicator=comm),
                       [(models[0], 0), (models[1], 0)])
    assert all(isinstance(e, CPGBNInputError) for e in out), out
    assert str(out[0]).startswith("the workers were given different settings: model (rank 0: ")
    assert "random_state (rank 0: 0, rank 1: 1)" in str(out[0])


def test_a_shard_document_past_the_int32_counts_stops_every_worker():
    """The second worker's shard holds a document of 3 tokens x 2^30 pseudo-counts (more than
    an int32 count holds): both workers refuse it with its one line, for a fit and for a
    transform (the first worker's shard alone would be fine)."""
    from cpgbn import CPGBN
    texts = ["w"] * 40 + ["w v w"] + ["v"] * 23
    model = CPGBN(layers=(2,), filter_width=1, token_count=2**30, vocab_size=5, n_iter=2,
                  burn_in=1, random_state=0)
    message = "a document of 3 tokens carries 3,221,225,472 latent counts"
    out = _two_workers(lambda x, _, comm: model.fit(x, communicator=comm), [(texts, 0)] * 2)
    assert all(isinstance(e, CPGBNInputError) and message in str(e) for e in out), out
    model.fit(texts[:40])
    out = _two_workers(lambda x, _, comm: model.transform(x, communicator=comm),
                       [(texts, 0)] * 2)
    assert all(isinstance(e, CPGBNInputError) and message in str(e) for e in out), out


@pytest.fixture(scope="module")
def single_process():
    """The reference fit: one process, the default update (no communicator)."""
    return worker.fit_arrays(worker.corpus())


def test_the_distributed_update_with_one_process_is_the_plain_chain(single_process):
    wrapped = worker.fit_arrays(worker.corpus(), communicator=SingleProcess())
    for name, value in single_process.items():
        np.testing.assert_array_equal(wrapped[name], value, err_msg=name)


# ---------------------------------------------------------------------- worker processes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(out: Path, world_size: int, ranks, *extra) -> list[subprocess.Popen]:
    src = str(Path(cpgbn.__file__).resolve().parents[1])
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               WORLD_SIZE=str(world_size), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([src, str(WORKER.parent),
                                           os.environ.get("PYTHONPATH", "")]))
    return [subprocess.Popen([sys.executable, str(WORKER), str(out), *extra],
                             env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in ranks]


def _finish(procs, limit: float) -> list[tuple[int, str]]:
    results = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"a worker still ran after {limit} s")
        results.append((proc.returncode, err))
    return results


def _error_line(stderr: str) -> str:
    """The worker's own line (torch's C++ logger may print lines of its own before it)."""
    lines = [line for line in stderr.splitlines() if line.startswith("worker error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def _assert_one_process(ranks, reference) -> None:
    """The workers' arrays (``rank<r>.npz``, in rank order) are one process' ``reference``."""
    for name, value in reference.items():
        if name.startswith("theta_"):   # each worker holds its documents' rows
            np.testing.assert_array_equal(np.concatenate([a[name] for a in ranks]), value,
                                          err_msg=name)
        else:   # the globals, their means and the corpus' log-likelihood: on every worker
            for a in ranks:
                np.testing.assert_array_equal(a[name], value, err_msg=name)


def test_two_workers_make_the_single_process_chain_bit_for_bit(tmp_path, single_process):
    results = _finish(_start(tmp_path, 2, range(2)), limit=120)
    assert [code for code, _ in results] == [0, 0], results
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    assert [(int(a["start"]), int(a["stop"])) for a in ranks] == [(0, 64), (64, 110)]
    _assert_one_process(ranks, single_process)


def test_two_workers_make_the_single_process_pilot_and_sparse_start_bit_for_bit(
        tmp_path, single_process):
    """The pilot samples blocks 0 and 2 of the corpus: one on each worker (shards of blocks
    0-1 and 2-3), numbered as in the whole sample, its statistics summed as the chain's; the
    chain then starts sparse from the pilot's globals.  Two workers draw one process' chain."""
    alone = worker.fit_arrays(worker.corpus(), pilot=True)
    # the pilot changed the chain
    assert not np.array_equal(alone["final_D"], single_process["final_D"])
    results = _finish(_start(tmp_path, 2, range(2), "--pilot"), limit=120)
    assert [code for code, _ in results] == [0, 0], results
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    _assert_one_process(ranks, alone)


def test_nccl_without_a_gpu_for_the_worker_is_a_one_line_error():
    """A worker asked for NCCL with no GPU of its own (more workers per machine than GPUs)
    is told so before any rendezvous (no process group starts in this test's process:
    gloo's threads can abort an interpreter at exit, see cli/fit.py's _leave_worker)."""
    import torch

    from cpgbn.backends.torch.distributed import TorchCommunicator
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: LOCAL_RANK 0 has one")
    with pytest.raises(CPGBNInputError, match="NCCL needs a GPU per worker, and LOCAL_RANK 0"):
        TorchCommunicator(rank=0, world_size=1, master_addr="127.0.0.1",
                          master_port=_free_port(), backend="cpu:gloo,cuda:nccl", timeout=5)


def test_a_worker_that_never_joins_stops_the_other_within_the_timeout(tmp_path, single_process):
    start = time.perf_counter()
    [(code, err)] = _finish(_start(tmp_path, 2, [0], "--timeout", "3"), limit=60)
    assert code == 1
    line = _error_line(err)
    assert "rank 1 did not join within 3 s" in line, line
    assert time.perf_counter() - start < 30


def test_a_worker_that_dies_mid_run_stops_the_other_naming_it(tmp_path, single_process):
    start = time.perf_counter()
    results = _finish(_start(tmp_path, 2, range(2), "--die-after", "2", "--timeout", "30"),
                      limit=90)
    assert results[1][0] == 3   # the worker that died
    code, err = results[0]
    assert code == 1
    line = _error_line(err)
    assert "distributed run failed on rank 0" in line and "rank 1 did not reach it" in line, line
    # gloo sees the closed sockets at once: far sooner than the 30 s timeout
    assert time.perf_counter() - start < 30
    assert not (tmp_path / "rank0.npz").exists()


def test_a_killed_run_resumes_exactly_from_its_checkpoint_with_two_workers_or_one(
        tmp_path, single_process):
    """Rank 1 dies after sweep 3; rank 0 stops within the timeout naming it; the checkpoint
    of sweep 2 (the whole corpus' rows, written by the root) resumes to the single process'
    chain bit for bit, with two workers and with one process alone."""
    ckpt = tmp_path / "ckpt"
    start = time.perf_counter()
    results = _finish(_start(tmp_path, 2, range(2), "--die-after", "3", "--timeout", "20",
                             "--checkpoint", str(ckpt)), limit=90)
    assert results[1][0] == 3 and results[0][0] == 1, results
    assert "rank 1 did not reach it" in _error_line(results[0][1])
    assert time.perf_counter() - start < 30
    saved = json.loads((ckpt / "checkpoint.json").read_text())
    assert saved["step"] == 2
    with np.load(ckpt / "state.npz") as arrays:   # the whole corpus' documents
        assert arrays["theta_0"].shape[0] == worker.N_DOCS

    def same_as_single(got, theta_rows):
        for name, value in single_process.items():
            if name.startswith("theta_"):
                np.testing.assert_array_equal(theta_rows(name), value, err_msg=name)
            else:
                np.testing.assert_array_equal(got[name], value, err_msg=name)

    backup = tmp_path / "ckpt-copy"
    shutil.copytree(ckpt, backup)
    results = _finish(_start(tmp_path, 2, range(2), "--checkpoint", str(ckpt), "--resume"),
                      limit=120)
    assert [code for code, _ in results] == [0, 0], results
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    for a in ranks:
        same_as_single(a, lambda name: np.concatenate([b[name] for b in ranks]))
    # one process, no communicator, from the two workers' checkpoint
    alone = worker.fit_arrays(worker.corpus(), checkpoint_dir=backup, resume=True)
    same_as_single(alone, lambda name: alone[name])


@pytest.fixture(scope="module")
def single_process_torch():
    """The reference fit of the PyTorch sampler (blocks of 32 documents): one process."""
    return worker.fit_arrays(worker.corpus(), use_torch=True)


def test_torch_workers_make_its_single_process_chain_and_resume_with_two_or_one(
        tmp_path, single_process_torch):
    """The PyTorch sampler's streams are keyed by global document blocks too: of three
    workers (blocks 0-1, 2 and 3: the last starts at an odd block), rank 1 dies after sweep
    3; the checkpoint of sweep 2 resumes with two workers (blocks 0-1, 2-3) and with one
    process, and both end in the single process' chain bit for bit (every sweep of it
    drawn by workers: sweeps 1-2 by three, 3-6 by two)."""
    ckpt = tmp_path / "ckpt"
    results = _finish(_start(tmp_path, 3, range(3), "--torch", "--die-after", "3",
                             "--timeout", "20", "--checkpoint", str(ckpt)), limit=90)
    assert [code for code, _ in results] == [1, 3, 1], results
    assert "rank 1 did not reach it" in _error_line(results[0][1])
    assert json.loads((ckpt / "checkpoint.json").read_text())["step"] == 2
    backup = tmp_path / "ckpt-copy"
    shutil.copytree(ckpt, backup)
    results = _finish(_start(tmp_path, 2, range(2), "--torch", "--checkpoint", str(ckpt),
                             "--resume"), limit=120)
    assert [code for code, _ in results] == [0, 0], results
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    assert [(int(a["start"]), int(a["stop"])) for a in ranks] == [(0, 64), (64, 110)]
    alone = worker.fit_arrays(worker.corpus(), checkpoint_dir=backup, resume=True,
                              use_torch=True)
    _assert_one_process(ranks, single_process_torch)
    for name, value in single_process_torch.items():
        np.testing.assert_array_equal(alone[name], value, err_msg=name)


# ---------------------------------------------------------------------- the command line
CLI_SETTINGS = ["--layers", "6,3", "--vocab-size", "30", "--iterations", "6", "--burn-in", "3",
                "--seed", "3", "--quiet", "--threads", "1"]


@pytest.mark.slow(seconds=90)   # three torchrun agents, four workers: ~20 s alone
def test_cpgbn_fit_and_transform_distributed_under_torchrun_match_one_process(tmp_path):
    """The fit on two nodes by c10d rendezvous (``torchrun --nnodes 2 --rdzv-backend c10d``,
    both on 127.0.0.1 with one worker each, as on two machines: LOCAL_RANK 0 on both) saves
    the single process' model; the transform on two workers of one node (``--nproc-per-node
    2``) writes the single process' rows.  (``--nproc-per-node 2`` fits: the tests below.)"""
    from cpgbn.cli import main
    from helpers import random_texts, write_tsv

    corpus = write_tsv(tmp_path / "train.tsv", random_texts(110, seed=5), ["a", "b"] * 55)
    assert main(["fit", str(corpus), "--out", str(tmp_path / "one"), *CLI_SETTINGS]) == 0
    src = str(Path(cpgbn.__file__).resolve().parents[1])
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node",
         "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "cpgbn-test",
         "-m", "cpgbn.cli", "fit", str(corpus), "--out", str(tmp_path / "two"),
         *CLI_SETTINGS, "--distributed", "--timeout", "30"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [node.communicate(timeout=180) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    # the root alone prints
    assert sum(out.count("fitted CPGBN 6-3 on 110 documents (2 workers)")
               for out, _ in outputs) == 1, outputs
    _same_arrays(tmp_path / "one", tmp_path / "two")
    traces = [json.loads((tmp_path / n / "model.json").read_text())["loglik_trace"]
              for n in ("one", "two")]
    assert traces[0] == traces[1]
    # the distributed transform: each worker infers its lines, rank 0 writes one process' rows
    assert main(["transform", str(tmp_path / "one"), str(corpus), "--out",
                 str(tmp_path / "one.npy"), "--quiet", "--threads", "1"]) == 0
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-port", str(_free_port()), "-m", "cpgbn.cli", "transform",
                          str(tmp_path / "one"), str(corpus), "--out", str(tmp_path / "two.npy"),
                          "--quiet", "--threads", "1", "--distributed", "--timeout", "30"],
                         env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("(2 workers)") == 1
    np.testing.assert_array_equal(np.load(tmp_path / "two.npy"), np.load(tmp_path / "one.npy"))


@pytest.mark.long   # two torchrun runs and two one-process runs of the PyTorch sampler: 80 s
def test_cpgbn_fit_and_transform_distributed_on_the_pytorch_sampler(tmp_path):
    """``--device cpu --distributed``: shards of whole 1,024-document blocks (the PyTorch
    sampler's random-stream block on the CPU), so 1,100 documents make two workers, whose
    model and features are one process' bit for bit.

    In the long tier (``make test-long``): ``make test`` keeps its two halves, the command's
    distributed fit and transform on the numba sampler (above) and the PyTorch sampler's
    workers making its single-process chain (test_torch_workers_make_its_single_process_chain
    _and_resume_with_two_or_one)."""
    from cpgbn.backends.torch.devices import DOC_BLOCKS
    from cpgbn.cli import main
    from helpers import random_texts, write_tsv

    n_docs = DOC_BLOCKS["cpu"] + 76
    corpus = write_tsv(tmp_path / "train.tsv", random_texts(n_docs, seed=6),
                       ["a", "b"] * (n_docs // 2))
    settings = [*CLI_SETTINGS, "--device", "cpu"]
    assert main(["fit", str(corpus), "--out", str(tmp_path / "one"), *settings]) == 0
    src = str(Path(cpgbn.__file__).resolve().parents[1])
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    run = subprocess.run([*torchrun, "--master-port", str(_free_port()), "-m", "cpgbn.cli",
                          "fit", str(corpus), "--out", str(tmp_path / "two"), *settings,
                          "--distributed", "--timeout", "30"],
                         env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count(f"on {n_docs} documents (2 workers)") == 1
    _same_arrays(tmp_path / "one", tmp_path / "two")
    assert main(["transform", str(tmp_path / "one"), str(corpus), "--out",
                 str(tmp_path / "one.npy"), "--quiet", "--threads", "1"]) == 0
    run = subprocess.run([*torchrun, "--master-port", str(_free_port()), "-m", "cpgbn.cli",
                          "transform", str(tmp_path / "one"), str(corpus), "--out",
                          str(tmp_path / "two.npy"), "--quiet", "--threads", "1",
                          "--distributed", "--timeout", "30"],
                         env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    np.testing.assert_array_equal(np.load(tmp_path / "two.npy"), np.load(tmp_path / "one.npy"))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc: Linux, as torchrun's tests run)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _rank_of(pid: int) -> int | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [e[5:] for e in environ if e.startswith(b"RANK=")]
    return int(ranks[0]) if ranks else None


def _torchrun(corpus, out, settings, *extra) -> subprocess.Popen:
    src = str(Path(cpgbn.__file__).resolve().parents[1])
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--monitor-interval", "0.5", "--master-port", str(_free_port()), *extra,
         "-m", "cpgbn.cli", "fit", str(corpus), "--out", str(out), *settings,
         "--distributed", "--timeout", "20"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_rank_1_at_the_first_checkpoint(run: subprocess.Popen, out: Path) -> None:
    import signal
    checkpoint = Path(f"{out}.checkpoint") / "checkpoint.json"
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    victims = [pid for pid in _children(run.pid) if _rank_of(pid) == 1]
    assert checkpoint.exists() and len(victims) == 1, (victims, run.poll())
    os.kill(victims[0], signal.SIGKILL)


def _same_arrays(a: Path, b: Path) -> None:
    one, two = np.load(a / "arrays.npz"), np.load(b / "arrays.npz")
    assert sorted(one.files) == sorted(two.files)
    for name in one.files:
        if name in ("mixing_features", "mixing_seconds"):
            continue   # float sums over workers in another order; wall times
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)


@pytest.mark.slow   # torchrun, two workers, killed and restarted: ~40 s
def test_torchrun_max_restarts_resumes_a_killed_worker_from_the_checkpoint(tmp_path):
    """kill -9 of worker 1 once the first checkpoint is written: torchrun --max-restarts 1
    starts the group again, which resumes from the root's checkpoint and ends in the single
    process' model."""
    from cpgbn.cli import main
    from helpers import random_texts, write_tsv

    corpus = write_tsv(tmp_path / "train.tsv", random_texts(600, seed=5), ["a", "b"] * 300)
    settings = ["--layers", "6,3", "--vocab-size", "30", "--iterations", "50", "--burn-in",
                "25", "--seed", "3", "--quiet", "--threads", "1", "--checkpoint-every", "2"]
    assert main(["fit", str(corpus), "--out", str(tmp_path / "one"), *settings]) == 0
    run = _torchrun(corpus, tmp_path / "two", settings + ["--resume"], "--max-restarts", "1")
    _kill_rank_1_at_the_first_checkpoint(run, tmp_path / "two")
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, err[-3000:]
    assert err.count("resuming from") == 1, err[-3000:]   # the second attempt, on rank 0
    assert out.count("fitted CPGBN 6-3 on 600 documents (2 workers)") == 1
    _same_arrays(tmp_path / "one", tmp_path / "two")
    assert not (tmp_path / "two.checkpoint").exists()   # deleted once the fit completed


@pytest.mark.slow(seconds=85)   # torchrun twice, once restarted: ~45 s alone
def test_distributed_hybrid_trains_saves_a_model_one_process_loads_and_resumes_exactly(
        tmp_path):
    """The hybrid on 2 workers (gradients averaged, TLASGR statistics summed): the loss falls,
    the saved model loads in one process and transforms; a run whose worker 1 is killed at
    its first checkpoint and restarted by torchrun ends in the uninterrupted run's model;
    a checkpoint of two workers' minibatches refuses one worker with a one-line error."""
    from cpgbn import CPGBN
    from cpgbn.cli import main
    from helpers import random_texts, write_tsv

    texts = random_texts(400, seed=5)
    corpus = write_tsv(tmp_path / "train.tsv", texts, ["a", "b"] * 200)
    settings = ["--layers", "6,3", "--vocab-size", "30", "--inference", "hybrid",
                "--epochs", "4", "--batch-size", "20", "--seed", "3", "--quiet",
                "--threads", "1", "--checkpoint-every", "4"]
    run = _torchrun(corpus, tmp_path / "a", settings)
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, err[-3000:]
    assert out.count("(hybrid) on 400 documents (2 workers)") == 1, out
    model = CPGBN.load(tmp_path / "a")
    loss = model.loss_trace_
    assert len(loss) == 4 * 12   # the larger shard: 7 blocks of 32 documents, 12 batches
    assert loss[-8:].mean() < 0.95 * loss[:8].mean(), loss   # one process, batches of 40: 3%
    features = model.transform(texts[:50])
    assert features.shape == (50, 6) and np.isfinite(features).all()

    run = _torchrun(corpus, tmp_path / "b", settings + ["--resume"], "--max-restarts", "1")
    _kill_rank_1_at_the_first_checkpoint(run, tmp_path / "b")
    # the killed group's checkpoint, as a run without --max-restarts leaves it: rank 0 waits
    # for rank 1 in a collective and writes no other until the group restarts (seconds later)
    shutil.copytree(tmp_path / "b.checkpoint", tmp_path / "c.checkpoint")
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0 and err.count("resuming from") == 1, err[-3000:]
    _same_arrays(tmp_path / "a", tmp_path / "b")

    code = main(["fit", str(corpus), "--out", str(tmp_path / "c"), *settings, "--resume"])
    assert code == 2


@pytest.mark.slow   # torchrun twice: ~60 s
def test_a_distributed_classifier_on_a_label_sorted_file(tmp_path):
    """``fit --supervised --distributed`` on a file sorted by label, so that each of the two
    workers holds one class: the model has both classes and the paper's xi of the whole
    corpus (its mean units per document, not a shard's), separates new documents of the two
    classes as one process does (tests/test_classifier.py: >= 0.9), and loads in one process.
    With ``--semi-supervised`` the unlabelled lines (an empty label) train too."""
    from cpgbn.classifier import CPGBNClassifier
    from helpers import phrase_corpus, write_tsv

    texts, labels = phrase_corpus(128, seed=8)
    order = np.argsort(labels, kind="stable")          # blue first, then red
    texts, labels = [texts[i] for i in order], [labels[i] for i in order]
    corpus = write_tsv(tmp_path / "train.tsv", texts, labels)
    settings = ["--supervised", "--layers", "6", "--vocab-size", "60", "--epochs", "20",
                "--batch-size", "16", "--learning-rate", "0.01", "--xi", "30", "--seed", "0",
                "--quiet", "--threads", "1", "--device", "cpu"]   # shards of 32 documents
    run = _torchrun(corpus, tmp_path / "two", settings)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    assert out.count("on 128 documents (2 workers)") == 1 and "classes blue, red" in out, out
    model = CPGBNClassifier.load(tmp_path / "two")
    assert model.classes_.tolist() == ["blue", "red"]
    assert model.paper_xi_ == pytest.approx(30.0 * 800 * model.n_train_tokens_ / 128)
    test_texts, test_labels = phrase_corpus(100, seed=9)
    assert model.score(test_texts, test_labels) >= 0.9

    semi = write_tsv(tmp_path / "semi.tsv", texts, ["" if j % 5 == 0 else label
                                                    for j, label in enumerate(labels)])
    run = _torchrun(semi, tmp_path / "semi", settings + ["--semi-supervised"])
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    assert CPGBNClassifier.load(tmp_path / "semi").classes_.tolist() == ["blue", "red"]


@pytest.mark.parametrize("extra, message", [
    (["--semi-supervised"], "--semi-supervised is an option of --supervised"),
])
def test_cpgbn_fit_distributed_refuses_bad_options_in_one_line(tmp_path, capsys, extra, message):
    from cpgbn.cli import main
    from helpers import random_texts, write_tsv

    corpus = write_tsv(tmp_path / "train.tsv", random_texts(40, seed=1), ["a", "b"] * 20)
    code = main(["fit", str(corpus), "--out", str(tmp_path / "m"), *CLI_SETTINGS,
                 "--distributed", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_one_workers_shard_and_vocabulary_are_the_whole_corpus_and_its_vocabulary():
    """The shard path's reading with a group of one (read_shard, shared_vocabulary): all the
    documents, and the vocabulary and token count one process builds from them, so a group's
    workers encode with the single process' vocabulary.  (A fit with
    ``communicator=SingleProcess()`` is the plain fit: one process takes the in-memory path.)"""
    from cpgbn.modes.sharded import read_shard, shared_vocabulary
    from cpgbn.text import Corpus
    from helpers import random_texts

    texts = random_texts(50, seed=2)
    shard = read_shard(texts, None, SingleProcess())
    assert (shard.texts, shard.start, shard.stop, shard.n_docs) == (texts, 0, 50, 50)
    for size in (25, None):
        vocabulary, n_tokens = shared_vocabulary(shard, size, SingleProcess())
        corpus = Corpus.from_texts(texts, vocab_size=size)
        assert vocabulary == corpus.vocabulary
        assert n_tokens == int(corpus.lengths.sum())


def test_a_fit_given_the_single_process_communicator_is_the_plain_fit(tmp_path):
    """fit(X, communicator=SingleProcess()) is fit(X), bit for bit, and its checkpoints
    resume as one process' do (the checkpoint is deleted once the fit completes)."""
    from cpgbn import CPGBN
    from helpers import random_texts

    texts = random_texts(50, seed=2)
    params = dict(layers=(4, 2), vocab_size=25, n_iter=4, burn_in=2, random_state=1)
    plain = CPGBN(**params).fit(texts)
    given = CPGBN(**params).fit(texts, communicator=SingleProcess(),
                                checkpoint_dir=tmp_path / "ckpt", checkpoint_every=1)
    assert given.vocabulary_ == plain.vocabulary_
    for name in ("train_features_", "kernel_usage_", "loglik_trace_"):
        np.testing.assert_array_equal(getattr(given, name), getattr(plain, name), err_msg=name)
    for a, b in zip([given.globals_.D, given.globals_.r, *given.globals_.phi],
                    [plain.globals_.D, plain.globals_.r, *plain.globals_.phi]):
        np.testing.assert_array_equal(a, b)
    assert not (tmp_path / "ckpt").exists()
    np.testing.assert_array_equal(given.transform(texts[:7], communicator=SingleProcess()),
                                  plain.transform(texts[:7]))


def test_a_worker_reads_only_its_line_range(tmp_path):
    from cpgbn.text.stream import TextFile, count_documents, read_line_range
    from helpers import write_tsv

    texts, labels = [f"doc {i} words" for i in range(11)], [f"y{i}" for i in range(11)]
    source = TextFile(write_tsv(tmp_path / "c.tsv", texts, labels))
    n_docs, digest = count_documents(source, block_lines=4)
    assert n_docs == 11 and digest == count_documents(source, block_lines=100)[1]
    for start, stop in [(0, 11), (3, 7), (8, 11), (4, 4)]:
        assert read_line_range(source, start, stop, block_lines=3) == (texts[start:stop],
                                                                       labels[start:stop])
