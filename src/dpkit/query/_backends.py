"""Engines that run the compiled SQL: DuckDB embedded (the default) and Spark SQL.

Each backend exposes one relation (the session's table under an internal name), its schema, the
types of row-level expressions, and ``fetch`` for an aggregate query.  Only aggregates ever come
back to Python: rows stay in the engine.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Any, Protocol

from sqlglot import exp

__all__ = ["Backend", "DuckDBBackend", "SparkBackend", "is_numeric_type"]

_NUMERIC = re.compile(r"^(u?(tiny|small|big|huge)?int(eger)?\d*|long|short|byte|float\d*|double|real|"
                      r"decimal(\(.*\))?|numeric(\(.*\))?|u?hugeint|u?bigint|u?integer|u?smallint|u?tinyint)$",
                      re.IGNORECASE)


def is_numeric_type(type_name: str) -> bool:
    """True for the integer, floating and decimal types of DuckDB and Spark."""
    return bool(_NUMERIC.match(type_name.strip()))


class Backend(Protocol):
    dialect: str    # sqlglot dialect of the SQL it runs
    relation: str   # the SQL name of the session's table in that engine
    name: str

    def schema(self) -> dict[str, str]: ...

    def expression_types(self, exprs: list[str]) -> list[str]: ...

    def is_empty(self) -> bool: ...

    def cast_values(self, values: list[Any], type_name: str) -> list[Any]: ...

    def fetch(self, sql: str) -> list[tuple[Any, ...]]: ...


def _cast_values(fetch: Any, values: list[Any], type_name: str, dialect: str) -> list[Any]:
    if not values:
        return []
    rows = ", ".join(f"({i}, {exp.convert(v).sql(dialect=dialect)})" for i, v in enumerate(values))
    table = f"(VALUES {rows}) AS v(i, x)"
    got = dict(fetch(f"SELECT i, CAST(x AS {type_name}) FROM {table}"))
    return [got[i] for i in range(len(values))]


def _quote(name: str, dialect: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


class DuckDBBackend:
    """DuckDB in process: a file (CSV or Parquet, read in place), a dataframe, or a table of a connection."""

    dialect = "duckdb"
    name = "duckdb"

    def __init__(self, con: Any, relation: str, *, owned: bool) -> None:
        self._con = con
        self.relation = relation
        self._owned = owned

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, threads: int | None = None) -> DuckDBBackend:
        import duckdb

        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"no such data file: {str(p)!r}.")
        suffix = "".join(p.suffixes[-2:]).lower() if p.suffix.lower() in {".gz", ".zst"} else p.suffix.lower()
        reader = {".parquet": "read_parquet", ".pq": "read_parquet", ".csv": "read_csv_auto",
                  ".csv.gz": "read_csv_auto", ".tsv": "read_csv_auto", ".json": "read_json_auto",
                  ".jsonl": "read_json_auto", ".ndjson": "read_json_auto"}.get(suffix)
        if reader is None:
            raise ValueError(f"cannot tell the format of {str(p)!r} from its suffix; use .csv, .parquet or .json "
                             "(or open it yourself and pass a DuckDB connection and table).")
        con = duckdb.connect()
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        relation = "dpkit_source"
        con.execute(f"CREATE VIEW {relation} AS SELECT * FROM {reader}({exp.convert(str(p)).sql('duckdb')})")
        return cls(con, relation, owned=True)

    @classmethod
    def from_dataframe(cls, df: Any) -> DuckDBBackend:
        import duckdb

        con = duckdb.connect()
        relation = "dpkit_source"
        con.register(relation, df)  # pandas, Polars and Arrow are scanned in place, not copied
        return cls(con, relation, owned=True)

    @classmethod
    def from_connection(cls, con: Any, table: str) -> DuckDBBackend:
        relation = ".".join(_quote(part, "duckdb") for part in table.split("."))
        return cls(con, relation, owned=False)

    def schema(self) -> dict[str, str]:
        rows = self._con.execute(f"DESCRIBE SELECT * FROM {self.relation}").fetchall()
        return {r[0]: str(r[1]) for r in rows}

    def expression_types(self, exprs: list[str]) -> list[str]:
        if not exprs:
            return []
        cols = ", ".join(f"({e}) AS c{i}" for i, e in enumerate(exprs))
        rows = self._con.execute(f"DESCRIBE SELECT {cols} FROM {self.relation}").fetchall()
        return [str(r[1]) for r in rows]

    def is_empty(self) -> bool:
        return not self._con.execute(f"SELECT 1 FROM {self.relation} LIMIT 1").fetchall()

    def cast_values(self, values: list[Any], type_name: str) -> list[Any]:
        """``values`` converted by the engine to ``type_name`` (None stays None), in order."""
        return _cast_values(self.fetch, values, type_name, "duckdb")

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._con.execute(sql).fetchall()]

    def progress(self, on: bool) -> None:
        """Show DuckDB's own progress bar on the terminal for long statements."""
        self._con.execute(f"SET enable_progress_bar = {'true' if on else 'false'}")

    def close(self) -> None:
        if self._owned:
            self._con.close()


