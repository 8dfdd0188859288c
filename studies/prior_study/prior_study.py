"""Vocabulary size, pseudo-count and Dirichlet prior against accuracy (Table 2 investigation).

The notes (section 2) report that on SUBJ the vocabulary size changed a three-layer model's
accuracy by 9 points (67.6% at V = 20000 against 76.9% at V = 3000, count 100): the kernels' prior
mass eta * V * F and the rare words that a large pseudo-count lets a kernel memorise both grow with
V.  This script evaluates CPGBN under the authors' protocol on a grid of (dataset, layers, V,
token_count, eta) and stores every (configuration, seed) as one resumable cell in
``results/prior_study/prior_study.json``; ``results/prior_study/prior_study.md`` gives mean +- std over seeds.

    python -m studies.prior_study.prior_study --grid subj                 # the SUBJ grid
    python -m studies.prior_study.prior_study --only "subj|200-100-50|3000|200|0.05" --seeds 0,1
    python -m studies.prior_study.prior_study --device cuda --out /tmp/p.json ...   # elsewhere, merge later
    python -m studies.prior_study.prior_study --merge /tmp/p.json
    python -m studies.prior_study.prior_study --only "mr|200-100-50|20000|200|0.05" --fixed-r  # r = 1/K_T
    python -m studies.prior_study.prior_study --only "mr|200-100-50|20000|200|0.05" --mean-globals
    python -m studies.prior_study.prior_study --only "mr|200-100-50|20000|25|0.05" --expected-counts
    python -m studies.prior_study.prior_study --only "mr|200-100-50|20000|200|0.05" --padding 2
    python -m studies.prior_study.prior_study --only "mr|200-100-50|20000|800|0.05" --last-globals
    python -m studies.prior_study.prior_study --only "trec|200-100-50|3000|25|0.05" --authors-code

``--mean-globals`` reproduces an approximation of the authors' notebooks (notes, section 3): D
and Phi set to their posterior means given the counts instead of drawn.  That is not a Gibbs
sampler; it is here only to test whether it explains the paper's accuracies, and it patches the
sampler's module functions for this process only (the numba sampler, not ``--device``).
``--expected-counts`` is the authors' other approximation, fractional expected counts in place
of the sampled split of each token (``expected_counts.py``); its estimator runs the numba
sampler on the study's backend, or with ``--device`` the PyTorch one (``cuda``; on a CPU the
PyTorch sampler is too slow for MR).  ``--redistribute`` adds the authors' w step to the
expected counts (theta^(1) drawn pooled and spread over the positions in proportion to the
expected counts, with their 1e-4 guard, which makes a vanished kernel stay vanished:
``expected_counts.RedistributedCPGBN``).
``--authors-code`` is every difference of the authors' accuracy notebooks at once: expected
counts, the redistributed w, r fixed, padding 1 and the last sample of the globals.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from cpgbn.evaluate import evaluate

from studies.common.paths import ROOT
from studies.common.reports import command_line, load_cells, mean_std, save_record
from studies.common.vocab_fix import MARK, add_note, stale_record

DEFAULT_OUT = ROOT / "results" / "prior_study" / "prior_study.json"
# (dataset, layers, V (words, without the OOV row), token_count, eta)
GRIDS = {
    "subj": [("subj", "200-100-50", v, tc, 0.05) for v in (3000, 8000, 20000) for tc in (50, 200)]
    + [("subj", "200-100-50", 20000, 200, 0.0075), ("subj", "200", 3000, 200, 0.05)],
    "mr": [("mr", "200-100-50", v, 200, 0.05) for v in (3000, 8000)]
    + [("mr", "200-100-50", 20000, 200, 0.0075), ("mr", "200", 3000, 200, 0.05)],
}


def use_posterior_mean_globals():
    """Replace the draws of D and Phi in this process by their posterior means (see above)."""
    from cpgbn.backends.numba import conv, gbn
    from cpgbn.backends.numba.conv import FLOOR
    from cpgbn.backends.numba.gbn import PHI_FLOOR
    from cpgbn.backends.numba.shared_shape import table_shape
    draw_kernels, draw_phi = conv.draw_kernels, gbn.draw_phi

    def mean_kernels(seed, stream, counts, eta_table, D, block_words):
        n = counts.sum(axis=0, dtype=np.int64)
        if not n.any():  # the random initial kernels: a uniform start would never break symmetry
            return draw_kernels(seed, stream, counts, eta_table, D, block_words)
        counts[...] = 0  # draw_kernels leaves the slabs at zero for the next sweep
        mean = n + table_shape(eta_table)
        mean /= mean.sum(axis=(0, 1), keepdims=True)
        D[...] = np.maximum(mean, FLOOR)

    def mean_phi(seed, stream, counts, eta, phi):
        if not counts.any():
            return draw_phi(seed, stream, counts, eta, phi)
        mean = np.maximum((counts + eta) / (counts + eta).sum(axis=0, keepdims=True), PHI_FLOOR)
        phi[...] = mean / mean.sum(axis=0, keepdims=True)

    conv.draw_kernels, gbn.draw_phi = mean_kernels, mean_phi


def use_last_sample_globals():
    """Keep the last sample of D, Phi and r as the fitted globals (what the authors' notebooks
    use for the test documents) instead of their posterior means over the collected sweeps."""
    import copy

    from cpgbn.inference.gibbs import GibbsSampler
    run = GibbsSampler.run

    def run_keeping_last(self, state, n_iter, burn_in, **kwargs):
        result = run(self, state, n_iter, burn_in, **kwargs)
        if result.globals_mean is not None:
            result.globals_mean = copy.deepcopy(state.globals)
        return result
    GibbsSampler.run = run_keeping_last


def key_of(dataset, layers, V, tc, eta, seed):
    return f"{dataset}|{layers}|{V}|{tc}|{eta}|seed={seed}"


def parse_config(text):
    dataset, layers, V, tc, eta = text.split("|")
    return dataset, layers, int(V), int(tc), float(eta)


def report_text(record) -> str:
    groups = {}
    for cell in record["cells"].values():
        c = cell["config"]
        groups.setdefault(tuple(c), []).append(cell)
    lines = ["# Vocabulary size, pseudo-count and kernel prior (authors' protocol)", "",
             "Made by `studies/prior_study/prior_study.py`; records (command, commit, device, seconds) in "
             "`prior_study.json`. V counts words without the out-of-vocabulary row; eta * V * F is "
             "a kernel's Dirichlet prior mass (F = 3).", "",
             "| dataset | layers | V | token_count | eta | eta*V*F | accuracy % | seeds | device |",
             "|---|---|---|---|---|---|---|---|---|"]
    for config in sorted(groups, key=str):
        dataset, layers, V, tc, eta = config[:5]
        if len(config) > 5 and config[5]:  # a run with other sweeps than the protocol's 200 / 150
            layers = f"{layers} ({config[5]} sweeps, {config[6]} burn-in)"
        if len(config) > 7 and config[7]:
            layers = f"{layers}, {config[7]}"
        cells = groups[config]
        acc = np.array([100 * c["accuracy_mean"] for c in cells])
        devices = sorted({str(c.get("device") or "numba") for c in cells})
        mark = MARK if any(stale_record(c) for c in cells) else ""
        lines.append(f"| {dataset.upper()} | {layers} | {V} | {tc} | {eta:g} | {eta * V * 3:g} | "
                     f"{mean_std(acc)}{mark} | {len(acc)} | {', '.join(devices)} |")
    add_note(lines)
    return "\n".join(lines) + "\n"


def report(record, path):
    """Write :func:`report_text` beside the record file ``path``."""
    path.with_suffix(".md").write_text(report_text(record))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default=None, help=f"one of {sorted(GRIDS)}")
    ap.add_argument("--only", default=None,
                    help="one configuration 'dataset|layers|V|token_count|eta'")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--device", default=None)
    ap.add_argument("--n-iter", type=int, default=None, help="sweeps (default: the protocol's 200)")
    ap.add_argument("--burn-in", type=int, default=None, help="burn-in (with --n-iter)")
    ap.add_argument("--fixed-r", action="store_true",
                    help="keep r at gamma0 / K_T (the authors' code) instead of sampling it")
    ap.add_argument("--mean-globals", action="store_true",
                    help="set D and Phi to posterior means (the authors' approximation; not a sampler)")
    ap.add_argument("--expected-counts", action="store_true",
                    help="fractional expected counts instead of the sampled split (the authors' "
                    "approximation; not a sampler): the numba sampler, or with --device the "
                    "PyTorch one")
    ap.add_argument("--last-globals", action="store_true",
                    help="test documents inferred with the last sample of D, Phi, r (the authors' "
                    "notebooks) instead of the posterior means")
    ap.add_argument("--redistribute", action="store_true",
                    help="with expected counts, the authors' w step: theta^(1) drawn pooled and "
                    "w = theta m / (A + 1e-4) (not a sampler; implies --expected-counts)")
    ap.add_argument("--authors-code", action="store_true",
                    help="all of the authors' notebook's differences at once: --expected-counts "
                    "--redistribute --fixed-r --last-globals --padding 1")
    ap.add_argument("--padding", type=int, default=0,
                    help="empty columns before and after every document (the authors' code pads)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--merge", default=None)
    args = ap.parse_args()
    if args.authors_code:
        args.redistribute = args.fixed_r = args.last_globals = True
        args.padding = args.padding or 1
    if args.redistribute:
        if args.device:
            ap.error("--redistribute is written for the numba sampler; leave out --device")
        args.expected_counts = True
    if args.expected_counts and args.mean_globals:
        ap.error("--expected-counts and --mean-globals both replace the kernel draw; give one")
    if args.mean_globals:
        if args.device:
            ap.error("--mean-globals patches the numba sampler; leave out --device")
        use_posterior_mean_globals()
    if args.last_globals:
        use_last_sample_globals()
    estimator = None
    if args.expected_counts:
        from studies.prior_study.expected_counts import ExpectedCountsCPGBN, RedistributedCPGBN
        estimator = RedistributedCPGBN if args.redistribute else ExpectedCountsCPGBN
    out = Path(args.out) if args.out else DEFAULT_OUT
    record = load_cells(out)
    if args.merge:
        other = load_cells(Path(args.merge))["cells"]
        new = {k: v for k, v in other.items() if k not in record["cells"]
               or (stale_record(record["cells"][k]) and not stale_record(v))}
        record["cells"].update(new)
        save_record(out, record)
        print(f"merged {len(new)} cells from {args.merge} (new keys or old-rule cells run again)")
    configs = []
    if args.grid:
        configs += GRIDS[args.grid]
    if args.only:
        configs.append(parse_config(args.only))
    for config in configs:
        dataset, layers, V, tc, eta = config
        for seed in (int(s) for s in args.seeds.split(",")):
            key = key_of(*config, seed)
            if args.n_iter:
                key += f"|iter={args.n_iter}/{args.burn_in}"
            if args.fixed_r:
                key += "|r=fixed"
            if args.mean_globals:
                key += "|globals=mean"
            if args.expected_counts:
                key += "|counts=expected"
            if args.redistribute:
                key += "|w=redistributed"
            if args.padding:
                key += f"|padding={args.padding}"
            if args.last_globals:
                key += "|globals=last"
            if key in record["cells"] and not stale_record(record["cells"][key]):
                continue  # done (a result of the old vocabulary rule is run again)
            model_params = ({"sample_r": False} if args.fixed_r else {}) | \
                ({"padding": args.padding} if args.padding else {})
            start = time.perf_counter()
            cell = evaluate(dataset, layers=tuple(int(k) for k in layers.split("-")),
                            protocol="authors", seeds=[seed], vocab_size=V + 1, token_count=tc,
                            eta=eta, device=args.device, n_iter=args.n_iter, burn_in=args.burn_in,
                            model_params=model_params or None, estimator=estimator)
            variants = (["r fixed at 1/K_T"] if args.fixed_r else []) + \
                (["D, Phi = posterior means (not a sampler)"] if args.mean_globals else []) + \
                (["expected fractional counts (not a sampler)"] if args.expected_counts else []) + \
                (["authors' redistributed w (not a sampler)"] if args.redistribute else []) + \
                ([f"padding {args.padding}"] if args.padding else []) + \
                (["test documents with the last sample of the globals"] if args.last_globals else [])
            extra = [args.n_iter, args.burn_in] if args.n_iter or variants else []
            cell["config"] = list(config) + extra + (["; ".join(variants)] if variants else [])
            cell["wall_seconds"] = round(time.perf_counter() - start, 1)
            cell["command"] = command_line()
            record = load_cells(out)  # other processes may have added cells meanwhile
            record["cells"][key] = cell
            save_record(out, record)
            print(f"{key}: {100 * cell['accuracy_mean']:.1f}% ({cell['wall_seconds']}s)", flush=True)
    if out == DEFAULT_OUT:
        report(record, out)


if __name__ == "__main__":
    main()
