"""The ledger decides through the accounting core: items of every kind, the stored filter, the cached replay.

A ledger and an in-memory :class:`dpkit.accounting.Accountant` over the same budget and filter must agree
spend by spend (admitted, refused, or refused as unsupported), including where the budget runs out; a
refused spend leaves the file byte-identical; a ledger written before items were recorded opens with the
basic filter and reports the same totals; a locked or read-only ledger is a LedgerUnavailableError.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from dpkit.accounting import Accountant
from dpkit.accounting.dpsgd import DPSGDStep
from dpkit.accounting.items import ORDERS, ORDERS_V1, GaussianEvent, LaplaceEvent, as_item, item_to_json
from dpkit.accounting.state import AccountingState
from dpkit.errors import BudgetExceededError, LedgerError, LedgerUnavailableError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP
from dpkit.ledger import SQLiteLedger
from dpkit.mechanisms import Gaussian, Laplace

DATA = Path(__file__).with_name("data")


def _files(path: Path) -> dict[str, str]:
    return {s: hashlib.sha256(Path(f"{path}{s}").read_bytes()).hexdigest()
            for s in ("", "-wal") if Path(f"{path}{s}").exists()}


def _outcome(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except BudgetExceededError:
        return "refused"
    except UnsupportedError:
        return "unsupported"
    return "ok"


def test_approx_ledger_admits_as_many_gaussians_as_the_accountant(tmp_path: Path) -> None:
    """ApproxDP(1, 1e-6) and the Gaussian mechanism with sigma = 100: the zCDP filter (chosen by the first spend)
    admits ~487 spends where basic composition (the ledger's old rule) admitted none of a Gaussian."""
    budget = ApproxDP(epsilon=1.0, delta=1e-6)
    mech = Gaussian(sensitivity=1.0, sigma=100.0)
    acc = Accountant(budget)
    n_acc = 0
    while _outcome(lambda: acc.admit(mech)) == "ok":
        n_acc += 1
    with SQLiteLedger(tmp_path / "b.db", budget=budget) as ledger:
        n = 0
        while True:
            try:
                ledger.reserve(mech)
            except BudgetExceededError:
                break
            n += 1
        assert n == n_acc and 480 <= n <= 495
        assert ledger.rollup().reserved == n
        assert ledger.state().count == n
        assert ledger.spent() == acc.spent() and ledger.remaining() == acc.remaining()
    with SQLiteLedger(tmp_path / "b.db") as reopened:  # a fresh replay of the record decides the same
        assert reopened.spent() == acc.spent()
        assert _outcome(lambda: reopened.reserve(mech)) == "refused"


SPENDS = [
    Laplace(sensitivity=1.0, epsilon=0.05),
    LaplaceEvent(scale=10.0, sensitivity=1.0),
    Gaussian(sensitivity=1.0, sigma=20.0),
    GaussianEvent(sigma=30.0, sensitivity=1.0),
    ZCDP(0.002),
    ApproxDP(epsilon=0.05, delta=1e-8),
    PureDP(0.03),
    GaussianDP(0.05),
]


@pytest.mark.parametrize("seed, filter", [(0, "auto"), (1, "auto"), (2, "basic"), (3, "auto"), (4, "approx")])
def test_ledger_and_accountant_agree_spend_by_spend(tmp_path: Path, seed: int, filter: str) -> None:
    rng = random.Random(seed)
    budget = ApproxDP(epsilon=0.6, delta=1e-6)
    path = tmp_path / "b.db"
    acc = Accountant(budget, filter=filter)
    refused = 0
    with SQLiteLedger(path, budget=budget, filter=filter) as ledger:
        for step in range(60):
            spend, count = rng.choice(SPENDS), rng.choice((1, 1, 2))
            before = _files(path)
            expected = _outcome(lambda spend=spend, count=count: acc.admit(spend, count=count))
            got = _outcome(lambda spend=spend, count=count: ledger.reserve(spend, count=count))
            assert got == expected, f"step {step}: {spend} x{count}"
            if got != "ok":
                refused += 1
                assert _files(path) == before  # a refusal writes nothing
            assert ledger.spent() == acc.spent()
        assert refused > 0  # the sequence ran into the budget (or the filter's limits)
        assert ledger.state().count == acc.state.count


def test_items_of_every_kind_are_recorded_exactly(tmp_path: Path) -> None:
    step = DPSGDStep(sigma=2.0, sampling_rate=1.0, steps=3)  # q = 1: a Gaussian item, quick to build
    spends = [Laplace(sensitivity=1.0, epsilon=0.1), GaussianEvent(sigma=5.0, sensitivity=1.0), step,
              GaussianDP(0.2), as_item(PureDP(0.05))]
    path = tmp_path / "b.db"
    with SQLiteLedger(path, budget=ZCDP(5.0)) as ledger:
        reservations = [ledger.reserve(s) for s in spends]
        assert reservations[3].guarantee == GaussianDP(0.2)
    with SQLiteLedger(path) as ledger:
        history = ledger.history()
        assert [e.item is not None and item_to_json(e.item) == item_to_json(as_item(s)) for e, s in
                zip(history, spends)] == [True] * len(spends)
        assert [e.guarantee for e in history][3] == GaussianDP(0.2)
        assert history[1].item is not None and history[1].item.event["type"] == "GaussianEvent"
        state = ledger.state()
        assert isinstance(state, AccountingState) and state.count == len(spends)
        assert float(state.epsilon(1e-6)) > 0
    conn = sqlite3.connect(path)
    try:
        types = [r[0] for r in conn.execute("SELECT type FROM spends ORDER BY id")]
    finally:
        conn.close()
    # a guarantee shows its own type; an item the caller built with a headline guarantee (as_item(PureDP), or a
    # query's charge) shows that headline; mechanisms, events and DP-SGD steps show "item" and their event
    assert types == ["item", "item", "item", "GaussianDP", "PureDP"]


def test_a_gaussian_dp_budget_takes_gaussians_and_pure_spends(tmp_path: Path) -> None:
    budget = GaussianDP(1.0)
    acc = Accountant(budget)
    with SQLiteLedger(tmp_path / "b.db", budget=budget) as ledger:
        for s in (GaussianEvent(sigma=2.0, sensitivity=1.0), PureDP(0.1), GaussianDP(0.5)):
            acc.admit(s)
            ledger.reserve(s)
        assert ledger.spent() == acc.spent() and ledger.remaining() == acc.remaining()
        assert _outcome(lambda: ledger.reserve(GaussianDP(0.9))) == "refused"


def test_another_connection_spending_and_aborting_is_seen(tmp_path: Path) -> None:
    """The cached replay is keyed by (largest id, abort counter): spends and aborts made through another
    connection are seen at once, and a commit (which leaves the live set as it was) changes nothing."""
    path = tmp_path / "b.db"
    budget = PureDP(1.0)
    with SQLiteLedger(path, budget=budget) as a, SQLiteLedger(path) as b:
        ra = a.reserve(PureDP(0.25))
        assert a.remaining() == PureDP(0.75)
        rb = b.reserve(PureDP(0.5))
        assert a.remaining() == PureDP(0.25)
        a.commit(ra)
        assert b.remaining() == PureDP(0.25)
        b.abort(rb)
        assert a.remaining() == PureDP(0.75) and b.remaining() == PureDP(0.75)
        assert _outcome(lambda: a.reserve(PureDP(0.8))) == "refused"
        a.reserve(PureDP(0.75))
        assert b.remaining() == PureDP(0.0)


def test_a_ledger_written_before_items_keeps_its_rule_and_totals(tmp_path: Path) -> None:
    """``data/ledger-v1.db`` (schema 1: guarantees only) is migrated on open: filter "basic" (its past decisions
    stand), the same spent total as basic composition of its rows, and (eps, delta) spends still admitted."""
    path = tmp_path / "old.db"
    shutil.copyfile(DATA / "ledger-v1.db", path)
    with SQLiteLedger(path) as ledger:
        assert ledger.filter == "basic"
        assert ledger.spent() == ApproxDP(epsilon=1.0, delta=5e-7)  # 0.5 committed + 2 x (0.25, 2.5e-7) reserved
        assert [e.item is not None for e in ledger.history()] == [True, True, True]
        ledger.reserve(ApproxDP(epsilon=0.5, delta=1e-7))
        assert ledger.spent() == ApproxDP(epsilon=1.5, delta=6e-7)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    finally:
        conn.close()
    assert meta["filter"] == '"basic"' and meta["aborts"] == "0" and meta["schema_version"] == "2"


def test_a_corrupt_item_is_a_ledger_error_and_the_file_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        ledger.reserve(PureDP(0.1))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE spends SET item = '{\"event\": 3}'")
    conn.close()
    before = _files(path)
    with SQLiteLedger(path) as ledger:
        with pytest.raises(LedgerError, match="unreadable item"):
            ledger.reserve(PureDP(0.1))
        with pytest.raises(LedgerError, match="unreadable item"):
            ledger.remaining()
    assert _files(path) == before


def test_a_locked_ledger_is_unavailable_and_says_nothing_of_resetting(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    ledger = SQLiteLedger(path, budget=PureDP(1.0), timeout=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(LedgerUnavailableError) as info:
            ledger.reserve(PureDP(0.1))
        with pytest.raises(LedgerUnavailableError, match="locked"):
            SQLiteLedger(path, timeout=0.2)  # opening takes the write lock too
    finally:
        ledger.close()
        holder.execute("ROLLBACK")
        holder.close()
    message = str(info.value).lower()
    assert "locked" in message and "nothing was spent" in message
    assert "reset" not in message and "delete" not in message and "new file" not in message
    assert isinstance(info.value, LedgerError)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_ledger_is_unavailable_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with SQLiteLedger(path, budget=PureDP(1.0)) as ledger:
        ledger.reserve(PureDP(0.1))
    before = _files(path)
    tmp_path.chmod(0o555)
    path.chmod(0o444)
    try:
        with pytest.raises(LedgerUnavailableError, match="cannot be written") as info:
            SQLiteLedger(path)
    finally:
        tmp_path.chmod(0o755)
        path.chmod(0o644)
    assert "reset" not in str(info.value).lower()
    assert _files(path) == before


def test_filter_argument_checked_and_fixed_at_creation(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with pytest.raises(ValueError, match="unknown filter"):
        SQLiteLedger(path, budget=ApproxDP(epsilon=1.0, delta=1e-6), filter="nonsense")
    assert not path.exists() or _files(path)  # nothing half-made is left to be mistaken for a ledger
    with SQLiteLedger(path, budget=ApproxDP(epsilon=1.0, delta=1e-6), filter={"basic": 5e-7, "zcdp": 5e-7}) as ledger:
        assert ledger.filter == {"basic": 5e-7, "zcdp": 5e-7}
        ledger.reserve(PureDP(0.1))
        ledger.reserve(ApproxDP(epsilon=0.1, delta=1e-7))  # the basic share takes (eps, delta) spends
    with SQLiteLedger(path, filter={"zcdp": 5e-7, "basic": 5e-7}) as ledger:  # the same choice
        assert math.isclose(ledger.spent().epsilon, 0.2)  # type: ignore[union-attr, arg-type]


def test_a_ledger_written_at_the_26_orders_reads_back_at_the_dense_ones(tmp_path: Path) -> None:
    """``data/ledger-v2-orders26.db`` was written by SQLiteLedger as of ``b790daf`` (ApproxDP(8, 1e-5),
    filter "rdp"; a Laplace and three Gaussian mechanisms, 100 DP-SGD steps and a zCDP spend committed, a GDP
    spend reserved), when the core kept Rényi curves at 26 orders.  Each item's curve is now read at the 94
    orders: a rebuilt event's recomputed, a mechanism's taken from the next old order above (RDP is
    non-decreasing in the order); its values at the old orders are the stored ones.  The file is untouched,
    the filter's past decisions stand, and the RDP answer can only improve (1.4902 at the 26 orders)."""
    path = tmp_path / "old.db"
    shutil.copyfile(DATA / "ledger-v2-orders26.db", path)
    before = _files(path)
    stored = {}
    conn = sqlite3.connect(path)
    try:
        for label, text in conn.execute("SELECT label, item FROM spends ORDER BY id"):
            stored[label] = json.loads(text)["rdp"]
    finally:
        conn.close()
    assert all(len(v) == len(ORDERS_V1) for v in stored.values())
    with SQLiteLedger(path) as ledger:
        assert ledger.filter == "rdp"
        history = ledger.history()
        assert [(e.label, e.count, e.state) for e in history] == [
            ("laplace", 1, "committed"), ("gaussian", 3, "committed"), ("dpsgd", 100, "committed"),
            ("zcdp", 1, "committed"), ("reserved", 1, "reserved")]
        for e in history:
            assert e.item is not None
            rdp = e.item.rdp
            assert rdp.shape == (len(ORDERS),)
            old = [float(v) for v in stored[e.label]]
            at = dict(zip(ORDERS, rdp.tolist()))
            assert [at[a] for a in ORDERS_V1] == pytest.approx(old, rel=1e-12, abs=0.0)
            if e.item.event["type"] == "Mechanism":  # not rebuilt: order 9 reads order 10's stored value
                assert at[9.0] == float(stored[e.label][ORDERS_V1.index(10.0)])
        eps = float(ledger.state().epsilon(1e-5, method="rdp"))
        assert 0.0 < eps <= 1.4902488406692624
        spent = ledger.spent()
        assert isinstance(spent, ApproxDP) and spent.delta == 1e-5
        assert spent.epsilon == pytest.approx(3.218802807843409, rel=1e-12)  # as before: the same order fits best
    assert _files(path) == before
