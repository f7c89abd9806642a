"""Noise the engine's aggregates and assemble the result table with its intervals.

Intervals: each primitive's interval comes from its noise law (``Release.interval``).  A derived
aggregate (AVG from a count and a centered sum; VARIANCE from those and a centered sum of
squares) combines its primitives' intervals by interval arithmetic, each taken at level
1 - (1 - confidence)/n so that by a union bound all n hold together with probability
>= confidence.  Every interval covers the value of the *bounded* data.  Quantiles have no
interval in value space that could be computed from the noise alone; their ``details`` give the
exponential mechanism's rank-error bound instead, unless ``quantile_intervals=True`` asked for two
more exponential-mechanism releases per quantile, its interval ends (:func:`_quantile_ends`).
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import math
import struct
from fractions import Fraction
from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.query._keys import release_order
from dpkit.query._post import _nested as _nested_type
from dpkit.query._post import needs_post, post_process
from dpkit.random import is_insecure, resolve_rng

if TYPE_CHECKING:
    from dpkit.query.session import QueryPlan

__all__ = ["QueryResult", "finish_aggregates", "format_guarantee"]


class _FrozenTable(tuple[Any, ...]):
    """A tuple of rows already made read-only cell by cell (by :func:`_frozen_table`): not walked again."""

    __slots__ = ()


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a result's millions of tuples are made (they form no cycles).

    Each collection walks every tracked object, so building 10^6 row tuples with it on costs about twice the
    allocation itself; reference counting still frees everything as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _frozen_table(columns: list[list[Any]], nested: list[bool]) -> _FrozenTable:
    """Rows (tuples) from columns of Python values; only a column of nested values (lists, maps) is walked.

    O(cells) at C speed for flat columns: a result of 10^6 groups is not visited value by value.
    """
    with _no_gc():
        cols = [[_frozen(v) for v in col] if deep else col for col, deep in zip(columns, nested)]
        return _FrozenTable(zip(*cols)) if cols else _FrozenTable()


def _interval_table(lo: Any, hi: Any) -> _FrozenTable:
    """((lo, hi), ...) as Python floats, one pair per row (lists of dates or timestamps as they are)."""
    with _no_gc():
        if isinstance(lo, list):
            return _FrozenTable(zip(lo, hi))
        return _FrozenTable(zip(np.asarray(lo, dtype=float).reshape(-1).tolist(),
                                np.asarray(hi, dtype=float).reshape(-1).tolist()))


def _frozen(value: Any) -> Any:
    """A read-only copy: dicts become mapping proxies, lists tuples, arrays read-only (recursively)."""
    if isinstance(value, _FrozenTable):
        return value
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        out = value.copy()
        out.flags.writeable = False
        return out
    return value


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A noisy table: ``rows`` (keys then aggregates), an interval per aggregate value, the cost.

    Immutable: ``rows`` is a tuple of tuples, ``intervals``, ``scales``, ``split``, ``details`` and
    ``selection`` are read-only mappings.  ``timings`` is empty unless ``debug_timings=True`` was asked
    (wall-clock times are not private).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    intervals: Any  # aggregate name -> ((lo, hi) per row)
    scales: Any     # aggregate name -> primitive -> noise scale
    guarantee: Any
    split: Any      # part -> (epsilon, delta)
    confidence: float
    insecure: bool
    plan: Any = None
    selection: Any = None
    details: Any = field(default_factory=dict)
    remaining: Any = None
    timings: Any = field(default_factory=dict)
    engine: str = ""
    key_columns: Any = ()  # output columns that are (functions of) released keys: no interval
    bounding: Any = None   # the bounding report (DP counts of the units that bounding touched), or a note

    def __post_init__(self) -> None:
        for name in ("columns", "rows", "intervals", "scales", "split", "selection", "details", "timings",
                     "key_columns", "bounding"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _frozen(value))

    def to_dicts(self) -> list[dict[str, Any]]:
        """One dict per row: keys, values, and ``<name>_lo`` / ``<name>_hi`` interval ends."""
        names = list(self.columns)
        for name in self.intervals:
            names += [f"{name}_lo", f"{name}_hi"]
        with _no_gc():
            lows_highs = [iv for name in self.intervals for iv in zip(*self.intervals[name])]
            return [dict(zip(names, row + extra)) for row, extra in zip(self.rows, zip(*lows_highs))] \
                if lows_highs else [dict(zip(names, row)) for row in self.rows]

    def to_pandas(self) -> Any:
        """A DataFrame with the columns of :meth:`to_dicts` (the same names, order, values and dtypes: pandas
        infers each column's type from the same Python values), built from the row tuples and interval pairs
        as records: a result of 10^6 groups never becomes 10^6 dicts.  An empty result keeps its columns."""
        import pandas as pd

        with _no_gc():
            width = len(self.columns)
            table = pd.DataFrame.from_records(self.rows, columns=range(width), nrows=len(self.rows))
            data: dict[str, Any] = {}
            for i, name in enumerate(self.columns):  # a repeated name keeps its first place and its last values
                data[name] = table[i]
            for name, iv in self.intervals.items():
                ends = pd.DataFrame.from_records(iv, columns=range(2), nrows=len(iv))
                data[f"{name}_lo"], data[f"{name}_hi"] = ends[0], ends[1]
            return pd.DataFrame(data, columns=list(data))

    def __str__(self) -> str:
        from dpkit._table import render

        headers = list(self.columns)
        keys = set(self.key_columns)
        body = []
        for i, row in enumerate(self.rows):
            cells = []
            for name, v in zip(self.columns, row):
                if name in keys:
                    cells.append("NULL" if v is None else str(v))
                    continue
                lo, hi = self.intervals[name][i]
                if isinstance(lo, float) and math.isnan(lo):
                    cells.append(_fmt(v))
                else:
                    cells.append(f"{_fmt(v)} [{_fmt(lo)}, {_fmt(hi)}]")
            body.append(cells)
        if body:
            table = render(headers, body)
        elif self.selection is not None:
            table = (f"(no partitions released: no group's noisy count of units reached the selection threshold of "
                     f"{self.selection['threshold']} units; groups need more units, or more epsilon for selection)")
        else:
            table = "(no partitions released)"
        warn = "\nINSECURE seeded generator: NOT private" if self.insecure else ""
        return (f"{table}\n{len(self.rows)} row(s); [lo, hi]: {self.confidence:.0%} interval from the noise, for "
                f"the bounded data; cost {format_guarantee(self.guarantee)}{self._bounding_line()}{warn}")

    def _bounding_line(self) -> str:
        b = self.bounding
        if not b:
            return ""
        if not b.get("released"):
            return "\nbounding not measured (bounding_report=False): intervals cover the bounded data only"
        clamped = f", {b['units_clamped']} had values outside the bounds"
        return (f"\nbounding (DP counts, +-{b['half_width']:.0f}): ~{b['units']} units; {b['units_over_max_rows']} had "
                f"more than max_rows={b['max_rows']} rows in a group, {b['units_over_max_partitions']} more than "
                f"max_partitions={b['max_partitions']} groups{clamped}")


def _short(x: float) -> str:
    text = f"{float(x):.6g}"
    return text if any(c in text for c in ".einf") else text + ".0"


def format_guarantee(g: Any) -> str:
    """A guarantee with its numbers to 6 significant digits: (2.2, 9.8e-06)-DP, not (2.1999999999999997, ...).

    >>> from dpkit.guarantees import ApproxDP
    >>> format_guarantee(ApproxDP(epsilon=0.1 + 2.1, delta=1e-5 - 2e-7))
    '(2.2, 9.8e-06)-DP'
    """
    eps, delta, rho = getattr(g, "epsilon", None), getattr(g, "delta", None), getattr(g, "rho", None)
    if eps is not None and delta is not None:
        return f"({_short(eps)}, {_short(delta)})-DP"
    if eps is not None:
        return f"{_short(eps)}-DP"
    if rho is not None:
        return f"{_short(rho)}-zCDP"
    return str(g)


def _fmt(x: Any) -> str:
    if x is None:
        return "NULL"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        return str(x)
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    f = float(x)
    if math.isnan(f):
        return "nan"
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.4g}" if abs(f) >= 1e4 or abs(f) < 1e-3 else f"{f:.4f}".rstrip("0").rstrip(".")


def _arrays(release: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = release.interval
    return (np.asarray(release.values, dtype=float).reshape(-1), np.asarray(lo, dtype=float).reshape(-1),
            np.asarray(hi, dtype=float).reshape(-1))


def _div_interval(
    a_lo: np.ndarray, a_hi: np.ndarray, c_lo: np.ndarray, c_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """[a_lo, a_hi] / [c_lo, c_hi] for c_lo > 0 (else +-inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        cands = np.stack([a_lo / c_lo, a_lo / c_hi, a_hi / c_lo, a_hi / c_hi])
    lo, hi = cands.min(axis=0), cands.max(axis=0)
    bad = ~(c_lo > 0)
    return np.where(bad, -np.inf, lo), np.where(bad, np.inf, hi)


def _floats(column: Any) -> np.ndarray:
    """An engine column of aggregates as float64, NULL (an empty SUM) as 0."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_decimal(col.type) or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        col = pc.cast(col, pa.float64())
    return np.asarray(col.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)


def finish_aggregates(plan: QueryPlan, raw: Any, hists: dict[int, list[tuple[Any, ...]]], *,
                      confidence: float, rng: np.random.Generator | None,
                      distincts: dict[int, list[tuple[Any, ...]]] | None = None,
                      nonnegative: bool = True, report: tuple[Any, ...] | None = None) -> QueryResult:
    """Noise the engine's aggregates (an Arrow table: key columns, then ``compiled.columns``) and assemble the result.

    Vectorised: the candidate groups are ordered by :func:`~dpkit.query._keys.release_order` on whole key
    columns, thresholded and noised as arrays; Python objects are made only for the released keys.
    """
    spec, compiled, split = plan.spec, plan.compiled, plan.split
    nk = compiled.key_count
    key_cols = [raw.column(i) for i in range(nk)]
    value = {c: _floats(raw.column(nk + j)) for j, c in enumerate(compiled.columns)}
    if distincts:  # matched to the main statement's rows by the canonical key (as the histograms: Arrow codes)
        for i, drows in distincts.items():
            value[f"distinct__{i}"] = _distinct_values(key_cols, raw.num_rows, drows, nk)
    # the generator every release below draws from: asked before and after drawing, so that a generator
    # seeded, rewound or otherwise tampered with (the default one included) is reported as insecure
    generator = resolve_rng(rng)
    insecure_before = is_insecure(generator)
    selection_info = None
    if not spec.keys or plan.public_keys is not None:
        # one row (the whole table), or one row per public key in the keys' order (the statement's order)
        rows_idx = np.arange(raw.num_rows, dtype=np.int64)
        key_arrays = key_cols
    else:
        sel = split.selection
        assert sel is not None
        order = release_order(key_cols)  # the total order of the key values: released rows come out in it
        tau = sel.threshold
        if order.size:
            noisy = np.asarray(sel.mechanism.release(value["__units"][order], rng=rng).values).reshape(-1)
            rows_idx = order[noisy >= tau]
        else:
            rows_idx = order
        key_arrays = [c.take(rows_idx) for c in key_cols]
        selection_info = {"threshold": tau, "epsilon": sel.epsilon, "delta": sel.delta_spent, "noise": sel.noise,
                          "noise_scale": sel.scale, "released": int(rows_idx.size),
                          "candidates_considered": "not released"}
    g = int(rows_idx.size)
    per_agg: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    scales: dict[str, dict[str, float]] = {}
    quantile_details: dict[str, Any] = {}
    n_prims = {a.name: len(a.primitives) for a in spec.aggregates}
    for m in split.measurements:
        level = 1.0 - (1.0 - confidence) / n_prims[m.aggregate]
        if m.noise == "exponential":
            vals, gaps, q_lo, q_hi = _quantiles(plan, m, key_arrays, g, hists, rng, level)
            per_agg.setdefault(m.aggregate, {})[m.primitive] = (vals, q_lo, q_hi)
            scales.setdefault(m.aggregate, {})[m.primitive] = m.scale(g)
            quantile_details[m.aggregate] = {"rank_error_bound": gaps, "level": level,
                                             "bucket_width": _width(plan, m)}
            if m.ends:
                quantile_details[m.aggregate]["interval"] = _ends_note(plan, m, level)
            continue
        if g == 0:
            per_agg.setdefault(m.aggregate, {})[m.primitive] = (np.zeros(0), np.zeros(0), np.zeros(0))
            continue
        vec = value[m.column][rows_idx] if m.column in value else np.zeros(g)
        mech = m.mechanism(g)
        rel = mech.release(vec, rng=rng, confidence=level)
        per_agg.setdefault(m.aggregate, {})[m.primitive] = _arrays(rel)
        scales.setdefault(m.aggregate, {})[m.primitive] = m.scale(g)

    columns = [k.name for k in spec.keys] + [a.name for a in spec.aggregates]
    values: dict[str, np.ndarray] = {}
    intervals: dict[str, tuple[Any, Any]] = {}
    for agg in spec.aggregates:
        prims = per_agg.get(agg.name, {})
        v = plan.values.get(agg.name)
        if agg.kind in ("count", "count_units", "count_values", "count_distinct", "sum"):
            (val, lo, hi), = prims.values()
            sign = _sign(agg, plan)
            if nonnegative and sign:  # a count (or a sum of values of one sign) has that sign: clamping the
                # noisy value and the interval to it is post-processing that keeps the interval's coverage
                if sign > 0:
                    val, lo, hi = np.maximum(val, 0.0), np.maximum(lo, 0.0), np.maximum(hi, 0.0)
                else:
                    val, lo, hi = np.minimum(val, 0.0), np.minimum(lo, 0.0), np.minimum(hi, 0.0)
        elif agg.kind == "quantile":
            val, lo, hi = prims["histogram"]
        else:
            assert v is not None and v.lo is not None and v.hi is not None
            c, c_lo, c_hi = prims["values"]
            s, s_lo, s_hi = prims["centered_sum"]
            mid, r = v.mid, (v.hi - v.lo) / 2.0
            with np.errstate(divide="ignore", invalid="ignore"):
                mean_c = np.where(c > 0.0, s / np.where(c > 0.0, c, 1.0), 0.0)
            mean_c = np.clip(mean_c, -r, r)
            m_lo, m_hi = _div_interval(s_lo, s_hi, c_lo, c_hi)
            m_lo, m_hi = np.clip(m_lo, -r, r), np.clip(m_hi, -r, r)
            if agg.kind == "mean":
                val, lo, hi = mid + mean_c, mid + m_lo, mid + m_hi
            else:
                qv, q_lo, q_hi = prims["centered_squares"]
                with np.errstate(divide="ignore", invalid="ignore"):
                    e2 = np.where(c > 0.0, qv / np.where(c > 0.0, c, 1.0), 0.0)
                var = np.clip(e2 - mean_c**2, 0.0, r * r)
                e2_lo, e2_hi = _div_interval(np.maximum(q_lo, 0.0), np.maximum(q_hi, 0.0), c_lo, c_hi)
                sq_lo = np.where((m_lo <= 0) & (m_hi >= 0), 0.0, np.minimum(m_lo**2, m_hi**2))
                sq_hi = np.maximum(m_lo**2, m_hi**2)
                v_lo = np.clip(e2_lo - sq_hi, 0.0, r * r)
                v_hi = np.clip(e2_hi - sq_lo, 0.0, r * r)
                if agg.kind == "variance":
                    val, lo, hi = var, v_lo, v_hi
                else:
                    val, lo, hi = np.sqrt(var), np.sqrt(v_lo), np.sqrt(v_hi)
        values[agg.name] = val
        intervals[agg.name] = (lo, hi)
        if agg.kind == "quantile" and v is not None and v.temporal and lo.size and np.isfinite(lo).all():
            # released ends (quantile_intervals=True) as dates or timestamps, rounded outward
            intervals[agg.name] = ([_temporal_end(x, v.temporal, up=False) for x in lo.tolist()],
                                   [_temporal_end(x, v.temporal, up=True) for x in hi.tolist()])

    details: dict[str, Any] = {}
    bounding = _bounding(plan, report, rng, confidence)
    insecure = insecure_before or is_insecure(generator)
    temporal = {a.name: plan.values[a.name].temporal for a in spec.aggregates
                if a.name in plan.values and plan.values[a.name].temporal}
    if needs_post(spec):
        kinds = {a.name: a.kind for a in spec.aggregates}
        typed = {a.name: _typed(values[a.name], temporal.get(a.name)) for a in spec.aggregates}
        columns, by_column, post_intervals, key_columns, nested = post_process(spec, key_arrays, g, typed,
                                                                               intervals, kinds)
        keyset = set(key_columns)
        # only a key column can hold nested values (an aggregate's output is a number, a date or a timestamp);
        # whether it does is read from its Arrow type, not from its values
        out_rows = _frozen_table(by_column, [name in keyset and deep for name, deep in zip(columns, nested)])
        out_intervals = {name: _interval_table(lo, hi) for name, (lo, hi) in post_intervals.items()}
    else:
        key_columns = [k.name for k in spec.keys]
        key_lists = [c.to_pylist() for c in key_arrays]
        value_lists = [_py_column(values[a.name], a.kind, temporal.get(a.name)) for a in spec.aggregates]
        out_rows = _frozen_table(key_lists + value_lists,
                                 [_nested_type(c.type) for c in key_arrays] + [False] * len(value_lists))
        out_intervals = {a.name: _interval_table(*intervals[a.name]) for a in spec.aggregates}
    if temporal:
        details["temporal"] = {name: f"{kind}s: quantiles are computed on days (dates) or seconds (timestamps) "
                                     "since 1970-01-01" for name, kind in temporal.items()}
    extremes = [a.name for a in spec.aggregates if a.extreme]
    if extremes:
        details["min_max"] = (f"{extremes}: MIN and MAX are released as the DP 0- and 1-quantiles; one unit can "
                              "move the exact extreme anywhere, so where few units lie near it the release falls "
                              "between the clamping bound and the data.")
    if quantile_details:
        details["quantiles"] = quantile_details
    samples = [a.name for a in spec.aggregates if a.sample]
    if samples:
        details["note"] = (f"{samples}: the population form (divide by n) is estimated; the sample form differs "
                           "by n/(n-1).")
    return QueryResult(
        columns=tuple(columns), rows=out_rows, intervals=out_intervals,
        scales=scales, guarantee=plan.guarantee, split=split.shares(), confidence=confidence,
        insecure=insecure, plan=plan, selection=selection_info, details=details, key_columns=key_columns,
        bounding=bounding)


def _sign(agg: Any, plan: QueryPlan) -> int:
    """+1 if the aggregate cannot be negative (a count, a sum of values clamped to [lo >= 0, hi]), -1 if it
    cannot be positive, 0 otherwise."""
    if agg.kind in ("count", "count_units", "count_values", "count_distinct"):
        return 1
    v = plan.values.get(agg.name)
    if agg.kind == "sum" and v is not None and v.lo is not None and v.hi is not None:
        return 1 if v.lo >= 0 else -1 if v.hi <= 0 else 0
    return 0


def _bounding(plan: QueryPlan, report: tuple[Any, ...] | None, rng: np.random.Generator | None,
              confidence: float) -> dict[str, Any]:
    """The bounding report, released with its share of the budget, or the note that there is none."""
    mech = plan.split.report
    if mech is None or report is None:
        return {"released": False, "note": "bounding_report=False: intervals cover the bounded data only (clamped "
                                           "values, at most max_rows rows a group, max_partitions groups a unit); "
                                           "how much bounding cut is not measured."}
    exact = np.array([0.0 if x is None else float(x) for x in report], dtype=float)
    rel = mech.release(exact, rng=rng, confidence=1.0 - (1.0 - confidence) / 4.0)
    lo, hi = rel.interval
    names = ("units", "units_over_max_partitions", "units_over_max_rows", "units_clamped")
    return {"released": True, "epsilon": plan.split.report_epsilon, "noise_scale": float(mech.scale),
            "max_partitions": plan.max_partitions, "max_rows": plan.max_rows,
            **{n: max(0, int(v)) for n, v in zip(names, rel.values)},
            "half_width": float(hi[0] - rel.values[0]),
            "note": "DP counts of units (each within +-half_width at the stated confidence): how many units bounding "
                    "touched; the intervals cover the bounded data."}


_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1)


def _temporal(x: float, kind: str | None) -> Any:
    """Days or seconds since 1970-01-01 back to a date or a (naive, UTC) timestamp."""
    if kind == "date":
        return _EPOCH_DATE + datetime.timedelta(days=math.floor(x))
    return _EPOCH + datetime.timedelta(seconds=x)


def _temporal_end(x: float, kind: str, *, up: bool) -> Any:
    """An interval end in days or seconds as a date or timestamp, rounded outward (down for the lower end,
    up for the upper): whole days, or whole microseconds computed exactly (``Fraction``)."""
    if kind == "date":
        days = math.ceil(x) if up else math.floor(x)
        return _EPOCH_DATE + datetime.timedelta(days=days)
    us = Fraction(x) * 1_000_000
    return _EPOCH + datetime.timedelta(microseconds=math.ceil(us) if up else math.floor(us))


def _typed(v: np.ndarray, kind: str | None) -> Any:
    return v if kind is None else [_temporal(float(x), kind) for x in v]


def _py(x: Any, kind: str, temporal: str | None = None) -> Any:
    f = float(x)
    if temporal is not None:
        return _temporal(f, temporal)
    if kind in ("count", "count_units", "count_distinct") and f.is_integer():
        return int(f)
    return f


def _py_column(v: np.ndarray, kind: str, temporal: str | None = None) -> list[Any]:
    """:func:`_py` over a whole column: floats, counts that are whole numbers as ints, or dates/timestamps."""
    v = np.asarray(v, dtype=float).reshape(-1)
    if temporal is not None:
        return [_temporal(x, temporal) for x in v.tolist()]
    floats: list[Any] = v.tolist()
    if kind not in ("count", "count_units", "count_distinct"):
        return floats
    if (np.isfinite(v) & (np.floor(v) == v) & (np.abs(v) < 2.0**62)).all():
        return v.astype(np.int64).tolist()
    return [int(f) if math.isfinite(f) and f.is_integer() else f for f in floats]


def _total(v: Any) -> tuple[Any, ...]:
    """A strict total order on the values one engine column can hold, whatever they are.

    NULL first; a float by its IEEE 754 totalOrder position (so NaN, -0.0 and 0.0 are ordered, never
    tied and never incomparable); anything else by Python's order of its type (integers, decimals,
    text, dates, times, bytes, UUIDs), after the name of its type so that two types never meet.
    """
    if v is None:
        return (0,)
    if isinstance(v, (float, np.floating)):
        bits = struct.unpack(">q", struct.pack(">d", float(v)))[0]
        return (1, "float", bits ^ 0x7FFFFFFFFFFFFFFF if bits < 0 else bits)
    if isinstance(v, (bool, np.bool_)):
        return (1, "bool", bool(v))
    if isinstance(v, (int, np.integer)):
        return (1, "int", int(v))
    return (1, type(v).__name__, v)


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The order of released rows: a function of the released key values alone (see :func:`_total`)."""
    return tuple(_total(v) for v in key)


def _width(plan: QueryPlan, m: Any) -> float:
    v = plan.values[m.aggregate]
    assert v.lo is not None and v.hi is not None  # a quantile's value always has clamping bounds
    return (v.hi - v.lo) / plan.compiled.buckets


# key types whose values compare in Arrow exactly as their Python values do (floats by their bits, as _total):
# the histogram rows are matched to the released partitions on these by Arrow; any other type in Python
_MATCHED_IN_ARROW = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float", "double",
                     "halffloat", "string", "large_string", "bool", "date32[day]", "binary", "large_binary")


