r"""The Gaussian privacy profile at high precision, and its inverse to the float.

:math:`\delta_\mu(\varepsilon) = \Phi(a) - e^\varepsilon\Phi(b)`, :math:`a = \mu/2 - \varepsilon/\mu`,
:math:`b = -\mu/2 - \varepsilon/\mu` (Balle & Wang 2018, arXiv 1805.06530v2, Thm 8; Dong, Roth & Su
2019, arXiv 1905.02383v3, Cor 2.13), for the Gaussian shift pair N(0, 1) vs N(μ, 1) and μ-GDP.

Contract: :func:`gaussian_delta_mp` evaluates it in mpmath (no underflow, so both tails are
represented however far out) and raises the working precision until the subtraction has lost at
most what the margin allows: the absolute error of ``A - B`` is about :math:`2^{-p}(A + B)`, so
:math:`p \ge 110 + \log_2((A + B)/\delta)` bits leave a relative error below :math:`2^{-100}`.
Where ``a >= 0`` the difference is taken as :math:`[\Phi(a) - \Phi(b)] - \operatorname{expm1}
(\varepsilon)\Phi(b)`, the first bracket a sum of two non-negative ``erf`` values, which removes
the cancellation at small ε. :func:`gaussian_delta_up` returns the float at or just above it
(within two ulps) and :func:`gaussian_epsilon_up` the smallest float ε whose rounded-up δ meets a
target (within two ulps of the exact inverse, never below it).

Why hand-written: SciPy's ``erfcx``/``log_ndtr`` give ~1e-15 relative per term, and the difference of
two nearly equal tails loses digits at small μ (issue 11: -1.4e-10 relative at μ = 1e-6).
"""

from __future__ import annotations

import math
from typing import Any

from dpkit._math.directed import float_key, from_key
from dpkit._math.precise import PREC, mp, to_float_up

__all__ = ["gaussian_delta_mp", "gaussian_delta_up", "gaussian_epsilon_up", "first_float"]

_MAX_PREC = 40_000


def _phi(ctx: Any, x: Any) -> Any:
    return ctx.erfc(-x / ctx.sqrt(2)) / 2


def _terms(ctx: Any, mu: Any, e: Any) -> tuple[Any, Any]:
    """(A, B) with delta = A - B and A, B >= 0."""
    a = mu / 2 - e / mu
    b = -mu / 2 - e / mu
    if a >= 0:
        s2 = ctx.sqrt(2)
        head = (ctx.erf(a / s2) + ctx.erf(-b / s2)) / 2  # Phi(a) - Phi(b), a sum of non-negatives
        tail = ctx.expm1(e) * _phi(ctx, b)
        if tail <= 0:  # epsilon <= 0: nothing to subtract
            return head - tail, ctx.mpf(0)
        return head, tail
    return _phi(ctx, a), ctx.exp(e) * _phi(ctx, b)


def gaussian_delta_mp(mu: Any, epsilon: Any) -> tuple[Any, bool]:
    """(delta, certified) for the Gaussian pair at shift ``mu`` (> 0, mpf or float) and ``epsilon``.

    ``certified`` is False only if the two terms still agreed at 40000 bits; the value returned is
    then the first term, an upper bound.
    """
    ctx = mp()
    prec = PREC
    while True:
        with ctx.workprec(prec):
            m, e = ctx.mpf(mu), ctx.mpf(epsilon)
            big, small = _terms(ctx, m, e)
            delta = big - small
            if delta > 0:
                lost = float(ctx.log((big + small) / delta, 2))
                if lost <= prec - 110:
                    return +delta, True
                need = int(110 + lost + 32)
            else:
                need = 2 * prec
        if need > _MAX_PREC:
            return +big, False
        prec = max(need, prec + 64)


def gaussian_delta_up(mu: Any, epsilon: float) -> float:
    """delta_mu(epsilon) rounded up to the float at or above it (0 shift: ``max(0, 1 - e^eps)``)."""
    ctx = mp()
    if ctx.mpf(mu) == 0:
        return 0.0 if epsilon >= 0 else to_float_up(-ctx.expm1(ctx.mpf(epsilon)))
    value, _ = gaussian_delta_mp(mu, epsilon)
    return min(1.0, to_float_up(value))


def first_float(ok: Any, guess: float, lower: float = -math.inf, upper: float = math.inf) -> float:
    """The smallest float x in [lower, upper] with ok(x), for ok monotone (False, then True).

    Gallops from ``guess`` in steps of 1, 2, 4, ... floats to bracket the switch, then bisects the
    integer keys of the floats. Returns ``upper`` if nothing below it passes (ok(upper) is assumed).
    """
    lo_key, hi_key = float_key(lower), float_key(upper)
    g = min(max(float_key(guess), lo_key), hi_key)
    step = 1
    if ok(from_key(g)):
        hi = g
        lo = g - step
        while lo > lo_key and ok(from_key(lo)):
            hi, step = lo, step * 2
            lo = max(hi - step, lo_key)
        if lo <= lo_key and ok(from_key(lo_key)):
            return from_key(lo_key)
    else:
        lo = g
        hi = g + step
        while hi < hi_key and not ok(from_key(hi)):
            lo, step = hi, step * 2
            hi = min(lo + step, hi_key)
        if hi >= hi_key:
            hi = hi_key
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(from_key(mid)):
            hi = mid
        else:
            lo = mid
    return from_key(hi)


def gaussian_epsilon_up(mu: Any, delta: float, guess: float) -> float:
    """The smallest float epsilon with ``gaussian_delta_up(mu, epsilon) <= delta`` (delta in (0, 1)).

    ``guess`` is a float estimate of the root (a few ulps off costs a few more evaluations).
    """
    return first_float(lambda e: gaussian_delta_up(mu, e) <= delta, guess)
