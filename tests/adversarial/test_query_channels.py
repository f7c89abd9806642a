"""Attacks on the channels *around* the noise of the query engine (issue 14), on neighbouring tables.

Each test takes a table D holding a target unit and its neighbour D' without it, runs the attack the
audit found on both, and asserts that what the caller observes agrees: exactly, wherever the
observable is deterministic (an error, its type and message, a refusal, a schema, the order of the
released rows, what is spent), so a single run on each table is a complete check.  Released values
themselves are noisy; they are drawn with one seeded generator on both tables where a test needs
them to line up.

Channels: injection through a hand-built QuerySpec (and ``plan()`` reading data), the order of
released rows, failures after the engine, the per-unit value of what the engine returns, aborting a
charged spend from a callback, timings, the inferred schema of CSV files, the budget split; each on
DuckDB, and the deterministic ones again on a local Spark.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from dpkit.errors import InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.query import Aggregate, DataDependentFailure, Key, QuerySpec, Session
from dpkit.random import insecure_seeded

BUDGET = ApproxDP(epsilon=100.0, delta=0.5)
# a refused argument: dpkit raises InvalidArgumentError / ArgumentTypeError (a ValueError / TypeError)
VALUE_ERRORS = ("ValueError", "InvalidArgumentError")
TYPE_ERRORS = ("TypeError", "ArgumentTypeError")


def _outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """What a caller observes of a call that may fail: 'answer', or the exception's type and message."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - every failure is the observable
        return type(e).__name__, str(e)
    return "answer", ""


def _ledger_bytes(s: Session) -> tuple[Any, ...]:
    return tuple((e.label, str(e.guarantee), e.state) for e in s.ledger.history())


@pytest.fixture
def neighbours(tmp_path: Path) -> Iterator[Callable[..., tuple[Session, Session]]]:
    """Factory: two sessions over D (with unit 42) and D' (without), each with its own ledger."""
    opened: list[Session] = []

    def make(d: pd.DataFrame, **kw: Any) -> tuple[Session, Session]:
        d2 = d[d["uid"] != 42].reset_index(drop=True)
        assert len(d2) < len(d), "the target unit 42 must be in D"
        pair = []
        for name, table in (("d", d), ("d2", d2)):
            s = Session(
                table,
                max_partitions=1,
                max_rows=1,
                privacy_unit="uid",
                ledger=tmp_path / f"{name}{len(opened)}.db",
                budget=BUDGET,
                **kw,
            )
            opened.append(s)
            pair.append(s)
        return pair[0], pair[1]

    yield make
    for s in opened:
        s.close()


def _base(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"uid": list(range(n)) + [42], "k": ["a", "b"] * (n // 2) + ["secret"],
                         "x": [float(i % 5) for i in range(n)] + [123456.0]})


# ------------------------------------------------------------------ 1. injection through QuerySpec
INJECTIONS = [
    # the audit's key expression: closes the TRY((...)) wrapper and adds a scalar subquery
    Key("k", "k)), (SELECT x FROM dpkit_source WHERE uid = 42) AS leak, ((k"),
    Key("k", "(SELECT MAX(x) FROM dpkit_source)"),
    Key("k", "k; SELECT * FROM dpkit_source"),
    Key("k", "k FROM dpkit_source; SELECT x"),
    Key("k", "CASE WHEN EXISTS (SELECT 1 FROM dpkit_source WHERE uid = 42) THEN 'y' ELSE 'n' END"),
    Key("k", "k IN (SELECT k FROM dpkit_source)"),
    Key("k", "getvariable('x')"),
    Key("k", "current_setting('threads')"),
    Key("k", "sleep_ms(CAST(x AS BIGINT))"),
    Key("k", "pg_sleep(x)"),
    Key("k", "repeat(k, 1000000000)"),
    Key("k", "random() > 0.5"),
    Key("k", "error(k)"),
    Key("k", "MAX(x)"),
    Key("k", "ROW_NUMBER() OVER ()"),
    Key("k", "uid"),
    Key("k", "(uid)"),
    Key("k", "other.k"),
    Key("k", "main.t.k"),
    Key("k", "read_text('/etc/hostname')"),
    Key("k", ""),
]


