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
   in ``[lo, lo + 2**-b)`` with ``lo`` exact in float64 (``b = 31`` from a 32-bit word for
   ``scale <= 32``, where thresholds are sparse; ``b = 53`` from a 64-bit word above);
2. a *guess* :math:`\hat M = \lfloor(\ln c - \ln U)\,\mathrm{scale}\rfloor` from ``numpy.log``; its
   accuracy matters only for speed;
3. a *certificate* that :math:`t(\hat M) > U \ge t(\hat M + 1)`, using tables of
   :math:`q^{v 4096^l}` built once per scale from rigorous integer enclosures
   (:func:`dpkit.random._arith.exp_neg_enclosure`) and products in float64 whose relative rounding
   error is bounded by IEEE 754 (``+ - * /`` correctly rounded; at most ``(4L + 8) * 2**-53`` with
   ``L`` table levels); the comparison uses that bound as a margin, so a certified draw is exact;
4. the draws that fail the certificate (``U``'s known bits straddle a threshold or its margin, or
   the guess is off by one) are recomputed exactly in Python by
   :class:`~dpkit.random._arith.LazyUniform`, which extends ``U`` with fresh random words until
   integer enclosures of :math:`t(k)` decide.  That is about ``2e-7`` of draws at ``scale = 32``
   (the worst case of the 31-bit path), under ``1e-8`` elsewhere.

Above ``scale = 2**20`` the 53 bits of ``U`` would leave too many draws uncertified (thresholds
get closer than the margin), so the geometric count is split into independent low bits and a
quotient (:func:`_geometric_draws`), and the discrete Laplace draw into a zero test and a
geometric magnitude (:func:`_laplace_draws`); every piece is again exact.

This replaces CKS 2020 Algorithm 2 (uniform proposal, Bernoulli(exp(-U/t)) rejection and a
geometric count of Bernoulli(exp(-1)) successes) by a single inversion per draw: the same exact law,
with half or one random word per draw instead of a dozen or more, and no rejection loop, so it
vectorises without per-round bookkeeping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from dpkit._math import check_positive
from dpkit.errors import NumericalAccuracyError
from dpkit.random._arith import Enclosure, LazyUniform, _ceil_div, exp_neg_enclosure, floor_scaled
from dpkit.random._checks import Size, check_rng, check_size, count, prime_allocator

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
_SPLIT_SCALE = 2.0**20  # above this, geometric draws are split into low bits and a quotient


@dataclass(frozen=True, eq=False)
class _Thresholds:
    r"""The thresholds :math:`t(k) = c\,e^{-k a}` of one sampler, exact and tabulated.

    ``levels[l][v]`` is a float64 within relative ``1.01 * 2**-53`` of :math:`q^{v 4096^l}`
    (times ``c`` for ``l = 0``), except that values below ``2**-80`` are stored as ``2**-80``.
    A clamped entry only ever makes a product too *large*, so it can only make the "U is below"
    certificate fail (it needs ``U``'s upper end, at least ``2**-53``, below the product), never
    make it pass wrongly; and it keeps the "U is above" certificate valid, which needs an upper
    bound.
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
    bits: int  # bits of U used by the fast path: 31 (32-bit words) or 53 (64-bit words)

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
    levels = []
    for level in range(n_levels):
        top = level == n_levels - 1
        size = (x_max >> (_LEVEL_BITS * level)) + 2 if top else _LEVEL_SIZE
        base_lo, base_hi = exp_neg_enclosure(a * _LEVEL_SIZE**level, prec)
        lo, hi = (c_lo, c_hi) if level == 0 else (one, one)
        values = np.empty(size)
        for v in range(size):
            values[v] = _to_float(lo, hi, prec)
            lo, hi = (lo * base_lo) >> prec, _ceil_div(hi * base_hi, one)
        values.flags.writeable = False  # shared through the cache
        levels.append(values)
    margin = (4 * n_levels + 8) * _U  # a multiple of 2**-52, so 1 - M and 1 + M are exact
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
        bits=31 if scale <= _SMALL_SCALE else 53,
    )


def _uniform_words(
    rng: np.random.Generator, m: int, bits: int
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """``m`` uniform ``bits``-bit prefixes of ``U`` and ``m`` independent fair sign bits.

    ``bits = 53``: one 64-bit word per draw (bit 0 the sign, bits 11-63 the prefix).
    ``bits = 31``: one 32-bit word per draw (bit 0 the sign, bits 1-31 the prefix), half the
    random bits, used where thresholds are sparse enough for 31 bits to certify nearly every draw.
    """
    if bits == 53:
        words = rng.integers(0, 1 << 64, size=m, dtype=np.uint64)
        return (words >> np.uint64(11)).astype(np.int64), (words & np.uint64(1)).astype(bool)
    half = rng.integers(0, 1 << 32, size=m, dtype=np.uint32)
    return (half >> np.uint32(1)).astype(np.int64), (half & np.uint32(1)).astype(bool)


def _fast_counts(
    th: _Thresholds, prefix: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Guessed counts and the mask of those certified exact (see the module docstring)."""
    ulp = 2.0**-th.bits
    lo = prefix.astype(np.float64)
    lo *= ulp  # exact: U lies in [lo, lo + ulp)
    hi = lo + ulp  # exact
    guess = np.log(lo + 0.5 * ulp)
    np.subtract(th.log_c, guess, out=guess)
    guess *= th.scale
    np.floor(guess, out=guess)
    np.clip(guess, 0.0, float(th.x_max), out=guess)
    x = guess.astype(np.int64)
    levels = th.levels
    if len(levels) == 1:
        t = levels[0][x]
    else:
        mask = np.int64(_LEVEL_SIZE - 1)
        t = levels[0][x & mask]
        for level in range(1, len(levels)):
            index = x >> np.int64(_LEVEL_BITS * level)
            if level < len(levels) - 1:
                index &= mask
            t *= levels[level][index]
    # Certificate U < t(x): hi <= t(x) (1 - M).  x == 0 needs none (t(0) = c >= 1 > U).
    ok = hi <= t * th.below
    ok |= x == 0
    # Certificate U >= t(x + 1) = t(x) q: lo >= t(x) q (1 + M).
    t *= th.q_up
    t *= th.above
    ok &= lo >= t
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


