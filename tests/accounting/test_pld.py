"""Privacy loss distributions: every interval contains the exact value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from dpkit.accounting.pld import Interval, delta_interval, epsilon_interval, pld_from_pair
from dpkit.distributions import Bernoulli, DiscreteLaplace, Finite, Gaussian, Laplace
from dpkit.divergences import hockey_stick
from dpkit.divergences._closed import gaussian_delta


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    return brentq(lambda e: gaussian_delta(mu, e) - delta, -50, 1e5, xtol=1e-13, rtol=1e-15)


@pytest.mark.parametrize("sigma,k", [(1.0, 1), (1.0, 10), (1.0, 100), (1.0, 1000), (5.0, 1000), (5.0, 10000)])
def test_gaussian_k_fold_equals_one_gaussian_with_sigma_over_sqrt_k(sigma, k):
    """k-fold N(0,s^2) vs N(1,s^2) is exactly the pair with mu = sqrt(k)/s: the interval holds it."""
    exact = exact_gaussian_epsilon(math.sqrt(k) / sigma, 1e-5)
    iv = epsilon_interval(Gaussian(0, sigma), Gaussian(1, sigma), k=k, delta=1e-5, symmetric=True)
    assert exact in iv
    assert (iv.upper - exact) / exact <= 1e-4  # the upper bound is tight (issue 4 bar for case (a))


@pytest.mark.parametrize("eps,k", [(0.5, 1), (0.5, 7), (1.0, 20), (0.1, 50)])
def test_randomized_response_k_fold_is_binomial_exact(eps, k):
    """RR's k-fold PLD is binomial; the exact delta is a finite sum (Kairouz, Oh, Viswanath 2015)."""
    P, Q = Bernoulli.randomized_response(eps, truth=1), Bernoulli.randomized_response(eps, truth=0)
    p = math.exp(eps) / (1 + math.exp(eps))
    for e_total in (0.0, 0.3 * k * eps, 0.7 * k * eps):
        j = np.arange(k + 1)
        logc = np.array([math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1) for i in j])
        loss = (2 * j - k) * eps
        pm = np.exp(logc + j * math.log(p) + (k - j) * math.log1p(-p))
        exact = float(np.sum(pm * np.maximum(0.0, -np.expm1(e_total - loss))))
        iv = delta_interval(P, Q, k=k, epsilon=e_total, symmetric=True, grid=1e-4)
        assert iv.lower - 1e-15 <= exact <= iv.upper + 1e-15, (iv, exact)


def test_discrete_laplace_two_fold_matches_product_pmf():
    """2-fold DLap(0,1.3) vs DLap(2,1.3): delta from the composed PLD brackets the product pmf's hockey-stick."""
    t, D = 1.3, 2
    ks = np.arange(-80, 83)
    p1 = np.exp(DiscreteLaplace(0, t).log_density(ks))
    q1 = np.exp(DiscreteLaplace(D, t).log_density(ks))
    P2 = Finite(np.outer(p1, p1).reshape(-1) / np.sum(np.outer(p1, p1)))
    Q2 = Finite(np.outer(q1, q1).reshape(-1) / np.sum(np.outer(q1, q1)))
    for eps in (0.0, 1.0, 2.5):
        exact = float(hockey_stick(P2, Q2, eps))
        iv = delta_interval(DiscreteLaplace(0, t), DiscreteLaplace(D, t), k=2, epsilon=eps, symmetric=True, grid=1e-5)
        assert iv.lower - 1e-12 <= exact <= iv.upper + 1e-12


@pytest.mark.parametrize("eps", [-0.5, 0.0, 0.4, 0.9])
def test_laplace_single_pld_brackets_closed_form(eps):
    P, Q = Laplace(0, 1), Laplace(1, 1)
    exact = float(hockey_stick(P, Q, eps))
    hi = pld_from_pair(P, Q, grid=1e-4).delta(eps)
    lo = pld_from_pair(P, Q, grid=1e-4, pessimistic=False).delta(eps)
    assert lo <= exact <= hi
    assert hi - exact <= 1e-6


def test_laplace_composition_is_monotone_in_the_grid():
    P, Q = Laplace(0, 1), Laplace(1, 1)
    coarse = epsilon_interval(P, Q, k=10, delta=1e-5, grid=1e-2, symmetric=True)
    fine = epsilon_interval(P, Q, k=10, delta=1e-5, grid=1e-4, symmetric=True)
    assert coarse.lower <= fine.lower <= fine.upper <= coarse.upper + 1e-9
    assert fine.upper <= 10.0  # never worse than basic composition of 1-DP


