"""The table2 study: see its script, `table2.py`."""
