"""Spark classic (``local[2]``, started once for this module): same raw aggregates as DuckDB, and a
full query end to end.  See :mod:`spark_cases` for the checks shared with Spark Connect."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dpkit.guarantees import ApproxDP
from dpkit.query import Session
from query_reference import assert_rows_equal, fetch_all, to_arrow
from spark_cases import FAST, JVM, check_end_to_end, check_engines_agree

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17 on the PATH")]


@pytest.fixture(scope="module")
def spark() -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("dpkit-tests").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (FAST | JVM).items():
        builder = builder.config(key, value)
    s = builder.getOrCreate()
    yield s
    s.stop()


def test_spark_classic_gives_the_same_raw_aggregates_as_duckdb(spark: Any, tmp_path: Path) -> None:
    assert type(spark).__module__ == "pyspark.sql.session"  # classic, not Connect
    check_engines_agree(spark, tmp_path, queries=(0, 1, 2), csv_queries=(0,))


def test_spark_classic_end_to_end(spark: Any, tmp_path: Path) -> None:
    check_end_to_end(spark, tmp_path)


@pytest.mark.xfail(strict=True, reason="BUG: partition_order='md5' hashes CAST(key AS text), and DuckDB and Spark "
                                       "print doubles differently (1e-05 vs 1.0E-5), so they keep different partitions")
def test_md5_order_agrees_for_double_keys(spark: Any, tmp_path: Path) -> None:
    """40 units, each with one row under each of five double keys; K = 1 keeps one key per unit."""
    import pyarrow.parquet as pq

    keys = [1e-5, 0.1, 1.0, 12345678.9, 2.5e20]
    table = {"uid": [u for u in range(40) for _ in keys], "g": [k for _ in range(40) for k in keys]}
    pq.write_table(to_arrow(table), tmp_path / "d.parquet")
    duck = Session(to_arrow(table), privacy_unit="uid", ledger=tmp_path / "l.db",
                   budget=ApproxDP(epsilon=1.0, delta=1e-6))
    sp = Session(spark.read.parquet(str(tmp_path / "d.parquet")), privacy_unit="uid", ledger=tmp_path / "l.db")
    plan = duck.plan("SELECT g, COUNT(*) AS n FROM t GROUP BY g", epsilon=1.0, keys={"g": keys},
                     max_partitions=1, partition_order="md5")
    assert_rows_equal(fetch_all(sp, plan)[0], fetch_all(duck, plan)[0], label="spark vs duckdb")
