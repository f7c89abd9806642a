r"""Bounded-range privacy: the worst-case pair and the tight privacy profile.

What lives here
---------------
* :func:`bounded_range_pair`: the two-point pair that dominates every :math:`\eta`-bounded-range
  pair whose privacy losses lie in :math:`[t - \eta, t]`.
* :func:`bounded_range_delta` and :func:`bounded_range_epsilon`: the tight (epsilon, delta)
  profile of an :math:`\eta`-bounded-range mechanism, and its inverse rounded up.
* Private helpers used by :mod:`dpkit.mechanisms.exponential`: the profile, zCDP and Rényi
  guarantees of an :math:`\eta`-bounded-range mechanism (``_br_profile``, ``_br_zcdp``,
  ``_br_rdp``).

Contract
--------
A mechanism is :math:`\eta`-bounded-range when, for every neighbouring pair, its privacy loss
:math:`\ln(P(o)/Q(o))` takes values in an interval of width at most :math:`\eta` (the exponential
mechanism with parameter epsilon is epsilon-bounded-range).  Public functions validate their
arguments (``bounded_range`` finite and > 0; epsilon finite and >= 0; delta in [0, 1]) and return
exact values up to rounding, epsilons rounded up so that they are never understated.  The zCDP and
Rényi helpers return upper bounds: the smaller of the bounded-range bound
(:math:`\eta^2/8`, Cesar & Rogers 2021) and the bound of an :math:`\eta`-DP mechanism.

References
----------
Durfee & Rogers 2019, arXiv 1905.04273v2, Def 2.1 (bounded range); Dong, Durfee & Rogers 2020,
"Optimal Differential Privacy Composition for Exponential Mechanisms", arXiv 1909.13830v4, Sec 3;
Cesar & Rogers 2021, arXiv 2004.07223v2, Lemma 3.2; Steinke 2024, Thm 5.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_delta, check_positive
from dpkit.distributions import Finite
from dpkit.guarantees import PrivacyProfile, PureDP, RenyiDP, ZCDP
from dpkit.guarantees.conversions import pure_to_rdp, pure_to_zcdp
from dpkit.mechanisms._base import DominatingPair
from dpkit.errors import InvalidArgumentError

__all__ = ["bounded_range_delta", "bounded_range_epsilon", "bounded_range_pair"]


def bounded_range_pair(bounded_range: float, t: float) -> DominatingPair:
    r"""The two-point pair that dominates an :math:`\eta`-bounded-range pair with losses in [t - η, t].

    Parameters
    ----------
    bounded_range : float, finite, > 0
        :math:`\eta`: every neighbouring pair's privacy loss :math:`\ln(P(o)/Q(o))` takes values in
        an interval of width at most :math:`\eta`.
    t : float, in (0, bounded_range)
        The top of that interval.

    Returns
    -------
    DominatingPair
        P = (p, 1 - p) and Q = (p e^{-t}, (1 - p) e^{η - t}) on outputs {0, 1}, with
        :math:`p = (e^\eta - e^t)/(e^\eta - 1)` (so Q sums to 1): losses t and t - η.

    Raises
    ------
    ValueError
        If ``bounded_range`` is not finite and > 0, or ``t`` is not in (0, bounded_range).

    Notes
    -----
    Among pairs with losses in :math:`[t-\eta, t]`, the hockey-stick divergence
    :math:`E_{e^{\varepsilon}}(P\|Q) = E_P[(1 - e^{\varepsilon} e^{-L})_+]` is a convex function of
    :math:`e^{-L}`, whose mean is fixed at 1; so it is largest when :math:`e^{-L}` sits on the two
    ends: this pair.  The supremum over t is :func:`bounded_range_delta`.

    References
    ----------
    Dong, Durfee & Rogers 2020, "Optimal Differential Privacy Composition for Exponential
    Mechanisms", arXiv 1909.13830v4, Sec 3 (worst-case BR pairs); Durfee & Rogers 2019,
    arXiv 1905.04273v2, Def 2.1 (bounded range).

    Examples
    --------
    >>> pair = bounded_range_pair(1.0, 0.5)
    >>> [round(float(x), 6) for x in pair.P.probabilities]
    [0.622459, 0.377541]
    """
    eta = check_positive("bounded_range", bounded_range)
    top = float(t)
    if not (0.0 < top < eta):
        raise InvalidArgumentError(f"t must be in (0, bounded_range={eta}); got {t}.")
    # p = (e^eta - e^t)/(e^eta - 1) = -expm1(t - eta) / -expm1(-eta), without overflow
    p = -math.expm1(top - eta) / -math.expm1(-eta)
    one_minus_p = -math.expm1(-top) / -math.expm1(-eta) * math.exp(top - eta)  # (e^t - 1)/(e^eta - 1)
    P = Finite([p, one_minus_p])
    Q = Finite([p * math.exp(-top), one_minus_p * math.exp(eta - top)])
    return DominatingPair(P=P, Q=Q)


def bounded_range_delta(bounded_range: float, epsilon: ArrayLike) -> NDArray[np.float64]:
    r"""The tight privacy profile of an :math:`\eta`-bounded-range mechanism.

    Parameters
    ----------
    bounded_range : float, finite, > 0
    epsilon : float or array of floats, finite, >= 0

    Returns
    -------
    ndarray
        Exact (up to rounding): :math:`\delta(\varepsilon) =
        \frac{(e^{\eta/2} - e^{\varepsilon/2})^2}{e^\eta - 1}` for :math:`\varepsilon < \eta`, and 0
        from :math:`\eta` on; at :math:`\varepsilon = 0` it is :math:`\tanh(\eta/4)`.

    Raises
    ------
    ValueError
        If ``bounded_range`` is not finite and > 0, or an epsilon is NaN, infinite or negative.

    Notes
    -----
    The supremum over t of the hockey-stick divergence of :func:`bounded_range_pair`: with
    :math:`g(t) = (e^\eta - e^t)(1 - e^{\varepsilon - t})`, :math:`g'(t) = 0` at
    :math:`t^* = (\eta+\varepsilon)/2`, where :math:`g = (e^{\eta/2} - e^{\varepsilon/2})^2`
    (the reverse direction is the same by :math:`t \mapsto \eta - t`).  Computed as
    :math:`\mathrm{expm1}((\varepsilon-\eta)/2)^2 / (-\mathrm{expm1}(-\eta))`, without overflow.
    The exponential mechanism attains it (two candidates whose utilities move by
    :math:`\pm\Delta_u`), so for it this profile is tight.

    References
    ----------
    Dong, Durfee & Rogers 2020, arXiv 1909.13830v4, Sec 3 (the worst case for one BR mechanism is
    this sup over t); derivation and numerical check in ``tests/mechanisms/test_exponential.py``.

    Examples
    --------
    >>> round(float(bounded_range_delta(1.0, 0.0)), 12)  # tanh(1/4)
    0.244918662404
    """
    eta = check_positive("bounded_range", bounded_range)
    e = np.asarray(epsilon, dtype=np.float64)
    bad = ~(np.isfinite(e) & (e >= 0.0))
    if np.any(bad):
        raise InvalidArgumentError(f"epsilon must be finite and >= 0; got {e[bad].flat[0]}.")
    return _br_delta(eta, e)


def _br_delta(eta: float, e: NDArray[np.float64]) -> NDArray[np.float64]:
    gap = np.minimum((e - eta) / 2.0, 0.0)
    return np.asarray(np.expm1(gap) ** 2 / -math.expm1(-eta), dtype=np.float64)


def bounded_range_epsilon(bounded_range: float, delta: float) -> Estimate:
    r"""The smallest epsilon with :func:`bounded_range_delta` at most ``delta`` (never understated).

    Parameters
    ----------
    bounded_range : float, finite, > 0
    delta : float, in [0, 1]

    Returns
    -------
    Estimate
        Kind ``"exact"``: :math:`\max(0, \eta + 2\ln(1 - \sqrt{\delta (1 - e^{-\eta})}))`,
        rounded up to the first float at which the profile is at most ``delta``; ``eta`` at
        ``delta = 0``.

    Raises
    ------
    ValueError
        If ``bounded_range`` is not finite and > 0, or ``delta`` is NaN or outside [0, 1].

    Examples
    --------
    >>> float(bounded_range_epsilon(1.0, 0.0)), float(bounded_range_epsilon(1.0, 0.5))
    (1.0, 0.0)
    """
    eta = check_positive("bounded_range", bounded_range)
    d = check_delta(delta)
    return Estimate(_br_epsilon(eta, d), kind="exact", method=f"inverse bounded-range profile ({eta}-BR)")


def _br_epsilon(eta: float, d: float) -> float:
    if d == 0.0:
        return eta
    root = math.sqrt(d * -math.expm1(-eta))
    if root >= 1.0:
        return 0.0
    e = max(0.0, eta + 2.0 * math.log1p(-root))
    while e < eta and float(_br_delta(eta, np.asarray(e))) > d:  # round up: never understate
        e = min(eta, math.nextafter(e, math.inf))
    return e


def _br_profile(eta: float, name: str) -> PrivacyProfile:
    return PrivacyProfile(
        delta_function=lambda e: _br_delta(eta, np.asarray(e, dtype=np.float64)),
        epsilon_function=lambda d: bounded_range_epsilon(eta, d),
        kind="exact",
        description=f"{name}, {eta!r}-bounded range (Dong, Durfee & Rogers 2020)",
    )


def _br_zcdp(eta: float) -> ZCDP:
    br = eta * eta / 8.0
    pure = float(pure_to_zcdp(PureDP(eta)).rho)
    if br <= pure:
        return ZCDP(Estimate(br, kind="upper", method="bounded range: eps^2/8 (Cesar & Rogers 2021)"))
    return ZCDP(Estimate(pure, kind="upper", method="pure DP: eps tanh(eps/2) (Steinke 2024)"))


def _br_rdp(eta: float, name: str) -> RenyiDP:
    pure_curve = pure_to_rdp(PureDP(eta))

    def curve(alpha: ArrayLike) -> NDArray[np.float64]:
        a = np.asarray(alpha, dtype=np.float64)
        return np.minimum(a * eta * eta / 8.0, np.asarray(pure_curve.epsilon(a), dtype=np.float64))

    return RenyiDP(curve=curve, description=f"{name}: min(alpha eps^2/8, pure-DP curve)")
