r"""Privacy filters: stopping rules that stay within a budget while every spend is chosen adaptively.

A *filter* (Rogers, Roth, Ullman, Vadhan 2016, arXiv 1605.08294, Def 3.1) decides, before each spend,
from the parameters of the spends so far and of the next one (never from data), whether to run it; the
whole interaction, however the analyst chose each mechanism and its parameters from earlier answers,
is then (epsilon, delta)-DP.  Each filter here is a sum compared with a limit fixed when the budget is
made (so a spend costs O(1) and a refused spend changes nothing):

==========  ==========================================  ===============================================
kind        admits while                                source (docs/theory.md §2d has each argument)
==========  ==========================================  ===============================================
``basic``   sum eps_i <= eps_B, sum delta_i <= share     Rogers et al. 2016, Thm 3.6 (basic filter)
``zcdp``    sum rho_i <= rho_B                          Feldman & Zrnic 2021, arXiv 2008.11193v4, Thm 3.1
                                                        at every order at once; rho_B from CKS 2020 Cor 13
``gdp``     sum mu_i^2 <= mu_B^2                        Smith & Thakurta 2022, arXiv 2210.17520, Thm 1.1
``rdp``     sum eps_i(a) <= B_a at each order a          Feldman & Zrnic 2021, Thm 3.1; B_a from CKS Prop 12
``approx``  sqrt(2 ln(1/d') S) + S/2 <= eps_B,          Whitehouse, Ramdas, Rogers, Wu 2023 (ICML),
            S = sum eps_i^2; sum delta_i <= d''          arXiv 2203.05481, their filter for approximate
                                                        DP (theorem number not verified against the text)
==========  ==========================================  ===============================================

The ``approx`` row: the paper's filter stops before sqrt(2 ln(1/d') sum eps_m^2) + (1/2) sum eps_m^2
exceeds eps_B or the spends' deltas exceed d'', and certifies (eps_B, d' + d'')-DP; ``make_filter`` takes
d' = d'' = delta_B / 2.  Checked against: the paper's abstract ("filters that match the rates of advanced
composition, including constants") and a secondary summary of it stating this rule (which numbers it
"Thm 2"); the full text was not reachable from here, so no theorem number is given.  For k equal
eps_i = eps the rule is below advanced composition's sqrt(2k ln(1/d')) eps + k eps (e^eps - 1) (Dwork &
Roth 2014, Thm 3.20), since e^eps - 1 >= eps > eps/2.

**Several filters at once** (:class:`FilterSet`).  A set holds filters F_1..F_m with delta shares
d_1..d_m (sum <= delta_B).  A spend runs if at least one *alive* filter admits it; the alive filters that
do not admit a spend that runs stop for good; a spend no alive filter admits is refused and changes
nothing (no filter stops).  Valid with delta = sum d_i (docs/theory.md §2d): some filter is always alive;
on the event E_i that F_i is the first filter alive at the end, F_i admitted every spend that ran and
refused every spend that was refused, so each transcript in E_i has the same probability as under F_i
alone, which is an (eps_B, d_i) filter; E_i is decided by the transcript, so
P[V in S] = sum_i P_i[V in S and E_i] <= e^eps_B P'[V in S] + sum_i d_i.  (Running a spend whenever *any*
filter admits it, with no filter ever stopping, is not valid: the analyst could alternate between them.)

**Automatic choice** (``filter="auto"``, the default for an ApproxDP budget): the set is
{``basic`` with share 0 (pure spends only), X with share delta_B}, X fixed at the **first** spend from
that spend's family (the first *admitted* spend: a refused spend fixes nothing): ``gdp`` for a Gaussian-DP
item (GaussianDP, continuous Gaussian), ``zcdp`` for an
item with a rho (pure, zCDP, dpkit's Gaussian mechanisms), ``rdp`` at the single order that suits the
first item best for an item with a Rényi curve only (DP-SGD steps), ``basic`` (with all of delta_B) for an
(eps, delta) item (``filter="approx"`` chooses Whitehouse et al.'s filter instead).
The first spend is chosen before any answer exists, so the choice is data-independent: conditioned on
it the set is fixed, and a mixture of (eps, delta)-DP interactions over a data-independent choice is
(eps, delta)-DP.  No delta is split, so X is exactly as tight as it alone would be.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit._math.bisection import bisect_monotone
from dpkit._math.directed import down, up
from dpkit.accounting.items import ORDERS, PrivacyItem
from dpkit.accounting.state import add_up, mul_up, zcdp_epsilon
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError

__all__ = ["FILTER_KINDS", "Filter", "FilterSet", "gdp_budget", "rdp_budgets", "zcdp_budget"]

FILTER_KINDS = ("basic", "zcdp", "gdp", "rdp", "approx")
_ORD = np.array(ORDERS)
_INF = math.inf


def _up(x: float) -> float:
    """The float above x (an exact 0 and infinities stay: 0 * anything is exactly 0)."""
    return math.nextafter(x, _INF) if math.isfinite(x) and x != 0.0 else x


def _down(x: float) -> float:
    return math.nextafter(x, -_INF) if x > 0 else x


def _largest(ok: Callable[[float], bool], start: float, rtol: float) -> float:
    """The largest x >= 0 with ``ok(x)`` (to ``rtol`` relative, from below), for ``ok`` true at 0 and monotone.

    Doubles from ``start`` (> 0) until ``ok`` fails, then bisects (at most 200 evaluations) with
    :func:`dpkit._math.bisection.bisect_monotone` on the lower side of "``ok`` fails": the returned end
    always satisfies ``ok`` (or is 0), so a budget built on it is never larger than certified.
    """
    lo, hi = 0.0, start
    while ok(hi):
        lo, hi = hi, 2.0 * hi
    return bisect_monotone(lambda x: not ok(x), lo, hi, side="lower", rtol=rtol, max_iter=200)


# ---- budgets: the largest limit whose conversion is certified to meet (eps_B, delta) -------------------
def zcdp_budget(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-12 relative, rounded down) with CKS 2020 Cor 13 giving epsilon(delta) <= epsilon."""
    if delta <= 0.0:
        return 0.0
    return _down(_largest(lambda rho: zcdp_epsilon(rho, delta) <= epsilon, max(1.0, epsilon), 1e-12))


