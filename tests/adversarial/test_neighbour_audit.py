"""A black-box audit of the query engine on neighbouring tables (issue: independent neighbour audit).

Each probe builds a table D holding a target unit (uid 42) and its neighbour D' without that unit's rows,
runs the same calls on both, and compares everything a caller observes except the noisy values: the
outcome (an answer, or the exception's type and message), the result's columns, row count, key values and
the Python types of every cell, the Python warnings emitted, the session's schema, and what the ledger
recorded.  Released values are drawn from one seeded generator on both tables.  Complements
``test_query_channels.py`` and ``test_noise_channels.py`` (injection, errors, ordering, timing, seeding),
whose channels are not repeated here.

Channels found and fixed (each test says why it failed before):

* the schema of a pandas frame: DuckDB typed an object column from a sample of its values, and scanned a
  frame with an Arrow-backed column with its index as an extra column (``__index_level_0__``);
* a string the scan cannot encode (a lone surrogate in pandas, invalid UTF-8 in Parquet) failed every query
  reading the column, on D only;
* functions whose memory a value sets (``bitstring``, ``damerau_levenshtein``, a column as the replacement of
  ``replace`` / ``regexp_replace``): one unit's long string ran the engine out of memory, which TRY does not
  catch;
* CSV and JSON files: one unit's unterminated quote swallowed the lines after it (29 other units' rows), a
  stray carriage return, a quoted line end or a malformed JSON record failed the scan, invalid UTF-8 failed
  opening the file; also through the ``dpkit query`` command;
* the statements beside the main one (quantile histograms, distinct counts) converted every candidate
  group's key to Python: a key at TIMESTAMP 'infinity' or before year 1 failed the query on D only;
* group keys of types that cannot be released in a strict total order or at all (INTERVAL, TIME WITH TIME
  ZONE, BIGNUM), and quantile bounds too close for the bucket grid, failed after the spend (on D only, or
  on every table) or released ambiguous keys: refused before the spend.

Probes that found nothing are kept at the end as guards (a filter that keeps only the target; one unit's
value at a type's limit).
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

from dpkit.guarantees import ApproxDP
from dpkit.query import Session
from dpkit.query._backends import declared_file_source
from dpkit.random import insecure_seeded

BUDGET = ApproxDP(epsilon=1000.0, delta=0.5)
Pair = Callable[..., tuple[Session, Session]]
N = 60  # ordinary units 0..59; the target is 42's extra rows, or unit 100 where noted


def _observe(s: Session, query: Any, **kw: Any) -> tuple[Any, ...]:
    """Everything a caller sees of one call but the noisy values, and what the ledger recorded."""
    kw.setdefault("epsilon", 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = s.sql(query, rng=insecure_seeded(7), **kw)
            nk = len(r.key_columns)
            outcome: tuple[Any, ...] = ("answer", r.columns, len(r.rows), tuple(r.key_columns),
                                        tuple(tuple(type(c).__name__ for c in row) for row in r.rows),
                                        tuple(row[:nk] for row in r.rows),
                                        tuple(sorted(r.intervals)), tuple(sorted(r.scales)), repr(r.selection is None),
                                        tuple(sorted(r.details)), tuple(sorted(r.bounding or {})))
        except Exception as e:  # noqa: BLE001 - every failure is an observable
            outcome = (type(e).__name__, str(e))
    ledger = tuple((e.label, str(e.guarantee), e.state) for e in s.ledger.history())  # type: ignore[attr-defined]
    return outcome, tuple((w.category.__name__, str(w.message)) for w in caught), ledger


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Callable[..., tuple[Session, Session]]]:
    """Factory: sessions over D and D' (D without the rows of ``target``), each with its own ledger."""
    opened: list[Session] = []
    count = itertools.count()

    def make(d: Any, target: int = 42, **kw: Any) -> tuple[Session, Session]:
        if isinstance(d, pd.DataFrame):
            tables = [d, d[d["uid"] != target]]  # D' as a curator would make it: rows dropped, index kept
            assert len(tables[1]) < len(d)
        else:
            tables = list(d)
        out = []
        for table in tables:
            extra: dict[str, Any] = {"table": "t"} if not isinstance(table, pd.DataFrame) else {}
            s = Session(table, max_partitions=1, max_rows=1, privacy_unit="uid",
                        ledger=tmp_path / f"l{next(count)}.db", budget=BUDGET, **extra, **kw)
            opened.append(s)
            out.append(s)
        return out[0], out[1]

    yield make
    for s in opened:
        s.close()


def _same(pair_: tuple[Session, Session], query: Any, **kw: Any) -> tuple[Any, ...]:
    d, d2 = pair_
    a, b = _observe(d, query, **kw), _observe(d2, query, **kw)
    assert a == b, (query, kw, a, b)
    return a


# ------------------------------------------------------------------ 1. the schema of a pandas frame
ODD_OBJECTS = [5, 2**70, decimal.Decimal("1.555"), b"x", True, datetime.date(2020, 1, 1), 1.5, ["a"], None]