def _counts(
    th: _Thresholds, n: int, rng: np.random.Generator, *, signed: bool
) -> NDArray[np.int64]:
    """``n`` exact draws: geometric counts, or discrete Laplace values when ``signed``."""
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        prefix, sign = _uniform_words(rng, m, th.bits)
        x, ok = _fast_counts(th, prefix)
        if not ok.all():
            for i in np.flatnonzero(~ok):
                x[i] = _exact_count(th, int(prefix[i]), int(x[i]), rng)
        if signed:
            np.negative(x, out=x, where=sign)
        out[start : start + m] = x
    return out


def _blockwise(
    draws: Callable[[float, int, np.random.Generator], NDArray[np.int64]],
    scale: float,
    n: int,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """``draws(scale, n, rng)`` computed ``_BLOCK`` draws at a time (temporaries stay small)."""
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        out[start : start + m] = draws(scale, m, rng)
    return out


def _split(scale: float) -> int:
    """Low bits ``s`` split off when ``scale > 2**20``: ``scale / 2**s`` is in [2**20, 2**21)."""
    return math.frexp(scale)[1] - 1 - 20


def _low_bits(scale: float, s: int, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``n`` exact draws of ``R``, :math:`P(R = r) \propto e^{-r/\mathrm{scale}}` on ``[0, 2**s)``.

    Rejection from the uniform law: accept ``r`` with probability :math:`e^{-x}`,
    :math:`x = r/\mathrm{scale} \le 2^{-20}`, i.e. when a fresh uniform ``V`` satisfies
    :math:`V \ge 1 - e^{-x}`.  Since :math:`x - x^2/2 \le 1 - e^{-x} \le x`, the float64 bounds
    below (relative rounding error at most ``3.1 * 2**-53``, covered by the ``16u`` margins) and 32
    bits of ``V`` decide all but about ``2**-32`` of the comparisons; the rest are settled exactly.
    """
    out = np.empty(n, dtype=np.int64)
    a = 1 / Fraction(scale)
    inv = float(a)  # relative error <= u
    pending = np.arange(n)
    while pending.size:
        m = pending.size
        r = rng.integers(0, 1 << s, size=m, dtype=np.uint32).astype(np.int64)  # s <= 30
        u32 = rng.integers(0, 1 << 32, size=m, dtype=np.uint32).astype(np.int64)
        lo = u32.astype(np.float64) * 2.0**-32  # V lies in [lo, lo + 2**-32)
        hi = lo + 2.0**-32
        x = r.astype(np.float64) * inv  # r < 2**53 is exact; |x - r a| <= 2.01u r a
        accept = lo >= x * (1.0 + 8 * _U)  # V >= x >= 1 - exp(-x)
        reject = hi <= (x - 0.5 * x * x) * (1.0 - 16 * _U)  # V < x - x^2/2 <= 1 - exp(-x)
        for i in np.flatnonzero(~(accept | reject)):
            ra = int(r[i]) * a

            def one_minus_exp(prec: int, ra: Fraction = ra) -> tuple[int, int]:
                e_lo, e_hi = exp_neg_enclosure(ra, prec)
                return (1 << prec) - e_hi, (1 << prec) - e_lo

            accept[i] = not LazyUniform(int(u32[i]), 32, rng).less_than(one_minus_exp)
        out[pending[accept]] = r[accept]
        pending = pending[~accept]
    return out


def _geometric_draws(scale: float, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``n`` exact geometric draws, :math:`P(G \ge k) = e^{-k/\mathrm{scale}}`.

    Up to ``scale = 2**20`` by inversion (:func:`_counts`).  Above, the 53 bits of ``U`` that the
    float64 certificate can use no longer separate neighbouring thresholds often enough, so ``G`` is
    split as ``R + 2**s H``: for a geometric law the remainder ``R = G mod 2**s`` and the quotient
    ``H`` are independent, ``R`` has pmf proportional to :math:`e^{-r/\mathrm{scale}}` on
    ``[0, 2**s)`` (:func:`_low_bits`) and ``H`` is geometric with scale ``scale / 2**s``.
    """
    if scale <= _SPLIT_SCALE:
        return _counts(_thresholds(scale, False), n, rng, signed=False)
    if n > _BLOCK:
        return _blockwise(_geometric_draws, scale, n, rng)
    s = _split(scale)
    high = _counts(_thresholds(math.ldexp(scale, -s), False), n, rng, signed=False)
    if n and int(high.max()) >= 1 << (62 - s):
        raise NumericalAccuracyError(
            f"a geometric count exceeded 2**62 (scale={scale}); such a draw has probability "
            "below exp(-2**11) and cannot be represented in int64."
        )
    high <<= np.int64(s)
    high += _low_bits(scale, s, n, rng)
    return high


@lru_cache(maxsize=64)
def _nonzero_threshold(scale: float) -> int:
    """``floor(2**31 * 2q / (1 + q))``; a discrete Laplace draw is nonzero iff ``U < 2q/(1+q)``."""
    return floor_scaled(_enclose_threshold(1 / Fraction(scale), True, 1), 31)


def _laplace_draws(scale: float, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``n`` exact discrete Laplace draws.

    Up to ``scale = 2**20`` by inversion of the magnitude with a sign bit (:func:`_counts`).
    Above, as ``0`` with probability :math:`(1-q)/(1+q)` and otherwise :math:`\pm(1 + G)` with
    ``G`` geometric (:func:`_geometric_draws`): :math:`P(\pm k) = \frac{q}{1+q}(1-q)q^{k-1}`.
    """
    if scale <= _SPLIT_SCALE:
        return _counts(_thresholds(scale, True), n, rng, signed=True)
    if n > _BLOCK:
        return _blockwise(_laplace_draws, scale, n, rng)
    words = rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
    u31 = words >> np.uint32(1)  # bit 0 is the sign, bits 1-31 the first 31 bits of U
    threshold = np.uint32(_nonzero_threshold(scale))
    nonzero = u31 < threshold  # U < (u31 + 1) / 2**31 <= threshold / 2**31 <= 2q/(1+q)
    ties = np.flatnonzero(u31 == threshold)
    if ties.size:
        enclose = _enclose_threshold(1 / Fraction(scale), True, 1)
        for i in ties:
            nonzero[i] = LazyUniform(int(u31[i]), 31, rng).less_than(enclose)
    out = np.zeros(n, dtype=np.int64)
    magnitude = _geometric_draws(scale, int(np.count_nonzero(nonzero)), rng)
    magnitude += 1
    out[nonzero] = magnitude
    np.negative(out, out=out, where=(words & np.uint32(1)).astype(bool))
    return out


def _check_scale(scale: object) -> float:
    value = check_positive("scale", scale)
    if not value <= _MAX_SCALE:
        raise ValueError(
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
    generator = check_rng(rng)
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
    generator = check_rng(rng)
    n = count(shape)
    prime_allocator(n)
    return _shaped(_laplace_draws(value, n, generator), shape)
