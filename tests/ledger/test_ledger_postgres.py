"""What only the PostgreSQL ledger has, on a real server started by the test set-up (``services.py``).

The schema made on first use and versioned (and a newer one refused), a database of another
application refused and left untouched, bad connections as one-line errors that never show the
password, a server running with fsync off, a lock held past the timeout, and server restarts
(clean and crash-like) between reserve and commit that lose no spend.
"""

from __future__ import annotations

import sys
import time

import pytest

import dpkit.ledger.postgres as pg_module
from dpkit.errors import BudgetExceededError, LedgerUnavailableError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.ledger import LedgerError, PostgresLedger, open_ledger
from ledger_targets import Target
from services import PostgresServer


@pytest.fixture
def target(postgres_server: PostgresServer) -> Target:
    return Target("postgres", postgres_server.create_database(), postgres_server)


def test_schema_made_on_first_use_in_its_own_schema_and_versioned(target: Target) -> None:
    assert target.snapshot() == ([],)  # a fresh database: no relation at all
    with PostgresLedger(target.location, budget=PureDP(1.0)) as ledger:
        ledger.commit(ledger.reserve(PureDP(0.5)))
        assert ledger.url.startswith("postgresql://dpkit_admin@127.0.0.1:") and "://" in repr(ledger)
    relations, budget, meta, spends, _ = target.snapshot()  # type: ignore[misc]  # tables by name, then the sequence
    assert {r[0] for r in relations} == {"dpkit_ledger"}  # nothing outside its schema
    assert {r[1] for r in relations if r[2] == "r"} == {"meta", "budget", "spends"}
    meta = dict(meta)
    assert meta["application"] == "dpkit-ledger" and meta["schema_version"] == str(pg_module.SCHEMA_VERSION) == "2"
    assert meta["filter"] == '"auto"' and meta["aborts"] == "0"
    assert budget[0][1:3] == ("PureDP", '{"epsilon": "1.0"}')  # the same record format as the SQLite file
    assert [(s[4], s[5], s[7]) for s in spends] == [("PureDP", '{"epsilon": "0.5"}', "committed")]
    assert '"type": "PureDP"' in spends[0][10]  # the item, as JSON


def test_a_database_of_another_application_is_refused_and_untouched(target: Target) -> None:
    with target.raw() as conn:
        conn.execute("CREATE TABLE public.users (id integer)")
        conn.execute("INSERT INTO public.users VALUES (1), (2)")
    before = target.snapshot()
    with pytest.raises(LedgerError, match=r"holds another application's tables \(public.users\).*database of its own"):
        PostgresLedger(target.location, budget=PureDP(1.0))
    assert target.snapshot() == before
    with target.raw() as conn:
        assert conn.execute("SELECT COUNT(*) FROM public.users").fetchone()[0] == 2


def test_a_foreign_schema_of_the_same_name_is_refused_and_untouched(target: Target) -> None:
    with target.raw() as conn:
        conn.execute("CREATE SCHEMA dpkit_ledger")
        conn.execute("CREATE TABLE dpkit_ledger.meta (key text, value text)")
        conn.execute("INSERT INTO dpkit_ledger.meta VALUES ('application', 'something-else')")
    before = target.snapshot()
    with pytest.raises(LedgerError, match="not a dpkit ledger; it was left untouched"):
        PostgresLedger(target.location, budget=PureDP(1.0))
    assert target.snapshot() == before


