r"""The one composable accounting state: every family of the core, added to in constant time.

Contract
--------
An :class:`AccountingState` is an immutable value.  ``state.add(item, count)`` returns a new state
holding ``count`` more uses of ``item`` (a :class:`~dpkit.accounting.items.PrivacyItem`, or anything
:func:`~dpkit.accounting.items.as_item` takes), in time independent of how many were added before:

* sums, each rounded **up** after every addition (``nextafter`` towards +inf, so a budget of 1.0
  refuses ten spends of 0.1): pure epsilon; basic composition's (epsilon, delta); zCDP rho; GDP mu^2;
  the Rényi curve at the fixed orders :data:`~dpkit.accounting.items.ORDERS` (one vector addition; while an
  item's curve is still uncomputed -- a subsampled Gaussian's, see :class:`~dpkit.accounting.items.PrivacyItem`
  -- the state keeps its last sum and adds the rest, in the same order, when ``rdp`` is first read);
* the privacy-loss laws for PLD composition, **run-length encoded**: an append-only log of
  ``(item, count)`` shared between snapshots (a snapshot sees its own prefix; adding to an older
  snapshot copies), grouped by law when a PLD answer is asked for.  Gaussian laws are merged exactly
  into one (mu = sqrt(sum k mu_i^2): the composition of Gaussian shift pairs is the Gaussian pair with
  that mu; Dong, Roth, Su 2022, arXiv 1905.02383, Cor 3.3), so any number of Gaussians costs one factor.

Reading (non-adaptive composition: the sequence fixed in advance; adaptive accounting is the filters'
job, :mod:`dpkit.accounting.filters`):

* ``epsilon(delta, method=...)`` and ``delta(epsilon, method=...)`` return an
  :class:`~dpkit._math.Estimate`: ``"basic"`` (Dwork & Roth 2014, Thm 3.16), ``"zcdp"`` (Bun & Steinke
  2016 Lemma 2.3, converted by Canonne, Kamath, Steinke 2020, arXiv 2004.00010, Cor 13), ``"gdp"``
  (Dong, Roth, Su 2022 Cor 3.3, exact Gaussian profile), ``"rdp"`` (Mironov 2017, arXiv 1702.07476,
  Prop 1, converted by CKS Prop 12 at the best fixed order), ``"pld"`` (certified interval from the
  pessimistic and optimistic PLDs: the tilted accountant of :mod:`dpkit.accounting._pld_tilted` for
  Gaussian, Laplace and subsampled-Gaussian laws, the FFT PLD of :mod:`dpkit.accounting.pld` when a
  discrete or finite pair or a subsampled Laplace law (:class:`~dpkit.accounting.items.SubsampledEvent`) is
  present), and ``"best"``: the smallest upper bound among those that
  apply, with the PLD's lower end when there is one (kind ``"interval"``).
* ``families()`` says which families hold a finite total.

Everything an answer needs is in the state: no history is replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from dpkit._math import Estimate, check_count, check_delta, check_epsilon
from dpkit._value import Lazy, value_object
from dpkit.accounting.items import ORDERS, PrivacyItem, as_item
from dpkit.errors import InvalidArgumentError, UnsupportedError

__all__ = ["AccountingState", "Method", "add_up", "mul_up", "cks_epsilon", "cks_delta", "zcdp_epsilon", "zcdp_delta"]

Method = Literal["best", "basic", "zcdp", "gdp", "rdp", "pld"]
_ORD = np.array(ORDERS)
_INF = math.inf
#: relative margin added to closed-form conversions evaluated in doubles (their rounding is ~1e-15)
_MARGIN = 1e-12


def _up(x: float) -> float:
    """The float above x (an exact 0 and infinities stay: 0 * anything is exactly 0)."""
    return math.nextafter(x, _INF) if math.isfinite(x) and x != 0.0 else x


def add_up(a: float, b: float) -> float:
    """a + b rounded up: the float sum, moved up one float only where it rounded down (Knuth's TwoSum)."""
    s = a + b
    if not math.isfinite(s):
        return s
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return math.nextafter(s, _INF) if err > 0 else s


_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitting constant for doubles


def mul_up(k: float, v: float) -> float:
    """k * v rounded up (0 and infinities stay).

    The rounding error of the float product is computed exactly by Dekker's TwoProduct (Veltkamp split;
    Dekker 1971, "A floating-point technique for extending the available precision", Numer. Math. 18,
    Thm 5.14 -- exact for round-to-nearest doubles when nothing overflows or underflows), so the product is
    moved up one float exactly when it rounded down.  Outside the range where that holds (products or
    factors near the overflow or underflow thresholds), the decision is made with fractions."""
    if k == 1:
        return v  # exact: no rounding to correct (the common case of one spend at a time)
    p = k * v
    if p == 0.0 or not math.isfinite(p):
        return p
    a, b = float(k), float(v)
    if 1e-250 < abs(p) < 1e250 and 1e-250 < abs(a) < 1e250 and 1e-250 < abs(b) < 1e250:
        c = _SPLIT * a
        ah = c - (c - a)
        al = a - ah
        c = _SPLIT * b
        bh = c - (c - b)
        bl = b - bh
        err = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # a * b - p, exactly
        return math.nextafter(p, _INF) if err > 0 else p
    return p if Fraction(p) >= Fraction(k) * Fraction(v) else math.nextafter(p, _INF)


_add_up, _mul_up = add_up, mul_up


# ---- conversions at the fixed orders (vectorised; any order gives a valid bound) -----------------------
def cks_epsilon(rdp: NDArray[np.float64], orders: NDArray[np.float64], delta: float) -> float:
    r"""min over the orders of eps_a + ln(1 - 1/a) - (ln delta + ln a)/(a - 1) (CKS 2020, Prop 12; Balle et
    al. 2020, arXiv 1905.09982, Thm 21), >= 0, rounded up by a relative margin."""
    a = orders
    with np.errstate(invalid="ignore", over="ignore"):
        e = rdp + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    e = e[np.isfinite(e)]
    if e.size == 0:
        return _INF
    best = float(np.min(e))
    return max(0.0, best + abs(best) * _MARGIN + 1e-300)


def cks_delta(rdp: NDArray[np.float64], orders: NDArray[np.float64], epsilon: float) -> float:
    r"""min over the orders of exp((a - 1)(eps_a - eps)) (1 - 1/a)^(a-1) / a (CKS 2020, Prop 12), <= 1."""
    a = orders
    with np.errstate(invalid="ignore", over="ignore"):
        ld = (a - 1.0) * (rdp - epsilon) + (a - 1.0) * np.log1p(-1.0 / a) - np.log(a)
    ld = ld[np.isfinite(ld)]
    if ld.size == 0:
        return 1.0
    best = float(np.min(ld))
    return min(1.0, math.exp(best + abs(best) * _MARGIN) * (1.0 + _MARGIN))


_ZA = 1.0 + np.geomspace(1e-6, 1e7, 4000)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """epsilon(delta) of rho-zCDP by CKS Cor 13 on a dense grid of orders (every order is a valid bound)."""
    if rho == 0.0:
        return 0.0
    return cks_epsilon(_ZA * rho, _ZA, delta)


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta(epsilon) of rho-zCDP by CKS Cor 13 on a dense grid of orders."""
    if rho == 0.0:
        return 0.0
    return cks_delta(_ZA * rho, _ZA, epsilon)


#: loss-law kinds whose fourth entry counts uses per item (DP-SGD steps, or one subsampled event)
_COUNTED_KINDS = ("subsampled", "symmetric", "subsampled_laplace", "symmetric_laplace")


def _rdp_add(acc: NDArray[np.float64], k: int, rdp: NDArray[np.float64]) -> NDArray[np.float64]:
    """acc + k * rdp, order by order, moved up one float where not 0 (the state's Rényi sum, one addition)."""
    s = acc + k * rdp
    out: NDArray[np.float64] = np.where(s != 0.0, np.nextafter(s, np.inf), s)
    return out


# ---- the state --------------------------------------------------------------------------------------
#: what :meth:`AccountingState._laws` groups the log into: law key -> count, or "none" when an item has no law
_Laws = dict[Any, int] | Literal["none"]


@value_object(init=False, eq=False, repr=False)
class AccountingState:
    """An immutable snapshot of everything composed so far (see the module docstring).

    A frozen, slotted dataclass (:func:`dpkit._value.value_object`): assigning to or deleting an
    attribute raises :class:`dataclasses.FrozenInstanceError`.  Its ``__init__`` takes no argument (the
    empty state); :meth:`add` builds each new state by setting the fields directly, the frozen
    dataclass's own way.  Equality and hashing are identity (as before: the fields hold an array and
    a log shared between snapshots), and the repr is the short one below.  Two things are computed on
    first use and kept, outside the value: the laws grouped for PLD composition (a
    :class:`~dpkit._value.Lazy`) and the memo of ``epsilon``/``delta`` answers (a dict).

    >>> from dpkit.guarantees import PureDP
    >>> s = AccountingState().add(PureDP(0.1), count=10)
    >>> float(s.epsilon(1e-6, method="basic")) > 1.0  # ten spends of 0.1, rounded up
    True
    """

    _log: list[tuple[PrivacyItem, int]]  # shared, append-only; this snapshot is its first _n entries
    _n: int
    count: int
    pure: float
    basic_epsilon: float
    basic_delta: float
    rho: float
    mu2: float
    # the Rényi sum (read-only), or, while some item's curve is unread, (an earlier sum, the log length it
    # holds for), summed on into ``_rdp_sum`` on first read: read it through ``rdp``
    _rdp: NDArray[np.float64] | tuple[NDArray[np.float64], int]
    _rdp_sum: Lazy[NDArray[np.float64]] = field(compare=False)
    _laws_cache: Lazy[_Laws] = field(compare=False)  # the grouped laws, built on first read
    _answers: dict[tuple[str, float, str], Estimate] = field(compare=False)  # memoised answers of this snapshot

    def __init__(self) -> None:
        self._init([], 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, np.zeros(len(ORDERS)))

    def _init(self, log: list[tuple[PrivacyItem, int]], n: int, count: int, pure: float, be: float, bd: float,
              rho: float, mu2: float, rdp: NDArray[np.float64] | tuple[NDArray[np.float64], int]) -> None:
        if isinstance(rdp, np.ndarray):
            rdp.flags.writeable = False
        set_ = object.__setattr__  # the frozen dataclass's own way of setting its fields
        set_(self, "_log", log)
        set_(self, "_n", n)
        set_(self, "count", count)
        set_(self, "pure", pure)
        set_(self, "basic_epsilon", be)
        set_(self, "basic_delta", bd)
        set_(self, "rho", rho)
        set_(self, "mu2", mu2)
        set_(self, "_rdp", rdp)
        set_(self, "_rdp_sum", Lazy())
        set_(self, "_laws_cache", Lazy())
        set_(self, "_answers", {})

    def __repr__(self) -> str:
        return f"AccountingState(compositions={self.count}, entries={self._n})"

    # ---- adding ----------------------------------------------------------------------------------
    def add(self, item: object, count: int = 1) -> AccountingState:
        """A new state with ``count`` more uses of ``item``; this one is unchanged.  O(1) in the history."""
        it = as_item(item)
        k = check_count("count", count)
        log = self._log
        if len(log) != self._n:  # adding to an older snapshot: copy its prefix (the log is append-only)
            log = log[: self._n]
        log.append((it, k))  # one entry per add; identical items are grouped when a PLD is read
        new = object.__new__(AccountingState)
        if it.approx is None:
            be, bd = _INF, self.basic_delta
        else:
            be = _add_up(self.basic_epsilon, _mul_up(k, it.approx[0]))
            bd = _add_up(self.basic_delta, _mul_up(k, it.approx[1]))
        cur = self._rdp if isinstance(self._rdp, np.ndarray) else self._rdp_sum.peek()
        rdp: NDArray[np.float64] | tuple[NDArray[np.float64], int]
        if cur is None:
            rdp = self._rdp  # still pending: the same earlier sum, summed on from the log when read
        elif it.rdp_ready:
            rdp = _rdp_add(cur, k, it.rdp)
        else:  # the item's curve is computed on first use: the sum is too (see ``rdp``)
            rdp = (cur, self._n)
        new._init(log, self._n + 1, self.count + k, _add_up(self.pure, _mul_up(k, it.epsilon)), be, bd,
                  _add_up(self.rho, _mul_up(k, it.rho)), _add_up(self.mu2, _mul_up(k, _up(it.mu * it.mu))), rdp)
        return new

    @property
    def rdp(self) -> NDArray[np.float64]:
        """The Rényi curve at :data:`~dpkit.accounting.items.ORDERS` of everything added (each order's sum
        rounded up after every addition).  Where an item's curve is computed on first use (a subsampled
        Gaussian's), the sum is taken here, on first read, from the last sum known, over the log in the
        order of the additions: the same float operations as an eager sum, so the same array."""
        cur = self._rdp
        if isinstance(cur, np.ndarray):
            return cur
        return self._rdp_sum.get(self._sum_rdp)

    def _sum_rdp(self) -> NDArray[np.float64]:
        assert not isinstance(self._rdp, np.ndarray)
        acc, start = self._rdp
        for it, k in self._log[start: self._n]:
            acc = _rdp_add(acc, k, it.rdp)
        acc.flags.writeable = False
        return acc

    @property
    def entries(self) -> tuple[tuple[PrivacyItem, int], ...]:
        """The ``(item, count)`` pairs added, oldest first."""
        return tuple(self._log[: self._n])

    def families(self) -> dict[str, bool]:
        """Which families hold a finite total (basic, zcdp, gdp, rdp, pld)."""
        return {"basic": math.isfinite(self.basic_epsilon), "zcdp": math.isfinite(self.rho),
                "gdp": math.isfinite(self.mu2), "rdp": bool(np.any(np.isfinite(self.rdp))),
                "pld": self._n == 0 or self._laws() is not None}

    # ---- the PLD laws, grouped ---------------------------------------------------------------------
    def _laws(self) -> dict[Any, int] | None:
        """law key -> count (Gaussians merged into ("gaussian", mu^2 sum)); None if an item has no law."""
        laws = self._laws_cache.get(self._group_laws)
        return None if laws == "none" else laws

    def _group_laws(self) -> _Laws:
        out: dict[Any, int] = {}
        mu2 = 0.0
        for it, k in self._log[: self._n]:
            law = it.law
            if law is None:
                return "none"
            if law[0] == "gaussian":
                mu2 = _add_up(mu2, _mul_up(k, _up(law[1] * law[1])))
                continue
            if law[0] in _COUNTED_KINDS:  # (kind, parameter, q, uses per item)
                key = law[:3]
                out[key] = out.get(key, 0) + k * law[3]
                continue
            key = law if law[0] != "pair" else ("pair", _pair_key(law[1]), law[1])
            out[key] = out.get(key, 0) + k
        if mu2 > 0:
            out[("gaussian", mu2)] = 1
        return out

    # ---- reading -------------------------------------------------------------------------------------
    def epsilon(self, delta: float, *, method: Method = "best") -> Estimate:
        """epsilon(delta) of the composition (fixed in advance) by ``method`` (see the module docstring).

        Raises
        ------
        UnsupportedError
            If ``method`` does not apply to what was added (the message says which would).
        """
        d = check_delta(delta, open_interval=True)
        return self._answer("epsilon", d, method)

    def delta(self, epsilon: float, *, method: Method = "best") -> Estimate:
        """delta(epsilon) of the composition by ``method`` (an upper bound, or the PLD interval)."""
        e = check_epsilon(epsilon)
        return self._answer("delta", e, method)

    def _answer(self, what: str, x: float, method: Method) -> Estimate:
        key = (what, x, method)
        cached = self._answers.get(key)
        if cached is not None:
            return cached
        if self._n == 0:
            out = Estimate(0.0, kind="exact", method="nothing composed")
        elif method == "best":
            out = self._best(what, x)
        else:
            out = self._method(what, x, method)
        self._answers[key] = out
        return out

    def _method(self, what: str, x: float, method: str) -> Estimate:
        eps = what == "epsilon"
        if method == "basic":
            if not math.isfinite(self.basic_epsilon):
                raise UnsupportedError("basic composition needs an (epsilon, delta) guarantee of every item; a "
                                       "zCDP, GDP, Rényi or DP-SGD item has none (use method='zcdp', 'rdp' or 'pld').")
            if eps:
                v = self.basic_epsilon if self.basic_delta <= x else _INF
            else:
                v = self.basic_delta if self.basic_epsilon <= x else 1.0
            return Estimate(v, kind="upper", method="basic composition (Dwork & Roth 2014, Thm 3.16)")
        if method == "zcdp":
            if not math.isfinite(self.rho):
                raise UnsupportedError("zCDP composition needs a rho for every item; an (epsilon, delta) or DP-SGD "
                                       "item has none (use method='basic' or 'pld').")
            v = zcdp_epsilon(self.rho, x) if eps else zcdp_delta(self.rho, x)
            return Estimate(v, kind="upper", method="zCDP sum (Bun & Steinke 2016) with CKS 2020 Cor 13")
        if method == "gdp":
            if not math.isfinite(self.mu2):
                raise UnsupportedError("GDP composition needs a mu for every item (GaussianDP, a continuous "
                                       "Gaussian, or pure epsilon-DP); use method='zcdp' for discrete Gaussians.")
            from dpkit.accounting.gaussian_profile import gaussian_delta_interval, gaussian_epsilon_interval

            mu = _up(math.sqrt(self.mu2))
            if mu == 0.0:
                return Estimate(0.0, kind="exact", method="GDP with mu = 0")
            hi = gaussian_epsilon_interval(mu, x)[1] if eps else gaussian_delta_interval(mu, x)[1]
            return Estimate(hi, kind="upper", method="GDP composition (Dong, Roth, Su 2022, Cor 3.3), exact profile")
        if method == "rdp":
            if not np.any(np.isfinite(self.rdp)):
                raise UnsupportedError("Rényi composition needs a Rényi curve of every item; an (epsilon, delta) "
                                       "item has none (use method='basic').")
            v = cks_epsilon(self.rdp, _ORD, x) if eps else cks_delta(self.rdp, _ORD, x)
            return Estimate(v, kind="upper", method="RDP sum at fixed orders (Mironov 2017) with CKS 2020 Prop 12")
        if method == "pld":
            lo, hi, how = self._pld(what, x)
            return Estimate(hi, kind="interval", lower=lo, method=how)
        raise InvalidArgumentError(f"unknown method {method!r}; choose from best, basic, zcdp, gdp, rdp, pld.")

    def _best(self, what: str, x: float) -> Estimate:
        best: Estimate | None = None
        lower = -_INF
        names = []
        for m in ("basic", "gdp", "zcdp", "rdp", "pld"):
            try:
                v = self._method(what, x, m)
            except UnsupportedError:
                continue
            names.append(m)
            if v.kind == "interval":
                lower = max(lower, float(v.lower_bound))
            if best is None or float(v) < float(best):
                best = v
        if best is None:
            raise UnsupportedError("no composition method applies to these items together: an (epsilon, delta) "
                                   "item composes only by basic composition, and a zCDP/Rényi/DP-SGD item has no "
                                   "(epsilon, delta) guarantee for it; spend the mechanisms themselves.")
        hi = float(best)
        if lower > -_INF:
            if lower > hi * (1.0 + 1e-9) + 1e-300:
                raise ArithmeticError(f"inconsistent bounds: PLD lower end {lower!r} > upper bound {hi!r} "
                                      f"({best.method}); please report this.")
            return Estimate(hi, kind="interval", lower=min(lower, hi),
                            method=f"best of {', '.join(names)}: {best.method}")
        return Estimate(hi, kind="upper", method=f"best of {', '.join(names)}: {best.method}")

    # ---- PLD ------------------------------------------------------------------------------------------
    def _pld(self, what: str, x: float) -> tuple[float, float, str]:
        laws = self._laws()
        if laws is None:
            raise UnsupportedError("PLD composition needs the loss law of every item; an item given only by a "
                                   "guarantee (ApproxDP, ZCDP, RenyiDP) has none: spend the mechanism itself.")
        from dpkit.accounting import _state_pld

        return _state_pld.answer(laws, what, x)


def _pair_key(pair: Any) -> tuple[Any, ...]:
    """Identical dominating pairs share a key: the laws' reprs (their parameters) and the symmetry flag."""
    return (repr(pair.P), repr(pair.Q), bool(pair.symmetric))


Reader = Callable[[float], Estimate]
