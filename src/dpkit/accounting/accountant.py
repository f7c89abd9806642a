r"""The Accountant: a privacy filter over a budget, that refuses a spend before it would overspend.

Contract
--------
* ``Accountant(budget, adaptive=True)`` with ``budget`` a :class:`~dpkit.guarantees.PureDP`,
  :class:`~dpkit.guarantees.ApproxDP`, :class:`~dpkit.guarantees.ZCDP` or
  :class:`~dpkit.guarantees.RenyiDP` (at finitely many orders).
* ``spend(item, count=1)`` takes a :class:`~dpkit.accounting.dpsgd.DPSGDStep` (DP-SGD steps, accounted
  by the PLD of the whole schedule with ``adaptive=False``, or by the RDP filter under a RenyiDP budget), a mechanism (anything with ``pure_dp``/``zcdp``/``rdp``/``pair``,
  e.g. :mod:`dpkit.mechanisms`) or a guarantee.  It first computes, in locals, the total that would
  result; if that exceeds the budget it raises :class:`~dpkit.errors.BudgetExceededError` and the
  accountant is **unchanged** (check, then commit in one assignment).  Otherwise it records the spend
  and returns what remains.  :class:`~dpkit.guarantees.WassersteinDP` is never accepted: it bounds a
  transport distance, not privacy loss (docs/theory.md §4).
* **Adaptivity.**  With ``adaptive=True`` (the default) later parameters may depend on earlier
  results, and only rules that are valid *privacy filters* decide a spend: basic composition for
  PureDP and ApproxDP budgets (Rogers, Roth, Ullman, Vadhan 2016, arXiv 1605.08294, Thm 3.6 for the
  filter form of basic composition), the sum of rho for ZCDP budgets and per-order sums for RenyiDP
  budgets (Feldman & Zrnic 2021, arXiv 2008.11193, Thm 3.1, applied at every order at once; a spend
  is refused when any order would exceed).  With ``adaptive=False`` the caller promises that the
  whole sequence of mechanisms was fixed in advance, and the tightest sound method decides an
  ApproxDP budget: the minimum over basic, RDP (Canonne-Kamath-Steinke conversion), optimal
  homogeneous composition (Kairouz-Oh-Viswanath) and the pessimistic PLD of the mechanisms' pairs.
* Reports: :meth:`epsilon` and :meth:`delta` by a named method or the tightest valid one;
  :meth:`report` shows every method side by side with its kind and whether it is valid under
  adaptivity (advanced, optimal and PLD accounting are not valid filters for adaptively chosen
  parameters: Rogers et al. 2016 show that advanced composition needs a modified filter;
  Whitehouse, Ramdas, Rogers, Wu 2023, arXiv 2203.05481, give such filters; dpkit does not
  implement those yet, so it refuses to use these methods in adaptive mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from dpkit._math import Estimate, check_delta, check_epsilon
from dpkit.accounting.composition import compose_basic, compose_optimal, compose_rdp, compose_zcdp
from dpkit.accounting.composition.advanced import compose_advanced
from dpkit.accounting.pld import default_grid, pld_from_pair
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP
from dpkit.guarantees.conversions import rdp_to_approx_dp, to_rdp, to_zcdp, zcdp_to_approx_dp

__all__ = ["Accountant", "MethodReport", "Spend"]

Method = Literal["best", "basic", "advanced", "optimal", "rdp", "zcdp", "pld"]
ADAPTIVE_VALID = {"basic": True, "zcdp": True, "rdp": True, "advanced": False, "optimal": False, "pld": False}


@dataclass(frozen=True, slots=True)
class Spend:
    """One recorded spend: the item (mechanism or guarantee), its repeat count and a label."""

    item: Any
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


def _check_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1; got {count!r}.")
    return count


def _label(item: Any) -> str:
    return getattr(item, "name", None) or type(item).__name__


# ---- conversions of a spend item into each family -------------------------------------------------
def _as_pure(item: Any) -> PureDP:
    if isinstance(item, PureDP):
        return item
    if isinstance(item, ApproxDP) and float(item.delta) == 0.0:
        return PureDP(item.epsilon)
    if hasattr(item, "pure_dp"):
        return item.pure_dp()
    raise UnsupportedError(f"{_label(item)} has no pure epsilon-DP guarantee; use an ApproxDP or ZCDP budget.")


def _is_dpsgd(item: Any) -> bool:
    from dpkit.accounting.dpsgd import DPSGDStep

    return isinstance(item, DPSGDStep)


def _as_approx(item: Any) -> ApproxDP:
    if _is_dpsgd(item):
        raise UnsupportedError(
            "a DP-SGD step is accounted for by its privacy loss distribution, which basic composition cannot "
            "use: build the Accountant with adaptive=False when sigma and q of every step are fixed before "
            "training (the usual DP-SGD schedule), or give it a RenyiDP budget (the adaptive RDP filter)."
        )
    if isinstance(item, ApproxDP):
        return item
    if isinstance(item, PureDP):
        return ApproxDP(epsilon=item.epsilon, delta=0.0)
    if hasattr(item, "guarantee"):
        g = item.guarantee
        if isinstance(g, (PureDP, ApproxDP)):
            return _as_approx(g)
    raise UnsupportedError(
        f"{_label(item)} states no (epsilon, delta) guarantee for basic composition; spend "
        "mechanism.approx_dp(delta) explicitly, or use a ZCDP budget."
    )


def _as_zcdp(item: Any) -> ZCDP:
    if isinstance(item, (PureDP, ZCDP, GaussianDP, RenyiDP, ApproxDP)):
        return to_zcdp(item)
    if hasattr(item, "zcdp"):
        return item.zcdp()
    raise UnsupportedError(f"{_label(item)} has no zCDP guarantee.")


def _as_rdp(item: Any) -> RenyiDP:
    if isinstance(item, (PureDP, ZCDP, GaussianDP, RenyiDP, ApproxDP)):
        return to_rdp(item)
    if hasattr(item, "rdp"):
        return item.rdp()
    raise UnsupportedError(f"{_label(item)} has no Rényi DP guarantee.")


def _refuse_wasserstein(item: Any) -> None:
    if isinstance(item, WassersteinDP):
        raise UnsupportedError(
            "WassersteinDP bounds a transport distance, which the noise scale of an additive mechanism "
            "does not change; it implies no (epsilon, delta) guarantee and cannot be spent from a DP budget."
        )


def _dpsgd_schedule(spends: tuple[Spend, ...]) -> list[Any]:
    """The spends' DP-SGD steps as a schedule, repeat counts folded into the number of steps."""
    from dpkit.accounting.dpsgd import DPSGDStep

    out = []
    for s in spends:
        it = s.item
        out.append(DPSGDStep(sigma=it.sigma, sampling_rate=it.sampling_rate, steps=it.steps * s.count,
                             sampling=it.sampling, neighboring=it.neighboring))
    return out


