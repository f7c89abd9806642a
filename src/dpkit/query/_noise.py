r"""From a query's budget to mechanisms: the explicit split, the sensitivities, partition selection.

A query with total budget (epsilon, delta) is split into *measurements*, one per primitive
aggregate (a noisy vector with one entry per partition), plus one for private partition
selection.  The split is explicit (:class:`Split`), shown by ``Session.plan`` before anything
runs, and composed by basic composition (Dwork & Roth 2014, Thm 3.16; seed Theorem 3.14/3.16),
so the query's guarantee is the sum of its parts.

Sensitivities (add/remove one privacy unit) follow from the contribution bounds of
:mod:`dpkit.query._compile`: a unit touches at most K partitions and adds at most c to each (c
from the per-partition bound of the primitive), so the l1 sensitivity of the vector is K c and its
l2 sensitivity sqrt(K) c.  Noise: geometric (discrete Laplace) for integer primitives, dpkit's
grid-safe Laplace otherwise, or the grid-safe Gaussian with ``noise="gaussian"``.

Private partition selection (Korolova, Kenthapadi, Mishra, Ntoulas 2009; Wilson et al. 2020,
PoPETs, sec. 3; Desfontaines, Voss, Gipson, Mandayam 2022, "Differentially private partition
selection", PoPETs): add DLap(t) noise, t = K/epsilon_sel, to each partition's count of units and
keep it if the noisy count is >= tau = 1 + m.  Partitions present in both neighbours are covered
by the geometric mechanism's epsilon_sel; a partition only the added unit has (count 1) is kept
with probability P(Z >= m) = e^{-m/t}/(1 + e^{-1/t}) (the DLap tail), and the unit has at most K of
them, so delta_sel = K e^{-m/t}/(1 + e^{-1/t}) by a union bound; m is the smallest integer that
meets the delta share.

Quantiles use the exponential mechanism over the ``buckets + 1`` edges of a histogram of the
clamped values (Smith 2011 / Dwork & Roth 2014 sec. 3.4 in spirit) with utility
-|rank(edge) - q N|; adding a unit moves rank - qN by at most max(q, 1 - q) L, its sensitivity.
MIN and MAX choose among the ``buckets`` buckets with utility -(weight below the bucket) - [bucket
empty] (MAX: weight above): the first non-empty bucket scores 0 and every other at most -1 (the rank
utility of q = 0 would tie every edge below the minimum); adding a unit moves the weight by at most
L and the emptiness indicator by 1 in the opposite direction, so the sensitivity is still L.
Each partition runs its own selection; a unit touches K partitions, so each gets epsilon/K.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpkit.mechanisms import Exponential, Gaussian, Geometric, Laplace
from dpkit.mechanisms.gaussian import _bisect_sigma

__all__ = ["Measurement", "Selection", "Split", "gaussian_for_vector", "selection_threshold"]

# per-partition contribution bound of each primitive, in units of (L, M, R) -> c
INTEGER_PRIMITIVES = ("rows", "units", "distinct")


@dataclass(frozen=True)
class Measurement:
    """One noisy vector: a primitive of one aggregate, its per-partition bound and budget share."""

    aggregate: str
    primitive: str          # rows | units | distinct | values | sum | centered_sum | centered_squares | histogram
    column: str             # result column it reads ("__units", "rows", "sum__0", ...)
    bound: float            # c: the most one unit adds to one partition
    partitions_per_unit: int  # K (1 without GROUP BY)
    epsilon: float
    delta: float
    noise: str              # "geometric" | "laplace" | "gaussian" | "exponential"
    q: float | None = None  # quantile level
    extreme: str | None = None  # "min" / "max": the first / last non-empty bucket (see _result._quantiles)

    @property
    def l1(self) -> float:
        return self.partitions_per_unit * self.bound

    @property
    def l2(self) -> float:
        return math.sqrt(self.partitions_per_unit) * self.bound

    def mechanism(self, partitions: int) -> Any:
        """The mechanism for a vector of ``partitions`` values (>= 1); for quantiles, the exponential
        mechanism each partition runs (epsilon / K each, K partitions a unit: basic composition)."""
        g = max(1, int(partitions))
        if self.noise == "exponential":
            return Exponential(sensitivity=self.bound, epsilon=self.epsilon / self.partitions_per_unit)
        if self.noise == "geometric":
            return Geometric(sensitivity=int(round(self.l1)), epsilon=self.epsilon)
        if self.noise == "laplace":
            return Laplace(sensitivity=self.l1, epsilon=self.epsilon, dimension=g)
        if self.noise == "gaussian":
            return gaussian_for_vector(self.l2, self.epsilon, self.delta, g)
        raise ValueError(f"no mechanism for noise {self.noise!r}.")

    def scale(self, partitions: int) -> float:
        """The noise scale: sigma for Gaussian noise, else the mechanism's scale (exponential: 1/c)."""
        m = self.mechanism(partitions)
        return float(m.sigma if self.noise == "gaussian" else m.scale)

    def describe(self, partitions: int | None) -> dict[str, Any]:
        row: dict[str, Any] = {"aggregate": self.aggregate, "primitive": self.primitive, "noise": self.noise,
                               "epsilon": self.epsilon, "delta": self.delta, "per_partition_bound": self.bound,
                               "partitions_per_unit": self.partitions_per_unit}
        if self.noise == "exponential":
            row["utility_sensitivity"] = self.bound
            row["epsilon_per_partition"] = self.epsilon / self.partitions_per_unit
        else:
            row["l1_sensitivity" if self.noise != "gaussian" else "l2_sensitivity"] = (
                self.l1 if self.noise != "gaussian" else self.l2)
            if partitions is not None:
                row["noise_scale"] = self.scale(partitions)
        return row


