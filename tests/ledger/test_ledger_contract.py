"""The ledger contract in one process, run for every backend (a SQLite file and a real PostgreSQL server).

The protocol, refusals that change nothing (the stored state compared from outside dpkit: the file's
bytes, or every row and the id sequence), reopening, the budget families, bad input and a record
edited by hand.  Real stores, no mocks.  Multi-process and crash tests: ``test_ledger_processes.py``;
what only one backend has: ``test_ledger_sqlite.py`` and ``test_ledger_postgres.py``.
"""

from __future__ import annotations

import math
import threading

import pytest

from ledger_targets import Target
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP
from dpkit.ledger import Ledger, LedgerError, Reservation


def _state(ledger: Ledger) -> tuple[object, ...]:
    return (ledger.history(), ledger.rollup())  # type: ignore[attr-defined]


# ---- the protocol -------------------------------------------------------------------------------
def test_spend_refuse_remaining(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
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
        assert entries[0].created_at <= entries[0].updated_at and entries[0].created_at.endswith("+00:00")
        rollup = ledger.rollup()
        assert (rollup.committed, rollup.reserved, rollup.aborted) == (1, 1, 0)
        assert rollup.budget == PureDP(1.0) and rollup.remaining == PureDP(0.0)


def test_refused_reserve_writes_nothing(ledger_target: Target) -> None:
    with ledger_target.open(ApproxDP(epsilon=1.0, delta=1e-6)) as ledger:
        ledger.commit(ledger.reserve(ApproxDP(epsilon=0.5, delta=5e-7)))
        before, stored = _state(ledger), ledger_target.snapshot()
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
        assert _state(ledger) == before
        assert ledger_target.snapshot() == stored  # not one byte, row or sequence number changed


def test_reopen_sees_same_state_and_budget_goes_down(ledger_target: Target) -> None:
    """A second run against the same ledger shows the budget going down and refuses once spent."""
    seen = []
    for run in range(5):
        with ledger_target.open(ZCDP(0.5) if run == 0 else None) as ledger:
            assert ledger.budget == ZCDP(0.5)
            try:
                with ledger.spend(ZCDP(0.125), label=f"run {run}"):
                    pass
            except BudgetExceededError:
                seen.append("refused")
            seen.append(float(ledger.remaining().rho))
    assert seen == [0.375, 0.25, 0.125, 0.0, "refused", 0.0]
    with ledger_target.open() as ledger:
        assert [e.label for e in ledger.history()] == ["run 0", "run 1", "run 2", "run 3"]


def test_budget_mismatch_on_reopen_refused(ledger_target: Target) -> None:
    ledger_target.open(PureDP(1.0)).close()
    before = ledger_target.snapshot()
    for other in (PureDP(1.0000000000000002), ApproxDP(epsilon=1.0, delta=0.0), ZCDP(1.0)):
        with pytest.raises(ValueError, match="does not match the budget"):
            ledger_target.open(other)
    with ledger_target.open(PureDP(1.0)) as ledger:  # the same budget is accepted
        assert ledger.budget == PureDP(1.0)
    after = ledger_target.snapshot()
    assert (after.get("") == before.get("")) if isinstance(after, dict) else after == before


def test_new_ledger_needs_budget(ledger_target: Target) -> None:
    before = ledger_target.snapshot()
    with pytest.raises(ValueError, match="pass budget="):
        ledger_target.open()
    if ledger_target.backend == "postgres":
        assert ledger_target.snapshot() == before  # not even the schema was made
    with ledger_target.open(PureDP(1.0)) as ledger:  # the refused open left no half-made ledger
        assert ledger.remaining() == PureDP(1.0)


def test_context_manager_aborts_on_error_and_commits_on_success(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
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


def test_state_transitions(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        a, b = ledger.reserve(PureDP(0.1)), ledger.reserve(PureDP(0.1))
        ledger.commit(a)
        ledger.abort(b)
        ledger.abort(b)  # idempotent
        before = _state(ledger)
        with pytest.raises(LedgerError, match="never returned"):
            ledger.abort(a)
        with pytest.raises(LedgerError, match="already aborted"):
            ledger.commit(b)
        with pytest.raises(TypeError, match="Reservation"):
            ledger.commit(a.id)  # type: ignore[arg-type]
        with ledger_target.other().open(PureDP(1.0)) as other:
            with pytest.raises(LedgerError, match="another ledger"):
                other.commit(a)
        assert _state(ledger) == before


def test_uncommitted_reservation_counts_and_can_be_aborted_explicitly(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        ledger.reserve(PureDP(0.75))  # its process "forgets" it
    with ledger_target.open() as ledger:
        (entry,) = ledger.reserved_but_uncommitted()
        assert entry.state == "reserved" and ":" in entry.owner
        assert ledger.remaining() == PureDP(0.25)
        with pytest.raises(BudgetExceededError):
            ledger.reserve(PureDP(0.5))
        ledger.abort(entry)  # an operator's explicit decision
        assert ledger.remaining() == PureDP(1.0) and ledger.reserved_but_uncommitted() == ()


def test_closed_ledger_refuses(ledger_target: Target) -> None:
    ledger = ledger_target.open(PureDP(1.0))
    ledger.close()
    ledger.close()
    with pytest.raises(LedgerError, match="closed"):
        ledger.remaining()


# ---- families -----------------------------------------------------------------------------------
def test_approx_budget_composes_epsilon_and_delta(ledger_target: Target) -> None:
    with ledger_target.open(ApproxDP(epsilon=1.0, delta=1e-6), filter="basic") as ledger:
        assert ledger.filter == "basic"
        ledger.reserve(PureDP(0.25))
        ledger.reserve(ApproxDP(epsilon=0.25, delta=2.5e-7), count=2)
        assert ledger.spent() == ApproxDP(epsilon=0.75, delta=5e-7)
        assert ledger.remaining() == ApproxDP(epsilon=0.25, delta=5e-7)
    with pytest.raises(ValueError, match="does not match the filter"):
        ledger_target.open(filter="auto")


def test_auto_filter_is_fixed_by_the_first_spend(ledger_target: Target) -> None:
    """A new ledger's filter is "auto": a pure first spend chooses the zCDP filter (with all of delta), so a later
    (epsilon, delta) spend has no delta to draw on and is refused, changing nothing."""
    with ledger_target.open(ApproxDP(epsilon=1.0, delta=1e-6)) as ledger:
        assert ledger.filter == "auto" and ledger.remaining() == ApproxDP(epsilon=1.0, delta=1e-6)
        ledger.reserve(PureDP(0.05))
        before, stored = _state(ledger), ledger_target.snapshot()
        with pytest.raises(UnsupportedError, match="no delta to draw on"):
            ledger.reserve(ApproxDP(epsilon=0.25, delta=2.5e-7))
        assert _state(ledger) == before and ledger_target.snapshot() == stored
        ledger.reserve(ZCDP(0.001))  # the zCDP filter takes zCDP spends under an ApproxDP budget
        assert isinstance(ledger.spent(), ApproxDP) and ledger.spent().delta in (0.0, 1e-6)


def test_gaussian_dp_budget(ledger_target: Target) -> None:
    with ledger_target.open(GaussianDP(1.0)) as ledger:
        ledger.reserve(GaussianDP(0.6))
        ledger.reserve(GaussianDP(0.6))
        assert ledger.spent() == Accountant_spent(GaussianDP(1.0), [GaussianDP(0.6)] * 2)
        before, stored = _state(ledger), ledger_target.snapshot()
        with pytest.raises(BudgetExceededError):
            ledger.reserve(GaussianDP(0.6))
        with pytest.raises(UnsupportedError):
            ledger.reserve(ZCDP(0.01))  # zCDP does not imply GDP
        assert _state(ledger) == before and ledger_target.snapshot() == stored
    with ledger_target.open() as ledger:
        assert ledger.budget == GaussianDP(1.0)
        left = ledger.remaining()
        assert isinstance(left, GaussianDP) and math.isclose(left.mu, math.sqrt(1 - 0.72), rel_tol=1e-12)


def Accountant_spent(budget: object, spends: list[object]) -> object:
    from dpkit.accounting import Accountant

    acc = Accountant(budget)  # type: ignore[arg-type]
    for g in spends:
        acc.admit(g)
    return acc.spent()


def test_zcdp_budget_takes_gaussian_dp(ledger_target: Target) -> None:
    with ledger_target.open(ZCDP(1.0)) as ledger:
        ledger.reserve(GaussianDP(1.0))  # mu-GDP is (mu^2/2)-zCDP
        assert math.isclose(float(ledger.spent().rho), 0.5, rel_tol=1e-12)
        with pytest.raises(BudgetExceededError):
            ledger.reserve(GaussianDP(1.0), count=2)


def test_renyi_budget_per_order(ledger_target: Target) -> None:
    budget = RenyiDP(orders=[2.0, 8.0], epsilons=[1.0, 4.0])
    with ledger_target.open(budget) as ledger:
        ledger.reserve(ZCDP(0.25))  # alpha * rho: 0.5 at 2, 2.0 at 8
        spent, left = ledger.spent(), ledger.remaining()  # the core rounds every cost up (by an ulp here)
        assert all(s >= e and math.isclose(s, e, rel_tol=1e-15) for s, e in zip(spent.epsilons, (0.5, 2.0)))
        assert all(r <= e and math.isclose(r, e, rel_tol=1e-15) for r, e in zip(left.epsilons, (0.5, 2.0)))
        with pytest.raises(BudgetExceededError, match="order 8"):
            ledger.reserve(RenyiDP(orders=[2.0, 8.0], epsilons=[0.1, 2.5]))
    with ledger_target.open(RenyiDP(orders=[8.0, 2.0], epsilons=[4.0, 1.0])) as ledger:  # same, reordered
        assert ledger.budget == budget


# ---- bad input: every refusal leaves the ledger unchanged ---------------------------------------
def test_bad_count_label_and_metadata_refused(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        before, stored = _state(ledger), ledger_target.snapshot()
        for count in (0, -1, 1.5, True, math.nan, math.inf, -math.inf, "2", None):
            with pytest.raises(ValueError, match="count must be an integer >= 1"):
                ledger.reserve(PureDP(0.1), count=count)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="label must be a str"):
            ledger.reserve(PureDP(0.1), label=3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="metadata must be a dict"):
            ledger.reserve(PureDP(0.1), metadata=[1])  # type: ignore[arg-type]
        for value in (math.nan, math.inf, -math.inf):
            with pytest.raises(ValueError, match="metadata must be JSON"):
                ledger.reserve(PureDP(0.1), metadata={"x": value})
        with pytest.raises(TypeError):
            ledger.reserve(PureDP(0.1), metadata={"x": object()})
        assert _state(ledger) == before
        assert ledger_target.snapshot() == stored


def test_bad_budget_refused_before_anything_is_written(ledger_target: Target) -> None:
    before = ledger_target.snapshot()
    with pytest.raises(TypeError, match="budget must be"):
        ledger_target.open(0.5)
    with pytest.raises(UnsupportedError):
        ledger_target.open(WassersteinDP(p=1.0, epsilon=1.0))
    with pytest.raises(UnsupportedError, match="finitely many orders"):
        ledger_target.open(RenyiDP(curve=lambda a: a))
    assert ledger_target.snapshot() == before


# ---- a record edited by hand --------------------------------------------------------------------
_INSERT = ("INSERT INTO spends (created_at, updated_at, label, type, params, count, state, owner)"
           " VALUES ('t', 't', 'x', ?, ?, 1, ?, 'me')")


def test_unknown_type_in_the_record(ledger_target: Target) -> None:
    ledger_target.open(PureDP(1.0)).close()
    ledger_target.tamper(_INSERT, "SuperDP", "{}", "committed")
    with ledger_target.open() as ledger:
        with pytest.raises(LedgerError, match="unknown guarantee type 'SuperDP'"):
            ledger.remaining()
        with pytest.raises(LedgerError, match="unknown guarantee type"):
            ledger.reserve(PureDP(0.1))


def test_invalid_stored_budget(ledger_target: Target) -> None:
    ledger_target.open(PureDP(1.0)).close()
    ledger_target.tamper("UPDATE budget SET type = 'RenyiDP', params = ?",
                         '{"epsilons": ["1.0"], "orders": ["1000.0"]}')  # an order above the core's largest
    with pytest.raises(LedgerError, match="not a valid budget"):
        ledger_target.open()


def test_a_delta_in_a_pure_ledger_is_never_dropped(ledger_target: Target) -> None:
    ledger_target.open(PureDP(1.0)).close()
    ledger_target.tamper(_INSERT, "ApproxDP", '{"epsilon": "0.1", "delta": "0.5"}', "reserved")
    with ledger_target.open() as ledger:
        with pytest.raises(LedgerError, match="cannot compose"):
            ledger.spent()
        with pytest.raises(LedgerError, match="cannot compose"):
            ledger.reserve(PureDP(0.1))


def test_a_hand_edited_overspend_admits_nothing_more(ledger_target: Target) -> None:
    ledger_target.open(PureDP(1.0)).close()
    ledger_target.tamper(_INSERT, "PureDP", '{"epsilon": "2.0"}', "committed")
    with ledger_target.open() as ledger:
        assert ledger.remaining() == PureDP(0.0)
        with pytest.raises(BudgetExceededError, match="already records spends beyond"):
            ledger.reserve(PureDP(1e-3))


# ---- threads ------------------------------------------------------------------------------------
def test_threads_share_one_ledger_without_overspending(ledger_target: Target) -> None:
    ledger_target.open(PureDP(1.0)).close()
    shared = ledger_target.open()
    outcomes: list[str] = []
    lock = threading.Lock()

    def work(own: bool) -> None:
        ledger = ledger_target.open() if own else shared
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
