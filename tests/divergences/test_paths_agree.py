"""Every evaluation path gives the same answer for the same pair (closed form, exact sum, series,
quadrature), and extreme inputs give finite, correct values rather than overflow or NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.distributions import Bernoulli, DiscreteGaussian, DiscreteLaplace, Finite, Gaussian, Laplace
from dpkit.divergences import (
    approx_max_divergence,
    hockey_stick,
    kl,
    max_divergence,
    renyi,
    statistical_distance,
    total_variation,
    wasserstein,
)
from dpkit.divergences._closed import DiscreteGaussianShift, DiscreteLaplaceShift, LaplaceShift
from dpkit.divergences._numeric import QuadraturePair, SeriesPair


@pytest.mark.parametrize("b,D", [(1.0, 1.0), (2.0, 0.7), (0.5, 3.0)])
def test_laplace_closed_form_matches_quadrature(b, D):
    P, Q = Laplace(0, b), Laplace(D, b)
    closed, quad = LaplaceShift(D, b), QuadraturePair(P, Q)
    for name, args in [
        ("kl", ()),
        ("renyi", (2.0,)),
        ("renyi", (0.5,)),
        ("total_variation", ()),
        ("hockey_stick", (0.3,)),
    ]:
        c, q = getattr(closed, name)(*args), getattr(quad, name)(*args)
        assert q.kind == "numerical"
        assert abs(float(c) - float(q)) <= max(10 * q.error, 1e-9 * abs(float(c))), (name, float(c), float(q), q.error)
    assert float(quad.wasserstein(1)) == pytest.approx(D, rel=1e-7)
    assert float(quad.wasserstein(2)) == pytest.approx(D, rel=1e-6)


@pytest.mark.parametrize("s,D", [(1.0, 1.0), (0.7, 2.0)])
def test_gaussian_closed_form_matches_quadrature(s, D):
    P, Q = Gaussian(0, s), Gaussian(D, s)
    quad = QuadraturePair(P, Q)
    for name, args in [("kl", ()), ("renyi", (3.0,)), ("total_variation", ()), ("hockey_stick", (1.0,))]:
        c, q = getattr(__import__("dpkit.divergences", fromlist=[name]), name)(P, Q, *args), getattr(quad, name)(*args)
        assert abs(float(c) - float(q)) <= max(10 * q.error, 1e-9 * abs(float(c))), (name, float(c), float(q))


@pytest.mark.parametrize("t,D", [(1.0, 1), (1.3, 2), (4.0, 5)])
def test_discrete_laplace_closed_form_matches_series(t, D):
    closed, series = DiscreteLaplaceShift(D, t), SeriesPair(DiscreteLaplace(0, t), DiscreteLaplace(D, t))
    for name, args in [
        ("kl", ()),
        ("renyi", (2.0,)),
        ("renyi", (0.3,)),
        ("total_variation", ()),
        ("hockey_stick", (0.2,)),
    ]:
        c, s = getattr(closed, name)(*args), getattr(series, name)(*args)
        assert float(s) == pytest.approx(float(c), rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("sigma,D", [(1.0, 1), (0.4, 2), (3.0, 1)])
def test_discrete_gaussian_closed_form_matches_series(sigma, D):
    P = DiscreteGaussian(0, sigma)
    closed = DiscreteGaussianShift(D, sigma, P.log_normalizer)
    series = SeriesPair(P, DiscreteGaussian(D, sigma))
    for name, args in [
        ("kl", ()),
        ("renyi", (2.5,)),
        ("renyi", (0.5,)),
        ("total_variation", ()),
        ("hockey_stick", (0.2,)),
    ]:
        c, s = getattr(closed, name)(*args), getattr(series, name)(*args)
        assert float(s) == pytest.approx(float(c), rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_randomized_response_equals_discrete_laplace_shift_one(eps):
    """DLap(0, 1/eps) vs DLap(1, 1/eps) has exactly the privacy loss law of randomized response."""
    rr = (Bernoulli.randomized_response(eps, truth=1), Bernoulli.randomized_response(eps, truth=0))
    dl = (DiscreteLaplace(0, 1 / eps), DiscreteLaplace(1, 1 / eps))
    for f, args in [(kl, ()), (renyi, (2.0,)), (renyi, (0.5,)), (total_variation, ()), (hockey_stick, (0.3 * eps,)),
                    (max_divergence, ()), (approx_max_divergence, (0.01,))]:
        assert float(f(*rr, *args)) == pytest.approx(float(f(*dl, *args)), rel=1e-11), f.__name__


def test_finite_vs_lattice_is_exact():
    """A finite law against a discrete Laplace: exact sums over the finite support."""
    F = Finite([0.2, 0.3, 0.5], support=[0, 1, 2])
    L = DiscreteLaplace(1, 1.0)
    q = np.exp(L.log_density([0, 1, 2]))
    p = F.probabilities
    assert float(kl(F, L)) == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-13)
    assert float(hockey_stick(F, L, 0.2)) == pytest.approx(
        float(np.sum(np.maximum(p - math.exp(0.2) * q, 0))), rel=1e-13
    )
    # TV also counts L's mass outside {0, 1, 2}
    tv = 0.5 * (np.sum(np.abs(p - q)) + (1 - q.sum()))
    assert float(total_variation(F, L)) == pytest.approx(float(tv), rel=1e-12)
    assert kl(L, F) == math.inf


def test_tv_forms_agree_on_finite():
    P = Finite([0.1, 0.2, 0.3, 0.4])
    Q = Finite([0.4, 0.3, 0.2, 0.1])
    assert float(total_variation(P, Q)) == pytest.approx(float(statistical_distance(P, Q)), rel=1e-15)
    assert float(total_variation(P, Q)) == pytest.approx(float(hockey_stick(P, Q, 0.0)), rel=1e-15)


def test_renyi_limits():
    P, Q = Finite([0.1, 0.2, 0.7]), Finite([0.3, 0.3, 0.4])
    k = float(kl(P, Q))
    for h in (1e-3, 1e-6, 1e-9, 1e-12):
        assert float(renyi(P, Q, 1 + h)) == pytest.approx(k, rel=10 * h + 1e-12)
        assert float(renyi(P, Q, 1 - h)) == pytest.approx(k, rel=10 * h + 1e-12)
    assert float(renyi(P, Q, 1e6)) == pytest.approx(float(max_divergence(P, Q)), rel=1e-5)
    assert float(renyi(P, Q, math.inf)) == float(max_divergence(P, Q))


def test_extremes_finite_no_overflow():
    tiny = 1e-300
    P = Finite([tiny, 1 - tiny])
    Q = Finite([1 - tiny, tiny])
    assert float(max_divergence(P, Q)) == pytest.approx(math.log((1 - tiny) / tiny), rel=1e-14)
    d = float(renyi(P, Q, 1e4))
    assert math.isfinite(d) and d == pytest.approx(math.log(1 / tiny), rel=1e-3)
    assert float(kl(P, Q)) == pytest.approx(math.log(1 / tiny), rel=1e-10)
    assert float(hockey_stick(P, Q, 100.0)) == pytest.approx(1 - math.exp(100) * tiny, rel=1e-12)
    # large shifts: finite, correct values
    assert float(renyi(Laplace(0, 1), Laplace(1000, 1), 1e4)) == pytest.approx(1000.0, rel=1e-3)
    assert float(kl(Gaussian(0, 1), Gaussian(1000, 1))) == 500000.0
    assert float(hockey_stick(Gaussian(0, 1), Gaussian(1000, 1), 0.0)) == 1.0


def test_zero_and_inf_exactly_where_they_should_be():
    P = Finite([0.5, 0.5, 0.0], support=["a", "b", "c"])
    Q = Finite([0.5, 0.0, 0.5], support=["a", "b", "c"])
    assert kl(P, Q) == math.inf and max_divergence(P, Q) == math.inf and renyi(P, Q, 2) == math.inf
    assert math.isfinite(renyi(P, Q, 0.5))
    assert float(kl(P, P)) == 0.0 and float(total_variation(P, P)) == 0.0 and float(max_divergence(P, P)) == 0.0
    assert float(kl(Laplace(3, 2), Laplace(3, 2))) == 0.0
    assert float(hockey_stick(Laplace(0, 1), Laplace(1, 1), 1.0)) == 0.0
    disjoint = (Finite([1.0, 0.0]), Finite([0.0, 1.0]))
    assert renyi(*disjoint, 0.5) == math.inf and float(total_variation(*disjoint)) == 1.0


def test_finite_wasserstein_exact():
    P = Finite([0.5, 0.5], support=[0.0, 1.0])
    Q = Finite([0.25, 0.75], support=[0.0, 3.0])
    # quantiles: P: 0 on (0,.5], 1 on (.5,1]; Q: 0 on (0,.25], 3 on (.25,1]
    w1 = 0.25 * 3 + 0.5 * 2
    assert float(wasserstein(P, Q, 1)) == pytest.approx(w1, rel=1e-15)
    w2 = math.sqrt(0.25 * 9 + 0.5 * 4)
    assert float(wasserstein(P, Q, 2)) == pytest.approx(w2, rel=1e-15)
    from scipy.stats import wasserstein_distance

    rng = np.random.default_rng(3)  # test-only generator
    x, y = rng.normal(size=50), rng.normal(size=60) + 0.3
    pw, qw = rng.random(50), rng.random(60)
    pw, qw = pw / pw.sum(), qw / qw.sum()
    ref = wasserstein_distance(x, y, pw, qw)
    assert float(wasserstein(Finite(pw, support=x), Finite(qw, support=y), 1)) == pytest.approx(ref, rel=1e-10)


def test_location_shift_wasserstein_is_the_shift():
    """W_p of a shifted pair is the shift for every order and scale (docs/notes.md §6)."""
    for order in (1, 2, 3.5):
        assert float(wasserstein(Laplace(0, 5), Laplace(1, 5), order)) == 1.0
        assert float(wasserstein(Gaussian(0, 0.1), Gaussian(-2, 0.1), order)) == 2.0


@pytest.mark.parametrize("t,D", [(1.0, 1), (3.0, 7), (0.4, 4), (10.0, 2)])
@pytest.mark.parametrize("delta", [1e-12, 1e-5, 0.01, 0.1])
def test_approx_max_closed_forms_match_exact_atoms(t, D, delta):
    """Discrete Laplace (segment inversion) and discrete Gaussian (atoms) against the level-set
    maximum over their exact atoms (Def 3.6), and Gaussian (Newton) against bisection."""
    closed = float(approx_max_divergence(DiscreteLaplace(0, t), DiscreteLaplace(D, t), delta))
    atoms = DiscreteLaplaceShift(D, t).atoms()
    from dpkit.divergences._finite import approx_max_divergence as level_sets

    assert closed == pytest.approx(float(level_sets(atoms, delta)), rel=1e-12, abs=1e-12)
    g = float(approx_max_divergence(Gaussian(0, t), Gaussian(D, t), delta))
    assert float(hockey_stick(Gaussian(0, t), Gaussian(D, t), g)) <= delta
    assert float(hockey_stick(Gaussian(0, t), Gaussian(D, t), g - 1e-9 * max(1, g))) > delta
