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
from dpkit.errors import UnsupportedError
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


# ---- subsampled mechanisms: ``dpkit account ... --sampling-rate`` reads the same state -------------------
SCHEMES = [("poisson", "add-remove"), ("without-replacement", "substitution"), ("poisson", "substitution")]


@pytest.mark.parametrize("fam,param", [("gaussian", 1.0), ("laplace", 2.0)])
@pytest.mark.parametrize("sampling,neighbours", SCHEMES)
def test_cli_subsampled_rows_are_the_states_numbers(tmp_path: Path, fam: str, param: float, sampling: str,
                                                    neighbours: str) -> None:
    """The CLI's subsampled rows are the state's numbers for the same item, and the Accountant and a reopened
    SQLiteLedger (the item written as JSON and read back) hold that state too.  Against the direct function
    of :mod:`dpkit.accounting.subsampling` (same pairs, same certified discretisation) the interval is the
    same up to the state's rounding of the shift up (t and mu two ulps above shift / scale)."""
    from dpkit.accounting.subsampling import subsampled_epsilon_interval
    from dpkit.cli.account import subsampled_item, subsampled_values
    from dpkit.distributions import Gaussian, Laplace

    q, k = 0.02, 50
    event = subsampled_item(fam, param, q, sampling, neighbours)
    rows = subsampled_values(event, k, DELTA)
    state = AccountingState().add(event, count=k)
    pld_row = rows[0]
    assert pld_row[0].startswith("PLD") and (pld_row[1], pld_row[2]) == _interval(state)
    rdp_rows = [r for r in rows if r[0].startswith("RDP")]
    if fam == "laplace" or (sampling, neighbours) == ("poisson", "add-remove"):
        (rdp_row,) = rdp_rows
        assert rdp_row[2] == float(state.epsilon(DELTA, method="rdp")) > pld_row[2]  # valid, and looser
    else:
        assert rdp_rows == []  # no Rényi curve for the substitution pairs of a Gaussian

    huge = ApproxDP(epsilon=1e6, delta=0.5)
    path = tmp_path / "ledger.db"
    with SQLiteLedger(path, budget=huge) as ledger:  # adaptive: a filter must hold the item
        if not rdp_rows:  # a Gaussian's substitution law only: no filter family, refused clearly
            with pytest.raises(UnsupportedError):
                with ledger.spend(event, count=k):
                    pass
            return
        with ledger.spend(event, count=k):
            pass
    with SQLiteLedger(path) as reopened:  # the item read back from its JSON record, law included
        from_file = reopened.state()
    assert _interval(from_file) == _interval(state)

    shift = 2.0 if neighbours == "substitution" else 1.0
    P, Q = (Gaussian(0, param), Gaussian(shift, param)) if fam == "gaussian" else (Laplace(0, param),
                                                                                   Laplace(shift, param))
    direct = subsampled_epsilon_interval(P, Q, sampling_rate=q, k=k, delta=DELTA, sampling=sampling.replace("-", "_"),
                                         neighboring="substitute" if neighbours == "substitution" else "add_remove")
    lo, hi = _interval(state)
    assert hi == pytest.approx(direct.upper, rel=1e-9) and hi >= direct.lower
    assert lo == pytest.approx(direct.lower, rel=1e-9) and lo <= direct.upper


def test_an_accountant_spends_subsampled_laplace_by_its_amplified_epsilon() -> None:
    """A subsampled Laplace item carries the pure epsilon ln(1 + q (e^t - 1)) (computed here in 50 digits): a
    PureDP budget admits exactly as many as fit, refuses the next leaving everything unchanged, and the
    without-replacement (substitution: shift 2) item is charged at t = 2 / scale."""
    import mpmath as mp

    from dpkit.accounting.items import SubsampledEvent, as_item
    from dpkit.errors import BudgetExceededError
    from dpkit.guarantees import PureDP

    scale, q = 2.0, 0.05
    poisson = SubsampledEvent(noise=LaplaceEvent(scale=scale), sampling_rate=q)
    fixed = SubsampledEvent(noise=LaplaceEvent(scale=scale), sampling_rate=q, sampling="without_replacement",
                            neighboring="substitute")
    with mp.workdps(50):
        for ev, t in ((poisson, mp.mpf(1) / scale), (fixed, mp.mpf(2) / scale)):
            exact = mp.log(1 + q * mp.expm1(t))
            got = as_item(ev).epsilon
            assert exact <= got <= exact * (1 + 1e-13)  # an upper bound, rounded up by little
    eps = as_item(poisson).epsilon
    fits = int(mp.floor(mp.mpf(1) / mp.mpf(eps)))  # the budget 1.0 holds `fits` copies, not fits + 1
    assert (fits + 1) * eps > 1.0 * (1 + 1e-12) and fits * eps < 1.0 * (1 - 1e-12)  # no boundary case
    acc = Accountant(PureDP(1.0))
    acc.spend(poisson, count=fits)
    before = (acc.spends, acc.state.count)
    with pytest.raises(BudgetExceededError):
        acc.spend(poisson)
    assert (acc.spends, acc.state.count) == before
    assert _interval(acc.state) == _interval(AccountingState().add(poisson, count=fits))
