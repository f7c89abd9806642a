"""The chunked release path (issue 16, item 4): the same function of the values and the noise, in
chunks of 2^16 values, with memory near the output's size; the float64 Gaussian noise it adds.

References: :func:`dpkit.mechanisms._grid.noisy_grid` on the whole vector with the noise replayed
from the same seeded generator (itself checked against exact Fractions in test_discrete_release.py),
and, for the entries that leave the float64 path, the exact Fraction computation.
"""

from __future__ import annotations

import math
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit.mechanisms import Gaussian, Laplace
from dpkit.mechanisms import _grid
from dpkit.mechanisms._grid import noisy_grid, release_values
import dpkit.random._gaussian as gaussian_module
from dpkit.random import discrete_gaussian, discrete_laplace, insecure_seeded
from dpkit.random._gaussian import gaussian_noise

CHUNK = _grid._CHUNK


def _nearest(v: Fraction) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _laplace(n: int):  # type: ignore[no-untyped-def]
    m = Laplace(sensitivity=1.0, epsilon=1.0, dimension=n)
    return m, lambda seed: discrete_laplace(m.grid_scale, size=n, rng=insecure_seeded(seed))


def _gaussian(n: int):  # type: ignore[no-untyped-def]
    m = Gaussian(sensitivity=1.0, sigma=1.0, dimension=n)
    return m, lambda seed: gaussian_noise(m.grid_sigma, n, insecure_seeded(seed))


@pytest.mark.parametrize("make", [_laplace, _gaussian])
def test_chunked_release_is_one_function_of_values_and_noise(make) -> None:  # type: ignore[no-untyped-def]
    """Ordinary chunks (float64 path), a chunk with huge doubles, one with exact Fractions and huge
    integers, values on both sides of chunk boundaries: the whole release equals noisy_grid of the
    whole vector with the same noise, and the special entries equal the exact Fraction result."""
    n = 3 * CHUNK + 123
    m, replay = make(n)
    g = m.grid
    rng = np.random.default_rng(3)  # test data only
    values = (rng.standard_normal(n) * 1e3).astype(object)
    special = {CHUNK - 1: 1e300, CHUNK: -(2.0**62) * g, CHUNK + 7: (2.0**53 + 0.5) * g,  # chunk 1: doubles
               2 * CHUNK + 5: Fraction(2**80 + 1, 3), 2 * CHUNK + 9: 10**400, 3 * CHUNK - 1: -(2**70) - 1,
               n - 1: 2.5 * g}
    for i, v in special.items():
        values[i] = v
    floats, exact = release_values(values)
    noise = np.asarray(replay(8)).astype(np.int64)
    expected, expected_inexact = noisy_grid(floats.copy(), exact, g, noise)
    r = m.release(values, rng=insecure_seeded(8))
    np.testing.assert_array_equal(r.values, expected)
    assert r.interval.inexact is not None and expected_inexact is not None
    np.testing.assert_array_equal(r.interval.inexact, expected_inexact)
    for i, v in special.items():
        x = Fraction(v) if not isinstance(v, float) else Fraction(v)
        assert r.values[i] == _nearest((round(x / Fraction(g)) + int(noise[i])) * Fraction(g)), i
    # chunk 0 and the ordinary entries of the last chunk took the float64 path: exact, nothing inexact
    assert not r.interval.inexact[:CHUNK - 1].any()


@pytest.mark.parametrize("make", [_laplace, _gaussian])
def test_release_memory_is_the_output_and_small_chunks(make) -> None:  # type: ignore[no-untyped-def]
    """Peak allocation of a release of 2^21 doubles (16 MiB): the 16 MiB output and chunk-sized
    temporaries, at most 1.5x the input (the issue's bar is 2x; the unchunked path took 4-5x)."""
    n = 1 << 21
    m, _ = make(n)
    x = np.random.default_rng(0).standard_normal(n)
    m.release(x[: 1].repeat(n), rng=insecure_seeded(1))  # tables built before measuring
    tracemalloc.start()
    try:
        r = m.release(x, rng=insecure_seeded(2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.values.shape == (n,)
    assert peak <= 1.5 * x.nbytes, peak / x.nbytes


@pytest.mark.parametrize("sigma", [0.7, 300.0, 1234.5, 4.2e6, 3.0e8])
def test_gaussian_noise_is_the_sampler_stream_as_floats(sigma: float) -> None:
    """The release's float64 noise is, draw for draw, discrete_gaussian's stream (bins of width 1,
    offsets in the proposal's word, and offsets from a second word: b > 16 at sigma 3e8)."""
    n = 3 * CHUNK // 2
    a = gaussian_noise(sigma, n, insecure_seeded(4))
    b = discrete_gaussian(sigma, n, rng=insecure_seeded(4))
    assert a.dtype == np.float64 and np.array_equal(a, b)


def test_gaussian_noise_switches_to_int64_beyond_2_53(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A draw a double cannot hold makes the whole array int64, every value exact.  Such a draw (only a
    tail draw can be one) has probability below exp(-2**25); here tables cut at T = 4 (sigma 3.3, as
    in test_random_gaussian.py) send ~25% of proposals to the tails, and the limit is lowered to T + 1,
    which only tail draws reach, so that path runs on every block."""
    tab = gaussian_module._bins(3.3, 4)
    monkeypatch.setattr(gaussian_module, "_EXACT_FLOAT", tab.tail_start + 1)
    n = 3 * CHUNK // 2
    a = gaussian_module._float_draws(tab, n, insecure_seeded(6))
    b = gaussian_module._binned_draws(tab, n, insecure_seeded(6))
    assert a.dtype == np.int64 and np.array_equal(a, b) and (np.abs(b) > tab.tail_start).sum() > 100
    monkeypatch.setattr(gaussian_module, "_EXACT_FLOAT", 2**53)
    c = gaussian_module._float_draws(tab, n, insecure_seeded(6))
    assert c.dtype == np.float64 and np.array_equal(c, b)


def test_gaussian_release_noise_goodness_of_fit() -> None:
    """Chi-square of a Gaussian release's noise (grid units, sigma = 2^20) against the discrete
    Gaussian law, 40 equiprobable cells, alpha = 1e-6, n = 10^6; the same test rejects noise whose sigma
    is 1% too large.  Reference: Phi((k + 1/2) / sigma), which differs from the discrete Gaussian CDF by
    far less than 1e-15 at this sigma (Poisson summation: the corrections are of order
    exp(-2 pi^2 sigma^2))."""
    n = 1_000_000
    m = Gaussian(sensitivity=1.0, sigma=1.0, dimension=n)
    s = m.grid_sigma
    k = np.rint(m.release(np.zeros(n), rng=insecure_seeded(2026)).values / m.grid)
    edges = np.unique(np.ceil(stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * s - 0.5))  # cells (e_{i-1}, e_i]
    cdf = np.concatenate([[0.0], stats.norm.cdf((edges + 0.5) / s), [1.0]])
    expected = np.diff(cdf) * n

    def chi2(draws: np.ndarray) -> float:
        observed = np.bincount(np.searchsorted(edges, draws, side="left"), minlength=edges.size + 1)
        return float(np.sum((observed - expected) ** 2 / expected))

    crit = stats.chi2.isf(1e-6, df=edges.size)
    assert chi2(k) < crit
    assert chi2(discrete_gaussian(1.01 * s, n, rng=insecure_seeded(2027))) > crit
