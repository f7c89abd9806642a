"""An independent reference for the bounded aggregates of dpkit.query, in plain Python and NumPy.

The contract (module docstring of :mod:`dpkit.query._compile`), restated so that this file can be
checked against it without reading the engine SQL:

* rows whose privacy unit is NULL are dropped, then rows failing WHERE, then (with public keys)
  rows whose key tuple is not a public key;
* per (unit, partition): ``n`` rows; the value of each row is dropped if NULL or NaN, else
  clamped to [lo, hi] (so +-inf become hi / lo); weight ``w = min(1, L / n)``;
* a partition's ``rows`` (COUNT(*)) adds ``min(n, L)`` per unit, ``__units`` adds 1 per unit,
  and every other primitive adds ``w`` times the unit's partial: ``values`` (count of kept
  values), ``sum``, ``centered_sum`` (sum of v - mid), ``centered_squares`` (sum of (v - mid)^2),
  ``histogram`` (count per bucket ``clip(floor((v - lo) / width), 0, B - 1)``, width = (hi-lo)/B),
  with ``mid = lo/2 + hi/2``;
* a unit keeps at most K of its partitions (which ones is a per-query random choice: checked by
  :func:`assert_some_choice_explains`, not reproduced).

A table is a dict of column name -> Python list, so that NULL (None) and NaN stay distinct; it
is turned into a pyarrow table (which keeps them distinct for DuckDB) or a pandas frame.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np

Table = dict[str, list[Any]]
Key = tuple[Any, ...]
PRIMITIVES = ("units", "rows", "values", "sum", "centered_sum", "centered_squares")


# ---------------------------------------------------------------- tables
def to_arrow(table: Table) -> Any:
    """A pyarrow table: int64, string or float64 columns, NaN kept apart from NULL.

    A column's type comes from its first non-NULL value; an all-NULL column is typed by its name
    as in the tests' tables (k: text, x: float, others: int64), as a real table's schema would be.
    """
    import pyarrow as pa

    by_name = {"k": pa.string(), "x": pa.float64()}
    cols = {}
    for name, values in table.items():
        sample = next((v for v in values if v is not None), None)
        if sample is None:
            typ = by_name.get(name, pa.int64())
        elif isinstance(sample, str):
            typ = pa.string()
        elif isinstance(sample, float):
            typ = pa.float64()
        else:
            typ = pa.int64()
        cols[name] = pa.array(values, type=typ)  # from_pandas=False: NaN stays NaN, None is NULL
    return pa.table(cols)


def csv_schema(table: Table) -> dict[str, str]:
    """The declared schema of ``csv_text(table)``: the types :func:`to_arrow` gives the same columns."""
    by_arrow = {"string": "VARCHAR", "double": "DOUBLE", "int64": "BIGINT"}
    return {f.name: by_arrow[str(f.type)] for f in to_arrow(table).schema}


def without_unit(table: Table, unit_column: str, unit: Any) -> Table:
    keep = [i for i, u in enumerate(table[unit_column]) if u != unit]
    return {c: [v[i] for i in keep] for c, v in table.items()}


def rows_of(table: Table) -> list[dict[str, Any]]:
    names = list(table)
    return [dict(zip(names, vals)) for vals in zip(*table.values())]


def csv_text(table: dict[str, list[Any]]) -> str:
    """CSV whose NULLs are empty fields and NaN / +-inf are spelled as both DuckDB and Spark read them."""
    def cell(v: object) -> str:
        if v is None:
            return ""
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, float) and math.isinf(v):
            return "Inf" if v > 0 else "-Inf"
        return str(v)

    lines = [",".join(table)] + [",".join(cell(v) for v in row) for row in zip(*table.values())]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the reference
def clean(x: Any, lo: float | None, hi: float | None) -> float | None:
    """NULL or NaN -> dropped (None); else clamped to [lo, hi] when bounds are given."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    x = float(x)
    if lo is not None and hi is not None:
        x = min(max(x, lo), hi)
    return x


