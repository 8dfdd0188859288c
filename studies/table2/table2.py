"""Reproduce the paper's Table 2 (unsupervised features + SVM) with CPGBN and the baselines.

Every (protocol, dataset, model, layers, seed) is one cell, stored in results/table2/table2.json as
soon as it finishes; a killed run continues where it stopped.  results/table2/table2.md shows each
configuration as mean +- std over its seeds beside the paper's figure.

    python -m studies.table2.table2                      # everything, in order
    python -m studies.table2.table2 --datasets trec      # a subset
    python -m studies.table2.table2 --report             # only rewrite table2.md
    python -m studies.table2.table2 --device cuda --out /tmp/t2.json --models cpgbn
                                     # run cells with the PyTorch sampler elsewhere, merge later
    python -m studies.table2.table2 --merge /tmp/t2.json # add cells run elsewhere (new keys, and
                                     # cells that replace results of the old vocabulary rule)
    python -m studies.table2.table2 --features inferred  # training features inferred with the
                                     # globals fixed, like the test features (see evaluate())
    python -m studies.table2.table2 --protocols paper --paper-datasets mr --datasets mr \
        --models cpgbn --layers 200-100-50   # MR by the paper's 10-fold CV (10 fits per seed)
"""
import argparse
import time
from pathlib import Path

import numpy as np

from cpgbn.evaluate import evaluate
from cpgbn.model import DEFAULT_TOKEN_COUNT

from studies.common.paths import ROOT
from studies.common.reports import command_line, load_cells, mean_std, save_record
from studies.common.vocab_fix import MARK, add_note, stale_record

OUT = ROOT / "results" / "table2" / "table2.json"
PAPER = {  # Table 2 of the paper: accuracy % (MR, TREC, SUBJ)
    ("cpgbn", "200"): (61.5, 68.4, 77.4), ("cpgbn", "200-100"): (62.4, 73.4, 81.2),
    ("cpgbn", "200-100-50"): (63.6, 74.4, 81.5), ("pgbn", "200"): (56.3, 66.7, 76.2),
    ("pgbn", "200-100-50"): (57.0, 67.9, 78.3), ("lda", "200"): (54.4, 45.5, 68.2),
}
DATASETS = ("trec", "mr", "subj")
LOCAL_MACHINE = "x86_64 2 cpus"  # the development machine; other machines are marked
# (model, layers, token_count): None = CPGBN's --token-count for cpgbn, plain counts (1) for the
# baselines.  PGBN is also run at CPGBN's pseudo-count ("tempered"), so that the comparison of
# word order against bag of words is made at the same likelihood tempering.
CONFIGS = [("cpgbn", (200,), None), ("cpgbn", (200, 100), None), ("cpgbn", (200, 100, 50), None),
           ("pgbn", (200,), 1), ("pgbn", (200, 100, 50), 1), ("lda", (200,), 1),
           ("pgbn", (200,), "same"), ("pgbn", (200, 100, 50), "same")]


def plan(datasets, seeds, protocols, paper_datasets=("trec",)):
    for protocol in protocols:
        for dataset in datasets:
            if protocol == "paper" and dataset not in paper_datasets:
                continue
            for model, layers, tc in CONFIGS:
                if protocol == "paper" and model != "cpgbn":
                    continue
                for seed in seeds:
                    yield protocol, dataset, model, layers, tc, seed


def key_of(protocol, dataset, model, layers, seed, token_count, vocab=None, features="inductive"):
    key = f"{protocol}|{dataset}|{model}|{'-'.join(map(str, layers))}|tc={token_count}|seed={seed}"
    key = key if vocab is None else key + f"|V={vocab}"
    return key if features == "inductive" else key + f"|features={features}"


def vocab_label(cell):
    """"paper" for the paper's V_pre (TREC 8000, MR and SUBJ 20000), else the number of words."""
    from cpgbn.datasets import dataset_info
    words = cell["vocab_size"] - 1
    return "paper" if words == dataset_info(cell["dataset"])["vocab_size"] else str(words)


