"""The classifier_study study: see its script, `classifier_study.py`."""
