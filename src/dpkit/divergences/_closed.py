r"""Closed forms for same-family pairs, all in log space.

Sources (each re-derived and checked against mpmath at 50 digits in ``tests/divergences``):

* Laplace shift Lap(0,b) vs Lap(D,b), t = D/b: KL = t + e^{-t} - 1; Rényi (Mironov 2017,
  arXiv 1702.07476v3, Table II); TV = 1 - e^{-t/2}; delta(eps) = 1 - e^{(eps - t)/2} for
  |eps| <= t (its value for eps < 0 follows from E_gamma(P||Q) = 1 - gamma + gamma E_{1/gamma}(Q||P)).
* Gaussian shift N(0,s^2) vs N(D,s^2), mu = D/s: KL = mu^2/2, D_alpha = alpha mu^2/2,
  TV = 2 Phi(mu/2) - 1, delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)
  (Balle & Wang 2018, arXiv 1805.06530v2, Thm 8), evaluated through erfcx for large eps.
* Gaussians with different variances: KL and Rényi (Gil, Alajaji, Linder 2013, Information
  Sciences 249, Table 2); the max divergence from the maximum of the quadratic log-ratio.
* Discrete Laplace shift (integer D, scale t): PLD with D+1 atoms; KL, Rényi, TV and delta(eps)
  in closed form (Canonne, Kamath, Steinke 2020, arXiv 2004.00010v5 for the family).
* Discrete Gaussian shift: KL = D^2/(2 s^2); D_alpha = alpha D^2/(2 s^2) + ln(theta((1-alpha)D)/theta(0))/(alpha-1);
  delta(eps) summed exactly in log space (CKS 2020, Thm 7 for the profile).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

from dpkit._math import Estimate, log1mexp
from dpkit.distributions._theta import log_theta_ratio
from dpkit.divergences import _finite
from dpkit.divergences._evaluator import Evaluator

_SQRT2 = math.sqrt(2.0)


def _exact(value: float, method: str) -> Estimate:
    return Estimate(value, kind="exact", method=method)


class LaplaceShift(Evaluator):
    """Lap(m1, b) vs Lap(m2, b): everything in closed form, in t = |m1 - m2| / b."""

    name = "a Laplace shift pair"
    method = "closed form: Laplace shift"

    def __init__(self, shift: float, scale: float) -> None:
        self.shift = abs(shift)
        self.t = self.shift / scale

    def kl(self) -> Estimate:
        t = self.t
        return _exact(t + math.expm1(-t), self.method)

    def renyi(self, alpha: float) -> Estimate:
        t = self.t
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        if t == 0.0:
            return _exact(0.0, self.method)
        if alpha == 0.5:
            return _exact(t - 2.0 * math.log1p(t / 2.0), self.method)
        s = alpha - 1.0
        if abs(s) * t < 1.0:
            # A - 1 = s C / (2 alpha - 1), C = alpha (e^{st} - 1 - st)/s + (e^{-alpha t} - 1 + alpha t):
            # the first-order terms cancel analytically, so small t and alpha near 1 lose nothing
            c = alpha * _expm1mx(s * t) / s + _expm1mx(-alpha * t)
            x = s * c / (2.0 * alpha - 1.0)
            value = c / (2.0 * alpha - 1.0) * _log1p_over(x)
            return _exact(value, self.method)
        a = math.log(alpha) + s * t
        b = math.log(abs(s)) - alpha * t
        if alpha > 1.0:
            log_a = max(a, b) + math.log1p(math.exp(-abs(a - b))) - math.log(2.0 * alpha - 1.0)
        else:
            # alpha/(1-alpha) via log1p keeps a - b accurate next to alpha = 1/2
            gap = math.log1p((2.0 * alpha - 1.0) / (1.0 - alpha)) + (2.0 * alpha - 1.0) * t
            log_a = max(a, b) + log1mexp(abs(gap)) - math.log(abs(2.0 * alpha - 1.0))
        return _exact(log_a / s, self.method)

    def max_divergence(self) -> Estimate:
        return _exact(self.t, self.method)

    def hockey_stick(self, epsilon: float) -> Estimate:
        t = self.t
        if epsilon >= t:
            return _exact(0.0, self.method)
        if epsilon >= -t:
            return _exact(-math.expm1((epsilon - t) / 2.0), self.method)
        return _exact(-math.expm1(epsilon), self.method)

    def total_variation(self) -> Estimate:
        return _exact(-math.expm1(-self.t / 2.0), self.method)

    def approx_max_divergence(self, delta: float) -> Estimate:
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        l1 = math.log1p(-delta)
        return _exact(max(l1, self.t + 2.0 * l1), self.method)

    def wasserstein(self, order: float) -> Estimate:
        return _exact(self.shift, "exact: W_p of a location shift is the shift")


class GaussianShift(Evaluator):
    """N(m1, s^2) vs N(m2, s^2), in mu = |m1 - m2| / s."""

    name = "a Gaussian shift pair"
    method = "closed form: Gaussian shift"

    def __init__(self, shift: float, sigma: float) -> None:
        self.shift = abs(shift)
        self.mu = self.shift / sigma

    def kl(self) -> Estimate:
        return _exact(0.5 * self.mu**2, self.method)

    def renyi(self, alpha: float) -> Estimate:
        if math.isinf(alpha):
            return self.max_divergence()
        return _exact(0.5 * alpha * self.mu**2, self.method)

    def max_divergence(self) -> Estimate:
        return _exact(math.inf if self.mu > 0 else 0.0, self.method)

    def total_variation(self) -> Estimate:
        return _exact(math.erf(self.mu / (2.0 * _SQRT2)), self.method)

    def hockey_stick(self, epsilon: float) -> Estimate:
        return _exact(gaussian_delta(self.mu, epsilon), self.method + " (Balle-Wang)")

    def wasserstein(self, order: float) -> Estimate:
        return _exact(self.shift, "exact: W_p of a location shift is the shift")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """Invert the Balle-Wang profile by safeguarded Newton steps (delta'(eps) = -e^eps Phi(b))."""
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        mu = self.mu
        if mu == 0.0:
            return _exact(math.log1p(-delta), self.method)
        if delta == 0.0:
            return _exact(math.inf, self.method)

        def f(e: float) -> float:
            return gaussian_delta(mu, e) - delta

        # bracket: delta(eps) <= Phi(mu/2 - eps/mu), so eps_hi = mu^2/2 - mu Phi^{-1}(delta) has f <= 0
        hi = mu * mu / 2.0 - mu * float(special.ndtri(delta))
        lo = math.log1p(-delta) - 1e-9
        while f(hi) > 0:
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
        # the converged root; the public function then rounds it up until delta(eps) <= delta holds
        return Estimate(e, kind="exact", method=self.method + " (Newton on the Balle-Wang profile)")


def gaussian_delta(mu: float, epsilon: float) -> float:
    r"""Exact delta(eps) of the Gaussian pair with mu = D/sigma (Balle & Wang 2018, Thm 8).

    For eps > mu^2/2 both Phi terms are far in the tail; there
    :math:`\Phi(a) - e^\varepsilon\Phi(b) = \tfrac12 e^{-a^2/2}[\mathrm{erfcx}(-a/\sqrt2) - \mathrm{erfcx}(-b/\sqrt2)]`
    (because :math:`\varepsilon - b^2/2 = -a^2/2`), which avoids the cancellation.
    """
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


class GaussianGeneral(Evaluator):
    """N(m1, s1^2) vs N(m2, s2^2) with s1 != s2: KL, Rényi and max divergence in closed form."""

    name = "two Gaussians with different variances"
    method = "closed form: Gaussians (Gil-Alajaji-Linder 2013)"

    def __init__(self, m1: float, s1: float, m2: float, s2: float) -> None:
        self.m1, self.s1, self.m2, self.s2 = m1, s1, m2, s2

    def kl(self) -> Estimate:
        r = self.s1 / self.s2
        d = (self.m1 - self.m2) / self.s2
        # ln(s2/s1) + (s1^2 + (m1-m2)^2)/(2 s2^2) - 1/2, with r^2 - 1 - 2 ln r computed stably
        value = 0.5 * (d * d + (r * r - 1.0) - 2.0 * math.log(r))
        return _exact(value, self.method)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        var_a = alpha * self.s2**2 + (1.0 - alpha) * self.s1**2
        if var_a <= 0.0:
            return _exact(math.inf, self.method)
        d2 = (self.m1 - self.m2) ** 2
        log_term = math.log(var_a) - 2.0 * (1.0 - alpha) * math.log(self.s1) - 2.0 * alpha * math.log(self.s2)
        value = alpha * d2 / (2.0 * var_a) - log_term / (2.0 * (alpha - 1.0))
        return _exact(max(value, 0.0), self.method)

    def max_divergence(self) -> Estimate:
        if self.s1 > self.s2:
            return _exact(math.inf, self.method)
        # L(x) = ln(s2/s1) - (x-m1)^2/(2 s1^2) + (x-m2)^2/(2 s2^2) is concave when s1 < s2;
        # closed form of the maximum: ln(s2/s1) + (m1 - m2)^2 / (2 (s2^2 - s1^2))
        value = math.log(self.s2 / self.s1) + (self.m1 - self.m2) ** 2 / (2.0 * (self.s2**2 - self.s1**2))
        return _exact(value, self.method)


class LaplaceScales(Evaluator):
    """Lap(m1, b1) vs Lap(m2, b2), b1 != b2: KL and max divergence in closed form."""

    name = "two Laplace laws with different scales"
    method = "closed form: Laplace laws"

    def __init__(self, m1: float, b1: float, m2: float, b2: float) -> None:
        self.m1, self.b1, self.m2, self.b2 = m1, b1, m2, b2

    def kl(self) -> Estimate:
        # E_P[ln p - ln q] = ln(b2/b1) - 1 + E|X - m2|/b2, E|X - m2| = d + b1 e^{-d/b1}, d = |m1 - m2|
        d = abs(self.m1 - self.m2)
        value = math.log(self.b2 / self.b1) - 1.0 + (d + self.b1 * math.exp(-d / self.b1)) / self.b2
        return _exact(value, self.method)

    def max_divergence(self) -> Estimate:
        if self.b1 > self.b2:
            return _exact(math.inf, self.method)
        # L(x) = ln(b2/b1) - |x-m1|/b1 + |x-m2|/b2 is maximal at x = m1
        return _exact(math.log(self.b2 / self.b1) + abs(self.m1 - self.m2) / self.b2, self.method)


class DiscreteLaplaceShift(Evaluator):
    """DLap(m1, t) vs DLap(m2, t) with integer shift D: a finite privacy loss with D + 1 atoms."""

    name = "a discrete Laplace shift pair"
    method = "closed form: discrete Laplace shift"

    def __init__(self, shift: int, scale: float) -> None:
        self.d = abs(int(shift))
        self.t = scale
        self.a = self.d / scale
        self.log_r = -1.0 / scale
        self.log1p_r = math.log1p(math.exp(self.log_r))

    def _atoms(self) -> _finite.FiniteArrays:
        """The privacy-loss atoms as an exact finite pair (masses under P and Q)."""
        d, t = self.d, self.t
        # atoms: k <= 0 (loss a, mass 1/(1+r)), 0 < k < D (loss (D-2k)/t), k >= D (loss -a, mass r^D/(1+r))
        mid = np.arange(1, d, dtype=np.float64)
        logp = np.concatenate([[-self.log1p_r], _log_tanh_half(t) + mid * self.log_r, [d * self.log_r - self.log1p_r]])
        loss = np.concatenate([[self.a], (d - 2.0 * mid) / t, [-self.a]])
        p = np.exp(logp)
        q = np.exp(logp - loss)
        return _finite.FiniteArrays(p, q)

    def kl(self) -> Estimate:
        if self.d == 0:
            return _exact(0.0, self.method)
        # (1/t) [D - 2 r (1 - r^D)/(1 - r^2)]
        frac = math.exp(self.log_r) * -math.expm1(self.d * self.log_r) / -math.expm1(2.0 * self.log_r)
        return _exact(max((self.d - 2.0 * frac) / self.t, 0.0), self.method)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        if self.d == 0:
            return _exact(0.0, self.method)
        s = alpha - 1.0
        if abs(s) * float(self.kl()) < 1e-4 and self.d <= 1_000_000:
            value = _finite.renyi(self._atoms(), alpha)
            return _exact(float(value), self.method + " (atom sum)")
        a, d = self.a, self.d
        terms = [s * a - self.log1p_r, -alpha * a - self.log1p_r]
        if d > 1:
            c = -(2.0 * alpha - 1.0) / self.t  # log u
            n = d - 1
            if c < 0:
                log_s = c + log1mexp(-n * c) - log1mexp(-c)
            elif c > 0:
                log_s = n * c + log1mexp(n * c) - log1mexp(c)
            else:
                log_s = math.log(n)
            terms.append(_log_tanh_half(self.t) + s * a + log_s)
        m = max(terms)
        log_a = m + math.log(sum(math.exp(x - m) for x in terms))
        return _exact(max(log_a / s, 0.0), self.method)

    def max_divergence(self) -> Estimate:
        return _exact(self.a, self.method)

    def hockey_stick(self, epsilon: float) -> Estimate:
        if epsilon < 0:
            # E_gamma(P||Q) = 1 - gamma + gamma E_{1/gamma}(Q||P), and the pair is symmetric
            inner = float(self.hockey_stick(-epsilon))
            return _exact(-math.expm1(epsilon) + math.exp(epsilon) * inner, self.method)
        if epsilon >= self.a:
            return _exact(0.0, self.method)
        d, t = self.d, self.t
        k_star = math.ceil((d - epsilon * t) / 2.0) - 1
        if k_star < 0:
            # only k <= k* = -1 contributes: r (1 - e^{eps - a}) / (1 + r)
            value = math.exp(self.log_r - self.log1p_r) * -math.expm1(epsilon - self.a)
        else:
            # [ (1 - r^{k*+1}) + r (1 - e^{eps - (D - k* - 1)/t}) ] / (1 + r)
            first = -math.expm1((k_star + 1) * self.log_r)
            second = -math.exp(self.log_r) * math.expm1(epsilon - (d - k_star - 1) / t)
            value = (first + second) * math.exp(-self.log1p_r)
        return _exact(min(max(value, 0.0), 1.0), self.method)

    def wasserstein(self, order: float) -> Estimate:
        return _exact(float(self.d), "exact: W_p of a location shift is the shift")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """Invert the piecewise profile exactly: on each segment delta is linear in e^eps."""
        if delta >= 1.0:
            return _exact(-math.inf, self.method)
        if self.d == 0:
            return _exact(math.log1p(-delta), self.method)
        if delta == 0.0:
            return _exact(self.a, self.method)
        if delta >= float(self.hockey_stick(0.0)):
            return super().approx_max_divergence(delta)  # epsilon <= 0: rare, use the generic inverse
        d, t, r = self.d, self.t, math.exp(self.log_r)
        one_r = 1.0 + r
        # segment j (k* = j) covers eps in [(D - 2j - 2)/t, (D - 2j)/t) intersected with [0, a); the start
        # moves left as j grows, so delta(start_j) grows: find the smallest j with delta(start_j) >= delta
        lo_j, hi_j = 0, (d + 1) // 2
        while lo_j < hi_j:
            mid = (lo_j + hi_j) // 2
            if float(self.hockey_stick(max(0.0, (d - 2.0 * mid - 2.0) / t))) >= delta:
                hi_j = mid
            else:
                lo_j = mid + 1
        j = lo_j
        # on segment j: delta = [(1 - r^{j+1}) + r - e^eps r^{D-j}] / (1 + r)
        num = -math.expm1((j + 1) * self.log_r) + r - delta * one_r
        eps = math.log(num) - (d - j) * self.log_r
        return Estimate(max(eps, 0.0), kind="exact", method=self.method + " (segment inversion)")


class DiscreteGaussianShift(Evaluator):
    """N_Z(m1, s^2) vs N_Z(m2, s^2) with integer shift D."""

    name = "a discrete Gaussian shift pair"
    method = "closed form: discrete Gaussian shift"

    def __init__(self, shift: int, sigma: float, log_normalizer: float) -> None:
        self.d = abs(int(shift))
        self.sigma = sigma
        self.log_norm = log_normalizer

    def kl(self) -> Estimate:
        return _exact(self.d**2 / (2.0 * self.sigma**2), self.method)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        if self.d == 0:
            return _exact(0.0, self.method)
        s = (1.0 - alpha) * self.d
        frac = s - math.floor(s)
        ratio = 0.0 if frac == 0.0 else log_theta_ratio(self.sigma, s)
        value = alpha * self.d**2 / (2.0 * self.sigma**2) + ratio / (alpha - 1.0)
        return _exact(max(value, 0.0), self.method + " (theta-function form)")

    def max_divergence(self) -> Estimate:
        return _exact(math.inf if self.d > 0 else 0.0, self.method)

    def _table(self) -> _DGTable | None:
        if 2 * (int(math.ceil(39.0 * self.sigma)) + 2 + self.d) > 20_000_000:
            return None
        return _dg_table(self.d, self.sigma, self.log_norm)

    def hockey_stick(self, epsilon: float) -> Estimate:
        """Exact sum of p - e^eps q over the atoms with loss > eps (all integers within 39 sigma)."""
        if self.d == 0:
            return _exact(max(0.0, -math.expm1(epsilon)), self.method)
        t = self._table()
        if t is None:
            from dpkit.errors import UnsupportedError

            raise UnsupportedError(f"sigma={self.sigma} is too large for the exact discrete-Gaussian sum.")
        j = int(np.searchsorted(t.neg_loss, -epsilon, side="left"))  # atoms 0..j-1 have loss > eps
        if j == 0:
            return _exact(0.0, self.method + " (exact sum)")
        terms = t.logp[:j] + np.log(-np.expm1(epsilon - t.loss[:j]))
        m = float(terms.max())
        value = math.exp(m) * float(np.exp(terms - m).sum())
        return _exact(min(value, 1.0), self.method + " (exact sum)")

    def wasserstein(self, order: float) -> Estimate:
        return _exact(float(self.d), "exact: W_p of a location shift is the shift")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """Exact: the maximum of ln((P(S) - delta)/Q(S)) over the level sets S = {k <= j} (Def 3.6).

        The loss (D^2 - 2Dk)/(2 sigma^2) decreases in k, so the level sets {L > c} are the prefixes
        of the atoms in increasing k, whose masses are cumulated from the far tail up.
        """
        if self.d == 0:
            return _exact(math.log1p(-delta) if delta < 1 else -math.inf, self.method)
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


class _DGTable:
    """Atoms of the discrete Gaussian shift pair in increasing k (decreasing loss), with prefix sums."""

    __slots__ = ("logp", "loss", "neg_loss", "cp", "cq")

    def __init__(self, d: int, sigma: float, log_norm: float) -> None:
        reach = int(math.ceil(39.0 * sigma)) + 2 + d
        k = np.arange(-reach, reach + 1, dtype=np.float64)
        self.logp = -(k * k) / (2.0 * sigma**2) - log_norm
        self.loss = (d**2 - 2.0 * d * k) / (2.0 * sigma**2)
        self.neg_loss = -self.loss  # increasing, for searchsorted
        self.cp = np.cumsum(np.exp(self.logp))
        self.cq = np.cumsum(np.exp(self.logp - self.loss))
        for a in (self.logp, self.loss, self.neg_loss, self.cp, self.cq):
            a.flags.writeable = False


@functools.lru_cache(maxsize=64)
def _dg_table(d: int, sigma: float, log_norm: float) -> _DGTable:
    return _DGTable(d, sigma, log_norm)


def _log_tanh_half(t: float) -> float:
    """ln tanh(1/(2t)) = ln((1-r)/(1+r)), r = e^{-1/t}."""
    x = 1.0 / t
    return math.log(-math.expm1(-x)) - math.log1p(math.exp(-x))


def _expm1mx(x: float) -> float:
    """e^x - 1 - x without cancellation (Taylor series for |x| < 0.5)."""
    if abs(x) >= 0.5:
        return math.expm1(x) - x
    term, total, k = x * x / 2.0, 0.0, 2
    while abs(term) > 1e-18 * abs(total) or total == 0.0:
        total += term
        k += 1
        term *= x / k
        if term == 0.0:
            break
    return total


def _log1p_over(x: float) -> float:
    """log1p(x)/x with the limit 1 at 0."""
    return 1.0 if x == 0.0 else math.log1p(x) / x
