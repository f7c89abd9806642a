"""The SQL analysts write first (issue 12): public joins, post-processing (HAVING, arithmetic over
aggregates, ORDER BY expressions), FILTER, per-unit aggregation, COUNT(DISTINCT x), MIN/MAX of numbers
and dates.  Raw aggregates are checked against an independent pandas computation of the same bounded
query; sensitivities on neighbouring tables; post-processing against the plain query's noisy values."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.errors import UnsupportedError
from dpkit.guarantees import ApproxDP
from dpkit.query import Session
from dpkit.random import insecure_seeded

BIG = ApproxDP(epsilon=1e9, delta=0.5)
CARRIERS = ["AA", "UA", "DL", "ZZ"]  # ZZ has no row in the public airlines table


def _flights(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    days = rng.integers(0, 365, n)
    return pd.DataFrame({
        "uid": rng.integers(0, 120, n).astype("int64"),
        "carrier": rng.choice(CARRIERS, n),
        "x": np.round(rng.uniform(0, 100, n), 2),
        # a typed date column (an object column of dates is text: its type would come from the values)
        "d": pd.array([dt.date(2013, 1, 1) + dt.timedelta(days=int(k)) for k in days], dtype="date32[pyarrow]"),
        "tag": rng.choice(["p", "q", "r", "s", "t", "u"], n),
    })


AIRLINES = pd.DataFrame({"carrier": ["AA", "UA", "DL"], "name": ["American", "United", "Delta"]})
DUPLICATED = pd.DataFrame({"carrier": ["AA", "AA", "UA"], "name": ["American", "Amer.", "United"]})


@pytest.fixture
def flights() -> pd.DataFrame:
    return _flights()


def _session(tmp_path: Path, df: pd.DataFrame, name: str = "l", **kw: Any) -> Session:
    return Session(df, privacy_unit="uid", ledger=tmp_path / f"{name}.db", budget=BIG,
                   public={"airlines": AIRLINES, "dup": DUPLICATED}, **kw)


def _raw(session: Session, query: str, plan: Any = None, **kw: Any) -> dict[tuple[Any, ...], dict[str, float]]:
    """The engine's exact aggregates of a plan (``session``'s own unless given), before noise.

    Neighbouring tables must run one plan: a plan carries the random salt that picks each unit's partitions."""
    plan = plan if plan is not None else session.plan(query, epsilon=1.0, **kw)
    if plan.public_keys is not None:
        plan.public_keys.ensure_in(session._backend)
    rows = session._backend.fetch(plan.sql)
    nk = plan.compiled.key_count
    out = {tuple(r[:nk]): dict(zip(plan.compiled.columns, r[nk:])) for r in rows}
    for i in plan.compiled.distincts:
        for r in session._backend.fetch(plan.compiled.distinct_sql(i, plan.dialect)):
            out.setdefault(tuple(r[:nk]), {})[f"distinct__{i}"] = r[nk]
    return out


# ------------------------------------------------------------------ joins with public tables
def test_a_join_on_a_unique_public_key_is_a_row_level_map(tmp_path: Path, flights: pd.DataFrame) -> None:
    query = (
        "SELECT a.name, COUNT(*) AS n, SUM(x) AS s FROM t JOIN airlines AS a ON t.carrier = a.carrier GROUP BY a.name"
    )
    with _session(tmp_path, flights) as s:
        got = _raw(s, query, bounds={"x": (0, 100)}, max_partitions=4, max_rows=10_000,
                   keys={"name": ["American", "United", "Delta"]})
    want = flights.merge(AIRLINES, on="carrier").groupby("name").agg(n=("x", "size"), s=("x", "sum"))
    for name, row in want.iterrows():
        assert got[(name,)]["rows"] == row["n"]
        assert got[(name,)]["sum__0"] == pytest.approx(row["s"], rel=1e-12)


