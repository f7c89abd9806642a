"""SQLiteLedger in one process: the protocol, refusals that change nothing, reopening, bad input.

Real SQLite files in ``tmp_path``; no mocks.  Multi-process and crash tests are in
``test_ledger_processes.py``.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.errors import BudgetExceededError, DpkitError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP
from dpkit.ledger import (
    Ledger,
    LedgerError,
    Reservation,
    SQLiteLedger,
    guarantee_from_record,
    guarantee_to_record,
)


def _files(path: Path) -> dict[str, str]:
    """SHA-256 of the ledger file and its WAL/SHM companions (what exists)."""
    out = {}
    for suffix in ("", "-wal"):
        p = Path(str(path) + suffix)
        if p.exists():
            out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _snapshot(ledger: SQLiteLedger) -> tuple[object, ...]:
    return (ledger.history(), ledger.rollup())


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "budget.db"


# ---- the protocol -------------------------------------------------------------------------------
def test_spend_refuse_remaining(path: Path) -> None:
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        assert isinstance(ledger, Ledger)
        r = ledger.reserve(PureDP(0.25), label="count", metadata={"sql": "SELECT COUNT(*) FROM t"})
        assert isinstance(r, Reservation) and r.count == 1 and r.label == "count"
        assert ledger.remaining() == PureDP(0.75)  # a reservation counts before its commit
        ledger.commit(r)
        ledger.commit(r)  # idempotent
        ledger.reserve(PureDP(0.25), count=3)
        assert ledger.remaining() == PureDP(0.0)
        assert ledger.spent() == PureDP(1.0)
        with pytest.raises(BudgetExceededError, match="Nothing was spent"):
            ledger.reserve(PureDP(1e-9))
        entries = ledger.history()
        assert [(e.label, e.state, e.count) for e in entries] == [
            ("count", "committed", 1), ("0.25-DP", "reserved", 3)
        ]
        assert entries[0].metadata == {"sql": "SELECT COUNT(*) FROM t"}
        assert entries[0].guarantee == PureDP(0.25)
        rollup = ledger.rollup()
        assert (rollup.committed, rollup.reserved, rollup.aborted) == (1, 1, 0)
        assert rollup.budget == PureDP(1.0) and rollup.remaining == PureDP(0.0)


def test_refused_reserve_writes_nothing(path: Path) -> None:
    with SQLiteLedger(path, budget=ApproxDP(epsilon=1.0, delta=1e-6)) as ledger:
        ledger.commit(ledger.reserve(ApproxDP(epsilon=0.5, delta=5e-7)))
        before, files = _snapshot(ledger), _files(path)
        for guarantee, count, error in [
            (ApproxDP(epsilon=0.5, delta=6e-7), 1, BudgetExceededError),  # delta over
            (PureDP(0.3), 2, BudgetExceededError),  # epsilon over
            (ZCDP(0.01), 1, UnsupportedError),  # the ApproxDP filter cannot compose zCDP
            (WassersteinDP(p=1.0, epsilon=0.1), 1, UnsupportedError),
        ]:
            with pytest.raises(error):
                ledger.reserve(guarantee, count=count)
            with pytest.raises(error):
                ledger.check(guarantee, count=count)
        assert _snapshot(ledger) == before
        assert _files(path) == files  # not one byte changed


def test_reopen_sees_same_state_and_budget_goes_down(path: Path) -> None:
    """A second run against the same ledger shows the budget going down and refuses once spent."""
    seen = []
    for run in range(5):
        with SQLiteLedger(path, budget=ZCDP(0.5) if run == 0 else None) as ledger:
            assert ledger.budget == ZCDP(0.5)
            try:
                with ledger.spend(ZCDP(0.125), label=f"run {run}"):
                    pass
            except BudgetExceededError:
                seen.append("refused")
            seen.append(float(ledger.remaining().rho))
    assert seen == [0.375, 0.25, 0.125, 0.0, "refused", 0.0]
    with SQLiteLedger(path) as ledger:
        assert [e.label for e in ledger.history()] == ["run 0", "run 1", "run 2", "run 3"]


def test_budget_mismatch_on_reopen_refused(path: Path) -> None:
    SQLiteLedger(path, budget=PureDP(1.0)).close()
    before = _files(path)
    for other in (PureDP(1.0000000000000002), ApproxDP(epsilon=1.0, delta=0.0), ZCDP(1.0)):
        with pytest.raises(ValueError, match="does not match the budget"):
            SQLiteLedger(path, budget=other)
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:  # the same budget is accepted
        assert ledger.budget == PureDP(1.0)
    assert _files(path).get("") == before.get("")


def test_new_ledger_needs_budget(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pass budget="):
        SQLiteLedger(tmp_path / "new.db")
    with SQLiteLedger(tmp_path / "new.db", budget=PureDP(1.0)) as ledger:  # the refused open left no schema
        assert ledger.remaining() == PureDP(1.0)


def test_context_manager_aborts_on_error_and_commits_on_success(path: Path) -> None:
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        with pytest.raises(RuntimeError, match="backend down"):
            with ledger.spend(PureDP(0.5)):
                raise RuntimeError("backend down")
        assert ledger.remaining() == PureDP(1.0)
        with ledger.spend(PureDP(0.5), label="ok") as r:
            assert ledger.reserved_but_uncommitted()[0].id == r.id
        assert [e.state for e in ledger.history()] == ["aborted", "committed"]
        ran = []
        with pytest.raises(BudgetExceededError):
            with ledger.spend(PureDP(0.75)):
                ran.append(1)
        assert ran == []


def test_state_transitions(path: Path, tmp_path: Path) -> None:
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        a, b = ledger.reserve(PureDP(0.1)), ledger.reserve(PureDP(0.1))
        ledger.commit(a)
        ledger.abort(b)
        ledger.abort(b)  # idempotent
        before = _snapshot(ledger)
        with pytest.raises(LedgerError, match="never returned"):
            ledger.abort(a)
        with pytest.raises(LedgerError, match="already aborted"):
            ledger.commit(b)
        with pytest.raises(TypeError, match="Reservation"):
            ledger.commit(a.id)  # type: ignore[arg-type]
        with SQLiteLedger(tmp_path / "other.db", budget=PureDP(1.0)) as other:
            with pytest.raises(LedgerError, match="another ledger"):
                other.commit(a)
        assert _snapshot(ledger) == before


def test_uncommitted_reservation_counts_and_can_be_aborted_explicitly(path: Path) -> None:
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        ledger.reserve(PureDP(0.75))  # its process "forgets" it
    with SQLiteLedger(path) as ledger:
        (entry,) = ledger.reserved_but_uncommitted()
        assert entry.state == "reserved" and ":" in entry.owner
        assert ledger.remaining() == PureDP(0.25)
        with pytest.raises(BudgetExceededError):
            ledger.reserve(PureDP(0.5))
        ledger.abort(entry)  # an operator's explicit decision
        assert ledger.remaining() == PureDP(1.0) and ledger.reserved_but_uncommitted() == ()


# ---- families -----------------------------------------------------------------------------------
def test_approx_budget_composes_epsilon_and_delta(path: Path) -> None:
    with SQLiteLedger(path, budget=ApproxDP(epsilon=1.0, delta=1e-6)) as ledger:
        ledger.reserve(PureDP(0.25))
        ledger.reserve(ApproxDP(epsilon=0.25, delta=2.5e-7), count=2)
        assert ledger.spent() == ApproxDP(epsilon=0.75, delta=5e-7)
        assert ledger.remaining() == ApproxDP(epsilon=0.25, delta=5e-7)


def test_zcdp_budget_takes_gaussian_dp(path: Path) -> None:
    with SQLiteLedger(path, budget=ZCDP(1.0)) as ledger:
        ledger.reserve(GaussianDP(1.0))  # mu-GDP is (mu^2/2)-zCDP
        assert math.isclose(float(ledger.spent().rho), 0.5, rel_tol=1e-12)
        with pytest.raises(BudgetExceededError):
            ledger.reserve(GaussianDP(1.0), count=2)


def test_renyi_budget_per_order(path: Path) -> None:
    budget = RenyiDP(orders=[2.0, 8.0], epsilons=[1.0, 4.0])
    with SQLiteLedger(path, budget=budget) as ledger:
        ledger.reserve(ZCDP(0.25))  # alpha * rho: 0.5 at 2, 2.0 at 8
        spent = ledger.spent()
        assert spent.epsilons == (0.5, 2.0)
        assert ledger.remaining().epsilons == (0.5, 2.0)
        with pytest.raises(BudgetExceededError, match="order 8"):
            ledger.reserve(RenyiDP(orders=[2.0, 8.0], epsilons=[0.1, 2.5]))
    with SQLiteLedger(path, budget=RenyiDP(orders=[8.0, 2.0], epsilons=[4.0, 1.0])) as ledger:  # same, reordered
        assert ledger.budget == budget


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


# ---- bad input: every refusal leaves the ledger unchanged ---------------------------------------
@pytest.mark.parametrize("count", [0, -1, 1.5, True, math.nan, math.inf, -math.inf, "2", None])
def test_bad_count_refused(path: Path, count: object) -> None:
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        before = _snapshot(ledger)
        with pytest.raises(ValueError, match="count must be an integer >= 1"):
            ledger.reserve(PureDP(0.1), count=count)  # type: ignore[arg-type]
        assert _snapshot(ledger) == before


def test_bad_label_and_metadata_refused(path: Path) -> None:
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        before = _snapshot(ledger)
        with pytest.raises(TypeError, match="label must be a str"):
            ledger.reserve(PureDP(0.1), label=3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="metadata must be a dict"):
            ledger.reserve(PureDP(0.1), metadata=[1])  # type: ignore[arg-type]
        for value in (math.nan, math.inf, -math.inf):
            with pytest.raises(ValueError, match="metadata must be JSON"):
                ledger.reserve(PureDP(0.1), metadata={"x": value})
        with pytest.raises(TypeError):
            ledger.reserve(PureDP(0.1), metadata={"x": object()})
        assert _snapshot(ledger) == before


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, -math.inf, True, "1"])
def test_bad_timeout_refused(path: Path, timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout must be finite and > 0"):
        SQLiteLedger(path, budget=PureDP(1.0), timeout=timeout)  # type: ignore[arg-type]
    assert not path.exists()


def test_bad_budget_and_path_refused(path: Path) -> None:
    with pytest.raises(TypeError, match="budget must be"):
        SQLiteLedger(path, budget=GaussianDP(1.0))  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError):
        SQLiteLedger(path, budget=WassersteinDP(p=1.0, epsilon=1.0))  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError, match="finitely many orders"):
        SQLiteLedger(path, budget=RenyiDP(curve=lambda a: a))
    with pytest.raises(ValueError, match="must name a file"):
        SQLiteLedger(":memory:", budget=PureDP(1.0))
    with pytest.raises(TypeError, match="path must be"):
        SQLiteLedger(3, budget=PureDP(1.0))  # type: ignore[arg-type]
    assert not path.exists()


def test_closed_ledger_refuses(path: Path) -> None:
    ledger = SQLiteLedger(path, budget=PureDP(1.0))
    ledger.close()
    ledger.close()
    with pytest.raises(LedgerError, match="closed"):
        ledger.remaining()


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


def test_unknown_type_and_corruption_in_file(tmp_path: Path) -> None:
    p = tmp_path / "a.db"
    SQLiteLedger(p, budget=PureDP(1.0)).close()
    _tamper(p, "INSERT INTO spends (created_at, updated_at, label, type, params, count, state, owner)"
               " VALUES ('t', 't', 'x', 'SuperDP', '{}', 1, 'committed', 'me')")
    with SQLiteLedger(p) as ledger:
        with pytest.raises(LedgerError, match="unknown guarantee type 'SuperDP'"):
            ledger.remaining()
        with pytest.raises(LedgerError, match="unknown guarantee type"):
            ledger.reserve(PureDP(0.1))

    q = tmp_path / "b.db"
    SQLiteLedger(q, budget=PureDP(1.0)).close()
    _tamper(q, "PRAGMA user_version = 99")
    with pytest.raises(LedgerError, match="schema version 99"):
        SQLiteLedger(q)

    r = tmp_path / "c.db"
    SQLiteLedger(r, budget=PureDP(1.0)).close()
    _tamper(r, "UPDATE budget SET type = 'GaussianDP', params = ?", '{"mu": "1.0"}')
    with pytest.raises(LedgerError, match="not a valid budget"):
        SQLiteLedger(r)

    t = tmp_path / "t.db"
    SQLiteLedger(t, budget=PureDP(1.0)).close()
    _tamper(t, "INSERT INTO spends (created_at, updated_at, label, type, params, count, state, owner)"
               " VALUES ('t', 't', 'x', 'ApproxDP', ?, 1, 'reserved', 'me')", '{"epsilon": "0.1", "delta": "0.5"}')
    with SQLiteLedger(t) as ledger:  # a delta > 0 in a pure ledger is never silently dropped
        with pytest.raises(LedgerError, match="cannot compose"):
            ledger.spent()
        with pytest.raises(LedgerError, match="cannot compose"):
            ledger.reserve(PureDP(0.1))

    s = tmp_path / "d.db"
    SQLiteLedger(s, budget=PureDP(1.0)).close()
    _tamper(s, "INSERT INTO spends (created_at, updated_at, label, type, params, count, state, owner)"
               " VALUES ('t', 't', 'x', 'PureDP', ?, 1, 'committed', 'me')", '{"epsilon": "2.0"}')
    with SQLiteLedger(s) as ledger:  # a hand-edited overspend: nothing more is admitted
        assert ledger.remaining() == PureDP(0.0)
        with pytest.raises(BudgetExceededError, match="already records spends beyond"):
            ledger.reserve(PureDP(1e-3))


# ---- threads ------------------------------------------------------------------------------------
def test_threads_share_one_ledger_without_overspending(path: Path) -> None:
    SQLiteLedger(path, budget=PureDP(1.0)).close()
    shared = SQLiteLedger(path)
    outcomes: list[str] = []
    lock = threading.Lock()

    def work(own: bool) -> None:
        ledger = SQLiteLedger(path) if own else shared
        for _ in range(10):
            try:
                ledger.commit(ledger.reserve(PureDP(0.0625)))
                result = "ok"
            except BudgetExceededError:
                result = "refused"
            with lock:
                outcomes.append(result)
        if own:
            ledger.close()

    threads = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 16 and outcomes.count("refused") == 24
    assert shared.spent() == PureDP(1.0)
    shared.close()
