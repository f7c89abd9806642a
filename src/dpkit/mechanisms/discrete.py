"""Mechanisms for integer-valued queries: geometric (discrete Laplace) and discrete Gaussian.

No grid is needed: integer queries plus exact integer noise are already floating-point safe.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dpkit._math import Estimate, check_delta, check_epsilon, check_positive
from dpkit.distributions import DiscreteGaussian as _DGauss
from dpkit.distributions import DiscreteLaplace as _DLap
from dpkit.divergences._closed import DiscreteGaussianShift
from dpkit.guarantees import ApproxDP, PureDP, ZCDP
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release, SymmetricInterval, as_values, check_confidence
from dpkit.mechanisms.gaussian import _bisect_sigma, discrete_gaussian_half_width
from dpkit.random import discrete_gaussian, discrete_laplace, is_insecure
from dpkit.random import default_rng as _default_rng

__all__ = ["DiscreteGaussianMechanism", "Geometric"]


def _integer_sensitivity(value: object) -> int:
    s = check_positive("sensitivity", value)
    if not float(s).is_integer():
        raise ValueError(f"sensitivity must be a positive integer for an integer-valued query; got {s}.")
    return int(s)


def _integers(value: ArrayLike) -> np.ndarray:
    arr = as_values(value)
    if not np.all(arr == np.floor(arr)):
        raise ValueError("this mechanism releases integers; got non-integer values (use Laplace or Gaussian).")
    if np.any(np.abs(arr) >= 2.0**52):
        raise ValueError("integer values must be below 2^52 in magnitude.")
    return arr.astype(np.int64)


class Geometric(Mechanism):
    r"""The geometric (discrete Laplace) mechanism for integer queries (Ghosh, Roughgarden, Sundararajan 2012).

    Adds DLap(t) noise, P(k) proportional to e^{-|k|/t}; with integer l1 sensitivity D it is exactly
    (D/t)-DP.  The pair is DLap(0, t) vs DLap(D, t).

    Examples
    --------
    >>> m = Geometric(sensitivity=1, epsilon=0.5)
    >>> m.scale, str(m.guarantee)
    (2.0, '0.5-DP')
    """

    name = "geometric mechanism"

    def __init__(self, *, sensitivity: int, epsilon: float | None = None, scale: float | None = None) -> None:
        d = _integer_sensitivity(sensitivity)
        if (epsilon is None) == (scale is None):
            raise ValueError("give exactly one of epsilon or scale.")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise ValueError(f"epsilon must be > 0; got {eps}.")
            t = d / eps
            while d / t > eps:
                t = math.nextafter(t, math.inf)
        else:
            t = check_positive("scale", scale)
        self._set("sensitivity", d)
        self._set("scale", t)

    sensitivity: int
    scale: float

    @property
    def pair(self) -> DominatingPair:
        return DominatingPair(P=_DLap(0, self.scale), Q=_DLap(self.sensitivity, self.scale), symmetric=True)

    @property
    def guarantee(self) -> PureDP:
        return self.pure_dp()

    def pure_dp(self) -> PureDP:
        return PureDP(Estimate(self.sensitivity / self.scale, kind="exact", method="D / t"))

    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        arr = _integers(value)
        c = check_confidence(confidence)
        gen = _default_rng() if rng is None else rng
        noise = np.asarray(discrete_laplace(self.scale, size=arr.size, rng=gen), dtype=np.int64).reshape(arr.shape)
        out = (arr + noise).astype(np.float64)
        q = float(_DLap(0, self.scale).quantile(0.5 + c / 2.0))
        return Release(values=out, scale=self.scale, confidence=c, interval=SymmetricInterval(out, q),
                       guarantee=self.guarantee, mechanism=self.name, insecure=is_insecure(gen))


class DiscreteGaussianMechanism(Mechanism):
    r"""The discrete Gaussian mechanism for integer queries (Canonne, Kamath, Steinke 2020).

    Adds N_Z(0, sigma^2) noise.  With integer sensitivity D it is (D^2/(2 sigma^2))-zCDP (CKS Thm 14)
    and its exact profile is that of the pair N_Z(0, sigma^2) vs N_Z(D, sigma^2) (CKS Thm 7).  Build it
    from ``sigma``, from ``rho``, or from (``epsilon``, ``delta``) (the smallest sigma whose exact
    profile meets the target, never smaller).

    Examples
    --------
    >>> m = DiscreteGaussianMechanism(sensitivity=1, rho=0.5)
    >>> m.sigma, float(m.zcdp().rho)
    (1.0, 0.5)
    """

    name = "discrete Gaussian mechanism"

    def __init__(self, *, sensitivity: int, sigma: float | None = None, rho: float | None = None,
                 epsilon: float | None = None, delta: float | None = None) -> None:
        d = _integer_sensitivity(sensitivity)
        given = [x is not None for x in (sigma, rho, epsilon)]
        if sum(given) != 1 or (epsilon is None) != (delta is None):
            raise ValueError("give exactly one of sigma, rho, or (epsilon and delta).")
        target = None
        if sigma is not None:
            s = check_positive("sigma", sigma)
        elif rho is not None:
            r = check_positive("rho", rho)
            s = d / math.sqrt(2.0 * r)
            while d * d / (2.0 * s * s) > r:
                s = math.nextafter(s, math.inf)
        else:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise ValueError(f"epsilon must be > 0; got {eps}.")
            dl = check_delta(delta, open_interval=True)
            target = dl

            def ok(sig: float) -> bool:
                ln = _DGauss(0, sig).log_normalizer
                return float(DiscreteGaussianShift(d, sig, ln).hockey_stick(eps)) <= dl

            s = _bisect_sigma(ok, d * math.sqrt(2.0 * math.log(1.25 / dl)) / min(eps, 1.0))
        self._set("sensitivity", d)
        self._set("sigma", s)
        self._set("target_delta", target)

    sensitivity: int
    sigma: float
    target_delta: float | None

    @property
    def pair(self) -> DominatingPair:
        return DominatingPair(P=_DGauss(0, self.sigma), Q=_DGauss(self.sensitivity, self.sigma), symmetric=True)

    def zcdp(self) -> ZCDP:
        return ZCDP(Estimate(self.sensitivity**2 / (2.0 * self.sigma**2), kind="upper", method="CKS 2020 Thm 14"))

    @property
    def guarantee(self) -> ApproxDP | ZCDP:
        if self.target_delta is not None:
            return self.approx_dp(self.target_delta)
        return self.zcdp()

    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        arr = _integers(value)
        c = check_confidence(confidence)
        gen = _default_rng() if rng is None else rng
        noise = np.asarray(discrete_gaussian(self.sigma, size=arr.size, rng=gen), dtype=np.int64).reshape(arr.shape)
        out = (arr + noise).astype(np.float64)
        q = discrete_gaussian_half_width(self.sigma, c)
        return Release(values=out, scale=self.sigma, confidence=c, interval=SymmetricInterval(out, q),
                       guarantee=self.guarantee, mechanism=self.name, insecure=is_insecure(gen))