def gdp_budget(epsilon: float, delta: float) -> float:
    """The largest mu (rounded down) whose exact Gaussian profile (certified upper end, Balle & Wang 2018,
    arXiv 1805.06530, Thm 8) gives delta(epsilon) <= delta."""
    if delta <= 0.0:
        return 0.0
    from dpkit.accounting.gaussian_profile import gaussian_delta_interval

    def ok(mu: float) -> bool:
        return gaussian_delta_interval(mu, epsilon)[1] <= delta

    return _down(_largest(ok, 1.0, 1e-13))


def rdp_budgets(epsilon: float, delta: float) -> NDArray[np.float64]:
    r"""B_a = eps - ln(1 - 1/a) + (ln delta + ln a)/(a - 1) at each order (CKS Prop 12 solved for eps_a),
    lowered by a relative 1e-12 (<= 0 where the order cannot meet the budget at all)."""
    a = _ORD
    b = epsilon - np.log1p(-1.0 / a) + (math.log(delta) + np.log(a)) / (a - 1.0)
    out: NDArray[np.float64] = b - np.abs(b) * 1e-12 - 1e-300
    return out


# ---- one filter ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    """One filter's limit and running total (immutable; :meth:`admit` returns the next one or None)."""

    kind: str
    share: float  # the delta this filter answers for
    limit: float = 0.0  # eps_B (basic, approx), rho_B (zcdp), mu_B^2 rounded down (gdp)
    exact_limit: Fraction | None = None  # gdp: mu_B^2 exactly (compared instead of ``limit`` when given)
    used: Fraction = Fraction(0)  # exact: sum eps (basic), sum rho (zcdp), sum mu^2 (gdp), sum eps^2 (approx)
    delta_limit: float = 0.0  # basic: its share; approx: d''
    delta_used: Fraction = Fraction(0)
    log_term: float = 0.0  # approx: 2 ln(1/d')
    orders: tuple[int, ...] = ()  # rdp: indices into ORDERS
    rdp_limit: tuple[float, ...] = ()
    rdp_used: tuple[Fraction, ...] = ()

    def cost(self, item: PrivacyItem, count: int) -> Any:
        """What ``count`` uses of ``item`` add here (None if this filter cannot account for the item)."""
        k = count
        if self.kind == "basic":
            if item.approx is None:
                return None
            return (mul_up(k, item.approx[0]), mul_up(k, item.approx[1]))
        if self.kind == "zcdp":
            return mul_up(k, item.rho) if math.isfinite(item.rho) else None
        if self.kind == "gdp":
            return k * Fraction(item.mu) ** 2 if math.isfinite(item.mu) else None  # exact
        if self.kind == "approx":
            if item.approx is None:
                return None
            e, d = item.approx
            return (mul_up(k, mul_up(e, e)), mul_up(k, d))
        vals = [mul_up(k, float(item.rdp[i])) for i in self.orders]
        return None if not all(math.isfinite(v) for v in vals) else tuple(vals)

    def admit(self, item: PrivacyItem, count: int) -> Filter | None:
        """This filter after the spend, or None if it does not admit it (then it stops)."""
        c = self.cost(item, count)
        if c is None:
            return None
        # sums are exact fractions of the (rounded-up) per-spend costs, compared exactly with the limit:
        # k copies at once and k single spends give the same total
        if self.kind in ("zcdp", "gdp"):
            used = self.used + Fraction(c)
            lim = self.exact_limit if self.exact_limit is not None else Fraction(self.limit)
            return replace(self, used=used) if used <= lim else None
        if self.kind == "basic":
            used, dused = self.used + Fraction(c[0]), self.delta_used + Fraction(c[1])
            ok = used <= Fraction(self.limit) and dused <= Fraction(self.delta_limit)
            return replace(self, used=used, delta_used=dused) if ok else None
        if self.kind == "approx":
            s, dused = self.used + Fraction(c[0]), self.delta_used + Fraction(c[1])
            s_up = up(s)
            rate = add_up(_up(math.sqrt(mul_up(self.log_term, s_up))), mul_up(0.5, s_up))
            ok = rate <= self.limit and dused <= Fraction(self.delta_limit)
            return replace(self, used=s, delta_used=dused) if ok else None
        new = tuple(u + Fraction(v) for u, v in zip(self.rdp_used, c))
        return replace(self, rdp_used=new) if all(u <= Fraction(b) for u, b in zip(new, self.rdp_limit)) else None

    def describe(self) -> str:
        if self.kind == "zcdp":
            return f"zCDP filter: rho {up(self.used):.6g} of {self.limit:.6g}"
        if self.kind == "gdp":
            return f"GDP filter: mu {math.sqrt(up(self.used)):.6g} of {math.sqrt(self.limit):.6g}"
        if self.kind == "basic":
            return (f"basic filter: epsilon {up(self.used):.6g} of {self.limit:.6g}, delta {up(self.delta_used):.3g} "
                    f"of {self.delta_limit:.3g}")
        if self.kind == "approx":
            return (f"approximate-DP filter (Whitehouse et al.): sum eps^2 {up(self.used):.6g}, delta "
                    f"{up(self.delta_used):.3g} of {self.delta_limit:.3g}")
        parts = ", ".join(f"order {ORDERS[i]:g}: {up(u):.6g} of {b:.6g}" for i, u, b in
                          zip(self.orders, self.rdp_used, self.rdp_limit))
        return f"RDP filter: {parts}"


