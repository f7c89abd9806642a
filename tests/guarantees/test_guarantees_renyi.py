"""Rényi DP and zCDP -> (epsilon, delta): CKS vs Mironov vs exact, checked against mpmath.

Soundness reference: the exact epsilon of the Gaussian pair (mpmath bisection of DRS Cor 2.13) is
a lower bound for any valid conversion of its Rényi curve alpha mu^2/2 or of (mu^2/2)-zCDP.
Tightness reference: the CKS objective minimised over alpha by golden-section search at 50 digits.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.errors import UnsupportedError
from dpkit.guarantees import (
    GaussianDP,
    RenyiDP,
    ZCDP,
    gdp_to_rdp,
    rdp_to_approx_dp,
    rdp_to_profile,
    zcdp_to_approx_dp,
    zcdp_to_profile,
    zcdp_to_rdp,
)
from guarantees_reference import cks_epsilon, gdp_epsilon, minimise

CASES = [(mu, delta) for mu in (0.05, 0.5, 1.0, 3.0, 10.0) for delta in (1e-3, 1e-5, 1e-9, 1e-15)]


def test_reference_values_mu_1_delta_1e5() -> None:
    """mu = 1, delta = 1e-5: exact 4.3772 < CKS 4.7284 < Mironov 5.2985 (re-derived here)."""
    exact = gdp_epsilon(1e-5, 1.0)
    cks_ref, _ = minimise(lambda a: cks_epsilon(0.5, 1e-5, a), 1.01, 100)
    mironov_ref = 0.5 + 2 * mp.sqrt(0.5 * mp.log(mp.mpf(10) ** 5))
    assert mp.nstr(exact, 5) == "4.3772"
    assert mp.nstr(cks_ref, 5) == "4.7284"
    assert mp.nstr(mironov_ref, 5) == "5.2985"
    curve = gdp_to_rdp(GaussianDP(1.0))
    cks = rdp_to_approx_dp(curve, delta=1e-5).epsilon
    mironov = rdp_to_approx_dp(curve, delta=1e-5, method="mironov").epsilon
    assert float(cks) == pytest.approx(float(cks_ref), rel=1e-10)
    assert float(mironov) == pytest.approx(float(mironov_ref), rel=1e-10)
    assert float(exact) < cks < mironov


@pytest.mark.parametrize("mu,delta", CASES)
def test_rdp_conversions_are_sound_and_ordered(mu: float, delta: float) -> None:
    curve = gdp_to_rdp(GaussianDP(mu))
    cks = rdp_to_approx_dp(curve, delta=delta)
    mironov = rdp_to_approx_dp(curve, delta=delta, method="mironov")
    assert cks.delta == mironov.delta == delta
    assert cks.epsilon.kind == mironov.epsilon.kind == "upper"
    exact = float(gdp_epsilon(delta, mu))
    assert exact <= cks.epsilon <= mironov.epsilon


@pytest.mark.parametrize("mu,delta", CASES)
def test_zcdp_conversions_are_sound_ordered_and_tight(mu: float, delta: float) -> None:
    rho = mu * mu / 2
    cks = zcdp_to_approx_dp(ZCDP(rho), delta=delta).epsilon
    bs16 = zcdp_to_approx_dp(ZCDP(rho), delta=delta, method="bs16").epsilon
    exact = float(gdp_epsilon(delta, mu))
    assert exact <= cks <= bs16
    # BS16 Prop 1.3 closed form.
    assert float(bs16) == pytest.approx(float(rho + 2 * mp.sqrt(rho * mp.log(1 / mp.mpf(delta)))), rel=1e-14)
    # CKS Cor 13 optimum, by golden-section search at 50 digits around the BS16 order.
    alpha_bs = 1 + math.sqrt(math.log(1 / delta) / rho)
    ref, _ = minimise(lambda a: cks_epsilon(rho, delta, a), 1 + (alpha_bs - 1) / 20, 1 + (alpha_bs - 1) * 20)
    assert float(cks) == pytest.approx(max(0.0, float(ref)), rel=1e-10, abs=1e-14)


def test_mironov_optimised_equals_bs16() -> None:
    """Mironov's conversion of alpha rho, optimised over alpha, is BS16's closed form."""
    for rho, delta in [(0.01, 1e-6), (0.5, 1e-5), (4.0, 1e-10)]:
        mironov = rdp_to_approx_dp(zcdp_to_rdp(ZCDP(rho)), delta=delta, method="mironov").epsilon
        bs16 = zcdp_to_approx_dp(ZCDP(rho), delta=delta, method="bs16").epsilon
        assert float(mironov) == pytest.approx(float(bs16), rel=1e-10)


def test_zcdp_zero_and_tiny_rho() -> None:
    assert zcdp_to_approx_dp(ZCDP(0.0), delta=1e-9).epsilon == 0.0
    tiny = zcdp_to_approx_dp(ZCDP(1e-12), delta=1e-10)
    assert 0.0 < tiny.epsilon <= zcdp_to_approx_dp(ZCDP(1e-12), delta=1e-10, method="bs16").epsilon


def test_finite_orders_minimise_exactly_over_the_given_orders() -> None:
    orders = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    epsilons = [0.3 * a for a in orders]
    rdp = RenyiDP(orders=orders, epsilons=epsilons)
    delta = 1e-6
    for method in ("cks", "mironov"):
        got = rdp_to_approx_dp(rdp, delta=delta, method=method).epsilon
        if method == "cks":
            ref = min(cks_epsilon(0.3, delta, a) for a in orders)
        else:
            ref = min(0.3 * mp.mpf(a) - mp.log(delta) / (mp.mpf(a) - 1) for a in orders)
        assert float(got) == pytest.approx(float(ref), rel=1e-13)
    # A callable curve can use orders in between, so it is never worse.
    callable_curve = rdp_to_approx_dp(zcdp_to_rdp(ZCDP(0.3)), delta=delta).epsilon
    assert callable_curve <= rdp_to_approx_dp(rdp, delta=delta).epsilon


def test_scalar_only_callable_curves_are_supported() -> None:
    scalar_only = RenyiDP(curve=lambda a: 0.5 * float(a) if a < 1e9 else math.inf)
    vectorised = zcdp_to_rdp(ZCDP(0.5))
    got = rdp_to_approx_dp(scalar_only, delta=1e-5).epsilon
    assert float(got) == pytest.approx(float(rdp_to_approx_dp(vectorised, delta=1e-5).epsilon), rel=1e-12)


def test_infinite_orders_are_skipped_and_all_infinite_is_refused() -> None:
    rdp = RenyiDP(orders=[2.0, 3.0], epsilons=[math.inf, 0.5])
    ref = cks_epsilon(0.5 / 3, 1e-5, 3)  # epsilon(3) = 0.5 = 3 * (0.5/3)
    assert float(rdp_to_approx_dp(rdp, delta=1e-5).epsilon) == pytest.approx(float(ref), rel=1e-13)
    with pytest.raises(UnsupportedError, match="no finite epsilon"):
        rdp_to_approx_dp(RenyiDP(orders=[2.0], epsilons=[math.inf]), delta=1e-5)


def test_rdp_profile_and_its_inverse_agree() -> None:
    rdp = gdp_to_rdp(GaussianDP(1.0))
    profile = rdp_to_profile(rdp)
    assert profile.kind == "upper"
    for delta in (1e-3, 1e-8):
        eps = profile.epsilon(delta)
        assert float(eps) == pytest.approx(float(rdp_to_approx_dp(rdp, delta=delta).epsilon), rel=1e-14)
        # the profile at that epsilon is at most delta (up to the order search's tolerance)
        assert float(profile.delta(float(eps))) <= delta * (1 + 1e-6)
    assert profile.epsilon(0.0) == math.inf
    assert profile.epsilon(1.0) == 0.0
    values = profile.delta(np.array([0.0, 1.0, 4.0]))
    assert np.all(np.diff(values) <= 0) and np.all((values >= 0) & (values <= 1))


def test_rdp_profile_is_an_upper_bound_on_the_gaussian_profile() -> None:
    from guarantees_reference import gdp_delta

    for mu in (0.3, 1.0, 4.0):
        rdp_profile = zcdp_to_profile(ZCDP(mu * mu / 2))
        for eps in (0.0, 0.5, 2.0, 10.0):
            assert gdp_delta(eps, mu) <= float(rdp_profile.delta(eps))


@settings(max_examples=50, deadline=None)
@given(r1=st.floats(1e-6, 50.0), r2=st.floats(1e-6, 50.0), delta=st.floats(1e-50, 0.5))
def test_zcdp_conversion_is_monotone_in_rho(r1: float, r2: float, delta: float) -> None:
    lo, hi = sorted((r1, r2))
    for method in ("cks", "bs16"):
        a = zcdp_to_approx_dp(ZCDP(lo), delta=delta, method=method).epsilon
        b = zcdp_to_approx_dp(ZCDP(hi), delta=delta, method=method).epsilon
        assert a <= b * (1 + 1e-12) + 1e-15  # tolerance: the optimiser's, never soundness


@settings(max_examples=50, deadline=None)
@given(rho=st.floats(1e-6, 50.0), d1=st.floats(1e-50, 0.9), d2=st.floats(1e-50, 0.9))
def test_zcdp_conversion_is_monotone_in_delta(rho: float, d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    for method in ("cks", "bs16"):
        a = zcdp_to_approx_dp(ZCDP(rho), delta=hi, method=method).epsilon
        b = zcdp_to_approx_dp(ZCDP(rho), delta=lo, method=method).epsilon
        assert a <= b * (1 + 1e-12) + 1e-15
        assert zcdp_to_approx_dp(ZCDP(rho), delta=lo).epsilon <= zcdp_to_approx_dp(
            ZCDP(rho), delta=lo, method="bs16"
        ).epsilon


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.05, 20.0), delta=st.floats(1e-30, 0.5))
def test_cks_never_below_exact_gaussian(mu: float, delta: float) -> None:
    exact = float(gdp_epsilon(delta, mu))
    assert exact <= zcdp_to_approx_dp(ZCDP(mu * mu / 2), delta=delta).epsilon
    assert exact <= rdp_to_approx_dp(gdp_to_rdp(GaussianDP(mu)), delta=delta).epsilon


def test_extreme_parameters_stay_finite_and_sound() -> None:
    huge = zcdp_to_approx_dp(ZCDP(1e300), delta=1e-5).epsilon
    assert 1e300 <= huge <= zcdp_to_approx_dp(ZCDP(1e300), delta=1e-5, method="bs16").epsilon
    profile = rdp_to_profile(RenyiDP(orders=[64.0], epsilons=[100.0]))
    # e^{63 (100 - 1000)} / 64 ... is positive: rounded up it is the smallest subnormal, never 0 (issue 11)
    np.testing.assert_array_equal(profile.delta(np.array([0.0, 1000.0])), [1.0, 5e-324])


def test_zcdp_profile_at_tiny_rho_searches_past_any_fixed_grid_regression() -> None:
    """Issue 11: ZCDP(5e-30).delta(1e-13) was 3.7e-11 (orders searched only up to alpha - 1 = 1e10);
    the CKS bound, minimised over alpha in log space at 50 digits, is 2.62e-234."""
    rho, eps = mp.mpf(5e-30), mp.mpf(1e-13)

    def log_delta(t: mp.mpf) -> mp.mpf:  # t = ln(alpha - 1)
        a = 1 + mp.exp(t)
        return (a - 1) * (a * rho - eps) + (a - 1) * mp.log1p(-1 / a) - mp.log(a)

    with mp.workdps(50):
        t_best = mp.findroot(lambda t: mp.diff(log_delta, t), mp.log(float((eps + rho) / (2 * rho))))
        exact = mp.exp(log_delta(t_best))
    got = zcdp_to_profile(ZCDP(5e-30)).delta(1e-13)
    assert got.kind == "upper" and mp.mpf(float(got)) >= exact
    assert float(got) == pytest.approx(float(exact), rel=1e-9)
    assert 2.6e-234 < float(got) < 2.7e-234
