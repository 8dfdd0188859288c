"""Phrase support and n-gram NPMI (cpgbn.explain.phrase_quality) against counts done by hand."""
import math
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from cpgbn import CPGBNInputError
from cpgbn.explain import Phrase
from cpgbn.explain.phrase_quality import (ANY, collocations, kernel_phrase_quality,
                                          phrase_counts, phrase_npmi, phrase_quality)
from cpgbn.text import Corpus


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(12)]
    docs = []
    for _ in range(60):
        doc = list(rng.choice(words, size=rng.integers(0, 9)))
        if rng.random() < 0.5:   # a planted phrase at a random place
            at = int(rng.integers(0, len(doc) + 1))
            doc[at:at] = ["how", "many"]
        docs.append(doc)
    # vocab 10: the rarest words are out of the vocabulary, so <unk> occurs
    return Corpus.from_token_lists(docs, vocab_size=10), docs


def _by_hand(docs, vocabulary, pattern):
    """Occurrences of a pattern of ids (ANY any word), starts, and per fixed word the starts
    where it is at its offset."""
    count, starts, singles = 0, 0, Counter()
    for doc in docs:
        ids = list(vocabulary.encode(doc))
        for s in range(len(ids) - len(pattern) + 1):
            starts += 1
            hits = [f for f, v in enumerate(pattern) if v != ANY and ids[s + f] == v]
            for f in hits:
                singles[f] += 1
            count += len(hits) == sum(v != ANY for v in pattern)
    return count, starts, singles


def test_counts_and_npmi_match_counting_by_hand(corpus):
    corpus, docs = corpus
    vocabulary = corpus.vocabulary
    how, many = vocabulary.encode(["how", "many"])
    patterns = [[how, many], [how, many, ANY], [ANY, how], [how, ANY, many],
                [int(vocabulary.encode(["w1"])[0]), ANY, int(vocabulary.encode(["w2"])[0])],
                [0, ANY]]
    counts = phrase_counts(corpus, patterns)
    for pattern, count in zip(patterns, counts):
        hand, starts, singles = _by_hand(docs, vocabulary, pattern)
        assert count == hand
        fixed = [f for f, v in enumerate(pattern) if v != ANY]
        value = phrase_npmi(corpus, pattern)
        if len(fixed) < 2:
            assert math.isnan(value)
        elif hand == 0:
            assert value == -1.0
        else:
            p = hand / starts
            pmi = math.log(p) - sum(math.log(singles[f] / starts) for f in fixed)
            assert value == pytest.approx(pmi / ((len(fixed) - 1) * -math.log(p)))
    assert counts[0] > 20   # the planted phrase


def test_npmi_bounds():
    always = Corpus.from_token_lists([["a", "b", "c"], ["a", "b"], ["c", "c", "a", "b"]])
    a, b, c = always.vocabulary.encode(["a", "b", "c"])
    assert phrase_npmi(always, [a, b]) == pytest.approx(1.0)
    assert phrase_npmi(always, [b, a]) == -1.0
    assert math.isnan(phrase_npmi(always, [a, ANY]))
    assert phrase_quality(always, ["a b", "b a", "c _"]).to_dict()["counts"] == [3, 0, 2]


def test_collocations_rank_frequent_bigrams_by_npmi(corpus):
    corpus, docs = corpus
    vocabulary = corpus.vocabulary
    found = collocations(corpus, top=5, min_count=4)
    pairs = Counter()
    for doc in docs:
        ids = list(vocabulary.encode(doc))
        pairs.update((x, y) for x, y in zip(ids, ids[1:]) if x != 0 and y != 0)
    frequent = {p for p, n in pairs.items() if n >= 4}
    scores = {p: phrase_npmi(corpus, list(p)) for p in frequent}
    best = sorted(scores, key=lambda p: (-scores[p], p[0] * len(vocabulary) + p[1]))[:5]
    assert [tuple(vocabulary.encode(p)) for p in found.phrases] == best
    assert np.allclose(found.npmi, [scores[p] for p in best])
    assert list(found.counts) == [pairs[p] for p in best]
    assert found.phrases[0] == ["how", "many"]
    with pytest.raises(CPGBNInputError):
        collocations(corpus, top=0)


def test_kernel_phrase_quality_scores_the_most_used_names(corpus):
    corpus, _ = corpus

    def row(kernel, usage, words):
        return SimpleNamespace(kernel=kernel, usage=usage, n_named_columns=sum(w != "_" for w in words),
                               corpus_phrases=[Phrase(tuple(words), 1.0, 1)] if words else [])
    rows = [row(0, 0.5, ("how", "many", "_")), row(1, 0.3, ("_", "w1", "_")),
            row(2, 0.0001, ("w3", "w4", "_")), row(3, 0.1, ("w5", "how", "_")), row(4, 0.1, ())]
    quality = kernel_phrase_quality(rows, corpus, top=2)
    assert quality.names.phrases == [["how", "many", "_"], ["_", "w1", "_"]]
    assert quality.n_phrase_kernels == 3 and quality.n_kernels == 5
    assert quality.names.n_multiword == 1 and quality.names.n_supported == 2
    assert "names of the 2 most used kernels" in quality.describe()
    assert kernel_phrase_quality([row(0, 1.0, ())], corpus) is None


@pytest.mark.parametrize("pattern", [[], [ANY, ANY], [99]])
def test_bad_patterns_say_why(corpus, pattern):
    with pytest.raises(CPGBNInputError):
        phrase_counts(corpus[0], [pattern])
