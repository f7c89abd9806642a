"""Discrete Gaussian sampler: goodness of fit, power, the rigour of the float64 error bound, errors.

Statistical tests run at ALPHA = 1e-6 (see random_stats.py) with fixed insecure_seeded seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_stats import chi2_gof, gaussian_cdf

from dpkit.random import discrete_gaussian, insecure_seeded
from dpkit.random._gaussian import _gamma_estimate

N = 10**6
# Covers t = floor(sigma) + 1 = 1 (sigma < 1), the 31-bit proposal path (t <= 32), the 53-bit path.
SIGMAS = [0.25, 0.5, 1.0, math.sqrt(2.0), 3.3, 27.1, 100.0, 1234.5]


def _support(sigma: float) -> tuple[float, float]:
    return -60 * sigma - 60, 60 * sigma + 60


@pytest.mark.parametrize("sigma", SIGMAS)
def test_discrete_gaussian_fits_exact_pmf(sigma: float) -> None:
    samples = discrete_gaussian(sigma, N, rng=insecure_seeded(41))
    result = chi2_gof(samples, gaussian_cdf(sigma), support=_support(sigma))
    assert not result.rejects, result


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.3, 27.1, 1234.5])
def test_discrete_gaussian_test_has_power(sigma: float) -> None:
    """The same test at n = 10^6 rejects draws whose sigma is 1% too large."""
    samples = discrete_gaussian(sigma * 1.01, N, rng=insecure_seeded(42))
    assert chi2_gof(samples, gaussian_cdf(sigma), support=_support(sigma)).rejects


def test_extreme_sigmas() -> None:
    assert not discrete_gaussian(2.0**-40, 10**5, rng=insecure_seeded(43)).any()
    sigma = 2.0**40
    draws = discrete_gaussian(sigma, 10**5, rng=insecure_seeded(44)).astype(np.float64)
    # The variance of N_Z(0, sigma^2) is sigma^2 up to exp(-2 pi^2 sigma^2); sd of the estimate
    # of E[X^2]/sigma^2 is sqrt(2/n).
    assert abs((draws**2).mean() / sigma**2 - 1) < 6 * math.sqrt(2 / 10**5)


def test_reproducible_and_shaped() -> None:
    a = discrete_gaussian(5.0, (10, 3), rng=insecure_seeded(45))
    b = discrete_gaussian(5.0, (10, 3), rng=insecure_seeded(45))
    assert a.shape == (10, 3) and a.dtype == np.int64 and np.array_equal(a, b)
    assert isinstance(discrete_gaussian(5.0, rng=insecure_seeded(45)), np.int64)
    assert discrete_gaussian(5.0, 0, rng=insecure_seeded(45)).shape == (0,)
    assert discrete_gaussian(5.0, 7).shape == (7,)  # default secure generator


@settings(max_examples=300, deadline=None)
@given(
    sigma=st.floats(min_value=2.0**-40, max_value=2.0**40),
    y=st.integers(min_value=0, max_value=2**52 - 1),
)
def test_gamma_error_bound_is_rigorous(sigma: float, y: int) -> None:
    """|gamma_hat - gamma| <= g_err exactly, gamma = (|y| - sigma^2/t)^2 / (2 sigma^2)."""
    s2 = Fraction(sigma) ** 2
    t = math.floor(sigma) + 1
    c = s2 / t
    h = 1 / (2 * s2)
    for value in {y, min(y, 3), round(float(c)), math.floor(c), math.ceil(c)}:
        g_hat, g_err = _gamma_estimate(np.array([float(value)]), float(c), float(h))
        exact = (value - c) ** 2 * h
        assert abs(Fraction(float(g_hat[0])) - exact) <= Fraction(float(g_err[0]))


@pytest.mark.parametrize(
    ("sigma", "match"),
    [
        (math.nan, "sigma must be finite and > 0; got nan"),
        (math.inf, "sigma must be finite and > 0; got inf"),
        (-math.inf, "sigma must be finite and > 0; got -inf"),
        (0.0, "sigma must be finite and > 0; got 0.0"),
        (-2.0, "sigma must be finite and > 0; got -2.0"),
        (1e-13, r"sigma must be in \[2\*\*-40, 2\*\*40\]; got 1e-13"),
        (2.0**41, r"sigma must be in \[2\*\*-40, 2\*\*40\]"),
    ],
)
def test_bad_sigma(sigma: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        discrete_gaussian(sigma, 3, rng=insecure_seeded(0))


def test_bad_size_and_rng() -> None:
    with pytest.raises(ValueError, match="size must be a non-negative integer"):
        discrete_gaussian(1.0, (3, 1.5), rng=insecure_seeded(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rng must be"):
        discrete_gaussian(1.0, 3, rng=42)  # type: ignore[arg-type]
