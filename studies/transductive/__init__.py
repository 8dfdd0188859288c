"""The transductive study: see its script, `transductive.py`."""
