"""The Gaussian mechanism (classical and analytic calibration), released on a power-of-two grid
with exact discrete Gaussian noise."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dpkit._math import Estimate, check_count, check_delta, check_epsilon, check_positive
from dpkit._math.bisection import bisect_monotone
from dpkit._math.directed import up
from dpkit._math.precise import mp, to_float_up
from dpkit.distributions import DiscreteGaussian
from dpkit.divergences.pairs import DiscreteGaussianShift, gaussian_delta
from dpkit.errors import InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PrivacyProfile, ZCDP
from dpkit.guarantees.conversions import zcdp_to_approx_dp, zcdp_to_profile
from dpkit._value import value_object
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release
from dpkit.mechanisms._grid import power_of_two_at_most, release_on_grid
from dpkit.random.exact import gaussian_noise

__all__ = ["Gaussian", "analytic_gaussian_sigma", "classical_gaussian_sigma"]


def classical_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> Estimate:
    r"""sigma = sqrt(2 ln(1.25/delta)) Delta_2 / epsilon (Dwork & Roth 2014, Thm 3.22; seed 004).

    Valid only for epsilon < 1 (the theorem's hypothesis; it fails for large epsilon, e.g.
    delta = 1e-5, epsilon = 10 gives an exact delta of 2.27e-5) and with the **l2** sensitivity
    (seed 004 writes the l1 one: a slip). Evaluated at 160 bits and rounded up (more noise is the
    safe side): an ``Estimate(kind="exact")``, the float at or just above the formula's value.

    >>> round(classical_gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0), 6)
    9.689611
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, open_interval=True)
    s = check_positive("sensitivity", sensitivity)
    if not 0 < eps < 1:
        raise InvalidArgumentError(
            f"the classical Gaussian calibration needs 0 < epsilon < 1 (Dwork & Roth Thm 3.22); got {eps}. "
            "Use the analytic calibration (calibration='analytic', the default), valid for every epsilon."
        )
    ctx = mp()
    value = ctx.sqrt(2 * ctx.log(ctx.mpf(1.25) / d)) * s / eps  # DR Thm 3.22
    return Estimate(to_float_up(value), kind="exact", method="Dwork & Roth Thm 3.22 at 160 bits, rounded up")


