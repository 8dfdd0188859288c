"""Reading a classifier (:class:`cpgbn.classifier.CPGBNClassifier`): which phrase kernels and
topics push towards each class, and which phrases of one document moved its decision.

* :func:`class_units`: per class, the units of the softmax's input (kernels of layer 1,
  topics of layers 2..T) with the largest weight towards it, each with its top phrases.  The
  weight of unit u towards class c is W[c, u] minus the mean of W[:, u] over the classes (the
  softmax is unchanged by adding one number to every class's weight, so only these
  differences mean anything; for two classes, half the difference of the two rows).  It
  multiplies ln(1 + theta_u / S_j), so a weight is the change in the class's log-odds when
  the unit's per-position activation grows by a factor e (roughly: for small activations,
  by one unit).
* :func:`explain_document`: for one text, the predicted class, the probabilities, and the
  phrases (the F-word windows of the convolution) whose kernels moved the decision most,
  by gradient times input at the encoder's mean path
  (:meth:`~cpgbn.classifier.CPGBNClassifier.position_attributions`), and a score per token
  for highlighting: the fall of the class's log-odds when that token alone is removed, its
  column left empty (occlusion: exact, where gradient times input at the words was not
  faithful through the encoder's exponentials: on the planted corpus it scored the deciding
  words against the class).

:func:`format_class_units` and :func:`format_document` print them; the HTML report
(:mod:`cpgbn.explain.report`) shows the same records.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ..errors import CPGBNInputError
from .phrases import best_phrases
from .hierarchy import phrase_matrix

__all__ = ["ClassUnit", "ClassPhrase", "PhraseContribution", "RANKINGS", "class_phrases",
           "format_class_phrases", "DocumentExplanation", "class_units",
           "explain_document", "format_class_units", "format_document", "require_classifier"]


def require_classifier(model) -> None:
    """A one-line CPGBNInputError unless ``model`` is a fitted classifier."""
    if not is_classifier(model):
        raise CPGBNInputError("this model was fitted without labels: its explanations by class "
                              "need a CPGBNClassifier (`cpgbn fit ... --supervised`)")
    check_is_fitted(model)


@dataclass(frozen=True)
class ClassUnit:
    """One unit of the softmax's input and how it pushes towards a class."""

    layer: int
    """0: a filter of the encoder (its pooled activation h^(1)); 1: a kernel (phrase topic of
    layer 1); t > 1: a topic of layer t."""
    unit: int
    weight: float
    """Its softmax weight towards the class, centred over the classes."""
    usage: float | None
    """The mean of the unit's input to the softmax over the training documents (None for a
    model that did not record it: a distributed fit, or one saved before it was recorded)."""
    phrases: tuple[str, ...]
    """Its phrases: for a filter, the windows of the training documents that carry most of
    its activation; for a kernel or topic, its most probable phrases (a deeper topic's
    projected onto the kernels)."""
    counts: tuple[int, ...] | None = None
    """A filter's: how often each of its phrases occurs in the training documents."""

    @property
    def push(self) -> float:
        """weight x usage: the unit's mean contribution to the class's log-odds over the
        training documents (the weight alone where no usage was recorded)."""
        return self.weight if self.usage is None else self.weight * self.usage


@dataclass(frozen=True)
class PhraseContribution:
    """A window of a document and how much it moved the decision."""

    start: int
    """Index of its first token in the document's tokens (may be < 0 with padding)."""
    words: tuple[str, ...]
    score: float
    """Its contribution to the class's log-odds: > 0 towards the class."""
    kernel: int
    """The kernel that carries most of it."""


