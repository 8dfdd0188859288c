"""How much do the upper layers shape the features?  The prior's share of theta^(1)'s shape.

theta^(1)_jk ~ Gam(A_jk + a_jk, 1 / (1 + c^(2)_j)) given the rest (notes, section 3, step 6), with
A_jk the document's latent count on kernel k and a_jk = (Phi^(2) theta^(2)_j)_k the shape that
the layers above give it (r_k for one layer).  With a pseudo-count c per token, A_j. = c L_j,
so the layers above can move theta^(1) - the paper's features - only as far as
a_j. / (a_j. + A_j.) allows.  This script fits the training split of the authors' protocol and
records that share per document after every collected sweep; ``results/prior_share/prior_share.md`` gives
its median and 90th percentile over documents (averaged over the collected sweeps).

    python -m studies.prior_share.prior_share --only "trec|200-100-50|800" --seeds 0
    python -m studies.prior_share.prior_share                                   # the default grid
"""
import argparse
import time

import numpy as np

from cpgbn.evaluate.provenance import provenance
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.state import Hyperparameters
from cpgbn.layers.cells import from_token_sequences
from cpgbn.text import Corpus
from cpgbn.datasets import load_dataset

from studies.common.paths import ROOT
from studies.common.reports import command_line, load_cells, save_record

OUT = ROOT / "results" / "prior_share" / "prior_share.json"
V = {"trec": 8001, "mr": 20001, "subj": 20001}  # the paper's V_pre plus the OOV row
GRID = [("trec", layers, tc) for layers in ("200", "200-100-50") for tc in (25, 200, 800)] + \
       [(dataset, "200-100-50", tc) for dataset in ("mr", "subj") for tc in (25, 200, 800)]


def prior_shares(state) -> np.ndarray:
    """a_j. / (a_j. + A_j.) for every document j at the current state."""
    if len(state.theta) > 1:
        prior = state.theta[1] @ state.globals.phi[0].T  # (N, K_1): a_jk = (Phi^(2) theta^(2)_j)_k
        prior_total = prior.sum(axis=1)
    else:
        prior_total = np.full(state.A.shape[0], state.globals.r.sum())
    data_total = state.A.sum(axis=1, dtype=np.float64)
    return prior_total / (prior_total + data_total)


def measure(dataset, layers, token_count, seed, data_dir, n_iter, burn_in):
    texts, _ = load_dataset(dataset, "train", data_dir=data_dir)
    # the estimator's chain, built from the public pieces it uses (CPGBN's defaults: F = 3,
    # eta 0.05, e0 = f0 = 0.1), so that every sweep's state can be read
    layers = tuple(int(k) for k in layers.split("-"))
    corpus = Corpus.from_texts(texts, vocab_size=V[dataset])
    data = from_token_sequences(corpus.tokens, corpus.offsets, 3, token_count)
    hyper = Hyperparameters(eta=(0.05,) * len(layers))
    sampler = GibbsSampler(data, hyper, seed, learn_globals=True)
    state = sampler.initial_state(layers, len(corpus.vocabulary))
    shares = []

    def record(st, _collector):
        if st.sweep > burn_in:
            shares.append(prior_shares(st))
    sampler.run(state, n_iter, burn_in, on_sweep=record)
    shares = np.array(shares)  # (collected sweeps, N)
    return {"median": float(np.median(shares, axis=1).mean()),
            "p90": float(np.percentile(shares, 90, axis=1).mean()),
            "mean": float(shares.mean()), "n_docs": int(shares.shape[1]),
            "n_collected": int(shares.shape[0])}


def report_text(record) -> str:
    lines = ["# The prior's share of the features' shape", "",
             "Made by `studies/prior_share/prior_share.py`; records (command, commit, seconds) in "
             "`prior_share.json`. Training split of the authors' protocol, the paper's V, "
             "200 sweeps (150 burn-in). For each document, a_j. / (a_j. + A_j.): the share of "
             "theta^(1)_j's gamma shape that comes from the layers above (a_jk = "
             "(Phi^(2) theta^(2)_j)_k, or r_k for one layer) rather than from the document's own "
             "latent counts A_jk (token_count per token). Median and 90th percentile over "
             "documents, averaged over the 50 collected sweeps; mean over seeds.", "",
             "| dataset | layers | token_count | median share % | 90th percentile % | seeds |",
             "|---|---|---|---|---|---|"]
    groups = {}
    for cell in record["cells"].values():
        groups.setdefault(tuple(cell["config"]), []).append(cell)
    for config in sorted(groups, key=lambda c: (c[0], c[1], c[2])):
        cells = groups[config]
        median = np.mean([c["median"] for c in cells]) * 100
        p90 = np.mean([c["p90"] for c in cells]) * 100
        lines.append(f"| {config[0].upper()} | {config[1]} | {config[2]} | {median:.2f} | "
                     f"{p90:.2f} | {','.join(str(c['seed']) for c in cells)} |")
    return "\n".join(lines) + "\n"


def report(record):
    """Write :func:`report_text` beside the record file."""
    OUT.with_suffix(".md").write_text(report_text(record))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="one configuration 'dataset|layers|token_count'")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    record = load_cells(OUT)
    grid = GRID
    if args.only:
        dataset, layers, tc = args.only.split("|")
        grid = [(dataset, layers, int(tc))]
    for dataset, layers, tc in grid:
        for seed in (int(s) for s in args.seeds.split(",")):
            key = f"{dataset}|{layers}|{tc}|seed={seed}"
            if key in record["cells"]:
                continue
            start = time.perf_counter()
            cell = measure(dataset, layers, tc, seed, args.data_dir, 200, 150)
            cell.update(config=[dataset, layers, tc], seed=seed,
                        wall_seconds=round(time.perf_counter() - start, 1),
                        command=command_line(), **provenance())
            record = load_cells(OUT)  # other processes may have added cells meanwhile
            record["cells"][key] = cell
            save_record(OUT, record)
            print(f"{key}: median {100 * cell['median']:.2f}%, p90 {100 * cell['p90']:.2f}% "
                  f"({cell['wall_seconds']}s)", flush=True)
    report(record)


if __name__ == "__main__":
    main()
