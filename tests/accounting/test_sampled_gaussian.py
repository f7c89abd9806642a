"""RDP of the Poisson-subsampled Gaussian at integer orders against 50-digit quadrature (MTZ 2019)."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.accounting.composition.renyi import compose_rdp
from dpkit.accounting.sampled_gaussian import sampled_gaussian_rdp
from dpkit.accounting.subsampling import subsampled_epsilon_interval
from dpkit.distributions import Gaussian
from dpkit.guarantees.conversions.renyi import rdp_to_approx_dp


def _renyi_quad(q: float, sigma: float, alpha: int, reverse: bool = False) -> mp.mpf:
    """D_alpha(mu || mu0) (or mu0 || mu) by quadrature, mu = (1-q) N(0, s^2) + q N(1, s^2), mu0 = N(0, s^2)."""
    with mp.workdps(50):
        q, s = mp.mpf(q), mp.mpf(sigma)

        def n(x: mp.mpf, m: int) -> mp.mpf:
            return mp.exp(-(x - m) ** 2 / (2 * s * s)) / (s * mp.sqrt(2 * mp.pi))

        def f(x: mp.mpf) -> mp.mpf:
            mix = (1 - q) * n(x, 0) + q * n(x, 1)
            a, b = (n(x, 0), mix) if reverse else (mix, n(x, 0))
            return b * (a / b) ** alpha

        # the integrand's mass sits near 0, 1 and (for large orders) out at alpha / 2 or so
        points = [-mp.inf, -10 * s, 0, 1, alpha * 0.5 + 1, alpha + 10 * s, mp.inf]
        return mp.log(mp.quad(f, sorted(set(points)))) / (alpha - 1)


@pytest.mark.parametrize("q, sigma, alpha", [(0.01, 1.0, 2), (0.01, 1.0, 8), (0.01, 1.0, 32), (0.1, 2.0, 5),
                                             (0.1, 0.8, 12), (0.5, 1.5, 3), (0.5, 3.0, 20), (1.0, 1.0, 4)])
def test_closed_form_matches_quadrature_and_dominates_the_other_order(q: float, sigma: float, alpha: int) -> None:
    got = float(sampled_gaussian_rdp(sigma=sigma, sampling_rate=q, orders=[alpha]).epsilon(alpha))
    want = float(_renyi_quad(q, sigma, alpha))
    assert want <= got <= want * (1 + 1e-10) + 1e-300  # an upper bound, and tight
    assert float(_renyi_quad(q, sigma, alpha, reverse=True)) <= got  # MTZ: A_alpha >= B_alpha


def test_full_sampling_is_the_gaussian() -> None:
    g = sampled_gaussian_rdp(sigma=2.0, sampling_rate=1.0, orders=range(2, 40))
    for a in range(2, 40):
        assert float(g.epsilon(a)) == pytest.approx(a / 8.0, rel=1e-11)


def test_sensitivity_scales_sigma() -> None:
    a = sampled_gaussian_rdp(sigma=3.0, sampling_rate=0.2, sensitivity=2.0, orders=[6])
    b = sampled_gaussian_rdp(sigma=1.5, sampling_rate=0.2, orders=[6])
    assert float(a.epsilon(6)) == float(b.epsilon(6))


def test_rdp_epsilon_is_above_the_pld_interval() -> None:
    """Case (c) of the accounting issue: RDP is a valid but looser bound than the PLD interval."""
    rdp = rdp_to_approx_dp(compose_rdp([(sampled_gaussian_rdp(sigma=1.0, sampling_rate=0.01), 1000)]), delta=1e-5)
    iv = subsampled_epsilon_interval(Gaussian(0, 1.0), Gaussian(1, 1.0), sampling_rate=0.01, k=1000, delta=1e-5)
    assert iv.upper < float(rdp.epsilon) < 1.2 * iv.upper


@pytest.mark.parametrize("kwargs, match", [
    (dict(sigma=0.0, sampling_rate=0.1), "sigma"),
    (dict(sigma=math.nan, sampling_rate=0.1), "sigma"),
    (dict(sigma=1.0, sampling_rate=0.0), "sampling_rate"),
    (dict(sigma=1.0, sampling_rate=1.5), "sampling_rate"),
    (dict(sigma=1.0, sampling_rate=0.1, orders=[1]), "> 1"),
    (dict(sigma=1.0, sampling_rate=0.1, orders=[math.nan]), "> 1"),
    (dict(sigma=1.0, sampling_rate=0.1, orders=[math.inf]), "> 1"),
    (dict(sigma=1.0, sampling_rate=0.1, orders=[]), "at least one"),
])
def test_bad_input(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sampled_gaussian_rdp(**kwargs)