@dataclass(frozen=True)
class DocumentExplanation:
    """One document's prediction and the phrases behind it (:func:`explain_document`)."""

    tokens: tuple[str, ...]
    predicted: object
    probabilities: dict
    explained_class: object
    phrases: tuple[PhraseContribution, ...]
    """The windows with the largest |score|, largest first."""
    token_scores: np.ndarray
    """(L,) per token: how much the class's log-odds falls when the token is removed, its
    column left empty (occlusion; > 0: the word pushes towards the class)."""
    unit: str = "kernel"
    """What a phrase's ``kernel`` numbers: "kernel" (a softmax on theta) or "filter" (the
    encoder's filter, when the softmax reads h^(1))."""


def _unit_weights(model) -> np.ndarray:
    """(C, units): the softmax's weight of each input unit towards each class, centred over
    the classes (module docstring)."""
    weight = np.asarray(model.encoder_weights_["classifier.weight"], dtype=np.float64)
    return weight - weight.mean(axis=0, keepdims=True)


def _reads_hidden(model) -> bool:
    """Whether the softmax reads the encoder's pooled first hidden layer h^(1)."""
    return model.softmax_input_ != "theta"


def _softmax_inputs(model) -> list:
    """[(layer, number of units)] in the order of the softmax's input: layer 0 for the
    encoder's filters (the pooled first hidden layer h^(1), when the softmax reads it), then
    t = 1..T for theta^(t) (when it reads them)."""
    read = model.softmax_input_
    parts = [(0, model.layers_[0])] if read != "theta" else []
    if read != "hidden":
        parts += [(t, k) for t, k in enumerate(model.layers_, start=1)]
    return parts


def _filter_phrases(model, unit: int, top_n: int) -> tuple[list[str], list[int] | None]:
    """(phrases, counts) of the encoder's filter ``unit``: the windows of the training
    documents that carry most of its activation, with their counts (``filter_windows_``,
    :mod:`cpgbn.explain.filters`); for a model that did not record them, the per-column view
    (for every column f, the word of the i-th largest weight C_1[unit, v, f]) and no counts."""
    recorded = model.recorded("filter_windows_")
    if recorded is not None:
        windows = np.asarray(recorded, dtype=np.int64)[unit, :top_n]
        counts = np.asarray(model.filter_window_counts_, dtype=np.int64)[unit, :top_n]
        keep = counts > 0
        return ([" ".join(model.vocabulary_.decode([int(v) for v in row if v >= 0]))
                 for row in windows[keep]], counts[keep].tolist())
    table = np.asarray(model.encoder_weights_["conv1.weight"])
    V, F = len(model.vocabulary_), model.globals_.D.shape[1]
    weights = table.reshape(V, F, -1)[:, :, unit]            # (V, F)
    order = np.argsort(-weights, axis=0)[:top_n]              # (top_n, F)
    return [" ".join(model.vocabulary_.decode(row.tolist())) for row in order], None


@dataclass(frozen=True)
class ClassPhrase:
    """A window of the training documents that pushes towards a class."""

    text: str
    count: int
    """Its occurrences in the training documents."""
    push: float
    """sum_k W_ck H_k: its first-order push on the class's logit per unit of mean activation
    (:func:`cpgbn.explain.filters.class_windows`)."""


def class_phrases(model, *, top: int = 10) -> dict | None:
    """{class: [ClassPhrase, ...]}: per class the ``top`` windows of the training documents
    (occurring at least 3 times, without the out-of-vocabulary word) that push most towards
    it, ranked by push x ln(1 + count);
    None for a model that recorded none (a softmax on theta alone, a distributed fit, a model
    saved before they were recorded)."""
    require_classifier(model)
    recorded = model.recorded("class_windows_")
    if recorded is None:
        return None
    windows = np.asarray(recorded, dtype=np.int64)
    counts = np.asarray(model.class_window_counts_, dtype=np.int64)
    pushes = np.asarray(model.class_window_pushes_, dtype=np.float64)
    out = {}
    for c, label in enumerate(model.classes_.tolist()):
        out[label] = [ClassPhrase(" ".join(model.vocabulary_.decode([int(v) for v in w if v >= 0])),
                                  int(n), float(p))
                      for w, n, p in zip(windows[c, :top], counts[c, :top], pushes[c, :top])
                      if n > 0]
    return out


