"""dpkit._math.bisection: the one bisection, its stated side and tolerance, and its privacy callers.

Property tests: for a threshold predicate ``x >= b`` on random brackets, the returned point is on the
stated side of ``b`` (the upper end satisfies the predicate, the lower end does not) and within the stated
tolerance of it. Then the privacy-relevant callers, which now go through it, are checked to land on
their safe side: a calibrated sigma meets its delta, an epsilon upper bound meets its delta, an epsilon
chosen to fit a zCDP share costs at most that share.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._math.bisection import bisect_bracket, bisect_monotone
from dpkit.errors import InvalidArgumentError

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
rtols = st.sampled_from([0.0, 1e-15, 1e-13, 1e-12, 1e-9, 1e-6])
atols = st.sampled_from([0.0, 1e-13, 1e-6])


@st.composite
def brackets(draw: st.DrawFn) -> tuple[float, float, float]:
    """(lo, boundary, hi) with lo < boundary <= hi."""
    a, b, c = sorted(draw(st.lists(finite, min_size=3, max_size=3, unique=True)))
    return a, b, c


@settings(max_examples=300, deadline=None)
@given(brackets(), rtols, atols, st.sampled_from(["upper", "lower"]))
def test_returned_point_is_on_the_stated_side_and_within_tolerance(
    br: tuple[float, float, float], rtol: float, atol: float, side: str
) -> None:
    lo, b, hi = br
    calls: list[float] = []

    def pred(x: float) -> bool:
        calls.append(x)
        return x >= b

    b_lo, b_hi = bisect_bracket(pred, lo, hi, rtol=rtol, atol=atol)
    assert lo <= b_lo < b <= b_hi <= hi
    assert not pred(b_lo) and pred(b_hi)  # the invariant: each end is on its side
    # within tolerance, or adjacent floats (the tolerance is finer than the float grid)
    assert b_hi - b_lo <= max(atol, rtol * abs(b_hi)) or math.nextafter(b_lo, math.inf) == b_hi
    assert all(lo < x < hi for x in calls[:-2])  # the ends themselves are never evaluated
    point = bisect_monotone(lambda x: x >= b, lo, hi, side=side, rtol=rtol, atol=atol)  # type: ignore[arg-type]
    assert (point >= b) if side == "upper" else (point < b)
    assert abs(point - b) <= max(atol, rtol * abs(b_hi)) or math.nextafter(b_lo, math.inf) == b_hi


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=1e-3, max_value=1e3), st.floats(min_value=1.0001, max_value=1e6),
       st.sampled_from([1e-12, 1e-6]))
def test_log_midpoint_keeps_the_side_and_tolerance(lo: float, ratio: float, rtol: float) -> None:
    hi = lo * ratio * 2.0
    b = lo * ratio
    point = bisect_monotone(lambda x: x >= b, lo, hi, side="upper", rtol=rtol, midpoint="log")
    assert b <= point <= b + rtol * point + 1e-300


@given(st.integers(min_value=1, max_value=30))
def test_max_iter_bounds_the_evaluations(n: int) -> None:
    calls: list[float] = []
    def pred(x: float) -> bool:
        calls.append(x)
        return x >= 1.0 / 3.0

    bisect_bracket(pred, 0.0, 1.0, rtol=0.0, max_iter=n)
    assert len(calls) == n


def test_unknown_side_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        bisect_monotone(lambda x: x >= 0.5, 0.0, 1.0, side="middle", rtol=0.0)  # type: ignore[arg-type]


# --- privacy callers land on their safe side ------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=0.05, max_value=5.0), st.floats(min_value=1e-10, max_value=1e-2))
def test_calibrated_gaussian_sigma_meets_its_delta(epsilon: float, delta: float) -> None:
    from dpkit.divergences.pairs import gaussian_delta
    from dpkit.mechanisms.gaussian import analytic_gaussian_sigma

    sigma = analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0)
    assert gaussian_delta(1.0 / sigma, epsilon) <= delta  # more noise than the boundary, never less
    assert gaussian_delta(1.0 / (sigma * (1.0 - 1e-9)), epsilon) > delta or sigma < 1e-6  # and tight


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=0.01, max_value=10.0), st.floats(min_value=1e-12, max_value=0.5))
def test_epsilon_upper_bounds_meet_their_delta(mu: float, delta: float) -> None:
    from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval, log_delta_bounds
    from dpkit.guarantees._numerics import gaussian_epsilon_upper, gaussian_log_delta, invert_profile_upper

    upper, _ = gaussian_epsilon_upper(delta, mu)
    log_d, err = gaussian_log_delta(np.array([upper]), mu)
    assert log_d[0] + err[0] <= math.log(delta)
    lower, upper2 = gaussian_epsilon_interval(mu, delta)
    assert lower <= upper2 and log_delta_bounds(mu, upper2)[1] <= math.log(delta)

    def profile(e: float) -> float:
        return min(1.0, math.exp(-e / mu))

    eps, _ = invert_profile_upper(profile, delta)
    assert profile(eps) <= delta


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 3.0])
@pytest.mark.parametrize("count", [1, 3])
def test_epsilon_for_a_zcdp_share_costs_at_most_the_share(rho: float, count: int) -> None:
    from dpkit.mechanisms import Laplace
    from dpkit.query._noise import epsilon_for_rho, mechanism_item

    eps = epsilon_for_rho(rho, lambda e: Laplace(sensitivity=1.0, epsilon=e), count=count)
    assert count * mechanism_item(Laplace(sensitivity=1.0, epsilon=eps)).rho <= rho  # the lower (safe) side


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-9])
def test_pessimistic_pld_epsilon_meets_its_delta(delta: float) -> None:
    from dpkit.accounting.pld import pld_from_pair
    from dpkit.distributions import DiscreteLaplace

    pld = pld_from_pair(DiscreteLaplace(0, 1.3), DiscreteLaplace(2, 1.3), grid=1e-3)
    pld = pld.compose(pld)
    eps = float(pld.epsilon(delta))
    assert float(pld.delta(eps)) <= delta  # the upper end: a pessimistic delta at it meets the target


@pytest.mark.parametrize("k, delta_total", [(5, 1e-5), (30, 1e-4)])
def test_optimal_composition_epsilon_meets_delta_total(k: int, delta_total: float) -> None:
    from dpkit.accounting.composition import compose_optimal

    eps = float(compose_optimal(0.1, 1e-7, k, delta_total=delta_total).epsilon)
    assert float(compose_optimal(0.1, 1e-7, k, epsilon_total=eps).delta) <= delta_total


def test_the_accountants_largest_pure_spend_is_admitted() -> None:
    from dpkit.accounting import Accountant
    from dpkit.guarantees import ApproxDP, PureDP

    acc = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    acc.admit(PureDP(0.3))
    remaining = acc.remaining()
    assert isinstance(remaining, ApproxDP)
    left = float(remaining.epsilon)
    assert left > 0.0
    acc.check(PureDP(left))  # the lower side of "refused": the reported epsilon is admitted


# --- the accounting callers moved onto it later (issue 13 leftovers) ---------------------------------

@pytest.mark.parametrize("kind, mu, q, k", [("remove", 1.0, 1.0, 10), ("remove", 0.8, 0.01, 1000),
                                            ("symmetric", 0.7, 0.05, 100)])
@pytest.mark.parametrize("delta", [1e-3, 1e-8])
def test_tilted_root_is_on_the_side_where_the_approximate_delta_meets_the_target(
    kind: str, mu: float, q: float, k: int, delta: float
) -> None:
    from dpkit.accounting._tilted_laws import LawSpec
    from dpkit.accounting._tilted_solve import _approx_root, compose_parts

    ld = math.log(delta)
    for t in compose_parts([(LawSpec(kind, mu, q), k)], log_delta=ld).values():
        e0 = _approx_root(t, ld)
        lo_w, hi_w = t.window
        assert max(0.0, lo_w) < e0 < hi_w  # found inside the window, so the side below is the bisection's
        assert t.approx_log_delta(e0) <= ld  # the upper end: where _step_out starts certifying an upper bound
        assert t.approx_log_delta(e0 * (1.0 - 1e-12)) > ld  # and tight (1e-14 relative, plus slack)


@pytest.mark.parametrize("kind", ["remove", "symmetric"])
@pytest.mark.parametrize("mu, q", [(0.3, 1.0), (1.0, 0.2), (3.0, 1e-3)])
@pytest.mark.parametrize("lam_lo, lam_hi", [(0.0, 1.0), (2.0, 40.0)])
def test_tilted_cut_keeps_the_left_out_tail_within_its_budget(
    kind: str, mu: float, q: float, lam_lo: float, lam_hi: float
) -> None:
    from dpkit.accounting._tilted_laws import LawSpec

    spec = LawSpec(kind, mu, q)
    budget = -40.0
    x_h = spec.cut_remove(lam_lo, lam_hi, budget)
    # the upper side: the tail bound beyond the cut meets the budget at both ends of the tilt range
    assert spec.log_remove_tail(lam_hi, x_h) <= budget and spec.log_remove_tail(lam_lo, x_h) <= budget
    start = mu * mu / 2.0 + lam_lo * mu * mu
    if x_h > start:  # found by the search: within 1/32 of a step (mu) of the boundary
        x_in = x_h - mu / 32.0 * (1.0 + 1e-9)
        assert spec.log_remove_tail(lam_hi, x_in) > budget or spec.log_remove_tail(lam_lo, x_in) > budget


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_filter_budgets_are_on_the_side_their_conversion_meets(epsilon: float, delta: float) -> None:
    from dpkit.accounting.filters import _largest, gdp_budget, zcdp_budget
    from dpkit.accounting.gaussian_profile import gaussian_delta_interval
    from dpkit.accounting.state import zcdp_epsilon

    def ok(rho: float) -> bool:
        return zcdp_epsilon(rho, delta) <= epsilon

    rho = _largest(ok, max(1.0, epsilon), 1e-12)
    assert ok(rho) and not ok(rho * (1.0 + 2e-12))  # the lower (safe) side of "fails", and tight
    assert zcdp_epsilon(zcdp_budget(epsilon, delta), delta) <= epsilon
    assert gaussian_delta_interval(gdp_budget(epsilon, delta), epsilon)[1] <= delta


@pytest.mark.parametrize("q, steps, delta, epsilon", [(0.01, 1000, 1e-5, 1.0), (0.2, 10, 1e-6, 0.5)])
def test_dpsgd_starting_sigma_meets_the_target_by_rdp(q: float, steps: int, delta: float, epsilon: float) -> None:
    from dpkit.accounting.dpsgd import _bracket_sigma, dpsgd_rdp_epsilon
    from dpkit.accounting.sampled_gaussian import DEFAULT_ORDERS

    def rdp(sig: float) -> float:
        return float(dpsgd_rdp_epsilon(delta=delta, sigma=sig, sampling_rate=q, steps=steps, orders=DEFAULT_ORDERS))

    sigma = _bracket_sigma(rdp, epsilon, 100.0)
    assert rdp(sigma) <= epsilon  # the upper side: this sigma meets the target (an RDP upper bound on epsilon)
    assert rdp(sigma / 1.001) > epsilon  # and is within 1e-3 relative of the smallest that does
