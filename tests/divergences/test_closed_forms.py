"""Closed forms against independent mpmath references (quadrature or exact summation, 50 digits).

Bar (issue 2): agreement to 1e-10 relative or better, including extreme parameters (alpha up to
1e4, shifts up to 1e3 scales, values down to ~1e-300).
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.distributions import Bernoulli, DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from dpkit.divergences import approx_max_divergence, hockey_stick, kl, max_divergence, renyi, total_variation
from reference import mp as ref

RTOL = 1e-10


def close(value: float, expected, rtol: float = RTOL) -> None:
    expected = float(expected)
    assert math.isfinite(float(value)), value
    assert abs(float(value) - expected) <= rtol * abs(expected) + 1e-300, (float(value), expected)


LAPLACE = [(1.0, 1.0), (2.0, 0.3), (1.0, 1e-4), (1.0, 30.0), (0.5, 500.0)]
ALPHAS = [0.1, 0.5, 0.75, 1 - 1e-7, 1 + 1e-7, 2.0, 10.0, 1e4]


@pytest.mark.parametrize("b,D", LAPLACE)
def test_laplace_kl_tv(b, D):
    P, Q = Laplace(0, b), Laplace(D, b)
    lp, lq, pts = ref.laplace_pair(b, D)
    close(kl(P, Q), ref.continuous(lp, lq, pts, "kl"))
    close(total_variation(P, Q), ref.continuous(lp, lq, pts, "tv"))
    assert float(max_divergence(P, Q)) == pytest.approx(D / b, rel=1e-15)


@pytest.mark.parametrize("b,D", LAPLACE)
@pytest.mark.parametrize("alpha", ALPHAS)
def test_laplace_renyi(b, D, alpha):
    if alpha == 1e4 and D / b > 100:
        pytest.skip("covered by test_laplace_renyi_extreme (quadrature needs a wider split)")
    lp, lq, pts = ref.laplace_pair(b, D)
    close(renyi(Laplace(0, b), Laplace(D, b), alpha), ref.continuous(lp, lq, pts, "renyi", alpha))


def test_laplace_renyi_extreme():
    """alpha = 1e4 with a shift of 1e3 scales: finite, and equal to the exact log-space value."""
    t, a = mp.mpf(1000), mp.mpf(10_000)
    # the integral of p^a q^(1-a) splits into three pieces with elementary antiderivatives;
    # evaluated independently here in 50-digit arithmetic
    val = (a / (2 * a - 1)) * mp.exp((a - 1) * t) + ((a - 1) / (2 * a - 1)) * mp.exp(-a * t)
    expected = mp.log(val) / (a - 1)
    close(renyi(Laplace(0, 1), Laplace(1000, 1), 1e4), expected)


@pytest.mark.parametrize("b,D", LAPLACE)
@pytest.mark.parametrize("frac", [-2.0, -0.5, 0.0, 0.3, 0.9])
def test_laplace_hockey(b, D, frac):
    eps = frac * D / b
    lp, lq, pts = ref.laplace_pair(b, D)
    close(hockey_stick(Laplace(0, b), Laplace(D, b), eps), ref.continuous(lp, lq, pts, "hockey", eps))


GAUSS = [(1.0, 1.0), (3.0, 0.1), (1.0, 20.0), (2.0, 7.0)]


@pytest.mark.parametrize("s,D", GAUSS)
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.5, 3.0, 25.0])
def test_gaussian_hockey(s, D, eps):
    lp, lq, pts = ref.gaussian_pair(s, D)
    expected = ref.continuous(lp, lq, pts, "hockey", eps)
    if expected < mp.mpf("1e-290"):
        pytest.skip("below double precision range")
    close(hockey_stick(Gaussian(0, s), Gaussian(D, s), eps), expected)


@pytest.mark.parametrize("s,D", GAUSS)
def test_gaussian_kl_renyi_tv(s, D):
    P, Q = Gaussian(0, s), Gaussian(D, s)
    lp, lq, pts = ref.gaussian_pair(s, D)
    close(kl(P, Q), ref.continuous(lp, lq, pts, "kl"))
    close(renyi(P, Q, 3.0), ref.continuous(lp, lq, pts, "renyi", 3.0))
    close(total_variation(P, Q), ref.continuous(lp, lq, pts, "tv"))
    assert max_divergence(P, Q) == math.inf


def test_gaussian_hockey_far_tail():
    """Large epsilon, where Phi(a) - e^eps Phi(b) cancels catastrophically in the naive form."""
    mu, eps = 1.0, 35.0
    expected = mp.ncdf(mu / 2 - eps / mu) - mp.exp(eps) * mp.ncdf(-mu / 2 - eps / mu)
    close(hockey_stick(Gaussian(0, 1), Gaussian(1, 1), eps), expected, rtol=1e-10)


@pytest.mark.parametrize("s1,s2,m", [(1.0, 2.0, 0.5), (2.0, 1.0, -1.0), (1.0, 1.3, 3.0)])
def test_gaussian_different_variances(s1, s2, m):
    s1m, s2m = mp.mpf(s1), mp.mpf(s2)
    lp = lambda x: -x**2 / (2 * s1m**2) - mp.log(s1m * mp.sqrt(2 * mp.pi))  # noqa: E731
    lq = lambda x: -(x - m) ** 2 / (2 * s2m**2) - mp.log(s2m * mp.sqrt(2 * mp.pi))  # noqa: E731
    P, Q = Gaussian(0, s1), Gaussian(m, s2)
    close(kl(P, Q), ref.continuous(lp, lq, [0, m], "kl"))
    for a in (0.5, 1.5):
        if a * s2**2 + (1 - a) * s1**2 > 0:
            close(renyi(P, Q, a), ref.continuous(lp, lq, [0, m], "renyi", a))
    if s1 < s2:
        xs = mp.findroot(lambda x: mp.diff(lambda y: lp(y) - lq(y), x), 0)
        close(max_divergence(P, Q), lp(xs) - lq(xs))
    else:
        assert max_divergence(P, Q) == math.inf


@pytest.mark.parametrize("b1,b2,m", [(1.0, 2.0, 0.5), (1.0, 1.5, -2.0)])
def test_laplace_different_scales(b1, b2, m):
    lp = lambda x: ref.laplace_logpdf(x, 0, mp.mpf(b1))  # noqa: E731
    lq = lambda x: ref.laplace_logpdf(x, m, mp.mpf(b2))  # noqa: E731
    P, Q = Laplace(0, b1), Laplace(m, b2)
    close(kl(P, Q), ref.continuous(lp, lq, [0, m], "kl"))
    close(max_divergence(P, Q), lp(0) - lq(0))


DLAP = [(1.0, 1), (1.3, 2), (0.2, 3), (10.0, 1), (5.0, 40)]


@pytest.mark.parametrize("t,D", DLAP)
def test_discrete_laplace(t, D):
    P, Q = DiscreteLaplace(0, t), DiscreteLaplace(D, t)
    lp, lq0 = ref.discrete_laplace_logpmf(t), ref.discrete_laplace_logpmf(t)
    lq = lambda k: lq0(k - D)  # noqa: E731
    w = int(170 * t) + D + 5
    close(kl(P, Q), ref.lattice(lp, lq, "kl", width=w))
    close(total_variation(P, Q), ref.lattice(lp, lq, "tv", width=w))
    for a in (0.3, 0.5, 1 + 1e-6, 2.0, 7.5):
        close(renyi(P, Q, a), ref.lattice(lp, lq, "renyi", a, width=w))
    for frac in (-1.5, -0.3, 0.0, 0.25, 0.6, 0.99):
        eps = frac * D / t
        close(hockey_stick(P, Q, eps), ref.lattice(lp, lq, "hockey", eps, width=w))
    assert float(max_divergence(P, Q)) == pytest.approx(D / t, rel=1e-15)


DGAUSS = [(1.0, 1), (0.3, 1), (2.5, 3), (10.0, 1)]


@pytest.mark.parametrize("s,D", DGAUSS)
def test_discrete_gaussian(s, D):
    P, Q = DiscreteGaussian(0, s), DiscreteGaussian(D, s)
    w = int(19 * s + 2.5 * s * s / D) + D + 5  # covers k < D/2 - eps s^2/D for eps <= 2
    lp = ref.discrete_gaussian_logpmf(s, w + D)
    lq = lambda k: lp(k - D)  # noqa: E731
    close(kl(P, Q), ref.lattice(lp, lq, "kl", width=w))
    close(total_variation(P, Q), ref.lattice(lp, lq, "tv", width=w))
    for a in (0.3, 0.5, 1.5, 2.0, 3.7):
        close(renyi(P, Q, a), ref.lattice(lp, lq, "renyi", a, width=w))
    for eps in (-0.5, 0.0, 0.5, 2.0):
        close(hockey_stick(P, Q, eps), ref.lattice(lp, lq, "hockey", eps, width=w))
    assert max_divergence(P, Q) == math.inf


@pytest.mark.parametrize("eps", [0.01, 1.0, 5.0, 40.0])
def test_randomized_response(eps):
    P, Q = Bernoulli.randomized_response(eps, truth=1), Bernoulli.randomized_response(eps, truth=0)
    e = mp.mpf(eps)
    p = mp.exp(e) / (1 + mp.exp(e))
    close(kl(P, Q), e * mp.tanh(e / 2))
    close(total_variation(P, Q), mp.tanh(e / 2))
    for a in (0.5, 2.0, 100.0):
        a = mp.mpf(a)
        expected = mp.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
        close(renyi(P, Q, float(a)), expected)
    close(max_divergence(P, Q), e, rtol=1e-12)


def test_golden_values_from_theory_notes():
    """Spot values recorded in docs/notes.md §5 (re-derived here against mpmath)."""
    assert float(kl(Laplace(0, 1), Laplace(1, 1))) == pytest.approx(0.367879441171442, rel=1e-13)
    assert float(renyi(Laplace(0, 1), Laplace(1, 1), 2)) == pytest.approx(0.619123629998593, rel=1e-13)
    assert float(hockey_stick(Gaussian(0, 1), Gaussian(1, 1), 1.0)) == pytest.approx(0.126936737506644, rel=1e-12)
    assert float(renyi(DiscreteGaussian(0, 1.0), DiscreteGaussian(1, 1.0), 1.5)) == pytest.approx(
        0.749999978597696, rel=1e-12
    )


@pytest.mark.parametrize("b,D", LAPLACE)
@pytest.mark.parametrize("delta", [1e-12, 1e-3, 0.2, 0.9])
def test_approx_max_divergence_inverts_the_profile(b, D, delta):
    P, Q = Laplace(0, b), Laplace(D, b)
    eps = float(approx_max_divergence(P, Q, delta))
    assert float(hockey_stick(P, Q, eps)) <= delta * (1 + 1e-12)
    if eps > math.log1p(-delta) + 1e-9:
        assert float(hockey_stick(P, Q, eps - 1e-9 * max(1, abs(eps)))) >= delta * (1 - 1e-9)
