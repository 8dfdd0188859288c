"""The token_count study: see its script, `token_count.py`."""
