"""Shared by the studies: record files, markdown reports, the vocabulary-fix marks, paths."""
