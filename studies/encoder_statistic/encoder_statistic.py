"""Levers on the hybrid encoder's features: the summary of q(w), its shape floor, the scale.

The encoder alone trails Gibbs features by 3-5 points on TREC and SUBJ (results/hybrid_features).
Its feature path pools the Weibull *mean* of every q(w_jks), lambda Gamma(1 + 1/k), which grows
without bound as the shape k falls (Gamma(11) = 3.6e6 at k = 0.1) at the sparse shapes the
prior favours, so a few positions can dominate a document's theta^(1) (docs/hybrid.md: the
document sums of theta^(1) spread over orders of magnitude).  The median lambda (ln 2)^(1/k)
shrinks there instead.  Per (dataset, seed) this study fits one hybrid model (the
hybrid_features study's fit: 200-100-50, 5 epochs, learning rate 3e-3) and scores, under the
authors' protocol (RBF SVC on theta^(1) / L), the features of that one model by:

* ``mean``: the encoder's mean path (``transform`` with ``refine_iter=0``);
* ``median``: the same path with the median of q(w), lambda (ln 2)^(1/k), pooled instead of
  its mean;
* ``floor-1``: the mean path with the encoder's shapes held at >= 1 (its floor raised from 0.1
  at feature time), so that no position's mean exceeds its scale Lambda;
* ``proportions``: the mean path's theta^(1) divided by its sum over k (the refined features'
  sums are nearly constant, the encoder's spread: see the sums below), not by the length;
* ``refine-2``: two Gibbs sweeps from the encoder's state (``refine_iter=2``), the reference
  that met the Gibbs features.

``--epochs`` trains longer than the 5 epochs (another lever: an encoder trained on more
minibatches per global state); such cells are named ``...--<E>ep`` and tabled apart.  A cell
that lacks one of the paths is fitted again (a hybrid fit is reproducible for a seed).

Each path's record also holds the spread of the training documents' feature sums (the
quartiles of sum_k theta^(1)_jk / L_j), the scale the classifier sees.  Records:
``results/encoder_statistic/cells/``, table ``results/encoder_statistic/encoder_statistic.md``.

The ``median`` and ``floor-1`` paths are variants of the library's mean path built here from the
encoder's public pieces (its forward pass, ``sample(mean=True, output=...)``: the upper layers at
their Weibull means), not options of the library; they equal the library's chunked
``mean_thetas`` up to float rounding, which ``test_encoder_statistic.py`` checks on the mean.

    python -m studies.encoder_statistic.encoder_statistic --datasets trec --seeds 0,1,2
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from cpgbn.model import CPGBN

from studies.common.paths import RESULTS
from studies.common.reports import mean_std, save_record
from studies.hybrid_features.hybrid_features import FIT
from studies.hybrid_features.hybrid_features import features as hybrid_features
from studies.hybrid_features.hybrid_features import run_cell as hybrid_features_cell

OUT = RESULTS / "encoder_statistic"
PATHS = ("mean", "median", "floor-1", "proportions", "refine-2")
SHAPE_FLOOR = 1.0
#: ln(ln 2): the Weibull median is lambda (ln 2)^(1/k)
LN_LN_2 = float(np.log(np.log(2.0)))


def features(model: CPGBN, path: str, texts) -> np.ndarray:
    """The features of ``texts`` by ``path`` (module docstring)."""
    if path == "mean":
        return hybrid_features(model, "encoder", texts)
    if path == "refine-2":
        return hybrid_features(model, "refine-2", texts)
    if path == "proportions":
        theta1 = hybrid_features(model, "encoder", texts)
        return theta1 / theta1.sum(axis=1, keepdims=True)
    if path == "median":
        return _encoder_theta1_by_length(model, texts, median=True)
    if path == "floor-1":
        return _encoder_theta1_by_length(model, texts, shape_floor=SHAPE_FLOOR)
    raise ValueError(f"unknown path {path!r}")


def mean_path_theta1(encoder, batch, phi, *, median: bool = False, shape_floor=None):
    """theta^(1) of the encoder's mean path over a packed ``batch`` (``sample(mean=True)``: every
    layer above at its Weibull mean), pooling each q(w_jks)'s median Lambda (ln 2)^(1/k)
    instead of its mean with ``median``, and with every shape of q (Sigma, sigma^(t)) held at
    >= ``shape_floor`` when given (the encoder clips them at 0.1 itself, so a higher floor is
    the clip raised)."""
    import torch

    from cpgbn.backends.torch.packed import segment_sum

    with torch.no_grad():
        output = encoder(batch)
        if shape_floor is not None:
            output.position_shape = output.position_shape.clamp(min=shape_floor)
            output.layer_shape = [s.clamp(min=shape_floor) for s in output.layer_shape]
        sample = encoder.sample(batch, phi, mean=True, output=output)
        if not median:
            return sample.theta[0]
        w_median = sample.w_scale * torch.exp(LN_LN_2 / sample.w_shape)
        return segment_sum(w_median, batch.position_doc, batch.n_docs)


def _encoder_theta1_by_length(model: CPGBN, texts, *, median=False, shape_floor=None,
                              batch_size=512):
    """theta^(1) / L from the encoder's mean path (:func:`mean_path_theta1`), ``batch_size``
    documents at a time."""
    from cpgbn.backends.torch.encoder_backend import build_encoder
    from cpgbn.backends.torch.packed import pack
    from cpgbn.layers.cells import from_token_sequences
    corpus = model.encode(texts)          # the cells as transform builds them
    data = from_token_sequences(corpus.tokens, corpus.offsets, model.globals_.D.shape[1],
                                model.observation_model, model.padding)
    encoder = build_encoder(model.encoder_config_, model.encoder_weights_)
    encoder.eval()
    theta1 = np.empty((data.n_docs, encoder.layers[0]))
    for lo in range(0, data.n_docs, batch_size):
        docs = np.arange(lo, min(data.n_docs, lo + batch_size))
        theta1[docs] = mean_path_theta1(encoder, pack(data, docs), model.globals_.phi,
                                        median=median, shape_floor=shape_floor).double().numpy()
    return theta1 / np.maximum(data.true_length, 1)[:, None]


def sum_quartiles(f_train: np.ndarray) -> dict:
    """The quartiles of the training documents' feature sums (the scale the classifier sees)."""
    return {"train_sum_quartiles": [float(q) for q in
                                    np.percentile(f_train.sum(axis=1), [25, 50, 75])]}


