"""Correctness before noise: the engine's raw aggregates equal an independent computation.

For small random tables (NULL and NaN values, +-inf, NULL privacy units, units with more rows
than max_rows and more partitions than max_partitions), the main statement and the quantile
histogram statement that ``Session.plan`` compiles are run on DuckDB
(``session._backend.fetch``) and compared with :mod:`query_reference`, which follows the
contract of :mod:`dpkit.query._compile` in plain Python.  Where K (max_partitions) cannot bind the
comparison is exact (rtol 1e-9: the engine adds doubles in another order); where it binds, the
choice of partitions is random per query, so the test checks that *some* choice of at most K
partitions per unit explains every partition's totals at once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.guarantees import ApproxDP
from dpkit.ledger import SQLiteLedger
from dpkit.query import Session
from query_reference import (
    Table,
    assert_histograms_equal,
    assert_some_choice_explains,
    assert_totals_equal,
    engine_answer,
    contributions,
    engine_totals,
    to_arrow,
    totals,
)

NAN, INF = math.nan, math.inf
QUERY = ("SELECT k, COUNT(*) AS n, COUNT(DISTINCT uid) AS u, COUNT(x) AS c, SUM(x) AS s, AVG(x) AS m, "
         "VAR_POP(x) AS v, QUANTILE_CONT(x, 0.3) AS q FROM t{where} GROUP BY k")
PRIMS = ("units", "rows", "values", "sum", "centered_sum", "centered_squares")
BUCKETS = 16


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> SQLiteLedger:
    """One ledger for every session of the module: plans never spend, so it stays untouched."""
    led = SQLiteLedger(tmp_path_factory.mktemp("bounding") / "ledger.db", budget=ApproxDP(epsilon=1.0, delta=1e-6))
    yield led
    assert led.history() == ()  # plan() and fetch() spend nothing
    led.close()


values = st.one_of(st.none(), st.just(NAN), st.just(INF), st.just(-INF),
                   st.floats(-20, 20, allow_nan=False, width=32).map(float), st.integers(-20, 20).map(float))


@st.composite
def tables(draw: st.DrawFn, units: int = 5, max_size: int = 14) -> Table:
    n = draw(st.integers(1, max_size))
    col = lambda s: draw(st.lists(s, min_size=n, max_size=n))  # noqa: E731
    return {"uid": col(st.one_of(st.none(), st.integers(0, units))),
            "k": col(st.sampled_from(["a", "b", "c", None])),
            "x": col(values),
            "y": col(st.one_of(st.none(), st.integers(-2, 3)))}


bounds_st = st.sampled_from([(0.0, 10.0), (-5.0, 5.0), (-3.0, -1.0), (2.5, 7.75)])


EXACT = dict(table=tables(), bounds=bounds_st, max_rows=st.integers(1, 3), public=st.booleans(), where=st.booleans())
CHOICE = dict(table=tables(units=4, max_size=12), bounds=bounds_st, max_rows=st.integers(1, 2),
              max_partitions=st.integers(1, 2), public=st.booleans())


def check_exact(ledger: SQLiteLedger, table: Table, bounds: tuple[float, float], max_rows: int, public: bool,
                where: bool) -> None:
    """K = 4 covers every key ("a", "b", "c", NULL): the totals are exact sums over all units."""
    keys = [("a",), ("c",), (None,), ("zz",)] if public else None
    s = Session(to_arrow(table), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=ledger)
    plan = s.plan(QUERY.format(where=" WHERE y > 0" if where else ""), epsilon=1.0, delta=1e-6,
                  bounds={"x": bounds}, max_partitions=4, max_rows=max_rows, keys=keys, quantile_buckets=BUCKETS)
    main, hist = engine_answer(s, plan)
    want = totals(contributions(table, unit="uid", keys=["k"], value="x", bounds=bounds, max_rows=max_rows,
                                public=keys, where=(lambda r: r["y"] is not None and r["y"] > 0) if where else None,
                                buckets=BUCKETS))
    assert_totals_equal(main, want, PRIMS)
    assert_histograms_equal(hist, want)


def check_choice(ledger: SQLiteLedger, table: Table, bounds: tuple[float, float], max_rows: int,
                 max_partitions: int, public: bool) -> None:
    """K in {1, 2} below the 4 keys: each unit keeps min(K, its partitions), all when it has <= K."""
    keys = [("a",), ("b",), ("c",), (None,)] if public else None
    s = Session(to_arrow(table), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=ledger)
    plan = s.plan(QUERY.format(where=""), epsilon=1.0, delta=1e-6, bounds={"x": bounds},
                  max_partitions=max_partitions, max_rows=max_rows, keys=keys, quantile_buckets=BUCKETS)
    assert plan.compiled.bounded_partitions
    main, hist = engine_answer(s, plan)
    contribs = contributions(table, unit="uid", keys=["k"], value="x", bounds=bounds, max_rows=max_rows,
                             public=keys, buckets=BUCKETS)
    assert_some_choice_explains(main, contribs, max_partitions=max_partitions, primitives=PRIMS, histograms=hist)


@settings(max_examples=60)
@given(**EXACT)
def test_raw_aggregates_match_reference_when_k_cannot_bind(ledger: SQLiteLedger, table: Table,
                                                           bounds: tuple[float, float], max_rows: int,
                                                           public: bool, where: bool) -> None:
    check_exact(ledger, table, bounds, max_rows, public, where)


@settings(max_examples=40)
@given(**CHOICE)
def test_raw_aggregates_explained_by_some_choice_of_k_partitions(ledger: SQLiteLedger, table: Table,
                                                                 bounds: tuple[float, float], max_rows: int,
                                                                 max_partitions: int, public: bool) -> None:
    check_choice(ledger, table, bounds, max_rows, max_partitions, public)


@pytest.mark.slow
def test_raw_aggregates_many_more_examples(ledger: SQLiteLedger) -> None:
    """The two properties above at 15x the examples (about a minute; -m slow)."""
    settings(max_examples=900)(given(**EXACT)(
        lambda table, bounds, max_rows, public, where: check_exact(ledger, table, bounds, max_rows, public, where)))()
    settings(max_examples=600)(given(**CHOICE)(
        lambda table, bounds, max_rows, max_partitions, public: check_choice(ledger, table, bounds, max_rows,
                                                                             max_partitions, public)))()


def test_hand_checked_example(open_session) -> None:  # noqa: ANN001
    """Every policy once, with the expected totals worked out by hand (L = 2, bounds [0, 10]).

    unit 1, key a: rows x = 4, NULL, NaN, +inf -> n = 4, w = 1/2, kept values 4, 10 (inf clamped)
    unit 2, key a: x = -3 -> clamped to 0; n = 1, w = 1
    unit NULL, key a: dropped
    unit 3, key NULL: x = 7
    """
    table = {"uid": [1, 1, 1, 1, 2, None, 3], "k": ["a", "a", "a", "a", "a", "a", None],
             "x": [4.0, None, NAN, INF, -3.0, 5.0, 7.0]}
    s = open_session(to_arrow(table))
    plan = s.plan("SELECT k, COUNT(*) AS n, COUNT(x) AS c, SUM(x) AS s, AVG(x) AS m FROM t GROUP BY k",
                  epsilon=1.0, delta=1e-6, bounds={"x": (0, 10)}, max_partitions=2, max_rows=2)
    got = engine_totals(plan, s._backend.fetch(plan.sql))
    assert got[("a",)]["units"] == 2 and got[(None,)]["units"] == 1
    assert got[("a",)]["rows"] == 2 + 1  # min(4, 2) + min(1, 2)
    assert got[("a",)]["values"] == pytest.approx(0.5 * 2 + 1)
    assert got[("a",)]["sum"] == pytest.approx(0.5 * (4 + 10) + 0)
    assert got[("a",)]["centered_sum"] == pytest.approx(0.5 * ((4 - 5) + (10 - 5)) + (0 - 5))
    assert got[(None,)]["sum"] == pytest.approx(7.0)


@pytest.mark.parametrize("order", ["hash", "md5"])
def test_a_unit_keeps_its_largest_contributions_then_a_random_choice(open_session, order: str) -> None:  # noqa: ANN001
    """K binding keeps each unit's partitions with the largest min(n, L) first, ties broken by the salted
    hash (a fresh random order per query).  Unit 1: 30 rows in key 'big', 4 rows in 'mid' (= L), 1 row in
    each of 'a'..'h'; K = 3, L = 4: 'big' (min(30, 4) = 4) and 'mid' (4) always, one of 'a'..'h' at random."""
    singles = list("abcdefgh")
    table = {"uid": [1] * 30 + [1] * 4 + [1] * len(singles), "k": ["big"] * 30 + ["mid"] * 4 + singles}
    s = open_session(to_arrow(table))
    third = set()
    for _ in range(12):
        plan = s.plan("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, delta=1e-6, max_partitions=3,
                      max_rows=4, partition_order=order)
        got = engine_totals(plan, s._backend.fetch(plan.sql))
        kept = {key[0] for key, v in got.items() if v["units"] > 0}
        assert {"big", "mid"} <= kept and len(kept) == 3
        assert got[("big",)]["rows"] == 4 and got[("mid",)]["rows"] == 4
        third |= kept - {"big", "mid"}
    assert len(third) >= 3  # the single rows' partitions are chosen afresh by each query's salt


def test_pandas_frame_matches_reference(open_session) -> None:  # noqa: ANN001
    """The same through pandas (its NaN reaches DuckDB as NULL; both are dropped, so the totals agree)."""
    import pandas as pd

    rng = np.random.default_rng(7)
    n = 400
    table = {"uid": [int(u) for u in rng.integers(0, 60, n)], "k": [str(c) for c in rng.choice(list("pqrs"), n)],
             "x": [float(v) if v < 8 else (NAN if v < 9 else INF) for v in rng.uniform(-2, 10, n)]}
    s = open_session(pd.DataFrame(table))
    plan = s.plan(QUERY.format(where=""), epsilon=1.0, delta=1e-6, bounds={"x": (0.0, 5.0)}, max_partitions=4,
                  max_rows=3, quantile_buckets=BUCKETS)
    main, hist = engine_answer(s, plan)
    want = totals(contributions(table, unit="uid", keys=["k"], value="x", bounds=(0.0, 5.0), max_rows=3,
                                buckets=BUCKETS))
    assert_totals_equal(main, want, PRIMS)
    assert_histograms_equal(hist, want)


def test_no_group_by_counts_every_unit_once(open_session) -> None:  # noqa: ANN001
    """Without GROUP BY there is one partition and K plays no part; NULL units are still dropped."""
    table = {"uid": [1, 1, 1, 2, None, None], "x": [1.0, 2.0, 3.0, NAN, 4.0, None]}
    s = open_session(to_arrow(table))
    plan = s.plan("SELECT COUNT(*) AS n, SUM(x) AS s FROM t", epsilon=1.0, bounds={"x": (0, 10)}, max_rows=2)
    got = engine_totals(plan, s._backend.fetch(plan.sql))
    want = totals(contributions(table, unit="uid", keys=[], value="x", bounds=(0.0, 10.0), max_rows=2))
    assert_totals_equal(got, want, ("units", "rows", "sum"))
    assert got[()]["rows"] == 3 and got[()]["sum"] == pytest.approx(2.0 / 3.0 * 6.0)


def test_public_keys_as_a_dict_are_the_cross_product(open_session) -> None:  # noqa: ANN001
    table = {"uid": [1, 1, 2, 3, 3, 4], "k1": ["a", "b", "a", "b", "c", "a"], "k2": [1, 2, 2, 1, 1, 9]}
    s = open_session(to_arrow(table))
    keys = {"k1": ["a", "b"], "k2": [1, 2]}
    plan = s.plan("SELECT k1, k2, COUNT(*) AS n FROM t GROUP BY k1, k2", epsilon=1.0, keys=keys,
                  max_partitions=4, max_rows=5)
    public = [(a, b) for a in keys["k1"] for b in keys["k2"]]
    assert sorted(plan.public_keys) == sorted(public)
    got = engine_totals(plan, s._backend.fetch(plan.sql))
    assert_totals_equal(got, totals(contributions(table, unit="uid", keys=["k1", "k2"], max_rows=5, public=public)),
                        ("units", "rows"))


def test_public_key_tuples_drop_other_combinations_before_bounding(open_session) -> None:  # noqa: ANN001
    """keys=[("a", 1), ("b", 2)]: every unit has rows in ("a", 2) and ("b", 2); only ("b", 2) is public.

    The contract drops rows outside the public keys *before* bounding, so with K = 1 each unit's one
    public partition is kept and ("b", 2) counts all 40 units.
    """
    table = {"uid": [u for u in range(40) for _ in range(2)], "k1": ["a", "b"] * 40, "k2": [2, 2] * 40}
    s = open_session(to_arrow(table))
    public = [("a", 1), ("b", 2)]
    plan = s.plan("SELECT k1, k2, COUNT(*) AS n FROM t GROUP BY k1, k2", epsilon=1.0, keys=public, max_partitions=1)
    got = engine_totals(plan, s._backend.fetch(plan.sql))
    assert got.get(("b", 2), {}).get("units") == 40
    assert set(got) <= set(public)


# ---- the DuckDB ranking without a window ------------------------------------------------------------------

def _kept(ranking: str, order: str, rows: list[tuple[int, int]]) -> dict[int, set[int]]:
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE per_pu AS SELECT * FROM (VALUES " + ", ".join(f"({u}, {k}, 1)" for u, k in rows)
                + ") AS v(__u, __k0, __n)")
    sql = f"WITH {ranking} SELECT __u, __k0 FROM kept".replace("__dpkit_partition_order__", order)
    out: dict[int, set[int]] = {}
    for u, k in con.execute(sql).fetchall():
        out.setdefault(u, set()).add(k)
    return out


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 12)), min_size=1, max_size=60, unique=True),
       st.integers(1, 5))
@settings(max_examples=40, deadline=None)
def test_threshold_ranking_keeps_what_the_window_keeps(rows: list[tuple[int, int]], k: int) -> None:
    """Without ties the window-free ranking keeps exactly the window's partitions (the k first by order)."""
    from dpkit.query._compile import threshold_ranking, window_ranking

    order = "hash(__u, __k0, 'salt')"
    assert _kept(threshold_ranking(k), order, rows) == _kept(window_ranking(k), order, rows)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 12)), min_size=1, max_size=60, unique=True),
       st.integers(1, 4))
@settings(max_examples=40, deadline=None)
def test_threshold_ranking_never_keeps_more_than_k_under_ties(rows: list[tuple[int, int]], k: int) -> None:
    """An order with many ties (a forced 'hash collision'): a unit keeps at most k partitions, and all of
    them where it has at most k."""
    from dpkit.query._compile import threshold_ranking

    kept = _kept(threshold_ranking(k), "(__k0 % 3)", rows)
    for u in {u for u, _ in rows}:
        mine = {key for uu, key in rows if uu == u}
        got = kept.get(u, set())
        assert got <= mine and len(got) <= k
        if len(mine) <= k:
            assert got == mine
