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
The grid is fine (``quantile_buckets``, default 2**20) and sampled as runs of equal utility
(``Exponential.release_runs``: the law over every edge, at a cost in occupied buckets; see
``dpkit.query._result._quantiles``).
MIN and MAX choose among the ``buckets`` buckets with utility -(weight below the bucket) - [bucket
empty] (MAX: weight above): the first non-empty bucket scores 0 and every other at most -1 (the rank
utility of q = 0 would tie every edge below the minimum); adding a unit moves the weight by at most
L and the emptiness indicator by 1 in the opposite direction, so the sensitivity is still L.
Each partition runs its own selection; a unit touches K partitions, so each gets epsilon/K.

**Quantile intervals** (``quantile_intervals=True``): the aggregate's epsilon is split
:data:`POINT_SHARE` (1/2) to the point release above and the rest equally to the interval ends it
needs (two, 1/4 each; one, 1/2, for q = 0 or 1, whose other end is a clamping bound).  Each end is
one more exponential mechanism per partition with the same utility sensitivity (see
``dpkit.query._result._quantile_ends``), so the aggregate's releases compose (basic composition) to
epsilon_point + sum of the ends = the aggregate's epsilon: the declared charge is unchanged.  Under a
zCDP share (``rho=``) the aggregate's epsilon is solved so that the point and its ends *together* meet
the share (their bounds epsilon_i^2/8 add up; one mechanism at the whole epsilon would leave 5/8 of the
share unused with two ends), so each gets sqrt(8/3) ~ 1.63 times the epsilon it would have otherwise.

**What a query is charged** (:meth:`Split.charge`): the composition of the mechanisms it builds, as one
:func:`~dpkit.accounting.items.combine` batch of their guarantees -- pure epsilon of the Laplace,
geometric and exponential parts, the zCDP rho of each Gaussian vector read from the built mechanism
(D^2/(2 s^2) on its grid, CKS 2020 Thm 14), the (epsilon, delta) each part was calibrated to, and the
(epsilon, delta) of partition selection (which has no zCDP bound: its delta is the chance that a
partition only one unit has is released).  **zCDP shares** (``rho=`` instead of ``epsilon=``): each
part's share rho_p is met by the part's own mechanism: a Gaussian of sigma = D_2 / sqrt(2 rho_p) (then
checked on its grid, widened until its rho is <= rho_p), and for pure parts the largest epsilon whose
mechanism's zCDP bound (epsilon^2/8 for the exponential mechanism's bounded range, Cesar & Rogers 2021,
Lemma 3.2; epsilon tanh(epsilon/2) for pure DP, Steinke 2024 Thm 5) is <= rho_p, found by bisection.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpkit._math.bisection import bisect_monotone
from dpkit.accounting.items import PrivacyItem, as_item, combine
from dpkit.accounting.protocols import CalibratedMechanism
from dpkit.errors import InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, PureDP
from dpkit.mechanisms import Exponential, Gaussian, Geometric, Laplace
from dpkit.mechanisms.gaussian import bisect_sigma

__all__ = ["Measurement", "Selection", "Split", "gaussian_for_vector", "selection_threshold"]

