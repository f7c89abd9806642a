"""Discrete Laplace and geometric samplers: goodness of fit, power, exact paths, errors.

Statistical tests run at ALPHA = 1e-6 (see random_stats.py) with fixed insecure_seeded seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from random_stats import chi2_gof, geometric_cdf, laplace_cdf

from dpkit.random import discrete_laplace, geometric, insecure_seeded
from dpkit.random._arith import exp_neg_enclosure
from dpkit.random._geometric import (
    _enclose_threshold,
    _exact_count,
    _fast_counts,
    _laplace_draws,
    _low_bits,
    _thresholds,
)

N = 10**6
N_POWER = 2 * 10**6  # 32 cells at alpha = 1e-6: power ~0.98 at 10^6, ~1 - 1e-6 at 2*10^6
# Scales cover: small (P(X != 0) = 0.25%), the 31-bit fast path (<= 32), the 53-bit
# path with one and two table levels, and the split path above 2**20.
SCALES = [0.15, 0.3, 1.0, 2.5, 31.0, 100.0, 12345.6, 2.0**20, 3.0e6, 1e9]


def _support(scale: float) -> tuple[float, float]:
    return -100 * scale - 100, 100 * scale + 100


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_fits_exact_pmf(scale: float) -> None:
    samples = discrete_laplace(scale, N, rng=insecure_seeded(11))
    result = chi2_gof(samples, laplace_cdf(scale), support=_support(scale))
    assert not result.rejects, result


@pytest.mark.parametrize("scale", [0.3, 1.0, 31.0, 12345.6, 3.0e6])
def test_discrete_laplace_test_has_power(scale: float) -> None:
    """The same test rejects draws whose scale is 1% too large (n = 2*10^6, see N_POWER)."""
    samples = discrete_laplace(scale * 1.01, N_POWER, rng=insecure_seeded(12))
    assert chi2_gof(samples, laplace_cdf(scale), support=_support(scale)).rejects
    # and accepts correct draws of the same size
    samples = discrete_laplace(scale, N_POWER, rng=insecure_seeded(13))
    assert not chi2_gof(samples, laplace_cdf(scale), support=_support(scale)).rejects


@pytest.mark.parametrize("scale", [0.3, 1.0, 40.0, 12345.6, 3.0e6])
def test_geometric_fits_exact_pmf(scale: float) -> None:
    samples = geometric(scale, N, rng=insecure_seeded(21))
    assert samples.min() >= 0
    result = chi2_gof(samples, geometric_cdf(scale), support=(0, 100 * scale + 100))
    assert not result.rejects, result


def test_geometric_test_has_power() -> None:
    samples = geometric(7.0 * 1.01, N_POWER, rng=insecure_seeded(22))
    assert chi2_gof(samples, geometric_cdf(7.0), support=(0, 800)).rejects


def test_tiny_scale_is_all_zero() -> None:
    assert not discrete_laplace(1e-300, 10**5, rng=insecure_seeded(1)).any()
    assert not geometric(1e-3, 10**5, rng=insecure_seeded(1)).any()


def test_largest_scale_moments() -> None:
    scale = 2.0**50
    samples = discrete_laplace(scale, 10**5, rng=insecure_seeded(2)).astype(np.float64)
    # E|X| = 2q/(1-q^2) ~ scale; the sample mean of |X|/scale has sd ~ 1/sqrt(n).
    assert abs(np.abs(samples).mean() / scale - 1) < 6 / math.sqrt(10**5)


# --- the exact machinery itself -----------------------------------------------------------------


@pytest.mark.parametrize(("scale", "two_sided"), [(0.3, True), (1.0, False), (100.0, True), (1e9, False)])
def test_table_entries_within_stated_rounding(scale: float, two_sided: bool) -> None:
    """Each table float is within 1.01 * 2**-53 (relative) of its exact value, or clamped above."""
    th = _thresholds(scale, two_sided)
    rng = np.random.default_rng(0)
    for level, table in enumerate(th.levels):
        for v in rng.choice(table.size, size=min(table.size, 40), replace=False):
            x = Fraction(int(v) * 4096**level) * th.a
            lo, hi = exp_neg_enclosure(x, 300)
            if level == 0:
                c_lo, c_hi = _enclose_threshold(th.a, two_sided, 0)(300)
                lo, hi = (lo * c_lo) >> 300, -((-hi * c_hi) >> 300)
            exact = Fraction(lo, 1 << 300)
            assert hi - lo <= 4
            value = Fraction(float(table[v]))
            if value == Fraction(2) ** -80:
                assert exact <= value
            else:
                assert abs(value - exact) <= Fraction(101, 100) * Fraction(1, 2**53) * exact + Fraction(
                    hi - lo, 1 << 300
                )


@pytest.mark.parametrize(("scale", "two_sided"), [(0.7, True), (5.0, False), (3000.0, True), (2.0**20, False)])
def test_fast_path_agrees_with_exact_path_near_thresholds(scale: float, two_sided: bool) -> None:
    """Adversarial uniforms next to each threshold: a certified fast answer is the exact one."""
    th = _thresholds(scale, two_sided)
    bits = th.bits
    ks = sorted({1, 2, 3, 5, 8, 13, int(scale), int(3 * scale) + 1, int(20 * scale) + 1})
    prefixes = []
    for k in ks:
        lo, _ = _enclose_threshold(th.a, two_sided, k)(bits + 64)
        centre = lo >> 64  # floor(2**bits t(k))
        prefixes += [p for p in range(centre - 2, centre + 3) if 0 <= p < 1 << bits]
    prefixes += list(np.random.default_rng(1).integers(0, 1 << bits, size=2000))
    prefix = np.array(prefixes, dtype=np.int64)
    x, ok = _fast_counts(th, prefix)
    rng = insecure_seeded(3)
    certified = np.flatnonzero(ok)
    assert certified.size > 0.9 * prefix.size
    for i in certified:
        assert _exact_count(th, int(prefix[i]), int(x[i]), rng) == x[i]
    # Uncertified prefixes sit at thresholds: the exact path must resolve them (drawing bits).
    for i in np.flatnonzero(~ok)[:50]:
        _exact_count(th, int(prefix[i]), int(x[i]), rng)


def test_exact_path_alone_fits_exact_pmf() -> None:
    """The Python slow path (used for ~2**-45 of draws) is itself exact: fit 3000 of its draws."""
    scale = 1.7
    th = _thresholds(scale, True)
    rng = insecure_seeded(4)
    prefix = rng.integers(0, 1 << th.bits, size=3000)
    sign = rng.integers(0, 2, size=3000).astype(bool)
    draws = np.array([_exact_count(th, int(p), 0, rng) for p in prefix])
    draws[sign] *= -1
    result = chi2_gof(draws, laplace_cdf(scale), bins=8, support=_support(scale))
    assert not result.rejects, result


def test_low_bits_of_split_geometric_fit() -> None:
    """R = G mod 2**s of a geometric law with scale 2**21.5 (the split path): pmf ~ exp(-r/scale)."""
    scale, s = 2.0**21.5, 2
    draws = _low_bits(scale, s, 4 * 10**6, insecure_seeded(5))
    weights = np.exp(-np.arange(4) / scale)
    expected = weights / weights.sum() * draws.size
    observed = np.bincount(draws, minlength=4)
    from scipy import stats

    statistic = ((observed - expected) ** 2 / expected).sum()
    assert statistic < stats.chi2.isf(1e-6, 3)


def test_split_path_nonzero_mass() -> None:
    """Above 2**20 the zero atom is decided separately: P(0) = (1-q)/(1+q) ~ 1/(2 scale)."""
    scale = 2.0**21
    draws = _laplace_draws(scale, 10**6, insecure_seeded(6))
    from random_stats import binomial_ok

    q = math.exp(-1 / scale)
    assert binomial_ok(int((draws == 0).sum()), draws.size, (1 - q) / (1 + q))


# --- interface -------------------------------------------------------------------------------------


def test_shapes_dtypes_and_scalars() -> None:
    rng = insecure_seeded(7)
    assert discrete_laplace(2.0, (3, 4), rng=rng).shape == (3, 4)
    assert discrete_laplace(2.0, 0, rng=rng).shape == (0,)
    assert isinstance(discrete_laplace(2.0, rng=rng), np.int64)
    assert isinstance(geometric(2.0, rng=rng), np.int64)
    assert geometric(2.0, [2, 2], rng=rng).dtype == np.int64


def test_reproducible_with_insecure_seed() -> None:
    a = discrete_laplace(3.0, 1000, rng=insecure_seeded(99))
    b = discrete_laplace(3.0, 1000, rng=insecure_seeded(99))
    assert np.array_equal(a, b)


def test_default_rng_is_used() -> None:
    assert discrete_laplace(3.0, 10).shape == (10,)
    assert geometric(3.0, 10).shape == (10,)


@pytest.mark.parametrize("sampler", [discrete_laplace, geometric])
@pytest.mark.parametrize(
    ("scale", "match"),
    [
        (math.nan, "scale must be finite and > 0; got nan"),
        (math.inf, "scale must be finite and > 0; got inf"),
        (-math.inf, "scale must be finite and > 0; got -inf"),
        (0.0, "scale must be finite and > 0; got 0.0"),
        (-1.0, "scale must be finite and > 0; got -1.0"),
        (2.0**51, r"scale must be <= 2\*\*50"),
    ],
)
def test_bad_scale(sampler, scale: float, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        sampler(scale, 3, rng=insecure_seeded(0))


@pytest.mark.parametrize("sampler", [discrete_laplace, geometric])
@pytest.mark.parametrize("size", [-1, 2.5, math.nan, (2, -3), True])
def test_bad_size(sampler, size: object) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="size must be a non-negative integer"):
        sampler(1.0, size, rng=insecure_seeded(0))


@pytest.mark.parametrize("sampler", [discrete_laplace, geometric])
def test_bad_types(sampler) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="size must be"):
        sampler(1.0, "3", rng=insecure_seeded(0))
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        sampler(1.0, 3, rng=np.random.PCG64(0))
    with pytest.raises(TypeError, match="scale must be a real number"):
        sampler("1.0", 3, rng=insecure_seeded(0))
