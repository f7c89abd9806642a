r"""Advanced composition: closed-form bounds for k-fold composition of one (ε, δ)-DP guarantee.

Contract: every function returns an :class:`~dpkit.guarantees.ApproxDP` whose numbers are
:class:`~dpkit._math.Estimate` values of kind ``"upper"`` (valid for k-fold *adaptive*
composition, never below the optimum of :func:`compose_optimal`), with ``method`` naming the
bound that was smallest. Each bound is always compared with basic composition ``k·ε``, which
Dwork & Roth's Thm 3.20 exceeds for moderate ε (ε = 0.5, k = 50: 34.8 > 25).

==========================  ===============================================  =====================
function                    epsilon                                          total delta
==========================  ===============================================  =====================
compose_advanced "drv"      √(2k ln(1/δ'))·ε + k·ε(e^ε − 1)                  kδ + δ'
compose_advanced "tanh"     √(2k ln(1/δ'))·ε + k·ε·tanh(ε/2)                 kδ + δ'
compose_kov_bound           KOV Thm 3.4 (three-way minimum)                  1 − (1−δ)^k (1−δ')
==========================  ===============================================  =====================
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

from dpkit._math import Estimate, check_count, check_delta, check_epsilon
from dpkit._math.directed import counted_sum_up, up
from dpkit._math.precise import mp, to_float_down, to_float_up
from dpkit.accounting.composition._common import check_open_probability, input_kind
from dpkit.guarantees import ApproxDP
from dpkit.errors import InvalidArgumentError

__all__ = ["advanced_per_step_epsilon", "compose_advanced", "compose_kov_bound"]

Variant = Literal["drv", "tanh"]

_COR_321_DELTA_MAX = math.exp(-0.5)  # delta' <= e^{-1/2} makes Cor 3.21 true (see its Notes)


def compose_advanced(
    epsilon: float, delta: float, k: int, *, delta_prime: float, variant: Variant = "drv"
) -> ApproxDP:
    r"""Advanced composition (Dwork, Rothblum & Vadhan): k-fold composition of (ε, δ)-DP.

    Parameters
    ----------
    epsilon : float, finite, >= 0
        Per-mechanism epsilon.
    delta : float, in [0, 1]
        Per-mechanism delta.
    k : int, >= 1
        Number of (adaptively chosen) mechanisms.
    delta_prime : float, in (0, 1)
        The extra failure probability δ' traded for a smaller epsilon.
    variant : {"drv", "tanh"}
        ``"drv"``: Thm 3.20 as printed. ``"tanh"``: the same proof with Lemma 3.18's bound
        :math:`\varepsilon(e^\varepsilon-1)` on the expected loss replaced by the exact worst-case
        KL divergence :math:`\varepsilon\tanh(\varepsilon/2)`; never larger.

    Returns
    -------
    ApproxDP
        ``epsilon``: ``Estimate(kind="upper")``, the smaller of the chosen bound and basic ``k·ε``
        (each evaluated at 160 bits and rounded up); ``method`` says which was used. ``delta``:
        ``Estimate(kind="upper")``, ``k·δ + δ'`` for the advanced bound and basic composition's own
        ``k·δ`` when basic composition is the smaller (it needs no δ'), both rounded up.

    Raises
    ------
    ValueError
        If ``epsilon`` is NaN, infinite or negative; ``delta`` outside [0, 1] or NaN;
        ``delta_prime`` outside (0, 1) or NaN; ``k`` not an integer >= 1; ``variant`` unknown; or
        ``k·δ + δ' > 1`` (a vacuous guarantee).
    TypeError
        If a parameter is not a number.

    Notes
    -----
    .. math:: \varepsilon' = \sqrt{2k\ln(1/\delta')}\,\varepsilon + k\,\varepsilon(e^\varepsilon - 1),
              \qquad \delta_{\rm total} = k\delta + \delta'.

    Proof outline (Dwork & Roth Thm 3.20): Lemma 3.17 reduces to δ = 0; each step's privacy loss
    lies in [−ε, ε] and has conditional mean at most the KL bound β; Azuma's inequality
    (Lemma 3.19) gives :math:`\Pr[\sum_i c_i > k\beta + \varepsilon\sqrt{2k\ln(1/\delta')}] \le \delta'`.
    The exact largest KL of an ε-DP pair is :math:`\beta = \varepsilon\tanh(\varepsilon/2)`
    (randomized response), which is the term in Kairouz, Oh & Viswanath's Thm 3.4.

    References
    ----------
    Dwork, Rothblum & Vadhan 2010, "Boosting and differential privacy", FOCS; Dwork & Roth 2014,
    Thm 3.20 with Lemmas 3.17-3.19 (seeds 000/003 for the lemmas); Kairouz, Oh & Viswanath 2015,
    ICML, arXiv 1311.0776, Thm 3.4 (the tanh term).

    Examples
    --------
    >>> g = compose_advanced(0.1, 0.0, 100, delta_prime=1e-6)
    >>> round(g.epsilon, 4), g.epsilon.method
    (6.3082, 'DRV Thm 3.20 (DR 2014)')
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    count = check_count("k", k)
    dp = check_open_probability("delta_prime", delta_prime)
    if variant not in ("drv", "tanh"):
        raise InvalidArgumentError(f"variant must be 'drv' or 'tanh'; got {variant!r}.")
    total_delta = up(Fraction(d) * count + Fraction(dp))  # DR Thm 3.20: k delta + delta', rounded up
    if not total_delta <= 1.0:
        raise InvalidArgumentError(
            f"k*delta + delta_prime = {total_delta} > 1: the composed guarantee would be vacuous; "
            "lower delta or delta_prime."
        )
    # DR Thm 3.20 (Azuma with alpha = eps, beta = mean_term, z = sqrt(2 ln(1/delta'))), at 160 bits
    # and rounded up; basic composition's k*eps is the exact sum rounded up
    advanced = _advanced_up(eps, count, dp, variant)
    basic = counted_sum_up([(eps, count)])  # DR Thm 3.16 (its delta k*delta <= k*delta + delta')
    if variant == "drv":
        name = "DRV Thm 3.20 (DR 2014)"
    else:
        name = "DRV Thm 3.20 with KL = eps tanh(eps/2) (KOV 2015 Thm 3.4)"
    kind, note = input_kind([epsilon, delta], "upper")
    if advanced < basic:
        value, method = advanced, name
        delta_value, delta_method = total_delta, "k*delta + delta_prime (DR Thm 3.20)"
    else:
        # basic composition needs no delta': it states (k eps, k delta), the smaller delta
        value, method = basic, f"basic k*eps (DR Thm 3.16; smaller than {name} here)"
        delta_value, delta_method = counted_sum_up([(d, count)]), "k*delta (DR Thm 3.16: no delta' needed)"
    return ApproxDP(
        epsilon=Estimate(value, kind=kind, method=method + note),
        delta=Estimate(delta_value, kind=kind, method=delta_method + note),
    )