def format_class_phrases(phrases: dict) -> str:
    """:func:`class_phrases` as text: per class one line of phrases with counts."""
    lines = ["phrases of the training documents that push most towards each class "
             "(push x ln(1 + count); xN: occurrences):"]
    for label, rows in phrases.items():
        lines.append(f"class {label}: " + " | ".join(f'"{p.text}" x{p.count}' for p in rows))
    return "\n".join(lines)


#: How :func:`class_units` ranks a class's units
RANKINGS = ("push", "weight")


def class_units(model, *, top: int = 5, phrases: int = 2, layers=None,
                rank: str = "push") -> dict:
    """{class: [ClassUnit, ...]}: per class the ``top`` units that push most towards it
    (module docstring), among the layers ``layers`` (default all the softmax reads; 0 is the
    encoder's filters, read through the pooled first hidden layer), each with ``phrases`` of
    its phrases.  ``rank``: "push", the weight times the unit's usage in the training
    documents (a unit with a large weight that is rarely active does not decide much; the
    weight alone where the model recorded no usage), or "weight"."""
    require_classifier(model)
    if rank not in RANKINGS:
        raise CPGBNInputError(f"rank must be one of {RANKINGS}, got {rank!r}")
    weights = _unit_weights(model)
    usage = model.recorded("softmax_input_mean_")
    parts = _softmax_inputs(model)
    known = [t for t, _ in parts]
    layers = known if layers is None else [int(t) for t in layers]
    for t in layers:
        if t not in known:
            raise CPGBNInputError(f"layer must be one of {known} (0: the encoder's filters), "
                                  f"got {t}")
    offsets = dict(zip(known, np.concatenate([[0], np.cumsum([k for _, k in parts])])))
    sizes = dict(parts)
    out = {}
    for c, label in enumerate(model.classes_.tolist()):
        candidates = []
        for t in layers:
            for unit in range(sizes[t]):
                column = offsets[t] + unit
                candidates.append(ClassUnit(t, unit, float(weights[c, column]),
                                            None if usage is None else float(usage[column]),
                                            ()))
        candidates.sort(key=lambda u: -(u.push if rank == "push" else u.weight))
        units = []
        for u in candidates[:top]:
            counts = None
            if u.layer == 0:
                texts, counts = _filter_phrases(model, u.unit, phrases)
            else:
                texts = [p.text for p in best_phrases(phrase_matrix(model.globals_, u.layer,
                                                                    u.unit),
                                                      model.vocabulary_, top_n=phrases)]
            units.append(ClassUnit(u.layer, u.unit, u.weight, u.usage, tuple(texts),
                                   None if counts is None else tuple(counts)))
        out[label] = units
    return out


def explain_document(model, text: str, *, top: int = 5, explained_class=None
                     ) -> DocumentExplanation:
    """The prediction for ``text`` and the ``top`` windows that moved it most towards
    ``explained_class`` (default: the predicted class); module docstring."""
    require_classifier(model)
    if not isinstance(text, str):
        raise CPGBNInputError(f"text must be a string, got {type(text).__name__}")
    probabilities = model.predict_proba([text])[0]
    predicted = model.classes_[int(np.argmax(probabilities))]
    target = predicted if explained_class is None else explained_class
    corpus, data, by_window, index = model.position_attributions([text], [target])
    ids = corpus.tokens[corpus.offsets[0]:corpus.offsets[1]]
    tokens = tuple(model.vocabulary_.decode(ids))
    F, padding = model.globals_.D.shape[1], int(model.padding)
    scores = by_window.sum(axis=1)
    kernels = np.argmax(np.abs(by_window), axis=1)
    windows = []
    for s, score in enumerate(scores):
        start = s - padding
        covered = [i for i in range(start, start + F) if 0 <= i < len(tokens)]
        windows.append(PhraseContribution(start, tuple(tokens[i] for i in covered),
                                          float(score), int(kernels[s])))
    token_scores = _occlusion(model, data, int(index[0]))
    windows.sort(key=lambda w: -abs(w.score))
    return DocumentExplanation(tokens, predicted,
                               dict(zip(model.classes_.tolist(), map(float, probabilities))),
                               target, tuple(windows[:top]), token_scores,
                               "filter" if _reads_hidden(model) else "kernel")


