"""The SQL front end: parse the common aggregate subset with sqlglot, refuse the rest with a reason.

Accepted::

    SELECT k1, expr AS k2, COUNT(*), COUNT(x), COUNT(DISTINCT <privacy unit>), SUM(x), AVG(x),
           VAR_POP(x), VAR_SAMP(x), STDDEV(x), MEDIAN(x), QUANTILE_CONT(x, q)
    FROM <the session's table> [WHERE <row-level predicate>]
    [GROUP BY k1, k2] [ORDER BY <output column> [DESC], ...] [LIMIT n]

Value and key expressions may be any deterministic row-level expression of the table's columns
(``SUM(price * quantity)``).  ``ORDER BY`` and ``LIMIT`` are applied to the noisy result
(post-processing, free of privacy cost).

Refused, each with what to do instead: joins and subqueries (a join can copy one unit's rows
into many, so its contribution could not be bounded), raw rows, ``DISTINCT``, ``HAVING``,
``MIN``/``MAX`` (unbounded sensitivity; use a quantile), window functions, non-deterministic
functions, ``COUNT(DISTINCT x)`` other than the privacy unit, arithmetic over aggregates.

sqlglot does the parsing (DuckDB dialect by default; ``dialect="spark"`` for Spark SQL text), so
this module only walks its tree; it is hand-written because no library decides which SQL is
private.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dpkit.errors import UnsupportedError
from dpkit.query._policy import parse_expression, row_expression
from dpkit.query._spec import Aggregate, Key, QuerySpec

__all__ = ["parse_sql", "validate_spec"]

_VARIANCE = {exp.Variance: ("variance", True), exp.VariancePop: ("variance", False),
             exp.Stddev: ("stddev", True), exp.StddevSamp: ("stddev", True), exp.StddevPop: ("stddev", False)}
_QUANTILE = (exp.PercentileCont, exp.Quantile, exp.ApproxQuantile, exp.PercentileDisc)


def _refuse(reason: str, fix: str) -> UnsupportedError:
    return UnsupportedError(f"{reason} {fix}")


def _row_level(node: exp.Expression, where: str) -> str:
    """Check that ``node`` is an allowed deterministic row-level expression; return its DuckDB SQL."""
    return row_expression(node, where)


def _columns(node: exp.Expression) -> set[str]:
    return {c.name for c in node.find_all(exp.Column)}


def _level(arg: exp.Expression, text: str) -> float:
    if not isinstance(arg, exp.Literal) or arg.is_string:
        raise _refuse(f"the quantile level in {text} must be a number literal;", "write e.g. QUANTILE_CONT(x, 0.9).")
    q = float(arg.this)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"the quantile level in {text} must be in [0, 1]; got {q}.")
    return q


def _aggregate(node: exp.Expression, name: str, privacy_unit: str) -> tuple[Aggregate, set[str]]:
    text = node.sql(dialect="duckdb")
    if isinstance(node, exp.WithinGroup):  # PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)
        order = node.expression
        if not isinstance(node.this, _QUANTILE) or not isinstance(order, exp.Order) or len(order.expressions) != 1:
            raise _refuse(f"{text} is not supported;", "write QUANTILE_CONT(x, q) or MEDIAN(x).")
        value = order.expressions[0].this
        q = _level(node.this.this, text)
        return _value_aggregate("quantile", name, value, q=q)
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Star):
            return Aggregate("count", name), set()
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            if len(cols) == 1 and isinstance(cols[0], exp.Column) and cols[0].name == privacy_unit:
                return Aggregate("count_units", name), {privacy_unit}
            raise _refuse(f"{text}: COUNT(DISTINCT ...) is supported only for the privacy unit ({privacy_unit});",
                          "distinct counts of other columns have no bounded sensitivity here.")
        return _value_aggregate("count_values", name, arg)
    if isinstance(node, exp.Sum):
        return _value_aggregate("sum", name, node.this)
    if isinstance(node, exp.Avg):
        return _value_aggregate("mean", name, node.this)
    if type(node) in _VARIANCE:
        kind, sample = _VARIANCE[type(node)]
        return _value_aggregate(kind, name, node.this, sample=sample)
    if isinstance(node, exp.Median):
        return _value_aggregate("quantile", name, node.this, q=0.5)
    if isinstance(node, _QUANTILE):
        return _value_aggregate("quantile", name, node.this, q=_level(node.args.get("expression") or node.args.get("quantile"), text))
    if isinstance(node, (exp.Min, exp.Max)):
        raise _refuse(f"{text}: MIN and MAX have unbounded sensitivity (one unit can move them anywhere);",
                      "use QUANTILE_CONT(x, 0.01) / QUANTILE_CONT(x, 0.99) or MEDIAN(x) with bounds.")
    if isinstance(node, exp.AggFunc):
        raise _refuse(f"the aggregate {text} is not supported;",
                      "supported: COUNT(*), COUNT(x), COUNT(DISTINCT unit), SUM, AVG, VAR_POP, VAR_SAMP, STDDEV, MEDIAN, QUANTILE_CONT.")
    raise _refuse(f"{text} combines aggregates or is not one;",
                  "select each aggregate on its own (e.g. SUM(x) and COUNT(*)) and combine the noisy columns afterwards.")


def _value_aggregate(kind: str, name: str, value: exp.Expression | None, *, q: float | None = None,
                     sample: bool = False) -> tuple[Aggregate, set[str]]:
    if value is None:
        raise ValueError(f"{kind} needs an argument.")
    if isinstance(value, exp.Distinct):
        raise _refuse(f"{kind.upper()}(DISTINCT ...) is not supported;", "aggregate the values without DISTINCT.")
    sql = _row_level(value, f"the argument of {name}")
    column = value.name if isinstance(value, exp.Column) else None
    return Aggregate(kind, name, expr=sql, column=column, q=q, sample=sample), _columns(value)


def _output_name(node: exp.Expression, index: int) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name
    return node.sql(dialect="duckdb")


def parse_sql(text: str, *, table: str, privacy_unit: str, dialect: str = "duckdb",
              table_columns: Collection[str] = ()) -> QuerySpec:
    """Parse ``text`` into a :class:`QuerySpec`, or refuse with :class:`~dpkit.errors.UnsupportedError`.

    Parameters
    ----------
    text : str
        One SELECT statement.
    table : str
        The session's table name; ``FROM`` must name it.
    privacy_unit : str
        The privacy unit column (allowed in ``COUNT(DISTINCT ...)``, refused as a group key).
    dialect : str
        sqlglot dialect of ``text`` ("duckdb" or "spark").
    table_columns : collection of str
        The table's columns, to tell ``GROUP BY <alias>`` from ``GROUP BY <column>``.

    Examples
    --------
    >>> s = parse_sql("SELECT k, COUNT(*) AS n, AVG(x) FROM t WHERE x > 0 GROUP BY k", table="t", privacy_unit="uid")
    >>> [a.kind for a in s.aggregates], s.where, [k.name for k in s.keys]
    (['count', 'mean'], 'x > 0', ['k'])
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the query is empty; write e.g. SELECT category, COUNT(*) FROM t GROUP BY category.")
    try:
        statements = sqlglot.parse(text, read=dialect)
    except ParseError as e:
        raise ValueError(f"could not parse the SQL: {e}") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise _refuse(f"expected one SQL statement, got {len(statements)};", "send one SELECT at a time.")
    tree = statements[0]
    if not isinstance(tree, exp.Select):
        raise _refuse(f"only SELECT queries can be answered privately; got {type(tree).__name__.upper()}.",
                      "write SELECT ... FROM t [WHERE ...] [GROUP BY ...].")
    for arg, why in (("joins", "a join can copy one unit's rows into many, so its contribution could not be bounded;"),
                     ("with_", "common table expressions (WITH) are not supported;"),
                     ("with", "common table expressions (WITH) are not supported;"),
                     ("having", "HAVING filters on exact aggregates, which would leak them;"),
                     ("distinct", "SELECT DISTINCT returns individual values;"),
                     ("qualify", "QUALIFY filters on window functions;")):
        if tree.args.get(arg):
            fix = {"having": "filter the noisy result instead (ORDER BY/LIMIT are allowed)."}.get(
                arg, "query the session's single table with aggregates only.")
            raise _refuse(why, fix)
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        raise _refuse("the query has no FROM clause;", f"write FROM {table}.")
    src = source.this
    if isinstance(src, (exp.Subquery, exp.Select)):
        raise _refuse("a subquery in FROM is not supported (it could change whose rows are whose);",
                      f"query the session's table {table} directly.")
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier):
        raise _refuse(f"FROM must name the session's table {table!r}; got {src.sql(dialect='duckdb')}.",
                      "the data source is fixed when the session is opened.")
    if tree.args.get("sample") is not None or src.args.get("sample") is not None:
        raise _refuse("TABLESAMPLE / USING SAMPLE is not supported: a random sample of rows is not a fixed "
                      "function of the data, and its privacy amplification is not accounted here;",
                      "query the whole table.")
    if src.name.lower() != table.lower():
        raise ValueError(f"unknown table {src.name!r}: this session's table is {table!r}.")

    _strip_table(tree, table)  # t.x -> x: the relation is renamed for the engine
    columns: set[str] = set()
    where = None
    if tree.args.get("where") is not None:
        cond = tree.args["where"].this
        where = _row_level(cond, "WHERE")
        columns |= _columns(cond)

    group = tree.args.get("group")
    group_exprs: list[exp.Expression] = []
    if group is not None:
        for kind in ("rollup", "cube", "grouping_sets"):
            if group.args.get(kind):
                raise _refuse(f"GROUP BY {kind.upper().replace('_', ' ')} is not supported;",
                              "run one query per grouping.")
        if group.args.get("all"):
            raise _refuse("GROUP BY ALL is not supported;", "name the group keys.")
        group_exprs = list(group.expressions)

    aliases = {e.alias: e.this for e in tree.expressions if isinstance(e, exp.Alias)}
    key_sql: list[str] = []
    for g in group_exprs:
        if isinstance(g, exp.Literal) and not g.is_string:  # GROUP BY 1
            i = int(g.this) - 1
            if not 0 <= i < len(tree.expressions):
                raise ValueError(f"GROUP BY {g.this} is out of range.")
            g = tree.expressions[i]
            g = g.this if isinstance(g, exp.Alias) else g
        elif isinstance(g, exp.Column) and not g.table and g.name in aliases and g.name not in table_columns:
            g = aliases[g.name]  # GROUP BY <alias>; a real column of that name wins, as in DuckDB
        sql = _row_level(g, "GROUP BY")
        bare = g
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if isinstance(bare, exp.Column) and bare.name == privacy_unit:
            raise _refuse(f"grouping by the privacy unit {privacy_unit!r} would release one group per unit;",
                          "group by attributes shared by many units.")
        key_sql.append(sql)
        columns |= _columns(g)

    keys: list[Key] = []
    aggregates: list[Aggregate] = []
    seen_keys: set[str] = set()
    for i, item in enumerate(tree.expressions):
        if isinstance(item, exp.Star):
            raise _refuse("SELECT * returns individual rows;", "select aggregates such as COUNT(*) or SUM(x).")
        name = _output_name(item, i)
        node = item.this if isinstance(item, exp.Alias) else item
        if not any(isinstance(n, exp.AggFunc) for n in node.walk()):
            sql = _row_level(node, "the select list")  # as the GROUP BY keys were written (CAST -> TRY_CAST)
            if sql not in key_sql:
                raise _refuse(f"{sql} is neither an aggregate nor a GROUP BY key, so it would return values of "
                              "individual rows;", f"aggregate it or add it to GROUP BY.")
            keys.append(Key(name=name, expr=sql))
            seen_keys.add(sql)
            continue
        agg, cols = _aggregate(node, name, privacy_unit)
        aggregates.append(agg)
        columns |= cols
    for sql in key_sql:  # keys grouped on but not selected are still released (as the partition labels)
        if sql not in seen_keys:
            keys.append(Key(name=sql, expr=sql))
    if not aggregates:
        raise _refuse("the query has no aggregate, so it would return values of individual rows;",
                      "select COUNT(*), SUM(x), AVG(x), ... with GROUP BY.")

    names = [k.name for k in keys] + [a.name for a in aggregates]
    order: list[tuple[str, bool]] = []
    if tree.args.get("order") is not None:
        for o in tree.args["order"].expressions:
            target = o.this
            label = target.name if isinstance(target, exp.Column) else target.sql(dialect="duckdb")
            if isinstance(target, exp.Literal) and not target.is_string:
                idx = int(target.this) - 1
                label = names[idx] if 0 <= idx < len(names) else label
            if label not in names:
                raise _refuse(f"ORDER BY {label} does not name an output column;",
                              f"order by one of {names} (it sorts the noisy result).")
            order.append((label, bool(o.args.get("desc"))))
    limit = None
    if tree.args.get("limit") is not None:
        lim = tree.args["limit"].expression
        if not isinstance(lim, exp.Literal) or lim.is_string or int(lim.this) < 0:
            raise ValueError("LIMIT must be a non-negative integer literal.")
        limit = int(lim.this)
    if tree.args.get("offset") is not None:
        raise _refuse("OFFSET is not supported;", "slice the returned table.")
    return QuerySpec(table=table, keys=tuple(keys), aggregates=tuple(aggregates), where=where,
                     order_by=tuple(order), limit=limit, text=text.strip(), columns=tuple(sorted(columns)))