@dataclass(frozen=True)
class Selection:
    """Private partition selection by a thresholded geometric count of units."""

    epsilon: float
    delta: float              # the share given; the exact delta spent is ``delta_spent`` (<= it)
    partitions_per_unit: int

    @property
    def mechanism(self) -> Geometric:
        return Geometric(sensitivity=self.partitions_per_unit, epsilon=self.epsilon)

    @property
    def threshold(self) -> int:
        return selection_threshold(self.mechanism.scale, self.partitions_per_unit, self.delta)[0]

    @property
    def delta_spent(self) -> float:
        return selection_threshold(self.mechanism.scale, self.partitions_per_unit, self.delta)[1]


def selection_threshold(t: float, k: int, delta: float) -> tuple[int, float]:
    """Smallest tau = 1 + m with k P(DLap(t) >= m) <= delta; returns (tau, the exact delta it spends).

    P(Z >= m) = e^{-m/t} / (1 + e^{-1/t}) for m >= 1 (the DLap(t) tail, summed geometrically).
    Computed in log space; m is raised until the float check passes with a 1e-12 relative margin.

    >>> selection_threshold(2.0, 1, 1e-6)[0]
    28
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"partition selection needs a delta share in (0, 1); got {delta}.")
    log_a = -1.0 / t
    log_norm = math.log1p(math.exp(log_a))
    m = max(1, math.ceil(t * (math.log(k) - log_norm - math.log(delta))))

    def spent(m: int) -> float:
        return math.exp(math.log(k) + m * log_a - log_norm)

    while spent(m) * (1.0 + 1e-12) > delta:
        m += 1
    return 1 + m, spent(m) * (1.0 + 1e-12)


def gaussian_for_vector(l2: float, epsilon: float, delta: float, dimension: int) -> Gaussian:
    """The grid-safe Gaussian for a ``dimension``-vector with l2 sensitivity ``l2`` meeting (epsilon, delta).

    For one value the analytic calibration on the exact discrete profile is used.  For vectors the
    mechanism's guarantee comes from zCDP (CKS 2020, Thm 14 and Cor 13), so sigma is found by
    bisection on that conversion: the smallest sigma (to 1e-12 relative) whose
    ``approx_dp(delta).epsilon`` is <= epsilon, never smaller.
    """
    if dimension == 1:
        return Gaussian(sensitivity=l2, epsilon=epsilon, delta=delta)

    def ok(sigma: float) -> bool:
        return float(Gaussian(sensitivity=l2, sigma=sigma, dimension=dimension).approx_dp(delta).epsilon) <= epsilon

    hi = _bisect_sigma(ok, Gaussian(sensitivity=l2, epsilon=epsilon, delta=delta).sigma)
    return Gaussian(sensitivity=l2, sigma=hi, dimension=dimension)


@dataclass(frozen=True)
class Split:
    """How one query's budget is divided: per output aggregate, per primitive, and for selection."""

    epsilon: float
    delta: float
    measurements: tuple[Measurement, ...]
    selection: Selection | None

    def shares(self) -> dict[str, tuple[float, float]]:
        """Output name (and "partition_selection") -> (epsilon, delta) it receives."""
        out: dict[str, tuple[float, float]] = {}
        for m in self.measurements:
            e, d = out.get(m.aggregate, (0.0, 0.0))
            out[m.aggregate] = (e + m.epsilon, d + m.delta)
        if self.selection is not None:
            out["partition_selection"] = (self.selection.epsilon, self.selection.delta)
        return out
