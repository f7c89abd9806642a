r"""Closed forms for same-family pairs, evaluated at 160 bits and rounded towards more privacy loss.

Sources (each re-derived and checked against mpmath at 50 digits in ``tests/divergences`` and
``tests/numerics``):

* Laplace shift Lap(0,b) vs Lap(D,b), t = D/b: KL = t + e^{-t} - 1; Rényi (Mironov 2017,
  arXiv 1702.07476v3, Table II); TV = 1 - e^{-t/2}; delta(eps) = 1 - e^{(eps - t)/2} for
  |eps| <= t (its value for eps < 0 follows from E_gamma(P||Q) = 1 - gamma + gamma E_{1/gamma}(Q||P)).
* Gaussian shift N(0,s^2) vs N(D,s^2), mu = D/s: KL = mu^2/2, D_alpha = alpha mu^2/2,
  TV = 2 Phi(mu/2) - 1, delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)
  (Balle & Wang 2018, arXiv 1805.06530v2, Thm 8), see :mod:`dpkit._math.gaussian`.
* Gaussians with different variances: KL and Rényi (Gil, Alajaji, Linder 2013, Information
  Sciences 249, Table 2); the max divergence from the maximum of the quadratic log-ratio.
* Discrete Laplace shift (integer D, scale t): PLD with D+1 atoms; KL, Rényi, TV and delta(eps)
  in closed form (Canonne, Kamath, Steinke 2020, arXiv 2004.00010v5 for the family).
* Discrete Gaussian shift: KL = D^2/(2 s^2); D_alpha = alpha D^2/(2 s^2) + ln(theta((1-alpha)D)/theta(0))/(alpha-1);
  delta(eps) summed exactly in log space (CKS 2020, Thm 7 for the profile).

Contract (issue 11): a value labelled ``"exact"`` is within two ulps of the exact divergence of the
pair *as given* (the shift ``Q.loc - P.loc`` and the ratio to the scale are formed exactly, in
fractions) and never below it. Rational closed forms (t, mu^2/2, alpha mu^2/2, D^2/(2 s^2)) are
exact fractions rounded up; the others are evaluated in mpmath at 160 bits in a cancellation-free
form, with the precision raised by the bits a remaining subtraction cancels
(:func:`dpkit._math.precise.evaluate`), and rounded up with a 2^-100 margin. The one float sum
that stays (the discrete Gaussian profile, up to 10^7 atoms) is labelled ``"upper"`` and moved up by
its rounding-error bound. ``t``, ``mu`` and ``shift`` stay available as floats (rounded up) for the
PLD and subsampling code.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from dpkit._math import Estimate
from dpkit._math.directed import up
from dpkit._math.gaussian import first_float, gaussian_delta_up
from dpkit._math.precise import evaluate, exact_mpf, mp, to_float_up
from dpkit._math.result import Kind
from dpkit.divergences import _finite
from dpkit.divergences._evaluator import Evaluator

_SQRT2 = math.sqrt(2.0)
_U = 2.0**-53


def _exact(value: float, method: str) -> Estimate:
    return Estimate(value, kind="exact", method=method)


def _fraction(x: float | Fraction) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(float(x))


def _up_mp(fn: Any, method: str, *, floor: float | None = None) -> Estimate:
    """Evaluate ``fn(ctx) -> (value, scale)`` (see ``evaluate``) and round up; ``floor`` clamps below."""
    value, certified = evaluate(fn)
    out = to_float_up(value)
    if floor is not None:
        out = max(out, floor)
    if certified:
        return Estimate(out, kind="exact", method=method + " (160 bits)")
    # unresolved at 40000 bits: only the bound computed survives, and it is said to be one
    return Estimate(out, kind="upper", error=abs(out), method=method + " (cancellation unresolved)")


class LaplaceShift(Evaluator):
    """Lap(m1, b) vs Lap(m2, b): everything in closed form, in t = |m1 - m2| / b (exact rational)."""

    name = "a Laplace shift pair"
    method = "closed form: Laplace shift"

    def __init__(self, shift: float | Fraction, scale: float) -> None:
        self._shift = abs(_fraction(shift))
        self._t = self._shift / _fraction(scale)
        self.shift = up(self._shift)
        self.t = up(self._t)

    def _tm(self, ctx: Any) -> Any:
        return exact_mpf(ctx, self._t)

    def kl(self) -> Estimate:
        if self._t == 0:
            return _exact(0.0, self.method)

        def f(ctx: Any) -> tuple[Any, Any]:
            t = self._tm(ctx)
            return t + ctx.expm1(-t), t  # t + e^{-t} - 1: the sum cancels to ~t^2/2 at small t

        return _up_mp(f, self.method, floor=0.0)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        if self._t == 0:
            return _exact(0.0, self.method)
        if alpha == 0.5:

            def half(ctx: Any) -> tuple[Any, Any]:
                t = self._tm(ctx)
                return t - 2 * ctx.log1p(t / 2), t  # -2 ln[e^{-t/2}(1 + t/2)]

            return _up_mp(half, self.method, floor=0.0)

        def general(ctx: Any) -> tuple[Any, Any]:
            # A = alpha/(2 alpha - 1) e^{(alpha-1) t} + (alpha - 1)/(2 alpha - 1) e^{-alpha t}; D = ln(A)/(alpha - 1)
            t, a = self._tm(ctx), ctx.mpf(alpha)
            w1, w2 = a / (2 * a - 1), (a - 1) / (2 * a - 1)
            x1, x2 = w1 * ctx.exp((a - 1) * t), w2 * ctx.exp(-a * t)
            return _log_of_sum(ctx, x1 + x2, abs(x1) + abs(x2), a - 1)

        return _up_mp(general, self.method, floor=0.0)

    def max_divergence(self) -> Estimate:
        return _exact(self.t, self.method)

    def hockey_stick(self, epsilon: float) -> Estimate:
        e = Fraction(epsilon)
        t = self._t
        if e >= t:
            return _exact(0.0, self.method)
        ctx = mp()
        if e >= -t:  # 1 - e^{(eps - t)/2}, eps - t formed exactly
            value = -ctx.expm1(exact_mpf(ctx, (e - t) / 2))
        else:
            value = -ctx.expm1(ctx.mpf(epsilon))
        return Estimate(min(1.0, to_float_up(value)), kind="exact", method=self.method + " (160 bits)")

    def total_variation(self) -> Estimate:
        return self.hockey_stick(0.0)

    def approx_max_divergence(self, delta: float) -> Estimate:
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        ctx = mp()
        l1 = ctx.log1p(-ctx.mpf(delta))
        # max(ln(1 - delta), t + 2 ln(1 - delta)): the second cancels as delta nears TV
        if exact_mpf(ctx, self._t) + l1 <= 0:
            return Estimate(to_float_up(l1), kind="exact", method=self.method + " (160 bits)")

        def f(c: Any) -> tuple[Any, Any]:
            t, lg = exact_mpf(c, self._t), c.log1p(-c.mpf(delta))
            return t + 2 * lg, t - 2 * lg

        return _up_mp(f, self.method)

    def wasserstein(self, order: float) -> Estimate:
        return _exact(self.shift, "exact: W_p of a location shift is the shift")


class GaussianShift(Evaluator):
    """N(m1, s^2) vs N(m2, s^2), in mu = |m1 - m2| / s (exact rational)."""

    name = "a Gaussian shift pair"
    method = "closed form: Gaussian shift"

    def __init__(self, shift: float | Fraction, sigma: float) -> None:
        self._shift = abs(_fraction(shift))
        self._mu = self._shift / _fraction(sigma)
        self.shift = up(self._shift)
        self.mu = up(self._mu)

    def kl(self) -> Estimate:
        return _exact(up(self._mu**2 / 2), self.method)

    def renyi(self, alpha: float) -> Estimate:
        if math.isinf(alpha):
            return self.max_divergence()
        return _exact(up(Fraction(alpha) * self._mu**2 / 2), self.method)

    def max_divergence(self) -> Estimate:
        return _exact(math.inf if self._mu > 0 else 0.0, self.method)

    def total_variation(self) -> Estimate:
        ctx = mp()
        value = ctx.erf(exact_mpf(ctx, self._mu) / (2 * ctx.sqrt(2)))
        return Estimate(to_float_up(value), kind="exact", method=self.method + " (160 bits)")

    def hockey_stick(self, epsilon: float) -> Estimate:
        if self._mu == 0:
            return _exact(max(0.0, to_float_up(-mp().expm1(epsilon))) if epsilon < 0 else 0.0, self.method)
        value = gaussian_delta_up(exact_mpf(mp(), self._mu), epsilon)
        return _exact(value, self.method + " (Balle-Wang, 160 bits)")

    def wasserstein(self, order: float) -> Estimate:
        return _exact(self.shift, "exact: W_p of a location shift is the shift")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """Invert the Balle-Wang profile: float Newton steps for a guess, then the first float whose
        160-bit delta (rounded up) meets ``delta``: within two ulps of the exact inverse."""
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        if self._mu == 0:
            return _exact(to_float_up(mp().log1p(-mp().mpf(delta))), self.method)
        if delta == 0.0:
            return _exact(math.inf, self.method)
        mu = self.mu
        mu_exact = exact_mpf(mp(), self._mu)
        guess = _gaussian_newton(mu, delta)
        value = first_float(lambda e: gaussian_delta_up(mu_exact, e) <= delta, guess)
        return Estimate(value, kind="exact", method=self.method + " (inverse of the Balle-Wang profile, 160 bits)")


def _gaussian_newton(mu: float, delta: float) -> float:
    """A float estimate of the root of delta_mu(eps) = delta (safeguarded Newton on the float profile)."""

    def f(e: float) -> float:
        return _gaussian_delta_float(mu, e) - delta

    # bracket: delta(eps) <= Phi(mu/2 - eps/mu), so eps_hi = mu^2/2 - mu Phi^{-1}(delta) has f <= 0
    hi = mu * mu / 2.0 - mu * float(special.ndtri(delta))
    lo = math.log1p(-delta) - 1e-9
    for _ in range(2000):
        if f(hi) <= 0:
            break
        hi = 2.0 * hi + 1.0
    e = hi
    for _ in range(100):
        fe = f(e)
        if fe > 0:
            lo = e
        else:
            hi = e
        slope = -math.exp(e + float(special.log_ndtr(-mu / 2.0 - e / mu)))
        step = fe / slope if slope < 0 else 0.0
        nxt = e - step
        if not (lo < nxt < hi):
            nxt = 0.5 * (lo + hi)
        converged = abs(nxt - e) <= 1e-15 * max(1.0, abs(e)) or hi - lo <= 4e-16 * max(1.0, abs(hi))
        e = nxt
        if converged:
            break
    return e


def _gaussian_delta_float(mu: float, epsilon: float) -> float:
    """The Balle-Wang profile in floats (a search aid only; reported values come from 160 bits)."""
    if mu == 0.0:
        return max(0.0, -math.expm1(epsilon))
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    if a < 0.0:
        diff = float(special.erfcx(-a / _SQRT2) - special.erfcx(-b / _SQRT2))
        if diff <= 0.0:
            return 0.0
        return max(0.0, math.exp(-0.5 * a * a + math.log(0.5 * diff)))
    la = float(special.log_ndtr(a))
    lb = epsilon + float(special.log_ndtr(b))
    if lb >= la:
        return 0.0
    return math.exp(la) * -math.expm1(lb - la)


def gaussian_delta(mu: float, epsilon: float) -> float:
    r"""delta(eps) of the Gaussian pair with mu = D/sigma (Balle & Wang 2018, Thm 8), rounded up.

    Evaluated at 160 bits (:func:`dpkit._math.gaussian.gaussian_delta_up`): the float at or just
    above the exact value, never below it, so a calibration that checks ``gaussian_delta(...) <=
    delta`` never accepts too little noise.
    """
    if mu == 0.0:
        return 0.0 if epsilon >= 0 else to_float_up(-mp().expm1(mp().mpf(epsilon)))
    return gaussian_delta_up(mu, epsilon)


class GaussianGeneral(Evaluator):
    """N(m1, s1^2) vs N(m2, s2^2) with s1 != s2: KL, Rényi and max divergence in closed form."""

    name = "two Gaussians with different variances"
    method = "closed form: Gaussians (Gil-Alajaji-Linder 2013)"

    def __init__(self, m1: float, s1: float, m2: float, s2: float) -> None:
        self.m1, self.s1, self.m2, self.s2 = m1, s1, m2, s2

    def kl(self) -> Estimate:
        def f(ctx: Any) -> tuple[Any, Any]:
            # ln(s2/s1) + (s1^2 + (m1-m2)^2)/(2 s2^2) - 1/2 = (d^2 + r^2 - 1 - 2 ln r)/2
            r = ctx.mpf(self.s1) / self.s2
            d = (ctx.mpf(self.m1) - self.m2) / self.s2
            lr = ctx.log(r)
            return (d * d + (r * r - 1) - 2 * lr) / 2, (d * d + r * r + 1 + 2 * abs(lr)) / 2

        return _up_mp(f, self.method, floor=0.0)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        var_a = Fraction(alpha) * Fraction(self.s2) ** 2 + (1 - Fraction(alpha)) * Fraction(self.s1) ** 2
        if var_a <= 0:
            return _exact(math.inf, self.method)

        def f(ctx: Any) -> tuple[Any, Any]:
            a = ctx.mpf(alpha)
            va = exact_mpf(ctx, var_a)
            d2 = (ctx.mpf(self.m1) - self.m2) ** 2
            # ln[var_a / (s1^{2(1-a)} s2^{2a})] = log1p(x): x cancels as alpha -> 1
            ratio = va / (ctx.mpf(self.s1) ** (2 * (1 - a)) * ctx.mpf(self.s2) ** (2 * a))
            x = ratio - 1
            first = a * d2 / (2 * va)
            second = -ctx.log1p(x) / (2 * (a - 1))
            value = first + second
            lost_x = (ratio + 1) / abs(x) if x != 0 else ctx.mpf(1)
            scale = max(abs(first) + abs(second), abs(value) * lost_x)
            return value, scale

        return _up_mp(f, self.method, floor=0.0)

    def max_divergence(self) -> Estimate:
        if self.s1 > self.s2:
            return _exact(math.inf, self.method)
        # L(x) = ln(s2/s1) - (x-m1)^2/(2 s1^2) + (x-m2)^2/(2 s2^2) is concave when s1 < s2;
        # closed form of the maximum: ln(s2/s1) + (m1 - m2)^2 / (2 (s2^2 - s1^2)), two terms >= 0
        ctx = mp()
        gap = exact_mpf(ctx, Fraction(self.s2) ** 2 - Fraction(self.s1) ** 2)
        value = ctx.log(ctx.mpf(self.s2) / self.s1) + (ctx.mpf(self.m1) - self.m2) ** 2 / (2 * gap)
        return Estimate(to_float_up(value), kind="exact", method=self.method + " (160 bits)")


class LaplaceScales(Evaluator):
    """Lap(m1, b1) vs Lap(m2, b2), b1 != b2: KL and max divergence in closed form."""

    name = "two Laplace laws with different scales"
    method = "closed form: Laplace laws"

    def __init__(self, m1: float, b1: float, m2: float, b2: float) -> None:
        self.m1, self.b1, self.m2, self.b2 = m1, b1, m2, b2

    def kl(self) -> Estimate:
        def f(ctx: Any) -> tuple[Any, Any]:
            # E_P[ln p - ln q] = ln(b2/b1) - 1 + E|X - m2|/b2, E|X - m2| = d + b1 e^{-d/b1}, d = |m1 - m2|
            d = abs(ctx.mpf(self.m1) - self.m2)
            lr = ctx.log(ctx.mpf(self.b2) / self.b1)
            mean = (d + self.b1 * ctx.exp(-d / self.b1)) / self.b2
            return lr - 1 + mean, abs(lr) + 1 + mean

        return _up_mp(f, self.method, floor=0.0)

    def max_divergence(self) -> Estimate:
        if self.b1 > self.b2:
            return _exact(math.inf, self.method)
        # L(x) = ln(b2/b1) - |x-m1|/b1 + |x-m2|/b2 is maximal at x = m1: two terms >= 0
        ctx = mp()
        value = ctx.log(ctx.mpf(self.b2) / self.b1) + abs(ctx.mpf(self.m1) - self.m2) / self.b2
        return Estimate(to_float_up(value), kind="exact", method=self.method + " (160 bits)")


class DiscreteLaplaceShift(Evaluator):
    """DLap(m1, t) vs DLap(m2, t) with integer shift D: a finite privacy loss with D + 1 atoms."""

    name = "a discrete Laplace shift pair"
    method = "closed form: discrete Laplace shift"

    def __init__(self, shift: int, scale: float) -> None:
        self.d = abs(int(shift))
        self.t = scale
        self._a = Fraction(self.d) / Fraction(scale)
        self.a = up(self._a)
        self.log_r = -1.0 / scale
        self.log1p_r = math.log1p(math.exp(self.log_r))

    def atoms(self) -> _finite.FiniteArrays:
        """The privacy-loss atoms as a finite pair (float masses under P and Q), for PLD accounting."""
        d, t = self.d, self.t
        # atoms: k <= 0 (loss a, mass 1/(1+r)), 0 < k < D (loss (D-2k)/t), k >= D (loss -a, mass r^D/(1+r))
        mid = np.arange(1, d, dtype=np.float64)
        logp = np.concatenate([[-self.log1p_r], _log_tanh_half(t) + mid * self.log_r, [d * self.log_r - self.log1p_r]])
        loss = np.concatenate([[d / t], (d - 2.0 * mid) / t, [-d / t]])
        p = np.exp(logp)
        q = np.exp(logp - loss)
        return _finite.FiniteArrays(p, q)

    def _r(self, ctx: Any) -> Any:
        return ctx.exp(-1 / ctx.mpf(self.t))

    def kl(self) -> Estimate:
        if self.d == 0:
            return _exact(0.0, self.method)

        def f(ctx: Any) -> tuple[Any, Any]:
            # (1/t) [D - 2 r (1 - r^D)/(1 - r^2)]: the bracket cancels when t >> D
            r, t = self._r(ctx), ctx.mpf(self.t)
            frac = 2 * r * -ctx.expm1(-self.d / t) / -ctx.expm1(-2 / t)
            return (self.d - frac) / t, (self.d + frac) / t

        return _up_mp(f, self.method, floor=0.0)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        if self.d == 0:
            return _exact(0.0, self.method)
        d = self.d

        def f(ctx: Any) -> tuple[Any, Any]:
            # sum_k p_k^alpha q_k^{1-alpha} = S: two end atoms plus a geometric sum over the D - 1
            # middle atoms (all terms > 0); D_alpha = ln(S)/(alpha - 1)
            a, t = ctx.mpf(alpha), ctx.mpf(self.t)
            s = a - 1
            big_a = d / t
            log1p_r = ctx.log1p(ctx.exp(-1 / t))
            terms = [ctx.exp(s * big_a - log1p_r), ctx.exp(-a * big_a - log1p_r)]
            if d > 1:
                c = -(2 * a - 1) / t  # ln u
                n = d - 1
                geo = n if c == 0 else ctx.exp(c) * ctx.expm1(n * c) / ctx.expm1(c)  # sum_{j=1}^{n} u^j
                tanh_half = -ctx.expm1(-1 / t) / (1 + ctx.exp(-1 / t))
                terms.append(tanh_half * ctx.exp(s * big_a) * geo)
            total = ctx.fsum(terms)
            return _log_of_sum(ctx, total, total, s)

        return _up_mp(f, self.method, floor=0.0)

    def max_divergence(self) -> Estimate:
        return _exact(self.a, self.method)

    def _hockey_mp(self, epsilon: float | Fraction) -> Any:
        """delta(eps) at 160 bits (a sum of non-negative terms), for 0 <= eps < a (float or exact)."""
        ctx = mp()
        d, t = self.d, self.t
        e = Fraction(epsilon)
        k_star = math.ceil((d - e * Fraction(t)) / 2) - 1  # exact: atoms k <= k* have loss > eps
        r = self._r(ctx)
        tm = ctx.mpf(t)
        if k_star < 0:
            # only k <= k* = -1 contributes: r (1 - e^{eps - a}) / (1 + r)
            return r * -ctx.expm1(exact_mpf(ctx, e - self._a)) / (1 + r)
        # [ (1 - r^{k*+1}) + r (1 - e^{eps - (D - k* - 1)/t}) ] / (1 + r)
        first = -ctx.expm1(-(k_star + 1) / tm)
        second = r * -ctx.expm1(exact_mpf(ctx, e) - (d - k_star - 1) / tm)
        return (first + second) / (1 + r)

    def hockey_stick(self, epsilon: float) -> Estimate:
        method = self.method + " (160 bits)"
        if epsilon < 0:
            # E_gamma(P||Q) = 1 - gamma + gamma E_{1/gamma}(Q||P), and the pair is symmetric
            ctx = mp()
            inner = self._hockey_mp(-epsilon) if Fraction(-epsilon) < self._a else ctx.mpf(0)
            value = -ctx.expm1(ctx.mpf(epsilon)) + ctx.exp(ctx.mpf(epsilon)) * inner
            return Estimate(min(1.0, to_float_up(value)), kind="exact", method=method)
        if Fraction(epsilon) >= self._a:
            return _exact(0.0, self.method)
        return Estimate(min(1.0, to_float_up(self._hockey_mp(epsilon))), kind="exact", method=method)

    def wasserstein(self, order: float) -> Estimate:
        return _exact(float(self.d), "exact: W_p of a location shift is the shift")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """Invert the piecewise profile exactly: on each segment delta is linear in e^eps."""
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        if self.d == 0:
            return _exact(to_float_up(mp().log1p(-mp().mpf(delta))), self.method)
        if delta == 0.0:
            return _exact(self.a, self.method)
        if delta >= float(self.hockey_stick(0.0)):
            return super().approx_max_divergence(delta)  # epsilon <= 0: rare, use the generic inverse
        d, t = self.d, self.t
        # segment j (k* = j) covers eps in [(D - 2j - 2)/t, (D - 2j)/t) intersected with [0, a); the start
        # moves left as j grows, so delta(start_j) grows: find the smallest j with delta(start_j) >= delta
        lo_j, hi_j = 0, (d + 1) // 2
        while lo_j < hi_j:
            mid = (lo_j + hi_j) // 2
            start = max(Fraction(0), (d - Fraction(2 * mid + 2)) / Fraction(t))
            if self._hockey_mp(start) >= delta:
                hi_j = mid
            else:
                lo_j = mid + 1
        j = lo_j

        def f(ctx: Any) -> tuple[Any, Any]:
            # on segment j: delta = [(1 - r^{j+1}) + r - e^eps r^{D-j}] / (1 + r)
            tm = ctx.mpf(t)
            r = ctx.exp(-1 / tm)
            head = -ctx.expm1(-(j + 1) / tm) + r
            num = head - ctx.mpf(delta) * (1 + r)
            if num <= 0:
                return ctx.mpf(0), ctx.mpf(0)
            return ctx.log(num) + (d - j) / tm, abs(ctx.log(num)) + (d - j) / tm

        value, certified = evaluate(f)
        out = max(to_float_up(value), 0.0)
        kind: Kind = "exact" if certified else "upper"
        return Estimate(out, kind=kind, method=self.method + " (segment inversion, 160 bits)")


class DiscreteGaussianShift(Evaluator):
    """N_Z(m1, s^2) vs N_Z(m2, s^2) with integer shift D."""

    name = "a discrete Gaussian shift pair"
    method = "closed form: discrete Gaussian shift"

    def __init__(self, shift: int, sigma: float, log_normalizer: float) -> None:
        self.d = abs(int(shift))
        self.sigma = sigma
        self.log_norm = log_normalizer

    def kl(self) -> Estimate:
        return _exact(up(Fraction(self.d**2) / (2 * Fraction(self.sigma) ** 2)), self.method)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        if self.d == 0:
            return _exact(0.0, self.method)
        shift = (1 - Fraction(alpha)) * self.d
        if shift.denominator == 1:  # theta is 1-periodic: the ratio is exactly 1
            return _exact(up(Fraction(alpha) * self.d**2 / (2 * Fraction(self.sigma) ** 2)), self.method)
        sigma, d = self.sigma, self.d

        def f(ctx: Any) -> tuple[Any, Any]:
            a = ctx.mpf(alpha)
            first = a * d * d / (2 * ctx.mpf(sigma) ** 2)
            second = _log_theta_ratio_mp(ctx, sigma, exact_mpf(ctx, shift - math.floor(shift))) / (a - 1)
            return first + second, abs(first) + abs(second)

        value, certified = evaluate(f)
        out = max(to_float_up(value), 0.0)
        kind: Kind = "exact" if certified else "upper"
        return Estimate(out, kind=kind, method=self.method + " (theta-function form, 160 bits)")

    def max_divergence(self) -> Estimate:
        return _exact(math.inf if self.d > 0 else 0.0, self.method)

    def _table(self) -> _DGTable | None:
        if 2 * (int(math.ceil(39.0 * self.sigma)) + 2 + self.d) > 20_000_000:
            return None
        return _dg_table(self.d, self.sigma, self.log_norm)

    def hockey_stick(self, epsilon: float) -> Estimate:
        r"""Sum of p - e^eps q over the atoms with loss > eps (all integers within 39 sigma), rounded up.

        A float sum of up to 10^7 terms: each term is moved by at most a few ulps of its magnitude
        and by the error of its loss (:math:`|\Delta L| \le 8u(|L| + |\varepsilon| + |\ln p|)`), the
        pairwise sum errs by at most (128 + log2 n) u of the total, and the mass beyond 39 sigma is
        below 1e-300; the value returned adds these bounds (kind ``"upper"``, ``error`` = the bound).

        Only the atoms that can have loss > eps are computed (the loss decreases in k: a prefix), and of
        those only the ones above -R, R = sigma sqrt(2 (184 + ln sigma^2)): the mass below -R is at most
        T = 2 e^{-R^2/(2 sigma^2)} / (1 - e^{-R/sigma^2}) (a geometric bound on the Gaussian tail; the
        normaliser is >= 1), about 1e-80, and T is added to the bound.  Where the value is below 1e-60
        (so T could matter) the same prefix from -39 sigma is summed, and where the table of this pair is
        already built (an epsilon search at one sigma) the table is.  A calibration that bisects sigma sums
        each new sigma once and builds no table (no prefix sums, nothing cached): this is what makes it fast.
        """
        if self.d == 0:
            return _exact(max(0.0, to_float_up(-mp().expm1(mp().mpf(epsilon)))) if epsilon < 0 else 0.0,
                          self.method)
        sigma, d = self.sigma, self.d
        reach = int(math.ceil(39.0 * sigma)) + 2 + d
        if 2 * reach > 20_000_000:
            from dpkit.errors import UnsupportedError

            raise UnsupportedError(f"sigma={sigma} is too large for the exact discrete-Gaussian sum.")
        ends = np.array([-reach, reach], dtype=np.float64)
        max_loss = float(np.max(np.abs((d**2 - 2.0 * d * ends) / (2.0 * sigma**2))))  # the table's largest |loss|
        slack_max = 8.0 * _U * (abs(epsilon) + max_loss)
        if (d, sigma, self.log_norm) not in _DG_TABLES:  # (an epsilon search at one sigma: the table is built)
            # the last atom that can have loss > eps - slack (loss decreases in k), two more for its rounding
            cut = min(reach, int(math.ceil(d / 2.0 - sigma**2 * (epsilon - slack_max) / d)) + 2)
            short = int(math.ceil(sigma * math.sqrt(2.0 * (184.0 + 2.0 * math.log(max(sigma, 1.0))))))
            for start in ((short, reach) if short < reach else (reach,)):
                if cut < -start:  # no atom in [-start, reach] can have loss > eps
                    continue
                k = np.arange(-start, cut + 1, dtype=np.float64)
                loss = (d**2 - 2.0 * d * k) / (2.0 * sigma**2)
                j = int(np.searchsorted(-loss, -(epsilon - slack_max), side="left"))
                if j == k.size and cut < reach:  # the float cut fell short: sum the whole table instead
                    break
                logp = -(k[:j] * k[:j]) / (2.0 * sigma**2) - self.log_norm
                j0 = int(np.searchsorted(-loss[:j], -epsilon, side="left"))
                tail = (2.0 * math.exp(-(start * start) / (2.0 * sigma**2)) / -math.expm1(-start / sigma**2)
                        if start < reach else 0.0)  # below -39 sigma: less than e^{-760}, not added (as always)
                out = self._hockey_sum(epsilon, loss[:j], logp, j0, tail)
                if start == reach or float(out) >= 1e-60:
                    return out
            else:  # (no atom within 39 sigma has loss > eps: the mass beyond is below e^{-760})
                return Estimate(5e-324, kind="upper", error=5e-324, method=self.method + " (tail beyond the table)")
        t = _dg_table(d, sigma, self.log_norm)
        j = int(np.searchsorted(t.neg_loss, -(epsilon - slack_max), side="left"))
        j0 = int(np.searchsorted(t.neg_loss, -epsilon, side="left"))
        return self._hockey_sum(epsilon, t.loss[:j], t.logp[:j], j0, 0.0, t.p[:j])

    def _hockey_sum(self, epsilon: float, loss_j: Any, logp_j: Any, j0: int, tail: float,
                    p_j: Any = None) -> Estimate:
        """The rounded-up sum of p (1 - e^{eps - L}) over the atoms ``[0, j0)`` (loss > eps), given the atoms
        ``[0, j)`` that may have loss > eps once the loss's rounding is allowed for, plus ``tail`` (an upper
        bound on the mass of the atoms left out below them); ``p_j``: e^{logp_j} if already computed."""
        loss = loss_j[:j0]
        with np.errstate(under="ignore"):
            p_j = np.exp(logp_j) if p_j is None else p_j
            p = p_j[:j0]
            h = -np.expm1(epsilon - loss)
            terms = p * h
            value = float(terms.sum())
            # each term: ln p errs by 8u(|ln p| + 2|ln theta| + 1), the product and expm1 by a few u;
            # a loss error dL (<= 8u(|L| + |eps|)) moves p (1 - e^{eps - L}) by at most p e^{eps - L} dL
            rest = p - terms  # p e^{eps - L}
            bound = 8.0 * _U * (float(np.dot(terms, np.abs(logp_j[:j0]))) + (2.0 * abs(self.log_norm) + 2.0) * value)
            bound += 8.0 * _U * 1.01 * (float(np.dot(rest, np.abs(loss))) + abs(epsilon) * float(rest.sum()))
            if loss_j.size > j0:  # the edge: atoms that may still lie above eps, each worth at most p dL
                edge = p_j[j0:] * (np.abs(loss_j[j0:]) + abs(epsilon))
                bound += 8.0 * _U * 1.01 * float(edge.sum())
        n = max(j0, 1)
        bound += value * (136.0 + math.log2(n)) * _U  # numpy's pairwise sum
        bound += tail
        upper = min(1.0, math.nextafter((value + bound) * (1.0 + 4.0 * _U), math.inf))
        return Estimate(upper, kind="upper", error=upper - value, method=self.method + " (float sum, rounded up)")

    def wasserstein(self, order: float) -> Estimate:
        return _exact(float(self.d), "exact: W_p of a location shift is the shift")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """The maximum of ln((P(S) - delta)/Q(S)) over the level sets S = {k <= j} (Def 3.6), an upper bound.

        The loss (D^2 - 2Dk)/(2 sigma^2) decreases in k, so the level sets {L > c} are the prefixes
        of the atoms in increasing k, whose masses are cumulated from the far tail up. The public
        function then moves the value up until this pair's rounded-up profile meets ``delta``.
        """
        if self.d == 0:
            return _exact(to_float_up(mp().log1p(-mp().mpf(delta))) if delta < 1 else -math.inf, self.method)
        t = self._table()
        if t is None:
            return super().approx_max_divergence(delta)
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        start = int(np.searchsorted(t.cp, delta, side="right"))  # first prefix with P(S) > delta
        if start >= t.cp.size:
            return _exact(-math.inf, self.method)
        vals = np.log((t.cp[start:] - delta) / t.cq[start:])
        # the three roundings above can land a few ulps low; 4 ulps up makes the caller's
        # forward check (round_up_to_profile) pass at once instead of searching ulp by ulp
        best = float(vals.max())
        value = best + 4.0 * math.ulp(best)
        return Estimate(value, kind="upper", error=value - best + 4.0 * math.ulp(best),
                        method=self.method + " (exact atoms, level sets, +4 ulp)")


def _log_of_sum(ctx: Any, total: Any, magnitude: Any, s: Any) -> tuple[Any, Any]:
    """(ln(total)/s, scale) for ``evaluate``: ``total`` was summed from terms of absolute sum
    ``magnitude``; its logarithm loses the bits of ``magnitude/total`` and, near total = 1, those of
    ``1/|total - 1|`` (ln(1 + x) needs x to full relative accuracy)."""
    if total <= 0:
        return ctx.mpf(0), ctx.mpf(1)  # cancelled completely: ask for more precision
    x = total - 1
    if abs(x) < 0.5:
        value = ctx.log1p(x) / s
        amplification = (magnitude + 1) / abs(x) if x != 0 else ctx.mpf(1)
    else:
        value = ctx.log(total) / s
        amplification = magnitude / total
    if value == 0:  # the sum rounded to exactly 1: never structural here (t > 0), so more bits
        return value, ctx.mpf(1)
    return value, abs(value) * max(amplification, ctx.mpf(1))


def _log_theta_ratio_mp(ctx: Any, sigma: float, s: Any) -> Any:
    """ln(theta_sigma(s) / theta_sigma(0)) at the context's precision, s in [0, 1).

    sigma >= 1/2: the dual (Poisson) form, ln(1 - 4 sum q^{n^2} sin^2(pi n s) / (1 + 2 sum q^{n^2})),
    q = e^{-2 pi^2 sigma^2}, summed until the terms fall below 2^-(prec + 20); smaller sigma: the
    direct sums over |k| <= 40 sigma + 2 (the rest is below e^{-800}).
    """
    sg = ctx.mpf(sigma)
    if sigma >= 0.5:
        c = 2 * ctx.pi**2 * sg**2
        base, dip, n = ctx.mpf(0), ctx.mpf(0), 1
        eps = ctx.ldexp(1, -(ctx.prec + 20))
        while True:
            qn = ctx.exp(-c * n * n)
            base += qn
            dip += qn * ctx.sin(ctx.pi * n * s) ** 2
            if qn < eps:
                break
            n += 1
        return ctx.log1p(-4 * dip / (1 + 2 * base))
    half = int(math.ceil(40.0 * sigma)) + 2
    two_var = 2 * sg * sg
    num = ctx.fsum(ctx.exp(-((k - s) ** 2) / two_var) for k in range(-half, half + 2))
    den = ctx.fsum(ctx.exp(-(ctx.mpf(k) ** 2) / two_var) for k in range(-half - 1, half + 2))
    return ctx.log(num / den)


class _DGTable:
    """Atoms of the discrete Gaussian shift pair in increasing k (decreasing loss), with prefix sums."""

    __slots__ = ("logp", "loss", "neg_loss", "cp", "cq", "p")

    def __init__(self, d: int, sigma: float, log_norm: float) -> None:
        reach = int(math.ceil(39.0 * sigma)) + 2 + d
        k = np.arange(-reach, reach + 1, dtype=np.float64)
        self.logp = -(k * k) / (2.0 * sigma**2) - log_norm
        self.loss = (d**2 - 2.0 * d * k) / (2.0 * sigma**2)
        self.neg_loss = -self.loss  # increasing, for searchsorted
        self.p = np.exp(self.logp)
        self.cp = np.cumsum(self.p)
        self.cq = np.cumsum(np.exp(self.logp - self.loss))
        for a in (self.logp, self.loss, self.neg_loss, self.cp, self.cq, self.p):
            a.flags.writeable = False


_DG_TABLES: dict[tuple[int, float, float], _DGTable] = {}  # the last two tables built, oldest first
_DG_LOCK = threading.Lock()


def _dg_table(d: int, sigma: float, log_norm: float) -> _DGTable:
    """The table of one pair, cached for the repeated sums at one sigma (an epsilon or delta search).

    Two tables at most: one holds up to 2e7 atoms in six arrays (about 1 GB), and a calibration that
    bisects sigma builds a new table at every step (64 cached tables reached 13 GB in one Gaussian query)."""
    key = (d, sigma, log_norm)
    with _DG_LOCK:
        table = _DG_TABLES.pop(key, None)
    if table is None:
        table = _DGTable(d, sigma, log_norm)
    with _DG_LOCK:
        _DG_TABLES.pop(key, None)
        while len(_DG_TABLES) >= 2:
            del _DG_TABLES[next(iter(_DG_TABLES))]
        _DG_TABLES[key] = table  # the most recent last
    return table


def _log_tanh_half(t: float) -> float:
    """ln tanh(1/(2t)) = ln((1-r)/(1+r)), r = e^{-1/t}."""
    x = 1.0 / t
    return math.log(-math.expm1(-x)) - math.log1p(math.exp(-x))