@pytest.mark.parametrize("odd", ODD_OBJECTS, ids=[type(v).__name__ + str(i) for i, v in enumerate(ODD_OBJECTS)])
def test_one_units_object_does_not_type_a_pandas_object_column(pair: Pair, odd: Any) -> None:
    """DuckDB typed a pandas object column from a sample of its values: one unit's b'x' made it BLOB (VARCHAR
    without it), its 2**70 HUGEINT (BIGINT), its Decimal('1.555') DECIMAL(4,3) (DECIMAL(2,1)), and a column
    of NULLs but the target's value was VARCHAR on D and "NULL" on D'.  An object column is text, always."""
    ordinary: Any = "a"
    if isinstance(odd, int) and not isinstance(odd, bool):
        ordinary = 1
    elif isinstance(odd, decimal.Decimal):
        ordinary = decimal.Decimal("1.5")
    for column in ([ordinary] * N + [odd], [None] * N + ["z" if odd is None else odd]):
        d = pd.DataFrame({"uid": list(range(N)) + [42], "k": pd.Series(column, dtype=object),
                          "x": [1.0] * (N + 1)})
        s, s2 = pair(d)
        assert s.schema == s2.schema == {"uid": "BIGINT", "k": "VARCHAR", "x": "DOUBLE"}
        _same((s, s2), "SELECT k, COUNT(*) AS n FROM t GROUP BY k", delta=1e-6, epsilon=10.0)


