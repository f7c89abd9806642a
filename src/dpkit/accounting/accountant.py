r"""The Accountant: a budget, the one accounting state, and the rule that refuses a spend before it overspends.

Contract
--------
* ``Accountant(budget, adaptive=True, filter="auto")``; ``budget`` is :class:`~dpkit.guarantees.PureDP`,
  :class:`~dpkit.guarantees.ApproxDP`, :class:`~dpkit.guarantees.ZCDP`, :class:`~dpkit.guarantees.GaussianDP`
  or :class:`~dpkit.guarantees.RenyiDP` at finitely many orders (each at most 256).
* ``spend(item, count=1)`` takes anything :func:`~dpkit.accounting.items.as_item` takes (a guarantee, a
  dpkit mechanism, a :class:`~dpkit.accounting.dpsgd.DPSGDStep`, a Gaussian/Laplace event).  It computes
  in locals what the spend would make of the state and of the rule; if that exceeds the budget it raises
  :class:`~dpkit.errors.BudgetExceededError` and **nothing** changes; otherwise it commits both in one
  assignment.  Every spend is composed once, into an :class:`~dpkit.accounting.state.AccountingState`
  (O(1) in the history); nothing is replayed.
* **Adaptive** (the default: later spends may depend on earlier answers): the decision is a privacy
  filter's (:mod:`dpkit.accounting.filters`): the sum of rho under a ZCDP budget, of mu^2 under a
  GaussianDP budget, per order under a RenyiDP budget, of epsilon under a PureDP budget; under an
  ApproxDP budget the filter set chosen by ``filter`` ("auto": fixed by the first spend's family, with
  the basic filter beside it for pure spends; or a kind, or {kind: delta share}).
* **Non-adaptive** (``adaptive=False``: the caller promises the whole sequence was fixed in advance):
  an ApproxDP budget is decided by the tightest sound bound on the composition, from the state
  (basic, GDP, zCDP, RDP, then the certified PLD interval's upper end); once a PLD answer admits a spend,
  the number of further copies of that item the budget allows is certified once (bisection on the
  count), so a training loop spending one step at a time pays O(1) per step.
* Reports (:meth:`epsilon`, :meth:`delta`, :meth:`report`) read the state.  In adaptive mode
  :meth:`epsilon` answers by the methods valid for adaptively chosen parameters (the filters'
  families; PLD is refused there).
"""

from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass
from typing import Literal, cast

from dpkit._math import Estimate, check_count, check_delta, check_epsilon
from dpkit._math.bisection import bisect_monotone
from dpkit._math.directed import down, up
from dpkit.accounting.filters import Filter, FilterSet, make_filter
from dpkit.accounting.items import ORDERS, PrivacyItem, as_item
from dpkit.accounting.protocols import PrivacyLike
from dpkit.accounting.state import AccountingState
from dpkit.errors import ArgumentTypeError, BudgetExceededError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP

__all__ = ["Accountant", "Budget", "MethodReport", "Spend"]

Method = Literal["best", "basic", "zcdp", "gdp", "rdp", "pld"]
Budget = PureDP | ApproxDP | ZCDP | GaussianDP | RenyiDP
ADAPTIVE_VALID = {"basic": True, "zcdp": True, "gdp": True, "rdp": True, "pld": False}


@dataclass(frozen=True, slots=True)
class Spend:
    """One recorded spend: the item as given, its repeat count and a label."""

    item: PrivacyLike
    count: int
    label: str


@dataclass(frozen=True, slots=True)
class MethodReport:
    """One row of :meth:`Accountant.report`."""

    method: str
    epsilon: float
    kind: str
    valid_adaptively: bool
    note: str = ""


def check_budget(budget: object) -> Budget:
    """``budget`` if the Accountant can hold it (TypeError, ValueError or UnsupportedError otherwise)."""
    if isinstance(budget, WassersteinDP):
        raise UnsupportedError(
            "WassersteinDP bounds a transport distance, which the noise scale of an additive mechanism "
            "does not change; it implies no (epsilon, delta) guarantee and cannot be a DP budget."
        )
    if not isinstance(budget, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP)):
        raise ArgumentTypeError(
            f"budget must be PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP; got {type(budget).__name__}.")
    if isinstance(budget, RenyiDP):
        if not budget.orders:
            raise InvalidArgumentError(
                "a RenyiDP budget needs finitely many orders (RenyiDP(orders=..., epsilons=...)).")
        if max(float(a) for a in budget.orders) > ORDERS[-1]:
            raise InvalidArgumentError(
                f"a RenyiDP budget's orders must be at most {ORDERS[-1]:g} (the core's largest order).")
    if isinstance(budget, ApproxDP) and float(budget.delta) >= 1.0:
        raise InvalidArgumentError("an ApproxDP budget needs delta < 1.")
    return budget


