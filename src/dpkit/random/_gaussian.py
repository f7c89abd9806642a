r"""Exact discrete Gaussian sampler: rejection from a binned envelope drawn by an exact alias table.

Contract
--------
``discrete_gaussian(sigma)`` has pmf proportional to :math:`f(k) = e^{-k^2/(2\sigma^2)}` on the
integers, for any float ``sigma`` in ``[2**-40, 2**40]`` taken as the exact dyadic rational it is,
and, given ideal uniform random bits, the output distribution is exactly that pmf.

How (rejection sampling from a piecewise-constant envelope)
-----------------------------------------------------------
Let ``w = 2**b`` with ``b = max(0, floor(log2 sigma) - 8)`` (so ``w <= sigma / 256``, and ``w = 1``
for ``sigma < 512``) and ``nb = ceil(7.5 sigma / w) + 1``.  The integers are cut into *bins*:

* positive bin ``j < nb``: :math:`\{jw, \dots, jw + w - 1\}`, largest pmf value :math:`f_j = f(jw)`;
* negative bin ``j < nb``: :math:`\{-jw - w, \dots, -jw - 1\}`, largest value :math:`f(jw + 1)`;
* two *tails*, :math:`k \ge T` and :math:`k \le -(T + 1)` with :math:`T = nb\,w`
  (about :math:`7.5\sigma`; together less than :math:`10^{-13}` of the mass);
* a *dummy* outcome that is always rejected.

Every outcome ``j`` gets an integer weight :math:`W_j`, with :math:`\sum_j W_j = 2^{28}`: for a bin,
:math:`W_j = \lceil S f_j \rceil \ge S f_j` for one integer scale ``S`` (computed from rigorous
integer enclosures of :math:`f_j`, :func:`dpkit.random._arith.exp_neg_enclosure`, propagated with
directed rounding), the tails' weights are given below, and the dummy takes what is left (about
``2**-13``).  A proposal is:

1. an outcome ``J`` with :math:`P(J = j) = W_j / 2^{28}`, *exactly*, by Walker's alias method on
   :math:`2^{k}` columns: ``k`` bits pick the column ``c`` and ``28 - k`` bits ``V`` choose between
   ``c`` (if ``V < thr[c]``) and ``alias[c]``.  The table is built by Vose's algorithm in integer
   arithmetic and *checked* when built: the law it implies is recomputed and must equal ``W``;
2. in bin ``j``, an offset ``o`` uniform on ``{0, ..., w - 1}`` (``b`` fresh random bits), giving
   the integer ``Y``; in a tail, :math:`Y = \pm(T_\pm + G)` with ``G`` exactly geometric
   (:func:`dpkit.random._geometric._geometric_draws`, scale :math:`s_T \ge \sigma^2/T`) and
   :math:`T_+ = T`, :math:`T_- = T + 1`.

So :math:`P(Y = y) = W_j / (2^{28} w)` in bin ``j`` and :math:`W_\pm (1 - q) q^g / 2^{28}` in a
tail, :math:`q = e^{-1/s_T}`.  ``Y`` is accepted with probability

.. math::

   \rho_j e^{-\delta} = \frac{S f(y)}{W_j} \le 1 \quad (\text{bin } j), \qquad
   \frac{S f(y)}{W_\pm\, w\, (1 - q)\, q^g} \le 1 \quad (\text{tail}),

where :math:`\rho_j = S f_j / W_j` and :math:`\delta = (y^2 - m_j^2)/(2\sigma^2) \ge 0`, :math:`m_j`
the smallest :math:`|k|` in the bin.  The tail weights are :math:`W_\pm \ge S f(T_\pm)/(w(1 - q))`,
which keeps the tail ratio at most 1 because
:math:`f(T_\pm + g) \le f(T_\pm) e^{-T_\pm g/\sigma^2} \le f(T_\pm) q^g`.  In every case
:math:`P(Y = y) \cdot P(\text{accept} \mid y) = f(y) \cdot S / (2^{28} w)`, proportional to
:math:`f(y)`: accepted proposals are exact, independent draws.  Each output position takes one
proposal and, if it is rejected, the first accepted one of a fresh independent sequence (the
rejected positions are drawn again together), so the positions hold independent exact draws.  The
acceptance rate is about ``1 - (w - 1) / (2.5 sigma) - 2**-13``, above 0.998 for every ``sigma``.

Deciding acceptance exactly
---------------------------
One uniform ``U`` per proposal, of which a prefix ``u`` of ``u_bits`` bits is drawn (32, or
``36 - b >= 20`` when the offset shares the word: :math:`U \in [u, u + 1) / 2^{u\_bits}`); accept
iff :math:`U < \rho_j e^{-\delta}`.

* *Tier 0* accepts if ``u < tmin[j]``, one integer comparison, where
  ``tmin[j] = floor(2**u_bits S f_lo / W_j)`` and ``f_lo`` is a lower enclosure of the smallest
  pmf value in the bin (``f(jw)`` for width 1 on the positive side, else ``f((j + 1) w)``, which is
  at most the value at the bin's largest ``|k|``): then
  :math:`U < (u + 1)/2^{u\_bits} \le S f(y) / W_j` for every ``y`` in the bin.  It decides all but
  about ``w E|Y| / sigma**2 + 2**-13`` of the proposals (0.1-0.3%); tails and the dummy have
  ``tmin = 0``.

The proposals tier 0 leaves go through the float tiers and the exact test below, written here in
units of ``2**-32`` of ``U``; with a shorter prefix ``u`` and ``u + 1`` are rescaled by
``2**(32 - u_bits)`` (or the tables by ``2**(u_bits - 32)``): exact power-of-two scalings, which
commute with every rounding below (no value is subnormal).
Per bin, floats ``acc_lo <= 2**32 rho_j (1 - 2**-40)`` and ``acc_hi >= 2**32 rho_j (1 + 2**-40)``
are tabulated from the integer enclosures.  With ``u`` the 32-bit prefix (:math:`U \in
[u, u + 1) / 2^{32}`) and :math:`\hat\delta = \mathrm{fl}(\mathrm{fl}(o \cdot (2 m_j + o)) \cdot
\hat h)`, :math:`\hat h` the nearest float to :math:`1/(2\sigma^2)` (``o`` and ``2 m_j + o`` are
integers below ``2**53``, so exact), :math:`|\hat\delta - \delta| \le 3.01\,u_{53}\,\delta` with
:math:`u_{53} = 2^{-53}` (IEEE 754, correctly rounded ``*``).  By construction
:math:`\delta \le w(2T + w)/(2\sigma^2) \le 1/4` (asserted when the table is built;
:math:`\delta = 0` when ``w = 1``).

* *Accept* if ``u + 1 <= acc_lo * fl(1 - delta_hat)``: since :math:`1 - \delta \le e^{-\delta}` and
  the three roundings plus the error in :math:`\hat\delta` change the product by a factor at most
  :math:`(1 + u_{53})^2 (1 + 1.01 u_{53}) < 1 + 2^{-40}`, the right side is at most
  :math:`2^{32}\rho_j e^{-\delta}`.
* Otherwise (a few percent), *reject* if ``u >= acc_hi * P2`` and *accept* if
  ``u + 1 <= acc_lo * P3``, with the floats :math:`P_2 = 1 - \hat\delta(1 - \hat\delta/2)`
  and :math:`P_3 = 1 - \hat\delta(1 - \hat\delta(1/2 - \hat\delta/6))` (Taylor:
  :math:`P_3(\delta) \le e^{-\delta} \le P_2(\delta)`; both polynomials are decreasing with slope at
  most 1 on :math:`[0, 1/4]`, so the error of :math:`\hat\delta` and the roundings move them by a
  relative :math:`\ll 2^{-40}`).
* What is left (:math:`U` within about :math:`\delta^3/6 + 2^{-u\_bits}` of the threshold; one or
  two proposals in ``10**6`` at ``u_bits = 21``) is decided exactly in Python:
  ``U`` is extended with fresh random words (:class:`~dpkit.random._arith.LazyUniform`) and
  compared with integer enclosures of :math:`S f(y) / W_j`.  Tail proposals (about ``1e-13`` of
  them) and their acceptance are always exact in Python; the dummy is always rejected.

Random bits per proposal: one 64-bit word holding ``V`` and the column (bits 0-27), the offset
(bits 28 to ``28 + b - 1``, when ``1 <= b <= 16``) and ``U``'s prefix (the top ``u_bits`` bits);
for ``b > 16`` the offset is the top ``b`` bits of half of another word and ``u_bits = 32``
(:func:`_binned_fill`).  The tables (at most 8,192 columns) are built once per ``sigma`` in exact
integer arithmetic (a few to tens of milliseconds) and cached.

This replaces CKS 2020 Algorithm 3 (discrete Laplace proposals and a Bernoulli(:math:`e^{-\gamma}`)
acceptance per draw): same exact law, several times faster because a proposal costs one table
look-up instead of an exact discrete Laplace draw and the acceptance almost always one comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import cast

import numpy as np
from numpy.typing import NDArray

from dpkit._math import check_positive
from dpkit.random._arith import LazyUniform, exp_neg_enclosure, random_word
from dpkit.random._checks import Size, check_size, count, prime_allocator, resolve_rng
from dpkit.random._geometric import _geometric_draws
from dpkit.errors import InvalidArgumentError

__all__ = ["discrete_gaussian"]

_MIN_SIGMA = 2.0**-40
_MAX_SIGMA = 2.0**40
_BLOCK = 1 << 16  # proposals per vectorised block
_WIDTH_SHIFT = 8  # bin width w = 2**b <= sigma / 2**_WIDTH_SHIFT
_ALIAS_BITS = 28  # the alias law is in units of 2**-28: bits 0-27 of a proposal's word
_ONE_WORD_B = 16  # up to this b, the offset and a >= 20-bit U share the proposal's word
_SLACK = 2.0**-13  # envelope mass left to the dummy: covers rounding up <= 2**13 weights


_BIN_PREC = 128  # fixed-point bits of the table enclosures
_REACH = 7.5  # bins cover |k| < about 7.5 sigma; beyond is the (exact, rare) geometric tail


@dataclass(frozen=True, eq=False)
class _Bins:
    """Tables of the binned envelope for one sigma (see the module docstring)."""

    s2: Fraction  # sigma^2, exact
    b: int  # bin width w = 2**b
    nb: int  # bins per side; bins 0..nb-1 positive, nb..2nb-1 negative
    scale: int  # S: envelope weight W_j >= S f(max of bin j)
    weights: tuple[int, ...]  # W_j, then tail+, tail-, dummy
    k_bits: int  # log2 of the number of alias columns
    v_bits: int  # bits of the alias uniform; a column holds 2**v_bits units
    thr: NDArray[np.int64]  # alias: column c keeps itself iff V < thr[c]
    alias: NDArray[np.int64]
    y0: NDArray[np.int64]  # draw = y0[j] + (o ^ flip[j]): jw + o, or -jw - 1 - o
    flip: NDArray[np.int64]  # 0 on the positive side, -1 (all ones) on the negative side
    ystart: NDArray[np.int64]  # y0 + flip: the draw when w = 1
    base2: NDArray[np.float64]  # 2 * (smallest |k| in bin j), exact
    acc_lo: NDArray[np.float64]  # <= 2**32 rho_j (1 - 2**-40); 0 for tail and dummy
    acc_hi: NDArray[np.float64]  # >= 2**32 rho_j (1 + 2**-40); 0 for the dummy
    h: float  # nearest float to 1 / (2 sigma^2)
    tail_scale: float  # geometric scale of the tail envelope, >= sigma^2 / T
    tail_start: int  # T = nb * w
    u_bits: int  # bits of the acceptance uniform U drawn with each proposal (20 to 32)
    tmin: NDArray[np.int64]  # <= 2**u_bits S min_{y in bin j} f(y) / W_j; 0 for tails and dummy
    # Derived in __post_init__ (so dataclasses.replace keeps them consistent): the same tables
    # indexed by 2 c + (V >= thr[c]), i.e. by column and alias choice, so that a proposal needs one
    # look-up per quantity and no np.where.  pick[2c] = c, pick[2c + 1] = alias[c].
    pick: NDArray[np.int64] = field(init=False, repr=False)
    pick_half: NDArray[np.float64] = field(init=False, repr=False)  # +-m_j: the sign of the side
    pick_ystart: NDArray[np.float64] = field(init=False, repr=False)  # exact integers
    pick_tmin: NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n_bins = self.acc_lo.size
        columns = np.arange(self.thr.size, dtype=np.int64)
        # A padding column (no outcome of its own) has thr = 0, so its "keep" half is never picked;
        # it points at the dummy, whose acceptance is 0, to keep every index valid.
        keep = np.where(columns < n_bins, columns, n_bins - 1)
        pick = np.empty(2 * self.thr.size, dtype=np.int64)
        pick[0::2], pick[1::2] = keep, self.alias
        side = np.where(self.flip < 0, -1.0, 1.0)  # negative bins have m_j >= 1: the sign survives
        derived = {
            "pick": pick,
            "pick_half": (side * (self.base2 * 0.5))[pick],
            "pick_ystart": self.ystart[pick].astype(np.float64),
            "pick_tmin": self.tmin[pick],
        }
        for name, value in derived.items():
            value.flags.writeable = False
            object.__setattr__(self, name, value)


def _mul_lo(x: int, y: int, prec: int) -> int:
    return (x * y) >> prec


def _mul_hi(x: int, y: int, prec: int) -> int:
    return -((-(x * y)) >> prec)


def _float_up(value: Fraction) -> float:
    """The smallest float ``>= value``."""
    f = float(value)  # nearest
    return f if Fraction(f) >= value else math.nextafter(f, math.inf)


def _alias_table(weights: list[int], k_bits: int, v_bits: int) -> tuple[list[int], list[int]]:
    """Vose's alias table in exact integers: ``sum(weights) == 2**(k_bits + v_bits)``."""
    k = 1 << k_bits
    units = 1 << v_bits
    w = weights + [0] * (k - len(weights))
    assert len(w) == k and sum(w) == k * units
    thr = [units] * k
    alias = list(range(k))
    small = [i for i in range(k) if w[i] < units]
    large = [i for i in range(k) if w[i] >= units]
    while small and large:
        s = small.pop()
        g = large.pop()
        thr[s], alias[s] = w[s], g
        w[g] -= units - w[s]
        (small if w[g] < units else large).append(g)
    # Exact integers: whatever is left holds exactly one column's worth.
    for i in small + large:
        assert w[i] == units
    # Recompute the law the table implies and check it is exactly the weights.
    implied = [0] * k
    for c in range(k):
        implied[c] += thr[c]
        implied[alias[c]] += units - thr[c]
    assert implied == weights + [0] * (k - len(weights)), "alias table does not match weights"
    return thr, alias