def test_a_newer_schema_is_refused_with_one_line_and_untouched(target: Target) -> None:
    with PostgresLedger(target.location, budget=PureDP(1.0)) as ledger:
        ledger.commit(ledger.reserve(PureDP(0.25)))
    target.tamper("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    before = target.snapshot()
    with pytest.raises(LedgerError) as info:
        PostgresLedger(target.location)
    message = str(info.value)
    assert "schema version 3, newer than this dpkit reads (version 2); upgrade dpkit" in message
    assert "\n" not in message
    assert target.snapshot() == before


def test_an_older_schema_is_migrated_once_keeping_every_spend(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version-1 ledger (as dpkit wrote it before items were recorded) is migrated to version 2 on open, keeps its
    spends and its basic-composition rule; then the machinery once more: a version-3 step applied once."""
    with target.raw() as conn:  # version 1, statement for statement
        for statement in pg_module.MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute("INSERT INTO dpkit_ledger.meta (key, value) VALUES ('application', 'dpkit-ledger'),"
                     " ('ledger_id', 'v1ledger'), ('created_at', 't'), ('schema_version', '1')")
        conn.execute("INSERT INTO dpkit_ledger.budget (id, type, params, created_at) VALUES (1, 'ApproxDP', %s, 't')",
                     ('{"delta": "1e-06", "epsilon": "1.0"}',))
        conn.execute("INSERT INTO dpkit_ledger.spends (created_at, updated_at, label, type, params, count, state,"
                     " owner) VALUES ('t', 't', 'before', 'ApproxDP', %s, 2, 'committed', 'me')",
                     ('{"delta": "2.5e-07", "epsilon": "0.25"}',))
    with PostgresLedger(target.location) as ledger:
        assert ledger.filter == "basic" and ledger.ledger_id == "v1ledger"
        assert ledger.spent() == ApproxDP(epsilon=0.5, delta=5e-7)
        assert ledger.remaining() == ApproxDP(epsilon=0.5, delta=5e-7)
        # basic composition takes an (eps, delta) spend after others
        ledger.commit(ledger.reserve(ApproxDP(epsilon=0.25, delta=2.5e-7), label="after"))
    monkeypatch.setattr(pg_module, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(pg_module.MIGRATIONS, 3, ("ALTER TABLE dpkit_ledger.spends ADD COLUMN note text",))
    for _ in range(2):  # the second open finds version 3 and applies nothing
        with PostgresLedger(target.location) as ledger:
            assert [e.label for e in ledger.history()] == ["before", "after"]
            assert ledger.remaining() == ApproxDP(epsilon=0.25, delta=2.5e-7)
    relations, _, meta, spends, _ = target.snapshot()  # type: ignore[misc]
    assert dict(meta)["schema_version"] == "3" and len(spends[0]) == 12  # item and the new column, once each


def test_bad_connections_are_one_line_errors_without_the_password(target: Target,
                                                                  postgres_server: PostgresServer) -> None:
    with PostgresLedger(target.location, budget=PureDP(1.0)) as ledger:
        ledger.commit(ledger.reserve(PureDP(0.25)))
    before = target.snapshot()
    secret = postgres_server.password
    name = target.location.rsplit("/", 1)[1]
    cases = [
        (postgres_server.url(name, password="not-the-password"), "password authentication failed"),
        (postgres_server.url(name, user="nobody", password="x"), "password authentication failed"),
        (target.location.replace(f":{postgres_server.port}/", ":1/"), "Connection refused"),
        (postgres_server.url("no_such_database"), 'database "no_such_database" does not exist'),
        (f"postgresql://dpkit_admin:{secret}@127.0.0.1:{postgres_server.port}/{name}?foo=bar",
         "not a valid PostgreSQL"),
        (f"postgresql://dpkit_admin:{secret}%zz@127.0.0.1/{name}", "not a valid PostgreSQL"),
    ]
    for url, match in cases:
        for budget in (None, PureDP(1.0)):
            with pytest.raises(LedgerError, match=match) as info:
                open_ledger(url, budget=budget)
            message = str(info.value)
            assert "\n" not in message and secret not in message and "not-the-password" not in message, message
    assert target.snapshot() == before  # nothing spent, nothing written


def test_an_analyst_role_with_the_readme_grants_shares_the_ledger(target: Target,
                                                                  postgres_server: PostgresServer) -> None:
    """The README's set-up: the administrator creates the ledger, a second role with the grants it names spends."""
    PostgresLedger(target.location, budget=PureDP(1.0)).close()
    name = target.location.rsplit("/", 1)[1]
    role = f"analyst_{name}"
    with target.raw() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        conn.execute(f"GRANT USAGE ON SCHEMA dpkit_ledger TO {role}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA dpkit_ledger TO {role}")
    with PostgresLedger(postgres_server.url(name, user=role, password="pw")) as ledger:
        ledger.commit(ledger.reserve(PureDP(0.25)))
        assert ledger.remaining() == PureDP(0.75) and ledger.history()[0].state == "committed"
    with target.raw() as conn:  # without the budget row's UPDATE right the reserve cannot lock it: refused, no row
        conn.execute(f"REVOKE UPDATE ON dpkit_ledger.budget FROM {role}")
    with PostgresLedger(postgres_server.url(name, user=role, password="pw")) as ledger:
        with pytest.raises(LedgerError, match="permission denied for table budget. Nothing was changed"):
            ledger.reserve(PureDP(0.25))
        assert len(ledger.history()) == 1


def test_a_server_without_fsync_is_refused(target: Target, postgres_server: PostgresServer) -> None:
    with postgres_server.connect() as admin:
        admin.execute("ALTER SYSTEM SET fsync = off")
        admin.execute("SELECT pg_reload_conf()")
        _wait_for_setting(postgres_server, "fsync", "off")
        try:
            before = target.snapshot()
            with pytest.raises(LedgerError, match="fsync = off"):
                PostgresLedger(target.location, budget=PureDP(1.0))
            assert target.snapshot() == before
        finally:
            admin.execute("ALTER SYSTEM RESET fsync")
            admin.execute("SELECT pg_reload_conf()")
            _wait_for_setting(postgres_server, "fsync", "on")


def _wait_for_setting(server: PostgresServer, name: str, value: str) -> None:
    """A reload reaches new sessions once the postmaster has read it: wait until one sees it."""
    deadline = time.monotonic() + 30
    while True:
        with server.connect() as conn:
            if conn.execute(f"SHOW {name}").fetchone()[0] == value:
                return
        assert time.monotonic() < deadline, f"{name} never became {value}"
        time.sleep(0.05)


def test_a_lock_held_past_the_timeout_is_an_error_and_writes_nothing(target: Target) -> None:
    with PostgresLedger(target.location, budget=PureDP(1.0), timeout=0.5) as ledger:
        before = target.snapshot()
        with target.hold_write_lock():
            with pytest.raises(LedgerUnavailableError, match="could not lock the ledger .* within 0.5 s") as info:
                ledger.reserve(PureDP(0.25))
            assert "reset" not in str(info.value) and "nothing was spent" in str(info.value).lower()
            assert ledger.remaining() == PureDP(1.0)  # reads never wait for the lock
        assert target.snapshot() == before
        ledger.commit(ledger.reserve(PureDP(0.25)))  # the same connection works afterwards
        assert ledger.spent() == PureDP(0.25)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_server_restart_between_reserve_and_commit_loses_no_spend(target: Target, postgres_server: PostgresServer,
                                                                      mode: str) -> None:
    """``immediate`` stops without a checkpoint: the restart replays the write-ahead log, as after a crash."""
    with PostgresLedger(target.location, budget=PureDP(1.0)) as ledger:
        committed = ledger.reserve(PureDP(0.25), label="to commit")
        forgotten = ledger.reserve(PureDP(0.5), label="never committed")
        postgres_server.restart(mode)
        ledger.commit(committed)  # the broken connection is replaced; the reservation was durable
        assert ledger.remaining() == PureDP(0.25)
        postgres_server.restart(mode)
        with pytest.raises(BudgetExceededError):
            ledger.reserve(PureDP(0.5))
    with PostgresLedger(target.location) as ledger:
        assert {(e.label, e.state) for e in ledger.history()} == {("to commit", "committed"),
                                                                   ("never committed", "reserved")}
        assert ledger.reserved_but_uncommitted()[0].id == forgotten.id
        assert ledger.spent() == PureDP(0.75)


def test_without_psycopg_the_error_says_what_to_install(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    with pytest.raises(LedgerError, match=r"needs psycopg 3.*pip install 'dpkit\[postgres\]'"):
        open_ledger(target.location, budget=ApproxDP(epsilon=1.0, delta=1e-6))


def test_open_ledger_picks_the_backend_from_the_url(target: Target) -> None:
    with open_ledger(target.location.replace("postgresql://", "postgres://", 1), budget=PureDP(1.0)) as ledger:
        assert isinstance(ledger, PostgresLedger)
    with pytest.raises(ValueError, match="a file path or a postgresql:// URL; got a mysql:// URL"):
        open_ledger("mysql://me@db/budget")
    for bad in (0, -1.0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="timeout must be finite"):
            PostgresLedger(target.location, timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="connect_timeout must be finite and >= 2"):
        PostgresLedger(target.location, connect_timeout=1.0)
    with pytest.raises(TypeError, match="url must be a str"):
        PostgresLedger(3)  # type: ignore[arg-type]
