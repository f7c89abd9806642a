r"""The SQLite ledger: a durable, multi-process budget record in a file the user names.

Contract
--------
``SQLiteLedger(path, budget=...)`` implements :class:`dpkit.ledger.Ledger` (reserve, commit,
abort, rollup) over one SQLite file; the deciding (validation, composition through the Accountant,
the two-phase protocol) is :class:`dpkit.ledger._core.SQLLedger`, shared with
:class:`~dpkit.ledger.PostgresLedger`, and this module only stores:

* **Schema.** ``meta`` (ledger id, schema version), ``budget`` (one row: the total as a
  guarantee type and JSON parameters, written once when the file is created) and ``spends``
  (id, created_at, updated_at, label, guarantee type, JSON parameters, count, state in
  ``reserved | committed | aborted``, owner ``host:pid``, metadata JSON).  The file is marked with
  ``PRAGMA application_id``; any other SQLite file, or a non-SQLite file, is refused with
  :class:`~dpkit.ledger.LedgerError` and left untouched.
* **Durability.** WAL journal with ``synchronous=FULL``: every transaction that returns has been
  fsync'd, so a spend that ``reserve`` or ``commit`` reported survives the process being killed
  and the machine losing power.
* **Atomic check-and-reserve.** ``reserve`` runs in one ``BEGIN IMMEDIATE`` transaction: it takes
  the write lock, reads every ``reserved`` and ``committed`` spend, replays them into an in-memory
  :class:`dpkit.accounting.Accountant` (adaptive filter) over the stored budget, asks it whether the
  new spend fits, and only then inserts the ``reserved`` row and commits.  Two processes (or threads)
  therefore serialise, and together they cannot exceed the budget.  A refused reserve rolls back:
  the file is byte-for-byte what it was before.
* **Crash semantics.** A process killed *before* ``reserve`` returns has written nothing (the
  transaction is rolled back by SQLite on the next open) and has no reservation, so it cannot
  have computed a release.  A process killed *after* ``reserve`` returned, whether or not it
  computed or showed a noisy value, leaves a ``reserved`` row that **counts as spent** for ever
  (conservative: the value may have been seen); :meth:`SQLiteLedger.reserved_but_uncommitted`
  lists such rows, and only an explicit :meth:`SQLiteLedger.abort` by someone who knows no value
  left the process returns that budget.  A process killed after ``commit`` leaves a ``committed``
  row.  So a result is never returned unrecorded and a recorded spend is never lost.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from dpkit.ledger._base import Budget, LedgerError
from dpkit.ledger._core import SQLLedger, check_budget, now

__all__ = ["SQLiteLedger"]

T = TypeVar("T")
APPLICATION_ID = 0x64706B6C  # "dpkl": marks a file as a dpkit ledger
SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE budget (id INTEGER PRIMARY KEY CHECK (id = 1), type TEXT NOT NULL,"
    " params TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL,"
    " updated_at TEXT NOT NULL, label TEXT NOT NULL, type TEXT NOT NULL, params TEXT NOT NULL,"
    " count INTEGER NOT NULL CHECK (count >= 1),"
    " state TEXT NOT NULL CHECK (state IN ('reserved', 'committed', 'aborted')),"
    " owner TEXT NOT NULL, metadata TEXT)",
    "CREATE INDEX spends_state ON spends (state)",
)
_TABLES = {"meta", "budget", "spends"}
_NAMES = {"meta": "meta", "budget": "budget", "spends": "spends"}


class SQLiteLedger(SQLLedger):
    r"""A durable privacy-budget ledger in one SQLite file, safe across processes and crashes.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file; created (with its schema) if it does not exist.
    budget : PureDP, ApproxDP, ZCDP or RenyiDP (finite orders), optional
        The total budget.  Required when the file is new; stored once.  On a later open it may
        be omitted (the stored budget is used) or must equal the stored one exactly.
    timeout : float, finite, > 0
        Seconds to wait for another process holding the write lock before failing.

    Raises
    ------
    ValueError
        If a new ledger gets no budget, the budget differs from the stored one, ``path`` is
        ``":memory:"`` or ``timeout`` is not finite and positive.
    TypeError
        If ``budget`` is not a budget guarantee (e.g. ``GaussianDP``) or ``path`` not a path.
    UnsupportedError
        If ``budget`` is a ``WassersteinDP`` or a ``RenyiDP`` given by a callable curve.
    LedgerError
        If the file is not an SQLite database, is an SQLite database that is not a dpkit
        ledger, or is a dpkit ledger of another schema version or corrupted.

    Notes
    -----
    See the module docstring for the transaction, durability and crash contract.  The decision
    rule is that of ``Accountant(budget, adaptive=True)``: basic composition for PureDP and
    ApproxDP budgets, the sum of rho for ZCDP, per-order sums for RenyiDP.

    Examples
    --------
    >>> import tempfile; from dpkit.guarantees import PureDP
    >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
    ...     _ = ledger.reserve(PureDP(0.25), label="count"); print(ledger.remaining())
    0.75-DP
    """

    def __init__(self, path: str | os.PathLike[str], *, budget: Budget | None = None, timeout: float = 60.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}.")
        path_str = os.fspath(path)
        if not isinstance(path_str, str):
            raise TypeError("path must be a text path, not bytes.")
        if path_str in ("", ":memory:") or path_str.startswith("file:"):
            raise ValueError(
                f"path must name a file (a ledger must be durable and shareable); got {path_str!r}."
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
            raise ValueError(f"timeout must be finite and > 0 seconds; got {timeout!r}.")
        if budget is not None:
            budget = check_budget(budget)
        self._path = path_str
        self._where = repr(path_str)
        self._timeout = float(timeout)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._inherited: list[sqlite3.Connection] = []
        self._closed = False
        try:
            self._budget, self._ledger_id = self._open(budget)
        except BaseException:
            self.close()
            raise

    # ---- connection and transactions ------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the ledger file {self._path!r}: {exc}.") from None
        try:
            # before switching to WAL, which would rewrite another app's file; one read transaction, so
            # the header and the table list come from the same snapshot (a process creating the
            # ledger at this moment must not look like "tables but no application id")
            conn.execute("BEGIN")
            try:
                self._refuse_alien(conn)
            finally:
                conn.execute("COMMIT")
            deadline = time.monotonic() + self._timeout
            while True:  # switching to WAL needs a moment's exclusive access; retry while busy
                try:
                    conn.execute("PRAGMA journal_mode=WAL").fetchone()
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            conn.execute("PRAGMA synchronous=FULL")  # fsync every commit: durability over speed
        except LedgerError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerError(
                f"{self._path!r} is not a usable SQLite database ({exc}); a ledger file must be one "
                "that dpkit created. Name a new file or restore this one."
            ) from None
        return conn

    def _refuse_alien(self, conn: sqlite3.Connection) -> None:
        """Raise LedgerError unless the file is a dpkit ledger or an empty database."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        tables = {t for t in tables if not t.startswith("sqlite_")}
        if not (app_id == APPLICATION_ID or (app_id == 0 and not tables)):
            raise LedgerError(
                f"{self._path!r} is an SQLite database but not a dpkit ledger (application_id {app_id}, "
                f"tables {sorted(tables)}); it was left untouched. Name a new file for the ledger."
            )

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise LedgerError(f"the ledger {self._path!r} is closed; open a new SQLiteLedger.")
        if self._conn is not None and os.getpid() != self._pid:  # forked: never reuse the parent's handle
            self._inherited.append(self._conn)
            self._conn = None
        if self._conn is None:
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    @contextmanager
    def _transaction(self, mode: str) -> Iterator[sqlite3.Connection]:
        """One SQLite transaction; ``IMMEDIATE`` takes the write lock at once (serialising writers)."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute(f"BEGIN {mode}")
            except sqlite3.OperationalError as exc:
                raise LedgerError(
                    f"could not lock the ledger {self._path!r} within {self._timeout:g} s ({exc}); another "
                    "process holds it. Retry, or open with a larger timeout."
                ) from None
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise LedgerError(f"the ledger {self._path!r} failed: {exc}. Nothing was changed.") from None
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _open(self, budget: Budget | None) -> tuple[Budget, str]:
        with self._transaction("IMMEDIATE") as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            tables = {t for t in tables if not t.startswith("sqlite_")}
            if app_id == APPLICATION_ID:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version != SCHEMA_VERSION:
                    raise LedgerError(
                        f"{self._path!r} is a dpkit ledger of schema version {version}; this dpkit reads "
                        f"version {SCHEMA_VERSION}."
                    )
                if not _TABLES <= tables:
                    raise LedgerError(f"{self._path!r} is a dpkit ledger missing tables {sorted(_TABLES - tables)}.")
            elif app_id == 0 and not tables:  # a new file (or an empty database): make the schema
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("ledger_id", uuid.uuid4().hex), ("created_at", now()), ("schema_version", str(SCHEMA_VERSION))],
                )
            else:
                self._refuse_alien(conn)  # raises: neither ours nor empty
                raise AssertionError("unreachable")
            return self._load_budget(conn, budget)

    # ---- state --------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The ledger file's path."""
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteLedger({self._path!r}, budget={self._budget})"

    def close(self) -> None:
        """Close the connection (idempotent).  Everything reported was already durable.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ZCDP
        >>> with tempfile.TemporaryDirectory() as d:
        ...     SQLiteLedger(f"{d}/b.db", budget=ZCDP(0.5)).close()
        """
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                self._conn.close()
            self._conn = None
            self._closed = True

    # ---- what SQLLedger needs ---------------------------------------------------------------------
    def _run(self, write: bool, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._transaction("IMMEDIATE" if write else "DEFERRED") as conn:
            return work(conn)

    def _sql(self, text: str) -> str:
        return text.format_map(_NAMES)

    def _insert(self, conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
        row_id = conn.execute(self._sql(sql), params).lastrowid  # no RETURNING: SQLite < 3.35 still works
        assert row_id is not None
        return row_id
