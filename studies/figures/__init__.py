"""The figures study: see its script, `figures.py`."""
