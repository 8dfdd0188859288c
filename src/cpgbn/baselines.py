"""Bag-of-words baselines beside CPGBN: latent Dirichlet allocation (scikit-learn).

One LDA configuration (batch variational Bayes, :func:`lda_estimator`) serves both the ``lda``
model of ``cpgbn evaluate`` (:class:`LDAFeatures`: documents' topic proportions as classifier
features) and the LDA topics that :mod:`cpgbn.explain.coherence` scores against the kernels, so
the two comparisons are of the same model.  This module needs only the text pipeline, so the
explanation code can use it without importing the model or the evaluation harness.
"""
from __future__ import annotations

import time

import numpy as np

from .text.corpus import Corpus

__all__ = ["LDAFeatures", "document_word_counts", "lda_estimator"]


def document_word_counts(corpus: Corpus):
    """The corpus as a documents x vocabulary ``scipy.sparse.csr_matrix`` of word counts."""
    from scipy.sparse import csr_matrix
    n_docs = len(corpus)
    rows = np.repeat(np.arange(n_docs), corpus.lengths)
    return csr_matrix((np.ones(len(corpus.tokens)), (rows, corpus.tokens)),
                      shape=(n_docs, len(corpus.vocabulary)))


def lda_estimator(n_topics: int, n_iter: int, seed: int):
    """An unfitted ``LatentDirichletAllocation``: ``n_topics`` topics, ``n_iter`` batch
    variational iterations, scikit-learn's default priors (1 / n_topics)."""
    from sklearn.decomposition import LatentDirichletAllocation
    return LatentDirichletAllocation(n_components=n_topics, learning_method="batch",
                                     max_iter=n_iter, random_state=seed)


class LDAFeatures:
    """Latent Dirichlet allocation baseline (scikit-learn, batch variational Bayes) on the same
    vocabulary: features are the documents' topic proportions."""

    def __init__(self, n_topics: int, vocab_size: int, n_iter: int, seed: int):
        self.n_topics, self.vocab_size, self.n_iter, self.seed = n_topics, vocab_size, n_iter, seed
        self.sweep_seconds_ = np.array([np.nan])

    def fit_transform(self, texts):
        corpus = Corpus.from_texts(list(texts), vocab_size=self.vocab_size)
        self.vocabulary_ = corpus.vocabulary
        self.lda_ = lda_estimator(self.n_topics, self.n_iter, self.seed)
        start = time.perf_counter()
        features = self.lda_.fit_transform(document_word_counts(corpus))
        self.sweep_seconds_ = np.array([(time.perf_counter() - start) / self.n_iter])
        return features

    def transform(self, texts):
        corpus = Corpus.from_texts(list(texts), vocabulary=self.vocabulary_)
        return self.lda_.transform(document_word_counts(corpus))
