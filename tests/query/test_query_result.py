"""The result object: values inside their intervals, ORDER BY / LIMIT, to_dicts / to_pandas, str(),
public keys with no rows, quantiles on the bucket grid, Session.histogram's bins.

Where a test needs the noise out of the way it uses epsilon = 1000 with max_rows L set to the
most rows any unit has in one partition (so nothing is bounded away) and K = 3: COUNT(*)'s
geometric noise has scale 3 L / 500 < 0.1, non-zero with probability below 1e-7.  Seeds are fixed
(``insecure_seeded``), so the outcome is deterministic.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpkit.guarantees import ApproxDP, PureDP
from dpkit.query import QueryResult, Session
from dpkit.random import insecure_seeded

KEYS = {"k": ["a", "b", "c", "never"]}


def _frame(n: int = 600, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"uid": rng.integers(0, 150, n), "k": rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1]),
                         "x": np.round(rng.uniform(-5, 25, n), 2)})


L_ALL = int(_frame().groupby(["uid", "k"]).size().max())  # max_rows that never binds on _frame()


@pytest.fixture
def session(open_session) -> Session:  # noqa: ANN001
    return open_session(_frame())


@pytest.mark.parametrize("seed", range(6))
def test_every_interval_contains_its_value(session: Session, seed: int) -> None:
    r = session.sql("SELECT k, COUNT(*) AS n, COUNT(x) AS c, SUM(x) AS s, AVG(x) AS m, VAR_POP(x) AS v, "
                    "STDDEV(x) AS sd, COUNT(DISTINCT uid) AS u FROM t GROUP BY k", epsilon=[0.05, 0.5, 5.0][seed % 3],
                    bounds={"x": (0.0, 20.0)}, keys=KEYS, max_partitions=2, max_rows=3, rng=insecure_seeded(seed))
    assert isinstance(r, QueryResult) and len(r.rows) == 4
    for name in ("n", "c", "s", "m", "v", "sd", "u"):
        j = r.columns.index(name)
        for row, (lo, hi) in zip(r.rows, r.intervals[name]):
            assert lo <= row[j] <= hi, (name, row, lo, hi)
    for row in r.rows:
        assert 0.0 <= row[r.columns.index("m")] <= 20.0 and 0.0 <= row[r.columns.index("v")] <= 100.0


def test_avg_of_a_fractional_count_stays_inside_its_interval(open_session) -> None:  # noqa: ANN001
    """One unit, 3 rows, one value 10 (L = 1: weight 1/3, count 1/3); epsilon 1000 keeps the noise tiny."""
    s = open_session(pd.DataFrame({"uid": [1, 1, 1], "x": [10.0, None, None]}))
    r = s.sql("SELECT AVG(x) AS m FROM t", epsilon=1000.0, bounds={"x": (0.0, 10.0)}, rng=insecure_seeded(1))
    (lo, hi), = r.intervals["m"]
    assert lo <= r.rows[0][0] <= hi


def test_columns_qualified_by_the_table_name(session: Session) -> None:
    kwargs = dict(epsilon=500.0, bounds={"x": (0.0, 20.0)}, keys=KEYS, max_partitions=3, max_rows=10)
    plain = session.sql("SELECT k, SUM(x) AS s FROM t WHERE x > 1 GROUP BY k", rng=insecure_seeded(0), **kwargs)
    qualified = session.sql("SELECT t.k, SUM(t.x) AS s FROM t WHERE t.x > 1 GROUP BY t.k", rng=insecure_seeded(0),
                            **kwargs)
    assert qualified.rows == plain.rows


def test_order_by_and_limit_act_on_the_noisy_result(session: Session) -> None:
    kwargs = dict(epsilon=0.3, keys=KEYS, max_partitions=3, max_rows=2)
    r = session.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY n DESC LIMIT 2", rng=insecure_seeded(3),
                    **kwargs)
    full = session.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", rng=insecure_seeded(3), **kwargs)
    assert len(r.rows) == 2 and len(full.rows) == 4
    assert list(r.rows) == sorted(full.rows, key=lambda row: row[1], reverse=True)[:2]  # same seed, same noise
    assert r.intervals["n"] == tuple(full.intervals["n"][full.rows.index(row)] for row in r.rows)
    by_key = session.sql("SELECT k AS key, COUNT(*) AS n FROM t GROUP BY k ORDER BY key DESC",
                         rng=insecure_seeded(3), **(kwargs | {"keys": {"key": KEYS["k"]}}))
    assert [row[0] for row in by_key.rows] == ["never", "c", "b", "a"]
    none = session.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k LIMIT 0", rng=insecure_seeded(3), **kwargs)
    assert none.rows == () and none.intervals == {"n": ()}
    assert "(no partitions released)" in str(none)


def test_public_keys_absent_from_the_data_appear_with_count_zero(session: Session) -> None:
    r = session.sql("SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k", epsilon=1000.0, keys=KEYS,
                    bounds={"x": (0.0, 20.0)}, max_partitions=3, max_rows=L_ALL, rng=insecure_seeded(0),
                    bounding_report=False)
    assert [row[0] for row in r.rows] == KEYS["k"]
    df = _frame()
    assert r.scales["s"]["sum"] < 1.0  # Laplace, 3 L 20 / 500
    for key, n, s in r.rows:
        assert n == int((df.k == key).sum())  # no noise at this epsilon, no bounding binds; 0 for "never"
        assert s == pytest.approx(float(df.x[df.k == key].clip(0, 20).sum()), abs=20.0)  # 20 scales: P < 1e-8


def test_to_dicts_to_pandas_and_str(session: Session) -> None:
    r = session.sql("SELECT k, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY k ORDER BY k", epsilon=1.0, keys=KEYS,
                    bounds={"x": (0.0, 20.0)}, max_partitions=3, max_rows=2, rng=insecure_seeded(9))
    dicts = r.to_dicts()
    assert [d["k"] for d in dicts] == ["a", "b", "c", "never"]
    for d, row in zip(dicts, r.rows):
        assert (d["k"], d["n"], d["m"]) == row
        assert d["n_lo"] <= d["n"] <= d["n_hi"] and d["m_lo"] <= d["m"] <= d["m_hi"]
    frame = r.to_pandas()
    assert list(frame.columns) == ["k", "n", "m", "n_lo", "n_hi", "m_lo", "m_hi"]
    assert frame.to_dict("records") == dicts
    text = str(r)
    lines = text.splitlines()
    assert lines[0].split() == ["k", "n", "m"]
    for d in dicts:
        assert any(line.startswith(d["k"]) and "[" in line for line in lines), (d, text)
    assert "4 row(s)" in text and "95% interval" in text and "cost 1.0-DP" in text
    assert "INSECURE" in text and r.insecure
    assert r.guarantee == PureDP(1.0) and r.remaining == session.remaining()
    assert r.split == {"n": pytest.approx((0.475, 0.0)), "m": pytest.approx((0.475, 0.0)),
                       "bounding_report": pytest.approx((0.05, 0.0))}  # equal shares after the report's 5%
    assert r.bounding["released"] and r.bounding["units"] >= 0 and "bounding (DP counts" in text
    assert r.scales["n"]["rows"] == pytest.approx(3 * 2 / 0.475, rel=1e-9)


def test_to_pandas_is_the_frame_of_to_dicts_column_by_column(open_session) -> None:  # noqa: ANN001
    """to_pandas builds its frame from the row tuples as records, never from dicts: the same names, order,
    values and dtypes as ``pd.DataFrame(to_dicts())`` for NULL keys, text, dates, quantiles and counts; an
    empty result keeps its columns (the dicts' frame has none)."""
    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"uid": rng.integers(0, 80, n), "k": rng.choice(["a", "b", None], n),
                          "d": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 30, n), unit="D"),
                          "x": np.round(rng.uniform(0, 10, n), 2)})
    s = open_session(frame)
    queries = [("SELECT k, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS m FROM t GROUP BY k",
                {"keys": {"k": ["a", "b", None]}}),
               ("SELECT k, MEDIAN(x) AS med, COUNT(*) AS n FROM t GROUP BY k", {"keys": {"k": ["a", "zz"]}}),
               ("SELECT CAST(d AS DATE) AS day, COUNT(*) AS n FROM t GROUP BY day",
                {"keys": {"day": ["2024-01-02", "2024-01-05"]}}),
               ("SELECT COUNT(*) AS n, AVG(x) AS m FROM t", {})]
    for sql, kw in queries:
        r = s.sql(sql, epsilon=5.0, bounds={"x": (0.0, 10.0)}, max_partitions=1, max_rows=3,
                  rng=insecure_seeded(5), bounding_report=False, **kw)
        got, want = r.to_pandas(), pd.DataFrame(r.to_dicts())
        assert list(got.columns) == list(want.columns) and list(got.dtypes) == list(want.dtypes), sql
        pd.testing.assert_frame_equal(got, want)
    empty = s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=0.01, delta=1e-12, max_partitions=1,
                  max_rows=1, rng=insecure_seeded(0), bounding_report=False)
    assert empty.rows == () and empty.to_dicts() == []
    assert list(empty.to_pandas().columns) == ["k", "n", "n_lo", "n_hi"] and len(empty.to_pandas()) == 0