def test_asymmetric_pair_uses_both_directions():
    P, Q = Finite([0.5, 0.5, 0.0]), Finite([0.25, 0.25, 0.5])
    iv = epsilon_interval(P, Q, k=1, delta=0.1, grid=1e-5)
    exact = max(math.log((0.5 - 0.1) / 0.25) if 0.5 - 0.1 > 0 else 0.0, 0.0)
    assert iv.upper >= float(np.log(2.0)) - 1e-9  # P||Q: ratio 2 on the first two points
    assert iv.upper == pytest.approx(max(exact, iv.upper), rel=1e-12)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_k(bad):
    with pytest.raises(ValueError, match="k must be an integer"):
        epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), k=bad, delta=1e-5)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-3, math.nan])
def test_bad_delta(bad):
    with pytest.raises(ValueError, match="delta"):
        epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), k=2, delta=bad)


def test_interval_type():
    with pytest.raises(ValueError):
        Interval(2.0, 1.0)
    assert 1.5 in Interval(1.0, 2.0)


def _mixture_hockey_mpmath(q, sigma, eps, direction):
    import mpmath as mp

    mp.mp.dps = 40
    s = mp.mpf(sigma)
    phi = lambda x, m: mp.exp(-((x - m) ** 2) / (2 * s * s)) / (s * mp.sqrt(2 * mp.pi))  # noqa: E731
    mix = lambda x: q * phi(x, 1) + (1 - q) * phi(x, 0)  # noqa: E731
    if direction == "remove":
        f = lambda x: max(mix(x) - mp.exp(eps) * phi(x, 0), 0)  # noqa: E731
    else:
        f = lambda x: max(phi(x, 0) - mp.exp(eps) * mix(x), 0)  # noqa: E731
    pts = [-40, -10, -3, -1, 0, 0.5, 1, 2, 3, 5, 10, 40]
    # the kink of (.)_+ where the two densities cross, so quadrature keeps its digits
    ratio = (mp.exp(eps) - 1 + q) / q if direction == "remove" else (mp.exp(-eps) - 1 + q) / q
    if ratio > 0:
        pts = sorted(pts + [s * s * mp.log(ratio) + mp.mpf(1) / 2])
    return mp.quad(f, pts, maxdegree=12)


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("eps", [0.05, 0.3])
def test_poisson_subsampled_gaussian_single_step_brackets_quadrature(direction, eps):
    from dpkit.accounting.subsampling import pld_poisson_subsampled

    exact = float(_mixture_hockey_mpmath(0.1, 1.0, eps, direction))
    hi = pld_poisson_subsampled(Gaussian(0, 1), Gaussian(1, 1), sampling_rate=0.1, direction=direction, grid=1e-4)
    lo = pld_poisson_subsampled(Gaussian(0, 1), Gaussian(1, 1), sampling_rate=0.1, direction=direction, grid=1e-4,
                                pessimistic=False)
    assert lo.delta(eps) - 1e-12 <= exact <= hi.delta(eps) + 1e-12
    assert hi.delta(eps) - exact <= 1e-6


@pytest.mark.parametrize("alpha", [2, 3, 5])
def test_subsampled_gaussian_rdp_integer_orders_mtz(alpha):
    """Mironov, Talwar, Zhang 2019 (arXiv 1908.10530), integer-order closed form, against mpmath
    quadrature of D_alpha(q N(1, s^2) + (1-q) N(0, s^2) || N(0, s^2))."""
    import mpmath as mp

    q, s = 0.05, 1.3
    mtz = mp.log(mp.fsum(mp.binomial(alpha, j) * (1 - q) ** (alpha - j) * q**j * mp.exp((j * j - j) / (2 * s * s))
                         for j in range(alpha + 1))) / (alpha - 1)
    sm = mp.mpf(s)
    phi = lambda x, m: mp.exp(-((x - m) ** 2) / (2 * sm * sm)) / (sm * mp.sqrt(2 * mp.pi))  # noqa: E731
    integral = mp.quad(
        lambda x: (q * phi(x, 1) + (1 - q) * phi(x, 0)) ** alpha * phi(x, 0) ** (1 - alpha), [-mp.inf, 0, 1, mp.inf]
    )
    assert float(mtz) == pytest.approx(float(mp.log(integral) / (alpha - 1)), rel=1e-12)


def test_subsampled_pld_is_below_rdp_and_interval_is_ordered():
    from dpkit.accounting.subsampling import subsampled_epsilon_interval
    import mpmath as mp

    q, s, k, delta = 0.01, 1.0, 100, 1e-5
    iv = subsampled_epsilon_interval(Gaussian(0, s), Gaussian(1, s), sampling_rate=q, k=k, delta=delta)
    # RDP upper bound (MTZ integer orders, Mironov conversion): the PLD upper end must not exceed it
    best = math.inf
    for a in range(2, 64):
        e_a = k * float(mp.log(mp.fsum(mp.binomial(a, j) * (1 - q) ** (a - j) * q**j * mp.exp((j * j - j) / (2 * s * s))
                                      for j in range(a + 1))) / (a - 1))
        best = min(best, e_a + math.log(1 / delta) / (a - 1))
    assert iv.lower <= iv.upper <= best
