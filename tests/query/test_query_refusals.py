"""Refusals and bad input: a clear error naming the problem, and nothing spent.

Every case runs ``Session.sql`` against a ledger that already holds one committed spend, and
compares the ledger's full state (``history()``, ``remaining()``, ``rollup()``) before and after,
and again through a second Session opened on the same file.  A ``progress`` callback shows
whether the engine was reached: for refusals before the data is read it must never be called.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpkit.errors import BudgetExceededError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.query import Session
from dpkit.random import insecure_seeded

B = {"x": (0.0, 10.0)}
KEYS = {"k": ["a", "b"]}


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"uid": [1, 1, 2, 3, 4], "k": ["a", "b", "a", "a", "b"],
                         "x": [10.0, None, 3.0, 2.0, 7.5], "y": [1, 2, 3, 4, 5]})


def _state(session: Session) -> tuple[Any, ...]:
    led = session.ledger
    return led.history(), led.remaining(), led.rollup()


def _open(path: Path) -> Session:
    s = Session(
        _frame(),
        max_partitions=1,
        max_rows=1,
        privacy_unit="uid",
        ledger=path,
        budget=ApproxDP(epsilon=2.0, delta=1e-5),
    )
    s.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.25, rng=insecure_seeded(0))  # a spend already on record
    return s


@pytest.fixture
def session(tmp_path: Path) -> Session:
    s = _open(tmp_path / "ledger.db")
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """One session for the many cases that must not change it (each checks that it did not)."""
    s = _open(tmp_path_factory.mktemp("refusals") / "ledger.db")
    yield s
    s.close()


def assert_refused(session: Session, query: str, exc: type[BaseException], match: str, **kwargs: Any) -> None:
    before = _state(session)
    said: list[str] = []
    with pytest.raises(exc, match=match):
        session.sql(query, **({"epsilon": 0.5, "rng": insecure_seeded(1), "progress": said.append} | kwargs))
    assert said == []  # refused before the engine ran
    assert _state(session) == before
    path = session.ledger.path
    with Session(_frame(), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=path) as other:
        assert _state(other) == before


CASES = [  # (query, extra keyword arguments, exception, message pattern)
    ("SELECT COUNT(*) FROM t JOIN t AS u ON t.uid = u.uid", {}, UnsupportedError, "join"),
    ("SELECT COUNT(*) FROM t, t AS u", {}, UnsupportedError, "join"),
    ("SELECT COUNT(*) FROM t WHERE x IN (SELECT x FROM t)", {}, UnsupportedError, "subquery in WHERE"),
    ("WITH a AS (SELECT * FROM t) SELECT COUNT(*) FROM a", {}, UnsupportedError, "WITH"),
    ("SELECT COUNT(*) FROM t UNION ALL SELECT COUNT(*) FROM t", {}, UnsupportedError, "only SELECT"),
    ("SELECT * FROM t", {}, UnsupportedError, r"SELECT \* returns individual rows"),
    ("SELECT x FROM t", {}, UnsupportedError, "neither an aggregate nor a GROUP BY key"),
    ("SELECT x, COUNT(*) FROM t", {}, UnsupportedError, "neither an aggregate nor a GROUP BY key"),
    ("SELECT DISTINCT k FROM t", {}, UnsupportedError, "DISTINCT"),
    ("SELECT SUM(x) OVER () FROM t", {"bounds": B}, UnsupportedError, "window function"),
    ("SELECT COUNT(*) FROM (SELECT * FROM t)", {}, UnsupportedError, "must group by the privacy unit"),
    (
        "SELECT AVG(n) FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) AS g",
        {"bounds": B},
        UnsupportedError,
        "must group by the privacy unit",
    ),
    ("SELECT COUNT(*) FROM t WHERE random() < 0.5", {}, UnsupportedError, "non-deterministic"),
    ("SELECT COUNT(*) FROM t WHERE now() > TIMESTAMP '2000-01-01'", {}, UnsupportedError, "non-deterministic"),
    (
        "SELECT k, COUNT(*) FROM t GROUP BY k, FLOOR(random() * 3)",
        {"delta": 1e-6},
        UnsupportedError,
        "non-deterministic",
    ),
    ("SELECT uid, COUNT(*) FROM t GROUP BY uid", {"delta": 1e-6}, UnsupportedError, "privacy unit 'uid'"),
    ("SELECT COUNT(*) FROM t GROUP BY t.uid", {"delta": 1e-6}, UnsupportedError, "privacy unit 'uid'"),
    ("SELECT uid AS p, COUNT(*) FROM t GROUP BY p", {"delta": 1e-6}, UnsupportedError, "privacy unit 'uid'"),
    ("SELECT uid, COUNT(*) FROM t GROUP BY 1", {"delta": 1e-6}, UnsupportedError, "privacy unit 'uid'"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k, uid", {"delta": 1e-6}, UnsupportedError, "privacy unit 'uid'"),
    ("SELECT COUNT(*) FROM t LIMIT 1 OFFSET 1", {}, UnsupportedError, "OFFSET"),
    ("SELECT COUNT(*) FROM t ORDER BY nope", {}, UnsupportedError, "ORDER BY nope"),
    ("DELETE FROM t", {}, UnsupportedError, "only SELECT"),
    ("SELECT COUNT(*) FROM t; SELECT COUNT(*) FROM t", {}, UnsupportedError, "one SQL statement"),
    ("", {}, ValueError, "empty"),
    ("SELEC COUNT(*) FROM t", {}, ValueError, "could not parse"),
    ("SELECT SUM(nope) FROM t", {"bounds": B}, ValueError, r"unknown column \['nope'\]"),
    ("SELECT COUNT(*) FROM t WHERE nope > 1", {}, ValueError, r"unknown column \['nope'\]"),
    ("SELECT COUNT(*) FROM other", {}, ValueError, "unknown table 'other'"),
    ("SELECT COUNT(*) FROM read_csv('t.csv')", {}, UnsupportedError, "FROM must name the session's table"),
    ("SELECT SUM(k) FROM t", {"bounds": {"k": (0, 1)}}, ValueError, "not a number"),
    ("SELECT AVG(k) FROM t", {"bounds": {"k": (0, 1)}}, ValueError, "not a number"),
    ("SELECT SUM(x) FROM t", {}, ValueError, "needs clamping bounds for x"),
    ("SELECT MEDIAN(x) FROM t", {}, ValueError, "needs clamping bounds for x"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": (5.0, 5.0)}}, ValueError, "lo < hi"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": (6.0, 5.0)}}, ValueError, "lo < hi"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": (math.nan, 5.0)}}, ValueError, "finite"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": (0.0, math.nan)}}, ValueError, "finite"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": (-math.inf, 5.0)}}, ValueError, "finite"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": (0.0, math.inf)}}, ValueError, "finite"),
    ("SELECT SUM(x) FROM t", {"bounds": {"x": "0:5"}}, ValueError, "pair"),
    ("SELECT SUM(x) FROM t", {"bounds": {"nope": (0, 1), "x": (0, 1)}}, ValueError, "nope"),
    ("SELECT COUNT(*) FROM t", {"epsilon": 0.0}, ValueError, "epsilon must be finite and > 0"),
    ("SELECT COUNT(*) FROM t", {"epsilon": -1.0}, ValueError, "epsilon must be finite and > 0"),
    ("SELECT COUNT(*) FROM t", {"epsilon": math.nan}, ValueError, "epsilon must be finite and > 0; got nan"),
    ("SELECT COUNT(*) FROM t", {"epsilon": math.inf}, ValueError, "epsilon must be finite and > 0"),
    ("SELECT COUNT(*) FROM t", {"epsilon": "1"}, TypeError, "epsilon must be a number"),
    ("SELECT COUNT(*) FROM t", {"delta": -0.1}, ValueError, "delta must be finite and >= 0"),
    ("SELECT COUNT(*) FROM t", {"delta": 1.0}, ValueError, "delta must be < 1"),
    ("SELECT COUNT(*) FROM t", {"delta": 1.5}, ValueError, "delta must be < 1"),
    ("SELECT COUNT(*) FROM t", {"delta": math.nan}, ValueError, "delta must be finite"),
    ("SELECT COUNT(*) FROM t", {"delta": math.inf}, ValueError, "delta must be finite"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k", {}, UnsupportedError, "needs delta > 0"),
    (
        "SELECT COUNT(*) AS n, SUM(x) AS s FROM t",
        {"bounds": B, "split": {"n": 0.5, "s": 0.6}, "bounding_report": False},
        ValueError,
        "sum to 1",
    ),
    (
        "SELECT COUNT(*) AS n, SUM(x) AS s FROM t",
        {"bounds": B, "split": {"n": 0.5, "s": 0.4}, "bounding_report": False},
        ValueError,
        "sum to 1",
    ),
    ("SELECT COUNT(*) AS n, SUM(x) AS s FROM t", {"bounds": B, "split": {"n": 1.0}}, ValueError, "missing"),
    (
        "SELECT COUNT(*) AS n, SUM(x) AS s FROM t",
        {"bounds": B, "split": {"n": math.nan, "s": 1.0}, "bounding_report": False},
        ValueError,
        "sum to 1",
    ),
    (
        "SELECT COUNT(*) AS n, SUM(x) AS s FROM t",
        {"bounds": B, "split": {"n": 1.5, "s": -0.5}, "bounding_report": False},
        ValueError,
        "> 0",
    ),
    ("SELECT COUNT(*) AS n FROM t", {"split": {"n": 0.5, "partition_selection": 0.5}}, ValueError, "unknown"),
    ("SELECT COUNT(*) FROM t", {"confidence": 1.0}, ValueError, "confidence"),
    ("SELECT COUNT(*) FROM t", {"confidence": math.nan}, ValueError, "confidence"),
    ("SELECT COUNT(*) FROM t", {"max_rows": 0}, ValueError, "max_rows must be an integer >= 1"),
    ("SELECT COUNT(*) FROM t", {"max_partitions": 1.5}, ValueError, "max_partitions must be an integer >= 1"),
    ("SELECT COUNT(*) FROM t", {"noise": "gaussian"}, ValueError, "needs delta > 0"),
    ("SELECT COUNT(*) FROM t", {"noise": "cauchy"}, ValueError, "noise must be"),
    ("SELECT COUNT(*) FROM t", {"keys": KEYS}, ValueError, "no GROUP BY"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k", {"keys": {"k": []}}, ValueError, "empty"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k", {"keys": {"j": ["a"]}}, ValueError, "not group keys"),
]


@pytest.mark.parametrize(("query", "kwargs", "exc", "match"), CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_refused_with_a_clear_message_and_nothing_spent(shared: Session, query: str, kwargs: dict, exc: type,
                                                        match: str) -> None:
    assert_refused(shared, query, exc, match, **kwargs)


def test_uuid_is_refused_as_non_deterministic(session: Session) -> None:
    assert_refused(session, "SELECT COUNT(*) FROM t WHERE hash(uuid()) % 2 = 0", UnsupportedError,
                   "non-deterministic")


def test_localtimestamp_is_refused_as_non_deterministic(session: Session) -> None:
    assert_refused(session, "SELECT COUNT(*) FROM t WHERE current_localtimestamp() > TIMESTAMP '2000-01-01'",
                   UnsupportedError, "non-deterministic")


def test_table_sample_is_refused_not_silently_ignored(session: Session) -> None:
    assert_refused(session, "SELECT COUNT(*) FROM t USING SAMPLE 10%", UnsupportedError, "SAMPLE")


def test_functions_that_raise_on_some_rows_are_refused_before_anything_runs(tmp_path: Path) -> None:
    """error() would fail the query only on tables holding a matching row: a free data-dependent bit.
    It is refused before the engine runs, on D and on its neighbour D' alike, and nothing is spent."""
    d = pd.DataFrame({"uid": [1, 2, 42], "x": [1.0, 2.0, 500.0]})
    query = "SELECT COUNT(*) AS n FROM t WHERE CASE WHEN x > 100 THEN error('found') ELSE TRUE END"
    for table, name in ((d, "d"), (d.iloc[:2], "d2")):
        with Session(
            table, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{name}.db", budget=PureDP(1.0)
        ) as s:
            said: list[str] = []
            with pytest.raises(UnsupportedError, match="raises an error on some rows"):
                s.sql(query, epsilon=0.5, rng=insecure_seeded(0), progress=said.append)
            assert said == [] and s.ledger.history() == () and s.remaining() == PureDP(1.0)


def test_a_cast_that_fails_on_one_row_gives_null_not_an_error(tmp_path: Path) -> None:
    """CAST is compiled as TRY_CAST: 'bob' becomes NULL (the row fails the filter) instead of failing the
    query, so D and its neighbour D' both answer, are both charged, and agree before noise."""
    d = pd.DataFrame({"uid": [1, 2, 42], "k": ["1", "2", "bob"]})
    query = "SELECT COUNT(*) AS n FROM t WHERE CAST(k AS INTEGER) > 0"
    raw = []
    for table, name in ((d, "d"), (d.iloc[:2], "d2")):
        with Session(
            table, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{name}.db", budget=PureDP(1.0)
        ) as s:
            assert "TRY_CAST" in s.plan(query, epsilon=0.5).sql
            s.sql(query, epsilon=0.5, rng=insecure_seeded(0))
            assert s.remaining() == PureDP(0.5)
            raw.append(s._backend.fetch(s.plan(query, epsilon=0.5).sql))
    assert raw[0] == raw[1]


def test_an_engine_failure_after_the_data_is_read_is_charged(tmp_path: Path) -> None:
    """Whatever fails once the engine may have read rows is charged (the spend is committed before the
    engine runs), and nothing of what failed is said: not the engine's text (which quotes the row), not
    its exception type, not even as the exception's context.  A real failure: the curator's view raises
    on one row of a column the query reads as it is (a bare column runs without TRY)."""
    import duckdb

    from dpkit.query import DataDependentFailure

    con = duckdb.connect()
    con.execute("CREATE TABLE base AS SELECT range AS uid, range % 7 AS x FROM range(100)")
    con.execute("CREATE VIEW v AS SELECT uid, CASE WHEN uid = 42 THEN error('bob was here') ELSE x END AS x FROM base")
    with Session(
        con, table="v", max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / "l.db", budget=PureDP(1.0)
    ) as s:
        with pytest.raises(DataDependentFailure, match="is spent") as e:
            s.sql("SELECT COUNT(x) AS n FROM v", epsilon=0.5)
        assert "bob" not in str(e.value) and "Exception" not in str(e.value)
        assert e.value.__context__ is None and e.value.__cause__ is None
        assert [x.state for x in s.ledger.history()] == ["committed"] and s.remaining() == PureDP(0.5)
    con.close()


