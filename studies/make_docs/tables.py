"""Fill the README's result tables from the records in results/ (so the two never disagree).

    python -m studies.make_docs.tables
"""
import json
import re
from pathlib import Path

from studies.common.paths import ROOT
from studies.common.vocab_fix import MARK, add_note, stale_record

PAPER_T2 = {("trec", "200"): 68.4, ("mr", "200"): 61.5, ("subj", "200"): 77.4,
            ("trec", "200-100"): 73.4, ("mr", "200-100"): 62.4, ("subj", "200-100"): 81.2,
            ("trec", "200-100-50"): 74.4, ("mr", "200-100-50"): 63.6, ("subj", "200-100-50"): 81.5}


def evaluation_table() -> str:
    rows = ["| dataset | model | protocol | token_count | seeds | accuracy % (ours) | paper % | "
            "s/sweep | record |", "|---|---|---|---|---|---|---|---|---|"]
    for path in sorted((ROOT / "results").glob("eval_*.json")):
        r = json.loads(path.read_text())
        layers = "-".join(map(str, r["layers"]))
        sweep = sum(x["median_sweep_seconds"] for x in r["runs"]) / len(r["runs"])
        paper = PAPER_T2.get((r["dataset"], layers), "")
        rows.append(f"| {r['dataset'].upper()} | CPGBN-{layers} | {r['protocol']} | {r['token_count']} | "
                    f"{','.join(map(str, r['seeds']))} | {100 * r['accuracy_mean']:.1f} +- "
                    f"{100 * r['accuracy_std']:.1f}{MARK if stale_record(r) else ''} | {paper} | {sweep:.2f} | "
                    f"[{path.name}](results/{path.name}) (commit {r['commit']}) |")
    return "\n".join(add_note(rows))


def table_lines(path: Path) -> str:
    """A report's tables (a blank line between two), and the note on old-vocabulary results
    when it has one."""
    kept, gap = [], False
    for line in path.read_text().splitlines():
        if line.startswith("|") or line.startswith(MARK):
            if gap and kept:
                kept.append("")
            kept.append(line)
            gap = False
        else:
            gap = True
    return "\n".join(kept)


def token_count_table() -> str:
    return table_lines(ROOT / "results" / "token_count" / "token_count.md")


def table2_rows() -> str:
    path = ROOT / "results" / "table2" / "table2.md"
    if not path.exists():
        return "(no Table 2 cells yet)"
    return table_lines(path)


def speed_rows() -> str:
    path = ROOT / "results" / "speed" / "speed.md"
    return "\n".join(line for line in path.read_text().splitlines() if line.startswith("|"))


def gpu_speed_table() -> str:
    r = json.loads((ROOT / "results" / "speed" / "gpu_speed.json").read_text())
    rows = [f"{r['device']}, torch {r['torch']}, commit {r['commit']}, `{r['command']}`:", "",
            "| dataset | CPGBN | s/sweep (GPU) | paper (GTX 1080Ti) | tokens | peak GPU memory GiB |",
            "|---|---|---|---|---|---|"]
    for x in r["rows"]:
        paper = f"{x['paper_gpu_seconds']:.2f}" if x["paper_gpu_seconds"] else "-"
        rows.append(f"| {x['dataset'].upper()} | {x['layers']} | {x['seconds_per_sweep']:.4f} | {paper} | "
                    f"{x['n_tokens']:,} | {x['peak_gpu_mb'] / 1024:.1f} |")
    return "\n".join(rows)


def example(name: str) -> str:
    path = ROOT / "results" / "examples" / f"{name}.txt"
    return "```\n" + path.read_text().rstrip("\n") + "\n```"


def replace_block(readme: str, name: str, body: str) -> str:
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", readme)


def main():
    path = ROOT / "README.md"
    readme = path.read_text()
    readme = replace_block(readme, "results", evaluation_table())
    readme = replace_block(readme, "token-count", token_count_table())
    readme = replace_block(readme, "table2", table2_rows())
    readme = replace_block(readme, "speed", speed_rows())
    readme = replace_block(readme, "gpu-speed", gpu_speed_table())
    for name in ("topics", "tree", "summary"):
        readme = replace_block(readme, f"example-{name}", example(name))
    path.write_text(readme)


if __name__ == "__main__":
    main()