def test_a_left_join_keeps_rows_without_a_match(tmp_path: Path, flights: pd.DataFrame) -> None:
    query = "SELECT a.name, COUNT(*) AS n FROM t LEFT JOIN airlines a ON t.carrier = a.carrier GROUP BY a.name"
    with _session(tmp_path, flights) as s:
        got = _raw(s, query, delta=1e-6, max_partitions=4, max_rows=10_000)
    assert got[(None,)]["rows"] == int((flights["carrier"] == "ZZ").sum())
    assert sum(v["rows"] for v in got.values()) == len(flights)


@pytest.mark.parametrize(("query", "match"), [
    ("SELECT COUNT(*) FROM t JOIN dup ON t.carrier = dup.carrier", "not a unique key"),
    ("SELECT COUNT(*) FROM t JOIN airlines a ON t.x > 0", "must equate columns"),
    ("SELECT COUNT(*) FROM t CROSS JOIN airlines", "CROSS"),
    ("SELECT COUNT(*) FROM t RIGHT JOIN airlines a ON t.carrier = a.carrier", "RIGHT"),
    ("SELECT COUNT(*) FROM t FULL JOIN airlines a ON t.carrier = a.carrier", "FULL"),
    ("SELECT COUNT(*) FROM t JOIN t AS u ON t.uid = u.uid", "only public tables"),
    ("SELECT COUNT(*) FROM t JOIN weather w ON t.carrier = w.carrier", "only public tables"),
    ("SELECT COUNT(*) FROM t, airlines", "no ON or USING"),
    ("SELECT COUNT(*) FROM t JOIN (SELECT * FROM airlines) a ON t.carrier = a.carrier", "subquery"),
])
def test_joins_that_could_copy_rows_are_refused_and_nothing_is_spent(tmp_path: Path, flights: pd.DataFrame,
                                                                     query: str, match: str) -> None:
    with _session(tmp_path, flights) as s:
        with pytest.raises((UnsupportedError, ValueError), match=match):
            s.sql(query, epsilon=1.0, max_rows=1)
        assert s.ledger.history() == ()


def test_join_using_and_an_extra_condition(tmp_path: Path, flights: pd.DataFrame) -> None:
    with _session(tmp_path, flights) as s:
        using = _raw(s, "SELECT COUNT(*) AS n FROM t JOIN airlines USING (carrier)", max_rows=10_000)
        extra = _raw(s, "SELECT COUNT(*) AS n FROM t JOIN airlines a ON t.carrier = a.carrier AND a.name <> 'Delta'",
                     max_rows=10_000)
    assert using[()]["rows"] == int(flights["carrier"].isin(["AA", "UA", "DL"]).sum())
    assert extra[()]["rows"] == int(flights["carrier"].isin(["AA", "UA"]).sum())


def test_a_join_leaves_the_sensitivity_unchanged(tmp_path: Path, flights: pd.DataFrame) -> None:
    """Neighbours D and D' (without unit 7): every joined aggregate moves by at most its per-partition bound."""
    query = "SELECT a.name, COUNT(*) AS n, SUM(x) AS s FROM t JOIN airlines a ON t.carrier = a.carrier GROUP BY a.name"
    kw = dict(bounds={"x": (0, 100)}, max_partitions=2, max_rows=3, keys={"name": ["American", "United", "Delta"]},
              partition_order="md5")
    with _session(tmp_path, flights, "d") as s1, _session(tmp_path, flights[flights.uid != 7], "d2") as s2:
        plan = s1.plan(query, epsilon=1.0, **kw)
        a, b = _raw(s1, query, plan), _raw(s2, query, plan)
    l1 = {m.column: 0.0 for m in plan.split.measurements}
    for key in set(a) | set(b):
        for m in plan.split.measurements:
            l1[m.column] += abs(a.get(key, {}).get(m.column, 0) - b.get(key, {}).get(m.column, 0))
    for m in plan.split.measurements:
        assert l1[m.column] <= m.l1 + 1e-9, (m.column, l1[m.column], m.l1)


