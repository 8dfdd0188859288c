"""Calibration of predicted class probabilities: reliability bins and the expected calibration
error (ECE).

A classifier that says "70 %" should be right about 70 % of the time.  For document i let
p_i be its predicted probabilities (one per class, summing to one), its *confidence*
c_i = max_k p_ik (the top-class probability), its prediction the class of that column (the
first such column on ties, as ``np.argmax``) and a_i = 1 if that prediction is its label,
else 0.  The confidences are put into M equal-width bins over [0, 1],

    B_m = { i : (m - 1) / M < c_i <= m / M },      m = 1, ..., M

(the edges are ``np.linspace(0, 1, M + 1)``; a confidence of exactly 0 falls in B_1), and

    ECE = sum_m (|B_m| / n) * | acc(B_m) - conf(B_m) |,
    acc(B_m) = mean of a_i over B_m,      conf(B_m) = mean of c_i over B_m,

with n the number of documents and empty bins contributing nothing (Naeini, Cooper &
Hauskrecht 2015; Guo et al., "On calibration of modern neural networks", ICML 2017, eq. 3,
whose M = 15 is the default here).  ECE is in [0, 1]: 0 when every bin's accuracy equals its
mean confidence, 1 when every prediction is wrong at confidence 1.  It depends on the bins
(a coarse summary, not a proper scoring rule); report M with it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CPGBNInputError, check_int

__all__ = ["DEFAULT_BINS", "CalibrationBins", "calibration_bins", "expected_calibration_error",
           "top_class"]

#: Guo et al.'s (2017) number of bins.
DEFAULT_BINS = 15


@dataclass(frozen=True)
class CalibrationBins:
    """The reliability bins of :func:`calibration_bins`, one entry per bin (M of them).

    edges : (M + 1,) the bin edges, ``np.linspace(0, 1, M + 1)``; bin m is (edges[m], edges[m+1]].
    counts : (M,) |B_m|, documents per bin.
    accuracy, confidence : (M,) acc(B_m) and conf(B_m); NaN for an empty bin.
    """

    edges: np.ndarray
    counts: np.ndarray
    accuracy: np.ndarray
    confidence: np.ndarray

    @property
    def ece(self) -> float:
        """sum_m (|B_m| / n) |acc(B_m) - conf(B_m)| over the non-empty bins."""
        used = self.counts > 0
        gaps = np.abs(self.accuracy[used] - self.confidence[used])
        return float(np.sum(self.counts[used] * gaps) / self.counts.sum())


def top_class(proba, classes) -> tuple[np.ndarray, np.ndarray]:
    """(predicted class, confidence) per row of ``proba`` (n, K), whose columns are ``classes``
    in order: ``classes[np.argmax(proba, 1)]`` and ``np.max(proba, 1)``."""
    proba = np.asarray(proba, dtype=np.float64)
    classes = np.asarray(classes)
    if proba.ndim != 2 or proba.shape[1] != len(classes) or proba.shape[0] == 0:
        raise CPGBNInputError(f"proba must be a non-empty (n_documents, {len(classes)}) array "
                              f"(one column per class), got shape {proba.shape}")
    if not np.all(np.isfinite(proba)) or proba.min() < 0 or proba.max() > 1:
        raise CPGBNInputError("proba must hold probabilities in [0, 1]")
    column = np.argmax(proba, axis=1)
    return classes[column], proba[np.arange(len(proba)), column]


def calibration_bins(confidence, correct, *, n_bins: int = DEFAULT_BINS) -> CalibrationBins:
    """The M = ``n_bins`` equal-width reliability bins of confidences in [0, 1] and whether each
    prediction was right (``correct``, booleans); see the module docstring."""
    n_bins = check_int("n_bins", n_bins, 1)
    confidence = np.asarray(confidence, dtype=np.float64).ravel()
    correct = np.asarray(correct, dtype=bool).ravel()
    if confidence.size == 0 or confidence.shape != correct.shape:
        raise CPGBNInputError(f"confidence and correct must be non-empty and of one length, got "
                              f"{confidence.size} and {correct.size}")
    if not np.all((confidence >= 0) & (confidence <= 1)):
        raise CPGBNInputError("confidences must be in [0, 1]")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # bin m (0-based) holds edges[m] < c <= edges[m + 1]; c = 0 joins bin 0
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(index, weights=correct, minlength=n_bins) / counts
        mean_confidence = np.bincount(index, weights=confidence, minlength=n_bins) / counts
    return CalibrationBins(edges, counts, accuracy, mean_confidence)


def expected_calibration_error(y_true, proba, classes, *, n_bins: int = DEFAULT_BINS) -> float:
    """ECE of predicted probabilities ``proba`` (n, K; columns in the order of ``classes``, as a
    scikit-learn classifier's ``predict_proba`` and ``classes_``) against the labels ``y_true``:
    equal-width bins over the top-class probability, each weighted by its share of the
    documents (module docstring)."""
    predicted, confidence = top_class(proba, classes)
    y_true = np.asarray(y_true)
    if y_true.shape != predicted.shape:
        raise CPGBNInputError(f"y_true has {y_true.size} labels for {len(predicted)} rows of proba")
    return calibration_bins(confidence, predicted == y_true, n_bins=n_bins).ece