def run_cell(dataset: str, seed: int, data_dir=None, epochs: int = FIT["n_epochs"]) -> dict:
    """One cell: the hybrid_features study's fit and scoring, over this study's paths."""
    return hybrid_features_cell(dataset, seed, data_dir, paths=PATHS, path_features=features,
                                fit=dict(FIT, n_epochs=epochs), describe=sum_quartiles)


def cell_name(dataset: str, seed: int, epochs: int) -> str:
    """A cell's file name: ``<dataset>--seed<seed>``, with ``--<epochs>ep`` when training ran
    other than the hybrid_features study's 5 epochs."""
    extra = "" if epochs == FIT["n_epochs"] else f"--{epochs}ep"
    return f"{dataset}--seed{seed}{extra}.json"


def column(record: dict) -> str:
    epochs = record["fit"]["n_epochs"]
    return record["dataset"].upper() + ("" if epochs == FIT["n_epochs"] else f" {epochs} ep")


def report(records: list[dict]) -> str:
    columns = sorted({column(r) for r in records})
    lines = ["# Levers on the encoder's features: q(w)'s summary, a shape floor, the scale", "",
             "Made by `studies/encoder_statistic/encoder_statistic.py` (module docstring). One "
             "hybrid fit per (dataset, seed): 200-100-50, 5 epochs unless the column says, learning "
             "rate 3e-3; authors' "
             "protocol (fixed split, RBF SVC on theta^(1)/L). Accuracy %, mean +- std over seeds; "
             "sum: the median over seeds of the training documents' median sum_k theta^(1)_jk / "
             "L_j, with the median interquartile ratio (q75 / q25).", "",
             "| path | " + " | ".join(f"{c} acc | {c} sum (q75/q25)" for c in columns) + " |",
             "|---|" + "---|---|" * len(columns)]
    for path in PATHS:
        cells_out = []
        for c in columns:
            cells = [r["paths"][path] for r in records if column(r) == c and path in r["paths"]]
            if not cells:
                cells_out += ["-", "-"]
                continue
            q = np.array([c["train_sum_quartiles"] for c in cells])
            cells_out += [f"{mean_std([100 * c['accuracy'] for c in cells])} (n={len(cells)})",
                          f"{np.median(q[:, 1]):.3g} ({np.median(q[:, 2] / q[:, 0]):.2f})"]
        lines.append(f"| {path} | " + " | ".join(cells_out) + " |")
    lines += ["", "Records (command, commit, machine, seed, seconds) in `cells/`.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="trec")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--epochs", type=int, default=FIT["n_epochs"],
                        help="hybrid training epochs (default: the hybrid_features study's)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report", action="store_true", help="only rewrite the table")
    args = parser.parse_args(argv)
    cells = args.out / "cells"
    if not args.report:
        for dataset in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                path = cells / cell_name(dataset, seed, args.epochs)
                if not path.exists() or set(PATHS) - set(json.loads(path.read_text())["paths"]):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    save_record(path, run_cell(dataset, seed, args.data_dir, args.epochs))
    records = [json.loads(p.read_text()) for p in sorted(cells.glob("*.json"))]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "encoder_statistic.md").write_text(report(records))


if __name__ == "__main__":
    main()
