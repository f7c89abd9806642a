"""Spark classic (``local[2]``, started once for this module): same raw aggregates as DuckDB, and a
full query end to end.  See :mod:`spark_cases` for the checks shared with the standalone cluster and
Spark Connect."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dpkit.guarantees import ApproxDP
from dpkit.query import Session
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
    check_engines_agree(spark, tmp_path, queries=(0, 1, 2, 3), csv_queries=(0,))


def test_spark_classic_end_to_end(spark: Any, tmp_path: Path) -> None:
    check_end_to_end(spark, tmp_path)


def test_md5_order_refuses_double_keys_and_hash_order_still_bounds(spark: Any, tmp_path: Path) -> None:
    check_md5_refuses_double_keys_and_hash_order_still_bounds(spark, tmp_path)


def test_md5_order_agrees_for_decimal_date_timestamp_boolean_and_text_keys(spark: Any, tmp_path: Path) -> None:
    check_md5_order_agrees_for_decimal_date_timestamp_boolean_and_text_keys(spark, tmp_path)


def test_a_spark_catalog_table_by_name(spark: Any, tmp_path: Path) -> None:
    """``Session(None, engine="spark", spark=..., table=name)`` reads a table (here a temp view) by name."""
    from dpkit.random import insecure_seeded
    from spark_cases import write_sources

    parquet, _ = write_sources(tmp_path)
    spark.read.parquet(str(parquet)).createOrReplaceTempView("dpkit_events")
    try:
        with Session(
            None,
            max_partitions=1,
            max_rows=1,
            privacy_unit="uid",
            ledger=tmp_path / "l.db",
            budget=ApproxDP(epsilon=1.0, delta=1e-6),
            engine="spark",
            spark=spark,
            table="dpkit_events",
        ) as s:
            assert s.engine == "spark"
            r = s.sql("SELECT COUNT(*) AS n FROM dpkit_events", epsilon=0.5, rng=insecure_seeded(0))
            assert r.engine == "spark" and len(r.rows) == 1
    finally:
        spark.catalog.dropTempView("dpkit_events")


def test_typos_spark_raises_only_on_a_row_are_refused_before_anything_is_spent(spark: Any, tmp_path: Path) -> None:
    """A regex that does not compile fails in Spark only when a row reaches it (ANSI off turns most other row
    errors into NULL); the plan runs on one row of fixed values first, so it is refused free, on a table and
    on its neighbour alike; a non-unique public join key is refused on Spark as on DuckDB."""
    import pandas as pd

    from dpkit.errors import InvalidArgumentError, UnsupportedError

    d = pd.DataFrame({"uid": [1, 2, 3], "region": ["north", "south", "north"], "x": [1.0, 2.0, 3.0]})
    dup = spark.createDataFrame(pd.DataFrame({"region": ["north", "north"], "a": [1, 2]}))
    for frame, name in ((d, "d"), (d.iloc[:2], "d2")):
        with Session(spark.createDataFrame(frame), privacy_unit="uid", ledger=tmp_path / f"{name}.db",
                     budget=ApproxDP(epsilon=10.0, delta=1e-6), max_partitions=1, max_rows=5,
                     public={"dup": dup}) as s:
            with pytest.raises(InvalidArgumentError, match="Nothing was spent"):
                s.sql("SELECT COUNT(*) AS n FROM t WHERE regexp_extract(region, '(', 1) = 'a'", epsilon=1.0)
            with pytest.raises(UnsupportedError, match="not a unique key"):
                s.sql("SELECT COUNT(*) AS n FROM t JOIN dup ON t.region = dup.region", epsilon=1.0)
            assert s.ledger.history() == ()  # type: ignore[attr-defined]  # a SQLite ledger


def test_a_gzipped_tsv_file_is_split_at_tabs(spark: Any, tmp_path: Path) -> None:
    """Spark chose its separator from the last suffix alone: a .tsv.gz file was read with ',' (each line one
    field, every other column NULL) while its header was split at tabs; DuckDB read it right."""
    import gzip

    from dpkit.query._backends import SparkBackend

    path = tmp_path / "d.tsv.gz"
    with gzip.open(path, "wt") as f:
        f.write("uid\tamount\n1\t5\n2\t6\n")
    backend = SparkBackend.from_file(spark, path, schema={"uid": "BIGINT", "amount": "BIGINT"})
    rows = backend.fetch(f"SELECT uid, amount FROM {backend.native} ORDER BY uid")
    assert [tuple(r) for r in rows] == [(1, 5), (2, 6)]


def test_a_quoted_line_end_stays_in_its_record_in_spark(spark: Any, tmp_path: Path) -> None:
    """As in DuckDB (tests/adversarial/test_neighbour_audit.py): a csv.writer file where unit 42's text holds
    line ends is read as its records, units 1 and 42 only; without multiLine Spark split physical lines and
    the text's later lines became rows of units 7 and 8."""
    import csv
    import io

    from dpkit.query._backends import SparkBackend

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["uid", "amount", "note"])
    writer.writerow([1, 5, "fine"])
    writer.writerow([42, 5, "hello\n7,10,x\r\n8,10,x"])
    path = tmp_path / "d.csv"
    path.write_text(buf.getvalue(), newline="")
    backend = SparkBackend.from_file(spark, path, schema={"uid": "BIGINT", "amount": "BIGINT", "note": "VARCHAR"})
    rows = backend.fetch(f"SELECT uid, note FROM {backend.native} ORDER BY uid")
    # (Spark's parser writes a quoted CRLF as LF; DuckDB keeps it: the records are the same)
    assert [tuple(r) for r in rows] == [(1, "fine"), (42, "hello\n7,10,x\n8,10,x")]
