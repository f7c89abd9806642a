r"""Private numerical kernels for :mod:`dpkit.guarantees`.

Contract: inputs are already validated by the public functions (helpers ``assert`` only their own
invariants). Every routine that feeds a reported epsilon is one-sided: the bisections return the
*upper* end of their final bracket, and every point they accept has been checked to satisfy the
guarantee; optimisations over Rényi orders only choose *which* valid bound to report, so their
error costs tightness, never soundness.

Why hand-written: SciPy has ``log_ndtr`` and ``erfcx`` but no log-space Gaussian hockey-stick
divergence. Evaluating :math:`\Phi(a) - e^\varepsilon \Phi(b)` directly cancels catastrophically once
:math:`\varepsilon > \mu^2/2`; writing :math:`\Phi(x) = \tfrac12\operatorname{erfcx}(-x/\sqrt2)\,e^{-x^2/2}`
makes the two exponents cancel *algebraically* (:math:`b^2/2 - a^2/2 = \varepsilon`), so only the
ratio of two ``erfcx`` values, each accurate to a few ulps, is left to subtract in log space.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar
from scipy.special import erf, erfcx, log_ndtr

_SQRT2 = math.sqrt(2.0)
_EPS_MACHINE = float(np.finfo(np.float64).eps)

# The Rényi-order grid used for callable curves: alpha - 1 log-spaced over [1e-6, 1e10]. Any order
# gives a valid bound; the grid only has to put one order near the optimum, which for
# alpha * rho curves sits near 1 + sqrt(ln(1/delta) / rho).
_ALPHA_GRID = 1.0 + np.logspace(-6.0, 10.0, 321)

_BISECTION_STEPS = 200
_DOUBLINGS = 40


# --------------------------------------------------------------------------------------------
# Gaussian (GDP) privacy profile in log space


def _log1mexp(d: NDArray[np.float64]) -> NDArray[np.float64]:
    """Vectorised ln(1 - exp(-d)) for d >= 0 (Maechler 2012, eq. 7); -inf at d = 0."""
    out = np.empty_like(d)
    small = d <= math.log(2.0)
    with np.errstate(divide="ignore"):
        out[small] = np.log(-np.expm1(-d[small]))
    out[~small] = np.log1p(-np.exp(-d[~small]))
    return out


def gaussian_log_delta(
    epsilon: NDArray[np.float64], mu: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Return ``(log delta, error)`` of the mu-GDP profile at each epsilon >= 0.

    :math:`\delta(\varepsilon) = \Phi(a) - e^{\varepsilon}\Phi(b)` with
    :math:`a = -\varepsilon/\mu + \mu/2`, :math:`b = -\varepsilon/\mu - \mu/2` (DRS Cor 2.13).
    ``error`` is a conservative bound on the absolute error of ``log delta`` from floating point,
    used by the inverse to stay on the safe side.

    * ``a >= 0`` (epsilon <= mu^2/2): :math:`\Phi(a) - \Phi(b) = (\operatorname{erf}(a/\sqrt2) +
      \operatorname{erf}(-b/\sqrt2))/2` is a sum of non-negative terms, and the remaining
      :math:`\operatorname{expm1}(\varepsilon)\Phi(b)` is a small correction: relative error ~1e-15.
    * ``a < 0``: :math:`\ln\delta = \ln\Phi(a) + \ln(1 - e^{-d})` with
      :math:`d = \ln\operatorname{erfcx}(-a/\sqrt2) - \ln\operatorname{erfcx}(-b/\sqrt2) > 0`; the
      error of ``d`` is a few ulps of O(1) numbers, so ``ln(1 - e^{-d})`` is accurate to ~1e-15/d.
    """
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    log_delta = np.empty_like(epsilon)
    error = np.empty_like(epsilon)

    near = a >= 0.0
    if np.any(near):
        an, bn, en = a[near], b[near], epsilon[near]
        head = 0.5 * (erf(an / _SQRT2) + erf(-bn / _SQRT2))
        # expm1(eps) * Phi(b) in log space: e^eps alone overflows for eps > 709 (mu > 37)
        with np.errstate(divide="ignore"):
            log_expm1 = en + np.log(-np.expm1(-en))
        delta = head - np.exp(log_expm1 + log_ndtr(bn))
        with np.errstate(divide="ignore"):
            log_delta[near] = np.log(delta)
        error[near] = 64.0 * _EPS_MACHINE

    far = ~near
    if np.any(far):
        u = -a[far] / _SQRT2  # u > 0
        v = -b[far] / _SQRT2  # v > u
        log_erfcx_u = np.log(erfcx(u))
        d = log_erfcx_u - np.log(erfcx(v))
        log_phi_a = log_erfcx_u - math.log(2.0) - u * u
        with np.errstate(divide="ignore", invalid="ignore"):
            log_delta[far] = log_phi_a + _log1mexp(np.maximum(d, 0.0))
            rel_d = 16.0 * _EPS_MACHINE * (1.0 + np.abs(log_erfcx_u)) / d
        # error: rounding in u*u and log(erfcx(u)), plus the relative error of d itself
        error[far] = 16.0 * _EPS_MACHINE * (1.0 + u * u + np.abs(log_erfcx_u)) + np.where(
            d > 0.0, 2.0 * rel_d, np.inf
        )
    return log_delta, error


