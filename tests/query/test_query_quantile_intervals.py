"""Quantile intervals (``quantile_intervals=True``): coverage, types, privacy accounting, default unchanged.

The interval ends are two more exponential-mechanism releases per quantile (one for MIN and MAX), inside the
aggregate's epsilon (``dpkit.query._result._quantile_ends``).  Coverage is checked against the true quantile
of the bounded data over seeded runs; accounting by recording every exponential-mechanism release the query
makes and comparing them with what the plan charges.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.guarantees import PureDP, ZCDP
from dpkit.mechanisms import Exponential
from dpkit.query import Session
from dpkit.query._result import _quantile_ends, _rank_shift
from dpkit.random import insecure_seeded

EPOCH = datetime.date(1970, 1, 1)
N = 600
BOUNDS: dict[str, tuple[Any, Any]] = {"x": (0.0, 100.0), "d": ("2020-01-01", "2021-01-01")}
QUERY = ("SELECT MEDIAN(x) AS med, QUANTILE_CONT(x, 0.8) AS p80, MIN(x) AS mn, MAX(x) AS mx, "
         "MEDIAN(d) AS md FROM t")


def _table() -> pd.DataFrame:
    """One row per unit (weights 1); integer values, so many ties (heavy buckets: width 100/1024 < 1)."""
    rng = np.random.default_rng(12)
    x = np.round(rng.normal(55.0, 12.0, N))
    x[:20] = 130.0  # outside the bounds: clamped to 100
    days = rng.integers(0, 366, N)
    return pd.DataFrame({"uid": np.arange(N), "x": x,
                         "d": pd.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(v)) for v in days],
                                       dtype="date32[pyarrow]")})  # typed: an object column is text


def _truth(df: pd.DataFrame) -> dict[str, float]:
    """The quantiles of the bounded data (QUANTILE_CONT's linear interpolation); dates as days since 1970."""
    x = np.clip(df["x"].to_numpy(dtype=float), 0.0, 100.0)
    days = np.array([(v - EPOCH).days for v in df["d"]], dtype=float)
    return {"med": float(np.quantile(x, 0.5)), "p80": float(np.quantile(x, 0.8)), "mn": float(x.min()),
            "mx": float(x.max()), "md": float(np.quantile(days, 0.5))}


def _num(v: Any) -> float:
    return float((v - EPOCH).days) if isinstance(v, datetime.date) else float(v)


def test_intervals_cover_the_true_quantiles(open_session: Callable[..., Session]) -> None:
    """200 seeded runs: each interval holds the true quantile of the bounded data at >= 95% less slack."""
    df = _table()
    truth = _truth(df)
    s = open_session(df, budget=PureDP(10**6))
    runs, hits = 200, dict.fromkeys(truth, 0)
    for seed in range(runs):
        r = s.sql(QUERY, epsilon=3.0, bounds=BOUNDS, rng=insecure_seeded(seed), quantile_intervals=True,
                  bounding_report=False)
        row = r.to_dicts()[0]
        for name, q in truth.items():
            lo, hi = _num(row[f"{name}_lo"]), _num(row[f"{name}_hi"])
            assert lo <= hi
            hits[name] += lo <= q <= hi
    slack = 3.0 * math.sqrt(0.95 * 0.05 / runs)  # three Monte-Carlo standard errors
    assert all(h / runs >= 0.95 - slack for h in hits.values()), hits
    # one-sided: MIN's lower end and MAX's upper end are the clamping bounds
    assert row["mn_lo"] == 0.0 and row["mx_hi"] == 100.0
    # and not vacuous: the two-sided ones are narrower than the bounds
    assert row["med_hi"] - row["med_lo"] < 100.0


@pytest.mark.parametrize("q", [0.05, 0.5, 0.95])
def test_ends_cover_with_one_heavy_bucket(q: float) -> None:
    """All the mass near the quantile in one bucket, then empty buckets: the nearest *edge* in rank lies on the
    wrong side of the quantile, the nearest bucket *span* does not (the reason for the span utility)."""
    from dpkit.query._noise import Measurement

    b, n = 100, 1000
    hist = np.zeros(b)
    hist[40] = 0.6 * n    # the quantile's bucket, for q = 0.5 (and 0.05)
    hist[90] = 0.4 * n
    below = np.concatenate([[0.0], np.cumsum(hist)])
    edges = np.arange(b + 1, dtype=float)  # bucket j = [j, j + 1)
    values = np.repeat([40.5, 90.5], [int(0.6 * n), int(0.4 * n)])
    true_q = float(np.quantile(values, q))
    m = Measurement("m", "histogram", "hist__0", max(q, 1 - q), 1, 4.0, 0.0, "exponential", q=q, intervals=True)
    c = _rank_shift(m, b, 0.95)
    rng = insecure_seeded(7)
    ends = [_quantile_ends(m, below, edges, c, rng, 0.95) for _ in range(400)]
    cover = np.mean([lo <= true_q <= hi for lo, hi in ends])
    assert cover >= 0.95 - 3.0 * math.sqrt(0.95 * 0.05 / 400), cover


def test_dates_and_timestamps_come_back_typed(open_session: Callable[..., Session], tmp_path: Path) -> None:
    df = _table()
    df["ts"] = [datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=int(v) * 3607)
                for v in range(N)]
    s = open_session(df, budget=PureDP(100.0))
    bounds = {**BOUNDS, "ts": ("2020-01-01 00:00:00", "2020-04-01 00:00:00")}
    r = s.sql("SELECT MEDIAN(d) AS md, MAX(ts) AS last, MIN(d) AS first FROM t", epsilon=3.0, bounds=bounds,
              rng=insecure_seeded(1), quantile_intervals=True)
    (row,) = r.to_dicts()
    assert isinstance(row["md_lo"], datetime.date) and isinstance(row["md_hi"], datetime.date)
    assert type(row["last_lo"]) is datetime.datetime and type(row["last_hi"]) is datetime.datetime
    assert row["md_lo"] <= row["md_hi"] and row["first_lo"] == datetime.date(2020, 1, 1)
    assert row["last_hi"] == datetime.datetime(2020, 4, 1)
    assert "[" in str(r)  # printed with its intervals
    # post-processing (ORDER BY) keeps typed ends; so does a date expression of the aggregate
    r2 = s.sql("SELECT MEDIAN(d) AS md, MEDIAN(d) + INTERVAL 1 DAY AS nxt FROM t ORDER BY md", epsilon=1.0,
               bounds=bounds, rng=insecure_seeded(2), quantile_intervals=True)
    (row2,) = r2.to_dicts()
    assert isinstance(row2["md_lo"], datetime.date) and row2["md_lo"] <= row2["md_hi"]
    assert row2["nxt_lo"] is not None and row2["nxt_lo"] >= datetime.datetime.combine(row2["md_lo"],
                                                                                       datetime.time())


