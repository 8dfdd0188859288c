"""The example terminal output of docs/explaining.md: `cpgbn topics`, `cpgbn tree`, `cpgbn summary` on TREC.

Fits a three-layer TREC model with the CLI (seed 0, defaults otherwise) unless MODEL_DIR already
holds one, runs the three commands on it and writes their output, each headed by its command
line, to results/cli_examples/{topics,tree,summary}.txt; results/cli_examples/README.md records the
commit.  `studies/make_docs/tables.py` copies the files into docs/explaining.md.

    python -m studies.cli_examples.cli_examples [--model-dir runs/readme-trec] [--refit]
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from cpgbn import CPGBN
from cpgbn.evaluate.provenance import provenance

from studies.common.paths import ROOT

OUT = ROOT / "results" / "cli_examples"


def cpgbn(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "cpgbn", *args], capture_output=True,
                            text=True, check=True, env=dict(os.environ, COLUMNS="100"))
    return result.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=str(ROOT / "runs" / "readme-trec"))
    ap.add_argument("--refit", action="store_true")
    args = ap.parse_args()
    origin = provenance()
    model_dir = Path(args.model_dir)
    fit = ["fit", "trec", "--layers", "200,100,50", "--seed", "0", "--quiet", "--out", str(model_dir)]
    if args.refit and model_dir.exists():
        shutil.rmtree(model_dir)
    if not model_dir.exists():
        print(cpgbn(*fit), end="")
    commands = {
        "topics": ["topics", str(model_dir), "--sort", "sharpness", "--min-columns", "2", "--kernels", "6", "--columns",
                   "--top", "3"],
        "tree": ["tree", str(model_dir), "--topics", "1", "--children", "3"],
        "summary": ["summary", str(model_dir), "trec", "--top", "5"],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    shown = lambda argv: "cpgbn " + shlex.join(argv).replace(str(model_dir), "trec-deep")
    for name, argv in commands.items():
        text = cpgbn(*argv)
        (OUT / f"{name}.txt").write_text(f"$ {shown(argv)}\n{text}")
        print(f"wrote results/cli_examples/{name}.txt")
    model = CPGBN.load(model_dir)
    (OUT / "README.md").write_text(
        "# Example terminal output (TREC)\n\n"
        f"Made by `python -m studies.cli_examples.cli_examples` at commit {origin['commit']} "
        f"({origin['date']}, {origin['machine']}). The model: `{shown(fit).replace(' --quiet', '')}` "
        f"(three layers {'-'.join(map(str, model.layers))}, F = {model.filter_width}, "
        f"{model.vocab_size} vocabulary rows with <unk>, token_count = {model.token_count}, "
        f"{model.n_iter} sweeps).\n")


if __name__ == "__main__":
    main()
