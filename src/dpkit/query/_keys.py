r"""Public group keys as a table in the engine, and the release order of group keys.

Public keys (``keys=`` of :meth:`Session.sql`) can number in the millions.  They never become SQL
text: the caller's values are handed to the engine as an Arrow table (a dict of lists is a cross
product the engine forms), converted to each key's type *by the engine* (``TRY_CAST``, so that
``'2024-01-01'`` matches a DATE and ``'true'`` a BOOLEAN exactly as the engine compares them; a value
that does not convert is refused, with examples, before anything is spent), deduplicated after
conversion, and numbered in the order given.  The query keeps rows whose keys are in that table (a
semi-join, NULL matching NULL; a plain ``=`` in a column where no public key is NULL) and returns one
row per public key, in that order, zeros included.

:func:`release_order` is the order of privately selected groups: a strict total order of the key
values alone (NULL first; a float by its IEEE 754 totalOrder position, so NaN, -0.0 and 0.0 never tie
and never compare unordered; every other type by Arrow's order of its values), computed on whole
columns, never the engine's output order (which depends on every row, released or not): where the
engine was asked to sort integer keys, that order is only confirmed, in O(n), and otherwise computed.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.errors import InvalidArgumentError

if TYPE_CHECKING:
    from dpkit.query._backends import Backend

__all__ = ["PublicKeys", "release_order"]


@dataclass(frozen=True, slots=True)
class PublicKeys:
    """The public keys of one plan, as a table in the engine: ``__idx`` (the order given) and ``c0..``."""

    relation: str
    count: int
    width: int
    _fetch: Any = field(repr=False, compare=False)
    _cache: list[Any] = field(default_factory=list, repr=False, compare=False)
    _source: Any = field(default=None, repr=False, compare=False)  # (names, types, keys, dialect) it was built from
    # per key column: whether some public key is NULL there (public: read from the keys' table, never the data);
    # a column without NULL is matched with ``=`` (an engine's plain hash join), one with NULL with
    # ``IS NOT DISTINCT FROM`` (NULL matching NULL); empty where unknown (every column then as if it had NULL)
    nullable: tuple[bool, ...] = ()

    def match(self, i: int, left: str, right: str) -> str:
        """SQL matching key column ``i``: ``left = right`` where no public key is NULL in that column (the
        same rows as ``IS NOT DISTINCT FROM``: a NULL on the data side matches no key either way), else
        ``left IS NOT DISTINCT FROM right``."""
        if i < len(self.nullable) and not self.nullable[i]:
            return f"{left} = {right}"
        return f"{left} IS NOT DISTINCT FROM {right}"

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Any:
        return iter(self.rows())

    def ensure_in(self, backend: Backend) -> None:
        """Make the same table in another engine session (to run one plan on two tables, e.g. neighbours)."""
        names, types, keys, dialect = self._source
        if backend.dialect != dialect:  # the key types as the other engine names them
            from sqlglot import exp

            types = [exp.DataType.build(t, dialect=dialect).sql(dialect=backend.dialect) for t in types]
        build(backend, names, types, keys, dialect=backend.dialect, relation=self.relation)

    def rows(self) -> list[tuple[Any, ...]]:
        """The keys as Python tuples, in the order given (read from the engine once)."""
        if not self._cache:
            cols = ", ".join(f"c{i}" for i in range(self.width))
            table = self._fetch(f"SELECT {cols} FROM {self.relation} ORDER BY __idx")
            columns = [table.column(i).to_pylist() for i in range(self.width)]
            self._cache.append(list(zip(*columns)) if columns else [])
        return list(self._cache[0])


def _arrow_column(values: list[Any]) -> Any:
    """The caller's values of one key as an Arrow array (text where the values mix types)."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def build(backend: Backend, names: list[str], types: list[str], keys: Any, *, dialect: str,
          relation: str | None = None) -> PublicKeys:
    """Hand ``keys`` (normalised by the session: a dict of lists, a list of tuples, or an Arrow table with
    columns k0..) to the engine; convert, deduplicate and number them there; refuse keys that do not convert.
    """
    import pyarrow as pa

    width = len(names)
    # the caller's values as Arrow arrays, made once: the table is built from them alone, so they are what is hashed
    if isinstance(keys, dict):
        arrays = [_arrow_column(list(keys[n])) for n in names]
    elif isinstance(keys, pa.Table):
        arrays = []
    else:
        rows = list(keys)
        arrays = [_arrow_column([r[i] for r in rows]) for i in range(width)]
    tag = _digest(names, types, keys, arrays)  # the same keys get the same table (reused, and shared by equal plans)
    relation = relation or f"dpkit_public_keys_{tag}"
    made_here = _MADE.setdefault(backend, {})
    if relation in made_here:
        return made_here[relation]
    if isinstance(keys, dict):  # {key: [values]}: the cross product, formed by the engine, in lexicographic order
        parts = []
        for i, values in enumerate(arrays):
            name = f"dpkit_keys_{tag}_l{i}"
            backend.register_table(name, pa.table({"k": values,
                                                   "i": pa.array(np.arange(len(values), dtype=np.int64))}))
            parts.append(name)
        order = ", ".join(f"l{i}.i" for i in range(width))
        cols = ", ".join(f"l{i}.k AS k{i}" for i in range(width))
        joined = " CROSS JOIN ".join(f"{p} AS l{i}" for i, p in enumerate(parts))
        source = f"SELECT ROW_NUMBER() OVER (ORDER BY {order}) AS __idx, {cols} FROM {joined}"
    elif isinstance(keys, pa.Table):
        name = f"dpkit_keys_{tag}"
        backend.register_table(name, keys.append_column("__idx", pa.array(np.arange(keys.num_rows, dtype=np.int64))))
        source = f"SELECT * FROM {name}"
    else:  # a list of tuples
        table = pa.table({f"k{i}": arrays[i] for i in range(width)}
                         | {"__idx": pa.array(np.arange(len(rows), dtype=np.int64))})
        name = f"dpkit_keys_{tag}"
        backend.register_table(name, table)
        source = f"SELECT * FROM {name}"
    # every key value converted by the engine to its key's type; one that does not convert is refused
    for i, (key, type_name) in enumerate(zip(names, types)):
        bad = backend.fetch(f"SELECT DISTINCT CAST(k{i} AS {'VARCHAR' if dialect == 'duckdb' else 'STRING'}) "
                            f"FROM ({source}) AS s WHERE k{i} IS NOT NULL AND TRY_CAST(k{i} AS {type_name}) IS NULL "
                            f"LIMIT 3")
        if bad:
            raise InvalidArgumentError(f"the public keys of {key!r} do not convert to its type {type_name}: e.g. "
                                       f"{[r[0] for r in bad]}. Give values of that type (or text it converts from).")
    cast = ", ".join(f"TRY_CAST(k{i} AS {t}) AS c{i}" for i, t in enumerate(types))
    group = ", ".join(f"c{i}" for i in range(width))
    backend.create_temp(relation, f"SELECT MIN(__idx) AS __idx, {group} FROM (SELECT __idx, {cast} FROM "
                                  f"({source}) AS s) AS c GROUP BY {group}")
    nulls = ", ".join(f"COUNT(*) - COUNT(c{i})" for i in range(width))
    counts = backend.fetch(f"SELECT COUNT(*), {nulls} FROM {relation}")[0]
    count = int(counts[0])
    if count == 0:
        raise InvalidArgumentError("the list of public keys is empty.")
    made = PublicKeys(relation=relation, count=count, width=width, _fetch=backend.fetch_arrow,
                      _source=(names, types, keys, dialect), nullable=tuple(int(c) > 0 for c in counts[1:]))
    made_here[relation] = made
    return made


