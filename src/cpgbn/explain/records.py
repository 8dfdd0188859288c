"""What a fit records for the explanations once its chain has ended, in one pass.

The views of a fitted model name its kernels and units by what they do in the training
documents; those documents are gone once ``fit`` returns (a streamed file may not fit in
memory), so the fit records what the views read.  Every such record is declared here, in
:data:`POST_FIT_RECORDS`, with the models it applies to and the fitted attributes it sets
(fields of :class:`~cpgbn.modes.FittedState`):

- :class:`KernelWindowsRecord`: the windows each kernel explains (``kernel_windows_``,
  :mod:`cpgbn.explain.kernel_windows`), from a seeded sample of the documents;
- :class:`UnitStatisticsRecord`, a classifier: the mean of each unit of its softmax's input
  and the windows that carry most of each encoder filter and push most towards each class
  (:mod:`cpgbn.explain.filters`).

:class:`PostFitPass` computes them together: every record is shown each block of the training
documents once (:meth:`PostFitPass.visit`), then finishes with the fitted model
(:meth:`PostFitPass.finish`).  A fit in memory visits its documents as one block; a streamed
fit visits the blocks of the pass its mode makes over the file with the final globals
(:attr:`cpgbn.modes.Training.after_fit`), so that no record reads the file again.  A new
record is a class with ``attributes``, ``applies``, ``visit`` and ``finish``, and one entry in
the list.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import is_classifier

from .kernel_windows import RecordSample, windows_of_sample

__all__ = ["KernelWindowsRecord", "UnitStatisticsRecord", "POST_FIT_RECORDS", "PostFitPass"]


class KernelWindowsRecord:
    """``kernel_windows_`` (+ counts, shares): every model, from a sample of at most
    :data:`~cpgbn.explain.kernel_windows.RECORD_DOCS` of its training documents (their
    inference with the fitted globals, after the pass)."""

    attributes = ("kernel_windows_", "kernel_window_counts_", "kernel_window_shares_")

    @staticmethod
    def applies(model) -> bool:
        return True

    def __init__(self, model, mode, n_docs: int):
        self._sample = RecordSample(n_docs)

    def visit(self, fitted, documents, data) -> None:
        self._sample.add(documents)

    def finish(self, model, stacklevel: int) -> dict:
        return self.attributes_of(
            windows_of_sample(model, self._sample.documents(), stacklevel=stacklevel + 1))

    @staticmethod
    def attributes_of(found) -> dict:
        """The fitted attributes of a :class:`~cpgbn.explain.kernel_windows.KernelWindows`
        (none for None: not even one document's inference fitted the memory limit)."""
        if found is None:
            return {}
        return dict(kernel_windows_=found.windows, kernel_window_counts_=found.counts,
                    kernel_window_shares_=found.shares)


class UnitStatisticsRecord:
    """A classifier's ``softmax_input_mean_`` (the mean over its training documents of each
    unit of the softmax's input: a unit's weight times it is its mean push towards a class)
    and, when the softmax reads h^(1), per encoder filter the windows that carry most of its
    activation (``filter_windows_``, ``filter_window_counts_``) and per class the windows that
    push most towards it (``class_windows_``, ``class_window_counts_``,
    ``class_window_pushes_``), in the encoder's forward pass over each block."""

    attributes = ("softmax_input_mean_", "filter_windows_", "filter_window_counts_",
                  "class_windows_", "class_window_counts_", "class_window_pushes_")
    #: Windows kept per encoder filter and per class
    FILTER_WINDOWS = 5
    CLASS_WINDOWS = 20

    @staticmethod
    def applies(model) -> bool:
        return is_classifier(model)

    def __init__(self, model, mode, n_docs: int):
        self._mode = mode
        self._reads_hidden = None   # known from the fit's encoder (its first visit)
        self._total, self._n_docs, self._parts = None, 0, []

    def visit(self, fitted, documents, data) -> None:
        from ..modes.supervised import softmax_input_of
        from .filters import corpus_windows
        if self._reads_hidden is None:
            self._reads_hidden = softmax_input_of(fitted.encoder_config_) != "theta"
        inputs = self._mode.softmax_inputs(fitted, data)
        total = inputs.sum(axis=0)
        self._total = total if self._total is None else self._total + total
        self._n_docs += len(inputs)
        if self._reads_hidden:
            self._parts.append(corpus_windows(data))

    def finish(self, model, stacklevel: int) -> dict:
        from ..text.vocabulary import OOV_ID
        from .filters import class_windows, distinct_windows, filter_windows
        record = dict(softmax_input_mean_=self._total / max(self._n_docs, 1))
        if not self._reads_hidden:
            return record
        parts = self._parts
        windows, counts = (parts[0] if len(parts) == 1 else
                           distinct_windows(np.concatenate([w for w, _ in parts]),
                                            np.concatenate([c for _, c in parts])))
        # a window holding the out-of-vocabulary word is no phrase a reader can check
        readable = ~(windows == OOV_ID).any(axis=1)
        windows, counts = windows[readable], counts[readable]
        F, K1 = model.globals_.D.shape[1], model.layers_[0]
        conv1 = np.asarray(model.encoder_weights_["conv1.weight"]).reshape(-1, F, K1)
        bias1 = np.asarray(model.encoder_weights_["bias1"])
        # a filter's phrases among the windows seen twice or more: a window seen once rarely
        # carries a share of a filter's activation over a corpus, and most distinct windows
        # are seen once (on IMDB-sized text, 4.7 million; scoring them all took over a minute)
        again = counts >= 2
        best = filter_windows(conv1, bias1, windows[again], counts[again],
                              top=self.FILTER_WINDOWS)
        weight = np.asarray(model.encoder_weights_["classifier.weight"],
                            dtype=np.float64)[:, :K1]      # on h^(1): the first K_1 inputs
        pushing = class_windows(conv1, bias1, weight - weight.mean(axis=0), windows, counts,
                                top=self.CLASS_WINDOWS)
        record.update(filter_windows_=best.windows, filter_window_counts_=best.counts,
                      class_windows_=pushing.windows, class_window_counts_=pushing.counts,
                      class_window_pushes_=pushing.pushes)
        return record


#: Every post-fit record, in the order they are computed.
POST_FIT_RECORDS = (KernelWindowsRecord, UnitStatisticsRecord)


class PostFitPass:
    """The records of :data:`POST_FIT_RECORDS` that apply to ``model``, over its ``n_docs``
    training documents: :meth:`visit` each block once, in corpus order, then :meth:`finish`.
    ``mode``: the fit's inference mode (:mod:`cpgbn.modes`), which a record may ask (the
    classifier's softmax inputs)."""

    def __init__(self, model, mode, n_docs: int):
        self.records = [record(model, mode, n_docs) for record in POST_FIT_RECORDS
                        if record.applies(model)]

    def visit(self, fitted, documents, data) -> None:
        """The next block: its ``documents`` (texts or a Corpus) and their cells ``data``, with
        the fit's final state ``fitted`` (:class:`~cpgbn.modes.FittedState`)."""
        for record in self.records:
            record.visit(fitted, documents, data)

    def finish(self, model, *, stacklevel: int = 3) -> dict:
        """The fitted attributes the records set, by name (a record that could not be made,
        with its warning ``stacklevel`` frames up from here, sets none); ``model`` is fitted
        by now."""
        found: dict = {}
        for record in self.records:
            found.update(record.finish(model, stacklevel + 1))
        return found
