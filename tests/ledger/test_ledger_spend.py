"""``ledger.spend(...)``: the budget is reserved by the call itself, with or without ``with``.

A plain call (no ``with``) used to do nothing at all (a generator context manager that was never entered),
so ``ledger.spend(x); release()`` released a value that the ledger never charged.  Now the call reserves
durably (or raises BudgetExceededError, changing nothing) and returns a :class:`SpendHandle`; ``with``
keeps its semantics (commit on success, abort on an exception, a failed abort leaves the spend counted),
a handle enters one ``with`` block only, and a handle dropped unfinished stays counted and warns.
Run for every backend (a SQLite file and a real PostgreSQL server); nothing is mocked.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from dpkit.errors import ArgumentTypeError, BudgetExceededError
from dpkit.guarantees import ZCDP, PureDP
from dpkit.ledger import Ledger, LedgerError, Reservation, SpendHandle
from ledger_targets import Target
from test_ledger_processes import _env, _integrity_ok

CHILD = str(Path(__file__).with_name("ledger_child.py"))


def _state(ledger: Ledger) -> tuple[object, ...]:
    return (ledger.history(), ledger.rollup())  # type: ignore[attr-defined]


def _rows(target: Target) -> list[tuple[object, ...]]:
    """(id, state, label) of every spend row, read from outside dpkit."""
    with target.raw() as conn:
        return [tuple(r) for r in conn.execute("SELECT id, state, label FROM spends ORDER BY id").fetchall()]


# ---- a plain call charges -------------------------------------------------------------------------
def test_a_plain_call_charges_at_once_and_survives_reopening(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        handle = ledger.spend(PureDP(0.25), label="plain")  # no `with`: the budget is taken by the call
        assert isinstance(handle, SpendHandle) and isinstance(handle.reservation, Reservation)
        assert ledger.remaining() == PureDP(0.75)
        assert [e.id for e in ledger.reserved_but_uncommitted()] == [handle.reservation.id]
        handle.commit()
        handle.commit()  # idempotent, as ledger.commit
        kept = ledger.spend(PureDP(0.5), label="never finished")
        assert ledger.remaining() == PureDP(0.25)
    assert _rows(ledger_target) == [(handle.reservation.id, "committed", "plain"),
                                    (kept.reservation.id, "reserved", "never finished")]
    with ledger_target.open() as ledger:  # a new connection replays the record: both still count
        assert ledger.remaining() == PureDP(0.25) and ledger.spent() == PureDP(0.75)
        with pytest.raises(BudgetExceededError):
            ledger.spend(PureDP(0.5))
    with pytest.warns(ResourceWarning, match=r"never committed nor aborted.*counts as spent") as seen:
        del kept
        gc.collect()
    assert "test_ledger_spend.py:" in str(seen[0].message)  # names the line that made it
    assert _rows(ledger_target)[1][1] == "reserved"  # collecting the handle touched nothing


def test_a_plain_call_from_a_process_that_dies_stays_counted(ledger_target: Target) -> None:
    ledger_target.open(ZCDP(0.5)).close()
    out = subprocess.run([sys.executable, CHILD, "plain", str(ledger_target), "0.25"], capture_output=True,
                         text=True, timeout=120, env=_env())
    assert out.returncode == 0, out.stderr
    with ledger_target.open() as ledger:  # (a PureDP spend composed under the zCDP budget: 0.25 tanh(0.125))
        (entry,) = ledger.reserved_but_uncommitted()
        assert out.stdout.strip() == f"spent {entry.id}" and entry.label == "plain"
        assert 0 < float(ledger.spent().rho) and float(ledger.remaining().rho) < 0.5
    _integrity_ok(ledger_target)


def test_a_refused_spend_raises_from_the_call_and_changes_nothing(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        with ledger.spend(PureDP(0.75)):
            pass
        before, stored = _state(ledger), ledger_target.snapshot()
        with pytest.raises(BudgetExceededError, match="Nothing was spent"):
            ledger.spend(PureDP(0.5))  # a plain call is refused as the call
        ran = []
        with pytest.raises(BudgetExceededError):
            with ledger.spend(PureDP(0.5), count=1, label="too much"):
                ran.append(1)
        assert ran == []
        with pytest.raises(ValueError):
            ledger.spend(PureDP(0.1), count=0)
        assert _state(ledger) == before
        assert ledger_target.snapshot() == stored  # not one byte, row or sequence number changed
        assert ledger.remaining() == PureDP(0.25)


# ---- `with` keeps its semantics -------------------------------------------------------------------
def test_with_commits_on_success_and_aborts_on_an_exception(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        with pytest.raises(RuntimeError, match="backend down"):
            with ledger.spend(PureDP(0.5), label="failed") as r:
                assert isinstance(r, Reservation) and ledger.remaining() == PureDP(0.5)  # reserved in the block
                raise RuntimeError("backend down")
        assert ledger.remaining() == PureDP(1.0)
        with ledger.spend(PureDP(0.5), label="ok", metadata={"q": 1}) as r:
            assert [e.id for e in ledger.reserved_but_uncommitted()] == [r.id]
        assert [(e.label, e.state) for e in ledger.history()] == [("failed", "aborted"), ("ok", "committed")]
        assert ledger.history()[1].metadata == {"q": 1} and ledger.remaining() == PureDP(0.5)
        with pytest.raises(KeyboardInterrupt):  # any BaseException aborts, as before
            with ledger.spend(PureDP(0.25)):
                raise KeyboardInterrupt
        assert ledger.history()[-1].state == "aborted" and ledger.remaining() == PureDP(0.5)


def test_a_failed_abort_leaves_the_spend_reserved_and_counted(ledger_target: Target) -> None:
    ledger = ledger_target.open(PureDP(1.0))
    with pytest.raises(RuntimeError, match="after close"):
        with ledger.spend(PureDP(0.5), label="orphan"):
            ledger.close()  # the abort on leaving cannot reach the store (LedgerError, swallowed)
            raise RuntimeError("after close")
    assert _rows(ledger_target)[0][1:] == ("reserved", "orphan")
    with ledger_target.open() as again:
        assert again.remaining() == PureDP(0.5)


def test_a_commit_that_cannot_be_recorded_raises_and_the_spend_stays_counted(ledger_target: Target) -> None:
    ledger = ledger_target.open(PureDP(1.0))
    with pytest.raises(LedgerError, match="closed"):
        with ledger.spend(PureDP(0.5)):
            ledger.close()
    with ledger_target.open() as again:
        assert again.remaining() == PureDP(0.5) and len(again.reserved_but_uncommitted()) == 1


# ---- one handle, one release ----------------------------------------------------------------------
def test_a_handle_enters_one_with_block_only(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        handle = ledger.spend(PureDP(0.25))
        with handle as r:
            pass
        before = _state(ledger)
        ran = []
        with pytest.raises(LedgerError, match=r"already committed: .* one `with` block only"):
            with handle:
                ran.append(1)
        assert ran == [] and _state(ledger) == before

        nested = ledger.spend(PureDP(0.25), label="nested")
        with pytest.raises(LedgerError, match="already entered"):
            with nested:
                with nested:
                    ran.append(2)
        assert ran == []  # the inner block never ran; the outer one raised, so its reservation was aborted
        assert ledger.history()[-1].state == "aborted"

        committed = ledger.spend(PureDP(0.25))
        committed.commit()
        aborted = ledger.spend(PureDP(0.25))
        aborted.abort()
        for done, how in ((committed, "already committed"), (aborted, "already aborted")):
            with pytest.raises(LedgerError, match=how):
                with done:
                    ran.append(3)
        assert ran == [] and r.id == ledger.history()[0].id
        assert ledger.remaining() == PureDP(0.5)


def test_threads_entering_one_handle_get_it_once(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        handle = ledger.spend(PureDP(0.25))
        barrier, got, refused = threading.Barrier(8), [], []
        inside = threading.Event()

        def enter() -> None:
            barrier.wait()
            try:
                with handle:
                    got.append(1)
                    inside.wait(10)  # hold the block open while the others try
            except LedgerError:
                refused.append(1)
                inside.set()

        threads = [threading.Thread(target=enter) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert (len(got), len(refused)) == (1, 7)
        assert [e.state for e in ledger.history()] == ["committed"]


def test_a_handle_ends_only_through_itself(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        handle = ledger.spend(PureDP(0.25))
        with pytest.raises(ArgumentTypeError, match=r"got SpendHandle\. Call the handle's own \.commit\(\)"):
            ledger.commit(handle)  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError, match=r"own \.abort\(\)"):
            ledger.abort(handle)  # type: ignore[arg-type]
        assert "reserved" in repr(handle)
        ledger.commit(handle.reservation)  # the reservation itself is what the ledger takes
        with pytest.raises(LedgerError, match="never returned"):
            handle.abort()
        assert ledger.history()[0].state == "committed" and ledger.remaining() == PureDP(0.75)
        with pytest.warns(ResourceWarning):  # the handle itself never ended it: it still says so
            del handle
            gc.collect()


def test_only_an_unfinished_un_entered_handle_warns(ledger_target: Target) -> None:
    with ledger_target.open(PureDP(1.0)) as ledger:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any warning below fails the test
            with ledger.spend(PureDP(0.125)):
                pass
            h = ledger.spend(PureDP(0.125))
            h.commit()
            del h
            h = ledger.spend(PureDP(0.125))
            h.abort()
            del h
            with pytest.raises(RuntimeError):
                with ledger.spend(PureDP(0.125)):
                    raise RuntimeError
            gc.collect()
        assert [e.state for e in ledger.history()] == ["committed", "committed", "aborted", "aborted"]