def test_quantiles_land_on_the_bucket_grid_near_the_truth(session: Session) -> None:
    """32 buckets on [0, 20] (width 0.625); at epsilon 1000 the chosen edge is within two buckets of the
    true quantile (the best edge is within one; the next ones lose e^{-500/3 / (2 * 0.9 L)} each)."""
    r = session.sql("SELECT k, MEDIAN(x) AS med, QUANTILE_CONT(x, 0.9) AS p90 FROM t GROUP BY k", epsilon=1000.0,
                    keys=KEYS, bounds={"x": (0.0, 20.0)}, max_partitions=3, max_rows=L_ALL, quantile_buckets=32,
                    rng=insecure_seeded(2))
    df = _frame()
    for key, med, p90 in r.rows:
        for v in (med, p90):
            assert 0.0 <= v <= 20.0 and (v / 0.625) == pytest.approx(round(v / 0.625), abs=1e-9)
        if key != "never":
            x = df.x[df.k == key].clip(0, 20)
            assert abs(med - x.quantile(0.5)) <= 1.25 and abs(p90 - x.quantile(0.9)) <= 1.25
    assert math.isnan(r.intervals["med"][0][0])  # no value interval for a quantile: its details give the rank error
    assert set(r.details["quantiles"]) == {"med", "p90"}
    assert r.details["quantiles"]["med"]["bucket_width"] == pytest.approx(0.625)