def test_a_pandas_index_is_not_a_column(pair: Pair) -> None:
    """A frame with an Arrow-backed column (pandas' dtype_backend='pyarrow') was scanned through Arrow, which
    kept a non-default index as a column: D' (rows dropped, so its index is no longer 0..n-1) had a column
    ``__index_level_0__`` that D lacked, holding the row numbers of the original frame."""
    import pyarrow as pa

    d = pd.DataFrame({"uid": list(range(N)) + [42], "x": pd.Series([1.0] * (N + 1), dtype=pd.ArrowDtype(pa.float64())),
                      "k": ["a", "b"] * (N // 2) + ["a"]})
    s, s2 = pair(d)
    assert s.schema == s2.schema == {"uid": "BIGINT", "x": "DOUBLE", "k": "VARCHAR"}
    _same((s, s2), "SELECT COUNT(*) AS n FROM t WHERE k = 'a'")


@pytest.mark.parametrize("dtype", [object, "string"])
def test_a_string_the_scan_cannot_encode_fails_nothing(pair: Pair, dtype: Any) -> None:
    """One unit's lone surrogate ('\\ud800', e.g. from a file name decoded with surrogateescape) failed DuckDB's
    pandas scan of the column: every query reading it was a charged DataDependentFailure on D and answered on
    D'.  The value is read as text with what UTF-8 cannot encode replaced, a function of that value alone."""
    d = pd.DataFrame({"uid": list(range(N)) + [42], "k": pd.Series(["a", "b"] * (N // 2) + ["\ud800x"], dtype=dtype),
                      "x": [1.0] * (N + 1)})
    s, s2 = pair(d)
    queries: list[tuple[str, dict[str, Any]]] = [
        ("SELECT k, COUNT(*) AS n FROM t GROUP BY k", {"keys": {"k": ["a", "b"]}}),
        ("SELECT COUNT(*) AS n FROM t WHERE k <> 'a'", {}),
        ("SELECT COUNT(DISTINCT k) AS n FROM t", {}),
        # selection: the ordinary groups (30 units) are released, the target's (one unit) is not
        ("SELECT k, COUNT(*) AS n FROM t GROUP BY k", {"delta": 1e-6, "epsilon": 10.0})]
    for query, kw in queries:
        assert _same((s, s2), query, **kw)[0][0] == "answer"


def test_text_columns_keep_their_values() -> None:
    """What the conversion does to each value, and that it is the same whichever other values the column holds."""
    from dpkit.query._backends import _pandas_text

    plain = pd.Series(["a", None, float("nan"), "é", "x" * 1000], dtype=object)
    mixed = pd.concat([plain, pd.Series(["\ud800", 5, b"x", object()], dtype=object)], ignore_index=True)
    got_plain = _pandas_text(pd.DataFrame({"k": plain}))["k"].tolist()
    got_mixed = _pandas_text(pd.DataFrame({"k": mixed}))["k"].tolist()
    assert got_mixed[:5] == got_plain
    assert got_plain[0] == "a" and pd.isna(got_plain[1]) and pd.isna(got_plain[2]) and got_plain[3] == "é"
    assert got_mixed[5:8] == ["?", "5", "b'x'"]
    frame = pd.DataFrame({"n": np.arange(3)}, index=[5, 7, 9])
    out = _pandas_text(frame)
    assert list(out.index) == [0, 1, 2] and list(frame.index) == [5, 7, 9]  # the caller's frame is unchanged


# ------------------------------------------------------------------ 2. memory a value controls
MEMORY = [
    "SELECT COUNT(*) AS n FROM t WHERE length(bitstring('1', CAST(x AS INTEGER))) > 3",
    "SELECT COUNT(*) AS n FROM t WHERE damerau_levenshtein(k, 'ab') > 3",
    "SELECT COUNT(*) AS n FROM t WHERE length(replace(k, 'a', k)) > 3",
    "SELECT COUNT(*) AS n FROM t WHERE length(regexp_replace(k, 'a', k || 'x', 'g')) > 3",
    "SELECT length(replace(k, 'a', upper(k))) AS g, COUNT(*) AS n FROM t GROUP BY g",
    "SELECT SUM(v) AS s FROM (SELECT uid, MAX(length(replace(k, 'a', k))) AS v FROM t GROUP BY uid)",
    "SELECT COUNT(*) AS n FROM t WHERE length(json_pretty(k)) > 3",
]


@pytest.mark.parametrize("query", MEMORY, ids=[f"{i}" for i in range(len(MEMORY))])
def test_functions_whose_memory_one_value_sets_are_refused(pair: Pair, query: str) -> None:
    """``bitstring('1', n)`` allocates n bits (2**31 a row), ``damerau_levenshtein`` a len(a) x len(b) matrix and
    ``replace(k, 'a', k)`` writes k once per 'a' in k: with one unit's 70,000-character string the last two ran
    out of memory under a 3 GB address-space limit (OutOfMemoryException, which TRY does not catch: a charged
    DataDependentFailure on D, an answer on D').  ``json_pretty`` indents each nesting level on its own line: one
    unit's 70,000-character '[[[...]]]' made 4.9 GB (the same OutOfMemoryException under 3 GB).  Refused from the
    query text, on both, before any spend."""
    d = pd.DataFrame({"uid": list(range(N)) + [42], "k": ["ab"] * N + ["a" * 70_000],
                      "x": [1.0] * N + [2.0**31 - 1]})
    s, s2 = pair(d)
    outcome = _same((s, s2), query, delta=1e-6, keys={"g": [1, 2]} if "GROUP BY g" in query else None,
                    bounds={"v": (0, 10)})
    assert outcome[0][0] == "UnsupportedError" and outcome[2] == ()


def test_a_literal_replacement_is_still_answered(pair: Pair) -> None:
    d = pd.DataFrame({"uid": list(range(N)) + [42], "k": ["a-b"] * N + ["c"], "x": [1.0] * (N + 1)})
    s, s2 = pair(d)
    for query in ("SELECT COUNT(*) AS n FROM t WHERE replace(k, '-', '') = 'ab'",
                  "SELECT COUNT(*) AS n FROM t WHERE regexp_replace(k, '[-]', '+', 'g') = 'a+b'"):
        assert _same((s, s2), query)[0][0] == "answer"


# ------------------------------------------------------------------ 3. one line of a CSV or JSON file
def _file_pair(tmp_path: Path, suffix: str, odd: bytes) -> tuple[Path, Path]:
    """D (the target's line after the 11th unit's) and D' (without it); 40 ordinary units, a quoted field each."""
    sep = b"\t" if suffix == ".tsv" else b","
    out = []
    for name, with_target in (("d", True), ("d2", False)):
        if suffix == ".json":
            lines = [b'{"uid": %d, "amount": %d, "k": "%s"}' % (u, u % 10, b"ab"[u % 2: u % 2 + 1]) for u in range(40)]
        else:
            lines = [sep.join([b"uid", b"amount", b"k"])] + [
                sep.join([b"%d" % u, b"%d" % (u % 10), b'"%s%s x"' % (b"ab"[u % 2: u % 2 + 1], sep)])
                for u in range(40)]
        if with_target:
            lines.insert(12, odd.replace(b",", sep))
        path = tmp_path / f"{name}{suffix}"
        path.write_bytes(b"\n".join(lines) + b"\n")
        out.append(path)
    return out[0], out[1]


# well-formed records (a quoted field holding line ends, carriage returns, the delimiter, doubled quotes) and
# malformed lines whose quotes are balanced (a stray carriage return, invalid UTF-8, too many or too few fields,
# NUL, a line past DuckDB's size limit, a quote inside an unquoted field); an unterminated quote (42,"5,a) is not
# RFC 4180 and runs on to the next quote in any reader that follows the standard: the README's threat model
# trusts the file's quoting to be well formed (csv.writer and pandas.to_csv write it so)
CSV_LINES = [b'42,5,"a\nb"', b'42,5,"a\n7,10,x\n8,10,x"', b'42,5,"a\rb"', b'42,5,"a\r\nb"', b'42,5,"a, ""q"", b"',
             b"42,5,a\r", b"\r\r\r", b"42,\xff\xfe,a", b"42,5,a,,,,", b"42", b"\x00", b"42,5," + b"x" * (3 << 20),
             b'42,5,a"b']


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
@pytest.mark.parametrize("odd", CSV_LINES, ids=[f"{i}" for i in range(len(CSV_LINES))])
def test_one_csv_line_changes_no_other_row(tmp_path: Path, suffix: str, odd: bytes) -> None:
    """The reader before failed the whole scan on a quoted line end (null_padding) and on a stray carriage return
    (a charged DataDependentFailure on D only), and invalid UTF-8 near the top failed opening the file; a reader
    that split physical lines made a quoted field's later lines rows of the units they named (the second case:
    rows for units 7 and 8 from unit 42's text).  Now RFC 4180 records, each read alone: the other units' rows
    are the same on both files, exactly."""
    d, d2 = _file_pair(tmp_path, suffix, odd)
    schema = {"uid": "BIGINT", "amount": "BIGINT"}
    sessions = [Session(p, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{p.stem}.db",
                        budget=BUDGET, schema=schema) for p in (d, d2)]
    try:
        con = duckdb.connect()
        rows = [sorted(map(repr, con.execute(f"SELECT * FROM ({declared_file_source(p, schema, 'duckdb')}) "
                                             "WHERE uid <> 42 OR uid IS NULL").fetchall())) for p in (d, d2)]
        others = [r for r in rows[0] if r.startswith("(None")]
        assert [r for r in rows[0] if r not in others] == rows[1]  # every ordinary row, and only those
        assert len(rows[1]) == 40
        _same((sessions[0], sessions[1]), "SELECT k, SUM(amount) AS s FROM t GROUP BY k", bounds={"amount": (0, 10)},
              keys={"k": ["a, x", "b, x"] if suffix == ".csv" else ["a\t x", "b\t x"]})
    finally:
        for x in sessions:
            x.close()


JSON_LINES = [b'{"uid": 42, "amount": 5', b"[1,2]", b"42", b'{"uid": 42, "amount": 5}}', b"\xff", b'"abc',
              b'{"uid": "42\n', b'{"uid": 42, "amount": 5} {"uid": 43}', b'{"uid": 42, "k": {"a": 1}}']


@pytest.mark.parametrize("odd", JSON_LINES, ids=[f"{i}" for i in range(len(JSON_LINES))])
def test_one_json_line_fails_nothing(tmp_path: Path, odd: bytes) -> None:
    """One unit's malformed JSON line (or one that is not an object) failed the whole scan: a charged
    DataDependentFailure on D, an answer on D'.  Now it is a row of NULLs; every other row is unchanged."""
    d, d2 = _file_pair(tmp_path, ".json", odd)
    schema = {"uid": "BIGINT", "amount": "BIGINT", "k": "VARCHAR"}
    seen = []
    for p in (d, d2):
        with Session(p, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{p.stem}.db",
                     budget=BUDGET, schema=schema) as s:
            seen.append(_observe(s, "SELECT k, SUM(amount) AS s FROM t GROUP BY k", bounds={"amount": (0, 10)},
                                 keys={"k": ["a", "b"]}))
    assert seen[0] == seen[1] and seen[0][0][0] == "answer"


def test_one_invalid_utf8_string_in_parquet_fails_nothing(tmp_path: Path) -> None:
    """One unit's string that is not UTF-8 in a Parquet file (written by a tool that does not validate) failed every
    query reading the column: DuckDB validates while decoding, outside any TRY, so a charged DataDependentFailure
    on D, an answer on D'.  Read with utf8_validation='replace': the bad bytes become '?', that value alone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    seen = []
    for name, with_target in (("d", True), ("d2", False)):
        n = N + (1 if with_target else 0)
        data = b"ab" * (N // 2) + (b"\xff\xfe" if with_target else b"")
        offsets = np.array(list(range(N + 1)) + ([N + 2] if with_target else []), dtype=np.int32)
        k = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"uid": pa.array(list(range(N)) + ([42] if with_target else [])), "k": k}), path)
        with Session(path, max_partitions=1, max_rows=1, privacy_unit="uid", ledger=tmp_path / f"{name}.db",
                     budget=BUDGET) as s:
            seen.append(_observe(s, "SELECT k, COUNT(*) AS n FROM t GROUP BY k", keys={"k": ["a", "b"]}))
    assert seen[0] == seen[1] and seen[0][0][0] == "answer"

# ------------------------------------------------------------------ 4. keys no Python value can hold
def _typed_pair(column_type: str, ordinary: str, odd: str) -> tuple[Any, Any]:
    """Two DuckDB tables: 60 units with key ``ordinary``, and (on D only) unit 100 with key ``odd``."""
    cons = []
    for with_target in (True, False):
        con = duckdb.connect()
        con.execute(f"CREATE TABLE t AS SELECT range AS uid, CAST(range % 5 AS DOUBLE) AS x, CAST({ordinary} AS "
                    f"{column_type}) AS g FROM range({N})")
        if with_target:
            con.execute(f"INSERT INTO t SELECT 100, 1.0, CAST({odd} AS {column_type})")
        cons.append(con)
    return cons[0], cons[1]


OUT_OF_PYTHON = [("TIMESTAMP", "TIMESTAMP '2020-01-01'", "'infinity'"),
                 ("TIMESTAMPTZ", "TIMESTAMPTZ '2020-01-01'", "'-infinity'"),
                 ("DATE", "DATE '2020-01-01'", "'5877642-06-25 (BC)'"),
                 ("DATE", "DATE '2020-01-01'", "'infinity'"),
                 ("TIMESTAMP", "TIMESTAMP '2020-01-01'", "'290000-01-01'")]


@pytest.mark.parametrize(("column_type", "ordinary", "odd"), OUT_OF_PYTHON, ids=[c[2] for c in OUT_OF_PYTHON])
def test_a_key_python_cannot_hold_fails_nothing(pair: Pair, column_type: str, ordinary: str, odd: str) -> None:
    """The statements beside the main one (a quantile's histogram, COUNT(DISTINCT)'s counts) were fetched as
    Python values, and their rows were matched to the candidate groups in Python: the target's unreleased group
    with key TIMESTAMP 'infinity' (or a date before 1 AD) made that conversion fail, a charged
    DataDependentFailure on D and an answer on D' (DuckDB's own conversion also turned DATE 'infinity' into
    9999-12-31, which would match a real 9999-12-31 group).  They are fetched as Arrow and matched there."""
    pair_ = pair(_typed_pair(column_type, ordinary, odd))
    for query in ("SELECT g, MEDIAN(x) AS m FROM t GROUP BY g", "SELECT g, COUNT(DISTINCT x) AS d FROM t GROUP BY g",
                  "SELECT g, MEDIAN(x) AS m, COUNT(DISTINCT x) AS d, COUNT(*) AS n FROM t GROUP BY g"):
        assert _same(pair_, query, delta=1e-6, epsilon=10.0, bounds={"x": (0, 10)})[0][0] == "answer"


@pytest.mark.parametrize("keys", [None, {"g": ["1 month"]}])
def test_an_interval_key_is_refused_before_the_spend(pair: Pair, keys: Any) -> None:
    """An INTERVAL group key failed after the spend on every table (Arrow cannot sort the candidates), and with a
    quantile it failed inside the engine fetch on D only (the target's INTERVAL '1000000000 months' overflows a
    Python timedelta): two different charged failures.  DuckDB also groups INTERVAL '1 month' with '30 days',
    so the released representative could be either.  Refused from the schema, nothing spent."""
    pair_ = pair(_typed_pair("INTERVAL", "INTERVAL '1 month'", "INTERVAL '1000000000 months'"))
    for query in ("SELECT g, COUNT(*) AS n FROM t GROUP BY g", "SELECT g, MEDIAN(x) AS m FROM t GROUP BY g"):
        outcome = _same(pair_, query, delta=1e-6, epsilon=10.0, bounds={"x": (0, 10)}, keys=keys)
        assert outcome[0][0] == "UnsupportedError" and "INTERVAL" in outcome[0][1] and outcome[2] == ()


# ------------------------------------------------------------------ 5. public parameters that fail only on data
def test_quantile_bounds_too_close_for_the_grid_are_refused(pair: Pair) -> None:
    """With bounds (0, 1e-320) a quantile bucket's width (hi - lo) / 2**20 underflows to 0, and the engine's
    CAST(FLOOR((x - lo) / width) AS BIGINT), which runs outside TRY, failed as soon as one value reached it: a
    charged DataDependentFailure where the filter kept the target's row (D), an answer where it kept none (D').
    The bounds are public, so the refusal is made from them before anything is spent."""
    d = pd.DataFrame({"uid": list(range(N)) + [42], "x": [1.0] * N + [3e-321], "flag": [0] * N + [1]})
    pair_ = pair(d)
    outcome = _same(pair_, "SELECT MEDIAN(x) AS m FROM t WHERE flag = 1", bounds={"x": (0.0, 1e-320)})
    assert outcome[0][0] == "InvalidArgumentError" and "too close" in outcome[0][1] and outcome[2] == ()
    # bounds that are merely narrow are answered
    assert _same(pair_, "SELECT MEDIAN(x) AS m FROM t WHERE flag = 1", bounds={"x": (0.0, 1e-300)},
                 quantile_buckets=2**30 - 1)[0][0] == "answer"


_NASTY = ['"', ",", "\n", "\r", "\t", "\r\n", "'", "\\", "\x00", "é", "😀", "a", " "]


@pytest.mark.parametrize("writer", ["pandas", "pandas-crlf", "pandas-tsv", "csv-writer"])
def test_written_csv_files_differ_only_in_the_target_unit(tmp_path: Path, writer: str) -> None:
    """Files as pandas.to_csv and csv.writer write them (the README's threat model: well-formed quoting), with
    every unit's text drawn from quotes, delimiters, line ends, bare carriage returns, NUL and non-ASCII: on 20
    random pairs, the other units' rows are the same on both files and D' has every unit.  (A bare CR that
    pandas leaves unquoted with LF line ends ends the record there, in DuckDB as in most readers: the value is
    cut, and the rest of its line is the same unit's or skipped; never another unit's row.)"""
    import csv
    import random

    for seed in range(20):
        rnd = random.Random(seed)
        rows = [(u, u % 10, "".join(rnd.choice(_NASTY) for _ in range(rnd.randint(0, 12)))) for u in range(30)]
        target = (42, 5, "".join(rnd.choice(_NASTY) for _ in range(rnd.randint(1, 40))))
        got = []
        for name, data in (("d", rows[:12] + [target] + rows[12:]), ("d2", rows)):
            path = tmp_path / f"{name}{seed}.{'tsv' if writer == 'pandas-tsv' else 'csv'}"
            frame = pd.DataFrame(data, columns=["uid", "amount", "note"])
            if writer == "csv-writer":
                with open(path, "w", newline="") as f:
                    csv.writer(f).writerows([list(frame.columns), *data])
            else:
                frame.to_csv(path, index=False, sep="\t" if writer == "pandas-tsv" else ",",
                             lineterminator="\r\n" if writer == "pandas-crlf" else "\n")
            src = declared_file_source(path, {"uid": "BIGINT", "amount": "BIGINT"}, "duckdb")
            got.append(sorted(map(repr, duckdb.connect().execute(f"SELECT * FROM ({src})").fetchall())))
        others = [r for r in got[0] if not r.startswith("(42,")]
        assert others == got[1] and len(got[1]) == 30, (seed, target)


# ------------------------------------------------------------------ 6. the command line on neighbouring files
@pytest.mark.parametrize("odd", [b'42,5,"a, ""q""\n7,10,x"', b"42,5,a\r", b'42,5,"a\nb"', b"42,5,\xff"],
                         ids=["quote", "cr", "nl", "utf8"])
def test_the_query_command_on_neighbouring_csv_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     odd: bytes) -> None:
    """``dpkit query`` on the two files: the same exit code, the same stderr, and a JSON answer whose shape (keys,
    columns, row count, the selection's and bounding's fields) is the same; only noisy numbers differ."""
    import json

    from dpkit.cli import main

    d, d2 = _file_pair(tmp_path, ".csv", odd)
    seen = []
    for p in (d, d2):
        code = main(["query", str(p), "SELECT k, COUNT(*) AS n, SUM(amount) AS s FROM t GROUP BY k", "--privacy-unit",
                     "uid", "--schema", "amount=BIGINT,uid=BIGINT", "--epsilon", "10", "--delta", "1e-6",
                     "--budget-epsilon", "100", "--budget-delta", "0.5", "--ledger", str(tmp_path / f"{p.stem}.db"),
                     "--bounds", "amount=0:10", "--max-partitions", "1", "--max-rows", "1", "--json", "--quiet",
                     "--insecure-seed", "3"])
        out, err = capsys.readouterr()
        doc = json.loads(out) if code == 0 else {}
        seen.append((code, err.replace(str(p), "PATH").replace(p.stem, "NAME"), doc.get("columns"),
                     [r["k"] for r in doc.get("rows", [])], sorted(doc.get("selection") or {}), doc.get("cost")))
    assert seen[0] == seen[1] and seen[0][0] == 0 and seen[0][3] == ["a, x", "b, x"]


def test_a_time_with_time_zone_key_is_refused(pair: Pair) -> None:
    """DuckDB keeps TIMETZ '12:00+01' and '12:00+00' as two groups but hands both to Arrow as time64 12:00: two
    released rows with the same key, tied in the release order, so their order was the engine's (which depends on
    every row, released or not), and a quantile's histogram rows matched by key went to either.  Refused from
    the schema, nothing spent."""
    pair_ = pair(_typed_pair("TIMETZ", "CASE WHEN range % 2 = 0 THEN '12:00:00+01' ELSE '12:00:00+00' END",
                             "'03:00:00+05'"))
    outcome = _same(pair_, "SELECT g, COUNT(*) AS n FROM t GROUP BY g", delta=1e-6, epsilon=10.0)
    assert outcome[0][0] == "UnsupportedError" and "TIME WITH TIME ZONE" in outcome[0][1] and outcome[2] == ()


def test_a_bignum_key_is_refused_not_charged(pair: Pair) -> None:
    """A BIGNUM (VARINT) key reaches Python as an opaque Arrow extension that cannot be sorted: every private
    selection query failed after the spend, on both tables (no leak, but a refusal the schema decides must cost
    nothing).  Refused before the spend."""
    pair_ = pair(_typed_pair("BIGNUM", "CAST(range % 2 AS BIGNUM)", "'12345678901234567890123456789012345678901'"))
    outcome = _same(pair_, "SELECT g, COUNT(*) AS n FROM t GROUP BY g", delta=1e-6, epsilon=10.0)
    assert outcome[0][0] == "UnsupportedError" and "BIGNUM" in outcome[0][1] and outcome[2] == ()


def test_a_uhugeint_key_is_refused_not_released_wrong(pair: Pair) -> None:
    """A UHUGEINT key leaves DuckDB as Arrow decimal128(38, 0): 2^127 + 5 came back as -(2^127 - 5), a wrong key
    (not a leak: distinct values stay distinct).  Refused from the schema, nothing spent."""
    pair_ = pair(_typed_pair("UHUGEINT", "CAST(range % 2 AS UHUGEINT)",
                             "'170141183460469231731687303715884105733'"))
    outcome = _same(pair_, "SELECT g, COUNT(*) AS n FROM t GROUP BY g", delta=1e-6, epsilon=10.0)
    assert outcome[0][0] == "UnsupportedError" and "UHUGEINT" in outcome[0][1] and outcome[2] == ()


# ------------------------------------------------------------------ probes that found nothing (kept as guards)
_B = {"bounds": {"x": (0, 10)}}
ONLY_TARGET = [
    ("SELECT COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a, VARIANCE(x) AS v, STDDEV(x) AS sd FROM t{w}", _B),
    ("SELECT MEDIAN(x) AS m, MIN(x) AS lo, MAX(x) AS hi, QUANTILE_CONT(x, 0.9) AS q FROM t{w}", _B),
    ("SELECT MEDIAN(x) AS m FROM t{w}", dict(_B, quantile_intervals=True)),
    ("SELECT MIN(day) AS d0, MEDIAN(day) AS dm FROM t{w}", {"bounds": {"day": ("2019-01-01", "2021-01-01")},
                                                            "quantile_intervals": True}),
    ("SELECT COUNT(DISTINCT k) AS d, COUNT(DISTINCT uid) AS u, COUNT(x) AS c FROM t{w}", {}),
    ("SELECT k, COUNT(*) AS n, SUM(x) AS s, MEDIAN(x) AS m, COUNT(DISTINCT x) AS dx FROM t{w} GROUP BY k",
     dict(_B, keys={"k": ["a", "b"]})),
    ("SELECT k, COUNT(*) AS n, SUM(x) AS s, MEDIAN(x) AS m FROM t{w} GROUP BY k", dict(_B, delta=1e-6, epsilon=10.0)),
    ("SELECT k, COUNT(*) AS n FROM t{w} GROUP BY k HAVING COUNT(*) >= 0 ORDER BY k DESC LIMIT 1",
     {"keys": {"k": ["a", "b"]}}),
    ("SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t{w} GROUP BY k",
     dict(_B, keys={"k": ["a", "b"]}, noise="gaussian", delta=1e-6)),
    ("SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t{w} GROUP BY k", dict(_B, keys={"k": ["a", "b"]}, rho=0.5,
                                                                        epsilon=None)),
    ("SELECT k, COUNT(*) AS n FROM t{w} GROUP BY k", {"delta": 1e-6, "epsilon": 10.0, "partition_order": "md5",
                                                      "selection": "gaussian"}),
    ("SELECT AVG(v) AS a, COUNT(*) AS n FROM (SELECT uid, SUM(x) AS v FROM t{w} GROUP BY uid)",
     {"bounds": {"v": (0, 10)}}),
    ("SELECT COUNT(*) AS n, SUM(x) AS s FROM t{w}", dict(_B, split={"n": 0.5, "s": 0.45, "bounding_report": 0.05})),
]


@pytest.mark.parametrize(("query", "kw"), ONLY_TARGET, ids=[f"{i}" for i in range(len(ONLY_TARGET))])
def test_a_filter_that_keeps_only_the_target(pair: Pair, query: str, kw: dict[str, Any]) -> None:
    """WHERE keeps the target's row on D and nothing on D' (an empty table after the filter): every observable
    but the noisy values agrees, for each kind of aggregate, noise, selection and budget form."""
    d = pd.DataFrame({"uid": list(range(N)) + [42], "k": ["a", "b"] * (N // 2) + ["a"],
                      "x": [float(i % 5) for i in range(N)] + [3.0], "flag": [0] * N + [1],
                      "day": pd.array([datetime.date(2020, 1, 1)] * (N + 1), dtype="date32[pyarrow]")})
    assert _same(pair(d), query.format(w=" WHERE flag = 1"), **kw)[0][0] == "answer"


EXTREMES = [("BIGINT", "9223372036854775807"), ("BIGINT", "-9223372036854775808"),
            ("HUGEINT", "170141183460469231731687303715884105727"), ("UBIGINT", "18446744073709551615"),
            ("DECIMAL(38,37)", "9.9999999999999999999999999999999999999"), ("DOUBLE", "'nan'"), ("DOUBLE", "'-inf'"),
            ("DOUBLE", "-0.0"), ("DOUBLE", "NULL"), ("FLOAT", "'inf'")]


@pytest.mark.parametrize(("column_type", "odd"), EXTREMES, ids=[f"{t}:{v}" for t, v in EXTREMES])
def test_one_units_extreme_value_changes_no_observable(pair: Pair, column_type: str, odd: str) -> None:
    """The target's value at a type's limit (int64 and int128 extremes, the largest DECIMAL(38,37), NaN, -inf,
    -0.0, NULL) in sums, averages, deviations, quantiles, distinct counts, a WHERE that overflows, a per-unit sum
    and a group key: answered on both tables with the same shape."""
    cons = []
    for with_target in (True, False):
        con = duckdb.connect()
        con.execute(f"CREATE TABLE t AS SELECT range AS uid, CAST(1 AS {column_type}) AS v FROM range({N})")
        if with_target:
            con.execute(f"INSERT INTO t SELECT 100, CAST({odd} AS {column_type})")
        cons.append(con)
    pair_ = pair((cons[0], cons[1]))
    bounds: dict[str, Any] = {"bounds": {"v": (-10, 10)}}
    queries: list[tuple[str, dict[str, Any]]] = [
        ("SELECT SUM(v) AS s, AVG(v) AS a, STDDEV(v) AS sd, COUNT(v) AS c FROM t", bounds),
        ("SELECT MEDIAN(v) AS m, MIN(v) AS lo, MAX(v) AS hi FROM t", bounds),
        ("SELECT COUNT(DISTINCT v) AS d FROM t", {}),
        ("SELECT COUNT(*) AS n FROM t WHERE v * 2 > 0 AND CAST(v AS INTEGER) > 0", {}),
        ("SELECT SUM(x) AS s FROM (SELECT uid, SUM(v) * 2 AS x FROM t GROUP BY uid)", {"bounds": {"x": (-10, 10)}}),
        ("SELECT v AS g, COUNT(*) AS n, MEDIAN(v) AS m FROM t GROUP BY g", dict(bounds, delta=1e-6, epsilon=10.0))]
    for query, kw in queries:
        assert _same(pair_, query, **kw)[0][0] == "answer", query


def test_a_json_array_file_is_refused_not_read_as_nulls(tmp_path: Path) -> None:
    """JSON is read one record per line (so one malformed record is a row of NULLs, above); a file that is one
    array of records would then be answered as NULLs only, silently: it is refused when the session opens."""
    array, lines = tmp_path / "a.json", tmp_path / "b.json"
    array.write_text('[{"uid": 1, "x": 2},\n {"uid": 2, "x": 3}]\n')
    lines.write_text('{"uid": 1, "x": 2}\n{"uid": 2, "x": 3}\n')
    schema = {"uid": "BIGINT", "x": "DOUBLE"}
    with pytest.raises(ValueError, match="newline-delimited"):
        Session(array, privacy_unit="uid", ledger=tmp_path / "a.db", budget=BUDGET, schema=schema)
    with Session(lines, privacy_unit="uid", ledger=tmp_path / "b.db", budget=BUDGET, schema=schema) as s:
        assert s.schema == schema


def test_a_categorical_column_does_not_publish_its_categories(pair: Pair) -> None:
    """A pandas categorical made with astype("category") has the data's distinct values as categories; DuckDB
    scanned it as ENUM('a', 'b', 'secret-diagnosis'), so Session.schema, and a refusal of public keys that do not
    convert to that type, named the target's value, free of charge.  A categorical column is text."""
    d = pd.DataFrame({"uid": list(range(N)) + [42], "k": ["a", "b"] * (N // 2) + ["secret-diagnosis"],
                      "x": [1.0] * (N + 1)})
    d2 = d[d["uid"] != 42].copy()
    d["k"], d2["k"] = d["k"].astype("category"), d2["k"].astype("category")  # each frame's own categories
    s, s2 = pair((d, d2))
    assert s.schema == s2.schema == {"uid": "BIGINT", "k": "VARCHAR", "x": "DOUBLE"}
    outcome = _same((s, s2), "SELECT k, COUNT(*) AS n FROM t GROUP BY k", keys={"k": ["a", "b", "zzz"]})
    assert outcome[0][0] == "answer" and "secret" not in repr(outcome)


@pytest.mark.parametrize("newline", ["\n", "\r"])
def test_a_quoted_line_end_adds_no_row_for_another_unit(tmp_path: Path, newline: str) -> None:
    """A file written by Python's csv.writer (RFC 4180: a field holding a line end is quoted, lines end in CRLF)
    where one unit's free text holds line ends: a reader that split physical lines made the text's later lines
    rows of units 7, 8 and 9 (one unit's record changed other units' rows, and max_rows per unit bounded nothing
    across them); the reader before that failed the whole scan on it (null_padding with a quoted line end).  The
    records are read as written: only units 1 and 42."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["uid", "amount", "note"])
    writer.writerow([1, 5, "fine"])
    writer.writerow([42, 5, newline.join(["hello", "7,10,x", "8,10,x", "9,10,x"])])
    path = tmp_path / "d.csv"
    path.write_text(buf.getvalue(), newline="")
    schema = {"uid": "BIGINT", "amount": "BIGINT", "note": "VARCHAR"}
    uids = [r[0] for r in duckdb.connect().execute(declared_file_source(path, schema, "duckdb")).fetchall()]
    assert sorted(u for u in uids if u is not None) == [1, 42]