def _log_odds(p: np.ndarray, c: int) -> np.ndarray:
    p = np.clip(p[:, c], 1e-300, None)
    return np.log(p) - np.log(np.clip(1.0 - p, 1e-300, None))


def _occlusion(model, data, c: int) -> np.ndarray:
    """(L,) per token: the drop of class c's log-odds when that one token is removed and its
    column left empty (the others kept in place; an empty column is what the model reads
    where there is no word, as in a short document's padding): > 0 where the word pushes
    towards c.  L + 1 forward passes of the encoder, as one batch of the document's cells.

    Not the out-of-vocabulary word in its place: the model learns a row for that word like
    any other (on MR its windows push towards the negative class), so replacing a word by it
    mixes the word's push with the unknown word's."""
    n = data.n_cells
    keep = [np.arange(n)] + [np.delete(np.arange(n), i) for i in range(n)]
    rows = np.concatenate(keep)
    sizes = np.array([len(k) for k in keep], dtype=np.int64)
    variants = dataclasses.replace(
        data, cell_word=data.cell_word[rows], cell_col=data.cell_col[rows],
        cell_count=data.cell_count[rows] if len(data.cell_count) else data.cell_count,
        doc_cells=np.concatenate([[0], np.cumsum(sizes)]),
        doc_length=np.repeat(data.doc_length, n + 1),
        doc_positions=np.arange(n + 2, dtype=np.int64) * int(data.doc_positions[1]),
        true_length=np.repeat(data.true_length, n + 1))
    odds = _log_odds(model.cell_probabilities(variants), c)
    return odds[0] - odds[1:]


def format_class_units(units: dict) -> str:
    """:func:`class_units` as text: one block per class, one line per unit (its push, weight
    and usage, then its phrases with their counts in the training documents)."""
    lines = []
    recorded = any(u.usage is not None for rows in units.values() for u in rows)
    lines.append("units ranked by push = weight x usage (the unit's mean input to the softmax "
                 "over the training documents)" if recorded else
                 "units ranked by softmax weight (this model recorded no usage)")
    for label, rows in units.items():
        lines.append(f"class {label}:")
        for u in rows:
            name = ({0: f"filter {u.unit}", 1: f"kernel {u.unit}"}.get(u.layer)
                    or f"layer {u.layer} topic {u.unit}")
            phrases = [f'"{p}"' + ("" if u.counts is None else f" x{n}")
                       for p, n in zip(u.phrases, u.counts or [None] * len(u.phrases))]
            how = (f"{u.weight:+.2f} x {u.usage:.3f}" if u.usage is not None else "")
            lines.append(f"  {u.push:+7.3f}  {name:<11} {how:<15} {' | '.join(phrases)}")
    return "\n".join(lines)


def format_document(explanation: DocumentExplanation) -> str:
    """:func:`explain_document`'s record as text: the prediction, then the phrases."""
    probs = ", ".join(f"{label} {p:.3f}" for label, p in explanation.probabilities.items())
    lines = [f"predicted: {explanation.predicted}  ({probs})",
             f"phrases that moved it towards {explanation.explained_class} (+) or away (-):"]
    for w in explanation.phrases:
        lines.append(f"  {w.score:+7.3f}  words {max(w.start, 0) + 1}-"
                     f"{max(w.start, 0) + len(w.words)}: {' '.join(w.words)!r}  "
                     f"({explanation.unit} {w.kernel})")
    return "\n".join(lines)
