"""The exact arithmetic behind the samplers: enclosures of exp(-x), lazy uniforms, exact Bernoullis.

Reference values: mpmath at 400 bits (mp.dps ~ 120), computed in the test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_stats import binomial_ok

from dpkit.random import insecure_seeded
from dpkit.random._arith import (
    LazyUniform,
    bernoulli_exact,
    bernoulli_exp_exact,
    exp_neg_enclosure,
    floor_scaled,
    fraction_enclosure,
)


def _mp_check(x: Fraction, prec: int, lo: int, hi: int) -> bool:
    """lo <= 2**prec * exp(-x) <= hi, with exp from mpmath at prec + 400 bits."""
    with mpmath.workprec(prec + 400):
        value = mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator) * mpmath.mpf(2) ** prec
        return bool(lo <= value <= hi)


def _mp_floor(x: Fraction, prec: int) -> int:
    with mpmath.workprec(prec + 400):
        return int(mpmath.floor(mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator) * 2**prec))


@pytest.mark.parametrize(
    "x",
    [
        Fraction(0),
        Fraction(1, 10**9),
        Fraction(1, 3),
        Fraction(1, 2),
        Fraction(1),
        Fraction(7, 2),
        Fraction(1e-300),
        Fraction(123456789, 1000),
        Fraction(10**6),
        1 / Fraction(1e-300),
    ],
)
@pytest.mark.parametrize("prec", [1, 64, 200])
def test_exp_neg_enclosure_contains_the_value(x: Fraction, prec: int) -> None:
    lo, hi = exp_neg_enclosure(x, prec)
    assert _mp_check(x, prec, lo, hi)
    assert hi - lo <= 2


@settings(max_examples=200, deadline=None)
@given(
    num=st.integers(min_value=0, max_value=10**12),
    den=st.integers(min_value=1, max_value=10**12),
    prec=st.integers(min_value=1, max_value=300),
)
def test_exp_neg_enclosure_property(num: int, den: int, prec: int) -> None:
    x = Fraction(num, den)
    lo, hi = exp_neg_enclosure(x, prec)
    assert _mp_check(x, prec, lo, hi)
    assert 0 <= hi - lo <= 2


def test_floor_scaled_matches_mpmath() -> None:
    for x in [Fraction(1, 7), Fraction(3), Fraction(50)]:
        floor = floor_scaled(lambda prec, x=x: exp_neg_enclosure(x, prec), 64)
        assert floor == _mp_floor(x, 64)


def test_lazy_uniform_decides_from_prefix_without_drawing() -> None:
    rng = insecure_seeded(0)
    state = rng.bit_generator.state
    u = LazyUniform(0b1010, 4, rng)  # U in [10/16, 11/16)
    assert u.less_than(fraction_enclosure(Fraction(3, 4)))
    assert not u.less_than(fraction_enclosure(Fraction(5, 8)))  # U >= 10/16 exactly
    assert u.nbits == 4 and rng.bit_generator.state == state


def test_lazy_uniform_extends_on_a_tie_with_the_right_probability() -> None:
    """t inside the prefix interval: P(U < t | prefix) = (t - lo) / width = 1/3."""
    rng = insecure_seeded(1)
    prefix, nbits = 12345, 20
    t = Fraction(3 * prefix + 1, 3 << nbits)
    n = 30_000
    hits = sum(LazyUniform(prefix, nbits, rng).less_than(fraction_enclosure(t)) for _ in range(n))
    assert binomial_ok(hits, n, 1 / 3)


@pytest.mark.parametrize("p", [Fraction(0), Fraction(1, 3), Fraction(1, 2**70), Fraction(1)])
def test_bernoulli_exact(p: Fraction) -> None:
    rng = insecure_seeded(2)
    n = 20_000
    hits = sum(bernoulli_exact(p, rng) for _ in range(n))
    assert binomial_ok(hits, n, float(p))


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(17, 5)])
def test_bernoulli_exp_exact(gamma: Fraction) -> None:
    """CKS Algorithm 1 in pure Python (the samplers' last-resort path)."""
    rng = insecure_seeded(3)
    n = 20_000
    hits = sum(bernoulli_exp_exact(gamma, rng) for _ in range(n))
    assert binomial_ok(hits, n, math.exp(-float(gamma)))


def test_lazy_uniform_rejects_a_bad_prefix() -> None:
    with pytest.raises(AssertionError):
        LazyUniform(16, 4, insecure_seeded(0))
    assert np.uint64(0) == 0  # numpy imported for parity with the samplers' word type