def report_text(record) -> str:
    groups = {}
    for cell in record["cells"].values():
        layers = "-".join(map(str, cell["layers"]))
        key = (cell["protocol"], cell.get("features", "inductive"), cell["model"], layers,
               str(cell["token_count"]), vocab_label(cell))
        groups.setdefault(key, {}).setdefault(cell["dataset"], []).append(cell)
    lines = ["# Table 2: unsupervised features + SVM (accuracy %)", "",
             "Made by `studies/table2/table2.py` (records with command, commit, iterations and wall time "
             "in `table2.json`). Each cell: mean +- std over seeds (n = seeds); paper figure in "
             "brackets. Protocols: see docs/results.md. V: words in the vocabulary (\"paper\": the paper's "
             "V_pre, TREC 8000, MR and SUBJ 20000; the study behind V = 8000 is "
             "`results/prior_study/prior_study.md`). s/sweep: median over the cells' training sweeps, with "
             "the sampler that ran them (numba on 2 CPU cores; * the PyTorch sampler on an H100 GPU; "
             "+ the GPU machine's 16 CPU cores). Features: *inductive*, the training documents' "
             "features are the training chain's averages and the test documents' are inferred "
             "with the learned globals fixed (the authors' code); *inferred*, the training "
             "documents' features are inferred again with the globals fixed, like the test "
             "documents' (`evaluate(features=...)`).", "",
             "| protocol | features | model | layers | token_count | V | MR | TREC | SUBJ "
             "| s/sweep (MR, TREC, SUBJ) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    order = {"cpgbn": 0, "pgbn": 1, "lda": 2}
    for (protocol, features, model, layers, tc, vocab) in sorted(
            groups, key=lambda k: (k[0], k[1], k[5] != "paper", k[5], order.get(k[2], 9),
                                   k[4] != "1" and k[2] != "cpgbn", k[3])):
        cols, times = [], []
        paper = PAPER.get((model, layers)) if (model == "cpgbn" or tc == "1") else None
        for i, dataset in enumerate(("mr", "trec", "subj")):
            cells = groups[(protocol, features, model, layers, tc, vocab)].get(dataset, [])
            ref = f" [{paper[i]}]" if paper else ""
            if not cells:
                cols.append("-" + ref)
                times.append("-")
                continue
            acc = np.array([100 * c["accuracy_mean"] for c in cells])
            mark = MARK if any(stale_record(c) for c in cells) else ""
            cols.append(f"{mean_std(acc)} (n={len(acc)}){mark}{ref}")
            gpu = "*" if any(str(c.get("device") or "").startswith("cuda") for c in cells) else (
                "+" if any(not c.get("machine", "").startswith(LOCAL_MACHINE) for c in cells) else "")
            times.append(f"{np.mean([c['runs'][0]['median_sweep_seconds'] for c in cells]):.2f}{gpu}")
        lines.append(f"| {protocol} | {features} | {model.upper()} | {layers} | {tc} | {vocab} | "
                     + " | ".join(cols)
                     + f" | {', '.join(times)} |")
    add_note(lines)
    return "\n".join(lines) + "\n"


def report(record):
    """Write :func:`report_text` beside the record file (not for a side file: its cells are
    merged into results/table2/table2.json later)."""
    if OUT == ROOT / "results" / "table2" / "table2.json":
        OUT.with_suffix(".md").write_text(report_text(record))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--protocols", default="authors,paper")
    ap.add_argument("--token-count", default=str(DEFAULT_TOKEN_COUNT))
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--models", default="cpgbn,pgbn,lda", help="which of CONFIGS' models to run")
    ap.add_argument("--layers", default=None,
                    help="only these of CONFIGS' layer sizes, e.g. 200,200-100-50 (default: all)")
    ap.add_argument("--paper-datasets", default="trec",
                    help="datasets run under the paper's protocol (MR and SUBJ by 10-fold CV cost "
                         "ten fits per seed, so only TREC by default)")
    ap.add_argument("--vocab", type=int, default=None,
                    help="words in the vocabulary (default: the paper's V_pre per dataset)")
    ap.add_argument("--device", default=None,
                    help="torch device for CPGBN/PGBN (default: the numba sampler)")
    ap.add_argument("--features", default="inductive", choices=["inductive", "inferred"],
                    help="where the training features come from (evaluate's features)")
    ap.add_argument("--out", default=None, help="cells file (default results/table2/table2.json)")
    ap.add_argument("--merge", default=None, help="add the cells of another cells file and stop")
    args = ap.parse_args()
    global OUT
    if args.out:
        OUT = Path(args.out)
    record = load_cells(OUT)
    if args.merge:
        other = load_cells(Path(args.merge))["cells"]
        # new keys, and cells of the old vocabulary rule run again since
        new = {k: v for k, v in other.items() if k not in record["cells"]
               or (stale_record(record["cells"][k]) and not stale_record(v))}
        record["cells"].update(new)
        save_record(OUT, record)
        print(f"merged {len(new)} cells from {args.merge} (new keys or old-rule cells run again)")
        args.report = True
    if not args.report:
        tc = args.token_count if args.token_count == "bernoulli-poisson" else int(args.token_count)
        for protocol, dataset, model, layers, config_tc, seed in plan(
                args.datasets.split(","), [int(s) for s in args.seeds.split(",")],
                args.protocols.split(","), args.paper_datasets.split(",")):
            if model not in args.models.split(","):
                continue
            if args.layers and "-".join(map(str, layers)) not in args.layers.split(","):
                continue
            model_tc = tc if config_tc in (None, "same") else config_tc
            key = key_of(protocol, dataset, model, layers, seed, model_tc, args.vocab, args.features)
            if key in record["cells"] and not stale_record(record["cells"][key]):
                continue  # done (a result of the old vocabulary rule is run again)
            start = time.perf_counter()
            cell = evaluate(dataset, layers=layers, protocol=protocol, seeds=[seed], model=model,
                            token_count=model_tc, device=args.device, features=args.features,
                            vocab_size=None if args.vocab is None else args.vocab + 1)
            cell["wall_seconds"] = round(time.perf_counter() - start, 1)
            cell["command"] = command_line()
            record = load_cells(OUT)  # another run may have added cells meanwhile
            record["cells"][key] = cell
            save_record(OUT, record)
            report(record)
            print(f"{key}: {100 * cell['accuracy_mean']:.1f}% ({cell['wall_seconds']}s)", flush=True)
    report(record)


if __name__ == "__main__":
    main()