# per-partition contribution bound of each primitive, in units of (L, M, R) -> c
INTEGER_PRIMITIVES = ("rows", "units", "distinct")
# with quantile intervals: the point release's share of its aggregate's epsilon (the ends share the rest)
POINT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
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
    rho: float = 0.0        # > 0: a Gaussian vector calibrated to this zCDP share (epsilon, delta unused)
    intervals: bool = False  # quantiles: also release the interval ends (see the module docstring)

    @property
    def ends(self) -> int:
        """How many interval ends this quantile releases: 0 (no intervals), 1 (q = 0 or 1), or 2."""
        if not (self.intervals and self.noise == "exponential"):
            return 0
        return 1 if self.q in (0.0, 1.0) else 2

    @property
    def point_epsilon(self) -> float:
        """The epsilon of the point release (all of ``epsilon`` unless interval ends share it)."""
        return self.epsilon * POINT_SHARE if self.ends else self.epsilon

    @property
    def end_epsilon(self) -> float:
        """The epsilon of each interval end's release (0 without intervals)."""
        return self.epsilon * (1.0 - POINT_SHARE) / self.ends if self.ends else 0.0

    def end_mechanism(self) -> Exponential:
        """The exponential mechanism each partition runs for one interval end (epsilon_end / K each)."""
        if not self.ends:
            raise InvalidArgumentError(f"{self.aggregate}: no quantile interval was asked for.")
        return Exponential(sensitivity=self.bound, epsilon=self.end_epsilon / self.partitions_per_unit)

    @property
    def l1(self) -> float:
        return self.partitions_per_unit * self.bound

    @property
    def l2(self) -> float:
        return math.sqrt(self.partitions_per_unit) * self.bound

    def mechanism(self, partitions: int) -> Any:  # Any: callers read the family's own sigma/scale
        """The mechanism for a vector of ``partitions`` values (>= 1); for quantiles, the exponential
        mechanism each partition runs (epsilon / K each, K partitions a unit: basic composition)."""
        g = max(1, int(partitions))
        if self.noise == "exponential":
            return Exponential(sensitivity=self.bound, epsilon=self.point_epsilon / self.partitions_per_unit)
        if self.noise == "geometric":
            return Geometric(sensitivity=int(round(self.l1)), epsilon=self.epsilon)
        if self.noise == "laplace":
            return Laplace(sensitivity=self.l1, epsilon=self.epsilon, dimension=g)
        if self.noise == "gaussian":
            if self.rho > 0.0:
                return gaussian_for_rho(self.l2, self.rho, g)
            return gaussian_for_vector(self.l2, self.epsilon, self.delta, g)
        raise InvalidArgumentError(f"no mechanism for noise {self.noise!r}.")

    def item(self) -> tuple[PrivacyItem, int]:
        """This vector's cost, from its mechanism, and how many times one unit pays it (K for quantiles,
        whose exponential mechanism runs once per partition).  The same for every number of partitions: for
        (epsilon, delta)-calibrated Gaussians the one-value calibration (the smallest sigma) is charged."""
        if self.noise == "exponential":
            point = mechanism_item(self.mechanism(1))
            if not self.ends:
                return point, self.partitions_per_unit
            # the point and each end, composed: one partition's releases; a unit pays them K times
            both = combine([(point, 1), (mechanism_item(self.end_mechanism()), self.ends)],
                           label=f"{self.aggregate}: quantile and its interval ends")
            return both, self.partitions_per_unit
        m = self.mechanism(1)
        if self.noise == "gaussian":
            rho = float(m.zcdp().rho)
            if self.rho > 0.0:
                return as_item(ZCDP(rho)), 1
            # the vector calibration (zCDP-based) never gives a smaller sigma than the one-value one
            base = as_item(ApproxDP(epsilon=self.epsilon, delta=self.delta))
            return _with(as_item(ZCDP(rho)), approx=base.approx), 1
        return mechanism_item(m), 1

    def scale(self, partitions: int) -> float:
        """The noise scale: sigma for Gaussian noise, else the mechanism's scale (exponential: 1/c)."""
        m = self.mechanism(partitions)
        return float(m.sigma if self.noise == "gaussian" else m.scale)

    def half_width(self, partitions: int, confidence: float) -> float:
        """The half-width of this vector's intervals at ``confidence``: a function of the noise law alone.

        Read off a release of zeros (the intervals are symmetric and do not depend on the value); NaN for
        quantiles, whose error is in ranks (``rank_error_bound`` on the result).
        """
        if self.noise == "exponential":
            return math.nan
        import numpy as np

        from dpkit.random import insecure_seeded

        g = max(1, int(partitions))
        rel = self.mechanism(g).release(np.zeros(g), rng=insecure_seeded(0), confidence=confidence)
        lo, hi = rel.interval
        return float(np.asarray(hi).reshape(-1)[0] - np.asarray(rel.values).reshape(-1)[0])

    def describe(self, partitions: int | None) -> dict[str, Any]:
        row: dict[str, Any] = {"aggregate": self.aggregate, "primitive": self.primitive, "noise": self.noise}
        row.update({"rho": self.rho} if self.rho > 0.0 else {"epsilon": self.epsilon, "delta": self.delta})
        row.update({"per_partition_bound": self.bound, "partitions_per_unit": self.partitions_per_unit})
        if self.noise == "exponential":
            row["utility_sensitivity"] = self.bound
            row["epsilon_per_partition"] = self.epsilon / self.partitions_per_unit
            if self.ends:
                row["interval_ends"] = self.ends
                row["epsilon_point"] = self.point_epsilon
                row["epsilon_each_end"] = self.end_epsilon
        else:
            row["l1_sensitivity" if self.noise != "gaussian" else "l2_sensitivity"] = (
                self.l1 if self.noise != "gaussian" else self.l2)
            if partitions is not None:
                row["noise_scale"] = self.scale(partitions)
                row["half_width_95"] = self.half_width(partitions, 0.95)
        return row


