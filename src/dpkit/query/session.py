r"""A DP session over one table: plan, bound, aggregate in the engine, noise, record, return.

:class:`Session` ties a table (file, dataframe, DuckDB table or Spark DataFrame) to its privacy
unit column and to a durable ledger (:class:`~dpkit.ledger.SQLiteLedger`) holding the budget.
``session.sql(text, epsilon=..., bounds=...)`` answers one aggregate query:

1. parse and validate (:mod:`dpkit.query._sql`): every expression, whether from SQL text or a
   hand-built :class:`~dpkit.query.QuerySpec`, is parsed as one expression, allow-listed and
   re-emitted from its syntax tree (:mod:`dpkit.query._policy`); check columns and types against the
   schema, resolve clamping bounds, split the budget (:mod:`dpkit.query._noise`), and bind the
   compiled SQL in the engine without running it, so that an error the schema alone determines is
   raised here.  Nothing reads a row: ``plan()`` stops at this step and spends nothing;
2. record the query's guarantee in the ledger as spent (an atomic check-and-record, so concurrent
   sessions cannot overspend together; a refusal here costs nothing and runs nothing);
3. run the bounding-and-aggregation SQL in the engine (:mod:`dpkit.query._compile`);
4. add noise and return the result.  Once the engine may read a row the spend is already
   committed: no failure, callback or abort can hand it back, and a failure says nothing of what
   failed (:class:`DataDependentFailure`).  Expressions are made total instead: every user
   expression that is not a bare column runs under DuckDB's TRY (Spark: ANSI mode off), CAST is
   TRY_CAST, ``error()`` is refused, and every step after the engine is total over what the
   engine can return (NaN, infinities, NULL, huge integers; non-scalar group keys are refused from
   the schema).

Policies (all documented in the README, with the threat model):

* NULL or NaN in a value is dropped before bounding (as SQL's SUM/AVG ignore NULL); COUNT(*)
  counts the row.  A dropped value depends only on its own row, so sensitivities are unchanged.
  Rows whose privacy unit is NULL are dropped: they belong to no unit that could be bounded.
* An empty table is answered like any other (noisy zeros); whether a table has rows is not public.
* The schema is public: the declared one for CSV and JSON files (their types would otherwise be
  guessed from the values), the file's own for Parquet, the frame's or table's own otherwise.  A
  pandas column of dtype object or category (or of Python strings) has no type of its own (a
  category's categories are usually the data's values) and is read as text, each value by its
  ``str`` (a lone surrogate replaced); a pandas index is not a column.
* Released rows are in a fixed order: the public keys' order, or (for privately selected groups)
  a total order of the released key values alone, never the engine's order.
* Estimates are for the *bounded* data (clamped values, at most ``max_rows`` rows per unit and
  partition, ``max_partitions`` partitions per unit); intervals cover that bounded value with the
  stated confidence, from the noise law alone.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
from sqlglot import exp as _exp

from dpkit._math import check_count
from dpkit._math.bisection import bisect_monotone
from dpkit.errors import ArgumentTypeError, DataDependentFailure, InvalidArgumentError, UnsupportedError
from dpkit.accounting.items import PrivacyItem
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP
from dpkit.ledger import Ledger, SQLiteLedger, open_ledger
from dpkit.query._backends import DuckDBBackend, SparkBackend, is_numeric_type
from dpkit.query._compile import (Compiled, ValueColumn, compile_query, constant_parts, engine_sql, join_equalities,
                                  literal, rows_source)
from dpkit.mechanisms import Exponential, Geometric, Laplace
from dpkit.query._noise import INTEGER_PRIMITIVES, Measurement, Selection, Split, epsilon_for_rho
from dpkit.query._post import check_post
from dpkit.query._result import QueryResult, finish_aggregates, format_guarantee
from dpkit.query._spec import Aggregate, Key, QuerySpec
from dpkit.query._keys import PublicKeys
from dpkit.query._keys import build as build_public_keys
from dpkit.query._keys import forget as forget_public_keys
from dpkit.query._policy import check_key_type
from dpkit.query._sql import parse_sql, validate_spec
from dpkit.random import resolve_rng

__all__ = ["DataDependentFailure", "QueryPlan", "Session"]

# quantiles: the default grid (2**20 buckets of [lo, hi]) and the largest (the sampler's runs sum to <= 2**30)
QUANTILE_BUCKETS = 1 << 20
QUANTILE_BUCKETS_MAX = (1 << 30) - 1

Guarantee = PureDP | ApproxDP | ZCDP | GaussianDP  # a query's cost, in its ledger budget's family

REPORT_SHARE = 0.05  # the bounding report's default share of a query's epsilon
# key types whose DuckDB order is the release order's (dpkit.query._keys.release_order): plain integers
_INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"})
_CHECK_TABLE = re.compile(r"dpkit_(?:null_row|probe|empty)_[0-9a-f]+")
_ENGINE_CONTEXT = re.compile(r"\n\s*(?:LINE \d+:|== SQL|== DataFrame|JVM stacktrace:|\tat )")


def _engine_message(exc: BaseException) -> str:
    """An engine's error message for a refusal made before anything is read: one line, without the engine's
    excerpt of dpkit's compiled plan (DuckDB's "LINE 1: ...", Spark's "== SQL ... ==" and JVM frames), which
    quotes the check's tables, whose names are random (sessions may share a connection) and cut anywhere."""
    message = _CHECK_TABLE.sub("dpkit_check", _ENGINE_CONTEXT.split(str(exc).strip(), 1)[0])
    return " ".join(message.split())
_BOUNDS_HINT = "pass bounds={{{name!r}: (lo, hi)}} (command line: --bounds {name}=LO:HI)"


@dataclass
class QueryPlan:
    """Everything decided before data is touched: the SQL each engine runs, the split, the cost."""

    spec: QuerySpec
    compiled: Compiled
    split: Split
    guarantee: Guarantee  # the cost in the budget's family (shown), from ``charge``
    max_partitions: int
    max_rows: int
    public_keys: PublicKeys | None
    bounds: dict[str, tuple[Any, Any]]  # clamping bounds used: numbers, or ISO text for dates and timestamps
    noise: str
    dialect: str
    values: dict[str, ValueColumn] = field(default_factory=dict)
    accuracy: dict[str, float] | None = None  # the targets epsilon was chosen for, if it was
    charge: PrivacyItem | None = None  # what the ledger is charged: the batch of the mechanisms built

    @property
    def sql(self) -> str:
        """The main statement in the session engine's dialect."""
        return self.compiled.sql(self.dialect)

    def measurements(self) -> list[dict[str, Any]]:
        """One row per noisy vector: aggregate, primitive, noise, budget share, sensitivity, scale, and the
        95% half-width of each cell's interval (for privately selected groups: per released group, as if one)."""
        g = len(self.public_keys) if self.public_keys is not None else 1
        return [m.describe(g) for m in self.split.measurements]

    def half_widths(self, confidence: float = 0.95) -> dict[str, dict[str, float]]:
        """Aggregate -> primitive -> the half-width of its cells' intervals, known before anything runs.

        COUNT and SUM cells have exactly this half-width; AVG and VARIANCE combine their count and sums,
        so their half-width also depends on the (noisy) count; quantiles have NaN (their error is in ranks).
        """
        g = len(self.public_keys) if self.public_keys is not None else 1
        out: dict[str, dict[str, float]] = {}
        n_prims = {a.name: len(a.primitives) for a in self.spec.aggregates}
        for m in self.split.measurements:
            level = 1.0 - (1.0 - confidence) / n_prims[m.aggregate]
            out.setdefault(m.aggregate, {})[m.primitive] = m.half_width(g, level)
        return out

    def __str__(self) -> str:
        lines = [f"query: {self.spec.text}", f"cost: {format_guarantee(self.guarantee)}"
                 + (f" (the smallest epsilon whose 95%-or-given-level half-widths meet {self.accuracy})"
                    if self.accuracy else ""),
                 f"contribution bounds: max_partitions={self.max_partitions}, max_rows={self.max_rows}"]
        if self.bounds:
            lines.append("clamping: " + ", ".join(f"{k} in [{lo:g}, {hi:g}]" if isinstance(lo, float) else
                                                  f"{k} in [{lo}, {hi}]" for k, (lo, hi) in self.bounds.items()))
        sel = self.split.selection
        if self.public_keys is not None and self.spec.keys:
            lines.append(f"partitions: {len(self.public_keys)} public keys")
        elif sel is not None:
            lines.append(f"partitions: private selection ({sel.noise} noise of scale {sel.scale:.4g}), released "
                         f"where the noisy count of units reaches {sel.threshold} (epsilon {sel.epsilon:g}, "
                         f"delta {sel.delta_spent:.3g})")
        lines.append("budget split:")
        for name, (e, d) in self.split.shares().items():
            if self.split.rho > 0.0:
                lines.append(f"  {name}: rho {e:.6g}")
            else:
                lines.append(f"  {name}: epsilon {e:.6g}" + (f", delta {d:.3g}" if d else ""))
        lines.append("measurements:")
        for row in self.measurements():
            extra = ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                              if k not in ("aggregate", "primitive"))
            lines.append(f"  {row['aggregate']} / {row['primitive']}: {extra}")
        return "\n".join(lines)


def _check_int(name: str, value: object, *, most: int = 10**9) -> int:
    """A count of at most ``most``: :func:`dpkit._math.check_count` (IntegerTypeError, also a ValueError)."""
    return check_count(name, value, maximum=most)


