"""Fingerprints of seeded fits: sha256 of the learned globals and of the features.

Run at two commits to show that a refactor left the sampler's output byte-identical::

    python scripts/fit_fingerprints.py --data-dir ../shared/data --out before.json
    # ... refactor ...
    python scripts/fit_fingerprints.py --data-dir ../shared/data --out after.json
    diff before.json after.json

It uses only the estimator's public surface (``CPGBN(...).fit_transform``, ``transform``,
``globals_``) and reads the TSV files itself, so the same script runs on either side of a
change to the package layout.  The fits are shortened (``--sweeps``) to keep the check cheap:
every step of every sweep runs, so a short chain is as good a witness as a long one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def read_tsv(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip("\n").split("\t", 1)[1] for line in fh]


def write_tsv(path: Path, texts, labels) -> None:
    path.write_text("".join(f"{y}\t{x}\n" for x, y in zip(texts, labels)), encoding="utf-8")


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def fingerprint(model, train, test) -> dict:
    f_train = model.fit_transform(train)
    f_test = model.transform(test)
    g = model.globals_
    return {"D": digest(g.D), "phi": digest(*g.phi), "r": digest(g.r),
            "train_features": digest(f_train), "test_features": digest(f_test),
            "test_feature_sum": float(np.asarray(f_test, dtype=np.float64).sum()),
            "kernel_windows": windows_digest(model)}


def windows_digest(model) -> str:
    """The post-fit kernel-windows record (its own chain from the fitted kernels), or
    "absent" where the fitted model has none."""
    windows = getattr(model, "kernel_windows_", None)
    if windows is None:
        return "absent"
    return digest(windows, model.kernel_window_counts_, model.kernel_window_shares_)


#: Every case: the Gibbs sampler (numba, two corpora and depths; PyTorch on the CPU), the
#: minibatch modes, from texts in memory and from a TSV file streamed in blocks, the classifier,
#: and a Gibbs fit of two workers under torchrun.
CASES = ("trec-200", "mr-200-100-50", "torch-small", "minibatch-gibbs", "minibatch-gibbs-file",
         "hybrid", "hybrid-file", "classifier", "distributed")


def classifier_fingerprint(train, labels, test) -> dict:
    """sCPGBN (the classifier's defaults but a 20-10 model, 2 epochs of batches of 100)."""
    from cpgbn.classifier import CPGBNClassifier
    model = CPGBNClassifier((20, 10), vocab_size=500, batch_size=100, n_epochs=2,
                            random_state=0, n_threads=2).fit(train, labels)
    g = model.globals_
    return {"D": digest(g.D), "phi": digest(*g.phi), "r": digest(g.r),
            "test_probabilities": digest(model.predict_proba(test)),
            "loss_trace": digest(np.asarray(model.loss_trace_))}


def distributed_fingerprint(train, labels, test, n_iter: int, burn_in: int) -> dict:
    """``cpgbn fit --distributed`` on two workers of torchrun (Gibbs, a 20-10 model), loaded
    back in this process."""
    import os
    import socket
    import tempfile

    import cpgbn
    from cpgbn import CPGBN
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.tsv"
        write_tsv(path, train, labels)
        src = str(Path(cpgbn.__file__).resolve().parents[1])
        env = dict(os.environ, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--master-port", str(port), "-m", "cpgbn.cli", "fit", str(path),
                        "--out", str(Path(tmp) / "model"), "--layers", "20,10",
                        "--vocab-size", "500", "--iterations", str(n_iter), "--burn-in",
                        str(burn_in), "--seed", "0", "--quiet", "--threads", "1",
                        "--distributed"], env=env, check=True, capture_output=True)
        model = CPGBN.load(Path(tmp) / "model")
    g = model.globals_
    return {"D": digest(g.D), "phi": digest(*g.phi), "r": digest(g.r),
            "loglik_trace": digest(np.asarray(model.loglik_trace_)),
            "test_features": digest(model.transform(test))}


def minibatch_fingerprint(model, train, test, streamed: bool, labels) -> dict:
    """A minibatch mode's fit, from ``train`` in memory or written to a TSV and streamed."""
    if not streamed:
        return fingerprint(model, train, test)
    import tempfile

    from cpgbn import TextFile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.tsv"
        write_tsv(path, train, labels)
        model.fit(TextFile(path))
        f_train = model.transform(TextFile(path))
    f_test = model.transform(test)
    g = model.globals_
    record = {"D": digest(g.D), "phi": digest(*g.phi), "r": digest(g.r),
              "train_features": digest(f_train), "test_features": digest(f_test),
              "test_feature_sum": float(np.asarray(f_test, dtype=np.float64).sum())}
    if model.inference == "hybrid":   # both feature paths: the encoder alone, and refined
        model.set_params(refine_iter=2)
        record["test_features_refine2"] = digest(model.transform(test))
    return record


def main(argv=None) -> None:
    from cpgbn import CPGBN

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sweeps", type=int, default=30)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)
    n_iter, burn_in = args.sweeps, args.sweeps * 2 // 3
    cases = args.cases.split(",")
    trec_train = read_tsv(args.data_dir / "TREC" / "train.tsv")
    trec_test = read_tsv(args.data_dir / "TREC" / "test.tsv")
    mr = read_tsv(args.data_dir / "MR" / "all.tsv")
    record = {"sweeps": n_iter, "burn_in": burn_in}
    import cpgbn
    try:  # the commit of the cpgbn that ran (which may be another checkout than this script's)
        record["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                          text=True, cwd=Path(cpgbn.__file__).parent).stdout.strip()
    except OSError:
        record["commit"] = None
    common = dict(n_iter=n_iter, burn_in=burn_in, random_state=0, n_threads=2)
    if "trec-200" in cases:
        record["trec-200"] = fingerprint(CPGBN((200,), vocab_size=8001, **common),
                                         trec_train, trec_test)
    if "mr-200-100-50" in cases:
        # the authors' protocol splits MR 9:1; a fixed cut is enough for a fingerprint
        record["mr-200-100-50"] = fingerprint(CPGBN((200, 100, 50), vocab_size=20001, **common),
                                              mr[:9596], mr[9596:])
    if "torch-small" in cases:
        record["torch-small"] = fingerprint(
            CPGBN((20, 10), vocab_size=500, device="cpu", **common), trec_train[:300],
            trec_test[:50])
    # the minibatch modes: 600 TREC questions, 2 epochs of 100, a 20-10 model (fast)
    small = dict(vocab_size=500, n_iter=6, burn_in=4, random_state=0, n_threads=2,
                 batch_size=100, n_epochs=2)
    labels = [line.split("\t", 1)[0] for line in
              (args.data_dir / "TREC" / "train.tsv").read_text(encoding="utf-8").splitlines()]
    for mode in ("minibatch-gibbs", "hybrid"):
        for streamed in (False, True):
            case = mode + ("-file" if streamed else "")
            if case in cases:
                record[case] = minibatch_fingerprint(
                    CPGBN((20, 10), inference=mode, **small), trec_train[:600],
                    trec_test[:100], streamed, labels[:600])
    if "classifier" in cases:
        record["classifier"] = classifier_fingerprint(trec_train[:600], labels[:600],
                                                      trec_test[:100])
    if "distributed" in cases:
        record["distributed"] = distributed_fingerprint(trec_train[:600], labels[:600],
                                                        trec_test[:100], 6, 4)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    sys.exit(main())
