"""Shared by the experiment scripts: their record files and their markdown reports."""
import fcntl
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from cpgbn.files import write_file_atomically


def load_cells(path: Path) -> dict:
    """A script's record ``{"cells": {key: cell}}``, empty when the file does not exist yet."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {"cells": {}}


def save_record(path: Path, record: dict) -> None:
    """Write a record file atomically (a killed run leaves the previous file, never half of one)."""
    write_file_atomically(Path(path), lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))


def add_cell(path: Path, record: dict, key: str, cell: dict) -> None:
    """Add one cell to the record file and to ``record`` (the caller's copy): the file is read
    again under an exclusive lock, so that several processes of one study (a seed each, say)
    can record cells side by side without one's save dropping another's."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = load_cells(path)
        current["cells"][key] = cell
        save_record(path, current)
    record["cells"].update(current["cells"])


def mean_std(percentages) -> str:
    """"mean +- std" of accuracies in %, one decimal; the std (over seeds, ddof = 1) only when
    there are two values or more."""
    values = np.asarray(percentages, dtype=float)
    return f"{values.mean():.1f}" + (f" +- {values.std(ddof=1):.1f}" if len(values) > 1 else "")


def command_line() -> str:
    """The command that runs this process, as a record stores it: ``python -m studies.<name>.<module>
    ARGS`` for a study started as a module (``sys.argv[0]`` is then the file's absolute path,
    which would not run: the studies import each other as the ``studies`` package)."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    head = f"python -m {spec.name}" if spec is not None and spec.name else f"python {sys.argv[0]}"
    return " ".join([head] + [shlex.quote(arg) for arg in sys.argv[1:]])
