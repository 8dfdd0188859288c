"""Issue 35, items 1-3: the encoder's ELBO with the model's rates, q(w)'s shape, and where the
TLASGR step takes its statistics, measured on the encoder's own features.

Per (dataset, variant, seed) this study fits one hybrid model (the hybrid_features study's fit:
200-100-50, 5 epochs, learning rate 3e-3, the authors' protocol) with the trainer's options of
the variant, and scores under the protocol (RBF SVC on theta^(1) / L) the encoder's mean path
(``refine_iter=0``) and two Gibbs sweeps from it (``refine_iter=2``, the reference that met the
Gibbs features).  Variants (:data:`VARIANTS`):

* ``prior_rates``: "one" (WHAI's rates c = 1 in every KL, the library's earlier default) or
  "conditional" (each document's c^(t+1)_j at its conditional mean given the draw:
  :func:`cpgbn.backends.torch.elbo.conditional_rates`);
* ``w_shape_above``: "paper" (q(w)'s shape adds a_jk = (Phi^(2) theta^(2)_j)_k) or "pooled"
  (adds a_jk / S_j, w's own prior shape);
* ``global_statistics``: "gibbs" (the globals learned by minibatch Gibbs beside the encoder)
  or "encoder" (the paper's Algorithm 1: the encoder's draws feed the TLASGR step).

Each path's record holds the scale the classifier sees (quartiles of the training documents'
sum_k theta^(1)_jk / L_j: Gibbs sweeps give about 575 per token at the default pseudo-count,
the old encoder 420), and each cell the encoder's held-out bound: the negative ELBO per token
of the test documents (one draw of q per document, seeded; every variant's bound taken with
the conditional rates, so that the numbers compare) and its likelihood part.

The variants are trainer options, not estimator parameters: :class:`VariantMode` is the
hybrid mode with the variant's options added to its fit (``CPGBN(inference=VariantMode...)``,
the modes' documented seam).

    python -m studies.encoder_elbo.encoder_elbo --datasets trec --variants all --seeds 0,1,2
    python -m studies.encoder_elbo.encoder_elbo --datasets imdb --variants conditional-pooled-gibbs \
        --epochs 1 --paths encoder
    python -m studies.encoder_elbo.encoder_elbo --report
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from cpgbn.modes.hybrid_mode import HybridMode

from studies.common.paths import RESULTS
from studies.common.reports import mean_std, save_record
from studies.hybrid_features.hybrid_features import FIT
from studies.hybrid_features.hybrid_features import features as path_features
from studies.hybrid_features.hybrid_features import run_cell as hybrid_features_cell

OUT = RESULTS / "encoder_elbo"
PATHS = ("encoder", "refine-2")
#: name -> trainer options (module docstring); the first is the library's earlier default.
VARIANTS = {
    "one-paper-gibbs": dict(prior_rates="one", w_shape_above="paper", global_statistics="gibbs"),
    "conditional-paper-gibbs": dict(prior_rates="conditional", w_shape_above="paper",
                                    global_statistics="gibbs"),
    "one-pooled-gibbs": dict(prior_rates="one", w_shape_above="pooled",
                             global_statistics="gibbs"),
    "conditional-pooled-gibbs": dict(prior_rates="conditional", w_shape_above="pooled",
                                     global_statistics="gibbs"),
    "conditional-paper-encoder": dict(prior_rates="conditional", w_shape_above="paper",
                                      global_statistics="encoder"),
    "conditional-pooled-encoder": dict(prior_rates="conditional", w_shape_above="pooled",
                                       global_statistics="encoder"),
}
#: the draw of the held-out bound, and how many test documents it takes (the first ones: the
#: encoder's draw of all of IMDB's 25k test reviews at once would hold some 5 GB per tensor)
HELDOUT_SEED = 12345
HELDOUT_DOCS = 2000


def variant_mode(options: dict) -> type:
    """The hybrid mode whose fit passes ``options`` to the trainer (``w_shape_above`` as an
    encoder option)."""
    options = dict(options)
    encoder = {"w_shape_above": options.pop("w_shape_above")}

    class VariantMode(HybridMode):
        def learn(self, training, source, common):
            return super().learn(training, source,
                                 {**common, **options, "encoder_options": encoder})

    return VariantMode


def feature_scale(f_train: np.ndarray) -> dict:
    """Quartiles of the documents' feature sums (sum_k theta^(1)_jk / L_j)."""
    sums = f_train.sum(axis=1)
    q1, q2, q3 = np.percentile(sums, [25, 50, 75])
    return {"sum_q1": float(q1), "sum_median": float(q2), "sum_q3": float(q3)}


