"""Issue 11: an Estimate keeps its label through arithmetic (interval arithmetic, outward rounding),
stays backward compatible (constructor, float behaviour, attributes, pickling), and is immutable;
the value objects around it (Release, distributions' tables) are read-only too."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._math import Estimate
from dpkit._math.directed import counted_sum_up, counted_sum_up_array, down, sqrt_up, sum_up, up

finite = st.floats(-1e12, 1e12, allow_nan=False)
kinds = st.sampled_from(["exact", "upper", "lower", "interval"])


def enclosure(x: Estimate) -> tuple[float, float]:
    return x.lower_bound, x.upper_bound


def test_backward_compatible_constructor_and_float_behaviour():
    x = Estimate(0.25, kind="exact", error=0.0, method="closed form")
    assert float(x) == 0.25 and x == 0.25 and x < 1 and round(x, 1) == 0.2 and f"{x:.2f}" == "0.25"
    assert (x.kind, x.error, x.method, x.lower) == ("exact", 0.0, "closed form", None)
    assert Estimate(1.0, kind="numerical", error=0.1).kind == "numerical"
    for kind in ("exact", "upper", "lower", "numerical"):
        y = pickle.loads(pickle.dumps(Estimate(1.5, kind=kind, error=0.5, method="m")))
        assert (float(y), y.kind, y.error, y.method) == (1.5, kind, 0.5, "m")
    iv = Estimate(2.0, kind="interval", lower=1.0, method="m")
    assert pickle.loads(pickle.dumps(iv)).lower == 1.0
    with pytest.raises(ValueError, match="kind must be one of"):
        Estimate(1.0, kind="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs its lower end"):
        Estimate(1.0, kind="interval")
    with pytest.raises(ValueError, match="lower <= value"):
        Estimate(1.0, kind="interval", lower=2.0)
    with pytest.raises(ValueError, match="only for kind='interval'"):
        Estimate(1.0, kind="upper", lower=0.5)


def test_an_estimate_is_immutable():
    x = Estimate(1.0, kind="upper", method="m")
    for name in ("kind", "error", "method", "lower"):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(x, name, "exact")
    with pytest.raises(AttributeError):
        del x.kind


def test_ten_spends_of_a_tenth_add_to_more_than_one():
    """The issue's example: the exact sum of ten copies of the float 0.1 is 1 + 5.55e-17."""
    spends = [Estimate(0.1, kind="upper", method="spend")] * 10
    total = sum(spends)
    assert isinstance(total, Estimate) and total.kind == "upper" and float(total) > 1.0
    assert Fraction(float(total)) >= 10 * Fraction(0.1)
    assert counted_sum_up([(0.1, 10)]) == math.nextafter(1.0, 2.0)  # one rounding: the float just above
    remaining = 1.0 - total  # a budget minus an upper bound: a lower bound, rounded down
    assert remaining.kind == "lower" and float(remaining) < 0.0


