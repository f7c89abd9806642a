"""Engines that run the compiled SQL: DuckDB embedded (the default) and Spark SQL.

Each backend exposes one relation (the session's table under an internal name), its schema, the
types of row-level expressions, and ``fetch`` for an aggregate query.  Only aggregates ever come
back to Python: rows stay in the engine.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpkit.errors import ArgumentTypeError, InvalidArgumentError

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

    def schema_of(self, relation: str) -> dict[str, str]: ...

    def describe(self, sql: str) -> list[str]: ...

    def register_public(self, name: str, data: Any) -> str: ...

    def is_unique(self, relation: str, columns: list[str]) -> bool: ...

    def expression_types(self, exprs: list[str]) -> list[str]: ...

    def check(self, sql: str) -> None: ...

    def cast_values(self, values: list[Any], type_name: str) -> list[Any]: ...

    def fetch(self, sql: str) -> list[tuple[Any, ...]]: ...

    def fetch_arrow(self, sql: str) -> Any: ...

    def register_table(self, name: str, table: Any) -> None: ...

    def create_temp(self, name: str, sql: str) -> None: ...


def _cast_values(fetch: Any, values: list[Any], type_name: str, dialect: str) -> list[Any]:
    if not values:
        return []
    rows = ", ".join(f"({i}, {exp.convert(v).sql(dialect=dialect)})" for i, v in enumerate(values))
    table = f"(VALUES {rows}) AS v(i, x)"
    got = dict(fetch(f"SELECT i, CAST(x AS {type_name}) FROM {table}"))
    return [got[i] for i in range(len(values))]


def _quote(name: str, dialect: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


# ---- files whose types would come from the data ---------------------------------------------------------
_KINDS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv", ".csv.gz": "csv", ".tsv.gz": "csv",
          ".json": "json", ".jsonl": "json", ".ndjson": "json"}


def _file_kind(p: Path) -> str:
    if not p.exists():
        raise FileNotFoundError(f"no such data file: {str(p)!r}.")
    suffix = "".join(p.suffixes[-2:]).lower() if p.suffix.lower() == ".gz" else p.suffix.lower()
    kind = _KINDS.get(suffix)
    if kind is None:
        raise InvalidArgumentError(
            f"cannot tell the format of {str(p)!r} from its suffix; use .csv, .tsv, .parquet or .json "
            "(or open it yourself and pass a DuckDB connection and table).")
    return kind


def _require_schema(schema: dict[str, str] | None, p: Path, kind: str) -> dict[str, str]:
    if not schema:
        raise InvalidArgumentError(
            f"{str(p)!r} is {kind.upper()}, whose column types would be guessed from the values, so one person's "
            "row (a '12.5' or an 'n/a') could change the schema that queries are checked against. Declare the "
            "types of the columns you aggregate: schema={'amount': 'DOUBLE', ...} (command line: --schema "
            "amount=DOUBLE); columns not declared are read as text. Values that do not convert become NULL.")
    if not isinstance(schema, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in schema.items()):
        raise ArgumentTypeError("schema must map column names to SQL type names, e.g. {'amount': 'DOUBLE'}.")
    return schema


def _type_sql(type_name: str, dialect: str) -> str:
    try:
        return exp.DataType.build(type_name, dialect="duckdb").sql(dialect=dialect)
    except (SqlglotError, ValueError):  # a ParseError/TokenError for a bad name, ValueError for a non-string
        raise InvalidArgumentError(
            f"{type_name!r} is not a SQL type name; use e.g. DOUBLE, BIGINT, VARCHAR, DATE.") from None


def _check_declared(schema: dict[str, str], names: list[str], p: Path) -> dict[str, str]:
    unknown = [c for c in schema if c not in names]
    if unknown:
        raise InvalidArgumentError(
            f"schema declares {unknown}, which {str(p)!r} does not have; its columns are {names}.")
    return schema


def _csv_delimiter(p: Path) -> str:
    """The field delimiter of a CSV or TSV file (``x.tsv`` and ``x.tsv.gz``: a tab), for every reader alike."""
    return "\t" if ".tsv" in p.name.lower() else ","


def _csv_header(p: Path) -> list[str]:
    """The column names on the first line (the header is public, like a schema)."""
    import csv
    import gzip

    opener = gzip.open if p.suffix.lower() == ".gz" else open
    # errors="replace": the text decoder reads ahead of the first line, into the rows (one unit's invalid
    # UTF-8 there made opening the file fail); the header's own bytes decode the same either way
    with opener(p, "rt", newline="", encoding="utf-8-sig", errors="replace") as f:  # a leading BOM is no name
        header = next(csv.reader(f, delimiter=_csv_delimiter(p)), None)
    if not header:
        raise InvalidArgumentError(f"{str(p)!r} has no header line naming its columns.")
    if len(set(header)) != len(header):
        raise InvalidArgumentError(f"{str(p)!r} repeats column names in its header: {header}.")
    return header


def _csv_records(lit: str, names: list[str], delimiter: str) -> str:
    """DuckDB SQL reading a CSV/TSV file's records (RFC 4180, as ``csv.writer`` and ``pandas.to_csv`` write them),
    every field as text (``names``), each record a function of its own bytes alone.

    A quoted field may hold the delimiter, doubled quotes and line ends (``\n``, ``\r``, ``\r\n``): one unit's
    free text that holds a line end stays one field of its own record.  (A reader that split physical lines
    made that text's later lines rows of whatever units they named: one unit's value added rows for others.)
    A record DuckDB cannot read (invalid UTF-8, too few fields, too long) is skipped (``ignore_errors``), one
    with too many fields keeps the first ones (``strict_mode = false``: with it on, a carriage return before a
    line end failed the whole scan), and no quoted line end fails the scan (``null_padding = false``; with it
    on, DuckDB refuses quoted line ends).  The quoting itself is trusted to be well formed, as the README's
    threat model states: a field that opens a quote and never closes it is not RFC 4180, and runs on to the
    next quote whatever reader follows the standard.
    """
    cols = "{" + ", ".join(f"{exp.convert(n).sql('duckdb')}: 'VARCHAR'" for n in names) + "}"
    delim = "'\t'" if delimiter == "\t" else f"'{delimiter}'"
    return (f"SELECT * FROM read_csv({lit}, header = true, auto_detect = false, delim = {delim}, quote = '\"', "
            f"escape = '\"', columns = {cols}, ignore_errors = true, null_padding = false, strict_mode = false)")


def _refuse_json_array(p: Path) -> None:
    """Refuse a JSON file that is one array of records: dpkit reads JSON one record per line (newline-delimited),
    where a line that is not an object is a row of NULLs, so an array file would be answered as NULLs only.  The
    file's form is read from its first character (the curator's choice of format, like its suffix)."""
    with open(p, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"["):
        raise InvalidArgumentError(
            f"{str(p)!r} holds a JSON array; dpkit reads newline-delimited JSON (one object per line, so that one "
            "person's malformed record cannot fail or change another's). Convert it, e.g. with jq -c '.[]'.")


@functools.lru_cache(maxsize=1)
def _parquet_replaces_bad_utf8() -> bool:
    """Whether this DuckDB's ``read_parquet`` takes ``utf8_validation`` (a fresh in-memory database says)."""
    import duckdb

    con = duckdb.connect()
    try:
        rows = con.execute("SELECT parameters FROM duckdb_functions() WHERE function_name = 'read_parquet'").fetchall()
    finally:
        con.close()
    return any("utf8_validation" in (r[0] or []) for r in rows)


