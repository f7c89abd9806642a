r"""Exact arithmetic behind the samplers: rigorous enclosures and lazily refined uniforms.

Everything here is pure Python integer arithmetic, so every statement is exact:

* :func:`exp_neg_enclosure` returns integers ``lo <= 2**prec * exp(-x) <= hi`` for a rational
  ``x >= 0`` (argument halving, an alternating Taylor series with directed rounding, repeated
  squaring with directed rounding).  No floating point and no library ``exp`` is involved, which is
  why this is hand-written: ``math.exp`` and NumPy's ``exp`` carry no error bound we could rely on,
  and mpmath (a test-only dependency) does not promise rigorous enclosures either.
* :class:`LazyUniform` is a uniform real ``U`` in ``[0, 1)`` of which only a binary prefix has been
  drawn; :meth:`LazyUniform.less_than` decides ``U < t`` exactly for any real ``t`` given by
  enclosures, drawing further 64-bit words from the generator only when the prefix drawn so far
  cannot decide.  With ideal random bits the answer is ``True`` with probability exactly ``t``
  (von Neumann's and Knuth-Yao's observation that a comparison of a uniform with a threshold
  needs, on average, two bits).

The vectorised samplers decide almost every comparison in NumPy and hand the rare undecided ones
(probability below ``2**-45`` each) to these functions; that hand-over is what makes the samplers
exact rather than exact-up-to-rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

#: An enclosure of a real ``t``: ``enclose(prec)`` returns integers ``lo <= 2**prec * t <= hi``.
Enclosure = Callable[[int], tuple[int, int]]

_GUARD = 32


def _floor_div(a: int, b: int) -> int:
    return a // b


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def exp_neg_enclosure(x: Fraction, prec: int) -> tuple[int, int]:
    r"""Integers ``(lo, hi)`` with ``lo <= 2**prec * exp(-x) <= hi`` for rational ``x >= 0``.

    ``hi - lo`` is at most a few units for any ``x`` (the relative width is about
    ``2**-(prec + 26)`` of the value before the final rounding to ``prec`` bits).

    Notes
    -----
    With ``y = x / 2^k <= 1/2`` the series :math:`e^{-y} = \sum_j (-y)^j / j!` alternates with
    decreasing terms, so a partial sum ending on a subtracted term is a lower bound and one ending
    on an added term an upper bound.  Terms are carried as fixed-point integers rounded down for
    the lower bound and up for the upper one; then :math:`e^{-x} = (e^{-y})^{2^k}` by ``k``
    squarings, again rounded outwards.
    """
    assert x >= 0, x
    one = 1 << prec
    if x == 0:
        return one, one
    whole = x.numerator // x.denominator
    k = whole.bit_length() + 1 if x > Fraction(1, 2) else 0  # x / 2**k <= 1/2
    q = prec + k + _GUARD
    num, den = x.numerator << q, x.denominator << k  # y * 2**q = num / den
    z_small, z_large = _floor_div(num, den), _ceil_div(num, den)
    lo = _alternating_exp(z_large, q, lower=True)  # larger argument, smaller value
    hi = _alternating_exp(z_small, q, lower=False)
    for _ in range(k):
        lo = (lo * lo) >> q
        hi = _ceil_div(hi * hi, 1 << q)
    shift = q - prec
    return lo >> shift, _ceil_div(hi, 1 << shift)


def _alternating_exp(z: int, q: int, *, lower: bool) -> int:
    """Bound ``2**q * exp(-z / 2**q)`` for ``0 <= z <= 2**(q - 1) + 1``; see exp_neg_enclosure."""
    scale = 1 << q
    total = scale
    t_down = t_up = scale  # bounds on 2**q * (z / 2**q)**j / j!
    j = 0
    last_sign_negative = False
    while True:
        j += 1
        t_down = (t_down * z) // (j * scale)
        t_up = _ceil_div(t_up * z, j * scale)
        negative = j % 2 == 1
        if lower:
            total += -t_up if negative else t_down
        else:
            total += -t_down if negative else t_up
        last_sign_negative = negative
        # Stop once the terms are negligible and the partial sum ends on the right sign:
        # a lower bound must end on a subtracted term, an upper bound on an added one.
        if t_up <= 1 and last_sign_negative == lower:
            return max(total, 0)


def fraction_enclosure(value: Fraction) -> Enclosure:
    """The exact enclosure ``floor, ceil`` of ``2**prec * value`` for a rational ``value``."""

    def enclose(prec: int) -> tuple[int, int]:
        n = value.numerator << prec
        return _floor_div(n, value.denominator), _ceil_div(n, value.denominator)

    return enclose


def floor_scaled(enclose: Enclosure, bits: int) -> int:
    """``floor(2**bits * t)`` for the irrational ``t`` that ``enclose`` describes.

    Precision is raised until the enclosure decides the floor; this terminates whenever ``t`` is
    not a dyadic rational (for example ``exp(-x)`` with rational ``x != 0``).
    """
    prec = bits + 64
    while True:
        lo, hi = enclose(prec)
        shift = prec - bits
        if lo >> shift == hi >> shift:
            return lo >> shift
        prec *= 2


def random_word(rng: np.random.Generator) -> int:
    """One uniform 64-bit word from ``rng`` as a Python int."""
    return int(rng.integers(0, 1 << 64, dtype=np.uint64))


class LazyUniform:
    """A uniform real ``U`` in ``[0, 1)`` known through a binary prefix, extended on demand.

    ``U`` lies in ``[prefix / 2**nbits, (prefix + 1) / 2**nbits)``; its further bits are drawn
    64 at a time from ``rng`` when a comparison needs them, so they are independent of everything
    the caller has looked at.
    """

    __slots__ = ("nbits", "prefix", "rng")

    def __init__(self, prefix: int, nbits: int, rng: np.random.Generator) -> None:
        assert 0 <= prefix < (1 << nbits)
        self.prefix = prefix
        self.nbits = nbits
        self.rng = rng

    def less_than(self, enclose: Enclosure) -> bool:
        """Decide ``U < t`` exactly, where ``enclose`` gives enclosures of ``t``."""
        while True:
            prec = self.nbits + 64
            lo, hi = enclose(prec)
            shift = prec - self.nbits
            if (self.prefix + 1) << shift <= lo:  # U < upper end of prefix interval <= t
                return True
            if self.prefix << shift >= hi:  # U >= lower end of prefix interval >= t
                return False
            self.prefix = (self.prefix << 64) | random_word(self.rng)
            self.nbits += 64


def bernoulli_exact(p: Fraction, rng: np.random.Generator) -> bool:
    """An exact Bernoulli(p) draw for rational ``p`` (pure Python; for slow paths only)."""
    if p <= 0:
        return False
    if p >= 1:
        return True
    return LazyUniform(random_word(rng), 64, rng).less_than(fraction_enclosure(p))


def bernoulli_exp_exact(gamma: Fraction, rng: np.random.Generator) -> bool:
    """Bernoulli(exp(-gamma)) for rational ``gamma >= 0`` by CKS 2020 Algorithm 1, in Python.

    Used only where the vectorised path cannot decide (probability below ``2**-45`` per sample).
    """
    assert gamma >= 0
    whole = gamma.numerator // gamma.denominator
    if whole > 0:
        # Bernoulli(exp(-whole)) directly against an enclosure of exp(-whole): one comparison
        # instead of ``whole`` rounds of Algorithm 1 (same distribution).
        u = LazyUniform(random_word(rng), 64, rng)
        if not u.less_than(lambda prec: exp_neg_enclosure(Fraction(whole), prec)):
            return False
    frac = gamma - whole
    k = 1
    while bernoulli_exact(frac / k, rng):  # CKS Alg 1: A_k ~ Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1
