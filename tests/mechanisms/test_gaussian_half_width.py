"""The discrete Gaussian noise's interval half-width beyond sigma = 1000 (a tail bound in closed form, no
table): the interval holds the noise with at least the stated probability (against an exact 30-digit sum)
and is at most two units wider than the exact quantile."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.distributions import DiscreteGaussian
from dpkit.mechanisms import Gaussian
from dpkit.mechanisms.gaussian import discrete_gaussian_half_width


def _exact_outside(sigma: float, w: int) -> mp.mpf:
    """P(|X| > w) for X ~ N_Z(0, sigma^2): 2 sum_{k > w} e^{-k^2/(2 sigma^2)} / theta at 30 digits, theta by
    Poisson summation (sigma sqrt(2 pi) (1 + 2 sum_n e^{-2 pi^2 sigma^2 n^2}), the sum below 1e-30 here); the
    terms past k^2 >= (w+1)^2 + 140 (2 sigma^2) are below e^{-140} of the first and are left out."""
    with mp.workdps(30):
        s2 = 2 * mp.mpf(sigma) ** 2
        theta = mp.sqrt(mp.pi * s2) * (1 + 2 * mp.fsum(mp.exp(-mp.pi**2 * s2 * n * n) for n in range(1, 4)))
        top = int(math.isqrt((w + 1) ** 2 + int(140 * 2 * sigma**2))) + 2
        return 2 * mp.fsum(mp.exp(-mp.mpf(k) ** 2 / s2) for k in range(w + 1, top + 1)) / theta


@pytest.mark.parametrize("sigma", [1000.5, 1500.0, 4096.0])
@pytest.mark.parametrize("confidence", [0.5, 0.95, 0.999999])
def test_half_width_holds_the_noise_and_is_nearly_the_quantile(sigma: float, confidence: float) -> None:
    w = int(discrete_gaussian_half_width(sigma, confidence))
    assert _exact_outside(sigma, w) <= 1 - confidence
    assert _exact_outside(sigma, w - 2) > 1 - confidence  # at most two units wider than needed
    exact = float(DiscreteGaussian(0, sigma).quantile(0.5 + confidence / 2.0))  # the table's quantile
    assert exact <= w <= exact + 2


def test_beyond_the_tables_the_interval_is_the_tail_bounds_not_the_sub_gaussian_one() -> None:
    """sigma = 10^6 (no table): about 1.96 sigma at 95%, where the sub-Gaussian bound gives 2.72 sigma."""
    w = discrete_gaussian_half_width(1e6, 0.95)
    assert 1.959e6 < w < 1.961e6
    assert 8.2e6 < discrete_gaussian_half_width(1e6, 1.0 - 2.0**-53) < 8.3e6  # 1 - confidence at its smallest


def test_a_release_at_a_large_grid_sigma_covers_with_its_interval() -> None:
    """A vector release at grid sigma 2^16 reports the closed-form half-width (no table is built)."""
    m = Gaussian(sensitivity=1.0, sigma=2.0, dimension=1000)
    r = m.release([0.0] * 1000, confidence=0.95)
    lo, hi = r.interval
    half = discrete_gaussian_half_width(m.grid_sigma, 0.95) * m.grid
    assert float(hi[0] - r.values[0]) >= half * (1 - 1e-12)


@pytest.mark.parametrize("sigma", [1e20, 1e30, 1e100])
def test_half_width_of_a_huge_sigma_takes_few_evaluations(sigma: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smallest w was found one unit at a time from the continuous quantile less 2: the 1e-12 float margin
    needs about 1e-12 sigma such steps (28 s at sigma = 1e20, and no end where a unit no longer moves the float
    bound).  The search doubles its step and bisects: evaluations of the bound logarithmic in sigma, and the
    width still holds the noise (at least the continuous quantile, about 1.96 sigma at 95%)."""
    import scipy.special

    calls = [0]
    erfc = scipy.special.erfc

    def counted(x: float) -> float:
        calls[0] += 1
        if calls[0] > 1000:
            raise AssertionError("more than 1000 evaluations of the tail bound")
        return float(erfc(x))

    monkeypatch.setattr(scipy.special, "erfc", counted)
    w = discrete_gaussian_half_width(sigma, 0.95)
    assert calls[0] <= 2.0 * math.log2(sigma) + 20.0  # logarithmic in sigma
    assert w >= sigma * math.sqrt(2.0) * float(mp.erfinv(mp.mpf("0.95")))  # at least the continuous quantile
    assert w <= 1.96 * sigma * 1.001
