"""The supervised CPGBN (CPGBNClassifier) at IMDB's scale: training time per epoch and the time
to predict the 25,000 test reviews (issue 36: training within 2 hours on 2 CPU cores,
predicting 25k reviews under 30 s).

Two phases, each in a fresh subprocess (its own peak resident memory, VmHWM):

* ``train``: ``CPGBNClassifier(layers=200-100-50)`` with the library's defaults (vocabulary
  8000, xi, batch 100), ``--epochs`` passes over the 25,000 training reviews (``--docs`` for
  fewer), ``--threads`` threads; saves the model; records seconds per epoch and per step;
* ``predict``: ``predict_proba`` of the 25,000 test reviews with the saved model (the encoder's
  mean path and the softmax), and its accuracy (meaningful only after a full training).

The model, its device (``--device cuda`` where one is lent) and the machine are named in the
record.  The last line of stdout is JSON; ``--out`` writes it (and a table beside it).

    python benchmarks/classifier_imdb.py --data-dir ../shared/data --epochs 1 --threads 2
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
LAYERS = (200, 100, 50)


def phase_train(args, model_dir: Path) -> dict:
    from cpgbn.classifier import CPGBNClassifier
    from cpgbn.datasets import load_dataset
    texts, labels = load_dataset("imdb", "train", data_dir=args.data_dir)
    if args.docs:   # a seeded sample (the file is sorted by class)
        import numpy as np
        keep = np.sort(np.random.default_rng(0).choice(len(texts), args.docs, replace=False))
        texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
    model = CPGBNClassifier(layers=LAYERS, n_epochs=args.epochs, random_state=0,
                            n_threads=args.threads, device=args.device, **_settings(args))
    start = time.perf_counter()
    model.fit(texts, labels)
    seconds = time.perf_counter() - start
    model.save(model_dir)
    steps = len(model.loss_trace_)
    # the epochs run: fewer than asked when the validation split stopped the fit
    curve = getattr(model, "validation_curve_", None)
    epochs = args.epochs if curve is None else len(curve)
    return dict(phase="train", n_docs=len(texts), epochs=epochs, epochs_asked=args.epochs,
                best_epoch=getattr(model, "best_epoch_", None), seconds=round(seconds, 1),
                seconds_per_epoch=round(seconds / epochs, 1),
                seconds_per_step=round(float(sum(model.step_seconds_)) / steps, 3),
                n_steps=steps, paper_xi=model.paper_xi_)


def _settings(args) -> dict:
    """``--set name=value`` pairs as the classifier's parameters (values read as JSON where
    they parse: numbers, booleans; strings otherwise)."""
    out = {}
    for item in args.set or []:
        name, _, value = item.partition("=")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def phase_predict(args, model_dir: Path) -> dict:
    import numpy as np

    from cpgbn.classifier import CPGBNClassifier
    from cpgbn.datasets import load_dataset
    texts, labels = load_dataset("imdb", "test", data_dir=args.data_dir)
    model = CPGBNClassifier.load(model_dir)
    model.set_params(n_threads=args.threads, device=args.device)
    start = time.perf_counter()
    probabilities = model.predict_proba(texts)
    seconds = time.perf_counter() - start
    predicted = model.classes_[np.argmax(probabilities, axis=1)]
    return dict(phase="predict", n_docs=len(texts), seconds=round(seconds, 1),
                accuracy=float(np.mean(predicted == np.asarray(labels))))


def run_phase(name: str, argv: list[str], model_dir: Path) -> dict:
    """One phase in a fresh interpreter: its record with its peak resident memory."""
    result = subprocess.run([sys.executable, __file__, "--phase", name, "--model-dir",
                             str(model_dir), *argv], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--docs", type=int, default=None,
                   help="train on N reviews drawn at random (seed 0) only")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default=None)
    p.add_argument("--set", action="append", default=None, metavar="NAME=VALUE",
                   help="a parameter of the classifier other than its default (repeatable)")
    p.add_argument("--out", default=None)
    p.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    p.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.phase is not None:   # inside a phase's subprocess
        from gibbs_speed import own_peak_rss_kib
        record = (phase_train if args.phase == "train" else phase_predict)(
            args, Path(args.model_dir))
        record["peak_rss_mb"] = round(own_peak_rss_kib() / 1024, 1)
        print(json.dumps(record))
        return
    from cpgbn.evaluate.provenance import provenance
    passed = [f"--epochs={args.epochs}", f"--threads={args.threads}"]
    passed += [f"--data-dir={args.data_dir}"] if args.data_dir else []
    passed += [f"--docs={args.docs}"] if args.docs else []
    passed += [f"--device={args.device}"] if args.device else []
    passed += [f"--set={item}" for item in args.set or []]
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        phases = [run_phase(name, passed, model_dir) for name in ("train", "predict")]
    record = dict(benchmark="classifier_imdb", layers=list(LAYERS), threads=args.threads,
                  settings=_settings(args),
                  device=args.device or "cpu", phases=phases,
                  command="python benchmarks/classifier_imdb.py " + " ".join(
                      (argv if argv is not None else sys.argv[1:])), **provenance())
    if args.out:
        out = Path(args.out)
        out.write_text(json.dumps(record, indent=1) + "\n")
        train, predict = phases
        out.with_suffix(".md").write_text(
            "# CPGBNClassifier on IMDB: training and prediction time\n\n"
            f"Made by `{record['command']}` at commit {record['commit']} on "
            f"{record['machine']}, {args.threads} thread(s), device {record['device']}.\n\n"
            "| phase | documents | seconds | per epoch | per step | peak RSS MB |\n"
            "|---|---|---|---|---|---|\n"
            f"| train ({train['epochs']} epoch(s), {train['n_steps']} steps) | {train['n_docs']} "
            f"| {train['seconds']} | {train['seconds_per_epoch']} | "
            f"{train['seconds_per_step']} | {train['peak_rss_mb']} |\n"
            f"| predict_proba | {predict['n_docs']} | {predict['seconds']} | - | - | "
            f"{predict['peak_rss_mb']} |\n\n"
            f"Scaled from the {train['n_docs']} reviews trained on, an epoch of the 25,000 "
            "training reviews takes about "
            f"{train['seconds_per_epoch'] * 25000 / train['n_docs'] / 60:.1f} minutes (an "
            "extrapolation when fewer reviews were trained on; a fit with a validation split "
            "trains on 90% of them and stops when it no longer improves).  Accuracy on the "
            f"25,000 test reviews after this training: {100 * predict['accuracy']:.1f} % (the "
            "model's only after a training on every review to its end; one seed).\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
