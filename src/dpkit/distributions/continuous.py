"""The Laplace and Gaussian distributions (continuous, on the real line)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpkit._math import check_finite, check_positive
from dpkit._value import value_object
from dpkit.distributions._base import Array, ContinuousDistribution, as_array, check_size
from dpkit.random import resolve_rng
from dpkit.errors import InvalidArgumentError

__all__ = ["Gaussian", "Laplace"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@value_object
class Laplace(ContinuousDistribution):
    r"""Laplace distribution Lap(loc, scale) with density :math:`e^{-|x-m|/b}/(2b)`.

    ``scale`` is b (the standard deviation is :math:`\sqrt2\,b`), as in Dwork & Roth (2014) Def 3.2
    and seed 004's Laplace mechanism.

    Parameters
    ----------
    loc : float, finite
    scale : float, finite, > 0

    Examples
    --------
    >>> Laplace(loc=0.0, scale=1.0).cdf(0.0)
    array(0.5)
    """

    loc: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        loc, scale = check_finite("loc", self.loc), check_positive("scale", self.scale)
        if loc is not self.loc or scale is not self.scale:  # an int or NumPy scalar given: store the float
            object.__setattr__(self, "loc", loc)
            object.__setattr__(self, "scale", scale)

    def log_density(self, x: ArrayLike) -> Array:
        z = np.abs(as_array(x) - self.loc) / self.scale
        return -z - math.log(2.0 * self.scale)

    def cdf(self, x: ArrayLike) -> Array:
        z = (as_array(x) - self.loc) / self.scale
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), -0.5 * np.expm1(-np.maximum(z, 0.0)) + 0.5)

    def sf(self, x: ArrayLike) -> Array:
        return self.cdf(2.0 * self.loc - as_array(x))

    def quantile(self, u: ArrayLike) -> Array:
        u = _check_unit(u)
        with np.errstate(divide="ignore"):
            lo = self.loc + self.scale * np.log(2.0 * np.minimum(u, 0.5))
            hi = self.loc - self.scale * np.log(2.0 * (1.0 - np.maximum(u, 0.5)))
        return np.where(u < 0.5, lo, hi)

    @property
    def mean(self) -> float:
        return self.loc

    @property
    def variance(self) -> float:
        return 2.0 * self.scale**2

    @property
    def support_bounds(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> Array:
        return resolve_rng(rng).laplace(self.loc, self.scale, size=check_size(size))


@value_object
class Gaussian(ContinuousDistribution):
    r"""Gaussian distribution N(loc, sigma^2).

    Parameters
    ----------
    loc : float, finite
    sigma : float, finite, > 0 (the standard deviation)

    Examples
    --------
    >>> float(Gaussian(loc=0.0, sigma=2.0).variance)
    4.0
    """

    loc: float = 0.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        loc, sigma = check_finite("loc", self.loc), check_positive("sigma", self.sigma)
        if loc is not self.loc or sigma is not self.sigma:  # an int or NumPy scalar given: store the float
            object.__setattr__(self, "loc", loc)
            object.__setattr__(self, "sigma", sigma)

    def log_density(self, x: ArrayLike) -> Array:
        z = (as_array(x) - self.loc) / self.sigma
        return -0.5 * z * z - _LOG_SQRT_2PI - math.log(self.sigma)

    def cdf(self, x: ArrayLike) -> Array:
        p: Array = special.ndtr((as_array(x) - self.loc) / self.sigma)  # scipy ships no types
        return p

    def sf(self, x: ArrayLike) -> Array:
        p: Array = special.ndtr((self.loc - as_array(x)) / self.sigma)
        return p

    def quantile(self, u: ArrayLike) -> Array:
        x: Array = self.loc + self.sigma * special.ndtri(_check_unit(u))
        return x

    @property
    def mean(self) -> float:
        return self.loc

    @property
    def variance(self) -> float:
        return self.sigma**2

    @property
    def support_bounds(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> Array:
        return resolve_rng(rng).normal(self.loc, self.sigma, size=check_size(size))


def _check_unit(u: ArrayLike) -> Array:
    arr = as_array(u)
    if not np.all((arr >= 0) & (arr <= 1)):
        raise InvalidArgumentError("quantile levels u must lie in [0, 1] (NaN is refused).")
    return arr
