"""Advanced composition (DR Thm 3.20, Cor 3.21; KOV Thm 3.4) against mpmath and the optimum.

Formulas are re-evaluated here with mpmath at 50 digits; the optimum comes from compose_optimal,
itself checked against brute force in test_composition_optimal. rtol 1e-12 for closed forms.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.composition import (
    advanced_per_step_epsilon,
    compose_advanced,
    compose_basic,
    compose_kov_bound,
    compose_optimal,
)
from dpkit.guarantees import ApproxDP
from test_composition_reference import mp_delta

mp.mp.dps = 50


def mp_drv(epsilon, k, delta_prime, tanh=False):
    """DR Thm 3.20: sqrt(2k ln(1/delta')) eps + k eps (e^eps - 1), or with eps tanh(eps/2)."""
    e = mp.mpf(epsilon)
    mean = e * mp.tanh(e / 2) if tanh else e * mp.expm1(e)
    return mp.sqrt(2 * k * mp.log(1 / mp.mpf(delta_prime))) * e + k * mean


SANITY = [  # docs/notes.md §1 (delta = 0, delta' = 1e-6): basic / DR 3.20 / DR-tanh / optimal
    (0.1, 100, 10.0, 6.3082, 5.7561, 4.7746),
    (0.01, 1000, 10.0, 1.7628, 1.7123, 1.3654),  # notes print 1.3655; 1.365446... (see optimal tests)
    (0.5, 50, 25.0, 34.80, 24.71, 20.30),
]


@pytest.mark.parametrize("epsilon, k, basic, drv, tanh, optimal", SANITY)
def test_sanity_table_rederived(epsilon, k, basic, drv, tanh, optimal):
    places = 4 if drv < 10 else 2
    assert float(compose_basic([(ApproxDP(epsilon=epsilon, delta=0.0), k)]).epsilon) == pytest.approx(basic, rel=1e-12)
    assert round(float(mp_drv(epsilon, k, 1e-6)), places) == drv
    assert round(float(mp_drv(epsilon, k, 1e-6, tanh=True)), places) == tanh
    got_drv = compose_advanced(epsilon, 0.0, k, delta_prime=1e-6)
    got_tanh = compose_advanced(epsilon, 0.0, k, delta_prime=1e-6, variant="tanh")
    assert float(got_drv.epsilon) == pytest.approx(min(basic, float(mp_drv(epsilon, k, 1e-6))), rel=1e-12)
    assert float(got_tanh.epsilon) == pytest.approx(float(mp_drv(epsilon, k, 1e-6, tanh=True)), rel=1e-12)
    assert round(float(compose_optimal(epsilon, 0.0, k, delta_total=1e-6).epsilon), places) == optimal
    # the advanced bound states k delta + delta'; when basic composition wins it states its own k delta
    # (here 0), tighter than the delta' it does not need (issue 11)
    for got, advanced in (
        (got_drv, float(mp_drv(epsilon, k, 1e-6))),
        (got_tanh, float(mp_drv(epsilon, k, 1e-6, tanh=True))),
    ):
        assert float(got.delta) == (pytest.approx(1e-6, rel=1e-15) if advanced < basic else 0.0)


def test_thm_3_20_worse_than_basic_reports_basic():
    g = compose_advanced(0.5, 0.0, 50, delta_prime=1e-6)
    assert float(g.epsilon) == 25.0 and g.epsilon.method.startswith("basic k*eps")
    assert g.epsilon.kind == "upper"
    h = compose_advanced(0.1, 0.0, 100, delta_prime=1e-6)
    assert h.epsilon.method == "DRV Thm 3.20 (DR 2014)"


def test_delta_total_is_k_delta_plus_delta_prime():
    g = compose_advanced(0.02, 1e-7, 3000, delta_prime=1e-5)  # the advanced bound wins here
    assert not g.epsilon.method.startswith("basic")
    assert float(g.delta) == pytest.approx(3000 * 1e-7 + 1e-5, rel=1e-15) and g.delta.kind == "upper"
    b = compose_advanced(0.2, 1e-7, 30, delta_prime=1e-5)  # basic k*eps wins: its own delta k*delta (issue 11)
    assert b.epsilon.method.startswith("basic") and float(b.delta) == pytest.approx(30 * 1e-7, rel=1e-15)
    with pytest.raises(ValueError, match=r"k\*delta \+ delta_prime = .* > 1"):
        compose_advanced(0.2, 0.1, 30, delta_prime=1e-5)


def test_basic_fallback_reports_basic_delta_regression():
    """Issue 11: ten spends of (0.5, 1e-6) with delta' = 1e-5 give (5.0, 1e-5), not (5.0, 2e-5)."""
    g = compose_advanced(0.5, 1e-6, 10, delta_prime=1e-5)
    assert g.epsilon.method.startswith("basic k*eps")
    assert float(g.epsilon) == 5.0 and float(g.delta) == pytest.approx(1e-5, rel=1e-15)
    assert float(g.delta) >= Fraction(1e-6) * 10  # the exact k*delta, rounded up
    h = compose_advanced(0.05, 1e-6, 1000, delta_prime=1e-5)  # the advanced bound wins: k delta + delta'
    assert not h.epsilon.method.startswith("basic") and float(h.delta) >= Fraction(1e-6) * 1000 + Fraction(1e-5)


def test_advanced_values_are_rounded_up():
    for eps, k, dp in [(0.1, 100, 1e-6), (0.01, 1000, 1e-9), (1e-8, 10**6, 1e-300), (0.3, 7, 0.5)]:
        for variant, tanh in (("drv", False), ("tanh", True)):
            got = compose_advanced(eps, 0.0, k, delta_prime=dp, variant=variant)
            with mp.workdps(60):
                exact = min(mp_drv(eps, k, dp, tanh=tanh), k * mp.mpf(eps))
                assert mp.mpf(float(got.epsilon)) >= exact
                assert float(got.epsilon) <= math.nextafter(math.nextafter(float(exact), math.inf), math.inf)
        per_step = advanced_per_step_epsilon(0.5, k, dp)
        with mp.workdps(60):
            assert mp.mpf(float(per_step)) <= mp.mpf(0.5) / (2 * mp.sqrt(2 * k * mp.log(1 / mp.mpf(dp))))


def test_large_epsilon_does_not_overflow():
    g = compose_advanced(800.0, 0.0, 3, delta_prime=1e-6)  # e^800 overflows; basic wins
    assert float(g.epsilon) == 2400.0


@pytest.mark.parametrize("k", [1, 2, 10, 100, 10_000])
@pytest.mark.parametrize("delta_prime", [1e-12, 1e-6, 0.1, 0.6, math.exp(-0.5)])
@pytest.mark.parametrize("total", [0.01, 0.5, 0.99])
def test_cor_3_21_meets_its_target_when_delta_prime_is_at_most_exp_minus_half(k, delta_prime, total):
    eps = advanced_per_step_epsilon(total, k, delta_prime)
    assert eps.kind == "lower"
    assert float(eps) == pytest.approx(total / (2 * math.sqrt(2 * k * math.log(1 / delta_prime))), rel=1e-15)
    assert mp_drv(float(eps), k, delta_prime) <= total  # the raw Thm 3.20 value, no min with basic


def test_cor_3_21_fails_for_delta_prime_near_one_hence_the_check():
    """k = 1, delta' = 0.9, eps' = 0.5: the corollary's eps composes to 0.644 > 0.5."""
    eps = 0.5 / (2 * math.sqrt(2 * math.log(1 / 0.9)))  # Cor 3.21 as printed
    assert round(eps, 4) == 0.5446
    assert round(float(mp_drv(eps, 1, 0.9)), 3) == 0.644  # > 0.5: the corollary is false here
    assert float(compose_advanced(eps, 0.0, 1, delta_prime=0.9).epsilon) > 0.5  # even min with basic
    with pytest.raises(ValueError, match=r"delta_prime must be <= exp\(-1/2\)"):
        advanced_per_step_epsilon(0.5, 1, 0.9)


KOV_GRID = [(e, k, d, dt) for e in [0.01, 0.1, 0.5, 1.0, 4.0] for k in [1, 3, 10, 100]
            for d in [0.0, 1e-3] for dt in [1e-8, 1e-4, 0.1, 0.9]]


@pytest.mark.parametrize("epsilon, k, delta, delta_prime", KOV_GRID)
def test_kov_closed_form_is_above_the_optimum(epsilon, k, delta, delta_prime):
    g = compose_kov_bound(epsilon, delta, k, delta_prime=delta_prime)
    total = 1 - (1 - delta) ** k * (1 - delta_prime)
    assert float(g.delta) == pytest.approx(total, rel=1e-13)
    optimum = compose_optimal(epsilon, delta, k, delta_total=float(g.delta)).epsilon
    assert float(g.epsilon) >= float(optimum) - optimum.error
    assert mp_delta(epsilon, delta, k, float(g.epsilon)) <= float(g.delta) * (1 + 1e-12)


def test_kov_third_term_is_the_tanh_variant():
    g = compose_kov_bound(0.1, 0.0, 100, delta_prime=1e-6)
    assert g.epsilon.method == "KOV Thm 3.4, third term"
    assert float(g.epsilon) == pytest.approx(
        float(compose_advanced(0.1, 0.0, 100, delta_prime=1e-6, variant="tanh").epsilon), rel=1e-14
    )


@settings(max_examples=60, deadline=None)
@given(
    epsilon=st.floats(1e-3, 3.0),
    k=st.integers(1, 400),
    delta=st.sampled_from([0.0, 1e-9, 1e-5]),
    delta_prime=st.floats(1e-12, 0.5),
)
def test_basic_at_least_advanced_at_least_optimal(epsilon, k, delta, delta_prime):
    basic = compose_basic([(ApproxDP(epsilon=epsilon, delta=delta), k)])
    drv = compose_advanced(epsilon, delta, k, delta_prime=delta_prime)
    tanh = compose_advanced(epsilon, delta, k, delta_prime=delta_prime, variant="tanh")
    slack = 1e-12 * k * epsilon
    assert float(basic.epsilon) + slack >= float(drv.epsilon) >= float(tanh.epsilon) - slack
    # each guarantee is at least the optimum at its own delta (a basic fallback states k*delta, not
    # k*delta + delta', so the two variants may state different deltas)
    for g in (drv, tanh):
        optimum = compose_optimal(epsilon, delta, k, delta_total=float(g.delta)).epsilon
        assert float(g.epsilon) + slack >= float(optimum) - optimum.error
    kov = compose_kov_bound(epsilon, delta, k, delta_prime=delta_prime)
    assert float(kov.epsilon) + slack >= float(compose_optimal(epsilon, delta, k, delta_total=float(kov.delta)).epsilon)
