"""Conversions from Rényi DP and zCDP to (epsilon, delta)-DP and privacy profiles.

Each order alpha gives a valid bound (CKS 2020 Prop 12 / Balle et al. 2020 Thm 21, or Mironov 2017
Prop 3); the functions here report the best over the usable orders. For a callable curve the
orders are a dense grid plus a bounded scalar refinement; an imperfect optimum costs tightness,
never soundness.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_delta
from dpkit._math.directed import mul_up_array
from dpkit._math.precise import mp, to_float_up
from dpkit.errors import UnsupportedError
from dpkit.guarantees import _numerics
from dpkit.guarantees.conversions._common import (
    METHOD_NAMES,
    RdpMethod,
    ZcdpMethod,
    check_method,
    require,
)
from dpkit.guarantees.definitions import (
    ApproxDP,
    PrivacyProfile,
    RenyiDP,
    ZCDP,
)


def _rdp_epsilon(g: RenyiDP, delta: float, method: str) -> tuple[float, float]:
    """(epsilon, alpha): the order chosen by a float search, the epsilon recomputed there at 160 bits
    and rounded up (so it is the bound at that order, never below it)."""
    log_delta = math.log(delta)
    value, alpha = _numerics.minimise_over_orders(
        lambda a: _numerics.rdp_epsilon_terms(a, g._values(a), log_delta, method), g._grid()
    )
    if not math.isfinite(value):
        return value, alpha
    rdp = float(g._values(np.array([alpha]))[0])
    return _numerics.cks_epsilon_up(alpha, rdp, delta, method), alpha


def rdp_to_approx_dp(guarantee: RenyiDP, *, delta: float, method: RdpMethod = "cks") -> ApproxDP:
    r"""An :math:`(\varepsilon, \delta)`-DP guarantee implied by a Rényi DP curve.

    Parameters
    ----------
    guarantee : RenyiDP
    delta : float, in (0, 1)
    method : {"cks", "mironov"}, default "cks"
        ``"cks"``: :math:`\varepsilon = \min_\alpha \varepsilon(\alpha) + \ln(1 - 1/\alpha) -
        \frac{\ln\delta + \ln\alpha}{\alpha - 1}`; ``"mironov"``: :math:`\min_\alpha
        \varepsilon(\alpha) + \frac{\ln(1/\delta)}{\alpha-1}`. CKS is never larger at the same α.

    Returns
    -------
    ApproxDP
        ``epsilon`` is an ``Estimate(kind="upper")`` whose ``method`` names the order used; a
        negative optimum is reported as 0, which the bound at that order also implies.

    Raises
    ------
    ValueError
        If ``delta`` is NaN or outside (0, 1), ``method`` is unknown, or the curve returns NaN.
    UnsupportedError
        If the curve is infinite at every usable order (no finite epsilon), or for ``WassersteinDP``.
    TypeError
        For anything else that is not a ``RenyiDP``.

    Notes
    -----
    For finite ``orders`` the minimum over them is exact; for a callable curve a grid of 321
    orders (α − 1 from 1e-6 to 1e10) is scanned and the best refined by a bounded scalar search.

    References
    ----------
    Canonne, Kamath & Steinke 2020, arXiv 2004.00010, Prop 12; Balle, Barthe, Gaboardi, Hsu &
    Sato 2020, arXiv 1905.09982, Thm 21; Mironov 2017, arXiv 1702.07476, Prop 3.

    Examples
    --------
    >>> rdp = RenyiDP(curve=lambda a: a / 2)
    >>> cks, mironov = (rdp_to_approx_dp(rdp, delta=1e-5, method=m) for m in ("cks", "mironov"))
    >>> round(cks.epsilon, 4), round(mironov.epsilon, 4)
    (4.7284, 5.2985)
    """
    g = require(guarantee, RenyiDP, "rdp_to_approx_dp")
    target = check_delta(delta, open_interval=True)
    check_method(method, ("cks", "mironov"))
    value, alpha = _rdp_epsilon(g, target, method)
    if not math.isfinite(value):
        raise UnsupportedError(
            f"{g} gives no finite epsilon at delta={target}: it is infinite at every order."
        )
    epsilon = Estimate(max(0.0, value), kind="upper", method=f"{METHOD_NAMES[method]}, alpha={alpha:.10g}")
    return ApproxDP(epsilon=epsilon, delta=target)


def rdp_to_profile(guarantee: RenyiDP, *, method: RdpMethod = "cks") -> PrivacyProfile:
    r"""An upper privacy profile implied by a Rényi DP curve.

    :math:`\delta(\varepsilon) = \min(1, \min_\alpha \delta_\alpha(\varepsilon))` with
    :math:`\delta_\alpha(\varepsilon) = e^{(\alpha-1)(\varepsilon(\alpha)-\varepsilon)}
    (1-1/\alpha)^{\alpha-1}/\alpha` (``"cks"``) or :math:`e^{(\alpha-1)(\varepsilon(\alpha)-\varepsilon)}`
    (``"mironov"``); the inverse is :func:`rdp_to_approx_dp`.

    Parameters
    ----------
    guarantee : RenyiDP
    method : {"cks", "mironov"}, default "cks"

    Returns
    -------
    PrivacyProfile
        Kind ``"upper"``. Evaluated one epsilon at a time (an order search for each).

    Raises
    ------
    ValueError
        If ``method`` is unknown.
    TypeError, UnsupportedError
        For a non-``RenyiDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Canonne, Kamath & Steinke 2020, arXiv 2004.00010, Prop 12; Balle et al. 2020, arXiv
    1905.09982, Thm 21; Mironov 2017, arXiv 1702.07476, Prop 3.

    Examples
    --------
    >>> p = rdp_to_profile(RenyiDP(orders=[2.0, 8.0], epsilons=[1.0, 4.0]))
    >>> round(float(p.delta(3.0)), 6)
    0.033834
    """
    g = require(guarantee, RenyiDP, "rdp_to_profile")
    check_method(method, ("cks", "mironov"))

    def one(e: float) -> float:
        value, alpha = _numerics.minimise_over_orders(
            lambda a: _numerics.rdp_log_delta_terms(a, g._values(a), e, method), g._grid()
        )
        if not math.isfinite(value):
            return 1.0
        rdp = float(g._values(np.array([alpha]))[0])
        return _numerics.cks_delta_up(alpha, rdp, e, method)  # min(1, e^value) at 160 bits, rounded up

    def delta_function(e: ArrayLike) -> NDArray[np.float64]:
        arr = np.asarray(e, dtype=np.float64)
        return np.array([one(float(x)) for x in arr.flat], dtype=np.float64).reshape(arr.shape)

    def epsilon_function(target: float) -> Estimate:
        if target >= 1.0:
            return Estimate(0.0, kind="exact", method="delta = 1 holds at epsilon = 0")
        if target == 0.0:
            return Estimate(math.inf, kind="upper", method="Renyi bounds never give delta = 0")
        value, alpha = _rdp_epsilon(g, target, method)
        return Estimate(max(0.0, value), kind="upper", method=f"{METHOD_NAMES[method]}, alpha={alpha:.10g}")

    return PrivacyProfile(
        delta_function=delta_function,
        epsilon_function=epsilon_function,
        kind="upper",
        description=f"{METHOD_NAMES[method]} profile of {g}",
    )


def zcdp_to_rdp(guarantee: ZCDP) -> RenyiDP:
    r"""The Rényi curve :math:`\alpha \mapsto \alpha\rho` of :math:`\rho`-zCDP (its definition).

    Parameters
    ----------
    guarantee : ZCDP

    Returns
    -------
    RenyiDP
        A callable curve (exact: zCDP *is* this curve for all α > 1).

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``ZCDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Bun & Steinke 2016, arXiv 1605.02065, Def 1.1.

    Examples
    --------
    >>> float(zcdp_to_rdp(ZCDP(rho=0.5)).epsilon(4.0))
    2.0
    """
    g = require(guarantee, ZCDP, "zcdp_to_rdp")
    rho = float(g.rho)
    return RenyiDP(  # alpha * rho, rounded up where the product rounds
        curve=lambda a: mul_up_array(rho, np.asarray(a, dtype=np.float64)), description=f"alpha -> {rho!r} * alpha"
    )


def zcdp_to_approx_dp(guarantee: ZCDP, *, delta: float, method: ZcdpMethod = "cks") -> ApproxDP:
    r"""An :math:`(\varepsilon, \delta)`-DP guarantee implied by :math:`\rho`-zCDP.

    Parameters
    ----------
    guarantee : ZCDP
    delta : float, in (0, 1)
    method : {"cks", "bs16"}, default "cks"
        ``"bs16"``: :math:`\varepsilon = \rho + 2\sqrt{\rho\ln(1/\delta)}` (equal to Mironov's
        conversion optimised over α). ``"cks"``: :math:`\min_{\alpha>1} \alpha\rho + \ln(1-1/\alpha)
        - \frac{\ln\delta + \ln\alpha}{\alpha-1}`, never larger than ``"bs16"`` (the minimum is
        also taken at BS16's optimal order :math:`1 + \sqrt{\ln(1/\delta)/\rho}`, and BS16 is
        reported where that order rounds to 1).

    Returns
    -------
    ApproxDP
        ``epsilon`` is an ``Estimate(kind="upper")``; 0 for ρ = 0.

    Raises
    ------
    ValueError
        If ``delta`` is NaN or outside (0, 1), or ``method`` is unknown.
    TypeError, UnsupportedError
        For a non-``ZCDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Bun & Steinke 2016, arXiv 1605.02065, Prop 1.3; Canonne, Kamath & Steinke 2020, arXiv
    2004.00010, Cor 13.

    Examples
    --------
    >>> print(zcdp_to_approx_dp(ZCDP(rho=0.5), delta=1e-5, method="bs16"))
    (5.29852591219, 1e-05)-DP
    """
    g = require(guarantee, ZCDP, "zcdp_to_approx_dp")
    target = check_delta(delta, open_interval=True)
    check_method(method, ("cks", "bs16"))
    rho = float(g.rho)
    if rho == 0.0:
        return ApproxDP(epsilon=Estimate(0.0, kind="exact", method="0-zCDP: identical outputs"), delta=target)
    log_inv = -math.log(target)
    ctx = mp()
    r = ctx.mpf(rho)
    bs16 = to_float_up(r + 2 * ctx.sqrt(r * -ctx.log(ctx.mpf(target))))  # BS16 Prop 1.3, rounded up
    if method == "bs16":
        epsilon = Estimate(bs16, kind="upper", method="Bun & Steinke 2016 Prop 1.3")
        return ApproxDP(epsilon=epsilon, delta=target)
    alpha_bs = 1.0 + math.sqrt(log_inv / rho)  # BS16's optimal order; rounds to 1 for huge rho
    value, alpha = _numerics.minimise_over_orders(
        lambda a: _numerics.rdp_epsilon_terms(a, rho * a, -log_inv, "cks"), None, guess=alpha_bs
    )
    if math.isfinite(value):  # the bound at the chosen order, alpha * rho exact, at 160 bits
        value = _numerics.cks_epsilon_up(alpha, ctx.mpf(alpha) * r, target, "cks")
    if bs16 < value:  # only when the optimal order lies below the grid (rho above ~1e12)
        epsilon = Estimate(bs16, kind="upper", method="Bun & Steinke 2016 Prop 1.3 (tighter here)")
        return ApproxDP(epsilon=epsilon, delta=target)
    epsilon = Estimate(max(0.0, value), kind="upper", method=f"CKS 2020 Cor 13, alpha={alpha:.10g}")
    return ApproxDP(epsilon=epsilon, delta=target)


def zcdp_to_profile(guarantee: ZCDP) -> PrivacyProfile:
    r"""An upper privacy profile implied by :math:`\rho`-zCDP (CKS Cor 13 at each epsilon).

    Parameters
    ----------
    guarantee : ZCDP

    Returns
    -------
    PrivacyProfile
        Kind ``"upper"`` (``"exact"`` and identically 0 for ρ = 0).

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``ZCDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Canonne, Kamath & Steinke 2020, arXiv 2004.00010, Cor 13.

    Examples
    --------
    >>> round(float(zcdp_to_profile(ZCDP(rho=0.5)).epsilon(1e-5)), 4)
    4.7284
    """
    g = require(guarantee, ZCDP, "zcdp_to_profile")
    if float(g.rho) == 0.0:
        return PrivacyProfile(
            delta_function=lambda e: np.zeros_like(np.asarray(e, dtype=np.float64)),
            epsilon_function=lambda t: Estimate(0.0, kind="exact", method="0-zCDP"),
            kind="exact",
            description=f"profile of {g}",
        )
    profile = rdp_to_profile(zcdp_to_rdp(g), method="cks")
    rho = float(g.rho)

    def one(e: float) -> float:
        # the optimal order of (alpha - 1)(alpha rho - e) sits near (e + rho) / (2 rho): 1e16 for
        # rho = 5e-30, e = 1e-13, far past any fixed grid; it is searched as a guess beside the grid
        guess = (e + rho) / (2.0 * rho)
        value, alpha = _numerics.minimise_over_orders(
            lambda a: _numerics.rdp_log_delta_terms(a, rho * a, e, "cks"), None, guess=guess
        )
        if not math.isfinite(value):
            return 1.0
        ctx = mp()
        return _numerics.cks_delta_up(alpha, ctx.mpf(alpha) * ctx.mpf(rho), e, "cks")

    def delta_function(e: ArrayLike) -> Estimate | NDArray[np.float64]:
        arr = np.asarray(e, dtype=np.float64)
        values = np.array([one(float(x)) for x in arr.flat], dtype=np.float64).reshape(arr.shape)
        if arr.ndim == 0:
            return Estimate(float(values), kind="upper", method=f"CKS 2020 Cor 13 at 160 bits, {g}")
        return values

    def epsilon_function(target: float) -> float:  # returns an Estimate (a float subclass)
        if target == 0.0 or target >= 1.0:
            assert profile.epsilon_function is not None
            return profile.epsilon_function(target)
        return zcdp_to_approx_dp(g, delta=target).epsilon

    return PrivacyProfile(
        delta_function=delta_function,
        epsilon_function=epsilon_function,
        kind="upper",
        description=f"CKS 2020 Cor 13 profile of {g}",
    )
