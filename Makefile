# Two entry points for a new user: `make demo` (install, train on TREC, print accuracy and
# phrases) and `make test` (the test suite).  Each creates its own virtual environment.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The datasets: $CPGBN_DATA, else ../shared/data when it exists (development), else the user
# cache, where `make demo` downloads what is missing.
export CPGBN_DATA ?= $(if $(wildcard ../shared/data/TREC),$(abspath ../shared/data))

.PHONY: install demo test test-fast test-long clean

# One pip call installs the package (editable, with its test extra) and PyTorch's CPU build.
# PyTorch's CPU build is pinned here only (the library's own requirement is a range, in the
# `torch` extra); the classifier, the hybrid and the PyTorch backend's tests need it.
# --no-compile: pip would byte-compile every file of every package, one at a time (about 50 s
# of a fresh 2-core machine's 90 s install, sympy and networkx included, which nothing here
# imports); the commands below compile what they import instead, on first import, because
# they run with bytecode writing on (RUN), which an environment may have turned off
# (PYTHONDONTWRITEBYTECODE): each later process then reads the bytecode.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-compile -e ".[test]" torch==2.13.0
	touch $@ $(VENV)/.torch

RUN := env -u PYTHONDONTWRITEBYTECODE

install: $(VENV)/.installed

# the demo uses PyTorch too, so that the README's classifier commands run after it
demo: install $(VENV)/.torch
	$(RUN) CPGBN_DOWNLOAD=1 $(VENV)/bin/cpgbn evaluate trec --layers 200 --protocol authors --seeds 0 --save-model runs/demo-trec
	$(RUN) $(VENV)/bin/cpgbn topics runs/demo-trec --kernels 12

# An environment made before PyTorch joined the one install above gets it here.
$(VENV)/.torch: $(VENV)/.installed
	$(PY) -m pip install --quiet torch==2.13.0
	touch $@

# The suite runs in TEST_WORKERS pytest-xdist processes (one per core of the 2-core CI machine;
# `make test TEST_WORKERS=auto` for one per core elsewhere, 0 for a single process), each test
# sent to the first idle worker (--maxschedchunk 1).  tests/conftest.py gives every worker its
# own numba cache inside the session's fresh one, and runs the statistical tests first.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --maxschedchunk 1

test: install $(VENV)/.torch
	$(RUN) $(PY) -m pytest -q $(XDIST)

# A contributor's edit loop: every test but the statistical ones (marker slow) and the long
# tier; `make test` before a commit.
test-fast: install $(VENV)/.torch
	$(RUN) $(PY) -m pytest -q -m "not slow and not long" $(XDIST)

# The long tier (marker long): the Geweke tests' long runs, the PyTorch sampler's four Geweke
# cases, the distributed command on the PyTorch sampler and a study's test that compiles its
# own kernels (about 25 minutes of one core, split over the workers: 20 before issue 49 moved
# the last four of those here, about 5 together): before a release note, and after any change
# to the sampler's conditionals (CONTRIBUTING.md).
test-long: install $(VENV)/.torch
	$(RUN) $(PY) -m pytest -q -m long $(XDIST)

clean:
	rm -rf $(VENV) runs build *.egg-info
