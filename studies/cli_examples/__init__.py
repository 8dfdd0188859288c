"""The cli_examples study: see its script, `cli_examples.py`."""