def cells(table: Table, *, unit: str, keys: list[str], value: str | None = None,
          bounds: tuple[float, float] | None = None, public: Iterable[Key] | None = None,
          where: Callable[[dict[str, Any]], bool] | None = None) -> dict[tuple[Any, Key], tuple[int, list[float]]]:
    """(unit, key tuple) -> (n rows, cleaned values) after the row-level drops."""
    lo, hi = bounds if bounds is not None else (None, None)
    allowed = None if public is None else set(public)
    out: dict[tuple[Any, Key], tuple[int, list[float]]] = {}
    for row in rows_of(table):
        u = row[unit]
        if u is None:
            continue
        if where is not None and not where(row):
            continue
        key = tuple(row[k] for k in keys)
        if allowed is not None and key not in allowed:
            continue
        n, vals = out.get((u, key), (0, []))
        v = clean(row[value], lo, hi) if value is not None else None
        out[(u, key)] = (n + 1, vals + ([v] if v is not None else []))
    return out


def contribution(n: int, values: list[float], *, max_rows: int, bounds: tuple[float, float] | None,
                 buckets: int | None = None) -> dict[str, Any]:
    """What one unit adds to one partition, primitive by primitive."""
    w = min(1.0, max_rows / n)
    v = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"units": 1.0, "rows": float(min(n, max_rows)), "values": w * v.size}
    if bounds is not None:
        lo, hi = bounds
        mid = lo / 2.0 + hi / 2.0
        out["sum"] = w * float(v.sum())
        out["centered_sum"] = w * float((v - mid).sum())
        out["centered_squares"] = w * float(((v - mid) ** 2).sum())
        if buckets is not None:
            width = (hi - lo) / buckets
            b = np.clip(np.floor((v - lo) / width), 0, buckets - 1).astype(np.int64)
            out["histogram"] = w * np.bincount(b, minlength=buckets).astype(float)
    return out


def contributions(table: Table, *, unit: str, keys: list[str], max_rows: int, value: str | None = None,
                  bounds: tuple[float, float] | None = None, public: Iterable[Key] | None = None,
                  where: Callable[[dict[str, Any]], bool] | None = None,
                  buckets: int | None = None) -> dict[tuple[Any, Key], dict[str, Any]]:
    return {cell: contribution(n, vals, max_rows=max_rows, bounds=bounds, buckets=buckets)
            for cell, (n, vals) in cells(table, unit=unit, keys=keys, value=value, bounds=bounds, public=public,
                                         where=where).items()}


def totals(contribs: dict[tuple[Any, Key], dict[str, Any]],
           chosen: Iterable[tuple[Any, Key]] | None = None) -> dict[Key, dict[str, Any]]:
    """Partition -> sum of the contributions of the chosen (unit, partition) cells (all by default)."""
    out: dict[Key, dict[str, Any]] = {}
    for cell in (contribs if chosen is None else chosen):
        _, key = cell
        acc = out.setdefault(key, {})
        for p, x in contribs[cell].items():
            acc[p] = acc[p] + x if p in acc else (x.copy() if isinstance(x, np.ndarray) else x)
    return out


# ---------------------------------------------------------------- reading the engine's answer
def engine_totals(plan: Any, rows: list[tuple[Any, ...]]) -> dict[Key, dict[str, float]]:
    """Partition -> {primitive: value} from the main statement's rows (NULL sums read as 0, as the release does)."""
    nk = plan.compiled.key_count
    by_column = {"__units": "units"}
    for m in plan.split.measurements:
        if m.noise != "exponential":
            by_column[m.column] = m.primitive
    out: dict[Key, dict[str, float]] = {}
    units = 1 + plan.compiled.columns.index("__units") if "__units" in plan.compiled.columns else None
    for row in rows:
        key = tuple(row[:nk])
        if units is not None and nk and not row[nk - 1 + units]:
            continue  # a public key no unit contributed to: returned as zeros, not a partition with data
        assert key not in out, f"partition {key} returned twice"
        out[key] = {}
        for column, x in zip(plan.compiled.columns, row[nk:]):
            if column in by_column:
                out[key][by_column[column]] = 0.0 if x is None else float(x)
    return out


def engine_histograms(plan: Any, rows: list[tuple[Any, ...]]) -> dict[Key, np.ndarray]:
    """Partition -> weighted histogram (length B) from the histogram statement's rows."""
    nk, b = plan.compiled.key_count, plan.compiled.buckets
    out: dict[Key, np.ndarray] = {}
    for row in rows:
        key = tuple(row[:nk])
        h = out.setdefault(key, np.zeros(b))
        assert 0 <= int(row[nk]) < b
        h[int(row[nk])] += float(row[nk + 1])
    return out