def test_operations_and_their_kinds():
    up_, lo_ = Estimate(2.0, kind="upper"), Estimate(1.0, kind="lower")
    assert (up_ + 1).kind == (up_ * 3).kind == (up_ / 2).kind == "upper"
    assert (1 - up_).kind == (-up_).kind == "lower"
    assert (lo_ + lo_).kind == "lower" and (up_ - lo_).kind == "upper"
    assert (Estimate(1.0, kind="exact") + 1).kind == "interval"
    nothing = up_ - up_  # no bound survives: an estimate with an infinite error, never a bare float
    assert isinstance(nothing, Estimate) and nothing.kind == "numerical" and nothing.error == math.inf
    est = Estimate(1.0, kind="numerical", error=0.1) + up_
    assert est.kind == "numerical" and est.error >= 0.1
    assert (Estimate(math.inf, kind="exact") + 1).kind == "exact"
    assert (up_ / Estimate(0.0, kind="interval", lower=-1.0)).kind == "numerical"  # divisor may be 0
    # documented plain floats
    assert type(abs(up_)) is float and type(up_ ** 2) is float and type(up_ // 1) is float
    assert type(np.float64(up_) + 1) is np.float64 and type(math.fsum([up_])) is float


def test_method_names_do_not_grow_without_bound():
    total = sum([Estimate(0.1, kind="upper", method="spend")] * 1000)
    assert total.method == "spend"
    mixed = Estimate(1.0, kind="upper", method="a" * 100) + Estimate(1.0, kind="upper", method="b" * 100)
    assert len(mixed.method) <= 160


@settings(max_examples=300)
@given(finite, finite, finite, finite, kinds, kinds, st.sampled_from("+-*/"))
def test_results_enclose_every_point_of_the_operands(a, a2, b, b2, ka, kb, op):
    """Interval arithmetic: for any exact values the operands' labels allow, the exact result lies
    within the result's certified bounds (checked with fractions at the corners and inside)."""

    def make(v: float, w: float, kind: str) -> Estimate:
        if kind == "interval":
            return Estimate(max(v, w), kind="interval", lower=min(v, w))
        return Estimate(v, kind=kind)

    x, y = make(a, a2, ka), make(b, b2, kb)
    try:
        result = {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op]
    except ZeroDivisionError:
        return
    assert isinstance(result, Estimate)
    if result.kind == "numerical":
        return
    lo, hi = enclosure(result)

    def points(e: Estimate) -> list[Fraction]:
        l_, h_ = enclosure(e)
        pts = [Fraction(p) for p in (l_, h_) if math.isfinite(p)]
        if len(pts) == 2:
            pts.append((pts[0] + pts[1]) / 2)
        if not pts:
            pts = [Fraction(float(e))]
        if not math.isfinite(l_):  # an upper bound: the exact value may be anything below
            pts += [pts[0] - 1, pts[0] - 1000]
        if not math.isfinite(h_):
            pts += [pts[0] + 1, pts[0] + 1000]
        return pts

    for p in points(x):
        for q in points(y):
            if op == "/" and q == 0:
                continue
            exact = {"+": p + q, "-": p - q, "*": p * q, "/": p / q if q else None}[op]
            assert Fraction(lo) <= exact <= Fraction(hi) if math.isfinite(lo) and math.isfinite(hi) else True
            if math.isfinite(hi):
                assert exact <= Fraction(hi), (x, y, op, result)
            if math.isfinite(lo):
                assert Fraction(lo) <= exact, (x, y, op, result)


@settings(max_examples=200)
@given(st.lists(st.floats(-1e300, 1e300, allow_nan=False), min_size=1, max_size=30))
def test_directed_sums_are_the_nearest_floats_on_their_side(xs):
    exact = sum((Fraction(x) for x in xs), Fraction(0))
    s_up = sum_up(xs)
    assert Fraction(s_up) >= exact and (s_up == -math.inf or Fraction(math.nextafter(s_up, -math.inf)) < exact)
    assert Fraction(up(exact)) >= exact and Fraction(down(exact)) <= exact


@settings(max_examples=200)
@given(st.floats(0.0, 1e300), st.floats(0.0, 1e300))
def test_sqrt_up_is_exact(a, b):
    q = Fraction(a) + Fraction(b)
    r = sqrt_up(q)
    assert Fraction(r) ** 2 >= q and (r == 0.0 or Fraction(math.nextafter(r, 0.0)) ** 2 < q)


def test_counted_sums_do_not_depend_on_grouping():
    v = np.array([0.1, 0.7, 1e-300, 3.3, 0.0625])
    assert np.array_equal(counted_sum_up_array([(v, 16)]), counted_sum_up_array([(v, 1)] * 16))
    got = counted_sum_up_array([(v, 10), (v * 3, 7)])
    for i, x in enumerate(v):
        assert Fraction(float(got[i])) >= 10 * Fraction(float(x)) + 7 * Fraction(float(v[i] * 3))


# ---- value objects around the numbers -------------------------------------------------------------


def test_release_values_interval_and_details_are_read_only():
    from dpkit.mechanisms import Gaussian, Laplace, RandomizedResponse
    from dpkit.random import insecure_seeded

    for release in (
        Laplace(sensitivity=1.0, epsilon=1.0, dimension=3).release([1.0, 2.0, 3.0], rng=insecure_seeded(1)),
        Gaussian(sensitivity=1.0, sigma=2.0).release([1.0], rng=insecure_seeded(2)),
        RandomizedResponse(epsilon=1.0, categories=3).release([0, 1, 2], rng=insecure_seeded(3)),
    ):
        with pytest.raises(ValueError, match="read-only"):
            release.values[0] = 0
        lo, hi = release.interval
        for end in (lo, hi):
            if isinstance(end, np.ndarray) and end.ndim:
                with pytest.raises(ValueError, match="read-only"):
                    end[0] = 0
        with pytest.raises(TypeError):
            release.details["grid"] = 0  # type: ignore[index]
        with pytest.raises(AttributeError):
            release.values = np.zeros(3)  # type: ignore[misc]
        base = release.values.base
        while isinstance(base, np.ndarray):  # no writable array underneath either
            assert not base.flags.writeable
            base = base.base


def test_cached_tables_of_distributions_are_read_only():
    from dpkit.distributions import DiscreteGaussian, Finite

    g = DiscreteGaussian(0, 2.0)
    g.cdf(1.0)
    with pytest.raises(ValueError, match="read-only"):
        g._table[1][0] = 1.0  # the cumulative table behind cdf and quantile
    f = Finite([0.5, 0.5], support=[1.0, 2.0])
    xs, cum = f._sorted()
    with pytest.raises(ValueError, match="read-only"):
        cum[0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        f.probabilities[0] = 1.0
