"""Writing a benchmark's JSON record: one function for every script of this folder.

Each script runs as ``python benchmarks/<name>.py``, so this folder is first on ``sys.path``
and ``from records import write_record`` finds this module.
"""
from __future__ import annotations

import json
from pathlib import Path

from cpgbn.files import write_file_atomically


def write_record(path: Path, record: dict) -> None:
    """Write ``record`` as indented JSON to ``path`` (its folder made if needed), atomically:
    a benchmark stopped while writing leaves the previous record, never half of one."""
    write_file_atomically(Path(path), lambda fh: fh.write(json.dumps(record, indent=1) + "\n"))
