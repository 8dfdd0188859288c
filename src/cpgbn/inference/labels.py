"""A supervised fit's labels: which mark an unlabelled document, and the map from labels to
the class indices of the softmax (:class:`LabelCodes`), as the hybrid trainer's step reads
them from each batch (:mod:`cpgbn.inference.hybrid`)."""

from __future__ import annotations

import numpy as np

from ..errors import CPGBNInputError

__all__ = ["LabelCodes", "is_missing_label"]


def is_missing_label(label) -> bool:
    """Whether ``label`` marks an unlabelled document: None, an empty string, or NaN."""
    if label is None:
        return True
    if isinstance(label, str):
        return label == ""
    try:
        return bool(np.isnan(label))
    except (TypeError, ValueError):
        return False


class LabelCodes:
    """The classes of a supervised fit and the map from labels to their indices."""

    def __init__(self, classes):
        self.classes = np.asarray(classes)
        self._index = {label: code for code, label in enumerate(self.classes.tolist())}
        if len(self._index) != len(self.classes) or len(self.classes) < 2:
            raise CPGBNInputError(f"classes must be >= 2 distinct labels, got "
                                  f"{self.classes.tolist()!r}")

    def codes(self, labels, n_docs: int) -> np.ndarray:
        """(n_docs,) int64: each label's class index, -1 for an unlabelled document (every
        document of a batch without labels)."""
        if labels is None:
            return np.full(n_docs, -1, dtype=np.int64)
        out = np.empty(len(labels), dtype=np.int64)
        for j, label in enumerate(np.asarray(labels).tolist()):
            if is_missing_label(label):
                out[j] = -1
                continue
            code = self._index.get(label)
            if code is None:
                raise CPGBNInputError(f"label {label!r} is not one of the classes "
                                      f"{self.classes.tolist()!r}")
            out[j] = code
        return out