@pytest.mark.parametrize("key", INJECTIONS, ids=[f"{i:02d}" for i in range(len(INJECTIONS))])
def test_a_hand_built_spec_is_parsed_and_allow_listed_like_sql(neighbours: Callable, key: Key) -> None:
    """Every expression of a QuerySpec is parsed, allow-listed and re-emitted: the attack is refused on
    both neighbours, with the same message, before anything is spent or read."""
    d, d2 = neighbours(_base())
    spec = QuerySpec(table="t", keys=(key,), aggregates=(Aggregate("count", "n"),), text="attack")
    seen = []
    for s in (d, d2):
        before = _ledger_bytes(s)
        # each call runs within this iteration; s is bound all the same
        for call in (
            lambda s=s: s.plan(spec, epsilon=1.0, delta=1e-6),
            lambda s=s: s.sql(spec, epsilon=1.0, delta=1e-6),
        ):
            kind, message = _outcome(call)
            assert kind in (*VALUE_ERRORS, "UnsupportedError", *TYPE_ERRORS), (kind, message)
            assert "123456" not in message
            seen.append((kind, message))
        assert _ledger_bytes(s) == before == ()
    assert seen[0] == seen[2] and seen[1] == seen[3]


@pytest.mark.parametrize("field", ["aggregate", "where"])
def test_injection_through_aggregate_and_where_is_refused(neighbours: Callable, field: str) -> None:
    d, d2 = neighbours(_base())
    attack = "x)) AS v, (SELECT MAX(x) FROM dpkit_source"
    spec = (QuerySpec(table="t", keys=(), aggregates=(Aggregate("sum", "s", expr=attack),))
            if field == "aggregate" else
            QuerySpec(table="t", keys=(), aggregates=(Aggregate("count", "n"),), where="x > 0)); SELECT (1"))
    outcomes = [_outcome(lambda s=s: s.sql(spec, epsilon=1.0, bounds={"s": (0, 10)})) for s in (d, d2)]
    assert outcomes[0] == outcomes[1] and outcomes[0][0] in (*VALUE_ERRORS, "UnsupportedError")
    assert d.ledger.history() == () == d2.ledger.history()


def test_a_valid_spec_is_re_emitted_not_pasted(neighbours: Callable) -> None:
    d, _ = neighbours(_base())
    spec = QuerySpec(table="t", keys=(Key("kk", "upper(  k )"),),
                     aggregates=(Aggregate("sum", "s", expr="x   *   2", column=None),), where="x>=0")
    plan = d.plan(spec, epsilon=1.0, delta=1e-6, bounds={"s": (0, 10)})
    assert "upper(  k )" not in plan.sql and "UPPER(k)" in plan.sql and "x * 2" in plan.sql


def test_plan_reads_no_row(tmp_path: Path) -> None:
    """The curator's view advances a sequence for every row it produces: plan() of any query (public
    keys, private selection, quantiles, a hand-built spec) leaves it untouched; sql() does read rows."""
    con = duckdb.connect()
    con.execute("CREATE SEQUENCE reads; CREATE TABLE base AS SELECT range % 50 AS uid, "
                "CASE WHEN range % 2 = 0 THEN 'a' ELSE 'b' END AS k, CAST(range % 7 AS DOUBLE) AS x FROM range(500)")
    con.execute("CREATE VIEW v AS SELECT uid, k, x, nextval('reads') AS n FROM base")
    with Session(
        con, table="v", max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / "l.db", budget=BUDGET
    ) as s:
        spec = QuerySpec(table="v", keys=(Key("k", "k"),), aggregates=(Aggregate("count", "c"),))
        for query, kw in [
            ("SELECT k, COUNT(*), SUM(n) FROM v GROUP BY k", {"keys": {"k": ["a", "b"]}, "bounds": {"n": (0, 9)}}),
            (
                "SELECT k, AVG(n), MEDIAN(x) FROM v WHERE n > 1 GROUP BY k",
                {"delta": 1e-6, "bounds": {"n": (0, 9), "x": (0, 9)}},
            ),
            ("SELECT COUNT(DISTINCT uid), SUM(n + x) AS t FROM v", {"bounds": {"t": (0, 9)}}),
            (spec, {"delta": 1e-6}),
        ]:
            s.plan(query, epsilon=1.0, **kw)
        assert con.execute("SELECT nextval('reads')").fetchone()[0] == 1  # nothing else ever asked for one
        s.sql("SELECT SUM(n) FROM v", epsilon=1.0, bounds={"n": (0, 10)})
        assert con.execute("SELECT nextval('reads')").fetchone()[0] > 2
    con.close()


