"""Conversions from Gaussian DP: the exact profile (in log space), its inverse, zCDP and RDP."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_delta
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
        Kind ``"exact"``; ``epsilon(0)`` is ``inf``.

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
    >>> round(float(p.epsilon(1e-5)), 6)
    4.377178
    """
    g = require(guarantee, GaussianDP, "gdp_to_profile")
    mu = float(g.mu)

    def delta_function(e: ArrayLike) -> NDArray[np.float64]:
        arr = np.asarray(e, dtype=np.float64)
        flat = arr.reshape(-1)
        log_delta, _ = _numerics.gaussian_log_delta(flat, mu)
        with np.errstate(under="ignore"):
            return np.exp(log_delta).reshape(arr.shape)

    def epsilon_function(target: float) -> Estimate:
        if target == 0.0:
            return Estimate(math.inf, kind="upper", method="GDP profile is > 0 at every epsilon")
        upper, width = _numerics.gaussian_epsilon_upper(target, mu)
        return Estimate(upper, kind="upper", error=width, method="GDP profile inverse (bisection, upper end)")

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
        ``epsilon`` is an ``Estimate(kind="upper")`` within ~1e-11 relative of the exact value.

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
    mu = float(g.mu)
    return ZCDP(rho=Estimate(mu * mu / 2.0, kind="exact", method="Gaussian Renyi divergence"))


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
