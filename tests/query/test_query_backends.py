"""DuckDB over every kind of source gives the same raw aggregates for the same plan.

One plan per query (:data:`query_reference.BACKEND_QUERIES`: K binding with private selection,
public keys, no GROUP BY), compiled for each session's relation with one fixed salt
(:func:`query_reference.compile_for`), run over: a pyarrow table, a pandas frame, a Polars frame,
a Parquet file, a CSV file and a table of a caller's DuckDB connection.  Main statement and
quantile histograms must agree (numbers to 1e-9 relative).  The Spark engines are compared with
the same helpers in ``test_query_spark_classic.py`` and ``test_query_spark_connect.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from dpkit.guarantees import ApproxDP
from dpkit.query import Session
from query_reference import BACKEND_QUERIES, assert_rows_equal, csv_schema, csv_text, fetch_all, mixed_table, to_arrow


def _budget() -> ApproxDP:
    return ApproxDP(epsilon=1.0, delta=1e-6)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("backends")
    table = mixed_table()
    arrow = to_arrow(table)
    pq.write_table(arrow, d / "t.parquet")
    (d / "t.csv").write_text(csv_text(table))
    con = duckdb.connect()
    con.execute(f"CREATE TABLE events AS SELECT * FROM read_parquet('{d / 't.parquet'}')")
    # pandas with nullable Int64, so that uid stays an integer column (a float64 uid is another table:
    # its units hash, and print, differently)
    frame = arrow.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    yield {"arrow": arrow, "pandas": frame, "polars": pl.from_arrow(arrow),
           "parquet": d / "t.parquet", "csv": d / "t.csv", "connection": con}
    con.close()


@pytest.mark.parametrize("index", range(len(BACKEND_QUERIES)))
def test_every_duckdb_source_gives_the_same_raw_aggregates(sources: dict, tmp_path: Path, index: int) -> None:
    query, kwargs = BACKEND_QUERIES[index]
    sessions = {}
    for name, data in sources.items():
        extra = (
            {"table": "events"}
            if name == "connection"
            else {"schema": csv_schema(mixed_table())}
            if name == "csv"
            else {}
        )
        sessions[name] = Session(
            data,
            max_partitions=1,
            max_rows=1,
            privacy_unit="uid",
            ledger=tmp_path / "l.db",
            **extra,
            budget=None if sessions else _budget(),
        )
    try:
        plan = sessions["arrow"].plan(query, **kwargs)  # compiled again below for each source's relation
        want = fetch_all(sessions["arrow"], plan)
        assert want[0], "the reference answer is empty: the comparison would prove nothing"
        for name, s in sessions.items():
            assert s.engine == "duckdb"
            got = fetch_all(s, plan)
            assert len(got) == len(want), name
            for g, w in zip(got, want):
                assert_rows_equal(g, w, label=name)
    finally:
        for name, s in sessions.items():
            if name != "connection":  # the caller's connection stays open: it is theirs
                s.close()


def test_a_callers_connection_is_left_open(sources: dict, tmp_path: Path) -> None:
    con = sources["connection"]
    with Session(
        con,
        max_partitions=1,
        max_rows=1,
        privacy_unit="uid",
        table="events",
        ledger=tmp_path / "l.db",
        budget=_budget(),
    ) as s:
        s.plan("SELECT COUNT(*) FROM events", epsilon=0.5)
    assert con.execute("SELECT COUNT(*) FROM events").fetchone()[0] == len(mixed_table()["uid"])


@pytest.mark.parametrize("crlf", [False, True])
def test_a_csv_header_with_a_byte_order_mark_names_its_first_column(tmp_path: Path, crlf: bool) -> None:
    """A CSV saved with a UTF-8 byte order mark (as spreadsheet programs write it): the header was read as
    '\\ufeffuid', so the declared column 'uid' was 'not in the file'.  The mark is not part of the name; the data
    lines (read after the header line) are unchanged, with CRLF line ends too."""
    from dpkit.query._backends import declared_file_source

    end = "\r\n" if crlf else "\n"
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + end.join(["uid,amount", "1,5", '2,"6"', "3,"]).encode() + end.encode())
    rows = duckdb.connect().execute(declared_file_source(path, {"uid": "BIGINT", "amount": "BIGINT"}, "duckdb"))
    assert rows.fetchall() == [(1, 5), (2, 6), (3, None)]