# ------------------------------------------------------------------ 2. order of released rows
def test_released_row_order_does_not_depend_on_an_unreleased_partition(neighbours: Callable) -> None:
    """The target alone has a NaN key (never released: one unit is far below the threshold); the
    released float keys come out in the same total order on both tables, for every draw."""
    keys = [0.5, -0.0, 2.5, 1e300, -3.0, float("inf"), float("-inf")]
    rows = [(u, keys[u % len(keys)]) for u in range(7 * 60)] + [(42, float("nan"))]
    d = pd.DataFrame({"uid": [r[0] for r in rows], "f": [r[1] for r in rows]})
    d = d[~((d["uid"] == 42) & ~d["f"].isna())]  # unit 42 has only its NaN row
    s_d, s_d2 = neighbours(d)
    expected = sorted(keys)  # the total order: -inf < -3 < -0.0 < 0.5 < 2.5 < 1e300 < inf
    for seed in range(8):
        orders = []
        for s in (s_d, s_d2):
            r = s.sql("SELECT f, COUNT(*) AS n FROM t GROUP BY f", epsilon=4.0, delta=1e-6, rng=insecure_seeded(seed))
            orders.append([row[0] for row in r.rows])
        assert orders[0] == orders[1] == expected


def test_the_release_order_is_a_strict_total_order_of_the_keys() -> None:
    """The engine hands groups back in an order that depends on every row, the unreleased ones too.  Sorting
    them by a key that is not a strict total order (NaN compares false both ways; -0.0 == 0.0) leaves that
    order visible; dpkit's release order must be the same from every engine order, in one column and in
    two, NULLs and NaNs included."""
    import random

    import pyarrow as pa

    from dpkit.query._keys import release_order  # the one function that decides the order (no public view of it)

    nan = float("nan")
    groups = [(0.5, "b"), (-0.0, "a"), (0.0, "a"), (2.5, None), (nan, "c"), (float("-inf"), "a"), (None, "z"),
              (1e300, ""), (-3.0, "é"), (None, None), (2.5, "b")]
    rng = random.Random(0)
    orders = set()
    for _ in range(500):  # engine orders: random permutations of all groups
        perm = groups[:]
        rng.shuffle(perm)
        cols = [pa.array([g[0] for g in perm], pa.float64()), pa.array([g[1] for g in perm], pa.string())]
        order = release_order(cols)
        orders.add(tuple(repr(perm[i]) for i in order))
        single = release_order(cols[:1])
        assert len({repr(perm[i][0]) for i in single}) == len({repr(g[0]) for g in groups})
    assert len(orders) == 1
    (first, *_) = orders
    assert first[:2] == (repr((None, None)), repr((None, "z")))  # NULL first


# ------------------------------------------------------------------ 3. totality after the engine
ODD_KEYS = [
    ("list", "list_value(x)", "non-scalar"),
    ("struct", "{'a': x}", None),
    ("map", "map([x], [x])", None),
    ("split", "string_split(k, ',')", "non-scalar"),
]


@pytest.mark.parametrize(("label", "expr", "match"), ODD_KEYS, ids=[c[0] for c in ODD_KEYS])
def test_a_non_scalar_key_is_refused_from_the_schema(neighbours: Callable, label: str, expr: str,
                                                     match: str | None) -> None:
    """The audit's list-valued key raised TypeError after the spend on D only.  Now the key's type (from
    the schema alone) is refused on both tables, identically, before anything is spent."""
    d, d2 = neighbours(_base())
    query = f"SELECT {expr} AS g, COUNT(*) AS n FROM t GROUP BY g"
    outcomes = [_outcome(lambda s=s: s.sql(query, epsilon=1.0, delta=1e-6)) for s in (d, d2)]
    assert outcomes[0] == outcomes[1] and outcomes[0][0] in ("UnsupportedError", *VALUE_ERRORS), outcomes
    if match:
        assert match in outcomes[0][1]
    assert d.ledger.history() == () == d2.ledger.history()


