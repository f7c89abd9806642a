r"""The SQL front end: parse the analyst's SQL with sqlglot into a :class:`QuerySpec`, refuse the rest.

Accepted::

    SELECT <outputs> FROM <source> [JOIN <public table> ON <unique public key> ...]
    [WHERE <row-level predicate>] [GROUP BY <row-level keys>] [HAVING <over the outputs>]
    [ORDER BY <over the outputs> [DESC], ...] [LIMIT n]

* **Aggregates** (measured with noise): ``COUNT(*)``, ``COUNT(x)``, ``COUNT(DISTINCT <unit>)``,
  ``COUNT(DISTINCT x)`` (each unit adds at most ``max_rows`` values), ``SUM``, ``AVG``, ``VAR_POP``,
  ``VAR_SAMP``, ``STDDEV``, ``MEDIAN``, ``QUANTILE_CONT(x, q)``, ``MIN``/``MAX`` (the 0- and
  1-quantiles); each may carry ``FILTER (WHERE <row-level>)``.
* **Outputs** may be any expression of group keys and aggregates (``SUM(x) / COUNT(*)``,
  ``ROUND(AVG(x), 1)``); they, ``HAVING`` and ``ORDER BY`` are *post-processing* of the noisy values,
  free of privacy cost.
* **Joins** with the session's public tables, ``INNER`` or ``LEFT``, on equalities whose public
  columns are a unique key of that table (checked on the public data by the session): each row then
  matches at most one public row, a row-level map that leaves every sensitivity unchanged.
* **Per-unit aggregation**: ``FROM (SELECT <unit>, [keys,] <per-unit aggregates> FROM t ...
  GROUP BY <unit>[, keys] [HAVING ...]) AS u``: the outer query aggregates one row per unit (and key).

Refused, each with what to write instead: joins with the private table itself or on a non-unique
key, CROSS/RIGHT/FULL joins, other subqueries, WITH, raw rows, DISTINCT, window functions,
non-deterministic functions, grouping by the privacy unit, TABLESAMPLE, OFFSET.

sqlglot does the parsing (DuckDB dialect by default; ``dialect="spark"`` for Spark SQL text); this
module walks its tree.  It is hand-written because no library decides which SQL is private.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.query._policy import parse_expression, post_expression, row_expression
from dpkit.query._spec import Aggregate, Join, Key, Output, PerUnit, QuerySpec

__all__ = ["parse_sql", "validate_spec"]

_VARIANCE: dict[type[exp.Expression], tuple[str, bool]] = {
    exp.Variance: ("variance", True),
    exp.VariancePop: ("variance", False),
    exp.Stddev: ("stddev", True),
    exp.StddevSamp: ("stddev", True),
    exp.StddevPop: ("stddev", False),
}
_QUANTILE = (exp.PercentileCont, exp.Quantile, exp.ApproxQuantile, exp.PercentileDisc)
# aggregates a per-unit subquery may compute exactly (each row of the unit table is one unit's own)
_PER_UNIT_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Median, exp.Stddev, exp.StddevPop,
                        exp.StddevSamp, exp.Variance, exp.VariancePop)


def _refuse(reason: str, fix: str) -> UnsupportedError:
    return UnsupportedError(f"{reason} {fix}")


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def _bare(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _is_agg(node: exp.Expression) -> bool:
    return isinstance(node, exp.AggFunc) or (isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc))


def _has_agg(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.AggFunc) for n in node.walk())


def _level(arg: exp.Expression | None, text: str) -> float:
    if not isinstance(arg, exp.Literal) or arg.is_string:
        raise _refuse(f"the quantile level in {text} must be a number literal;", "write e.g. QUANTILE_CONT(x, 0.9).")
    q = float(arg.this)
    if not 0.0 <= q <= 1.0:
        raise InvalidArgumentError(f"the quantile level in {text} must be in [0, 1]; got {q}.")
    return q


def _output_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name
    return _sql(node)


@dataclass
class _Scope:
    """Which table each qualifier names: the private source, public tables, or the per-unit table."""

    private: str                          # alias of the private rows (the table, or the per-unit table)
    columns: Collection[str]              # the private rows' columns
    public: dict[str, tuple[str, Collection[str]]] = field(default_factory=dict)  # alias -> (table, columns)
    seen: set[str] = field(default_factory=set)  # private columns read

    def check(self, node: exp.Expression) -> None:
        """Refuse a column of an unknown table; record the private columns it reads."""
        unknown: list[str] = []
        for col in node.find_all(exp.Column):
            if isinstance(col.this, exp.Star):
                raise _refuse(f"{_sql(col)} selects whole rows;", "name the columns.")
            q = col.table.lower() if col.table else None
            if col.args.get("db") or col.args.get("catalog"):
                raise InvalidArgumentError(f"unknown table in {_sql(col)}: use {self.private!r} or a public table.")
            if q is not None and q != self.private.lower() and q not in self.public:
                raise InvalidArgumentError(f"unknown table {col.table!r} in {_sql(col)}: this query reads "
                                           f"{[self.private, *self.public]}.")
            if q == self.private.lower() or (q is None and col.name in self.columns):
                if col.name not in self.columns:
                    unknown.append(col.name)
                self.seen.add(col.name)
            elif q is None:
                owners = [a for a, (_, cols) in self.public.items() if col.name in cols]
                if not owners:
                    unknown.append(col.name)
            elif col.name not in self.public[q][1]:
                unknown.append(f"{col.table}.{col.name}")
        if unknown:
            raise InvalidArgumentError(
                f"unknown column{'s' if len(unknown) > 1 else ''} {sorted(set(unknown))}; the table has "
                f"{sorted(self.columns)}" + (f" and the public tables {sorted(self.public)}" if self.public
                                                         else "") + ".")

    def is_unit(self, node: exp.Expression, unit: str | None) -> bool:
        node = _bare(node)
        return (unit is not None and isinstance(node, exp.Column) and node.name == unit
                and (not node.table or node.table.lower() == self.private.lower()))


def _joins(tree: exp.Select, scope: _Scope, public_tables: Mapping[str, Collection[str]]) -> tuple[Join, ...]:
    out = []
    for j in tree.args.get("joins") or ():
        target = j.this
        kind, side = (j.args.get("kind") or "").upper(), (j.args.get("side") or "").upper()
        if isinstance(target, (exp.Subquery, exp.Select)):
            raise _refuse("a join with a subquery is not supported;", "join public tables by name.")
        if not isinstance(target, exp.Table):
            raise _refuse(f"cannot join {_sql(target)};", "join a public table by name.")
        name = target.name
        if name.lower() == scope.private.lower() or name.lower() not in {p.lower() for p in public_tables}:
            raise _refuse(
                f"a join with {name!r} is refused: only public tables given to the session "
                f"(public={{...}}: {sorted(public_tables)}) can be joined, since joining private rows with each "
                "other can copy one unit's rows into many, so its contribution could not be bounded;",
                "join public lookup tables on a unique key, or query the private table alone.")
        if kind == "CROSS" or side in ("RIGHT", "FULL") or kind in ("OUTER", "SEMI", "ANTI", "ASOF"):
            raise _refuse(f"a {kind or side} JOIN is not supported;", "use JOIN (inner) or LEFT JOIN on a unique key.")
        if j.args.get("on") is None and not j.args.get("using"):
            raise _refuse(f"the join with {name!r} has no ON or USING condition (a cross join copies every row);",
                          "join on a unique key of the public table: JOIN p ON t.k = p.k.")
        table = next(p for p in public_tables if p.lower() == name.lower())
        alias = target.alias or target.name
        if alias.lower() in scope.public or alias.lower() == scope.private.lower():
            raise InvalidArgumentError(f"the alias {alias!r} is used twice; give each table its own name.")
        scope.public[alias.lower()] = (table, public_tables[table])
        if j.args.get("using"):
            cols = [u.name for u in j.args["using"]]
            on_node = cast(exp.Expression, exp.and_(*[exp.EQ(this=exp.column(c, table=scope.private),
                                                             expression=exp.column(c, table=alias)) for c in cols]))
        else:
            on_node = j.args["on"]
        scope.check(on_node)
        keys = _join_keys(on_node, alias)
        if not keys:
            raise _refuse(f"the join with {name!r} must equate columns of {alias!r} with the row's (t.k = {alias}.k);",
                          "a join on other conditions can match many public rows to one row.")
        out.append(Join(table=table, alias=alias, kind="left" if side == "LEFT" else "inner",
                        on=row_expression(on_node, f"the join with {name}"), keys=tuple(keys)))
    return tuple(out)


def _join_keys(on: exp.Expression, alias: str) -> list[str]:
    """The public columns of ``alias`` that ``on`` equates (a conjunct ``alias.c = <not alias>``)."""
    conjuncts = [cast(exp.Expression, c) for c in on.flatten()] if isinstance(on, exp.And) else [on]
    keys = []
    for conjunct in conjuncts:
        c = _bare(conjunct)
        if not isinstance(c, exp.EQ):
            continue
        for mine, other in ((c.this, c.expression), (c.expression, c.this)):
            mine = _bare(mine)
            if (isinstance(mine, exp.Column) and mine.table.lower() == alias.lower()
                    and not any(col.table.lower() == alias.lower() for col in other.find_all(exp.Column))):
                keys.append(mine.name)
                break
    return sorted(set(keys))


# ---------------------------------------------------------------------------------------------- aggregates
def _aggregate(node: exp.Expression, name: str, unit: str | None, scope: _Scope) -> Aggregate:
    """One measured aggregate (possibly with FILTER) from its syntax node."""
    text = _sql(node)
    cond = None
    if isinstance(node, exp.Filter):
        cond = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
        scope.check(cond)
        node = node.this

    def value(kind: str, v: exp.Expression | None, *, q: float | None = None, sample: bool = False,
              extreme: str | None = None) -> Aggregate:
        if v is None:
            raise InvalidArgumentError(f"{text} needs an argument.")
        if isinstance(v, exp.Distinct):
            raise _refuse(f"{kind.upper()}(DISTINCT ...) is not supported;", "aggregate the values without DISTINCT.")
        scope.check(v)
        column = _bare(v).name if isinstance(_bare(v), exp.Column) else None  # bounds by column, FILTER or not
        if cond is not None:
            v = exp.Case(ifs=[exp.If(this=cond.copy(), true=v.copy())])
        return Aggregate(kind, name, expr=row_expression(v, f"the argument of {name}"), column=column, q=q,
                         sample=sample, extreme=extreme)

    if isinstance(node, exp.WithinGroup):  # PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)
        order = node.expression
        if not isinstance(node.this, _QUANTILE) or not isinstance(order, exp.Order) or len(order.expressions) != 1:
            raise _refuse(f"{text} is not supported;", "write QUANTILE_CONT(x, q) or MEDIAN(x).")
        return value("quantile", order.expressions[0].this, q=_level(node.this.this, text))
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Star):
            if cond is None:
                return Aggregate("count", name)
            return value("count_values", exp.Literal.number(1))
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            if len(cols) != 1:
                raise _refuse(
                    f"{text}: COUNT(DISTINCT ...) takes one expression;", "count distinct values of one column."
                )
            if scope.is_unit(cols[0], unit):
                if cond is not None:
                    raise _refuse(f"{text}: COUNT(DISTINCT {unit}) with FILTER is not supported;",
                                  f"filter the rows with WHERE, or count COUNT(DISTINCT {unit}) per group.")
                assert unit is not None  # scope.is_unit is True only for a named unit
                scope.seen.add(unit)
                return Aggregate("count_units", name)
            return value("count_distinct", cols[0])
        return value("count_values", arg)
    if isinstance(node, exp.Sum):
        return value("sum", node.this)
    if isinstance(node, exp.Avg):
        return value("mean", node.this)
    if type(node) in _VARIANCE:
        kind, sample = _VARIANCE[type(node)]
        return value(kind, node.this, sample=sample)
    if isinstance(node, exp.Median):
        return value("quantile", node.this, q=0.5)
    if isinstance(node, _QUANTILE):
        return value("quantile", node.this, q=_level(node.args.get("expression") or node.args.get("quantile"), text))
    if isinstance(node, (exp.Min, exp.Max)):
        if node.expressions:
            raise _refuse(f"{text}: MIN/MAX take one argument here;", "use LEAST/GREATEST for several values.")
        minimum = isinstance(node, exp.Min)
        return value("quantile", node.this, q=0.0 if minimum else 1.0, extreme="min" if minimum else "max")
    raise _refuse(f"the aggregate {text} is not supported;",
                  "supported: COUNT(*), COUNT(x), COUNT(DISTINCT x), SUM, AVG, VAR_POP, VAR_SAMP, STDDEV, MEDIAN, "
                  "QUANTILE_CONT, MIN, MAX (each with an optional FILTER (WHERE ...)).")


class _Outer:
    """The measured aggregates of a query and the post-processing expressions over them."""

    def __init__(self, keys: list[tuple[str, str]], unit: str | None, scope: _Scope) -> None:
        self.keys = keys                      # (key name, key row-level SQL)
        self.unit, self.scope = unit, scope
        self.aggregates: dict[str, Aggregate] = {}   # aggregate SQL text -> Aggregate
        self.names: set[str] = {k for k, _ in keys}

    def measure(self, node: exp.Expression, name: str | None = None) -> str:
        """The name of the aggregate ``node`` (registered once per distinct SQL text)."""
        text = _sql(node)
        if text in self.aggregates:
            return self.aggregates[text].name
        name = name if name is not None and name not in self.names else text
        if name in self.names:
            raise InvalidArgumentError(f"the output name {name!r} is used twice; give each output its own alias.")
        self.aggregates[text] = _aggregate(node, name, self.unit, self.scope)
        self.names.add(name)
        return name

    def post(
        self, node: exp.Expression, where: str, outputs: Mapping[str, exp.Expression] | None = None
    ) -> exp.Expression:
        """``node`` as post-processing: aggregates and key expressions replaced by result columns."""
        key_of = {sql: name for name, sql in self.keys}

        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, (exp.Identifier, exp.DataType, exp.Var, exp.Star)):
                return n
            if _is_agg(n):
                return exp.column(self.measure(n), quoted=True)
            if isinstance(n, exp.Window):
                raise _refuse(f"a window function in {where} ({_sql(n)}) is not supported:",
                              "window functions mix rows of different privacy units.")
            if not isinstance(n, (exp.Column, exp.Literal)) and not _has_agg(n):
                try:
                    sql = row_expression(n.copy(), where)
                except (UnsupportedError, ValueError):
                    sql = None
                if sql in key_of:
                    return exp.column(key_of[sql], quoted=True)
            if isinstance(n, exp.Column):
                if outputs is not None and not n.table and n.name in outputs:
                    return outputs[n.name].copy()
                try:
                    sql = row_expression(n.copy(), where)
                except (UnsupportedError, ValueError):
                    sql = None
                if sql in key_of:
                    return exp.column(key_of[sql], quoted=True)
                raise _refuse(f"{_sql(n)} in {where} is neither an aggregate nor a GROUP BY key, so it would return "
                              "values of individual rows;", "aggregate it or add it to GROUP BY.")
            return n

        return _transform_outside_aggregates(node.copy(), swap)


def _transform_outside_aggregates(node: exp.Expression,
                                  fn: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Apply ``fn`` top-down, not descending into an aggregate or a node ``fn`` replaced."""
    new: exp.Expression = fn(node)
    if new is not node:
        return new
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _transform_outside_aggregates(value, fn))
        elif isinstance(value, list):
            node.set(key, [_transform_outside_aggregates(v, fn) if isinstance(v, exp.Expression) else v for v in value])
    return node


def _monotone_of(node: exp.Expression, aggregates: set[str], keys: set[str]) -> str | None:
    """The one aggregate ``node`` is a monotone function of (for each fixed row), else None.

    Monotone pieces: the aggregate itself; +, - with a term free of it; *, / by a term free of it (as
    numerator only); unary minus; ROUND, FLOOR, CEIL, CAST to a number; keys and literals are constants.
    A composition of monotone functions of one variable is monotone, so its interval is the image of
    the aggregate's interval's two ends.
    """
    refs = {c.name for c in node.find_all(exp.Column)}
    used = refs & aggregates
    if len(used) != 1 or not refs <= aggregates | keys:
        return None
    (agg,) = used

    def has(n: exp.Expression) -> bool:
        return any(c.name == agg for c in n.find_all(exp.Column))

    def ok(n: exp.Expression) -> bool:
        n = _bare(n)
        if not has(n):
            return True
        if isinstance(n, exp.Column):
            return True
        if isinstance(n, exp.Neg):
            return ok(n.this)
        if isinstance(n, (exp.Add, exp.Sub)):
            return ok(n.this) and ok(n.expression) and not (has(n.this) and has(n.expression))
        if isinstance(n, exp.Mul):
            return (ok(n.this) and not has(n.expression)) or (ok(n.expression) and not has(n.this))
        if isinstance(n, exp.Div):
            return ok(n.this) and not has(n.expression)
        if isinstance(n, (exp.Round, exp.Floor, exp.Ceil)):
            return ok(n.this) and all(
                not has(v) for k, v in n.args.items() if k != "this" and isinstance(v, exp.Expression)
            )
        if isinstance(n, (exp.Cast, exp.TryCast)):
            return n.to.is_type(*exp.DataType.NUMERIC_TYPES) and ok(n.this)
        return False

    return agg if ok(node) else None


# ---------------------------------------------------------------------------------------------- the query
def _select(text: str, dialect: str) -> exp.Select:
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError("the query is empty; write e.g. SELECT category, COUNT(*) FROM t GROUP BY category.")
    try:
        statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
    except ParseError as e:
        raise InvalidArgumentError(f"could not parse the SQL: {e}") from None
    if len(statements) != 1:
        raise _refuse(f"expected one SQL statement, got {len(statements)};", "send one SELECT at a time.")
    tree = statements[0]
    if not isinstance(tree, exp.Select):
        raise _refuse(f"only SELECT queries can be answered privately; got {type(tree).__name__.upper()}.",
                      "write SELECT ... FROM t [WHERE ...] [GROUP BY ...].")
    return tree


def _plain_checks(tree: exp.Select, *, outer: bool) -> None:
    for arg, why, fix in (
        ("with_", "common table expressions (WITH) are not supported;", "query the session's table directly."),
        ("with", "common table expressions (WITH) are not supported;", "query the session's table directly."),
        ("distinct", "SELECT DISTINCT returns individual values;", "select aggregates such as COUNT(*) with GROUP BY."),
        ("qualify", "QUALIFY filters on window functions;", "filter the noisy result with HAVING instead."),
        ("offset", "OFFSET is not supported;", "slice the returned table."),
    ):
        if tree.args.get(arg):
            raise _refuse(why, fix)
    if not outer:
        for arg in ("order", "limit"):
            if tree.args.get(arg):
                raise _refuse(f"{arg.upper()} inside a per-unit subquery is not supported;",
                              "order or limit the outer query's noisy result.")


def _source(tree: exp.Select, table: str) -> exp.Expression:
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        raise _refuse("the query has no FROM clause;", f"write FROM {table}.")
    src: exp.Expression = source.this
    if tree.args.get("sample") is not None or src.args.get("sample") is not None:
        raise _refuse("TABLESAMPLE / USING SAMPLE is not supported: a random sample of rows is not a fixed "
                      "function of the data, and its privacy amplification is not accounted here;",
                      "query the whole table.")
    return src


def _private_table(src: exp.Expression, table: str) -> str:
    """The alias of the session's table in FROM (refusing anything else)."""
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier):
        raise _refuse(f"FROM must name the session's table {table!r}; got {_sql(src)}.",
                      "the data source is fixed when the session is opened.")
    if src.args.get("db") or src.args.get("catalog") or src.name.lower() != table.lower():
        raise InvalidArgumentError(f"unknown table {src.name!r}: this session's table is {table!r}.")
    return src.alias or src.name


def _group_keys(
    tree: exp.Select, scope: _Scope, unit: str | None, table_columns: Collection[str]
) -> list[tuple[str, str, exp.Expression]]:
    """(name, row-level SQL, node) of each GROUP BY key, refusing the privacy unit."""
    group = tree.args.get("group")
    if group is None:
        return []
    for kind in ("rollup", "cube", "grouping_sets"):
        if group.args.get(kind):
            raise _refuse(f"GROUP BY {kind.upper().replace('_', ' ')} is not supported;", "run one query per grouping.")
    if group.args.get("all"):
        raise _refuse("GROUP BY ALL is not supported;", "name the group keys.")
    aliases = {e.alias: e.this for e in tree.expressions if isinstance(e, exp.Alias)}
    out = []
    for g in group.expressions:
        if isinstance(g, exp.Literal) and not g.is_string:  # GROUP BY 1
            i = int(g.this) - 1
            if not 0 <= i < len(tree.expressions):
                raise InvalidArgumentError(f"GROUP BY {g.this} is out of range.")
            item = tree.expressions[i]
            name, g = _output_name(item), (item.this if isinstance(item, exp.Alias) else item)
        elif isinstance(g, exp.Column) and not g.table and g.name in aliases and g.name not in table_columns:
            name, g = g.name, aliases[g.name]  # GROUP BY <alias>; a real column of that name wins, as in DuckDB
        else:
            name = next((_output_name(e) for e in tree.expressions
                         if _sql(e.this if isinstance(e, exp.Alias) else e) == _sql(g)), _sql(g))
        if _has_agg(g):
            raise _refuse(f"an aggregate inside GROUP BY ({_sql(g)}) is not supported:",
                          "aggregates may appear only in the select list, HAVING and ORDER BY.")
        if scope.is_unit(g, unit):
            raise _refuse(f"grouping by the privacy unit {unit!r} would release one group per unit;",
                          "group by attributes shared by many units.")
        scope.check(g)
        out.append((name, row_expression(g, "GROUP BY"), g))
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"GROUP BY keys {names} repeat an output name; give each key its own alias.")
    return out


def _per_unit(sub: exp.Select, alias: str, *, table: str, unit: str, table_columns: Collection[str],
              public_tables: Mapping[str, Collection[str]]) -> tuple[PerUnit, list[str], set[str]]:
    """A FROM-subquery grouped by the privacy unit: its spec, its output columns, the private columns read."""
    _plain_checks(sub, outer=False)
    src = _source(sub, table)
    if not isinstance(src, exp.Table):
        raise _refuse("a per-unit subquery must read the session's table directly;", "nest one level only.")
    inner_alias = _private_table(src, table)
    scope = _Scope(private=inner_alias, columns=table_columns)
    joins = _joins(sub, scope, public_tables)
    group = sub.args.get("group")
    if group is None or not any(scope.is_unit(g, unit) for g in group.expressions):
        raise _refuse(f"a subquery in FROM must group by the privacy unit {unit!r} (one row per unit), or it could "
                      "change whose rows are whose;",
                      f"write FROM (SELECT {unit}, COUNT(*) AS n FROM {table} GROUP BY {unit}) AS u.")
    where = None
    if sub.args.get("where") is not None:
        cond = sub.args["where"].this
        scope.check(cond)
        where = row_expression(cond, "the subquery's WHERE")
    keys: list[Key] = []
    key_sql: dict[str, str] = {}
    for g in group.expressions:
        if scope.is_unit(g, unit):
            continue
        if _has_agg(g):
            raise _refuse(f"an aggregate inside GROUP BY ({_sql(g)}) is not supported:", "group by row-level keys.")
        scope.check(g)
        name = next((_output_name(e) for e in sub.expressions
                     if _sql(e.this if isinstance(e, exp.Alias) else e) == _sql(g)), _output_name(g))
        sql = row_expression(g, "the subquery's GROUP BY")
        keys.append(Key(name=name, expr=sql))
        key_sql[sql] = name
    partials: dict[str, Key] = {}

    def inner(n: exp.Expression, where_: str) -> exp.Expression:
        def swap(m: exp.Expression) -> exp.Expression:
            if isinstance(m, exp.AggFunc):
                if not isinstance(m, _PER_UNIT_AGGREGATES):
                    raise _refuse(f"{_sql(m)} in a per-unit subquery is not supported;",
                                  "use COUNT, SUM, AVG, MIN, MAX, MEDIAN, STDDEV or VARIANCE per unit.")
                text = _sql(m)
                if text not in partials:
                    partials[text] = Key(name=f"__p{len(partials)}", expr=_sql(_safe_aggregate(m, scope, where_)))
                return exp.column(partials[text].name)
            if isinstance(m, (exp.Identifier, exp.DataType, exp.Var, exp.Star)):
                return m
            if isinstance(m, exp.Column):
                scope.check(m)
                if scope.is_unit(m, unit):
                    return exp.column("__u")
                sql = row_expression(m.copy(), where_)
                if sql in key_sql:
                    return exp.column(key_sql[sql], quoted=True)
                raise _refuse(f"{_sql(m)} in a per-unit subquery is neither an aggregate nor one of its GROUP BY keys;",
                              "aggregate it per unit (e.g. MIN(x)) or add it to GROUP BY.")
            if not isinstance(m, exp.Literal) and not _has_agg(m):
                try:
                    sql = row_expression(m.copy(), where_)
                except (UnsupportedError, ValueError):
                    sql = ""  # matches no key
                if sql in key_sql:
                    return exp.column(key_sql[sql], quoted=True)
            return m

        return _transform_outside_aggregates(n.copy(), swap)

    values: list[Key] = []
    outputs = [unit] + [k.name for k in keys]
    for item in sub.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star):
            raise _refuse("SELECT * in a per-unit subquery returns rows;", "select the unit and per-unit aggregates.")
        if scope.is_unit(node, unit) or (not _has_agg(node) and row_expression(node.copy(), "x") in key_sql):
            continue
        name = _output_name(item)
        if name in outputs:
            raise InvalidArgumentError(
                f"the per-unit subquery repeats the column name {name!r}; give each its own alias.")
        expr = inner(node, f"the per-unit value {name}")
        values.append(Key(name=name, expr=row_expression(expr, f"the per-unit value {name}")))
        outputs.append(name)
    having = None
    if sub.args.get("having") is not None:
        having = row_expression(inner(sub.args["having"].this, "the subquery's HAVING"), "the subquery's HAVING")
    spec = PerUnit(alias=alias, source_alias=inner_alias, keys=tuple(keys), aggregates=tuple(partials.values()),
                   values=tuple(values), where=where, having=having, joins=joins)
    return spec, outputs, scope.seen | {unit}


_DOUBLE_ARGUMENT = (exp.Sum, exp.Avg, exp.Median, exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance,
                    exp.VariancePop)


def _safe_aggregate(m: exp.AggFunc, scope: _Scope, where: str) -> exp.AggFunc:
    """A per-unit aggregate whose arguments cannot fail: each checked, re-emitted (CAST -> TRY_CAST) and
    wrapped in TRY; the arguments of sums and averages cast to DOUBLE, which overflows to infinity
    instead of failing (an integer or decimal SUM can overflow and fail the query on one unit's rows)."""
    new = m.copy()

    def safe(v: exp.Expression, double: bool) -> exp.Expression:
        scope.check(v)
        inner = sqlglot.parse_one(row_expression(v.copy(), where), read="duckdb")
        if double:
            inner = exp.Cast(this=inner, to=exp.DataType.build("DOUBLE"))
        return exp.Try(this=inner)

    for key, v in list(new.args.items()):
        if not isinstance(v, exp.Expression) or isinstance(v, exp.Star):
            continue
        if isinstance(v, exp.Distinct):
            v.set("expressions", [safe(e, False) for e in v.expressions])
        else:
            new.set(key, safe(v, isinstance(new, _DOUBLE_ARGUMENT) and key == "this"))
    return new


def parse_sql(text: str, *, table: str, privacy_unit: str, dialect: str = "duckdb",
              table_columns: Collection[str] = (),
              public_tables: Mapping[str, Collection[str]] | None = None) -> QuerySpec:
    """Parse ``text`` into a :class:`QuerySpec`, or refuse with :class:`~dpkit.errors.UnsupportedError`.

    Parameters
    ----------
    text : str
        One SELECT statement (see the module docstring for what is accepted).
    table : str
        The session's table name; ``FROM`` must name it.
    privacy_unit : str
        The privacy unit column (allowed in ``COUNT(DISTINCT ...)``, refused as a group key).
    dialect : str
        sqlglot dialect of ``text`` ("duckdb" or "spark").
    table_columns : collection of str
        The table's columns (to tell ``GROUP BY <alias>`` from ``GROUP BY <column>``, and to refuse
        unknown columns).
    public_tables : mapping, optional
        Public table name -> its columns: the tables that may be joined.

    Examples
    --------
    >>> s = parse_sql("SELECT k, COUNT(*) AS n, AVG(x) FROM t WHERE x > 0 GROUP BY k", table="t", privacy_unit="uid",
    ...               table_columns=["uid", "k", "x"])
    >>> [a.kind for a in s.aggregates], s.where, [k.name for k in s.keys]
    (['count', 'mean'], 'x > 0', ['k'])
    """
    public = dict(public_tables or {})
    tree = _select(text, dialect)
    _plain_checks(tree, outer=True)
    for window in tree.find_all(exp.Window):
        raise _refuse(f"a window function ({_sql(window)}) is not supported:",
                      "window functions mix rows of different privacy units; use GROUP BY.")
    src = _source(tree, table)
    per_unit = None
    if isinstance(src, (exp.Subquery, exp.Select)):
        sub = src.this if isinstance(src, exp.Subquery) else src
        if not isinstance(sub, exp.Select):
            raise _refuse(
                "a subquery in FROM must be one SELECT grouped by the privacy unit;",
                f"write FROM (SELECT {privacy_unit}, COUNT(*) AS n FROM {table} GROUP BY {privacy_unit}) AS u.",
            )
        alias = src.alias or "__units"
        per_unit, unit_columns, private_seen = _per_unit(sub, alias, table=table, unit=privacy_unit,
                                                         table_columns=table_columns, public_tables=public)
        scope = _Scope(private=alias, columns=unit_columns)
    else:
        alias = _private_table(src, table)
        scope = _Scope(private=alias, columns=table_columns)
        private_seen = set()
    joins = _joins(tree, scope, public)
    where = None
    if tree.args.get("where") is not None:
        cond = tree.args["where"].this
        if any(isinstance(n, (exp.Select, exp.Subquery)) for n in cond.walk()):
            raise _refuse("a subquery in WHERE is not supported:", "filter and compute on the session's table only.")
        if _has_agg(cond):
            raise _refuse("an aggregate in WHERE is not supported;", "filter on aggregates with HAVING.")
        scope.check(cond)
        where = row_expression(cond, "WHERE")
    groups = _group_keys(tree, scope, privacy_unit, scope.columns)
    outer = _Outer([(n, s) for n, s, _ in groups], privacy_unit, scope)

    outputs: list[Output] = []
    post_of: dict[str, exp.Expression] = {}  # output name -> its post-processing tree (for HAVING / ORDER BY)
    selected_keys: set[str] = set()
    for item in tree.expressions:
        if isinstance(item, exp.Star):
            raise _refuse("SELECT * returns individual rows;", "select aggregates such as COUNT(*) or SUM(x).")
        name = _output_name(item)
        node = item.this if isinstance(item, exp.Alias) else item
        if name in post_of:
            raise InvalidArgumentError(
                f"output column names must be distinct; {name!r} repeats. Give each an alias (AS name).")
        if _is_agg(node):
            agg = outer.measure(node, name)
            tree_: exp.Expression = exp.column(agg, quoted=True)
            outputs.append(Output(name=name, expr=_sql(tree_), aggregate=agg, monotone_of=agg))
        else:
            tree_ = outer.post(node, "the select list")
            bare = _bare(tree_)
            key = bare.name if isinstance(bare, exp.Column) and bare.name in {n for n, _, _ in groups} else None
            if key is not None:
                selected_keys.add(key)
            outputs.append(Output(name=name, expr=post_expression(tree_, f"the output {name}"), key=key,
                                  monotone_of=None))
        post_of[name] = tree_
    having = None
    if tree.args.get("having") is not None:
        having = post_expression(outer.post(tree.args["having"].this, "HAVING", post_of), "HAVING")
    order: list[tuple[str, bool]] = []
    if tree.args.get("order") is not None:
        names = [o.name for o in outputs]
        for o in tree.args["order"].expressions:
            target = o.this
            if isinstance(target, exp.Literal) and not target.is_string:
                idx = int(target.this) - 1
                if not 0 <= idx < len(names):
                    raise InvalidArgumentError(f"ORDER BY {target.this} is out of range.")
                target = exp.column(names[idx])
            try:
                post = outer.post(target, f"ORDER BY {_sql(target)}", post_of)
            except UnsupportedError:
                raise _refuse(f"ORDER BY {_sql(target)} does not name an output column;",
                              f"order by one of {names} (it sorts the noisy result).") from None
            order.append((post_expression(post, "ORDER BY"), bool(o.args.get("desc"))))
    limit = None
    if tree.args.get("limit") is not None:
        lim = tree.args["limit"].expression
        if not isinstance(lim, exp.Literal) or lim.is_string or int(lim.this) < 0:
            raise InvalidArgumentError("LIMIT must be a non-negative integer literal.")
        limit = int(lim.this)

    aggregates = tuple(outer.aggregates.values())
    if not aggregates:
        raise _refuse("the query has no aggregate, so it would return values of individual rows;",
                      "select COUNT(*), SUM(x), AVG(x), ... with GROUP BY.")
    keys = tuple(Key(name=n, expr=s) for n, s, _ in groups)
    agg_names, key_names = {a.name for a in aggregates}, {k.name for k in keys}
    outputs = [o if o.aggregate is not None or o.key is not None
               else Output(name=o.name, expr=o.expr, monotone_of=_monotone_of(post_of[o.name], agg_names, key_names))
               for o in outputs]
    # keys grouped on but not selected are still released (they label the partitions)
    for k in keys:
        if k.name not in selected_keys and not any(o.name == k.name for o in outputs):
            outputs.append(Output(name=k.name, expr=_sql(exp.column(k.name, quoted=True)), key=k.name))
    identity = ([o.name for o in outputs] == [k.name for k in keys] + [a.name for a in aggregates]
                and all(o.key == o.name or o.aggregate == o.name for o in outputs))
    return QuerySpec(table=table, keys=keys, aggregates=aggregates, where=where, order_by=tuple(order), limit=limit,
                     text=text.strip(), columns=tuple(sorted(scope.seen | private_seen if per_unit is None
                                                             else private_seen)),
                     source_alias=alias, joins=joins, per_unit=per_unit,
                     outputs=() if identity else tuple(outputs), having=having)


# ---------------------------------------------------------------------------------------------- re-validation
def validate_spec(spec: QuerySpec, *, table: str, privacy_unit: str, table_columns: Collection[str] = (),
                  public_tables: Mapping[str, Collection[str]] | None = None) -> QuerySpec:
    """Check a :class:`QuerySpec` from any entry point as strictly as parsed SQL, and rebuild it.

    Every expression (keys, aggregate arguments, WHERE, join conditions, per-unit values, outputs,
    HAVING, ORDER BY) is parsed as one expression, checked against the allow-lists of
    :mod:`dpkit.query._policy` and re-emitted from its syntax tree, so no text of the caller's
    reaches an engine verbatim; the private columns it reads are recomputed from the trees.

    Raises
    ------
    ArgumentTypeError
        If ``spec`` is not a QuerySpec or holds parts of the wrong type.
    InvalidArgumentError, UnsupportedError
        As :func:`parse_sql`, for the same faults.
    """
    if not isinstance(spec, QuerySpec):
        raise ArgumentTypeError(f"expected SQL text or a QuerySpec; got {type(spec).__name__}.")
    if not isinstance(spec.table, str) or spec.table.lower() != table.lower():
        raise InvalidArgumentError(f"unknown table {spec.table!r}: this session's table is {table!r}.")
    public = dict(public_tables or {})
    cols = tuple(table_columns) if table_columns else None

    def checked_joins(joins: tuple[Join, ...], scope: _Scope) -> tuple[Join, ...]:
        out = []
        for j in joins:
            if not isinstance(j, Join) or j.table not in public or j.kind not in ("inner", "left"):
                raise _refuse(f"{j!r} does not join a public table of this session ({sorted(public)});",
                              "join public tables given with public={...}.")
            scope.public[j.alias.lower()] = (j.table, public[j.table])
            node = parse_expression(j.on, f"the join with {j.table}")
            scope.check(node)
            keys = _join_keys(node, j.alias)
            if not keys:
                raise _refuse(f"the join with {j.table!r} must equate columns of {j.alias!r} with the row's;",
                              "join on a unique key.")
            out.append(Join(table=j.table, alias=str(j.alias), kind=j.kind,
                            on=row_expression(node, f"the join with {j.table}"), keys=tuple(keys)))
        return tuple(out)

    private_seen: set[str] = set()
    per_unit = None
    if spec.per_unit is not None:
        pu = spec.per_unit
        if not isinstance(pu, PerUnit):
            raise ArgumentTypeError(f"per_unit must be a PerUnit; got {type(pu).__name__}.")
        inner = _Scope(private=pu.source_alias, columns=cols if cols is not None else _AnyColumns())
        inner_joins = checked_joins(pu.joins, inner)

        def row(text: object, where: str, scope: _Scope) -> str:
            node = parse_expression(text, where)
            scope.check(node)
            return row_expression(node, where)

        keys = tuple(Key(name=str(k.name), expr=row(k.expr, f"the per-unit key {k.name}", inner)) for k in pu.keys)
        partials = []
        for p in pu.aggregates:
            node = parse_expression(p.expr, f"the per-unit aggregate {p.name}")
            if not isinstance(node, _PER_UNIT_AGGREGATES):
                raise _refuse(
                    f"{p.expr!r} is not a per-unit aggregate;", "use COUNT, SUM, AVG, MIN, MAX, ... per unit."
                )
            inner.check(node)
            for arg in node.args.values():
                if isinstance(arg, exp.Expression) and not isinstance(arg, (exp.Star,)):
                    row_expression(arg.copy(), f"the per-unit aggregate {p.name}")
            partials.append(Key(name=str(p.name), expr=_sql(node)))
        unit_table = _Scope(private="__per_unit", columns=[p.name for p in partials] + [k.name for k in keys] + ["__u"])
        values = tuple(Key(name=str(v.name), expr=row(v.expr, f"the per-unit value {v.name}", unit_table))
                       for v in pu.values)
        per_unit = PerUnit(alias=str(pu.alias), source_alias=str(pu.source_alias), keys=keys,
                           aggregates=tuple(partials), values=values,
                           where=None if pu.where is None else row(pu.where, "the subquery's WHERE", inner),
                           having=None if pu.having is None else row(pu.having, "the subquery's HAVING", unit_table),
                           joins=inner_joins)
        private_seen = inner.seen | {privacy_unit}
        scope = _Scope(
            private=per_unit.alias, columns=[privacy_unit] + [k.name for k in keys] + [v.name for v in values]
        )
    else:
        scope = _Scope(private=spec.source_alias or table, columns=cols if cols is not None else _AnyColumns())
    joins = checked_joins(spec.joins, scope)

    def expression(text: object, where: str) -> tuple[str, exp.Expression]:
        node = parse_expression(text, where)
        scope.check(node)
        return row_expression(node, where), node

    keys_out = []
    for k in spec.keys:
        if not isinstance(k, Key) or not isinstance(k.name, str) or not k.name:
            raise ArgumentTypeError(f"group keys must be Key(name, expr) with a non-empty name; got {k!r}.")
        sql, node = expression(k.expr, f"the group key {k.name!r}")
        if scope.is_unit(node, privacy_unit):
            raise _refuse(f"grouping by the privacy unit {privacy_unit!r} would release one group per unit;",
                          "group by attributes shared by many units.")
        keys_out.append(Key(name=k.name, expr=sql))
    aggregates = []
    for a in spec.aggregates:
        if not isinstance(a, Aggregate) or not isinstance(a.name, str) or not a.name:
            raise ArgumentTypeError(f"aggregates must be Aggregate(kind, name, ...) with a non-empty name; got {a!r}.")
        if a.kind in ("count", "count_units"):
            if a.expr is not None:
                raise InvalidArgumentError(f"{a.name}: a {a.kind} aggregate takes no expression; got {a.expr!r}.")
            if a.kind == "count_units":
                scope.seen.add(privacy_unit)
            aggregates.append(Aggregate(a.kind, a.name, q=a.q, sample=a.sample))
            continue
        sql, node = expression(a.expr, f"the argument of {a.name}")
        column = _bare(node).name if isinstance(_bare(node), exp.Column) else None
        reads = {c.name for c in node.find_all(exp.Column)}
        aggregates.append(Aggregate(a.kind, a.name, expr=sql, column=a.column if a.column in reads else column,
                                    q=a.q, sample=a.sample, extreme=a.extreme))
    where = None if spec.where is None else expression(spec.where, "WHERE")[0]
    key_names = [k.name for k in keys_out]
    agg_names = [a.name for a in aggregates]
    result_columns = set(key_names) | set(agg_names)
    outputs = []
    for o in spec.outputs:
        if not isinstance(o, Output):
            raise ArgumentTypeError(f"outputs must be Output(...); got {o!r}.")
        node = parse_expression(o.expr, f"the output {o.name}")
        expr = post_expression(node, f"the output {o.name}", columns=result_columns)
        bare = _bare(node)
        name_of = bare.name if isinstance(bare, exp.Column) else None
        outputs.append(Output(name=str(o.name), expr=expr,
                              aggregate=name_of if name_of in agg_names and o.aggregate == name_of else None,
                              key=name_of if name_of in key_names and o.key == name_of else None,
                              monotone_of=_monotone_of(node, set(agg_names), set(key_names))))
    out_names = [o.name for o in outputs] or key_names + agg_names
    out_trees = {o.name: parse_expression(o.expr, o.name) for o in outputs}
    having = None
    if spec.having is not None:
        having = post_expression(_substitute(parse_expression(spec.having, "HAVING"), out_trees), "HAVING",
                                 columns=result_columns)
    order = []
    for label, desc in spec.order_by:
        if not isinstance(desc, bool):
            raise ArgumentTypeError(f"ORDER BY direction must be a bool (descending); got {desc!r}.")
        if label in out_names and label not in out_trees:
            node = exp.column(label, quoted=True)
        else:
            try:
                node = _substitute(parse_expression(label, "ORDER BY"), out_trees)
            except ValueError:
                raise _refuse(f"ORDER BY {label} does not name an output column;",
                              f"order by one of {out_names} (it sorts the noisy result).") from None
        try:
            order.append((post_expression(node, "ORDER BY", columns=result_columns), desc))
        except (UnsupportedError, ValueError):
            raise _refuse(f"ORDER BY {label} does not name an output column;",
                          f"order by one of {out_names} (it sorts the noisy result).") from None
    if spec.limit is not None and (isinstance(spec.limit, bool) or not isinstance(spec.limit, int) or spec.limit < 0):
        raise InvalidArgumentError(f"LIMIT must be a non-negative integer; got {spec.limit!r}.")
    seen = private_seen if per_unit is not None else scope.seen
    return QuerySpec(table=table, keys=tuple(keys_out), aggregates=tuple(aggregates), where=where,
                     order_by=tuple(order), limit=spec.limit, text=str(spec.text), columns=tuple(sorted(seen)),
                     source_alias=scope.private if per_unit is None else per_unit.alias, joins=joins,
                     per_unit=per_unit, outputs=tuple(outputs), having=having)


class _AnyColumns(Collection[str]):
    """Every name (the schema is checked later, against the engine's)."""

    def __contains__(self, x: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _substitute(node: exp.Expression, outputs: Mapping[str, exp.Expression]) -> exp.Expression:
    """Unqualified column references to output names replaced by the outputs' expressions."""
    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and n.name in outputs:
            return outputs[n.name].copy()
        return n

    return node.transform(swap)