#: (sigma, q, sampling, neighboring, epsilon, delta) -> the most steps the budget allows (calibrate_steps)
_STEP_ALLOWANCE: dict[tuple[Any, ...], int] = {}


def _dpsgd_fits(spends: tuple[Spend, ...], eps_b: float, delta_b: float) -> str | None:
    """For spends that are all DP-SGD steps of one (sigma, q, scheme): None if they fit, else a reason, from
    the number of steps the budget allows (computed once by calibrate_steps, so that a training loop that
    spends one step at a time pays O(1) per step).  Returns "" when the fast path does not apply."""
    from dpkit.accounting.dpsgd import calibrate_steps

    kinds = {(s.item.sigma, s.item.sampling_rate, s.item.sampling, s.item.neighboring) for s in spends}
    if len(kinds) != 1:
        return None
    sigma, q, sampling, neighboring = next(iter(kinds))
    key = (sigma, q, sampling, neighboring, eps_b, delta_b)
    if key not in _STEP_ALLOWANCE:
        try:
            _STEP_ALLOWANCE[key] = int(calibrate_steps(epsilon=eps_b, delta=delta_b, sigma=sigma, sampling_rate=q,
                                                       sampling=sampling, neighboring=neighboring).value)
        except ValueError:
            _STEP_ALLOWANCE[key] = 0
    allowed = _STEP_ALLOWANCE[key]
    total = sum(s.item.steps * s.count for s in spends)
    if total <= allowed:
        return ""
    return (f"{total} DP-SGD steps at sigma={sigma:g}, q={q:g} exceed the {allowed} that epsilon {eps_b:g} at delta "
            f"{delta_b:g} allows (certified PLD upper bound)")