ODD_VALUES = {  # (column values of the 40 ordinary units, the target's value)
    "nan": (1.5, float("nan")), "inf": (1.5, float("inf")), "-inf": (1.5, float("-inf")), "negzero": (0.0, -0.0),
    "huge": (1.5, 1.7e308), "null": (1.5, None), "tiny": (1.5, 5e-324),
}


@pytest.mark.parametrize("case", sorted(ODD_VALUES))
def test_every_value_the_engine_can_return_is_answered_on_both_tables(neighbours: Callable, case: str) -> None:
    ordinary, odd = ODD_VALUES[case]
    d = pd.DataFrame({"uid": list(range(40)) + [42], "v": [ordinary] * 40 + [odd], "k": ["a"] * 41})
    s_d, s_d2 = neighbours(d)
    queries = [("SELECT v, COUNT(*) AS n FROM t GROUP BY v", {"delta": 1e-6}),
               ("SELECT k, SUM(v) AS s, AVG(v) AS m, VAR_POP(v) AS w, MEDIAN(v) AS q FROM t GROUP BY k",
                {"keys": {"k": ["a"]}, "bounds": {"v": (-1, 2)}}),
               ("SELECT CAST(v AS HUGEINT) * 1000000000000 AS h, COUNT(*) AS n FROM t GROUP BY h", {"delta": 1e-6}),
               ("SELECT COUNT(v) AS c, SUM(v * 1e300) AS s FROM t", {"bounds": {"s": (-1e10, 1e10)}})]
    for query, kw in queries:
        outcomes = [
            _outcome(lambda s=s, query=query, kw=kw: s.sql(query, epsilon=1.0, rng=insecure_seeded(3), **kw))
            for s in (s_d, s_d2)
        ]
        assert outcomes == [("answer", "")] * 2, (query, outcomes)


def test_an_exception_carries_no_trace_of_the_data(tmp_path: Path) -> None:
    """A genuinely data-dependent engine failure (the curator's view fails on the target's row) is charged
    on D, answered on D'; what is said of it is a fixed text, with no engine exception as context."""
    outcomes = []
    for name, target in (("d", True), ("d2", False)):
        con = duckdb.connect()
        con.execute(f"CREATE TABLE base AS SELECT range AS uid, range % 5 AS x FROM range({43 if target else 42})")
        con.execute("CREATE VIEW v AS SELECT uid, CASE WHEN uid = 42 THEN error('uid 42 has x = ' || x) ELSE x END "
                    "AS x FROM base")
        with Session(
            con,
            table="v",
            max_partitions=1,
            max_rows=1,
            privacy_unit="uid",
            ledger=tmp_path / f"{name}.db",
            budget=PureDP(1.0),
        ) as s:
            try:
                s.sql("SELECT SUM(x) AS s FROM v", epsilon=0.5, bounds={"x": (0, 5)})
                outcomes.append(("answer", None))
            except DataDependentFailure as e:
                assert e.__context__ is None and e.__cause__ is None and "42" not in str(e)
                assert "Exception" not in str(e) and "Error" not in str(e).replace("DataDependentFailure", "")
                outcomes.append(("failure", str(e)))
            assert s.remaining() == PureDP(0.5)  # charged either way
        con.close()
    # the curator's own view leaks; dpkit says no more
    assert outcomes[0][0] == "failure" and outcomes[1][0] == "answer"


# ------------------------------------------------------------------ 5. a charged spend cannot be handed back
def test_a_progress_callback_cannot_abort_the_spend(neighbours: Callable) -> None:
    """The audit's free membership oracle: a callback that aborts every uncommitted reservation after the
    engine ran.  The spend is committed before the engine starts, so there is nothing to abort, the budget
    is charged on both tables, and an exception in the callback is not a way out either."""
    d, d2 = neighbours(_base())
    for s in (d, d2):
        aborted: list[int] = []

        def attack(message: str, s: Session = s, aborted: list[int] = aborted) -> None:
            for entry in s.ledger.reserved_but_uncommitted():
                s.ledger.abort(entry)
                aborted.append(entry.id)
            if message.startswith("adding noise"):
                raise RuntimeError("stop here")

        before = s.remaining()
        kind, _ = _outcome(lambda s=s, attack=attack: s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0,
                                                            delta=1e-6, progress=attack))
        assert kind == "RuntimeError" and aborted == []
        assert float(s.remaining().epsilon) == pytest.approx(float(before.epsilon) - 1.0)
        (entry,) = s.ledger.history()
        assert entry.state == "committed"
        with pytest.raises(Exception, match="committed"):
            s.ledger.abort(entry)
        assert s.ledger.history()[0].state == "committed"


