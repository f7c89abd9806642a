r"""Which user SQL may reach the engine: one parsed expression, re-emitted from its tree, allow-listed.

Contract
--------
No text a caller writes is pasted into engine SQL.  Every row-level expression (a group key, an
aggregate's argument, a WHERE condition), whether it came from :func:`dpkit.query.parse_sql` or
from a hand-built :class:`~dpkit.query.QuerySpec`, is parsed by sqlglot as exactly **one
expression** (never a statement; ``;`` cannot smuggle a second one), checked node by node against
an allow-list, and re-emitted from the syntax tree by :func:`row_expression`.  The allow-list:

* **Structure**: columns of the session's table, literals, arithmetic, comparison and logical
  operators, ``CASE``, ``CAST`` (compiled as ``TRY_CAST``), ``IN`` over a list of values,
  ``BETWEEN``, ``LIKE``, intervals and list literals (:data:`STRUCTURAL`).  Subqueries, window
  functions, aggregates, lambdas, parameters and anything else are refused.
* **Functions**: a function is allowed only if the DuckDB function it compiles to is a built-in
  scalar function that DuckDB itself marks deterministic (``stability = 'CONSISTENT'`` in
  ``duckdb_functions()``, read from a fresh in-memory database, never the caller's connection), or
  one of a few deterministic built-in macros (:data:`_MACROS`), and is not in :data:`_UNBOUNDED`
  (functions whose *output size* a value controls, e.g. ``repeat`` or ``bitstring``, or whose memory
  grows with the product of two values' lengths, ``damerau_levenshtein``, or with the square of one's,
  ``json_pretty``: one unit's row could exhaust memory and fail the query, which no ``TRY`` catches),
  and the arguments of :data:`_CONSTANT_ARGUMENTS`
  must read no column (``replace(s, 'a', s)`` is quadratic in the length of one unit's string).
  Random numbers, clocks, sequences, ``error()``, ``sleep_ms`` and every catalog or session function
  are refused by the first rule.
* **Group keys** must have a scalar type (:func:`check_key_type`): a list, struct, map or union
  key could not be compared, hashed or ordered the same way by every step after the engine.

Why hand-written: no library decides which SQL is a *row-level, deterministic, total* function of
one row; sqlglot provides the parsing and the re-emission.
"""

from __future__ import annotations

import functools
import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from dpkit.errors import InvalidArgumentError, UnsupportedError

__all__ = ["STRUCTURAL", "allowed_function_names", "check_key_type", "parse_expression", "post_expression",
           "row_expression"]

#: Expression nodes that are allowed as they are (their children are checked too).
STRUCTURAL: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Var, exp.DataType, exp.DataTypeParam,
    exp.Paren, exp.Neg, exp.Not, exp.BitwiseNot,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Pow, exp.DPipe,
    exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseLeftShift, exp.BitwiseRightShift,
    exp.And, exp.Or, exp.Xor,
    exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is,
    exp.Like, exp.ILike, exp.SimilarTo, exp.Glob, exp.Escape, exp.Between, exp.In, exp.Tuple,
    exp.Case, exp.If, exp.Cast, exp.TryCast, exp.Interval, exp.Array, exp.Bracket, exp.Try,
    exp.Extract, exp.Coalesce, exp.Nullif,
)

# Function-call syntax that compiles to a keyword form rather than a catalogue function.
_SYNTAX_NAMES = {"cast", "try_cast", "extract", "coalesce", "nullif", "try", "if"}

#: Deterministic built-in DuckDB macros (the catalogue lists macros without a stability flag; many
#: of the others read the catalogue, the clock or the session, or sleep).
_MACROS = frozenset({
    "if", "nullif", "split_part", "date_add", "days_in_month", "fdiv", "fmod", "md5_number_lower",
    "md5_number_upper", "array_to_string", "list_reverse", "array_reverse", "list_append", "list_prepend",
    "array_append", "array_prepend", "array_push_back", "array_push_front", "array_pop_back", "array_pop_front",
    "list_sum", "list_avg", "list_min", "list_max", "list_count", "list_first", "list_last", "list_median",
})

#: Deterministic functions refused because a value sets the size of their output (a unit could make
#: the query run out of memory, a failure that depends on its rows and that TRY does not catch).
_UNBOUNDED = frozenset({
    "repeat", "lpad", "rpad", "range", "generate_series", "list_resize", "array_resize", "unnest",
    "string_split_regex", "regexp_split_to_array", "str_split_regex", "list_grade_up", "sleep_ms",
    "bar", "format_bytes", "printf", "format", "getenv", "version", "current_setting",
    # a value sets the length (bitstring('1', n): up to 2**31 bits a row); a full len(a) x len(b) matrix
    # (one unit's 70,000-character string: an OutOfMemoryException under a 3 GB address-space limit)
    "bitstring", "damerau_levenshtein",
    # each nesting level indented on its own line: quadratic in one unit's '[[[...]]]' (70,000 characters: 4.9 GB)
    "json_pretty",
})

