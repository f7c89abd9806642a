"""Reading a profile at a given delta, and conversions by the type of the guarantee.

The ``to_*`` functions dispatch on the guarantee's class through :func:`functools.singledispatch`
(one rule per class); each rule calls the named conversion that cites its theorem. A request that
has no sound answer raises :class:`~dpkit.errors.UnsupportedError` saying why: any request about a
``WassersteinDP``, a Rényi or zCDP bound from (epsilon, delta)-DP with delta > 0 (the delta-mass
may carry infinite privacy loss), or a zCDP bound from a Rényi curve (it needs a supremum over
every order, which finitely many orders or a black-box curve cannot certify).
"""

from __future__ import annotations

import math
from functools import singledispatch

from dpkit._math import check_delta
from dpkit.errors import ArgumentTypeError, UnsupportedError
from dpkit.guarantees.conversions._common import WASSERSTEIN_REFUSAL, require
from dpkit.guarantees.conversions.gaussian import (
    gdp_to_approx_dp,
    gdp_to_profile,
    gdp_to_rdp,
    gdp_to_zcdp,
)
from dpkit.guarantees.conversions.pure import (
    approx_dp_to_profile,
    pure_to_approx_dp,
    pure_to_profile,
    pure_to_rdp,
    pure_to_zcdp,
)
from dpkit.guarantees.conversions.renyi import (
    rdp_to_approx_dp,
    rdp_to_profile,
    zcdp_to_approx_dp,
    zcdp_to_profile,
    zcdp_to_rdp,
)
from dpkit.guarantees.definitions import (
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    WassersteinDP,
    ZCDP,
)

__all__ = ["profile_to_approx_dp", "to_approx_dp", "to_profile", "to_rdp", "to_zcdp"]


def profile_to_approx_dp(profile: PrivacyProfile, *, delta: float) -> ApproxDP:
    r"""The :math:`(\varepsilon, \delta)`-DP guarantee read off a privacy profile at ``delta``.

    Parameters
    ----------
    profile : PrivacyProfile
    delta : float, in [0, 1]

    Returns
    -------
    ApproxDP
        ``epsilon = profile.epsilon(delta)`` (kind ``"upper"``, never understated).

    Raises
    ------
    ValueError
        If ``delta`` is NaN or outside [0, 1].
    UnsupportedError
        If no finite epsilon reaches ``delta``, or for ``WassersteinDP``.
    TypeError
        For anything else that is not a ``PrivacyProfile``.

    References
    ----------
    Balle, Barthe & Gaboardi 2018, arXiv 1807.01647, Sec 2 (privacy profiles).

    Examples
    --------
    >>> print(profile_to_approx_dp(pure_to_profile(PureDP(epsilon=1.0)), delta=0.0))
    (1.0, 0.0)-DP
    """
    p = require(profile, PrivacyProfile, "profile_to_approx_dp")
    target = check_delta(delta)
    epsilon = p.epsilon(target)
    if not math.isfinite(epsilon):
        raise UnsupportedError(f"{p} gives no finite epsilon at delta={target}.")
    return ApproxDP(epsilon=epsilon, delta=target)


def _unknown(guarantee: object, function: str) -> ArgumentTypeError:
    return ArgumentTypeError(f"{function} does not know {type(guarantee).__name__}; pass a dpkit guarantee.")


@singledispatch
def to_approx_dp(guarantee: object, *, delta: float) -> ApproxDP:
    r"""The best :math:`(\varepsilon, \delta)`-DP guarantee dpkit can certify for ``guarantee``.

    Dispatches to :func:`pure_to_approx_dp`, :func:`profile_to_approx_dp` (for ``ApproxDP`` via
    :func:`approx_dp_to_profile`, and ``PrivacyProfile``), :func:`rdp_to_approx_dp` (CKS),
    :func:`zcdp_to_approx_dp` (CKS) or :func:`gdp_to_approx_dp`.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP, PrivacyProfile, RenyiDP, ZCDP or GaussianDP
    delta : float
        In [0, 1] for pure DP, approximate DP and profiles; in (0, 1) otherwise.

    Returns
    -------
    ApproxDP
        ``epsilon`` carries its kind (``"exact"`` or ``"upper"``).

    Raises
    ------
    ValueError
        If ``delta`` is out of range for the conversion used.
    UnsupportedError
        For ``WassersteinDP``, or when no finite epsilon exists at ``delta``.
    TypeError
        For an object that is not a dpkit guarantee.

    References
    ----------
    See the function dispatched to.

    Examples
    --------
    >>> print(to_approx_dp(ApproxDP(epsilon=1.0, delta=1e-6), delta=1e-6))
    (1.0, 1e-06)-DP
    """
    raise _unknown(guarantee, "to_approx_dp")