def test_charge_unchanged_and_every_release_accounted(open_session: Callable[..., Session],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The option spends the same declared epsilon; the exponential mechanisms the query runs (recorded as they
    release) compose, by basic composition, to no more than what the plan charges for them."""
    df = _table()
    df["k"] = np.arange(N) % 3
    s = open_session(df, budget=PureDP(100.0))
    query = "SELECT k, MEDIAN(x) AS med, MIN(x) AS mn FROM t GROUP BY k"
    kw: dict[str, Any] = dict(epsilon=2.0, bounds=BOUNDS, keys={"k": [0, 1, 2]}, max_partitions=2)
    with_iv, without = s.plan(query, quantile_intervals=True, **kw), s.plan(query, **kw)
    assert with_iv.guarantee == without.guarantee
    assert with_iv.charge is not None and without.charge is not None
    assert with_iv.charge.epsilon == pytest.approx(without.charge.epsilon, rel=1e-12)
    assert with_iv.charge.epsilon <= 2.0
    shares = dict(with_iv.split.shares())
    for m in with_iv.split.measurements:
        if m.noise != "exponential":
            continue
        assert m.ends == (1 if m.extreme else 2)
        item, k = m.item()
        per_partition = m.mechanism(1).epsilon + m.ends * m.end_mechanism().epsilon
        assert k * per_partition <= shares[m.aggregate][0] * (1 + 1e-12)
        assert item.epsilon == pytest.approx(per_partition, rel=1e-12)

    released: list[float] = []
    real, real_runs = Exponential.release, Exponential.release_runs

    def spy(self: Exponential, utilities: Any, **kwargs: Any) -> Any:
        released.append(float(self.epsilon))
        return real(self, utilities, **kwargs)

    def spy_runs(self: Exponential, utilities: Any, lengths: Any, **kwargs: Any) -> Any:  # the point releases
        released.append(float(self.epsilon))
        return real_runs(self, utilities, lengths, **kwargs)

    monkeypatch.setattr(Exponential, "release", spy)
    monkeypatch.setattr(Exponential, "release_runs", spy_runs)
    before = s.remaining()
    r = s.sql(query, rng=insecure_seeded(5), quantile_intervals=True, **kw)
    spent = float(before.epsilon) - float(s.remaining().epsilon)
    assert spent == pytest.approx(2.0, rel=1e-9)
    groups = len(r.rows)
    assert groups == 3
    # per group: MEDIAN runs 3 releases, MIN 2 (its lower end is the clamping bound)
    assert len(released) == groups * (3 + 2)
    # a unit is in at most K = 2 groups: its loss is at most 2 x (one group's releases), within the charge
    exp_charge = sum(m.item()[1] * m.item()[0].epsilon for m in with_iv.split.measurements
                     if m.noise == "exponential")
    assert 2 * sum(released) / groups <= exp_charge * (1 + 1e-12)


def test_zcdp_share_is_met(open_session: Callable[..., Session]) -> None:
    s = open_session(_table(), budget=ZCDP(10.0))
    p = s.plan("SELECT MEDIAN(x) AS med FROM t", rho=0.5, bounds=BOUNDS, quantile_intervals=True,
               bounding_report=False)
    assert p.charge is not None and p.charge.rho <= 0.5
    # and used: the point and its two ends together meet the share (one mechanism's epsilon split 1/2, 1/4,
    # 1/4 would charge 3/8 of it); epsilon^2/8 each: the point gets sqrt(8/3)/2 = sqrt(2/3) of the epsilon a
    # median without interval gets
    assert p.charge.rho >= 0.5 * (1 - 1e-6)
    plain = s.plan("SELECT MEDIAN(x) AS med FROM t", rho=0.5, bounds=BOUNDS, bounding_report=False)
    (with_iv,) = [m for m in p.split.measurements if m.noise == "exponential"]
    (alone,) = [m for m in plain.split.measurements if m.noise == "exponential"]
    assert with_iv.point_epsilon == pytest.approx(alone.epsilon * math.sqrt(2 / 3), rel=1e-6)


def test_default_output_has_no_quantile_interval(open_session: Callable[..., Session]) -> None:
    s = open_session(_table(), budget=PureDP(100.0))
    a = s.sql(QUERY, epsilon=1.0, bounds=BOUNDS, rng=insecure_seeded(9))
    b = s.sql(QUERY, epsilon=1.0, bounds=BOUNDS, rng=insecure_seeded(9), quantile_intervals=False)
    assert a.rows == b.rows
    assert all(math.isnan(lo) and math.isnan(hi) for name in ("med", "md") for lo, hi in a.intervals[name])
    assert "interval" not in a.details["quantiles"]["med"]
    with pytest.raises(TypeError):
        s.plan(QUERY, epsilon=1.0, bounds=BOUNDS, quantile_intervals="yes")  # type: ignore[arg-type]


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpkit.cli import main

    csv = tmp_path / "t.csv"
    df = _table()
    df.to_csv(csv, index=False)
    args = ["query", str(csv), "SELECT MEDIAN(x) AS med, MIN(d) AS first FROM t", "--privacy-unit", "uid",
            "--schema", "x=DOUBLE,d=DATE", "--epsilon", "1", "--ledger", str(tmp_path / "l.db"),
            "--budget-epsilon", "5", "--bounds", "x=0:100", "--bounds", "d=2020-01-01:2021-01-01",
            "--max-rows", "1", "--quiet", "--insecure-seed", "3", "--json", "--quantile-intervals"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert isinstance(row["med_lo"], float) and row["med_lo"] <= row["med_hi"]
    assert row["first_lo"] == "2020-01-01" and isinstance(row["first_hi"], str)
    assert out["details"]["quantiles"]["med"]["interval"]["ends_released"] == 2
