"""The prior_share study: see its script, `prior_share.py`."""
