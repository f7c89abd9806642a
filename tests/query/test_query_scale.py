"""The query engine's scale rewrites (issue 16) keep exactly what the plain formulations keep.

* The DuckDB ranking without a window (:func:`dpkit.query._compile.threshold_ranking`) keeps the same
  (unit, partition) rows as the window formulation (:func:`~dpkit.query._compile.window_ranking`,
  what every engine ran before and Spark runs) on a random table of a few thousand units, both SQL forms
  run by DuckDB; under forced ties it keeps what the earlier two-pass threshold form kept, and with or
  without ties what the one-pass list form it replaced kept (both reproduced here verbatim as the
  references); and a neighbouring table (one unit's rows removed or changed) changes
  only that unit's kept rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpkit.query._compile import threshold_ranking, window_ranking

ORDER = "__dpkit_partition_order__"


def _two_pass_threshold(k: int) -> str:
    """The earlier DuckDB form (before issue 16): a per-unit count joined back, then the k+1 smallest."""
    return (f"ranked AS (SELECT *, {ORDER} AS __ord FROM per_pu), "
            f"__np AS (SELECT __u, COUNT(*) AS __c FROM per_pu GROUP BY __u), "
            f"__j AS (SELECT ranked.*, __np.__c FROM ranked JOIN __np ON ranked.__u = __np.__u), "
            f"__thr AS (SELECT __u, min(__ord, {k + 1}) AS __l FROM __j WHERE __c > {k} GROUP BY __u), "
            f"kept AS (SELECT * FROM __j WHERE __c <= {k} UNION ALL SELECT __j.* FROM __j JOIN __thr "
            f"ON __j.__u = __thr.__u WHERE __j.__ord < __thr.__l[{k}] "
            f"OR (__j.__ord = __thr.__l[{k}] AND __thr.__l[{k + 1}] > __thr.__l[{k}]))")


def _list_threshold(k: int) -> str:
    """The one-pass form before the window threshold: a per-unit ``list_sort(list(order))[k + 1]`` joined back."""
    return (f"ranked AS (SELECT *, {ORDER} AS __ord FROM per_pu), "
            f"__thr AS (SELECT __u, CASE WHEN COUNT(*) > {k} THEN list_sort(list(__ord))[{k + 1}] END AS __t "
            f"FROM ranked GROUP BY __u), "
            f"kept AS (SELECT ranked.* FROM ranked JOIN __thr ON ranked.__u = __thr.__u "
            f"WHERE __thr.__t IS NULL OR ranked.__ord < __thr.__t)")


def _table(seed: int, units: int = 3000, keys: int = 400) -> list[tuple[int, int, int]]:
    """(unit, key, n) rows, one per (unit, partition): partition counts from 1 to 40 per unit."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(units):
        c = int(rng.integers(1, min(40, keys) + 1))
        for key in rng.choice(keys, size=c, replace=False).tolist():
            rows.append((u, int(key), int(rng.integers(1, 9))))
    return rows


def _kept(ranking: str, order: str, rows: list[tuple[int, int, int]]) -> set[tuple[int, int, int]]:
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    try:
        u, k, n = (list(c) for c in zip(*rows))
        con.register("per_pu_src", pa.table({"__u": u, "__k0": k, "__n": n}))
        con.execute("CREATE TABLE per_pu AS SELECT * FROM per_pu_src")
        sql = f"WITH {ranking} SELECT __u, __k0, __n FROM kept".replace(ORDER, order)
        return {(int(r[0]), int(r[1]), int(r[2])) for r in con.execute(sql).fetchall()}
    finally:
        con.close()


@pytest.mark.parametrize("k", [1, 3, 10, 39])
@pytest.mark.parametrize("order", ["hash(__u, __k0, 'a1b2c3')", "md5(concat_ws('|', CAST(__u AS VARCHAR), "
                                   "CAST(__k0 AS VARCHAR), 'a1b2c3'))"])
def test_one_pass_ranking_keeps_the_windows_rows(k: int, order: str) -> None:
    rows = _table(seed=k)
    want = _kept(window_ranking(k), order, rows)
    got = _kept(threshold_ranking(k), order, rows)
    assert got == want
    per_unit: dict[int, int] = {}
    for u, _, _ in got:
        per_unit[u] = per_unit.get(u, 0) + 1
    assert max(per_unit.values()) <= k and len(per_unit) == len({r[0] for r in rows})


@pytest.mark.parametrize("k", [1, 2, 5])
def test_one_pass_ranking_under_ties_keeps_what_the_two_pass_form_kept(k: int) -> None:
    """An order with many ties (forced collisions): the same rows as the earlier form, at most k a unit."""
    rows = _table(seed=100 + k, units=500, keys=30)
    order = "(__k0 % 4)"
    got = _kept(threshold_ranking(k), order, rows)
    assert got == _kept(_two_pass_threshold(k), order, rows)
    for u in {r[0] for r in rows}:
        mine = {r for r in rows if r[0] == u}
        kept = {r for r in got if r[0] == u}
        assert kept <= mine and len(kept) <= k
        if len(mine) <= k:
            assert kept == mine


def test_a_neighbouring_table_changes_only_that_units_kept_rows() -> None:
    rows = _table(seed=7, units=800)
    order, k = "hash(__u, __k0, 'salt')", 4
    base = _kept(threshold_ranking(k), order, rows)
    for victim in (0, 17, 799):
        for neighbour in ([r for r in rows if r[0] != victim],  # the unit removed
                          [r for r in rows if r[0] != victim] + [(victim, key, 1) for key in range(1000, 1030)]):
            got = _kept(threshold_ranking(k), order, neighbour)
            assert {r for r in got if r[0] != victim} == {r for r in base if r[0] != victim}


