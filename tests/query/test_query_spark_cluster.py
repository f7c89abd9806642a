"""A Spark standalone cluster: a master and two workers, each a JVM of its own, with one executor JVM
per worker (``spark_cluster`` in ``conftest.py``).  The driver here only plans; scans, partition
functions, md5 and hash ordering run on the executors.  Same raw aggregates as DuckDB for the same
plan, a full query end to end, and the md5 ordering checks.  See :mod:`spark_cases` for the checks
shared with local mode and Spark Connect.

Runs after the classic module (which stops its ``local[2]`` session; the driver JVM is reused) and
before the Connect module (which cannot start while a classic session runs): the modules sort so.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from services import SparkCluster
from spark_cases import (
    FAST,
    JVM,
    check_end_to_end,
    check_engines_agree,
    check_md5_order_agrees_for_decimal_date_timestamp_boolean_and_text_keys,
    check_md5_refuses_double_keys_and_hash_order_still_bounds,
)

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17 on the PATH")]

# shuffles of more than one partition, so that hashing and ordering are split over both executors
CLUSTER = FAST | {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"}


def _java(spark: Any, seq: Any) -> list[Any]:
    return list(spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))


def _executors(spark: Any) -> list[str]:
    """The ids of the executors registered with the driver (the driver itself left out)."""
    return sorted(str(i) for i in _java(spark, spark.sparkContext._jsc.sc().getExecutorIds()))


@pytest.fixture(scope="module")
def spark(spark_cluster: SparkCluster) -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(spark_cluster.master_url).appName("dpkit-tests-cluster")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
               .config("spark.executor.extraJavaOptions", JVM["spark.driver.extraJavaOptions"]))
    for key, value in (CLUSTER | JVM).items():
        builder = builder.config(key, value)
    s = builder.getOrCreate()
    deadline = time.monotonic() + 120
    while len(_executors(s)) < 2:  # executors register a few seconds after the context starts
        assert time.monotonic() < deadline, f"executors registered: {_executors(s)}"
        time.sleep(0.2)
    yield s
    s.stop()


def test_the_cluster_runs_two_executor_jvms(spark: Any, spark_cluster: SparkCluster) -> None:
    assert type(spark).__module__ == "pyspark.sql.session"  # classic, not Connect
    assert spark.sparkContext.master == spark_cluster.master_url and spark_cluster.master_url.startswith("spark://")
    assert len(_executors(spark)) == 2  # two executor JVMs besides the driver, one on each worker
    # a job of 8 tasks is spread over both: each executor reports the tasks it finished
    spark.range(0, 10_000, numPartitions=8).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    summaries = _java(spark, spark.sparkContext._jsc.sc().statusStore().executorList(True))
    executors = {(e.id(), e.hostPort()): e.completedTasks() for e in summaries if e.id() != "driver"}
    assert len(executors) == 2 and len({host for _, host in executors}) == 2, executors
    assert all(done > 0 for done in executors.values()), executors


def test_spark_cluster_gives_the_same_raw_aggregates_as_duckdb(spark: Any, tmp_path: Path) -> None:
    check_engines_agree(spark, tmp_path, queries=(0, 1, 2), csv_queries=(0,))


def test_spark_cluster_end_to_end(spark: Any, tmp_path: Path) -> None:
    check_end_to_end(spark, tmp_path)


def test_md5_order_refuses_double_keys_and_hash_order_still_bounds(spark: Any, tmp_path: Path) -> None:
    check_md5_refuses_double_keys_and_hash_order_still_bounds(spark, tmp_path)


def test_md5_order_agrees_for_decimal_date_timestamp_boolean_and_text_keys(spark: Any, tmp_path: Path) -> None:
    check_md5_order_agrees_for_decimal_date_timestamp_boolean_and_text_keys(spark, tmp_path)
