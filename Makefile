# Two entry points for a new user: `make demo` (install, train on TREC, print accuracy and
# phrases) and `make test` (the test suite).  Each creates its own virtual environment.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Development default for the datasets; users set CPGBN_DATA or pass --data-dir.
export CPGBN_DATA ?= $(abspath ../shared/data)

.PHONY: install demo test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/cpgbn evaluate trec --layers 200 --protocol authors --seeds 0 --save-model runs/demo-trec
	$(VENV)/bin/cpgbn topics runs/demo-trec --kernels 12 --top 4

test: install
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) runs build *.egg-info
