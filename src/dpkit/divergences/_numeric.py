"""Numerical paths: adaptive quadrature for continuous pairs, truncated series for lattice pairs,
and the exact finite-support evaluator.

Quadrature is ``scipy.integrate.quad`` (QUADPACK) over the real line split at the pair's
locations; the reported ``error`` is QUADPACK's absolute error estimate summed over the pieces
(an estimate, not a proof).  Series over the integers are summed on a window that holds all but
1e-30 of each law's mass, then on a window twice as wide; the reported value is the wider one and
``error`` is the change between the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import integrate

from dpkit._math import Estimate
from dpkit.distributions import Distribution, Finite
from dpkit.divergences import _finite
from dpkit.divergences._evaluator import Evaluator
from dpkit.errors import UnsupportedError

_QUAD = "numerical: adaptive quadrature (QUADPACK)"
_U = 2.0**-53


def _quad_line(f: Callable[[float], float], points: list[float]) -> tuple[float, float]:
    """Integrate f over the real line, split at ``points``; returns (value, abs error estimate)."""
    pts = sorted(set(points))
    pieces = [(-math.inf, pts[0])] + list(zip(pts[:-1], pts[1:])) + [(pts[-1], math.inf)]
    total, err = 0.0, 0.0
    for a, b in pieces:
        if a == b:
            continue
        val, e, *_ = integrate.quad(f, a, b, limit=500, epsabs=1e-15, epsrel=1e-13, full_output=1)
        total += val
        err += e
    return total, err


class QuadraturePair(Evaluator):
    """Two continuous laws on the real line without a shared closed form."""

    name = "this continuous pair"

    def __init__(self, P: Distribution, Q: Distribution) -> None:
        self.P, self.Q = P, Q
        pts: list[float] = []
        for d in (P, Q):
            med = float(d.quantile(0.5))
            spread = math.sqrt(d.variance)
            pts += [med - 10 * spread, med - spread, med, med + spread, med + 10 * spread]
        self.points = pts

    def _loss(self, x: float) -> tuple[float, float]:
        lp = float(self.P.log_density(x))
        lq = float(self.Q.log_density(x))
        return lp, lq

    def kl(self) -> Estimate:
        def f(x: float) -> float:
            lp, lq = self._loss(x)
            if lp == -math.inf:
                return 0.0
            if lq == -math.inf:
                return math.inf
            return math.exp(lp) * (lp - lq)

        val, err = _quad_line(f, self.points)
        return Estimate(max(val, 0.0), kind="numerical", error=err, method=_QUAD)

    def renyi(self, alpha: float) -> Estimate:
        if alpha == 1.0:
            return self.kl()
        if math.isinf(alpha):
            return self.max_divergence()
        grid = np.linspace(min(self.points), max(self.points), 2001)
        expo = alpha * self.P.log_density(grid) + (1 - alpha) * self.Q.log_density(grid)
        shift = float(np.max(expo[np.isfinite(expo)])) if np.any(np.isfinite(expo)) else 0.0

        def f(x: float) -> float:
            lp, lq = self._loss(x)
            if lp == -math.inf:
                return 0.0
            return math.exp(alpha * lp + (1 - alpha) * lq - shift)

        try:
            val, err = _quad_line(f, self.points)
        except OverflowError:
            return Estimate(math.inf, kind="numerical", error=math.inf,
                            method=_QUAD + " (integrand overflows: the integral diverges)")
        if val <= 0:
            return Estimate(math.inf, kind="numerical", error=err, method=_QUAD)
        value = (math.log(val) + shift) / (alpha - 1.0)
        return Estimate(max(value, 0.0), kind="numerical", error=err / val / abs(alpha - 1.0), method=_QUAD)

    def hockey_stick(self, epsilon: float) -> Estimate:
        def f(x: float) -> float:
            lp, lq = self._loss(x)
            if lp == -math.inf or lp - lq <= epsilon:
                return 0.0
            return math.exp(lp) * -math.expm1(epsilon - (lp - lq))

        val, err = _quad_line(f, self.points)
        return Estimate(min(max(val, 0.0), 1.0), kind="numerical", error=err, method=_QUAD)

    def total_variation(self) -> Estimate:
        def f(x: float) -> float:
            return 0.5 * abs(float(self.P.density(x)) - float(self.Q.density(x)))

        val, err = _quad_line(f, self.points)
        return Estimate(min(val, 1.0), kind="numerical", error=err, method=_QUAD + " (half L1)")

    def wasserstein(self, order: float) -> Estimate:
        return quantile_wasserstein(self.P, self.Q, order)


def quantile_wasserstein(P: Distribution, Q: Distribution, order: float) -> Estimate:
    r""":math:`W_p^p = \int_0^1 |F^{-1}(u) - G^{-1}(u)|^p du` on the real line (Villani 2009, Rem 2.19)."""

    def f(u: float) -> float:
        return float(abs(float(P.quantile(u)) - float(Q.quantile(u))) ** order)  # a float: the base is >= 0

    total, err = 0.0, 0.0
    for a, b in ((0.0, 1e-8), (1e-8, 0.5), (0.5, 1 - 1e-8), (1 - 1e-8, 1.0)):
        val, e, *_ = integrate.quad(f, a, b, limit=500, epsabs=1e-15, epsrel=1e-12, full_output=1)
        total += val
        err += e
    value = total ** (1.0 / order)
    d_err = err / (order * max(total, 1e-300) ** (1 - 1.0 / order))
    return Estimate(value, kind="numerical", error=d_err, method=_QUAD + " over quantiles")


class FinitePair(Evaluator):
    """An exact evaluator over aligned finite mass vectors (possibly with one off-support atom)."""

    name = "this finite pair"

    def __init__(self, p: np.ndarray, q: np.ndarray, support: np.ndarray | None = None,
                 P: Distribution | None = None, Q: Distribution | None = None,
                 logp: np.ndarray | None = None, logq: np.ndarray | None = None) -> None:
        self.arrays = _finite.FiniteArrays(p, q, logp, logq)
        self.support = support
        self.P, self.Q = P, Q

    def kl(self) -> Estimate:
        return _finite.kl(self.arrays)

    def renyi(self, alpha: float) -> Estimate:
        return _finite.renyi(self.arrays, alpha)

    def max_divergence(self) -> Estimate:
        return _finite.max_divergence(self.arrays)

    def hockey_stick(self, epsilon: float) -> Estimate:
        return _finite.hockey_stick(self.arrays, epsilon)

    def total_variation(self) -> Estimate:
        return _finite.total_variation(self.arrays)

    def statistical_distance(self) -> Estimate:
        return _finite.statistical_distance(self.arrays)

    def approx_max_divergence(self, delta: float) -> Estimate:
        return _finite.approx_max_divergence(self.arrays, delta)

    def wasserstein(self, order: float) -> Estimate:
        if isinstance(self.P, Finite) and isinstance(self.Q, Finite):
            return finite_wasserstein(self.P, self.Q, order)
        if self.P is not None and self.Q is not None:
            return SeriesPair(self.P, self.Q).wasserstein(order)
        raise UnsupportedError("Wasserstein distance needs both distributions.")


def finite_wasserstein(P: Finite, Q: Finite, order: float) -> Estimate:
    r"""Exact W_p between two finite laws on the real line, by merging the two quantile functions.

    :math:`W_p^p = \sum_j (u_j - u_{j-1}) |F^{-1}(u_j) - G^{-1}(u_j)|^p` over the merged cdf levels
    (Villani 2009, Rem 2.19; exact for step quantile functions).  Vectorised: two sorts and one merge.
    """
    xp, cp = P._sorted()
    xq, cq = Q._sorted()
    n = xp.size + xq.size
    if order == 1.0 and xp.shape == xq.shape and np.array_equal(xp, xq):
        # common support: W_1 = integral |F - G| dx, a single pass (Vallender 1974)
        steps = np.diff(xp)
        total = float(np.dot(np.abs(cp[:-1] - cq[:-1]), steps))
        # the cumulative sums err by at most n u each, every product and the dot product by (n + 4) u
        bound = 2.0 * (n + 2) * _U * float(steps.sum()) + (n + 4) * _U * total
        return _rounded_up(total, bound, 1.0, "exact: integral of |F - G| on the common support")
    # merge the two sorted level sets (one stable argsort: linear on two sorted runs); on the cell
    # ending at a merged level, each quantile index is the number of that law's levels strictly before it
    levels = np.concatenate([cp, cq])
    order_idx = np.argsort(levels, kind="stable")
    merged = levels[order_idx]
    del levels
    from_p = order_idx < cp.size
    del order_idx
    ip = np.cumsum(from_p, dtype=np.int_)  # the dtype numpy gives a bool cumsum, named for the type checker
    ip -= from_p  # levels of P strictly before position j
    iq = np.arange(merged.size)
    iq -= ip  # levels of Q strictly before position j
    widths = np.diff(merged, prepend=0.0)
    del merged, from_p
    np.minimum(ip, xp.size - 1, out=ip)
    np.minimum(iq, xq.size - 1, out=iq)
    gaps = xp[ip]
    del ip
    gaps -= xq[iq]
    del iq
    np.abs(gaps, out=gaps)
    if order == 2.0:
        gaps *= gaps
    elif order != 1.0:
        np.power(gaps, order, out=gaps)
    total = float(np.dot(widths, gaps))
    # each width is a difference of two cumulative sums (error <= 2 n u), each gap^p errs by a few u,
    # and the dot product by (n + 4) u of the total
    bound = 2.0 * (n + 2) * _U * float(gaps.sum()) + (n + 8) * _U * total
    return _rounded_up(total, bound, order, "exact: merged quantile functions")


def _rounded_up(total: float, bound: float, order: float, method: str) -> Estimate:
    """(total + bound)^(1/order), rounded up: an upper bound on W_p (kind ``"upper"``, error the bound)."""
    exact = total ** (1.0 / order) if total > 0 else 0.0
    if bound <= 0.0:
        return Estimate(exact, kind="exact", method=method)
    upper = (total + bound) ** (1.0 / order)
    upper = math.nextafter(math.nextafter(upper * (1.0 + 4.0 * _U), math.inf), math.inf)
    return Estimate(upper, kind="upper", error=upper - exact, method=method + " (rounded up by its error bound)")


class SeriesPair(Evaluator):
    """Two integer-valued laws with infinite support and no shared closed form."""

    name = "this integer-valued pair"

    def __init__(self, P: Distribution, Q: Distribution) -> None:
        self.P, self.Q = P, Q
        # both families here are symmetric about their mean: mirror the 1e-30 lower quantile
        lows = [float(d.quantile(1e-30)) for d in (P, Q)]
        lo = min(lows)
        hi = max(2.0 * d.mean - low for d, low in zip((P, Q), lows))
        self.lo, self.hi = int(lo), int(hi)

    def _pair(self, widen: int) -> FinitePair:
        half = (self.hi - self.lo) // 2 + 1
        k = np.arange(self.lo - widen * half, self.hi + widen * half + 1, dtype=np.float64)
        lp, lq = self.P.log_density(k), self.Q.log_density(k)
        return FinitePair(np.exp(lp), np.exp(lq), k, logp=lp, logq=lq)

    def _both(self, fn: Callable[[Evaluator], float]) -> Estimate:
        narrow, wide = float(fn(self._pair(0))), float(fn(self._pair(1)))
        err = abs(wide - narrow) if math.isfinite(wide) and math.isfinite(narrow) else 0.0
        return Estimate(wide, kind="numerical", error=err, method="numerical: truncated series (window doubled)")

    def kl(self) -> Estimate:
        return self._both(lambda e: e.kl())

    def renyi(self, alpha: float) -> Estimate:
        return self._both(lambda e: e.renyi(alpha))

    def max_divergence(self) -> Estimate:
        raise UnsupportedError(
            "the max divergence of this integer-valued pair has no closed form, and a supremum over "
            "infinitely many points cannot be certified numerically; compare same-family pairs instead."
        )

    def hockey_stick(self, epsilon: float) -> Estimate:
        return self._both(lambda e: e.hockey_stick(epsilon))

    def total_variation(self) -> Estimate:
        return self._both(lambda e: e.total_variation())

    def wasserstein(self, order: float) -> Estimate:
        k = np.arange(self.lo * 2, self.hi * 2 + 1, dtype=np.float64)
        p = np.exp(self.P.log_density(k))
        q = np.exp(self.Q.log_density(k))
        # W_p^p = sum over unit cells of |F^{-1} - G^{-1}|^p: use the finite machinery on the window
        fp = Finite(p / p.sum(), support=k)
        fq = Finite(q / q.sum(), support=k)
        val = finite_wasserstein(fp, fq, order)
        err = float(1.0 - min(p.sum(), q.sum())) * float(k[-1] - k[0])
        return Estimate(float(val), kind="numerical", error=err, method="numerical: truncated window")
