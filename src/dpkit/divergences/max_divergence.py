"""Max divergence and delta-approximate max divergence (Dwork & Roth 2014, Definition 3.6)."""

from __future__ import annotations

import math

from dpkit._math import Estimate, check_delta
from dpkit._math.bisection import bisect_monotone
from dpkit.distributions import Distribution
from dpkit.divergences._dispatch import evaluator
from dpkit.divergences._evaluator import Evaluator


def max_divergence(P: Distribution, Q: Distribution) -> Estimate:
    r"""Max divergence :math:`D_\infty(P\|Q) = \max_{S\subseteq \mathrm{Supp}(P)} \ln \frac{P(S)}{Q(S)}`.

    Equal to the essential supremum of the privacy loss ln(p/q) over P's support; ``+inf`` when
    P puts mass where Q has none, or the loss is unbounded (Gaussians).  A mechanism is
    epsilon-DP iff this is <= epsilon in both directions for all neighbours (Remark 3.1).

    References
    ----------
    Dwork & Roth 2014, Def 3.6 and Remark 3.1 (seeds 000, 003).

    Examples
    --------
    >>> from dpkit.distributions import Laplace
    >>> float(max_divergence(Laplace(0, 2), Laplace(1, 2)))
    0.5
    """
    return evaluator(P, Q).max_divergence()


def approx_max_divergence(P: Distribution, Q: Distribution, delta: float) -> Estimate:
    r"""The delta-approximate max divergence :math:`D^\delta_\infty(P\|Q)`.

    :math:`D^\delta_\infty(P\|Q) = \max_{S:\,P(S)\ge\delta} \ln\frac{P(S)-\delta}{Q(S)}`, computed as
    ln of the smallest gamma with :math:`E_\gamma(P\|Q) \le \delta`, so
    :math:`D^\delta_\infty \le \varepsilon \iff E_{e^\varepsilon}(P\|Q) \le \delta`.  It may be
    negative (it is >= ln(1 - delta)); the epsilon of a guarantee is its positive part.  Where the
    value comes from root finding, the result is the upper end of the bracket (``kind="upper"``).

    Parameters
    ----------
    P, Q : Distribution
    delta : float in [0, 1]

    References
    ----------
    Dwork & Roth 2014, Def 3.6 and Remark 3.1; Balle, Barthe, Gaboardi 2018 (arXiv 1807.01647v2),
    Thm 1 for the hockey-stick characterisation.

    Examples
    --------
    >>> from dpkit.distributions import Laplace
    >>> round(approx_max_divergence(Laplace(0, 1), Laplace(1, 1), delta=0.1), 12)
    0.789278968684
    """
    d = check_delta(delta)
    ev = evaluator(P, Q)
    return round_up_to_profile(ev, ev.approx_max_divergence(d), d)


def round_up_to_profile(ev: Evaluator, eps: Estimate, delta: float) -> Estimate:
    """Never understate: step epsilon up until the pair's own delta(eps), rounded up, is <= delta.

    Every closed form is already the first float that meets the rounded-up profile, so this is a
    check that passes at once; for level-set and segment values it may move a few floats, and the
    result is then labelled ``"upper"``. Estimates (``"numerical"``) are returned as they are: their
    profile values certify nothing.
    """
    value = float(eps)
    if not math.isfinite(value) or delta <= 0.0 or delta >= 1.0 or eps.kind == "numerical":
        return eps
    first = ev.hockey_stick(value)
    if first.kind == "numerical":
        return Estimate(value, kind="numerical", error=eps.error, method=eps.method + " (profile is an estimate)")
    if float(first) <= delta:
        return eps
    # find a passing point by doubling steps, then bisect back so the result is the first passing float
    low, step = value, (math.ulp(value) if value != 0.0 else 5e-324)
    high = value + step
    for _ in range(1100):
        if float(ev.hockey_stick(high)) <= delta:
            break
        low, step = high, step * 2.0
        high = high + step
    else:  # pragma: no cover - the hockey-stick reaches 0 at the max divergence
        return Estimate(math.inf, kind="upper", method=eps.method + " (no passing epsilon found)")
    value = bisect_monotone(lambda e: float(ev.hockey_stick(e)) <= delta, low, high, side="upper", rtol=0.0,
                            max_iter=200)
    return Estimate(value, kind="upper", error=eps.error + abs(value - float(eps)), method=eps.method + " (rounded up)")
