"""Evaluation: the authors' and the paper's protocols (features + SVM), the n-gram baselines
(text in, labels out), a user's own labelled files (CPGBN against the baselines on one set of
splits), calibration (ECE), experiment records."""
from .calibration import expected_calibration_error
from .protocols import PROTOCOLS, evaluate, make_classifier
from .text_baselines import BASELINES, NBSVMClassifier, baseline_names, make_baseline
from .user_files import evaluate_files, evaluate_labeled

__all__ = ["BASELINES", "NBSVMClassifier", "PROTOCOLS", "baseline_names", "evaluate",
           "evaluate_files", "evaluate_labeled", "expected_calibration_error", "make_baseline",
           "make_classifier"]