def make_filter(kind: str, *, epsilon: float, delta_share: float, first: PrivacyItem | None = None,
                orders: Sequence[int] | None = None, rdp_limits: Sequence[float] | None = None) -> Filter:
    """The filter ``kind`` for an (epsilon, delta_share) budget (``first``: the item that fixes an RDP
    filter's order)."""
    if kind == "basic":
        return Filter(kind="basic", share=delta_share, limit=epsilon, delta_limit=delta_share)
    if kind == "zcdp":
        return Filter(kind="zcdp", share=delta_share, limit=zcdp_budget(epsilon, delta_share))
    if kind == "gdp":
        mu = gdp_budget(epsilon, delta_share)
        return Filter(kind="gdp", share=delta_share, limit=down(Fraction(mu) ** 2))
    if kind == "approx":
        # half the share for the concentration term d', half for the spends' own deltas d''
        d1 = delta_share / 2.0
        return Filter(kind="approx", share=delta_share, limit=epsilon, log_term=_up(2.0 * math.log(1.0 / d1)),
                      delta_limit=delta_share - d1)  # exact: d1 is half of delta_share (Sterbenz)
    if kind == "rdp":
        if orders is None:
            b = rdp_budgets(epsilon, delta_share)
            if first is None or not np.any(np.isfinite(first.rdp)):
                i = int(np.argmax(b / _ORD))
            else:  # the order at which the most copies of the first item would fit (data-independent)
                with np.errstate(divide="ignore", invalid="ignore"):
                    fits = np.where(first.rdp > 0, b / first.rdp, np.where(b > 0, np.inf, 0.0))
                i = int(np.argmax(np.where(np.isfinite(first.rdp), fits, -1.0)))
            orders, rdp_limits = (i,), (float(b[i]),)
        assert rdp_limits is not None
        return Filter(kind="rdp", share=delta_share, orders=tuple(orders), rdp_limit=tuple(rdp_limits),
                      rdp_used=tuple(Fraction(0) for _ in orders))
    raise InvalidArgumentError(f"unknown filter {kind!r}; choose from {', '.join(FILTER_KINDS)} or 'auto'.")