def _with(item: PrivacyItem, **changes: Any) -> PrivacyItem:
    from dataclasses import replace

    return replace(item, **changes)


def mechanism_item(m: CalibratedMechanism) -> PrivacyItem:
    """The item of a pure-DP mechanism: its pure epsilon, and its own (possibly smaller) zCDP bound."""
    item = as_item(PureDP(float(m.pure_dp().epsilon)))
    try:
        rho = float(m.zcdp().rho)
    except UnsupportedError:  # no closed form of its own: the pure-DP conversion stands
        return item
    if rho < item.rho:
        import numpy as np

        from dpkit.accounting.items import ORDERS

        rdp = np.minimum(item.rdp, np.nextafter(np.asarray(ORDERS) * rho, np.inf))
        item = _with(item, rho=rho, rdp=rdp)
    return item


def epsilon_for_rho(rho: float, build: Callable[..., CalibratedMechanism], count: int = 1,
                    shares: tuple[float, ...] = (1.0,)) -> float:
    """The largest epsilon (to 1e-9 relative) whose mechanisms ``build(epsilon * s)``, one for each ``s`` in
    ``shares``, each used ``count`` times, have zCDP bounds summing to <= rho (read from the mechanisms;
    bisection, never above).  ``shares`` splits one release's epsilon among several (a quantile's point and
    its interval ends), so that together they meet the share rather than each a part of it."""
    def cost(e: float) -> float:
        return count * math.fsum(mechanism_item(build(e * s)).rho for s in shares)

    lo, hi = 0.0, math.sqrt(2.0 * rho / count) if count > 0 else 1.0
    while cost(hi) <= rho:
        lo, hi = hi, hi * 2.0
    # the lower side of "cost exceeds rho": an epsilon whose cost was verified <= rho
    lo = bisect_monotone(lambda e: cost(e) > rho, lo, hi, side="lower", rtol=1e-9)
    if lo == 0.0:
        raise InvalidArgumentError(f"no epsilon meets the zCDP share {rho!r}.")
    return lo


def gaussian_for_rho(l2: float, rho: float, dimension: int) -> Gaussian:
    """The grid-safe Gaussian for a vector of l2 sensitivity ``l2`` whose zCDP bound (read from the
    mechanism, on its grid) is at most ``rho``: sigma = l2 / sqrt(2 rho), widened until it holds."""
    sigma = l2 / math.sqrt(2.0 * rho)
    for _ in range(100):
        m = Gaussian(sensitivity=l2, sigma=sigma, dimension=dimension)
        got = float(m.zcdp().rho)
        if got <= rho:
            return m
        # the grid's rounding adds to the sensitivity: scale sigma by the excess (rho ~ 1/sigma^2), and a little
        sigma *= math.sqrt(got / rho) * (1.0 + 1e-9)
    raise InvalidArgumentError(f"no Gaussian met the zCDP share {rho!r}.")  # pragma: no cover - the grid converges


