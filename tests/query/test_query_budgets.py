"""Sessions on every budget type: each query charged, in its budget's family, what its mechanisms cost."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpkit.cli import main
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, PureDP
from dpkit.mechanisms import Exponential
from dpkit.query import Session
from dpkit.random import insecure_seeded

KEYS = {"k": ["a", "b", "c"]}
Q = "SELECT k, COUNT(*) AS n, SUM(x) AS sx, MEDIAN(x) AS md FROM t GROUP BY k"
OPTS = dict(keys=KEYS, max_partitions=2, max_rows=5, bounds={"x": (0.0, 100.0)})


@pytest.fixture
def df() -> pd.DataFrame:
    i = np.arange(3000)
    return pd.DataFrame({"uid": i % 700, "k": np.array(list("abc"))[i % 3], "x": (i % 1000) / 10.0})


def _independent_rho(plan) -> float:
    """The zCDP bound of the plan's mechanisms, summed here from each mechanism's own statement."""
    total = 0.0
    for m in plan.split.measurements:
        if m.noise == "exponential":
            per = Exponential(sensitivity=m.bound, epsilon=m.epsilon / m.partitions_per_unit)
            total += m.partitions_per_unit * float(per.zcdp().rho)
        elif m.noise == "gaussian":
            total += float(m.mechanism(3).zcdp().rho)
        else:
            e = float(m.mechanism(3).pure_dp().epsilon)
            total += e * math.tanh(e / 2.0)
    e = plan.split.report_epsilon
    return total + (e * math.tanh(e / 2.0) if e else 0.0)


def test_a_zcdp_session_charges_the_mechanisms_rho(df: pd.DataFrame, tmp_path: Path) -> None:
    s = Session(df, privacy_unit="uid", ledger=tmp_path / "z.db", budget=ZCDP(1.0))
    plan = s.plan(Q, rho=0.2, **OPTS)
    assert isinstance(plan.guarantee, ZCDP)
    rho = float(plan.guarantee.rho)
    # charged = what the mechanisms cost (rounded up), never above what the analyst gave, and not wasteful
    assert _independent_rho(plan) <= rho <= 0.2 and rho > 0.2 * 0.999
    kinds = {m.primitive: m.noise for m in plan.split.measurements}
    assert kinds == {"rows": "gaussian", "sum": "gaussian", "histogram": "exponential"}
    # each Gaussian's sigma is the one its rho share calls for, D_2 / sqrt(2 rho), up to the grid's rounding
    for m in plan.split.measurements:
        if m.noise == "gaussian":
            sigma = m.mechanism(3).sigma
            assert m.l2 / math.sqrt(2 * m.rho) <= sigma <= m.l2 / math.sqrt(2 * m.rho) * 1.01
    r = s.sql(Q, rho=0.2, rng=insecure_seeded(0), **OPTS)
    assert [row[0] for row in r.rows] == ["a", "b", "c"] and isinstance(r.guarantee, ZCDP)
    left = float(s.remaining().rho)
    assert left == pytest.approx(1.0 - rho, rel=1e-9) and left <= 1.0 - rho + 1e-15
    s.close()


def test_a_zcdp_session_takes_epsilon_queries_at_their_zcdp_cost(df: pd.DataFrame, tmp_path: Path) -> None:
    s = Session(df, privacy_unit="uid", ledger=tmp_path / "z.db", budget=ZCDP(1.0))
    plan = s.plan("SELECT COUNT(*) AS n FROM t", epsilon=0.5, max_rows=5)
    # pure epsilon 0.5 costs at most 0.5 tanh(0.25) < 0.5^2 / 2 in zCDP
    assert {m.noise for m in plan.split.measurements} == {"geometric"}
    assert float(plan.guarantee.rho) <= 0.5 * math.tanh(0.25) * (1 + 1e-9)
    gauss = s.plan("SELECT COUNT(*) AS n FROM t", epsilon=0.5, delta=1e-6, max_rows=5)
    assert {m.noise for m in gauss.split.measurements} == {"gaussian"}  # Gaussian by default with a delta
    s.close()


def test_refused_spends_leave_the_ledger_file_unchanged(df: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "z.db"
    s = Session(df, privacy_unit="uid", ledger=path, budget=ZCDP(0.3))
    s.sql(Q, rho=0.2, rng=insecure_seeded(0), **OPTS)
    before = path.read_bytes()
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        s.sql(Q, rho=0.2, rng=insecure_seeded(0), **OPTS)
    with pytest.raises(UnsupportedError, match="keys="):  # private selection has no zCDP bound
        s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", rho=0.01, max_partitions=1, max_rows=1)
    with pytest.raises(UnsupportedError, match="no zCDP bound"):
        s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=0.1, delta=1e-6, max_partitions=1, max_rows=1)
    with pytest.raises(ValueError, match="exactly one of epsilon"):
        s.sql(Q, rho=0.01, epsilon=0.1, **OPTS)
    with pytest.raises(ValueError, match="no delta of its own"):
        s.sql(Q, rho=0.01, delta=1e-6, **OPTS)
    assert path.read_bytes() == before
    s.close()


def test_a_pure_budget_refuses_a_zcdp_cost(df: pd.DataFrame, tmp_path: Path) -> None:
    s = Session(df, privacy_unit="uid", ledger=tmp_path / "p.db", budget=PureDP(1.0))
    with pytest.raises(UnsupportedError, match="epsilon="):
        s.plan(Q, rho=0.1, **OPTS)
    s.close()


def test_epsilon_queries_keep_their_declared_cost_under_an_approx_budget(df: pd.DataFrame, tmp_path: Path) -> None:
    s = Session(df, privacy_unit="uid", ledger=tmp_path / "a.db", budget=ApproxDP(epsilon=2.0, delta=1e-5))
    plan = s.plan(Q, epsilon=0.5, delta=1e-6, noise="gaussian", **OPTS)
    assert plan.guarantee == ApproxDP(epsilon=0.5, delta=1e-6)
    charge = plan.charge
    # the batch's (epsilon, delta) is the sum of the parts' shares: within the declared cost
    assert charge.approx[0] <= 0.5 and charge.approx[1] <= 1e-6
    assert math.isfinite(charge.rho)  # and the Gaussian parts' zCDP bound travels with it
    s.close()


def test_the_cli_takes_a_zcdp_budget_and_a_rho(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).resolve().parents[2] / "examples" / "transactions.csv"
    cats = "groceries,restaurants,transport"
    args = ["query", str(data), "SELECT category, COUNT(*) AS n FROM t GROUP BY category", "--privacy-unit",
            "user_id", "--schema", "amount=DOUBLE,day=DATE", "--rho", "0.1", "--budget-rho", "0.25", "--ledger",
            str(tmp_path / "l.db"), "--max-partitions", "2", "--max-rows", "5", "--keys", f"category={cats}",
            "--quiet", "--insecure-seed", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "zCDP" in out and "groceries" in out
    assert main(args) == 0
    assert main(args) == 3  # the third does not fit in rho 0.25
    assert "Nothing was spent" in capsys.readouterr().err


def test_a_gaussian_dp_session_charges_mu_and_admits_what_the_accountant_admits(df: pd.DataFrame,
                                                                                  tmp_path: Path) -> None:
    """Under a GaussianDP budget each Laplace query is charged its mechanisms' mu (pure epsilon -> mu-GDP,
    Dong, Roth, Su 2022, Prop 2.5 / Def 2.6, summed as mu^2 by Cor 3.3); the session runs exactly as many
    as an Accountant spending the same charges admits, and the refused query leaves the file unchanged."""
    from dpkit.accounting import Accountant
    from dpkit.guarantees import GaussianDP

    path = tmp_path / "g.db"
    budget = GaussianDP(1.0)
    q = "SELECT k, COUNT(*) AS n FROM t GROUP BY k"
    with Session(df, privacy_unit="uid", ledger=path, budget=budget) as s:
        accountant = Accountant(budget)
        plan = s.plan(q, epsilon=0.2, **OPTS)
        assert isinstance(plan.guarantee, GaussianDP) and plan.charge is not None
        # 0.2-DP is 0.2507-GDP (mu = 2 Phi^-1(e^0.2 / (1 + e^0.2))); the query's two parts (its count and its
        # bounding report) convert separately and add as mu^2, a little less
        mu = plan.charge.mu
        assert float(plan.guarantee.mu) == mu and 0.2 < mu < 0.2507
        ran = 0
        while True:
            try:
                accountant.check(plan.charge)
            except BudgetExceededError:
                break
            accountant.spend(plan.charge)
            s.sql(q, epsilon=0.2, rng=insecure_seeded(ran), **OPTS)
            ran += 1
        assert ran == math.floor(1.0 / mu**2) or ran == math.floor(1.0 / mu**2) - 1  # sum of mu^2 <= 1 (rounded up)
        before = path.read_bytes()
        with pytest.raises(BudgetExceededError):
            s.sql(q, epsilon=0.2, rng=insecure_seeded(ran), **OPTS)
        with pytest.raises(UnsupportedError, match="Gaussian-DP"):  # dpkit's discrete Gaussian states no mu
            s.sql(q, epsilon=0.01, delta=1e-9, noise="gaussian", **OPTS)
        assert path.read_bytes() == before
        assert s.remaining() == accountant.remaining()
