"""Mutation check of the sampler's statistical tests: plant each one-line bug of
``mutations.py`` in a copy of ``src/``, run the tests there, and report which were caught.

For every mutation (after an unmutated control run):

1. copy the repository's ``src/`` to a scratch tree (always the same path, with the files'
   times kept) and replace the mutation's snippet, which must occur exactly once
   ("snippet not found" otherwise: re-target the table after a refactoring);
2. run the statistical tests (``tests/test_geweke.py`` and ``tests/test_recovery.py``, from a
   copy of the checkout's ``tests/`` and ``pyproject.toml`` taken when the run starts) with
   ``PYTHONPATH`` on the copy, tier by tier: the default
   tier, then, if nothing failed, the long tier; ``pytest -x`` stops a tier at its first
   failure.  Each tier runs in its own process group under a wall-clock limit; a tier that
   runs past it is killed and counts as "caught (timeout)" (a hang inside a test is normally
   ended earlier by the tests' own watchdog, see tests/conftest.py);
3. read the z-scores the Geweke tests wrote (``CPGBN_GEWEKE_RECORD``) and the outcome.

A mutation whose record names its test files (``Mutation.tests``: issue 35's mutations of the
minibatch and hybrid glue) runs those files instead, once, in the "suite" tier: marker
``not long``, as ``make test`` runs them, and without ``-x``, so that the report names every
test that fails.  The control run then runs the union of those files too (after the
statistical tiers when the chosen mutations include some without ``tests``).

numba cache: a mutation of a numba kernel file compiles into an empty cache directory (numba
decides staleness per defining file, so a warm cache could keep the unmutated code inlined in
another file's kernel).  A mutation of a file without numba kernels reuses a copy of the
control run's cache: every kernel file is then byte-identical, at the same path, with the same
time stamp, as when that cache was built.

Writes ``report.md`` and ``report.json`` (commit, command, seed offset, per-mutation outcome,
the tier and test that caught it, and the largest |z|) to ``--out``.

    python studies/mutation/run_mutations.py                 # everything (an hour or more)
    python studies/mutation/run_mutations.py --only w_rate_c --tiers default
    python studies/mutation/run_mutations.py --origin "issue 35" --out results/mutation/issue35
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutations import MUTATIONS, Mutation  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TEST_FILES = ["tests/test_geweke.py", "tests/test_recovery.py"]
TIERS = {
    # marker expression, wall-clock limit of the whole tier (s), per-test limit (s)
    "default": ("slow and not long", 1500, 600),
    "long": ("long", 5400, 1800),
    # the test files a mutation names, as `make test` selects them (Mutation.tests)
    "suite": ("not long", 1800, 600),
}


class SnippetError(RuntimeError):
    pass


def apply_mutation(src_root: Path, mutation: Mutation) -> None:
    path = src_root / "cpgbn" / mutation.path
    if not path.is_file():
        raise SnippetError(f"{mutation.id}: file not found: src/cpgbn/{mutation.path}")
    text = path.read_text(encoding="utf-8")
    n = text.count(mutation.old)
    if n != 1:
        what = "snippet not found" if n == 0 else f"snippet occurs {n} times"
        raise SnippetError(f"{mutation.id}: {what} in src/cpgbn/{mutation.path}: {mutation.old!r}")
    path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")


def has_numba_kernels(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return "njit" in text or "numba.jit" in text


def fresh_tree(work: Path) -> Path:
    """A copy of the checkout's src/ at work/tree/src (copy2 keeps the files' times)."""
    tree = work / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(REPO / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return tree / "src"


def snapshot_tests(work: Path) -> Path:
    """The tests and their configuration as they are now (edits during a run do not leak in)."""
    checkout = work / "checkout"
    if checkout.exists():
        shutil.rmtree(checkout)
    shutil.copytree(REPO / "tests", checkout / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", checkout / "pyproject.toml")
    return checkout


def test_plan(mutation: Mutation | None, tiers: list[str]) -> list[tuple[str, list[str]]]:
    """(tier, test files) in the order a mutation runs them: its own files in the suite tier,
    or the statistical files tier by tier."""
    if mutation is not None and mutation.tests:
        return [("suite", list(mutation.tests))]
    return [(tier, TEST_FILES) for tier in tiers]


def control_plan(chosen: list[Mutation], tiers: list[str]) -> list[tuple[str, list[str]]]:
    """The unmutated run: the statistical tiers if a chosen mutation uses them, then the
    union of the other mutations' own test files."""
    plan = [(tier, TEST_FILES) for tier in tiers] if any(not m.tests for m in chosen) else []
    files = sorted({f for m in chosen for f in m.tests})
    return plan + ([("suite", files)] if files else [])


