r"""Optimal composition: the exact privacy region of k-fold composition of (ε, δ)-DP guarantees.

Contract: :func:`compose_optimal` (identical guarantees, Kairouz-Oh-Viswanath) and
:func:`compose_optimal_heterogeneous` (different guarantees, Murtagh-Vadhan) return an
:class:`~dpkit.guarantees.ApproxDP` that is *optimal* for adaptive composition: no smaller
epsilon (or delta) holds for every choice of mechanisms meeting the inputs, because composing
their canonical pairs attains it. Numbers are rounded towards more privacy loss. For tables of at
most 512 atoms (e.g. k <= 511 identical guarantees) the sum is also formed at 160 bits, and the
values are ``Estimate(kind="exact")``: within two floats above the exact value (an epsilon is the
first float whose rounded-up delta meets the target). Larger tables give ``kind="interval"``: the
value is the upper end of a bracket whose lower end (``lower``) is certified too small, from the
float sum and a bound on its rounding error (issue 11: "exact" never stands for a wider bracket).
The floor 1 - prod(1 - delta_i) is evaluated at 160 bits, so a target at or just above it is
accepted exactly when it should be.

Why hand-written: the terms are binomial probabilities times :math:`(1 - e^{\varepsilon_g - L})`
with :math:`L` the privacy loss, and the direct formula overflows (:math:`e^{k\varepsilon}` at
ε = 1, k = 1000); dp_accounting's ``advanced_composition`` does exactly that. Here every term
is formed in log space, :math:`\ln\binom{k}{\ell}` from ``scipy.special.gammaln`` and
:math:`\ln(1 - e^{-d})` from Maechler's ``log1mexp``, and summed with ``logsumexp``; no
difference of large numbers is ever taken, so k = 10^4 or 10^6 costs nothing but time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln, logsumexp

from dpkit._math import Estimate, check_count, check_delta, check_epsilon
from dpkit._math.bisection import bisect_bracket
from dpkit._math.directed import float_key, from_key
from dpkit._math.precise import mp, to_float_down, to_float_up
from dpkit.accounting.composition._common import expand, log1mexp_array
from dpkit.errors import InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PureDP

__all__ = ["compose_optimal", "compose_optimal_heterogeneous"]

_U = 2.0**-53  # unit roundoff
MAX_TERMS = 2**20  # enumeration limit of the heterogeneous case (20 distinct epsilons)
MAX_K = 10**6  # arrays of k + 1 terms (~3 s at the limit); also keeps |2l - k| < 2**26 for TwoProduct


@dataclass(frozen=True, slots=True)
class _LossTable:
    r"""Positive privacy losses L of the product of randomized-response pairs, with log P-masses.

    The exact smallest delta at :math:`\varepsilon_g` is :math:`a + (1 - a) S(\varepsilon_g)`,
    :math:`S(\varepsilon_g) = \sum_{L > \varepsilon_g} P(L)(1 - e^{\varepsilon_g - L})`, with
    :math:`a = 1 - \prod_i (1 - \delta_i)`. Each loss is held as an unevaluated sum
    ``hi + lo`` (double-double), so ties with ``eps_g`` are decided exactly.
    """

    hi: NDArray[np.float64]  # ascending, hi + lo > 0
    lo: NDArray[np.float64]
    log_mass: NDArray[np.float64]
    floor: float  # a = 1 - prod(1 - delta_i), rounded up
    floor_lo: float  # a, rounded down (both ends from a 160-bit evaluation)
    relative_error: float  # bound on the relative rounding error of each term's mass
    loss_error: float  # bound on |hi + lo - L| for the exact loss L

    @property
    def top(self) -> float:
        """A float at or above every loss: from here on S = 0."""
        return float(np.nextafter(self.hi[-1], np.inf)) if self.hi.size else 0.0

    def delta_bounds(self, eps_g: float) -> tuple[float, float]:
        """(lower, upper) bounds on the exact delta at ``eps_g``, from the computed sum."""
        slack = 4.0 * _U * self.floor
        # |lo| <= ulp(hi): atoms with hi this far below eps_g are below it in exact arithmetic
        first = int(np.searchsorted(self.hi, eps_g - 4.0 * _U * max(eps_g, 1e-300), side="left"))
        d = (self.hi[first:] - eps_g) + self.lo[first:]  # L - eps_g to a relative error of 2u
        near = d > -self.loss_error
        if not np.any(near):
            return self.floor_lo, self.floor  # S = 0: the certified floor itself
        active = d > 0.0
        s = 0.0
        if np.any(active):
            terms = self.log_mass[first:][active] + log1mexp_array(d[active])
            s = math.exp(min(0.0, float(logsumexp(terms))))
        # mass of the atoms that may lie above eps_g; (1 - e^{-d})_+ is 1-Lipschitz in d
        p = math.exp(min(0.0, float(logsumexp(self.log_mass[first:][near]))))
        error = self.relative_error * s + (1.0 + self.relative_error) * p * self.loss_error
        lower = self.floor - slack + (1.0 - self.floor) * max(0.0, s - error)
        upper = self.floor + slack + (1.0 - self.floor) * (s + error)
        return max(0.0, lower), min(1.0, upper)


def _split(x: float) -> tuple[float, float]:
    """x = high + low with high carrying the leading 26 bits (so n * high is exact for |n| < 2**26)."""
    mantissa, exponent = math.frexp(x)
    high = math.ldexp(math.floor(math.ldexp(mantissa, 26)), exponent - 26)
    return high, x - high


def _binomial_group(epsilon: float, count: int) -> tuple[NDArray[np.float64], ...]:
    r"""Losses (2l - k) eps as hi + lo, and log masses of Binomial(k, e^eps/(1 + e^eps)), l = 0..k."""
    ell = np.arange(count + 1, dtype=np.float64)
    log_choose = gammaln(count + 1.0) - gammaln(ell + 1.0) - gammaln(count - ell + 1.0)
    softplus_neg = math.log1p(math.exp(-epsilon))  # ln(1 + e^-eps)
    # ln[C(k,l) e^{l eps} / (1 + e^eps)^k] = ln C(k,l) - k ln(1 + e^-eps) - (k - l) eps (KOV Thm 3.3)
    log_mass = log_choose - count * softplus_neg - (count - ell) * epsilon
    n = 2.0 * ell - count  # |n| <= k < 2**26
    high, low = _split(epsilon)
    hi = n * epsilon
    lo = (n * high - hi) + n * low  # Dekker: n*high exact, n*high - hi exact, n*low exact
    return hi, lo, log_mass


def _loss_error(n_groups: int, max_loss: float) -> float:
    """Bound on |hi + lo - L|: 0 for one group (TwoProduct is exact for |n| < 2**26); else each
    lo sums <= 2 n_groups exact parts of size <= u max_loss with one rounding each."""
    if n_groups <= 1:
        return 0.0
    return 4.0 * n_groups**2 * _U * _U * max_loss + 1e-300


def _floor_bounds(deltas: list[tuple[float, int]]) -> tuple[float, float, Any]:
    """1 - prod_i (1 - delta_i)^count_i at 160 bits: (rounded down, rounded up, the mpf value)."""
    # the mpf is typed Any: mpmath has no type hints
    ctx = mp()
    if any(d >= 1.0 for d, _ in deltas):
        return 1.0, 1.0, ctx.mpf(1)
    log_keep = ctx.fsum(count * ctx.log1p(-ctx.mpf(d)) for d, count in deltas if d > 0.0)
    if log_keep == 0:
        return 0.0, 0.0, ctx.mpf(0)
    floor = -ctx.expm1(log_keep)
    return to_float_down(floor), min(1.0, to_float_up(floor)), floor


def _table(groups: list[tuple[float, int]], deltas: list[tuple[float, int]]) -> _LossTable:
    """Loss table of the product of ``count`` randomized-response pairs per (epsilon, count).

    Atoms whose loss cannot end positive, whatever the later groups add, are dropped as we go.
    """
    max_loss = math.fsum(count * epsilon for epsilon, count in groups)
    remaining = max_loss
    hi, lo, log_mass = np.zeros(1), np.zeros(1), np.zeros(1)
    magnitude = 1.0  # bounds the magnitudes that each log term was built from
    for epsilon, count in groups:
        g_hi, g_lo, g_mass = _binomial_group(epsilon, count)
        s = (hi[:, None] + g_hi[None, :]).ravel()  # TwoSum: s + t = hi + g_hi exactly
        bb = s - hi.repeat(g_hi.size)
        t = (hi.repeat(g_hi.size) - (s - bb)) + (np.tile(g_hi, hi.size) - bb)
        lo = (lo[:, None] + g_lo[None, :]).ravel() + t
        hi = s
        log_mass = (log_mass[:, None] + g_mass[None, :]).ravel()
        remaining -= count * epsilon
        keep = hi + 1.000001 * remaining > 0.0
        hi, lo, log_mass = hi[keep], lo[keep], log_mass[keep]
        magnitude += 2.0 * float(gammaln(count + 1.0)) + count * (epsilon + math.log1p(math.exp(-epsilon)))
    keep = (hi + lo > 0.0) | (hi > 0.0)
    order = np.lexsort((lo[keep], hi[keep]))
    hi, lo, log_mass = hi[keep][order], lo[keep][order], log_mass[keep][order]
    # Each gammaln / product / sum in a log term errs by a few u of the magnitudes it combines, and
    # logsumexp adds ~u ln(n): 32 u (magnitude + ln n) leaves a factor >= 4 of slack (the tests
    # compare with 50-digit mpmath at k = 1000 and 10000).
    log_error = 32.0 * _U * (magnitude + max_loss + math.log(hi.size + 2.0))
    floor_lo, floor_hi, _ = _floor_bounds(deltas)
    for a in (hi, lo, log_mass):
        a.flags.writeable = False
    return _LossTable(
        hi=hi,
        lo=lo,
        log_mass=log_mass,
        floor=floor_hi,
        floor_lo=floor_lo,
        relative_error=math.expm1(log_error),
        loss_error=_loss_error(len(groups), max_loss),
    )


_EXACT_ATOMS = 512  # tables this small are also summed at 160 bits, giving values within two ulps


class _ExactTable:
    r"""The same loss table with exact losses (fractions) and 160-bit masses, for small tables.

    Every term of :math:`a + (1 - a)\sum_{L > \varepsilon_g} P(L)(1 - e^{\varepsilon_g - L})` is
    non-negative and formed without cancellation (``expm1`` of the exact difference), so the sum is
    good to far more than 53 bits and converts to the float just above it.
    """

    def __init__(self, groups: list[tuple[float, int]], deltas: list[tuple[float, int]]) -> None:
        ctx = mp()
        atoms: list[tuple[Fraction, object]] = [(Fraction(0), ctx.mpf(0))]  # (loss, log mass)
        for epsilon, count in groups:
            e = ctx.mpf(epsilon)
            softplus_neg = ctx.log1p(ctx.exp(-e))
            choose = 1
            group = []
            for ell in range(count + 1):  # KOV Thm 3.3: Binomial(k, e^eps / (1 + e^eps))
                log_mass = ctx.log(choose) - count * softplus_neg - (count - ell) * e
                group.append((Fraction(epsilon) * (2 * ell - count), log_mass))
                choose = choose * (count - ell) // (ell + 1)
            atoms = [(la + lb, ma + mb) for la, ma in atoms for lb, mb in group]
        self.atoms = [(loss, ctx.exp(lm)) for loss, lm in atoms if loss > 0]
        _, _, self.floor = _floor_bounds(deltas)

    def delta(self, eps_g: float) -> object:
        ctx = mp()
        g = Fraction(eps_g)
        s = ctx.fsum(m * -ctx.expm1(-ctx.mpf(loss - g)) for loss, m in self.atoms if loss > g)
        return self.floor + (1 - self.floor) * s


def _exact_table(groups: list[tuple[float, int]], deltas: list[tuple[float, int]]) -> _ExactTable | None:
    return _ExactTable(groups, deltas) if math.prod(c + 1 for _, c in groups) <= _EXACT_ATOMS else None


def _bisect(too_small: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """Shrink [lo, hi] with too_small(lo) and not too_small(hi) to adjacent floats (<= 200 steps)."""
    return bisect_bracket(lambda x: not too_small(x), lo, hi, rtol=0.0, max_iter=200)


def _solve(
    table: _LossTable, exact: _ExactTable | None, delta_total: float | None, epsilon_total: float | None, method: str
) -> ApproxDP:
    if epsilon_total is not None:
        eps_g = check_epsilon(epsilon_total, "epsilon_total")
        if exact is not None:
            value = exact.delta(eps_g)
            upper, lower = to_float_up(value), to_float_down(value)
            delta = Estimate(min(upper, 1.0), kind="exact", error=upper - lower, method=method + " (160-bit sum)")
        else:
            lower, upper = table.delta_bounds(eps_g)
            delta = Estimate(upper, kind="interval", lower=lower, error=upper - lower, method=method)
        return ApproxDP(epsilon=eps_g, delta=delta)
    assert delta_total is not None
    target = check_delta(delta_total, "delta_total")
    if not table.delta_bounds(table.top)[1] <= target:  # the floor, rounded up
        raise InvalidArgumentError(
            f"delta_total must be >= 1 - prod(1 - delta_i) = {table.floor!r} (the float at or above the "
            f"exact value), the delta of this composition at every epsilon; got {target}. No finite "
            "epsilon exists below it."
        )
    if table.delta_bounds(0.0)[1] <= target:
        upper_eps, lower_eps = 0.0, 0.0
    else:
        # smallest eps_g whose certified upper delta meets the target (upper end of the bracket)
        top = table.top  # from the largest loss on, S = 0 and delta = floor
        _, upper_eps = _bisect(lambda x: table.delta_bounds(x)[1] > target, 0.0, top)
        # largest eps_g whose certified lower delta still exceeds it: the optimum lies above
        if table.delta_bounds(0.0)[0] > target:
            lower_eps, _ = _bisect(lambda x: table.delta_bounds(x)[0] > target, 0.0, top)
        else:
            lower_eps = 0.0
    if exact is not None and upper_eps > 0.0:
        # the first float whose 160-bit delta, rounded up, meets the target: within two ulps
        def fails(x: float) -> bool:
            return to_float_up(exact.delta(x)) > target

        hi_key = float_key(upper_eps)
        for _ in range(64):  # the float bracket's end passes in exact arithmetic; step up should
            if not fails(from_key(hi_key)):  # the 160-bit sum sit within its margin of the target
                break
            hi_key += 1
        if not fails(lower_eps):  # only at lower_eps = 0, where the float bounds straddle the target
            hi_key = float_key(lower_eps)
        lo_key = float_key(lower_eps) - 1  # fails (or lies below the search)
        while hi_key - lo_key > 1:
            mid = (lo_key + hi_key) // 2
            if fails(from_key(mid)):
                lo_key = mid
            else:
                hi_key = mid
        value = max(from_key(hi_key), 0.0)
        epsilon = Estimate(value, kind="exact", error=math.ulp(value), method=method + " (160-bit sum)")
    elif upper_eps == 0.0:
        epsilon = Estimate(0.0, kind="exact", method=method)
    else:
        epsilon = Estimate(upper_eps, kind="interval", lower=lower_eps, error=upper_eps - lower_eps, method=method)
    return ApproxDP(epsilon=epsilon, delta=target)


def _check_target(delta_total: object, epsilon_total: object) -> None:
    if (delta_total is None) == (epsilon_total is None):
        raise InvalidArgumentError(
            "give exactly one of delta_total (to get the smallest epsilon) and epsilon_total "
            f"(to get the smallest delta); got delta_total={delta_total!r}, epsilon_total={epsilon_total!r}."
        )


def compose_optimal(
    epsilon: float,
    delta: float,
    k: int,
    *,
    delta_total: float | None = None,
    epsilon_total: float | None = None,
) -> ApproxDP:
    r"""Optimal k-fold (adaptive) composition of (ε, δ)-DP (Kairouz, Oh & Viswanath Thm 3.3).

    Parameters
    ----------
    epsilon : float, finite, >= 0
    delta : float, in [0, 1]
    k : int, >= 1
    delta_total : float, in [0, 1], optional
        Target delta of the composition: the smallest epsilon is returned.
    epsilon_total : float, finite, >= 0, optional
        Target epsilon of the composition: the smallest delta is returned.
        Give exactly one of the two.

    Returns
    -------
    ApproxDP
        With ``delta_total``: epsilon never below the optimum; ``Estimate(kind="exact")`` (within
        two floats) for tables of at most 512 atoms, else ``kind="interval"`` with the certified
        lower end in ``lower`` and the bracket width in ``error``. With ``epsilon_total``: delta
        likewise, ``"exact"`` from the 160-bit sum or an ``"interval"`` from the float sum and its
        rounding bound.

    Raises
    ------
    ValueError
        Bad ``epsilon``, ``delta``, ``k`` (not an integer >= 1), targets NaN / out of range, both
        or neither target given, or ``delta_total < 1 - (1 - delta)^k`` (no finite epsilon).
    UnsupportedError
        If ``k > 10**6``: the exact sum has k + 1 terms; use :func:`compose_kov_bound` or PLD.
    TypeError
        If a parameter is not a number.

    Notes
    -----
    KOV Thm 3.3: the composition is :math:`((k-2i)\varepsilon, 1 - (1-\delta)^k (1-\delta_i))`-DP
    for :math:`i = 0..\lfloor k/2\rfloor`, with
    :math:`\delta_i = \sum_{\ell=0}^{i-1}\binom{k}{\ell}
    (e^{(k-\ell)\varepsilon} - e^{(k-2i+\ell)\varepsilon})/(1+e^\varepsilon)^k`,
    and this region is exact. Between the corners the exact curve is, for every
    :math:`\varepsilon_g \ge 0`,

    .. math:: \delta_g(\varepsilon_g) = 1 - (1-\delta)^k + (1-\delta)^k
              \sum_{\ell=0}^{k}\binom{k}{\ell}
              \frac{(e^{\ell\varepsilon} - e^{\varepsilon_g} e^{(k-\ell)\varepsilon})_+}
                   {(1+e^\varepsilon)^k},

    the hockey-stick divergence of the k-fold product of the canonical pair (equal to Thm 3.3 at
    the corners; the homogeneous case of Murtagh & Vadhan's characterisation). It is continuous and
    non-increasing in :math:`\varepsilon_g`, so it is inverted by bisection on :math:`[0, k\varepsilon]`.

    References
    ----------
    Kairouz, Oh & Viswanath 2015, "The composition theorem for differential privacy", ICML,
    arXiv 1311.0776, Thm 3.3; Murtagh & Vadhan 2016, TCC, arXiv 1507.03113 (the same curve).

    Examples
    --------
    >>> g = compose_optimal(0.1, 0.0, 100, delta_total=1e-6)
    >>> round(g.epsilon, 4), g.epsilon.kind
    (4.7746, 'exact')
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    count = check_count("k", k)
    _check_target(delta_total, epsilon_total)
    if count > MAX_K:
        raise UnsupportedError(
            f"k={count} is above {MAX_K}: the exact sum has k + 1 terms. Use compose_kov_bound "
            "(closed form, a few percent above optimal for large k) or PLD accounting."
        )
    groups = [(eps, count)] if eps > 0.0 else []
    deltas = [(d, count)]
    return _solve(_table(groups, deltas), _exact_table(groups, deltas), delta_total, epsilon_total,
                  "optimal composition (KOV 2015 Thm 3.3)")


def compose_optimal_heterogeneous(
    guarantees: Sequence[object],
    *,
    delta_total: float | None = None,
    epsilon_total: float | None = None,
) -> ApproxDP:
    r"""Optimal composition of different (ε_i, δ_i)-DP guarantees (Murtagh & Vadhan), small cases.

    Parameters
    ----------
    guarantees : sequence of PureDP, ApproxDP or (guarantee, count) pairs
    delta_total : float, in [0, 1], optional
    epsilon_total : float, finite, >= 0, optional
        Give exactly one, as in :func:`compose_optimal`.

    Returns
    -------
    ApproxDP
        As :func:`compose_optimal`.

    Raises
    ------
    UnsupportedError
        If the exact sum has more than 2**20 terms: the product over distinct epsilons of
        (count + 1), i.e. more than 20 guarantees with distinct epsilons. Exact optimal
        composition is #P-complete in general; use PLD accounting for a tight upper bound.
    TypeError, ValueError
        As :func:`compose_basic` and :func:`compose_optimal`.

    Notes
    -----
    Murtagh & Vadhan: the composition is :math:`(\varepsilon_g, \delta_g)`-DP iff

    .. math:: \frac{1}{\prod_i (1+e^{\varepsilon_i})} \sum_{S \subseteq [k]}
              \Big(e^{\sum_{i\in S}\varepsilon_i} - e^{\varepsilon_g} e^{\sum_{i\notin S}\varepsilon_i}\Big)_+
              \le 1 - \frac{1-\delta_g}{\prod_i (1-\delta_i)}.

    Guarantees with equal epsilons are grouped (a binomial count replaces their subsets), so the
    sum has :math:`\prod_j (k_j + 1)` terms for :math:`k_j` copies of the j-th distinct epsilon.

    References
    ----------
    Murtagh & Vadhan 2016, "The complexity of computing the optimal composition of differential
    privacy", TCC; Theory of Computing 14(8), 2018; arXiv 1507.03113 (characterisation and
    #P-completeness); Kairouz, Oh & Viswanath 2015, arXiv 1311.0776, Thm 3.3 (equal guarantees).

    Examples
    --------
    >>> g = compose_optimal_heterogeneous([PureDP(1.0), PureDP(0.5)], epsilon_total=0.5)
    >>> round(g.delta, 9)  # 1.5-DP, but at epsilon 0.5 the exact delta is:
    0.287649137
    """
    items = expand(
        guarantees, (PureDP, ApproxDP), "compose_optimal_heterogeneous",
        advice="Convert it to ApproxDP first (dpkit.guarantees.to_approx_dp).",
    )
    _check_target(delta_total, epsilon_total)
    by_epsilon: dict[float, int] = {}
    deltas: list[tuple[float, int]] = []
    for g, count in items:
        assert isinstance(g, (PureDP, ApproxDP))  # expand checked the types
        eps = float(g.epsilon)
        d = float(g.delta) if isinstance(g, ApproxDP) else 0.0
        deltas.append((d, count))
        if eps > 0.0:
            by_epsilon[eps] = by_epsilon.get(eps, 0) + count
    size = math.prod(c + 1 for c in by_epsilon.values())
    if size > MAX_TERMS:
        raise UnsupportedError(
            f"exact optimal composition of these guarantees needs {size} terms (limit {MAX_TERMS}, "
            "about 20 distinct epsilons): it is #P-complete in general (Murtagh & Vadhan 2016). "
            "Use PLD accounting (dpkit.accounting.pld) for a tight upper bound, compose_optimal "
            "for identical guarantees, or compose_kov_bound / compose_advanced."
        )
    groups = sorted(by_epsilon.items())
    method = "optimal composition (Murtagh-Vadhan 2016)"
    return _solve(_table(groups, deltas), _exact_table(groups, deltas), delta_total, epsilon_total, method)
