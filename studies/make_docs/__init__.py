"""Generators of the documentation: the tables of README.md and docs/ (from results/), docs/bad_input.md."""
