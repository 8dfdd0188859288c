"""The feature_source study: see its script, `feature_source.py`."""
