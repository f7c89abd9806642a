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
	$(PY) -m pip install --quiet -e '.[test,plot,frames,spark,postgres]'
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

test-all: $(STAMP)
	$(PY) -m pytest -m "slow or not slow"

bench: $(STAMP)
	bash benchmarks/run.sh

clean:
	rm -rf $(VENV) .bench-venv .pytest_cache
