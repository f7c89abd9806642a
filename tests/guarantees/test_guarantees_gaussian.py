"""Gaussian DP: the exact profile and its inverse against mpmath (50 digits), and GDP -> zCDP/RDP.

Reference: guarantees_reference.gdp_delta (mpmath.ncdf, DRS 2019 Cor 2.13). rtol 1e-10 for the
profile on the grid the issue names (mu in {0.01, 1, 10, 1000}, eps up to 1e3 while delta > 1e-300);
for mu = 1e-3 the two terms of the profile nearly cancel and dpkit documents ~1e-11, checked at 1e-10.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.guarantees import (
    GaussianDP,
    ZCDP,
    gdp_to_approx_dp,
    gdp_to_profile,
    gdp_to_rdp,
    gdp_to_zcdp,
)
from guarantees_reference import gdp_delta, gdp_epsilon

EPSILONS = np.concatenate([[0.0], np.logspace(-6, 3, 91)])


@pytest.mark.parametrize("mu", [0.001, 0.01, 1.0, 10.0, 1000.0])
def test_profile_matches_mpmath(mu: float) -> None:
    profile = gdp_to_profile(GaussianDP(mu))
    got = profile.delta(EPSILONS)
    checked = 0
    for eps, value in zip(EPSILONS, got):
        ref = gdp_delta(eps, mu)
        if ref < mp.mpf("1e-300"):
            assert value <= 1e-299  # underflows with the true value, never above it
            continue
        assert abs(mp.mpf(float(value)) - ref) <= 1e-10 * ref, (mu, eps, value, ref)
        checked += 1
    assert checked >= 10


def test_profile_scalar_is_exact_estimate() -> None:
    value = gdp_to_profile(GaussianDP(1.0)).delta(1.0)
    assert value.kind == "exact"
    assert float(value) == pytest.approx(float(gdp_delta(1.0, 1.0)), rel=1e-12)


def test_profile_at_zero_is_erf() -> None:
    # delta(0) = Phi(mu/2) - Phi(-mu/2) = erf(mu / (2 sqrt 2)).
    for mu in (0.01, 1.0, 5.0):
        assert float(gdp_to_profile(GaussianDP(mu)).delta(0.0)) == pytest.approx(
            math.erf(mu / (2 * math.sqrt(2))), rel=1e-13
        )


@pytest.mark.parametrize("mu", [0.001, 0.01, 1.0, 10.0, 1000.0])
@pytest.mark.parametrize("delta", [1e-300, 1e-100, 1e-12, 1e-5, 0.1, 0.5])
def test_inverse_never_understates_and_is_tight(mu: float, delta: float) -> None:
    got = gdp_to_profile(GaussianDP(mu)).epsilon(delta)
    assert got.kind == "exact"  # issue 11: the first float meeting delta at 160 bits (was "upper", 1e-10)
    assert gdp_delta(float(got), mu) <= delta  # valid: the true delta at the reported eps
    exact = gdp_epsilon(delta, mu)
    assert mp.mpf(float(got)) >= exact
    assert float(got) - float(exact) <= 1e-10 * max(1.0, float(exact))
    if float(got) > 0:  # within two ulps: two floats down no longer meets delta
        assert gdp_delta(math.nextafter(math.nextafter(float(got), 0.0), 0.0), mu) > delta


def test_inverse_round_trip() -> None:
    profile = gdp_to_profile(GaussianDP(2.0))
    for eps in (0.5, 3.0, 30.0):
        delta = float(profile.delta(eps))
        back = profile.epsilon(delta)
        assert float(back) == pytest.approx(eps, rel=1e-10)


def test_inverse_edges() -> None:
    profile = gdp_to_profile(GaussianDP(1.0))
    assert profile.epsilon(0.0) == math.inf
    assert profile.epsilon(1.0) == 0.0
    assert profile.epsilon(0.4) == 0.0  # delta(0) = erf(1/(2 sqrt 2)) = 0.3829


def test_gdp_to_approx_dp_reference_value() -> None:
    # mu = 1, delta = 1e-5: exact eps = 4.37717809568122... (mpmath bisection, 50 digits).
    result = gdp_to_approx_dp(GaussianDP(1.0), delta=1e-5)
    assert result.delta == 1e-5
    assert result.epsilon.kind == "exact"  # within two ulps, never below (was "upper")
    assert float(result.epsilon) == pytest.approx(float(gdp_epsilon(1e-5, 1.0)), rel=1e-12)
    assert float(result.epsilon) == pytest.approx(4.3771780956812, rel=1e-12)


def test_gdp_to_zcdp_and_rdp() -> None:
    assert gdp_to_zcdp(GaussianDP(3.0)) == ZCDP(4.5)
    assert gdp_to_zcdp(GaussianDP(3.0)).rho.kind == "exact"
    curve = gdp_to_rdp(GaussianDP(3.0))
    np.testing.assert_allclose(curve.epsilon(np.array([1.5, 2.0, 10.0])), [6.75, 9.0, 45.0], rtol=1e-15)


def test_gdp_rdp_is_gaussian_renyi_divergence() -> None:
    # D_alpha(N(0,1) || N(mu,1)) by mpmath quadrature equals alpha mu^2 / 2.
    mu, alpha = 1.3, 2.5
    integrand = lambda x: mp.npdf(x, 0, 1) ** alpha * mp.npdf(x, mu, 1) ** (1 - alpha)  # noqa: E731
    ref = mp.log(mp.quad(integrand, [-mp.inf, 0, mu, mp.inf])) / (alpha - 1)
    assert float(gdp_to_rdp(GaussianDP(mu)).epsilon(alpha)) == pytest.approx(float(ref), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    mu=st.floats(0.05, 50.0),
    d1=st.floats(1e-200, 0.99),
    d2=st.floats(1e-200, 0.99),
)
def test_inverse_is_monotone_in_delta(mu: float, d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    profile = gdp_to_profile(GaussianDP(mu))
    # monotone up to the bisection's bracket (1e-13 relative)
    assert profile.epsilon(hi) <= profile.epsilon(lo) * (1 + 1e-12) + 1e-300


@settings(max_examples=60, deadline=None)
@given(mu1=st.floats(0.05, 50.0), mu2=st.floats(0.05, 50.0), delta=st.floats(1e-100, 0.3))
def test_epsilon_is_monotone_in_mu(mu1: float, mu2: float, delta: float) -> None:
    small, large = sorted((mu1, mu2))
    a = gdp_to_approx_dp(GaussianDP(small), delta=delta).epsilon
    b = gdp_to_approx_dp(GaussianDP(large), delta=delta).epsilon
    assert a <= b * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(0.01, 100.0), e1=st.floats(0.0, 500.0), e2=st.floats(0.0, 500.0))
def test_profile_is_non_increasing(mu: float, e1: float, e2: float) -> None:
    lo, hi = sorted((e1, e2))
    d = gdp_to_profile(GaussianDP(mu)).delta(np.array([lo, hi]))
    assert d[1] <= d[0] * (1 + 1e-12)
