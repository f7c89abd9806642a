"""Entropies of seed 004 against mpmath."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.distributions import DiscreteGaussian, DiscreteLaplace, Finite, Gaussian, Laplace
from dpkit.divergences import cross_entropy, kl, renyi_entropy, shannon_entropy

mp.mp.dps = 50
F = Finite([0.5, 0.25, 0.125, 0.125, 0.0])


def test_shannon_and_limits():
    ps = [mp.mpf(1) / 2, mp.mpf(1) / 4, mp.mpf(1) / 8, mp.mpf(1) / 8]
    h = -mp.fsum(p * mp.log(p) for p in ps)
    assert float(shannon_entropy(F)) == pytest.approx(float(h), rel=1e-14)
    assert float(renyi_entropy(F, 0)) == pytest.approx(math.log(4))  # Hartley counts positive masses
    assert float(renyi_entropy(F, math.inf)) == pytest.approx(math.log(2))
    assert float(renyi_entropy(F, 1 + 1e-9)) == pytest.approx(float(h), rel=1e-7)
    a = mp.mpf(3)
    assert float(renyi_entropy(F, 3)) == pytest.approx(float(mp.log(mp.fsum(p**a for p in ps)) / (1 - a)), rel=1e-14)


def test_cross_entropy_is_entropy_plus_kl():
    Q = Finite([0.2, 0.2, 0.2, 0.2, 0.2])
    assert float(cross_entropy(F, Q)) == pytest.approx(float(shannon_entropy(F)) + float(kl(F, Q)), rel=1e-14)
    assert cross_entropy(Q, F) == math.inf


def test_continuous_and_lattice_entropies():
    assert float(shannon_entropy(Gaussian(0, 2))) == pytest.approx(0.5 * math.log(2 * math.pi * math.e * 4), rel=1e-15)
    assert float(shannon_entropy(Laplace(0, 2))) == pytest.approx(1 + math.log(4), rel=1e-15)
    for d, w in [(DiscreteLaplace(0, 1.7), 400), (DiscreteGaussian(0, 1.3), 60)]:
        logs = [mp.mpf(float(d.log_density(k))) for k in range(-w, w + 1)]
        ref = -mp.fsum(mp.exp(x) * x for x in logs)
        assert float(shannon_entropy(d)) == pytest.approx(float(ref), rel=1e-12)
    # Rényi entropy of the Gaussian: ln(sigma sqrt(2 pi)) + ln(alpha) / (2 (alpha - 1))
    s = mp.mpf(2)
    f = lambda x: mp.exp(-x * x / (2 * s * s)) / (s * mp.sqrt(2 * mp.pi))  # noqa: E731
    ref = mp.log(mp.quad(lambda x: f(x) ** 2, [-mp.inf, 0, mp.inf])) / (1 - 2)
    assert float(renyi_entropy(Gaussian(0, 2), 2)) == pytest.approx(float(ref), rel=1e-13)
