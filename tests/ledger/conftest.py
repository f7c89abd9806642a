"""Shared set-up for the ledger tests: one contract, run on a SQLite file and on a real PostgreSQL server.

``ledger_target`` is parametrised over both backends: a :class:`ledger_targets.Target` names a fresh, empty ledger
location (a file path, or a new database of the session's PostgreSQL server) and knows how to
inspect it from outside dpkit (``snapshot`` of everything stored, ``tamper`` with raw SQL,
``hold_write_lock`` as another client would).  The PostgreSQL server is started once per test session
by :class:`services.PostgresServer` (installed with apt-get if missing) and stopped at the end; where
it cannot be installed the PostgreSQL cases are skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_targets import Target
from services import PostgresServer, Unavailable

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer.start()
    except Unavailable as exc:
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        return Target("sqlite", str(tmp_path / "budget.db"))
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return Target("postgres", server.create_database(), server)