def test_quantiles_and_distinct_counts_without_group_by_read_the_data(session: Session) -> None:
    """Without GROUP BY the side statements (quantile histograms, distinct counts) have no key column; their
    rows all belong to the one partition.  (They were once matched to no partition: MIN/MAX/MEDIAN came out
    uniform over the bounds and COUNT(DISTINCT x) as 0, whatever the data and epsilon.)"""
    r = session.sql("SELECT MEDIAN(x) AS med, MIN(x) AS lo, MAX(x) AS hi, COUNT(DISTINCT k) AS nk FROM t",
                    epsilon=1000.0, bounds={"x": (0.0, 20.0)}, max_rows=L_ALL, quantile_buckets=32,
                    rng=insecure_seeded(5))
    x = _frame().x.clip(0, 20)
    (med, lo, hi, nk), = r.rows
    assert abs(med - x.quantile(0.5)) <= 1.25 and lo <= x.min() + 1.25 and hi >= x.max() - 1.25
    assert nk == pytest.approx(3, abs=0.5)


def test_var_samp_says_it_estimates_the_population_form(session: Session) -> None:
    r = session.sql("SELECT VAR_SAMP(x) AS v FROM t", epsilon=1.0, bounds={"x": (0.0, 20.0)}, rng=insecure_seeded(0))
    assert "population form" in r.details["note"]


def test_histogram_bins_before_noise(open_session) -> None:  # noqa: ANN001
    """Bins [e_i, e_{i+1}), the last closed; values outside, NULL and NaN in no bin (epsilon 1000: no noise)."""
    x = [0.0, 9.99, 10.0, 29.9, 30.0, -1.0, 31.0, None, math.nan, 15.0]
    s = open_session(pd.DataFrame({"uid": range(len(x)), "x": x}))
    r = s.histogram("x", [0, 10, 20, 30], epsilon=1000.0, rng=insecure_seeded(0))
    assert r.rows == (("[0, 10)", 2), ("[10, 20)", 2), ("[20, 30]", 2))
    with pytest.raises(ValueError, match="strictly increasing"):
        s.histogram("x", [0, 0, 1], epsilon=1.0)
    assert [e.label for e in s.ledger.history()] == ["histogram of x over 3 bins"]


