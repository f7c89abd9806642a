"""The vectorised result path (issue 16) gives what the row-by-row path gave.

* quantiles: the histograms built as arrays (matched to the released partitions by Arrow codes) give the
  same releases, under the same seeded generator, as a row-by-row reference (a dict of histograms keyed by
  ``_sort_key``, the code this replaced), on keys with NULL, NaN, -0.0 and 0.0, several key columns, and
  key types matched in Python (DECIMAL, TIMESTAMP);
* histogram rows matched to partitions exactly as ``_sort_key`` equality does;
* post-processing sees each key column with the type it always saw (that of ``pa.array`` of its values);
* the post-processing path (a HAVING that keeps every row) and the plain path give the same rows,
  intervals and Python types under the same seed;
* nesting read from Arrow types.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from dpkit.query import Session
from dpkit.query._post import _key_column, _nested
from dpkit.query._result import (_distinct_values, _partition_index, _partition_index_python, _quantiles, _sort_key,
                                  finish_aggregates)
from dpkit.random import insecure_seeded


def _reference_utilities(plan: Any, m: Any, partitions: list[tuple[Any, ...]],
                         hists: dict[int, Any]) -> list[np.ndarray]:
    """The row-by-row code the vectorised ``_quantiles`` replaced (a dict of dense histograms keyed by
    ``_sort_key``): each partition's full utility vector over the grid's edges (MIN/MAX: buckets)."""
    v = plan.values[m.aggregate]
    b, nk = plan.compiled.buckets, plan.compiled.key_count
    table: dict[tuple[Any, ...], np.ndarray] = {}
    for row in hists[v.index]:
        h = table.setdefault(_sort_key(tuple(row[:nk])), np.zeros(b))
        h[int(row[nk])] += float(row[nk + 1])
    out = []
    for key in partitions:
        h = table.get(_sort_key(key), np.zeros(b))
        below = np.concatenate([[0.0], np.cumsum(h)])
        if m.extreme == "min":
            out.append(-below[:-1] - (h <= 0.0))
        elif m.extreme == "max":
            out.append(-(below[-1] - below[1:]) - (h <= 0.0))
        else:
            out.append(-np.abs(below - m.q * below[-1]))
    return out


def _table(con: duckdb.DuckDBPyConnection) -> None:
    rng = np.random.default_rng(3)
    n = 3000
    f = rng.choice(np.array([-0.0, 0.0, np.nan, 1.5, 2.5, np.inf]), n)
    con.execute("CREATE TABLE t (uid BIGINT, f DOUBLE, s VARCHAR, d DECIMAL(6, 2), ts TIMESTAMP, x DOUBLE)")
    rows = []
    for i in range(n):
        rows.append((int(rng.integers(0, 400)), None if i % 97 == 0 else float(f[i]),
                     None if i % 89 == 0 else str(rng.choice(["a", "b", "c"])),
                     Decimal(str(rng.choice(["1.50", "2.25", "3.00"]))),
                     datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=int(rng.integers(0, 4))),
                     float(rng.uniform(0, 100))))
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", rows)



@pytest.fixture
def session(tmp_path: Any) -> Any:
    con = duckdb.connect()
    _table(con)
    from dpkit.guarantees import ApproxDP

    s = Session(con, table="t", privacy_unit="uid", ledger=tmp_path / "l.db", budget=ApproxDP(epsilon=1e6, delta=0.5),
                max_partitions=4, max_rows=3)
    yield s
    s.close()


@pytest.mark.parametrize("keys", ["f", "f, s", "s, d", "ts", "d, f"])
def test_quantiles_match_the_row_by_row_reference(session: Any, keys: str, monkeypatch: Any) -> None:
    """Each released partition's exponential mechanism sees, as runs of equal utility, exactly the dense utility
    vector of the row-by-row reference (``np.repeat(utilities, lengths)`` equal bit for bit), so its law is the
    reference's; and its value is the grid edge of the index drawn."""
    from dpkit.mechanisms import Exponential

    q = f"SELECT {keys}, MEDIAN(x) AS med, MIN(x) AS lo, MAX(x) AS hi, QUANTILE(x, 0.9) AS p9 FROM t GROUP BY {keys}"
    plan = session.plan(q, epsilon=20.0, delta=1e-6, bounds={"x": (0.0, 100.0)}, quantile_buckets=256)
    b = session._backend
    raw = b.fetch_arrow(plan.compiled.sql(b.dialect))
    nk = plan.compiled.key_count
    key_cols = [raw.column(i) for i in range(nk)]
    g = raw.num_rows
    partitions = list(zip(*[c.to_pylist() for c in key_cols]))
    tuples = {i: b.fetch(plan.compiled.histogram_sql(i, b.dialect)) for i in plan.compiled.histograms}
    arrow = {i: b.fetch_arrow(plan.compiled.histogram_sql(i, b.dialect)) for i in plan.compiled.histograms}
    assert g > 3 and all(len(rows) > g for rows in tuples.values())
    measured = [m for m in plan.split.measurements if m.noise == "exponential"]
    assert len(measured) == 4
    seen: list[tuple[np.ndarray, np.ndarray, int]] = []
    real = Exponential.release_runs

    def spy(self: Any, utilities: Any, lengths: Any, **kwargs: Any) -> Any:
        rel = real(self, utilities, lengths, **kwargs)
        seen.append((np.asarray(utilities, dtype=float), np.asarray(lengths), int(rel.value)))
        return rel

    monkeypatch.setattr(Exponential, "release_runs", spy)
    # the engine sums doubles in parallel, so two runs of a histogram statement may differ in the last bits: the
    # Arrow answer's reference is made from its own rows
    as_rows = {i: list(zip(*[c.to_pylist() for c in t.columns])) for i, t in arrow.items()}
    width = 100.0 / 256
    for k, m in enumerate(measured):
        for hists, rows in ((tuples, tuples), (arrow, as_rows)):
            want = _reference_utilities(plan, m, partitions, rows)
            seen.clear()
            got = _quantiles(plan, m, key_cols, g, hists, insecure_seeded(k), 0.95)
            assert len(seen) == g
            for (u, lengths, j), dense, value in zip(seen, want, got[0]):
                np.testing.assert_array_equal(np.repeat(u, lengths), dense)
                assert value == (j + 1 if m.extreme == "max" else j) * width
            bound = m.mechanism(g).utility_gap_bound(256 if m.extreme else 257, 0.95)
            np.testing.assert_allclose(got[1], bound, rtol=1e-12)


