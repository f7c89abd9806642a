"""Issue 11's examples, each as it was reported: cancellation at tiny shifts, round-to-nearest values
labelled "exact", and a root on quadrature estimates labelled "upper". References: the plain closed
forms in mpmath at 100 digits (far more than their cancellation costs at these parameters)."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.distributions import Gaussian, Laplace
from dpkit.divergences import approx_max_divergence, hockey_stick, kl, max_divergence, renyi, total_variation
from dpkit.mechanisms import Gaussian as GaussianMechanism
from dpkit.mechanisms.gaussian import classical_gaussian_sigma


def within_two_ulps_above(value: float, exact: mp.mpf) -> bool:
    f = float(exact)
    if mp.mpf(f) < exact:
        f = math.nextafter(f, math.inf)
    return mp.mpf(value) >= exact and value <= math.nextafter(f, math.inf)


def test_laplace_kl_and_renyi_half_at_a_tiny_shift():
    """Were -1.6e-10 relative (t + expm1(-t) and t - 2 log1p(t/2) cancel six digits at t = 1e-6)."""
    P, Q = Laplace(0.0, 1.0), Laplace(1e-6, 1.0)
    with mp.workdps(100):
        t = mp.mpf(1e-6)
        got_kl, got_half = kl(P, Q), renyi(P, Q, 0.5)
        assert got_kl.kind == got_half.kind == "exact"
        assert within_two_ulps_above(float(got_kl), t + mp.exp(-t) - 1)
        assert within_two_ulps_above(float(got_half), t - 2 * mp.log(1 + t / 2))


def test_gaussian_hockey_stick_and_its_inverse_at_a_tiny_shift():
    """Were -1.4e-10 (two nearly equal erfcx) and +5e-10 labelled "exact, error 0"."""
    P, Q = Gaussian(0.0, 1.0), Gaussian(1e-6, 1.0)
    with mp.workdps(100):
        mu, e = mp.mpf(1e-6), mp.mpf(1e-6)
        delta = mp.ncdf(mu / 2 - e / mu) - mp.exp(e) * mp.ncdf(-mu / 2 - e / mu)
        got = hockey_stick(P, Q, 1e-6)
        assert got.kind == "exact" and within_two_ulps_above(float(got), delta)
        target = 1e-7
        eps = approx_max_divergence(P, Q, target)
        root = mp.findroot(lambda x: mp.ncdf(mu / 2 - x / mu) - mp.exp(x) * mp.ncdf(-mu / 2 - x / mu) - target,
                           float(eps))
        assert eps.kind == "exact" and within_two_ulps_above(float(eps), root)


def test_values_labelled_exact_are_never_below_the_exact_value():
    """Round-to-nearest values one or more ulps low, labelled "exact" (up to 35 ulps in the report)."""
    with mp.workdps(60):
        for b, D in [(1.0, 0.1), (0.3, 2.7), (7.0, 1e-3)]:
            P, Q = Laplace(0.0, b), Laplace(D, b)
            t = mp.mpf(D) / b
            assert within_two_ulps_above(float(total_variation(P, Q)), 1 - mp.exp(-t / 2))
            assert within_two_ulps_above(float(max_divergence(P, Q)), t)
            for eps in (0.0, 0.5 * float(t), -0.3):
                exact = 1 - mp.exp((mp.mpf(eps) - t) / 2) if abs(eps) <= t else 1 - mp.exp(mp.mpf(eps))
                assert within_two_ulps_above(float(hockey_stick(P, Q, eps)), max(exact, mp.mpf(0)))
        exact_sigma = mp.sqrt(2 * mp.log(mp.mpf(1.25) / mp.mpf(1e-5))) / mp.mpf(0.5)
        assert within_two_ulps_above(
            float(classical_gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0)), exact_sigma
        )


def test_a_root_on_quadrature_estimates_is_not_an_upper_bound():
    """Laplace laws of different scales have no closed-form profile: quadrature, and so is the root."""
    P, Q = Laplace(0.0, 1.0), Laplace(0.5, 2.0)
    assert hockey_stick(P, Q, 0.3).kind == "numerical"
    eps = approx_max_divergence(P, Q, 1e-3)
    assert eps.kind == "numerical" and eps.error > 0 and math.isfinite(float(eps))
    exact = max_divergence(P, Q)  # the profile's end: ln(2) + 0.5 / 2 (closed form)
    assert float(eps) <= float(exact)


def test_mechanism_guarantees_keep_the_labels_of_their_divergences():
    m = GaussianMechanism(sensitivity=1.0, epsilon=1.0, delta=1e-5)
    g = m.approx_dp(1e-5)
    assert g.epsilon.kind in ("exact", "upper") and float(g.epsilon) <= 1.0
    assert m.delta(1.0).kind == "upper"  # the float sum of the discrete Gaussian, rounded up
    assert m.profile().epsilon(1e-5).kind in ("exact", "upper")


@pytest.mark.parametrize("alpha", [0.5, 1 + 1e-9, 2.0, 1e6])
def test_renyi_at_extreme_orders_and_shifts(alpha):
    with mp.workdps(400):
        for D in (1e-100, 1e-8, 3.0, 300.0):
            P, Q = Laplace(0.0, 1.0), Laplace(D, 1.0)
            t, a = mp.mpf(D), mp.mpf(alpha)
            if alpha == 0.5:
                exact = t - 2 * mp.log(1 + t / 2)
            else:
                exact = mp.log(a / (2 * a - 1) * mp.exp((a - 1) * t) + (a - 1) / (2 * a - 1) * mp.exp(-a * t)) / (a - 1)
            got = renyi(P, Q, alpha)
            assert got.kind == "exact" and within_two_ulps_above(float(got), exact), (D, alpha, got, exact)