def _advanced_up(eps: float, count: int, delta_prime: float, variant: str) -> float:
    """sqrt(2k ln(1/delta')) eps + k mean_term(eps) at 160 bits, rounded up (inf past e^eps overflow)."""
    if eps == 0.0:
        return 0.0
    if variant == "drv" and eps > 700.0:
        return math.inf
    ctx = mp()
    e = ctx.mpf(eps)
    mean = e * ctx.expm1(e) if variant == "drv" else e * ctx.tanh(e / 2)
    value = ctx.sqrt(2 * count * -ctx.log(ctx.mpf(delta_prime))) * e + count * mean
    return to_float_up(value)


def advanced_per_step_epsilon(total_epsilon: float, k: int, delta_prime: float) -> Estimate:
    r"""Per-mechanism epsilon that keeps k-fold composition within ``total_epsilon`` (DR Cor 3.21).

    Parameters
    ----------
    total_epsilon : float, in (0, 1)
        Target ε' for the composition.
    k : int, >= 1
    delta_prime : float, in (0, e^{-1/2}]
        The extra δ' of Thm 3.20; the composition is then (ε', kδ + δ')-DP for (ε, δ)-DP steps.

    Returns
    -------
    Estimate
        :math:`\varepsilon = \varepsilon' / (2\sqrt{2k\ln(1/\delta')})`, kind ``"lower"``: it is a
        safe choice, and the largest per-step epsilon that meets the target is at least this.

    Raises
    ------
    ValueError
        If ``total_epsilon`` is not in (0, 1), ``delta_prime`` not in (0, e^{-1/2}] (either NaN),
        or ``k`` not an integer >= 1.
    TypeError
        If a parameter is not a number.

    Notes
    -----
    The corollary's proof uses :math:`e^\varepsilon - 1 \approx \varepsilon`. It holds when
    :math:`\delta' \le e^{-1/2}`: then :math:`\ln(1/\delta') \ge 1/2`, so
    :math:`\varepsilon \le \varepsilon'/(2\sqrt k) < 1/2`, :math:`e^\varepsilon - 1 < 1.3\,\varepsilon`
    and :math:`k\varepsilon(e^\varepsilon-1) < 1.3\,\varepsilon'^2/(8\ln(1/\delta'))
    \le 0.33\,\varepsilon' < \varepsilon'/2`,
    while the first term of Thm 3.20 is exactly :math:`\varepsilon'/2`. For δ' near 1 it fails:
    k = 1, δ' = 0.9, ε' = 0.5 gives ε = 0.545 and a composed 0.644 > 0.5 (and k·ε > 0.5 too).

    References
    ----------
    Dwork & Roth 2014, Cor 3.21 (of Thm 3.20); Dwork, Rothblum & Vadhan 2010, FOCS.

    Examples
    --------
    >>> eps = advanced_per_step_epsilon(0.5, 100, 1e-6)
    >>> round(eps, 6), float(compose_advanced(eps, 0.0, 100, delta_prime=1e-6).epsilon) <= 0.5
    (0.004756, True)
    """
    target = check_epsilon(total_epsilon, "total_epsilon")
    if not (0.0 < target < 1.0):
        raise InvalidArgumentError(f"total_epsilon must be in (0, 1) (DR Cor 3.21 assumes it); got {target}.")
    count = check_count("k", k)
    dp = check_open_probability("delta_prime", delta_prime)
    if not dp <= _COR_321_DELTA_MAX:
        raise InvalidArgumentError(
            f"delta_prime must be <= exp(-1/2) ~ 0.6065 for DR Cor 3.21 to hold; got {dp} "
            "(k=1, delta_prime=0.9, total_epsilon=0.5 would compose to 0.644). Use a smaller "
            "delta_prime, or search compose_advanced directly."
        )
    ctx = mp()  # DR Cor 3.21 at 160 bits, rounded down (a per-step budget: smaller is safe)
    value = to_float_down(ctx.mpf(target) / (2 * ctx.sqrt(2 * count * -ctx.log(ctx.mpf(dp)))))
    return Estimate(value, kind="lower", method="DR Cor 3.21: eps'/(2 sqrt(2k ln(1/delta')))")