# ------------------------------------------------------------------ 6. timing
def test_results_carry_no_timings_unless_asked(neighbours: Callable) -> None:
    d, _ = neighbours(_base())
    r = d.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.0)
    assert dict(r.timings) == {}
    r = d.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.0, debug_timings=True)
    assert "NOT private" in r.timings["note"] and r.timings["engine_s"] >= 0


# ------------------------------------------------------------------ 7. the schema of a CSV file
def _csv(path: Path, odd: str | None) -> Path:
    lines = ["uid,amount,k"] + [f"{u},{u % 10},{'ab'[u % 2]}" for u in range(40)]
    if odd is not None:
        lines.append(f"42,{odd},a")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("odd", ["12.5", "n/a", "1e400", '"5"', ""])
def test_one_units_value_does_not_change_a_csv_schema(tmp_path: Path, odd: str) -> None:
    d, d2 = _csv(tmp_path / "d.csv", odd), _csv(tmp_path / "d2.csv", None)
    # without a declared schema both are refused, with a message that names no value
    refused = [
        _outcome(
            lambda p=p: Session(
                p, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / "x.db", budget=BUDGET
            )
        )
        for p in (d, d2)
    ]
    assert refused[0][0] == refused[1][0] and refused[0][0] in VALUE_ERRORS and "schema" in refused[0][1]
    assert refused[0][1].replace(str(d), "PATH") == refused[1][1].replace(str(d2), "PATH")
    schemas, outcomes = [], []
    for name, p in (("d", d), ("d2", d2)):
        with Session(p, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{name}.db", budget=BUDGET,
                     schema={"uid": "BIGINT", "amount": "BIGINT"}) as s:
            schemas.append(s.schema)
            outcomes.append(_outcome(lambda s=s: s.sql("SELECT k, SUM(amount) AS s FROM t GROUP BY k", epsilon=1.0,
                                                       bounds={"amount": (0, 10)}, keys={"k": ["a", "b"]})))
    assert schemas[0] == schemas[1] == {"uid": "BIGINT", "amount": "BIGINT", "k": "VARCHAR"}
    assert outcomes == [("answer", "")] * 2


# ------------------------------------------------------------------ minor: the budget split
def test_a_split_summing_slightly_above_one_never_spends_more_than_epsilon(neighbours: Callable) -> None:
    d, _ = neighbours(_base())
    plan = d.plan("SELECT COUNT(*) AS n, SUM(x) AS s FROM t", epsilon=1.0, bounds={"x": (0, 10)},
                  split={"n": 0.5 + 4.9e-10, "s": 0.45, "bounding_report": 0.05})
    assert math.fsum(m.epsilon for m in plan.split.measurements) <= 1.0


# ------------------------------------------------------------------ data-independent failures cost nothing
TYPOS = ["SELECT COUNT(*) FROM t WHERE fooo(x) > 1", "SELECT lowr(k) AS g, COUNT(*) FROM t GROUP BY g",
         "SELECT COUNT(*) FROM t WHERE regexp_matches(k, '(')", "SELECT SUM(x + k) FROM t",
         "SELECT COUNT(*) FROM t WHERE date_trunc('fortnight', CAST(x AS DATE)) IS NULL",
         # constants that fail: DuckDB evaluates them only when a row reaches them (under TRY, NULL on every
         # row: a silently empty answer, charged), so the plan runs once on a row of NULLs first
         "SELECT COUNT(*) FROM t WHERE make_date(2020, 13, 1) IS NULL OR x > 1",
         "SELECT COUNT(*) FROM t WHERE CAST(x AS INTEGER) + INTERVAL 'x' DAY IS NULL",
         "SELECT k, SUM(x) FROM t WHERE to_timestamp(1e20) IS NOT NULL GROUP BY k",
         # a constant CAST that cannot convert: compiled as TRY_CAST (NULL on a row), so the check runs it strict
         "SELECT COUNT(*) FROM t WHERE x > CAST('x' AS DOUBLE)",
         "SELECT COUNT(*) FROM t WHERE x > TRY_CAST('x' AS DOUBLE) + 1",
         "SELECT COUNT(*) AS n FROM (SELECT uid, SUM(CAST('y' AS DOUBLE)) AS v FROM t GROUP BY uid) WHERE v > 1"]