def test_partition_index_is_sort_key_equality() -> None:
    released = [pa.array([None, -0.0, 0.0, math.nan, 1.0, 1.0]), pa.array(["a", "a", "a", "a", None, "b"])]
    hist = [[0.0, -0.0, None, math.nan, 1.0, 1.0, 2.0, None], ["a", "a", "a", "a", None, "a", "b", None]]
    got = _partition_index(released, 6, hist)
    assert got.tolist() == [2, 1, 0, 3, 4, -1, -1, -1]
    assert _partition_index_python(released, 6, hist).tolist() == got.tolist()
    # a type matched in Python gives the same answer
    dec = [pa.array([Decimal("1.50"), None, Decimal("2.00")])]
    assert _partition_index(dec, 3, [[Decimal("2.00"), Decimal("1.5"), None, Decimal("9")]]).tolist() == [2, 0, 1, -1]
    assert _partition_index([], 1, [], rows=0).tolist() == []
    assert _partition_index([], 1, [], rows=3).tolist() == [0, 0, 0]  # no GROUP BY: all rows in the one partition
    assert _partition_index([pa.array([], pa.int64())], 0, [[1, 2]]).tolist() == [-1, -1]


@pytest.mark.parametrize("column", [
    pa.array([1, 2, None]), pa.array([1.5, math.nan, -0.0]), pa.array(["x", None]), pa.array([True, False]),
    pa.array([datetime.date(2024, 1, 2)]), pa.array([1, 2], pa.int32()), pa.array([None, None], pa.int64()),
    pa.array([], pa.int64()), pa.array(["a"], pa.large_string()), pa.array([Decimal("1.50")]),
    pa.array([datetime.datetime(2024, 1, 1, 3)], pa.timestamp("us")), pa.array(["a", "b", "a"]).dictionary_encode(),
    pa.chunked_array([[1, 2], [3]]),
])
def test_post_processing_sees_each_key_as_its_python_values_type(column: Any) -> None:
    want = pa.array(column.to_pylist())
    got = _key_column(column)
    assert got.type == want.type and got.to_pylist() == want.to_pylist() or (
        got.type == want.type and [repr(v) for v in got.to_pylist()] == [repr(v) for v in want.to_pylist()])


