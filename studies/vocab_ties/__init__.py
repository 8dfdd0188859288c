"""The vocab_ties study: see its script, `vocab_ties.py`."""
