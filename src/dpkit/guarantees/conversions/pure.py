"""Conversions from pure and approximate DP: tight profiles, zCDP and Rényi curves.

Every (epsilon, delta)-DP pair is a post-processing of the canonical four-point pair (Kairouz, Oh &
Viswanath 2015), and every epsilon-DP pair one of randomized response; so the profile, Rényi curve
and zCDP parameter of that pair are the tight conversions, and the ones given here.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_delta
from dpkit._math.directed import bump_up_array, up
from dpkit._math.precise import evaluate, mp, to_float_up
from dpkit.guarantees import _numerics
from dpkit.guarantees.conversions._common import require
from dpkit.guarantees.definitions import (
    ApproxDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    ZCDP,
)


def _approx_profile_delta(epsilon: float, delta: float, e: NDArray[np.float64]) -> NDArray[np.float64]:
    """delta + (1 - delta) (e^eps - e^e')_+ / (1 + e^eps) for an array of e', rounded up.

    Written without overflow as ``-expm1(e' - eps) / (1 + e^-eps)``; the float evaluation rounds at
    most six times (a few ulps), so it is moved up by 16 relative ulps and one float, except where the
    tail is exactly 0 (e' >= eps), where the value is ``delta`` itself.
    """
    with np.errstate(under="ignore"):
        tail = -np.expm1(np.minimum(e - epsilon, 0.0)) / (1.0 + math.exp(-epsilon))
        value = delta + (1.0 - delta) * tail
    return np.where(tail > 0.0, np.minimum(bump_up_array(value, 16.0), 1.0), delta)


def _approx_profile_delta_exact(epsilon: float, delta: float, e: float) -> Estimate:
    """The same at one e', at 160 bits: within two ulps above the exact value."""
    method = "tight profile of (epsilon, delta)-DP at 160 bits"
    if e >= epsilon:
        return Estimate(delta, kind="exact", method=method)
    ctx = mp()
    d = ctx.mpf(delta)
    value = d + (1 - d) * -ctx.expm1(ctx.mpf(e) - epsilon) / (1 + ctx.exp(-ctx.mpf(epsilon)))
    return Estimate(min(1.0, to_float_up(value)), kind="exact", method=method)


def _approx_profile_epsilon(epsilon: float, delta: float, target: float) -> float:
    """The inverse, eps + log1p(-x) with x = (target - delta)(1 + e^-eps)/(1 - delta), rounded up.

    Evaluated at 160 bits with the precision raised by the bits the sum ``eps + log1p(-x)`` cancels
    (it nears 0 as target nears delta(0)), so the float returned is within two ulps above the exact
    inverse (issue 14: the float formula could land one float below it).
    """
    if target < delta:
        return math.inf
    if target >= 1.0 or delta == 1.0:
        return 0.0
    if target == delta:
        return epsilon

    def inverse(ctx: Any) -> tuple[Any, Any]:
        e = ctx.mpf(epsilon)
        x = (ctx.mpf(target) - delta) * (1 + ctx.exp(-e)) / (1 - ctx.mpf(delta))
        if x >= 1:
            return ctx.mpf(0), ctx.mpf(0)
        tail = ctx.log1p(-x)
        return e + tail, e - tail

    value, certified = evaluate(inverse)
    if value <= 0:
        return 0.0 if certified else math.nextafter(0.0, 1.0)
    return to_float_up(value) if certified else epsilon  # epsilon itself is always valid


def approx_dp_to_profile(guarantee: ApproxDP) -> PrivacyProfile:
    r"""The tight privacy profile implied by :math:`(\varepsilon, \delta)`-DP.

    Parameters
    ----------
    guarantee : ApproxDP

    Returns
    -------
    PrivacyProfile
        Kind ``"exact"``: :math:`\delta'(\varepsilon') = \delta + (1-\delta)
        \frac{(e^{\varepsilon} - e^{\varepsilon'})_+}{1 + e^{\varepsilon}}`, the hockey-stick
        divergence of the canonical pair, which every :math:`(\varepsilon,\delta)`-DP pair is a
        post-processing of; its inverse is closed-form (``inf`` below ``delta``).

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``ApproxDP`` (``UnsupportedError`` for ``WassersteinDP``).

    Notes
    -----
    Dong, Roth & Su: :math:`(\varepsilon,\delta)`-DP is :math:`f_{\varepsilon,\delta}`-DP (Prop 2.5),
    and :math:`\delta'(\varepsilon') = 1 + f^*(-e^{\varepsilon'})` (Prop 2.12); evaluating the
    conjugate of the piecewise-linear :math:`f_{\varepsilon,\delta}` gives the formula above.

    References
    ----------
    Dong, Roth & Su 2019, arXiv 1905.02383, Prop 2.5 and Prop 2.12; Kairouz, Oh & Viswanath 2015,
    arXiv 1311.0776, Sec 2 (the privacy region of (ε, δ)-DP and its canonical pair).

    Examples
    --------
    >>> p = approx_dp_to_profile(ApproxDP(epsilon=1.0, delta=1e-6))
    >>> float(p.delta(1.0)), float(p.epsilon(1e-6))
    (1e-06, 1.0)
    """
    g = require(guarantee, ApproxDP, "approx_dp_to_profile")
    epsilon, delta = float(g.epsilon), float(g.delta)

    def delta_function(e: ArrayLike) -> Estimate | NDArray[np.float64]:
        arr = np.asarray(e, dtype=np.float64)
        if arr.ndim == 0:
            return _approx_profile_delta_exact(epsilon, delta, float(arr))
        return _approx_profile_delta(epsilon, delta, arr)

    return PrivacyProfile(
        delta_function=delta_function,
        epsilon_function=lambda t: Estimate(
            _approx_profile_epsilon(epsilon, delta, t), kind="exact", method=f"inverse profile of {g} (160 bits)"
        ),
        kind="exact",
        description=f"tight profile of {g}",
    )


def pure_to_profile(guarantee: PureDP) -> PrivacyProfile:
    r"""The tight privacy profile implied by pure :math:`\varepsilon`-DP.

    Returns the profile of randomized response,
    :math:`\delta(\varepsilon') = (e^\varepsilon - e^{\varepsilon'})_+ / (1 + e^\varepsilon)`
    (kind ``"exact"``), as :func:`approx_dp_to_profile` with :math:`\delta = 0`.

    Parameters
    ----------
    guarantee : PureDP

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``PureDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Kairouz, Oh & Viswanath 2015, arXiv 1311.0776, Sec 2 (privacy region); Dong, Roth & Su 2019,
    arXiv 1905.02383, Prop 2.5, Prop 2.12.

    Examples
    --------
    >>> round(float(pure_to_profile(PureDP(epsilon=1.0)).delta(0.0)), 12)  # tanh(1/2)
    0.46211715726
    """
    g = require(guarantee, PureDP, "pure_to_profile")
    profile = approx_dp_to_profile(ApproxDP(epsilon=g.epsilon, delta=0.0))
    return PrivacyProfile(
        delta_function=profile.delta_function,
        epsilon_function=profile.epsilon_function,
        kind="exact",
        description=f"tight profile of {g}",
    )


def pure_to_approx_dp(guarantee: PureDP, *, delta: float = 0.0) -> ApproxDP:
    r"""The smallest :math:`\varepsilon'` with :math:`(\varepsilon', \delta)`-DP implied by ε-DP.

    Parameters
    ----------
    guarantee : PureDP
    delta : float, in [0, 1], default 0

    Returns
    -------
    ApproxDP
        ``epsilon`` is an ``Estimate(kind="exact")``:
        :math:`\max(0, \varepsilon + \ln(1 - \delta(1 + e^{-\varepsilon})))` (``epsilon`` itself
        at ``delta = 0``), the inverse of :func:`pure_to_profile`.

    Raises
    ------
    ValueError
        If ``delta`` is NaN or outside [0, 1].
    TypeError, UnsupportedError
        For a non-``PureDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Kairouz, Oh & Viswanath 2015, arXiv 1311.0776, Sec 2 (privacy region); Dwork & Roth 2014, Def 2.4.

    Examples
    --------
    >>> print(pure_to_approx_dp(PureDP(epsilon=1.0)))
    (1.0, 0.0)-DP
    """
    g = require(guarantee, PureDP, "pure_to_approx_dp")
    target = check_delta(delta)
    value = _approx_profile_epsilon(float(g.epsilon), 0.0, target)
    return ApproxDP(
        epsilon=Estimate(value, kind="exact", method=f"tight conversion of {g}"), delta=target
    )


def pure_to_zcdp(guarantee: PureDP, *, tight: bool = True) -> ZCDP:
    r"""The zCDP guarantee implied by pure :math:`\varepsilon`-DP.

    Parameters
    ----------
    guarantee : PureDP
    tight : bool, default True
        ``True``: :math:`\rho = \varepsilon\tanh(\varepsilon/2) =
        \varepsilon\frac{e^\varepsilon-1}{e^\varepsilon+1}`, the smallest ρ valid for every ε-DP
        mechanism (attained by randomized response as α → 1; kind ``"exact"``).
        ``False``: Bun & Steinke's :math:`\rho = \varepsilon^2/2` (kind ``"upper"``; never smaller).

    Returns
    -------
    ZCDP

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``PureDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Steinke 2024, "Tight RDP & zCDP bounds from pure DP", differentialprivacy.org/pdp-to-zcdp,
    Thm 5 (tight); Bun & Steinke 2016, arXiv 1605.02065, Prop 1.4 (:math:`\varepsilon^2/2`).

    Examples
    --------
    >>> print(pure_to_zcdp(PureDP(epsilon=1.0), tight=False))
    0.5-zCDP
    """
    g = require(guarantee, PureDP, "pure_to_zcdp")
    epsilon = float(g.epsilon)
    if tight:  # eps tanh(eps/2) at 160 bits, rounded up (within two ulps)
        ctx = mp()
        value = to_float_up(ctx.mpf(epsilon) * ctx.tanh(ctx.mpf(epsilon) / 2))
        rho = Estimate(value, kind="exact", method="Steinke 2024 Thm 5")
    else:  # eps^2 / 2 exactly, rounded up
        rho = Estimate(up(Fraction(epsilon) ** 2 / 2), kind="upper", method="Bun & Steinke 2016 Prop 1.4")
    return ZCDP(rho=rho)


def pure_to_rdp(guarantee: PureDP) -> RenyiDP:
    r"""The tight Rényi curve implied by pure :math:`\varepsilon`-DP (randomized response's).

    :math:`\varepsilon(\alpha) = \varepsilon - \frac{1}{\alpha-1}
    \ln\frac{1 + e^{-\varepsilon}}{1 + e^{-(2\alpha-1)\varepsilon}} \le \min(\varepsilon,
    \alpha\varepsilon\tanh(\varepsilon/2))`, evaluated without cancellation near α = 1.

    Parameters
    ----------
    guarantee : PureDP

    Returns
    -------
    RenyiDP
        A callable curve; tight for every α > 1.

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``PureDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Steinke 2024, "Tight RDP & zCDP bounds from pure DP", differentialprivacy.org/pdp-to-zcdp,
    Thm 4; Bun & Steinke 2016, arXiv 1605.02065, Prop 3.3 (proof technique).

    Examples
    --------
    >>> round(float(pure_to_rdp(PureDP(epsilon=1.0)).epsilon(2.0)), 12)
    0.735325664056
    """
    g = require(guarantee, PureDP, "pure_to_rdp")
    epsilon = float(g.epsilon)
    return RenyiDP(
        curve=lambda a: _numerics.randomized_response_rdp(np.asarray(a, dtype=np.float64), epsilon),
        description=f"tight curve of {g}",
    )