@dataclass(frozen=True, slots=True)
class Selection:
    """Private partition selection by a thresholded noisy count of units.

    ``noise="laplace"``: geometric (discrete Laplace) noise of scale K/epsilon, pure epsilon for the
    partitions both neighbours have.  ``noise="gaussian"``: discrete Gaussian noise whose sigma meets
    (epsilon, delta/2) through rho = K/(2 sigma^2) zCDP (the count vector's l2 sensitivity is sqrt(K);
    Canonne, Kamath, Steinke 2020, arXiv 2004.00010v5, Thm 14 and Cor 13), so sigma -- and the
    threshold -- grow with sqrt(K) instead of K.  In both, a partition only the added unit has is
    released only when its noisy count 1 + Z reaches the threshold; the unit has at most K of them.
    """

    epsilon: float
    delta: float              # the share given; the exact delta spent is ``delta_spent`` (<= it)
    partitions_per_unit: int
    noise: str = "laplace"

    @property
    def mechanism(self) -> Any:
        if self.noise == "gaussian":
            return _CountGaussian(self.sigma)
        return Geometric(sensitivity=self.partitions_per_unit, epsilon=self.epsilon)

    @property
    def sigma(self) -> float:
        """The discrete Gaussian's sigma (Gaussian selection only): the smallest meeting (epsilon, delta/2)."""
        from dpkit.guarantees import ZCDP, zcdp_to_approx_dp

        k = self.partitions_per_unit

        def ok(sigma: float) -> bool:
            got = zcdp_to_approx_dp(ZCDP(k / (2.0 * sigma * sigma)), delta=self.delta / 2.0)
            return float(got.epsilon) <= self.epsilon

        return bisect_sigma(ok, math.sqrt(k) * math.sqrt(2.0 * math.log(1.25 / (self.delta / 2.0))) / self.epsilon)

    @property
    def threshold(self) -> int:
        return self._threshold()[0]

    @property
    def delta_spent(self) -> float:
        return self._threshold()[1]

    def _threshold(self) -> tuple[int, float]:
        if self.noise == "gaussian":
            tau, tail = gaussian_selection_threshold(self.sigma, self.partitions_per_unit, self.delta / 2.0)
            return tau, self.delta / 2.0 + tail
        return selection_threshold(self.mechanism.scale, self.partitions_per_unit, self.delta)

    @property
    def scale(self) -> float:
        return self.sigma if self.noise == "gaussian" else float(self.mechanism.scale)

    def item(self) -> PrivacyItem:
        """(epsilon, delta spent): no zCDP bound (a partition only one unit has is released w.p. delta)."""
        return as_item(ApproxDP(epsilon=self.epsilon, delta=min(self.delta_spent, self.delta)))


class _CountGaussian:
    """Integer counts plus exact discrete Gaussian noise N_Z(0, sigma^2) per coordinate (dpkit.random):
    the law of each coordinate does not depend on how many counts there are (a private number here)."""

    def __init__(self, sigma: float) -> None:
        self.sigma = self.scale = sigma

    def release(self, counts: Any, *, rng: Any = None) -> Any:
        import numpy as np

        from dpkit.random import discrete_gaussian

        c = np.asarray(counts, dtype=float).reshape(-1)
        noise = discrete_gaussian(self.sigma, size=c.size, rng=rng) if c.size else np.zeros(0)
        return _Noisy(values=c + np.asarray(noise, dtype=float))


@dataclass(frozen=True, slots=True)
class _Noisy:
    values: Any


def selection_threshold(t: float, k: int, delta: float) -> tuple[int, float]:
    """Smallest tau = 1 + m with k P(DLap(t) >= m) <= delta; returns (tau, the exact delta it spends).

    P(Z >= m) = e^{-m/t} / (1 + e^{-1/t}) for m >= 1 (the DLap(t) tail, summed geometrically).
    Computed in log space; m is raised until the float check passes with a 1e-12 relative margin.

    >>> selection_threshold(2.0, 1, 1e-6)[0]
    28
    """
    if not 0.0 < delta < 1.0:
        raise InvalidArgumentError(f"partition selection needs a delta share in (0, 1); got {delta}.")
    log_a = -1.0 / t
    log_norm = math.log1p(math.exp(log_a))
    m = max(1, math.ceil(t * (math.log(k) - log_norm - math.log(delta))))

    def spent(m: int) -> float:
        return math.exp(math.log(k) + m * log_a - log_norm)

    while spent(m) * (1.0 + 1e-12) > delta:
        m += 1
    return 1 + m, spent(m) * (1.0 + 1e-12)


