"""Where a result came from: library version, source commit, date and machine."""

from __future__ import annotations

import datetime
import functools
import os
import platform
import subprocess
from pathlib import Path

from ..version import VERSION


@functools.lru_cache(maxsize=None)
def source_commit() -> str:
    """The git commit of the source this package runs from, or "unknown".

    "+dirty" is added when the package's own files differ from that commit.  Cached for the
    life of the process: the code a process runs is the code it imported, so the first call
    (made when an evaluation starts) describes every later record of the same process.
    ``$CPGBN_SOURCE_COMMIT``, when set, is returned instead: for a copy of the tree whose git
    metadata is absent or stale (a remote machine given the working tree, not the repository).
    """
    override = os.environ.get("CPGBN_SOURCE_COMMIT")
    if override:
        return override
    here = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."],
                               cwd=here,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def provenance() -> dict:
    return {
        "library_version": VERSION,
        "commit": source_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.system()}",
        "python": platform.python_version(),
    }
