"""Loading a saved model as the estimator that saved it (:func:`load_estimator`): the
commands that read any model (topics, tree, report, summary, transform) use it, so that a
classifier's directory opens as a :class:`~cpgbn.classifier.CPGBNClassifier` and every other
as a :class:`~cpgbn.model.CPGBN`.  Apart from :mod:`cpgbn.io`, which both estimators use to
save and load themselves."""
from __future__ import annotations

from pathlib import Path

from .io import saved_estimator

__all__ = ["load_estimator"]


def load_estimator(directory):
    """The model saved in ``directory`` as the estimator that saved it: a
    :class:`~cpgbn.classifier.CPGBNClassifier` where ``model.json`` names it, else a
    :class:`~cpgbn.model.CPGBN`."""
    if saved_estimator(Path(directory)) == "CPGBNClassifier":
        from .classifier import CPGBNClassifier
        return CPGBNClassifier.load(directory)
    from .model import CPGBN
    return CPGBN.load(directory)
