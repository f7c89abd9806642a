"""Second-order PLD intervals: the optimistic end (supporting lines) is a lower bound as tight as the
pessimistic end is an upper bound, for single pairs, k-fold and heterogeneous compositions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from dpkit.accounting.pld import compose_many, epsilon_interval, pld_from_pair
from dpkit.accounting.subsampling import pld_poisson_subsampled, subsampled_epsilon_interval
from dpkit.distributions import Finite, Gaussian, Laplace
from dpkit.divergences import hockey_stick
from dpkit.divergences._closed import gaussian_delta


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    return brentq(lambda e: gaussian_delta(mu, e) - delta, -50, 1e5, xtol=1e-13, rtol=1e-15)


@pytest.mark.parametrize("mu,grid", [(1.0, 1e-4), (1.0, 1e-3), (0.2, 2e-5), (3.0, 3e-4)])
def test_gaussian_single_pld_brackets_and_is_second_order(mu, grid):
    """delta of both PLDs brackets the analytic Gaussian delta at every eps (negative ones too: the
    optimistic construction must lie below the whole hockey-stick curve), to ~(grid / mu)^2."""
    hi = pld_from_pair(Gaussian(0, 1), Gaussian(mu, 1), grid=grid)
    lo = pld_from_pair(Gaussian(0, 1), Gaussian(mu, 1), grid=grid, pessimistic=False)
    for eps in (-2.0, -0.5, 0.0, 0.3, 1.0, 2.0):
        exact = gaussian_delta(mu, eps)
        assert lo.delta(eps) <= exact <= hi.delta(eps)
        if exact > 1e-6:
            assert (hi.delta(eps) - lo.delta(eps)) / exact <= 50 * (grid / mu) ** 2 + 1e-9


@pytest.mark.parametrize("sigma,k", [(1.0, 10), (1.0, 1000), (5.0, 100), (5.0, 10000), (1.0, 10000)])
def test_gaussian_k_fold_interval_is_narrow_on_both_sides(sigma, k):
    """k-fold Gaussian = one Gaussian with sigma / sqrt(k): both ends within 1e-4 relative."""
    exact = exact_gaussian_epsilon(math.sqrt(k) / sigma, 1e-5)
    iv = epsilon_interval(Gaussian(0, sigma), Gaussian(1, sigma), k=k, delta=1e-5, symmetric=True)
    assert exact in iv
    assert (exact - iv.lower) / exact <= 1e-4
    assert (iv.upper - exact) / exact <= 1e-4


def test_heterogeneous_gaussians_compose_to_the_exact_gaussian():
    """3 x N(., 1) and 5 x N(., 2) and 2 x N(., 0.7): exactly one Gaussian with mu^2 = 3 + 5/4 + 2/0.49."""
    mu = math.sqrt(3 + 5 / 4 + 2 / 0.49)
    exact = exact_gaussian_epsilon(mu, 1e-6)
    grid = 2e-4
    ends = []
    for pess in (True, False):
        parts = [(pld_from_pair(Gaussian(0, s), Gaussian(1, s), grid=grid, pessimistic=pess), k)
                 for s, k in ((1.0, 3), (2.0, 5), (0.7, 2))]
        ends.append(compose_many(parts).epsilon(1e-6))
    assert ends[1] <= exact <= ends[0]
    assert (ends[0] - ends[1]) / exact <= 1e-5


def test_compose_many_agrees_with_pairwise_convolution():
    g = pld_from_pair(Gaussian(0, 2), Gaussian(1, 2), grid=1e-3)
    lap = pld_from_pair(Laplace(0, 1), Laplace(1, 1), grid=1e-3)
    many = compose_many([(g, 7), (lap, 3)])
    pairwise = g.self_compose(7).compose(lap).compose(lap).compose(lap)
    for eps in (0.5, 2.0, 5.0):
        assert many.delta(eps) == pytest.approx(pairwise.delta(eps), rel=1e-9, abs=1e-14)


def test_compose_many_rejects_mixed_grids_and_bad_counts():
    a = pld_from_pair(Gaussian(0, 1), Gaussian(1, 1), grid=1e-3)
    b = pld_from_pair(Gaussian(0, 1), Gaussian(1, 1), grid=2e-3)
    with pytest.raises(ValueError, match="same grid"):
        compose_many([(a, 2), (b, 2)])
    with pytest.raises(ValueError, match="k must be an integer"):
        compose_many([(a, 0)])
    with pytest.raises(ValueError, match="at least one"):
        compose_many([])


@pytest.mark.parametrize("eps", [-0.5, 0.0, 0.4, 0.9])
def test_laplace_optimistic_is_tight_with_the_atoms_on_the_grid(eps):
    P, Q = Laplace(0, 1), Laplace(1, 1)
    exact = float(hockey_stick(P, Q, eps))
    lo = pld_from_pair(P, Q, grid=1e-4, pessimistic=False).delta(eps)
    assert exact - 1e-8 <= lo <= exact


def test_laplace_k_fold_interval_is_narrow():
    iv = epsilon_interval(Laplace(0, 1), Laplace(1, 1), k=100, delta=1e-5, symmetric=True)
    assert iv.width / iv.upper <= 1e-5


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_subsampled_optimistic_single_step_is_below_the_pessimistic_and_close(direction):
    """Close in absolute terms.  Near the add direction's largest loss -ln(1 - q) = 0.0513 the loss law
    piles up against its end and R is tiny, so midpoint tangents would dip below 0 and cells there use
    the tangent at their lower end (still second order, a few times looser)."""
    kw = dict(sampling_rate=0.05, direction=direction, grid=1e-4)
    hi = pld_poisson_subsampled(Gaussian(0, 1), Gaussian(1, 1), **kw)
    lo = pld_poisson_subsampled(Gaussian(0, 1), Gaussian(1, 1), pessimistic=False, **kw)
    for eps in (-0.1, 0.0, 0.03, 0.05, 0.2, 0.5):
        assert lo.delta(eps) <= hi.delta(eps)
        assert hi.delta(eps) - lo.delta(eps) <= 1e-7 + 1e-5 * hi.delta(eps)


@pytest.mark.parametrize("k", [1000, 10000])
def test_subsampled_gaussian_interval_meets_the_width_bar(k):
    """Issue 4, case (c): [lower, upper] at most 0.1% of eps wide (here 10 times narrower at least)."""
    iv = subsampled_epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), sampling_rate=0.01, k=k, delta=1e-5)
    assert iv.width <= 1e-4 * iv.upper


def test_random_finite_pairs_two_fold_bracket_the_product():
    """Optimistic and pessimistic PLDs of random finite pairs bracket the exact 2-fold hockey-stick."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        p = rng.dirichlet(np.ones(6))
        q = rng.dirichlet(np.ones(6))
        P, Q = Finite(p), Finite(q)
        P2, Q2 = Finite(np.outer(p, p).ravel()), Finite(np.outer(q, q).ravel())
        hi = pld_from_pair(P, Q, grid=1e-3).self_compose(2)
        lo = pld_from_pair(P, Q, grid=1e-3, pessimistic=False).self_compose(2)
        for eps in (-1.0, 0.0, 0.5, 1.5):
            exact = float(hockey_stick(P2, Q2, eps))
            assert lo.delta(eps) - 1e-12 <= exact <= hi.delta(eps) + 1e-12
