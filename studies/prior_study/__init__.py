"""The prior_study study: see its script, `prior_study.py`."""
