"""Conversions from Gaussian DP: the exact profile (in log space), its inverse, zCDP and RDP."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_delta
from dpkit._math.directed import up
from dpkit._math.gaussian import gaussian_delta_up, gaussian_epsilon_up
from dpkit.guarantees import _numerics
from dpkit.guarantees.conversions._common import require
from dpkit.guarantees.conversions.renyi import zcdp_to_rdp
from dpkit.guarantees.definitions import (
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    RenyiDP,
    ZCDP,
)


def gdp_to_profile(guarantee: GaussianDP) -> PrivacyProfile:
    r"""The exact privacy profile of :math:`\mu`-GDP and its inverse.

    :math:`\delta(\varepsilon) = \Phi(-\varepsilon/\mu + \mu/2) -
    e^\varepsilon\Phi(-\varepsilon/\mu - \mu/2)`, computed in log space: no overflow or
    cancellation for large ε; relative error below 1e-11 for μ >= 1e-3 down to the smallest
    positive double (it grows like 1e-14/μ for smaller μ, where the two terms nearly cancel). The
    inverse bisects the log-profile and returns the upper end of the bracket, accepting a point
    only after allowing for the floating-point error of the log-profile there, so ε is never
    understated.

    Parameters
    ----------
    guarantee : GaussianDP

    Returns
    -------
    PrivacyProfile
        Kind ``"exact"``; ``epsilon(0)`` is ``inf``. A scalar ``delta(eps)`` and ``epsilon(delta)``
        are ``"exact"`` Estimates (evaluated at 160 bits, within two ulps and never below the exact
        value); ``delta`` of an array is the log-space float evaluation moved up by its error bound.

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``GaussianDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Dong, Roth & Su 2019, arXiv 1905.02383, Cor 2.13; Balle & Wang 2018, arXiv 1805.06530, Thm 8.

    Examples
    --------
    >>> p = gdp_to_profile(GaussianDP(mu=1.0))
    >>> round(float(p.epsilon(1e-5)), 6), p.epsilon(1e-5).kind
    (4.377178, 'exact')
    """
    g = require(guarantee, GaussianDP, "gdp_to_profile")
    mu = float(g.mu)
    method = "Balle-Wang / DRS Cor 2.13 at 160 bits, rounded up"

    def delta_function(e: ArrayLike) -> Estimate | NDArray[np.float64]:
        arr = np.asarray(e, dtype=np.float64)
        if arr.ndim == 0:  # one epsilon: the 160-bit value, within two ulps above
            return Estimate(gaussian_delta_up(mu, float(arr)), kind="exact", method=method)
        flat = arr.reshape(-1)
        log_delta, error = _numerics.gaussian_log_delta(flat, mu)
        with np.errstate(under="ignore", over="ignore", invalid="ignore"):
            # arrays: the log-space float evaluation moved up by its error bound (upper bounds);
            # where that bound is loose (small mu cancels), the element is evaluated at 160 bits
            values = np.nextafter(np.exp(log_delta + 2.0 * error) * (1.0 + 2.0**-49), np.inf)
        loose = np.flatnonzero(~(error <= 1e-13))
        for i in loose:
            values[i] = gaussian_delta_up(mu, float(flat[i]))
        return np.minimum(values, 1.0).reshape(arr.shape)

    def epsilon_function(target: float) -> Estimate:
        if target == 0.0:
            return Estimate(math.inf, kind="upper", method="GDP profile is > 0 at every epsilon")
        if target >= 1.0:
            return Estimate(0.0, kind="exact", method="delta = 1 holds at epsilon = 0")
        upper, width = _numerics.gaussian_epsilon_upper(target, mu)
        if upper == 0.0:
            return Estimate(0.0, kind="exact", method="delta(0) is below the target")
        # the float bisection brackets the root to 1e-13; the 160-bit profile then picks the float
        value = gaussian_epsilon_up(mu, target, upper)
        return Estimate(max(value, 0.0), kind="exact", error=math.ulp(value),
                        method="inverse of the GDP profile at 160 bits (first float that meets delta)")

    return PrivacyProfile(
        delta_function=delta_function,
        epsilon_function=epsilon_function,
        kind="exact",
        description=f"exact profile of {g}",
    )


def gdp_to_approx_dp(guarantee: GaussianDP, *, delta: float) -> ApproxDP:
    r"""The smallest :math:`\varepsilon` with :math:`(\varepsilon,\delta)`-DP under :math:`\mu`-GDP.

    Parameters
    ----------
    guarantee : GaussianDP
    delta : float, in (0, 1)

    Returns
    -------
    ApproxDP
        ``epsilon`` is an ``Estimate(kind="exact")``: the smallest float whose δ, evaluated at 160 bits
        and rounded up, meets ``delta`` (within two ulps of the exact inverse, never below it).

    Raises
    ------
    ValueError
        If ``delta`` is NaN or outside (0, 1).
    TypeError, UnsupportedError
        For a non-``GaussianDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Dong, Roth & Su 2019, arXiv 1905.02383, Cor 2.13; Balle & Wang 2018, arXiv 1805.06530, Thm 8.

    Examples
    --------
    >>> round(gdp_to_approx_dp(GaussianDP(mu=1.0), delta=1e-5).epsilon, 6)
    4.377178
    """
    g = require(guarantee, GaussianDP, "gdp_to_approx_dp")
    target = check_delta(delta, open_interval=True)
    epsilon = gdp_to_profile(g).epsilon(target)
    return ApproxDP(epsilon=epsilon, delta=target)


def gdp_to_zcdp(guarantee: GaussianDP) -> ZCDP:
    r"""The tight zCDP guarantee of :math:`\mu`-GDP: :math:`\rho = \mu^2/2`.

    Parameters
    ----------
    guarantee : GaussianDP

    Returns
    -------
    ZCDP
        ``rho`` is an ``Estimate(kind="exact")``: :math:`D_\alpha(N(0,1)\|N(\mu,1)) = \alpha\mu^2/2`,
        and a μ-GDP pair is a post-processing of the Gaussian pair.

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``GaussianDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Bun & Steinke 2016, arXiv 1605.02065, Prop 1.6; Dong, Roth & Su 2019, arXiv 1905.02383, Def 2.6.

    Examples
    --------
    >>> print(gdp_to_zcdp(GaussianDP(mu=1.0)))
    0.5-zCDP
    """
    g = require(guarantee, GaussianDP, "gdp_to_zcdp")
    rho = up(Fraction(float(g.mu)) ** 2 / 2)  # mu^2 / 2 exactly, rounded up
    kind = g.mu.kind if isinstance(g.mu, Estimate) and g.mu.kind in ("numerical", "lower") else "exact"
    return ZCDP(rho=Estimate(rho, kind=kind, method="Gaussian Renyi divergence"))


def gdp_to_rdp(guarantee: GaussianDP) -> RenyiDP:
    r"""The tight Rényi curve of :math:`\mu`-GDP: :math:`\varepsilon(\alpha) = \alpha\mu^2/2`.

    Parameters
    ----------
    guarantee : GaussianDP

    Returns
    -------
    RenyiDP

    Raises
    ------
    TypeError, UnsupportedError
        For a non-``GaussianDP`` (``UnsupportedError`` for ``WassersteinDP``).

    References
    ----------
    Mironov 2017, arXiv 1702.07476, Table II (Gaussian); Dong, Roth & Su 2019, arXiv 1905.02383, Def 2.6.

    Examples
    --------
    >>> float(gdp_to_rdp(GaussianDP(mu=2.0)).epsilon(3.0))
    6.0
    """
    g = require(guarantee, GaussianDP, "gdp_to_rdp")
    return zcdp_to_rdp(gdp_to_zcdp(g))
