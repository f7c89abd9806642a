r"""Post-processing of a noisy result: output expressions, HAVING, ORDER BY and LIMIT.

Everything here is a function of the noisy values and of the released keys alone, so it costs no
privacy (post-processing, Dwork & Roth 2014, Prop 2.1).  It runs in a private in-memory DuckDB
database of dpkit's own that holds nothing but the noisy table: the analyst's expressions (parsed,
allow-listed and re-emitted by :mod:`dpkit.query._sql`) never meet the data.

Intervals: an output that *is* an aggregate keeps that aggregate's interval; an output that is a
monotone function of one aggregate (``ROUND(AVG(x), 1)``, ``SUM(x) / 1000``, ``COUNT(*) * 2 + 1``)
gets the image of the aggregate's interval, which covers its value whenever the aggregate's does;
an output that combines several noisy values (``SUM(x) / COUNT(*)``) gets no interval (NaN), since
its coverage would need a joint statement the per-aggregate intervals do not make.

Ties in ORDER BY are broken by the row's position in the released order (a function of the released
keys), never by anything the engine did.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlglot import exp

from dpkit.query._policy import parse_expression
from dpkit.query._spec import Output

if TYPE_CHECKING:
    from dpkit.query._spec import QuerySpec

__all__ = ["check_post", "needs_post", "post_process"]


def needs_post(spec: QuerySpec) -> bool:
    """Whether the result needs the SQL post-processing step (anything beyond keys then aggregates)."""
    return bool(spec.outputs or spec.having or spec.order_by or spec.limit is not None)


def _swap(sql: str, mapping: dict[str, str]) -> str:
    node = parse_expression(sql, "post-processing")
    node = node.transform(lambda n: exp.column(mapping[n.name], quoted=True)
                          if isinstance(n, exp.Column) and n.name in mapping else n)
    return node.sql(dialect="duckdb")


def check_post(spec: QuerySpec, key_types: list[str], temporal: dict[str, str]) -> None:
    """Run the post-processing once, without its TRY wrappers, on one made-up row, before anything is spent.

    The row holds NULL keys of the keys' engine types and 1 for every aggregate (1970-01-02 for a date, one
    second past 1970-01-01 for a timestamp), built from the query alone.  An expression that fails on it for
    a reason no value decides (``HAVING COUNT(*) > 'abc'``, ``COUNT(*) + INTERVAL 'x' DAY``) raises here, free:
    after the spend, under TRY, it would be NULL on every row (a silently empty answer), or fail and be
    charged.  Raises the DuckDB error; a key type DuckDB cannot name skips the check.
    """
    if not needs_post(spec):
        return
    import datetime as dt

    import duckdb

    con = duckdb.connect()
    keys: list[Any] = []
    try:
        for type_name in key_types:
            try:
                keys.append(con.sql(f"SELECT CAST(NULL AS {type_name}) AS k").to_arrow_table().column(0))
            except duckdb.Error:
                return  # a Spark type name DuckDB does not know: no check (the TRY wrappers still hold)
    finally:
        con.close()
    one: dict[str, Any] = {"date": [dt.date(1970, 1, 2)], "timestamp": [dt.datetime(1970, 1, 1, 0, 0, 1)]}
    values = {a.name: one[temporal[a.name]] if a.name in temporal else np.ones(1) for a in spec.aggregates}
    intervals: dict[str, tuple[Any, Any]] = {a.name: (values[a.name], values[a.name]) if a.name in temporal
                                             else (np.ones(1), np.ones(1)) for a in spec.aggregates}
    post_process(spec, keys, 1, values, intervals, {a.name: a.kind for a in spec.aggregates}, safe=False)


def post_process(spec: QuerySpec, keys: list[Any], n: int, values: dict[str, Any],
                 intervals: dict[str, tuple[Any, Any]], kinds: dict[str, str], *, safe: bool = True
                 ) -> tuple[list[str], list[list[Any]], dict[str, tuple[Any, Any]], list[str],
                            list[bool]]:
    """Apply the spec's outputs, HAVING, ORDER BY and LIMIT to the noisy table.

    Parameters
    ----------
    keys : list of Arrow arrays
        The released keys, one array per key column, in the release order.
    n : int
        The number of released rows.
    values : dict
        Aggregate name -> its noisy values (one per row).
    intervals : dict
        Aggregate name -> (lower, upper) arrays.
    kinds : dict
        Aggregate name -> its kind (counts are integers).
    safe : bool
        Wrap each expression in TRY (a value where it fails gives NULL); False for :func:`check_post`.

    Returns
    -------
    columns, the output's columns (one list of values per column), intervals (output name -> lower and
    upper arrays, NaN where none), key columns, and for each output column whether its Arrow type is nested
    (its values are lists or dicts)
    """
    import duckdb
    import pyarrow as pa

    key_names = [k.name for k in spec.keys]
    agg_names = [a.name for a in spec.aggregates]
    cols: dict[str, Any] = {"__row": pa.array(np.arange(n, dtype=np.int64))}
    for name, key in zip(key_names, keys):
        cols[name] = _key_column(key)
    lo_of, hi_of = {}, {}
    for j, name in enumerate(agg_names):
        integer = kinds[name] in ("count", "count_units", "count_distinct")
        v = values[name]
        if isinstance(v, np.ndarray):
            cols[name] = pa.array(v.astype(np.int64) if integer and v.size and np.all(np.isfinite(v)) else v)
        else:  # dates or timestamps (quantiles of temporal values)
            cols[name] = pa.array(list(v))
        lo, hi = intervals[name]
        lo_of[name], hi_of[name] = f"__lo{j}", f"__hi{j}"
        if isinstance(lo, list):  # dates or timestamps (a quantile's released interval ends)
            cols[f"__lo{j}"], cols[f"__hi{j}"] = pa.array(lo), pa.array(hi)
        elif not isinstance(v, np.ndarray):  # a date or timestamp without interval: NULLs of the value's type,
            # so that the expressions bind as they do on the values (as check_post ran them)
            cols[f"__lo{j}"] = cols[f"__hi{j}"] = pa.nulls(n, type=cols[name].type)
        else:
            cols[f"__lo{j}"] = pa.array(np.asarray(lo, dtype=float))
            cols[f"__hi{j}"] = pa.array(np.asarray(hi, dtype=float))
    table = pa.table(cols)

    outputs = spec.outputs or (
        tuple(Output(name=k, expr=exp.column(k, quoted=True).sql("duckdb"), key=k) for k in key_names)
        + tuple(Output(name=a, expr=exp.column(a, quoted=True).sql("duckdb"), aggregate=a, monotone_of=a)
                for a in agg_names))
    def guard(sql: str) -> str:
        return f"TRY({sql})" if safe else f"({sql})"

    select = ["__row"]
    key_columns = []
    for i, o in enumerate(outputs):
        select.append(f"{guard(o.expr)} AS __o{i}")
        agg = o.aggregate or o.monotone_of
        if o.key is not None or (agg is None and not any(
                isinstance(c, exp.Column) and c.name in agg_names
                for c in parse_expression(o.expr, o.name).find_all(exp.Column))):
            key_columns.append(o.name)
        if agg is not None:
            a, b = _swap(o.expr, {agg: lo_of[agg]}), _swap(o.expr, {agg: hi_of[agg]})
            select.append(f"{guard(f'LEAST({a}, {b})')} AS __l{i}, {guard(f'GREATEST({a}, {b})')} AS __h{i}")
        else:
            select.append(f"CAST(NULL AS DOUBLE) AS __l{i}, CAST(NULL AS DOUBLE) AS __h{i}")
    sql = f"SELECT {', '.join(select)} FROM noisy"
    if spec.having:
        sql += f" WHERE {guard(spec.having)}"
    order = [f"{guard(e)} {'DESC' if desc else 'ASC'} NULLS LAST" for e, desc in spec.order_by]
    sql += " ORDER BY " + ", ".join(order + ["__row"])
    if spec.limit is not None:
        sql += f" LIMIT {int(spec.limit)}"
    con = duckdb.connect()  # holds the noisy table only
    try:
        con.register("noisy", table)
        got = con.sql(sql).to_arrow_table()  # columnar: no Python object per cell until the output lists
    finally:
        con.close()
    m = len(outputs)
    out_columns = [got.column(1 + 3 * i).to_pylist() for i in range(m)]
    nested = [_nested(got.column(1 + 3 * i).type) for i in range(m)]
    out_intervals: dict[str, tuple[Any, Any]] = {}
    for i, o in enumerate(outputs):
        if o.name in key_columns:
            continue
        lo_col, hi_col = got.column(2 + 3 * i), got.column(3 + 3 * i)
        if _temporal_type(lo_col.type) and _temporal_type(hi_col.type):  # ends that are dates or timestamps
            out_intervals[o.name] = (lo_col.to_pylist(), hi_col.to_pylist())
            continue
        out_intervals[o.name] = (_floats(lo_col), _floats(hi_col))
    return [o.name for o in outputs], out_columns, out_intervals, key_columns, nested


# Arrow types that a column of Python values converts back to unchanged (pa.array infers the same type and the
# same values): such a key column goes to the noisy table as it is, any other through its Python values, so that
# the expressions see the types they always saw
_SAME_TYPES = ("int64", "double", "string", "bool", "date32[day]")


def _key_column(column: Any) -> Any:
    """A released key column for the noisy table: typed as ``pa.array`` types its Python values."""
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if str(col.type) in _SAME_TYPES and col.null_count < len(col):  # all NULL (or none): pa.array makes type null
        return col
    return pa.array(col.to_pylist())


def _nested(arrow_type: Any) -> bool:
    """Whether a column's Python values are nested (lists, dicts): from its Arrow type."""
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        return _nested(arrow_type.value_type)
    if isinstance(arrow_type, pa.ExtensionType):
        return True
    return bool(pa.types.is_nested(arrow_type))


def _temporal_type(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type))


def _floats(column: Any) -> np.ndarray:
    """An interval end as float64: NULL (or an end that is not a number, e.g. a date) as NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)):
        return np.full(len(col), np.nan)
    col = pc.cast(col, pa.float64())
    return np.asarray(col.fill_null(np.nan).to_numpy(zero_copy_only=False), dtype=np.float64)


def _num(x: Any) -> float:
    if x is None:
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan
