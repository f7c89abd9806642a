"""What a DP query asks for, independent of SQL text and of the engine that runs it.

A :class:`QuerySpec` is a grouped aggregation over the private table (optionally joined row by row
with public tables, or over a per-unit aggregation of it), and post-processing of the noisy result:

* ``keys``: row-level group-key expressions; ``aggregates``: what is measured with noise;
  ``where``: a row filter.
* ``joins``: public tables joined on a unique key (:class:`Join`), a row-level map that leaves
  sensitivities unchanged.
* ``per_unit``: a FROM-subquery grouped by the privacy unit (:class:`PerUnit`); the outer query
  then aggregates one row per unit (and inner key).
* ``outputs``, ``having``, ``order_by``, ``limit``: post-processing of the noisy values, free of
  privacy cost (:mod:`dpkit.query._post`).  Empty ``outputs`` means: the keys, then the aggregates.

:mod:`dpkit.query._sql` builds one from SQL; :mod:`dpkit.query._compile` turns it into engine SQL;
:mod:`dpkit.query._noise` into mechanisms.  Expressions are SQL text in DuckDB's dialect (sqlglot
transpiles them for Spark); every one of them is re-parsed and allow-listed before use
(:func:`dpkit.query._sql.validate_spec`), whoever built the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpkit.errors import InvalidArgumentError

__all__ = ["AGGREGATE_KINDS", "Aggregate", "Join", "Key", "Output", "PerUnit", "QuerySpec"]

# kind -> (needs clamping bounds, its primitive noisy vectors)
AGGREGATE_KINDS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "count": (False, ("rows",)),                       # COUNT(*)
    "count_values": (False, ("values",)),              # COUNT(x): rows where x is not NULL/NaN
    "count_units": (False, ("units",)),                # COUNT(DISTINCT <privacy unit>)
    "count_distinct": (False, ("distinct",)),          # COUNT(DISTINCT x): at most max_rows values a unit
    "sum": (True, ("sum",)),                           # SUM(x), x clamped to [lo, hi]
    "mean": (True, ("values", "centered_sum")),        # AVG(x)
    "variance": (True, ("values", "centered_sum", "centered_squares")),  # VAR_POP / VAR_SAMP
    "stddev": (True, ("values", "centered_sum", "centered_squares")),
    "quantile": (True, ("histogram",)),                # MEDIAN(x), QUANTILE_CONT(x, q), MIN(x), MAX(x)
}


@dataclass(frozen=True, slots=True)
class Key:
    """A group key: its output ``name`` and its row-level SQL ``expr`` (DuckDB dialect)."""

    name: str
    expr: str


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One measured aggregate.

    ``kind`` is a key of :data:`AGGREGATE_KINDS`; ``expr`` the row-level value expression (None for
    COUNT(*) and COUNT(DISTINCT unit)); ``column`` the column name when ``expr`` is a plain column
    (bounds are looked up by ``name``, then by it); ``q`` the quantile level; ``sample`` marks
    VAR_SAMP/STDDEV_SAMP (the release estimates the population form and says so); ``extreme`` is
    "min" or "max" for MIN/MAX (released as the 0- or 1-quantile).
    """

    kind: str
    name: str
    expr: str | None = None
    column: str | None = None
    q: float | None = None
    sample: bool = False
    extreme: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATE_KINDS:
            raise InvalidArgumentError(
                f"unknown aggregate kind {self.kind!r}; expected one of {sorted(AGGREGATE_KINDS)}.")
        if self.kind == "quantile" and (self.q is None or not 0.0 <= self.q <= 1.0):
            raise InvalidArgumentError(f"a quantile needs a level q in [0, 1]; got {self.q!r}.")
        if self.extreme not in (None, "min", "max"):
            raise InvalidArgumentError(f"extreme must be None, 'min' or 'max'; got {self.extreme!r}.")

    @property
    def needs_bounds(self) -> bool:
        return AGGREGATE_KINDS[self.kind][0]

    @property
    def primitives(self) -> tuple[str, ...]:
        return AGGREGATE_KINDS[self.kind][1]


@dataclass(frozen=True, slots=True)
class Join:
    """A public table joined to each row: ``kind`` "inner" or "left", on ``on`` (row-level SQL).

    ``keys`` are the public table's columns that ``on`` equates with the row's; they must be unique
    in the public table (checked by the session on the public data), so that each row matches at
    most one public row and a unit's contribution is unchanged.
    """

    table: str
    alias: str
    kind: str
    on: str
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PerUnit:
    """A per-unit aggregation in FROM: one row per (unit, ``keys``) with per-unit ``values``.

    ``aggregates`` are the exact per-unit aggregates (name -> SQL with one aggregate call over the
    base table's rows); ``values`` and ``having`` are row-level SQL over those names and the keys.
    Exact per-unit values are never released: the outer query measures them with noise.
    """

    alias: str
    source_alias: str
    keys: tuple[Key, ...]
    aggregates: tuple[Key, ...]
    values: tuple[Key, ...]
    where: str | None = None
    having: str | None = None
    joins: tuple[Join, ...] = ()


@dataclass(frozen=True, slots=True)
class Output:
    """One output column: post-processing SQL ``expr`` over the result's key and aggregate names.

    ``aggregate``/``key``: the name it is exactly (then it takes that column's values and interval);
    ``monotone_of``: the one aggregate it is a monotone function of (its interval is the image of
    that aggregate's interval), else None (no interval: it combines several noisy values).
    """

    name: str
    expr: str
    aggregate: str | None = None
    key: str | None = None
    monotone_of: str | None = None


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """A grouped aggregation over the session's table, and post-processing of its noisy result."""

    table: str
    keys: tuple[Key, ...]
    aggregates: tuple[Aggregate, ...]
    where: str | None = None
    order_by: tuple[tuple[str, bool], ...] = field(default=())  # (output name or SQL over outputs, descending)
    limit: int | None = None
    text: str = ""  # the SQL it came from, for the ledger and messages
    columns: tuple[str, ...] = ()  # private-table columns the query reads (checked against the schema)
    source_alias: str = ""  # the private table's name in expressions (defaults to ``table``)
    joins: tuple[Join, ...] = ()
    per_unit: PerUnit | None = None
    outputs: tuple[Output, ...] = ()
    having: str | None = None

    def __post_init__(self) -> None:
        if not self.aggregates:
            raise InvalidArgumentError("a DP query needs at least one aggregate (COUNT, SUM, AVG, ...).")
        names = [k.name for k in self.keys] + [a.name for a in self.aggregates]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidArgumentError(
                f"output column names must be distinct; {dup} repeat. Give each an alias (AS name).")
        outs = [o.name for o in self.outputs]
        dup = sorted({n for n in outs if outs.count(n) > 1})
        if dup:
            raise InvalidArgumentError(
                f"output column names must be distinct; {dup} repeat. Give each an alias (AS name).")
        if not self.source_alias:
            object.__setattr__(self, "source_alias", self.table)

    @property
    def output_names(self) -> list[str]:
        """The result's columns, in order."""
        if self.outputs:
            return [o.name for o in self.outputs]
        return [k.name for k in self.keys] + [a.name for a in self.aggregates]
