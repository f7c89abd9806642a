r"""The ledger: every release and its cost recorded durably before the result is returned.

* :mod:`dpkit.ledger._base`: the :class:`Ledger` protocol (reserve, commit, abort, rollup), the
  :class:`Reservation`, :class:`LedgerEntry` and :class:`Rollup` values, the exact record format of
  guarantees, and :class:`LedgerError`.
* :mod:`dpkit.ledger._core`: what every ledger shares (validation, composition through the
  Accountant, the record's rows, the two-phase protocol); a backend only stores.
* :mod:`dpkit.ledger.sqlite`: :class:`SQLiteLedger`, the default: one SQLite file (WAL,
  ``synchronous=FULL``), ``BEGIN IMMEDIATE`` check-and-reserve, safe across processes and crashes on
  one machine.
* :mod:`dpkit.ledger.postgres`: :class:`PostgresLedger`, one budget shared by a team on a
  PostgreSQL server (a row lock on the budget for check-and-reserve; needs ``dpkit[postgres]``).

:func:`open_ledger` picks one from what it is given: a ``postgresql://`` URL or a file path.

Protocol: ``reserve`` (atomic check against the budget, durable ``reserved`` row, or
:class:`~dpkit.errors.BudgetExceededError` with nothing written) → compute and add noise →
``commit`` → return the value; ``abort`` only if no noisy value exists.  A reservation never
committed nor aborted (its process died) counts as spent.  ``spend(...)`` reserves at once and returns a
:class:`SpendHandle`: ``with ledger.spend(x):`` commits when the block ends (aborts if it raises); a plain
call charges all the same and is committed with ``handle.commit()``.

Examples
--------
>>> import tempfile; from dpkit.guarantees import PureDP
>>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/budget.db", budget=PureDP(1.0)) as ledger:
...     with ledger.spend(PureDP(0.4), label="count"): pass
...     print(ledger.remaining())
0.6-DP
"""

from __future__ import annotations

import os

from dpkit.errors import InvalidArgumentError
from dpkit.ledger._base import (
    Budget,
    Ledger,
    LedgerEntry,
    LedgerError,
    Reservation,
    Rollup,
    SpendHandle,
    guarantee_from_record,
    guarantee_to_record,
)
from dpkit.ledger._core import FilterSpec
from dpkit.ledger.postgres import PostgresLedger
from dpkit.ledger.sqlite import SQLiteLedger

__all__ = [
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "PostgresLedger",
    "Reservation",
    "Rollup",
    "SQLiteLedger",
    "SpendHandle",
    "guarantee_from_record",
    "guarantee_to_record",
    "open_ledger",
]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_ledger(
    target: str | os.PathLike[str], *, budget: Budget | None = None, timeout: float = 60.0,
    filter: FilterSpec | None = None,
) -> SQLiteLedger | PostgresLedger:
    """Open (or create) the ledger that ``target`` names: a PostgreSQL URL or a SQLite file.

    Parameters
    ----------
    target : str or os.PathLike
        ``postgresql://user@host:port/dbname`` (or ``postgres://``) for a :class:`PostgresLedger`
        shared by a team; any other path for a :class:`SQLiteLedger` file on this machine.
    budget : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders), optional
        The total budget of a new ledger; an existing ledger keeps its own (a different one is refused).
    timeout : float, finite, > 0
        Seconds to wait for another client holding the ledger's lock.
    filter : "auto", a filter kind, or {kind: delta share}, optional
        The privacy filter of a new ledger (default ``"auto"``; see :class:`dpkit.accounting.Accountant`);
        an existing ledger keeps its own (a different one is refused).

    Returns
    -------
    SQLiteLedger or PostgresLedger

    Raises
    ------
    InvalidArgumentError
        For a URL of another scheme (``mysql://...``), and as the ledger classes do.
    ArgumentTypeError, UnsupportedError, LedgerError
        As the ledger classes do.

    Examples
    --------
    >>> import tempfile; from dpkit.guarantees import PureDP
    >>> with tempfile.TemporaryDirectory() as d, open_ledger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
    ...     print(type(ledger).__name__, ledger.remaining())
    SQLiteLedger 1.0-DP
    >>> open_ledger("mysql://me@db/budget")
    Traceback (most recent call last):
    ...
    dpkit.errors.InvalidArgumentError: a ledger is a file path or a postgresql:// URL; got a mysql:// URL.
    """
    if isinstance(target, str) and "://" in target:
        if target.lower().startswith(POSTGRES_SCHEMES):
            return PostgresLedger(target, budget=budget, timeout=timeout, filter=filter)
        scheme = target.split("://", 1)[0]
        raise InvalidArgumentError(f"a ledger is a file path or a postgresql:// URL; got a {scheme}:// URL.")
    return SQLiteLedger(target, budget=budget, timeout=timeout, filter=filter)