# ------------------------------------------------------------------ post-processing
def test_having_and_arithmetic_are_post_processing_of_the_same_noisy_values(tmp_path: Path,
                                                                             flights: pd.DataFrame) -> None:
    kw = dict(epsilon=1.0, bounds={"x": (0, 100)}, keys={"carrier": CARRIERS}, max_partitions=1, max_rows=5)
    with _session(tmp_path, flights) as s:
        plain = s.sql(
            "SELECT carrier, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY carrier", rng=insecure_seeded(4), **kw
        )
        post = s.sql(
            "SELECT carrier, SUM(x) / COUNT(*) AS ratio, SUM(x) * 2 + 1 AS twice, COUNT(*) AS n FROM t "
            "GROUP BY carrier HAVING COUNT(*) > 300 ORDER BY ratio DESC, carrier",
            rng=insecure_seeded(4),
            **kw,
        )
    by_key = {row[0]: row for row in plain.rows}
    want = sorted([k for k in CARRIERS if by_key[k][2] > 300], key=lambda k: -(by_key[k][1] / by_key[k][2]))
    assert [row[0] for row in post.rows] == want
    for carrier, ratio, twice, n in post.rows:
        _, s_, n_ = by_key[carrier]
        assert ratio == pytest.approx(s_ / n_) and twice == pytest.approx(2 * s_ + 1) and n == n_
        i = [row[0] for row in plain.rows].index(carrier)
        (lo, hi), (tlo, thi) = (
            plain.intervals["s"][i],
            post.intervals["twice"][[r[0] for r in post.rows].index(carrier)],
        )
        assert (tlo, thi) == pytest.approx((2 * lo + 1, 2 * hi + 1))  # a monotone image of SUM's interval
    assert all(math.isnan(lo) and math.isnan(hi) for lo, hi in post.intervals["ratio"])  # two noisy values: none
    assert post.key_columns == ("carrier",)


def test_filter_is_a_row_level_rewrite(tmp_path: Path, flights: pd.DataFrame) -> None:
    with _session(tmp_path, flights) as s:
        got = _raw(s, "SELECT carrier, COUNT(*) FILTER (WHERE x > 50) AS big, SUM(x) FILTER (WHERE tag = 'p') AS sp "
                      "FROM t GROUP BY carrier", keys={"carrier": CARRIERS}, bounds={"x": (0, 100)},
                   max_partitions=4, max_rows=10_000)
    for c in CARRIERS:
        rows = flights[flights.carrier == c]
        assert got[(c,)]["values__0"] == (rows.x > 50).sum()
        assert got[(c,)]["sum__1"] == pytest.approx(rows[rows.tag == "p"].x.sum(), rel=1e-12)


# ------------------------------------------------------------------ per-unit aggregation
def test_a_per_unit_subquery_aggregates_one_row_per_unit(tmp_path: Path, flights: pd.DataFrame) -> None:
    query = ("SELECT COUNT(*) AS units, SUM(n) AS total, AVG(spend) AS avg_spend FROM "
             "(SELECT uid, COUNT(*) AS n, SUM(x) AS spend FROM t WHERE x > 10 GROUP BY uid HAVING COUNT(*) > 2) AS u")
    with _session(tmp_path, flights) as s:
        got = _raw(s, query, bounds={"n": (0, 20), "spend": (0, 1000)})[()]
        assert s.plan(query, epsilon=1.0, bounds={"n": (0, 20), "spend": (0, 1000)}).max_rows == 1  # not required
    per = flights[flights.x > 10].groupby("uid").agg(n=("x", "size"), spend=("x", "sum"))
    per = per[per.n > 2]
    assert got["rows"] == len(per)
    assert got["sum__0"] == pytest.approx(per.n.clip(0, 20).sum(), rel=1e-12)
    assert got["centered_sum__1"] == pytest.approx((per.spend.clip(0, 1000) - 500).sum(), rel=1e-9)