def _rule(budget: Budget, filter: str | dict[str, float]) -> FilterSet:
    """The adaptive rule of a budget, as a filter set."""
    if isinstance(budget, PureDP):
        f = make_filter("basic", epsilon=float(budget.epsilon), delta_share=0.0)
        return FilterSet(epsilon=float(budget.epsilon), delta=0.0, filters=(f,), alive=(True,))
    if isinstance(budget, ApproxDP):
        e, d = float(budget.epsilon), float(budget.delta)
        if d == 0.0:
            return _rule(PureDP(e), filter)
        return FilterSet.build(e, d, filter)
    if isinstance(budget, ZCDP):
        f = Filter(kind="zcdp", share=0.0, limit=float(budget.rho))
        return FilterSet(epsilon=math.inf, delta=0.0, filters=(f,), alive=(True,))
    if isinstance(budget, GaussianDP):
        mu = float(budget.mu)
        # the exact sum of mu_i^2 is compared with the exact mu^2 (the float mu * mu may round either way)
        f = Filter(kind="gdp", share=0.0, limit=down(Fraction(mu) ** 2), exact_limit=Fraction(mu) ** 2)
        return FilterSet(epsilon=math.inf, delta=0.0, filters=(f,), alive=(True,))
    # RenyiDP: each budget order read at the smallest core order above it (RDP is non-decreasing in alpha)
    limits: dict[int, float] = {}
    assert budget.orders is not None  # check_budget refused a Rényi budget given by a curve
    for a in budget.orders:
        i = next(j for j, o in enumerate(ORDERS) if o >= float(a))
        limits[i] = min(limits.get(i, math.inf), float(budget.epsilon(a)))
    idx = tuple(sorted(limits))
    f = Filter(kind="rdp", share=0.0, orders=idx, rdp_limit=tuple(limits[i] for i in idx),
               rdp_used=tuple(Fraction(0) for _ in idx))
    return FilterSet(epsilon=math.inf, delta=0.0, filters=(f,), alive=(True,))