def run_tier(tier: str, src: Path, cache: Path, record: Path, seed_offset: int,
             log: Path, test_limit: float | None = None,
             files: list[str] = TEST_FILES) -> dict:
    marker, wall_limit, default_limit = TIERS[tier]
    test_limit = test_limit or default_limit
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(cache),
               CPGBN_KEEP_NUMBA_CACHE="1", CPGBN_GEWEKE_RECORD=str(record),
               CPGBN_GEWEKE_SEED=str(seed_offset), PYTHONDONTWRITEBYTECODE="1")
    # a statistical tier stops at its first failure; the suite tier names every failing test
    stop = [] if tier == "suite" else ["-x"]
    command = [sys.executable, "-m", "pytest", *stop, "-q", "-p", "no:cacheprovider",
               "-m", marker, f"--timeout={test_limit}", *files]
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=src.parents[1] / "checkout", env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = process.wait(timeout=wall_limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            rc, timed_out = None, True
    text = log.read_text(encoding="utf-8", errors="replace")
    outcome, failed, watchdog = classify(text, rc, timed_out)
    return {"tier": tier, "files": list(files), "outcome": outcome, "exit_code": rc,
            "failed": failed,
            "watchdog": watchdog, "errors": first_errors(text), "seconds": round(time.monotonic() - start, 1),
            "tail": text.splitlines()[-6:]}


def first_errors(text: str) -> list[str]:
    """The first line of each error pytest reports ("E   ..."), in order, without repeats."""
    seen = []
    for line in text.splitlines():
        if line.startswith("E   ") and "Error" in line or line.startswith("E   Failed"):
            message = line[1:].strip()
            if message not in seen:
                seen.append(message)
    return seen[:3]


def classify(text: str, rc: int | None, timed_out: bool) -> tuple[str, list[str], list[str]]:
    """(outcome, failed test ids, watchdog lines) of one tier's pytest log."""
    lines = text.splitlines()
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in lines if line.startswith("FAILED ")]
    watchdog = [line for line in lines if line.startswith("TIMEOUT: ")]
    if timed_out or watchdog or (failed and "Failed: Timeout" in text):
        outcome = "caught (timeout)"  # the tier's wall clock, the watchdog or pytest-timeout
    elif rc == 0:
        outcome = "passed"
    elif rc == 1 and failed:
        outcome = "caught"
    elif rc is not None and rc < 0 and "Fatal Python error" in text:
        outcome = f"caught (crash: {text.split('Fatal Python error: ', 1)[1].splitlines()[0]})"
        # the crashed test, from faulthandler's stack of the main thread
        frames = re.findall(r'File "[^"]*/(tests/test_\w+\.py)", line \d+ in (test_\w+)', text)
        failed = [f"{frames[0][0]}::{frames[0][1]}"] if frames else []
    else:
        outcome = f"error (exit {rc})"
    return outcome, failed, watchdog


def read_records(record: Path) -> list[dict]:
    if not record.exists():
        return []
    rows = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    for row in rows:
        worst = max(row["z"], key=lambda k: abs(row["z"][k]))
        row["max_abs_z"] = round(abs(row["z"][worst]), 2)
        row["worst_statistic"] = worst
        row["z"] = {k: round(v, 2) for k, v in row["z"].items()}
    return rows


def check_import(src: Path) -> None:
    """The copy, not an installed cpgbn, must be what the tests import."""
    out = subprocess.run([sys.executable, "-c", "import cpgbn; print(cpgbn.__file__)"],
                         env=dict(os.environ, PYTHONPATH=str(src)), capture_output=True,
                         text=True, check=True).stdout.strip()
    if not Path(out).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(f"PYTHONPATH={src} imports cpgbn from {out}")