def test_a_per_unit_subquery_with_keys_bounds_rows_per_unit(tmp_path: Path, flights: pd.DataFrame) -> None:
    query = ("SELECT carrier, AVG(n) AS flights_per_unit FROM "
             "(SELECT uid, carrier, COUNT(*) AS n FROM t GROUP BY uid, carrier) AS u GROUP BY carrier")
    with _session(tmp_path, flights) as s:
        with pytest.raises(ValueError, match="max_rows"):
            s.plan(query, epsilon=1.0, bounds={"n": (0, 30)}, keys={"carrier": CARRIERS}, max_partitions=4)
        got = _raw(s, query, bounds={"n": (0, 30)}, keys={"carrier": CARRIERS}, max_partitions=4, max_rows=1)
    per = flights.groupby(["uid", "carrier"]).size().rename("n").reset_index()
    for c in CARRIERS:
        assert got[(c,)]["values__0"] == (per.carrier == c).sum()


@pytest.mark.parametrize(("query", "match"), [
    ("SELECT AVG(n) FROM (SELECT carrier, COUNT(*) AS n FROM t GROUP BY carrier) AS u", "group by the privacy unit"),
    ("SELECT AVG(n) FROM (SELECT uid, x AS n FROM t GROUP BY uid) AS u", "neither an aggregate"),
    ("SELECT AVG(n) FROM (SELECT uid, COUNT(*) AS n FROM t GROUP BY uid ORDER BY n LIMIT 3) AS u", "per-unit subquery"),
    ("SELECT AVG(n) FROM (SELECT uid, STRING_AGG(tag, ',') AS n FROM t GROUP BY uid) AS u", "not supported"),
    ("SELECT uid, AVG(n) FROM (SELECT uid, COUNT(*) AS n FROM t GROUP BY uid) AS u GROUP BY uid", "privacy unit"),
])
def test_per_unit_subqueries_that_are_not_per_unit_are_refused(tmp_path: Path, flights: pd.DataFrame, query: str,
                                                               match: str) -> None:
    with _session(tmp_path, flights) as s:
        with pytest.raises((UnsupportedError, ValueError), match=match):
            s.sql(query, epsilon=1.0, delta=1e-6, bounds={"n": (0, 10)}, max_partitions=1)
        assert s.ledger.history() == ()


# ------------------------------------------------------------------ COUNT(DISTINCT x), MIN and MAX
def test_count_distinct_keeps_at_most_max_rows_values_a_unit(tmp_path: Path, flights: pd.DataFrame) -> None:
    query = "SELECT carrier, COUNT(DISTINCT tag) AS tags, COUNT(DISTINCT d) AS days FROM t GROUP BY carrier"
    kw = dict(keys={"carrier": CARRIERS}, max_partitions=4)
    with _session(tmp_path, flights) as s:
        full = _raw(s, query, max_rows=10_000, **kw)
        capped = _raw(s, query, max_rows=1, **kw)
        plan = s.plan(query, epsilon=1.0, max_rows=2, **kw)
    for c in CARRIERS:
        rows = flights[flights.carrier == c]
        assert full[(c,)]["distinct__0"] == rows.tag.nunique() and full[(c,)]["distinct__1"] == rows.d.nunique()
        assert capped[(c,)]["distinct__1"] <= rows.uid.nunique()  # one value a unit
    assert {m.primitive: m.l1 for m in plan.split.measurements} == {"distinct": 4 * 2}  # K * L


def test_count_distinct_moves_by_at_most_its_bound_between_neighbours(tmp_path: Path, flights: pd.DataFrame) -> None:
    query = "SELECT carrier, COUNT(DISTINCT d) AS days FROM t GROUP BY carrier"
    kw = dict(keys={"carrier": CARRIERS}, max_partitions=2, max_rows=3, partition_order="md5")
    for unit in (3, 50, 99):
        with _session(tmp_path, flights, "a") as s1, _session(tmp_path, flights[flights.uid != unit], "b") as s2:
            plan = s1.plan(query, epsilon=1.0, **kw)
            a, b = _raw(s1, query, plan), _raw(s2, query, plan)
        assert sum(abs(a.get(k, {}).get("distinct__0", 0) - b.get(k, {}).get("distinct__0", 0))
                   for k in set(a) | set(b)) <= 2 * 3


