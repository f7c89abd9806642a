"""Laplace and Gaussian mechanisms: calibration, guarantees from the pair, floating-point safety."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpkit.divergences import approx_max_divergence
from dpkit.errors import UnsupportedError
from dpkit.mechanisms import (
    DiscreteGaussianMechanism,
    Gaussian,
    Geometric,
    Laplace,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
)
from dpkit.random import insecure_seeded

mp.mp.dps = 50


def mp_gaussian_delta(mu, eps):
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(mu / 2 - eps / mu) - mp.exp(eps) * mp.ncdf(-mu / 2 - eps / mu)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-6), (1.0, 1e-5), (5.0, 1e-10), (20.0, 1e-3)])
def test_analytic_sigma_is_smallest_and_never_smaller(eps, delta):
    s = analytic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=1.0)
    assert mp_gaussian_delta(1 / mp.mpf(s), eps) <= delta
    assert mp_gaussian_delta(1 / (mp.mpf(s) * (1 - 1e-9)), eps) > delta


def test_balle_wang_reference_value():
    # Balle & Wang 2018 report sigma ~ 3.73 for epsilon = 1, delta = 1e-5, sensitivity 1
    assert analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0) == pytest.approx(3.7306, abs=1e-4)


def test_classical_refuses_large_epsilon():
    with pytest.raises(ValueError, match="analytic"):
        classical_gaussian_sigma(epsilon=1.5, delta=1e-5, sensitivity=1.0)
    with pytest.raises(ValueError, match="analytic"):
        Gaussian(sensitivity=1.0, epsilon=2.0, delta=1e-5, calibration="classical")
    m = Gaussian(sensitivity=1.0, epsilon=0.5, delta=1e-5, calibration="classical")
    assert float(m.approx_dp(1e-5).epsilon) < 0.5  # classical is valid but loose


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-6), (1.0, 1e-5), (8.0, 1e-9)])
def test_gaussian_mechanism_meets_target_on_its_exact_grid_pair(eps, delta):
    m = Gaussian(sensitivity=2.0, epsilon=eps, delta=delta)
    assert m.delta(eps) <= delta
    got = m.approx_dp(delta)
    assert float(got.epsilon) <= eps
    # the grid costs little noise: within 0.5% of the continuous analytic sigma
    s = analytic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=2.0)
    assert s <= m.sigma <= s * 1.005


def test_gaussian_vector_uses_zcdp_and_is_sound():
    m = Gaussian(sensitivity=1.0, epsilon=1.0, delta=1e-5, dimension=50)
    assert float(m.approx_dp(1e-5).epsilon) <= 1.0
    with pytest.raises(UnsupportedError):
        _ = m.pair
    # l2 calibration: a 1-D mechanism with the same sigma and the same l2 shift has a smaller epsilon
    assert m.sigma >= analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_laplace_guarantees_from_pair(eps):
    m = Laplace(sensitivity=1.0, epsilon=eps)
    assert float(m.pure_dp().epsilon) <= eps
    assert float(m.pure_dp().epsilon) == pytest.approx(eps, rel=1e-12)
    # the profile of the grid pair is below the canonical eps-DP profile and consistent with divergences
    P, Q = m.pair.P, m.pair.Q
    assert float(m.approx_dp(1e-3).epsilon) == pytest.approx(max(0.0, float(approx_max_divergence(P, Q, 1e-3))))
    rdp = m.rdp()
    assert float(rdp.epsilon(2.0)) <= float(rdp.epsilon(10.0)) <= eps + 1e-12
    assert float(m.wasserstein_dp(1).epsilon) == pytest.approx(m.units * m.grid)
    assert m.scale == pytest.approx(1.0 / eps, rel=2e-3) and m.scale >= 1.0 / eps


def test_laplace_vector_l1():
    """The noise of a 1000-vector release has the standard deviation sqrt(2) b of its scale.

    20 independent releases give 20,000 values; the sample standard deviation of Laplace noise has a
    relative standard deviation of sqrt(5 / (4 n)) = 0.0079 (excess kurtosis 3), so the 5% tolerance is
    6.3 of them (one release of 1000 values, with 10% = 2.8 of them, failed for 1% of seeds)."""
    m = Laplace(sensitivity=1.0, epsilon=1.0, dimension=1000)
    assert float(m.pure_dp().epsilon) <= 1.0
    rng = insecure_seeded(5)
    releases = [m.release(np.zeros(1000), rng=rng).values for _ in range(20)]
    assert releases[0].shape == (1000,)
    assert np.std(np.concatenate(releases)) == pytest.approx(math.sqrt(2) * m.scale, rel=0.05)


def test_release_carries_scale_interval_and_guarantee():
    m = Laplace(sensitivity=1.0, epsilon=1.0)
    r = m.release(10.0, rng=insecure_seeded(11), confidence=0.9)
    lo, hi = r.interval
    assert float(lo[()]) < r.value < float(hi[()])
    assert r.insecure and "INSECURE" in str(r)
    assert str(r.guarantee) == str(m.guarantee)
    # coverage of the interval over many releases (vector of independent coordinates)
    mv = Laplace(sensitivity=1.0, epsilon=1.0, dimension=20000)
    rv = mv.release(np.full(20000, 3.0), rng=insecure_seeded(12), confidence=0.9)
    covered = np.mean((rv.interval[0] <= 3.0) & (3.0 <= rv.interval[1]))
    assert covered >= 0.9 - 4 * math.sqrt(0.09 / 20000)


def test_noise_law_goodness_of_fit():
    """Chi-square of the released noise (in grid units) against the exact discrete Laplace cdf.

    alpha = 1e-6 (false-failure rate per run), 40 equiprobable bins, n = 10^6, fixed seed; the same
    test rejects noise whose scale is 1% too large (power check)."""
    m = Laplace(sensitivity=1.0, epsilon=1.0, dimension=1_000_000)
    r = m.release(np.zeros(1_000_000), rng=insecure_seeded(2024))
    k = np.rint(r.values / m.grid)
    P = m.pair.P
    edges = P.quantile(np.linspace(0, 1, 41)[1:-1])
    cdf = np.concatenate([[0.0], P.cdf(edges), [1.0]])
    expected = np.diff(cdf) * k.size
    observed = np.bincount(np.searchsorted(edges, k, side="left"), minlength=40)
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    crit = stats.chi2.ppf(1 - 1e-6, df=39)
    assert chi2 < crit
    wrong = np.rint(insecure_seeded(2025).laplace(0, 1.01 * m.grid_scale, size=1_000_000))
    obs_w = np.bincount(np.searchsorted(edges, wrong, side="left"), minlength=40)
    assert float(np.sum((obs_w - expected) ** 2 / expected)) > crit


def test_naive_float_laplace_leaks_and_dpkit_does_not():
    """Mironov 2012: x + Laplace() in floating point reveals x through the set of reachable doubles.

    With x = 1, outputs in (-1/2, 1/2) are exact multiples of 2^-53 (Sterbenz: 1 + L is exact), while
    with x = 0 they are L itself, almost never such a multiple.  So 'output in (-1/2, 1/2) and not a
    multiple of 2^-53' identifies x = 0 with certainty.  dpkit's outputs are multiples of the grid for
    both inputs: the distinguishing event never happens."""
    rng = insecure_seeded(99)
    quantum = 2.0**-53

    def tell_zero(y: np.ndarray) -> np.ndarray:
        small = np.abs(y) < 0.5
        return small & (np.mod(y, quantum) != 0)

    naive0 = 0.0 + rng.laplace(0, 1.0, size=200_000)
    naive1 = 1.0 + rng.laplace(0, 1.0, size=200_000)
    assert np.mean(tell_zero(naive0)) > 0.2  # a large fraction of x = 0 outputs are identified ...
    assert not tell_zero(naive1).any()  # ... and no x = 1 output ever looks like that: a certain leak
    m = Laplace(sensitivity=1.0, epsilon=1.0, dimension=200_000)
    safe0 = m.release(np.zeros(200_000), rng=rng).values
    safe1 = m.release(np.ones(200_000), rng=rng).values
    assert not tell_zero(safe0).any() and not tell_zero(safe1).any()
    for out in (safe0, safe1):
        assert np.all(np.mod(out, m.grid) == 0)  # every output lies on the same grid whatever the input


def test_geometric_and_discrete_gaussian():
    g = Geometric(sensitivity=2, epsilon=0.5)
    assert float(g.pure_dp().epsilon) == pytest.approx(0.5)
    assert g.release([1, 2, 3], rng=insecure_seeded(1)).values.shape == (3,)
    d = DiscreteGaussianMechanism(sensitivity=1, epsilon=1.0, delta=1e-5)
    assert d.delta(1.0) <= 1e-5
    smaller = DiscreteGaussianMechanism(sensitivity=1, sigma=d.sigma * (1 - 1e-9))
    assert smaller.delta(1.0) > 1e-5
    assert float(DiscreteGaussianMechanism(sensitivity=3, rho=0.5).zcdp().rho) <= 0.5


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Laplace(sensitivity=0, epsilon=1), "sensitivity"),
        (lambda: Laplace(sensitivity=1, epsilon=0), "epsilon must be > 0"),
        (lambda: Laplace(sensitivity=1, epsilon=-1), "epsilon"),
        (lambda: Laplace(sensitivity=math.nan, epsilon=1), "sensitivity"),
        (lambda: Laplace(sensitivity=1, epsilon=math.inf), "epsilon"),
        (lambda: Laplace(sensitivity=1), "exactly one"),
        (lambda: Gaussian(sensitivity=1, epsilon=1, delta=0), r"delta must be in \(0, 1\)"),
        (lambda: Gaussian(sensitivity=1, epsilon=1, delta=1.0), "delta"),
        (lambda: Gaussian(sensitivity=1, epsilon=1, delta=math.nan), "delta"),
        (lambda: Gaussian(sensitivity=-1, epsilon=1, delta=1e-5), "sensitivity"),
        (lambda: Geometric(sensitivity=1.5, epsilon=1), "integer"),
        (lambda: DiscreteGaussianMechanism(sensitivity=1), "exactly one"),
    ],
)
def test_bad_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_are_refused_never_noised(bad):
    for m in (Laplace(sensitivity=1, epsilon=1), Gaussian(sensitivity=1, sigma=1.0)):
        with pytest.raises(ValueError, match="refused, never noised"):
            m.release(bad)
    with pytest.raises(ValueError, match="empty"):
        Laplace(sensitivity=1, epsilon=1).release([])
    with pytest.raises(ValueError, match="releases 1 value"):
        Laplace(sensitivity=1, epsilon=1).release([1.0, 2.0])