def _check_budget_number(name: str, value: object, *, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ArgumentTypeError(f"{name} must be a number; got {type(value).__name__}.")
    x = float(value)
    if math.isnan(x) or math.isinf(x) or x < 0 or (x == 0 and not allow_zero):
        raise InvalidArgumentError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}; got {value!r}.")
    return x


def _declared(charge: PrivacyItem, headline: Guarantee) -> PrivacyItem:
    """The item a query charges: the mechanisms' own bounds in every family, with the pure and (epsilon, delta)
    families raised to the declared cost when that is larger (the split's shares are rounded down, so the
    mechanisms' sum is a hair below what was asked: charging what was asked keeps budgets in round numbers and
    is an upper bound all the same), and the declared cost as the headline a ledger row shows."""
    eps, approx = charge.epsilon, charge.approx
    if isinstance(headline, PureDP):
        h = float(headline.epsilon)
        eps = max(eps, h)
        approx = (max(approx[0], h), approx[1]) if approx is not None else (h, 0.0)
    elif isinstance(headline, ApproxDP) and approx is not None:
        approx = (max(approx[0], float(headline.epsilon)), max(approx[1], float(headline.delta)))
    return replace(charge, epsilon=eps, approx=approx, headline=headline)


def session_filter(budget: ApproxDP) -> dict[str, float]:
    """The privacy filter of a new SQLite ledger a :class:`Session` creates with an ApproxDP budget: zCDP
    (Feldman & Zrnic 2021, Thm 3.1) and basic composition (Rogers et al. 2016, Thm 3.6) side by side, each
    with half of delta.  A query runs while one of them admits it; one that stops admitting stops for good
    (valid with the sum of the shares: :class:`dpkit.accounting.filters.FilterSet`)."""
    half = float(budget.delta) / 2.0  # exact: halving a double
    return {"zcdp": half, "basic": half}