class Accountant:
    """A privacy filter (or, with ``adaptive=False``, an odometer of a fixed sequence) over ``budget``.

    Examples
    --------
    >>> from dpkit.guarantees import PureDP
    >>> acc = Accountant(PureDP(1.0))
    >>> print(acc.spend(PureDP(0.4)))
    0.6-DP
    """

    def __init__(self, budget: Budget, *, adaptive: bool = True, filter: str | dict[str, float] = "auto") -> None:
        self._budget = check_budget(budget)
        if not isinstance(adaptive, bool):
            raise ArgumentTypeError("adaptive must be True or False.")
        self._adaptive = adaptive
        self._rule = _rule(self._budget, filter)
        self._state = AccountingState()
        self._spends: list[Spend] = []  # appended to (O(1) per spend); read through ``spends`` as a tuple
        self._pure_left: tuple[FilterSet, float] | None = None  # _largest_pure of one (immutable) rule, memoised
        self._allowance: tuple[int, str, int] | None = None  # (state entries, item key, copies certified)

    # ---- state ------------------------------------------------------------------------------
    @property
    def budget(self) -> Budget:
        return self._budget

    @property
    def adaptive(self) -> bool:
        return self._adaptive

    @property
    def spends(self) -> tuple[Spend, ...]:
        """What has been spent, in order (an immutable tuple)."""
        return tuple(self._spends)

    @property
    def state(self) -> AccountingState:
        """The accounting state: an immutable snapshot of everything spent."""
        return self._state

    @property
    def filters(self) -> list[str]:
        """The adaptive rule's filters and how much of each is used (one line each)."""
        return self._rule.describe()

    def __repr__(self) -> str:
        return f"Accountant(budget={self._budget}, adaptive={self._adaptive}, spends={len(self._spends)})"

    # ---- deciding ----------------------------------------------------------------------------
    def _decide(self, item: PrivacyItem, count: int) -> tuple[AccountingState, FilterSet, tuple[int, str, int] | None]:
        """(new state, new rule, allowance) if the spend fits; raises otherwise (changing nothing)."""
        new_state = self._state.add(item, count)
        refused = f"refused: spending {item.label} x{count} would exceed the budget {self._budget}"
        if self._adaptive or not isinstance(self._budget, ApproxDP) or float(self._budget.delta) == 0.0:
            rule = self._rule.admit(item, count)
            if rule is None:
                alive = [f for f, a in zip(self._rule.filters, self._rule.alive) if a] if self._rule.pending is None \
                    else list(self._rule._fixed(item).filters)
                if alive and all(f.cost(item, count) is None or _holds_no_delta_for(f, item) for f in alive):
                    raise UnsupportedError(f"{refused}: {self._rule.why_not(item, count)}. "
                                           f"{_what_to_give(self._budget)} "
                                           "Nothing was spent.")
                raise BudgetExceededError(f"{refused} ({self._rule.why_not(item, count)}). Nothing was spent.")
            return new_state, rule, None
        eps_b, delta_b = float(self._budget.epsilon), float(self._budget.delta)
        a = self._allowance
        if a is not None and a[0] == self._state._n and a[1] == item.key and count <= a[2]:
            return new_state, self._rule, (new_state._n, item.key, a[2] - count)
        for m in ("basic", "gdp", "zcdp", "rdp"):
            try:
                if float(new_state.epsilon(delta_b, method=m)) <= eps_b:
                    return new_state, self._rule, None
            except UnsupportedError:
                continue
        try:
            upper = float(new_state.epsilon(delta_b, method="pld"))
        except UnsupportedError as exc:
            raise UnsupportedError(f"{refused}: no composition method applies ({exc}).") from None
        if upper > eps_b:
            raise BudgetExceededError(f"{refused} (the tightest bound, the PLD's upper end, gives epsilon "
                                      f"{upper:.6g} > {eps_b:g} at delta {delta_b:g}). Nothing was spent.")
        return new_state, self._rule, (new_state._n, item.key, self._extra_copies(new_state, item, eps_b, delta_b))

    def _extra_copies(self, state: AccountingState, item: PrivacyItem, eps_b: float, delta_b: float) -> int:
        """How many more copies of ``item`` the PLD certifies on top of ``state`` (doubling, then bisection)."""
        def fits(k: int) -> bool:
            return float(state.add(item, k).epsilon(delta_b, method="pld")) <= eps_b

        lo, hi = 0, 1
        while hi <= 2**40 and fits(hi):
            lo, hi = hi, 2 * hi
        if hi > 2**40:
            return lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
        return lo

    def check(self, item: PrivacyLike, *, count: int = 1) -> None:
        """Dry run: raise BudgetExceededError if spending ``item`` ``count`` times would overspend."""
        self._decide(as_item(item), check_count("count", count))

    def spend(self, item: PrivacyLike, *, count: int = 1, label: str | None = None) -> Budget:
        """Record a spend if it fits, else raise BudgetExceededError leaving everything unchanged.

        Returns the remaining budget (:meth:`remaining`)."""
        self.admit(item, count=count, label=label)
        return self.remaining()

    def admit(self, item: PrivacyLike, *, count: int = 1, label: str | None = None) -> None:
        """:meth:`spend` without computing what remains: O(1) in the history, for a caller spending in a loop
        (under an ApproxDP budget :meth:`remaining` searches for the largest pure epsilon still admitted).

        Raises BudgetExceededError (or UnsupportedError) and changes nothing if the spend does not fit."""
        it = as_item(item, label=label)
        n = check_count("count", count)
        state, rule, allowance = self._decide(it, n)
        # the one commit (the append cannot fail once the new state and rule exist)
        self._state, self._rule, self._allowance = state, rule, allowance
        self._spends.append(Spend(item, n, label or it.label))

    def remaining(self) -> Budget:
        """What is left, in the budget's family.

        PureDP: the epsilon left; ZCDP: the rho left; GaussianDP: the mu with mu^2 = mu_B^2 - sum mu_i^2;
        RenyiDP: per order; ApproxDP, adaptive: the largest pure epsilon one more spend may have (and the
        delta the filters can still take), non-adaptive: epsilon_B minus the tightest epsilon at delta_B.
        Each is rounded down."""
        b = self._budget
        if isinstance(b, PureDP) or (isinstance(b, ApproxDP) and float(b.delta) == 0.0 and self._adaptive):
            f = self._rule.filters[0]
            left = max(0.0, down(Fraction(float(b.epsilon)) - f.used))
            return PureDP(left) if isinstance(b, PureDP) else ApproxDP(epsilon=left, delta=0.0)
        if isinstance(b, ZCDP):
            return ZCDP(max(0.0, down(Fraction(float(b.rho)) - self._rule.filters[0].used)))
        if isinstance(b, GaussianDP):
            left = down(Fraction(float(b.mu)) ** 2 - self._rule.filters[0].used)
            if left <= 0:
                return PureDP(0.0)
            r = math.sqrt(left)
            return GaussianDP(r if Fraction(r) ** 2 <= Fraction(left) else math.nextafter(r, 0.0))  # rounded down
        if isinstance(b, RenyiDP):
            f = self._rule.filters[0]
            used = {ORDERS[i]: u for i, u in zip(f.orders, f.rdp_used)}
            assert b.orders is not None  # check_budget refused a Rényi budget given by a curve
            orders = [float(a) for a in b.orders]
            left_at: list[float] = []
            for a in orders:
                i = next(j for j, o in enumerate(ORDERS) if o >= a)
                left_at.append(max(0.0, down(Fraction(float(b.epsilon(a))) - used[ORDERS[i]])))
            return RenyiDP(orders=orders, epsilons=left_at, description="remaining budget")
        eps_b, delta_b = float(b.epsilon), float(b.delta)
        if not self._adaptive:
            if not self._spends:
                return b
            used_eps = float(self.epsilon(delta_b))
            return ApproxDP(epsilon=max(0.0, _down(eps_b - used_eps)), delta=delta_b)
        return ApproxDP(epsilon=self._largest_pure(), delta=self._delta_left())

    def spent(self) -> Budget:
        """What the spends so far add up to, in the budget's family, as the adaptive rule accounts for them.

        PureDP: the sum of epsilon (Dwork & Roth 2014, Thm 3.16); ZCDP: the sum of rho (Bun & Steinke 2016,
        arXiv 1605.02065, Lemma 2.3); GaussianDP: mu = sqrt(sum mu_i^2) (Dong, Roth, Su 2022, arXiv 1905.02383,
        Cor 3.3; ``PureDP(0)`` while nothing is spent); RenyiDP: per budget order, the sum at the smallest core
        order at or above it (RDP is non-decreasing in the order); ApproxDP, adaptive: the tightest (epsilon,
        delta) that one of the filters still running certifies for its total (basic: the sums; zCDP: CKS 2020,
        arXiv 2004.00010, Cor 13 at its delta share; GDP: the exact Gaussian profile at its share; RDP: CKS
        Prop 12 at its order; Whitehouse et al. 2023: sqrt(2 ln(1/d') s) + s/2 with delta d' + the spends'
        deltas); ApproxDP, non-adaptive: :meth:`epsilon` at the budget's delta.  Every number is rounded up.
        For parameters chosen adaptively the certified guarantee is the budget itself (see :meth:`epsilon`).

        >>> from dpkit.guarantees import ZCDP
        >>> acc = Accountant(ZCDP(1.0)); acc.admit(ZCDP(0.25), count=2); print(acc.spent())
        0.5-zCDP
        """
        b = self._budget
        rule = self._rule
        if isinstance(b, PureDP) or (isinstance(b, ApproxDP) and float(b.delta) == 0.0 and self._adaptive):
            e = up(rule.filters[0].used)
            return PureDP(e) if isinstance(b, PureDP) else ApproxDP(epsilon=e, delta=0.0)
        if isinstance(b, ZCDP):
            return ZCDP(up(rule.filters[0].used))
        if isinstance(b, GaussianDP):
            used = rule.filters[0].used
            if used == 0:
                return PureDP(0.0)
            r = math.sqrt(up(used))
            return GaussianDP(r if Fraction(r) ** 2 >= used else math.nextafter(r, math.inf))  # rounded up
        if isinstance(b, RenyiDP):
            f = rule.filters[0]
            used_at = {ORDERS[i]: u for i, u in zip(f.orders, f.rdp_used)}
            orders = [float(a) for a in b.orders]  # type: ignore[union-attr]  # a RenyiDP budget has orders
            eps = [up(used_at[next(o for o in ORDERS if o >= a)]) for a in orders]
            return RenyiDP(orders=orders, epsilons=eps, description="spent")
        if not self._adaptive:
            if not self._spends:
                return ApproxDP(epsilon=0.0, delta=0.0)
            return ApproxDP(epsilon=float(self.epsilon(float(b.delta))), delta=float(b.delta))
        if rule.pending is not None or not self._spends:
            return ApproxDP(epsilon=0.0, delta=0.0)
        best: tuple[float, float] | None = None
        for f, alive in zip(rule.filters, rule.alive):
            if alive:
                cert = _certified(f)
                if best is None or cert < best:
                    best = cert
        assert best is not None  # a spend was admitted, so some filter is alive
        return ApproxDP(epsilon=best[0], delta=min(1.0, best[1]))

    def _largest_pure(self) -> float:
        memo = self._pure_left
        if memo is not None and memo[0] is self._rule:  # the rule is immutable: its answer never changes
            return memo[1]
        out = self._search_pure()
        self._pure_left = (self._rule, out)
        return out

    def _search_pure(self) -> float:
        # only an ApproxDP budget searches for its largest pure spend
        lo, hi = 0.0, float(cast(ApproxDP, self._budget).epsilon)
        if self._rule.admit(as_item(PureDP(hi)), 1) is not None:
            return hi
        # the lower side of "refused": a pure epsilon the rule admitted (or 0)
        return bisect_monotone(lambda e: self._rule.admit(as_item(PureDP(e)), 1) is None, lo, hi, side="lower",
                               rtol=0.0, max_iter=60)

    def _delta_left(self) -> float:
        if self._rule.pending is not None:  # nothing spent yet: a first (epsilon, delta) spend may take all of delta
            assert isinstance(self._budget, ApproxDP)  # the one family that asks what delta is left
            return float(self._budget.delta)
        left = 0.0
        for f, a in zip(self._rule.filters, self._rule.alive):
            if a and f.kind in ("basic", "approx"):
                left = max(left, down(Fraction(f.delta_limit) - f.delta_used))
        return max(0.0, left)

    # ---- reporting ----------------------------------------------------------------------------
    def epsilon(self, delta: float, *, method: Method = "best") -> Estimate:
        """epsilon(delta) of everything spent so far (an upper bound, or an interval), from the state.

        In adaptive mode ``"best"`` uses only methods valid under adaptive composition (each mechanism
        chosen after the earlier answers), and ``"pld"`` is refused.  The reading is an upper bound for the
        parameters actually spent *as if they had been fixed in advance*; when the parameters themselves were
        chosen from earlier answers, an odometer's reading is not a guarantee (Rogers, Roth, Ullman, Vadhan
        2016, arXiv 1605.08294, sec. 3): the certified guarantee is then the budget, which the filter
        enforces.  The method text of the result says so."""
        d = check_delta(delta, open_interval=True)
        if self._adaptive and method == "pld":
            raise UnsupportedError("PLD accounting is not valid when parameters are chosen adaptively; build the "
                                   "Accountant with adaptive=False if the sequence was fixed in advance.")
        if self._adaptive and method == "best":
            return self._best_adaptive("epsilon", d)
        return self._state.epsilon(d, method=method)

    def delta(self, epsilon: float, *, method: Method = "best") -> Estimate:
        """delta(epsilon) of everything spent so far (an upper bound, or an interval), from the state."""
        e = check_epsilon(epsilon)
        if self._adaptive and method == "pld":
            raise UnsupportedError("PLD accounting is not valid when parameters are chosen adaptively; build the "
                                   "Accountant with adaptive=False if the sequence was fixed in advance.")
        if self._adaptive and method == "best":
            return self._best_adaptive("delta", e)
        return self._state.delta(e, method=method)

    def _best_adaptive(self, what: str, x: float) -> Estimate:
        best: Estimate | None = None
        for m in ("basic", "gdp", "zcdp", "rdp"):
            try:
                v = self._state.epsilon(x, method=m) if what == "epsilon" else self._state.delta(x, method=m)
            except UnsupportedError:
                continue
            if best is None or float(v) < float(best):
                best = v
        if best is None:
            if not self._spends:
                return Estimate(0.0, kind="exact", method="nothing spent")
            raise UnsupportedError("no method valid under adaptivity applies to these spends together.")
        note = (f"{best.method}; for the parameters spent as if fixed in advance (if they were chosen from earlier "
                f"answers, the certified guarantee is the budget {self.budget}, enforced by the filter)")
        if best.kind == "interval":
            return Estimate(float(best), kind="interval", lower=float(best.lower_bound), method=note)
        return Estimate(float(best), kind=best.kind, error=best.error, method=note)

    def report(self, delta: float) -> list[MethodReport]:
        """Every method side by side at ``delta``: value, kind and validity under adaptivity, from the state."""
        d = check_delta(delta, open_interval=True)
        rows = []
        for method in ("basic", "gdp", "zcdp", "rdp", "pld"):
            try:
                v = self._state.epsilon(d, method=method)
                rows.append(MethodReport(method, float(v), v.kind, ADAPTIVE_VALID[method], v.method))
            except UnsupportedError as exc:
                rows.append(MethodReport(method, math.nan, "n/a", ADAPTIVE_VALID[method], str(exc)[:100]))
        return rows