def run_one(name: str, mutation: Mutation | None, work: Path,
            plan: list[tuple[str, list[str]]], seed_offset: int, control_cache: Path | None,
            test_limit: float | None = None) -> tuple[dict, Path]:
    src = fresh_tree(work)
    check_import(src)
    row = {"id": name}
    if mutation is not None:
        row.update(path=mutation.path, old=mutation.old, new=mutation.new,
                   description=mutation.description, target=mutation.target,
                   origin=mutation.origin)
        apply_mutation(src, mutation)
    cache = work / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)
    reuse = (mutation is not None and control_cache is not None
             and not has_numba_kernels(src / "cpgbn" / mutation.path))
    if reuse:
        shutil.copytree(control_cache, cache)
    else:
        cache.mkdir(parents=True)
    row["numba_cache"] = "copy of the control run's" if reuse else "empty"
    record = work / f"record-{name}.jsonl"
    record.unlink(missing_ok=True)
    row["tiers"] = []
    for tier, files in plan:
        result = run_tier(tier, src, cache, record, seed_offset, work / f"log-{name}-{tier}.txt",
                          test_limit, files)
        row["tiers"].append(result)
        print(f"  {name} [{tier}]: {result['outcome']} in {result['seconds']} s "
              f"{result['failed'] or ''}", flush=True)
        if result["outcome"] != "passed" and mutation is not None:
            break
    row["geweke"] = read_records(record)
    summarize(row)
    return row, cache


def summarize(row: dict) -> None:
    """The row's outcome, what caught it and its largest |z|, from its tiers and records."""
    last = row["tiers"][-1]
    row["outcome"] = last["outcome"]
    row["caught_by"] = (f"{last['tier']} tier: " + (", ".join(last["failed"]) or
                                                     "; ".join(last["watchdog"]) or "wall clock")
                        if last["outcome"].startswith("caught") else None)
    row["max_abs_z"] = max((r["max_abs_z"] for r in row["geweke"]), default=None)


def reclassify(out_dir: Path, work: Path) -> None:
    """Rebuild the report from report.json and the tier logs kept in ``work``."""
    meta = json.loads((out_dir / "report.json").read_text())
    rows = meta.pop("mutations")
    for row in rows:
        for t in row["tiers"]:
            text = (work / f"log-{row['id']}-{t['tier']}.txt").read_text(errors="replace")
            t["outcome"], t["failed"], t["watchdog"] = classify(text, t["exit_code"],
                                                                t["exit_code"] is None)
            t["errors"] = first_errors(text)
        summarize(row)
    write_report(out_dir, meta, rows)


def git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "src", "tests"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + (" (with uncommitted changes in src/ or tests/)" if dirty else "")


