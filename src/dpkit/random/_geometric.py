r"""Exact geometric and discrete Laplace samplers, vectorised by inversion against exact thresholds.

Contract
--------
``geometric(scale)`` has pmf :math:`(1 - q) q^k` on :math:`k = 0, 1, \dots` and
``discrete_laplace(scale)`` has pmf :math:`\frac{1 - q}{1 + q} q^{|k|}` on the integers, with
:math:`q = e^{-1/\mathrm{scale}}`, for any float ``scale`` in ``(0, 2**50]`` taken as the exact
dyadic rational it is.  Given ideal uniform random bits, the output distribution is *exactly* that
pmf: there is no truncation, no floating-point rounding that depends on the data, and no
approximation of :math:`e^{-1/\mathrm{scale}}`.  (The one caveat is representability: a draw beyond
``2**62`` in absolute value, probability below :math:`e^{-2^{11}}` at the largest scale, raises
:class:`~dpkit.errors.NumericalAccuracyError` instead of returning.)

How
---
Write the target as "count the thresholds above a uniform": with :math:`t(k) = c\,q^k` (``c = 1``
for the geometric, ``c = 2 / (1 + q)`` for the magnitude of the discrete Laplace) and ``U`` uniform
on [0, 1),

.. math:: M = \#\{k \ge 1 : U < t(k)\}

has :math:`P(M \ge k) = t(k)`, which is the geometric law, and for the discrete Laplace
:math:`P(M = 0) = 1 - 2q/(1 + q) = (1 - q)/(1 + q)` and :math:`P(M = k) = 2(1-q)q^k/(1+q)` for
:math:`k \ge 1`; an independent fair sign bit then gives the two-sided law.  Per draw:

1. one word: bit 0 is the sign and the other bits are the first ``b`` bits of ``U``, so ``U`` lies
   in ``[lo, lo + 2**-b)`` with ``lo`` exact in float64 (``b = 31`` from half of a 64-bit word for
   ``scale <= 32``, where thresholds are sparse; ``b = 53`` from a 64-bit word above);
2. a *guess* :math:`\hat M = \lfloor(\ln c - \ln U)\,\mathrm{scale}\rfloor` from ``numpy.log``; its
   accuracy matters only for speed;
3. a *certificate* that :math:`t(\hat M) > U \ge t(\hat M + 1)`, using tables of
   :math:`q^{v 4096^l}` built once per scale from rigorous integer enclosures
   (:func:`dpkit.random._arith.exp_neg_enclosure`): the level-0 entries are stored scaled by
   ``2**b`` and rounded in their safe directions (lower bounds of :math:`t(v)`, upper bounds of
   :math:`t(v + 1)`), and with ``L > 1`` levels the products in float64, whose relative rounding
   error is bounded by IEEE 754 (``+ - * /`` correctly rounded), are covered by a margin of
   ``(4L + 8) * 2**-53`` folded into those entries (:func:`_certified_counts`), so a certified draw
   is exact; with one level nothing is rounded at run time;
4. the draws that fail the certificate (``U``'s known bits straddle a threshold or its margin, or
   the guess is off by one) are recomputed exactly in Python by
   :class:`~dpkit.random._arith.LazyUniform`, which extends ``U`` with fresh random words until
   integer enclosures of :math:`t(k)` decide.  That is about ``2e-7`` of draws at ``scale = 32``
   (the worst case of the 31-bit path), under ``1e-8`` elsewhere.

Above ``scale = 2**18`` (where two table levels would no longer do, and beyond ``2**20`` the 53
bits of ``U`` would leave too many draws uncertified), the geometric count is split into
independent low bits and a quotient of scale in ``[2**17, 2**18)``, and the discrete Laplace draw
is a signed geometric with the pair (negative, 0) rejected (:func:`_split_block`); every piece is
again exact, and the low bits are accepted by one integer comparison for all but about ``2**-17``
of the draws (:func:`_low_bits`).

This replaces CKS 2020 Algorithm 2 (uniform proposal, Bernoulli(exp(-U/t)) rejection and a
geometric count of Bernoulli(exp(-1)) successes) by a single inversion per draw: the same exact law,
with half or one random word per draw instead of a dozen or more, and no rejection loop, so it
vectorises without per-round bookkeeping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from dpkit._math import check_positive
from dpkit.errors import InvalidArgumentError, NumericalAccuracyError
from dpkit.random._arith import Enclosure, LazyUniform, _ceil_div, exp_neg_enclosure
from dpkit.random._checks import Size, check_size, count, prime_allocator, resolve_rng

__all__ = ["discrete_laplace", "geometric"]

_U = 2.0**-53  # unit roundoff of float64
_LEVEL_BITS = 12
_LEVEL_SIZE = 1 << _LEVEL_BITS
_TABLE_PREC = 224  # fixed-point bits of the table enclosures
_TINY = 2.0**-80  # table entries below this are stored as this (a valid upper bound, see below)
_TINY_BITS = 80
_BLOCK = 1 << 16  # draws per vectorised block (keeps temporaries in cache)
_SMALL_SCALE = 32.0  # up to here 31 bits of U leave only ~3e-7 of draws uncertified
_MAX_SCALE = 2.0**50
_MAX_COUNT = 1 << 62
_SPLIT_SCALE = 2.0**18  # above this, geometric draws are split into low bits and a quotient
_HIGH_BITS = 17  # the quotient of a split draw has scale in [2**17, 2**18): two table levels
_V_BITS = 24  # bits of the acceptance uniform of the low bits (bits 40-63 of their word)


@dataclass(frozen=True, eq=False)
class _Thresholds:
    r"""The thresholds :math:`t(k) = c\,e^{-k a}` of one sampler, exact and tabulated.

    ``levels[l][v]`` is a float64 within relative ``1.01 * 2**-53`` of :math:`q^{v 4096^l}`
    (times ``c`` for ``l = 0``), except that values below ``2**-80`` are stored as ``2**-80``.
    A clamped entry only ever makes a product too *large*, so it can only make the "U is below"
    certificate fail (it needs ``U``'s upper end, at least ``2**-53``, below the product), never
    make it pass wrongly; and it keeps the "U is above" certificate valid, which needs an upper
    bound.

    The certificates use ``below0``/``above0`` in place of level 0, already scaled by ``2**bits``
    and with the margin ``M`` applied, each rounded in its safe direction from the exact integer
    enclosures: ``below0[v] <= 2**bits t(v) (1 - M)`` and ``above0[v] >= 2**bits t(v + 1) (1 + M)``
    (``M = 0`` with one level, where no product is rounded at run time; ``(4L + 8) 2**-53``
    otherwise).  See :func:`_certified_counts` for why the certified answer is then exact.
    """

    a: Fraction  # 1 / scale, exact
    two_sided: bool
    scale: float
    log_c: float  # ln c, for the guess only
    x_max: int  # largest count the fast path certifies
    levels: tuple[NDArray[np.float64], ...]
    q_up: float  # q rounded to nearest, or 2**-80 if q is below that: an upper bound within 1.01u
    below: float  # 1 - M, the margin factor for the certificate U < t(x)
    above: float  # 1 + M, the margin factor for the certificate U >= t(x + 1)
    bits: int  # bits of U used by the fast path: 31 (half a 64-bit word) or 53 (a 64-bit word)
    below0: NDArray[np.float64]  # 2**bits t(v) (1 - M), rounded down
    above0: NDArray[np.float64]  # 2**bits t(v + 1) (1 + M), rounded up
    guess0: float  # ln c + bits ln 2: the guess is floor((guess0 - ln(prefix + 1/2)) scale)

    def enclose(self, k: int) -> Enclosure:
        """Integer enclosures of :math:`t(k)`, for the exact slow path."""
        return _enclose_threshold(self.a, self.two_sided, k)


def _enclose_threshold(a: Fraction, two_sided: bool, k: int) -> Enclosure:
    r"""Integer enclosures of :math:`t(k) = c\,e^{-k a}` (``c = 2/(1 + e^{-a})`` if two-sided)."""
    ka = k * a

    def enclosure(prec: int) -> tuple[int, int]:
        p = prec + 8
        e_lo, e_hi = exp_neg_enclosure(ka, p)
        if not two_sided:
            return e_lo >> 8, _ceil_div(e_hi, 1 << 8)
        q_lo, q_hi = exp_neg_enclosure(a, p)
        one = 1 << p
        # t = 2 e / (1 + q): increasing in e, decreasing in q.
        return (2 * e_lo << prec) // (one + q_hi), _ceil_div(2 * e_hi << prec, one + q_lo)

    return enclosure


def _to_float(lo: int, hi: int, prec: int) -> float:
    """A float64 for the real enclosed by ``[lo, hi] / 2**prec`` (see _Thresholds)."""
    if hi <= 1 << (prec - _TINY_BITS):
        return _TINY
    assert (hi - lo) << 60 <= lo, "table enclosure too wide"  # relative width <= 2**-60
    return math.ldexp(float(lo), -prec)  # int -> float rounds to nearest: total error <= 1.01u


def _float_down(num: int, shift: int) -> float:
    """The largest float64 ``<= num / 2**shift`` (``num >= 0``; the result stays a normal float)."""
    extra = max(num.bit_length() - 53, 0)
    return math.ldexp(num >> extra, extra - shift)  # <= 53 significant bits: ldexp is exact


def _float_up(num: int, shift: int) -> float:
    """The smallest float64 ``>= num / 2**shift`` (``num >= 0``; the result stays a normal float)."""
    extra = max(num.bit_length() - 53, 0)
    head = -((-num) >> extra)  # ceil; 2**53 at most, still exact
    return math.ldexp(head, extra - shift)


@lru_cache(maxsize=64)
def _thresholds(scale: float, two_sided: bool) -> _Thresholds:
    a = 1 / Fraction(scale)
    prec = _TABLE_PREC
    one = 1 << prec
    q_lo, q_hi = exp_neg_enclosure(a, prec)
    if two_sided:
        c_lo, c_hi = (2 * one * one) // (one + q_hi), _ceil_div(2 * one * one, one + q_lo)
        log_c = math.log(2.0) - math.log1p(math.exp(-1.0 / scale))
    else:
        c_lo = c_hi = one
        log_c = 0.0
    # t(x_max) < 2**-66 < 2**-53 <= U in the fast path, so larger guesses are never needed.
    x_max = max(2, math.ceil((66 * math.log(2.0) + log_c) * scale) + 2)
    n_levels = max(1, -(-x_max.bit_length() // _LEVEL_BITS))
    bits = 31 if scale <= _SMALL_SCALE else 53
    # M = 0 with one level (no product is rounded at run time), else (4L + 8) u as before.
    k_margin = 0 if n_levels == 1 else 4 * n_levels + 8
    levels = []
    below0: list[float] = []
    above0: list[float] = []
    for level in range(n_levels):
        top = level == n_levels - 1
        size = (x_max >> (_LEVEL_BITS * level)) + 2 if top else _LEVEL_SIZE
        base_lo, base_hi = exp_neg_enclosure(a * _LEVEL_SIZE**level, prec)
        lo, hi = (c_lo, c_hi) if level == 0 else (one, one)
        values = np.empty(size)
        for v in range(size + (level == 0)):
            if level == 0:  # lo, hi enclose 2**prec t(v)
                if v < size:
                    below0.append(_float_down(lo * ((1 << 53) - k_margin), prec + 53 - bits))
                if v > 0:
                    above0.append(_float_up(hi * ((1 << 53) + k_margin), prec + 53 - bits))
            if v < size:
                values[v] = _to_float(lo, hi, prec)
            lo, hi = (lo * base_lo) >> prec, _ceil_div(hi * base_hi, one)
        values.flags.writeable = False  # shared through the cache
        levels.append(values)
    margin = k_margin * _U  # a multiple of 2**-53 below 2**-40: 1 - M and 1 + M are exact
    tables = (np.array(below0), np.array(above0))
    for table in tables:
        table.flags.writeable = False
    return _Thresholds(
        a=a,
        two_sided=two_sided,
        scale=scale,
        log_c=log_c,
        x_max=x_max,
        levels=tuple(levels),
        q_up=_to_float(q_lo, q_hi, prec),
        below=1.0 - margin,
        above=1.0 + margin,
        bits=bits,
        below0=tables[0],
        above0=tables[1],
        guess0=log_c + bits * math.log(2.0),
    )


def _certified_counts(
    th: _Thresholds, f: NDArray[np.float64], x: NDArray[np.int64]
) -> NDArray[np.bool_]:
    r"""Write the guessed counts into ``x`` and return the mask of those certified exact.

    ``f`` holds the ``th.bits``-bit prefixes of the uniforms as floats (exact integers), so
    :math:`U \in [f, f + 1) / 2^{b}`.  The guess is
    :math:`\hat x = \lfloor(\ln c + b \ln 2 - \ln(f + 1/2))\,\mathrm{scale}\rfloor` clipped to
    ``[0, x_max]`` (its accuracy matters only for speed; clipping keeps every table index in range,
    so ``np.take(..., mode="clip")`` never clips).  With ``d_0 = x mod 4096`` and
    :math:`R = \mathrm{fl}(\prod_{l \ge 1} \mathrm{levels}_l[d_l])` (``R = 1`` with one level), a
    draw is certified when

    * ``f + 1 <= fl(below0[d_0] R)``: then :math:`U < (f + 1)/2^b \le t(\hat x)`; and
    * ``f >= fl(above0[d_0] R)``: then :math:`U \ge f/2^b \ge t(\hat x + 1)`;

    so exactly the thresholds :math:`t(1), \dots, t(\hat x)` lie above ``U``: the count is
    :math:`\hat x`.  The right-hand sides are bounds because ``below0``/``above0`` are rounded in
    the safe direction from exact enclosures and carry the factor :math:`1 \mp M`; the run-time
    roundings are ``L - 1`` multiplications (each ``<= u``) of entries within ``1.01 u`` of their
    values, so the computed products err by a factor within
    :math:`(1 \pm 1.01u)^{L-1}(1 \pm u)^{L-1}`, which ``M = (4L + 8) u`` covers (``M = 0`` for
    ``L = 1``: nothing is rounded).  ``f + 1`` is exact (``f < 2^{53}``).  A clamped entry
    (``2**-80``) makes :math:`R < 2^{-79}`, so the first test fails (``f + 1 >= 1``) and the second
    only gets stricter.
    """
    g = f + 0.5
    np.log(g, out=g)
    np.subtract(th.guess0, g, out=g)
    g *= th.scale
    np.clip(g, 0.0, float(th.x_max), out=g)
    np.copyto(x, g, casting="unsafe")  # truncation = floor: g >= 0
    levels = th.levels
    if len(levels) == 1:
        below = np.take(th.below0, x, mode="clip")
        above = np.take(th.above0, x, mode="clip")
    else:
        mask = np.int64(_LEVEL_SIZE - 1)
        digit = x & mask
        below = np.take(th.below0, digit, mode="clip")
        above = np.take(th.above0, digit, mode="clip")
        rest = None
        for level in range(1, len(levels)):
            np.right_shift(x, np.int64(_LEVEL_BITS * level), out=digit)
            if level < len(levels) - 1:
                digit &= mask
            entry = np.take(levels[level], digit, mode="clip")
            if rest is None:
                rest = entry
            else:
                rest *= entry
        assert rest is not None  # len(levels) > 1: the loop ran
        below *= rest
        above *= rest
    np.add(f, 1.0, out=g)
    ok = np.less_equal(g, below)
    ok &= f >= above
    return ok


def _fast_counts(
    th: _Thresholds, prefix: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Guessed counts for ``th.bits``-bit prefixes of U, and the mask of those certified exact."""
    x = np.empty(prefix.size, dtype=np.int64)
    ok = _certified_counts(th, prefix.astype(np.float64), x)
    return x, ok


def _exact_count(th: _Thresholds, prefix: int, guess: int, rng: np.random.Generator) -> int:
    """``#{k >= 1 : U < t(k)}`` exactly, for ``U`` with the given ``th.bits``-bit prefix."""
    u = LazyUniform(prefix, th.bits, rng)

    def below(k: int) -> bool:
        return k == 0 or u.less_than(th.enclose(k))

    k = max(guess, 1)
    if below(k):  # gallop up to a k that is not below
        lo, step = k, 1
        while below(lo + step):
            lo += step
            step *= 2
            if lo > _MAX_COUNT:
                raise NumericalAccuracyError(
                    f"a geometric count exceeded 2**62 (scale={th.scale}); such a draw has "
                    "probability below exp(-2**11) and cannot be represented in int64."
                )
        hi = lo + step
    else:  # gallop down to a k that is below (0 always is)
        hi, step = k, 1
        while hi - step > 0 and not below(hi - step):
            hi -= step
            step *= 2
        lo = max(hi - step, 0)
    while hi - lo > 1:  # invariant: below(lo) and not below(hi)
        mid = (lo + hi) // 2
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _signs(x: NDArray[np.int64], bit0: NDArray[np.uint64] | NDArray[np.uint32]) -> None:
    """Negate ``x[i]`` in place where bit 0 of ``bit0[i]`` is set (two's complement, no branches)."""
    s = np.bitwise_and(bit0, 1)
    s = s.view(np.int64) if s.dtype == np.uint64 else s.astype(np.int64)
    np.negative(s, out=s)  # 0 or -1 (all ones)
    x ^= s  # -x - 1 where s = -1
    x -= s  # -x


def _inverted_block(
    th: _Thresholds, x: NDArray[np.int64], rng: np.random.Generator, *, signed: bool
) -> NDArray[np.uint64] | NDArray[np.uint32]:
    """Fill ``x`` with exact counts by inversion; signed if asked.  Returns the random words used.

    ``th.bits == 53``: one 64-bit word per draw, bits 11-63 the prefix of ``U`` and bit 0 the sign.
    ``th.bits == 31``: one half of a 64-bit word per draw, bits 1-31 the prefix and bit 0 the sign.
    Disjoint bits of uniform words are independent uniform bits.
    """
    m = x.size
    if th.bits == 53:
        words = rng.integers(0, 1 << 64, size=m, dtype=np.uint64)
        prefix = np.right_shift(words, np.uint64(11)).view(np.int64)
        bit0: NDArray[np.uint64] | NDArray[np.uint32] = words
    else:
        halves = rng.integers(0, 1 << 64, size=(m + 1) // 2, dtype=np.uint64).view(np.uint32)[:m]
        prefix = np.right_shift(halves, np.uint32(1))
        bit0 = halves
    ok = _certified_counts(th, prefix.astype(np.float64), x)
    if not ok.all():
        for i in np.flatnonzero(~ok):
            x[i] = _exact_count(th, int(prefix[i]), int(x[i]), rng)
    if signed:
        _signs(x, bit0)
    return bit0


def _split(scale: float) -> int:
    """Low bits ``s`` split off when ``scale > 2**18``: ``scale / 2**s`` is in [2**17, 2**18)."""
    return math.frexp(scale)[1] - 1 - _HIGH_BITS


@lru_cache(maxsize=64)
def _low_bits_threshold(scale: float, s: int) -> int:
    """``ceil(2**24 * 2**s / scale)``: a 24-bit prefix at least this accepts every ``r < 2**s``."""
    return math.ceil(Fraction(1 << (s + _V_BITS)) / Fraction(scale))


def _low_bits(scale: float, s: int, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``n`` exact draws of ``R``, :math:`P(R = r) \propto e^{-r/\mathrm{scale}}` on ``[0, 2**s)``.

    Needs ``s <= 40`` and ``2**s <= 2**-17 scale``.  Rejection from the uniform law: one 64-bit word
    gives ``r`` (bits ``0..s-1``) and a uniform ``V`` (its 24-bit prefix ``v`` is bits 40-63);
    ``r`` is accepted with probability :math:`e^{-x}`, :math:`x = r/\mathrm{scale} < 2^{-17}`,
    i.e. when :math:`V \ge 1 - e^{-x}`.  Since :math:`1 - e^{-x} \le x < 2^s/\mathrm{scale}
    \le T_0 / 2^{24}` with :math:`T_0 = \lceil 2^{24+s}/\mathrm{scale} \rceil` (exact integers),
    every ``v >= T_0`` accepts at once: one integer comparison per draw decides all but about
    ``2**-17`` of them.  The rest are decided by the float64 bounds
    :math:`x - x^2/2 \le 1 - e^{-x} \le x` (relative rounding error at most ``3.1 * 2**-53``,
    covered by the ``16u`` margins) and, where those leave it open, exactly
    (:class:`~dpkit.random._arith.LazyUniform` against enclosures of :math:`1 - e^{-x}`).  A rejected
    ``r`` is redrawn with a fresh word (the next round handles only those).
    """
    out = np.empty(n, dtype=np.int64)
    a = 1 / Fraction(scale)
    inv = float(a)  # relative error <= u
    limit = np.uint64(_low_bits_threshold(scale, s) << (64 - _V_BITS))  # v < T0 iff word < T0 2**40
    mask = np.uint64((1 << s) - 1)
    pending: NDArray[np.intp] | None = None  # None: every position
    while pending is None or pending.size:
        m = n if pending is None else pending.size
        words = rng.integers(0, 1 << 64, size=m, dtype=np.uint64)
        r = np.bitwise_and(words, mask).view(np.int64)
        if pending is None:
            out[:] = r
        else:
            out[pending] = r
        open_ = np.flatnonzero(words < limit)
        rejected = np.empty(0, dtype=np.intp)
        if open_.size:
            v = (words[open_] >> np.uint64(64 - _V_BITS)).astype(np.int64)
            ro = r[open_]
            lo = v.astype(np.float64) * 2.0**-_V_BITS  # V lies in [lo, lo + 2**-24)
            hi = lo + 2.0**-_V_BITS
            x = ro.astype(np.float64) * inv  # r < 2**53 is exact; |x - r a| <= 2.01u r a
            accept = lo >= x * (1.0 + 8 * _U)  # V >= x >= 1 - exp(-x)
            reject = hi <= (x - 0.5 * x * x) * (1.0 - 16 * _U)  # V < x - x^2/2 <= 1 - exp(-x)
            for i in np.flatnonzero(~(accept | reject)):
                ra = int(ro[i]) * a

                def one_minus_exp(prec: int, ra: Fraction = ra) -> tuple[int, int]:
                    e_lo, e_hi = exp_neg_enclosure(ra, prec)
                    return (1 << prec) - e_hi, (1 << prec) - e_lo

                accept[i] = not LazyUniform(int(v[i]), _V_BITS, rng).less_than(one_minus_exp)
            rejected = open_[~accept]
        pending = rejected if pending is None else pending[rejected]
    return out


def _split_block(
    scale: float, x: NDArray[np.int64], rng: np.random.Generator, *, signed: bool
) -> None:
    r"""Fill ``x`` with exact geometric (or, if ``signed``, discrete Laplace) draws, ``scale > 2**18``.

    Geometric: ``G = R + 2**s H`` with ``H`` geometric of scale ``scale / 2**s`` in
    ``[2**17, 2**18)`` (by inversion, :func:`_inverted_block`) and ``R`` from :func:`_low_bits`;
    for a geometric law the remainder ``G mod 2**s`` and the quotient are independent with exactly
    these laws (the pmf :math:`\propto q^{r + 2^s h}` factorises).  Discrete Laplace: ``S G`` with
    a fair sign ``S`` (bit 0 of ``H``'s word), where the pair (``S = -1``, ``G = 0``) is rejected and
    that position drawn again: :math:`P(k) \propto \tfrac12 (1-q) q^{|k|}` for every ``k`` (zero
    only from ``S = +1``), the discrete Laplace law; a rejection has probability
    :math:`(1 - q)/2 < 2^{-18}`.
    """
    s = _split(scale)
    th = _thresholds(math.ldexp(scale, -s), False)
    words = _inverted_block(th, x, rng, signed=False)
    if int(x.max()) >= 1 << (62 - s):
        raise NumericalAccuracyError(
            f"a geometric count exceeded 2**62 (scale={scale}); such a draw has probability "
            "below exp(-2**11) and cannot be represented in int64."
        )
    x <<= np.int64(s)
    x += _low_bits(scale, s, x.size, rng)
    if signed:
        zero = np.flatnonzero(x == 0)
        again = zero[(words[zero] & np.uint64(1)) == 1]  # S = -1 and G = 0: rejected
        _signs(x, words)
        if again.size:
            redo = np.empty(again.size, dtype=np.int64)
            _split_block(scale, redo, rng, signed=True)
            x[again] = redo


def _fill(scale: float, out: NDArray[np.int64], rng: np.random.Generator, *, signed: bool) -> None:
    """Fill ``out`` with exact draws, ``_BLOCK`` at a time (temporaries stay in cache)."""
    th = _thresholds(scale, signed) if scale <= _SPLIT_SCALE else None
    for start in range(0, out.size, _BLOCK):
        x = out[start : start + _BLOCK]
        if th is not None:
            _inverted_block(th, x, rng, signed=signed)
        else:
            _split_block(scale, x, rng, signed=signed)


def _geometric_draws(scale: float, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``n`` exact geometric draws, :math:`P(G \ge k) = e^{-k/\mathrm{scale}}`.

    Up to ``scale = 2**18`` by inversion (:func:`_inverted_block`), above by the split of
    :func:`_split_block`.
    """
    out = np.empty(n, dtype=np.int64)
    _fill(scale, out, rng, signed=False)
    return out


def _laplace_draws(scale: float, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``n`` exact discrete Laplace draws.

    Up to ``scale = 2**18`` by inversion of the magnitude, :math:`P(|K| \ge k) = 2q^k/(1+q)`, with a
    sign bit (:func:`_inverted_block`); above as a signed geometric with the pair (negative, 0)
    rejected (:func:`_split_block`).
    """
    out = np.empty(n, dtype=np.int64)
    _fill(scale, out, rng, signed=True)
    return out


def _check_scale(scale: object) -> float:
    value = check_positive("scale", scale)
    if not value <= _MAX_SCALE:
        raise InvalidArgumentError(
            f"scale must be <= 2**50 (draws are int64); got {value}. Rescale the query instead."
        )
    return value


def _shaped(
    values: NDArray[np.int64], shape: tuple[int, ...] | None
) -> NDArray[np.int64] | np.int64:
    return values[0] if shape is None else values.reshape(shape)


def geometric(
    scale: float, size: Size = None, *, rng: np.random.Generator | None = None
) -> NDArray[np.int64] | np.int64:
    r"""Draw exactly from the geometric law with ratio :math:`e^{-1/\mathrm{scale}}`.

    :math:`P(k) = (1 - q) q^k` on :math:`k = 0, 1, 2, \dots` with :math:`q = e^{-1/\mathrm{scale}}`
    (failures before the first success of probability :math:`1 - q`): the one-sided discrete
    Laplace law.

    Parameters
    ----------
    scale : float, finite, in (0, 2**50]
        Taken as the exact dyadic rational that the float is.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one ``numpy.int64``.
    rng : numpy.random.Generator, optional
        Source of random bits; default :func:`dpkit.random.default_rng` (secure).

    Returns
    -------
    numpy.ndarray of int64, or numpy.int64
        Exact draws (given ideal random bits): no truncation or rounding.

    Raises
    ------
    ValueError
        If ``scale`` is NaN, infinite, ``<= 0`` or above ``2**50``, or ``size`` is invalid.

    Notes
    -----
    Inversion against exactly computed thresholds, certified in float64 with IEEE 754 error
    bounds and settled in exact integer arithmetic when the certificate fails; see
    :mod:`dpkit.random._geometric`.  :math:`P(G \ge k) = e^{-k/\mathrm{scale}}`.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
    arXiv 2004.00010v5, Algorithm 2 (the geometric step, here replaced by exact inversion).

    Examples
    --------
    >>> from dpkit.random import insecure_seeded
    >>> geometric(2.0, size=4, rng=insecure_seeded(1)).dtype
    dtype('int64')
    """
    value = _check_scale(scale)
    shape = check_size(size)
    generator = resolve_rng(rng)
    n = count(shape)
    prime_allocator(n)
    return _shaped(_geometric_draws(value, n, generator), shape)


def discrete_laplace(
    scale: float, size: Size = None, *, rng: np.random.Generator | None = None
) -> NDArray[np.int64] | np.int64:
    r"""Draw exactly from the discrete Laplace law, :math:`P(k) \propto e^{-|k|/\mathrm{scale}}`.

    Parameters
    ----------
    scale : float, finite, in (0, 2**50]
        Taken as the exact dyadic rational that the float is.  Adding a draw to an integer query
        of sensitivity :math:`\Delta` gives :math:`(\Delta/\mathrm{scale})`-DP.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one ``numpy.int64``.
    rng : numpy.random.Generator, optional
        Source of random bits; default :func:`dpkit.random.default_rng` (secure).

    Returns
    -------
    numpy.ndarray of int64, or numpy.int64
        Exact draws (given ideal random bits): no truncation or rounding.

    Raises
    ------
    ValueError
        If ``scale`` is NaN, infinite, ``<= 0`` or above ``2**50``, or ``size`` is invalid.

    Notes
    -----
    .. math:: P(k) = \frac{1 - q}{1 + q} q^{|k|}, \qquad q = e^{-1/\mathrm{scale}},

    sampled as a magnitude by exact inversion (:math:`P(|K| \ge k) = 2q^k/(1+q)`, :math:`k \ge 1`)
    and an independent fair sign; see :mod:`dpkit.random._geometric` for the exactness argument.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
    arXiv 2004.00010v5, Algorithm 2 (same law; sampled here by exact inversion).

    Examples
    --------
    >>> from dpkit.random import insecure_seeded
    >>> discrete_laplace(1.5, size=(2, 3), rng=insecure_seeded(1)).shape
    (2, 3)
    """
    value = _check_scale(scale)
    shape = check_size(size)
    generator = resolve_rng(rng)
    n = count(shape)
    prime_allocator(n)
    return _shaped(_laplace_draws(value, n, generator), shape)