def gaussian_epsilon_upper(delta: float, mu: float) -> tuple[float, float]:
    """Smallest epsilon >= 0 with delta_mu(epsilon) <= delta, as ``(upper, bracket_width)``.

    Bisection on the monotone log-profile; a point is accepted only if
    ``log delta(eps) + error(eps) <= log(delta)``, so the returned upper end is a valid epsilon
    even after floating-point error. ``delta`` must be in (0, 1].
    """
    assert 0.0 < delta <= 1.0
    target = math.log(delta)

    def ok(eps: float) -> bool:
        log_d, err = gaussian_log_delta(np.array([eps]), mu)
        return bool(log_d[0] + err[0] <= target)

    if ok(0.0):
        return 0.0, 0.0
    # Phi(a) >= delta(eps), so delta(eps) <= delta once a = Phi^{-1}(delta): a safe first guess.
    from scipy.special import ndtri

    hi = max(mu * mu / 2.0 - mu * float(ndtri(delta)), 1e-300)
    lo = 0.0
    for _ in range(_DOUBLINGS):
        if ok(hi):
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - the first guess is analytically sufficient
        return math.inf, math.inf
    return _bisect(ok, lo, hi)


def _bisect(ok: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """Shrink [lo, hi] with ok(lo) False, ok(hi) True; return (hi, hi - lo). Never lowers hi
    below a point where ``ok`` was not verified."""
    for _ in range(_BISECTION_STEPS):
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, hi - lo


def invert_profile_upper(
    delta_at: Callable[[float], float], delta: float
) -> tuple[float, float]:
    """Smallest epsilon >= 0 with delta_at(epsilon) <= delta for a non-increasing profile.

    Returns ``(upper end, bracket width)``; ``(inf, inf)`` when no epsilon up to 2**40 works.
    Every reported epsilon was evaluated and satisfied ``delta_at(epsilon) <= delta``.
    """

    def ok(eps: float) -> bool:
        return delta_at(eps) <= delta

    if ok(0.0):
        return 0.0, 0.0
    lo, hi = 0.0, 1.0
    for _ in range(_DOUBLINGS):
        if ok(hi):
            return _bisect(ok, lo, hi)
        lo, hi = hi, 2.0 * hi
    return math.inf, math.inf


# --------------------------------------------------------------------------------------------
# Rényi DP -> (epsilon, delta)


def rdp_epsilon_terms(
    alpha: NDArray[np.float64], rdp: NDArray[np.float64], log_delta: float, method: str
) -> NDArray[np.float64]:
    r"""Epsilon implied at each order by (alpha, rdp)-RDP and delta (inf where rdp is inf).

    ``"cks"``: :math:`\varepsilon_\alpha + \ln(1 - 1/\alpha) - (\ln\delta + \ln\alpha)/(\alpha-1)`
    (CKS 2020 Prop 12; Balle et al. 2020 Thm 21). ``"mironov"``:
    :math:`\varepsilon_\alpha + \ln(1/\delta)/(\alpha-1)` (Mironov 2017 Prop 3).
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if method == "cks":
            out = rdp + np.log1p(-1.0 / alpha) - (log_delta + np.log(alpha)) / (alpha - 1.0)
        else:
            out = rdp - log_delta / (alpha - 1.0)
    return np.where(np.isinf(rdp), np.inf, out)


def rdp_log_delta_terms(
    alpha: NDArray[np.float64], rdp: NDArray[np.float64], epsilon: float, method: str
) -> NDArray[np.float64]:
    r"""ln delta implied at each order by (alpha, rdp)-RDP at epsilon (inf where rdp is inf).

    ``"cks"``: :math:`(\alpha-1)(\varepsilon_\alpha - \varepsilon) + (\alpha-1)\ln(1-1/\alpha) - \ln\alpha`;
    ``"mironov"``: :math:`(\alpha-1)(\varepsilon_\alpha - \varepsilon)`.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = (alpha - 1.0) * (rdp - epsilon)
        if method == "cks":
            out = out + (alpha - 1.0) * np.log1p(-1.0 / alpha) - np.log(alpha)
    return np.where(np.isinf(rdp), np.inf, out)


def minimise_over_orders(
    objective: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    orders: NDArray[np.float64] | None,
) -> tuple[float, float]:
    """Return ``(min value, order)`` of ``objective`` over Rényi orders.

    With finite ``orders`` the minimum is exact over them. Otherwise the default grid is scanned
    and the best grid point refined by a bounded scalar search in ln(alpha - 1) between its
    neighbours; the refined order is kept only if its (exactly evaluated) value is smaller. Every
    value considered is itself a valid bound, so the result is valid whatever the optimiser does.
    """
    grid = _ALPHA_GRID if orders is None else orders
    values = objective(grid)
    finite = np.isfinite(values)
    if not np.any(finite):
        return math.inf, math.nan
    i = int(np.argmin(np.where(finite, values, np.inf)))
    best_value, best_alpha = float(values[i]), float(grid[i])
    if orders is not None:
        return best_value, best_alpha
    t = np.log(grid - 1.0)
    lo_t, hi_t = float(t[max(i - 1, 0)]), float(t[min(i + 1, len(t) - 1)])

    def scalar(ti: float) -> float:
        value = float(objective(np.array([1.0 + math.exp(ti)]))[0])
        return value if math.isfinite(value) else math.inf

    result = minimize_scalar(scalar, bounds=(lo_t, hi_t), method="bounded", options={"xatol": 1e-10})
    alpha_ref = 1.0 + math.exp(float(result.x))
    value_ref = float(objective(np.array([alpha_ref]))[0])
    if math.isfinite(value_ref) and value_ref < best_value:
        return value_ref, alpha_ref
    return best_value, best_alpha


# --------------------------------------------------------------------------------------------
# Pure DP: the randomized-response (worst-case) Rényi curve


def randomized_response_rdp(alpha: NDArray[np.float64], epsilon: float) -> NDArray[np.float64]:
    r"""D_alpha of the randomized-response pair with parameter epsilon, for alpha > 1.

    :math:`\varepsilon - \frac{1}{\alpha-1}\ln\frac{1+e^{-\varepsilon}}{1+e^{-(2\alpha-1)\varepsilon}}`
    (Steinke 2024, Thm 4), evaluated as ``log1p`` of
    :math:`e^{-\varepsilon}(1 - e^{-2(\alpha-1)\varepsilon})/(1 + e^{-(2\alpha-1)\varepsilon})`
    so that it stays accurate as alpha -> 1.
    """
    if epsilon == 0.0:
        return np.zeros_like(alpha)
    with np.errstate(over="ignore", under="ignore"):
        ratio = -math.exp(-epsilon) * np.expm1(-2.0 * (alpha - 1.0) * epsilon)
        ratio = ratio / (1.0 + np.exp(-(2.0 * alpha - 1.0) * epsilon))
        return epsilon - np.log1p(ratio) / (alpha - 1.0)
