r"""The SQLite ledger: a durable, multi-process budget record in a file the user names.

Contract
--------
``SQLiteLedger(path, budget=...)`` implements :class:`dpkit.ledger.Ledger` (reserve, commit,
abort, rollup) over one SQLite file:

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

import json
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Self

from dpkit.accounting import Accountant, compose_basic, compose_rdp, compose_zcdp
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, PureDP, RenyiDP
from dpkit.guarantees.conversions import to_rdp, to_zcdp
from dpkit.ledger._base import (
    Budget,
    Guarantee,
    LedgerEntry,
    LedgerError,
    Reservation,
    Rollup,
    guarantee_from_record,
    guarantee_to_record,
)

__all__ = ["SQLiteLedger"]

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
_COLUMNS = "id, created_at, updated_at, label, type, params, count, state, owner, metadata"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _check_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1; got {count!r}.")
    return count


def _check_budget(budget: object) -> Budget:
    guarantee_to_record(budget)  # TypeError / UnsupportedError for what cannot be stored
    Accountant(budget)  # type: ignore[arg-type]  # the Accountant's own budget rules
    return budget  # type: ignore[return-value]


def _zero_like(budget: Budget) -> Budget:
    if isinstance(budget, PureDP):
        return PureDP(0.0)
    if isinstance(budget, ApproxDP):
        return ApproxDP(epsilon=0.0, delta=0.0)
    if isinstance(budget, ZCDP):
        return ZCDP(0.0)
    return RenyiDP(orders=list(budget.orders), epsilons=[0.0] * len(budget.orders))  # type: ignore[arg-type]


class SQLiteLedger:
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
            budget = _check_budget(budget)
        self._path = path_str
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
                    [("ledger_id", uuid.uuid4().hex), ("created_at", _now()), ("schema_version", str(SCHEMA_VERSION))],
                )
            else:
                self._refuse_alien(conn)  # raises: neither ours nor empty
                raise AssertionError("unreachable")
            row = conn.execute("SELECT value FROM meta WHERE key = 'ledger_id'").fetchone()
            if row is None:
                raise LedgerError(f"{self._path!r} is a dpkit ledger without a ledger id; it is corrupted.")
            ledger_id = str(row[0])
            stored_row = conn.execute("SELECT type, params FROM budget WHERE id = 1").fetchone()
            if stored_row is None:
                if budget is None:
                    raise ValueError(
                        f"the ledger {self._path!r} is new and has no budget; pass budget=, e.g. "
                        "SQLiteLedger(path, budget=ApproxDP(epsilon=1.0, delta=1e-6))."
                    )
                type_name, params = guarantee_to_record(budget)
                conn.execute(
                    "INSERT INTO budget (id, type, params, created_at) VALUES (1, ?, ?, ?)", (type_name, params, _now())
                )
                return budget, ledger_id
            stored = guarantee_from_record(str(stored_row[0]), str(stored_row[1]))
            try:
                stored_budget = _check_budget(stored)
            except (TypeError, ValueError) as exc:
                raise LedgerError(f"the budget stored in {self._path!r} is not a valid budget ({exc}).") from None
            if budget is not None and guarantee_to_record(budget) != (stored_row[0], stored_row[1]):
                raise ValueError(
                    f"budget {budget} does not match the budget {stored} stored in {self._path!r}; a ledger's "
                    "budget is fixed when it is created. Omit budget= to use the stored one, or name a new file."
                )
            return stored_budget, ledger_id

    # ---- state --------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The ledger file's path."""
        return self._path

    @property
    def budget(self) -> Budget:
        """The total budget stored in the ledger (fixed when the file was created)."""
        return self._budget

    @property
    def ledger_id(self) -> str:
        """A random id made when the file was created; reservations carry it."""
        return self._ledger_id

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- reading the record -------------------------------------------------------------------
    def _live(self, conn: sqlite3.Connection) -> list[tuple[Guarantee, int, str, tuple[str, str]]]:
        """Every reserved or committed spend: (guarantee, count, label, record key), in id order."""
        out = []
        for type_name, params, count, label in conn.execute(
            "SELECT type, params, count, label FROM spends WHERE state IN ('reserved', 'committed') ORDER BY id"
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise LedgerError(f"a spend in {self._path!r} has count {count!r}; the ledger is corrupted.")
            out.append((guarantee_from_record(type_name, params), count, str(label), (type_name, params)))
        return out

    def _accountant(self, live: list[tuple[Guarantee, int, str, tuple[str, str]]]) -> tuple[Accountant, bool]:
        """A fresh adaptive Accountant over the budget holding the record's total; True if that is over.

        Every adaptive filter rule is a sum (of epsilons and deltas, of rho, per order), so spending
        the composed total (:meth:`_spent`, the same composition functions) once decides exactly as
        replaying each row would, in one pass over the record instead of one per row."""
        accountant = Accountant(self._budget, adaptive=True)
        if live:
            try:
                accountant.spend(self._spent(live), label=f"{len(live)} recorded spends")
            except BudgetExceededError:
                return accountant, True
        return accountant, False

    def _spent(self, live: list[tuple[Guarantee, int, str, tuple[str, str]]]) -> Budget:
        """Compose the record in the budget's family (the Accountant's adaptive rules)."""
        b = self._budget
        if not live:
            return _zero_like(b)
        try:
            if isinstance(b, (PureDP, ApproxDP)):
                for g, _, _, _ in live:
                    if not isinstance(g, (PureDP, ApproxDP)) or (isinstance(b, PureDP) and isinstance(g, ApproxDP)
                                                                  and float(g.delta) != 0.0):
                        raise TypeError(f"{g} cannot be composed into a {type(b).__name__} budget")
                total = compose_basic([(g, c) for g, c, _, _ in live])  # Dwork & Roth Thm 3.16
                if isinstance(b, PureDP):
                    return PureDP(total.epsilon)
                return total if isinstance(total, ApproxDP) else ApproxDP(epsilon=total.epsilon, delta=0.0)
            if isinstance(b, ZCDP):
                return compose_zcdp([(to_zcdp(g), c) for g, c, _, _ in live])  # Bun & Steinke Lemma 2.3
            curve = compose_rdp([(to_rdp(g), c) for g, c, _, _ in live])  # Mironov Prop 1
            orders = list(b.orders)  # type: ignore[arg-type]
            return RenyiDP(orders=orders, epsilons=[float(curve.epsilon(a)) for a in orders])
        except (TypeError, ValueError, UnsupportedError) as exc:
            raise LedgerError(
                f"the ledger {self._path!r} records a spend that its budget {b} cannot compose ({exc}); the "
                "file was edited by hand or is corrupted."
            ) from None

    def _remaining(self, live: list[tuple[Guarantee, int, str, tuple[str, str]]]) -> Budget:
        accountant, over = self._accountant(live)
        return _zero_like(self._budget) if over else accountant.remaining()  # type: ignore[no-any-return]

    def spent(self) -> Budget:
        """The composed total of every reserved and committed spend, in the budget's family.

        Returns
        -------
        PureDP, ApproxDP, ZCDP or RenyiDP
            Basic composition (Dwork & Roth Thm 3.16) for PureDP/ApproxDP budgets, the sum of rho
            (Bun & Steinke 2016, arXiv 1605.02065v1, Lemma 2.3) for ZCDP, per-order sums (Mironov
            2017, arXiv 1702.07476v3, Prop 1) for RenyiDP: an upper bound.  Uncommitted
            reservations count (see the module docstring).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ZCDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=ZCDP(1.0)) as ledger:
        ...     _ = ledger.reserve(ZCDP(0.125), count=2); print(ledger.spent())
        0.25-zCDP
        """
        with self._transaction("DEFERRED") as conn:
            return self._spent(self._live(conn))

    def remaining(self) -> Budget:
        """What is left of the budget under the adaptive filter's rule (as ``Accountant.remaining``).

        Returns
        -------
        PureDP, ApproxDP, ZCDP or RenyiDP
            The budget less the spent total, per parameter; zero if the record already exceeds
            the budget (possible only if the file was edited).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ApproxDP
        >>> budget = ApproxDP(epsilon=1.0, delta=1e-6)
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=budget) as ledger:
        ...     print(ledger.remaining())
        (1.0, 1e-06)-DP
        """
        with self._transaction("DEFERRED") as conn:
            return self._remaining(self._live(conn))

    def _entries(self, conn: sqlite3.Connection, where: str = "") -> tuple[LedgerEntry, ...]:
        out = []
        for row in conn.execute(f"SELECT {_COLUMNS} FROM spends {where} ORDER BY id"):
            id_, created, updated, label, type_name, params, count, state, owner, metadata = row
            try:
                meta = None if metadata is None else json.loads(metadata)
            except ValueError:
                raise LedgerError(
                    f"spend {id_} in {self._path!r} has unreadable metadata; the ledger is corrupted."
                ) from None
            out.append(LedgerEntry(
                id=id_, ledger_id=self._ledger_id, created_at=created, updated_at=updated, label=label,
                guarantee=guarantee_from_record(type_name, params), count=count, state=state, owner=owner,
                metadata=meta,
            ))
        return tuple(out)

    def history(self) -> tuple[LedgerEntry, ...]:
        """Every spend ever recorded (reserved, committed and aborted), oldest first.

        Returns
        -------
        tuple of LedgerEntry

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.commit(ledger.reserve(PureDP(0.5), label="q1"))
        ...     print([(e.label, e.state) for e in ledger.history()])
        [('q1', 'committed')]
        """
        with self._transaction("DEFERRED") as conn:
            return self._entries(conn)

    def reserved_but_uncommitted(self) -> tuple[LedgerEntry, ...]:
        """Spends reserved but neither committed nor aborted: in flight now, or left by a process that died.

        They count as spent.  Each entry names its ``owner`` (``host:pid``) and time; pass one to
        :meth:`abort` only if you know that no noisy value left that process.

        Returns
        -------
        tuple of LedgerEntry

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     r = ledger.reserve(PureDP(0.5)); print(len(ledger.reserved_but_uncommitted()))
        1
        """
        with self._transaction("DEFERRED") as conn:
            return self._entries(conn, "WHERE state = 'reserved'")

    def rollup(self) -> Rollup:
        """Budget, composed spend, remainder and the number of rows in each state, read at one instant.

        Returns
        -------
        Rollup

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.abort(ledger.reserve(PureDP(0.5))); r = ledger.rollup(); print(r.remaining, r.aborted)
        1.0-DP 1
        """
        with self._transaction("DEFERRED") as conn:
            live = self._live(conn)
            counts = dict(conn.execute("SELECT state, COUNT(*) FROM spends GROUP BY state").fetchall())
            return Rollup(
                budget=self._budget, spent=self._spent(live), remaining=self._remaining(live),
                committed=counts.get("committed", 0), reserved=counts.get("reserved", 0),
                aborted=counts.get("aborted", 0),
            )

    # ---- the two-phase protocol ---------------------------------------------------------------
    def _validate(
        self, guarantee: object, count: object, label: object, metadata: object
    ) -> tuple[tuple[str, str], int, str, str | None]:
        record = guarantee_to_record(guarantee)
        n = _check_count(count)
        if label is None:
            label = str(guarantee)
        elif not isinstance(label, str):
            raise TypeError(f"label must be a str or None; got {type(label).__name__}.")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict or None; got {type(metadata).__name__}.")
        try:
            meta = None if metadata is None else json.dumps(metadata, sort_keys=True, allow_nan=False)
        except ValueError as exc:
            raise ValueError(f"metadata must be JSON without NaN or infinity; {exc}.") from None
        return record, n, label, meta

    def _refuse(self, accountant: Accountant, guarantee: object, count: int, over: bool) -> None:
        """Raise BudgetExceededError if the spend does not fit (the dry run; writes nothing)."""
        if over:
            raise BudgetExceededError(
                f"refused: the ledger {self._path!r} already records spends beyond its budget {self._budget} "
                "(the file was edited or its budget changed). Nothing was spent."
            )
        try:
            accountant.check(guarantee, count=count)
        except BudgetExceededError as exc:
            raise BudgetExceededError(f"{exc} Ledger {self._path!r}; remaining {accountant.remaining()}.") from None

    def check(self, guarantee: Guarantee, *, count: int = 1) -> None:
        """Dry run: raise BudgetExceededError if reserving ``guarantee`` ``count`` times would overspend now.

        Another process may spend in between; only :meth:`reserve` decides atomically.

        Parameters
        ----------
        guarantee : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders)
        count : int, >= 1

        Raises
        ------
        BudgetExceededError
            If it would not fit.
        UnsupportedError, TypeError, ValueError
            As :meth:`reserve`.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.check(PureDP(0.5), count=2)
        """
        _, n, _, _ = self._validate(guarantee, count, None, None)
        with self._transaction("DEFERRED") as conn:
            accountant, over = self._accountant(self._live(conn))
            self._refuse(accountant, guarantee, n, over)

    def reserve(
        self,
        guarantee: Guarantee,
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Reservation:
        """Atomically check that a spend fits and durably record it as ``reserved``.

        Parameters
        ----------
        guarantee : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders)
            The guarantee of one release (for a mechanism, its ``guarantee``).
        count : int, >= 1
            How many times it is spent (composed by the budget's rule).
        label : str, optional
            Shown in :meth:`history`; defaults to ``str(guarantee)``.
        metadata : dict, optional
            JSON-serialisable details (query text, user); no NaN or infinity.

        Returns
        -------
        Reservation
            Pass it to :meth:`commit` before returning the noisy value, or to :meth:`abort`.

        Raises
        ------
        BudgetExceededError
            If the spend would exceed the budget; nothing was written.
        UnsupportedError
            For ``WassersteinDP``, a callable ``RenyiDP``, or a guarantee the budget's family
            cannot compose (e.g. ``ZCDP`` against an ``ApproxDP`` budget).
        TypeError, ValueError
            For a non-guarantee, a bad ``count``, ``label`` or ``metadata``.
        LedgerError
            If the ledger stays locked past ``timeout`` or the file is corrupted.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     r = ledger.reserve(PureDP(0.5), label="mean age"); ledger.commit(r); print(r.label, ledger.remaining())
        mean age 0.5-DP
        """
        (type_name, params), n, text, meta = self._validate(guarantee, count, label, metadata)
        with self._transaction("IMMEDIATE") as conn:  # the write lock is held from here to COMMIT
            accountant, over = self._accountant(self._live(conn))
            self._refuse(accountant, guarantee, n, over)
            now = _now()
            cursor = conn.execute(
                "INSERT INTO spends (created_at, updated_at, label, type, params, count, state, owner, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?)",
                (now, now, text, type_name, params, n, f"{socket.gethostname()}:{os.getpid()}", meta),
            )
            row_id = cursor.lastrowid
        assert row_id is not None
        return Reservation(id=row_id, ledger_id=self._ledger_id, guarantee=guarantee, count=n, label=text)

    def _finish(self, reservation: object, target: str) -> None:
        if not isinstance(reservation, (Reservation, LedgerEntry)):
            raise TypeError(f"expected a Reservation; got {type(reservation).__name__}.")
        if reservation.ledger_id != self._ledger_id:
            raise LedgerError(
                f"reservation {reservation.id} was issued by another ledger ({reservation.ledger_id}), not "
                f"{self._path!r} ({self._ledger_id})."
            )
        with self._transaction("IMMEDIATE") as conn:
            row = conn.execute("SELECT state FROM spends WHERE id = ?", (reservation.id,)).fetchone()
            if row is None:
                raise LedgerError(f"reservation {reservation.id} is not in the ledger {self._path!r}; it is corrupted.")
            state = row[0]
            if state == target:
                return  # idempotent: a retried commit or abort changes nothing
            if state != "reserved":
                raise LedgerError(
                    f"cannot {target[:-2] if target == 'aborted' else 'commit'} reservation {reservation.id}: it "
                    f"is already {state}."
                    + (" A committed spend is never returned to the budget." if state == "committed" else "")
                )
            conn.execute("UPDATE spends SET state = ?, updated_at = ? WHERE id = ?", (target, _now(), reservation.id))

    def commit(self, reservation: Reservation) -> None:
        """Mark a reservation ``committed`` (durably); call it before returning the noisy value.

        Committing twice is a no-op.

        Parameters
        ----------
        reservation : Reservation
            From :meth:`reserve` on this ledger (or an entry of :meth:`reserved_but_uncommitted`).

        Raises
        ------
        LedgerError
            If it was aborted, or belongs to another ledger.
        TypeError
            If it is not a Reservation.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.commit(ledger.reserve(PureDP(0.5))); print(ledger.rollup().committed)
        1
        """
        self._finish(reservation, "committed")

    def abort(self, reservation: Reservation) -> None:
        """Mark a reservation ``aborted``, returning its budget; only if no noisy value was made or seen.

        Aborting twice is a no-op.

        Parameters
        ----------
        reservation : Reservation
            From :meth:`reserve` on this ledger (or an entry of :meth:`reserved_but_uncommitted`).

        Raises
        ------
        LedgerError
            If it was committed (a committed spend is never returned), or belongs to another ledger.
        TypeError
            If it is not a Reservation.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.abort(ledger.reserve(PureDP(0.5))); print(ledger.remaining())
        1.0-DP
        """
        self._finish(reservation, "aborted")

    @contextmanager
    def spend(
        self,
        guarantee: Guarantee,
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Iterator[Reservation]:
        """Reserve on entry; commit when the block ends normally, abort if it raises.

        Compute and add noise inside the block but return the noisy value only *after* it: the
        commit happens on leaving the block, so a value is never returned unrecorded.  A block
        that raises is aborted (its budget returned), so do not let a noisy value out of the block
        before it ends.  If the abort itself fails the reservation stays and counts as spent.

        Parameters
        ----------
        guarantee, count, label, metadata
            As :meth:`reserve`.

        Yields
        ------
        Reservation

        Raises
        ------
        BudgetExceededError
            On entry, if the spend would not fit (the block does not run).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     with ledger.spend(PureDP(0.5)) as r: pass
        ...     print(ledger.history()[0].state)
        committed
        """
        reservation = self.reserve(guarantee, count=count, label=label, metadata=metadata)
        try:
            yield reservation
        except BaseException:
            try:
                self.abort(reservation)
            except Exception:  # noqa: BLE001 - the row stays 'reserved' and counts: the safe side
                pass
            raise
        self.commit(reservation)
