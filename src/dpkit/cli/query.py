"""``dpkit query DATA SQL --privacy-unit COL --epsilon E``: a DP answer to an aggregate SQL query.

Runs on an embedded DuckDB by default (``--engine spark`` for a local Spark, ``--spark-remote``
for Spark Connect), records the spend in the ledger file before printing, and shows the budget
left.  ``--plan`` prints the bounding, the budget split and the SQL without running or spending.
"""

from __future__ import annotations

import argparse
import json
import math
import decimal
import numbers
import re
import sys
from pathlib import Path
from typing import Any
from dpkit.errors import InvalidArgumentError

EXAMPLE = ("dpkit query examples/transactions.csv --privacy-unit user_id --epsilon 1 --budget-epsilon 3 "
           "--schema amount=DOUBLE --bounds amount=0:200 --max-partitions 2 --max-rows 5 "
           "--keys category=groceries,restaurants,transport,fuel,pharmacy,clothing,electronics,travel,"
           "entertainment,utilities "
           "\"SELECT category, COUNT(*) AS purchases, AVG(amount) AS avg_amount FROM t GROUP BY category\"")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "query",
        help="answer an aggregate SQL query over a table with differential privacy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Answer SELECT keys, COUNT(*), COUNT(DISTINCT x), SUM(x), AVG(x), VAR_POP(x), STDDEV(x), MEDIAN(x),\n"
            "QUANTILE_CONT(x, q), MIN(x), MAX(x) [FILTER (WHERE ...)], and expressions of them, FROM t [JOIN a public\n"
            "table ON its unique key] [WHERE ...] [GROUP BY ...] [HAVING ...] [ORDER BY ...] [LIMIT n] over DATA "
            "(CSV,\n"
            "Parquet or JSON) with differential privacy; FROM may also be a per-unit subquery (SELECT unit, COUNT(*)\n"
            "AS n FROM t GROUP BY unit). Each privacy unit's contribution is bounded (--max-partitions, --max-rows,\n"
            "--bounds), noise is added to the aggregates only, and the cost is recorded in the ledger before the\n"
            "result is printed. Joins with private rows, raw rows and other subqueries are refused with a reason.\n"
            "NULL or NaN values are dropped before bounding (COUNT(*) still counts the row).\n\n"
            "The ledger (--ledger, default ./dpkit-ledger.db) holds the total budget: a new ledger needs\n"
            "--budget-epsilon (and --budget-delta for (epsilon, delta)); later runs spend from it and are refused\n"
            "once it is spent. Exit status: 0 answered, 2 bad input or refused SQL, 3 budget exhausted."
        ),
        epilog=f"Example:\n  {EXAMPLE}",
    )
    p.add_argument("data", help="the table: a .csv, .parquet or .json file")
    p.add_argument("sql", help="the query; the table is called t (see --table)")
    p.add_argument("--privacy-unit", required=True, metavar="COLUMN",
                   help="column identifying whose row it is (e.g. user_id); required")
    p.add_argument("--epsilon", type=float, default=None,
                   help="this query's epsilon (> 0); or give --rho or --accuracy")
    p.add_argument("--rho", type=float, default=None,
                   help="instead of --epsilon: a zCDP cost (> 0), Gaussian noise by default; needs --keys for GROUP BY")
    p.add_argument("--accuracy", action="append", default=[], metavar="NAME=HALF_WIDTH",
                   help="instead of --epsilon: target 95%% half-widths of counts and sums (repeatable); the smallest "
                        "epsilon that meets them is computed, shown by --plan, and charged")
    p.add_argument("--delta", type=float, default=0.0,
                   help="this query's delta (default 0); needed for GROUP BY without --keys and for --noise gaussian")
    p.add_argument("--bounds", action="append", default=[], metavar="COL=LO:HI",
                   help="clamping bounds of a value column (repeatable); required for SUM/AVG/VAR/STDDEV/quantiles")
    p.add_argument("--schema", action="append", default=[], metavar="COL=TYPE,...",
                   help="declared column types of a CSV or JSON file (repeatable; e.g. amount=DOUBLE); required "
                        "there, since types guessed from the values could depend on one person's row; undeclared "
                        "columns are text")
    p.add_argument("--max-partitions", type=int, default=None, metavar="K",
                   help="groups one unit may contribute to; required with GROUP BY")
    p.add_argument("--max-rows", type=int, default=None, metavar="L",
                   help="rows one unit may contribute to one group; required unless the query only counts units "
                        "or aggregates a per-unit subquery")
    p.add_argument("--keys", action="append", default=[], metavar="COL=V1,V2,...",
                   help="public group keys (repeatable, one per GROUP BY column); without them groups are "
                        "selected privately (needs --delta)")
    p.add_argument("--noise", choices=("laplace", "gaussian"), default=None,
                   help="noise family (default: gaussian with --rho, or with --delta under a zCDP budget; "
                        "else laplace)")
    p.add_argument("--selection", choices=("laplace", "gaussian"), default=None,
                   help="noise of private group selection (default: that of --noise); gaussian scales with "
                        "sqrt(--max-partitions)")
    p.add_argument("--public", action="append", default=[], metavar="NAME=FILE",
                   help="a public table that queries may JOIN on a unique key (repeatable)")
    p.add_argument("--no-bounding-report", action="store_true",
                   help="do not spend 5%% of epsilon on DP counts of the units bounding cut (the intervals then "
                        "cover the bounded data only)")
    p.add_argument("--split", default=None, metavar="NAME=SHARE,...",
                   help="budget shares by output column (and partition_selection), summing to 1; equal by default")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="level of the intervals, and of the half-widths --accuracy targets (default 0.95)")
    p.add_argument("--signed-noise", action="store_true",
                   help="release the raw noisy values: counts (and sums of one-signed values) may then be "
                        "negative; by default they and their interval ends are clamped to their sign (free "
                        "post-processing that never loses coverage)")
    p.add_argument("--quantile-intervals", action="store_true",
                   help="also give MEDIAN, QUANTILE_CONT, MIN and MAX a --confidence interval for the true quantile "
                        "of the bounded data, inside the same epsilon (half of each quantile's share goes to its "
                        "interval ends, so the point is less accurate)")
    p.add_argument("--ledger", default="dpkit-ledger.db",
                   help="ledger: a SQLite file (default ./dpkit-ledger.db) or a postgresql://user@host/db URL")
    p.add_argument("--budget-epsilon", type=float, default=None, help="total epsilon of a new ledger")
    p.add_argument("--budget-delta", type=float, default=0.0, help="total delta of a new ledger (default 0)")
    p.add_argument("--budget-rho", type=float, default=None, help="instead of --budget-epsilon: a zCDP budget rho")
    p.add_argument("--table", default="t", help="the table's name in the SQL (default t)")
    p.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="duckdb (embedded, default) or spark (local Spark, or Spark Connect with --spark-remote)")
    p.add_argument("--spark-remote", default=None, metavar="URL",
                   help="Spark Connect URL (e.g. sc://host:15002, or local) for --engine spark")
    p.add_argument("--plan", action="store_true",
                   help="print the plan (bounding, split, noise, SQL); run and spend nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    p.add_argument("--insecure-seed", type=int, default=None, dest="seed",
                   help="use a SEEDED, NOT PRIVATE generator (reproducible examples and tests only)")
    p.set_defaults(func=run)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InvalidArgumentError(f"{what} must look like NAME=VALUE; got {item!r}.")
        out[name.strip()] = value.strip()
    return out


def _where(session: Any) -> str:
    """The ledger's path or URL as the ledger states it (a password given in --ledger is never printed)."""
    ledger = session.ledger
    return str(getattr(ledger, "url", None) or getattr(ledger, "path", None) or type(ledger).__name__)


def _json_safe(x: Any) -> Any:
    """JSON values only: NaN and infinities become null, mappings dicts, tuples lists, the rest str."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (bool, int, str)) or x is None:
        return x
    if isinstance(x, dict) or hasattr(x, "items"):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if hasattr(x, "tolist"):  # NumPy arrays and scalars
        return _json_safe(x.tolist())
    if isinstance(x, (numbers.Real, decimal.Decimal)):  # Decimal, Estimate, ...
        return _json_safe(float(x))
    return str(x)  # dates, timestamps, UUIDs: ISO text


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidArgumentError(f"{what} must be a number; got {text!r}.") from None


def _bounds(items: list[str]) -> dict[str, tuple[Any, Any]]:
    """COL=LO:HI with numbers, or ISO dates/timestamps (COL=2013-01-01:2013-12-31; a timestamp's own colons
    stay with it: the split is at the colon before the second date's year)."""
    out: dict[str, tuple[Any, Any]] = {}
    for name, value in _pairs(items, "--bounds").items():
        m = re.fullmatch(r"(\d{4}-\d\d-\d\d[^:]*(?::\d\d)*):(\d{4}-\d\d-\d\d.*)", value)
        if m:
            out[name] = (m.group(1), m.group(2))
            continue
        lo, sep, hi = value.partition(":")
        try:
            out[name] = (float(lo), float(hi))
        except ValueError:
            raise InvalidArgumentError(
                f"--bounds {name}= must be LO:HI with two numbers (or two ISO dates); got {value!r}.") from None
        if not sep:
            raise InvalidArgumentError(f"--bounds {name}= must be LO:HI; got {value!r}.")
    return out


def _split(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    out = {}
    for name, value in _pairs([s for s in text.split(",") if s.strip()], "--split").items():
        try:
            out[name] = float(value)
        except ValueError:
            raise InvalidArgumentError(f"--split {name}= must be a number; got {value!r}.") from None
    return out


def _session(args: argparse.Namespace) -> Any:
    from dpkit.guarantees import ApproxDP, PureDP
    from dpkit.query import Session

    data = Path(args.data)
    if not data.exists():
        raise InvalidArgumentError(f"no such data file: {args.data!r}.")
    budget: Any = None
    if args.budget_rho is not None:
        from dpkit.guarantees import ZCDP

        if args.budget_epsilon is not None or args.budget_delta:
            raise InvalidArgumentError(
                "give --budget-rho (a zCDP budget) or --budget-epsilon/--budget-delta, not both.")
        budget = ZCDP(args.budget_rho)
    elif args.budget_epsilon is not None:
        budget = (PureDP(epsilon=args.budget_epsilon) if not args.budget_delta
                  else ApproxDP(epsilon=args.budget_epsilon, delta=args.budget_delta))
    elif "://" not in args.ledger and not Path(args.ledger).exists():  # a URL: the server says if it is new
        raise InvalidArgumentError(f"the ledger {args.ledger!r} does not exist yet: give its total budget with "
                                   "--budget-epsilon "
                         "(and --budget-delta) or --budget-rho, or point --ledger at an existing ledger.")
    spark = None
    if args.engine == "spark":
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName("dpkit")
        spark = (builder.remote(args.spark_remote) if args.spark_remote else builder.master("local[*]")).getOrCreate()
    elif args.spark_remote:
        raise InvalidArgumentError("--spark-remote needs --engine spark.")
    schema = _pairs([s for item in args.schema for s in item.split(",") if s.strip()], "--schema") or None
    public = {name: Path(path) for name, path in _pairs(args.public, "--public").items()}
    for name, path in public.items():
        if not path.exists():
            raise InvalidArgumentError(f"no such public table file for {name!r}: {str(path)!r}.")
    return Session(data, privacy_unit=args.privacy_unit, ledger=args.ledger, budget=budget, table=args.table,
                   engine=args.engine, spark=spark, schema=schema, public=public or None)


def run(args: argparse.Namespace) -> int:
    from dpkit.query import format_guarantee
    from dpkit.random import insecure_seeded

    keys_arg = {name: [v for v in values.split(",")] for name, values in _pairs(args.keys, "--keys").items()} or None
    accuracy = {name: _number(value, f"--accuracy {name}=")
                for name, value in _pairs(args.accuracy, "--accuracy").items()}
    if (args.epsilon is not None) + (args.rho is not None) + bool(accuracy) != 1:
        raise InvalidArgumentError("give one of --epsilon (the cost), --rho (a zCDP cost) or --accuracy "
                                   "NAME=HALF_WIDTH "
                         "(targets).")
    options = dict(epsilon=args.epsilon, rho=args.rho, delta=args.delta, bounds=_bounds(args.bounds),
                   max_partitions=args.max_partitions, max_rows=args.max_rows, keys=keys_arg,
                   noise=args.noise, split=_split(args.split), selection=args.selection,
                   bounding_report=not args.no_bounding_report, accuracy=accuracy or None,
                   quantile_intervals=args.quantile_intervals,
                   confidence=args.confidence)  # for --plan too: --accuracy's epsilon is computed at this level

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"dpkit: {msg} ...", file=sys.stderr, flush=True)

    say(f"opening {args.data} ({args.engine})")
    session = _session(args)
    try:
        if args.plan:
            plan = session.plan(args.sql, **options)
            print(plan)
            print(f"SQL ({session.engine}):\n{plan.sql}")
            print(f"budget left in {_where(session)}: {format_guarantee(session.remaining())} (nothing was spent)")
            return 0
        rng = None if args.seed is None else insecure_seeded(args.seed)
        result = session.sql(args.sql, rng=rng, progress=say, nonnegative=not args.signed_noise, **options)
        if args.json:
            print(json.dumps(_json_safe({"columns": list(result.columns), "rows": result.to_dicts(),
                                         "cost": format_guarantee(result.guarantee),
                                         "remaining": format_guarantee(result.remaining),
                                         "ledger": _where(session), "insecure": result.insecure,
                                         "selection": result.selection, "details": result.details}),
                             indent=2, allow_nan=False))
        else:
            print(result)
            print(f"budget left in {_where(session)}: {format_guarantee(result.remaining)}")
        return 0
    finally:
        session.close()