@pytest.mark.parametrize("k", [1, 3, 39])
@pytest.mark.parametrize("order", ["hash(__u, __k0, 'a1b2c3')", "(__k0 % 4)", "(__u % 2)"])
def test_window_threshold_keeps_what_the_list_threshold_kept(k: int, order: str) -> None:
    """The window threshold (issue 16, for speed at 10^8 rows) keeps exactly the rows of the list form it
    replaced, with distinct order values and under many ties (every unit's values tied, or a few)."""
    rows = _table(seed=200 + k, units=1500, keys=60)
    assert _kept(threshold_ranking(k), order, rows) == _kept(_list_threshold(k), order, rows)


# ---- public keys matched with '=' where none is NULL (issue 16) -----------------------------------------------

@pytest.mark.parametrize("public", [["a", "b"], ["a", None], [None]])
def test_public_keys_match_null_only_where_a_key_is_null(open_session: Any, public: list[Any]) -> None:
    """A key column of the public keys without NULL is joined with ``=`` (the plain hash join), one with a NULL
    with ``IS NOT DISTINCT FROM``: either way the data's NULL key is counted exactly where NULL is a public key,
    and otherwise never takes one of a unit's ``max_partitions`` (the reference drops it before bounding)."""
    from query_reference import assert_totals_equal, contributions, engine_totals, to_arrow, totals

    table: dict[str, list[Any]] = {"uid": [1, 1, 1, 2, 2, 3, 4, 4], "k": [None, "a", "b", None, None, "b", "a", None]}
    s = open_session(to_arrow(table))
    plan = s.plan("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, keys={"k": public},
                  max_partitions=5, max_rows=5)
    sql = plan.sql
    if None in public:
        assert "IS NOT DISTINCT FROM __pk.c0" in sql
    else:
        assert "IS NOT DISTINCT FROM __pk" not in sql and "= __pk.c0" in sql
    got = engine_totals(plan, s._backend.fetch(sql))
    want = totals(contributions(table, unit="uid", keys=["k"], max_rows=5, public=[(k,) for k in public]))
    assert_totals_equal(got, want, ("units", "rows"))
    assert len(s._backend.fetch(sql)) == len(public)  # one row per public key, zeros included


# ---- the release order confirmed in O(n) when the engine sorted integer keys (issue 16) ---------------------

@pytest.mark.parametrize("seed", range(6))
def test_release_order_of_sorted_integer_keys_is_the_full_sorts(seed: int) -> None:
    """Integer key columns already strictly increasing with NULL first (the engine's ORDER BY .. NULLS FIRST) keep
    their order, which is what the full sort gives; any other input (out of order, a tie) is sorted in full."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dpkit.query._keys import release_order

    rng = np.random.default_rng(seed)
    n = 500
    a = np.sort(rng.integers(-3, 4, n))
    b = rng.integers(-(2**40), 2**40, n)
    sorted_pairs = sorted(set(zip(a.tolist(), b.tolist())))
    cases = [[pa.array([p[0] for p in sorted_pairs]), pa.array([p[1] for p in sorted_pairs])],
             [pa.array(np.unique(b))], [pa.array(np.unique(b).astype(np.uint64) if seed % 2 else np.unique(b))],
             [pa.array(rng.permutation(np.unique(b)))],  # out of order
             [pa.array(a), pa.array(b)],  # ties in the first column, the second unsorted
             [pa.array([None, *np.unique(b).tolist()], pa.int64())],  # a NULL first (in order)
             [pa.array([*np.unique(b).tolist(), None], pa.int64())],  # a NULL last (out of order)
             [pa.array([None, None, 1, 1], pa.int64()), pa.array([None, 2, None, 0], pa.int64())],  # in order
             [pa.array([None, None, 1, 1], pa.int64()), pa.array([2, None, None, 0], pa.int64())]]  # out of order
    for cols in cases:
        table = pa.table({f"c{i}": c for i, c in enumerate(cols)})
        want = pc.sort_indices(table, sort_keys=[(f"c{i}", "ascending", "at_start")
                                                 for i in range(len(cols))]).to_numpy()
        assert release_order(cols).tolist() == want.tolist()


def test_selection_on_integer_keys_asks_the_engine_for_the_release_order(open_session: Any) -> None:
    from query_reference import to_arrow

    from dpkit.query._keys import _already_in_order

    s = open_session(to_arrow({"uid": [1, 2, 3, 4, 5, 6], "k": [3, 1, 2, 1, None, 2], "j": [1, None, 0, 1, 2, None],
                               "t": ["c", "a", "b", "a", "d", "b"]}))
    on_int = s.plan("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, delta=1e-6, max_partitions=1,
                    max_rows=1)
    assert on_int.sql.rstrip().endswith("ORDER BY __k0 NULLS FIRST")
    two = s.plan("SELECT k, j, COUNT(*) AS n FROM t GROUP BY k, j", epsilon=1.0, delta=1e-6, max_partitions=1,
                 max_rows=1)
    for plan in (on_int, two):  # the engine's order is the release order, NULL keys included: confirmed, not sorted
        raw = s._backend.fetch_arrow(plan.sql)
        assert _already_in_order([raw.column(i) for i in range(plan.compiled.key_count)])
    on_text = s.plan("SELECT t, COUNT(*) AS n FROM t GROUP BY t", epsilon=1.0, delta=1e-6, max_partitions=1,
                     max_rows=1)
    assert "NULLS FIRST" not in on_text.sql
    with_keys = s.plan("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, keys={"k": [1, 2]},
                       max_partitions=1, max_rows=1)
    assert "NULLS FIRST" not in with_keys.sql