@to_approx_dp.register
def _(guarantee: PureDP, *, delta: float) -> ApproxDP:
    return pure_to_approx_dp(guarantee, delta=delta)


@to_approx_dp.register
def _(guarantee: ApproxDP, *, delta: float) -> ApproxDP:
    return profile_to_approx_dp(approx_dp_to_profile(guarantee), delta=delta)


@to_approx_dp.register
def _(guarantee: PrivacyProfile, *, delta: float) -> ApproxDP:
    return profile_to_approx_dp(guarantee, delta=delta)


@to_approx_dp.register
def _(guarantee: RenyiDP, *, delta: float) -> ApproxDP:
    return rdp_to_approx_dp(guarantee, delta=delta)


@to_approx_dp.register
def _(guarantee: ZCDP, *, delta: float) -> ApproxDP:
    return zcdp_to_approx_dp(guarantee, delta=delta)


@to_approx_dp.register
def _(guarantee: GaussianDP, *, delta: float) -> ApproxDP:
    return gdp_to_approx_dp(guarantee, delta=delta)


@to_approx_dp.register
def _(guarantee: WassersteinDP, *, delta: float) -> ApproxDP:
    raise UnsupportedError(WASSERSTEIN_REFUSAL)


@singledispatch
def to_profile(guarantee: object) -> PrivacyProfile:
    r"""A privacy profile implied by ``guarantee`` (tight where the source allows it).

    Dispatches to :func:`pure_to_profile`, :func:`approx_dp_to_profile`, :func:`rdp_to_profile`,
    :func:`zcdp_to_profile` or :func:`gdp_to_profile`; a profile is returned as is.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP, PrivacyProfile, RenyiDP, ZCDP or GaussianDP

    Returns
    -------
    PrivacyProfile
        Its ``kind`` says whether it is exact or an upper bound.

    Raises
    ------
    UnsupportedError
        For ``WassersteinDP``.
    TypeError
        For an object that is not a dpkit guarantee.

    References
    ----------
    See the function dispatched to.

    Examples
    --------
    >>> to_profile(GaussianDP(mu=1.0)).kind
    'exact'
    """
    raise _unknown(guarantee, "to_profile")


to_profile.register(PureDP, pure_to_profile)
to_profile.register(ApproxDP, approx_dp_to_profile)
to_profile.register(RenyiDP, rdp_to_profile)
to_profile.register(ZCDP, zcdp_to_profile)
to_profile.register(GaussianDP, gdp_to_profile)


@to_profile.register
def _(guarantee: PrivacyProfile) -> PrivacyProfile:
    return guarantee


@to_profile.register
def _(guarantee: WassersteinDP) -> PrivacyProfile:
    raise UnsupportedError(WASSERSTEIN_REFUSAL)


_NO_RDP_FROM_DELTA = (
    "{g} with delta > 0 implies no Renyi or zCDP bound: the canonical (epsilon, delta) pair has an "
    "outcome of probability delta that the other input never produces, so every D_alpha is infinite."
)


