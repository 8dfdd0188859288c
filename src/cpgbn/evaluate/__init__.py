"""Evaluation: the authors' and the paper's protocols (features + SVM), experiment records."""
from .protocols import PROTOCOLS, evaluate, make_classifier

__all__ = ["PROTOCOLS", "evaluate", "make_classifier"]
