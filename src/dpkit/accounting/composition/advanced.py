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
from typing import Literal

from dpkit._math import Estimate, check_delta, check_epsilon
from dpkit.accounting.composition._common import check_count, check_open_probability
from dpkit.guarantees import ApproxDP

__all__ = ["advanced_per_step_epsilon", "compose_advanced", "compose_kov_bound"]

Variant = Literal["drv", "tanh"]

_COR_321_DELTA_MAX = math.exp(-0.5)  # delta' <= e^{-1/2} makes Cor 3.21 true (see its Notes)


def _drv_term(epsilon: float) -> float:
    """epsilon (e^epsilon - 1), the per-step bound on the expected privacy loss (DR Lemma 3.18)."""
    return math.inf if epsilon > 700.0 else epsilon * math.expm1(epsilon)


def _tanh_term(epsilon: float) -> float:
    """epsilon tanh(epsilon/2): the largest KL divergence of an epsilon-DP pair (randomized response)."""
    return epsilon * math.tanh(epsilon / 2.0)


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
        ``epsilon``: ``Estimate(kind="upper")``, the smaller of the chosen bound and basic ``k·ε``;
        ``method`` says which was used. ``delta``: ``Estimate(kind="upper")``, ``k·δ + δ'``.

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
        raise ValueError(f"variant must be 'drv' or 'tanh'; got {variant!r}.")
    total_delta = count * d + dp  # DR Thm 3.20: k delta + delta'
    if not total_delta <= 1.0:
        raise ValueError(
            f"k*delta + delta_prime = {total_delta} > 1: the composed guarantee would be vacuous; "
            "lower delta or delta_prime."
        )
    mean_term = _drv_term(eps) if variant == "drv" else _tanh_term(eps)
    # DR Thm 3.20 (Azuma with alpha = eps, beta = mean_term, z = sqrt(2 ln(1/delta')))
    advanced = math.sqrt(2.0 * count * math.log(1.0 / dp)) * eps + count * mean_term
    basic = count * eps  # DR Thm 3.16 (its delta k*delta <= k*delta + delta')
    if variant == "drv":
        name = "DRV Thm 3.20 (DR 2014)"
    else:
        name = "DRV Thm 3.20 with KL = eps tanh(eps/2) (KOV 2015 Thm 3.4)"
    if advanced < basic:
        value, method = advanced, name
    else:
        value, method = basic, f"basic k*eps (DR Thm 3.16; smaller than {name} here)"
    return ApproxDP(
        epsilon=Estimate(value, kind="upper", method=method),
        delta=Estimate(total_delta, kind="upper", method="k*delta + delta_prime (DR Thm 3.20)"),
    )


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
        raise ValueError(f"total_epsilon must be in (0, 1) (DR Cor 3.21 assumes it); got {target}.")
    count = check_count("k", k)
    dp = check_open_probability("delta_prime", delta_prime)
    if not dp <= _COR_321_DELTA_MAX:
        raise ValueError(
            f"delta_prime must be <= exp(-1/2) ~ 0.6065 for DR Cor 3.21 to hold; got {dp} "
            "(k=1, delta_prime=0.9, total_epsilon=0.5 would compose to 0.644). Use a smaller "
            "delta_prime, or search compose_advanced directly."
        )
    value = target / (2.0 * math.sqrt(2.0 * count * math.log(1.0 / dp)))  # DR Cor 3.21
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
        raise ValueError(f"delta_prime must be in (0, 1]; got {dt}.")
    mean = count * _tanh_term(eps)
    candidates = [
        (count * eps, "basic k*eps (KOV Thm 3.4, first term)"),
        (
            mean + eps * math.sqrt(2.0 * count * math.log(math.e + math.sqrt(count) * eps / dt)),
            "KOV Thm 3.4, second term",
        ),
        (mean + eps * math.sqrt(2.0 * count * math.log(1.0 / dt)), "KOV Thm 3.4, third term"),
    ]
    value, method = min(candidates, key=lambda c: c[0])
    # 1 - (1 - delta)^k (1 - delta~), without cancellation
    total = -math.expm1(count * math.log1p(-d) + math.log1p(-dt)) if d < 1.0 and dt < 1.0 else 1.0
    return ApproxDP(
        epsilon=Estimate(value, kind="upper", method=method),
        delta=Estimate(total, kind="upper", method="1 - (1-delta)^k (1-delta') (KOV Thm 3.4)"),
    )