def test_nesting_is_read_from_the_arrow_type() -> None:
    assert _nested(pa.list_(pa.int64())) and _nested(pa.struct([("a", pa.int64())]))
    assert _nested(pa.map_(pa.string(), pa.int64()))
    assert not any(_nested(t) for t in (pa.int64(), pa.string(), pa.date32(), pa.float64(), pa.decimal128(5, 2),
                                        pa.dictionary(pa.int8(), pa.string())))


@pytest.mark.parametrize("keys", ["s", "f, s", "ts", "d"])
def test_post_processing_path_gives_the_plain_path_rows(session: Any, keys: str) -> None:
    """One plan and one engine answer, finished twice under the same seed: plainly, and through post-processing
    (a LIMIT that keeps every row)."""
    plan = session.plan(f"SELECT {keys}, COUNT(*) AS n, SUM(x) AS sx, AVG(x) AS m FROM t GROUP BY {keys}",
                        epsilon=5.0, delta=1e-6, bounds={"x": (0.0, 100.0)})
    b = session._backend
    raw = b.fetch_arrow(plan.compiled.sql(b.dialect))
    post_plan = dataclasses.replace(plan, spec=dataclasses.replace(plan.spec, limit=10**9))
    plain = finish_aggregates(plan, raw, {}, confidence=0.9, rng=insecure_seeded(11))
    post = finish_aggregates(post_plan, raw, {}, confidence=0.9, rng=insecure_seeded(11))
    assert len(plain.rows) >= 3
    assert plain.columns == post.columns and plain.key_columns == post.key_columns
    assert [[repr(v) for v in r] for r in plain.rows] == [[repr(v) for v in r] for r in post.rows]
    assert [[type(v) for v in r] for r in plain.rows] == [[type(v) for v in r] for r in post.rows]
    assert {k: [repr(p) for p in v] for k, v in plain.intervals.items()} == {
        k: [repr(p) for p in v] for k, v in post.intervals.items()}
    assert type(plain.rows) is type(post.rows) and all(type(r) is tuple for r in plain.rows + post.rows)
    for iv in plain.intervals.values():
        assert all(type(p) is tuple and len(p) == 2 and all(type(x) is float for x in p) for p in iv)
    n = plain.columns.index("n")
    assert all(type(r[n]) is int for r in plain.rows)


@pytest.mark.parametrize("keys", ["f", "f, d", "ts"])
def test_distinct_counts_match_the_row_by_row_reference(session: Any, keys: str) -> None:
    plan = session.plan(f"SELECT {keys}, COUNT(DISTINCT s) AS u FROM t GROUP BY {keys}", epsilon=5.0, delta=1e-6)
    b = session._backend
    raw = b.fetch_arrow(plan.compiled.sql(b.dialect))
    nk = plan.compiled.key_count
    key_cols = [raw.column(i) for i in range(nk)]
    (index,) = plan.compiled.distincts
    rows = b.fetch(plan.compiled.distinct_sql(index, b.dialect))
    table = b.fetch_arrow(plan.compiled.distinct_sql(index, b.dialect))
    for answer, as_rows in ((rows, rows), (table, list(zip(*[c.to_pylist() for c in table.columns])))):
        # the code this replaced: a dict by the canonical key, one row at a time
        where = {_sort_key(k): i for i, k in enumerate(zip(*[c.to_pylist() for c in key_cols]))}
        want = np.zeros(raw.num_rows)
        for row in as_rows:
            j = where.get(_sort_key(tuple(row[:nk])))
            if j is not None:
                want[j] = float(row[nk] or 0)
        got = _distinct_values(key_cols, raw.num_rows, answer, nk)
        assert want.any()
        np.testing.assert_array_equal(got, want)
