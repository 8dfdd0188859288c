"""Table 2's CPGBN cells from the sparse start (issue 57 step 2) beside the same cells from the
dense start, seed by seed.

The sparse-start cells: ``python -m studies.table2.table2 --datasets trec,mr,subj --models cpgbn
--protocols authors --token-count 800 --layers 200,200-100-50 --out
results/table2/table2_sparse_start.json`` (run at the commit each cell records).  The
dense-start cells: the same keys of results/table2/table2.json (earlier commits, the chain of
the dense start).  Writes results/table2/sparse_start_comparison.md.

    python -m studies.sparse_start.compare
"""
import numpy as np

from studies.common.paths import ROOT
from studies.common.reports import load_cells

DENSE = ROOT / "results" / "table2" / "table2.json"
SPARSE = ROOT / "results" / "table2" / "table2_sparse_start.json"
OUT = ROOT / "results" / "table2" / "sparse_start_comparison.md"


def _row(cells, dataset, layers):
    found = {}
    for key, cell in cells.items():
        parts = key.split("|")
        if parts[:5] == ["authors", dataset, "cpgbn", layers, "tc=800"] and len(parts) == 6:
            found[int(parts[5].split("=")[1])] = cell
    return found


def main():
    dense, sparse = load_cells(DENSE)["cells"], load_cells(SPARSE)["cells"]
    lines = ["# Table 2's CPGBN cells: the sparse start against the dense start", "",
             "Made by `python -m studies.sparse_start.compare` (protocol: its docstring). "
             "Accuracy % per seed (authors' protocol, token_count 800, the paper's V), the mean "
             "+- std over seeds (ddof 1), and the median fit seconds of a cell "
             "(`fit_seconds` of evaluate; the sparse cells ran on one numba thread beside "
             "other jobs on this 2-core machine, so their seconds are not a speed measure: "
             "benchmarks/whole_fit.py is).", "",
             "| dataset | layers | start | seeds 0, 1, 2 | mean +- std | fit s (median) | "
             "commits |",
             "|---|---|---|---|---|---|---|"]
    for dataset in ("trec", "mr", "subj"):
        for layers in ("200", "200-100-50"):
            for name, cells in (("dense", dense), ("sparse", sparse)):
                row = _row(cells, dataset, layers)
                if not row:
                    continue
                acc = [100 * row[s]["accuracy_mean"] for s in sorted(row)]
                fit = [r["fit_seconds"] for c in row.values() for r in c["runs"]]
                spread = f" +- {np.std(acc, ddof=1):.1f}" if len(acc) > 1 else ""
                lines.append(f"| {dataset} | {layers} | {name} | "
                             f"{', '.join(f'{a:.1f}' for a in acc)} | {np.mean(acc):.1f}{spread} | "
                             f"{np.median(fit):.0f} | "
                             f"{', '.join(sorted({c['commit'] for c in row.values()}))} |")
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