def write_report(out_dir: Path, meta: dict, rows: list[dict]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps({**meta, "mutations": rows}, indent=1) + "\n")
    lines = ["# Mutation check of the sampler's statistical tests", "",
             f"Commit {meta['commit']}; {meta['date']}; seed offset {meta['seed_offset']}; "
             f"command `{meta['command']}`.", "",
             "Each row plants one one-line bug (studies/mutation/mutations.py) in a copy of "
             "src/ and runs tests/test_geweke.py and tests/test_recovery.py, default tier "
             "first, then the long tier (marker `long`) if the default tier passed; a "
             "mutation that names its own test files runs those instead, whole, in the "
             "suite tier (marker `not long`, as `make test`; every failing test listed).  "
             "max |z|: the largest Geweke z-score of the tests that ran (threshold 5.5).", "",
             "| mutation | origin | target | outcome | caught by | max abs z | seconds |",
             "|---|---|---|---|---|---|---|"]
    def cell(text) -> str:
        return str(text or "").replace("|", "\\|")

    for row in rows:
        seconds = sum(t["seconds"] for t in row["tiers"])
        z = "" if row["max_abs_z"] is None else f"{row['max_abs_z']:.1f}"
        lines.append(f"| {row['id']} | {cell(row.get('origin'))} | {cell(row.get('target'))} | "
                     f"{cell(row['outcome'])} | {cell(row['caught_by'])} | {z} | {seconds:.0f} |")
    lines += ["", "Per mutation: the change and the z-scores of each Geweke test that ran.", ""]
    for row in rows:
        lines.append(f"## {row['id']}")
        if "old" in row:
            lines += ["", f"{row['description']} (`src/cpgbn/{row['path']}`):", "",
                      f"    - {row['old']}", f"    + {row['new']}"]
        lines.append("")
        for r in row["geweke"]:
            lines.append(f"- {r['case']} ({r['n_sweeps']} sweeps, seed {r['seed']}): max |z| "
                         f"{r['max_abs_z']} ({r['worst_statistic']})")
        errors = [line for t in row["tiers"] for line in t.get("errors", [])]
        if errors:
            lines.append(f"- error raised: `{errors[0][:160]}`")
        for t in row["tiers"]:
            ran = f" ({', '.join(t['files'])})" if t.get("files") and t["tier"] == "suite" else ""
            lines.append(f"- {t['tier']} tier{ran}: {t['outcome']} in {t['seconds']} s"
                         + (f"; failed: {', '.join(t['failed'])}" if t["failed"] else "")
                         + (f"; {t['watchdog'][0]}" if t["watchdog"] else ""))
        lines.append("")
    (out_dir / "report.md").write_text("\n".join(lines))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutation ids (default: all)")
    parser.add_argument("--origin", default=None,
                        help='only the mutations of this origin (e.g. "issue 35")')
    parser.add_argument("--tiers", default="default,long", help="comma-separated: default,long")
    parser.add_argument("--seed-offset", type=int, default=0, help="CPGBN_GEWEKE_SEED")
    parser.add_argument("--control-tiers", default="default",
                        help="tiers of the unmutated control run (comma-separated)")
    parser.add_argument("--no-control", action="store_true", help="skip the unmutated run")
    parser.add_argument("--test-timeout", type=float, default=None,
                        help="per-test limit in seconds (default: 600 default tier, 1800 long)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "mutation")
    parser.add_argument("--work", type=Path, default=None, help="scratch directory")
    parser.add_argument("--reclassify", action="store_true",
                        help="only rebuild the report from report.json and the logs in --work")
    args = parser.parse_args(argv)
    if args.reclassify:
        reclassify(args.out, args.work)
        return 0
    tiers = args.tiers.split(",")
    chosen = [m for m in MUTATIONS if (not args.only or m.id in args.only)
              and (args.origin is None or m.origin == args.origin)]
    if not chosen:
        parser.error("no mutation chosen")
    unknown = set(args.only or []) - {m.id for m in MUTATIONS}
    if unknown:
        parser.error(f"unknown mutation ids: {sorted(unknown)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="cpgbn-mutation-"))
    work.mkdir(parents=True, exist_ok=True)
    snapshot_tests(work)
    # every snippet must apply before hours are spent
    for mutation in chosen:
        apply_mutation(fresh_tree(work), mutation)
    meta = {"commit": git_commit(), "date": datetime.date.today().isoformat(),
            "command": "python " + " ".join(shlex.quote(a) for a in
                                            ["studies/mutation/run_mutations.py", *sys.argv[1:]]),
            "seed_offset": args.seed_offset, "tiers": tiers,
            "control_tiers": args.control_tiers.split(","), "test_timeout": args.test_timeout, "test_files": TEST_FILES,
            "suite_files": sorted({f for m in chosen for f in m.tests}),
            "tier_markers": {t: TIERS[t][0] for t in [*tiers, "suite"]}}
    rows, control_cache = [], None
    if not args.no_control:
        print("control (unmutated)", flush=True)
        row, control_cache = run_one("control", None, work,
                                     control_plan(chosen, args.control_tiers.split(",")),
                                     args.seed_offset, None, args.test_timeout)
        rows.append(row)
        write_report(args.out, meta, rows)
    for mutation in chosen:
        print(mutation.id, flush=True)
        row, cache = run_one(mutation.id, mutation, work, test_plan(mutation, tiers),
                             args.seed_offset, control_cache, args.test_timeout)
        shutil.rmtree(cache, ignore_errors=True)
        rows.append(row)
        write_report(args.out, meta, rows)
    missed = [r["id"] for r in rows[1 if not args.no_control else 0:]
              if not r["outcome"].startswith("caught")]
    print(f"missed: {missed}" if missed else "every mutation caught", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