@singledispatch
def to_rdp(guarantee: object) -> RenyiDP:
    r"""A Rényi DP curve implied by ``guarantee`` (tight for each source handled).

    Dispatches to :func:`pure_to_rdp` (also for ``ApproxDP`` with ``delta == 0``),
    :func:`zcdp_to_rdp` or :func:`gdp_to_rdp`; a ``RenyiDP`` is returned as is.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP with delta = 0, RenyiDP, ZCDP or GaussianDP

    Returns
    -------
    RenyiDP

    Raises
    ------
    UnsupportedError
        For ``WassersteinDP``, ``ApproxDP`` with ``delta > 0`` (no finite Rényi bound exists) and
        ``PrivacyProfile`` (a profile does not bound Rényi divergences in general).
    TypeError
        For an object that is not a dpkit guarantee.

    References
    ----------
    Mironov 2017, arXiv 1702.07476, Def 4; see the function dispatched to.

    Examples
    --------
    >>> print(to_rdp(ZCDP(rho=0.5)))
    RDP curve (alpha -> 0.5 * alpha)
    """
    raise _unknown(guarantee, "to_rdp")


to_rdp.register(PureDP, pure_to_rdp)
to_rdp.register(ZCDP, zcdp_to_rdp)
to_rdp.register(GaussianDP, gdp_to_rdp)


@to_rdp.register
def _(guarantee: RenyiDP) -> RenyiDP:
    return guarantee


@to_rdp.register
def _(guarantee: ApproxDP) -> RenyiDP:
    if guarantee.delta > 0.0:
        raise UnsupportedError(_NO_RDP_FROM_DELTA.format(g=guarantee))
    return pure_to_rdp(PureDP(epsilon=guarantee.epsilon))


@to_rdp.register
def _(guarantee: PrivacyProfile) -> RenyiDP:
    raise UnsupportedError(f"{guarantee} does not determine a Renyi DP curve; convert its source guarantee.")


@to_rdp.register
def _(guarantee: WassersteinDP) -> RenyiDP:
    raise UnsupportedError(WASSERSTEIN_REFUSAL)


@singledispatch
def to_zcdp(guarantee: object) -> ZCDP:
    r"""A zCDP guarantee implied by ``guarantee``.

    Dispatches to :func:`pure_to_zcdp` (tight; also for ``ApproxDP`` with ``delta == 0``) or
    :func:`gdp_to_zcdp`; a ``ZCDP`` is returned as is.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP with delta = 0, ZCDP or GaussianDP

    Returns
    -------
    ZCDP

    Raises
    ------
    UnsupportedError
        For ``WassersteinDP``, ``ApproxDP`` with ``delta > 0``, ``RenyiDP`` (zCDP needs
        :math:`\sup_{\alpha>1}\varepsilon(\alpha)/\alpha`, which finitely many orders or a
        black-box curve cannot certify) and ``PrivacyProfile``.
    TypeError
        For an object that is not a dpkit guarantee.

    References
    ----------
    Bun & Steinke 2016, arXiv 1605.02065, Def 1.1; see the function dispatched to.

    Examples
    --------
    >>> print(to_zcdp(GaussianDP(mu=1.0)))
    0.5-zCDP
    """
    raise _unknown(guarantee, "to_zcdp")


to_zcdp.register(PureDP, pure_to_zcdp)
to_zcdp.register(GaussianDP, gdp_to_zcdp)


@to_zcdp.register
def _(guarantee: ZCDP) -> ZCDP:
    return guarantee


@to_zcdp.register
def _(guarantee: ApproxDP) -> ZCDP:
    if guarantee.delta > 0.0:
        raise UnsupportedError(_NO_RDP_FROM_DELTA.format(g=guarantee))
    return pure_to_zcdp(PureDP(epsilon=guarantee.epsilon))


@to_zcdp.register
def _(guarantee: RenyiDP) -> ZCDP:
    raise UnsupportedError(
        f"{guarantee} cannot certify zCDP: that needs sup over every alpha > 1 of epsilon(alpha)/alpha, "
        "which finitely many orders or a black-box curve do not determine."
    )


@to_zcdp.register
def _(guarantee: PrivacyProfile) -> ZCDP:
    raise UnsupportedError(f"{guarantee} does not determine a zCDP bound; convert its source guarantee.")


@to_zcdp.register
def _(guarantee: WassersteinDP) -> ZCDP:
    raise UnsupportedError(WASSERSTEIN_REFUSAL)
