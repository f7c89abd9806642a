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

from dpkit._math.bisection import bisect_bracket
from dpkit._math.directed import bump_up_array
from dpkit._math.precise import mp, to_float_up

_SQRT2 = math.sqrt(2.0)
_EPS_MACHINE = float(np.finfo(np.float64).eps)

# The Rényi-order grid used for callable curves: alpha - 1 log-spaced over [1e-8, 1e40], 12 orders a
# decade. Any order gives a valid bound; the grid only has to put one order near the optimum, which
# for alpha * rho curves sits near 1 + sqrt(ln(1/delta) / rho) for (epsilon, delta) and near
# (epsilon + rho) / (2 rho) for delta(epsilon): 1e16 for rho = 5e-30, epsilon = 1e-13 (issue 11: a
# grid ending at 1e10 reported 3.7e-11 where the bound is 2.6e-234). zCDP callers also pass the
# analytic order as a guess.
_ALPHA_GRID = 1.0 + np.logspace(-8.0, 40.0, 577)

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
    below a point where ``ok`` was not verified (the upper side of :func:`bisect_bracket`, to
    1e-13 relative above 1 and 1e-13 absolute below)."""
    b_lo, b_hi = bisect_bracket(ok, lo, hi, rtol=1e-13, atol=1e-13, max_iter=_BISECTION_STEPS)
    return b_hi, b_hi - b_lo


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
    guess: float | None = None,
) -> tuple[float, float]:
    """Return ``(min value, order)`` of ``objective`` over Rényi orders.

    With finite ``orders`` the minimum is exact over them. Otherwise the default grid (plus
    ``guess``, an order where the optimum is expected) is scanned and the best point refined by a
    bounded scalar search in ln(alpha - 1) between its neighbours; the refined order is kept only if
    its (exactly evaluated) value is smaller. Every value considered is itself a valid bound, so the
    result is valid whatever the optimiser does.
    """
    grid = _ALPHA_GRID if orders is None else orders
    if orders is None and guess is not None and math.isfinite(guess) and guess > 1.0:
        grid = np.sort(np.concatenate([grid, [guess]]))
    with np.errstate(over="ignore", invalid="ignore"):
        values = objective(grid)
    finite = np.isfinite(values)
    if not np.any(finite):
        return math.inf, math.nan
    i = int(np.argmin(np.where(finite, values, np.inf)))
    best_value, best_alpha = float(values[i]), float(grid[i])
    if orders is not None:
        return best_value, best_alpha
    with np.errstate(divide="ignore"):
        t = np.log(grid - 1.0)
    lo_t, hi_t = float(t[max(i - 1, 0)]), float(t[min(i + 1, len(t) - 1)])
    if not (math.isfinite(lo_t) and math.isfinite(hi_t) and lo_t < hi_t):
        return best_value, best_alpha

    def scalar(ti: float) -> float:
        with np.errstate(over="ignore", invalid="ignore"):
            value = float(objective(np.array([1.0 + math.exp(ti)]))[0])
        return value if math.isfinite(value) else math.inf

    result = minimize_scalar(scalar, bounds=(lo_t, hi_t), method="bounded", options={"xatol": 1e-10})
    alpha_ref = 1.0 + math.exp(float(result.x))
    with np.errstate(over="ignore", invalid="ignore"):
        value_ref = float(objective(np.array([alpha_ref]))[0])
    if math.isfinite(value_ref) and value_ref < best_value:
        return value_ref, alpha_ref
    return best_value, best_alpha


def cks_epsilon_up(alpha: float, rdp: float, delta: float, method: str) -> float:
    r"""The epsilon one order gives, at 160 bits and rounded up (CKS Prop 12 or Mironov Prop 3).

    ``"cks"``: :math:`\varepsilon_\alpha + \ln(1 - 1/\alpha) - (\ln\delta + \ln\alpha)/(\alpha-1)`;
    ``"mironov"``: :math:`\varepsilon_\alpha - \ln\delta/(\alpha-1)`. The float search only picks
    alpha; the reported number is this recomputation, so it is the bound at that order, rounded up.
    """
    ctx = mp()
    a, r, d = ctx.mpf(alpha), ctx.mpf(rdp), ctx.mpf(delta)
    if method == "cks":
        value = r + ctx.log1p(-1 / a) - (ctx.log(d) + ctx.log(a)) / (a - 1)
    else:
        value = r - ctx.log(d) / (a - 1)
    return to_float_up(value)


def cks_delta_up(alpha: float, rdp: float, epsilon: float, method: str) -> float:
    r"""min(1, the delta one order gives at ``epsilon``), at 160 bits and rounded up.

    ``"cks"``: :math:`e^{(\alpha-1)(\varepsilon_\alpha-\varepsilon)}(1-1/\alpha)^{\alpha-1}/\alpha`;
    ``"mironov"``: :math:`e^{(\alpha-1)(\varepsilon_\alpha-\varepsilon)}`.
    """
    ctx = mp()
    a, r, e = ctx.mpf(alpha), ctx.mpf(rdp), ctx.mpf(epsilon)
    log_delta = (a - 1) * (r - e)
    if method == "cks":
        log_delta += (a - 1) * ctx.log1p(-1 / a) - ctx.log(a)
    if log_delta >= 0:
        return 1.0
    return to_float_up(ctx.exp(log_delta))


# --------------------------------------------------------------------------------------------
# Pure DP: the randomized-response (worst-case) Rényi curve


def _expm1mx(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """e^x - 1 - x elementwise without cancellation (Taylor series for |x| < 1/2)."""
    out = np.empty_like(x)
    big = np.abs(x) >= 0.5
    with np.errstate(over="ignore"):
        out[big] = np.expm1(x[big]) - x[big]
    small = x[~big]
    term = small * small / 2.0
    total = np.zeros_like(small)
    for k in range(3, 40):  # |x| < 1/2: 37 terms leave < 2^-60 relative
        total += term
        term = term * small / k
    out[~big] = total
    return out


def randomized_response_rdp(alpha: NDArray[np.float64], epsilon: float) -> NDArray[np.float64]:
    r"""D_alpha of the randomized-response pair with parameter epsilon, for alpha > 1, rounded up.

    :math:`\frac{1}{\alpha-1}\ln(p\,e^{s} + q\,e^{-s})` with :math:`s = (\alpha-1)\varepsilon`,
    :math:`p = e^\varepsilon/(1+e^\varepsilon)`, :math:`q = 1 - p` (Steinke 2024, Thm 4), written
    without cancellation: for s <= 1 as ``log1p(M)/(alpha - 1)`` with
    :math:`M = p\,f(s) + q\,f(-s) + \tanh(\varepsilon/2)\,s`, :math:`f(x) = e^x - 1 - x \ge 0`, a sum of
    non-negative terms; for s > 1 as :math:`\varepsilon - [\ln(1+e^{-\varepsilon}) -
    \ln(1+e^{-\varepsilon-2s})]/(\alpha-1)`. Each path rounds a few times; the result is moved up
    by 64 relative ulps and one float (checked against 50-digit mpmath in tests/numerics).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if epsilon == 0.0:
        return np.zeros_like(alpha)
    out = np.empty_like(alpha)
    am1 = alpha - 1.0
    s = am1 * epsilon
    low = s <= 1.0
    p = 1.0 / (1.0 + math.exp(-epsilon))
    q = 1.0 / (1.0 + math.exp(epsilon))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        sl = s[low]
        m = p * _expm1mx(sl) + q * _expm1mx(-sl) + math.tanh(epsilon / 2.0) * sl
        out[low] = np.log1p(m) / am1[low]
        sh = s[~low]
        gap = math.log1p(math.exp(-epsilon)) - np.log1p(np.exp(-epsilon - 2.0 * sh))
        out[~low] = epsilon - gap / am1[~low]
    bound: NDArray[np.float64] = np.minimum(bump_up_array(out, 64.0), epsilon)  # D_alpha <= D_inf = epsilon
    return bound