class SparkBackend:
    """Spark SQL through a SparkSession: classic (local or cluster) or Spark Connect."""

    dialect = "spark"
    name = "spark"

    def __init__(self, spark: Any, relation: str, native: str | None = None) -> None:
        self._spark = spark
        self.relation = relation  # as written in the DuckDB-dialect SQL that is transpiled for Spark
        self.native = native or relation  # as written in Spark SQL

    @classmethod
    def from_dataframe(cls, df: Any) -> SparkBackend:
        view = f"dpkit_source_{secrets.token_hex(6)}"
        df.createOrReplaceTempView(view)
        return cls(df.sparkSession, view)

    @classmethod
    def from_file(cls, spark: Any, path: str | os.PathLike[str]) -> SparkBackend:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"no such data file: {str(p)!r}.")
        suffix = p.suffix.lower()
        if suffix in {".parquet", ".pq"}:
            df = spark.read.parquet(str(p.resolve()))
        elif suffix in {".csv", ".tsv"}:
            df = spark.read.csv(str(p.resolve()), header=True, inferSchema=True, sep="\t" if suffix == ".tsv" else ",")
        elif suffix in {".json", ".jsonl", ".ndjson"}:
            df = spark.read.json(str(p.resolve()))
        else:
            raise ValueError(f"cannot tell the format of {str(p)!r} from its suffix; use .csv, .parquet or .json.")
        return cls.from_dataframe(df)

    @classmethod
    def from_table(cls, spark: Any, table: str) -> SparkBackend:
        parts = table.split(".")
        return cls(spark, ".".join(_quote(p, "duckdb") for p in parts), ".".join(_quote(p, "spark") for p in parts))

    def schema(self) -> dict[str, str]:
        return {name: str(t) for name, t in self._spark.sql(f"SELECT * FROM {self.native} LIMIT 0").dtypes}

    def expression_types(self, exprs: list[str]) -> list[str]:
        if not exprs:
            return []
        cols = ", ".join(f"({e}) AS c{i}" for i, e in enumerate(exprs))
        return [str(t) for _, t in self._spark.sql(f"SELECT {cols} FROM {self.native} LIMIT 0").dtypes]

    def is_empty(self) -> bool:
        return not self._spark.sql(f"SELECT 1 FROM {self.native} LIMIT 1").collect()

    def cast_values(self, values: list[Any], type_name: str) -> list[Any]:
        return _cast_values(self.fetch, values, type_name, "spark")

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Run ``sql`` with ANSI mode off, so that overflow or a bad cast on some row gives NULL, not an error."""
        conf = self._spark.conf
        before = conf.get("spark.sql.ansi.enabled", None)
        conf.set("spark.sql.ansi.enabled", "false")
        try:
            return [tuple(r) for r in self._spark.sql(sql).collect()]
        finally:
            if before is None:
                conf.unset("spark.sql.ansi.enabled")
            else:
                conf.set("spark.sql.ansi.enabled", before)

    def progress(self, on: bool) -> None:  # Spark shows its own console progress
        return None

    def close(self) -> None:
        return None
