"""Discrete Gaussian sampler: goodness of fit, power, rigour of the tables and float certificates,
the exact tail and fallback paths, errors.

Statistical tests run at ALPHA = 1e-6 (see random_stats.py) with fixed insecure_seeded seeds.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_stats import binomial_ok, chi2_gof, gaussian_cdf

from dpkit.random import discrete_gaussian, insecure_seeded
from dpkit.random._arith import exp_neg_enclosure
from dpkit.random._gaussian import (
    _Bins,
    _binned_draws,
    _bins,
    _exact_bin_accept,
    _first_tier,
    _second_tier,
    _tier1,
)

N = 10**6
# Bins of width 1 (sigma < 512), 4 (sigma = 1234.5) and 2**8 (sigma = 7.3e4).
SIGMAS = [0.25, 0.5, 1.0, math.sqrt(2.0), 3.3, 27.1, 100.0, 1234.5, 7.3e4]


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


def _f_enclosure(sigma: float, k: int, prec: int = 200) -> tuple[Fraction, Fraction]:
    """Independent enclosure of f(k) = exp(-k^2 / (2 sigma^2))."""
    lo, hi = exp_neg_enclosure(Fraction(k * k) / (2 * Fraction(sigma) ** 2), prec)
    return Fraction(lo, 1 << prec), Fraction(hi, 1 << prec)


def _bin_magnitude(tab: _Bins, j: int) -> int:
    """Smallest |k| in bin j (positive bins first, then negative ones)."""
    return (j % tab.nb) * (1 << tab.b) + (j >= tab.nb)


@settings(max_examples=40, deadline=None)
@given(sigma=st.floats(min_value=2.0**-40, max_value=2.0**40), data=st.data())
def test_tables_are_rigorous(sigma: float, data: st.DataObject) -> None:
    """W_j >= S f_j, acc_lo <= 2**32 rho_j <= acc_hi, tail weights dominate, alias law = W.

    Also the look-up tables of the fast path: ``pick`` is the alias choice (2c -> c, 2c+1 -> alias[c])
    and ``pick_acc_lo`` is ``acc_lo`` rescaled exactly to the ``u_bits``-bit prefix of U."""
    tab = _bins(sigma)
    w = 1 << tab.b
    assert tab.k_bits + tab.v_bits == 28 and 20 <= tab.u_bits <= 32
    assert sum(tab.weights) == 1 << 28 and min(tab.weights) >= 0
    n_out = len(tab.weights)
    for c in range(1 << tab.k_bits):
        assert tab.pick[2 * c + 1] == tab.alias[c]
        assert tab.pick[2 * c] == c or (c >= n_out and tab.thr[c] == 0)  # padding: never kept
    picked = tab.pick
    assert np.array_equal(np.abs(tab.pick_half) * 2, tab.base2[picked])
    assert np.array_equal(np.signbit(tab.pick_half), tab.flip[picked] < 0)
    assert np.array_equal(tab.pick_ystart, tab.ystart[picked].astype(np.float64))
    assert np.array_equal(tab.pick_tmin, tab.tmin[picked])
    assert not tab.tmin[2 * tab.nb :].any()  # tails and dummy: never accepted by tier 0
    k = 1 << tab.k_bits
    implied = [0] * k
    for c in range(k):
        implied[c] += int(tab.thr[c])
        implied[int(tab.alias[c])] += (1 << tab.v_bits) - int(tab.thr[c])
    assert implied[: len(tab.weights)] == list(tab.weights) and not any(implied[len(tab.weights) :])
    picks = {0, tab.nb - 1, tab.nb, 2 * tab.nb - 1}
    picks |= set(data.draw(st.lists(st.integers(0, 2 * tab.nb - 1), max_size=8)))
    for j in picks:
        lo, hi = _f_enclosure(sigma, _bin_magnitude(tab, j))
        wj = tab.weights[j]
        assert tab.scale * hi <= wj  # rho_j <= 1: the envelope dominates
        # tier 0: below the acceptance probability of the bin's last (least likely) value
        low, _ = _f_enclosure(sigma, _bin_magnitude(tab, j) + w - 1)
        assert Fraction(int(tab.tmin[j]), 1 << tab.u_bits) <= tab.scale * low / wj
        assert Fraction(float(tab.acc_lo[j])) <= (1 << 32) * tab.scale * lo / wj
        assert Fraction(float(tab.acc_hi[j])) >= (1 << 32) * tab.scale * hi / wj
    one = 1 << 200
    q_lo, q_hi = exp_neg_enclosure(1 / Fraction(tab.tail_scale), 200)
    assert Fraction(tab.tail_scale) >= Fraction(sigma) ** 2 / tab.tail_start
    for side in (0, 1):
        _, hi = _f_enclosure(sigma, tab.tail_start + side)
        assert tab.weights[2 * tab.nb + side] * w * Fraction(one - q_hi, one) >= tab.scale * hi
    if tab.b:
        delta_max = Fraction(w * (2 * tab.tail_start + w)) / (2 * Fraction(sigma) ** 2)
        assert delta_max <= Fraction(1, 4)


@settings(max_examples=300, deadline=None)
@given(
    sigma=st.floats(min_value=2.0**-40, max_value=2.0**40),
    data=st.data(),
)
def test_float_certificates_are_rigorous(sigma: float, data: st.DataObject) -> None:
    """Accept only if (u + 1) / 2**32 <= p, reject only if u / 2**32 >= p, p = S f(|y|) / W_j.

    ``u`` is drawn next to ``2**32 p``, where the certificates are tight; the same for the fast
    path's first tier (the ``pick_*`` tables and the ``u_bits``-bit prefix it draws) and for the
    second tier on such a prefix.
    """
    tab = _bins(sigma)
    j = data.draw(st.integers(0, 2 * tab.nb - 1))
    o = data.draw(st.integers(0, (1 << tab.b) - 1))
    m = _bin_magnitude(tab, j) + o
    lo, hi = _f_enclosure(sigma, m)
    p_lo, p_hi = tab.scale * lo / tab.weights[j], tab.scale * hi / tab.weights[j]
    centre = math.floor(p_lo * (1 << 32))
    u = data.draw(st.integers(max(0, centre - 3), min((1 << 32) - 1, centre + 3)))
    jj = np.array([j], dtype=np.int64)
    of = np.array([float(o)]) if tab.b else None
    uu = np.array([u], dtype=np.int64)
    first = bool(_first_tier(tab, jj, of, uu)[0])
    accept, reject = (bool(x[0]) for x in _second_tier(tab, jj, of, uu))
    if first or accept:
        assert Fraction(u + 1, 1 << 32) <= p_lo
    if reject:
        assert Fraction(u, 1 << 32) >= p_hi
    # the fast path: look-ups through pick (any slot that picks j), a u_bits-bit prefix of U
    slots = np.flatnonzero(tab.pick == j)
    assert slots.size
    k = int(data.draw(st.sampled_from(list(slots))))
    bits = tab.u_bits
    near = math.floor(p_lo * (1 << bits))
    u2 = data.draw(st.integers(max(0, near - 3), min((1 << bits) - 1, near + 3)))
    ub = np.array([u2], dtype=np.int64)
    if u2 < tab.pick_tmin[k]:  # tier 0
        assert Fraction(u2 + 1, 1 << bits) <= p_lo
    fast = bool(_tier1(tab.acc_lo[[j]] * 2.0 ** (bits - 32), tab.base2[[j]] if tab.b else None, of, tab.h, ub)[0])
    if fast:
        assert Fraction(u2 + 1, 1 << bits) <= p_lo
    accept2, reject2 = (bool(x[0]) for x in _second_tier(tab, jj, of, ub, bits))
    if accept2:
        assert Fraction(u2 + 1, 1 << bits) <= p_lo
    if reject2:
        assert Fraction(u2, 1 << bits) >= p_hi


def test_tails_and_exact_paths_fit() -> None:
    """Tables cut at ~1.2 sigma put ~25% of proposals in the (exact, Python) tails, and halved
    integer thresholds of tier 0 with widened float thresholds send ~2**-8 of proposals to the exact
    bin test; the law is unchanged."""
    for sigma, nb in [(3.3, 4), (1000.0, 600)]:  # w = 1 and w = 2
        tab = _bins(sigma, nb)
        widened = dataclasses.replace(
            tab,
            acc_lo=tab.acc_lo * (1 - 2.0**-8),  # still lower bounds
            acc_hi=tab.acc_hi * (1 + 2.0**-8),  # still upper bounds
            tmin=tab.tmin // 2,  # still lower bounds: about half the proposals reach tier 1
        )
        samples = _binned_draws(widened, 40_000, insecure_seeded(46))
        result = chi2_gof(samples, gaussian_cdf(sigma), support=_support(sigma))
        assert not result.rejects, (sigma, result)
        tail = np.abs(samples) >= tab.tail_start
        assert tail.mean() > 0.15  # the tails really were exercised


def test_exact_bin_acceptance_probability() -> None:
    """The exact fallback accepts with probability S f(|y|) / W_j (binomial test)."""
    tab = _bins(27.1)
    j, y = 20, 20  # positive bin 20 of width 1
    lo, _ = _f_enclosure(27.1, y)
    p = float(tab.scale * lo / tab.weights[j])
    rng = insecure_seeded(47)
    n = 20_000
    u32 = rng.integers(0, 1 << 32, size=n)
    hits = sum(_exact_bin_accept(tab, j, y, int(u), rng) for u in u32)
    assert binomial_ok(hits, n, p)


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
