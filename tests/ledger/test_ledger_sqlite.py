"""What only the SQLite ledger has: the record format's exact round trip, file paths and timeouts,
files that are not ledgers, schema versions in the file header, and a file written by an older dpkit.

The contract both ledgers share is ``test_ledger_contract.py`` (run on SQLite and PostgreSQL).  Real
SQLite files in ``tmp_path``; no mocks.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.errors import DpkitError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP
from dpkit.ledger import LedgerError, SQLiteLedger, guarantee_from_record, guarantee_to_record

DATA = Path(__file__).with_name("data")


def _files(path: Path) -> dict[str, str]:
    """SHA-256 of the ledger file and its WAL/SHM companions (what exists)."""
    out = {}
    for suffix in ("", "-wal"):
        p = Path(str(path) + suffix)
        if p.exists():
            out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "budget.db"


# ---- the record format --------------------------------------------------------------------------
finite = st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(epsilon=finite, delta=st.floats(min_value=0.0, max_value=1.0), mu=st.floats(min_value=5e-324, max_value=1e300))
def test_records_round_trip_exactly(epsilon: float, delta: float, mu: float) -> None:
    for g in (PureDP(epsilon), ApproxDP(epsilon=epsilon, delta=delta), ZCDP(epsilon), GaussianDP(mu),
              RenyiDP(orders=[1.5, 1e6], epsilons=[epsilon, math.inf])):
        back = guarantee_from_record(*guarantee_to_record(g))
        assert type(back) is type(g) and guarantee_to_record(back) == guarantee_to_record(g)
        for name in ("epsilon", "delta", "rho", "mu", "orders", "epsilons"):
            if hasattr(g, name) and not callable(getattr(g, name)):
                assert getattr(back, name) == getattr(g, name)


def test_unstorable_guarantees_refused() -> None:
    with pytest.raises(UnsupportedError, match="transport distance"):
        guarantee_to_record(WassersteinDP(p=2.0, epsilon=0.5))
    with pytest.raises(UnsupportedError, match="finitely many orders"):
        guarantee_to_record(RenyiDP(curve=lambda a: 0.5 * a))
    with pytest.raises(TypeError, match="mechanism.guarantee"):
        guarantee_to_record(1.0)
    with pytest.raises(LedgerError, match="unknown guarantee type 'Foo'"):
        guarantee_from_record("Foo", "{}")
    for bad in ('{"epsilon": "nan"}', '{"epsilon": 1.0}', '{"eps": "1.0"}', "not json", '["1.0"]', '{"epsilon": "-1"}'):
        with pytest.raises(LedgerError, match="invalid parameters"):
            guarantee_from_record("PureDP", bad)


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, -math.inf, True, "1"])
def test_bad_timeout_refused(path: Path, timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout must be finite and > 0"):
        SQLiteLedger(path, budget=PureDP(1.0), timeout=timeout)  # type: ignore[arg-type]
    assert not path.exists()


def test_bad_budget_and_path_refused(path: Path) -> None:
    with pytest.raises(TypeError, match="budget must be"):
        SQLiteLedger(path, budget=0.5)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError):
        SQLiteLedger(path, budget=WassersteinDP(p=1.0, epsilon=1.0))  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError, match="finitely many orders"):
        SQLiteLedger(path, budget=RenyiDP(curve=lambda a: a))
    with pytest.raises(ValueError, match="must name a file"):
        SQLiteLedger(":memory:", budget=PureDP(1.0))
    with pytest.raises(TypeError, match="path must be"):
        SQLiteLedger(3, budget=PureDP(1.0))  # type: ignore[arg-type]
    assert not path.exists()


# ---- files that are not ledgers -----------------------------------------------------------------
def test_alien_files_refused_and_untouched(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_bytes(b"this is not a database, it is a grocery list\n" * 50)
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    for p, match in ((text, "not a usable SQLite database"), (other, "not a dpkit ledger")):
        before = p.read_bytes()
        with pytest.raises(LedgerError, match=match):
            SQLiteLedger(p, budget=PureDP(1.0))
        assert p.read_bytes() == before
    with pytest.raises(LedgerError):
        SQLiteLedger(tmp_path, budget=PureDP(1.0))  # a directory
    assert issubclass(LedgerError, DpkitError)


def _tamper(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


def test_a_newer_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    q = tmp_path / "b.db"
    SQLiteLedger(q, budget=PureDP(1.0)).close()
    _tamper(q, "PRAGMA user_version = 99")
    before = _files(q)
    with pytest.raises(LedgerError, match="schema version 99"):
        SQLiteLedger(q)
    assert _files(q) == before


def test_a_ledger_file_written_before_the_shared_core_still_opens(tmp_path: Path) -> None:
    """``data/ledger-v1.db`` was written by SQLiteLedger as of commit d1b4483^ (one committed, one reserved, one
    aborted spend); it opens, reads back exactly, and takes new spends."""
    path = tmp_path / "old.db"
    shutil.copyfile(DATA / "ledger-v1.db", path)
    with SQLiteLedger(path, budget=ApproxDP(epsilon=2.0, delta=1e-6)) as ledger:
        assert ledger.ledger_id == "dac5add41bea46cf8d27025459d8e699"
        history = ledger.history()
        assert [(e.id, e.label, e.state, e.count) for e in history] == [
            (1, "committed one", "committed", 1), (2, "left reserved", "reserved", 2), (3, "aborted one", "aborted", 1)]
        assert history[0].metadata == {"sql": "SELECT 1", "engine": "duckdb"}
        assert history[1].guarantee == ApproxDP(epsilon=0.25, delta=2.5e-7)
        assert history[0].created_at == "2026-11-23T19:36:16.399225+00:00"
        assert ledger.remaining() == ApproxDP(epsilon=1.0, delta=5e-7)
        ledger.commit(ledger.reserve(PureDP(1.0)))
        assert ledger.remaining() == ApproxDP(epsilon=0.0, delta=5e-7)
        assert [e.id for e in ledger.history()] == [1, 2, 3, 4]
    _integrity_ok(path)


def _integrity_ok(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
