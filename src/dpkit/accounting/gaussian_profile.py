r"""The privacy profile of composed Gaussian mechanisms in closed form, in log space, with certified bounds.

The k-fold composition of Gaussian mechanisms with noise sigma_i and l2 sensitivities Delta_i is
exactly the Gaussian pair with :math:`\mu = \sqrt{\sum_i k_i \Delta_i^2/\sigma_i^2}` (the losses are
Gaussian and add; Dong, Roth, Su 2022, "Gaussian differential privacy", arXiv 1905.02383, Cor 2), whose
profile is (Balle & Wang 2018, arXiv 1805.06530, Thm 8)

.. math:: \delta(\varepsilon) = \Phi(a) - e^{\varepsilon}\Phi(b),\qquad
          a = \mu/2 - \varepsilon/\mu,\ b = -\mu/2 - \varepsilon/\mu.

Computation.  Since :math:`\varepsilon - b^2/2 = -a^2/2`, :math:`\delta = \tfrac12 e^{-a^2/2}
[\mathrm{erfcx}(-a/\sqrt2) - \mathrm{erfcx}(-b/\sqrt2)]` with no overflow and no floor: ln delta is formed
directly, down to delta = 1e-300 and far below (a = -1e3 gives ln delta near -5e5).  For a > 37 (eps far
below mu^2/2) erfcx(-a/sqrt2) overflows and the direct form Phi(a) - e^eps Phi(b) is used, where
e^eps Phi(b) <= Phi(a) e^{-mu a}... is small next to Phi(a) > 1/2.

Certification.  scipy's erfcx and log_ndtr (Faddeeva package / Cephes) are taken to be accurate to 8 u
relative (u = 2^-53; the tests check them against mpmath at 50 digits over the range used).  The
difference of two such values errs by at most 8 u (x + y) + u |x - y|, and a^2/2 by 4 u a^2/2; both are
carried into :func:`log_delta_bounds`, which returns ln of a lower and an upper bound.  epsilon(delta)
is then the smallest eps >= 0 whose upper bound is <= delta (an upper bound on the exact epsilon) and
the largest whose lower bound is > delta (a lower bound), by bisection to 1e-15 relative.  When
delta(0) <= delta the answer is epsilon = 0 exactly (a DP epsilon is never negative).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import special

from dpkit._math import check_delta, check_finite, check_positive
from dpkit._math.bisection import bisect_monotone
from dpkit.errors import InvalidArgumentError

__all__ = ["gaussian_delta_interval", "gaussian_epsilon_interval", "gaussian_mu", "log_delta_bounds"]

_U = 2.0**-53
_SQRT2 = math.sqrt(2.0)
_REL = 8.0 * _U


def gaussian_mu(*, sigmas_counts: list[tuple[float, int]], sensitivity: float = 1.0) -> float:
    r"""mu = sqrt(sum_i k_i (sensitivity / sigma_i)^2) of a composition of Gaussian mechanisms (rounded up).

    >>> gaussian_mu(sigmas_counts=[(2.0, 4)])  # exactly 1, rounded up
    1.0000000000000004
    """
    total = 0.0
    for sigma, k in sigmas_counts:
        s = check_positive("sigma", sigma)
        total += int(k) * (sensitivity / s) ** 2
    if not math.isfinite(total):
        raise InvalidArgumentError("the composition's mu = sqrt(sum k / sigma^2) overflows a double; raise sigma.")
    return math.sqrt(total) * (1.0 + 4.0 * _U)


def log_delta_bounds(mu: float, epsilon: float) -> tuple[float, float]:
    """ln of a lower and an upper bound on delta(epsilon) of the Gaussian pair with parameter mu."""
    if mu == 0.0:
        v = -math.expm1(epsilon) if epsilon < 0 else 0.0
        return (math.log(v), math.log(v)) if v > 0 else (-math.inf, -math.inf)
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    if a > 37.0:  # Phi(a) ~ 1: the direct form, the subtracted term small
        la = float(special.log_ndtr(a))
        lb = epsilon + float(special.log_ndtr(b))
        if lb >= la:  # pragma: no cover - cannot happen for a > 0
            return -math.inf, la
        r = math.exp(lb - la)
        lo = la + math.log1p(-r * (1.0 + 4 * _REL)) + math.log1p(-_REL)
        hi = la + math.log1p(-r * (1.0 - 4 * _REL)) + math.log1p(_REL)
        return lo, min(hi, 0.0)
    x, y = -a / _SQRT2, -b / _SQRT2
    ex, ey = float(special.erfcx(x)), float(special.erfcx(y))
    diff = ex - ey
    err = _REL * (abs(ex) + abs(ey)) + _U * abs(diff)
    half_a2 = 0.5 * a * a
    e_exp = 4.0 * _U * half_a2 + 4.0 * _U * abs(epsilon)  # the exponent's rounding, absolute
    if diff - err > 0:
        lo = math.log(0.5) - half_a2 - e_exp + math.log(diff - err)
    else:
        lo = -math.inf
    hi = math.log(0.5) - half_a2 + e_exp + math.log(diff + err) if diff + err > 0 else -math.inf
    return lo, min(hi, 0.0)


def gaussian_delta_interval(mu: float, epsilon: float) -> tuple[float, float]:
    """[lower, upper] containing delta(epsilon) of the Gaussian pair with parameter mu."""
    lo, hi = log_delta_bounds(check_positive("mu", mu), check_finite("epsilon", epsilon))
    return math.exp(lo), math.exp(hi)


def _bisect(pred: Callable[[float], bool], lo: float, hi: float) -> float:
    """The smallest point of [lo, hi] (to 1e-15 relative) where the monotone ``pred`` holds (pred(hi))."""
    return bisect_monotone(pred, lo, hi, side="upper", rtol=1e-15, atol=1e-15 * 1e-300, max_iter=400)


def gaussian_epsilon_interval(mu: float, delta: float) -> tuple[float, float]:
    r"""[lower, upper] containing epsilon(delta) of the Gaussian pair with parameter mu (eps >= 0).

    >>> lo, hi = gaussian_epsilon_interval(1.0, 1e-5)
    >>> lo <= 4.377178095681225 <= hi and hi - lo < 1e-12  # mpmath root at 40 digits: 4.3771780956812246...
    True
    """
    m = check_positive("mu", mu)
    d = check_delta(delta, open_interval=True)
    ld = math.log(d)
    if log_delta_bounds(m, 0.0)[1] <= ld:
        return 0.0, 0.0
    # delta(eps) <= Phi(mu/2 - eps/mu) <= e^{-(eps/mu - mu/2)^2/2}: beyond mu^2/2 + mu sqrt(-2 ln delta) it is <= delta
    top = m * m / 2.0 + m * math.sqrt(-2.0 * ld) + 1.0
    while log_delta_bounds(m, top)[1] > ld:
        top = 2.0 * top
    upper = _bisect(lambda e: log_delta_bounds(m, e)[1] <= ld, 0.0, top)
    if log_delta_bounds(m, 0.0)[0] <= ld:
        return 0.0, upper
    # the largest eps whose lower bound still exceeds delta: bisect for the first where it does not
    first_not = _bisect(lambda e: log_delta_bounds(m, e)[0] <= ld, 0.0, upper)
    lower = first_not
    for _ in range(80):
        if lower <= 0.0 or log_delta_bounds(m, lower)[0] > ld:
            break
        lower = lower - max(1e-15 * lower, 1e-300) * 4.0 if lower > 0 else 0.0
    return max(0.0, min(lower, upper)), upper