def _certified(f: Filter) -> tuple[float, float]:
    """(epsilon, delta), rounded up, that filter ``f`` certifies for its running total (see ``Accountant.spent``)."""
    from dpkit.accounting.state import add_up, cks_epsilon, mul_up, zcdp_epsilon

    if f.kind == "basic":
        return up(f.used), up(f.delta_used)
    if f.kind == "approx":
        if f.used == 0 and f.delta_used == 0:
            return 0.0, 0.0
        s = up(f.used)
        eps = add_up(math.nextafter(math.sqrt(mul_up(f.log_term, s)), math.inf), mul_up(0.5, s))
        return eps, add_up(f.share - f.delta_limit, up(f.delta_used))  # d' + the spends' deltas
    if f.kind == "zcdp":
        return (0.0, 0.0) if f.used == 0 else (zcdp_epsilon(up(f.used), f.share), f.share)
    if f.kind == "gdp":
        if f.used == 0:
            return 0.0, 0.0
        from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval

        mu = math.sqrt(up(f.used))
        mu = mu if Fraction(mu) ** 2 >= f.used else math.nextafter(mu, math.inf)
        return gaussian_epsilon_interval(mu, f.share)[1], f.share
    if all(u == 0 for u in f.rdp_used):
        return 0.0, 0.0
    import numpy as np

    orders = np.array([ORDERS[i] for i in f.orders])
    return cks_epsilon(np.array([up(u) for u in f.rdp_used]), orders, f.share), f.share