def auto_kind(item: PrivacyItem) -> str:
    """The filter that suits ``item``'s family best (see the module docstring)."""
    if math.isfinite(item.mu) and not math.isfinite(item.epsilon):
        return "gdp"  # a genuine Gaussian-DP item: the GDP filter has no conversion loss
    if math.isfinite(item.rho):
        return "zcdp"
    if np.any(np.isfinite(item.rdp)):
        return "rdp"
    if item.approx is not None:
        return "basic"  # an (epsilon, delta) spend: basic composition with the whole delta (the approximate-DP
        # filter pays for its concentration term with half of delta: choose it with filter="approx")
    raise UnsupportedError(f"{item.label} states no guarantee any privacy filter can account for (a filter needs a "
                           "pure, zCDP, Gaussian-DP, Rényi or (epsilon, delta) guarantee); give one, or build the "
                           "Accountant with adaptive=False if the whole sequence was fixed in advance (PLD).")


# ---- several filters ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class FilterSet:
    """Filters run side by side under one (epsilon, delta) budget (see the module docstring).

    ``pending``: ``"auto"`` until the first admitted spend fixes the set."""

    epsilon: float
    delta: float
    filters: tuple[Filter, ...] = ()
    alive: tuple[bool, ...] = ()
    pending: str | None = None

    @classmethod
    def build(cls, epsilon: float, delta: float, spec: str | dict[str, float]) -> FilterSet:
        """``spec``: "auto", one kind (its share is delta), or {kind: delta share} (shares sum <= delta)."""
        if spec == "auto":
            return cls(epsilon=epsilon, delta=delta, pending="auto")
        if isinstance(spec, str):
            spec = {spec: delta}
        if not isinstance(spec, dict) or not spec:
            raise ArgumentTypeError("filter must be 'auto', a filter kind, or a dict {kind: delta share}.")
        total = math.fsum(spec.values())
        if total > delta * (1.0 + 1e-12):
            raise InvalidArgumentError(
                f"the filters' delta shares add up to {total}, more than the budget's delta {delta}.")
        fs = []
        for kind, share in spec.items():
            if kind not in FILTER_KINDS:
                raise InvalidArgumentError(f"unknown filter {kind!r}; choose from {', '.join(FILTER_KINDS)} or 'auto'.")
            if not (0.0 <= share <= delta):
                raise InvalidArgumentError(f"filter {kind!r} has delta share {share!r}; shares lie in [0, delta].")
            if kind != "basic" and share == 0.0:
                raise InvalidArgumentError(f"filter {kind!r} needs a delta share > 0.")
            fs.append(make_filter(kind, epsilon=epsilon, delta_share=share))
        filters = tuple(fs)
        return cls(epsilon=epsilon, delta=delta, filters=filters, alive=tuple(True for _ in filters))

    def _fixed(self, item: PrivacyItem) -> FilterSet:
        """The automatic set, fixed by the first item."""
        kind = auto_kind(item)
        filters = (make_filter("basic", epsilon=self.epsilon, delta_share=0.0),
                   make_filter(kind, epsilon=self.epsilon, delta_share=self.delta, first=item))
        return FilterSet(epsilon=self.epsilon, delta=self.delta, filters=filters, alive=(True, True))

    def admit(self, item: PrivacyItem, count: int) -> FilterSet | None:
        """The set after the spend, or None if no alive filter admits it (then nothing changes)."""
        base = self._fixed(item) if self.pending == "auto" else self
        new_filters, new_alive, any_ok = [], [], False
        for f, alive in zip(base.filters, base.alive):
            nxt = f.admit(item, count) if alive else None
            any_ok = any_ok or nxt is not None
            new_filters.append(nxt if nxt is not None else f)
            new_alive.append(nxt is not None)
        if not any_ok:
            return None
        return FilterSet(epsilon=self.epsilon, delta=self.delta, filters=tuple(new_filters), alive=tuple(new_alive))

    def why_not(self, item: PrivacyItem, count: int) -> str:
        """A sentence on why the spend is refused (for the error message)."""
        base = self._fixed(item) if self.pending == "auto" else self
        parts = []
        for f, alive in zip(base.filters, base.alive):
            if not alive:
                parts.append(f"{f.kind} filter already stopped")
            elif f.cost(item, count) is None:
                parts.append(f"the {f.kind} filter cannot account for {item.label}")
            else:
                parts.append(f"{f.describe()}, and this spend does not fit")
        return "; ".join(parts)

    def describe(self) -> list[str]:
        if self.pending == "auto":
            return ["automatic: the first spend chooses the filter"]
        return [f.describe() + ("" if a else " (stopped)") for f, a in zip(self.filters, self.alive)]
