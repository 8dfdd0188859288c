"""Minibatches in the cell layout (cpgbn.layers.batches.subset_cells): a subset equals the
ConvData built from those documents alone, for text (with edge padding and short documents)
and bag-of-words data; bad indices raise CPGBNInputError."""

import numpy as np
import pytest

from cpgbn.errors import CPGBNInputError
from cpgbn.layers.batches import subset_cells
from cpgbn.layers.cells import from_bag_of_words, from_token_sequences

FIELDS = ("cell_word", "cell_col", "cell_count", "doc_cells", "doc_length", "doc_positions",
          "true_length")


def _documents(lengths, seed=0):
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return rng.integers(0, 13, offsets[-1]).astype(np.int32), offsets


def _select(tokens, offsets, docs):
    parts = [tokens[offsets[j]:offsets[j + 1]] for j in docs]
    new_offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    return np.concatenate(parts).astype(np.int32), new_offsets


def _assert_same(a, b):
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.filter_width, a.mode, a.fixed_count, a.padding) == \
        (b.filter_width, b.mode, b.fixed_count, b.padding)


@pytest.mark.parametrize("builder", [
    lambda t, o: from_token_sequences(t, o, 3, token_count=25, padding=1),
    lambda t, o: from_token_sequences(t, o, 4),
    from_bag_of_words,
])
def test_subset_equals_the_data_of_the_subset(builder):
    tokens, offsets = _documents([5, 0, 1, 9, 3, 2])
    docs = [3, 1, 3, 0, 5]
    _assert_same(subset_cells(builder(tokens, offsets), docs),
                 builder(*_select(tokens, offsets, docs)))


def test_bad_indices_raise():
    data = from_token_sequences(*_documents([2, 3]), 2)
    with pytest.raises(CPGBNInputError, match="out of range"):
        subset_cells(data, [2])
    with pytest.raises(CPGBNInputError, match="1-D"):
        subset_cells(data, [[0]])
    assert subset_cells(data, []).n_docs == 0
