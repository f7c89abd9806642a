"""The sensitivities the plan states hold on real neighbouring tables.

Neighbours (add/remove one privacy unit): a table D and D without every row of one unit.  One plan
is compiled on D; the *same* statement (same salt, so every other unit keeps the same partitions)
runs on D and on D', both in DuckDB.  Then, partition by partition:

* every primitive moves by at most the per-partition bound its measurement states
  (``plan.split.measurements[*].bound``), and ``__units`` (what partition selection counts) by 1;
* at most ``partitions_per_unit`` (K) partitions move at all;
* the quantile utility -|rank - q N| over the bucket edges moves by at most the exponential
  mechanism's stated sensitivity.

Bounds are compared with an absolute slack of 1e-9 (the engine's double sums).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.guarantees import ApproxDP
from dpkit.ledger import SQLiteLedger
from dpkit.query import Session
from query_reference import Table, engine_answer, to_arrow, utility, without_unit

SLACK = 1e-9
BUCKETS = 8
QUERY = ("SELECT k, COUNT(*) AS n, COUNT(DISTINCT uid) AS u, COUNT(x) AS c, SUM(x) AS s, AVG(x) AS m, "
         "VAR_POP(x) AS v, QUANTILE_CONT(x, {q}) AS qx FROM t GROUP BY k")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> SQLiteLedger:
    led = SQLiteLedger(tmp_path_factory.mktemp("sens") / "ledger.db", budget=ApproxDP(epsilon=1.0, delta=1e-6))
    yield led
    led.close()


def check_neighbours(ledger: SQLiteLedger, table: Table, units: list[object], plan_kwargs: dict,
                     q: float) -> dict[str, float]:
    """Assert the stated bounds for D vs D minus each of ``units``; return the largest move per primitive."""
    big = Session(to_arrow(table), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=ledger)
    plan = big.plan(QUERY.format(q=q), quantile_buckets=BUCKETS, **plan_kwargs)
    main_d, hist_d = engine_answer(big, plan)
    largest: dict[str, float] = {}
    for unit in units:
        small = Session(
            to_arrow(without_unit(table, "uid", unit)), max_partitions=1, max_rows=1, privacy_unit="uid", ledger=ledger
        )
        assert big._backend.relation == small._backend.relation  # the same statement runs on both
        main_n, hist_n = engine_answer(small, plan)
        for p, d in _compare(plan, main_d, hist_d, main_n, hist_n).items():
            largest[p] = max(largest.get(p, 0.0), d)
    return largest


def _compare(plan, main_d, hist_d, main_n, hist_n) -> dict[str, float]:  # noqa: ANN001

    measured = [m for m in plan.split.measurements if m.noise != "exponential"]
    bound = {m.primitive: m.bound for m in measured}
    k = {m.partitions_per_unit for m in plan.split.measurements}
    assert len(k) == 1
    (k_stated,) = k
    bound["units"] = 1.0  # partition selection: Geometric with sensitivity K over the units vector
    if plan.split.selection is not None:
        assert plan.split.selection.partitions_per_unit == k_stated
    zero = dict.fromkeys(bound, 0.0)
    moved: set[tuple] = set()
    largest = dict.fromkeys(bound, 0.0) | {"utility": 0.0}
    for key in set(main_d) | set(main_n):
        a, b = main_d.get(key, zero), main_n.get(key, zero)
        for p, c in bound.items():
            d = abs(a[p] - b[p])
            largest[p] = max(largest[p], d)
            assert d <= c + SLACK, (key, p, a[p], b[p], c)
            if d > SLACK:
                moved.add(key)
    (hm,) = [m for m in plan.split.measurements if m.noise == "exponential"]
    for key in set(hist_d) | set(hist_n):
        ud = utility(hist_d.get(key, np.zeros(BUCKETS)), hm.q)
        un = utility(hist_n.get(key, np.zeros(BUCKETS)), hm.q)
        d = float(np.max(np.abs(ud - un)))
        largest["utility"] = max(largest["utility"], d)
        assert d <= hm.bound + SLACK, (key, d, hm.bound)
        if d > SLACK:
            moved.add(key)
    assert len(moved) <= k_stated, (moved, k_stated)
    return largest


NEIGHBOURS = dict(
    table=st.integers(1, 12).flatmap(lambda n: st.fixed_dictionaries({
        "uid": st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=n, max_size=n),
        "k": st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n),
        "x": st.lists(st.one_of(st.none(), st.just(math.nan), st.just(math.inf), st.just(-math.inf),
                                st.floats(-30, 30, allow_nan=False)), min_size=n, max_size=n)})),
    max_partitions=st.integers(1, 3), max_rows=st.integers(1, 3), public=st.booleans(),
    q=st.sampled_from([0.1, 0.5, 0.9]), bounds=st.sampled_from([(0.0, 10.0), (-4.0, 2.0), (1.0, 3.0)]))


def check_every_unit(ledger: SQLiteLedger, table: Table, max_partitions: int, max_rows: int, public: bool, q: float,
                     bounds: tuple[float, float]) -> None:
    kwargs = dict(epsilon=1.0, delta=1e-6, bounds={"x": bounds}, max_partitions=max_partitions, max_rows=max_rows,
                  keys=[("a",), ("b",), ("c",), (None,)] if public else None)
    check_neighbours(ledger, table, sorted({u for u in table["uid"] if u is not None}), kwargs, q)


@settings(max_examples=25)
@given(**NEIGHBOURS)
def test_one_unit_moves_each_partition_by_at_most_the_stated_bound(ledger: SQLiteLedger, table: Table,
                                                                   max_partitions: int, max_rows: int, public: bool,
                                                                   q: float, bounds: tuple[float, float]) -> None:
    check_every_unit(ledger, table, max_partitions, max_rows, public, q, bounds)


@pytest.mark.slow
def test_stated_bounds_hold_on_many_more_tables(ledger: SQLiteLedger) -> None:
    """The property above at 20x the examples (about a minute; -m slow)."""
    settings(max_examples=500)(given(**NEIGHBOURS)(
        lambda table, max_partitions, max_rows, public, q, bounds: check_every_unit(
            ledger, table, max_partitions, max_rows, public, q, bounds)))()


def test_the_bounds_are_reached(ledger: SQLiteLedger) -> None:
    """A unit with many extreme rows in many partitions moves some partition by exactly each bound.

    Unit 9 has 5 rows of +inf in each of "a", "b", "c" (L = 2, K = 2, bounds [-4, 2], so M = 4,
    R = 3): COUNT(*) moves by L = 2, SUM by L * hi = 4 (not M: every value clamps to hi = 2), the
    centered sum by L R = 6, its squares by L R^2 = 18; two partitions move (K = 2).
    """
    table = {"uid": [9] * 15 + [1, 2, 3], "k": ["a"] * 5 + ["b"] * 5 + ["c"] * 5 + ["a", "b", "c"],
             "x": [math.inf] * 15 + [0.0, 1.0, -1.0]}
    kwargs = dict(epsilon=1.0, delta=1e-6, bounds={"x": (-4.0, 2.0)}, max_partitions=2, max_rows=2)
    largest = check_neighbours(ledger, table, [9], kwargs, 0.5)
    assert largest["rows"] == 2 and largest["units"] == 1
    assert largest["sum"] == pytest.approx(4.0) and largest["centered_sum"] == pytest.approx(6.0)
    assert largest["centered_squares"] == pytest.approx(18.0) and largest["values"] == pytest.approx(2.0)
    assert largest["utility"] == pytest.approx(1.0)  # max(q, 1 - q) L at q = 0.5
