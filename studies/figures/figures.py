"""The paper's figures, from committed runs: Fig. 3, Fig. 4 and the filter-width study.

* ``loglik``: training log-likelihood per token against wall time on TREC for K = [32],
  [32, 16], [32, 16, 8] (paper Fig. 3) -> results/figures/fig3_loglik_vs_time.png
* ``depth``: TREC accuracy (authors' protocol) against depth for first-layer widths 32, 64, 128
  with halving widths above (paper Fig. 4) -> results/figures/fig4_accuracy_vs_depth.png
* ``width``: one-layer CPGBN on SUBJ (authors' split, the paper's V = 20000 words) for filter
  widths F = 1..7 (Appendix B) -> results/figures/filter_width_subj.png

Each part stores its numbers, with provenance, in results/figures/figures.json (resumable: finished
(configuration, seed) runs are kept; runs of the old vocabulary rule are run again) and redraws
its PNG from them: mean +- std over the seeds given.  Timing figures need a quiet machine.

    python -m studies.figures.figures loglik depth width [--seed 0] [--seeds 0,1,2]

``--seed`` is the loglik run's seed; ``--seeds`` those of depth and width.
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np

from cpgbn import CPGBN
from cpgbn.evaluate import evaluate
from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically
from cpgbn.datasets import load_dataset

from studies.common.paths import ROOT
from studies.common.reports import command_line
from studies.common.vocab_fix import stale_record

OUT = ROOT / "results" / "figures" / "figures.json"
PAPER_WIDTH = {1: 74.9, 2: 77.3, 3: 77.5, 4: 77.8, 5: 77.6, 6: 78.0, 7: 77.5}


def load():
    return json.loads(OUT.read_text()) if OUT.exists() else {}


def save(record):
    write_file_atomically(OUT, lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))


def plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot
    return pyplot


def loglik(record, seed):
    part = _current_layout(record, "loglik")
    texts, _ = load_dataset("trec", "train")
    for layers in ((32,), (32, 16), (32, 16, 8)):
        key = "-".join(map(str, layers))
        if not _pending(part, key):
            continue
        model = CPGBN(layers=layers, vocab_size=8001, n_iter=300, burn_in=200, random_state=seed)
        model.fit(texts)
        part[key] = dict(loglik_per_token=(model.loglik_trace_ / model.n_train_tokens_).tolist(),
                         seconds=np.cumsum(model.sweep_seconds_).tolist(), seed=seed,
                         token_count=model.token_count, vocab_size=model.vocab_size,
                         dataset="trec", protocol="authors", command=command_line(),
                         **provenance())
        save(record)
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(9, 3.5))
    finals = []
    for key, run in part.items():
        for ax in axes:
            ax.plot(run["seconds"], run["loglik_per_token"], label=f"K = [{key.replace('-', ', ')}]")
        finals.append(np.mean(run["loglik_per_token"][-50:]))
    # right panel: after the first 10 sweeps, where the depths separate
    low = min(min(run["loglik_per_token"][10:]) for run in part.values())
    axes[1].set_ylim(low, max(finals) + 0.25 * (max(finals) - low))
    axes[1].set_xlim(left=min(run["seconds"][10] for run in part.values()))
    axes[1].set_title("after 10 sweeps")
    for ax in axes:
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("training log-likelihood per token")
    axes[0].set_title(f"CPGBN on TREC (token_count={run['token_count']}, seed {run['seed']})")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(ROOT / "results" / "figures" / "fig3_loglik_vs_time.png", dpi=120)


def _current_layout(record, name):
    """The part's records, without those of the layout before the vocabulary fix (one seed per
    configuration, no ``vocab_size``), which are all of the old vocabulary rule."""
    part = record.setdefault(name, {})
    for key in [k for k, run in part.items() if "vocab_size" not in run]:
        del part[key]
    return part


def _pending(part, key):
    """Whether a (configuration, seed) run is still to do: missing, or of the old vocabulary rule."""
    return key not in part or stale_record(part[key])


def _mean_std(runs):
    accuracies = 100 * np.array([r["accuracy"] for r in runs])
    return accuracies.mean(), accuracies.std(ddof=1) if len(runs) > 1 else 0.0


def depth(record, seeds):
    part = _current_layout(record, "depth")
    for width in (32, 64, 128):
        for depth_ in (1, 2, 3):
            layers = tuple(width // 2 ** t for t in range(depth_))
            for seed in seeds:
                key = "-".join(map(str, layers)) + f"|{seed}"
                if not _pending(part, key):
                    continue
                res = evaluate("trec", layers=layers, protocol="authors", seeds=[seed])
                part[key] = dict(width=width, depth=depth_, accuracy=res["accuracy_mean"],
                                 token_count=res["token_count"], vocab_size=res["vocab_size"],
                                 dataset="trec", protocol="authors",
                                 command=command_line(), commit=res["commit"],
                                 seed=seed)
                save(record)
    p = plt()
    fig, ax = p.subplots(figsize=(5, 3.5))
    runs = [r for r in part.values() if r["seed"] in seeds]
    for width in (32, 64, 128):
        stats = [_mean_std([r for r in runs if r["width"] == width and r["depth"] == d])
                 for d in (1, 2, 3)]
        ax.errorbar([1, 2, 3], [m for m, _ in stats], yerr=[e for _, e in stats], fmt="o-",
                    capsize=3, label=f"K_1 = {width}")
    ax.set_xlabel("number of layers T")
    ax.set_ylabel("TREC accuracy (%)")
    ax.set_xticks([1, 2, 3])
    ax.set_title(f"Accuracy vs depth (authors' protocol, token_count {runs[0]['token_count']},\n"
                 f"mean +- std over {len(seeds)} seeds)", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(ROOT / "results" / "figures" / "fig4_accuracy_vs_depth.png", dpi=120)


def width(record, seeds, widths=range(1, 8), vocab=20000, device=None):
    """SUBJ at the paper's V = 20000 words (before the vocabulary fix every SUBJ model sat near
    68% there, and this study used V = 8000; see results/vocab_ties/vocab_ties.md)."""
    part = _current_layout(record, "filter_width")
    for seed in seeds:  # one seed's widths complete first
        for F in widths:
            key = f"{F}|{seed}"
            if not _pending(part, key):
                continue
            start = time.perf_counter()
            res = evaluate("subj", layers=(200,), protocol="authors", seeds=[seed],
                           filter_width=F, vocab_size=vocab + 1, device=device)
            part[key] = dict(filter_width=F, accuracy=res["accuracy_mean"],
                             seconds=time.perf_counter() - start, token_count=res["token_count"],
                             command=command_line(), commit=res["commit"],
                             seed=seed, vocab_size=vocab + 1, dataset="subj",
                             protocol="authors", device=res.get("device"),
                             machine=res["machine"])
            save(record)
    # plot the seeds that have every width (a partial run: one process of several, or stopped)
    seeds = [s for s in seeds if all(f"{F}|{s}" in part for F in range(1, 8))]
    if not seeds:
        return
    runs = [r for r in part.values() if r["seed"] in seeds]
    p = plt()
    fig, ax = p.subplots(figsize=(5, 3.5))
    stats = [_mean_std([r for r in runs if r["filter_width"] == F]) for F in range(1, 8)]
    ax.errorbar(range(1, 8), [m for m, _ in stats], yerr=[e for _, e in stats], fmt="o-",
                capsize=3, label=f"cpgbn (mean +- std, seeds {', '.join(map(str, seeds))})")
    ax.plot(list(PAPER_WIDTH), list(PAPER_WIDTH.values()), "s--", label="paper (CPFA)")
    ax.set_xlabel("filter width F")
    ax.set_ylabel("SUBJ accuracy (%)")
    ax.set_title(f"One layer of 200 kernels on SUBJ, V = {vocab}, token_count "
                 f"{runs[0]['token_count']}", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(ROOT / "results" / "figures" / "filter_width_subj.png", dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parts", nargs="*", help="loglik, depth and/or width")
    ap.add_argument("--seed", type=int, default=0, help="loglik: the run's seed")
    ap.add_argument("--seeds", default="0", help="depth and width: the seeds to run and plot")
    ap.add_argument("--widths", default="1,2,3,4,5,6,7", help="width: the filter widths to run")
    ap.add_argument("--device", default=None, help="width: torch device (default numba)")
    ap.add_argument("--out", default=None, help="record file (default results/figures/figures.json)")
    ap.add_argument("--merge", action="append", default=[],
                    help="add the entries of another record file first (new keys only)")
    args = ap.parse_args()
    unknown = set(args.parts) - {"loglik", "depth", "width"}
    if unknown:
        ap.error(f"unknown parts {sorted(unknown)}: choose from loglik, depth, width")
    global OUT
    if args.out:
        OUT = Path(args.out)
    record = load()
    for path in args.merge:
        for name, entries in json.loads(Path(path).read_text()).items():
            mine = record.setdefault(name, {})
            for key, value in entries.items():
                mine.setdefault(key, value)
        save(record)
    seeds = [int(s) for s in args.seeds.split(",")]
    for part in args.parts:
        if part == "width":
            width(record, seeds, [int(f) for f in args.widths.split(",")], device=args.device)
        elif part == "depth":
            depth(record, seeds)
        else:
            loglik(record, args.seed)


if __name__ == "__main__":
    main()