def test_min_and_max_of_dates_come_back_as_dates_within_the_bounds(tmp_path: Path, flights: pd.DataFrame) -> None:
    with _session(tmp_path, flights) as s:
        r = s.sql("SELECT carrier, MIN(d) AS first, MAX(d) AS last, MEDIAN(x) AS med FROM t GROUP BY carrier",
                  epsilon=1e6, bounds={"d": ("2012-06-01", "2014-06-30"), "x": (0, 100)}, keys={"carrier": CARRIERS},
                  max_partitions=4, max_rows=50, rng=insecure_seeded(0))
    for carrier, first, last, med in r.rows:
        rows = flights[flights.carrier == carrier]
        assert isinstance(first, dt.date) and isinstance(last, dt.date)
        assert dt.date(2012, 6, 1) <= first <= rows.d.min() <= rows.d.max() <= last <= dt.date(2014, 6, 30)
        assert abs((first - rows.d.min()).days) <= 3 and abs((last - rows.d.max()).days) <= 3  # large epsilon
        assert abs(med - rows.x.median()) < 2
    assert "min_max" in r.details


# ------------------------------------------------------------------ Spark runs the same plans
@pytest.mark.spark
def test_spark_answers_joins_per_unit_and_distinct_like_duckdb(tmp_path: Path, flights: pd.DataFrame) -> None:
    import shutil

    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 on the PATH")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("dpkit-analyst").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    queries = [
        (
            "SELECT a.name, COUNT(*) AS n, SUM(x) AS s FROM t LEFT JOIN airlines a ON t.carrier = a.carrier "
            "GROUP BY a.name",
            dict(
                bounds={"x": (0, 100)},
                keys={"name": ["American", "United", "Delta", None]},
                max_partitions=4,
                max_rows=10_000,
            ),
        ),
        (
            "SELECT COUNT(*) AS units, SUM(n) AS total FROM (SELECT uid, COUNT(*) AS n FROM t GROUP BY uid) AS u",
            dict(bounds={"n": (0, 20)}),
        ),
        (
            "SELECT carrier, COUNT(DISTINCT tag) AS tags FROM t GROUP BY carrier",
            dict(keys={"carrier": CARRIERS}, max_partitions=4, max_rows=10_000),
        ),
    ]
    frame = flights.assign(d=pd.to_datetime(flights.d))
    with _session(tmp_path, frame, "duck") as duck, \
            Session(spark.createDataFrame(frame), privacy_unit="uid", ledger=tmp_path / "spark.db", budget=BIG,
                    public={"airlines": AIRLINES}) as sp:
        for query, kw in queries:
            a, b = _raw(duck, query, **kw), _raw(sp, query, **kw)
            assert a.keys() == b.keys(), query
            for key in a:
                for column, value in a[key].items():
                    assert float(b[key][column]) == pytest.approx(float(value), rel=1e-9), (query, key, column)


def test_dp_bounds_cover_the_bulk_of_the_data(tmp_path: Path) -> None:
    """Session.bounds: powers of two around the 0.5%..99.5% range of the values at a moderate epsilon, charged
    exactly epsilon; a column that is not numeric is refused before anything is spent."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"uid": np.arange(40_000) // 4, "x": rng.lognormal(3.0, 1.0, 40_000), "tag": "a"})
    with Session(df, privacy_unit="uid", ledger=tmp_path / "b.db", budget=ApproxDP(epsilon=5.0, delta=1e-6),
                 max_partitions=2, max_rows=2) as s:
        with pytest.raises(ValueError, match="numeric"):
            s.bounds("tag", epsilon=1.0)
        assert s.ledger.history() == ()
        lo, hi = s.bounds("x", epsilon=1.0, rng=insecure_seeded(0))
        assert float(s.remaining().epsilon) == pytest.approx(4.0)
    q_lo, q_hi = np.quantile(df.x, [0.01, 0.99])  # tail 0.005 of the noisy, bounded mass on each side
    assert q_lo / 8 <= lo <= q_lo and q_hi <= hi <= 4 * q_hi
    assert math.log2(hi).is_integer() and math.log2(lo).is_integer()
