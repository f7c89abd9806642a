"""Distributions: masses sum to one, cdf/quantile are inverse, moments match, parameters validated."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.distributions import Bernoulli, DiscreteGaussian, DiscreteLaplace, Finite, Gaussian, Laplace, align

mp.mp.dps = 50
U = np.array([1e-12, 0.01, 0.2, 0.5, 0.7, 0.99, 1 - 1e-9])


@pytest.mark.parametrize("d", [Laplace(0.3, 1.7), Gaussian(-1.0, 0.4)])
def test_continuous_quantile_inverts_cdf(d):
    assert np.allclose(d.cdf(d.quantile(U)), U, rtol=1e-9, atol=1e-15)
    assert np.all(d.sf(d.quantile(U)) == pytest.approx(1 - U, rel=1e-7, abs=1e-15))


@pytest.mark.parametrize(
    "d", [DiscreteLaplace(2, 1.5), DiscreteLaplace(0, 0.2), DiscreteGaussian(-1, 2.5), DiscreteGaussian(0, 0.3)]
)
def test_discrete_quantile_is_generalised_inverse(d):
    k = d.quantile(U)
    assert np.all(d.cdf(k) >= U - 1e-15)
    assert np.all(d.cdf(k - 1) < U + 1e-15)


@pytest.mark.parametrize("t", [0.1, 1.0, 7.0])
def test_discrete_laplace_pmf_and_moments_exact(t):
    d = DiscreteLaplace(0, t)
    ks = range(-int(200 * t) - 10, int(200 * t) + 11)
    r = mp.exp(-1 / mp.mpf(t))
    z = (1 - r) / (1 + r)
    assert float(d.pmf(3)) == pytest.approx(float(z * r**3), rel=1e-13)
    var = mp.fsum(z * r ** abs(k) * k * k for k in ks)
    assert d.variance == pytest.approx(float(var), rel=1e-11)
    assert float(d.cdf(-2)) == pytest.approx(float(mp.fsum(z * r ** abs(k) for k in ks if k <= -2)), rel=1e-11)


@pytest.mark.parametrize("s", [0.2, 1.0, 3.3])
def test_discrete_gaussian_normaliser_and_variance(s):
    d = DiscreteGaussian(0, s)
    w = int(40 * s) + 5
    sm = mp.mpf(s)
    theta = mp.fsum(mp.exp(-mp.mpf(k) ** 2 / (2 * sm**2)) for k in range(-w, w + 1))
    assert d.log_normalizer == pytest.approx(float(mp.log(theta)), rel=1e-13)
    var = mp.fsum(k * k * mp.exp(-mp.mpf(k) ** 2 / (2 * sm**2)) for k in range(-w, w + 1)) / theta
    assert d.variance == pytest.approx(float(var), rel=1e-11)
    assert float(np.sum(d.pmf(np.arange(-w, w + 1)))) == pytest.approx(1.0, rel=1e-14)


def test_laplace_and_gaussian_values():
    assert float(Laplace(0, 2).pdf(1.0)) == pytest.approx(math.exp(-0.5) / 4, rel=1e-15)
    assert float(Gaussian(0, 1).cdf(-37.0)) == pytest.approx(float(mp.ncdf(-37)), rel=1e-12)  # deep tail, no underflow
    assert Laplace(1, 3).variance == 18.0


def test_sampling_matches_moments():
    rng = np.random.default_rng(12345)  # insecure, test-only generator
    for d in [Laplace(1, 2), Gaussian(0, 3), DiscreteLaplace(0, 2.0), DiscreteGaussian(0, 2.0), Bernoulli(0.3),
              Finite([0.2, 0.3, 0.5], support=[1, 5, 7])]:
        x = d.sample(200_000, rng=rng)
        assert x.shape == (200_000,)
        se = math.sqrt(d.variance / x.size)
        assert abs(float(np.mean(x)) - d.mean) < 6 * se, d


def test_bernoulli_randomized_response_keeps_tiny_masses():
    B = Bernoulli.randomized_response(60.0, truth=0)
    assert float(B.pmf(1)) == pytest.approx(math.exp(-60), rel=1e-12)
    assert float(B.to_finite().probabilities[1]) > 0


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Laplace(0, 0), "scale must be finite and > 0"),
        (lambda: Laplace(0, -1), "scale"),
        (lambda: Laplace(0, math.nan), "scale"),
        (lambda: Laplace(0, math.inf), "scale"),
        (lambda: Laplace(math.nan, 1), "loc must be finite"),
        (lambda: Gaussian(0, 0), "sigma"),
        (lambda: Gaussian(math.inf, 1), "loc"),
        (lambda: DiscreteLaplace(0.5, 1), "loc must be an integer"),
        (lambda: DiscreteLaplace(0, math.nan), "scale"),
        (lambda: DiscreteGaussian(0, -2), "sigma"),
        (lambda: Bernoulli(1.5), "p must be in"),
        (lambda: Bernoulli(math.nan), "p must be in"),
        (lambda: Finite([0.5, 0.6]), "sum to 1 within 1e-09"),
        (lambda: Finite([0.5, 0.5 + 2e-9]), "sum to 1"),
        (lambda: Finite([1.5, -0.5]), ">= 0"),
        (lambda: Finite([math.nan, 1.0]), "finite"),
        (lambda: Finite([math.inf, 0.0]), "finite"),
        (lambda: Finite([]), "empty"),
        (lambda: Finite([0.5, 0.5], support=[1, 1]), "distinct"),
        (lambda: Finite([0.5, 0.5], support=[1, 2, 3]), "3 labels"),
    ],
)
def test_bad_parameters_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_nothing_is_normalised_silently():
    F = Finite([0.5, 0.5 + 5e-10])  # within the documented tolerance: kept as given
    assert F.probabilities[1] == 0.5 + 5e-10


def test_mismatched_supports_raise_and_align_extends_explicitly():
    P = Finite([0.5, 0.5], support=[0, 1])
    Q = Finite([0.5, 0.5], support=[1, 2])
    with pytest.raises(ValueError, match="different supports"):
        align(P, Q)
    p, q, s = align(P, Q, extend=True)
    assert s.tolist() == [0, 1, 2] and p.tolist() == [0.5, 0.5, 0.0] and q.tolist() == [0.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="common domain"):
        from dpkit.divergences import kl

        kl(Laplace(0, 1), DiscreteLaplace(0, 1.0))


def test_distributions_are_immutable():
    d = Laplace(0, 1)
    with pytest.raises(AttributeError):
        d.scale = 2.0  # type: ignore[misc]
    assert Laplace(0, 1) == d and hash(Laplace(0, 1)) == hash(d)