def analytic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    r"""The smallest sigma with delta(epsilon) <= delta for the continuous Gaussian (Balle & Wang 2018, Thm 8).

    Bisection on sigma of Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta, returning
    the upper end of a bracket of relative width 1e-12 (never a sigma that misses the target).

    >>> round(analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0), 6)
    3.730632
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, open_interval=True)
    s = check_positive("sensitivity", sensitivity)
    return s * bisect_sigma(lambda sig: gaussian_delta(1.0 / sig, eps) <= d, 1.0)


def discrete_gaussian_half_width(sigma: float, confidence: float) -> float:
    """Half-width (grid units) of a central interval holding N_Z(0, sigma^2) with prob >= confidence.

    Up to sigma = 1000: the exact quantile from the mass table.  Beyond (where a table of 78 sigma atoms
    would be built at every release), the smallest w with a rigorous bound on P(|X| > w) at most
    1 - confidence: with m = w + 1 and f(x) = e^{-x^2/(2 sigma^2)}, the tail sum is at most
    f(m) + int_m^inf f (f decreasing), and the normaliser is at least sigma sqrt(2 pi) (Poisson
    summation: every dual term is positive), so P(|X| > w) <= erfc(m / (sigma sqrt 2)) +
    2 f(m) / (sigma sqrt(2 pi)), moved up by 1e-12 relative for the float evaluation.  That is at most
    one or two units wider than the exact quantile (the f(m) term is 1/sigma of the tail), and much
    narrower than the sub-Gaussian bound P(|X| >= x) <= 2 e^{-x^2/(2 sigma^2)} (Canonne, Kamath,
    Steinke 2020, Cor 9) used here before (2.72 sigma against 1.96 sigma at 95%).  1 - confidence is at
    least 2^-53 for a float confidence below 1, far above where erfc underflows.
    """
    if sigma <= 1e3:
        return float(DiscreteGaussian(0, sigma).quantile(0.5 + confidence / 2.0))
    target = 1.0 - confidence
    from scipy.special import erfc, erfcinv

    root2, root2pi = math.sqrt(2.0), math.sqrt(2.0 * math.pi)

    def tail_bound(w: int) -> float:
        m = w + 1
        return (float(erfc(m / (sigma * root2))) + 2.0 * math.exp(-(m * m) / (2.0 * sigma**2)) / (sigma * root2pi)) \
            * (1.0 + 1e-12)

    w = max(0, int(math.floor(sigma * root2 * float(erfcinv(target)))) - 2)  # the continuous quantile, less 2
    if tail_bound(w) <= target:
        return float(w)
    # the smallest w above with tail_bound(w) <= target: steps doubling from 1, then bisection (the float
    # margin can need about 1e-12 sigma units of w, and beyond 2^53 a unit no longer moves the bound)
    lo, step = w, 1
    while tail_bound(lo + step) > target:
        lo, step = lo + step, 2 * step
    hi = lo + step  # tail_bound(lo) > target >= tail_bound(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if tail_bound(mid) > target else (lo, mid)
    return float(hi)


def _grid_delta(dimension: int, units: float, grid_sigma: float, epsilon: float) -> Estimate:
    """delta(epsilon) of the grid release at this grid scale, an upper bound (the exact discrete
    Gaussian pair's sum rounded up for one value, CKS 2020 Thm 7; zCDP and CKS Cor 13 for vectors)."""
    if dimension == 1:
        log_norm = DiscreteGaussian(0, grid_sigma).log_normalizer
        return DiscreteGaussianShift(int(units), grid_sigma, log_norm).hockey_stick(epsilon)
    rho = up(Fraction(units) ** 2 / (2 * Fraction(grid_sigma) ** 2))
    return zcdp_to_profile(ZCDP(rho)).delta(epsilon)


def bisect_sigma(ok: Callable[[float], bool], guess: float, step: float = 1.0) -> float:
    """Smallest sigma with ok(sigma) (ok monotone: False below, True above), upper end of the bracket.

    The bracket is found from ``guess`` by steps of the factor 1 + ``step``, each step 8 times the last (at
    most a factor 2): a guess within a relative ``step`` of the answer (a discrete Gaussian calibrated from
    the continuous one) brackets it at once, and the bisection then needs about log2(step / 1e-12) calls of
    ``ok``.  The value returned is a point where ``ok`` was evaluated true.
    """
    s = step
    if ok(guess):
        lo, hi = guess / (1.0 + s), guess
        while ok(lo):
            hi = lo
            s = min(8.0 * s, 1.0)
            lo = lo / (1.0 + s)
            if lo < 1e-300:
                return hi
    else:
        lo, hi = guess, guess * (1.0 + s)
        while not ok(hi):
            lo = hi
            s = min(8.0 * s, 1.0)
            hi = hi * (1.0 + s)
            if hi > 1e300:
                raise UnsupportedError("no finite sigma meets this target.")
    # the upper side: a sigma where ok was verified (more noise than the boundary, never less)
    return bisect_monotone(ok, lo, hi, side="upper", rtol=1e-12)


@value_object(init=False)
class Gaussian(Mechanism):
    r"""The Gaussian mechanism, analytic calibration by default, floating-point safe.

    Noise is calibrated to the **l2** sensitivity.  The release is ``g (round(x/g) + K)`` with g a
    power of two about min(sigma, sensitivity) / 2^granularity_bits (but at least sigma / 2^15) and K
    exact discrete Gaussian noise (Canonne,
    Kamath, Steinke 2020) of scale s = sigma/g in grid units.  Rounding is accounted for: on the grid
    the l2 sensitivity is at most D = floor(Delta/g) + dimension^(1/2) units.

    For ``dimension == 1`` the dominating pair is the discrete Gaussian pair N_Z(0, s^2) vs
    N_Z(D, s^2) with D = floor(Delta/g) + 1, and every guarantee is computed from it exactly
    (CKS 2020, Thm 7 for its profile); calibration finds the smallest s that meets (epsilon, delta)
    on that exact profile.  For ``dimension > 1`` the guarantee is D^2/(2 s^2)-zCDP (CKS 2020,
    Thm 14) converted to (epsilon, delta) with CKS Cor 13 (an upper bound).

    Parameters
    ----------
    sensitivity : float, > 0 (l2 sensitivity)
    epsilon, delta : the target (give both, or ``sigma``)
    sigma : float, > 0, optional: the noise scale in output units
    calibration : "analytic" (Balle & Wang 2018; default) or "classical" (Dwork & Roth Thm 3.22, epsilon < 1)
    dimension : int >= 1
    granularity_bits : int in [4, 20]

    Examples
    --------
    >>> m = Gaussian(sensitivity=1.0, epsilon=1.0, delta=1e-5)
    >>> round(m.sigma, 2), float(m.approx_dp(1e-5).epsilon) <= 1.0
    (3.73, True)
    """

    name = "Gaussian mechanism"

    sensitivity: float  # l2 sensitivity of the query, output units
    dimension: int  # number of values released together
    grid: float  # the power-of-two grid g, output units
    units: float  # D: the l2 sensitivity on the grid after rounding, grid units (an integer for dimension 1)
    calibration: str  # "analytic" or "classical"
    grid_sigma: float  # s: the discrete Gaussian noise scale, grid units
    target_delta: float | None  # the delta of the (epsilon, delta) target it was calibrated for, if any

    def __init__(self, *, sensitivity: float, epsilon: float | None = None, delta: float | None = None,
                 sigma: float | None = None, calibration: str = "analytic", dimension: int = 1,
                 granularity_bits: int = 10) -> None:
        s2 = check_positive("sensitivity", sensitivity)
        dimension = check_count("dimension", dimension)
        if (
            isinstance(granularity_bits, bool)
            or not isinstance(granularity_bits, int)
            or not 4 <= granularity_bits <= 20
        ):
            raise InvalidArgumentError(f"granularity_bits must be an integer in [4, 20]; got {granularity_bits!r}.")
        if calibration not in ("analytic", "classical"):
            raise InvalidArgumentError(f"calibration must be 'analytic' or 'classical'; got {calibration!r}.")
        if sigma is not None:
            if epsilon is not None or delta is not None:
                raise InvalidArgumentError("give either sigma, or epsilon and delta; not both.")
            sig = check_positive("sigma", sigma)
            target = None
        else:
            if epsilon is None or delta is None:
                raise InvalidArgumentError("give epsilon and delta (to calibrate) or sigma (the noise scale).")
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise InvalidArgumentError(f"epsilon must be > 0; got {eps}.")
            dl = check_delta(delta, open_interval=True)
            if calibration == "classical":
                sig = classical_gaussian_sigma(epsilon=eps, delta=dl, sensitivity=s2)
                target = None
            else:
                sig = analytic_gaussian_sigma(epsilon=eps, delta=dl, sensitivity=s2)
                target = (eps, dl)
        # grid: fine relative to both sigma and the sensitivity (rounding costs one grid unit of
        # sensitivity), but at most 2^15 units per sigma so the exact profile sums stay cheap
        # (for vectors the rounding adds sqrt(dimension) grid units of l2 sensitivity, and no exact
        # profile sum is needed, so only the sensitivity per sqrt(dimension) sets the grid)
        if dimension == 1:
            grid = power_of_two_at_most(max(min(sig, s2) / 2.0**granularity_bits, sig / 2.0**15))
        else:
            grid = power_of_two_at_most(min(sig, s2 / math.sqrt(dimension)) / 2.0**granularity_bits)
        units = math.floor(s2 / grid) + (1 if dimension == 1 else 0)
        units_l2: float = units if dimension == 1 else s2 / grid + math.sqrt(dimension)
        grid_sigma = sig / grid
        if target is not None:
            eps, dl = target
            # start from the continuous calibration at the grid's sensitivity (sigma scales with it): the
            # discrete pair's profile is within a small relative distance of the continuous one there
            grid_sigma = bisect_sigma(lambda s: _grid_delta(dimension, units_l2, s, eps) <= dl,
                                      sig * units_l2 / s2, step=2.0**-26)
        object.__setattr__(self, "sensitivity", s2)  # frozen: set as a dataclass __init__ does
        object.__setattr__(self, "dimension", dimension)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "units", units_l2)
        object.__setattr__(self, "calibration", calibration)
        object.__setattr__(self, "grid_sigma", grid_sigma)
        object.__setattr__(self, "target_delta", None if target is None else target[1])

    @classmethod
    def calibrate(cls, *, epsilon: float, delta: float, sensitivity: float, dimension: int = 1) -> Gaussian:
        """The analytic Gaussian mechanism with the smallest noise meeting (epsilon, delta), never smaller.

        >>> round(Gaussian.calibrate(epsilon=1.0, delta=1e-5, sensitivity=1.0).sigma, 2)
        3.73
        """
        return cls(sensitivity=sensitivity, epsilon=epsilon, delta=delta, dimension=dimension)

    @property
    def sigma(self) -> float:
        """The noise scale in output units."""
        return self.grid_sigma * self.grid

    def __repr__(self) -> str:
        return f"Gaussian(sensitivity={self.sensitivity!r}, sigma={self.sigma!r}, dimension={self.dimension})"

    @property
    def pair(self) -> DominatingPair:
        if self.dimension > 1:
            raise UnsupportedError(
                "the multivariate discrete Gaussian has no one-dimensional dominating pair; its guarantees "
                "come from zCDP (rho = D^2 / (2 s^2), CKS 2020 Thm 14)."
            )
        return DominatingPair(
            P=DiscreteGaussian(0, self.grid_sigma),
            Q=DiscreteGaussian(int(self.units), self.grid_sigma),
            symmetric=True,
            unit=self.grid,
        )

    @property
    def guarantee(self) -> ApproxDP | ZCDP:
        """(epsilon, delta)-DP at the calibration target's delta (epsilon from the exact profile), else zCDP."""
        if self.target_delta is not None:
            return self.approx_dp(self.target_delta)
        return self.zcdp()

    def zcdp(self) -> ZCDP:
        """rho = D^2 / (2 s^2) on the grid (CKS 2020, Thm 14; Bun & Steinke 2016, Prop 1.6)."""
        rho = up(Fraction(self.units) ** 2 / (2 * Fraction(self.grid_sigma) ** 2))  # rounded up
        return ZCDP(Estimate(rho, kind="upper", method="discrete Gaussian zCDP (CKS Thm 14)"))

    def delta(self, epsilon: float) -> Estimate:
        return _grid_delta(self.dimension, self.units, self.grid_sigma, epsilon)

    def approx_dp(self, delta: float) -> ApproxDP:
        if self.dimension == 1:
            return Mechanism.approx_dp(self, delta)
        return zcdp_to_approx_dp(self.zcdp(), delta=delta)

    def profile(self) -> PrivacyProfile:
        if self.dimension == 1:
            return Mechanism.profile(self)
        return zcdp_to_profile(self.zcdp())

    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        """Release value + noise on the grid.

        >>> from dpkit.random import insecure_seeded
        >>> Gaussian(sensitivity=1.0, sigma=2.0).release([1.0], rng=insecure_seeded(1)).insecure
        True
        """
        s = self.grid_sigma
        return release_on_grid(
            self, value, rng=rng, confidence=confidence, norm="l2",
            sample=lambda n, gen: gaussian_noise(s, n, gen),  # exact integers as float64
            noise_half_width=lambda c: discrete_gaussian_half_width(s, c),
        )

    @property
    def noise_grid_scale(self) -> float:
        """The noise scale in grid units (sigma / grid)."""
        return self.grid_sigma
