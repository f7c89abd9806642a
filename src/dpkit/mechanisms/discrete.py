"""Mechanisms for integer-valued queries: geometric (discrete Laplace) and discrete Gaussian.

No grid is needed: integer queries plus exact integer noise are already floating-point safe.  The
release path is the grid release of :mod:`dpkit.mechanisms._grid` with g = 1: every integer is
released, however large (exactly, with Python integers beyond 2^62, and integers that a double
cannot hold are taken exactly when given as integers), the released double is the exact noisy
integer rounded to the nearest double (post-processing), and no failure or message depends on the
value.  Only the form of the input is refused: NaN, infinities and non-integers (the message names
no value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field

import numpy as np
from numpy.typing import ArrayLike

from dpkit._math import Estimate, check_count, check_delta, check_epsilon, check_positive
from dpkit.distributions import DiscreteGaussian as _DGauss
from dpkit.distributions import DiscreteLaplace as _DLap
from dpkit.divergences.pairs import DiscreteGaussianShift
from dpkit.errors import InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PrivacyProfile, PureDP, RenyiDP, ZCDP
from dpkit._value import value_object
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release, check_confidence
from dpkit.mechanisms._discrete_gaussian_vector import WorstShiftProfile, max_square_norm, shift_classes
from dpkit.mechanisms._grid import NoiseSampler, grid_interval, is_integral, noisy_grid, release_values
from dpkit.mechanisms.gaussian import bisect_sigma, analytic_gaussian_sigma, discrete_gaussian_half_width
from dpkit.random import discrete_gaussian, discrete_laplace, is_insecure, resolve_rng

__all__ = ["DiscreteGaussianMechanism", "Geometric"]


def _integer_sensitivity(value: object) -> int:
    s = check_positive("sensitivity", value)
    if not float(s).is_integer():
        raise InvalidArgumentError(f"sensitivity must be a positive integer for an integer-valued query; got {s}.")
    return int(s)


def _release_integers(mechanism: Mechanism, value: ArrayLike, rng: np.random.Generator | None, confidence: float,
                      sample: NoiseSampler, half_width: Callable[[float], float], scale: float,
                      dimension: int | None) -> Release:
    """The shared release path: exact integers plus integer noise (module docstring)."""
    floats, exact = release_values(value)
    c = check_confidence(confidence)
    if dimension is not None and floats.size != dimension:
        raise InvalidArgumentError(f"this mechanism releases {dimension} value(s); got {floats.size}. Build it with "
                         "dimension=<number of values> and the l2 sensitivity of the whole vector.")
    if not is_integral(floats, exact):
        raise InvalidArgumentError(
            "this mechanism releases integers; got a non-integer value (use Laplace or Gaussian). "
            "This message names no value or position."
        )
    gen = resolve_rng(rng)
    insecure = is_insecure(gen)  # before and after: a rewind since the last use is seen even on a replay
    noise = np.asarray(sample(floats.size, gen), dtype=np.int64).reshape(-1)
    insecure = is_insecure(gen) or insecure
    out, inexact = noisy_grid(floats, exact, 1.0, noise)
    del noise
    out = out.reshape(floats.shape)
    return Release(values=out, scale=scale, confidence=c, interval=grid_interval(out, half_width(c), inexact, 1.0),
                   guarantee=mechanism.guarantee, mechanism=mechanism.name, insecure=insecure)


@value_object(init=False)
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

    sensitivity: int  # D, the integer l1 sensitivity
    scale: float  # t, the discrete Laplace noise scale

    def __init__(self, *, sensitivity: int, epsilon: float | None = None, scale: float | None = None) -> None:
        d = _integer_sensitivity(sensitivity)
        if (epsilon is None) == (scale is None):
            raise InvalidArgumentError("give exactly one of epsilon or scale.")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise InvalidArgumentError(f"epsilon must be > 0; got {eps}.")
            t = d / eps
            while d / t > eps:
                t = math.nextafter(t, math.inf)
        else:
            t = check_positive("scale", scale)
        object.__setattr__(self, "sensitivity", d)  # frozen: set as a dataclass __init__ does
        object.__setattr__(self, "scale", t)

    @property
    def pair(self) -> DominatingPair:
        return DominatingPair(P=_DLap(0, self.scale), Q=_DLap(self.sensitivity, self.scale), symmetric=True)

    @property
    def guarantee(self) -> PureDP:
        return self.pure_dp()

    def pure_dp(self) -> PureDP:
        return PureDP(Estimate(self.sensitivity / self.scale, kind="exact", method="D / t"))

    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        """Release integer value(s) plus DLap(t) noise; any number of values (l1 sensitivity of the vector).

        >>> from dpkit.random import insecure_seeded
        >>> Geometric(sensitivity=1, epsilon=1.0).release(2**70, rng=insecure_seeded(3)).value > 1e21
        True
        """
        t = self.scale
        return _release_integers(
            self, value, rng, confidence,
            sample=lambda n, gen: discrete_laplace(t, size=n, rng=gen),
            half_width=lambda c: float(_DLap(0, t).quantile(0.5 + c / 2.0)), scale=t, dimension=None,
        )


@value_object(init=False)
class DiscreteGaussianMechanism(Mechanism):
    r"""The discrete Gaussian mechanism for integer queries (Canonne, Kamath, Steinke 2020).

    Adds independent :math:`N_{\mathbb Z}(0, \sigma^2)` noise to each of ``dimension`` integer values.
    Build it from ``sigma``, from ``rho``, or from (``epsilon``, ``delta``) (the smallest sigma whose
    profile meets the target, never smaller).

    * ``dimension == 1`` (integer sensitivity D): the pair is :math:`N_{\mathbb Z}(0, \sigma^2)` vs
      :math:`N_{\mathbb Z}(D, \sigma^2)`, its profile exact (CKS Thm 7), and it is
      :math:`D^2/(2\sigma^2)`-zCDP (CKS Thm 14).
    * ``dimension > 1`` (``sensitivity`` is the **l2** sensitivity :math:`\Delta` of the whole vector,
      any positive real): every integer shift v with :math:`\|v\|_2 \le \Delta` is a possible
      neighbour, and the worst one is in general *not* the one-dimensional shift :math:`\Delta`
      (issue 14 item 8: for :math:`\Delta = 2` in 4 dimensions, (1, 1, 1, 1) is worse than
      (2, 0, 0, 0) at small sigma).  :meth:`delta` is the exact maximum over all of them where that
      is affordable, never above the zCDP bound :math:`\rho = N/(2\sigma^2)`,
      :math:`N = \lfloor\Delta^2\rfloor` (see :mod:`dpkit.mechanisms._discrete_gaussian_vector`),
      and calibration meets (epsilon, delta) for that worst case.  There is no single dominating
      pair (``pair`` raises) unless every shift reduces to one one-dimensional shift (N = 1).

    Parameters
    ----------
    sensitivity : int (dimension 1) or float (l2, dimension > 1), > 0
    sigma, rho, (epsilon and delta) : give exactly one
    dimension : int >= 1, the number of values released together

    Examples
    --------
    >>> m = DiscreteGaussianMechanism(sensitivity=1, rho=0.5)
    >>> m.sigma, float(m.zcdp().rho)
    (1.0, 0.5)
    >>> v = DiscreteGaussianMechanism(sensitivity=2, epsilon=12, delta=1e-5, dimension=4)
    >>> v.delta(12.0) <= 1e-5 < DiscreteGaussianMechanism(sensitivity=2, sigma=v.sigma * 0.999, dimension=4).delta(12.0)
    True
    """

    name = "discrete Gaussian mechanism"

    sensitivity: float  # integer D (dimension 1) or the l2 sensitivity of the vector
    dimension: int  # number of values released together
    square_norm: int  # N: the largest squared l2 norm of an integer shift within the sensitivity
    shift: int | None  # the one-dimensional shift every neighbour reduces to, if there is one
    sigma: float  # the noise scale
    target_delta: float | None  # the delta of the (epsilon, delta) target it was calibrated for, if any
    # the exact worst-shift profile where no single shift dominates (it caches its sums); not part of the value
    _worst: WorstShiftProfile | None = field(repr=False, compare=False)

    def __init__(self, *, sensitivity: float, sigma: float | None = None, rho: float | None = None,
                 epsilon: float | None = None, delta: float | None = None, dimension: int = 1) -> None:
        dimension = check_count("dimension", dimension)
        d: float = _integer_sensitivity(sensitivity) if dimension == 1 else check_positive("sensitivity", sensitivity)
        n = int(d) ** 2 if dimension == 1 else max_square_norm(d)
        if n == 0:
            raise InvalidArgumentError(
                f"sensitivity={d} is below 1: no integer vector is that close; nothing to protect."
            )
        given = [x is not None for x in (sigma, rho, epsilon)]
        if sum(given) != 1 or (epsilon is None) != (delta is None):
            raise InvalidArgumentError("give exactly one of sigma, rho, or (epsilon and delta).")
        classes = shift_classes(n, dimension)
        single = classes is not None and len(classes) == 1 and len(classes[0]) == 1
        shift = classes[0][0] if single and classes is not None else None
        target = None
        if sigma is not None:
            s = check_positive("sigma", sigma)
        elif rho is not None:
            r = check_positive("rho", rho)
            s = math.sqrt(n / (2.0 * r))
            while n / (2.0 * s * s) > r:
                s = math.nextafter(s, math.inf)
        else:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise InvalidArgumentError(f"epsilon must be > 0; got {eps}.")
            dl = check_delta(delta, open_interval=True)
            target = dl
            if shift is not None:
                def ok(sig: float) -> bool:
                    ln = _DGauss(0, sig).log_normalizer
                    return float(DiscreteGaussianShift(shift, sig, ln).hockey_stick(eps)) <= dl

                s = bisect_sigma(ok, shift * math.sqrt(2.0 * math.log(1.25 / dl)) / min(eps, 1.0))
            else:
                s = bisect_sigma(lambda sig: WorstShiftProfile(n, dimension, sig).meets(eps, dl),
                                  analytic_gaussian_sigma(epsilon=eps, delta=dl, sensitivity=math.sqrt(n)))
        object.__setattr__(self, "sensitivity", d)  # frozen: set as a dataclass __init__ does
        object.__setattr__(self, "dimension", dimension)
        object.__setattr__(self, "square_norm", n)
        object.__setattr__(self, "shift", shift)
        object.__setattr__(self, "sigma", s)
        object.__setattr__(self, "target_delta", target)
        object.__setattr__(self, "_worst", None if shift is not None else WorstShiftProfile(n, dimension, s))

    def __repr__(self) -> str:
        return (f"DiscreteGaussianMechanism(sensitivity={self.sensitivity!r}, sigma={self.sigma!r}, "
                f"dimension={self.dimension})")

    @property
    def pair(self) -> DominatingPair:
        """N_Z(0, sigma^2) vs N_Z(D, sigma^2); for vectors only where every shift reduces to one (N = 1)."""
        if self.shift is None:
            raise UnsupportedError(
                f"the discrete Gaussian on {self.dimension} integer values with l2 sensitivity {self.sensitivity} "
                "has no single dominating pair: the worst of several integer shifts sets each delta. Use delta(), "
                "approx_dp(), profile(), zcdp() or rdp()."
            )
        return DominatingPair(P=_DGauss(0, self.sigma), Q=_DGauss(self.shift, self.sigma), symmetric=True)

    def zcdp(self) -> ZCDP:
        """rho = N / (2 sigma^2), N the largest squared l2 norm of an integer shift (CKS Thm 14; additivity)."""
        return ZCDP(Estimate(self.square_norm / (2.0 * self.sigma**2), kind="upper", method="CKS 2020 Thm 14"))

    def rdp(self) -> RenyiDP:
        if self._worst is None:
            return Mechanism.rdp(self)
        rho = float(self.zcdp().rho)
        return RenyiDP(curve=lambda a: a * rho, description=f"Rényi curve of {self.name} (from {rho:.6g}-zCDP)")

    def delta(self, epsilon: float) -> float:
        """The smallest delta at epsilon over every integer shift (an upper bound for vectors, see the class)."""
        if self._worst is None:
            return Mechanism.delta(self, epsilon)
        return self._worst.delta(check_epsilon(epsilon))

    def approx_dp(self, delta: float) -> ApproxDP:
        if self._worst is None:
            return Mechanism.approx_dp(self, delta)
        dl = check_delta(delta, open_interval=True)
        eps = self._worst.epsilon(dl)
        return ApproxDP(epsilon=Estimate(eps, kind="upper", method="worst integer shift (exact sums) or zCDP"),
                        delta=dl)

    def profile(self) -> PrivacyProfile:
        if self._worst is None:
            return Mechanism.profile(self)
        worst = self._worst
        return PrivacyProfile(delta_function=lambda e: worst.delta(float(e)), epsilon_function=worst.epsilon,
                              kind="upper", description=f"profile of {self.name}, worst integer shift")

    @property
    def guarantee(self) -> ApproxDP | ZCDP:
        if self.target_delta is not None:
            return self.approx_dp(self.target_delta)
        return self.zcdp()

    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        """Release ``dimension`` integer value(s) plus independent discrete Gaussian noise.

        >>> from dpkit.random import insecure_seeded
        >>> DiscreteGaussianMechanism(sensitivity=1, sigma=2.0).release(7, rng=insecure_seeded(1)).insecure
        True
        """
        s = self.sigma
        return _release_integers(
            self, value, rng, confidence,
            sample=lambda n, gen: discrete_gaussian(s, size=n, rng=gen),
            half_width=lambda c: discrete_gaussian_half_width(s, c), scale=s, dimension=self.dimension,
        )
