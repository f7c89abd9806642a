"""One accounting core behind every entry point (issue 9, deliverable 1).

The same random sequences of spends are composed through the in-memory ``Accountant``, a durable
``SQLiteLedger`` (written, closed and reopened, so its record is replayed from the file), ``dpkit account``
(``cli.account.state_of`` / ``method_values``) and a query ``Session``'s ledger; every one must report the
same certified epsilon(delta) interval, to the last bit, since all of them read one ``AccountingState``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from dpkit.accounting import Accountant, AccountingState, GaussianEvent, LaplaceEvent
from dpkit.cli.account import method_values, state_of
from dpkit.guarantees import ZCDP, ApproxDP
from dpkit.ledger import SQLiteLedger
from dpkit.query import Session
from dpkit.random import insecure_seeded

DELTA = 1e-6
BIG = ZCDP(1e9)  # a budget every sequence below fits: the test is about composition, not refusal


def _sequence(seed: int) -> list[tuple[str, float, int]]:
    """A random mix of Gaussian and Laplace spends, as ``dpkit account`` reads them: (family, parameter, count)."""
    rnd = random.Random(seed)
    return [(rnd.choice(("gaussian", "laplace")), rnd.uniform(2.0, 60.0), rnd.randint(1, 300))
            for _ in range(rnd.randint(2, 7))]


def _event(fam: str, param: float) -> GaussianEvent | LaplaceEvent:
    return GaussianEvent(sigma=param) if fam == "gaussian" else LaplaceEvent(scale=param)


def _interval(state: AccountingState, method: str = "pld") -> tuple[float, float]:
    est = state.epsilon(DELTA, method=method)  # type: ignore[arg-type]
    return float(est.lower_bound), float(est.upper_bound)


@pytest.mark.parametrize("seed", range(5))
def test_accountant_ledger_and_cli_report_the_same_interval(tmp_path: Path, seed: int) -> None:
    seq = _sequence(seed)
    accountant = Accountant(BIG)
    path = tmp_path / "ledger.db"
    with SQLiteLedger(path, budget=BIG) as ledger:
        for fam, param, count in seq:
            accountant.spend(_event(fam, param), count=count)
            with ledger.spend(_event(fam, param), count=count):
                pass
    with SQLiteLedger(path) as reopened:  # replayed from the file's recorded items
        from_file = reopened.state()
    from_cli = state_of(seq)

    expected = _interval(accountant.state)
    assert expected[0] <= expected[1] and expected[1] > 0.0
    assert _interval(from_file) == expected
    assert _interval(from_cli) == expected
    (pld_row,) = [row for row in method_values(seq, DELTA) if row[0].startswith("PLD")]
    assert (pld_row[1], pld_row[2]) == expected  # the table and the plot read the same numbers
    # the other families agree too (zCDP and RDP sums, GDP for the Gaussians)
    for method in ("zcdp", "rdp"):
        assert _interval(from_file, method) == _interval(accountant.state, method) == _interval(from_cli, method)


def _table(seed: int) -> pd.DataFrame:
    rnd = random.Random(seed)
    return pd.DataFrame({"uid": list(range(200)), "k": [rnd.choice("abc") for _ in range(200)],
                         "x": [rnd.uniform(0.0, 10.0) for _ in range(200)]})


@pytest.mark.parametrize("seed", range(3))
def test_a_session_charges_its_ledger_what_the_accountant_composes(tmp_path: Path, seed: int) -> None:
    """Random queries (Laplace or Gaussian, by epsilon or by rho) through a Session under an (epsilon, delta)
    budget: its ledger, reopened from the file, holds the state an Accountant holds after spending each
    query's plan charge, and admits exactly what the Accountant admits."""
    rnd = random.Random(seed)
    budget = ApproxDP(epsilon=4.0, delta=1e-6)
    path = tmp_path / "session.db"
    keys = {"k": ["a", "b", "c"]}
    with Session(_table(seed), privacy_unit="uid", ledger=path, budget=budget, max_partitions=1,
                 max_rows=1) as s:
        accountant = Accountant(budget, filter=s.ledger.filter)  # the session ledger's filter (session_filter)
        for i in range(6):
            sql = rnd.choice(["SELECT k, COUNT(*) AS n FROM t GROUP BY k",
                              "SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k"])
            args: dict[str, object] = dict(keys=keys, bounds={"x": (0.0, 10.0)})
            if rnd.random() < 0.5:
                args["rho"] = rnd.uniform(0.005, 0.05)
            else:
                args["epsilon"] = rnd.uniform(0.05, 0.5)
                if rnd.random() < 0.5:
                    args.update(noise="gaussian", delta=1e-8)
            plan = s.plan(sql, **args)  # type: ignore[arg-type]
            assert plan.charge is not None
            accountant.spend(plan.charge)
            s.sql(sql, rng=insecure_seeded(i), **args)  # type: ignore[arg-type]
            assert s.ledger.remaining() == accountant.remaining()
    with SQLiteLedger(path) as reopened:
        state = reopened.state()
    assert state.count == accountant.state.count == 6
    for method in ("zcdp", "rdp", "basic"):
        try:
            expected = _interval(accountant.state, method)
        except Exception as exc:  # noqa: BLE001 - a family some query has no bound in must be missing in both
            with pytest.raises(type(exc)):
                _interval(state, method)
            continue
        assert _interval(state, method) == expected
