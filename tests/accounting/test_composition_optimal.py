"""Optimal composition (KOV Thm 3.3; Murtagh-Vadhan) against brute force and 50-digit mpmath.

References: test_composition_reference (the k-fold product of the canonical pair through
dpkit.divergences.hockey_stick; mpmath exact binomial sums). rtol 1e-10 throughout unless stated.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.accounting.composition import compose_optimal, compose_optimal_heterogeneous
from dpkit.errors import UnsupportedError
from dpkit.guarantees import ApproxDP, PureDP
from test_composition_reference import brute_delta, mp_corner_delta, mp_delta, mp_heterogeneous_delta

RTOL = 1e-10

SMALL = [(0.5, 0.0, 3), (1.0, 0.0, 5), (0.1, 1e-3, 4), (2.0, 1e-6, 6), (0.01, 0.0, 6)]


@pytest.mark.parametrize("epsilon, delta, k", SMALL)
def test_delta_equals_brute_force_hockey_stick(epsilon, delta, k):
    for eg in [0.0, 0.05, 0.5 * epsilon, epsilon, 1.7 * epsilon, (k - 0.5) * epsilon, k * epsilon, k * epsilon + 1]:
        got = compose_optimal(epsilon, delta, k, epsilon_total=eg).delta
        assert got.kind == "exact"
        assert float(got) == pytest.approx(brute_delta([(epsilon, delta)] * k, eg), rel=RTOL, abs=1e-15)
        exact = mp_delta(epsilon, delta, k, eg)
        assert float(got) - got.error <= exact <= float(got)  # rounded up; the error covers the gap


@pytest.mark.parametrize("epsilon, delta, k", SMALL)
def test_epsilon_is_smallest_meeting_the_target(epsilon, delta, k):
    floor = 1 - (1 - delta) ** k
    for target in [floor + 1e-9, floor + 1e-4, floor + 0.05, 0.3]:
        got = compose_optimal(epsilon, delta, k, delta_total=target).epsilon
        assert got.kind == "exact" and 0 <= got.error < 1e-9
        # meets the target in exact arithmetic (the brute-force sum cancels near the top atom)
        assert mp_delta(epsilon, delta, k, float(got)) <= target
        if got > 1e-9:  # and anything visibly smaller does not
            assert mp_delta(epsilon, delta, k, float(got) - 1e-8) > target


@pytest.mark.parametrize("k", [5, 10, 30])
@pytest.mark.parametrize("epsilon, delta", [(0.3, 0.0), (1.0, 1e-5)])
def test_corners_of_kov_theorem_3_3(epsilon, delta, k):
    """At epsilon_total = (k - 2i) epsilon the delta is Thm 3.3's 1 - (1-delta)^k (1-delta_i)."""
    for i in range(k // 2 + 1):
        ref = mp_corner_delta(epsilon, delta, k, i)
        got = compose_optimal(epsilon, delta, k, epsilon_total=(k - 2 * i) * epsilon).delta
        assert float(got) == pytest.approx(float(ref), rel=RTOL, abs=1e-15)  # at i = 0, 0 rounded up


@pytest.mark.parametrize("epsilon, k, eps_g", [(1.0, 1000, 300.0), (1.0, 1000, 591.08), (1.0, 10000, 5038.0),
                                                (0.01, 10000, 3.0), (0.3, 3000, 40.0), (5.0, 1000, 4000.0)])
def test_no_overflow_large_k_matches_mpmath(epsilon, k, eps_g):
    """dp_accounting's advanced_composition overflows at eps = 1, k = 1000 (e^{k eps}); log space does not."""
    got = compose_optimal(epsilon, 0.0, k, epsilon_total=eps_g).delta
    ref = mp_delta(epsilon, 0.0, k, eps_g)
    assert math.isfinite(got) and got.error < 1e-8 * float(ref)
    assert float(got) - got.error <= float(ref) * (1 + 1e-15)  # the stated error covers the exact value
    assert float(ref) <= float(got) * (1 + 1e-15)  # and the value is not below it
    assert float(got) == pytest.approx(float(ref), rel=1e-8)


@pytest.mark.parametrize("k", [1000, 10000])
def test_epsilon_at_large_k_is_finite_and_brackets_mpmath(k):
    g = compose_optimal(1.0, 0.0, k, delta_total=1e-6)
    assert math.isfinite(g.epsilon) and 0 < g.epsilon < k
    assert mp_delta(1.0, 0.0, k, float(g.epsilon)) <= mp.mpf("1e-6")
    assert mp_delta(1.0, 0.0, k, float(g.epsilon) - g.epsilon.error - 1e-9) > mp.mpf("1e-6")


def test_sanity_values_from_the_notes_rederived():
    """docs/notes.md §1, optimal column (delta = 0, delta_total = 1e-6), re-derived by mpmath.

    The notes print 1.3655 for eps = 0.01, k = 1000; the value is 1.365446..., i.e. 1.3654 to four
    places (the notes rounded 1.36545 up). Checked here to the digits that mpmath confirms.
    """
    for epsilon, k, value in [(0.1, 100, 4.774568), (0.01, 1000, 1.365447), (0.5, 50, 20.301001)]:
        got = compose_optimal(epsilon, 0.0, k, delta_total=1e-6).epsilon
        assert round(float(got), 6) == value
        assert mp_delta(epsilon, 0.0, k, float(got)) <= mp.mpf("1e-6") < mp_delta(epsilon, 0.0, k, float(got) - 1e-9)


def test_pure_composition_limits():
    # delta_total = 0 with pure inputs: exactly k epsilon (randomized response attains it)
    assert float(compose_optimal(0.5, 0.0, 7, delta_total=0.0).epsilon) == 3.5
    # delta_total >= TV of the product: epsilon 0
    assert float(compose_optimal(0.5, 0.0, 7, delta_total=0.99).epsilon) == 0.0
    # epsilon = 0: nothing leaks beyond the deltas
    assert float(compose_optimal(0.0, 1e-3, 7, epsilon_total=0.0).delta) == pytest.approx(
        1 - (1 - 1e-3) ** 7, rel=1e-14
    )


def test_delta_total_below_the_floor_is_refused():
    with pytest.raises(ValueError, match=r"delta_total must be >= 1 - prod\(1 - delta_i\) = 0\.00995"):
        compose_optimal(1.0, 1e-3, 10, delta_total=1e-3)


@pytest.mark.parametrize(
    "pairs",
    [
        [(1.0, 0.0), (0.5, 0.0)],
        [(0.3, 1e-3), (1.2, 0.0), (0.7, 1e-4)],
        [(0.1, 0.0), (0.2, 0.0), (0.4, 0.01), (0.8, 0.0), (1.6, 0.0)],
    ],
)
def test_heterogeneous_equals_brute_force_and_mpmath(pairs):
    guarantees = [ApproxDP(epsilon=e, delta=d) for e, d in pairs]
    total = sum(e for e, _ in pairs)
    for eg in [0.0, 0.1, 0.5, 1.0, total - 0.05, total]:
        got = compose_optimal_heterogeneous(guarantees, epsilon_total=eg).delta
        assert float(got) == pytest.approx(brute_delta(pairs, eg), rel=RTOL, abs=1e-15)
        assert float(got) == pytest.approx(float(mp_heterogeneous_delta(pairs, eg)), rel=RTOL, abs=1e-15)
    target = 1e-3 + (1 - math.prod(1 - d for _, d in pairs))
    eps = compose_optimal_heterogeneous(guarantees, delta_total=target).epsilon
    assert mp_heterogeneous_delta(pairs, float(eps)) <= target * (1 + 1e-12)
    assert mp_heterogeneous_delta(pairs, float(eps) - 1e-8) > target


def test_heterogeneous_with_equal_guarantees_matches_homogeneous_and_counts_group():
    g = ApproxDP(epsilon=0.4, delta=1e-5)
    a = compose_optimal_heterogeneous([(g, 25)], delta_total=1e-3).epsilon  # 26 terms, not 2^25
    b = compose_optimal_heterogeneous([g] * 10 + [(g, 15)], delta_total=1e-3).epsilon
    c = compose_optimal(0.4, 1e-5, 25, delta_total=1e-3).epsilon
    assert float(a) == float(b) == pytest.approx(float(c), rel=1e-12)


def test_heterogeneous_refuses_more_than_20_distinct_epsilons():
    ok = [PureDP(0.01 * (i + 1)) for i in range(20)]
    assert compose_optimal_heterogeneous(ok, delta_total=1e-6).epsilon > 0
    with pytest.raises(UnsupportedError, match=r"#P-complete.*PLD accounting"):
        compose_optimal_heterogeneous(ok + [PureDP(0.5)], delta_total=1e-6)


def test_heterogeneous_floor_regression():
    """Issue 11: (1, 0.1) and (2, 0.2) at delta_total = 0.28 were refused by a message printing a
    floor below 0.28. The exact floor 1 - 0.9 * 0.8 (of the floats) is 0.27999999999999994 < 0.28, so
    the target is met; below the floor the message prints a number above the refused target."""
    gs = [ApproxDP(epsilon=1.0, delta=0.1), ApproxDP(epsilon=2.0, delta=0.2)]
    g = compose_optimal_heterogeneous(gs, delta_total=0.28)
    assert float(g.epsilon) == 3.0 and g.epsilon.kind == "exact"
    assert mp_heterogeneous_delta([(1.0, 0.1), (2.0, 0.2)], float(g.epsilon)) <= mp.mpf(0.28)
    below = math.nextafter(0.28, 0.0)
    while float(1 - mp.mpf(0.9) * mp.mpf(0.8)) <= below:
        below = math.nextafter(below, 0.0)
    with pytest.raises(ValueError, match="delta_total must be >=") as info:
        compose_optimal_heterogeneous(gs, delta_total=below)
    printed = float(str(info.value).split(" = ")[1].split(" ")[0])
    assert printed > below and mp.mpf(printed) >= 1 - mp.mpf(0.9) * mp.mpf(0.8)


@pytest.mark.parametrize("epsilon, delta, k", SMALL + [(0.1, 0.0, 100), (0.7, 1e-7, 40)])
def test_small_tables_are_exact_to_two_ulps(epsilon, delta, k):
    """Tables of at most 512 atoms are summed at 160 bits: "exact" means within two ulps, never below."""
    with mp.workdps(60):
        for eg in [0.0, 0.3 * epsilon, epsilon, 0.5 * k * epsilon]:
            got = compose_optimal(epsilon, delta, k, epsilon_total=eg).delta
            ref = mp_delta(epsilon, delta, k, eg)
            assert got.kind == "exact" and mp.mpf(float(got)) >= ref
            assert float(got) <= math.nextafter(math.nextafter(float(ref), 2.0), 2.0)
        floor = 1 - (1 - mp.mpf(delta)) ** k
        for target in [float(floor) * 1.5 + 1e-9, 1e-3 + float(floor), 0.2]:
            got = compose_optimal(epsilon, delta, k, delta_total=target).epsilon
            assert got.kind == "exact" and mp_delta(epsilon, delta, k, float(got)) <= target
            if float(got) > 0:
                before = math.nextafter(math.nextafter(float(got), 0.0), 0.0)
                assert mp_delta(epsilon, delta, k, before) > target  # two floats down fails


def test_large_tables_are_certified_intervals():
    with mp.workdps(60):
        got = compose_optimal(0.1, 0.0, 1000, delta_total=1e-6).epsilon
        assert got.kind == "interval" and got.lower <= float(got)
        assert mp_delta(0.1, 0.0, 1000, float(got)) <= mp.mpf(1e-6) < mp_delta(0.1, 0.0, 1000, got.lower)
        d = compose_optimal(0.1, 0.0, 1000, epsilon_total=5.0).delta
        assert d.kind == "interval" and d.lower <= mp_delta(0.1, 0.0, 1000, 5.0) <= float(d)
