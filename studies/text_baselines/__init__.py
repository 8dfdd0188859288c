"""The text_baselines study: see its script, `text_baselines.py`."""
