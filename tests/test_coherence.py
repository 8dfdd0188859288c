"""NPMI coherence: windowed co-occurrence counts against a brute-force reference, edge cases,
topic words of phrase kernels, and the LDA comparison."""
import itertools
import json
import math

import numpy as np
import pytest

from cpgbn import CPGBN, CPGBNInputError
from cpgbn.explain import (assign_kernels, assigned_topic_words, cooccurrence, lda_topic_words,
                           model_coherence, npmi, phrase_topic_words)
from cpgbn.text import Corpus, Vocabulary

from helpers import phrase_corpus


def _corpus(docs, extra=()):
    words = sorted({w for d in docs for w in d.split()} | set(extra))
    vocab = Vocabulary(["<unk>"] + words)
    return Corpus.from_texts(docs, vocabulary=vocab)


def _reference_npmi(docs, topic, window):
    """Brute force: list every window as a set of words, count, average NPMI over pairs."""
    windows = []
    for doc in docs:
        toks = doc.split()
        if window is None or len(toks) <= window:
            windows.append(set(toks))
        else:
            windows += [set(toks[i:i + window]) for i in range(len(toks) - window + 1)]
    n = len(windows)
    values = []
    for a, b in itertools.combinations(topic, 2):
        pa = sum(a in w for w in windows) / n
        pb = sum(b in w for w in windows) / n
        pab = sum(a in w and b in w for w in windows) / n
        if pab == 0:
            values.append(-1.0)
        elif pab == 1:
            values.append(1.0)
        else:
            values.append(math.log(pab / (pa * pb)) / -math.log(pab))
    return float(np.mean(values))


DOCS = ["a b c d e f g h", "a b x y", "c d e a", "x y z", "b a", "h g f e d c b a z z z z"]


@pytest.mark.parametrize("window", [None, 2, 3, 5, 10])
def test_npmi_matches_brute_force(window):
    corpus = _corpus(DOCS)
    topics = [["a", "b", "c"], ["x", "y", "z", "h"], ["a", "z"], ["d", "e", "f", "g"]]
    ids = [corpus.vocabulary.encode(t) for t in topics]
    got = npmi(ids, corpus, window)
    want = [_reference_npmi(DOCS, t, window) for t in topics]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_window_counts_and_extremes():
    corpus = _corpus(["p q", "p q", "r s"], extra=["never"])
    counts = cooccurrence(corpus, corpus.vocabulary.encode(["p", "q", "r", "never"]), window=10)
    assert counts.n_windows == 3  # each short document is one window
    single = dict(zip(corpus.vocabulary.decode(list(counts.words)), counts.single))
    assert single == {"p": 2, "q": 2, "r": 1, "never": 0}
    v = corpus.vocabulary
    assert npmi([v.encode(["p", "r"])], corpus)[0] == -1.0       # never together
    assert npmi([v.encode(["p", "never"])], corpus)[0] == -1.0   # a word absent from the corpus
    assert npmi([v.encode(["p", "q"])], corpus)[0] == pytest.approx(1.0)  # always together
    assert math.isnan(npmi([v.encode(["p"])], corpus)[0])        # a single word has no pairs
    with pytest.raises(CPGBNInputError, match="window"):
        cooccurrence(corpus, [1, 2], window=0)


def test_phrase_topic_words_rank_by_best_column_and_skip_unknown():
    # V = 5 (id 0 = <unk>), F = 2
    D = np.array([[0.9, 0.0], [0.05, 0.1], [0.05, 0.0], [0.0, 0.6], [0.0, 0.3]])
    words = phrase_topic_words(D, top_n=3)
    assert list(words) == [3, 4, 1]  # 0.6, 0.3, 0.1 (as max over columns); <unk> skipped
    assert list(phrase_topic_words(D, top_n=10)) == [3, 4, 1, 2]  # zero-probability words dropped


@pytest.fixture(scope="module")
def fitted():
    texts, _ = phrase_corpus(60, seed=1)
    model = CPGBN(layers=(6, 3), vocab_size=40, n_iter=10, burn_in=5, random_state=0).fit(texts)
    return model, texts


def test_lda_topics_and_model_coherence(fitted):
    model, texts = fitted
    corpus = Corpus.from_texts(texts, vocabulary=model.vocabulary_)
    topics = lda_topic_words(corpus, 4, top_n=5, n_iter=5, seed=0)
    assert len(topics) == 4 and all(len(t) == 5 and 0 not in t for t in topics)
    assignments = assign_kernels(model, corpus, n_iter=4, burn_in=2)
    result = model_coherence(model, corpus, top_n=5, lda_iter=5, assignments=assignments)
    assert result.kernel_npmi.shape == (6,) and result.lda_npmi.shape == (6,)
    assert result.corpus_npmi.shape == (6,)
    for values in (result.kernel_npmi, result.lda_npmi, result.corpus_npmi):
        assert np.all((values >= -1) & (values <= 1))
    line = result.describe()   # the corpus words, LDA's counterpart, first
    assert line.index("the words CPGBN's kernels explain") < line.index("LDA with 6 topics") \
        < line.index("the top words of the kernels' columns")
    json.dumps(result.to_dict())
    alone = model_coherence(model, texts, top_n=5, lda=False)
    np.testing.assert_allclose(alone.kernel_npmi, result.kernel_npmi)
    assert alone.lda_npmi is None and "LDA" not in alone.describe()
    assert "CPGBN kernels" in alone.describe()
    assert all(0 not in t for t in assigned_topic_words(assignments, 5))