@pytest.mark.parametrize("where", ["10 // z > 0", "10 % z > 0"], ids=["div", "mod"])
def test_whether_a_query_fails_does_not_depend_on_one_unit(tmp_path: Path, where: str) -> None:
    """Neighbours D (unit 42 with z = 0) and D' (without it): the query must fail on both (refused) or
    answer on both; a failure only on D tells them apart with certainty."""
    d = pd.DataFrame({"uid": [1, 2, 42], "z": [1, 1, 0]})
    outcomes = []
    for table, name in ((d, "d"), (d.iloc[:2], "d2")):
        with Session(
            table, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{name}.db", budget=PureDP(1.0)
        ) as s:
            try:
                s.sql(f"SELECT COUNT(*) AS n FROM t WHERE {where}", epsilon=0.5, rng=insecure_seeded(0))
                outcomes.append("answer")
            except Exception as e:  # noqa: BLE001 - any failure is the observable outcome
                outcomes.append(type(e).__name__)
    assert outcomes[0] == outcomes[1], outcomes


def test_bounds_too_large_to_sum_safely_are_refused_on_both_neighbours(tmp_path: Path) -> None:
    """bounds (0, 1e308) would let two units' SUM overflow to inf on D but not on D'; the plan refuses
    them on both, before anything runs or is spent."""
    kwargs = dict(epsilon=0.25, bounds={"x": (0.0, 1e308)}, rng=insecure_seeded(0))
    for x, name in (([1e308, 0.0], "d2"), ([1e308, 1e308], "d")):
        with Session(
            pd.DataFrame({"uid": [1, 2], "x": x}),
            max_partitions=1,
            max_rows=1,
            privacy_unit="uid",
            ledger=tmp_path / f"{name}.db",
            budget=PureDP(1.0),
        ) as s:
            with pytest.raises(ValueError, match="must lie within"):
                s.sql("SELECT SUM(x) AS s FROM t", **kwargs)
            assert s.ledger.history() == ()


