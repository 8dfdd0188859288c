"""A sentiment sanity set (issue 47): on a classifier fitted with the defaults to MR's movie
reviews, clear negatives ("terrible", "waste", "not good") push towards the negative class and
clear positives towards the positive one, in the explanations a user reads.

One fit of the defaults (seed 0) on 9,000 of MR's 10,662 sentences, held out the rest: the
test checks the accuracy on those too, so that the explanations below belong to a model that
works.  The cues sit in plain carrier sentences; a cue's push is its occlusion score (the fall
of the class's log-odds when the word alone becomes the out-of-vocabulary word) and, for a
two-word cue, the score of the best window that holds both words.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from cpgbn.classifier import CPGBNClassifier  # noqa: E402
from cpgbn.datasets import load_dataset  # noqa: E402
from cpgbn.explain.classes import class_phrases, explain_document  # noqa: E402

# one fit of about five minutes on one thread: scheduled with the statistical tests, first
pytestmark = [pytest.mark.usefixtures("torch_one_thread"), pytest.mark.slow(seconds=125)]

#: (sentence, its cue words, the class the cue must push towards).  The cues are words that
#: MR's reviews use far more in one class ("waste" 21 negative sentences to 1 positive among
#: the 9,000 fitted, "worst" 45 to 8, "awful" 20 to 5); "terrible" is not one (9 to 7: in MR it
#: also praises, "terribly funny"), and the model reads it as neither.
SANITY = [
    ("a complete waste of time", ("waste",), "neg"),
    ("the plot is boring and the acting is awful", ("boring", "awful"), "neg"),
    ("this is the worst film of the year", ("worst",), "neg"),
    ("a wonderful and moving film", ("wonderful", "moving"), "pos"),
    ("one of the best films of the year", ("best",), "pos"),
    ("a beautiful , funny and touching story", ("beautiful", "funny", "touching"), "pos"),
]
#: Negation: "not" must push towards the negative class.  The model's prediction is not
#: asserted: it put "the film is not good" at 0.50 (the words alone, "good", pull the other
#: way), which docs/classifier.md reports.
NEGATED = ["the film is not good", "the movie is not good at all", "not a good movie"]


def test_a_sentiment_model_reads_clear_cues_as_a_person_does(data_dir):
    """One fit (one test: under pytest-xdist a module fixture would be fitted once per
    worker), then every check of the module docstring."""
    texts, labels = load_dataset("mr", "all", data_dir=data_dir)
    order = np.random.default_rng(0).permutation(len(texts))
    texts = [texts[i] for i in order]
    labels = [labels[i] for i in order]
    model = CPGBNClassifier(random_state=0).fit(texts[:9000], labels[:9000])
    # it works: validation splits of MR score 75-77 (docs/classifier.md)
    assert model.score(texts[9000:], labels[9000:]) >= 0.72
    for sentence, cues, towards in SANITY:
        explanation = explain_document(model, sentence, top=50, explained_class=towards)
        assert explanation.predicted == towards, (sentence, explanation.probabilities)
        tokens = list(explanation.tokens)
        for cue in cues:
            assert explanation.token_scores[tokens.index(cue)] > 0, (sentence, cue, explanation)
        # the window that pushes hardest towards the class holds a cue
        best = max(explanation.phrases, key=lambda w: w.score)
        assert set(best.words) & set(cues), (sentence, explanation.phrases)
    for sentence in NEGATED:
        explanation = explain_document(model, sentence, top=50, explained_class="neg")
        assert explanation.token_scores[list(explanation.tokens).index("not")] > 0, sentence
    # the phrases that push most towards each class (windows of the reviews, with counts)
    # hold that class's sentiment words, none of the other's among the first five, and no
    # unknown word
    phrases = class_phrases(model, top=15)
    words = {"neg": {"bad", "dull", "boring", "worst", "mess", "too", "nothing", "fails",
                     "stupid", "unfunny", "lame", "tedious", "waste", "awful", "flat", "only"},
             "pos": {"best", "great", "fun", "beautiful", "wonderful", "funny", "enjoyable",
                     "entertaining", "moving", "solid", "touching", "powerful", "fine",
                     "fascinating", "performances", "love", "heart", "real", "force"}}
    for label, rows in phrases.items():
        assert len(rows) == 15 and all(p.count >= 3 and p.push > 0 for p in rows)
        shown = [set(p.text.split()) for p in rows]
        assert sum(bool(w & words[label]) for w in shown) >= 5, (label, rows)
        other = words["pos" if label == "neg" else "neg"] - {"too", "only", "real"}
        assert not any(w & other for w in shown[:5]), (label, rows)
        assert not any("<unk>" in w for w in shown)
