"""Where the classifier's gradient goes: per training step, the encoder gradient of L_g (the
negative ELBO) and of xi L_c (the cross-entropy) apart, on the same draw, as the sCPGBN fit
takes them (loss per unit of a document, clipped at 10 before Adam).

On the split of :mod:`studies.classifier_training.grid` (SUBJ, 7,200 documents given to the
fit; one layer of 200 kernels, seed 0, one thread), for a setting of ``classifier_input`` and
``xi`` (per unit, as ``CPGBNClassifier``'s), the first ``--steps`` steps of the fit: before
each step, the two gradients of the step's loss (``gradient(..., elbo=False)`` for xi L_c; the
same call with xi = 0 for L_g; the same seed, so the same draw), then the step itself.  Records
per step the norms of both, their ratio, their cosine over the parameters both reach (the
first layer's filters C_1, b_1), and the total norm the clip sees, in
results/classifier_training/gradients/NAME.json; ``--report`` prints the medians.

    python -m studies.classifier_training.gradients --input theta --xi 100 --steps 150
    python -m studies.classifier_training.gradients --input hidden --xi 1e5 --steps 150
"""
import argparse
import json

import numpy as np
from threadpoolctl import threadpool_limits

from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically

from studies.common.paths import RESULTS
from studies.common.reports import command_line
from studies.scpgbn_levers.levers import validation_split

OUT = RESULTS / "classifier_training" / "gradients"
SHARED = ("conv1.weight", "bias1")


def _flat(encoder, names=None):
    parts = [p.grad.detach().double().reshape(-1) if p.grad is not None
             else p.detach().new_zeros(p.numel(), dtype=p.dtype).double()
             for n, p in encoder.named_parameters() if names is None or n in names]
    import torch
    return torch.cat(parts)


def run(classifier_input: str, xi: float, steps: int, data_dir=None) -> dict:
    import torch

    from cpgbn.classifier import CPGBNClassifier
    from cpgbn.inference.batches import ConvDataBlocks, Minibatches
    from cpgbn.inference.hybrid import HybridTrainer, Supervision
    from cpgbn.inference.streams import ENCODER_DRAW, derived_seed
    from cpgbn.modes.runtime import torch_threads

    (fit_x, fit_y), _ = validation_split(data_dir)
    # the classifier's own encoding of the texts and its settings (one epoch is not run)
    model = CPGBNClassifier(layers=(200,), xi=xi, classifier_input=classifier_input,
                            random_state=0, n_threads=1, validation_fraction=0.0)
    corpus = model._corpus(list(fit_x), None, model.vocab_size)
    data = model._data(corpus, model.filter_width)
    hyper = model._validated()["hyper"]
    units = model._observation().scale * corpus.n_tokens / data.n_docs
    classes = sorted(set(fit_y))
    trainer = HybridTrainer((200,), len(corpus.vocabulary), model.filter_width, hyper,
                            n_docs_total=data.n_docs, seed=0,
                            supervision=Supervision(classes, xi=xi * units,
                                                    loss_scale=1.0 / units),
                            encoder_options=dict(classifier_input=classifier_input))
    backend = trainer.encoder_backend
    batches = Minibatches(ConvDataBlocks(data, max(data.n_docs, 1),
                                         labels=np.asarray(fit_y, dtype=object)), 100, 0)
    rows = []
    with torch_threads(1):
        for i in range(1, steps + 1):
            record = batches.next()
            codes = trainer.supervision.labels.codes(record.labels, record.data.n_docs)
            groups = [np.arange(record.data.n_docs)]
            seed = derived_seed(0, ENCODER_DRAW, i)
            backend.gradient(record.data, groups, seed, trainer.globals, trainer.rate_prior,
                             (codes, 0.0), loss_scale=1.0 / units)
            g_elbo, g_elbo_shared = _flat(trainer.encoder), _flat(trainer.encoder, SHARED)
            backend.gradient(record.data, groups, seed, trainer.globals, trainer.rate_prior,
                             (codes, xi * units), elbo=False, loss_scale=1.0 / units)
            g_ce, g_ce_shared = _flat(trainer.encoder), _flat(trainer.encoder, SHARED)
            cosine = float(torch.dot(g_elbo_shared, g_ce_shared)
                           / (g_elbo_shared.norm() * g_ce_shared.norm() + 1e-300))
            trainer.step(i, record)
            rows.append(dict(elbo=float(g_elbo.norm()), cross_entropy=float(g_ce.norm()),
                             cosine_filters=cosine, total=trainer.gradient_norms[-1]))
    return dict(classifier_input=classifier_input, xi=xi, units_per_document=units,
                steps=steps, rows=rows, command=command_line(), **provenance())


def summary(record: dict) -> str:
    rows = record["rows"]
    elbo = np.array([r["elbo"] for r in rows])
    ce = np.array([r["cross_entropy"] for r in rows])
    cos = np.array([r["cosine_filters"] for r in rows])
    total = np.array([r["total"] for r in rows])
    ratio = elbo / np.maximum(ce, 1e-300)
    return (f"input {record['classifier_input']}, xi {record['xi']:g}/unit: total norm median "
            f"{np.median(total):.3g} (p10 {np.percentile(total, 10):.3g}, p90 "
            f"{np.percentile(total, 90):.3g}), clipped {100 * np.mean(total > 10):.0f}%; "
            f"|grad L_g| / |grad xi L_c| median {np.median(ratio):.3g} (p90 "
            f"{np.percentile(ratio, 90):.3g}), L_g larger on {100 * np.mean(ratio > 1):.0f}% "
            f"of steps; cosine on the filters median {np.median(cos):+.3f} (|cos| p90 "
            f"{np.percentile(np.abs(cos), 90):.3f})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", default="hidden+theta")
    p.add_argument("--xi", type=float, default=100.0)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--report", action="store_true")
    args = p.parse_args(argv)
    if not args.report:
        with threadpool_limits(limits=1):
            record = run(args.input, args.xi, args.steps, args.data_dir)
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / f"{args.input}-xi-{args.xi:g}.json"
        write_file_atomically(path, lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))
    for path in sorted(OUT.glob("*.json")):
        print(summary(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
