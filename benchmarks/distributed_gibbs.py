"""Data-parallel Gibbs on torch.distributed (issue 37): sweeps per second with 1 and 2 worker
processes on this machine, one thread each, the bytes all-reduced per sweep, and the time of
that all-reduce alone.

Corpus: the first ``--docs`` IMDB training reviews (drawn at random, seed 0, from the
class-sorted file), the model of the paper's IMDB runs (K_1 = 200, vocabulary 8,000, F = 3;
``--layers`` for a deeper stack).
Three runs, each in fresh processes started here (rank, world size and rendezvous in the
environment, as torchrun sets them):

* ``1 process``: ``CPGBN.fit`` without a communicator (the plain sampler: the reference);
* ``2 workers``: ``CPGBN.fit(texts, communicator=TorchCommunicator)``, each worker over its
  shard of 32-document blocks (gloo on 127.0.0.1); the model equals the reference's
  (checked: the same log-likelihood trace and the same globals D, Phi, r, bit for bit);
* ``all-reduce``: two workers that only all-reduce an int32 array of V x F x K_1 counts
  (the kernel counts, the dominant message), ``--sweeps`` times.

Each sweep's seconds come from the fit's own trace (``sweep_seconds_``: the sweep with its
all-reduces and broadcasts, not the mixing diagnostic); the first sweep (warm-up) is left out
of the means.  Parallel efficiency = (1-process sweep time) / (2 x 2-worker sweep time).  The
last line of stdout is JSON; ``--out`` writes it and a table beside it (``.md``).

    python benchmarks/distributed_gibbs.py --data-dir ../shared/data --docs 4000 \\
        --out results/speed/distributed_gibbs.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from cpgbn.inference.checkpoint import fingerprint
from cpgbn.layers.cells import COUNT_LIMIT
from cpgbn.params import DEFAULT_TOKEN_COUNT

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
VOCAB, FILTER_WIDTH = 8000, 3


def corpus(data_dir, n_docs: int) -> list[str]:
    from cpgbn.datasets import load_dataset
    texts, _ = load_dataset("imdb", "train", data_dir=data_dir)
    keep = np.sort(np.random.default_rng(0).choice(len(texts), n_docs, replace=False))
    return [texts[i] for i in keep]


def fit_record(args, communicator=None) -> dict:
    from cpgbn import CPGBN
    texts = corpus(args.data_dir, args.docs)
    model = CPGBN(layers=layers_of(args), vocab_size=VOCAB, filter_width=FILTER_WIDTH,
                  n_iter=args.sweeps, burn_in=args.sweeps - 1, random_state=0, n_threads=1,
                  progress=False)
    start = time.perf_counter()
    model.fit(texts, communicator=communicator)
    g = model.globals_
    record = dict(fit_seconds=round(time.perf_counter() - start, 2),
                  globals_sha256=fingerprint(g.D, *g.phi, g.r),
                  sweep_seconds=[round(float(s), 4) for s in model.sweep_seconds_],
                  loglik=[float(x) for x in model.loglik_trace_],
                  n_tokens=int(model.n_train_tokens_))
    if communicator is not None:
        record.update(rank=communicator.rank, bytes_summed=communicator.bytes_summed,
                      bytes_broadcast=communicator.bytes_broadcast)
    return record


def largest_row_share(texts) -> float:
    """The most frequent vocabulary row's share of the tokens at V = LARGE_VOCAB (+ the OOV
    row): with ``token_count`` pseudo-counts per token it bounds the largest kernel count of
    a larger corpus like this one, which decides whether the counts travel as int32."""
    from cpgbn.text import Corpus
    rows = np.bincount(Corpus.from_texts(texts, vocab_size=LARGE_VOCAB + 1).tokens)
    return float(rows.max() / rows.sum())


def layers_of(args) -> tuple:
    """``--layers``, e.g. "200-100-50", as a tuple of ints."""
    return tuple(int(k) for k in args.layers.split("-"))


def kernel_draw_seconds(vocab_size: int, n_kernels: int, repeats: int = 3) -> float:
    """Seconds of one draw of D | counts (V x F x K_1 Dirichlet draws, one thread): the part
    of a sweep that the root does alone, whatever the number of workers.  Counts as a
    sweep of an IMDB-like corpus leaves them: about 1 in 20 cells nonzero."""
    import numba

    from cpgbn.backends.numba import conv
    from cpgbn.backends.numba.numba_backend import WORD_BLOCK
    from cpgbn.backends.numba.shared_shape import shared_shape_table
    numba.set_num_threads(1)
    rng = np.random.default_rng(0)
    shape = (1, vocab_size, FILTER_WIDTH, n_kernels)
    counts = (rng.poisson(0.05, size=shape) * rng.integers(1, 50, size=shape)).astype(np.int32)
    D = np.zeros(shape[1:], dtype=np.float32)
    table = shared_shape_table(0.05)
    conv.draw_kernels(0, 1, counts.copy(), table, D, WORD_BLOCK)   # compiled, warm
    seconds = []
    for i in range(repeats):
        fresh = counts.copy()
        start = time.perf_counter()
        conv.draw_kernels(0, 2 + i, fresh, table, D, WORD_BLOCK)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def allreduce_record(args, communicator) -> dict:
    counts = np.ones((VOCAB, FILTER_WIDTH, layers_of(args)[0]), dtype=np.int32)
    seconds = []
    for _ in range(args.sweeps):
        start = time.perf_counter()
        communicator.sum(counts)
        seconds.append(time.perf_counter() - start)
    return dict(rank=communicator.rank, bytes=int(counts.nbytes),
                seconds=[round(s, 5) for s in seconds])


def worker(args) -> None:
    from cpgbn.backends.torch.distributed import TorchCommunicator
    with TorchCommunicator.from_environment(timeout=600) as comm:
        record = (fit_record(args, comm) if args.role == "fit"
                  else allreduce_record(args, comm))
    print(json.dumps(record), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(role: str, world_size: int, argv: list[str]) -> list[dict]:
    """``world_size`` processes of this script in ``role`` (0: one plain process); their
    records in rank order."""
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", MKL_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               WORLD_SIZE=str(max(world_size, 1)))
    procs = [subprocess.Popen([sys.executable, __file__, "--role", role, *argv],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(max(world_size, 1))]
    records = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(err[-3000:])
        records.append(json.loads(out.strip().splitlines()[-1]))
    return records


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--docs", type=int, default=4000)
    p.add_argument("--sweeps", type=int, default=6)
    p.add_argument("--layers", default="200", help="e.g. 200-100-50 (default 200)")
    p.add_argument("--out", default=None)
    p.add_argument("--role", default=None, help=argparse.SUPPRESS)
    p.add_argument("--report", default=None, metavar="RECORD",
                   help="only rewrite RECORD's table (RECORD with .md) from the JSON record")
    args = p.parse_args(argv)
    if args.report:
        record = json.loads(Path(args.report).read_text())
        if "largest_row_share" not in record:   # records made before it was measured
            from cpgbn.evaluate.provenance import provenance
            record["largest_row_share"] = round(largest_row_share(
                corpus(args.data_dir, record["n_docs"])), 5)
            record["largest_row_share_added"] = provenance()["commit"]
            from records import write_record
            write_record(Path(args.report), record)
        Path(args.report).with_suffix(".md").write_text(table(record) + projection(record))
        return
    if args.role == "plain":
        print(json.dumps(fit_record(args)), flush=True)
        return
    if args.role == "draw":
        print(json.dumps({str(v): kernel_draw_seconds(v, layers_of(args)[0])
                          for v in (VOCAB, 30_000)}), flush=True)
        return
    if args.role is not None:
        worker(args)
        return
    from cpgbn.evaluate.provenance import provenance
    passed = [f"--docs={args.docs}", f"--sweeps={args.sweeps}", f"--layers={args.layers}"]
    passed += [f"--data-dir={args.data_dir}"] if args.data_dir else []
    [one] = launch("plain", 0, passed)
    two = launch("fit", 2, passed)
    reduce_ = launch("allreduce", 2, passed)
    [draws] = launch("draw", 0, passed)
    assert all(r["loglik"] == one["loglik"] and r["globals_sha256"] == one["globals_sha256"]
               for r in two), "the workers' chain is not one's"
    t1 = float(np.mean(one["sweep_seconds"][1:]))
    t2 = float(np.mean([max(a, b) for a, b in zip(*(r["sweep_seconds"][1:] for r in two))]))
    allreduce_s = float(np.mean([max(a, b) for a, b in zip(*(r["seconds"][1:]
                                                              for r in reduce_))]))
    record = dict(
        benchmark="distributed_gibbs", layers=list(layers_of(args)), vocab_size=VOCAB,
        checked="the same log-likelihood trace and globals D, Phi, r, bit for bit",
        filter_width=FILTER_WIDTH, n_docs=args.docs, n_tokens=one["n_tokens"],
        sweeps=args.sweeps, threads_per_process=1, backend="gloo (127.0.0.1)",
        one_process=dict(sweep_seconds=one["sweep_seconds"], mean=round(t1, 3),
                         sweeps_per_second=round(1 / t1, 3)),
        two_workers=dict(sweep_seconds=[r["sweep_seconds"] for r in two], mean=round(t2, 3),
                         sweeps_per_second=round(1 / t2, 3),
                         bytes_summed_per_sweep=round(two[0]["bytes_summed"] / args.sweeps),
                         bytes_broadcast_per_sweep=round(two[0]["bytes_broadcast"]
                                                         / args.sweeps)),
        speedup=round(t1 / t2, 3), parallel_efficiency=round(t1 / (2 * t2), 3),
        kernel_count_allreduce=dict(bytes=reduce_[0]["bytes"], mean_seconds=round(allreduce_s, 4)),
        seconds_per_token_sweep=t1 / one["n_tokens"],
        seconds_per_token_last_sweep=one["sweep_seconds"][-1] / one["n_tokens"],
        efficiency_per_sweep=[round(a / (2 * max(b, c)), 3) for a, b, c in zip(
            one["sweep_seconds"], *(r["sweep_seconds"] for r in two))],
        kernel_draw_seconds=draws,
        largest_row_share=round(largest_row_share(corpus(args.data_dir, args.docs)), 5),
        command="python benchmarks/distributed_gibbs.py " + " ".join(
            argv if argv is not None else sys.argv[1:]), **provenance())
    if args.out:
        from records import write_record
        out = Path(args.out)
        write_record(out, record)
        out.with_suffix(".md").write_text(table(record) + projection(record))
    print(json.dumps(record))


def layers_note(r: dict) -> str:
    """", layers 200-100-50" for a deep stack, nothing for one layer."""
    return "" if len(r["layers"]) == 1 else ", layers " + "-".join(map(str, r["layers"]))


def table(r: dict) -> str:
    two = r["two_workers"]
    late = r["efficiency_per_sweep"][len(r["efficiency_per_sweep"]) // 2:]
    return (
        "# Data-parallel Gibbs: 1 process against 2 workers\n\n"
        f"Made by `{r['command']}` at commit {r['commit']} on {r['machine']}: "
        f"{r['n_docs']} IMDB training reviews ({r['n_tokens']} tokens), K_1 = "
        f"{r['layers'][0]}{layers_note(r)}, V = {r['vocab_size']}, F = {r['filter_width']}, one thread per "
        f"process, {r['sweeps']} sweeps (the first left out), {r['backend']}.  The two workers' "
        f"chain is the single process' ({r.get('checked', 'the same log-likelihood trace')}, "
        "checked).\n\n"
        "| run | seconds per sweep | sweeps per second | bytes all-reduced per sweep |\n"
        "|---|---|---|---|\n"
        f"| 1 process | {r['one_process']['mean']} | {r['one_process']['sweeps_per_second']} "
        "| 0 |\n"
        f"| 2 workers | {two['mean']} | {two['sweeps_per_second']} | "
        f"{two['bytes_summed_per_sweep']:,} (+ {two['bytes_broadcast_per_sweep']:,} "
        "broadcast) |\n\n"
        f"Speed-up {r['speedup']}, parallel efficiency **{r['parallel_efficiency']}** "
        "(1-process sweep time / (2 x 2-worker sweep time)).  The kernel counts' all-reduce "
        f"alone ({r['kernel_count_allreduce']['bytes']:,} bytes, int32) takes "
        f"{r['kernel_count_allreduce']['mean_seconds']} s between two processes of this "
        f"machine.  Sampler cost: {r['seconds_per_token_sweep'] * 1e6:.2f} us per token and "
        "sweep on one thread (the projection below starts from it).\n\n"
        "Efficiency sweep by sweep: "
        + ", ".join(f"{e:.2f}" for e in r["efficiency_per_sweep"])
        + ".  A sweep's work falls as the chain leaves its random start, and the fixed part "
        "(the all-reduce, the broadcast of D, the root's draw of D) weighs more: the last "
        f"half of the sweeps on these {r['n_docs']:,} reviews are at "
        f"{min(late):.2f}-{max(late):.2f}; shards of more documents keep it higher.\n")


#: The projection's assumptions (stated in its table): one 1-thread worker per core, as
#: measured here, 16 cores per machine, a 10 Gbit/s network per machine, 50 us per step of
#: the ring all-reduce, and the vocabulary of a large corpus.
CORES_PER_MACHINE, NETWORK_BYTES_PER_S, RING_STEP_S, LARGE_VOCAB = 16, 1.25e9, 50e-6, 30_000


def projection(r: dict) -> str:
    """Sweep time of 1M and 10M IMDB-like documents on 8 and 64 machines, from the measured
    cost per token and sweep, the measured draw of D, and the message sizes (module text)."""
    tokens_per_doc = r["n_tokens"] / r["n_docs"]
    entries = LARGE_VOCAB * r["filter_width"] * r["layers"][0]
    count_bytes = entries * 4   # int32; D as float32

    def counts_wide(n_docs: int) -> bool:
        """Whether the largest row's units could pass 2^31 (the counts then travel as int64:
        the workers decide from their largest counts, which this bound tops)."""
        return (r["largest_row_share"] * tokens_per_doc * n_docs * DEFAULT_TOKEN_COUNT
                > COUNT_LIMIT)
    draw = r["kernel_draw_seconds"][str(LARGE_VOCAB)]
    costs = {"mean": r["seconds_per_token_sweep"], "last": r["seconds_per_token_last_sweep"]}
    lines = [
        "\n## Projection: 1M and 10M documents on 8 and 64 machines\n",
        f"From this run: {tokens_per_doc:.0f} tokens per review; "
        f"{costs['mean'] * 1e6:.2f} us per token and sweep (the mean of sweeps 2..; the last "
        f"sweep's {costs['last'] * 1e6:.2f} us: the cost falls as the chain leaves its random "
        "start); the draw of D | counts on one thread, which the root does alone, "
        f"{draw:.2f} s at V = {LARGE_VOCAB:,} (K_1 = {r['layers'][0]}, F = "
        f"{r['filter_width']}).  Assumed: {CORES_PER_MACHINE} one-thread workers per machine "
        f"(torchrun --nproc-per-node {CORES_PER_MACHINE}), {NETWORK_BYTES_PER_S * 8 / 1e9:g} "
        f"Gbit/s per machine, {RING_STEP_S * 1e6:g} us per ring step, V = {LARGE_VOCAB:,}: the "
        f"kernel counts are {count_bytes / 1e6:.0f} MB of int32 and D as many of float32; "
        f"the counts travel as int64 ({2 * count_bytes / 1e6:.0f} MB) where the most frequent "
        f"row ({100 * r['largest_row_share']:.1f}% of the tokens here) could gather more than "
        f"2^31 - 1 units at {DEFAULT_TOKEN_COUNT} pseudo-counts a token (from about "
        f"{COUNT_LIMIT / (r['largest_row_share'] * tokens_per_doc * DEFAULT_TOKEN_COUNT):,.0f} "
        "documents on).  Communication per sweep: a ring all-reduce of the counts (2 x the "
        "bytes through each machine's link, 2(P-1) steps) and the broadcast of D (1 x).  "
        "Compute: the tokens of a worker's shard at the measured cost.\n",
        "| documents | machines | workers P | compute s (mean cost / last) | D draw s | "
        "counts | communication s | sweep s (mean cost) | communication + draw share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n_docs in (1_000_000, 10_000_000):
        for machines in (8, 64):
            workers = machines * CORES_PER_MACHINE
            compute = {k: n_docs * tokens_per_doc * c / workers for k, c in costs.items()}
            wide = counts_wide(n_docs)
            comm = ((2 * (2 if wide else 1) + 1) * count_bytes / NETWORK_BYTES_PER_S
                    + 2 * (workers - 1) * RING_STEP_S)
            sweep = compute["mean"] + draw + comm
            lines.append(f"| {n_docs:,} | {machines} | {workers} | {compute['mean']:.1f} / "
                         f"{compute['last']:.1f} | {draw:.2f} | "
                         f"{'int64' if wide else 'int32'} | {comm:.2f} | {sweep:.1f} | "
                         f"{100 * (comm + draw) / sweep:.0f}% |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