def _holds_no_delta_for(f: Filter, item: PrivacyItem) -> bool:
    """A basic filter with no delta share (beside the filter the first spend chose) and an item with delta > 0."""
    return f.kind == "basic" and f.delta_limit == 0.0 and item.approx is not None and item.approx[1] > 0.0


def _down(x: float) -> float:
    return math.nextafter(x, -math.inf) if x > 0 else x


def _what_to_give(budget: Budget) -> str:
    if isinstance(budget, GaussianDP):
        return ("A GaussianDP budget takes GaussianDP guarantees, continuous Gaussian noise (GaussianEvent) and pure "
                "epsilon-DP spends; give one of those (a discrete Gaussian is zCDP, not GDP: use a ZCDP budget).")
    if isinstance(budget, ZCDP):
        return "A ZCDP budget takes ZCDP, GaussianDP and PureDP guarantees and dpkit mechanisms; give one of those."
    if isinstance(budget, RenyiDP):
        return "A RenyiDP budget takes anything with a Rényi curve (not an (epsilon, delta) guarantee)."
    return ("Under an ApproxDP budget the first spend fixes the filter (a pure or zCDP spend: the zCDP filter with all "
            "of delta, beside a basic filter for pure spends only; a Gaussian-DP spend: the GDP filter), so an "
            "(epsilon, delta) spend after one of those has no delta to draw on. Give the mechanism itself or its "
            "PureDP/ZCDP/GaussianDP guarantee, or build the Accountant with filter='basic' (basic composition with "
            "all of delta), filter={'basic': d1, 'zcdp': d2} (shares of delta), filter='approx' (Whitehouse et al.), "
            "or adaptive=False for a sequence fixed in advance.")
