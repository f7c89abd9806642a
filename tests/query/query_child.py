"""A child process for the query ledger tests (run as a script, never imported by a test).

Usage: ``python query_child.py MODE DATA LEDGER [ARGS...]``: a DuckDB Session over the CSV file
DATA with privacy unit ``uid`` and the existing ledger file LEDGER.  It prints one line per event,
flushed, so the parent can follow it and kill it at a chosen moment.

* ``race DATA LEDGER N EPSILON``: print ``ready``, wait for a line on stdin (the parent sends it to
  every child at once), then run N queries of cost PureDP(EPSILON); print ``ok`` or ``refused`` for
  each.
* ``loop DATA LEDGER EPSILON``: print ``ready``, then run queries of cost PureDP(EPSILON) one after
  the other, printing ``result N`` (N = the noisy count) after each returns, until refused (then
  print ``refused`` and sleep) or killed.
"""

from __future__ import annotations

import sys
import time

QUERY = "SELECT k, COUNT(*) AS n FROM t GROUP BY k"
KEYS = {"k": ["a", "b", "c"]}


def main(argv: list[str]) -> None:
    from dpkit.errors import BudgetExceededError
    from dpkit.query import Session

    mode, data, ledger = argv[0], argv[1], argv[2]
    session = Session(
        data, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=ledger, schema={"uid": "BIGINT", "x": "DOUBLE"}
    )

    def say(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    if mode == "race":
        n, epsilon = int(argv[3]), float(argv[4])
        say("ready")
        sys.stdin.readline()
        for _ in range(n):
            try:
                session.sql(QUERY, epsilon=epsilon, keys=KEYS)
            except BudgetExceededError:
                say("refused")
                continue
            say("ok")
    elif mode == "loop":
        epsilon = float(argv[3])
        say("ready")
        while True:
            try:
                r = session.sql(QUERY, epsilon=epsilon, keys=KEYS)
            except BudgetExceededError:
                say("refused")
                time.sleep(3600)
            say(f"result {r.rows[0][1]}")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
