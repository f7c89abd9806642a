r"""Differentially private aggregate queries over real tables (DuckDB embedded, Spark at scale).

* :class:`Session`: a table, its privacy unit column and a durable ledger; ``sql(...)`` answers
  ``SELECT k, COUNT(*), SUM(x), AVG(x), ... FROM t WHERE ... GROUP BY k`` with a stated guarantee,
  ``plan(...)`` shows the bounding, the budget split and the cost before anything runs.
* :func:`parse_sql`: the SQL front end (what is accepted, what is refused and why).
* Modules: ``_sql`` (parse/refuse), ``_compile`` (bounding by hash aggregation as engine SQL,
  transpiled by sqlglot for Spark), ``_noise`` (split, sensitivities, partition selection),
  ``_backends`` (DuckDB, Spark classic and Connect), ``_result`` (noise, intervals, the table).
"""

from dpkit.query._result import QueryResult, format_guarantee
from dpkit.query._spec import Aggregate, Key, QuerySpec
from dpkit.query._sql import parse_sql
from dpkit.query.session import DataDependentFailure, QueryPlan, Session

__all__ = [
    "Aggregate",
    "DataDependentFailure",
    "Key",
    "QueryPlan",
    "QueryResult",
    "QuerySpec",
    "Session",
    "format_guarantee",
    "parse_sql",
]
