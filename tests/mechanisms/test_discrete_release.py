"""The exact grid release (issue 14, item 4): every finite value is released, exactly, silently.

The reference for every released double is computed here independently with Fractions: the
half-to-even rounding of x / g, plus the integer noise replayed from the same seeded generator, times
g, rounded to the nearest double by Python (or +-inf beyond the largest double).
"""

from __future__ import annotations

import math
import sys
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpkit.mechanisms import DiscreteGaussianMechanism, Gaussian, Geometric, Laplace
from dpkit.mechanisms._grid import FAST_LIMIT, noisy_grid, release_values
from dpkit.random import discrete_gaussian, discrete_laplace, insecure_seeded

MAX = sys.float_info.max


def _nearest(v: Fraction) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _exact(x: object) -> Fraction:
    if isinstance(x, np.integer):
        return Fraction(int(x))  # Fraction(np.int64) would keep an overflowing int64 numerator
    if isinstance(x, np.floating):
        return Fraction(float(x))
    return Fraction(x)  # type: ignore[arg-type]


def _reference(values: list[object], grid: float, noise: np.ndarray) -> list[float]:
    g = Fraction(grid)
    return [_nearest((round(_exact(x) / g) + int(k)) * g) for x, k in zip(values, noise)]


def _same(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _laplace(n: int) -> tuple[object, object]:
    m = Laplace(sensitivity=1.0, epsilon=1.0, dimension=n)
    return m, lambda seed: discrete_laplace(m.grid_scale, size=n, rng=insecure_seeded(seed))


def _gaussian(n: int) -> tuple[object, object]:
    m = Gaussian(sensitivity=1.0, sigma=2.0, dimension=n)
    return m, lambda seed: discrete_gaussian(m.grid_sigma, size=n, rng=insecure_seeded(seed))


def _geometric(n: int) -> tuple[object, object]:
    m = Geometric(sensitivity=1, epsilon=0.5)
    return m, lambda seed: discrete_laplace(m.scale, size=n, rng=insecure_seeded(seed))


def _discrete_gaussian(n: int) -> tuple[object, object]:
    m = DiscreteGaussianMechanism(sensitivity=1, sigma=3.0, dimension=n)
    return m, lambda seed: discrete_gaussian(m.sigma, size=n, rng=insecure_seeded(seed))


def _real_values(g: float) -> list[object]:
    """Values of every size, ties on the grid, the 2^62-unit boundary, and exact non-doubles."""
    return [0.0, -0.0, 0.5 * g, 1.5 * g, -2.5 * g, 1.0 / 3.0, 2.0**40 * g, -(2.0**50) * g, 2.0**53 * g + g / 2,
            FAST_LIMIT * g * (1 - 2.0**-52), FAST_LIMIT * g, -FAST_LIMIT * g * (1 + 2.0**-52), 1e300, -1e300,
            MAX, -MAX, 5e-324, 2**70 + 1, -(10**400), 10**400, Fraction(1, 3), Fraction(2**80 + 1, 3),
            Decimal("1e400"), np.int64(2**62 + 1), np.uint64(2**64 - 1)]


def _integer_values() -> list[object]:
    return [0, 7, -7, 2**53, 2**53 + 1, -(2**53) - 1, 2**62 - 1, 2**62, -(2**62) - 1, -(2**63), 2**64 + 3,
            10**400, -(10**400), 1e300, -MAX, Decimal("1e500"), Fraction(6, 2), np.int64(-(2**63)),
            np.uint64(2**64 - 1), np.float64(2.0**60)]


@pytest.mark.parametrize("make, integer", [(_laplace, False), (_gaussian, False), (_geometric, True),
                                           (_discrete_gaussian, True)])
def test_every_finite_value_is_released_exactly_and_silently(make, integer) -> None:  # type: ignore[no-untyped-def]
    """Issue 14 item 4: no value is refused or quoted for its size; each output is fl((n + K) g)."""
    n = len(_integer_values() if integer else _real_values(1.0))
    m, replay = make(n)
    grid = getattr(m, "grid", 1.0)
    values = _integer_values() if integer else _real_values(grid)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning (overflow, cast) for any value either
        for seed in range(3):
            r = m.release(np.array(values, dtype=object), rng=insecure_seeded(seed))
            expected = _reference(values, grid, replay(seed))
            got = r.values.reshape(-1).tolist()
            assert all(_same(a, b) for a, b in zip(got, expected)), [
                (v, a, b) for v, a, b in zip(values, got, expected) if not _same(a, b)]
            assert r.values.dtype == np.float64 and r.insecure


@pytest.mark.parametrize("make", [_laplace, _gaussian])
def test_the_int64_path_and_the_exact_path_are_one_function(make) -> None:  # type: ignore[no-untyped-def]
    """The same values given as doubles (int64 path) and as Fractions (exact path) release the same doubles,
    so which path a value took cannot be seen; random values of every magnitude, ties included."""
    m, replay = make(402)
    g = m.grid
    rng = np.random.default_rng(5)  # test data only
    mags = 2.0 ** rng.integers(-12, 64, size=300) * g
    values = np.concatenate([rng.uniform(-1, 1, size=300) * mags, (np.arange(-50, 50) + 0.5) * g,
                             [FAST_LIMIT * g * (1 - 2.0**-53), -FAST_LIMIT * g]])
    doubles = m.release(values, rng=insecure_seeded(9))
    fractions = m.release(np.array([Fraction(float(v)) for v in values], dtype=object), rng=insecure_seeded(9))
    np.testing.assert_array_equal(doubles.values, fractions.values)
    np.testing.assert_array_equal(doubles.values, _reference(values.tolist(), g, replay(9)))
    assert doubles.interval.inexact is not None  # some noisy values here are beyond 2^53 grid units
    np.testing.assert_array_equal(doubles.interval.inexact, fractions.interval.inexact)
    for end in (0, 1):
        np.testing.assert_array_equal(doubles.interval[end], fractions.interval[end])


def test_integers_beyond_2_53_are_taken_exactly() -> None:
    """A double cannot hold 2^60 + 1; converting it would move the value by more than the sensitivity."""
    m = Geometric(sensitivity=1, epsilon=1.0)
    noise = int(discrete_laplace(m.scale, size=1, rng=insecure_seeded(4))[0])
    for x in (2**60, 2**60 + 1, 2**60 + 3):
        got = m.release(x, rng=insecure_seeded(4)).value
        assert got == float(x + noise)  # the exact noisy integer, rounded once
        same = m.release(np.array([x], dtype=np.int64), rng=insecure_seeded(4)).value
        assert same == got
    floats, exact = release_values([2**60 + 1, 3])
    assert exact == {0: Fraction(2**60 + 1)} and floats[1] == 3.0


def test_long_double_inputs_are_taken_exactly() -> None:
    if np.finfo(np.longdouble).nmant <= 52:
        pytest.skip("long double is a double here")
    x = np.longdouble(2**60) + np.longdouble(1)
    floats, exact = release_values(np.array([x, 1.5], dtype=np.longdouble))
    assert exact == {0: Fraction(2**60 + 1)} and floats[1] == 1.5


def test_intervals_cover_the_truth_whatever_the_rounding() -> None:
    """The interval contains [v - half, v + half], v the exact noisy value, for every output (inf included)."""
    m, replay = _laplace(len(_real_values(1.0)))
    values = _real_values(m.grid)
    r = m.release(np.array(values, dtype=object), rng=insecure_seeded(2), confidence=0.9)
    lo, hi = r.interval
    g = Fraction(m.grid)
    half = Fraction(r.interval.half_width)
    for x, k, a, b in zip(values, replay(2), lo.tolist(), hi.tolist()):
        v = (round(_exact(x) / g) + int(k)) * g
        assert a == -math.inf or Fraction(a) <= v - half, (x, a)
        assert b == math.inf or Fraction(b) >= v + half, (x, b)
        assert a <= b
    # ordinary values: the interval is exactly value -/+ half, as before
    small = Laplace(sensitivity=1.0, epsilon=1.0, dimension=3).release([1.0, -2.0, 1e6], rng=insecure_seeded(1))
    np.testing.assert_array_equal(small.interval[0], small.values - small.interval.half_width)
    np.testing.assert_array_equal(small.interval[1], small.values + small.interval.half_width)
    assert small.interval.inexact is None


def test_what_is_returned_depends_on_the_exact_noisy_value_only() -> None:
    """inexact is None exactly when every released double is exact, whichever path produced it."""
    g = 2.0**-10
    floats = np.array([2.0**52 * g, 1.0])  # n = 2^52: not 'exact everywhere' by the fast bound ...
    out, inexact = noisy_grid(floats, {}, g, np.array([-5, 3], dtype=np.int64))
    assert inexact is None  # ... but every noisy value is below 2^53 units, so nothing is inexact
    out, inexact = noisy_grid(np.array([2.0**53 * g]), {}, g, np.array([1], dtype=np.int64))
    assert inexact is not None and inexact.tolist() == [True]
    out, inexact = noisy_grid(np.array([2.0**53 * g]), {}, g, np.array([2], dtype=np.int64))
    assert inexact is None and out[0] == (2.0**53 + 2) * g


@pytest.mark.parametrize("m", [Laplace(sensitivity=1.0, epsilon=1.0, dimension=3),
                               Gaussian(sensitivity=1.0, sigma=1.0, dimension=3),
                               Geometric(sensitivity=1, epsilon=1.0),
                               DiscreteGaussianMechanism(sensitivity=1, sigma=1.0, dimension=3)])
def test_refusals_concern_the_form_and_never_quote_the_data(m) -> None:  # type: ignore[no-untyped-def]
    """NaN/inf and non-integers stay refused (caller errors), with one message for all data."""
    messages = set()
    for bad in ([1.5, math.nan, 7.0], [2.0, 3.0, math.inf], [-math.inf, 123456.0, 0.0]):
        with pytest.raises(ValueError, match="refused, never noised") as info:
            m.release(bad)
        messages.add(str(info.value))
    assert len(messages) == 1
    (message,) = messages
    assert not any(ch.isdigit() for ch in message)
    if isinstance(m, (Geometric, DiscreteGaussianMechanism)):
        texts = set()
        for bad in ([1.0, 2.5, 3.0], [0.25, 1.0, 2.0]):
            with pytest.raises(ValueError, match="releases integers") as info:
                m.release(bad)
            texts.add(str(info.value))
        assert len(texts) == 1 and "2.5" not in texts.pop()
    with pytest.raises(TypeError, match="real numbers"):
        m.release(np.array([1 + 2j, 1, 1]))
    with pytest.raises(TypeError, match="real numbers"):
        m.release(np.array(["a", "b", "c"], dtype=object))


def test_discrete_gaussian_vector_needs_its_dimension() -> None:
    with pytest.raises(ValueError, match="releases 1 value"):
        DiscreteGaussianMechanism(sensitivity=1, sigma=1.0).release([1, 2])
    r = DiscreteGaussianMechanism(sensitivity=2, sigma=1.0, dimension=4).release(
        [10, 20, 30, 40], rng=insecure_seeded(0)
    )
    assert r.values.shape == (4,)