class Accountant:
    """A privacy filter over ``budget`` (see the module docstring for the contract).

    Examples
    --------
    >>> from dpkit.guarantees import PureDP
    >>> acc = Accountant(PureDP(1.0))
    >>> print(acc.spend(PureDP(0.4)))
    0.6-DP
    """

    def __init__(self, budget: PureDP | ApproxDP | ZCDP | RenyiDP, *, adaptive: bool = True) -> None:
        if isinstance(budget, WassersteinDP):
            _refuse_wasserstein(budget)
        if not isinstance(budget, (PureDP, ApproxDP, ZCDP, RenyiDP)):
            raise TypeError(f"budget must be PureDP, ApproxDP, ZCDP or RenyiDP; got {type(budget).__name__}.")
        if isinstance(budget, RenyiDP) and not budget.orders:
            raise ValueError("a RenyiDP budget needs finitely many orders (RenyiDP(orders=..., epsilons=...)).")
        if not isinstance(adaptive, bool):
            raise TypeError("adaptive must be True or False.")
        self._budget = budget
        self._adaptive = adaptive
        self._spends: tuple[Spend, ...] = ()

    # ---- state ------------------------------------------------------------------------------
    @property
    def budget(self) -> PureDP | ApproxDP | ZCDP | RenyiDP:
        return self._budget

    @property
    def adaptive(self) -> bool:
        return self._adaptive

    @property
    def spends(self) -> tuple[Spend, ...]:
        """What has been spent, in order (an immutable tuple)."""
        return self._spends

    def __repr__(self) -> str:
        return f"Accountant(budget={self._budget}, adaptive={self._adaptive}, spends={len(self._spends)})"

    # ---- the filter -----------------------------------------------------------------------------
    def _over_budget(self, spends: tuple[Spend, ...]) -> str | None:
        """None if ``spends`` fit the budget, else a reason."""
        b = self._budget
        if isinstance(b, PureDP):
            total = float(compose_basic([(_as_pure(s.item), s.count) for s in spends]).epsilon)
            return None if total <= float(b.epsilon) else f"total epsilon {total:.6g} > budget {float(b.epsilon):.6g}"
        if isinstance(b, ZCDP):
            total = float(compose_zcdp([(_as_zcdp(s.item), s.count) for s in spends]).rho)
            return None if total <= float(b.rho) else f"total rho {total:.6g} > budget {float(b.rho):.6g}"
        if isinstance(b, RenyiDP):
            curve = compose_rdp([(_as_rdp(s.item), s.count) for s in spends])
            for alpha in b.orders:
                limit = float(b.epsilon(alpha))
                used = float(curve.epsilon(alpha))
                if used > limit:
                    return f"at order {alpha:g} the total {used:.6g} > budget {limit:.6g}"
            return None
        eps_b, delta_b = float(b.epsilon), float(b.delta)
        if self._adaptive:
            total = compose_basic([(_as_approx(s.item), s.count) for s in spends])
            t_eps, t_delta = float(total.epsilon), float(getattr(total, "delta", 0.0))
            if t_eps <= eps_b and t_delta <= delta_b:
                return None
            return f"basic composition gives ({t_eps:.6g}, {t_delta:.6g}) > budget ({eps_b:.6g}, {delta_b:.6g})"
        if spends and all(_is_dpsgd(s.item) for s in spends):
            fits = _dpsgd_fits(spends, eps_b, delta_b)
            if fits is not None:
                return fits or None
        best = self._best_epsilon(spends, delta_b, adaptive=False)
        if float(best) <= eps_b:
            return None
        return f"the tightest method ({best.method}) gives epsilon {float(best):.6g} > budget {eps_b:.6g} at delta {delta_b:g}"

    def check(self, item: Any, *, count: int = 1) -> None:
        """Dry run: raise BudgetExceededError if spending ``item`` ``count`` times would overspend."""
        _refuse_wasserstein(item)
        spends = self._spends + (Spend(item, _check_count(count), _label(item)),)
        reason = self._over_budget(spends)
        if reason is not None:
            raise BudgetExceededError(
                f"refused: spending {_label(item)} x{count} would exceed the budget {self._budget} ({reason}). "
                "Nothing was spent."
            )

    def spend(self, item: Any, *, count: int = 1, label: str | None = None) -> Any:
        """Record a spend if it fits, else raise BudgetExceededError leaving everything unchanged.

        Returns the remaining budget (same family as the budget; for ApproxDP in adaptive mode the
        basic-composition remainder).
        """
        self.check(item, count=count)
        self._spends = self._spends + (Spend(item, count, label or _label(item)),)  # the one commit
        return self.remaining()

    def remaining(self) -> Any:
        """What is left of the budget under the filter's own rule."""
        b = self._budget
        if not self._spends:
            return b
        if isinstance(b, PureDP):
            used = float(compose_basic([(_as_pure(s.item), s.count) for s in self._spends]).epsilon)
            return PureDP(max(0.0, float(b.epsilon) - used))
        if isinstance(b, ZCDP):
            used = float(compose_zcdp([(_as_zcdp(s.item), s.count) for s in self._spends]).rho)
            return ZCDP(max(0.0, float(b.rho) - used))
        if isinstance(b, RenyiDP):
            curve = compose_rdp([(_as_rdp(s.item), s.count) for s in self._spends])
            left = [max(0.0, float(b.epsilon(a)) - float(curve.epsilon(a))) for a in b.orders]
            return RenyiDP(orders=list(b.orders), epsilons=left, description="remaining budget")
        if self._adaptive:
            total = compose_basic([(_as_approx(s.item), s.count) for s in self._spends])
            return ApproxDP(epsilon=max(0.0, float(b.epsilon) - float(total.epsilon)),
                            delta=max(0.0, float(b.delta) - float(getattr(total, "delta", 0.0))))
        used = float(self._best_epsilon(self._spends, float(b.delta), adaptive=False))
        return ApproxDP(epsilon=max(0.0, float(b.epsilon) - used), delta=float(b.delta))

    # ---- reporting ------------------------------------------------------------------------------
    def _method_epsilon(self, method: str, spends: tuple[Spend, ...], delta: float) -> Estimate:
        if not spends:
            return Estimate(0.0, kind="exact", method=method)
        if method == "basic":
            total = compose_basic([(_as_approx(s.item), s.count) for s in spends])
            if float(getattr(total, "delta", 0.0)) > delta:
                return Estimate(math.inf, kind="upper", method="basic (its delta exceeds the one asked for)")
            return Estimate(float(total.epsilon), kind="upper", method="basic composition (Dwork & Roth Thm 3.16)")
        if method == "zcdp":
            rho = compose_zcdp([(_as_zcdp(s.item), s.count) for s in spends])
            return Estimate(float(zcdp_to_approx_dp(rho, delta=delta).epsilon), kind="upper", method="zCDP (CKS Cor 13)")
        if method == "rdp":
            curve = compose_rdp([(_as_rdp(s.item), s.count) for s in spends])
            return Estimate(float(rdp_to_approx_dp(curve, delta=delta).epsilon), kind="upper",
                            method="RDP (CKS conversion)")
        if method in ("advanced", "optimal"):
            items = [(_as_approx(s.item), s.count) for s in spends]
            first = items[0][0]
            if any((float(g.epsilon), float(g.delta)) != (float(first.epsilon), float(first.delta)) for g, _ in items):
                raise UnsupportedError(f"{method} composition here needs identical (epsilon, delta) spends.")
            k = sum(c for _, c in items)
            e0, d0 = float(first.epsilon), float(first.delta)
            if method == "optimal":
                if k * d0 >= delta:
                    raise UnsupportedError("the spends' deltas already exceed the delta asked for.")
                g = compose_optimal(e0, d0, k, delta_total=delta)
                return Estimate(float(g.epsilon), kind="exact", method="optimal (Kairouz-Oh-Viswanath Thm 3.3)")
            dp = delta - k * d0
            if not dp > 0:
                raise UnsupportedError("the spends' deltas already exceed the delta asked for.")
            g = compose_advanced(e0, d0, k, delta_prime=dp, variant="tanh")
            return Estimate(float(g.epsilon), kind="upper", method="advanced (DRV, tanh form, min with basic)")
        if method == "pld":
            return self._pld_epsilon(spends, delta)
        raise ValueError(f"unknown method {method!r}; choose from best, basic, advanced, optimal, rdp, zcdp, pld.")

    def _pld_epsilon(self, spends: tuple[Spend, ...], delta: float) -> Estimate:
        if spends and all(_is_dpsgd(s.item) for s in spends):
            from dpkit.accounting.dpsgd import dpsgd_epsilon

            iv = dpsgd_epsilon(delta=delta, schedule=_dpsgd_schedule(spends))
            return Estimate(iv.upper, kind="upper", error=iv.width, method="PLD of the DP-SGD schedule: " + iv.method)
        if any(_is_dpsgd(s.item) for s in spends):
            raise UnsupportedError("PLD accounting of DP-SGD steps together with other mechanisms is not implemented "
                                   "yet (the accounting core of issue 9); use a RenyiDP budget meanwhile.")
        for s in spends:
            if not hasattr(s.item, "pair"):
                raise UnsupportedError(f"{s.label} has no dominating pair; PLD accounting needs mechanisms.")
        total_k = sum(s.count for s in spends)
        grid = default_grid(total_k)
        worst = -math.inf
        for direction in (0, 1):
            composed = None
            for s in spends:
                pair = s.item.pair
                if pair.symmetric and direction == 1:
                    P, Q = pair.P, pair.Q
                else:
                    P, Q = (pair.P, pair.Q) if direction == 0 else (pair.Q, pair.P)
                one = pld_from_pair(P, Q, grid=grid).self_compose(s.count)
                composed = one if composed is None else composed.compose(one)
            assert composed is not None
            worst = max(worst, composed.epsilon(delta))
        return Estimate(worst, kind="upper", method="pessimistic PLD (connect the dots)")

    def _best_epsilon(self, spends: tuple[Spend, ...], delta: float, *, adaptive: bool) -> Estimate:
        best: Estimate | None = None
        for method in ("basic", "zcdp", "rdp", "optimal", "advanced", "pld"):
            if adaptive and not ADAPTIVE_VALID[method]:
                continue
            try:
                value = self._method_epsilon(method, spends, delta)
            except (UnsupportedError, TypeError, ValueError):
                continue
            if best is None or float(value) < float(best):
                best = value
        if best is None:
            raise UnsupportedError("no accounting method applies to these spends.")
        return best

    def epsilon(self, delta: float, *, method: Method = "best") -> Estimate:
        """epsilon(delta) of everything spent so far, by ``method`` (an upper bound).

        ``best`` takes the smallest over the methods that apply and, in adaptive mode, are valid
        under adaptively chosen parameters."""
        d = check_delta(delta, open_interval=True)
        if method == "best":
            return self._best_epsilon(self._spends, d, adaptive=self._adaptive)
        if self._adaptive and not ADAPTIVE_VALID.get(method, True):
            raise UnsupportedError(
                f"{method} accounting is not valid when parameters are chosen adaptively; build the "
                "Accountant with adaptive=False if the sequence was fixed in advance."
            )
        return self._method_epsilon(method, self._spends, d)

    def delta(self, epsilon: float, *, method: Method = "best") -> Estimate:
        """delta(epsilon) of everything spent so far (an upper bound), by bisection on :meth:`epsilon`."""
        e = check_epsilon(epsilon)
        lo, hi = 1e-300, 1.0 - 1e-12
        if float(self.epsilon(hi, method=method)) > e:
            return Estimate(1.0, kind="upper", method=method)
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if float(self.epsilon(mid, method=method)) <= e:
                hi = mid
            else:
                lo = mid
            if hi / lo < 1 + 1e-9:
                break
        return Estimate(hi, kind="upper", method=method)

    def report(self, delta: float) -> list[MethodReport]:
        """Every method side by side at ``delta``: value, kind and validity under adaptivity."""
        d = check_delta(delta, open_interval=True)
        rows = []
        for method in ("basic", "advanced", "optimal", "rdp", "zcdp", "pld"):
            try:
                v = self._method_epsilon(method, self._spends, d)
                rows.append(MethodReport(method, float(v), v.kind, ADAPTIVE_VALID[method], v.method))
            except (UnsupportedError, TypeError, ValueError) as exc:
                rows.append(MethodReport(method, math.nan, "n/a", ADAPTIVE_VALID[method], str(exc)[:80]))
        return rows