def _partition_index(keys: list[Any], g: int, hist_keys: list[Any], rows: int | None = None) -> np.ndarray:
    """For each histogram row (its key columns), the index of its partition among the ``g`` released ones, or -1.

    ``rows`` is the number of histogram rows, needed where the query has no GROUP BY (no key column to count
    them by: without it every row of such a histogram was dropped, and the quantile drawn from a flat utility).

    The match is :func:`_sort_key` equality: NULL matches NULL, a float matches the same bits.  Vectorised
    (Arrow dictionary codes, a NumPy search) where every key type is in ``_MATCHED_IN_ARROW``, or where the
    histogram's keys are Arrow columns of the released keys' own types (both the engine's values, which Arrow
    compares exactly: the session fetches every statement as Arrow); else in Python
    (:func:`_partition_index_python`, total over values Python cannot hold).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from dpkit.query._keys import _sortable

    n = len(hist_keys[0]) if hist_keys else (rows or 0)
    if not keys:  # no GROUP BY: every row belongs to the one partition
        return np.zeros(n, dtype=np.int64) if g else np.full(n, -1, dtype=np.int64)
    released = [k.combine_chunks() if isinstance(k, pa.ChunkedArray) else k for k in keys]
    codes: list[np.ndarray] = []
    engine_values = all(isinstance(h, (pa.Array, pa.ChunkedArray)) and h.type == col.type
                        for col, h in zip(released, hist_keys))
    if not engine_values and any(str(col.type) not in _MATCHED_IN_ARROW for col in released):
        return _partition_index_python(released, g, hist_keys)  # types Arrow and Python compare differently
    try:
        for col, hist in zip(released, hist_keys):
            h = hist.combine_chunks() if isinstance(hist, pa.ChunkedArray) else hist
            h = h.cast(col.type) if isinstance(h, pa.Array) else pa.array(list(h), type=col.type)
            both = _sortable(pa.concat_arrays([col, h]))
            enc = pc.dictionary_encode(both, null_encoding="encode")
            codes.append(np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return _partition_index_python(released, g, hist_keys)
    if len(codes) == 1:
        code = codes[0]
    else:
        code = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    mine, theirs = code[:g], code[g:]
    order = np.argsort(mine, kind="stable")
    pos = np.searchsorted(mine[order], theirs)
    pos_c = np.minimum(pos, max(g - 1, 0))
    hit = (pos < g) & (mine[order][pos_c] == theirs) if g else np.zeros(n, dtype=bool)
    return np.where(hit, order[pos_c] if g else 0, -1).astype(np.int64)


class _Unmatched:
    """A key value Python cannot hold (a timestamp at infinity, a date before year 1): equal to nothing else."""

    __slots__ = ()


def _py_values(column: Any) -> list[Any]:
    """An Arrow column as Python values, each value Python cannot hold an :class:`_Unmatched` (a function of that
    value alone: candidate groups are converted here, released or not, so a failure would depend on one unit)."""
    import pyarrow as pa

    if not hasattr(column, "to_pylist"):
        return list(column)
    try:
        return list(column.to_pylist())
    except (OverflowError, ValueError, TypeError, pa.ArrowException):
        out: list[Any] = []
        for i in range(len(column)):
            try:
                out.append(column[i].as_py())
            except (OverflowError, ValueError, TypeError, pa.ArrowException):
                out.append(_Unmatched())
        return out


def _partition_index_python(released: list[Any], g: int, hist_keys: list[Any]) -> np.ndarray:
    index = {_sort_key(k): i for i, k in enumerate(zip(*[_py_values(c) for c in released]))}
    columns = [_py_values(h) for h in hist_keys]
    return np.fromiter((index.get(_sort_key(k), -1) for k in zip(*columns)), dtype=np.int64,
                       count=len(columns[0]) if columns else 0)


def _statement_columns(rows: Any, nk: int, extra: int) -> tuple[list[Any], list[Any]]:
    """A side statement's answer (tuples from ``fetch``, or an Arrow table): its key columns and the ``extra``
    columns after them (each a sequence of Python values, or an Arrow column)."""
    import pyarrow as pa

    if isinstance(rows, pa.Table):
        return [rows.column(i) for i in range(nk)], [rows.column(nk + i) for i in range(extra)]
    with _no_gc():
        cols = list(zip(*rows)) if rows else [()] * (nk + extra)
    return list(cols[:nk]), list(cols[nk:nk + extra])


def _distinct_values(key_cols: list[Any], n: int, rows: Any, nk: int) -> np.ndarray:
    """A distinct-count statement's counts on the main statement's ``n`` rows (0 where it has none; NULL as 0)."""
    import pyarrow as pa

    dkeys, (dcount,) = _statement_columns(rows, nk, 1)
    out = np.zeros(n)
    if not len(dcount):
        return out
    j = _partition_index(key_cols, n, dkeys, len(dcount))
    hit = j >= 0  # a partition with distinct values has rows in the main statement too
    counts = dcount if isinstance(dcount, (pa.Array, pa.ChunkedArray)) else pa.array(list(dcount))
    out[j[hit]] = _floats(counts)[hit]
    return out


def _hist_columns(rows: Any, nk: int) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """A histogram statement's answer: key columns, bucket (int64), weight (float64)."""
    keys, (b, w) = _statement_columns(rows, nk, 2)
    b = b.to_numpy() if hasattr(b, "to_numpy") else b
    w = w.to_numpy() if hasattr(w, "to_numpy") else w
    bucket = np.asarray(b, dtype=np.float64).astype(np.int64)  # as int(): toward zero
    return keys, bucket, np.asarray(w, dtype=np.float64)


