"""The mechanism contract: a mechanism is a dominating pair plus a way to release values.

Contract
--------
* A :class:`Mechanism` is an immutable value built from (sensitivity, epsilon[, delta]) or from its
  noise scale.  It knows nothing of budgets (that is :mod:`dpkit.accounting`).  Each mechanism is a
  frozen, slotted dataclass (``@value_object(init=False)``, :mod:`dpkit._value`): its fields are what
  it stores (sensitivity, grid, noise scale in grid units, ...), its own ``__init__`` takes the public
  arguments (``epsilon`` or ``scale``, ...), computes every field and then sets each one with
  ``object.__setattr__`` (as a frozen dataclass's own ``__init__`` does).  Two mechanisms with equal
  fields are equal (and hash alike).
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate
from dpkit._math.result import Kind
from dpkit._value import value_object
from dpkit.distributions import Distribution
from dpkit.divergences import approx_max_divergence, hockey_stick, max_divergence, renyi, wasserstein
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PrivacyProfile, PureDP, RenyiDP, WassersteinDP, ZCDP

#: the headline guarantee a mechanism is built for and a release records (pure, approximate or zCDP)
Headline = PureDP | ApproxDP | ZCDP

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


@value_object(eq=False)
class SymmetricInterval:
    """``(values - half_width, values + half_width)``, computed when read.

    Behaves like a two-item tuple (``lo, hi = release.interval``; ``release.interval[0]``) without
    allocating two more arrays per release: for 10^7 values that is 160 MB saved on the hot path.
    Immutable (a frozen, slotted dataclass): it holds the release's own (read-only) value array, and
    each end it returns is a new array made read-only as well.  Equality is identity (it holds arrays).
    """

    values: NDArray[np.float64]
    half_width: float

    def __post_init__(self) -> None:
        values, half_width = _frozen_array(self.values), float(self.half_width)
        if values is not self.values or half_width is not self.half_width:  # stored again only if converted
            object.__setattr__(self, "values", values)
            object.__setattr__(self, "half_width", half_width)

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> NDArray[np.float64]:
        if i in (0, -2):
            end = self.values - self.half_width
        elif i in (1, -1):
            end = self.values + self.half_width
        else:
            raise IndexError("an interval has two ends")
        if isinstance(end, np.ndarray):
            end.flags.writeable = False
        return end

    def __iter__(self) -> Iterator[NDArray[np.float64]]:
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

    Immutable after construction (issue 11): the dataclass is frozen, ``values`` and the interval's
    arrays are read-only (``flags.writeable = False``; the arrays passed in are frozen in place, with
    any array they are a view of, so no copy is made and the interval still shares ``values``), and
    ``details`` is a read-only mapping whose lists become tuples and arrays read-only arrays.
    """

    values: NDArray[np.float64] | NDArray[np.int64]  # noisy values, or chosen indices/categories
    scale: float
    confidence: float
    interval: tuple[NDArray[np.float64], NDArray[np.float64]] | SymmetricInterval
    guarantee: Headline
    mechanism: str
    insecure: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _frozen_array(self.values))
        interval = self.interval
        if isinstance(interval, SymmetricInterval):
            if interval.values is not self.values and interval.values.base is not self.values:
                interval = SymmetricInterval(interval.values, interval.half_width)
        else:
            lo, hi = interval
            interval = (_frozen_array(lo), _frozen_array(hi))
        object.__setattr__(self, "interval", interval)
        object.__setattr__(self, "details", _freeze(self.details))

    @property
    def value(self) -> float:
        """The single released value of a scalar release."""
        if self.values.size != 1:
            raise InvalidArgumentError(f"this release holds {self.values.size} values; use .values.")
        return float(self.values.reshape(-1)[0])

    def __str__(self) -> str:
        lo, hi = self.interval
        warn = "  [INSECURE seeded generator: not private]" if self.insecure else ""
        if self.values.size == 1:
            body = (
                f"{self.value:.6g}  ({self.confidence:.0%} interval "
                f"[{float(lo.reshape(-1)[0]):.6g}, {float(hi.reshape(-1)[0]):.6g}])"
            )
        else:
            body = f"{self.values.size} values"
        return f"{self.mechanism}: {body}, noise scale {self.scale:.6g}, guarantee {self.guarantee}{warn}"