def declared_file_source(path: str | os.PathLike[str], schema: dict[str, str] | None, dialect: str) -> str:
    """DuckDB SQL reading a file with types that no row can change, and rows that no other row can change.

    * Parquet: the file's own schema (written by the data's curator, public), or ``schema``'s types.
    * CSV/TSV: a fixed dialect (``,`` or tab, ``"`` quotes, a header line; no sniffing of the values), RFC 4180
      records (:func:`_csv_records`: a quoted field may hold line ends), every field read as text, then
      ``TRY_CAST`` to the declared type (text if undeclared); a value that does not convert becomes NULL
      and a record DuckDB cannot read is skipped, each a function of that record alone.
    * JSON: newline-delimited, one record per line; exactly the declared columns, read as text and
      ``TRY_CAST``, so no record adds a column; a line that is not a JSON object is a row of NULLs
      (``ignore_errors``), where it failed the whole scan.
    """
    p = Path(path)
    kind = _file_kind(p)
    lit = exp.convert(str(p)).sql("duckdb")
    if kind == "parquet":
        # a string that is not UTF-8 failed the whole scan (DuckDB validates it while decoding, outside TRY): one
        # unit's bytes then decided whether every query reading the column failed.  Replaced by '?' instead, a
        # function of that value alone (DuckDB >= 2.0; older versions keep their strict check)
        src = f"read_parquet({lit}{', utf8_validation = ' + repr('replace') if _parquet_replaces_bad_utf8() else ''})"
        if not schema:
            return f"SELECT * FROM {src}"
        import duckdb

        names = [r[0] for r in duckdb.connect().execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        declared = _check_declared(_require_schema(schema, p, kind), names, p)
    elif kind == "csv":
        declared = _require_schema(schema, p, kind)
        names = _csv_header(p)
        _check_declared(declared, names, p)
        src = f"({_csv_records(lit, names, _csv_delimiter(p))})"
    else:
        declared = _require_schema(schema, p, kind)
        _refuse_json_array(p)
        names = list(declared)
        cols = "{" + ", ".join(f"{exp.convert(n).sql('duckdb')}: 'VARCHAR'" for n in names) + "}"
        src = f"read_json({lit}, columns = {cols}, format = 'newline_delimited', ignore_errors = true)"
    items = []
    for n in names:
        q = _quote(n, "duckdb")
        items.append(f"TRY_CAST({q} AS {_type_sql(declared[n], 'duckdb')}) AS {q}" if n in declared else q)
    return f"SELECT {', '.join(items)} FROM {src}"


def _spark_typed(df: Any, declared: dict[str, str]) -> Any:
    """``df`` with each declared column converted by ``try_cast`` (NULL where a value does not convert)."""
    from pyspark.sql import functions as F

    cols = [F.expr(f"try_cast({_quote(c, 'spark')} AS {_type_sql(declared[c], 'spark')})").alias(c)
            if c in declared else F.col(_quote(c, "spark")) for c in df.columns]
    return df.select(*cols)


def _owned_connection() -> Any:
    """An in-memory DuckDB connection of dpkit's own, set for large inputs.

    ``preserve_insertion_order = false`` lets DuckDB aggregate and spill without keeping row order
    (dpkit orders every result it needs ordered); DuckDB's defaults otherwise hold: a memory limit of
    80% of RAM and spilling to a temporary directory beyond it, which the 10^9-row run of
    ``benchmarks/bench_scale.py`` relies on.
    """
    import duckdb

    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    return con


def _text_value(value: object) -> str | None:
    """One value of a pandas object or Python-string column as text: a function of that value alone.

    Missing values (None, NaN, NA, NaT) are NULL; anything else is its ``str``, with what UTF-8 cannot encode
    (a lone surrogate such as '\\ud800') replaced by '?'; a value whose ``str`` fails is NULL."""
    import pandas as pd

    try:
        if pd.api.types.is_scalar(value) and pd.isna(value):
            return None
        text = value if isinstance(value, str) else str(value)
        return text.encode("utf-8", "replace").decode("utf-8")
    except Exception:  # noqa: BLE001 - an object whose str() fails: NULL, decided by this value alone
        return None


def _pandas_text(df: Any) -> Any:
    """A pandas ``df`` as DuckDB may scan it: text columns read as text, and no index.

    * A column of dtype object or ``StringDtype('python')`` has no type of its own: DuckDB's pandas scan would
      take one from a sample of its values (so one unit's value could change the schema every query is
      checked against: its b'x' made the column BLOB, its 2**70 HUGEINT) and would fail the whole query on
      one unit's string that UTF-8 cannot encode (a lone surrogate), a failure no TRY catches.  Such a
      column is read as text, each value by :func:`_text_value` (a function of that value alone).
    * A categorical column is text too: its categories are most often the data's distinct values, and as a
      DuckDB ENUM type they were the schema (``ENUM('a', 'b', 'secret-diagnosis')``), shown by
      ``Session.schema`` and by refusals without any spend.
    * The index is not part of the table: DuckDB scans a frame with an Arrow-backed column through Arrow,
      which adds a non-default index as a column ``__index_level_0__``, so a frame with rows removed (a
      neighbour) gained a column.  The frame is given a fresh default index.

    Only the text columns are copied (the others are shared); anything but a pandas frame is returned as is."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        return df
    import pyarrow as pa

    out = df.copy(deep=False)
    out.index = pd.RangeIndex(len(df))
    for i, dtype in enumerate(df.dtypes):
        python_strings = isinstance(dtype, pd.StringDtype) and dtype.storage == "python"
        categorical = isinstance(dtype, pd.CategoricalDtype)
        if not (pd.api.types.is_object_dtype(dtype) or python_strings or categorical):
            continue
        # a categorical's categories are usually the distinct values of the data (astype("category")): DuckDB
        # made them an ENUM type, so Session.schema and refusals listed every unit's value, free of charge
        column = df.iloc[:, i].astype(object) if categorical else df.iloc[:, i]
        array = None
        if pd.api.types.infer_dtype(column, skipna=True) == "string":  # only str and missing values
            try:
                array = pa.array(column, type=pa.string(), from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError, ValueError, TypeError):
                array = None  # a string UTF-8 cannot encode: value by value, with the same result for the others
        if array is None:
            array = pa.array([_text_value(v) for v in column], type=pa.string())
        out.isetitem(i, pd.arrays.ArrowStringArray(array))
    return out


class DuckDBBackend:
    """DuckDB in process: a file (CSV or Parquet, read in place), a dataframe, or a table of a connection."""

    dialect = "duckdb"
    name = "duckdb"

    def __init__(self, con: Any, relation: str, *, owned: bool) -> None:
        self._con = con
        self.relation = relation
        self._owned = owned
        self._empty_made = False
        self._null_row: str | None = None  # see null_row_copy: None not made yet, '' impossible

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, schema: dict[str, str] | None = None,
                  threads: int | None = None) -> DuckDBBackend:
        """A view over a CSV, Parquet or JSON file, read in place.

        CSV and JSON carry no types: they need a declared ``schema`` (see :func:`declared_file_source`);
        Parquet's own schema is used unless one is given.
        """
        con = _owned_connection()
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        relation = "dpkit_source"
        con.execute(f"CREATE VIEW {relation} AS {declared_file_source(path, schema, 'duckdb')}")
        return cls(con, relation, owned=True)

    @classmethod
    def from_dataframe(cls, df: Any) -> DuckDBBackend:
        con = _owned_connection()
        relation = "dpkit_source"
        # DuckDB guesses the type of a pandas object column from a sample of its values (one unit's b'x' made it
        # BLOB, its 2**70 HUGEINT, its Decimal('1.555') DECIMAL(4,3)): _pandas_text leaves it no such column
        con.register(relation, _pandas_text(df))  # pandas, Polars and Arrow are scanned in place, not copied
        return cls(con, relation, owned=True)

    @classmethod
    def from_connection(cls, con: Any, table: str) -> DuckDBBackend:
        relation = ".".join(_quote(part, "duckdb") for part in table.split("."))
        return cls(con, relation, owned=False)

    def schema(self) -> dict[str, str]:
        return self.schema_of(self.relation)

    def schema_of(self, relation: str) -> dict[str, str]:
        rows = self._con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        return {r[0]: str(r[1]) for r in rows}

    def describe(self, sql: str) -> list[str]:
        """The column types of ``sql``, bound and not run."""
        return [str(r[1]) for r in self._con.execute(f"DESCRIBE {sql}").fetchall()]

    def register_public(self, name: str, data: Any) -> str:
        """Make a public table available to joins: a file (types inferred: it is public) or a dataframe."""
        relation = _quote(f"dpkit_public_{name}", "duckdb")
        if isinstance(data, (str, os.PathLike)):
            p = Path(data)
            kind = _file_kind(p)
            reader = {"parquet": "read_parquet", "csv": "read_csv_auto", "json": "read_json_auto"}[kind]
            self._con.execute(f"CREATE OR REPLACE TEMP VIEW {relation} AS SELECT * FROM "
                              f"{reader}({exp.convert(str(p)).sql('duckdb')})")
        else:
            self._con.register(f"dpkit_public_{name}", data)
        return relation

    def is_unique(self, relation: str, columns: list[str]) -> bool:
        """Whether no two rows of a (public) relation share the same non-NULL values of ``columns``."""
        cols = ", ".join(_quote(c, "duckdb") for c in columns)
        nonnull = " AND ".join(f"{_quote(c, 'duckdb')} IS NOT NULL" for c in columns)
        dup = self._con.execute(f"SELECT COUNT(*) FROM (SELECT {cols} FROM {relation} WHERE {nonnull} "
                                f"GROUP BY {cols} HAVING COUNT(*) > 1)").fetchone()
        return dup is not None and dup[0] == 0

    def expression_types(self, exprs: list[str]) -> list[str]:
        if not exprs:
            return []
        cols = ", ".join(f"({e}) AS c{i}" for i, e in enumerate(exprs))
        rows = self._con.execute(f"DESCRIBE SELECT {cols} FROM {self.relation}").fetchall()
        return [str(r[1]) for r in rows]

    def check(self, sql: str) -> None:
        """Bind ``sql`` against the schema without running it (an error here depends on no row)."""
        self._con.execute(f"PREPARE dpkit_check AS {sql}")
        self._con.execute("DEALLOCATE dpkit_check")

    def empty_copy(self) -> str:
        """A temporary table with the session table's columns and types and no row (made once).

        Built from the schema, never by reading the table, so a statement run on it (see
        :meth:`run_on_empty`) can only fail for reasons that depend on no row.
        """
        name = "dpkit_empty_source"
        if not self._empty_made:
            cols = ", ".join(f"{_quote(c, 'duckdb')} {t}" for c, t in self.schema().items())
            self._con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({cols})")
            self._empty_made = True
        return name

    def null_row_copy(self, unit: str) -> str | None:
        """A temporary table with the session table's schema and one row: ``unit`` set to a fixed value
        (0, or '0') and every other column NULL (made once; None if no such value converts to the unit's type).

        Built from the schema alone, never by reading the table.  A statement run on it evaluates every
        expression once, so an error of its constant parts (``day > 'notadate'``, ``make_date(2020, 13, 1)``),
        which DuckDB raises only when a row reaches the expression, is raised from no data; on the empty
        copy such an expression is never evaluated, and on the data, under TRY, it would be NULL on every row
        (a silently empty answer, charged).
        """
        if self._null_row is None:
            import duckdb

            name = f"dpkit_null_row_{secrets.token_hex(6)}"  # its own name: sessions may share a connection
            self._null_row = ""
            cols = ", ".join(f"{_quote(c, 'duckdb')} {t}" for c, t in self.schema().items())
            self._con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({cols})")
            for value in ("0", "'0'"):
                try:
                    self._con.execute(f"INSERT INTO {name} ({_quote(unit, 'duckdb')}) VALUES ({value})")
                except duckdb.Error:
                    continue
                self._null_row = name
                break
        return self._null_row or None

    def run_on_empty(self, sql: str) -> None:
        """Run ``sql`` (written over :meth:`empty_copy`) to its end: errors DuckDB raises only when a query
        runs (a constant regex pattern, a date part name) are raised here, from no data."""
        self._con.execute(sql).fetchall()

    def cast_values(self, values: list[Any], type_name: str) -> list[Any]:
        """``values`` converted by the engine to ``type_name`` (None stays None), in order."""
        return _cast_values(self.fetch, values, type_name, "duckdb")

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._con.execute(sql).fetchall()]

    def fetch_arrow(self, sql: str) -> Any:
        """The result of ``sql`` as an Arrow table (columnar: no Python object per value)."""
        return self._con.sql(sql).to_arrow_table()

    def register_table(self, name: str, table: Any) -> None:
        """An Arrow table of public values, scanned in place under ``name``."""
        self._con.register(name, table)

    def create_temp(self, name: str, sql: str) -> None:
        """A temporary table holding the result of ``sql`` (over public values only)."""
        self._con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")

    def close(self) -> None:
        if self._owned:
            self._con.close()
        elif self._null_row:  # a caller's connection keeps its own tables, not this session's probe
            self._con.execute(f"DROP TABLE IF EXISTS {self._null_row}")


class SparkBackend:
    """Spark SQL through a SparkSession: classic (local or cluster) or Spark Connect."""

    dialect = "spark"
    name = "spark"

    def __init__(self, spark: Any, relation: str, native: str | None = None) -> None:
        self._spark = spark
        self.relation = relation  # as written in the DuckDB-dialect SQL that is transpiled for Spark
        self.native = native or relation  # as written in Spark SQL
        self._probe: str | None = None  # see probe_row_copy: None not made yet, '' impossible

    def probe_row_copy(self, unit: str) -> str | None:
        """A temporary view with the source's schema and one row of fixed values chosen from the schema
        alone ('' for text, 0 for numbers, 1970-01-01 for dates and timestamps, false, NULL for other types;
        ``unit`` never NULL), made once; None if Spark cannot build it.

        With ANSI mode off Spark turns most row errors into NULL, but some errors that depend on no row are
        raised only when a row reaches the expression (a regular expression that does not compile, a group
        index past its groups); a plan run on this row raises them before anything is reserved.
        """
        if self._probe is None:
            self._probe = ""
            import datetime as dt
            from decimal import Decimal

            from pyspark.sql import types as st

            fixed: list[tuple[type, Any]] = [
                (st.StringType, ""), (st.BooleanType, False), (st.DecimalType, Decimal(0)),
                (st.FloatType, 0.0), (st.DoubleType, 0.0), (st.IntegralType, 0), (st.BinaryType, b""),
                (st.TimestampType, dt.datetime(1970, 1, 1)), (st.TimestampNTZType, dt.datetime(1970, 1, 1)),
                (st.DateType, dt.date(1970, 1, 1))]
            schema = self._spark.sql(f"SELECT * FROM {self.native} LIMIT 0").schema
            row = [next((v for kind, v in fixed if isinstance(f.dataType, kind)), None) for f in schema.fields]
            if any(v is None for f, v in zip(schema.fields, row) if f.name == unit):
                return None
            name = f"dpkit_probe_{secrets.token_hex(6)}"
            try:
                self._spark.createDataFrame([tuple(row)], schema).createOrReplaceTempView(name)
            except Exception:  # noqa: BLE001 - built from the schema alone; without it the check is skipped
                return None
            self._probe = name
        return self._probe or None

    @classmethod
    def from_dataframe(cls, df: Any) -> SparkBackend:
        view = f"dpkit_source_{secrets.token_hex(6)}"
        df.createOrReplaceTempView(view)
        return cls(df.sparkSession, view)

    @classmethod
    def from_file(cls, spark: Any, path: str | os.PathLike[str], *,
                  schema: dict[str, str] | None = None) -> SparkBackend:
        """A view over a CSV, Parquet or JSON file read by Spark (CSV and JSON need ``schema``; see
        :func:`declared_file_source`)."""
        p = Path(path)
        kind = _file_kind(p)
        if kind == "parquet":
            df = spark.read.parquet(str(p.resolve()))
            if schema:
                df = _spark_typed(df, _check_declared(schema, df.columns, p))
            return cls.from_dataframe(df)
        declared = _require_schema(schema, p, kind)
        if kind == "csv":
            names = _csv_header(p)
            # multiLine: RFC 4180 records, a quoted field holding line ends one field (without it Spark split
            # physical lines, so one unit's quoted text made rows of the units its later lines named)
            df = spark.read.csv(str(p.resolve()), header=True, inferSchema=False, enforceSchema=False,
                                sep=_csv_delimiter(p), quote='"', escape='"', multiLine=True,
                                mode="PERMISSIVE", schema=", ".join(f"{_quote(n, 'spark')} STRING" for n in names))
        else:
            _refuse_json_array(p)  # Spark reads JSON one record per line too (multiLine off)
            names = list(declared)
            df = spark.read.json(str(p.resolve()), mode="PERMISSIVE",
                                 schema=", ".join(f"{_quote(n, 'spark')} STRING" for n in names))
        return cls.from_dataframe(_spark_typed(df, _check_declared(declared, names, p)))

    @classmethod
    def from_table(cls, spark: Any, table: str) -> SparkBackend:
        parts = table.split(".")
        return cls(spark, ".".join(_quote(p, "duckdb") for p in parts), ".".join(_quote(p, "spark") for p in parts))

    def schema(self) -> dict[str, str]:
        return {name: str(t) for name, t in self._spark.sql(f"SELECT * FROM {self.native} LIMIT 0").dtypes}

    def schema_of(self, relation: str) -> dict[str, str]:
        native = relation.replace('"', "`")
        return {name: str(t) for name, t in self._spark.sql(f"SELECT * FROM {native} LIMIT 0").dtypes}

    def describe(self, sql: str) -> list[str]:
        return [str(t) for _, t in self._spark.sql(sql).dtypes]

    def register_public(self, name: str, data: Any) -> str:
        view = f"dpkit_public_{name}_{secrets.token_hex(4)}"
        if isinstance(data, (str, os.PathLike)):
            p = Path(data)
            kind = _file_kind(p)
            reader = self._spark.read
            df = (reader.parquet(str(p.resolve())) if kind == "parquet" else
                  reader.csv(str(p.resolve()), header=True, inferSchema=True) if kind == "csv" else
                  reader.json(str(p.resolve())))
        elif type(data).__module__.startswith("pyspark"):
            df = data
        else:
            df = self._spark.createDataFrame(data if type(data).__module__.startswith("pandas") else data.to_pandas())
        df.createOrReplaceTempView(view)
        return view

    def is_unique(self, relation: str, columns: list[str]) -> bool:
        cols = ", ".join(_quote(c, "spark") for c in columns)
        nonnull = " AND ".join(f"{_quote(c, 'spark')} IS NOT NULL" for c in columns)
        native = relation.replace('"', "`")
        dup = self._spark.sql(f"SELECT COUNT(*) FROM (SELECT {cols} FROM {native} WHERE {nonnull} "
                              f"GROUP BY {cols} HAVING COUNT(*) > 1)").collect()
        return bool(dup[0][0] == 0)

    def expression_types(self, exprs: list[str]) -> list[str]:
        if not exprs:
            return []
        cols = ", ".join(f"({e}) AS c{i}" for i, e in enumerate(exprs))
        return [str(t) for _, t in self._spark.sql(f"SELECT {cols} FROM {self.native} LIMIT 0").dtypes]

    def fetch_arrow(self, sql: str) -> Any:
        """The result of ``sql`` as an Arrow table, with ANSI mode off (see :meth:`fetch`)."""
        with self._ansi(False):
            return self._spark.sql(sql).toArrow()

    def register_table(self, name: str, table: Any) -> None:
        self._spark.createDataFrame(table.to_pandas()).createOrReplaceTempView(name)

    def create_temp(self, name: str, sql: str) -> None:
        self._spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {sql}")

    def check(self, sql: str) -> None:
        """Analyse ``sql`` (names, types, functions) without running it."""
        self._spark.sql(sql).schema  # noqa: B018 - analysis only; nothing is executed

    def cast_values(self, values: list[Any], type_name: str) -> list[Any]:
        return _cast_values(self.fetch, values, type_name, "spark")

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Run ``sql`` with ANSI mode off, so that overflow or a bad cast on some row gives NULL, not an error."""
        with self._ansi(False):
            return [tuple(r) for r in self._spark.sql(sql).collect()]

    def check_constants(self, exprs: list[str]) -> None:
        """Evaluate ``exprs`` (Spark SQL expressions that read no column) once, with ANSI mode on: a constant
        that cannot be computed (``CAST('x' AS DOUBLE)``, ``make_date(2020, 13, 1)``) raises here, where with
        ANSI mode off it would be NULL on every row.  No table is read."""
        if exprs:
            with self._ansi(True):
                self._spark.sql("SELECT " + ", ".join(f"({e}) AS c{i}" for i, e in enumerate(exprs))).collect()

    @contextlib.contextmanager
    def _ansi(self, on: bool) -> Iterator[None]:
        """Spark's ANSI mode set to ``on`` for the duration, then restored (or unset) as it was."""
        conf = self._spark.conf
        before = conf.get("spark.sql.ansi.enabled", None)
        conf.set("spark.sql.ansi.enabled", "true" if on else "false")
        try:
            yield
        finally:
            if before is None:
                conf.unset("spark.sql.ansi.enabled")
            else:
                conf.set("spark.sql.ansi.enabled", before)

    def close(self) -> None:
        if self._probe:
            try:
                self._spark.catalog.dropTempView(self._probe)
            except Exception:  # noqa: BLE001, S110 - the Spark session may already be stopped; the view went with it
                pass
