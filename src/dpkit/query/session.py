r"""A DP session over one table: plan, bound, aggregate in the engine, noise, record, return.

:class:`Session` ties a table (file, dataframe, DuckDB table or Spark DataFrame) to its privacy
unit column and to a durable ledger (:class:`~dpkit.ledger.SQLiteLedger`) holding the budget.
``session.sql(text, epsilon=..., bounds=...)`` answers one aggregate query:

1. parse and validate (:mod:`dpkit.query._sql`), check columns and types against the engine's
   schema, resolve clamping bounds, split the budget (:mod:`dpkit.query._noise`) -- nothing is
   read but the schema and whether the table has a row;
2. reserve the query's guarantee in the ledger (atomic check-and-record, so concurrent sessions
   cannot overspend together; a refusal here costs nothing and runs nothing);
3. run the bounding-and-aggregation SQL in the engine (:mod:`dpkit.query._compile`);
4. add noise, and commit the reservation before returning the result.  Once the engine may have
   read a row, the reservation is committed whatever happens: an engine error or an overflow can
   depend on the data, so no failure is a free look at it (and the engine's message, which can
   quote a row, is withheld: :class:`DataDependentFailure`).  Expressions are made total where
   possible instead: every user expression that is not a bare column runs under DuckDB's TRY
   (Spark: ANSI mode off), CAST is TRY_CAST, ``error()`` is refused.

Policies (all documented in the README):

* NULL or NaN in a value is dropped before bounding (as SQL's SUM/AVG ignore NULL); COUNT(*)
  counts the row.  A dropped value depends only on its own row, so sensitivities are unchanged.
  Rows whose privacy unit is NULL are dropped: they belong to no unit that could be bounded.
* An empty table is refused before anything is spent.  Whether a table has any row is treated as
  public, like its schema.
* Estimates are for the *bounded* data (clamped values, at most ``max_rows`` rows per unit and
  partition, ``max_partitions`` partitions per unit); intervals cover that bounded value with the
  stated confidence, from the noise law alone.
"""

from __future__ import annotations

import itertools
import math
import os
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
from sqlglot import exp as _exp

from dpkit.errors import DpkitError, UnsupportedError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.ledger import Ledger, SQLiteLedger, open_ledger
from dpkit.query._backends import DuckDBBackend, SparkBackend, is_numeric_type
from dpkit.query._compile import Compiled, ValueColumn, compile_query, literal, transpile
from dpkit.query._noise import INTEGER_PRIMITIVES, Measurement, Selection, Split
from dpkit.query._result import QueryResult, finish_aggregates
from dpkit.query._spec import Aggregate, Key, QuerySpec
from dpkit.query._sql import parse_sql

__all__ = ["DataDependentFailure", "QueryPlan", "Session"]


class DataDependentFailure(DpkitError):
    """The engine failed after reading the data; the query's budget was spent (the failure may depend on it)."""

_BOUNDS_HINT = "pass bounds={{{name!r}: (lo, hi)}} (command line: --bounds {name}=LO:HI)"


@dataclass
class QueryPlan:
    """Everything decided before data is touched: the SQL each engine runs, the split, the cost."""

    spec: QuerySpec
    compiled: Compiled
    split: Split
    guarantee: PureDP | ApproxDP
    max_partitions: int
    max_rows: int
    public_keys: list[tuple[Any, ...]] | None
    bounds: dict[str, tuple[float, float]]
    noise: str
    dialect: str
    values: dict[str, ValueColumn] = field(default_factory=dict)

    @property
    def sql(self) -> str:
        """The main statement in the session engine's dialect."""
        return self.compiled.sql(self.dialect)

    def measurements(self) -> list[dict[str, Any]]:
        """One row per noisy vector: aggregate, primitive, noise, budget share, sensitivity, scale."""
        g = len(self.public_keys) if self.public_keys is not None else (1 if not self.spec.keys else None)
        return [m.describe(g) for m in self.split.measurements]

    def __str__(self) -> str:
        lines = [f"query: {self.spec.text}", f"cost: {self.guarantee}",
                 f"contribution bounds: max_partitions={self.max_partitions}, max_rows={self.max_rows}"]
        if self.bounds:
            lines.append("clamping: " + ", ".join(f"{k} in [{lo:g}, {hi:g}]" for k, (lo, hi) in self.bounds.items()))
        if self.spec.keys:
            lines.append(f"partitions: {len(self.public_keys)} public keys" if self.public_keys is not None else
                         f"partitions: private selection, threshold {self.split.selection.threshold} units "
                         f"(epsilon {self.split.selection.epsilon:g}, delta {self.split.selection.delta_spent:.3g})")
        lines.append("budget split:")
        for name, (e, d) in self.split.shares().items():
            lines.append(f"  {name}: epsilon {e:.6g}" + (f", delta {d:.3g}" if d else ""))
        lines.append("measurements:")
        for row in self.measurements():
            extra = ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                              if k not in ("aggregate", "primitive"))
            lines.append(f"  {row['aggregate']} / {row['primitive']}: {extra}")
        return "\n".join(lines)


def _check_int(name: str, value: object, *, most: int = 10**9) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= most:
        raise ValueError(f"{name} must be an integer >= 1 (and at most {most:.0e}); got {value!r}.")
    return int(value)


def _check_budget_number(name: str, value: object, *, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number; got {type(value).__name__}.")
    x = float(value)
    if math.isnan(x) or math.isinf(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}; got {value!r}.")
    return x


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
    ledger : str, path or SQLiteLedger
        Where spends are recorded durably (created if missing; then ``budget`` is required).
    budget : PureDP or ApproxDP, optional
        The total budget of a new ledger; an existing ledger keeps its own (a different one is refused).
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
    ...               rng=insecure_seeded(0))
    ...     print(r.columns, len(r.rows), s.remaining())
    ['k', 'n'] 2 0.5-DP
    """

    def __init__(self, data: Any, *, privacy_unit: str, ledger: str | os.PathLike[str] | SQLiteLedger,
                 budget: PureDP | ApproxDP | None = None, table: str = "t", engine: str | None = None,
                 spark: Any = None) -> None:
        if not isinstance(privacy_unit, str) or not privacy_unit:
            raise ValueError("privacy_unit must name the column that identifies a person (e.g. 'user_id').")
        if not isinstance(table, str) or not table.isidentifier():
            raise ValueError(f"table must be a plain SQL name such as 't'; got {table!r}.")
        self._backend = self._open(data, table=table, engine=engine, spark=spark)
        self.table = table
        self.privacy_unit = privacy_unit
        self._schema = self._backend.schema()
        if privacy_unit not in self._schema:
            raise ValueError(f"the privacy unit column {privacy_unit!r} is not in the table; its columns are "
                             f"{sorted(self._schema)}.")
        if isinstance(ledger, Ledger):
            if budget is not None and budget != ledger.budget:
                raise ValueError(f"the ledger's budget is {ledger.budget}; got budget={budget}.")
            self.ledger = ledger
        else:
            self.ledger = open_ledger(ledger, budget=budget)

    @staticmethod
    def _open(data: Any, *, table: str, engine: str | None, spark: Any) -> DuckDBBackend | SparkBackend:
        if engine not in (None, "duckdb", "spark"):
            raise ValueError(f"engine must be 'duckdb' or 'spark'; got {engine!r}.")
        module = type(data).__module__
        if module.startswith("pyspark"):
            if engine == "duckdb":
                raise ValueError("a Spark DataFrame runs on Spark; drop engine='duckdb'.")
            return SparkBackend.from_dataframe(data)
        if module.startswith(("duckdb", "_duckdb")) or type(data).__name__ == "DuckDBPyConnection":
            return DuckDBBackend.from_connection(data, table)
        if isinstance(data, (str, os.PathLike)):
            if engine == "spark":
                if spark is None:
                    from pyspark.sql import SparkSession

                    spark = SparkSession.builder.master("local[*]").appName("dpkit").getOrCreate()
                return SparkBackend.from_file(spark, data)
            return DuckDBBackend.from_file(data)
        if engine == "spark" and spark is not None and data is None:
            return SparkBackend.from_table(spark, table)
        if any(module.startswith(m) for m in ("pandas", "polars", "pyarrow")):
            return DuckDBBackend.from_dataframe(data)
        raise TypeError(f"cannot read a table from {type(data).__name__}; pass a file path, a pandas/Polars/Arrow "
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

    def remaining(self) -> PureDP | ApproxDP:
        """The budget left in the ledger (every session sharing the file sees the same)."""
        return self.ledger.remaining()

    def close(self) -> None:
        self._backend.close()
        self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ planning
    def plan(self, query: str | QuerySpec, *, epsilon: float, delta: float = 0.0,
             bounds: dict[str, tuple[float, float]] | None = None, max_partitions: int = 1, max_rows: int = 1,
             keys: Any = None, noise: str = "laplace", split: dict[str, float] | None = None,
             quantile_buckets: int = 1024, dialect: str = "duckdb", partition_order: str = "hash") -> QueryPlan:
        """Validate a query and decide its bounding, split and cost, without reading data or spending.

        Parameters are those of :meth:`sql`.
        """
        eps = _check_budget_number("epsilon", epsilon, allow_zero=False)
        dl = _check_budget_number("delta", delta, allow_zero=True)
        if dl >= 1.0:
            raise ValueError(f"delta must be < 1; got {delta!r}.")
        k_max = _check_int("max_partitions", max_partitions)
        l_max = _check_int("max_rows", max_rows)
        buckets = _check_int("quantile_buckets", quantile_buckets)
        if noise not in ("laplace", "gaussian"):
            raise ValueError(f"noise must be 'laplace' or 'gaussian'; got {noise!r}.")
        if partition_order not in ("hash", "md5"):
            raise ValueError(f"partition_order must be 'hash' or 'md5'; got {partition_order!r}.")
        spec = query if isinstance(query, QuerySpec) else parse_sql(
            query, table=self.table, privacy_unit=self.privacy_unit, dialect=dialect, table_columns=self._schema)
        missing = [c for c in spec.columns if c not in self._schema]
        if missing:
            raise ValueError(f"unknown column{'s' if len(missing) > 1 else ''} {missing}; the table has "
                             f"{sorted(self._schema)}.")
        if self._backend.is_empty():
            raise ValueError("the table is empty: there is nothing to answer, and nothing was spent.")
        values = self._values(spec, bounds or {})
        needs_types = keys is not None or partition_order == "md5"  # asked of the engine once, when needed
        key_types = self._backend.expression_types(
            [transpile(k.expr, self._backend.dialect) for k in spec.keys] if needs_types else [])
        public = self._public_keys(spec, keys, key_types)
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
        plan_split = self._split(spec, values, eps, dl, k_eff, l_max, noise, split, public is None and bool(spec.keys))
        salt = secrets.token_hex(16)
        compiled = compile_query(replace(spec, table=self._backend.relation), privacy_unit=self.privacy_unit,
                                 values=values, max_partitions=k_max, max_rows=l_max,
                                 public_keys=public, salt=salt, buckets=buckets, partition_order=partition_order)
        total_delta = math.fsum(m.delta for m in plan_split.measurements)
        if plan_split.selection is not None:
            total_delta += plan_split.selection.delta
        # each part meets its share and the shares sum to at most (eps, dl): basic composition
        guarantee: PureDP | ApproxDP = PureDP(epsilon=eps) if total_delta == 0.0 else ApproxDP(epsilon=eps, delta=dl)
        if isinstance(guarantee, ApproxDP) and isinstance(self.ledger.budget, PureDP):
            raise UnsupportedError(
                f"this query costs {guarantee} (its delta pays for "
                f"{'private partition selection' if public is None and spec.keys else 'Gaussian noise'}), but the "
                f"ledger's budget {self.ledger.budget} is pure epsilon-DP with no delta to spend. Give public keys "
                "(keys= / --keys) and Laplace noise for a pure-DP query, or use a ledger created with a delta "
                "budget (--budget-delta).")
        used_bounds = {v.expr: (v.lo, v.hi) for v in values.values() if v.lo is not None}
        return QueryPlan(spec=spec, compiled=compiled, split=plan_split, guarantee=guarantee,
                         max_partitions=k_max, max_rows=l_max, public_keys=public, bounds=used_bounds,
                         noise=noise, dialect=self._backend.dialect, values=values)

    def _values(self, spec: QuerySpec, bounds: dict[str, tuple[float, float]]) -> dict[str, ValueColumn]:
        if not isinstance(bounds, dict):
            raise TypeError("bounds must be a dict mapping a column (or output name) to (lo, hi).")
        unknown = [b for b in bounds if b not in self._schema and b not in {a.name for a in spec.aggregates}]
        if unknown:
            raise ValueError(f"bounds given for {unknown}, which is neither a column of the table nor an output "
                             f"name of the query.")
        with_values = [a for a in spec.aggregates if a.expr is not None]
        types = self._backend.expression_types([transpile(a.expr, self._backend.dialect) for a in with_values])
        out: dict[str, ValueColumn] = {}
        index: dict[tuple[str, Any, Any, bool], int] = {}
        for agg, type_name in zip(with_values, types):
            numeric = is_numeric_type(type_name)
            lo = hi = None
            if agg.needs_bounds:
                if not numeric:
                    raise ValueError(f"{agg.name}: {agg.expr} has type {type_name}, not a number; "
                                     f"{agg.kind} needs numeric values.")
                key = agg.name if agg.name in bounds else agg.column
                if key is None or key not in bounds:
                    raise ValueError(f"{agg.name} needs clamping bounds for {agg.expr}: "
                                     + _BOUNDS_HINT.format(name=agg.column or agg.name)
                                     + ". dpkit never derives them from the data, which would leak it.")
                lo, hi = _check_bounds(key, bounds[key])
            ident = (agg.expr, lo, hi, numeric)
            if ident not in index:
                index[ident] = len(index)
            out[agg.name] = ValueColumn(expr=agg.expr, lo=lo, hi=hi, index=index[ident], numeric=numeric)
        return out

    def _public_keys(self, spec: QuerySpec, keys: Any, types: list[str]) -> list[tuple[Any, ...]] | None:
        if keys is None:
            return None
        if not spec.keys:
            raise ValueError("keys were given but the query has no GROUP BY.")
        names = [k.name for k in spec.keys]
        if isinstance(keys, dict):
            extra = [k for k in keys if k not in names and k not in {key.expr for key in spec.keys}]
            if extra:
                raise ValueError(f"keys given for {extra}, which are not group keys of the query ({names}).")
            lists = []
            for key in spec.keys:
                vals = keys.get(key.name, keys.get(key.expr))
                if vals is None:
                    raise ValueError(f"no public keys given for the group key {key.name!r}; give all of {names} "
                                     "or none (then partitions are selected privately).")
                lists.append(list(vals))
            rows = [tuple(r) for r in itertools.product(*lists)]
        else:
            rows = [tuple(r) if isinstance(r, (tuple, list)) else (r,) for r in keys]
            if any(len(r) != len(names) for r in rows):
                raise ValueError(f"each public key must have {len(names)} values ({names}).")
        if not rows:
            raise ValueError("the list of public keys is empty.")
        # each key value in its column's type, converted by the engine itself (so '2024-01-01' matches a
        # DATE, 'true' a BOOLEAN, 1 a text '1' exactly as the engine compares them)
        converted = []
        for i, (key, type_name) in enumerate(zip(spec.keys, types)):
            values = list(dict.fromkeys(r[i] for r in rows))
            try:
                cast = self._backend.cast_values(values, type_name)
            except Exception as exc:  # noqa: BLE001 - public values only: the message is safe to show
                raise ValueError(f"the public keys of {key.name!r} do not convert to its type {type_name}: {exc}") from None
            converted.append(dict(zip(values, cast)))
        rows = [tuple(converted[i][v] for i, v in enumerate(r)) for r in rows]
        return list(dict.fromkeys(rows))

    @staticmethod
    def _split(spec: QuerySpec, values: dict[str, ValueColumn], eps: float, dl: float, k: int, l_max: int,
               noise: str, weights: dict[str, float] | None, select: bool) -> Split:
        parts = [a.name for a in spec.aggregates] + (["partition_selection"] if select else [])
        if weights is None:
            w = {p: 1.0 / len(parts) for p in parts}
        else:
            unknown = [p for p in weights if p not in parts]
            missing = [p for p in parts if p not in weights]
            if unknown or missing:
                raise ValueError(f"split must give a share to each of {parts}"
                                 + (f"; unknown {unknown}" if unknown else "") + (f"; missing {missing}" if missing else ""))
            w = {p: float(weights[p]) for p in parts}
            if any(not (x > 0 and math.isfinite(x)) for x in w.values()) or abs(math.fsum(w.values()) - 1.0) > 1e-9:
                raise ValueError(f"split shares must be > 0 and sum to 1; got {weights} (sum {math.fsum(w.values())}).")
        # delta goes to the parts that need it: selection and Gaussian measurements
        needs_delta = (["partition_selection"] if select else []) + (
            [a.name for a in spec.aggregates if a.kind != "quantile"] if noise == "gaussian" else [])
        if needs_delta and dl == 0.0:
            raise ValueError("noise='gaussian' needs delta > 0.")
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
                    assert v is not None and v.lo is not None and v.hi is not None
                    q = float(agg.q)  # type: ignore[arg-type]
                    measurements.append(Measurement(agg.name, p, f"hist__{v.index}", l_max * max(q, 1.0 - q), k,
                                                    e_each, 0.0, "exponential", q=q))
                    continue
                bound = {"rows": l_max, "units": 1, "values": l_max}.get(p)
                if bound is None:
                    assert v is not None and v.lo is not None and v.hi is not None
                    m_abs, r = max(abs(v.lo), abs(v.hi)), (v.hi - v.lo) / 2.0
                    bound = {"sum": l_max * m_abs, "centered_sum": l_max * r,
                             "centered_squares": l_max * r * r}[p]
                column = p if p in INTEGER_PRIMITIVES else f"{p}__{v.index}"  # type: ignore[union-attr]
                if column == "units":
                    column = "__units"
                kind = "gaussian" if noise == "gaussian" else ("geometric" if p in INTEGER_PRIMITIVES else "laplace")
                if bound == 0:
                    raise ValueError(f"{agg.name}: the clamping bounds give sensitivity 0; widen them.")
                measurements.append(Measurement(agg.name, p, column, float(bound), k, e_each, d_each, kind))
        selection = (Selection(eps * w["partition_selection"] * (1.0 - 1e-12),
                               d_share["partition_selection"] * (1.0 - 1e-12), k) if select else None)
        return Split(epsilon=eps, delta=dl, measurements=tuple(measurements), selection=selection)

    # ------------------------------------------------------------------ running
    def sql(self, query: str | QuerySpec, *, epsilon: float, delta: float = 0.0,
            bounds: dict[str, tuple[float, float]] | None = None, max_partitions: int = 1, max_rows: int = 1,
            keys: Any = None, noise: str = "laplace", split: dict[str, float] | None = None,
            quantile_buckets: int = 1024, confidence: float = 0.95, rng: np.random.Generator | None = None,
            dialect: str = "duckdb", partition_order: str = "hash",
            progress: Callable[[str], None] | None = None) -> QueryResult:
        """Answer one aggregate query with differential privacy, recording its cost first.

        Parameters
        ----------
        query : str
            ``SELECT keys, aggregates FROM <table> [WHERE ...] [GROUP BY ...] [ORDER BY ...] [LIMIT n]``
            (see :mod:`dpkit.query._sql` for what is accepted and why the rest is refused).
        epsilon, delta : float
            This query's total cost; delta > 0 is needed for private partition selection and
            Gaussian noise.  With Laplace noise and public keys the cost is pure epsilon.
        bounds : dict, optional
            Clamping bounds (lo, hi) by column or output name, for SUM, AVG, VARIANCE, STDDEV and
            quantiles.  Never derived from the data.
        max_partitions : int, default 1
            Partitions (groups) one unit may contribute to; extra ones are dropped (a random
            per-query choice that depends only on that unit's rows).
        max_rows : int, default 1
            Rows one unit may contribute to one partition; beyond that its partial aggregates are
            scaled by max_rows / rows.
        keys : dict or list, optional
            Public partition keys: {key: [values]} (their cross product) or a list of tuples.
            Without them GROUP BY keys are selected privately (needs delta).
        noise : "laplace" or "gaussian"
        split : dict, optional
            Shares of the budget by output name (and "partition_selection"), summing to 1; equal
            by default.  ``plan(...)`` shows the split before anything runs.
        quantile_buckets : int
            Resolution of quantiles: candidates are the bucket edges of [lo, hi].
        confidence : float
            Level of the intervals.
        rng : numpy Generator, optional
            The secure default unless given (a seeded one makes the result *not private*).
        dialect : str
            SQL dialect of ``query`` ("duckdb" or "spark").
        partition_order : "hash" or "md5"
            How each unit's ``max_partitions`` partitions are chosen: a fresh random order from the
            engine's fast hash (default), or from md5, which every engine computes identically (so
            DuckDB and Spark keep the same partitions), about 7x slower on that step.
        progress : callable, optional
            Called with a short message at each stage.

        Raises
        ------
        UnsupportedError
            SQL that cannot be made private (with the reason and what to write instead).
        ValueError
            Unknown columns, non-numeric values, missing bounds, an empty table, bad parameters.
        BudgetExceededError
            The ledger has no room; nothing was run or spent.
        """
        say = progress or (lambda _msg: None)
        t0 = time.perf_counter()
        plan = self.plan(query, epsilon=epsilon, delta=delta, bounds=bounds, max_partitions=max_partitions,
                         max_rows=max_rows, keys=keys, noise=noise, split=split,
                         quantile_buckets=quantile_buckets, dialect=dialect, partition_order=partition_order)
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1); got {confidence!r}.")
        label = plan.spec.text if len(plan.spec.text) <= 200 else plan.spec.text[:197] + "..."
        meta = {"engine": self.engine, "split": {k: list(v) for k, v in plan.split.shares().items()},
                "max_partitions": plan.max_partitions, "max_rows": plan.max_rows}
        # Reserve before the engine reads any row: from then on every outcome, an answer or a failure
        # (an engine error, an overflow), may depend on the data, so the spend is committed whatever
        # happens and a failure is never a free look at the data.
        reservation = self.ledger.reserve(plan.guarantee, label=label, metadata=meta)
        try:
            say(f"bounding contributions and aggregating in {self.engine}")
            try:
                raw = self._backend.fetch(plan.compiled.sql(self._backend.dialect))
                hists = {i: self._backend.fetch(plan.compiled.histogram_sql(i, self._backend.dialect))
                         for i in plan.compiled.histograms}
            except Exception as exc:  # noqa: BLE001 - any engine failure after reading data is charged
                raise DataDependentFailure(
                    f"the {self.engine} engine failed while reading the data ({type(exc).__name__}); this query's "
                    f"budget {plan.guarantee} is spent, since the failure may depend on the data. Its message "
                    "is withheld because it can quote a row; run plan(...).sql on non-sensitive data to debug."
                ) from None
            t_engine = time.perf_counter() - t0
            say("adding noise and recording the spend in the ledger")
            result = finish_aggregates(plan, raw, hists, confidence=confidence, rng=rng)
        finally:
            self.ledger.commit(reservation)  # also on failure: see above
        result.remaining = self.ledger.remaining()
        result.timings = {"engine_s": t_engine, "total_s": time.perf_counter() - t0}
        result.engine = self.engine
        return result


    def histogram(self, column: str, edges: Any, *, epsilon: float, max_partitions: int = 1, max_rows: int = 1,
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
        ...     r = s.histogram("age", [18, 30, 50, 70], epsilon=1.0, rng=insecure_seeded(0))
        ...     print([row[0] for row in r.rows])
        ['[18, 30)', '[30, 50)', '[50, 70]']
        """
        e = np.asarray(edges, dtype=float)
        if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
            raise ValueError(f"edges must be at least two finite, strictly increasing numbers; got {edges!r}.")
        if column not in self._schema:
            raise ValueError(f"unknown column {column!r}; the table has {sorted(self._schema)}.")
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
            raise ValueError(f"a histogram needs a numeric column; {column} has type {self._schema[column]}.")
        return self.sql(spec, epsilon=epsilon, delta=delta, max_partitions=max_partitions, max_rows=max_rows,
                        keys=[(label,) for label in labels], noise=noise, confidence=confidence, rng=rng)


def exp_column(name: str) -> str:
    return _exp.column(name, quoted=True).sql(dialect="duckdb")


def _check_bounds(name: str, pair: object) -> tuple[float, float]:
    try:
        lo, hi = pair  # type: ignore[misc]
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise ValueError(f"bounds for {name!r} must be a pair (lo, hi) of numbers; got {pair!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds for {name!r} must be finite with lo < hi; got ({lo}, {hi}).")
    if max(abs(lo), abs(hi)) > _MAX_BOUND:
        raise ValueError(f"bounds for {name!r} must lie within +-{_MAX_BOUND:g}; got ({lo:g}, {hi:g}). Larger bounds "
                         "give sensitivities whose sums (and squares) could overflow in the engine.")
    return lo, hi


_MAX_BOUND = 1e100  # with max_rows, max_partitions <= 1e9 no sum of squares over any realistic table overflows
