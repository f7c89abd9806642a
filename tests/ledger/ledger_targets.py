"""Ledger locations of every backend for the parametrised ledger tests (see ``conftest.py``)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpkit.ledger import open_ledger
from services import PostgresServer

class Target:
    """A fresh ledger location of one backend, and raw access to what is stored there."""

    def __init__(self, backend: str, location: str, server: PostgresServer | None = None) -> None:
        self.backend, self.location, self.server = backend, location, server
        self._others = 0

    def __str__(self) -> str:
        return self.location

    def open(self, budget: Any = None, **kw: Any) -> Any:
        return open_ledger(self.location, budget=budget, **kw)

    def other(self) -> Target:
        """Another fresh location of the same backend."""
        if self.backend == "sqlite":
            self._others += 1
            return Target("sqlite", f"{self.location}.other{self._others}.db")
        assert self.server is not None
        return Target("postgres", self.server.create_database(), self.server)

    # ---- raw access, as another program would have it -------------------------------------------------
    @contextmanager
    def raw(self) -> Iterator[Any]:
        """An autocommit connection to the store (for PostgreSQL with the ledger's schema on the search path)."""
        if self.backend == "sqlite":
            conn = sqlite3.connect(self.location, isolation_level=None)
            try:
                yield conn
            finally:
                conn.close()
        else:
            import psycopg

            with psycopg.connect(self.location, autocommit=True) as conn:
                conn.execute("SET search_path TO dpkit_ledger")
                yield conn

    def tamper(self, sql: str, *args: object) -> None:
        with self.raw() as conn:
            conn.execute(sql if self.backend == "sqlite" else sql.replace("?", "%s"), args)

    def snapshot(self) -> object:
        """Everything stored: the file's bytes (and its WAL's), or every relation, every table's rows and every
        sequence's position."""
        if self.backend == "sqlite":
            out = {}
            for suffix in ("", "-wal"):
                p = Path(self.location + suffix)
                if p.exists():
                    out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest()
            return out
        with self.raw() as conn:
            relations = conn.execute(
                "SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
                " ORDER BY 1, 2").fetchall()
            contents = []
            for schema, name, kind in relations:  # every table's rows and every sequence's position
                if kind in ("r", "S"):
                    sql = "SELECT last_value, is_called" if kind == "S" else "SELECT *"
                    contents.append(conn.execute(f'{sql} FROM "{schema}"."{name}" ORDER BY 1').fetchall())
            return relations, *contents

    @contextmanager
    def hold_write_lock(self) -> Iterator[None]:
        """Hold the lock a reserve must take (SQLite's write lock; the budget row's lock), as a writer would."""
        with self.raw() as conn:
            if self.backend == "sqlite":
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute("BEGIN")
                conn.execute("SELECT id FROM budget WHERE id = 1 FOR UPDATE")
            try:
                yield
            finally:
                conn.execute("ROLLBACK")

    def waiting_for_lock(self) -> int | None:
        """How many other sessions wait for a lock now (PostgreSQL), None where it cannot be seen (SQLite)."""
        if self.backend == "sqlite":
            return None
        with self.raw() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                    " AND datname = current_database()").fetchone()[0])