#: Functions whose listed arguments (0-based positions) must read no column: the text put in at each match
#: (``replace(s, 'a', s)`` writes ``s`` once for each 'a' in ``s``: quadratic in one unit's string, 4.9 GB for
#: 70,000 characters, an OutOfMemoryException no TRY catches).  A literal there keeps the output linear.
_CONSTANT_ARGUMENTS: dict[str, tuple[int, ...]] = {"replace": (2,), "regexp_replace": (2,)}

_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


@functools.lru_cache(maxsize=1)
def allowed_function_names() -> frozenset[str]:
    """Lower-case names of the functions a row-level expression may call (see the module docstring)."""
    import duckdb

    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
            "WHERE function_type = 'scalar' AND stability = 'CONSISTENT'"
        ).fetchall()
    finally:
        con.close()
    return frozenset(r[0] for r in rows) - _UNBOUNDED | _MACROS


def _refuse(reason: str, fix: str) -> UnsupportedError:
    return UnsupportedError(f"{reason} {fix}")


def _function_name(node: exp.Func) -> str | None:
    """The name of the DuckDB function ``node`` compiles to, or None for a keyword form (CASE, ...)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    try:
        sql = node.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except SqlglotError:
        return "?"  # sqlglot cannot write it for DuckDB: refused as unknown
    m = _CALL.match(sql)
    return m.group(1).lower() if m else None


def _check_node(node: exp.Expr, where: str) -> None:
    text = node.sql(dialect="duckdb")
    if isinstance(node, (exp.Select, exp.Subquery, exp.Query, exp.Exists)):
        raise _refuse(f"a subquery in {where} is not supported:", "filter and compute on the session's table only.")
    if isinstance(node, exp.Window):
        raise _refuse(f"a window function in {where} ({text}) is not supported:",
                      "window functions mix rows of different privacy units.")
    if isinstance(node, exp.AggFunc):
        raise _refuse(f"an aggregate inside {where} ({text}) is not supported:",
                      "aggregates may appear only at the top of the select list.")
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        raise _refuse(f"a subquery in {where} is not supported:", "write IN with a list of values.")
    if isinstance(node, exp.Column):
        if isinstance(node.this, exp.Star):
            raise _refuse(f"{text} in {where} selects whole rows;", "name the columns.")
        if node.args.get("db") or node.args.get("catalog"):
            raise _refuse(f"{text} in {where} names another database;", "use the session's table only.")
        return
    if isinstance(node, exp.Func) and not isinstance(node, STRUCTURAL):
        name = _function_name(node)
        if name is None:
            cls = type(node).__name__
            if cls.startswith(("Current", "Local")):
                raise _refuse(f"a non-deterministic function in {where} ({text}) is not supported:",
                              "a query must be a fixed function of the data.")
            raise _refuse(f"{text} in {where} is not supported:", "use plain functions of the row's columns.")
        if name in _SYNTAX_NAMES:
            return
        if name in {"error", "raise_error", "assert_true"}:
            raise _refuse(f"{text} in {where} raises an error on some rows, which would tell whether such a row "
                          "exists;", "filter those rows out instead.")
        if name in _UNBOUNDED:
            raise _refuse(f"{name}() in {where} is not supported: its output size is set by a value, so one "
                          "unit's row could make the query run out of memory;", "use a function of bounded size.")
        for position in _CONSTANT_ARGUMENTS.get(name, ()):
            args = list(node.iter_expressions())
            if position < len(args) and args[position].find(exp.Column) is not None:
                raise _refuse(f"{text} in {where} is not supported: its replacement reads a column, so one unit's "
                              "long string could make the output quadratic in its length and the query run out of "
                              "memory;", "use a literal replacement.")
        if name not in allowed_function_names():
            raise _refuse(f"a non-deterministic or unknown function in {where} ({text}) is not supported:",
                          "a query must be a fixed function of the data; use DuckDB's deterministic scalar "
                          "functions (random numbers, clocks, sequences and session functions are refused).")
        return
    if not isinstance(node, STRUCTURAL):
        raise _refuse(f"{text} ({type(node).__name__}) in {where} is not supported:",
                      "use columns, literals, operators, CASE, CAST and deterministic scalar functions.")


def row_expression(node: exp.Expression, where: str) -> str:
    """Check that ``node`` is an allowed deterministic row-level expression; return its DuckDB SQL.

    The SQL is re-emitted from the tree, with ``CAST`` turned into ``TRY_CAST`` (a value that does not
    convert becomes NULL instead of failing the query on one unit's row).

    Raises
    ------
    UnsupportedError
        For anything outside the allow-list of the module docstring, with the reason and a fix.
    """
    for sub in node.walk():
        _check_node(sub, where)
    node = node.transform(lambda n: exp.TryCast(this=n.this, to=n.args["to"]) if type(n) is exp.Cast else n)
    return node.sql(dialect="duckdb")


def post_expression(node: exp.Expression, where: str, *, columns: set[str] | None = None) -> str:
    """Check a post-processing expression (over the noisy result's columns); return its DuckDB SQL.

    The same allow-list as :func:`row_expression`; its columns must be result columns (``columns``,
    when given).  It runs on the noisy result only, in an engine of dpkit's own that holds nothing else.
    """
    for sub in node.walk():
        _check_node(sub, where)
        if isinstance(sub, exp.Column):
            if sub.table:
                raise _refuse(f"{sub.sql(dialect='duckdb')} in {where} names a table;",
                              "refer to the query's output columns.")
            if columns is not None and sub.name not in columns:
                raise InvalidArgumentError(
                    f"{sub.name!r} in {where} is not a column of the result ({sorted(columns)}).")
    return node.sql(dialect="duckdb")


def parse_expression(text: object, where: str, *, dialect: str = "duckdb") -> exp.Expression:
    """Parse ``text`` as exactly one SQL expression (not a statement), or refuse.

    Raises
    ------
    InvalidArgumentError
        If it does not parse, is empty, or holds more than one statement or expression.
    UnsupportedError
        If it is a statement (SELECT, INSERT, PRAGMA, ...) rather than an expression.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"{where} must be a non-empty SQL expression; got {text!r}.")
    try:
        parsed = [p for p in sqlglot.parse(text, read=dialect) if p is not None]
    except (ParseError, SqlglotError) as e:
        raise InvalidArgumentError(f"could not parse {where} as SQL: {e}") from None
    if len(parsed) != 1:
        raise InvalidArgumentError(f"{where} must be one SQL expression; got {len(parsed)} statements.")
    node = parsed[0]
    if isinstance(node, (exp.Query, exp.Command, exp.DDL, exp.DML, exp.Pragma, exp.Set, exp.Use, exp.Transaction)) \
            or type(node).__name__ in {"Describe", "Copy", "Export", "Install", "Load"}:
        raise _refuse(f"{where} must be an expression, not a {type(node).__name__.upper()} statement;",
                      "write a row-level expression such as lower(region) or price * quantity.")
    if isinstance(node, exp.Alias):
        raise InvalidArgumentError(f"{where} must be an expression without an alias; got {text!r}.")
    if not isinstance(node, exp.Expression):
        raise _refuse(f"{where} ({text!r}) does not parse to an expression;",
                      "write a row-level expression such as lower(region) or price * quantity.")
    return node


_NON_SCALAR = re.compile(r"(\[|<|^\s*(struct|map|union|array|list|variant)\b)", re.IGNORECASE)


# scalar key types that still cannot be released: why (after "has the type T, "), and what to write instead
_INTERVAL = ("which cannot be a group key: DuckDB groups INTERVAL '1 month' with INTERVAL '30 days' (so the key "
             "released would be either, as the rows happen to come), and the candidate groups cannot be put in a "
             "total order", "group by a number computed from it, e.g. epoch(x) or datepart('month', x).")
_TIMETZ = ("which cannot be a group key: its values leave the engine without their offsets (12:00+01 and 12:00+00 "
           "are two groups that come back as the same 12:00), so the released keys would not be in a strict total "
           "order", "group by a TIME or a text form of it, e.g. CAST(x AS VARCHAR).")
_BIGNUM = ("which reaches Python as an opaque Arrow extension that cannot be ordered (the query failed after its "
           "spend, on every table)", "group by CAST(x AS HUGEINT) or CAST(x AS VARCHAR).")
_UHUGEINT = ("which leaves the engine as a signed 128-bit decimal: a key at or above 2^127 would be released as a "
             "wrong, negative number", "group by CAST(x AS HUGEINT) (values below 2^127) or CAST(x AS VARCHAR).")
_REFUSED_KEY_TYPES: dict[str, tuple[str, str]] = {
    "INTERVAL": _INTERVAL, "TIME WITH TIME ZONE": _TIMETZ, "TIMETZ": _TIMETZ, "BIGNUM": _BIGNUM,
    "VARINT": _BIGNUM, "UHUGEINT": _UHUGEINT, "UINT128": _UHUGEINT,
}


def check_key_type(name: str, type_name: str) -> None:
    """Refuse a group key whose engine type is not scalar (a list, struct, map, union or array), or is one of
    the scalar types that cannot be released as a strict total order of exact values (:data:`_REFUSED_KEY_TYPES`).

    Such keys could not be hashed or ordered the same way after the engine, so a single unit's value
    could make the post-processing fail; the refusal depends only on the schema.
    """
    upper = type_name.strip().upper()
    refused = _REFUSED_KEY_TYPES.get("INTERVAL" if upper.startswith("INTERVAL") else upper)
    if refused is not None:
        why, hint = refused
        raise _refuse(f"the group key {name!r} has the type {type_name}, {why};", hint)
    if _NON_SCALAR.search(type_name):
        raise _refuse(f"the group key {name!r} has the non-scalar type {type_name};",
                      "group by a scalar expression (a number, text, date or timestamp), e.g. one element of it.")