def heldout_bound(model, texts) -> dict:
    """The encoder's negative ELBO per token on ``texts`` (module docstring) and its parts."""
    import torch

    from cpgbn.backends.torch.elbo import conditional_rates, elbo_terms
    from cpgbn.backends.torch.encoder_backend import build_encoder
    from cpgbn.backends.torch.packed import pack_tokens

    corpus = model.encode(list(texts)[:HELDOUT_DOCS])
    g = model.globals_
    batch = pack_tokens(corpus.tokens, corpus.offsets, g.D.shape[1],
                        token_count=model.token_count,
                        padding=model.padding)
    encoder = build_encoder(model.encoder_config_, model.encoder_weights_)
    generator = torch.Generator().manual_seed(HELDOUT_SEED)
    with torch.no_grad():
        sample = encoder.sample(batch, g.phi, generator=generator)
        rates = conditional_rates(sample, g.r, model.e0, model.f0)
        terms = elbo_terms(batch, sample, g.D, g.phi, g.r, rates)
    tokens = max(int(np.sum(np.diff(corpus.offsets))), 1)
    return {"negative_elbo_per_token": float(terms.negative_elbo.sum()) / tokens,
            "log_likelihood_per_token": float(terms.log_likelihood.sum()) / tokens,
            "kl_per_token": [float(k.sum()) / tokens for k in terms.kl],
            "c2_median": float(rates[0].median())}


def run_cell(dataset: str, variant: str, seed: int, data_dir=None, *, epochs: int | None = None,
             paths=PATHS) -> dict:
    """One fit of ``variant`` (``epochs``: other than the study's 5) and its feature
    ``paths`` (module docstring)."""
    from cpgbn.datasets import load_dataset

    fit = dict(FIT, inference=variant_mode(VARIANTS[variant]))
    if epochs is not None:
        fit["n_epochs"] = int(epochs)
    holder = {}

    def features(model, path, texts):   # the fitted model, kept for the held-out bound
        holder["model"] = model
        return path_features(model, path, texts)

    record = hybrid_features_cell(dataset, seed, data_dir, paths=paths,
                                  path_features=features, fit=fit, describe=feature_scale)
    x_test, _ = load_dataset(dataset, "test", data_dir=data_dir)
    record["heldout"] = heldout_bound(holder["model"], x_test)
    record["variant"] = variant
    record["options"] = VARIANTS[variant]
    record["fit"]["inference"] = "hybrid"
    return record


def report(records: list[dict]) -> str:
    datasets = sorted({r["dataset"] for r in records})
    lines = ["# The encoder's ELBO: prior rates, q(w)'s shape, statistics path (issue 35)", "",
             "Made by `studies/encoder_elbo/encoder_elbo.py` (module docstring). One hybrid fit "
             "per (dataset, variant, seed): 200-100-50, 5 epochs, learning rate 3e-3; authors' "
             "protocol (fixed split, RBF SVC on theta^(1)/L). Accuracy %, mean +- std over "
             "seeds (n seeds); scale: median over documents of sum_k theta^(1)_jk / L_j, "
             "median over seeds; held-out: the encoder's negative ELBO per test token (one "
             "draw, conditional rates), mean over seeds.", ""]
    for d in datasets:
        lines += [f"## {d.upper()}", "",
                  "| variant | encoder % | refine-2 % | encoder scale | refine-2 scale "
                  "| held-out -ELBO / token | held-out ln p / token | n |",
                  "|---|---|---|---|---|---|---|---|"]
        for variant in VARIANTS:
            cells = [r for r in records if r["dataset"] == d and r["variant"] == variant]
            if not cells:
                continue
            rows = {p: [c["paths"][p] for c in cells if p in c["paths"]] for p in PATHS}
            acc = {p: mean_std([100 * row["accuracy"] for row in rows[p]]) if rows[p] else "-"
                   for p in PATHS}
            scale = {p: f"{np.median([row['sum_median'] for row in rows[p]]):.0f}"
                     if rows[p] else "-" for p in PATHS}
            label = variant
            epochs = sorted({c["fit"]["n_epochs"] for c in cells})
            if epochs != [FIT["n_epochs"]]:
                label = f"{variant} ({', '.join(map(str, epochs))} epochs)"
            bound = np.mean([c["heldout"]["negative_elbo_per_token"] for c in cells])
            loglik = np.mean([c["heldout"]["log_likelihood_per_token"] for c in cells])
            lines.append(f"| {label} | {acc['encoder']} | {acc['refine-2']} | "
                         f"{scale['encoder']} | {scale['refine-2']} | {bound:.1f} | "
                         f"{loglik:.1f} | {len(cells)} |")
        lines.append("")
    lines += ["Records (command, commit, machine, seed, seconds) in `cells/`.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="trec")
    parser.add_argument("--variants", default="all",
                        help="comma-separated names of VARIANTS, or 'all'")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--epochs", type=int, default=None,
                        help="training epochs (default: the study's 5); cells named --<E>ep")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report", action="store_true", help="only rewrite the table")
    args = parser.parse_args(argv)
    cells = args.out / "cells"
    variants = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    if not args.report:
        for dataset in args.datasets.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                for variant in variants:
                    suffix = "" if args.epochs is None else f"--{args.epochs}ep"
                    path = cells / f"{dataset}--{variant}--seed{seed}{suffix}.json"
                    if not path.exists():
                        path.parent.mkdir(parents=True, exist_ok=True)
                        save_record(path, run_cell(dataset, variant, seed, args.data_dir,
                                                   epochs=args.epochs,
                                                   paths=tuple(args.paths.split(","))))
    records = [json.loads(p.read_text()) for p in sorted(cells.glob("*.json"))]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "encoder_elbo.md").write_text(report(records))


if __name__ == "__main__":
    main()