def engine_answer(session: Any, plan: Any) -> tuple[dict[Key, dict[str, float]], dict[Key, np.ndarray]]:
    """The engine's raw totals and the histogram of the plan's one quantile value, before noise."""
    if plan.public_keys is not None:
        plan.public_keys.ensure_in(session._backend)
    main = engine_totals(plan, session._backend.fetch(plan.sql))
    (index,) = plan.compiled.histograms
    hist = engine_histograms(plan, session._backend.fetch(plan.compiled.histogram_sql(index, "duckdb")))
    return main, hist


def utility(histogram: np.ndarray, q: float) -> np.ndarray:
    """The quantile utility over the B + 1 edges, built as ``_result._quantiles`` does: -|rank - q N|."""
    below = np.concatenate([[0.0], np.cumsum(histogram)])
    return -np.abs(below - q * below[-1])


def close(a: float, b: float, *, rtol: float = 1e-9, atol: float = 1e-9) -> bool:
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def assert_totals_equal(engine: dict[Key, dict[str, float]], expected: dict[Key, dict[str, Any]],
                        primitives: Iterable[str]) -> None:
    """Same partitions, and every primitive equal (rtol 1e-9: the engine sums doubles in another order)."""
    assert set(engine) == set(expected), (sorted(engine, key=repr), sorted(expected, key=repr))
    for key, got in engine.items():
        for p in primitives:
            assert close(got[p], float(expected[key][p])), (key, p, got[p], expected[key][p])


def assert_histograms_equal(engine: dict[Key, np.ndarray], expected: dict[Key, dict[str, Any]]) -> None:
    for key in set(engine) | set(expected):
        want = expected[key]["histogram"] if key in expected else None
        got = engine.get(key)
        if want is None:
            assert got is not None and np.allclose(got, 0.0)
            continue
        if got is None:
            got = np.zeros_like(want)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=str(key))


# ---------------------------------------------------------------- K binding: is the answer explained by some choice?
def assert_some_choice_explains(engine: dict[Key, dict[str, float]], contribs: dict[tuple[Any, Key], dict[str, Any]],
                                *, max_partitions: int, primitives: Iterable[str],
                                histograms: dict[Key, np.ndarray] | None = None) -> None:
    """There is a choice of at most K partitions per unit (exactly min(K, its partitions)) whose
    contributions sum to every partition's engine totals; units with <= K partitions keep all.

    Checked by brute force (tables are small): per partition, the subsets of its units that give
    its totals; then a backtracking search for one subset per partition using each unit exactly
    min(K, |P_u|) times.
    """
    prims = list(primitives)
    parts_of: dict[Any, list[Key]] = defaultdict(list)
    for u, key in contribs:
        parts_of[u].append(key)
    quota = {u: min(max_partitions, len(ps)) for u, ps in parts_of.items()}
    assert sum(v["units"] for v in engine.values()) == sum(quota.values())
    all_keys = {key for _, key in contribs}
    assert set(engine) <= all_keys
    options: dict[Key, list[frozenset[Any]]] = {}
    for key in all_keys:
        units = [u for u, k in contribs if k == key]
        forced = {u for u in units if len(parts_of[u]) <= max_partitions}
        got = engine.get(key, {p: 0.0 for p in prims})
        size = int(round(got["units"]))
        fits = []
        for subset in itertools.combinations(units, size):
            if not forced <= set(subset):
                continue
            ok = all(close(got[p], sum(float(contribs[(u, key)][p]) for u in subset), rtol=1e-7, atol=1e-7)
                     for p in prims)
            if ok and histograms is not None:
                want = sum((contribs[(u, key)]["histogram"] for u in subset), np.zeros(1))
                have = histograms.get(key)
                ok = bool(np.allclose(have if have is not None else 0.0, want, rtol=1e-7, atol=1e-7))
            if ok:
                fits.append(frozenset(subset))
        assert fits, f"no subset of the units of partition {key} gives the engine's totals {got}"
        options[key] = fits

    keys = sorted(options, key=repr)
    used: dict[Any, int] = defaultdict(int)

    def search(i: int) -> bool:
        if i == len(keys):
            return all(used[u] == quota[u] for u in quota)
        for subset in options[keys[i]]:
            if all(used[u] < quota[u] for u in subset):
                for u in subset:
                    used[u] += 1
                if search(i + 1):
                    return True
                for u in subset:
                    used[u] -= 1
        return False

    assert search(0), "no choice of at most K partitions per unit explains all partitions at once"