def test_plan_shows_the_split_and_costs_nothing(session: Session, tmp_path: Path) -> None:
    before = session.ledger.history()
    plan = session.plan("SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k", epsilon=1.0, delta=1e-6,
                        bounds={"x": (0.0, 20.0)}, max_partitions=2, max_rows=3,
                        split={"n": 0.2, "s": 0.25, "partition_selection": 0.5, "bounding_report": 0.05})
    assert plan.guarantee == ApproxDP(epsilon=1.0, delta=1e-6)
    shares = plan.split.shares()
    assert shares["n"][0] == pytest.approx(0.2) and shares["s"][0] == pytest.approx(0.25)
    assert shares["bounding_report"] == (pytest.approx(0.05), 0.0)
    assert shares["partition_selection"] == (pytest.approx(0.5), pytest.approx(1e-6))
    assert math.fsum(e for e, _ in shares.values()) <= 1.0
    rows = {(m["aggregate"], m["primitive"]): m for m in plan.measurements()}
    assert rows[("n", "rows")]["l1_sensitivity"] == 2 * 3 and rows[("s", "sum")]["l1_sensitivity"] == 2 * 3 * 20
    text = str(plan)
    assert "partition_selection" in text and "max_partitions=2, max_rows=3" in text
    assert session.ledger.history() == before


@pytest.mark.parametrize(("column", "keys"), [("d", ["2024-01-01", "2024-01-02"]), ("b", ["true", "false"]),
                                              ("k", [1, 2])], ids=["date-as-text", "boolean-as-text", "int-for-text"])
def test_public_keys_of_another_type_match_or_are_refused(open_session, column: str, keys: list) -> None:  # noqa: ANN001
    """Each key holds 50 units; epsilon 1000 makes the count exact.  Either the keys are matched to the
    column's values (counts 50) or refused before anything is spent; never a silent 0."""
    import datetime

    df = pd.DataFrame({"uid": range(100), "k": ["1", "2"] * 50, "b": [True, False] * 50,
                       "d": [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)] * 50})
    s = open_session(df)
    try:
        r = s.sql(f"SELECT {column}, COUNT(*) AS n FROM t GROUP BY {column}", epsilon=1000.0, keys={column: keys},
                  rng=insecure_seeded(0))
    except (ValueError, TypeError):
        assert s.ledger.history() == ()
    else:
        assert [row[1] for row in r.rows] == [50, 50]


def test_the_default_grid_resolves_data_far_narrower_than_its_bounds(open_session) -> None:  # noqa: ANN001
    """Bounds (0, 10^6) around data in [100, 101]: 1024 buckets (width ~977) can only answer 0 or ~977, while
    the default grid of 2**20 buckets (width ~0.95) puts the median within a few buckets of the truth, at the
    same epsilon, with the same exponential mechanism (the runs sampler makes the fine grid cost O(occupied
    buckets)); MIN lands on the fine grid below the data."""
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"uid": np.arange(2000), "x": rng.uniform(100.0, 101.0, 2000)})
    s = open_session(df, budget=PureDP(100.0))
    kw = dict(epsilon=1.0, bounds={"x": (0.0, 1e6)}, max_rows=1)
    q = "SELECT MEDIAN(x) AS med, MIN(x) AS lo FROM t"  # (MAX: ~10^6 empty buckets above the data outweigh it)
    fine = s.sql(q, rng=insecure_seeded(3), **kw)
    coarse = s.sql(q, rng=insecure_seeded(3), quantile_buckets=1024, **kw)
    width = 1e6 / 2**20
    med, lo = fine.rows[0]
    assert abs(med - np.median(df.x)) <= 4 * width
    assert 0.0 <= lo <= 101.0 and (lo / width) == pytest.approx(round(lo / width), abs=1e-6)
    assert fine.details["quantiles"]["med"]["bucket_width"] == pytest.approx(width)
    # on 1024 buckets every edge is below or above all the data (all tie on rank): no answer within 100 of it
    assert all(abs(v - 100.5) >= 100.0 and (v / (1e6 / 1024)) == pytest.approx(round(v / (1e6 / 1024)), abs=1e-6)
               for v in coarse.rows[0])