def _quantiles(plan: QueryPlan, m: Any, keys: list[Any], g: int, hists: dict[int, Any],
               rng: np.random.Generator | None, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One exponential-mechanism release per released partition over the ``buckets + 1`` edges of its grid
    (MIN/MAX: its ``buckets`` buckets); returns the values, their rank-error bounds, and the interval ends (NaN
    unless ``m.ends``: then :func:`_quantile_ends`, one or two more releases per partition on the coarser
    :func:`ends_buckets` grid, from the same generator).

    The grid is fine (``quantile_buckets``, default 2**20) and the engine returns only the occupied buckets,
    so each partition's candidates are handed to the sampler as runs of equal utility (:func:`_runs`): the
    edges between two occupied buckets all have the same rank.  ``Exponential.release_runs`` draws the run
    with probability proportional to its length times e^(utility / scale), exactly, then the edge inside it
    uniformly: the law of the exponential mechanism over every edge of the grid, at a cost in the number of
    occupied buckets (the continuous exponential mechanism of Smith 2011 restricted to a public grid).  The
    output is a grid edge, a function of the released index alone: no float produced from the data values
    (such as a uniform draw between two data points) is ever released.
    """
    v = plan.values[m.aggregate]
    b = plan.compiled.buckets
    nk = plan.compiled.key_count
    hist_keys, bucket, weight = _hist_columns(hists[v.index], nk)
    part = _partition_index(keys, g, hist_keys, bucket.size) if bucket.size else np.zeros(0, dtype=np.int64)
    keep = (part >= 0) & (weight > 0.0)
    part, bucket, weight = part[keep], bucket[keep], weight[keep]
    order = np.lexsort((bucket, part))  # by partition, then bucket (a bucket comes back once per partition)
    part, bucket, weight = part[order], bucket[order], weight[order]
    if part.size:  # merge repeated (partition, bucket) rows, should an engine return any
        new = np.ones(part.size, dtype=bool)
        new[1:] = (part[1:] != part[:-1]) | (bucket[1:] != bucket[:-1])
        first = np.flatnonzero(new)
        part, bucket, weight = part[first], bucket[first], np.add.reduceat(weight, first)
    bounds = np.searchsorted(part, np.arange(g + 1))
    mech = m.mechanism(g)
    out, gaps = np.zeros(g), np.zeros(g)
    ends_lo, ends_hi = np.full(g, np.nan), np.full(g, np.nan)
    assert v.lo is not None and v.hi is not None
    lo, span = float(v.lo), float(v.hi) - float(v.lo)
    be = ends_buckets(b)
    shift = _rank_shift(m, be, level) if m.ends else 0.0
    edges_e = lo + span * np.arange(be + 1) / be if m.ends else np.zeros(0)
    for i in range(g):
        bk, h = bucket[bounds[i]:bounds[i + 1]], weight[bounds[i]:bounds[i + 1]]
        util, lengths = _runs(bk, h, b, m.q, m.extreme)
        rel = mech.release_runs(util, lengths, rng=rng, confidence=level)
        j = int(rel.value)
        out[i] = lo + span * (j + 1 if m.extreme == "max" else j) / b  # MIN: its bucket's low edge; MAX: high edge
        gaps[i] = float(rel.details.get("utility_gap_bound", np.nan))
        if m.ends:
            coarse = np.bincount(bk // (b // be), weights=h, minlength=be) if bk.size else np.zeros(be)
            below = np.concatenate([[0.0], np.cumsum(coarse)])
            ends_lo[i], ends_hi[i] = _quantile_ends(m, below, edges_e, shift, rng, level)
    return out, gaps, ends_lo, ends_hi


# the interval ends' grid: the point's grid coarsened to this many buckets where it divides evenly (an end's
# rank shift grows with the log of its candidates, its value error with the bucket width: 1024 balances them)
ENDS_BUCKETS = 1024


def ends_buckets(buckets: int) -> int:
    """The number of buckets of the interval ends' grid: :data:`ENDS_BUCKETS` when it divides ``buckets``
    (each coarse bucket the union of ``buckets // 1024`` fine ones), else ``buckets`` itself."""
    return ENDS_BUCKETS if buckets > ENDS_BUCKETS and buckets % ENDS_BUCKETS == 0 else buckets


def _runs(bk: np.ndarray, h: np.ndarray, b: int, q: float, extreme: str | None) -> tuple[np.ndarray, np.ndarray]:
    r"""One partition's candidates as runs of equal utility: (utilities, lengths).

    ``bk`` are the partition's occupied buckets in increasing order (``h`` their weights, > 0) on a grid of
    ``b`` buckets; ``B_k`` = the weight below occupied bucket k (cumulative, ``B_0`` = 0), N the total.

    * quantile q: the candidates are the ``b + 1`` edges, utility -|below(e) - q N|; below(e) is constant on
      the edges from one occupied bucket's high edge to the next one's low edge, so the runs are
      [0, bk_0], [bk_0 + 1, bk_1], ..., [bk_last + 1, b], with below 0, B_1, ..., N.
    * MIN: the candidates are the ``b`` buckets, utility -(weight below the bucket) - [bucket empty]; each run
      of empty buckets before occupied bucket k scores -B_k - 1, the bucket itself -B_k, the empty buckets
      after the last one -N - 1.  MAX: -(weight above) - [empty], mirrored.

    The utilities are the same floats as the dense vector's (the cumulative sums add the same numbers in the
    same order; empty buckets add 0.0 exactly), so on the same grid the law is the dense mechanism's.
    """
    r = int(bk.size)
    cum = np.cumsum(h) if r else np.zeros(0)
    n_tot = float(cum[-1]) if r else 0.0
    below = np.concatenate([[0.0], cum])  # below[k] = weight below occupied bucket k (k = 0..r)
    if extreme is None:
        lengths = np.empty(r + 1, dtype=np.int64)
        if r:
            lengths[0] = int(bk[0]) + 1
            lengths[1:r] = np.diff(bk)
            lengths[r] = b - int(bk[-1])
        else:
            lengths[0] = b + 1
        return -np.abs(below - q * n_tot), lengths
    gaps_before = np.diff(np.concatenate([[-1], bk])) - 1 if r else np.zeros(0, dtype=np.int64)
    tail = b - 1 - int(bk[-1]) if r else b
    if extreme == "min":
        occupied, empty_before, empty_tail = -below[:-1], -below[:-1] - 1.0, -n_tot - 1.0
    else:
        occupied, empty_before, empty_tail = -(n_tot - below[1:]), -(n_tot - below[:-1]) - 1.0, -1.0
    util = np.empty(2 * r + 1)
    lengths = np.empty(2 * r + 1, dtype=np.int64)
    util[0:2 * r:2], lengths[0:2 * r:2] = empty_before, gaps_before
    util[1:2 * r:2], lengths[1:2 * r:2] = occupied, 1
    util[2 * r], lengths[2 * r] = empty_tail, tail
    nonzero = lengths > 0
    return util[nonzero], lengths[nonzero]


def _rank_shift(m: Any, buckets: int, level: float) -> float:
    """c: the rank shift of the interval ends, public (it depends on epsilon, the buckets and the level only).

    The end mechanism's utility-gap bound over the ``buckets + 1`` candidates at failure probability
    beta / ends (beta = 1 - level; Dwork & Roth 2014, Thm 3.11), plus 1 for the rank slack of an interpolated
    quantile (see :func:`_quantile_ends`).
    """
    beta = (1.0 - level) / m.ends
    return float(m.end_mechanism().utility_gap_bound(buckets + 1, 1.0 - beta)) + 1.0


def _ends_note(plan: QueryPlan, m: Any, level: float) -> dict[str, Any]:
    return {"confidence": level, "rank_shift": _rank_shift(m, ends_buckets(plan.compiled.buckets), level),
            "ends_buckets": ends_buckets(plan.compiled.buckets),
            "epsilon_point": m.point_epsilon, "epsilon_each_end": m.end_epsilon, "ends_released": m.ends,
            "note": "value interval for the true quantile of the bounded data: exponential-mechanism quantiles at "
                    "ranks q n -+ rank_shift, inside the aggregate's epsilon"
                    + ("; the other end is the clamping bound" if m.ends == 1 else "")}


def _quantile_ends(m: Any, below: np.ndarray, edges: np.ndarray, c: float, rng: np.random.Generator | None,
                   level: float) -> tuple[float, float]:
    r"""The interval ends of one partition's quantile: two exponential-mechanism releases (one for q = 0 or 1).

    ``below[j]`` is the weight of the partition's bounded values below edge j (``below[-1]`` = n, its total
    weight); ``c`` is :func:`_rank_shift`.  **Lower end**: target rank t = q n - c; candidates are each bucket j
    (reporting its low edge e_j), with utility -d_j, d_j = max(below[j] - t, 0, t - below[j+1]) (the distance
    from t to the ranks the bucket spans), and a candidate "below every value" reporting lo with
    d = max(t, 0).  **Upper end**: t = q n + c, bucket j reporting its high edge e_{j+1}, and a candidate
    "above every value" reporting hi with d = max(n - t, 0).  Each end has ``buckets + 1`` candidates.

    Sensitivity: adding or removing one unit moves below[j] by a and n by w with 0 <= a <= w <= L (its
    weight in the partition, <= max_rows), so below[j] - q n moves by a - q w, within +-max(q, 1 - q) L; c is
    public, and a maximum of such terms moves by no more, so each utility has the point release's
    sensitivity ``m.bound`` (targets outside [0, n] are not clipped: clipping would change that).

    Coverage: let Q be the true quantile of the bounded data, any value with W(x < Q) <= q n + 1 and
    W(x <= Q) >= q n - 1 (a weighted q-quantile, or QUANTILE_CONT's interpolation with unit weights).  If
    the lower end e_j > Q, every value <= Q lies below e_j, so below[j] >= q n - 1 and d_j >= c - 1; the
    candidates' rank spans cover [0, n] and the extra one covers t < 0, so the best d is 0.  The exponential
    mechanism picks a candidate whose utility is s below the best with probability <= e^{-s/scale}, so by a
    union bound over the ``buckets + 1`` candidates the lower end exceeds Q with probability <= beta/ends
    when c - 1 is the utility-gap bound at that level (McSherry & Talwar 2007, Thm 8; Dwork & Roth 2014,
    Thm 3.11); the upper end likewise.  Both hold with probability >= ``level`` (union bound).  Heavy
    buckets (ties) are why d is a distance to a bucket's rank span and not to one edge's rank: an edge's
    rank alone can jump over t, putting the nearest edge on the wrong side of Q.  Up to float64 rounding
    of the engine's bucket boundaries (a value within rounding of an edge).  For q = 0 the lower end is lo,
    for q = 1 the upper end is hi (every bounded value lies in [lo, hi]).
    """
    n = float(below[-1])
    mech = m.end_mechanism()
    b = edges.size - 1
    q = float(m.q)
    lo_end, hi_end = float(edges[0]), float(edges[b])
    span_lo, span_hi = below[:-1], below[1:]
    if q > 0.0:
        t = q * n - c
        d = np.concatenate([[max(t, 0.0)], np.maximum(np.maximum(span_lo - t, 0.0), t - span_hi)])
        i = int(mech.release(-d, rng=rng, confidence=level).value)
        lo_end = float(edges[max(i - 1, 0)])  # 0: below every value (lo); i: bucket i - 1's low edge
    if q < 1.0:
        t = q * n + c
        d = np.concatenate([np.maximum(np.maximum(span_lo - t, 0.0), t - span_hi), [max(n - t, 0.0)]])
        i = int(mech.release(-d, rng=rng, confidence=level).value)
        hi_end = float(edges[min(i + 1, b)])  # bucket i's high edge; b: above every value (hi)
    return lo_end, hi_end
