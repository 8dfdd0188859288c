"""IMDB at scale: hybrid training, its features for the 25k test reviews, and the Gibbs transform.

Issue 25's scale targets on this machine: hybrid training on the 25,000 IMDB training reviews for
a fixed budget of epochs within 30 minutes and under 2 GB of peak resident memory, and features
for the 25,000 test reviews in under 30 s, against the Gibbs transform (200 sweeps, the last 50
averaged) of the same model in the same run.  Every phase runs in a fresh subprocess, so each
peak RSS (VmHWM) is that phase's alone; the feature phases are the feature paths of
``studies/hybrid_features`` (its ``features``):

* ``train``: CPGBN(inference="hybrid"), 200-100-50, vocabulary 30,000 (the paper's), F = 3,
  ``--epochs`` passes of minibatches of ``--batch-size``; saves the model;
* ``encoder``: ``transform`` of the test reviews from the encoder's mean path;
* ``encoder-bfloat16``: the same with ``encoder_precision="bfloat16"`` (the position head in
  bfloat16; any phase may take that suffix);
* ``refine-R``: the same, then R Gibbs sweeps started there (``refine_iter=R``);
* ``gibbs-K``: K Gibbs sweeps with the globals fixed from the sampler's own start, no burn-in
  (``infer(n_iter=K, burn_in=0)``): what the same few sweeps cost without the encoder;
* ``gibbs-200``: the Gibbs transform of the authors' protocol (``infer()``, 200 / 150).

``--device cuda`` sets the model's ``device``, named in the record: the encoder (training,
features, the refinement's start) runs there, and so does the ``gibbs-K`` phases' sampler (the
PyTorch one); the local Gibbs sweeps of training's TLASGR statistics and of ``refine-R`` stay
on the CPU (numba).  With ``--accuracy`` each feature phase also infers the training reviews
the same way and scores the protocol's classifier (RBF SVC on theta^(1)/L); those extra
seconds are not in the phase's time.  The last line of stdout is JSON; ``--out`` writes it and a table beside it.

    python benchmarks/hybrid_imdb.py --data-dir ../shared/data --epochs 1
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# this folder (gibbs_speed's RSS reader) and the repository (the feature paths of
# studies/hybrid_features, which this benchmark times)
sys.path[:0] = [str(HERE), str(HERE.parent)]
LAYERS = (200, 100, 50)


def own_peak_rss_mb() -> float:
    from gibbs_speed import own_peak_rss_kib
    return own_peak_rss_kib() / 1024.0


def imdb(args, split: str):
    """(texts, labels) of an IMDB split (``--max-docs`` evenly spaced reviews, when set)."""
    from cpgbn.datasets import load_dataset
    texts, labels = load_dataset("imdb", split, data_dir=args.data_dir)
    if args.max_docs:   # evenly spaced: the files are sorted by class
        keep = np.unique(np.linspace(0, len(texts) - 1, args.max_docs).astype(int))
        return [texts[i] for i in keep], [labels[i] for i in keep]
    return texts, labels


def device_name(device) -> str:
    """The model's device in the record: the GPU's name for a CUDA device, else "cpu"."""
    if device is None or not str(device).startswith("cuda"):
        return "cpu"
    import torch
    return torch.cuda.get_device_name(torch.device(device))


def phase_train(args) -> dict:
    from cpgbn.datasets import dataset_info
    from cpgbn.model import CPGBN

    texts, _ = imdb(args, "train")
    model = CPGBN(layers=LAYERS, vocab_size=dataset_info("imdb")["vocab_size"] + 1,
                  inference="hybrid", n_epochs=args.epochs, batch_size=args.batch_size,
                  learning_rate=args.learning_rate, random_state=args.seed,
                  n_threads=args.threads, progress=False, device=args.device)
    start = time.perf_counter()
    model.fit(texts)
    seconds = time.perf_counter() - start
    model.save(args.work / "model")
    return {"phase": "train", "seconds": round(seconds, 1), "n_docs": len(texts),
            "docs_per_second": round(args.epochs * len(texts) / seconds, 2),
            "median_step_seconds": round(float(np.median(model.step_seconds_)), 3),
            "n_steps": len(model.step_seconds_),
            "last_loss": float(np.median(model.loss_trace_[-20:])),
            "peak_rss_mb": round(own_peak_rss_mb(), 1)}


def phase_features(args) -> dict:
    from cpgbn.model import CPGBN
    from studies.hybrid_features.hybrid_features import features

    model = CPGBN.load(args.work / "model").set_params(n_threads=args.threads,
                                                       device=args.device)
    path, bfloat16, _ = args.phase.partition("-bfloat16")
    model.set_params(encoder_precision="bfloat16" if bfloat16 else "float32")
    texts, labels = imdb(args, "test")
    start = time.perf_counter()
    f_test = features(model, path, texts)
    seconds = time.perf_counter() - start
    row = {"phase": args.phase, "seconds": round(seconds, 1), "n_docs": len(texts),
           "docs_per_second": round(len(texts) / seconds, 1),
           "peak_rss_mb": round(own_peak_rss_mb(), 1)}
    if args.accuracy:
        from sklearn.svm import SVC
        train_texts, train_labels = imdb(args, "train")
        f_train = features(model, path, train_texts)
        row["accuracy"] = float(SVC().fit(f_train, train_labels).score(f_test, np.asarray(labels)))
    return row


def run_phase(args, phase: str) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase,
               "--work", str(args.work)] + args.passthrough
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"phase {phase} failed:\n{out.stderr[-3000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(row), flush=True)
    return row


def write_report(record: dict, path: Path) -> None:
    rows = {r["phase"]: r for r in record["phases"]}
    gibbs = rows.get("gibbs-200", {}).get("seconds")
    lines = ["# IMDB at scale: hybrid training and features (issue 25)", "",
             f"Made by `{record['command']}` at commit {record['commit']} on "
             f"{record['machine']}, {record['threads']} threads, seed {record['seed']}, encoder on "
             f"{record.get('device', 'cpu')}. Each phase "
             "is a fresh process (peak RSS = its VmHWM). 200-100-50, V = 30,000, F = 3; "
             f"training: {record['epochs']} epoch(s), minibatches of {record['batch_size']}, "
             f"learning rate {record['learning_rate']}. Features: the 25,000 test reviews."
             + (f" Only {record['max_docs']} evenly spaced reviews of each split." if record["max_docs"] else ""),
             "",
             "| phase | seconds | documents/s | peak RSS MB | vs gibbs-200 | accuracy % |",
             "|---|---|---|---|---|---|"]
    for r in record["phases"]:
        ratio = f"{gibbs / r['seconds']:.1f}x faster" if gibbs and r["phase"] != "train" else "-"
        acc = f"{100 * r['accuracy']:.1f}" if "accuracy" in r else "-"
        lines.append(f"| {r['phase']} | {r['seconds']} | {r['docs_per_second']} | "
                     f"{r['peak_rss_mb']} | {ratio} | {acc} |")
    lines += ["", "Targets (issue 25): training <= 1800 s with peak RSS < 2048 MB; test features "
              "< 30 s.", ""]
    path.write_text("\n".join(lines))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("CPGBN_DATA"))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--refine", type=int, default=2, help="Gibbs sweeps of refine-R, gibbs-R")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None,
                        help="the model's torch device, e.g. cuda (default: none, the CPU: "
                             "the encoder on the CPU, the gibbs-K phases on numba)")
    parser.add_argument("--accuracy", action="store_true")
    parser.add_argument("--max-docs", type=int, default=0,
                        help="only N evenly spaced reviews of each split (a quick check; 0: all)")
    parser.add_argument("--phases", default=None, help="comma-separated subset (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="JSON record (table beside it)")
    parser.add_argument("--model", type=Path, default=None,
                        help="a model saved by an earlier train phase: time the feature phases "
                             "of that model (leave train out of --phases)")
    parser.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase is not None:                       # inside a phase's subprocess
        row = phase_train(args) if args.phase == "train" else phase_features(args)
        print(json.dumps(row))
        return
    from cpgbn.evaluate.provenance import provenance
    origin = provenance()
    phases = (args.phases.split(",") if args.phases else
              ["train", "encoder", "encoder-bfloat16", f"refine-{args.refine}",
               f"gibbs-{args.refine}", "gibbs-200"])
    args.passthrough = ["--data-dir", str(args.data_dir), "--epochs", str(args.epochs),
                        "--batch-size", str(args.batch_size), "--learning-rate",
                        str(args.learning_rate), "--threads", str(args.threads),
                        "--seed", str(args.seed), "--max-docs", str(args.max_docs)]
    args.passthrough += ["--accuracy"] if args.accuracy else []
    args.passthrough += ["--device", args.device] if args.device else []
    with tempfile.TemporaryDirectory() as work:
        args.work = Path(work)
        if args.model is not None:
            if "train" in phases:
                raise SystemExit("--model times an existing model: leave train out of --phases")
            (args.work / "model").symlink_to(args.model.resolve())
        rows = [run_phase(args, phase) for phase in phases]
    record = {"phases": rows, "epochs": args.epochs, "batch_size": args.batch_size,
              "learning_rate": args.learning_rate, "threads": args.threads, "seed": args.seed,
              "max_docs": args.max_docs, "device": device_name(args.device),
              "model": None if args.model is None else str(args.model),
              "command": "python " + " ".join(sys.argv), **origin}
    print(json.dumps(record))
    if args.out is not None:
        from records import write_record   # here: it imports cpgbn
        write_record(args.out, record)
        write_report(record, args.out.with_suffix(".md"))


if __name__ == "__main__":
    main()
