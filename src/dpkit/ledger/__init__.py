r"""The ledger: every release and its cost recorded durably before the result is returned.

* :mod:`dpkit.ledger._base`: the :class:`Ledger` protocol (reserve, commit, abort, rollup), the
  :class:`Reservation`, :class:`LedgerEntry` and :class:`Rollup` values, the exact record format of
  guarantees, and :class:`LedgerError`.
* :mod:`dpkit.ledger.sqlite`: :class:`SQLiteLedger`, the default: one SQLite file (WAL,
  ``synchronous=FULL``), ``BEGIN IMMEDIATE`` check-and-reserve, safe across processes and crashes.

Protocol: ``reserve`` (atomic check against the budget, durable ``reserved`` row, or
:class:`~dpkit.errors.BudgetExceededError` with nothing written) → compute and add noise →
``commit`` → return the value; ``abort`` only if no noisy value exists.  A reservation never
committed nor aborted (its process died) counts as spent.

Examples
--------
>>> import tempfile; from dpkit.guarantees import PureDP
>>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/budget.db", budget=PureDP(1.0)) as ledger:
...     with ledger.spend(PureDP(0.4), label="count"): pass
...     print(ledger.remaining())
0.6-DP
"""

from dpkit.ledger._base import (
    Ledger,
    LedgerEntry,
    LedgerError,
    Reservation,
    Rollup,
    guarantee_from_record,
    guarantee_to_record,
)
from dpkit.ledger.sqlite import SQLiteLedger

__all__ = [
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "Reservation",
    "Rollup",
    "SQLiteLedger",
    "guarantee_from_record",
    "guarantee_to_record",
]
