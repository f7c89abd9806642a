r"""Loss laws as factors for the tilted accountant (:mod:`dpkit.accounting._pld_tilted`): where to cut
each law, the analytic bound on what is cut off, and the grid.

Laws (each the privacy loss L = ln p/q of a dominating pair under its first law):

* ``"remove"``: the Poisson-subsampled Gaussian's removal pair (q N(mu, 1) + (1 - q) N(0, 1), N(0, 1))
  in loss form: with the base loss X ~ N(mu^2/2, mu^2) under P and N(-mu^2/2, mu^2) under Q,
  L = ln(1 - q + q e^X) with X drawn from q P + (1 - q) Q (Zhu, Dong, Wang 2022, arXiv 2106.08567,
  Thm 11; the pair of Mironov, Talwar, Zhang 2019, arXiv 1908.10530, §3);
* ``"add"``: the addition pair (N(0, 1), q N(mu, 1) + (1 - q) N(0, 1)): L = -ln(1 - q + q e^X), X ~ Q;
  bounded above by -ln(1 - q);
* ``"symmetric"``: the symmetric completion of the removal pair (:func:`dpkit.accounting.subsampling._symmetrized`),
  used for substitution neighbours (Poisson: an upper bound; sampling without replacement: the
  dominating pair of Zhu, Dong, Wang 2022, Thm 10, Balle, Barthe, Gaboardi 2018, arXiv 1807.01647, Thm 9);
* ``"laplace"``: the Laplace shift t = D/b (atoms at +-t, density between; max loss exactly t).

Upper tails.  The removal law is unbounded above.  Its part beyond a cut X > x_h has, for lambda >= 0,

.. math:: \int_{X > x_h} (1 - q + q e^X)^\lambda\,d(qP + (1-q)Q)
          \le q^\lambda\bigl(1 + \tfrac{1-q}{q} e^{-x_h}\bigr)^\lambda
          \bigl[q\,E_P[e^{\lambda X}; X > x_h] + (1-q)\,E_Q[e^{\lambda X}; X > x_h]\bigr],

since 1 - q + q e^X = q e^X (1 + (1-q) e^{-X}/q) and the last factor decreases in X; and for
X ~ N(m, s^2), :math:`E[e^{\lambda X}; X > x] = e^{\lambda m + \lambda^2 s^2/2}\,\bar\Phi((x - m - \lambda s^2)/s)`
(completing the square).  The cut is placed where this is below e^{-36}/k (relative to M(lambda) >= 1
minus a negligible truncation: M(lambda) = exp(lambda D_{lambda+1}) >= 1 for a full law) for every tilt
the composition will use (an interval [lambda_lo, lambda_hi] around the saddle point), so the term the
tilted accountant adds is far below the answer's other errors.  The bound is evaluated at the tilt actually
used, so a cut made for other tilts is still sound, only looser.  The addition law's tail
beyond its last point has mass Phi((x_lo + mu^2/2)/mu) and losses at most -ln(1 - q).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpkit._math.bisection import bisect_monotone
from dpkit.accounting._pld_discretize import (LossLaw, RangeCells, discretize_range, gaussian_law, laplace_law,
                                              range_cells)
from dpkit.accounting._pld_tilted import Factor

#: ln of the tilted tail allowed beyond a factor's last point, before dividing by the number of factors
_LOG_TAIL_BUDGET = -36.0
#: base-loss quantile (each side) below which a law's lower tail is rounded up (pessimistic) or dropped
_LOW_Z = 11.0  # Phi(-11) = 1.9e-28
#: no grid point beyond this loss (either sign): e^{-l} stays a normal double
_LOSS_CAP = 700.0


def _log_gauss_tilted_tail(lam: float, m: float, s: float, x: float) -> float:
    """ln E[e^{lam X}; X > x] for X ~ N(m, s^2)."""
    return lam * m + 0.5 * lam * lam * s * s + float(special.log_ndtr(-(x - m - lam * s * s) / s))


def _g(x: float, q: float) -> float:
    """ln(1 - q + q e^x); exactly x at q = 1 (log1p(expm1(x)) fails below x = -37 there: expm1 is -1)."""
    if q >= 1.0:
        return x
    if x > 0:
        return x + math.log(q + (1.0 - q) * math.exp(-x))
    return math.log1p(q * math.expm1(x))


_FACTOR_CACHE: dict[tuple[object, ...], dict[bool, Factor]] = {}
_CELLS_CACHE: dict[tuple[object, ...], RangeCells] = {}


@dataclass(frozen=True, slots=True)
class LawSpec:
    """One dominating pair's loss law, ready to be cut and discretised for a given tilt."""

    kind: str  # "remove", "add", "symmetric", "laplace"
    mu: float  # Gaussian: sensitivity / sigma; Laplace: t = sensitivity / scale
    q: float = 1.0

    # ---- the law and its cuts ---------------------------------------------------------------------
    def _mixture(self) -> LossLaw:
        from dpkit.accounting.subsampling import _mixture_law

        base = gaussian_law(self.mu, 1e-28, both_sides=True)
        if self.q >= 1.0 and self.kind == "remove":
            return base  # q = 1: the Gaussian shift itself (the mixture's map is the identity)
        direction = "add" if self.kind == "add" else "remove"
        return _mixture_law(base, self.q, direction)

    def log_remove_tail(self, lam: float, x_h: float) -> float:
        """ln of the bound (module docstring) on the removal law's tilted mass with base loss > x_h."""
        q, mu = self.q, self.mu
        m, s = mu * mu / 2.0, mu
        lp = _log_gauss_tilted_tail(lam, m, s, x_h)
        lq = _log_gauss_tilted_tail(lam, -m, s, x_h)
        if q >= 1.0:
            return lp
        inner = float(np.logaddexp(math.log(q) + lp, math.log1p(-q) + lq))
        return lam * math.log(q) + lam * math.log1p((1.0 - q) * math.exp(-x_h) / q) + inner

    def cut_remove(self, lam_lo: float, lam_hi: float, log_budget: float) -> float:
        """A base-loss cut x_h with the tilted tail bound <= e^{log_budget} for every lambda in [lam_lo, lam_hi].

        The bound is log-convex in lambda (a linear term plus the log of a sum of truncated exponential
        moments, log-convex by Hoelder), so checking both ends covers the interval; and it decreases in x_h,
        so the cut is found by stepping up by the base loss's scale and bisecting the last step (to 1/32 of
        it).  At small q the factor q^lambda makes the tilted tail small long before the untilted one: a cut
        made for lambda in [0, lam_hi] was three times longer at q = 1e-3 than one for the tilts used.  The
        search starts where the Gaussian factor starts to fall, not beyond ln((1 - q) / q) where q e^x
        dominates 1 - q: the bound holds for every x_h, and with sigma = 1e4 (base losses of 1e-4) a start
        at ln((1 - q) / q) made the factor a million times longer than its scale."""
        mu = self.mu
        s = mu

        def ok(x: float) -> bool:
            return self.log_remove_tail(lam_hi, x) <= log_budget and self.log_remove_tail(lam_lo, x) <= log_budget

        x = mu * mu / 2.0 + lam_lo * s * s  # where E[e^{lam X}; X > x] starts to fall
        if ok(x):
            return x
        for _ in range(4000):
            if ok(x + s):
                break
            x += s
        # five halvings of the last step (to 1/32 of it), on the side where ``ok`` holds: the tail bound
        # meets the budget at the cut returned
        return bisect_monotone(ok, x, x + s, side="upper", rtol=0.0, max_iter=5)

    def span(self, lam_max: float, k_total: int, lam_lo: float = 0.0) -> tuple[float, float, float]:
        """(lo, hi, x_h) in loss units for tilts in [lam_lo, lam_max] (x_h: the removal law's base cut)."""
        mu, q = self.mu, self.q
        m = mu * mu / 2.0
        budget = _LOG_TAIL_BUDGET - math.log(max(k_total, 1))
        if self.kind == "laplace":
            return -mu, mu, math.inf
        if self.kind == "add":
            x_top = m + _LOW_Z * mu  # X ~ Q is below this but for ~1e-28; tilting by e^{lam L} only favours
            # small X here (L = -ln(1 - q + q e^X) decreases in X), so the cut holds for every lam >= 0
            x_bot = -m - _LOW_Z * mu
            return max(-_g(x_top, q), -_LOSS_CAP), -_g(x_bot, q), x_bot
        # the cut, but no loss beyond _LOSS_CAP (e^{-l} must not underflow on the grid): a larger cut's tail
        # is then bounded as it is (a loose bound where the tilt asks for losses that large)
        x_h = min(self.cut_remove(min(lam_lo, lam_max), lam_max, budget), _LOSS_CAP + math.log(1.0 / q))
        lo = max(_g(-m - _LOW_Z * mu, q), -_LOSS_CAP)
        if self.kind == "symmetric":
            hi = _g(x_h, q)
            return -hi, hi, x_h
        return lo, _g(x_h, q), x_h

    def log_tail_fn(self, x_h: float) -> Callable[[float], float] | None:
        """lambda -> ln of the bound on the tilted mass left out above the last point."""
        q, mu = self.q, self.mu
        if self.kind == "laplace":
            return None
        if self.kind == "add":
            # X ~ N(-m, mu^2) below x_h, L = -ln(1 - q + q e^X) = -g(X) <= -ln(1 - q); and since g is convex,
            # L <= -g(x_h) - g'(x_h) (X - x_h), so E[e^{lam L}; X < x_h] <= e^{-lam g(x_h) + a x_h}
            # E[e^{-a X}; X < x_h] with a = lam g'(x_h) (a Gaussian tilted tail, completing the square)
            m = mu * mu / 2.0
            log_mass = float(special.log_ndtr((x_h + m) / mu))
            top = -math.log1p(-q)
            g_h = _g(x_h, q)
            slope = q * math.exp(x_h) / (1.0 - q + q * math.exp(x_h))

            def add_tail(lam: float) -> float:
                a = lam * slope
                tangent = (-lam * g_h + a * x_h + a * m + 0.5 * a * a * mu * mu
                           + float(special.log_ndtr((x_h + m + a * mu * mu) / mu)))
                return min(log_mass + lam * top, tangent)

            return add_tail
        if self.kind == "symmetric":
            # the cut tail itself, plus its mirror: masses e^{-l} m at -l for l > hi = g(x_h), whose tilted
            # weight is at most e^{-(1 + lam) hi} m, so at most e^{-(1 + lam) hi} times the untilted tail
            hi = _g(x_h, q)
            return lambda lam: float(np.logaddexp(self.log_remove_tail(lam, x_h),
                                                  self.log_remove_tail(0.0, x_h) - (1.0 + lam) * hi))
        return lambda lam: self.log_remove_tail(lam, x_h)

    @property
    def max_loss(self) -> float:
        if self.kind == "laplace":
            return self.mu
        if self.kind == "add" and self.q < 1.0:
            return -math.log1p(-self.q)
        return math.inf

    # ---- factors ------------------------------------------------------------------------------------
    def factors(self, grid: float, lam_max: float, k_total: int, which: tuple[bool, ...] = (True, False),
                lam_lo: float = 0.0) -> dict[bool, Factor]:
        """The pessimistic and/or optimistic factors of this law on ``grid``, cut for tilts up to lam_max
        (a small cache keeps the last few: the solver asks for the same ones several times)."""
        key = (self, float(grid), float(lam_max), int(k_total), float(lam_lo))
        have = _FACTOR_CACHE.get(key, {})
        missing = tuple(w for w in which if w not in have)
        if missing:
            have = dict(have)
            have.update(self._factors(grid, lam_max, k_total, missing, lam_lo))
            if len(_FACTOR_CACHE) >= 8:
                _FACTOR_CACHE.pop(next(iter(_FACTOR_CACHE)))
            _FACTOR_CACHE[key] = have
        return {w: have[w] for w in which}

    def _factors(self, grid: float, lam_max: float, k_total: int, which: tuple[bool, ...], lam_lo: float = 0.0
                 ) -> dict[bool, Factor]:
        lo, hi, x_h = self.span(lam_max, k_total, lam_lo)
        assert not (self.kind == "add" and self.q >= 1.0), "at q = 1 the addition law is the removal law"
        if self.kind == "symmetric":
            lo = _g(-self.mu * self.mu / 2.0 - _LOW_Z * self.mu, self.q)
        key = (self, float(grid), lo, hi)
        cells = _CELLS_CACHE.get(key)
        if cells is None:  # the half-cell masses, kept for the other discretisation on the same grid
            law = laplace_law(self.mu) if self.kind == "laplace" else self._mixture()
            cells = range_cells(law, grid, lo, hi)
            if len(_CELLS_CACHE) >= 2:
                _CELLS_CACHE.pop(next(iter(_CELLS_CACHE)))
            _CELLS_CACHE[key] = cells
        parts = discretize_range(None, grid, lo, hi, pessimistic=which, cells=cells)
        tail = self.log_tail_fn(x_h)
        out = {}
        for pess, (off, mass, inf, eta, nu) in parts.items():
            if self.kind == "symmetric":
                off, mass, inf, eta, nu = _symmetrize(off, mass, inf, eta, nu, grid)
            out[pess] = Factor(grid=grid, offset=off, mass=mass, infinity_mass=inf, pessimistic=pess, eta=eta,
                               nu=nu, log_tail=tail if pess else None, max_loss=self.max_loss,
                               lam_max=lam_max if self.kind in ("remove", "symmetric") else math.inf)
        return out


def _symmetrize(off: int, mass: NDArray[np.float64], inf: float, eta: float, nu: NDArray[np.float64] | None,
                grid: float) -> tuple[int, NDArray[np.float64], float, float, NDArray[np.float64]]:
    """The symmetric completion (losses l > 0 kept, mirror e^{-l} m at -l, the rest at 0) of a factor;
    see :func:`dpkit.accounting.subsampling._symmetrized` for why it is the pair to compose."""
    idx_all = off + np.arange(mass.size)
    pos = idx_all > 0
    top = int(idx_all[pos][-1]) if pos.any() else 0
    out = np.zeros(2 * top + 1)
    idx = idx_all[pos]
    m = mass[pos]
    out[top + idx] += m
    out[top - idx] += m * np.exp(-idx * grid)
    zero = 1.0 - math.fsum(out) - inf
    out[top] += max(zero, 0.0)
    nu_out = np.zeros_like(out)
    if nu is not None:
        nu_out[top + idx] += nu[pos]
        nu_out[top - idx] += nu[pos]
    nu_out[top] += 8.0 * 2.0**-53  # the mirror masses' and the zero mass's rounding
    return -top, out, inf, eta, nu_out
