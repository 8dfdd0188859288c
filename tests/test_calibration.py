"""The expected calibration error (cpgbn.evaluate.calibration): a hand computation, its
defining loop as an oracle on random inputs, and its invariants."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpgbn.errors import CPGBNInputError
from cpgbn.evaluate.calibration import (calibration_bins, expected_calibration_error,
                                        top_class)

# five documents, two classes; confidences 0.9, 0.78, 0.7, 0.55, 0.65 (none on a bin edge)
PROBA = np.array([[0.9, 0.1], [0.78, 0.22], [0.3, 0.7], [0.45, 0.55], [0.35, 0.65]])
LABELS = np.array(["a", "b", "b", "a", "b"])   # right, wrong, right, wrong, right


def test_ece_by_hand():
    # 5 bins of width 0.2: (0.4, 0.6] holds 0.55 (wrong): gap 0.55, weight 1/5;
    # (0.6, 0.8] holds 0.78 (wrong), 0.7 and 0.65 (right): accuracy 2/3, mean confidence 0.71,
    # weight 3/5; (0.8, 1] holds 0.9 (right): gap 0.1, weight 1/5.
    expected = 0.55 / 5 + 3 / 5 * abs(2 / 3 - 0.71) + 0.1 / 5
    assert expected_calibration_error(LABELS, PROBA, ["a", "b"], n_bins=5) \
        == pytest.approx(expected, abs=1e-12)
    # 15 bins of width 1/15: every document alone in its bin, the gaps are |a_i - c_i|
    expected = (0.1 + 0.78 + 0.3 + 0.55 + 0.35) / 5
    assert expected_calibration_error(LABELS, PROBA, ["a", "b"]) \
        == pytest.approx(expected, abs=1e-12)


def test_bins_by_hand():
    bins = calibration_bins([0.9, 0.78, 0.7, 0.55, 0.65], [1, 0, 1, 0, 1], n_bins=5)
    np.testing.assert_array_equal(bins.counts, [0, 0, 1, 3, 1])
    np.testing.assert_allclose(bins.accuracy[2:], [0, 2 / 3, 1])
    np.testing.assert_allclose(bins.confidence[2:], [0.55, 0.71, 0.9])
    assert np.isnan(bins.accuracy[:2]).all()
    np.testing.assert_allclose(bins.edges, np.linspace(0, 1, 6))


def test_bin_edges_belong_to_the_lower_bin():
    bins = calibration_bins([0.0, 0.5, 1.0], [True, True, True], n_bins=2)
    np.testing.assert_array_equal(bins.counts, [2, 1])   # (0, 0.5] takes 0 and 0.5


def test_top_class_follows_the_column_order():
    predicted, confidence = top_class(PROBA, ["b", "a"])
    assert list(predicted) == ["b", "b", "a", "a", "a"]
    np.testing.assert_allclose(confidence, [0.9, 0.78, 0.7, 0.55, 0.65])


def _ece_by_loop(confidence, correct, n_bins):
    """The definition, one bin at a time (the documented edges, np.linspace(0, 1, M + 1))."""
    total, n = 0.0, len(confidence)
    edges = np.linspace(0, 1, n_bins + 1)
    for m in range(n_bins):
        low, high = edges[m], edges[m + 1]
        members = [i for i, c in enumerate(confidence)
                   if (low < c <= high) or (m == 0 and c == 0)]
        if members:
            accuracy = np.mean([correct[i] for i in members])
            mean_confidence = np.mean([confidence[i] for i in members])
            total += len(members) / n * abs(accuracy - mean_confidence)
    return total


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.floats(0.01, 1.0), min_size=3, max_size=3), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n))), st.integers(1, 20),
    st.randoms(use_true_random=False))
def test_ece_properties(data, n_bins, rnd):
    weights, labels = data
    proba = np.array(weights) / np.sum(weights, axis=1, keepdims=True)
    classes = np.array(["x", "y", "z"])
    y = classes[labels]
    ece = expected_calibration_error(y, proba, classes, n_bins=n_bins)
    predicted, confidence = top_class(proba, classes)
    # the definition, bin by bin
    assert ece == pytest.approx(_ece_by_loop(confidence, predicted == y, n_bins), abs=1e-9)
    assert 0.0 <= ece <= 1.0
    order = list(range(len(y)))
    rnd.shuffle(order)   # the documents' order does not matter
    assert expected_calibration_error(y[order], proba[order], classes, n_bins=n_bins) \
        == pytest.approx(ece, abs=1e-12)
    # one bin: | accuracy - mean confidence |
    one = expected_calibration_error(y, proba, classes, n_bins=1)
    assert one == pytest.approx(abs(np.mean(predicted == y) - confidence.mean()), abs=1e-12)
    assert one <= ece + 1e-12   # pooling bins never raises the weighted gap (triangle inequality)


def test_calibrated_and_extreme_predictions():
    classes = ["a", "b"]
    # confidence 0.75 four times, three right: calibrated
    proba = np.array([[0.75, 0.25]] * 4)
    assert expected_calibration_error(["a", "a", "a", "b"], proba, classes) == pytest.approx(0)
    certain = np.array([[1.0, 0.0]] * 3)
    assert expected_calibration_error(["a"] * 3, certain, classes) == 0.0
    assert expected_calibration_error(["b"] * 3, certain, classes) == 1.0


@pytest.mark.parametrize("call, match", [
    (lambda: expected_calibration_error(["a"], [[0.5, 0.5]], ["a", "b", "c"]), "one column"),
    (lambda: expected_calibration_error(["a", "b"], [[0.5, 0.5]], ["a", "b"]), "2 labels"),
    (lambda: expected_calibration_error(["a"], [[1.5, -0.5]], ["a", "b"]), r"\[0, 1\]"),
    (lambda: expected_calibration_error(["a"], [[0.5, 0.5]], ["a", "b"], n_bins=0), "n_bins"),
    (lambda: calibration_bins([], []), "non-empty"),
])
def test_bad_input(call, match):
    with pytest.raises(CPGBNInputError, match=match):
        call()