@pytest.mark.parametrize("query", TYPOS)
def test_a_typo_is_refused_before_anything_is_spent(neighbours: Callable, query: str) -> None:
    """Errors the schema alone determines are raised by binding the plan (nothing runs), on both tables
    alike, and the ledger stays exactly as it was."""
    d, d2 = neighbours(_base())
    outcomes = [_outcome(lambda s=s: s.sql(query, epsilon=1.0, delta=1e-6, bounds={"x": (0, 10)})) for s in (d, d2)]
    assert outcomes[0] == outcomes[1] and outcomes[0][0] in (*VALUE_ERRORS, "UnsupportedError"), outcomes
    assert "\n" not in outcomes[0][1]  # a one-line refusal
    assert d.ledger.history() == () == d2.ledger.history()


def test_a_cast_that_fails_only_on_some_rows_is_answered_not_refused(neighbours: Callable) -> None:
    """The check makes the user's casts strict, but it runs them on a table and a row built from the schema
    (NULLs but the unit), so a cast whose failure depends on the rows is still answered (NULL where a value
    does not convert), and identically refused or answered on both neighbours."""
    base = _base()
    base["s"] = ["1.5", "x"] * 20 + ["oops"]
    d, d2 = neighbours(base)
    for query in ("SELECT COUNT(*) AS n FROM t WHERE CAST(s AS DOUBLE) > 1",
                  "SELECT COUNT(*) AS n FROM (SELECT uid, SUM(CAST(s AS DOUBLE)) AS v FROM t GROUP BY uid) WHERE v > 1",
                  "SELECT CAST(s AS DOUBLE) AS g, COUNT(*) AS n FROM t GROUP BY g"):
        kw: dict[str, Any] = {"keys": {"g": [1.5, None]}} if "GROUP BY g" in query else {}
        for s in (d, d2):
            r = s.sql(query, epsilon=1.0, **kw)
            assert len(r.rows) >= 1


