"""Shared fixtures: where the real datasets live, and a clean numba thread setting."""
import os
from pathlib import Path

import pytest


def _find_data_dir():
    env = os.environ.get("CPGBN_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "data"
        if (candidate / "TREC" / "train.tsv").is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def data_dir():
    """The real data directory (``CPGBN_DATA`` or a ``shared/data`` beside the checkout)."""
    path = _find_data_dir()
    if path is None or not (path / "TREC" / "train.tsv").is_file():
        pytest.skip("real datasets not found: set CPGBN_DATA to the data directory")
    return path
