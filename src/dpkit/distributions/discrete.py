"""Integer-valued families: discrete Laplace (two-sided geometric), discrete Gaussian, Bernoulli."""

from __future__ import annotations

import math
from dataclasses import InitVar, field

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpkit._math import check_positive, check_probability
from dpkit._value import Lazy, value_object
from dpkit.distributions._base import Array, DiscreteDistribution, as_array, check_size
from dpkit.random import resolve_rng
from dpkit.distributions.theta import log_theta, second_moment
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["Bernoulli", "DiscreteGaussian", "DiscreteLaplace"]

#: Largest table the discrete Gaussian builds for its cdf/quantile (entries).
_MAX_TABLE = 20_000_001


def _check_integer(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)):
        raise ArgumentTypeError(f"{name} must be an integer; got {type(value).__name__} {value!r}.")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise InvalidArgumentError(f"{name} must be an integer; got {value}.")
    return int(value)


def _log_tanh(x: float) -> float:
    # ln tanh(x) = ln(1 - e^{-2x}) - ln(1 + e^{-2x}), accurate for small and large x
    e = math.exp(-2.0 * x)
    return math.log(-math.expm1(-2.0 * x)) - math.log1p(e)


@value_object
class DiscreteLaplace(DiscreteDistribution):
    r"""Discrete Laplace (two-sided geometric) on the integers: :math:`p(k) \propto e^{-|k-m|/t}`.

    Normalised, :math:`p(k) = \tanh(1/(2t))\,e^{-|k-m|/t} = \frac{1-r}{1+r} r^{|k-m|}`, r = e^{-1/t}
    (Canonne, Kamath, Steinke 2020, arXiv 2004.00010v5, Def 2's Lap_Z(t); Ghosh, Roughgarden,
    Sundararajan 2012 for the geometric mechanism).

    Parameters
    ----------
    loc : int
    scale : float, finite, > 0 (t)

    Examples
    --------
    >>> round(float(DiscreteLaplace(loc=0, scale=1.0).pmf(0)), 12)
    0.46211715726
    """

    loc: int = 0
    scale: float = 1.0
    _log_norm: float = field(init=False, repr=False, compare=False)  # ln tanh(1/(2t)), the log of p(loc)
    _log1p_r: float = field(init=False, repr=False, compare=False)  # ln(1 + r), r = e^{-1/t}

    def __post_init__(self) -> None:
        loc = _check_integer("loc", self.loc)
        scale = check_positive("scale", self.scale)
        if loc is not self.loc or scale is not self.scale:  # a float or NumPy scalar given: store int, float
            object.__setattr__(self, "loc", loc)
            object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "_log_norm", _log_tanh(0.5 / scale))
        object.__setattr__(self, "_log1p_r", math.log1p(math.exp(-1.0 / scale)))

    def log_density(self, x: ArrayLike) -> Array:
        k = as_array(x) - self.loc
        out = self._log_norm - np.abs(k) / self.scale
        return np.where(k == np.floor(k), out, -np.inf)

    def cdf(self, x: ArrayLike) -> Array:
        m = np.floor(as_array(x) - self.loc)
        neg = np.exp(np.minimum(m, 0.0) / self.scale - self._log1p_r)  # r^{-m}/(1+r)
        pos = 1.0 - np.exp(-(np.maximum(m, 0.0) + 1.0) / self.scale - self._log1p_r)
        return np.where(m < 0, neg, pos)

    def sf(self, x: ArrayLike) -> Array:
        return self.cdf(2 * self.loc - np.floor(as_array(x)) - 1.0)

    def quantile(self, u: ArrayLike) -> Array:
        u = _unit(u)
        t = self.scale
        with np.errstate(divide="ignore", invalid="ignore"):
            neg = np.ceil(t * (np.log(u) + self._log1p_r))
            pos = np.ceil(-t * (np.log1p(-u) + self._log1p_r) - 1.0)
        lower_mass = math.exp(-1.0 / t - self._log1p_r)  # F(-1) = r/(1+r)
        k = np.where(u <= lower_mass, neg, np.maximum(pos, 0.0)) + self.loc
        return _fix_quantile(self, k, u)

    @property
    def mean(self) -> float:
        return float(self.loc)

    @property
    def variance(self) -> float:
        r = math.exp(-1.0 / self.scale)
        return 2.0 * r / math.expm1(-1.0 / self.scale) ** 2

    @property
    def support_bounds(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> Array:
        gen = resolve_rng(rng)
        p = -math.expm1(-1.0 / self.scale)
        size = check_size(size)
        g1 = gen.geometric(p, size=size) - 1
        g2 = gen.geometric(p, size=size) - 1
        return (g1 - g2 + self.loc).astype(np.float64)


@value_object
class DiscreteGaussian(DiscreteDistribution):
    r"""Discrete Gaussian N_Z(loc, sigma^2): :math:`p(k) = e^{-(k-m)^2/(2\sigma^2)}/\theta_\sigma(0)`.

    Canonne, Kamath, Steinke 2020 (arXiv 2004.00010v5), Definition 1.  ``sigma`` is the scale
    parameter (the variance is slightly below sigma^2; see :attr:`variance`).  The cdf and quantile
    use an exact table of the masses, built once, for sigma up to about 5e5.

    Parameters
    ----------
    loc : int
    sigma : float, finite, > 0

    Examples
    --------
    >>> round(float(DiscreteGaussian(loc=0, sigma=1.0).pmf(0)), 12)
    0.398942278267
    """

    loc: int = 0
    sigma: float = 1.0
    log_normalizer: float = field(init=False, repr=False, compare=False)  # ln theta_sigma(0)
    # (half, cumulative masses on -half..half), built on first use (see _table)
    _cdf_cache: Lazy[tuple[int, Array]] = field(default_factory=Lazy, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        loc = _check_integer("loc", self.loc)
        sigma = check_positive("sigma", self.sigma)
        if loc is not self.loc or sigma is not self.sigma:  # a float or NumPy scalar given: store int, float
            object.__setattr__(self, "loc", loc)
            object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "log_normalizer", log_theta(sigma, 0.0))

    def log_density(self, x: ArrayLike) -> Array:
        k = as_array(x) - self.loc
        out = -(k * k) / (2.0 * self.sigma**2) - self.log_normalizer
        return np.where(k == np.floor(k), out, -np.inf)

    @property
    def _table(self) -> tuple[int, Array]:
        """(half, cumulative masses on -half..half): the exact table behind cdf and quantile, read-only,
        built on first use and kept."""
        return self._cdf_cache.get(self._build_table)

    def _build_table(self) -> tuple[int, Array]:
        half = int(math.ceil(39.0 * self.sigma)) + 2
        if 2 * half + 1 > _MAX_TABLE:
            from dpkit.errors import UnsupportedError

            raise UnsupportedError(
                f"the discrete Gaussian cdf/quantile tables support sigma up to ~5e5; got "
                f"sigma={self.sigma}. Use the Gaussian approximation knowingly, or a smaller sigma."
            )
        k = np.arange(-half, half + 1, dtype=np.float64)
        pmf = np.exp(-(k * k) / (2.0 * self.sigma**2) - self.log_normalizer)
        cum = np.cumsum(pmf)
        cum.flags.writeable = False  # a value object: its cached table is read-only too
        return (half, cum)

    def cdf(self, x: ArrayLike) -> Array:
        m = np.floor(as_array(x) - self.loc)
        half, cum = self._table
        idx = np.clip(m + half, -1, 2 * half).astype(np.int64)
        out = np.where(idx < 0, 0.0, cum[np.maximum(idx, 0)])
        return np.where(m >= half, 1.0, out)

    def sf(self, x: ArrayLike) -> Array:
        return self.cdf(2 * self.loc - np.floor(as_array(x)) - 1.0)

    def quantile(self, u: ArrayLike) -> Array:
        u = _unit(u)
        half, cum = self._table
        idx = np.searchsorted(cum, u, side="left")
        k = np.where(u <= 0, -np.inf, idx - half + self.loc).astype(np.float64)
        return np.where(u >= 1, np.inf, k)

    @property
    def mean(self) -> float:
        return float(self.loc)

    @property
    def variance(self) -> float:
        return second_moment(self.sigma)

    @property
    def support_bounds(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> Array:
        # Rejection from a discrete Laplace proposal (CKS 2020, Algorithm 3), in floating point:
        # fine for simulation; releases use dpkit.random's exact sampler.
        gen = resolve_rng(rng)
        size = check_size(size)
        n = int(np.prod(size)) if isinstance(size, tuple) else int(size)
        t = math.floor(self.sigma) + 1.0
        proposal = DiscreteLaplace(0, t)
        out = np.empty(n, dtype=np.float64)
        filled = 0
        while filled < n:
            need = n - filled
            y = proposal.sample(int(need * 1.6) + 16, rng=gen)
            log_acc = -((np.abs(y) - self.sigma**2 / t) ** 2) / (2.0 * self.sigma**2)
            keep = y[np.log(gen.random(y.size)) < log_acc][:need]
            out[filled : filled + keep.size] = keep
            filled += keep.size
        return (out + self.loc).reshape(size)


@value_object
class Bernoulli(DiscreteDistribution):
    r"""Bernoulli(p) on {0, 1}; randomized response with parameter epsilon is
    Bernoulli(e^eps/(1+e^eps)) against Bernoulli(1/(1+e^eps)) (Dwork & Roth 2014, §3.2).

    Parameters
    ----------
    p : float in [0, 1], the probability of 1

    Examples
    --------
    >>> Bernoulli(p=0.25).pmf([0, 1])
    array([0.75, 0.25])
    """

    p: float
    #: 1 - p, given separately by :meth:`from_log_odds` to keep it accurate when it is tiny (private)
    _complement: InitVar[float | None] = field(default=None, kw_only=True)
    _q: float = field(init=False, repr=False, compare=False)  # 1 - p

    def __post_init__(self, _complement: float | None) -> None:
        p = check_probability(self.p, "p")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "_q", 1.0 - p if _complement is None else _complement)

    @classmethod
    def from_log_odds(cls, log_odds: float) -> Bernoulli:
        """Bernoulli(1/(1 + e^{-x})), keeping both masses accurate even when one is below 1e-16.

        >>> bool(Bernoulli.from_log_odds(-50.0).pmf(1) > 0)
        True
        """
        from dpkit._math import check_finite

        x = check_finite("log_odds", log_odds)
        return cls(float(special.expit(x)), _complement=float(special.expit(-x)))

    @classmethod
    def randomized_response(cls, epsilon: float, *, truth: int = 1) -> Bernoulli:
        """The output law of binary randomized response on input ``truth`` (0 or 1)."""
        from dpkit._math import check_epsilon

        eps = check_epsilon(epsilon)
        if truth not in (0, 1):
            raise InvalidArgumentError(f"truth must be 0 or 1; got {truth!r}.")
        return cls.from_log_odds(eps if truth == 1 else -eps)

    def log_density(self, x: ArrayLike) -> Array:
        k = as_array(x)
        with np.errstate(divide="ignore"):
            l1 = math.log(self.p) if self.p > 0 else -math.inf
            l0 = math.log(self._q) if self._q > 0 else -math.inf
        return np.where(k == 1, l1, np.where(k == 0, l0, -np.inf))

    def cdf(self, x: ArrayLike) -> Array:
        k = as_array(x)
        return np.where(k < 0, 0.0, np.where(k < 1, self._q, 1.0))

    def quantile(self, u: ArrayLike) -> Array:
        u = _unit(u)
        return np.where(u <= self._q, 0.0, 1.0)

    @property
    def mean(self) -> float:
        return self.p

    @property
    def variance(self) -> float:
        return self.p * self._q

    @property
    def support_bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> Array:
        return (resolve_rng(rng).random(check_size(size)) < self.p).astype(np.float64)

    def to_finite(self) -> Finite:
        """The same law as a :class:`~dpkit.distributions.Finite` on support [0, 1]."""
        from dpkit.distributions.finite import Finite

        return Finite([self._q, self.p], support=[0, 1])


def _unit(u: ArrayLike) -> Array:
    arr = as_array(u)
    if not np.all((arr >= 0) & (arr <= 1)):
        raise InvalidArgumentError("quantile levels u must lie in [0, 1] (NaN is refused).")
    return arr


def _fix_quantile(dist: DiscreteDistribution, k: Array, u: Array) -> Array:
    """Correct a closed-form integer quantile by one step either way (floating-point ceil)."""
    k = np.where(dist.cdf(k) < u, k + 1, k)
    k = np.where(dist.cdf(k - 1) >= u, k - 1, k)
    k = np.where(u <= 0, -np.inf, k)
    return np.where(u >= 1, np.inf, k)


from dpkit.distributions.finite import Finite  # noqa: E402  (type reference for to_finite)
