"""The PyTorch Gibbs sampler run data-parallel (issue 37): one process against ``torchrun``
workers on the same device type, the same seed and corpus; are the models the same, and
how long does a sweep take?

Made for a session with a GPU (``--device cuda``: each worker on its ``LOCAL_RANK``'s GPU,
the counts of CUDA tensors through NCCL; one GPU gives one worker, which still sends every
collective through the process group), and runnable on the CPU (``--device cpu``, gloo) to
check the script itself.  The corpus is synthetic unless ``--data`` names a
``label<TAB>text`` file, so nothing needs to travel with the script: ``--docs`` documents of
20-100 words drawn from a Zipf law over ``--words`` words (seed 0).

Three fits, each a fresh process: ``cpgbn fit DATA --device D`` twice (the reference, and
whether it reproduces itself on a GPU: the per-document float sums are segment sums in a
fixed order, but scans and cuBLAS products are the device's), then
``torchrun --nproc-per-node W -m cpgbn.cli fit DATA --device D --distributed``.  The record
(``--out``, JSON; the last line of stdout too): the device's name, torch's version, the
process group's backend, both fits' wall seconds (each command's, process start, reading
and the vocabulary included), and how the two saved models compare: the log-likelihood
traces equal or not (the reference against its repeat and against the workers), the arrays
bit for bit equal, and the largest absolute difference of the others (a sum ordered
differently from run to run would part two chains).

    python benchmarks/gpu_distributed.py --device cuda --workers 1 --out gpu_distributed.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "src")]   # runs uninstalled too


def synthetic_corpus(path: Path, n_docs: int, n_words: int) -> None:
    """``n_docs`` lines ``label<TAB>text`` of 20-100 Zipf-distributed words (seed 0)."""
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as fh:
        for j in range(n_docs):
            ids = np.minimum(rng.zipf(1.3, size=int(rng.integers(20, 101))), n_words) - 1
            fh.write(f"{j % 2}\t" + " ".join(f"w{i}" for i in ids) + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fit(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    run = subprocess.run(command, env=env, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"failed ({run.returncode}): {' '.join(command)}\n{run.stderr[-3000:]}")
    return time.perf_counter() - start


def _trace(model_dir: Path) -> list[float]:
    return json.loads((model_dir / "model.json").read_text())["loglik_trace"]


def compare(one: Path, two: Path) -> dict:
    """Which saved arrays are equal bit for bit, and the largest difference of the others
    (wall times left out)."""
    a, b = np.load(one / "arrays.npz"), np.load(two / "arrays.npz")
    equal, differ = [], {}
    for name in sorted(set(a.files) & set(b.files)):
        if name == "mixing_seconds":
            continue
        x, y = a[name], b[name]
        if x.shape == y.shape and np.array_equal(x, y):
            equal.append(name)
        elif x.shape == y.shape:
            differ[name] = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
        else:
            differ[name] = f"shapes {x.shape} and {y.shape}"
    return dict(equal=equal, differ=differ)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--data", default=None, help="a label<TAB>text file (default: synthetic)")
    ap.add_argument("--docs", type=int, default=40000)
    ap.add_argument("--words", type=int, default=5000)
    ap.add_argument("--layers", default="200")
    ap.add_argument("--sweeps", type=int, default=6)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    from cpgbn.evaluate.provenance import provenance
    from records import write_record
    work = Path(tempfile.mkdtemp(prefix="gpu_distributed_"))
    data = Path(args.data) if args.data else work / "corpus.tsv"
    if not args.data:
        synthetic_corpus(data, args.docs, args.words)
    settings = ["--layers", args.layers, "--vocab-size", str(args.words), "--iterations",
                str(args.sweeps), "--burn-in", str(args.sweeps - 1), "--seed", "0",
                "--quiet", "--device", args.device]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")]))
    one_seconds = _fit([sys.executable, "-m", "cpgbn.cli", "fit", str(data), "--out",
                        str(work / "one"), *settings], env)
    _fit([sys.executable, "-m", "cpgbn.cli", "fit", str(data), "--out", str(work / "again"),
          *settings], env)
    two_seconds = _fit([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                        str(args.workers), "--master-port", str(_free_port()), "-m",
                        "cpgbn.cli", "fit", str(data), "--out", str(work / "dist"), *settings,
                        "--distributed", "--timeout", "300"], env)
    cuda = args.device.startswith("cuda")
    record = dict(
        device=torch.cuda.get_device_name(0) if cuda else "cpu", torch=torch.__version__,
        process_group="cpu:gloo,cuda:nccl" if cuda else "gloo", workers=args.workers,
        corpus=args.data or f"synthetic: {args.docs} documents, {args.words} words",
        layers=args.layers, sweeps=args.sweeps,
        one_process_seconds=round(one_seconds, 2), distributed_seconds=round(two_seconds, 2),
        repeat_same_trace=_trace(work / "one") == _trace(work / "again"),
        repeat_models=compare(work / "one", work / "again"),
        same_trace=_trace(work / "one") == _trace(work / "dist"),
        models=compare(work / "one", work / "dist"),
        command="python " + " ".join(sys.argv), **provenance())
    if args.out:
        write_record(Path(args.out), record)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