@pytest.mark.parametrize(("query", "bounds", "max_rows"), [("SELECT AVG(x) AS m FROM t", (-1e308, 1e308), 1),
                                                           ("SELECT SUM(x) AS s FROM t", (0.0, 1e308), 10)],
                         ids=["avg-width", "sum-rows"])
def test_bounds_whose_sensitivity_overflows_are_refused_by_the_plan(shared: Session, query: str,
                                                                    bounds: tuple[float, float], max_rows: int) -> None:
    before = _state(shared)
    with pytest.raises(ValueError, match="bounds|sensitivity"):
        shared.plan(query, epsilon=0.5, bounds={"x": bounds}, max_rows=max_rows)
    assert _state(shared) == before


def test_an_empty_table_is_answered_like_any_other(tmp_path: Path) -> None:
    """Whether a table has rows is a function of the data, so it is not a refusal: an empty table gets
    noisy zeros and is charged exactly like its one-unit neighbour."""
    empty = pd.DataFrame({"uid": pd.Series([], dtype="int64"), "x": pd.Series([], dtype="float64")})
    one = pd.DataFrame({"uid": pd.Series([7], dtype="int64"), "x": pd.Series([1.0], dtype="float64")})
    shapes = []
    for name, table in (("empty", empty), ("one", one)):
        with Session(
            table, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{name}.db", budget=PureDP(1.0)
        ) as s:
            r = s.sql("SELECT COUNT(*) AS n, SUM(x) AS s FROM t", epsilon=0.5, bounds={"x": (0, 1)},
                      rng=insecure_seeded(0))
            assert s.remaining() == PureDP(0.5)
            shapes.append((r.columns, len(r.rows), str(r.guarantee)))
    assert shapes[0] == shapes[1]


