"""What a DP query asks for, independent of SQL text and of the engine that runs it.

A :class:`QuerySpec` is a grouped aggregation over one table: group keys (row-level expressions),
aggregates over row-level value expressions, an optional row filter, and post-processing (order,
limit) applied to the noisy result.  :mod:`dpkit.query._sql` builds one from SQL;
:mod:`dpkit.query._compile` turns it into engine SQL; :mod:`dpkit.query._noise` into mechanisms.

Expressions are kept as SQL text in DuckDB's dialect (sqlglot transpiles them for Spark).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AGGREGATE_KINDS", "Aggregate", "Key", "QuerySpec"]

# kind -> what the aggregate needs: "bounds" (clamping bounds on its value) and its primitive sums
AGGREGATE_KINDS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "count": (False, ("rows",)),                       # COUNT(*)
    "count_values": (False, ("values",)),              # COUNT(x): rows where x is not NULL/NaN
    "count_units": (False, ("units",)),                # COUNT(DISTINCT <privacy unit>)
    "sum": (True, ("sum",)),                           # SUM(x), x clamped to [lo, hi]
    "mean": (True, ("values", "centered_sum")),        # AVG(x)
    "variance": (True, ("values", "centered_sum", "centered_squares")),  # VAR_POP / VAR_SAMP
    "stddev": (True, ("values", "centered_sum", "centered_squares")),
    "quantile": (True, ("histogram",)),                # MEDIAN(x), QUANTILE_CONT(x, q)
}


@dataclass(frozen=True)
class Key:
    """A group key: its output ``name`` and its row-level SQL ``expr`` (DuckDB dialect)."""

    name: str
    expr: str


@dataclass(frozen=True)
class Aggregate:
    """One aggregate of the select list.

    ``kind`` is a key of :data:`AGGREGATE_KINDS`; ``expr`` the row-level value expression (None for
    COUNT(*) and COUNT(DISTINCT unit)); ``column`` the column name when ``expr`` is a plain column
    (bounds are looked up by it, then by ``name``); ``q`` the quantile level; ``sample`` marks
    VAR_SAMP/STDDEV_SAMP (the release estimates the population form and says so).
    """

    kind: str
    name: str
    expr: str | None = None
    column: str | None = None
    q: float | None = None
    sample: bool = False

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATE_KINDS:
            raise ValueError(f"unknown aggregate kind {self.kind!r}; expected one of {sorted(AGGREGATE_KINDS)}.")
        if self.kind == "quantile" and (self.q is None or not 0.0 <= self.q <= 1.0):
            raise ValueError(f"a quantile needs a level q in [0, 1]; got {self.q!r}.")

    @property
    def needs_bounds(self) -> bool:
        return AGGREGATE_KINDS[self.kind][0]

    @property
    def primitives(self) -> tuple[str, ...]:
        return AGGREGATE_KINDS[self.kind][1]


@dataclass(frozen=True)
class QuerySpec:
    """A grouped aggregation over one table; ``order_by`` and ``limit`` act on the noisy result."""

    table: str
    keys: tuple[Key, ...]
    aggregates: tuple[Aggregate, ...]
    where: str | None = None
    order_by: tuple[tuple[str, bool], ...] = field(default=())  # (output name, descending)
    limit: int | None = None
    text: str = ""  # the SQL it came from, for the ledger and messages
    columns: tuple[str, ...] = ()  # every table column the query reads (checked against the schema)

    def __post_init__(self) -> None:
        if not self.aggregates:
            raise ValueError("a DP query needs at least one aggregate (COUNT, SUM, AVG, ...).")
        names = [k.name for k in self.keys] + [a.name for a in self.aggregates]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"output column names must be distinct; {dup} repeat. Give each an alias (AS name).")