class Mechanism(ABC):
    """Base class: a dominating pair, guarantees computed from it, and ``release``.

    Holds no state (``__slots__ = ()``); the concrete mechanisms are ``@value_object(init=False)``
    dataclasses that declare their fields (see the module docstring).
    """

    __slots__ = ()

    name = "mechanism"

    @property
    @abstractmethod
    def pair(self) -> DominatingPair:
        """The dominating pair of released laws."""

    @property
    @abstractmethod
    def guarantee(self) -> Headline:
        """The headline guarantee the mechanism was built for."""

    @abstractmethod
    def release(self, value: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95) -> Release:
        """Release ``value`` with noise."""

    # ---- guarantees computed from the pair ----------------------------------------------------
    def pure_dp(self) -> PureDP:
        """epsilon-DP with epsilon = the larger max divergence of the pair (Remark 3.1).

        The epsilon keeps the label of the divergence it came from (``"exact"`` for closed forms,
        rounded up; ``"upper"`` where a float bound was added)."""
        eps = _worst(max_divergence(P, Q) for P, Q in self.pair.directions())
        if not math.isfinite(eps):
            raise UnsupportedError(f"{self.name} is not epsilon-DP for any finite epsilon (unbounded privacy loss).")
        return PureDP(_relabel(eps, "max divergence of the dominating pair"))

    def delta(self, epsilon: float) -> float:
        """The smallest delta for this epsilon: max over directions of the hockey-stick divergence
        (here an Estimate that keeps the label of the direction that gave it; a subclass with a
        closed-form profile may return a plain float)."""
        return _worst(hockey_stick(P, Q, epsilon) for P, Q in self.pair.directions())

    def approx_dp(self, delta: float) -> ApproxDP:
        """(epsilon, delta)-DP with the smallest epsilon for this delta (never understated).

        The epsilon is the larger delta-approximate max divergence of the two directions, with its
        label: ``"exact"`` or ``"upper"`` from closed forms and certified sums, ``"numerical"``
        where the pair's profile is only a quadrature or series estimate. A negative value (possible
        for tiny pairs) is reported as 0, the positive part, which is then exact.
        """
        eps = _worst(approx_max_divergence(P, Q, delta) for P, Q in self.pair.directions())
        if not math.isfinite(eps):
            raise UnsupportedError(f"{self.name} has no finite epsilon at delta={delta}.")
        if float(eps) < 0.0:
            kind: Kind = "numerical" if eps.kind == "numerical" else "exact"
            eps = Estimate(0.0, kind=kind, error=eps.error if kind == "numerical" else 0.0, method=eps.method)
        return ApproxDP(epsilon=_relabel(eps, "delta-approximate max divergence"), delta=delta)

    def profile(self) -> PrivacyProfile:
        """The privacy profile delta(epsilon) of the pair, with its exact inverse."""
        return PrivacyProfile(
            delta_function=self.delta,
            epsilon_function=lambda d: self.approx_dp(d).epsilon if d > 0 else self._eps_at_zero(),
            kind="exact",
            description=f"profile of {self.name}",
        )

    def _eps_at_zero(self) -> Estimate:
        try:
            eps = self.pure_dp().epsilon
            return eps if isinstance(eps, Estimate) else Estimate(float(eps), kind="exact", method="pure DP")
        except UnsupportedError:
            return Estimate(math.inf, kind="exact", method="unbounded privacy loss")

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


def _frozen_array(a: Any) -> Any:
    """``a`` as a read-only array, frozen in place (and every array it is a view of): no copy."""
    arr = np.asarray(a)
    node: Any = arr
    while isinstance(node, np.ndarray):
        node.flags.writeable = False
        node = node.base
    return arr


def _freeze(value: Any) -> Any:
    """A read-only copy of a details value: mappings -> MappingProxyType, lists -> tuples, sets ->
    frozensets, arrays -> read-only arrays (recursively)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return _frozen_array(value)
    return value


def _worst(values: Any) -> Estimate:
    """The largest of the directions' Estimates, keeping its label (an estimate anywhere makes the
    result an estimate: the other direction's value certifies nothing about it)."""
    items = list(values)
    worst = max(items, key=float)
    if any(v.kind == "numerical" for v in items) and worst.kind != "numerical":
        error = max(v.error for v in items if v.kind == "numerical")
        return Estimate(
            float(worst), kind="numerical", error=error, method=worst.method + " (other direction estimated)"
        )
    return worst if isinstance(worst, Estimate) else Estimate(float(worst), kind="upper", method="")


def _relabel(value: Estimate, method: str) -> Estimate:
    """The same value and label, with the mechanism-level method name in front."""
    lower = value.lower if value.kind == "interval" else None
    return Estimate(float(value), kind=value.kind, error=value.error, method=f"{method}: {value.method}", lower=lower)


def as_values(value: ArrayLike) -> NDArray[np.float64]:
    """Validate values to release: numeric, finite (NaN and infinities are refused, never noised)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"values to release must be numbers; got {type(value).__name__}.") from None
    if arr.size == 0:
        raise InvalidArgumentError("nothing to release: the value array is empty.")
    with np.errstate(all="ignore"):
        total = float(np.add.reduce(arr, axis=None))  # NaN or +-inf anywhere makes it non-finite
    if not math.isfinite(total) and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr.reshape(-1)))[0]
        raise InvalidArgumentError(
            f"values to release must be finite; entry {bad} is {arr.reshape(-1)[bad]}. NaN and infinities are "
            "refused, never noised: clean or clamp the data first."
        )
    return arr


def check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise InvalidArgumentError(f"confidence must be in (0, 1); got {confidence}.")
    return c
