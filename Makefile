# dpkit: `make run` runs the main job, `make test` the tests, `make bench` the benchmarks.
# Each target creates its own virtual environment on first use, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot,frames,spark]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/dpkit divergence laplace --shift 1 --scale 1
	$(VENV)/bin/dpkit verify examples/randomized_response.csv --epsilon 1.0986123 --delta 0

test: $(STAMP)
	$(PY) -m pytest

test-all: $(STAMP)
	$(PY) -m pytest -m "slow or not slow"

bench: $(STAMP)
	bash benchmarks/run.sh

clean:
	rm -rf $(VENV) .bench-venv .pytest_cache
