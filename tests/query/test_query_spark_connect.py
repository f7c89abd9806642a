"""Spark Connect (``SparkSession.builder.remote("local[2]")``, a local Connect server started once
for this module): same raw aggregates as DuckDB, and a full query end to end.  See
:mod:`spark_cases` for the checks shared with Spark classic.

A Connect session cannot start while a classic one runs in the process; the classic module
(which sorts first) stops its session at its end.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from spark_cases import FAST, check_end_to_end, check_engines_agree

pytest.importorskip("pyspark")
pytest.importorskip("grpc")
pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17 on the PATH")]


@pytest.fixture(scope="module")
def spark() -> Any:
    from pyspark.sql import SparkSession

    # JVM options cannot be passed through remote(): Connect sets every builder option at run time and
    # warns that it cannot; run after the classic module, the JVM it started (with them) is reused
    s = SparkSession.builder.remote("local[2]").appName("dpkit-tests").getOrCreate()
    for key, value in FAST.items():
        s.conf.set(key, value)
    yield s
    s.stop()


def test_spark_connect_gives_the_same_raw_aggregates_as_duckdb(spark: Any, tmp_path: Path) -> None:
    assert type(spark).__module__ == "pyspark.sql.connect.session"  # Connect, not classic
    # the Parquet DataFrame through Connect; the file readers are Spark's own, shown by the classic module
    check_engines_agree(spark, tmp_path, queries=(0, 1), csv_queries=())


def test_spark_connect_end_to_end(spark: Any, tmp_path: Path) -> None:
    check_end_to_end(spark, tmp_path)