# ---------------------------------------------------------------- compile once, for several engines
def compile_for(session: Any, plan: Any, salt: str = "0" * 32) -> Any:
    """The plan's statement for ``session``'s engine relation, with a fixed salt.

    Mirrors the ``compile_query`` call of ``Session.plan`` (same spec, values, bounds and keys); only
    the relation name (which each backend names its own way) and the salt are set here, so that
    every engine runs the same bounding choice.
    """
    from dpkit.query._compile import compile_query

    spec = replace(plan.spec, table=session._backend.relation)
    return compile_query(spec, privacy_unit=session.privacy_unit, values=plan.values,
                         max_partitions=plan.max_partitions, max_rows=plan.max_rows,
                         public_keys=plan.public_keys, salt=salt, buckets=plan.compiled.buckets,
                         partition_order=plan.compiled.order)



def assert_rows_equal(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], *, rtol: float = 1e-9,
                      label: str = "") -> None:
    """Same rows in any order; numbers equal to ``rtol`` (engines add doubles in their own order), NULLs equal."""
    order = lambda rows: sorted(rows, key=lambda r: repr(r[:1]) + repr(r))  # noqa: E731
    got, want = order(got), order(want)
    assert len(got) == len(want), (label, got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w), (label, g, w)
        for a, b in zip(g, w):
            numbers = all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in (a, b))
            if not numbers:  # NULL, text, dates, decimals...: equal as values
                assert a == b, (label, g, w)
            else:
                assert close(float(a), float(b), rtol=rtol, atol=1e-12), (label, g, w)


def mixed_table(seed: int = 3, rows: int = 240) -> Table:
    """A fixed table for the backend comparisons: NULL units, NULL keys, NULL/NaN/+-inf values,
    units with more rows than max_rows and more keys than max_partitions; string keys (whose text
    is the same in every engine)."""
    rng = np.random.default_rng(seed)
    specials = [None, math.nan, math.inf, -math.inf]
    uid, k, x, y = [], [], [], []
    for _ in range(rows):
        uid.append(None if rng.random() < 0.05 else int(rng.integers(0, 30)))
        k.append(None if rng.random() < 0.1 else str(rng.choice(["a", "b", "c", "d"])))
        r = rng.random()
        x.append(specials[int(rng.integers(0, 4))] if r < 0.15 else round(float(rng.uniform(-5, 15)), 3))
        y.append(int(rng.integers(0, 4)))
    return {"uid": uid, "k": k, "x": x, "y": y}


BACKEND_QUERIES = [  # (query, plan keyword arguments): K binds, public keys, no GROUP BY
    ("SELECT k, COUNT(*) AS n, COUNT(DISTINCT uid) AS u, COUNT(x) AS c, SUM(x) AS s, AVG(x) AS m, "
     "VAR_SAMP(x) AS v, QUANTILE_CONT(x, 0.25) AS q FROM t WHERE y > 0 GROUP BY k",
     dict(epsilon=1.0, delta=1e-6, bounds={"x": (0.0, 10.0)}, max_partitions=2, max_rows=2, quantile_buckets=32)),
    ("SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k",
     dict(epsilon=1.0, bounds={"x": (-2.0, 4.0)}, max_partitions=3, max_rows=3, keys={"k": ["a", "c", "zz", None]})),
    ("SELECT COUNT(*) AS n, MEDIAN(x) AS med, STDDEV(x) AS sd FROM t",
     dict(epsilon=1.0, bounds={"x": (-1.0, 12.0)}, max_rows=4, quantile_buckets=64)),
    # the default quantile grid (2**20 buckets): every engine computes the same fine bucket of each value
    ("SELECT k, MIN(x) AS lo, MEDIAN(x) AS med FROM t GROUP BY k",
     dict(epsilon=1.0, delta=1e-6, bounds={"x": (0.0, 10.0)}, max_partitions=2, max_rows=2)),
]


def fetch_all(session: Any, plan: Any) -> list[list[tuple[Any, ...]]]:
    """The raw answer of ``plan`` (compiled for this session's engine with a fixed salt): main, then histograms."""
    compiled = compile_for(session, plan)
    dialect = session._backend.dialect
    if plan.public_keys is not None:  # a plan made by another session: its public-key table here too
        plan.public_keys.ensure_in(session._backend)
    out = [session._backend.fetch(compiled.sql(dialect))]
    out += [session._backend.fetch(compiled.histogram_sql(i, dialect)) for i in sorted(compiled.histograms)]
    return out