@lru_cache(maxsize=64)
def _bins(sigma: float, nb: int | None = None) -> _Bins:
    s2 = Fraction(sigma) ** 2
    b = max(0, math.frexp(sigma)[1] - 1 - _WIDTH_SHIFT)  # w = 2**b <= sigma / 256
    w = 1 << b
    if nb is None:
        nb = math.ceil(_REACH * sigma / w) + 1
    n_bins = 2 * nb + 3  # + tail+, tail-, dummy
    k_bits = max(1, (n_bins - 1).bit_length())
    v_bits = _ALIAS_BITS - k_bits
    prec = _BIN_PREC
    one = 1 << prec
    two_s2 = 2 * s2
    # f(jw) = a^(j^2): f((j+1)w) = f(jw) a^(2j+1); f(jw + 1) = f(jw) c^j d.
    a_lo, a_hi = exp_neg_enclosure(Fraction(w * w) / two_s2, prec)
    a2_lo, a2_hi = exp_neg_enclosure(Fraction(2 * w * w) / two_s2, prec)
    c_lo, c_hi = exp_neg_enclosure(Fraction(2 * w) / two_s2, prec)
    d_lo, d_hi = exp_neg_enclosure(1 / two_s2, prec)
    f_lo, f_hi = one, one  # f(jw)
    r_lo, r_hi = a_lo, a_hi  # a^(2j+1)
    cj_lo, cj_hi = one, one  # c^j
    pos: list[tuple[int, int]] = []
    neg: list[tuple[int, int]] = []
    for _ in range(nb + 1):
        pos.append((f_lo, f_hi))
        g_lo = _mul_lo(_mul_lo(f_lo, cj_lo, prec), d_lo, prec)
        g_hi = _mul_hi(_mul_hi(f_hi, cj_hi, prec), d_hi, prec)
        neg.append((g_lo, g_hi))
        f_lo, f_hi = _mul_lo(f_lo, r_lo, prec), _mul_hi(f_hi, r_hi, prec)
        r_lo, r_hi = _mul_lo(r_lo, a2_lo, prec), _mul_hi(r_hi, a2_hi, prec)
        cj_lo, cj_hi = _mul_lo(cj_lo, c_lo, prec), _mul_hi(cj_hi, c_hi, prec)
    tail_start = nb * w
    # Tail envelope: geometric from T (T + 1 on the negative side) with q = exp(-1/tail_scale),
    # tail_scale >= sigma^2 / T, so f(T_s + g) <= f(T_s) q^g.
    tail_scale = _float_up(s2 / tail_start)
    q_lo, q_hi = exp_neg_enclosure(1 / Fraction(tail_scale), prec)
    maxima = [pos[j] for j in range(nb)] + [neg[j] for j in range(nb)]
    tails = [pos[nb], neg[nb]]  # f(T), f(T + 1)
    estimate = sum(hi for _, hi in maxima) / one + sum(hi for _, hi in tails) / (
        w * (one - q_hi)
    )
    total = 1 << (k_bits + v_bits)
    scale = math.floor(total * (1 - _SLACK) / estimate)
    while True:
        weights = [-((-scale * hi) >> prec) for _, hi in maxima]  # ceil(S f_hi)
        weights += [-((-scale * hi) // (w * (one - q_hi))) for _, hi in tails]
        if sum(weights) <= total:
            break
        scale -= scale >> 10  # pragma: no cover - the estimate leaves 2**-13 of slack
    weights.append(total - sum(weights))  # dummy: always rejected
    thr, alias = _alias_table(weights, k_bits, v_bits)

    acc_lo = np.zeros(n_bins)
    acc_hi = np.zeros(n_bins)
    y0 = np.zeros(n_bins, dtype=np.int64)
    flip = np.zeros(n_bins, dtype=np.int64)
    base2 = np.zeros(n_bins)
    u_bits = min(32, 36 - b) if b <= _ONE_WORD_B else 32
    tmin = np.zeros(n_bins, dtype=np.int64)
    for j in range(2 * nb):
        lo, hi = maxima[j]
        wj = weights[j] << prec
        # Tier 0: the smallest pmf value in the bin is f(jw) (w = 1, positive side) or else at least
        # f((j+1)w) (the bin's largest |k| is (j+1)w - 1 or (j+1)w), pos[j + 1] in both cases; so
        # U < tmin / 2**u_bits implies U < S f(y) / W_j for every y of the bin.
        low = pos[j % nb][0] if (w == 1 and j < nb) else pos[j % nb + 1][0]
        tmin[j] = (scale * low << u_bits) // wj
        # rho_j = S f_j / W_j lies in [S lo, S hi] / (W_j 2**prec) and is <= 1.  n_lo <= 2**92 rho_j
        # <= n_hi; int -> float and the product each round by at most u = 2**-53, so with the
        # factor 1 -/+ 2**-39 the floats are <= / >= 2**32 rho_j (1 -/+ 2**-40).
        n_lo = (scale * lo << 92) // wj
        n_hi = -((-(scale * hi << 92)) // wj)
        acc_lo[j] = math.ldexp(float(n_lo), -60) * (1.0 - 2.0**-39)
        acc_hi[j] = math.ldexp(float(n_hi), -60) * (1.0 + 2.0**-39)
        start = (j % nb) * w + (j >= nb)  # smallest |k| in the bin
        y0[j] = start if j < nb else -(j - nb) * w
        flip[j] = 0 if j < nb else -1
        base2[j] = 2.0 * start
    acc_hi[2 * nb : 2 * nb + 2] = np.inf  # tails: decided separately
    # delta <= w (2 T + w) / (2 sigma^2) must stay <= 1/4 (the float margins assume it);
    # with w = 1 the offset is 0 and delta = 0.
    assert b == 0 or Fraction(w * (2 * tail_start + w)) / two_s2 <= Fraction(1, 4)
    arrays = [thr_a := np.array(thr, dtype=np.int64), alias_a := np.array(alias, dtype=np.int64)]
    ystart = y0 + flip
    for arr in (*arrays, acc_lo, acc_hi, y0, flip, ystart, base2, tmin):
        arr.flags.writeable = False
    return _Bins(
        s2=s2,
        b=b,
        nb=nb,
        scale=scale,
        weights=tuple(weights),
        k_bits=k_bits,
        v_bits=v_bits,
        thr=thr_a,
        alias=alias_a,
        y0=y0,
        flip=flip,
        ystart=ystart,
        base2=base2,
        acc_lo=acc_lo,
        acc_hi=acc_hi,
        h=float(1 / two_s2),
        tail_scale=tail_scale,
        tail_start=tail_start,
        u_bits=u_bits,
        tmin=tmin,
    )


def _exact_bin_accept(
    tab: _Bins, j: int, y: int, u32: int, rng: np.random.Generator, u_bits: int = 32
) -> bool:
    """Decide ``U < f(|y|) S / W_j`` exactly, ``U`` having the ``u_bits``-bit prefix ``u32``."""
    x = Fraction(y * y) / (2 * tab.s2)
    num, den = tab.scale, tab.weights[j]

    def enclose(prec: int) -> tuple[int, int]:
        e_lo, e_hi = exp_neg_enclosure(x, prec + 64)
        return (e_lo * num) // (den << 64), -((-e_hi * num) // (den << 64))

    return LazyUniform(u32, u_bits, rng).less_than(enclose)


def _tail_draw(tab: _Bins, negative: bool, rng: np.random.Generator) -> int | None:
    """One proposal from the tail envelope of one side, and its exact acceptance (or ``None``)."""
    g = int(_geometric_draws(tab.tail_scale, 1, rng)[0])
    m = tab.tail_start + int(negative) + g
    x = Fraction(m * m) / (2 * tab.s2) - g / Fraction(tab.tail_scale)
    assert x >= 0
    a = 1 / Fraction(tab.tail_scale)
    num = tab.scale
    den = tab.weights[2 * tab.nb + int(negative)] << tab.b

    def enclose(prec: int) -> tuple[int, int]:
        p = prec + 64
        one = 1 << p
        e_lo, e_hi = exp_neg_enclosure(x, p)
        q_lo, q_hi = exp_neg_enclosure(a, p)
        lo = (e_lo * num << prec) // (den * (one - q_lo))
        hi = -((-(e_hi * num << prec)) // (den * (one - q_hi)))
        return lo, hi

    if not LazyUniform(random_word(rng), 64, rng).less_than(enclose):
        return None
    return -m if negative else m


def _delta_hat(tab: _Bins, j: NDArray[np.int64], of: NDArray[np.float64]) -> NDArray[np.float64]:
    """``fl(fl(o (2 m_j + o)) h)``, within relative ``3.01 * 2**-53`` of delta (see module doc)."""
    delta = np.take(tab.base2, j)
    delta += of  # integers below 2**53: exact
    delta *= of
    delta *= tab.h
    return delta


def _tier1(acc_lo: NDArray[np.float64], base2: NDArray[np.float64] | None, of: NDArray[np.float64] | None,
           h: float, u: NDArray[np.int64]) -> NDArray[np.bool_]:
    """``u + 1 <= acc_lo * fl(1 - delta_hat)``, ``delta_hat = fl(fl(fl(2 m_j + o) o) h)``; consumes ``acc_lo``.

    ``base2`` holds ``2 m_j`` (its absolute value is used) and ``of`` the offsets, both exact
    integers below ``2**53``; ``None`` when the bins have width 1 (``delta = 0``).  ``u`` is the
    prefix of ``U`` in the units of ``acc_lo`` (below ``2**36``, so ``u + 1`` is exact).
    """
    if of is not None and base2 is not None:
        delta = np.abs(base2)
        delta += of  # exact
        delta *= of
        delta *= h
        np.subtract(1.0, delta, out=delta)
        acc_lo *= delta
    u1 = u.astype(np.float64)
    u1 += 1.0  # U < u1 / 2**u_bits
    return np.less_equal(u1, acc_lo)


def _first_tier(
    tab: _Bins, j: NDArray[np.int64], of: NDArray[np.float64] | None, u: NDArray[np.int64]
) -> NDArray[np.bool_]:
    """Proposals certified accepted: ``u + 1 <= acc_lo * fl(1 - delta_hat)``, 32-bit ``u`` (module docstring)."""
    return _tier1(np.take(tab.acc_lo, j), None if of is None else np.take(tab.base2, j), of, tab.h, u)


def _second_tier(
    tab: _Bins, j: NDArray[np.int64], of: NDArray[np.float64] | None, u: NDArray[np.int64],
    u_bits: int = 32,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Certified (accept, reject) from the Taylor bounds P3 <= exp(-delta) <= P2.

    ``u`` is a ``u_bits``-bit prefix of ``U``; in the 2**-32 units of the tables ``U`` lies in
    ``[u 2**(32 - u_bits), (u + 1) 2**(32 - u_bits))``, both ends exact floats.
    """
    delta = np.zeros(j.size) if of is None else _delta_hat(tab, j, of)
    upper = 1.0 - delta * (1.0 - 0.5 * delta)
    lower = 1.0 - delta * (1.0 - delta * (0.5 - delta * (1.0 / 6.0)))
    unit = 2.0 ** (32 - u_bits)
    uf = u.astype(np.float64) * unit
    reject = uf >= np.take(tab.acc_hi, j) * upper
    accept = uf + unit <= np.take(tab.acc_lo, j) * lower
    return accept, reject


def _binned_fill(tab: _Bins, out: NDArray[np.int64] | NDArray[np.float64],
                 rng: np.random.Generator) -> dict[int, int]:
    """Fill ``out`` with exact draws: one proposal per position, rejected positions drawn again.

    ``out`` is int64, or float64 (the values are integers; the release path adds them to doubles
    without a conversion).  A float64 ``out`` cannot hold a draw of ``2**53`` or more in magnitude
    (only a tail proposal can be one, with probability below ``exp(-2**25)`` at the largest
    ``sigma``): such draws are returned as ``{position: value}`` and their slots in ``out`` are to be
    ignored; the dictionary is empty otherwise (always for an int64 ``out``).

    Random bits: one 64-bit word per proposal: bits 0..v-1 the alias uniform ``V``, v..27 the
    column ``c`` (``_ALIAS_BITS = 28``), the acceptance uniform ``U``'s ``u_bits``-bit prefix in the
    top bits, and, when ``1 <= b <= 16``, the offset ``o`` in bits 28..28+b-1 (then
    ``u_bits = 36 - b >= 20``); for ``b > 16`` the offset is the top ``b`` bits of half of another
    word and ``u_bits = 32``.  Disjoint bits of a uniform word are independent and uniform.  The
    outcome is looked up at ``2 c + (V >= thr[c])`` in the ``pick_*`` tables (Walker's alias choice
    without a branch).  Tier 0 accepts ``u < tmin[j]`` (one integer comparison; module docstring);
    the rest go through the float tiers and the exact test.  A position whose proposal is rejected
    gets a fresh, independent draw (the same procedure on the rejected positions only), so every
    position holds the first accepted proposal of its own independent sequence of proposals: the
    draws are independent with exactly the target law, as they are when accepted proposals are
    kept in order.
    """
    m = out.size
    big: dict[int, int] = {}
    if m == 0:
        return big
    words = rng.integers(0, 1 << 64, size=m, dtype=np.uint64)
    signed = words.view(np.int64)
    index = np.right_shift(signed, np.int64(tab.v_bits))
    index &= np.int64((1 << tab.k_bits) - 1)  # the column c
    spare = np.bitwise_and(signed, np.int64((1 << tab.v_bits) - 1))  # V
    keep = np.take(tab.thr, index, mode="clip")  # indices are in range by construction
    np.greater_equal(spare, keep, out=keep)  # 1 where the alias is taken
    index <<= np.int64(1)
    index += keep  # 2 c + (V >= thr[c])
    u = np.right_shift(words, np.uint64(64 - tab.u_bits)).view(np.int64)  # the top u_bits
    ok = np.less(u, np.take(tab.pick_tmin, index, out=keep, mode="clip"))  # tier 0
    pending = None if ok.all() else np.flatnonzero(~ok)
    floats = out.dtype == np.float64
    of_pending: NDArray[np.float64] | None = None
    if tab.b:
        if tab.b <= _ONE_WORD_B:
            o = np.right_shift(signed, np.int64(_ALIAS_BITS), out=spare)
            o &= np.int64((1 << tab.b) - 1)
        else:
            halves = rng.integers(0, 1 << 64, size=(m + 1) // 2, dtype=np.uint64).view(np.uint32)[:m]
            o = np.right_shift(halves, np.uint32(32 - tab.b))
        y = cast("NDArray[np.float64]", out) if floats else np.empty(m)  # floats: out is float64
        np.copyto(y, o, casting="unsafe")  # the offsets as floats, exact
        if pending is not None:
            of_pending = y[pending]  # a copy, before y becomes the draws
        half = np.take(tab.pick_half, index, mode="clip")
        # y = m_j + o on the positive side, -(m_j + o) on the negative one: copysign(o, +-m_j) +
        # (+-m_j), exact integers below 2**53 (+0.0 keeps bin 0 on the positive side).
        np.copysign(y, half, out=y)
        y += half
        if not floats:
            np.copyto(out, y, casting="unsafe")
    else:
        if floats:
            np.take(tab.pick_ystart, index, out=out, mode="clip")
        else:
            np.copyto(out, np.take(tab.pick_ystart, index, mode="clip"), casting="unsafe")
    if pending is None:
        return big
    j = np.take(tab.pick, index[pending])
    y_pending = out[pending].astype(np.int64)
    u_pending = u[pending]
    # tier 1 on the pending proposals, in the units of U's u_bits-bit prefix (an exact rescaling)
    accept = _tier1(np.ldexp(np.take(tab.acc_lo, j), tab.u_bits - 32),
                    None if of_pending is None else np.take(tab.base2, j), of_pending, tab.h, u_pending)
    rest = np.flatnonzero(~accept)
    if rest.size:
        y_rest = y_pending[rest]
        accept[rest] = _settle(tab, j[rest], None if of_pending is None else of_pending[rest], y_rest,
                               u_pending[rest], rng, tab.u_bits)
        y_pending[rest] = y_rest
    out[pending] = y_pending
    if floats:
        for i in np.flatnonzero(accept & (np.abs(y_pending) >= _EXACT_FLOAT)):
            big[int(pending[i])] = int(y_pending[i])
    again = pending[~accept]
    if again.size:
        redo = np.empty_like(out, shape=again.size)
        for k, value in _binned_fill(tab, redo, rng).items():
            big[int(again[k])] = value
        out[again] = redo
    return big


_EXACT_FLOAT = 2**53


def _settle(
    tab: _Bins,
    j: NDArray[np.int64],
    of: NDArray[np.float64] | None,
    y: NDArray[np.int64],
    u: NDArray[np.int64],
    rng: np.random.Generator,
    u_bits: int = 32,
) -> NDArray[np.bool_]:
    """Decide proposals that the first tier did not accept (about 1-2% of them); returns the accepted.

    ``u`` holds ``u_bits``-bit prefixes of the acceptance uniforms.  ``y`` is updated in place where a
    tail proposal is drawn and accepted.
    """
    accept, reject = _second_tier(tab, j, of, u, u_bits)
    two_nb = 2 * tab.nb
    for i in np.flatnonzero(~(accept | reject)):
        jj = int(j[i])
        if jj < two_nb:
            accept[i] = _exact_bin_accept(tab, jj, int(y[i]), int(u[i]), rng, u_bits)
        else:  # a tail (the dummy has acc_hi = 0, so the second tier always rejects it)
            assert jj < two_nb + 2
            value = _tail_draw(tab, jj == two_nb + 1, rng)
            if value is not None:
                y[i] = value
                accept[i] = True
    return accept


def _binned_draws(tab: _Bins, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``n`` exact draws using the tables ``tab``, ``_BLOCK`` at a time."""
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        _binned_fill(tab, out[start : start + _BLOCK], rng)
    return out


def gaussian_noise(sigma: float, n: int, rng: np.random.Generator) -> NDArray[np.float64] | NDArray[np.int64]:
    """``n`` exact discrete Gaussian draws for the release path: float64 holding exact integers.

    The law and the checks are those of :func:`discrete_gaussian`; the draws come as float64 so that
    the release adds them to doubles without a conversion.  If a draw is ``2**53`` or more in
    magnitude (probability below ``exp(-2**25)``), the whole array comes back as int64 instead, so
    that every value is exact whatever its type.
    """
    value = check_positive("sigma", sigma)
    if not (_MIN_SIGMA <= value <= _MAX_SIGMA):
        raise InvalidArgumentError(f"sigma must be in [2**-40, 2**40]; got {value}.")
    generator = resolve_rng(rng)
    prime_allocator(n)
    return _float_draws(_bins(value), n, generator)


def _float_draws(tab: _Bins, n: int, rng: np.random.Generator) -> NDArray[np.float64] | NDArray[np.int64]:
    """``n`` exact draws with the tables ``tab`` as float64, or as int64 if one reaches ``_EXACT_FLOAT``."""
    out = np.empty(n, dtype=np.float64)
    big: dict[int, int] = {}
    for start in range(0, n, _BLOCK):
        for i, v in _binned_fill(tab, out[start : start + _BLOCK], rng).items():
            big[start + i] = v
    if not big:
        return out
    exact = out.astype(np.int64)  # every other entry is an integer below 2**53: exact
    for i, v in big.items():
        exact[i] = v
    return exact


def discrete_gaussian(
    sigma: float, size: Size = None, *, rng: np.random.Generator | None = None
) -> NDArray[np.int64] | np.int64:
    r"""Draw exactly from the discrete Gaussian law, :math:`P(k) \propto e^{-k^2/(2\sigma^2)}`.

    Parameters
    ----------
    sigma : float, finite, in [2**-40, 2**40]
        Taken as the exact dyadic rational that the float is.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one ``numpy.int64``.
    rng : numpy.random.Generator, optional
        Source of random bits; default :func:`dpkit.random.default_rng` (secure).

    Returns
    -------
    numpy.ndarray of int64, or numpy.int64
        Exact draws (given ideal random bits).

    Raises
    ------
    ValueError
        If ``sigma`` is NaN, infinite, ``<= 0`` or outside ``[2**-40, 2**40]``, or ``size`` is
        invalid.

    Notes
    -----
    .. math:: P(k) = \frac{e^{-k^2/(2\sigma^2)}}{\sum_{j \in \mathbb{Z}} e^{-j^2/(2\sigma^2)}}

    Rejection sampling from a piecewise-constant envelope over bins of width
    :math:`w \le \sigma/256` (an exact alias table over integer weights) plus an exact geometric
    tail beyond about :math:`7.5\sigma`; over 99.8% of proposals are accepted, almost all decided by
    one certified float64 comparison and the rest in exact integer arithmetic.  See
    :mod:`dpkit.random._gaussian` for the exactness argument.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
    arXiv 2004.00010v5 (the law and its privacy; their Algorithm 3 samples the same law).
    Walker 1977 and Vose 1991 (the alias method).

    Examples
    --------
    >>> from dpkit.random import insecure_seeded
    >>> discrete_gaussian(2.0, size=5, rng=insecure_seeded(0)).shape
    (5,)
    """
    value = check_positive("sigma", sigma)
    if not (_MIN_SIGMA <= value <= _MAX_SIGMA):
        raise InvalidArgumentError(
            f"sigma must be in [2**-40, 2**40]; got {value}. (Below 2**-40 a draw is nonzero "
            "with probability under exp(-2**79); above 2**40 it would leave the exact float range.)"
        )
    shape = check_size(size)
    generator = resolve_rng(rng)
    n = count(shape)
    prime_allocator(n)
    draws = _binned_draws(_bins(value), n, generator)
    return draws[0] if shape is None else draws.reshape(shape)