def gaussian_selection_threshold(sigma: float, k: int, delta: float) -> tuple[int, float]:
    """Smallest tau = 1 + m with k P(N_Z(0, sigma^2) >= m) <= delta; returns (tau, that bound).

    The tail is bounded above in log space: the terms e^{-j^2/(2 sigma^2)} for j >= m shrink by at
    least e^{-(2m+1)/(2 sigma^2)} each, so sum_{j>=m} <= e^{-m^2/(2 sigma^2)} / (1 - e^{-(2m+1)/(2 sigma^2)}),
    divided by the normaliser Theta = sum_j e^{-j^2/(2 sigma^2)}.

    >>> gaussian_selection_threshold(3.0, 1, 1e-6)[0] >= 1 + 14
    True
    """
    if not 0.0 < delta < 1.0:
        raise InvalidArgumentError(f"partition selection needs a delta share in (0, 1); got {delta}.")
    from dpkit.distributions.theta import log_theta

    log_norm = log_theta(sigma, 0.0)
    two_s2 = 2.0 * sigma * sigma

    def log_tail(m: int) -> float:
        return -(m * m) / two_s2 - log_norm - math.log(-math.expm1(-(2 * m + 1) / two_s2))

    m = max(1, math.floor(sigma * math.sqrt(2.0 * max(math.log(k / delta), 1.0))) - 2)
    while math.log(k) + log_tail(m) + 1e-12 > math.log(delta):
        m += 1
    while m > 1 and math.log(k) + log_tail(m - 1) + 1e-12 <= math.log(delta):
        m -= 1
    return 1 + m, math.exp(math.log(k) + log_tail(m)) * (1.0 + 1e-12)


@functools.lru_cache(maxsize=128)
def gaussian_for_vector(l2: float, epsilon: float, delta: float, dimension: int) -> Gaussian:
    """The grid-safe Gaussian for a ``dimension``-vector with l2 sensitivity ``l2`` meeting (epsilon, delta).

    Cached: a function of public parameters only, and one query asks for it several times (plan, charge,
    scale, release); each calibration is a bisection over exact discrete-Gaussian sums, seconds at small
    delta.

    For one value the analytic calibration on the exact discrete profile is used.  For vectors the
    mechanism's guarantee comes from zCDP (CKS 2020, Thm 14 and Cor 13), so sigma is found by
    bisection on that conversion: the smallest sigma (to 1e-12 relative) whose
    ``approx_dp(delta).epsilon`` is <= epsilon, never smaller.
    """
    if dimension == 1:
        return Gaussian(sensitivity=l2, epsilon=epsilon, delta=delta)

    def ok(sigma: float) -> bool:
        return float(Gaussian(sensitivity=l2, sigma=sigma, dimension=dimension).approx_dp(delta).epsilon) <= epsilon

    hi = bisect_sigma(ok, gaussian_for_vector(l2, epsilon, delta, 1).sigma)
    return Gaussian(sensitivity=l2, sigma=hi, dimension=dimension)


@dataclass(frozen=True, slots=True)
class Split:
    """How one query's budget is divided: per output aggregate, per primitive, for selection and for the
    bounding report (four unit counts of l1 sensitivity 4, geometric noise: ``report_epsilon``)."""

    epsilon: float
    delta: float
    measurements: tuple[Measurement, ...]
    selection: Selection | None
    report_epsilon: float = 0.0
    rho: float = 0.0  # > 0: the query was given a zCDP cost (``rho=``) and split it; epsilon is then nan

    def charge(self, label: str) -> PrivacyItem:
        """What the query costs: the batch of the mechanisms it builds (see the module docstring)."""
        parts: list[tuple[PrivacyItem, int]] = [m.item() for m in self.measurements]
        if self.selection is not None:
            parts.append((self.selection.item(), 1))
        if self.report is not None:
            parts.append((mechanism_item(self.report), 1))
        return combine(parts, label=label, event={"type": "Composite", "query": label})

    @property
    def report(self) -> Geometric | None:
        """The mechanism of the bounding report (each of its four counts moves by at most 1)."""
        return Geometric(sensitivity=4, epsilon=self.report_epsilon) if self.report_epsilon > 0 else None

    def shares(self) -> dict[str, tuple[float, float]]:
        """Output name (and "partition_selection") -> (epsilon, delta) it receives; for a query given a
        zCDP cost (``rho > 0``), (rho, 0.0): the zCDP bound of each part's mechanisms."""
        out: dict[str, tuple[float, float]] = {}
        for m in self.measurements:
            e, d = out.get(m.aggregate, (0.0, 0.0))
            if self.rho > 0.0:
                item, count = m.item()
                out[m.aggregate] = (e + count * item.rho, 0.0)
            else:
                out[m.aggregate] = (e + m.epsilon, d + m.delta)
        if self.rho > 0.0:
            if self.report is not None:
                out["bounding_report"] = (mechanism_item(self.report).rho, 0.0)
            return out
        if self.selection is not None:
            out["partition_selection"] = (self.selection.epsilon, self.selection.delta)
        if self.report_epsilon > 0:
            out["bounding_report"] = (self.report_epsilon, 0.0)
        return out
