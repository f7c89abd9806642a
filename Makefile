# dpkit: `make run` runs the main job, `make test` the tests, `make bench` the benchmarks.
# Each target creates its own virtual environment on first use, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test test-all test-torch lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,plot,frames,spark,postgres,lint]'
	touch $(STAMP)

# The main job: a DP query on the shipped synthetic table.  The ledger ./dpkit-ledger.db holds a total
# budget of epsilon 3, each run spends 1, so the fourth run is refused (rm dpkit-ledger.db to start over).
run: $(STAMP)
	$(VENV)/bin/dpkit query examples/transactions.csv --privacy-unit user_id \
	  --epsilon 1 --budget-epsilon 3 --ledger dpkit-ledger.db \
	  --schema amount=DOUBLE,day=DATE --bounds amount=0:200 --max-partitions 2 --max-rows 5 \
	  --keys category=groceries,restaurants,transport,fuel,pharmacy,clothing,electronics,travel,entertainment,utilities \
	  "SELECT category, COUNT(*) AS purchases, AVG(amount) AS avg_amount FROM t GROUP BY category ORDER BY category"

test: $(STAMP)
	$(PY) -m pytest

# Static checks, run by .ci/run beside the tests: ruff (rule set in pyproject.toml) over the code and
# tests, the import contracts (layers; no package imports another's private module), and mypy --strict
# over all of src/dpkit ([tool.mypy] in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests tools docs
	PYTHONPATH=. $(VENV)/bin/lint-imports
	$(PY) -m mypy

test-all: $(STAMP)
	$(PY) -m pytest -m "slow or not slow"

bench: $(STAMP)
	bash benchmarks/run.sh

clean:
	rm -rf $(VENV) $(TORCH_VENV) .bench-venv .pytest_cache

# The heavy integration tests: a real Opacus training loop and a plain PyTorch DP-SGD loop on the CPU, with
# dpkit's accountant (tests/integrations).  Their own venv, so the default `make test` stays light: CPU
# torch 2.13.0 (a wheel on this machine's disk; a bare `torch` would pull a CUDA build of several GB) and
# Opacus without its dependencies (it would otherwise ask for torch again).
TORCH_VENV  := .venv-torch
TORCH_STAMP := $(TORCH_VENV)/.installed-stamp

$(TORCH_STAMP): pyproject.toml
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TORCH_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(TORCH_VENV)/bin/python -m pip install --quiet --no-deps opacus==1.6.0 opt-einsum
	$(TORCH_VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(TORCH_STAMP)

test-torch: $(TORCH_STAMP)
	$(TORCH_VENV)/bin/python -m pytest tests/integrations -p no:cacheprovider
