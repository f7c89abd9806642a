r"""The SQLite ledger: a durable, multi-process budget record in a file the user names.

Contract
--------
``SQLiteLedger(path, budget=...)`` implements :class:`dpkit.ledger.Ledger` (reserve, commit,
abort, rollup) over one SQLite file; the deciding (validation, composition through the Accountant,
the two-phase protocol) is :class:`dpkit.ledger._core.SQLLedger`, shared with
:class:`~dpkit.ledger.PostgresLedger`, and this module only stores:

* **Schema** (version 2). ``meta`` (ledger id, schema version, ``filter``: the privacy filter choice,
  ``aborts``: a counter bumped by every abort), ``budget`` (one row: the total as a guarantee type
  and JSON parameters, written once when the file is created) and ``spends`` (id, created_at,
  updated_at, label, type, JSON parameters, count, state in ``reserved | committed | aborted``,
  owner ``host:pid``, metadata JSON, ``item``: the spend's
  :class:`~dpkit.accounting.items.PrivacyItem` as JSON).  A version-1 file (no ``item``, ``filter``
  or ``aborts``) is migrated when it is opened, in the opening transaction: its rows keep their
  guarantees (read as items) and its filter is ``"basic"``, the rule it was decided by.  The file is marked with
  ``PRAGMA application_id``; any other SQLite file, or a non-SQLite file, is refused with
  :class:`~dpkit.ledger.LedgerError` and left untouched.
* **Durability.** WAL journal with ``synchronous=FULL``: every transaction that returns has been
  fsync'd, so a spend that ``reserve`` or ``commit`` reported survives the process being killed
  and the machine losing power.
* **Atomic check-and-reserve.** ``reserve`` runs in one ``BEGIN IMMEDIATE`` transaction: it takes
  the write lock, brings its replay of every ``reserved`` and ``committed`` spend (an in-memory
  adaptive :class:`dpkit.accounting.Accountant` over the stored budget and filter, kept between calls)
  up to date, asks it whether the new spend fits, and only then inserts the ``reserved`` row and
  commits.  Two processes (or threads)
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
from typing import Any, TypeVar, cast

from dpkit.errors import ArgumentTypeError, InvalidArgumentError, LedgerUnavailableError
from dpkit.ledger._base import Budget, Connection, LedgerError
from dpkit.ledger._core import LEGACY_FILTER, FilterSpec, SQLLedger, check_budget, filter_to_text, now

__all__ = ["SQLiteLedger"]

T = TypeVar("T")
APPLICATION_ID = 0x64706B6C  # "dpkl": marks a file as a dpkit ledger
SCHEMA_VERSION = 2

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE budget (id INTEGER PRIMARY KEY CHECK (id = 1), type TEXT NOT NULL,"
    " params TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL,"
    " updated_at TEXT NOT NULL, label TEXT NOT NULL, type TEXT NOT NULL, params TEXT NOT NULL,"
    " count INTEGER NOT NULL CHECK (count >= 1),"
    " state TEXT NOT NULL CHECK (state IN ('reserved', 'committed', 'aborted')),"
    " owner TEXT NOT NULL, metadata TEXT, item TEXT)",
    "CREATE INDEX spends_state ON spends (state)",
)
# version -> the statements that take a file from version - 1 to it (version 1 is _SCHEMA without ``item``)
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE spends ADD COLUMN item TEXT",
        f"INSERT INTO meta (key, value) VALUES ('filter', '{filter_to_text(LEGACY_FILTER)}'), ('aborts', '0')"),
}
_UNAVAILABLE = ("SQLITE_READONLY", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_PERM", "SQLITE_CANTOPEN", "SQLITE_AUTH")
_TABLES = {"meta", "budget", "spends"}
_NAMES = {"meta": "meta", "budget": "budget", "spends": "spends"}


class SQLiteLedger(SQLLedger):
    r"""A durable privacy-budget ledger in one SQLite file, safe across processes and crashes.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file; created (with its schema) if it does not exist.
    budget : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders), optional
        The total budget.  Required when the file is new; stored once.  On a later open it may
        be omitted (the stored budget is used) or must equal the stored one exactly.
    timeout : float, finite, > 0
        Seconds to wait for another process holding the write lock before failing.
    filter : "auto", a filter kind, or {kind: delta share}, optional
        The privacy filter of an ApproxDP budget (as ``Accountant(budget, filter=...)``), stored when
        the file is created (default ``"auto"``); on a later open it may be omitted or must equal the
        stored one.

    Raises
    ------
    InvalidArgumentError
        If a new ledger gets no budget, the budget differs from the stored one, ``path`` is
        ``":memory:"`` or ``timeout`` is not finite and positive.
    ArgumentTypeError
        If ``budget`` is not a budget guarantee or ``path`` not a path.
    UnsupportedError
        If ``budget`` is a ``WassersteinDP`` or a ``RenyiDP`` given by a callable curve.
    LedgerUnavailableError
        If the file (or its directory) is read-only, or another process holds its lock past ``timeout``.
    LedgerError
        If the file is not an SQLite database, is an SQLite database that is not a dpkit
        ledger, or is a dpkit ledger of a newer schema version or corrupted.

    Notes
    -----
    See the module docstring for the transaction, durability and crash contract.  The decision
    rule is that of ``Accountant(budget, adaptive=True, filter=ledger.filter)``: the sum of epsilon
    for PureDP, of rho for ZCDP, of mu^2 for GaussianDP, per order for RenyiDP, and the stored filter
    set (zCDP, GDP, RDP, basic or approximate-DP filter) for ApproxDP.

    Examples
    --------
    >>> import tempfile; from dpkit.guarantees import PureDP
    >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
    ...     _ = ledger.reserve(PureDP(0.25), label="count"); print(ledger.remaining())
    0.75-DP
    """

    def __init__(self, path: str | os.PathLike[str], *, budget: Budget | None = None, timeout: float = 60.0,
                 filter: FilterSpec | None = None) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentTypeError(f"path must be a str or os.PathLike; got {type(path).__name__}.")
        path_str = os.fspath(path)
        if not isinstance(path_str, str):
            raise ArgumentTypeError("path must be a text path, not bytes.")
        if path_str in ("", ":memory:") or path_str.startswith("file:"):
            raise InvalidArgumentError(
                f"path must name a file (a ledger must be durable and shareable); got {path_str!r}."
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
            raise InvalidArgumentError(f"timeout must be finite and > 0 seconds; got {timeout!r}.")
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
        self._init_core()
        try:
            self._budget, self._ledger_id = self._open(budget, filter)
        except BaseException:
            self.close()
            raise

    # ---- connection and transactions ------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            if self._read_only():
                raise self._unavailable(exc) from None
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
            if self._is_unavailable(exc):
                raise self._unavailable(exc) from None
            raise LedgerError(
                f"{self._path!r} is not a usable SQLite database ({exc}); a ledger file must be one "
                "that dpkit created. Name a new file or restore this one."
            ) from None
        return conn

    def _read_only(self) -> bool:
        """True if the file exists but cannot be written, or would be created in a directory that cannot be."""
        if os.path.exists(self._path):
            return not os.access(self._path, os.W_OK) or not os.access(os.path.dirname(os.path.abspath(self._path)),
                                                                      os.W_OK | os.X_OK)
        parent = os.path.dirname(os.path.abspath(self._path))
        return os.path.isdir(parent) and not os.access(parent, os.W_OK | os.X_OK)

    def _is_unavailable(self, exc: sqlite3.Error) -> bool:
        name = str(getattr(exc, "sqlite_errorname", ""))
        return name.startswith(_UNAVAILABLE) or self._read_only() or "readonly" in str(exc) or "locked" in str(exc)

    def _unavailable(self, exc: BaseException) -> LedgerUnavailableError:
        """The error for a ledger that cannot be written now; its budget is intact, and nothing suggests a reset."""
        if "locked" in str(exc) or "busy" in str(exc).lower():
            return LedgerUnavailableError(
                f"the ledger {self._path!r} is locked by another process past the {self._timeout:g} s timeout "
                f"({exc}); nothing was spent and the ledger is unchanged. Retry when that process is done, or open "
                "with a larger timeout."
            )
        return LedgerUnavailableError(
            f"the ledger {self._path!r} cannot be written ({exc}): the file or its directory is read-only here; "
            "nothing was spent and the ledger is unchanged. Open it where this process may write the file and its "
            "directory (SQLite writes a -wal and a -shm file beside it)."
        )

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
                if self._is_unavailable(exc):
                    raise self._unavailable(exc) from None
                raise LedgerError(f"the ledger {self._path!r} failed: {exc}. Nothing was changed.") from None
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError) and self._is_unavailable(exc):
                    raise self._unavailable(exc) from None
                raise LedgerError(f"the ledger {self._path!r} failed: {exc}. Nothing was changed.") from None
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _open(self, budget: Budget | None, filter: FilterSpec | None) -> tuple[Budget, str]:
        with self._transaction("IMMEDIATE") as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            tables = {t for t in tables if not t.startswith("sqlite_")}
            if app_id == APPLICATION_ID:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if not 1 <= version <= SCHEMA_VERSION:
                    raise LedgerError(
                        f"{self._path!r} is a dpkit ledger of schema version {version}; this dpkit reads "
                        f"versions 1 to {SCHEMA_VERSION}. Nothing was changed."
                    )
                if not _TABLES <= tables:
                    raise LedgerError(f"{self._path!r} is a dpkit ledger missing tables {sorted(_TABLES - tables)}.")
                for step in range(version + 1, SCHEMA_VERSION + 1):  # in this transaction: all or nothing
                    for statement in _MIGRATIONS[step]:
                        conn.execute(statement)
                    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(step),))
                    conn.execute(f"PRAGMA user_version = {step}")
            elif app_id == 0 and not tables:  # a new file (or an empty database): make the schema
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("ledger_id", uuid.uuid4().hex), ("created_at", now()), ("schema_version", str(SCHEMA_VERSION)),
                     ("filter", filter_to_text("auto")), ("aborts", "0")],
                )
            else:
                self._refuse_alien(conn)  # raises: neither ours nor empty
                raise AssertionError("unreachable")
            return self._load_budget(conn, budget, filter)

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

    def _insert(self, conn: Connection, sql: str, params: Sequence[Any]) -> int:
        # this backend's _run hands out sqlite3 connections only; no RETURNING: SQLite < 3.35 still works
        row_id = cast(sqlite3.Connection, conn).execute(self._sql(sql), params).lastrowid
        assert row_id is not None
        return row_id
