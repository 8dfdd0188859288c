"""Writing a benchmark's JSON record, and running one child per library tree: one function of
each for every script of this folder.

Each script runs as ``python benchmarks/<name>.py``, so this folder is first on ``sys.path``
and ``from records import write_record`` finds this module.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cpgbn.files import write_file_atomically


def write_record(path: Path, record: dict) -> None:
    """Write ``record`` as indented JSON to ``path`` (its folder made if needed), atomically:
    a benchmark stopped while writing leaves the previous record, never half of one."""
    write_file_atomically(Path(path), lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))


def rows_per_tree(child: str, trees: str, threads: int, args: list[str],
                  native_threads: int = 1) -> list[dict]:
    """Run the script ``child`` (``python -c``, with ``args``) once per library tree of
    ``trees`` (comma-separated ``src`` folders, each a fresh process on ``threads`` numba
    threads and ``native_threads`` OpenMP and MKL threads), and return the JSON row each prints
    last, with its ``tree``.  A child that fails stops the benchmark with its error."""
    rows = []
    for tree in trees.split(","):
        env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()),
                   NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(native_threads),
                   MKL_NUM_THREADS=str(native_threads))
        run = subprocess.run([sys.executable, "-c", child, *map(str, args)], env=env,
                             capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"{tree}: {run.stderr[-2000:]}")
        row = json.loads(run.stdout.strip().splitlines()[-1])
        row["tree"] = tree
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows
