"""DP per-category count and clamped sum over 10^7 rows: dpkit.query against plain DuckDB and the peers, in one run.

Bar (issue 5, "Speed"): a per-category DP count and clamped sum with contribution bounding (at most
1 category per user, at most 10 rows per user and category, amount clamped to [0, 200], epsilon = 1)
on 10^7 synthetic rows (100k users, 50 categories) runs within 2x of the plain, non-private DuckDB
``GROUP BY`` on the same data, and faster than OpenDP's Polars API and PipelineDP's local backend.

The table is synthetic and fixed by a seed: each user has 1 to 5 favourite categories and about 100
rows (activity varies, lognormal), 99% of them in a favourite category; category popularity is
Zipf-like; ``amount`` is a lognormal spend, rounded to cents and capped at 200.  It is written once
to a Parquet file in a cache folder (``--data-dir``) and reused while its parameters are unchanged.

Rows (each in its own subprocess via ``_harness.run_isolated``, with a timeout and a memory cap;
median of ``--repeats`` runs after a warm-up; peak RSS is the subprocess's, the JVM's included for
Spark):

* raw limits, non-private DuckDB: ``GROUP BY category`` over the Parquet file and over an in-memory
  table; the two-level ``GROUP BY (user_id, category)`` then ``category`` that any per-user
  bounding must at least do (no bounding, no clamping); the row-level bounding by window functions
  (``ROW_NUMBER() OVER (PARTITION BY user_id, category) <= 10``, then one category per user), the
  issue's 1.51 s reference;
* dpkit ``Session.sql`` over the Parquet file with public keys, the same with private partition
  selection (``delta=1e-6``, no keys), and over an in-memory DuckDB table; the ledger write is in
  the timed call (it is part of every answer);
* OpenDP's Polars ``Context`` over ``pl.scan_parquet`` (identifier truncation to 10 rows per
  category and 1 category, public keys by ``with_keys``);
* PipelineDP's ``LocalBackend`` with public partitions, fed by a generator over Parquet batches;
* Tumult Analytics on local Spark (``.bench-venv/tumult``, a venv of its own: it pins pandas 1 and
  numpy 1), two queries (count, sum) of epsilon 0.5 each, as it has no multi-aggregate group-by.

* on a Spark standalone cluster (``--workers`` workers of ``--worker-cores`` cores, each a JVM of its own with
  one executor JVM, started for the row by ``tests/services.py`` from the row's own pyspark, its start untimed):
  the plain GROUP BY, dpkit ``Session.sql``, and Tumult on a cluster of the same shape (its own Spark 3.5 daemons,
  since a Spark 3.5 driver cannot use Spark 4 daemons).  ``--only cluster`` runs just these.

PipelineDP and Tumult take tens of seconds a run at 10^7 rows: they run ``--slow-repeats`` times
(1 by default at >= 5*10^6 rows) without a full-size warm-up (Tumult warms its JVM on 10^5 rows
first), and the table says so.

Sanity: each row's count of ``cat_00`` and sum of counts over the 50 categories, beside
the values expected for the bounded data when each user's category is drawn uniformly (dpkit,
PipelineDP, Tumult) or is the first by name (OpenDP here, see the note in its row).

    bash benchmarks/run.sh query                         # everything, 10^7 rows
    .bench-venv/bin/python benchmarks/bench_query.py --rows 1000000 --users 10000 --no-write
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

SEED = 20261122
GENERATOR_VERSION = 1  # bump when the generator changes, so cached files are not reused

# ----------------------------------------------------------------------------------------------
# snippets: each reads its parameters from P (set by the prelude) and assigns RESULT

PRELUDE = """
import os, statistics, time, warnings
warnings.simplefilter("ignore")
P = {params!r}
CATS = [f"cat_{{i:02d}}" for i in range(P["categories"])]
from _harness import timed_runs as _timed
"""

GENERATE = """
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
t0 = time.perf_counter()
rows, users, C = P["rows"], P["users"], P["categories"]
rng = np.random.default_rng(P["seed"])
popularity = 1.0 / np.arange(1, C + 1) ** 0.8
popularity /= popularity.sum()                                   # Zipf-like categories
n_favourite = rng.integers(1, 6, size=users)                     # 1 to 5 favourites a user
favourite = rng.choice(C, size=(users, 5), p=popularity)
activity = rng.lognormal(0.0, 0.5, size=users)
activity /= activity.sum()                                       # rows / users rows a user on average
uid = rng.choice(users, size=rows, p=activity)
cat = favourite[uid, (rng.random(rows) * n_favourite[uid]).astype(np.int64)]
stray = rng.random(rows) < 0.01                                  # 1% of rows anywhere
cat[stray] = rng.choice(C, size=int(stray.sum()), p=popularity)
amount = np.round(np.minimum(np.exp(rng.normal(3.0 + 0.02 * cat, 0.8)), 200.0), 2)
names = pa.array([f"cat_{i:02d}" for i in range(C)])
table = pa.table({"user_id": pa.array(uid + 1),
                  "category": pa.DictionaryArray.from_arrays(pa.array(cat.astype(np.int32)), names).cast(pa.string()),
                  "amount": pa.array(amount)})
tmp = P["path"] + f".tmp{os.getpid()}"
pq.write_table(table, tmp, row_group_size=1_000_000)
os.replace(tmp, P["path"])
RESULT = {"seconds": time.perf_counter() - t0, "bytes": os.path.getsize(P["path"])}
"""

# exact values of the bounded data, for the sanity column: per (user, category) at most 10 rows;
# one category a user, drawn uniformly ("expected") or the first by name ("first")
REFERENCE = """
import duckdb
con = duckdb.connect()
row = con.execute(f'''
WITH uc AS (SELECT user_id, category, COUNT(*) AS n, LEAST(COUNT(*), 10) AS b
            FROM read_parquet('{P["path"]}') GROUP BY ALL),
     u AS (SELECT user_id, COUNT(*) AS k, MIN(category) AS first FROM uc GROUP BY user_id)
SELECT SUM(b / k), SUM(CASE WHEN category = 'cat_00' THEN b / k END),
       SUM(CASE WHEN category = first THEN b END), SUM(CASE WHEN category = first AND category = 'cat_00' THEN b END),
       SUM(n), SUM(CASE WHEN category = 'cat_00' THEN n END), AVG(k), COUNT(DISTINCT user_id)
FROM uc JOIN u USING (user_id)''').fetchone()
keys = ["n_sum_expected", "n_cat0_expected", "n_sum_first", "n_cat0_first", "rows", "n_cat0_unbounded",
        "categories_per_user", "users"]
RESULT = dict(zip(keys, map(float, row)))
"""

_DUCKDB = """
import duckdb
con = duckdb.connect()
SRC = f"read_parquet('{P['path']}')"
if P["source"] == "memory":
    t = time.perf_counter()
    con.execute(f"CREATE TABLE t AS SELECT * FROM {SRC}")
    load_s = time.perf_counter() - t
    SRC = "t"
else:
    load_s = None
q = QUERY.replace("SRC", SRC)
timing, rows = _timed(lambda: con.execute(q).fetchall(), P["repeats"], P["warmup"])
by = {r[0]: r for r in rows}
RESULT = {**timing, "n_cat0": by.get("cat_00", (0, 0))[1], "n_sum": sum(r[1] for r in rows),
          "partitions": len(rows), "load_s": load_s}
"""

RAW = "QUERY = 'SELECT category, COUNT(*) AS n, SUM(amount) AS total FROM SRC GROUP BY category'\n" + _DUCKDB

# what any per-user bounding must at least do: group by (user, category), then by category
TWO_LEVEL = """
QUERY = '''SELECT category, SUM(n) AS n, SUM(s) AS total FROM (
  SELECT user_id, category, COUNT(*) AS n, SUM(amount) AS s FROM SRC GROUP BY user_id, category)
GROUP BY category'''
""" + _DUCKDB

# row-level bounding by window functions (sort based), still non-private: the reference
WINDOW = """
QUERY = '''WITH numbered AS (
  SELECT user_id, category, amount, ROW_NUMBER() OVER (PARTITION BY user_id, category) AS rn FROM SRC),
kept AS (SELECT * FROM numbered WHERE rn <= 10),
chosen AS (
  SELECT user_id, category, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY hash(user_id, category, 'salt')) AS pr
  FROM (SELECT DISTINCT user_id, category FROM kept))
SELECT kept.category, COUNT(*) AS n, SUM(LEAST(GREATEST(amount, 0), 200)) AS total
FROM kept JOIN chosen USING (user_id, category) WHERE pr = 1 GROUP BY kept.category'''
""" + _DUCKDB

_SPARK = """
from pyspark.sql import SparkSession
t = time.perf_counter()
spark = (SparkSession.builder.master("local[2]").appName("dpkit-bench").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "6g").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark_start_s = time.perf_counter() - t
"""

# a Spark standalone cluster of its own for the row (tests/services.py: a master and P["workers"] workers, separate
# JVMs of the pyspark this interpreter imports, one executor JVM per worker); its start is not timed
_CLUSTER = """
import sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from services import SparkCluster
from pyspark.sql import SparkSession
t = time.perf_counter()
cluster = SparkCluster.start(workers=P["workers"], cores=P["worker_cores"], memory=P["worker_memory"],
                             root=P["cluster_root"])
spark = (SparkSession.builder.master(cluster.master_url).appName("dpkit-bench-cluster")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.memory", "4g").config("spark.executor.memory", P["executor_memory"])
         .config("spark.sql.shuffle.partitions", str(P["shuffle_partitions"])).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
_jsc = spark.sparkContext._jsc.sc()
while _jsc.getExecutorIds().size() < P["workers"]:  # every worker's executor registered before the clock runs
    time.sleep(0.2)
spark_start_s = time.perf_counter() - t
"""

# the raw limit on Spark: plain GROUP BY of the same Parquet file
RAW_SPARK = _SPARK + """
def once():
    return spark.read.parquet(P["path"]).groupBy("category").count().collect()
timing, rows = _timed(once, P["repeats"], P["warmup"])
by = {r[0]: r[1] for r in rows}
RESULT = {**timing, "n_cat0": by.get("cat_00"), "n_sum": sum(by.values()), "partitions": len(by),
          "spark_start_s": spark_start_s}
spark.stop()
"""

RAW_CLUSTER = _CLUSTER + """
def once():
    return spark.read.parquet(P["path"]).groupBy("category").count().collect()
timing, rows = _timed(once, P["repeats"], P["warmup"])
by = {r[0]: r[1] for r in rows}
RESULT = {**timing, "n_cat0": by.get("cat_00"), "n_sum": sum(by.values()), "partitions": len(by),
          "spark_start_s": spark_start_s}
spark.stop()
cluster.stop()
"""

DPKIT = "SPARK_START = " + repr(_SPARK) + "\nCLUSTER_START = " + repr(_CLUSTER) + """
import tempfile
from dpkit.query import Session
from dpkit.guarantees import ApproxDP, PureDP
d = tempfile.mkdtemp(prefix="dpkit-bench-")
budget = ApproxDP(epsilon=1e9, delta=0.5) if P["private_keys"] else PureDP(epsilon=1e9)
t = time.perf_counter()
spark_start_s = None
if P["source"] == "memory":
    import duckdb
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{P['path']}')")
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    s = Session(con, table="t", privacy_unit="user_id", ledger=os.path.join(d, "ledger.db"), budget=budget)
elif P["source"] in ("spark", "cluster"):
    exec(SPARK_START if P["source"] == "spark" else CLUSTER_START)
    load_s = None
    t = time.perf_counter()
    s = Session(P["path"], privacy_unit="user_id", ledger=os.path.join(d, "ledger.db"), budget=budget,
                engine="spark", spark=spark)
else:
    load_s = None
    s = Session(P["path"], privacy_unit="user_id", ledger=os.path.join(d, "ledger.db"), budget=budget)
open_s = time.perf_counter() - t
QUERY = "SELECT category, COUNT(*) AS n, SUM(amount) AS total FROM t GROUP BY category"
kw = dict(epsilon=1.0, bounds={"amount": (0, 200)}, max_partitions=1, max_rows=10)
if P["private_keys"]:
    kw["delta"] = 1e-6
else:
    kw["keys"] = {"category": CATS}
timings = []
def once():
    r = s.sql(QUERY, **kw)
    timings.append(dict(r.timings))
    return r
timing, r = _timed(once, P["repeats"], P["warmup"])
timings = timings[P["warmup"]:]
names = list(r.columns)
rows = [dict(zip(names, row)) for row in r.rows]
RESULT = {**timing, "n_cat0": next((x["n"] for x in rows if x["category"] == "cat_00"), None),
          "n_sum": sum(x["n"] for x in rows), "partitions": len(rows), "open_s": open_s, "load_s": load_s,
          "timings": {k: statistics.median(t[k] for t in timings) for k in timings[0]},
          "count_scale": r.scales["n"]["rows"], "spark_start_s": spark_start_s}
s.close()
if P["source"] == "cluster":
    spark.stop()
    cluster.stop()
"""

OPENDP = """
import opendp.prelude as dp
import polars as pl
dp.enable_features("contrib")
phases = []
def once():
    t0 = time.perf_counter()
    context = dp.Context.compositor(
        data=pl.scan_parquet(P["path"]),
        privacy_unit=dp.unit_of(contributions=1, identifier="user_id"),
        privacy_loss=dp.loss_of(epsilon=1.0),
        split_evenly_over=1,
        margins=[dp.polars.Margin(by=["category"], max_length=P["rows"])],  # float sums need a length bound
    )
    query = (context.query()
             .truncate_per_group(10, by=["category"])
             # keeps ONE category a user: the helper filters rank < k and Polars ranks from 1, so k = 1
             # would keep nothing (OpenDP 0.16); its accounting charges k = 2.  keep="sample" fails on
             # Polars 1.36 (duplicate field "category" in its struct), hence "first" (by name).
             .truncate_num_groups(2, by=["category"], keep="first")
             .group_by("category")
             .agg(dp.len(), pl.col("amount").fill_null(0.0).dp.sum((0.0, 200.0)))
             .with_keys(pl.LazyFrame({"category": CATS})))
    released = query.release()
    t1 = time.perf_counter()
    out = released.collect()
    phases.append((t1 - t0, time.perf_counter() - t1))
    LAST.append(query)
    return out
LAST = []
timing, out = _timed(once, P["repeats"], P["warmup"])
phases = phases[P["warmup"]:]
by = dict(zip(out["category"].to_list(), out["len"].to_list()))
RESULT = {**timing, "n_cat0": by.get("cat_00"), "n_sum": sum(v or 0 for v in by.values()), "partitions": len(by),
          "timings": {"plan_and_release_s": statistics.median(p[0] for p in phases),
                      "collect_s": statistics.median(p[1] for p in phases)}}
summary = LAST[-1].summarize()  # untimed: a second search for the scale
RESULT["count_scale"] = float(summary.filter(pl.col("column") == "len")["scale"][0])
"""

PIPELINEDP = """
import pipeline_dp
import pyarrow.parquet as pq
def rows():  # streamed from Parquet batches: no full copy of the table up front
    for batch in pq.ParquetFile(P["path"]).iter_batches(batch_size=1 << 18, columns=["user_id", "category", "amount"]):
        d = batch.to_pydict()
        yield from zip(d["user_id"], d["category"], d["amount"])
def once():
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=0.0)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=1, max_contributions_per_partition=10, min_value=0.0, max_value=200.0)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1], value_extractor=lambda r: r[2])
    result = engine.aggregate(rows(), params, extractors, public_partitions=CATS)
    accountant.compute_budgets()
    return dict(result)
timing, out = _timed(once, P["repeats"], P["warmup"])
RESULT = {**timing, "n_cat0": out["cat_00"].count if "cat_00" in out else None,
          "n_sum": sum(v.count for v in out.values()), "partitions": len(out)}
"""

TUMULT = "CLUSTER_START = " + repr(_CLUSTER) + """
import sys
os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers need tmlt too
from importlib import metadata
from pyspark.sql import SparkSession
from tmlt.analytics import (AddRowsWithID, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID, PureDPBudget,
                            QueryBuilder, Session)
t = time.perf_counter()
if P.get("source") == "cluster":
    exec(CLUSTER_START)
else:
    spark = (SparkSession.builder.master("local[*]").config("spark.driver.memory", "6g")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "8").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
start_s = time.perf_counter() - t
keys = KeySet.from_dict({"category": CATS})
def once(limit=None):
    df = spark.read.parquet(P["path"])
    session = Session.from_dataframe(privacy_budget=PureDPBudget(1.0), source_id="t",
                                     dataframe=df if limit is None else df.limit(limit),
                                     protected_change=AddRowsWithID(id_column="user_id"))
    def grouped():
        return (QueryBuilder("t").enforce(MaxGroupsPerID("category", 1))
                .enforce(MaxRowsPerGroupPerID("category", 10)).groupby(keys))
    n = session.evaluate(grouped().count(name="n"), PureDPBudget(0.5)).toPandas()
    session.evaluate(grouped().sum("amount", 0.0, 200.0, name="total"), PureDPBudget(0.5)).toPandas()
    return n
t = time.perf_counter()
once(limit=10**5)  # warms the JVM and Spark's Python workers on 10^5 rows (a full-size warm-up costs a full run)
warmup_s = time.perf_counter() - t
timing, n = _timed(once, P["repeats"], P["warmup"])
jvm_peak = None
try:  # the JVM is a child process: its peak is not in this process's ru_maxrss
    pid = spark.sparkContext._gateway.proc.pid
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            jvm_peak = int(line.split()[1]) * 1024
except Exception:
    pass
by = dict(zip(n["category"], n["n"]))
RESULT = {**timing, "n_cat0": float(by.get("cat_00", 0)), "n_sum": float(sum(by.values())), "partitions": len(by),
          "spark_start_s": start_s, "warmup_small_s": warmup_s, "extra_peak_rss_bytes": jvm_peak,
          "version": metadata.version("tmlt.analytics") + ", pyspark " + metadata.version("pyspark")}
spark.stop()
if P.get("source") == "cluster":
    cluster.stop()
"""

# label -> (snippet, extra params, group, sanity reference); group "slow" runs --slow-repeats times without
# warm-up; the reference is the exact value the row's counts estimate: "unbounded" (no bounding),
# "expected" (each user's category drawn uniformly), "first" (each user's first category by name)
ROWS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "DuckDB GROUP BY, Parquet (raw limit)": (RAW, {"source": "parquet"}, "raw", "unbounded"),
    "DuckDB GROUP BY, in-memory table (raw limit)": (RAW, {"source": "memory"}, "raw", "unbounded"),
    "DuckDB GROUP BY (user, category) then category, no bounding":
        (TWO_LEVEL, {"source": "parquet"}, "raw", "unbounded"),
    "DuckDB window-function bounding, non-private": (WINDOW, {"source": "parquet"}, "raw", "expected"),
    "dpkit Session.sql, Parquet, public keys":
        (DPKIT, {"source": "parquet", "private_keys": False}, "dpkit", "expected"),
    "dpkit Session.sql, Parquet, private partition selection":
        (DPKIT, {"source": "parquet", "private_keys": True}, "dpkit", "expected"),
    "dpkit Session.sql, in-memory DuckDB table, public keys":
        (DPKIT, {"source": "memory", "private_keys": False}, "dpkit", "expected"),
    "Spark GROUP BY, Parquet (raw limit on Spark)": (RAW_SPARK, {"source": "spark"}, "raw", "unbounded"),
    "dpkit Session.sql on local Spark, Parquet, public keys":
        (DPKIT, {"source": "spark", "private_keys": False}, "dpkit", "expected"),
    "OpenDP Polars Context (scan_parquet)": (OPENDP, {}, "peer", "first"),
    "PipelineDP LocalBackend": (PIPELINEDP, {}, "slow", "expected"),
    "Tumult Analytics (local Spark)": (TUMULT, {"source": "spark"}, "slow", "expected"),
    "Spark GROUP BY, Parquet, standalone cluster (raw limit on the cluster)":
        (RAW_CLUSTER, {"source": "cluster"}, "raw", "unbounded"),
    "dpkit Session.sql on the standalone cluster, Parquet, public keys":
        (DPKIT, {"source": "cluster", "private_keys": False}, "dpkit", "expected"),
    "Tumult Analytics (standalone cluster)": (TUMULT, {"source": "cluster"}, "slow", "expected"),
}
LIMIT_OF = {"memory": "DuckDB GROUP BY, in-memory table (raw limit)", "parquet": "DuckDB GROUP BY, Parquet (raw limit)",
            "spark": "Spark GROUP BY, Parquet (raw limit on Spark)",
            "cluster": "Spark GROUP BY, Parquet, standalone cluster (raw limit on the cluster)"}
DPKIT_CLUSTER = "dpkit Session.sql on the standalone cluster, Parquet, public keys"
DPKIT_SPARK = "dpkit Session.sql on local Spark, Parquet, public keys"
DPKIT_MAIN = "dpkit Session.sql, Parquet, public keys"
DPKIT_MEMORY = "dpkit Session.sql, in-memory DuckDB table, public keys"


def _tumult_python() -> str | None:
    explicit = os.environ.get("DPKIT_BENCH_TUMULT_PYTHON")
    candidate = Path(explicit) if explicit else H.ROOT / ".bench-venv" / "tumult" / "bin" / "python"
    return str(candidate) if candidate.exists() else None


def _data_path(args: argparse.Namespace) -> Path:
    folder = Path(args.data_dir).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"query-r{args.rows}-u{args.users}-c{args.categories}-s{SEED}-v{GENERATOR_VERSION}.parquet"


def _sanity(res: dict[str, Any], ref: dict[str, Any] | None, kind: str) -> str:
    r = res.get("result") or {}
    if r.get("n_cat0") is None or ref is None:
        return ""
    n0, n = (("n_cat0_unbounded", "rows") if kind == "unbounded" else (f"n_cat0_{kind}", f"n_sum_{kind}"))
    word = {"unbounded": "exact", "expected": "expected", "first": "exact"}[kind]
    text = (f"n(cat_00) {r['n_cat0']:,.0f} ({word} {ref[n0]:,.0f}); "
            f"Σn {r['n_sum']:,.0f} ({word} {ref[n]:,.0f})")
    if r.get("count_scale"):
        text += f"; count noise scale {r['count_scale']:.3g}"
    if r.get("partitions") != ref.get("categories") and r.get("partitions") is not None:
        text += f"; {r['partitions']} categories released"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10**7)
    ap.add_argument("--users", type=int, default=None, help="default: rows / 100")
    ap.add_argument("--categories", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--slow-repeats", type=int, default=None,
                    help="runs of PipelineDP and Tumult (no warm-up); default 1 at >= 5e6 rows, else --repeats")
    ap.add_argument("--data-dir", default=os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "dpkit-bench"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per row")
    ap.add_argument("--only", nargs="*", default=None, help="run only rows whose label contains one of these words")
    ap.add_argument("--workers", type=int, default=2, help="workers of the standalone cluster (default 2)")
    ap.add_argument("--worker-cores", type=int, default=1, help="cores each worker offers (default 1)")
    ap.add_argument("--worker-memory", default="4g", help="memory each worker offers (default 4g)")
    ap.add_argument("--executor-memory", default="3g", help="heap of each executor on the cluster (default 3g)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3 (STYLE.md §7)")
    args.users = args.users or max(1, args.rows // 100)
    slow_repeats = args.slow_repeats or (1 if args.rows >= 5 * 10**6 else args.repeats)
    env = H.environment(["duckdb", "pyarrow", "polars", "sqlglot", "opendp", "pipeline-dp"])  # load average now
    path = _data_path(args)
    base = {"path": str(path), "rows": args.rows, "users": args.users, "categories": args.categories, "seed": SEED,
            "workers": args.workers, "worker_cores": args.worker_cores, "worker_memory": args.worker_memory,
            "executor_memory": args.executor_memory, "shuffle_partitions": 2 * args.workers * args.worker_cores}

    def run(code: str, label: str, python: str | None = None, memory_gib: float = 12.0, **extra: Any) -> dict[str, Any]:
        import tempfile

        sys.path.insert(0, str(H.ROOT / "tests"))
        from services import stop_leftovers

        cluster_root = tempfile.mkdtemp(prefix="dpkit-bench-cluster-")  # the row's cluster daemons, if it starts any
        params = {**base, **extra, "cluster_root": cluster_root}
        if extra.get("source") == "cluster":
            memory_gib = max(memory_gib, 64.0)  # the cap is per process: each JVM reserves its heap and more
        try:
            res = H.run_isolated(PRELUDE.format(params=params) + code, label=label, timeout_s=args.timeout,
                                 memory_gib=memory_gib, python=python)
        finally:
            left = stop_leftovers(Path(cluster_root))  # a row killed by its timeout leaves its daemons behind
            if left:
                print(f"  ({label}: stopped {len(left)} Spark daemons it left running)", file=sys.stderr, flush=True)
        status = f"{res['result'].get('median_s', 0):.3f} s median" if res.get("ok") else res.get("error")
        print(f"  {label}: {status}", file=sys.stderr, flush=True)
        return res

    generated = None
    if not path.exists():
        print(f"== generating {path}", file=sys.stderr, flush=True)
        generated = run(GENERATE, "generate")
        if not generated.get("ok"):
            print(generated, file=sys.stderr)
            return 1
    ref_res = run(REFERENCE, "reference")
    ref = ref_res["result"] if ref_res.get("ok") else None
    if ref is not None:
        ref["categories"] = args.categories

    results: dict[str, dict[str, Any]] = {}
    tumult_python = _tumult_python()
    for label, (code, extra, group, _) in ROWS.items():
        if args.only and not any(w.lower() in label.lower() for w in args.only):
            continue
        slow = group == "slow"
        reps = {"repeats": slow_repeats if slow else args.repeats, "warmup": 0 if slow else 1}
        if label.startswith("Tumult"):
            if tumult_python is None:
                results[label] = {"ok": False, "error": "not installed (.bench-venv/tumult: see benchmarks/run.sh)"}
                continue
            results[label] = run(code, label, python=tumult_python, memory_gib=24.0, **extra, **reps)
        else:
            results[label] = run(code, label, **extra, **reps)

    def median(label: str) -> float | None:
        r = results.get(label, {})
        return r["result"]["median_s"] if r.get("ok") else None

    rows = []
    for label, res in results.items():
        code, extra, group, kind = ROWS[label]
        limit = median(LIMIT_OF[extra.get("source", "parquet")])
        if res.get("ok"):
            r = res["result"]
            t = r["median_s"]
            peak = res.get("peak_rss_bytes", 0) + (r.get("extra_peak_rss_bytes") or 0)
            runs = f"{r['repeats']}" + (" (warm-up on 10^5 rows)" if r.get("warmup_small_s") else
                                        " (no warm-up)" if r["warmup"] == 0 else "")
            rows.append([label, H.fmt_time(t), runs, f"{t / limit:.2f}x" if limit else "—",
                         H.fmt_bytes(peak), _sanity(res, ref, kind)])
        else:
            rows.append([label, "failed", "—", "—", "—", str(res.get("error", ""))[:200]])
    table = H.markdown_table(
        ["query", "median", "runs", "vs plain GROUP BY (same engine and source)", "peak RSS", "sanity: count (reference)"],
        rows)

    # the bars, as the issue states them
    bars = []
    main_t, raw_t = median(DPKIT_MAIN), median(LIMIT_OF["parquet"])
    if main_t and raw_t:
        bars.append(f"- dpkit within 2x of plain DuckDB GROUP BY (Parquet): "
                    f"{'met' if main_t <= 2 * raw_t else 'NOT met'} ({main_t / raw_t:.2f}x)")
    mem_t, mem_raw = median(DPKIT_MEMORY), median(LIMIT_OF["memory"])
    if mem_t and mem_raw:
        bars.append(f"- dpkit within 2x of plain DuckDB GROUP BY (in-memory table): "
                    f"{'met' if mem_t <= 2 * mem_raw else 'NOT met'} ({mem_t / mem_raw:.2f}x)")
    floor = median("DuckDB GROUP BY (user, category) then category, no bounding")
    if main_t and floor:
        bars.append(f"- for scale: the two-level GROUP BY that any per-user bounding needs takes {H.fmt_time(floor)}; "
                    f"dpkit takes {main_t / floor:.2f}x that")
    window = median("DuckDB window-function bounding, non-private")
    if main_t and window:
        bars.append(f"- dpkit against the window-function (sort-based) bounding: {window / main_t:.1f}x faster")
    spark_t, tumult_t = median(DPKIT_SPARK), median("Tumult Analytics (local Spark)")
    if spark_t and tumult_t:
        bars.append(f"- on the same engine (local Spark, 2 cores): dpkit {H.fmt_time(spark_t)} vs Tumult "
                    f"{H.fmt_time(tumult_t)} ({tumult_t / spark_t:.1f}x faster)")
    cluster_t, tumult_cluster_t = median(DPKIT_CLUSTER), median("Tumult Analytics (standalone cluster)")
    if cluster_t and tumult_cluster_t:
        bars.append(f"- on the same standalone cluster ({args.workers} workers x {args.worker_cores} core, an executor "
                    f"of {args.executor_memory} each): dpkit {H.fmt_time(cluster_t)} vs Tumult "
                    f"{H.fmt_time(tumult_cluster_t)} ({tumult_cluster_t / cluster_t:.1f}x faster)")
    for peer in ("OpenDP Polars Context (scan_parquet)", "PipelineDP LocalBackend", "Tumult Analytics (local Spark)"):
        p = median(peer)
        if main_t and p:
            bars.append(f"- dpkit faster than {peer}: {'met' if main_t < p else 'NOT met'} ({p / main_t:.1f}x)")
        elif peer in results and not results[peer].get("ok"):
            bars.append(f"- {peer}: no figure ({results[peer].get('error', 'failed')})")

    details = []
    for label, res in results.items():
        r = res.get("result") or {}
        bits = []
        if r.get("timings"):
            bits.append("timings (median): " + ", ".join(f"{k} {H.fmt_time(v)}" for k, v in r["timings"].items()))
        for key, name in (("open_s", "session open"), ("load_s", "table load (untimed)"),
                          ("spark_start_s", "Spark start (untimed)"),
                          ("warmup_small_s", "warm-up on 10^5 rows (untimed)")):
            if r.get(key) is not None:
                bits.append(f"{name} {H.fmt_time(r[key])}")
        if r.get("runs") and len(r["runs"]) > 1:
            bits.append("runs " + ", ".join(H.fmt_time(x) for x in r["runs"]))
        if r.get("version"):
            bits.append(r["version"])
        if bits:
            details.append(f"- {label}: " + "; ".join(bits))

    data_line = f"- data: `{path.name}` ({H.fmt_bytes(path.stat().st_size)})"
    if ref:
        data_line += (f", {ref['rows']:,.0f} rows, {ref['users']:,.0f} users, {args.categories} categories, "
                      f"{ref['categories_per_user']:.2f} categories per user on average; "
                      f"unbounded count of cat_00 {ref['n_cat0_unbounded']:,.0f}")
    if generated:
        data_line += f"; generated in this run in {H.fmt_time(generated['result']['seconds'])}"
    v = env["versions"]
    load_end = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    md = "\n".join([
        f"# DP per-category count and clamped sum, {args.rows:,} rows (issue 5, Speed)",
        "",
        "SELECT category, COUNT(*), SUM(amount) GROUP BY category; at most 1 category and 10 rows per user and "
        "category, amount clamped to [0, 200], epsilon = 1 (public keys unless stated).",
        "",
        table,
        "",
        *bars,
        "",
        *details,
        "",
        data_line,
        f"- duckdb {v['duckdb']}, pyarrow {v['pyarrow']}, polars {v['polars']}, sqlglot {v['sqlglot']}",
        "- sanity: what each row estimates. Raw rows: the exact unbounded counts. Bounded rows: the expected bounded "
        "count when each user's one category is drawn uniformly (the draw itself moves n(cat_00) by a few hundred; "
        "the window row shows one draw without noise), or for OpenDP the exact count with each user's first category "
        "by name. A Laplace or geometric count of scale b has sd b·√2.",
        H.environment_markdown(env),
        f"- load average at the end (1/5/15 min): {load_end}",
    ])
    if not args.no_write:
        H.write_report("query", markdown=md, data={"results": results, "reference": ref, "args": vars(args)}, env=env)
    else:
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
