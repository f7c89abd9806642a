"""The common surface of dpkit's distributions.

Contract: a :class:`Distribution` is an immutable value on the real line (or, for
:class:`~dpkit.distributions.Finite`, on an explicit finite support of any labels).  Each family is a
frozen, slotted dataclass (:func:`dpkit._value.value_object`): its parameters are its fields, checked
in ``__post_init__``; equality, hashing and ``repr`` come from those fields; values derived from them
are fields set once in ``__post_init__``, and tables built on first use live in a
:class:`~dpkit._value.Lazy` field.  Every family
offers ``log_density``/``density`` (pdf for continuous families, pmf for discrete ones, also under
their scipy names), ``cdf``, ``sf``, ``quantile`` where meaningful, ``mean``, ``variance`` and
vectorised ``sample(size, rng=...)``.  Parameters are validated at construction: invalid values
raise :class:`ValueError`, never produce NaN later.

Sampling here draws from the NumPy generator passed in; with ``rng=None`` the cryptographically
secure default of :mod:`dpkit.random` is used.  These samplers are for simulation and testing:
releases go through :mod:`dpkit.mechanisms`, whose samplers are safe on floating point.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from dpkit.errors import InvalidArgumentError

Array = NDArray[np.float64]


def check_size(size: int | tuple[int, ...]) -> int | tuple[int, ...]:
    """Validate a sample size (non-negative integer or tuple of them)."""
    dims = size if isinstance(size, tuple) else (size,)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise InvalidArgumentError(f"size must be a non-negative integer or a tuple of them; got {size!r}.")
    return size


class Distribution(ABC):
    """Base class of dpkit's distributions (see the module docstring for the contract).

    Holds no state (``__slots__ = ()``): the concrete families are ``@value_object`` dataclasses that
    declare their fields, so they have slots and no instance ``__dict__``.
    """

    __slots__ = ()

    #: True for distributions with a probability mass function.
    discrete: ClassVar[bool]

    @abstractmethod
    def log_density(self, x: ArrayLike) -> Array:
        """Natural log of the pdf (continuous) or pmf (discrete); ``-inf`` off the support."""

    def density(self, x: ArrayLike) -> Array:
        """The pdf (continuous) or pmf (discrete)."""
        return np.exp(self.log_density(x))

    @abstractmethod
    def cdf(self, x: ArrayLike) -> Array:
        """P(X <= x)."""

    def sf(self, x: ArrayLike) -> Array:
        """P(X > x) (computed directly where cancellation would lose accuracy)."""
        return 1.0 - self.cdf(x)

    @abstractmethod
    def quantile(self, u: ArrayLike) -> Array:
        """The generalised inverse cdf: the smallest x with cdf(x) >= u, for u in [0, 1]."""

    @property
    @abstractmethod
    def mean(self) -> float:
        """Expectation."""

    @property
    @abstractmethod
    def variance(self) -> float:
        """Variance."""

    @abstractmethod
    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> Array:
        """Draw ``size`` independent samples (vectorised)."""

    @property
    @abstractmethod
    def support_bounds(self) -> tuple[float, float]:
        """Smallest closed interval containing the support (may be infinite)."""


class ContinuousDistribution(Distribution):
    """A distribution with a density on the real line."""

    __slots__ = ()
    discrete: ClassVar[bool] = False

    def pdf(self, x: ArrayLike) -> Array:
        """Probability density."""
        return self.density(x)

    def logpdf(self, x: ArrayLike) -> Array:
        """Log of the probability density."""
        return self.log_density(x)


class DiscreteDistribution(Distribution):
    """A distribution with a probability mass function on the integers (or a finite support)."""

    __slots__ = ()
    discrete: ClassVar[bool] = True

    def pmf(self, x: ArrayLike) -> Array:
        """Probability mass."""
        return self.density(x)

    def logpmf(self, x: ArrayLike) -> Array:
        """Log of the probability mass."""
        return self.log_density(x)


def as_array(x: ArrayLike) -> Array:
    """Convert once at the boundary to a float64 array."""
    return np.asarray(x, dtype=np.float64)