# ------------------------------------------------------------------ the same channels on Spark
@pytest.fixture(scope="module")
def spark() -> Any:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 on the PATH")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("dpkit-adversarial").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "1")
         .config("spark.sql.adaptive.enabled", "false").config("spark.sql.codegen.wholeStage", "false")
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1").getOrCreate())
    yield s
    s.stop()


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # py4j sockets collected late (tests/query/conftest.py)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_constants_that_fail_cost_nothing(spark: Any, tmp_path: Path) -> None:
    """Spark runs the plan with ANSI mode off, where CAST('x' AS DOUBLE) or make_date(2020, 13, 1) is NULL on
    every row (a silently empty answer, charged): the check evaluates every part that reads no column once
    with ANSI mode on, before anything is reserved.  A cast whose failure depends on the rows is answered."""
    d = pd.DataFrame({"uid": list(range(40)), "x": [float(i % 5) for i in range(40)], "s": ["1.5", "x"] * 20})
    with Session(spark.createDataFrame(d), max_partitions=1, max_rows=1, privacy_unit="uid",
                 ledger=tmp_path / "s.db", budget=BUDGET) as s:
        for query in ("SELECT COUNT(*) FROM t WHERE x > CAST('x' AS DOUBLE)",
                      "SELECT COUNT(*) FROM t WHERE make_date(2020, 13, 1) IS NULL OR x > 1",
                      "SELECT COUNT(*) AS n FROM (SELECT uid, SUM(CAST('y' AS DOUBLE)) AS v FROM t GROUP BY uid) "
                      "WHERE v > 1"):
            with pytest.raises(InvalidArgumentError, match="Nothing was spent") as refused:
                s.sql(query, epsilon=1.0)
            assert "\n" not in str(refused.value)  # one line: no excerpt of the compiled plan, no JVM frames
        assert s.ledger.history() == ()
        r = s.sql("SELECT COUNT(*) AS n FROM t WHERE CAST(s AS DOUBLE) > 1 AND x > 1 + 2", epsilon=1.0)
        assert len(r.rows) == 1 and len(s.ledger.history()) == 1


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # py4j sockets collected late (tests/query/conftest.py)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_spark_channels(spark: Any, tmp_path: Path) -> None:
    """On Spark: a hand-built spec's injection is refused, a non-scalar key is refused from the schema,
    released rows come out in the keys' total order whatever the unreleased partitions, a CSV's schema
    is the declared one, and a typo costs nothing -- each identically on both neighbours."""
    keys = [0.5, -3.0, 2.5]
    rows = [(u, keys[u % 3]) for u in range(300)]
    d = pd.DataFrame({"uid": [r[0] for r in rows] + [42], "f": [r[1] for r in rows] + [float("nan")]})
    d2 = d[d["uid"] != 42]
    attack = QuerySpec(table="t", keys=(Key("f", "f)), (SELECT MAX(f) FROM t) AS leak, ((f"),),
                       aggregates=(Aggregate("count", "n"),))
    seen = []
    for i, table in enumerate((d, d2)):
        with Session(
            spark.createDataFrame(table),
            max_partitions=1,
            max_rows=1,
            privacy_unit="uid",
            ledger=tmp_path / f"s{i}.db",
            budget=BUDGET,
        ) as s:
            assert s.engine == "spark"
            injection = _outcome(lambda: s.sql(attack, epsilon=1.0, delta=1e-6))
            odd_key = _outcome(lambda: s.sql("SELECT array(f) AS g, COUNT(*) FROM t GROUP BY g", epsilon=1.0,
                                             delta=1e-6))
            typo = _outcome(lambda: s.sql("SELECT COUNT(*) FROM t WHERE fooo(f) > 1", epsilon=1.0))
            assert s.ledger.history() == ()
            r = s.sql("SELECT f, COUNT(*) AS n FROM t GROUP BY f", epsilon=4.0, delta=1e-6, rng=insecure_seeded(0))
            seen.append((injection, odd_key[0], typo[0], [row[0] for row in r.rows], dict(r.timings)))
    assert seen[0] == seen[1]
    assert seen[0][0][0] in (*VALUE_ERRORS, "UnsupportedError") and seen[0][1] in (*VALUE_ERRORS, "UnsupportedError")
    assert seen[0][2] in (*VALUE_ERRORS, "UnsupportedError") and seen[0][3] == sorted(keys) and seen[0][4] == {}
    path = _csv(tmp_path / "d.csv", "12.5")
    with pytest.raises(ValueError, match="schema"):
        Session(
            path,
            max_partitions=1,
            max_rows=1,
            privacy_unit="uid",
            ledger=tmp_path / "c.db",
            budget=BUDGET,
            engine="spark",
            spark=spark,
        )
    with Session(
        path,
        max_partitions=1,
        max_rows=1,
        privacy_unit="uid",
        ledger=tmp_path / "c.db",
        budget=BUDGET,
        engine="spark",
        spark=spark,
        schema={"uid": "BIGINT", "amount": "BIGINT"},
    ) as s:
        assert s.schema == {"uid": "bigint", "amount": "bigint", "k": "string"}
        r = s.sql("SELECT k, SUM(amount) AS s FROM t GROUP BY k", epsilon=1.0, bounds={"amount": (0, 10)},
                  keys={"k": ["a", "b"]})
        assert [row[0] for row in r.rows] == ["a", "b"]


def test_the_refusal_messages_are_the_ones_a_user_can_act_on(neighbours: Callable) -> None:
    d, _ = neighbours(_base())
    with pytest.raises(UnsupportedError, match="non-deterministic"):
        d.plan("SELECT COUNT(*) FROM t WHERE random() > 0.5", epsilon=1.0)
    with pytest.raises(UnsupportedError, match="output size"):
        d.plan("SELECT repeat(k, 3) AS g, COUNT(*) FROM t GROUP BY g", epsilon=1.0, delta=1e-6)
    with pytest.raises(UnsupportedError, match="subquery"):
        d.plan(QuerySpec(table="t", keys=(), aggregates=(Aggregate("count", "n"),), where="x IN (SELECT 1)"),
               epsilon=1.0)
