"""Checks run on both Spark flavours (classic local mode and Spark Connect), shared by their modules.

Each flavour's module starts its SparkSession once (module-scoped fixture), calls these, and stops
it.  DuckDB over a pyarrow table is the reference engine: the same plan, compiled with one fixed
salt and ``partition_order="md5"`` (the order every engine computes alike), must give the same
raw aggregates on Spark, read from a Parquet file as a DataFrame and from a CSV file by
``Session(path, engine="spark")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dpkit.guarantees import ApproxDP
from dpkit.query import Session
from dpkit.random import insecure_seeded
from query_reference import (BACKEND_QUERIES, assert_rows_equal, csv_schema, csv_text, fetch_all, mixed_table,
                             to_arrow)


def write_sources(directory: Path) -> tuple[Path, Path]:
    table = mixed_table()
    pq.write_table(to_arrow(table), directory / "t.parquet")
    (directory / "t.csv").write_text(csv_text(table))
    return directory / "t.parquet", directory / "t.csv"


def reference_session(directory: Path) -> Session:
    return Session(to_arrow(mixed_table()), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=directory / "reference.db",
                   budget=ApproxDP(epsilon=1.0, delta=1e-6))


# Spark SQL settings for tiny tables: whole-stage code generation and adaptive execution cost more
# than they save at a few hundred rows (about a third of the Spark time here); results are unchanged.
FAST = {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": "1"}
# For the driver JVM, when a test starts it: C1 compilation only, which warms up in a fraction of
# the time full tiered compilation takes on short runs (about 10 s of the Spark tests' 27 s here).
JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def check_engines_agree(spark: Any, directory: Path, *, queries: tuple[int, ...], csv_queries: tuple[int, ...]) -> None:
    """``queries`` (indices into BACKEND_QUERIES) on a Parquet DataFrame, ``csv_queries`` on the CSV file."""
    parquet, csv = write_sources(directory)
    duck = reference_session(directory)
    sources = [("spark parquet", Session(spark.read.parquet(str(parquet)), max_partitions=1, max_rows=1, privacy_unit="uid",
                                         ledger=directory / "reference.db"), queries)]
    if csv_queries:
        sources.append(("spark csv", Session(csv, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=directory / "reference.db",
                                             engine="spark", spark=spark, schema=csv_schema(mixed_table())),
                        csv_queries))
    try:
        for _, s, _ in sources:
            assert s.engine == "spark"
            assert s.schema["uid"] in ("bigint", "int") and s.schema["x"] == "double"
        for index, (query, kwargs) in enumerate(BACKEND_QUERIES):
            plan = duck.plan(query, partition_order="md5", **kwargs)
            want = fetch_all(duck, plan)
            assert want[0]
            for name, s, which in sources:
                if index not in which:
                    continue
                got = fetch_all(s, plan)
                assert len(got) == len(want)
                for g, w in zip(got, want):
                    assert_rows_equal(g, w, label=name)
    finally:
        duck.close()


def check_end_to_end(spark: Any, directory: Path) -> None:
    """``Session.sql`` on a Spark DataFrame: the result, its intervals, the ledger; same noise as DuckDB."""
    parquet, _ = write_sources(directory)
    query = "SELECT k, COUNT(*) AS n, AVG(x) AS m FROM t WHERE y > 0 GROUP BY k ORDER BY k DESC"
    kwargs = dict(epsilon=1.0, bounds={"x": (0.0, 10.0)}, max_partitions=5, max_rows=2,
                  keys={"k": ["a", "b", "c", "d", "zz"]})
    budget = ApproxDP(epsilon=2.0, delta=1e-6)
    with Session(spark.read.parquet(str(parquet)), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=directory / "spark.db",
                 budget=budget) as s:
        r = s.sql(query, rng=insecure_seeded(42), **kwargs)
        assert r.engine == "spark" and r.insecure
        assert r.columns == ("k", "n", "m") and [row[0] for row in r.rows] == ["zz", "d", "c", "b", "a"]
        for (_, n, m), (n_lo, n_hi), (m_lo, m_hi) in zip(r.rows, r.intervals["n"], r.intervals["m"]):
            assert n_lo <= n <= n_hi and m_lo <= m <= m_hi and 0.0 <= m_lo <= m_hi <= 10.0
        (entry,) = s.ledger.history()
        assert entry.state == "committed" and entry.metadata["engine"] == "spark"
        assert s.remaining() == ApproxDP(epsilon=1.0, delta=1e-6)
    with reference_session(directory) as duck:  # K does not bind: same raw aggregates, so the same noise
        d = duck.sql(query, rng=insecure_seeded(42), **kwargs)
    assert [row[:2] for row in d.rows] == [row[:2] for row in r.rows]
    assert [row[2] for row in d.rows] == pytest.approx([row[2] for row in r.rows], rel=1e-9)
