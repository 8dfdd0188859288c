"""Property-based tests of the readers and the encoding on arbitrary bytes and text."""
import gzip

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpgbn import DataFileError
from cpgbn.text import Corpus, read_labeled, read_lines

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _expected_lines(raw: bytes) -> int:
    lines = raw.split(b"\n")
    return len(lines) - 1 if lines[-1] == b"" else len(lines)


@SETTINGS
@given(raw=st.binary(max_size=400), compressed=st.booleans())
def test_read_lines_never_crashes(tmp_path_factory, raw, compressed):
    path = tmp_path_factory.mktemp("x") / ("d.txt.gz" if compressed else "d.txt")
    path.write_bytes(gzip.compress(raw) if compressed else raw)
    try:
        docs = read_lines(path)
    except DataFileError as exc:
        assert "\n" not in str(exc)
        return
    assert len(docs) == _expected_lines(raw) and all("\n" not in d for d in docs)


@SETTINGS
@given(raw=st.binary(max_size=400))
def test_read_labeled_never_crashes(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("x") / "d.tsv"
    path.write_bytes(raw)
    try:
        texts, labels = read_labeled(path)
    except DataFileError as exc:
        assert "\n" not in str(exc)
        return
    assert len(texts) == len(labels) == _expected_lines(raw)
    assert all(labels) and all("\t" not in lab for lab in labels)


@SETTINGS
@given(train=st.lists(st.text(max_size=60), min_size=1, max_size=20),
       test=st.lists(st.text(max_size=60), max_size=10),
       size=st.integers(min_value=2, max_value=50))
def test_encoding_keeps_one_row_per_document_and_ids_in_range(train, test, size):
    corpus = Corpus.from_texts(train, vocab_size=size)
    assert len(corpus) == len(train) and len(corpus.vocabulary) <= size
    encoded = Corpus.from_texts(test, vocabulary=corpus.vocabulary)
    assert len(encoded) == len(test)
    for c in (corpus, encoded):
        assert c.tokens.dtype == np.int32 and np.all(c.tokens >= 0)
        assert np.all(c.tokens < len(corpus.vocabulary))
        assert c.offsets[-1] == len(c.tokens) and np.all(np.diff(c.offsets) >= 0)
