"""Evaluation: the authors' and the paper's protocols (features + SVM), the n-gram baselines
(text in, labels out), experiment records."""
from .protocols import PROTOCOLS, evaluate, make_classifier
from .text_baselines import BASELINES, NBSVMClassifier, baseline_names, make_baseline

__all__ = ["BASELINES", "NBSVMClassifier", "PROTOCOLS", "baseline_names", "evaluate",
           "make_baseline", "make_classifier"]