def compose_kov_bound(epsilon: float, delta: float, k: int, *, delta_prime: float) -> ApproxDP:
    r"""Kairouz-Oh-Viswanath closed-form bound on k-fold composition of (ε, δ)-DP (Thm 3.4).

    Parameters
    ----------
    epsilon : float, finite, >= 0
    delta : float, in [0, 1]
    k : int, >= 1
    delta_prime : float, in (0, 1]
        KOV's :math:`\tilde\delta`.

    Returns
    -------
    ApproxDP
        ``epsilon``: ``Estimate(kind="upper")``, the smallest of the three terms below (``method``
        names it); ``delta``: :math:`1 - (1-\delta)^k (1-\tilde\delta)` (``kind="upper"``), never
        more than ``k·δ + δ'``.

    Raises
    ------
    ValueError
        If ``epsilon`` is NaN, infinite or negative, ``delta`` outside [0, 1], ``delta_prime``
        outside (0, 1] (either NaN), or ``k`` not an integer >= 1.
    TypeError
        If a parameter is not a number.

    Notes
    -----
    .. math:: \tilde\varepsilon = \min\Big\{k\varepsilon,\;
              k\varepsilon\tanh\tfrac{\varepsilon}{2}
              + \varepsilon\sqrt{2k\ln\big(e + \sqrt{k\varepsilon^2}/\tilde\delta\big)},\;
              k\varepsilon\tanh\tfrac{\varepsilon}{2} + \varepsilon\sqrt{2k\ln(1/\tilde\delta)}\Big\}

    (:math:`\tanh(\varepsilon/2) = (e^\varepsilon-1)/(e^\varepsilon+1)`). Checked in the tests to
    lie above the optimal epsilon of :func:`compose_optimal` at the same total delta, for
    ε in [0.01, 4], k up to 100, δ in {0, 1e-3} and δ' in [1e-8, 0.9].

    References
    ----------
    Kairouz, Oh & Viswanath 2015, "The composition theorem for differential privacy", ICML,
    arXiv 1311.0776, Thm 3.4.

    Examples
    --------
    >>> g = compose_kov_bound(0.1, 0.0, 100, delta_prime=1e-6)
    >>> round(g.epsilon, 4), float(g.delta)
    (5.7561, 1e-06)
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    count = check_count("k", k)
    dt = check_delta(delta_prime, "delta_prime")
    if not dt > 0.0:
        raise InvalidArgumentError(f"delta_prime must be in (0, 1]; got {dt}.")
    ctx = mp()  # the three terms at 160 bits, each rounded up
    e = ctx.mpf(eps)
    mean = count * e * ctx.tanh(e / 2)
    candidates = [
        (counted_sum_up([(eps, count)]), "basic k*eps (KOV Thm 3.4, first term)"),
        (
            to_float_up(mean + e * ctx.sqrt(2 * count * ctx.log(ctx.e + ctx.sqrt(count) * e / dt))),
            "KOV Thm 3.4, second term",
        ),
        (to_float_up(mean + e * ctx.sqrt(2 * count * -ctx.log(ctx.mpf(dt)))), "KOV Thm 3.4, third term"),
    ]
    value, method = min(candidates, key=lambda c: c[0])
    # 1 - (1 - delta)^k (1 - delta~) = -expm1(k log1p(-delta) + log1p(-delta~)), rounded up
    if d == 0.0 or count <= 64:  # exact in rationals
        total = up(1 - (1 - Fraction(d)) ** count * (1 - Fraction(dt)))
    elif d < 1.0 and dt < 1.0:
        total = min(1.0, to_float_up(-ctx.expm1(count * ctx.log1p(-ctx.mpf(d)) + ctx.log1p(-ctx.mpf(dt)))))
    else:
        total = 1.0
    kind, note = input_kind([epsilon, delta], "upper")
    return ApproxDP(
        epsilon=Estimate(value, kind=kind, method=method + note),
        delta=Estimate(total, kind=kind, method="1 - (1-delta)^k (1-delta') (KOV Thm 3.4)" + note),
    )