def test_a_delta_query_against_a_pure_budget_is_refused(tmp_path: Path) -> None:
    with Session(
        _frame(), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / "l.db", budget=PureDP(1.0)
    ) as s:
        with pytest.raises(UnsupportedError, match="pure epsilon-DP"):
            s.sql("SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=0.5, delta=1e-6)
        assert s.ledger.history() == () and s.remaining() == PureDP(1.0)


def test_privacy_unit_must_be_a_column(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="privacy unit column 'user'"):
        Session(
            _frame(), max_partitions=1, max_rows=1, privacy_unit="user", ledger=tmp_path / "l.db", budget=PureDP(1.0)
        )


def test_exhausted_budget_refuses_before_running(session: Session) -> None:
    """0.25 + 1.5 of 2.0 spent: a 0.5 query is refused, the engine never runs, and every reader agrees."""
    session.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.5, rng=insecure_seeded(3))
    left = session.remaining()
    assert left.epsilon == pytest.approx(0.25)
    assert_refused(session, "SELECT COUNT(*) FROM t", BudgetExceededError, "(?i)budget|exceed")
    with Session(_frame(), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=session.ledger.path) as other:
        assert other.remaining() == left
        with pytest.raises(BudgetExceededError):
            other.sql("SELECT COUNT(*) FROM t", epsilon=0.5)
        other.sql("SELECT COUNT(*) FROM t", epsilon=0.25, rng=insecure_seeded(4))  # exactly what is left still runs
        assert other.remaining().epsilon == pytest.approx(0.0, abs=1e-12)
    assert_refused(session, "SELECT COUNT(*) FROM t", BudgetExceededError, "(?i)budget|exceed", epsilon=1e-3)


def test_grouping_by_the_parenthesised_privacy_unit_is_refused(session: Session) -> None:
    assert_refused(session, "SELECT COUNT(*) AS n FROM t GROUP BY (uid)", UnsupportedError, "privacy unit 'uid'",
                   delta=1e-6)


def test_quantile_buckets_too_many_for_the_sampler_are_refused_by_the_plan(session: Session) -> None:
    """The exponential mechanism's quantile_buckets + 1 candidate edges must total at most 2**30 for the exact
    run sampler (built after the spend, where a failure would be charged though no row caused it), so the plan
    refuses a larger grid and nothing is spent."""
    before = _state(session)
    with pytest.raises(InvalidArgumentError, match="quantile_buckets"):
        session.sql("SELECT MEDIAN(x) AS m FROM t", epsilon=0.5, bounds={"x": (0, 10)}, quantile_buckets=2**30)
    assert _state(session) == before
