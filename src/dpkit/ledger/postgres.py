r"""The PostgreSQL ledger: one privacy budget shared by a team, whose analysts spend it from several machines.

Contract
--------
``PostgresLedger("postgresql://user@host/db", budget=...)`` implements :class:`dpkit.ledger.Ledger`
(reserve, commit, abort, rollup) with exactly the semantics of :class:`~dpkit.ledger.SQLiteLedger`
(the shared :class:`dpkit.ledger._core.SQLLedger` does the deciding; this module only stores):

* **Schema.** The tables ``meta``, ``budget`` and ``spends`` (the same columns and record format as
  the SQLite file) live in a schema of their own, ``dpkit_ledger``, made on first use.  ``meta``
  holds ``application = dpkit-ledger``, the ledger id and the schema version.  Creating a ledger is
  refused, and nothing is written, if the database already holds another application's tables or a
  ``dpkit_ledger`` schema that is not a dpkit ledger: a ledger needs a database of its own.
* **Versions.** Each schema version has its migration (:data:`MIGRATIONS`), applied in one
  transaction under an advisory lock on first use, so processes opening a new or older ledger at
  once apply it once.  A ledger whose schema is *newer* than this dpkit is refused with a one-line
  error and left untouched.
* **Atomic check-and-reserve.** ``reserve`` runs in one ``READ COMMITTED`` transaction that first
  takes a row lock on the budget row (``SELECT ... FOR UPDATE``), then reads every reserved and
  committed spend (each statement of ``READ COMMITTED`` sees everything committed before it, so it
  sees every reservation made under the lock before ours), decides through the adaptive
  Accountant, inserts the ``reserved`` row and commits.  Reservers therefore serialise on the
  budget row, on one machine or many, and together cannot exceed the budget.  Reads run in
  ``REPEATABLE READ READ ONLY`` transactions (one instant, never blocking a reserve).  A
  serialization failure or deadlock reported by the server is retried (the server rolled the
  transaction back); waiting longer than ``timeout`` for the lock is a :class:`LedgerError`.
* **Durability.** Every session sets ``synchronous_commit = on``, so a transaction that returns
  has been flushed to the server's write-ahead log; a server running with ``fsync = off`` (which
  could lose recorded spends in a crash) is refused.  A spend that ``reserve`` or ``commit``
  reported survives the client being killed and the server restarting or crashing.
* **Crash and network semantics.** As for SQLite: a process killed after ``reserve`` returned
  leaves a ``reserved`` row that counts as spent for ever.  A connection found broken (a server
  restart between reserve and commit) is replaced by a new one and the statement retried, but only
  when the server cannot have committed the transaction (the break came before ``COMMIT`` was
  sent).  If the connection breaks *during* ``COMMIT`` the outcome is unknown: a
  :class:`LedgerError` says so; a reservation that did reach the server counts as spent, and
  ``commit``/``abort`` may simply be called again (they are idempotent).
* **Bad input.** An unreachable server, wrong credentials, a missing database, a schema newer than
  this dpkit, or no ``psycopg``: a one-line :class:`LedgerError` (passwords never shown), nothing
  written.

Connecting: any libpq URL or key=value string; passwords are best kept out of the URL (use
``PGPASSWORD``, a ``~/.pgpass`` file or a client certificate), and are never shown in messages or
``repr``.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from dpkit.errors import ArgumentTypeError, InvalidArgumentError, LedgerUnavailableError
from dpkit.ledger._base import Budget, LedgerError
from dpkit.ledger._core import LEGACY_FILTER, FilterSpec, SQLLedger, check_budget, filter_to_text, now

__all__ = ["MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "PostgresLedger"]

T = TypeVar("T")

SCHEMA = "dpkit_ledger"  # the ledger's own schema: every name dpkit reads or writes is inside it
APPLICATION = "dpkit-ledger"  # meta.application: marks the schema as a dpkit ledger
SCHEMA_VERSION = 2
_ADVISORY_KEY = 0x64706B6C6C656467  # "dpklledg": serialises creation and migration across processes
_NAMES = {"meta": f"{SCHEMA}.meta", "budget": f"{SCHEMA}.budget", "spends": f"{SCHEMA}.spends"}
_TABLES = {"meta", "budget", "spends"}
_RETRIES = 20  # serialization failures / deadlocks retried before giving up

# version -> the statements that take the schema from version - 1 to version (0: no schema)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        f"CREATE SCHEMA {SCHEMA}",
        f"COMMENT ON SCHEMA {SCHEMA} IS 'dpkit privacy-budget ledger: written only by dpkit'",
        f"CREATE TABLE {SCHEMA}.meta (key text PRIMARY KEY, value text NOT NULL)",
        f"CREATE TABLE {SCHEMA}.budget (id integer PRIMARY KEY CHECK (id = 1), type text NOT NULL,"
        " params text NOT NULL, created_at text NOT NULL)",
        f"CREATE TABLE {SCHEMA}.spends (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " created_at text NOT NULL, updated_at text NOT NULL, label text NOT NULL, type text NOT NULL,"
        " params text NOT NULL, count bigint NOT NULL CHECK (count >= 1),"
        " state text NOT NULL CHECK (state IN ('reserved', 'committed', 'aborted')),"
        " owner text NOT NULL, metadata text)",
        f"CREATE INDEX spends_state ON {SCHEMA}.spends (state)",
    ),
    # each spend's PrivacyItem; the filter choice ("basic" for a ledger decided by basic composition before
    # it was stored; a new ledger's is set when its budget is stored); the abort counter of the cached replay
    2: (
        f"ALTER TABLE {SCHEMA}.spends ADD COLUMN item text",
        f"INSERT INTO {SCHEMA}.meta (key, value) VALUES ('filter', '{filter_to_text(LEGACY_FILTER)}'), ('aborts', '0')",
    ),
}

# what every PostgreSQL database has and no application owns
_SYSTEM_SCHEMAS = "('pg_catalog', 'information_schema')"


def _one_line(exc: BaseException, secret: str | None = None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if secret:
        text = text.replace(secret, "***")
    return text


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise LedgerError(
            "a PostgreSQL ledger needs psycopg 3, which is not installed: pip install 'dpkit[postgres]'."
        ) from None
    return psycopg


class PostgresLedger(SQLLedger):
    r"""A durable privacy-budget ledger on a PostgreSQL server, shared by processes on many machines.

    Parameters
    ----------
    url : str
        A libpq connection URL (``postgresql://user@host:5432/dbname``) or key=value string naming
        the database that holds (or will hold) the ledger.  Prefer ``PGPASSWORD`` or ``~/.pgpass``
        to a password in the URL; it is never shown either way.
    budget : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders), optional
        The total budget.  Required when the ledger is new; stored once.  On a later open it may
        be omitted (the stored budget is used) or must equal the stored one exactly.
    timeout : float, finite, > 0
        Seconds to wait for another client holding the budget's lock before failing.
    connect_timeout : float, finite, >= 2
        Seconds to wait for the server to answer a connection (unless the URL sets its own).
    filter : "auto", a filter kind, or {kind: delta share}, optional
        The privacy filter of an ApproxDP budget, stored when the ledger is created (default ``"auto"``); on a
        later open it may be omitted or must equal the stored one.

    Raises
    ------
    InvalidArgumentError
        If a new ledger gets no budget, the budget differs from the stored one, or a timeout is
        not finite and positive.
    ArgumentTypeError
        If ``budget`` is not a budget guarantee or ``url`` not a str.
    UnsupportedError
        If ``budget`` is a ``WassersteinDP`` or a ``RenyiDP`` given by a callable curve.
    LedgerError
        If the server cannot be reached or refuses the credentials, the database holds another
        application's tables, the ledger's schema is newer than this dpkit, the server runs with
        ``fsync = off``, or psycopg is not installed; nothing was written.

    Notes
    -----
    See the module docstring for the schema, locking, durability and crash contract; the decision
    rule is that of ``Accountant(budget, adaptive=True)``, as for :class:`~dpkit.ledger.SQLiteLedger`.

    Examples
    --------
    >>> from dpkit.guarantees import ApproxDP
    >>> PostgresLedger("postgresql://nobody@127.0.0.1:1/nothing",
    ...                budget=ApproxDP(epsilon=1.0, delta=1e-6))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpkit.errors.LedgerError: cannot connect to the ledger postgresql://nobody@127.0.0.1:1/nothing: ...
    """

    def __init__(self, url: str, *, budget: Budget | None = None, timeout: float = 60.0,
                 connect_timeout: float = 10.0, filter: FilterSpec | None = None) -> None:
        if not isinstance(url, str):
            raise ArgumentTypeError(f"url must be a str such as 'postgresql://user@host/db'; got {type(url).__name__}.")
        for name, value, low in (("timeout", timeout, 0.0), ("connect_timeout", connect_timeout, 2.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low < value < math.inf
                                                                                       or value == low > 0):
                raise InvalidArgumentError(
                    f"{name} must be finite and {'>= 2' if low else '> 0'} seconds; got {value!r}.")
        if budget is not None:
            budget = check_budget(budget)
        self._closed = False
        self._conn: Any = None
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._inherited: list[Any] = []
        self._secret = self._password_in(url)
        self._psycopg = _psycopg()
        self._params, self._where = self._parse(url)
        self._params.setdefault("connect_timeout", str(max(2, math.ceil(connect_timeout))))
        self._params.setdefault("application_name", "dpkit")
        self._timeout = float(timeout)
        self._init_core()
        try:
            self._budget, self._ledger_id = self._open(budget, filter)
        except BaseException:
            self.close()
            raise

    # ---- the URL ------------------------------------------------------------------------------------
    @staticmethod
    def _password_in(url: str) -> str | None:
        try:
            password = urlsplit(url).password if "://" in url else None
        except ValueError:
            return None
        return unquote(password) if password else None

    def _parse(self, url: str) -> tuple[dict[str, str], str]:
        """libpq's parse of the URL, and a name for messages without the password."""
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
        except self._psycopg.Error as exc:
            raise LedgerError(
                f"the ledger URL is not a valid PostgreSQL connection string ({_one_line(exc, self._secret)}); "
                "write it as postgresql://user@host:port/dbname."
            ) from None
        self._secret = params.get("password") or self._secret
        host = params.get("host") or params.get("hostaddr") or "localhost"
        if ":" in host and "," not in host:
            host = f"[{host}]"
        port = f":{params['port']}" if params.get("port") else ""
        user = f"{params['user']}@" if params.get("user") else ""
        return params, f"postgresql://{user}{host}{port}/{params.get('dbname', '')}"

    @property
    def url(self) -> str:
        """The ledger's server and database as a URL, without any password."""
        return self._where

    def __repr__(self) -> str:
        return f"PostgresLedger({self._where!r}, budget={self._budget})"

    # ---- connection and transactions --------------------------------------------------------------
    def _connect(self) -> Any:
        pg = self._psycopg
        try:
            conn = pg.connect(autocommit=True, **self._params)
        except pg.Error as exc:
            raise LedgerError(f"cannot connect to the ledger {self._where}: {_one_line(exc, self._secret)}") from None
        try:
            if conn.execute("SHOW fsync").fetchone()[0] != "on":
                raise LedgerError(
                    f"the server of the ledger {self._where} runs with fsync = off, so a crash could lose recorded "
                    "spends; a privacy ledger needs fsync = on."
                )
            conn.execute("SET synchronous_commit = on")  # a returned commit is in the server's durable WAL
            conn.execute(f"SET lock_timeout = {int(self._timeout * 1000)}")  # ms: waiting for the budget's lock
        except LedgerError:
            conn.close()
            raise
        except pg.Error as exc:
            conn.close()
            raise LedgerError(f"cannot use the ledger {self._where}: {_one_line(exc, self._secret)}") from None
        return conn

    def _connection(self) -> Any:
        if self._closed:
            raise LedgerError(f"the ledger {self._where} is closed; open a new PostgresLedger.")
        if self._conn is not None and os.getpid() != self._pid:
            # forked: the parent's socket is not ours to use or to close (closing would end the parent's
            # session), so keep the object alive and unused, and open our own
            self._inherited.append(self._conn)
            self._conn = None
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._conn.close()
            self._conn = None
        if self._conn is None:
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    def _rollback(self, conn: Any) -> None:
        if not conn.closed and not conn.broken:
            try:
                conn.execute("ROLLBACK")
            except self._psycopg.Error:
                conn.close()  # a connection in an unknown state is never reused

    def _run(self, write: bool, work: Callable[[Any], T], *, locked: bool = True) -> T:
        """One transaction; ``write`` holds the budget row's lock from its first statement to COMMIT.

        Retried with a fresh connection when the server cannot have committed it (a broken connection
        before COMMIT was sent, a serialization failure or deadlock); never retried otherwise.
        """
        pg = self._psycopg
        errors = pg.errors
        with self._lock:
            failures, reconnects = 0, 0
            while True:
                conn = self._connection()
                committing = False
                try:
                    if write:
                        conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                        if locked and conn.execute(
                                f"SELECT id FROM {SCHEMA}.budget WHERE id = 1 FOR UPDATE").fetchone() is None:
                            raise LedgerError(f"the ledger {self._where} has no budget row; it is corrupted.")
                    else:
                        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    result = work(conn)
                    committing = True
                    conn.execute("COMMIT")
                    return result
                except (errors.SerializationFailure, errors.DeadlockDetected) as exc:
                    self._rollback(conn)
                    failures += 1
                    if failures > _RETRIES:
                        raise LedgerError(
                            f"the ledger {self._where} stayed contended through {_RETRIES} retries "
                            f"({_one_line(exc, self._secret)}). Nothing was changed; retry."
                        ) from None
                    time.sleep(random.uniform(0.0, 0.01 * failures))
                except errors.LockNotAvailable:
                    self._rollback(conn)
                    raise LedgerUnavailableError(
                        f"could not lock the ledger {self._where} within {self._timeout:g} s; another client holds "
                        "it. Nothing was spent and the ledger is unchanged. Retry, or open with a larger timeout."
                    ) from None
                except errors.ReadOnlySqlTransaction as exc:
                    self._rollback(conn)
                    raise LedgerUnavailableError(
                        f"the ledger {self._where} cannot be written: the server or database is read-only "
                        f"({_one_line(exc, self._secret)}). Nothing was spent and the ledger is unchanged; use a "
                        "writable server (the primary, not a standby)."
                    ) from None
                except pg.OperationalError as exc:
                    lost = conn.closed or conn.broken
                    self._rollback(conn)
                    if lost and committing:
                        raise LedgerError(
                            f"lost the connection to the ledger {self._where} while committing "
                            f"({_one_line(exc, self._secret)}); whether the change was recorded is unknown. A "
                            "reservation that was recorded counts as spent; commit and abort may be retried."
                        ) from None
                    if lost and reconnects < 1:  # the server never saw COMMIT: it rolled back; retry once
                        reconnects += 1
                        continue
                    raise LedgerError(
                        f"the ledger {self._where} failed: {_one_line(exc, self._secret)}. Nothing was changed."
                    ) from None
                except pg.Error as exc:
                    self._rollback(conn)
                    raise LedgerError(
                        f"the ledger {self._where} failed: {_one_line(exc, self._secret)}. Nothing was changed."
                    ) from None
                except BaseException:
                    self._rollback(conn)
                    raise

    def _sql(self, text: str) -> str:
        return text.format_map(_NAMES).replace("?", "%s")

    # ---- opening: schema, version, budget ------------------------------------------------------------
    def _open(self, budget: Budget | None, filter: FilterSpec | None) -> tuple[Budget, str]:
        def work(conn: Any) -> tuple[Budget, str]:
            # one creator or migrator at a time, on every machine; released at COMMIT or ROLLBACK
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_KEY,))
            version = self._schema_version(conn)
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"the ledger {self._where} has schema version {version}, newer than this dpkit reads "
                    f"(version {SCHEMA_VERSION}); upgrade dpkit to use it. Nothing was changed."
                )
            if version == 0:
                self._refuse_foreign_tables(conn)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
                if step == 1:
                    conn.execute(
                        f"INSERT INTO {SCHEMA}.meta (key, value) VALUES ('application', %s), ('ledger_id', %s),"
                        " ('created_at', %s), ('schema_version', '0')",
                        (APPLICATION, uuid.uuid4().hex, now()),
                    )
                conn.execute(f"UPDATE {SCHEMA}.meta SET value = %s WHERE key = 'schema_version'", (str(step),))
            tables = {r[0] for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')", (SCHEMA,))}
            if not _TABLES <= tables:
                raise LedgerError(f"the ledger {self._where} is missing tables {sorted(_TABLES - tables)}; it is "
                                  "corrupted.")
            return self._load_budget(conn, budget, filter)

        return self._run(True, work, locked=False)

    def _schema_version(self, conn: Any) -> int:
        """0 if the database has no ledger schema; its version if it is a dpkit ledger; else LedgerError."""
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone() is None:
            return 0
        has_meta = conn.execute(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = 'meta' AND c.relkind = 'r'", (SCHEMA,)).fetchone()
        rows = dict(conn.execute(f"SELECT key, value FROM {SCHEMA}.meta").fetchall()) if has_meta else {}
        if rows.get("application") != APPLICATION:
            raise LedgerError(
                f"the database of {self._where} has a schema {SCHEMA!r} that is not a dpkit ledger; it was left "
                "untouched. Give the ledger a database of its own."
            )
        try:
            return int(rows["schema_version"])
        except (KeyError, ValueError):
            raise LedgerError(f"the ledger {self._where} has no readable schema version; it is corrupted.") from None

    def _refuse_foreign_tables(self, conn: Any) -> None:
        """LedgerError unless the database holds no table, view or sequence of any application."""
        rows = conn.execute(
            "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND n.nspname NOT IN {_SYSTEM_SCHEMAS}"
            " AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'"
            " ORDER BY 1 LIMIT 6"
        ).fetchall()
        if rows:
            names = ", ".join(r[0] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise LedgerError(
                f"the database of {self._where} holds another application's tables ({names}); a dpkit ledger "
                "needs a database of its own (e.g. CREATE DATABASE dpkit_ledger). Nothing was written."
            )

    # ---- closing ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (idempotent).  Everything reported was already durable."""
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                self._conn.close()
            self._conn = None
            self._closed = True
