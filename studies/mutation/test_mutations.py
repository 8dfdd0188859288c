"""Every mutation of the table still applies to the current sources: its snippet occurs
exactly once in its file (a moved line would otherwise go unnoticed until the next run)."""
from pathlib import Path

import pytest

from studies.mutation.mutations import MUTATIONS

SRC = Path(__file__).resolve().parents[2] / "src" / "cpgbn"


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_snippet_occurs_once(mutation):
    text = (SRC / mutation.path).read_text(encoding="utf-8")
    assert text.count(mutation.old) == 1, f"{mutation.id}: {mutation.old!r} in {mutation.path}"
    assert mutation.new != mutation.old
