"""The Laplace mechanism, released on a power-of-two grid with exact discrete Laplace noise."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dpkit._math import Estimate, check_count, check_epsilon, check_positive
from dpkit.distributions import DiscreteLaplace
from dpkit.guarantees import ApproxDP, PrivacyProfile, PureDP, ZCDP
from dpkit.guarantees.conversions import pure_to_profile
from dpkit._value import value_object
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release
from dpkit.mechanisms._grid import power_of_two_at_most, release_on_grid
from dpkit.random import discrete_laplace
from dpkit.errors import InvalidArgumentError

__all__ = ["Laplace"]


@value_object(init=False)
class Laplace(Mechanism):
    r"""The Laplace mechanism (seed 004; Dwork & Roth 2014, Def 3.3 and Thm 3.6), floating-point safe.

    Adds noise of scale b = sensitivity / epsilon, calibrated to the **l1** sensitivity of a
    ``dimension``-valued query.  The release is ``g (round(x/g) + K)`` with g a power of two about
    2^-granularity_bits of the sensitivity per coordinate and K exact discrete Laplace noise of scale
    t = b/g in grid units (see :mod:`dpkit.mechanisms._grid`).  Rounding is accounted for: the l1
    sensitivity on the grid is D = floor(sensitivity/g) + dimension units, and t = D/epsilon, so the
    release is exactly epsilon-DP; the noise is larger than b by the factor D g / sensitivity
    (1 + dimension 2^-granularity_bits at most).

    The dominating pair is DLap(0, t) vs DLap(D, t) on the grid (exact for dimension 1; for larger
    dimensions the pure epsilon is exact and the profile is the tight one of an epsilon-DP mechanism).

    Parameters
    ----------
    sensitivity : float, > 0 (l1 sensitivity of the query)
    epsilon : float, > 0, optional (give this or ``scale``)
    scale : float, > 0, optional (b in output units)
    dimension : int >= 1, the number of values released together
    granularity_bits : int in [1, 40], grid resolution relative to the sensitivity

    Examples
    --------
    >>> m = Laplace(sensitivity=1.0, epsilon=0.5)
    >>> print(m.guarantee)
    0.5-DP
    """

    name = "Laplace mechanism"

    sensitivity: float  # l1 sensitivity of the query, output units
    dimension: int  # number of values released together
    grid: float  # the power-of-two grid g, output units
    units: int  # D: the l1 sensitivity on the grid after rounding, grid units
    grid_scale: float  # t: the discrete Laplace noise scale, grid units

    def __init__(self, *, sensitivity: float, epsilon: float | None = None, scale: float | None = None,
                 dimension: int = 1, granularity_bits: int = 10) -> None:
        delta_1 = check_positive("sensitivity", sensitivity)
        if (epsilon is None) == (scale is None):
            raise InvalidArgumentError("give exactly one of epsilon (to calibrate) or scale (the noise scale b).")
        dimension = check_count("dimension", dimension)
        if (
            isinstance(granularity_bits, bool)
            or not isinstance(granularity_bits, int)
            or not 1 <= granularity_bits <= 40
        ):
            raise InvalidArgumentError(f"granularity_bits must be an integer in [1, 40]; got {granularity_bits!r}.")
        grid = power_of_two_at_most(delta_1 / (dimension * 2.0**granularity_bits))
        units = math.floor(delta_1 / grid) + dimension  # l1 distance on the grid after rounding
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise InvalidArgumentError(f"epsilon must be > 0; got {eps}.")
            t = units / eps
            while units / t > eps:  # never a smaller noise than the target needs
                t = math.nextafter(t, math.inf)
        else:
            b = check_positive("scale", scale)
            t = b / grid
        object.__setattr__(self, "sensitivity", delta_1)  # frozen: set as a dataclass __init__ does
        object.__setattr__(self, "dimension", dimension)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "units", units)
        object.__setattr__(self, "grid_scale", t)

    @property
    def scale(self) -> float:
        """The noise scale b in output units (t * g)."""
        return self.grid_scale * self.grid

    @property
    def epsilon(self) -> float:
        return float(self.pure_dp().epsilon)

    def __repr__(self) -> str:
        return (f"Laplace(sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, scale={self.scale!r}, "
                f"dimension={self.dimension})")

    @property
    def pair(self) -> DominatingPair:
        return DominatingPair(P=DiscreteLaplace(0, self.grid_scale), Q=DiscreteLaplace(self.units, self.grid_scale),
                              symmetric=True, unit=self.grid)

    @property
    def guarantee(self) -> PureDP:
        return self.pure_dp()

    def pure_dp(self) -> PureDP:
        """epsilon = D / t: the max divergence of the grid pair (exact)."""
        return PureDP(
            Estimate(self.units / self.grid_scale, kind="exact", method="max divergence D/t of the grid pair")
        )

    def delta(self, epsilon: float) -> float:
        if self.dimension == 1:
            return Mechanism.delta(self, epsilon)
        return float(pure_to_profile(self.pure_dp()).delta(epsilon))

    def approx_dp(self, delta: float) -> ApproxDP:
        if self.dimension == 1:
            return Mechanism.approx_dp(self, delta)
        return ApproxDP(epsilon=pure_to_profile(self.pure_dp()).epsilon(delta), delta=delta)

    def profile(self) -> PrivacyProfile:
        if self.dimension == 1:
            return Mechanism.profile(self)
        return pure_to_profile(self.pure_dp())

    def zcdp(self) -> ZCDP:
        """rho = epsilon tanh(epsilon/2), the tight zCDP bound of any epsilon-DP mechanism (Steinke 2024, Thm 5).

        The continuous Laplace mechanism is known to satisfy the smaller (epsilon + e^{-epsilon} - 1)-zCDP
        (Harrison & Manurangsi 2025, arXiv 2510.25746); that is proved for the continuous law, so it is not
        claimed for the grid release.
        """
        from dpkit.guarantees.conversions import pure_to_zcdp

        return pure_to_zcdp(self.pure_dp())

    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        """Release value + noise on the grid.

        >>> from dpkit.random import insecure_seeded
        >>> r = Laplace(sensitivity=1.0, epsilon=1.0).release(42.0, rng=insecure_seeded(7))
        >>> r.insecure, round(r.scale, 3)
        (True, 1.001)
        """
        t = self.grid_scale
        return release_on_grid(
            self, value, rng=rng, confidence=confidence, norm="l1",
            sample=lambda n, gen: discrete_laplace(t, size=n, rng=gen),
            noise_half_width=lambda c: float(DiscreteLaplace(0, t).quantile(0.5 + c / 2.0)),
        )

    @property
    def noise_grid_scale(self) -> float:
        """The noise scale in grid units (t)."""
        return self.grid_scale