class Session:
    """Differentially private aggregate queries over one table, with a durable budget ledger.

    Parameters
    ----------
    data : str or path, pandas/Polars/Arrow table, DuckDB connection, or Spark DataFrame
        A CSV/Parquet/JSON file (read in place by DuckDB, or by Spark with ``engine="spark"``), a
        dataframe (scanned in place by DuckDB), a DuckDB connection (with ``table=``), or a
        ``pyspark.sql.DataFrame`` (classic or Spark Connect).
    privacy_unit : str
        The column identifying whose data a row is (e.g. ``user_id``); neighbouring tables differ
        by all rows of one unit.
    ledger : str, path, URL or Ledger
        Where spends are recorded durably: a SQLite file, a ``postgresql://`` URL (a shared PostgreSQL
        ledger) or an open ledger (created if missing; then ``budget`` is required).
    budget : PureDP, ApproxDP, ZCDP or GaussianDP, optional
        The total budget of a new ledger; an existing ledger keeps its own (a different one is refused).
        Each query is charged in the budget's family the guarantee of the mechanisms it builds (pure
        epsilon, (epsilon, delta), zCDP rho or Gaussian-DP mu), and the ledger's privacy filter decides,
        over the whole adaptive sequence, whether it fits (README "How a budget composes").  The ledger
        records each query's privacy item (every family's bound of its mechanisms,
        :func:`dpkit.accounting.items.combine`), so
        under an ``(epsilon, delta)`` budget the filter composes it as tightly as it can.  A new SQLite
        ledger with an ApproxDP budget runs :func:`session_filter`: a zCDP filter and a basic filter side
        by side, delta split evenly, so that Laplace and Gaussian queries compose by zCDP while they may,
        and private group selection (an (epsilon, delta) guarantee with no zCDP bound) still fits later
        under basic composition (see :class:`dpkit.accounting.filters.FilterSet`).
    table : str, default "t"
        The name queries use in ``FROM`` (for a DuckDB connection, the table to read).
    engine : "duckdb" or "spark", optional
        For a file: DuckDB by default; "spark" reads it with ``spark`` (or a local SparkSession).
    spark : SparkSession, optional
        For ``engine="spark"`` on a file, or to read ``table`` from a Spark catalog.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> from dpkit.random import insecure_seeded
    >>> df = pd.DataFrame({"uid": [1, 1, 2, 3], "k": ["a", "b", "a", "a"], "x": [1.0, 2.0, 3.0, 4.0]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     s = Session(df, privacy_unit="uid", ledger=f"{d}/b.db", budget=PureDP(1.0))
    ...     r = s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=0.5, keys={"k": ["a", "b"]},
    ...               max_partitions=2, max_rows=1, rng=insecure_seeded(0))
    ...     print(r.columns, len(r.rows), s.remaining())
    ('k', 'n') 2 0.5-DP
    """

    def __init__(self, data: Any, *, privacy_unit: str, ledger: str | os.PathLike[str] | SQLiteLedger,
                 budget: PureDP | ApproxDP | ZCDP | GaussianDP | None = None, table: str = "t",
                 engine: str | None = None,
                 spark: Any = None, schema: dict[str, str] | None = None, public: dict[str, Any] | None = None,
                 max_partitions: int | None = None, max_rows: int | None = None) -> None:
        if not isinstance(privacy_unit, str) or not privacy_unit:
            raise InvalidArgumentError("privacy_unit must name the column that identifies a person (e.g. 'user_id').")
        if not isinstance(table, str) or not table.isidentifier():
            raise InvalidArgumentError(f"table must be a plain SQL name such as 't'; got {table!r}.")
        self._backend = self._open(data, table=table, engine=engine, spark=spark, schema=schema)
        self.table = table
        self.privacy_unit = privacy_unit
        self._schema = self._backend.schema()
        if privacy_unit not in self._schema:
            raise InvalidArgumentError(f"the privacy unit column {privacy_unit!r} is not in the table; its columns "
                                       f"are {sorted(self._schema)}.")
        self.max_partitions = None if max_partitions is None else _check_int("max_partitions", max_partitions)
        self.max_rows = None if max_rows is None else _check_int("max_rows", max_rows)
        self._public: dict[str, tuple[str, dict[str, str]]] = {}  # name -> (engine relation, schema)
        self._unique: dict[tuple[str, tuple[str, ...]], bool] = {}
        for name, pdata in (public or {}).items():
            if not isinstance(name, str) or not name.isidentifier() or name.lower() == table.lower():
                raise InvalidArgumentError(f"a public table needs a plain SQL name other than {table!r}; got {name!r}.")
            relation = self._backend.register_public(name, pdata)
            self._public[name] = (relation, self._backend.schema_of(relation))
        if isinstance(ledger, Ledger):
            if budget is not None and budget != ledger.budget:
                raise InvalidArgumentError(f"the ledger's budget is {ledger.budget}; got budget={budget}.")
            self.ledger: Ledger = ledger
        else:
            new_file = "://" not in str(ledger) and not Path(ledger).exists()
            chosen = (session_filter(budget) if isinstance(budget, ApproxDP) and budget.delta > 0 and new_file
                      else None)
            self.ledger = open_ledger(ledger, budget=budget, filter=chosen)

    @staticmethod
    def _open(data: Any, *, table: str, engine: str | None, spark: Any,
              schema: dict[str, str] | None) -> DuckDBBackend | SparkBackend:
        if engine not in (None, "duckdb", "spark"):
            raise InvalidArgumentError(f"engine must be 'duckdb' or 'spark'; got {engine!r}.")
        module = type(data).__module__
        if schema is not None and not isinstance(data, (str, os.PathLike)):
            raise InvalidArgumentError(
                "schema= declares the types of a CSV, JSON or Parquet file; a dataframe or a table "
                "already has its own types (convert them there, e.g. pandas.read_csv(dtype=...)).")
        if module.startswith("pyspark"):
            if engine == "duckdb":
                raise InvalidArgumentError("a Spark DataFrame runs on Spark; drop engine='duckdb'.")
            return SparkBackend.from_dataframe(data)
        if module.startswith(("duckdb", "_duckdb")) or type(data).__name__ == "DuckDBPyConnection":
            return DuckDBBackend.from_connection(data, table)
        if isinstance(data, (str, os.PathLike)):
            if engine == "spark":
                if spark is None:
                    from pyspark.sql import SparkSession

                    spark = SparkSession.builder.master("local[*]").appName("dpkit").getOrCreate()
                return SparkBackend.from_file(spark, data, schema=schema)
            return DuckDBBackend.from_file(data, schema=schema)
        if engine == "spark" and spark is not None and data is None:
            return SparkBackend.from_table(spark, table)
        if any(module.startswith(m) for m in ("pandas", "polars", "pyarrow")):
            return DuckDBBackend.from_dataframe(data)
        raise ArgumentTypeError(
            f"cannot read a table from {type(data).__name__}; pass a file path, a pandas/Polars/Arrow "
            "dataframe, a DuckDB connection with table=, or a Spark DataFrame.")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> Session:
        """A session over a CSV, Parquet or JSON file (see the class parameters)."""
        return cls(Path(path), **kwargs)

    @property
    def engine(self) -> str:
        return self._backend.name

    @property
    def schema(self) -> dict[str, str]:
        return dict(self._schema)

    def remaining(self) -> Any:
        """The budget left in the ledger (every session sharing the file sees the same)."""
        return self.ledger.remaining()

    def close(self) -> None:
        forget_public_keys(self._backend)
        self._backend.close()
        self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ planning
    def plan(self, query: str | QuerySpec, *, epsilon: float | None = None, delta: float = 0.0,
             bounds: dict[str, tuple[float, float]] | None = None, max_partitions: int | None = None,
             max_rows: int | None = None,
             keys: Any = None, noise: str | None = None, split: dict[str, float] | None = None,
             quantile_buckets: int = QUANTILE_BUCKETS, dialect: str = "duckdb", partition_order: str = "hash",
             selection: str | None = None, bounding_report: bool = True,
             accuracy: dict[str, float] | None = None, confidence: float = 0.95,
             rho: float | None = None, quantile_intervals: bool = False) -> QueryPlan:
        """Validate a query and decide its bounding, split and cost, without reading data or spending.

        Parameters are those of :meth:`sql`.
        """
        budget = self.ledger.budget
        given = [n for n, v in (("epsilon", epsilon), ("rho", rho), ("accuracy", accuracy)) if v is not None]
        if len(given) != 1:
            raise InvalidArgumentError(
                "give exactly one of epsilon (the cost), rho (a zCDP cost) or accuracy (target "
                f"half-widths, from which the smallest epsilon that meets them is computed); got "
                f"{' and '.join(given) if given else 'none'}.")
        r = 0.0
        if rho is not None:
            r = _check_budget_number("rho", rho, allow_zero=False)
            if isinstance(budget, (PureDP, GaussianDP)):
                raise UnsupportedError(
                    f"rho= gives a zCDP cost, which a {type(budget).__name__} budget cannot be charged ("
                    + ("a pure budget takes only pure-DP spends" if isinstance(budget, PureDP)
                       else "zCDP implies no Gaussian-DP bound")
                    + "). Give epsilon= (Laplace noise) instead, or use a ZCDP or ApproxDP budget.")
            if delta:
                raise InvalidArgumentError(
                    "a query given rho= has no delta of its own; drop delta= (its (epsilon, delta) "
                    "follows from the budget's conversion).")
        eps = _check_budget_number("epsilon", epsilon if epsilon is not None else 1.0, allow_zero=False)
        dl = _check_budget_number("delta", delta, allow_zero=True)
        if dl >= 1.0:
            raise InvalidArgumentError(f"delta must be < 1; got {delta!r}.")
        # at most 2**30 - 1: the exponential mechanism's b + 1 candidate edges are handed to the exact sampler as
        # runs whose lengths must sum to at most 2**30 (memory is O(occupied buckets), never O(b): see
        # _result._quantiles), so a larger grid is refused here, before the spend
        buckets = _check_int("quantile_buckets", quantile_buckets, most=QUANTILE_BUCKETS_MAX)
        if not isinstance(quantile_intervals, bool):
            raise ArgumentTypeError(f"quantile_intervals must be True or False; got {quantile_intervals!r}.")
        if noise is None:  # Gaussian noise where the cost is zCDP; Laplace (pure, or (eps, delta)) otherwise
            noise = "gaussian" if r > 0.0 or (isinstance(budget, ZCDP) and dl > 0.0) else "laplace"
        if noise == "gaussian" and isinstance(budget, GaussianDP):
            raise UnsupportedError(
                "dpkit's Gaussian noise is a grid-safe discrete Gaussian, certified by zCDP (CKS 2020) but not "
                f"by a Gaussian-DP (mu) bound, so a {budget} budget cannot be charged for it. Use Laplace noise "
                "(noise='laplace'; its mu follows from pure DP), or a ZCDP budget for Gaussian answers.")
        if noise not in ("laplace", "gaussian"):
            raise InvalidArgumentError(f"noise must be 'laplace' or 'gaussian'; got {noise!r}.")
        selection = noise if selection is None else selection
        if selection not in ("laplace", "gaussian"):
            raise InvalidArgumentError(f"selection must be 'laplace' or 'gaussian'; got {selection!r}.")
        if partition_order not in ("hash", "md5"):
            raise InvalidArgumentError(f"partition_order must be 'hash' or 'md5'; got {partition_order!r}.")
        public_columns = {name: list(schema) for name, (_, schema) in self._public.items()}
        if not isinstance(query, QuerySpec):
            query = parse_sql(query, table=self.table, privacy_unit=self.privacy_unit, dialect=dialect,
                              table_columns=self._schema, public_tables=public_columns)
        # every expression, from SQL text or a hand-built QuerySpec, re-parsed, allow-listed and re-emitted
        spec = validate_spec(query, table=self.table, privacy_unit=self.privacy_unit, table_columns=self._schema,
                             public_tables=public_columns)
        missing = [c for c in spec.columns if c not in self._schema]
        if missing:
            raise InvalidArgumentError(f"unknown column{'s' if len(missing) > 1 else ''} {missing}; the table has "
                                       f"{sorted(self._schema)}.")
        self._check_joins(spec)
        k_max, l_max = self._contribution_bounds(spec, max_partitions, max_rows, keys)
        values = self._values(spec, bounds or {})
        for agg in spec.aggregates:  # the engine computes FLOOR((x - lo) / width) AS BIGINT, outside TRY
            v = values.get(agg.name)
            if agg.kind == "quantile" and v is not None and v.lo is not None and v.hi is not None:
                width = (v.hi - v.lo) / buckets
                if not (width > 0.0 and (v.hi - v.lo) / width <= 2.0 * buckets):
                    raise InvalidArgumentError(
                        f"{agg.name}: the clamping bounds ({v.lo!r}, {v.hi!r}) are too close for {buckets} quantile "
                        "buckets (a bucket's width is not a positive number a double can divide by); widen them "
                        "or pass fewer quantile_buckets.")
        # the keys' types, from the schema alone (the engine binds, it reads no row)
        key_types = self._types([k.expr for k in spec.keys], spec)
        for key, type_name in zip(spec.keys, key_types):
            check_key_type(key.name, type_name)
        public = self._public_keys(spec, keys, key_types)
        if spec.keys and public is None and r > 0.0:
            raise UnsupportedError(
                "GROUP BY without public keys needs private partition selection, which has no zCDP bound (its "
                "delta is the chance of releasing a group only one unit has), so a query given rho= cannot pay "
                "for it. Pass the list of keys (keys= / --keys) if they are public, or give epsilon= and delta= "
                "under an ApproxDP budget.")
        if spec.keys and public is None and dl == 0.0:
            raise UnsupportedError(
                "GROUP BY without public keys needs private partition selection, which needs delta > 0 "
                "(a partition only one unit has would otherwise reveal that unit). Pass delta= (--delta), "
                "or the list of keys (keys= / --keys) if they are public.")
        if partition_order == "md5" and spec.keys:
            floating = [k.name for k, t in zip(spec.keys, key_types) if t.lower() in ("float", "double", "real")
                        or t.lower().startswith(("float", "double"))]
            if floating:
                raise UnsupportedError(
                    f"partition_order='md5' cannot rank floating-point group keys {floating}: DuckDB and Spark print "
                    "doubles differently (1e-05 vs 1.0E-5), so they would keep different partitions. Use "
                    "partition_order='hash', or group by a rounded, integer, decimal or text form of the key.")
        k_eff = 1 if not spec.keys else (min(k_max, len(public)) if public is not None else k_max)
        select = public is None and bool(spec.keys)
        if accuracy is not None:
            g = len(public) if public is not None else 1
            eps = self._epsilon_for(accuracy, confidence, g, lambda e: self._split(
                spec, values, e, dl, k_eff, l_max, noise, split, select, selection, bool(bounding_report),
                intervals=quantile_intervals))
        plan_split = self._split(spec, values, eps, dl, k_eff, l_max, noise, split, select, selection,
                                 bool(bounding_report), rho=r, intervals=quantile_intervals)
        salt = secrets.token_hex(16)
        def build(relation: str, keys: PublicKeys | None = public) -> Compiled:
            return compile_query(spec, privacy_unit=self.privacy_unit, values=values, max_partitions=k_max,
                                 max_rows=l_max, public_keys=keys, salt=salt, buckets=buckets,
                                 partition_order=partition_order, relation=relation,
                                 public=self._relations(), report=bool(bounding_report), sort_keys=sort_keys)

        # integer keys of a selection query come back sorted by DuckDB (the release order, confirmed in O(n))
        sort_keys = (public is None and self._backend.dialect == "duckdb"
                     and all(t.upper() in _INTEGER_TYPES for t in key_types))
        compiled = build(self._backend.relation)
        self._bind(compiled, build)
        try:  # HAVING, ORDER BY and expressions over aggregates, once on a made-up row: typos there are free too
            check_post(spec, key_types, {name: v.temporal for name, v in values.items() if v.temporal})
        except Exception as exc:  # noqa: BLE001 - the row is made up from the query; no data is in the message
            raise InvalidArgumentError(
                f"the post-processing of this query (its HAVING, ORDER BY or expressions over aggregates) "
                f"cannot run ({type(exc).__name__}): {str(exc).strip()} Nothing was spent.") from None
        total_delta = math.fsum(m.delta for m in plan_split.measurements)
        if plan_split.selection is not None:
            total_delta += plan_split.selection.delta
        charge = plan_split.charge(spec.text if len(spec.text) <= 200 else spec.text[:197] + "...")
        guarantee = self._headline(charge, eps, dl if total_delta > 0.0 else 0.0, r)
        charge = _declared(charge, guarantee)
        if isinstance(guarantee, ApproxDP) and isinstance(self.ledger.budget, PureDP):
            raise UnsupportedError(
                f"this query costs {guarantee} (its delta pays for "
                f"{'private partition selection' if public is None and spec.keys else 'Gaussian noise'}), but the "
                f"ledger's budget {self.ledger.budget} is pure epsilon-DP with no delta to spend. Give public keys "
                "(keys= / --keys) and Laplace noise for a pure-DP query, or use a ledger created with a delta "
                "budget (--budget-delta).")
        used_bounds: dict[str, tuple[Any, Any]] = {
            v.expr: ((v.lo, v.hi) if v.temporal is None else
                     (str(_from_number(v.lo, v.temporal)), str(_from_number(v.hi, v.temporal))))  # type: ignore[arg-type]  # lo and hi are set together
            for v in values.values() if v.lo is not None}
        return QueryPlan(spec=spec, compiled=compiled, split=plan_split, guarantee=guarantee, charge=charge,
                         max_partitions=k_max, max_rows=l_max, public_keys=public, bounds=used_bounds,
                         noise=noise, dialect=self._backend.dialect, values=values,
                         accuracy=dict(accuracy) if accuracy is not None else None)

    def _headline(self, charge: PrivacyItem, eps: float, dl: float, rho: float) -> Guarantee:
        """The query's cost in the budget's family, from the mechanisms it builds (``charge``); UnsupportedError
        if that family has no bound for them (the message says what to give instead)."""
        budget = self.ledger.budget
        if isinstance(budget, ZCDP) or (rho > 0.0 and isinstance(budget, ApproxDP)):
            if not math.isfinite(charge.rho):
                raise UnsupportedError(
                    f"this query has no zCDP bound (private partition selection has none: its delta is the chance "
                    f"of releasing a group only one unit has), so the ledger's {budget} budget cannot be charged "
                    "for it. Pass the list of keys (keys= / --keys) if they are public.")
            return ZCDP(charge.rho)
        if isinstance(budget, GaussianDP):
            if not math.isfinite(charge.mu):
                raise UnsupportedError(
                    f"this query has no Gaussian-DP bound (private partition selection and dpkit's discrete "
                    f"Gaussian noise have none), so the ledger's {budget} budget cannot be charged for it. Give "
                    "public keys and Laplace noise, or use a ZCDP budget.")
            return GaussianDP(charge.mu)
        # each part meets its share and the shares sum to at most (eps, dl): basic composition
        return PureDP(epsilon=eps) if dl == 0.0 else ApproxDP(epsilon=eps, delta=dl)

    def _relations(self) -> dict[str, str]:
        return {name: relation for name, (relation, _) in self._public.items()}

    def _types(self, exprs: list[str], spec: QuerySpec) -> list[str]:
        """The engine types of row-level expressions over the query's rows (the private table, its joins or
        its per-unit table), from the schemas alone: the engine binds the statement and reads no row."""
        if not exprs:
            return []
        source, _ = rows_source(spec, unit=exp_column(self.privacy_unit), relation=self._backend.relation,
                                public=self._relations())
        cols = ", ".join(f"({e}) AS c{i}" for i, e in enumerate(exprs))
        try:
            return self._backend.describe(engine_sql(f"SELECT {cols} FROM {source}", self._backend.dialect))
        except Exception as exc:  # noqa: BLE001 - binding reads no row, so the engine's message is safe to show
            raise InvalidArgumentError(f"the {self.engine} engine cannot evaluate {exprs} on this table "
                                       f"({type(exc).__name__}): {_engine_message(exc)} Nothing was spent.") from None

    def _check_joins(self, spec: QuerySpec) -> None:
        """Refuse a join whose public columns are not a unique key of the public table (read from the public
        data, which is public): a row could then match several public rows and count several times."""
        joins = list(spec.joins) + (list(spec.per_unit.joins) if spec.per_unit is not None else [])
        for j in joins:
            relation, schema = self._public[j.table]
            missing = [c for c in j.keys if c not in schema]
            if missing:
                raise InvalidArgumentError(
                    f"the public table {j.table!r} has no column {missing}; it has {sorted(schema)}.")
            pairs, _ = join_equalities(j.on)
            if pairs:  # an equality of two types would be cast on every row, and a cast can fail on one row
                types = self._types([side for pair in pairs for side in pair], spec)
                for (a, b), (ta, tb) in zip(pairs, zip(types[::2], types[1::2])):
                    if ta != tb:
                        raise UnsupportedError(
                            f"the join condition {a} = {b} compares {ta} with {tb}: a value that does not convert "
                            f"would fail the query on one unit's row. CAST one side to the other's type, e.g. "
                            f"CAST({a} AS {tb}) = {b}.")
            key = (j.table, j.keys)
            if key not in self._unique:
                self._unique[key] = self._backend.is_unique(relation, list(j.keys))
            if not self._unique[key]:
                raise UnsupportedError(
                    f"the join with {j.table!r} on {list(j.keys)} is refused: those columns are not a unique key of "
                    f"{j.table!r} (some value appears in several rows), so one row could match several public rows "
                    "and one unit's contribution could grow without bound. Join on a unique key (add columns to the "
                    "ON condition, or deduplicate the public table).")

    @staticmethod
    def _epsilon_for(accuracy: dict[str, float], confidence: float, groups: int, split_at: Callable[[float], Split]
                     ) -> float:
        """The smallest epsilon (to 1e-6 relative, rounded up) whose split gives every named aggregate cells
        no wider than its target half-width at ``confidence``; half-widths shrink as epsilon grows."""
        if not isinstance(accuracy, dict) or not accuracy:
            raise ArgumentTypeError("accuracy must map output names to target half-widths, e.g. {'n': 10}.")
        probe = split_at(1.0)
        kinds: dict[str, list[str]] = {m.aggregate: [] for m in probe.measurements}
        for m in probe.measurements:
            kinds[m.aggregate].append(m.primitive)
        for name, target in accuracy.items():
            if name not in kinds:
                raise InvalidArgumentError(
                    f"accuracy names {name!r}, which is not a measured aggregate ({sorted(kinds)}).")
            if len(kinds[name]) != 1 or kinds[name][0] == "histogram":
                raise UnsupportedError(
                    f"a target accuracy for {name!r} cannot be met before the data is read: its error depends on a "
                    "noisy count (AVG, VARIANCE) or is in ranks (quantiles). Give targets for counts and sums.")
            if isinstance(target, bool) or not isinstance(target, (int, float)) or not target > 0 or \
                    not math.isfinite(target):
                raise InvalidArgumentError(
                    f"the target half-width of {name!r} must be a finite number > 0; got {target!r}.")

        def meets(e: float) -> bool:
            sp = split_at(e)
            return all(m.half_width(groups, confidence) <= accuracy[m.aggregate]
                       for m in sp.measurements if m.aggregate in accuracy)

        lo, hi = 1e-6, 1.0
        while not meets(hi):
            lo, hi = hi, hi * 4.0
            if hi > 1e6:
                raise InvalidArgumentError(
                    f"no epsilon up to 1e6 meets the accuracy {accuracy}; ask for wider half-widths.")
        hi = bisect_monotone(meets, lo, hi, side="upper", rtol=1e-6, midpoint="log")
        rounded = float(f"{hi:.6g}")
        return rounded if meets(rounded) else hi

    def _contribution_bounds(self, spec: QuerySpec, max_partitions: int | None, max_rows: int | None,
                             keys: Any) -> tuple[int, int]:
        """max_partitions and max_rows: the query's, else the session's; required where they can bind."""
        k = max_partitions if max_partitions is not None else self.max_partitions
        rows = max_rows if max_rows is not None else self.max_rows
        if k is None:
            if spec.keys:
                raise InvalidArgumentError(
                    "max_partitions is required for a GROUP BY query: the number of groups one unit may contribute "
                    "to (a unit in more groups keeps that many: those it adds most rows to, ties chosen at random). "
                    "Pass max_partitions= (command line --max-partitions), or set it for every query with "
                    "Session(..., max_partitions=...).")
            k = 1
        k = _check_int("max_partitions", k)
        only_units = all(a.kind == "count_units" for a in spec.aggregates)
        one_row_per_unit = spec.per_unit is not None and not spec.per_unit.keys
        if only_units or one_row_per_unit:
            # a unit has one row (or only its presence counts): max_rows = 1 binds nothing and gives the
            # smallest sensitivities, whatever a session-wide default says
            if max_rows is not None:
                _check_int("max_rows", max_rows)
            return k, 1
        if rows is None:
            raise InvalidArgumentError(
                "max_rows is required: the number of rows one unit may contribute to one group (beyond it the "
                "unit's contribution is scaled down), so that e.g. COUNT(*) counts rows, not units. Pass "
                "max_rows= (command line --max-rows), or set it for every query with Session(..., max_rows=...). "
                "A per-unit subquery (FROM (SELECT unit, ... GROUP BY unit)) has one row per unit and needs none.")
        return k, _check_int("max_rows", rows)

    def _bind(self, compiled: Compiled, build: Callable[[str, PublicKeys | None], Compiled]) -> None:
        """Bind every statement of the plan against the schema, running nothing, so that an error the schema
        alone determines (an unknown function, a type mismatch) is raised before anything is reserved.

        DuckDB also runs the plan, without its TRY wrappers, on an empty table of the same schema and on a
        table of one row whose columns are all NULL but the unit (``build`` compiles the plan over another
        relation; both are made from the schema, not the data): some errors that depend on no row appear only
        when a query runs (DuckDB 2 compiles a constant regex pattern then, and evaluates a constant such as
        ``CAST('notadate' AS DATE)`` only when a row reaches it), and under TRY they would turn into NULLs
        and a silently empty answer.  Spark runs the main statement on one row of fixed values
        (:meth:`SparkBackend.probe_row_copy`: a regex that does not compile fails only when a row reaches it),
        and evaluates every part of the plan that reads no column once with ANSI mode on
        (:func:`~dpkit.query._compile.constant_parts`: ``CAST('x' AS DOUBLE)`` fails there, where the plan,
        run with ANSI mode off, would answer NULL on every row).
        A query refused for such a row is refused on its text and the schema alone, so the refusal says
        nothing of the data."""
        try:
            for statement in compiled.statements(self._backend.dialect):
                self._backend.check(statement)
            if isinstance(self._backend, DuckDBBackend):
                # the user's expressions are the same with or without the public keys; without them the check
                # does not join (and scan) a large public key table
                for statement in build(self._backend.empty_copy(), None).statements("duckdb", safe=False):
                    self._backend.run_on_empty(statement)
                # and on one row of NULLs (the unit set): DuckDB evaluates an expression's constant parts
                # only when a row reaches it, so `day > 'notadate'` fails here, not as NULL on every row
                null_row = self._backend.null_row_copy(self.privacy_unit)
                if null_row is not None:
                    for statement in build(null_row, None).statements("duckdb", safe=False):
                        self._backend.run_on_empty(statement)
            else:  # Spark: the main statement (it holds every user expression) on one row of fixed values
                probe = self._backend.probe_row_copy(self.privacy_unit)
                if probe is not None:
                    self._backend.fetch(build(probe, None).sql("spark"))
                # and every part of the plan that reads no column, once with ANSI mode on: with it off (as the
                # plan runs) CAST('x' AS DOUBLE) or make_date(2020, 13, 1) is NULL on every row, charged
                # (one Spark statement for the whole plan: its statements share constants, such as the bounds)
                parts = dict.fromkeys(p for st in compiled.statements("spark") for p in constant_parts(st, "spark"))
                self._backend.check_constants(list(parts))
        except Exception as exc:  # noqa: BLE001 - no row was read, so the engine's message is safe to show
            raise InvalidArgumentError(f"the {self.engine} engine cannot run this query ({type(exc).__name__}): "
                                       f"{_engine_message(exc)} Nothing was spent.") from None

    def _values(self, spec: QuerySpec, bounds: dict[str, tuple[float, float]]) -> dict[str, ValueColumn]:
        if not isinstance(bounds, dict):
            raise ArgumentTypeError("bounds must be a dict mapping a column (or output name) to (lo, hi).")
        known = set(self._schema) | {a.name for a in spec.aggregates} | {a.column for a in spec.aggregates if a.column}
        if spec.per_unit is not None:
            known |= {v.name for v in spec.per_unit.values} | {k.name for k in spec.per_unit.keys}
        for _, schema in self._public.values():
            known |= set(schema)
        unknown = [b for b in bounds if b not in known]
        if unknown:
            raise InvalidArgumentError(
                f"bounds given for {unknown}, which is neither a column of the table nor an output "
                f"name of the query.")
        with_values = [a for a in spec.aggregates if a.expr is not None]
        types = self._types([a.expr for a in with_values if a.expr is not None], spec)
        out: dict[str, ValueColumn] = {}
        index: dict[tuple[Any, ...], int] = {}
        for agg, type_name in zip(with_values, types):
            numeric = is_numeric_type(type_name)
            temporal = _temporal_kind(type_name) if agg.kind == "quantile" else None
            lo = hi = None
            if agg.needs_bounds:
                if not numeric and temporal is None:
                    raise InvalidArgumentError(f"{agg.name}: {agg.expr} has type {type_name}, not a number"
                                               + ("" if agg.kind != "quantile" else " (nor a date or timestamp)")
                                               + f"; {agg.kind} needs numeric values.")
                key = agg.name if agg.name in bounds else agg.column
                if key is None or key not in bounds:
                    raise InvalidArgumentError(f"{agg.name} needs clamping bounds for {agg.expr}: "
                                               + _BOUNDS_HINT.format(name=agg.column or agg.name)
                                               + ". dpkit never derives them from the data, which would leak it"
                                               + " (Session.bounds(...) estimates them with differential privacy).")
                lo, hi = _check_bounds(key, bounds[key], temporal)
            distinct = agg.kind == "count_distinct"
            ident = (agg.expr, lo, hi, numeric, temporal, distinct)
            if ident not in index:
                index[ident] = len(index)
            assert agg.expr is not None  # with_values holds aggregates of an expression only
            out[agg.name] = ValueColumn(expr=agg.expr, lo=lo, hi=hi, index=index[ident],
                                        numeric=numeric or temporal is not None, temporal=temporal, distinct=distinct)
        return out

    def _public_keys(self, spec: QuerySpec, keys: Any, types: list[str]) -> PublicKeys | None:
        """The public keys as a table in the engine (:mod:`dpkit.query._keys`), or None."""
        if keys is None:
            return None
        if not spec.keys:
            raise InvalidArgumentError("keys were given but the query has no GROUP BY.")
        import pyarrow as pa

        names = [k.name for k in spec.keys]
        if isinstance(keys, str):
            if keys not in self._public:
                raise ArgumentTypeError(
                    f"keys={keys!r} is a string: give a dict {{key: [values]}}, a list of key tuples, a "
                    f"dataframe, or the name of a public table ({sorted(self._public)}); for one key "
                    f"value write keys={{{names[0]!r}: [{keys!r}]}}.")
            relation, schema = self._public[keys]
            missing = [n for n in names if n not in schema]
            if missing:
                raise InvalidArgumentError(
                    f"the public table {keys!r} has no column {missing} for the group keys {names}.")
            cols = ", ".join(f"{exp_column(n)} AS k{i}" for i, n in enumerate(names))
            keys = self._backend.fetch_arrow(engine_sql(
                f"SELECT DISTINCT {cols} FROM {relation} ORDER BY {', '.join(f'k{i}' for i in range(len(names)))}",
                self._backend.dialect))
        elif type(keys).__module__.split(".")[0] in ("pandas", "polars", "pyarrow"):
            columns = [str(c) for c in (keys.column_names if hasattr(keys, "column_names") else keys.columns)]
            missing = [n for n in names if n not in columns]
            if missing:
                raise InvalidArgumentError(f"the keys dataframe has no column {missing} for the group keys {names}.")
            table = keys if isinstance(keys, pa.Table) else (keys.to_arrow() if hasattr(keys, "to_arrow")
                                                             else pa.Table.from_pandas(keys, preserve_index=False))
            keys = pa.table({f"k{i}": table.column(n) for i, n in enumerate(names)})
        elif isinstance(keys, dict):
            extra = [k for k in keys if k not in names and k not in {key.expr for key in spec.keys}]
            if extra:
                raise InvalidArgumentError(f"keys given for {extra}, which are not group keys of the query ({names}).")
            lists: dict[str, list[Any]] = {}
            for key in spec.keys:
                vals = keys.get(key.name, keys.get(key.expr))
                if vals is None:
                    raise InvalidArgumentError(
                        f"no public keys given for the group key {key.name!r}; give all of {names} "
                        "or none (then partitions are selected privately).")
                if isinstance(vals, (str, bytes)):
                    raise ArgumentTypeError(f"the public keys of {key.name!r} must be a list of values; got the string "
                                            f"{vals!r} (write [{vals!r}] for one value).")
                lists[key.name] = list(vals)
                if not lists[key.name]:
                    raise InvalidArgumentError("the list of public keys is empty.")
            keys = lists
        else:
            if isinstance(keys, (str, bytes)) or not hasattr(keys, "__iter__"):
                raise ArgumentTypeError(
                    f"keys must be a dict, a list of key tuples, a dataframe or a public table's name; "
                    f"got {type(keys).__name__}.")
            rows = [tuple(r) if isinstance(r, (tuple, list)) else (r,) for r in keys]
            if any(len(r) != len(names) for r in rows):
                raise InvalidArgumentError(f"each public key must have {len(names)} values ({names}).")
            if not rows:
                raise InvalidArgumentError("the list of public keys is empty.")
            keys = rows
        if isinstance(keys, pa.Table) and keys.num_rows == 0:
            raise InvalidArgumentError("the list of public keys is empty.")
        try:
            return build_public_keys(self._backend, names, types, keys, dialect=self._backend.dialect)
        except ValueError:
            raise
        except Exception as exc:  # noqa: BLE001 - public values only: the engine's message is safe to show
            raise InvalidArgumentError(f"the public keys do not convert to the group keys' types {types}: "
                                       f"{type(exc).__name__}: {str(exc).strip()}") from None

    @staticmethod
    def _split(spec: QuerySpec, values: dict[str, ValueColumn], eps: float, dl: float, k: int, l_max: int,
               noise: str, weights: dict[str, float] | None, select: bool, selection: str = "laplace",
               report: bool = False, rho: float = 0.0, intervals: bool = False) -> Split:
        """The split of (eps, dl), or of a zCDP cost ``rho`` > 0 (then eps and dl are unused and there is no
        private selection: it has no zCDP bound)."""
        parts = ([a.name for a in spec.aggregates] + (["partition_selection"] if select else [])
                 + (["bounding_report"] if report else []))
        if weights is None:  # equal shares; the bounding report takes a fixed 5%
            rest = [p for p in parts if p != "bounding_report"]
            w = {p: (1.0 - REPORT_SHARE * report) / len(rest) for p in rest}
            if report:
                w["bounding_report"] = REPORT_SHARE
        else:
            unknown = [p for p in weights if p not in parts]
            missing = [p for p in parts if p not in weights]
            if unknown or missing:
                raise InvalidArgumentError(f"split must give a share to each of {parts}"
                                           + (f"; unknown {unknown}" if unknown else "")
                                           + (f"; missing {missing}" if missing else ""))
            try:
                w = {p: float(weights[p]) for p in parts}
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"split shares must be numbers; got {weights}.") from None
            total = math.fsum(w.values())
            if any(not (x > 0 and math.isfinite(x)) for x in w.values()) or abs(total - 1.0) > 1e-9:
                raise InvalidArgumentError(f"split shares must be > 0 and sum to 1; got {weights} (sum {total!r}).")
            # shares that sum to 1 up to rounding are read as fractions of their sum, so that however they
            # round, the parts never add up to more than the query's (epsilon, delta)
            w = {p: x / total for p, x in w.items()}
        # delta goes to the parts that need it: selection and Gaussian measurements
        if rho > 0.0:
            return Session._split_rho(spec, values, rho, k, l_max, noise, w, report, intervals)
        needs_delta = (["partition_selection"] if select else []) + (
            [a.name for a in spec.aggregates if a.kind != "quantile"] if noise == "gaussian" else [])
        if needs_delta and dl == 0.0:
            raise InvalidArgumentError("noise='gaussian' needs delta > 0.")
        d_share = {p: (dl * w[p] / math.fsum(w[q] for q in needs_delta) if p in needs_delta else 0.0) for p in parts}
        measurements: list[Measurement] = []
        for agg in spec.aggregates:
            v = values.get(agg.name)
            prims = agg.primitives
            # shares shrunk by 1e-12 so that their float sum never exceeds the query's (epsilon, delta)
            e_each = eps * w[agg.name] / len(prims) * (1.0 - 1e-12)
            d_each = d_share[agg.name] / len(prims) * (1.0 - 1e-12)
            for p in prims:
                if p == "histogram":
                    assert v is not None and v.lo is not None and v.hi is not None and agg.q is not None
                    q = float(agg.q)
                    measurements.append(Measurement(agg.name, p, f"hist__{v.index}", l_max * max(q, 1.0 - q), k,
                                                    e_each, 0.0, "exponential", q=q, extreme=agg.extreme,
                                                    intervals=intervals))
                    continue
                bound = _part_bound(p, v, l_max)
                column = p if p in ("rows", "units") else f"{p}__{_value_column(v).index}"
                if column == "units":
                    column = "__units"
                kind = "gaussian" if noise == "gaussian" else ("geometric" if p in INTEGER_PRIMITIVES else "laplace")
                if bound == 0:
                    raise InvalidArgumentError(f"{agg.name}: the clamping bounds give sensitivity 0; widen them.")
                measurements.append(Measurement(agg.name, p, column, float(bound), k, e_each, d_each, kind))
        chosen = (Selection(eps * w["partition_selection"] * (1.0 - 1e-12),
                            d_share["partition_selection"] * (1.0 - 1e-12), k, noise=selection) if select else None)
        return Split(epsilon=eps, delta=dl, measurements=tuple(measurements), selection=chosen,
                     report_epsilon=eps * w["bounding_report"] * (1.0 - 1e-12) if report else 0.0)

    @staticmethod
    def _split_rho(spec: QuerySpec, values: dict[str, ValueColumn], rho: float, k: int, l_max: int, noise: str,
                   w: dict[str, float], report: bool, intervals: bool = False) -> Split:
        """Each part meets its share of ``rho`` with its own mechanism (:mod:`dpkit.query._noise`)."""
        measurements: list[Measurement] = []
        for agg in spec.aggregates:
            v = values.get(agg.name)
            prims = agg.primitives
            r_each = rho * w[agg.name] / len(prims) * (1.0 - 1e-12)
            for p in prims:
                if p == "histogram":
                    assert v is not None and v.lo is not None and v.hi is not None and agg.q is not None
                    q = float(agg.q)
                    c = l_max * max(q, 1.0 - q)
                    m = Measurement(agg.name, p, f"hist__{v.index}", c, k, 1.0, 0.0, "exponential", q=q,
                                    extreme=agg.extreme, intervals=intervals)
                    # with intervals the point and its ends share e: solved so that their zCDP bounds together
                    # (not the one mechanism's at e) meet the share
                    shares = (m.point_epsilon,) + (m.end_epsilon,) * m.ends
                    e = epsilon_for_rho(r_each, lambda x, c=c: Exponential(sensitivity=c, epsilon=x / k), count=k,
                                        shares=shares)
                    measurements.append(replace(m, epsilon=e))
                    continue
                bound = _part_bound(p, v, l_max)
                if bound == 0:
                    raise InvalidArgumentError(f"{agg.name}: the clamping bounds give sensitivity 0; widen them.")
                column = p if p in ("rows", "units") else f"{p}__{_value_column(v).index}"
                if column == "units":
                    column = "__units"
                if noise == "gaussian":
                    measurements.append(Measurement(agg.name, p, column, float(bound), k, 0.0, 0.0, "gaussian",
                                                    rho=r_each))
                    continue
                l1 = k * float(bound)
                if p in INTEGER_PRIMITIVES:
                    s_int = round(l1)
                    e = epsilon_for_rho(r_each, lambda x, s=s_int: Geometric(sensitivity=s, epsilon=x))
                    kind = "geometric"
                else:
                    e = epsilon_for_rho(r_each, lambda x, s=l1: Laplace(sensitivity=s, epsilon=x))
                    kind = "laplace"
                measurements.append(Measurement(agg.name, p, column, float(bound), k, e, 0.0, kind))
        report_eps = 0.0
        if report:
            report_eps = epsilon_for_rho(rho * w["bounding_report"] * (1.0 - 1e-12),
                                         lambda x: Geometric(sensitivity=4, epsilon=x))
        return Split(epsilon=0.0, delta=0.0, measurements=tuple(measurements), selection=None,
                     report_epsilon=report_eps, rho=rho)

    # ------------------------------------------------------------------ running
    def sql(self, query: str | QuerySpec, *, epsilon: float | None = None, delta: float = 0.0,
            bounds: dict[str, tuple[float, float]] | None = None, max_partitions: int | None = None,
            max_rows: int | None = None,
            keys: Any = None, noise: str | None = None, split: dict[str, float] | None = None,
            quantile_buckets: int = QUANTILE_BUCKETS, confidence: float = 0.95, rng: np.random.Generator | None = None,
            dialect: str = "duckdb", partition_order: str = "hash", selection: str | None = None,
            bounding_report: bool = True, accuracy: dict[str, float] | None = None,
            progress: Callable[[str], None] | None = None, debug_timings: bool = False,
            nonnegative: bool = True, rho: float | None = None, quantile_intervals: bool = False) -> QueryResult:
        """Answer one aggregate query with differential privacy, recording its cost first.

        Parameters
        ----------
        query : str
            ``SELECT keys, aggregates FROM <table> [WHERE ...] [GROUP BY ...] [ORDER BY ...] [LIMIT n]``
            (see :mod:`dpkit.query._sql` for what is accepted and why the rest is refused).
        epsilon, delta : float
            This query's total cost; delta > 0 is needed for private partition selection and
            Gaussian noise.  With Laplace noise and public keys the cost is pure epsilon.
        rho : float, optional
            Instead of ``epsilon``: a zCDP cost (under a ZCDP or ApproxDP budget), split like epsilon; each
            part's mechanism meets its share of rho (Gaussian noise by default).  No private partition
            selection (it has no zCDP bound): give public keys.  Whatever is given, the ledger is charged
            the guarantee of the mechanisms the query builds, in its budget's family (``plan(...).guarantee``).
        accuracy : dict, optional
            Instead of ``epsilon``: target half-widths at ``confidence`` by output name (counts and sums),
            e.g. ``{"n": 10}``; the smallest epsilon whose split meets every target is computed (shown by
            ``plan(...)``) and charged when the query runs.
        bounds : dict, optional
            Clamping bounds (lo, hi) by column or output name, for SUM, AVG, VARIANCE, STDDEV and
            quantiles.  Never derived from the data.
        max_partitions : int, optional
            Partitions (groups) one unit may contribute to; extra ones are dropped (a random
            per-query choice that depends only on that unit's rows).  Required for GROUP BY unless
            the session sets it.
        max_rows : int, optional
            Rows one unit may contribute to one partition; beyond that its partial aggregates are
            scaled by max_rows / rows.  Required unless the session sets it, the query only counts
            units, or it aggregates a per-unit subquery (one row per unit).
        keys : dict or list, optional
            Public partition keys: {key: [values]} (their cross product) or a list of tuples.
            Without them GROUP BY keys are selected privately (needs delta).
        noise : "laplace" or "gaussian", optional
            Default: Gaussian for a query given ``rho``, or given ``delta`` under a ZCDP budget; Laplace
            (geometric for counts) otherwise.  A GaussianDP budget takes Laplace noise only (dpkit's
            discrete Gaussian has a zCDP certificate, not a Gaussian-DP one).
        bounding_report : bool, default True
            Spend a fixed 5% of epsilon (``split`` key "bounding_report") on DP counts of the units that
            bounding touched: all units, those with more than ``max_partitions`` groups, those with more
            than ``max_rows`` rows in a group, those with a value outside the clamping bounds.  With False
            the result says that its intervals cover the bounded data only.
        selection : "laplace" or "gaussian", optional
            The noise of private partition selection (default: that of ``noise``).  Gaussian noise for
            counts of units has a threshold that grows with sqrt(max_partitions) instead of max_partitions.
        split : dict, optional
            Shares of the budget by output name (and "partition_selection"), summing to 1; equal
            by default.  ``plan(...)`` shows the split before anything runs.
        quantile_buckets : int, default 2**20
            Resolution of quantiles (MEDIAN, QUANTILE_CONT, MIN, MAX): the candidates are the edges of this many
            equal buckets of [lo, hi] (at most 2**30 - 1), so a released quantile is a multiple of
            (hi - lo) / quantile_buckets above lo.  The engine returns only the occupied buckets and the exact
            sampler takes the empty stretches as runs, so a fine grid costs no more than a coarse one (close to
            the continuous exponential mechanism of Smith 2011, on a public grid).  Interval ends
            (``quantile_intervals``) use the grid coarsened to 1024 buckets where that divides it evenly.
        confidence : float
            Level of the intervals.
        rng : numpy Generator, optional
            The secure default unless given (a seeded one makes the result *not private*).
        dialect : str
            SQL dialect of ``query`` ("duckdb" or "spark").
        partition_order : "hash" or "md5"
            How each unit's ``max_partitions`` partitions are chosen among those it contributes most to
            (min(rows, max_rows), largest first): ties broken by a fresh random order from the engine's
            fast hash (default), or from md5, which every engine computes identically (so DuckDB and Spark
            keep the same partitions), about 7x slower on that step.
        progress : callable, optional
            Called with a short fixed message at each stage (the messages say nothing of the data; the time
            between them is the engine's wall-clock time, which is not private: see the README's threat model).
        nonnegative : bool, default True
            Clamp counts (and sums whose bounds have one sign) and their interval ends to that sign: free
            post-processing that never loses coverage and only reduces the error; False releases the raw
            noisy values (whose noise law is then exactly the mechanism's).
        debug_timings : bool, default False
            Put the engine's and the total wall-clock time on ``result.timings``.  Timings depend on the
            data and are not private (an analyst who sees them can tell neighbouring tables apart); for
            debugging on non-sensitive data only.
        quantile_intervals : bool, default False
            Also give quantiles (MEDIAN, QUANTILE_CONT, MIN, MAX; numbers, dates, timestamps) an interval at
            ``confidence`` for the true quantile of the bounded data, inside the same epsilon: the aggregate's
            share is split 1/2 to the point release and 1/4 to each end (1/2 to the one end of MIN, MAX and the
            0- and 1-quantiles, whose other end is the clamping bound), so the point is less accurate than
            without.  Each end is an exponential-mechanism quantile (the same secure sampler) aimed at the rank
            q n -+ c, with c its own rank-error bound at failure probability (1 - confidence)/2 plus 1
            (McSherry & Talwar 2007; Dwork & Roth 2014, Thm 3.11), so both ends hold together with
            probability >= ``confidence`` (union bound).  See ``dpkit.query._result._quantile_ends``.

        Raises
        ------
        UnsupportedError
            SQL that cannot be made private (with the reason and what to write instead).
        InvalidArgumentError (a ValueError)
            Unknown columns, non-numeric values, missing bounds, an empty table, bad parameters.
        BudgetExceededError
            The ledger has no room; nothing was run or spent.
        """
        say = progress or (lambda _msg: None)
        t0 = time.perf_counter()
        plan = self.plan(query, epsilon=epsilon, delta=delta, rho=rho, bounds=bounds, max_partitions=max_partitions,
                         max_rows=max_rows, keys=keys, noise=noise, split=split,
                         quantile_buckets=quantile_buckets, dialect=dialect, partition_order=partition_order,
                         selection=selection, bounding_report=bounding_report, accuracy=accuracy,
                         confidence=confidence if isinstance(confidence, float) and 0 < confidence < 1 else 0.95,
                         quantile_intervals=quantile_intervals)
        if not 0.0 < confidence < 1.0:
            raise InvalidArgumentError(f"confidence must be in (0, 1); got {confidence!r}.")
        generator = resolve_rng(rng)  # refused here, before anything is spent; None: the secure default
        label = plan.spec.text if len(plan.spec.text) <= 200 else plan.spec.text[:197] + "..."
        meta = {"engine": self.engine, "split": {k: list(v) for k, v in plan.split.shares().items()},
                "max_partitions": plan.max_partitions, "max_rows": plan.max_rows}
        # The spend is committed, not merely reserved, before the engine reads a row: from then on every
        # outcome (an answer, an engine failure, an exception in a progress callback) may depend on the
        # data, so no code path may hand the budget back (a committed spend cannot be aborted).
        # the ledger is charged the mechanisms' item (each family's bound), the headline is only what is shown
        charged = plan.charge if plan.charge is not None else plan.guarantee
        self.ledger.commit(self.ledger.reserve(charged, label=label, metadata=meta))
        say(f"bounding contributions and aggregating in {self.engine}")
        t_engine = time.perf_counter()
        failed = False
        try:
            raw = self._backend.fetch_arrow(plan.compiled.sql(self._backend.dialect))
            # as Arrow, like the main statement: their keys are every kept group's, released or not, and a Python
            # conversion of them failed on one unit's value (TIMESTAMP 'infinity') or merged two (DATE 'infinity'
            # became 9999-12-31)
            hists = {i: self._backend.fetch_arrow(plan.compiled.histogram_sql(i, self._backend.dialect))
                     for i in plan.compiled.histograms}
            distincts = {i: self._backend.fetch_arrow(plan.compiled.distinct_sql(i, self._backend.dialect))
                         for i in plan.compiled.distincts}
            report = (self._backend.fetch(plan.compiled.report_sql(self._backend.dialect))[0]
                      if plan.compiled.report is not None else None)
        except Exception:  # noqa: BLE001 - any engine failure after reading data is charged and says nothing
            failed = True
        if failed:  # raised outside the handler, so the engine's exception is not even its __context__
            raise DataDependentFailure(
                f"the {self.engine} engine failed while reading the data; this query's budget {plan.guarantee} is "
                "spent, since the failure may depend on the data. What failed is withheld because it can depend "
                "on a row; run plan(...).sql on non-sensitive data to debug.")
        t_engine = time.perf_counter() - t_engine
        say("adding noise")
        try:
            result = finish_aggregates(plan, raw, hists, confidence=confidence, rng=generator, distincts=distincts,
                                       nonnegative=nonnegative, report=report)
        except Exception:  # noqa: BLE001 - post-processing is total (tests/adversarial); never a message of data
            failed = True
        if failed:
            raise DataDependentFailure(
                f"dpkit could not finish this query after the engine ran; its budget {plan.guarantee} is spent. "
                "Details are withheld because they could depend on the data; please report it as a bug.")
        timings = ({"engine_s": t_engine, "total_s": time.perf_counter() - t0,
                    "note": "wall-clock times depend on the data and are NOT private; for debugging only"}
                   if debug_timings else {})
        return replace(result, remaining=self.ledger.remaining(), timings=timings, engine=self.engine)

    def histogram(self, column: str, edges: Any, *, epsilon: float, max_partitions: int | None = None,
                  max_rows: int | None = None,
                  where: str | None = None, noise: str = "laplace", delta: float = 0.0, confidence: float = 0.95,
                  rng: np.random.Generator | None = None) -> QueryResult:
        """A DP histogram of a numeric column over fixed bins (public partitions, so no selection).

        Bins are ``[e_i, e_{i+1})``, the last one closed; values outside ``edges``, NULL and NaN
        fall in no bin.  ``max_partitions`` is the number of bins one unit may contribute to and
        ``max_rows`` the rows it may contribute to one bin.  ``where`` is a row-level SQL
        predicate.  The result has columns ``bin`` (labels such as ``[0, 10)``) and ``count``.

        Examples
        --------
        >>> import tempfile, pandas as pd
        >>> from dpkit.random import insecure_seeded
        >>> df = pd.DataFrame({"uid": range(100), "age": [20 + i % 50 for i in range(100)]})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     s = Session(df, privacy_unit="uid", ledger=f"{d}/b.db", budget=PureDP(1.0))
        ...     r = s.histogram("age", [18, 30, 50, 70], epsilon=1.0, max_partitions=1, max_rows=1,
        ...                     rng=insecure_seeded(0))
        ...     print([row[0] for row in r.rows])
        ['[18, 30)', '[30, 50)', '[50, 70]']
        """
        e = np.asarray(edges, dtype=float)
        if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
            raise InvalidArgumentError(
                f"edges must be at least two finite, strictly increasing numbers; got {edges!r}.")
        if column not in self._schema:
            raise InvalidArgumentError(f"unknown column {column!r}; the table has {sorted(self._schema)}.")
        text = f"SELECT COUNT(*) FROM {self.table}" + (f" WHERE {where}" if where else "")
        base = parse_sql(text, table=self.table, privacy_unit=self.privacy_unit, table_columns=self._schema)
        col = f"CAST({exp_column(column)} AS DOUBLE)"
        labels, cases = [], []
        for i in range(e.size - 1):
            last = i == e.size - 2
            label = f"[{e[i]:g}, {e[i + 1]:g}{']' if last else ')'}"
            labels.append(label)
            cases.append(f"WHEN {col} >= {literal(float(e[i]))} AND {col} {'<=' if last else '<'} "
                         f"{literal(float(e[i + 1]))} THEN '{label}'")
        spec = QuerySpec(table=self.table, keys=(Key("bin", f"CASE {' '.join(cases)} END"),),
                         aggregates=(Aggregate("count", "count"),), where=base.where,
                         text=f"histogram of {column} over {len(labels)} bins" + (f" where {where}" if where else ""),
                         columns=tuple(sorted({column, *base.columns})))
        if not is_numeric_type(self._schema[column]):
            raise InvalidArgumentError(f"a histogram needs a numeric column; {column} has type {self._schema[column]}.")
        return self.sql(spec, epsilon=epsilon, delta=delta, max_partitions=max_partitions, max_rows=max_rows,
                        keys=[(label,) for label in labels], noise=noise, confidence=confidence, rng=rng)

    def bounds(self, column: str, *, epsilon: float, max_partitions: int | None = None, max_rows: int | None = None,
               where: str | None = None, tail: float = 0.005, rng: np.random.Generator | None = None) -> Bounds:
        r"""Clamping bounds for a numeric column, estimated with differential privacy and charged to the ledger.

        The values are binned by sign and binary magnitude (``[2^i, 2^{i+1})`` for ``i`` in [-40, 60], the
        end bins taking everything beyond, and a bin for 0); a DP histogram of the bins is released like
        any query (public bins, ``max_partitions`` bins a unit, ``max_rows`` rows a bin, geometric noise),
        and the bounds are the outer edges of the first and last bins at which the noisy counts, summed
        from either end, reach ``tail`` of their total, counting only bins above the level that noise alone
        reaches with probability 5% over all bins: post-processing, so the guarantee is the histogram's.  In
        the spirit of Tumult Analytics' ``get_bounds`` and of the binary-magnitude histograms of Wilson et
        al. 2020 (PoPETs), sec. 5.

        Parameters
        ----------
        column : str
            A numeric column of the table.
        epsilon : float, > 0
            The cost (pure epsilon-DP).
        max_partitions, max_rows : int, optional
            The bins one unit may contribute to and the rows it may add to one (the session's if not given;
            required otherwise).
        where : str, optional
            A row-level predicate.
        tail : float in (0, 0.5)
            The share of the noisy mass left outside the bounds on each side.

        Returns
        -------
        Bounds
            ``lo, hi = session.bounds(...)``; also the noisy histogram and the guarantee spent.  The bounds
            are powers of two (or 0): widen them if a value just above matters.
        """
        if column not in self._schema:
            raise InvalidArgumentError(f"unknown column {column!r}; the table has {sorted(self._schema)}.")
        if not is_numeric_type(self._schema[column]):
            raise InvalidArgumentError(f"bounds need a numeric column; {column} has type {self._schema[column]}.")
        if isinstance(tail, bool) or not isinstance(tail, (int, float)) or not 0.0 < float(tail) < 0.5:
            raise InvalidArgumentError(f"tail must be a number in (0, 0.5); got {tail!r}.")
        x = f"CAST({exp_column(column)} AS DOUBLE)"
        mag = "LEAST(GREATEST(CAST(FLOOR(LOG2({v})) AS INTEGER), -40), 60)"
        key = (f"CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL WHEN {x} = 0 THEN 0 "
               f"WHEN {x} > 0 THEN 101 + {mag.format(v=x)} ELSE -101 - {mag.format(v='-' + x)} END")
        bins = [-b for b in range(161, 60, -1)] + [0] + list(range(61, 162))
        text = f"SELECT COUNT(*) FROM {self.table}" + (f" WHERE {where}" if where else "")
        base = parse_sql(text, table=self.table, privacy_unit=self.privacy_unit, table_columns=self._schema)
        spec = QuerySpec(table=self.table, keys=(Key("bin", key),), aggregates=(Aggregate("count", "count"),),
                         where=base.where, text=f"bounds of {column}" + (f" where {where}" if where else ""))
        r = self.sql(spec, epsilon=epsilon, max_partitions=max_partitions, max_rows=max_rows,
                     keys=[(b,) for b in bins], rng=rng, bounding_report=False)
        counts = {int(row[0]): max(0.0, float(row[1])) for row in r.rows}
        # bins whose noisy count could be noise alone are ignored: with scale t, a bin with no row reaches
        # t ln(20 n_bins) with probability below 1/(20 n_bins), so all empty bins stay below it w.p. >= 95%
        floor = float(r.scales["count"]["rows"]) * math.log(20.0 * len(bins))
        ordered = [c if c >= floor else 0.0 for c in (counts.get(b, 0.0) for b in bins)]
        total = math.fsum(ordered)
        lo = hi = math.nan
        if total > 0:
            acc = 0.0
            for b, c in zip(bins, ordered):
                acc += c
                if acc >= tail * total:
                    lo = _bin_edge(b, low=True)
                    break
            acc = 0.0
            for b, c in zip(reversed(bins), reversed(ordered)):
                acc += c
                if acc >= tail * total:
                    hi = _bin_edge(b, low=False)
                    break
        return Bounds(lo=lo, hi=hi, histogram={_bin_label(b): counts.get(b, 0.0) for b in bins if counts.get(b)},
                      guarantee=r.guarantee, insecure=r.insecure)


@dataclass(frozen=True, slots=True)
class Bounds:
    """DP clamping bounds (``lo, hi = bounds``): NaN if the noisy histogram was empty."""

    lo: float
    hi: float
    histogram: Any       # bin label -> noisy count (non-zero bins)
    guarantee: PureDP | ApproxDP
    insecure: bool

    def __iter__(self) -> Any:
        return iter((self.lo, self.hi))


def _bin_edge(b: int, *, low: bool) -> float:
    """The outer edge of a magnitude bin: b > 0 covers [2^(b-101), 2^(b-100)), b < 0 its mirror, 0 is {0}."""
    if b == 0:
        return 0.0
    e = abs(b) - 101
    if b > 0:
        return math.ldexp(1.0, e) if low else math.ldexp(1.0, e + 1)
    return -math.ldexp(1.0, e + 1) if low else -math.ldexp(1.0, e)


def _bin_label(b: int) -> str:
    if b == 0:
        return "0"
    e = abs(b) - 101
    return f"[2^{e}, 2^{e + 1})" if b > 0 else f"(-2^{e + 1}, -2^{e}]"


def exp_column(name: str) -> str:
    return _exp.column(name, quoted=True).sql(dialect="duckdb")


def _temporal_kind(type_name: str) -> str | None:
    t = type_name.strip().upper()
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    return None


def _as_number(x: object, temporal: str | None) -> float:
    """A bound as a float; for dates and timestamps, days or seconds since 1970-01-01 (from ISO text or a value)."""
    import datetime as dt

    if temporal is not None and not isinstance(x, (int, float)):
        if isinstance(x, str):
            x = (dt.datetime.fromisoformat(x) if temporal == "timestamp" or "T" in x or " " in x
                 else dt.date.fromisoformat(x))
        if isinstance(x, dt.datetime):
            if x.tzinfo is not None:
                x = x.astimezone(dt.UTC).replace(tzinfo=None)
            return (x - dt.datetime(1970, 1, 1)).total_seconds() if temporal == "timestamp" else float(
                (x.date() - dt.date(1970, 1, 1)).days)
        if isinstance(x, dt.date):
            days = (x - dt.date(1970, 1, 1)).days
            return float(days) if temporal == "date" else days * 86400.0
    return float(x)  # type: ignore[arg-type]  # float() itself refuses a non-number: _check_bounds reports it


def _from_number(x: float, temporal: str) -> Any:
    import datetime as dt

    if temporal == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=math.floor(x))
    return dt.datetime(1970, 1, 1) + dt.timedelta(seconds=x)


def _value_column(v: ValueColumn | None) -> ValueColumn:
    """The value column of a primitive that reads one (all but rows and units): present by construction."""
    assert v is not None, "a primitive other than rows and units has a value column"
    return v


def _part_bound(primitive: str, v: ValueColumn | None, l_max: int) -> float:
    """c: the most one unit adds to one partition's value of ``primitive`` (:mod:`dpkit.query._noise`)."""
    if primitive in ("rows", "values", "distinct"):
        return float(l_max)
    if primitive == "units":
        return 1.0
    assert v is not None and v.lo is not None and v.hi is not None
    m_abs, r = max(abs(v.lo), abs(v.hi)), (v.hi - v.lo) / 2.0
    return {"sum": l_max * m_abs, "centered_sum": l_max * r, "centered_squares": l_max * r * r}[primitive]


def _check_bounds(name: str, pair: object, temporal: str | None = None) -> tuple[float, float]:
    try:
        a, b = cast(tuple[object, object], pair)  # any pair-like; anything else raises the TypeError below
        lo, hi = _as_number(a, temporal), _as_number(b, temporal)
    except (TypeError, ValueError):
        what = "numbers" if temporal is None else f"{temporal}s (ISO text such as '2013-01-01') or numbers"
        raise InvalidArgumentError(f"bounds for {name!r} must be a pair (lo, hi) of {what}; got {pair!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidArgumentError(f"bounds for {name!r} must be finite with lo < hi; got ({lo}, {hi}).")
    if max(abs(lo), abs(hi)) > _MAX_BOUND:
        raise InvalidArgumentError(
            f"bounds for {name!r} must lie within +-{_MAX_BOUND:g}; got ({lo:g}, {hi:g}). Larger bounds "
            "give sensitivities whose sums (and squares) could overflow in the engine.")
    return lo, hi


_MAX_BOUND = 1e100  # with max_rows, max_partitions <= 1e9 no sum of squares over any realistic table overflows
