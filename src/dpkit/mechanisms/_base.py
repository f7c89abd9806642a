"""The mechanism contract: a mechanism is a dominating pair plus a way to release values.

Contract
--------
* A :class:`Mechanism` is an immutable value built from (sensitivity, epsilon[, delta]) or from its
  noise scale.  It knows nothing of budgets (that is :mod:`dpkit.accounting`).
* ``pair`` is a :class:`DominatingPair` (P, Q) of the laws the mechanism *actually releases* on a
  worst-case pair of neighbouring inputs (for grid-snapped releases: the laws on the grid, in grid
  units, rounding included).  Every guarantee is computed from that pair by :mod:`dpkit.divergences`
  (never typed in by hand): :meth:`Mechanism.pure_dp`, :meth:`Mechanism.approx_dp`,
  :meth:`Mechanism.profile`, :meth:`Mechanism.rdp`, :meth:`Mechanism.zcdp`,
  :meth:`Mechanism.wasserstein_dp`.  Both directions (P||Q and Q||P) are taken unless the pair is
  symmetric.
* ``release(value, rng=None)`` validates the input (NaN and infinities are refused, never noised),
  draws noise from the cryptographically secure generator unless an ``rng`` is passed, and returns a
  :class:`Release`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate
from dpkit.distributions import Distribution
from dpkit.divergences import approx_max_divergence, hockey_stick, max_divergence, renyi, wasserstein
from dpkit.errors import UnsupportedError
from dpkit.guarantees import ApproxDP, PrivacyProfile, PureDP, RenyiDP, WassersteinDP, ZCDP

__all__ = ["DominatingPair", "Mechanism", "Release", "SymmetricInterval"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DominatingPair:
    """Two laws whose divergences bound those of every neighbouring pair of a mechanism's outputs.

    ``unit`` converts the pair's coordinates to output units (grid-snapped mechanisms work in grid
    units); it only matters for the Wasserstein distance.
    """

    P: Distribution
    Q: Distribution
    symmetric: bool = False
    unit: float = 1.0

    def directions(self) -> tuple[tuple[Distribution, Distribution], ...]:
        if self.symmetric:
            return ((self.P, self.Q),)
        return ((self.P, self.Q), (self.Q, self.P))


class SymmetricInterval:
    """``(values - half_width, values + half_width)``, computed when read.

    Behaves like a two-item tuple (``lo, hi = release.interval``; ``release.interval[0]``) without
    allocating two more arrays per release: for 10^7 values that is 160 MB saved on the hot path.
    """

    __slots__ = ("values", "half_width")

    def __init__(self, values: NDArray[np.float64], half_width: float) -> None:
        self.values, self.half_width = values, half_width

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> NDArray[np.float64]:
        if i in (0, -2):
            return self.values - self.half_width
        if i in (1, -1):
            return self.values + self.half_width
        raise IndexError("an interval has two ends")

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield self[0]
        yield self[1]

    def __repr__(self) -> str:
        return f"SymmetricInterval(values ± {self.half_width:g})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """What a mechanism returns: noisy values with their noise scale, an interval and the guarantee.

    ``interval`` is a ``confidence``-level interval for the true value computed from the noise law
    (value - noise quantiles), element-wise.  ``insecure`` is True when the noise came from a seeded
    test generator: such a release is not private.
    """

    values: NDArray[np.float64] | NDArray[np.int64]  # noisy values, or chosen indices/categories
    scale: float
    confidence: float
    interval: tuple[NDArray[np.float64], NDArray[np.float64]] | SymmetricInterval
    guarantee: Any
    mechanism: str
    insecure: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> float:
        """The single released value of a scalar release."""
        if self.values.size != 1:
            raise ValueError(f"this release holds {self.values.size} values; use .values.")
        return float(self.values.reshape(-1)[0])

    def __str__(self) -> str:
        lo, hi = self.interval
        warn = "  [INSECURE seeded generator: not private]" if self.insecure else ""
        if self.values.size == 1:
            body = f"{self.value:.6g}  ({self.confidence:.0%} interval [{float(lo.reshape(-1)[0]):.6g}, {float(hi.reshape(-1)[0]):.6g}])"
        else:
            body = f"{self.values.size} values"
        return f"{self.mechanism}: {body}, noise scale {self.scale:.6g}, guarantee {self.guarantee}{warn}"


class Mechanism(ABC):
    """Base class: a dominating pair, guarantees computed from it, and ``release``."""

    name = "mechanism"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one instead.")

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    @property
    @abstractmethod
    def pair(self) -> DominatingPair:
        """The dominating pair of released laws."""

    @property
    @abstractmethod
    def guarantee(self) -> Any:
        """The headline guarantee the mechanism was built for."""

    @abstractmethod
    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        """Release ``value`` with noise."""

    # ---- guarantees computed from the pair ----------------------------------------------------
    def pure_dp(self) -> PureDP:
        """epsilon-DP with epsilon = the larger max divergence of the pair (Remark 3.1)."""
        eps = max(float(max_divergence(P, Q)) for P, Q in self.pair.directions())
        if not math.isfinite(eps):
            raise UnsupportedError(f"{self.name} is not epsilon-DP for any finite epsilon (unbounded privacy loss).")
        return PureDP(Estimate(eps, kind="exact", method="max divergence of the dominating pair"))

    def delta(self, epsilon: float) -> float:
        """The smallest delta for this epsilon: max over directions of the hockey-stick divergence."""
        return max(float(hockey_stick(P, Q, epsilon)) for P, Q in self.pair.directions())

    def approx_dp(self, delta: float) -> ApproxDP:
        """(epsilon, delta)-DP with the smallest epsilon for this delta (never understated)."""
        eps = max(float(approx_max_divergence(P, Q, delta)) for P, Q in self.pair.directions())
        if not math.isfinite(eps):
            raise UnsupportedError(f"{self.name} has no finite epsilon at delta={delta}.")
        return ApproxDP(epsilon=Estimate(max(eps, 0.0), kind="upper", method="delta-approximate max divergence"),
                        delta=delta)

    def profile(self) -> PrivacyProfile:
        """The privacy profile delta(epsilon) of the pair, with its exact inverse."""
        return PrivacyProfile(
            delta_function=self.delta,
            epsilon_function=lambda d: float(self.approx_dp(d).epsilon) if d > 0 else self._eps_at_zero(),
            kind="exact",
            description=f"profile of {self.name}",
        )

    def _eps_at_zero(self) -> float:
        try:
            return float(self.pure_dp().epsilon)
        except UnsupportedError:
            return math.inf

    def rdp(self) -> RenyiDP:
        """The Rényi DP curve alpha -> max over directions of D_alpha (Mironov 2017, Def 4)."""
        return RenyiDP(curve=lambda a: max(float(renyi(P, Q, a)) for P, Q in self.pair.directions()),
                       description=f"Rényi curve of {self.name}")

    def zcdp(self) -> ZCDP:
        """rho-zCDP: sup over alpha > 1 of D_alpha / alpha (Bun & Steinke 2016, Def 1.1)."""
        raise UnsupportedError(f"{self.name} has no closed-form zCDP bound; use rdp().")

    def wasserstein_dp(self, order: float = 1.0) -> WassersteinDP:
        """(order, W)-Wasserstein DP: the distance between the pair's laws in output units.

        A distance bound, not a privacy guarantee: it converts to nothing (see docs/theory.md §4).
        """
        dist = max(float(wasserstein(P, Q, order)) for P, Q in self.pair.directions()) * self.pair.unit
        return WassersteinDP(p=order, epsilon=dist)


def as_values(value: ArrayLike) -> NDArray[np.float64]:
    """Validate values to release: numeric, finite (NaN and infinities are refused, never noised)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"values to release must be numbers; got {type(value).__name__}.") from None
    if arr.size == 0:
        raise ValueError("nothing to release: the value array is empty.")
    with np.errstate(all="ignore"):
        total = float(np.add.reduce(arr, axis=None))  # NaN or +-inf anywhere makes it non-finite
    if not math.isfinite(total) and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr.reshape(-1)))[0]
        raise ValueError(
            f"values to release must be finite; entry {bad} is {arr.reshape(-1)[bad]}. NaN and infinities are "
            "refused, never noised: clean or clamp the data first."
        )
    return arr


def check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValueError(f"confidence must be in (0, 1); got {confidence}.")
    return c