def _strip_table(node: exp.Expression, table: str) -> exp.Expression:
    """``t.x`` -> ``x`` for the session's table ``t``; another qualifier is refused."""
    for col in node.find_all(exp.Column):
        if col.table:
            if col.table.lower() != table.lower() or col.args.get("db") or col.args.get("catalog"):
                raise ValueError(f"unknown table {col.table!r} in {col.sql(dialect='duckdb')}: this session's "
                                 f"table is {table!r}.")
            col.set("table", None)
    return node


def validate_spec(spec: QuerySpec, *, table: str, privacy_unit: str) -> QuerySpec:
    """Check a :class:`QuerySpec` from any entry point as strictly as parsed SQL, and rebuild it.

    Every expression (keys, aggregate arguments, WHERE) is parsed as one expression, checked against
    the allow-list of :mod:`dpkit.query._policy` and re-emitted from its syntax tree, so no text of the
    caller's reaches the engine verbatim; the columns it reads are recomputed from the trees.

    Raises
    ------
    TypeError
        If ``spec`` is not a QuerySpec.
    ValueError, UnsupportedError
        As :func:`parse_sql`, for the same faults.
    """
    if not isinstance(spec, QuerySpec):
        raise TypeError(f"expected SQL text or a QuerySpec; got {type(spec).__name__}.")
    if not isinstance(spec.table, str) or spec.table.lower() != table.lower():
        raise ValueError(f"unknown table {spec.table!r}: this session's table is {table!r}.")
    columns: set[str] = set()

    def expression(text: object, where: str) -> tuple[str, exp.Expression]:
        node = _strip_table(parse_expression(text, where), table)
        sql = row_expression(node, where)
        columns.update(_columns(node))
        return sql, node

    keys = []
    for k in spec.keys:
        if not isinstance(k, Key) or not isinstance(k.name, str) or not k.name:
            raise TypeError(f"group keys must be Key(name, expr) with a non-empty name; got {k!r}.")
        sql, node = expression(k.expr, f"the group key {k.name!r}")
        bare = node
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if isinstance(bare, exp.Column) and bare.name == privacy_unit:
            raise _refuse(f"grouping by the privacy unit {privacy_unit!r} would release one group per unit;",
                          "group by attributes shared by many units.")
        keys.append(Key(name=k.name, expr=sql))
    aggregates = []
    for a in spec.aggregates:
        if not isinstance(a, Aggregate) or not isinstance(a.name, str) or not a.name:
            raise TypeError(f"aggregates must be Aggregate(kind, name, ...) with a non-empty name; got {a!r}.")
        if a.kind in ("count", "count_units"):
            if a.expr is not None:
                raise ValueError(f"{a.name}: a {a.kind} aggregate takes no expression; got {a.expr!r}.")
            if a.kind == "count_units":
                columns.add(privacy_unit)
            aggregates.append(Aggregate(a.kind, a.name, q=a.q, sample=a.sample))
            continue
        sql, node = expression(a.expr, f"the argument of {a.name}")
        column = node.name if isinstance(node, exp.Column) else None
        aggregates.append(Aggregate(a.kind, a.name, expr=sql, column=column, q=a.q, sample=a.sample))
    where = None if spec.where is None else expression(spec.where, "WHERE")[0]
    names = [k.name for k in keys] + [a.name for a in aggregates]
    for label, desc in spec.order_by:
        if label not in names or not isinstance(desc, bool):
            raise ValueError(f"ORDER BY {label!r} does not name an output column; order by one of {names}.")
    if spec.limit is not None and (isinstance(spec.limit, bool) or not isinstance(spec.limit, int) or spec.limit < 0):
        raise ValueError(f"LIMIT must be a non-negative integer; got {spec.limit!r}.")
    return QuerySpec(table=table, keys=tuple(keys), aggregates=tuple(aggregates), where=where,
                     order_by=tuple(spec.order_by), limit=spec.limit, text=str(spec.text),
                     columns=tuple(sorted(columns)))
