"""Kernels named by the corpus windows they explain (issue 48): what the sampler gives a
kernel, grouped by window, with open slots where the kernel's words are spread, and counts
of every matching window of the corpus."""
import numpy as np

from cpgbn.explain.filters import EMPTY
from cpgbn.explain.kernel_windows import OPEN, kernel_windows, window_tokens
from cpgbn.text.vocabulary import OOV_ID, Vocabulary

HOW, MANY, THE, BEST, FILM, A, B, C, D = range(1, 10)


def _corpus():
    """Windows at 16 positions, and m for two kernels: kernel 0 explains "how many X" for
    four words X (spread), kernel 1 "the best film" (and once "the best <unk>")."""
    grams = [(HOW, MANY, A), (HOW, MANY, B), (HOW, MANY, C), (HOW, MANY, D),
             (HOW, MANY, A), (HOW, MANY, B),
             (THE, BEST, FILM), (THE, BEST, FILM), (THE, BEST, FILM), (THE, BEST, OOV_ID),
             (A, B, C), (B, C, D), (C, D, EMPTY), (A, THE, BEST), (HOW, MANY, A), (D, A, B)]
    counts = np.zeros((len(grams), 2))
    counts[:6, 0] = 3.0             # kernel 0: all of "how many X" at six positions
    counts[14, 0] = 1.0             # and one more, lightly
    counts[6:10, 1] = 3.0           # kernel 1: "the best film" three times, "the best <unk>"
    counts[13, 1] = 0.5             # and a little of "a the best"
    return np.array(grams), counts


def test_a_spread_column_is_an_open_slot_counted_over_every_matching_window():
    grams, counts = _corpus()
    found = kernel_windows(grams, counts, top=3, min_count=2)
    assert found.windows.shape == (2, 3, 3)
    np.testing.assert_array_equal(found.windows[0, 0], [HOW, MANY, OPEN])
    assert found.counts[0, 0] == 7                 # every "how many X" of the corpus
    assert found.shares[0, 0] == 1.0
    np.testing.assert_array_equal(found.windows[0, 1], [EMPTY] * 3)   # nothing else
    assert found.counts[0, 1] == 0


def test_a_fixed_phrase_keeps_its_words_and_rare_windows_are_left_out():
    grams, counts = _corpus()
    found = kernel_windows(grams, counts, top=3, min_count=2)
    np.testing.assert_array_equal(found.windows[1, 0], [THE, BEST, FILM])
    assert found.counts[1, 0] == 3
    np.testing.assert_allclose(found.shares[1, 0], 9.0 / 12.5)
    # "the best <unk>" and "a the best" occur once each
    assert (found.windows[1, 1:] == EMPTY).all()
    # with min_count 1 both are shown, <unk> as the word it is (a rare word)
    found = kernel_windows(grams, counts, top=3, min_count=1)
    np.testing.assert_array_equal(found.windows[1, 1], [THE, BEST, OOV_ID])
    np.testing.assert_array_equal(found.windows[1, 2], [A, THE, BEST])
    assert found.counts[1, 1:].tolist() == [1, 1]


def test_an_open_slot_stands_for_a_word_never_for_the_edge_of_a_document():
    grams = np.array([(HOW, MANY, A), (HOW, MANY, B), (HOW, MANY, C), (HOW, MANY, EMPTY),
                      (HOW, MANY, EMPTY), (HOW, MANY, EMPTY)])
    counts = np.zeros((6, 1))
    counts[:, 0] = [1.0, 1.0, 1.0, 3.0, 3.0, 3.0]
    found = kernel_windows(grams, counts, top=2, min_count=1)
    np.testing.assert_array_equal(found.windows[0, 0], [HOW, MANY, EMPTY])   # at the end
    np.testing.assert_array_equal(found.windows[0, 1], [HOW, MANY, OPEN])    # "how many X"
    assert found.counts[0].tolist() == [3, 3]


def test_window_tokens_read_open_slots_and_padding():
    vocabulary = Vocabulary(["<unk>", "how", "many", "the", "best", "film", "a", "b", "c", "d"])
    assert window_tokens([HOW, MANY, OPEN], vocabulary) == ["how", "many", "_"]
    assert window_tokens([C, D, EMPTY], vocabulary) == ["c", "d"]


def test_no_positions_give_empty_rows():
    found = kernel_windows(np.zeros((0, 3), dtype=np.int64), np.zeros((0, 4)), top=2)
    assert found.windows.shape == (4, 2, 3) and (found.windows == EMPTY).all()
    assert (found.counts == 0).all()