# backend -> the key tables made in it (dropped with the backend, or on close)
_MADE: weakref.WeakKeyDictionary[Backend, dict[str, PublicKeys]] = weakref.WeakKeyDictionary()


def forget(backend: Backend) -> None:
    """Drop what :func:`build` remembers of a backend that is being closed."""
    _MADE.pop(backend, None)


def _digest(names: list[str], types: list[str], keys: Any, arrays: list[Any]) -> str:
    """A short content hash of the keys (their form, and the Arrow table or arrays the engine's table is built
    from) and their target types: equal digests, equal tables.  No ``repr`` of millions of values."""
    import hashlib

    import pyarrow as pa

    form = "table" if isinstance(keys, pa.Table) else "product" if isinstance(keys, dict) else "rows"
    tables = [keys] if isinstance(keys, pa.Table) else [pa.table({"a": a}) for a in arrays]  # (lengths may differ)
    h = hashlib.blake2b(digest_size=8)
    h.update(repr((names, types, form, len(tables))).encode())
    for table in tables:  # each an IPC stream: its schema (types) and its values
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
        h.update(len(data).to_bytes(8, "little"))
        h.update(memoryview(data))
    return h.hexdigest()


def _sortable(column: Any) -> Any:
    """A column whose Arrow order is the strict total order of its values (floats by totalOrder bits)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_floating(column.type):
        col = pc.cast(column, pa.float64())
        values = np.asarray(col.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        bits = values.view(np.int64)
        total = np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
        return pa.array(total, mask=np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool))
    if pa.types.is_dictionary(column.type):
        return pc.cast(column, column.type.value_type)
    return column


def _already_in_order(cols: list[Any]) -> bool:
    """Whether integer key columns are already strictly increasing in the release order (lexicographically,
    each column by (is it valid, its value): NULL first): then the release order is the given order (issue 16:
    DuckDB sorts the integer keys of a selection query, ``ORDER BY .. NULLS FIRST``, and this O(n) check replaces
    the sort here, with or without a NULL key, so that whether a NULL group is among the candidates does not
    change the time taken).  A column of another type, or any pair out of order, says False; the answer is
    then the full sort's, so the check changes no result, only the time to reach it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not all(pa.types.is_integer(c.type) for c in cols):
        return False
    n = len(cols[0])
    if n < 2:
        return True
    greater = np.zeros(n - 1, dtype=bool)
    equal = np.ones(n - 1, dtype=bool)
    for c in cols:
        valid = np.asarray(pc.is_valid(c).to_numpy(zero_copy_only=False), dtype=np.int8)
        value = c.fill_null(0).to_numpy(zero_copy_only=False) if c.null_count else c.to_numpy(zero_copy_only=False)
        for v in (valid, value):  # NULL (valid 0) first; a NULL's filled value ties with another NULL's
            greater |= equal & (v[1:] > v[:-1])
            equal &= v[1:] == v[:-1]
    return bool(greater.all())


def release_order(columns: list[Any]) -> np.ndarray:
    """Row indices sorting key columns by the strict total order of the module docstring (stable, but
    distinct key tuples never tie, so the input order never shows).

    >>> import pyarrow as pa
    >>> release_order([pa.array([float("nan"), 2.0, None, -0.0, 0.0])]).tolist()
    [2, 3, 4, 1, 0]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not columns:
        return np.zeros(0, dtype=np.int64)
    cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
    if _already_in_order(cols):
        return np.arange(len(cols[0]), dtype=np.int64)
    # NULL first: each key sorts by (is it valid, its value), so where the value is NULL the flag decides and
    # the sort's own placement of nulls never matters
    table = pa.table({name: col for i, c in enumerate(cols)
                      for name, col in ((f"n{i}", pc.cast(pc.is_valid(c), pa.int8())), (f"s{i}", _sortable(c)))})
    idx = pc.sort_indices(table, sort_keys=[(name, "ascending") for i in range(len(cols))
                                            for name in (f"n{i}", f"s{i}")])
    return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
