"""The encoder's filters read as corpus windows (:mod:`cpgbn.explain.filters`): the windows
against a hand count, their activation against the encoder's own first layer (closed form
against the network), the top windows against brute force, and a fitted classifier's tables
ranked by weight times usage."""
from __future__ import annotations

import numpy as np
import pytest

from cpgbn.explain.filters import EMPTY, corpus_windows, filter_windows
from cpgbn.layers.cells import from_token_sequences


def _data(docs, F, padding=0):
    tokens = np.concatenate([np.asarray(d, dtype=np.int32) for d in docs])
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    return from_token_sequences(tokens, offsets, F, padding=padding)


def test_windows_are_counted_over_every_position_and_short_documents_padded():
    data = _data([[1, 2, 3, 1, 2, 3], [5], [1, 2, 3]], F=3)
    windows, counts = corpus_windows(data)
    found = {tuple(w): int(c) for w, c in zip(windows.tolist(), counts)}
    assert found == {(1, 2, 3): 3, (2, 3, 1): 1, (3, 1, 2): 1, (5, EMPTY, EMPTY): 1}
    assert counts.sum() == data.n_positions


def test_padding_columns_are_empty_on_both_sides():
    data = _data([[4, 6]], F=3, padding=2)
    windows, counts = corpus_windows(data)
    assert {tuple(w) for w in windows.tolist()} == {
        (EMPTY, EMPTY, 4), (EMPTY, 4, 6), (4, 6, EMPTY), (6, EMPTY, EMPTY)}


def _bruteforce(conv1, bias1, windows, counts):
    V, F, K = conv1.shape
    pre = np.tile(bias1.astype(np.float64), (len(windows), 1))
    for i, row in enumerate(windows):
        for f, v in enumerate(row):
            if v != EMPTY:
                pre[i] += conv1[v, f]
    return np.maximum(pre, 0.0) * counts[:, None]


def test_top_windows_match_brute_force_in_any_chunking():
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 9, size=rng.integers(1, 12)) for _ in range(60)]
    windows, counts = corpus_windows(_data(docs, F=3))
    conv1 = rng.normal(size=(9, 3, 7))
    bias1 = rng.normal(size=7) * 0.3
    score = _bruteforce(conv1, bias1, windows, counts)
    whole = filter_windows(conv1, bias1, windows, counts, top=4)
    chunked = filter_windows(conv1, bias1, windows, counts, top=4, chunk=5)
    row_of = {tuple(w): i for i, w in enumerate(windows.tolist())}
    for k in range(7):
        expected = np.sort(score[:, k])[::-1][:4]
        expected = expected[expected > 0]
        chosen = [row_of[tuple(w)] for w, n in zip(whole.windows[k].tolist(), whole.counts[k])
                  if n > 0]
        assert score[chosen, k] == pytest.approx(expected)       # the best, best first
        assert whole.counts[k][:len(chosen)].tolist() == counts[chosen].tolist()
        np.testing.assert_array_equal(whole.windows[k], chunked.windows[k])
        np.testing.assert_array_equal(whole.counts[k], chunked.counts[k])
        assert whole.shares[k][0] == pytest.approx(expected[0] / score[:, k].sum())


def test_window_activations_equal_the_encoders_first_layer():
    """sum over positions of H_sk (the torch encoder) = sum over distinct windows of count x
    relu(C_1 * window + b_1) (the numpy form the explanations use), per filter."""
    torch = pytest.importorskip("torch")
    from cpgbn.backends.torch.encoder import WeibullConvEncoder
    from cpgbn.backends.torch.packed import pack
    rng = np.random.default_rng(5)
    docs = [rng.integers(0, 11, size=rng.integers(1, 9)) for _ in range(25)]
    data = _data(docs, F=3, padding=1)
    torch.manual_seed(0)
    encoder = WeibullConvEncoder(11, (6,), 3)
    with torch.no_grad():
        encoder.bias1.normal_(0, 0.5)
        H = encoder.first_hidden(pack(data)).double().numpy()
    windows, counts = corpus_windows(data)
    conv1 = encoder.conv1.weight.detach().double().numpy().reshape(11, 3, 6)
    bias1 = encoder.bias1.detach().double().numpy()
    np.testing.assert_allclose(_bruteforce(conv1, bias1, windows, counts).sum(0), H.sum(0),
                               rtol=1e-5)


def test_class_windows_rank_by_push_times_log_count_among_frequent_windows():
    from cpgbn.explain.filters import class_windows
    rng = np.random.default_rng(7)
    docs = [rng.integers(0, 6, size=rng.integers(2, 15)) for _ in range(80)]
    windows, counts = corpus_windows(_data(docs, F=3))
    conv1 = rng.normal(size=(6, 3, 5))
    bias1 = rng.normal(size=5) * 0.2
    weight = rng.normal(size=(3, 5))
    weight -= weight.mean(axis=0)
    got = class_windows(conv1, bias1, weight, windows, counts, top=4, min_count=3, chunk=7)
    push = (_bruteforce(conv1, bias1, windows, np.ones(len(counts))) @ weight.T)   # (U, C)
    score = push * np.log1p(counts)[:, None]
    score[counts < 3] = -np.inf
    row_of = {tuple(w): i for i, w in enumerate(windows.tolist())}
    for c in range(3):
        expected = np.sort(score[:, c])[::-1][:4]
        expected = expected[expected > 0]
        chosen = [row_of[tuple(w)] for w, n in zip(got.windows[c].tolist(), got.counts[c]) if n]
        assert score[chosen, c] == pytest.approx(expected)
        assert got.pushes[c][:len(chosen)] == pytest.approx(push[chosen, c])
        assert (counts[chosen] >= 3).all()


@pytest.mark.parametrize("largest", [30, 2 ** 40])     # packed keys, and rows past 62 bits
def test_distinct_windows_count_like_numpys_unique_over_rows(largest):
    from cpgbn.explain.filters import distinct_windows
    rng = np.random.default_rng(11)
    windows = rng.integers(EMPTY, 6, size=(500, 3))
    windows[0, 1] = largest
    expected, expected_counts = np.unique(windows, axis=0, return_counts=True)
    got, counts = distinct_windows(windows)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(counts, expected_counts)
    # merging blocks: the counts of copies add up
    weights = rng.integers(1, 9, size=500)
    got, counts = distinct_windows(windows, weights)
    for row, n in zip(got.tolist(), counts):
        assert n == weights[(windows == row).all(axis=1)].sum()
