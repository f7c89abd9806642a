r"""Randomized response, binary and k-ary, with exact coins and an unbiased frequency estimator.

Contract
--------
* :class:`RandomizedResponse` reports each true category ``v`` in ``{0, ..., k-1}`` unchanged
  with probability :math:`p = e^\varepsilon/(e^\varepsilon + k - 1)` and otherwise as one of the
  other ``k - 1`` categories, uniformly: each with probability :math:`q = 1/(e^\varepsilon + k - 1)`.
  For ``k = 2`` this is Warner's binary randomized response, :math:`p = e^\varepsilon/(1+e^\varepsilon)`.
  It is built from ``epsilon`` or from ``keep_probability``.
* Its dominating pair is exact: the output laws on two different true categories (every pair of
  different inputs is equivalent under relabelling), so every guarantee is computed from it.
* ``release(values)`` is vectorised over arrays of category indices; NaN, non-integers and indices
  outside ``[0, k)`` are refused.  **Exact**: the keep/flip coin compares a uniform 64-bit word with
  :math:`T = \lfloor 2^{64} p \rfloor`, computed once per mechanism in integer arithmetic from
  rigorous enclosures of :math:`e^{-\varepsilon}` (:mod:`dpkit.random._arith`); the fraction
  :math:`2^{-64}` of words equal to ``T`` is settled by extending the uniform with further words.
  So, given ideal random bits, the coin is Bernoulli(p) exactly for the float epsilon as given, and
  the replacement category is exactly uniform (a bounded integer from the generator).
* :meth:`RandomizedResponse.debias` turns counts of reports into unbiased estimates of the true
  frequencies, with unbiased estimates of their variances (post-processing: no privacy cost).

Why not ``rng.random() < p``: a 53-bit float uniform against a rounded p is off by up to
:math:`2^{-53}` per report, and the rounding of p would differ between mechanisms; the exact
comparison costs the same one word per report.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_epsilon, check_probability
from dpkit._math.result import Kind
from dpkit.distributions import Bernoulli, Finite
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import PureDP, WassersteinDP, ZCDP
from dpkit.guarantees.conversions import pure_to_zcdp
from dpkit._value import value_object
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release, check_confidence
from dpkit.random import is_insecure
from dpkit.random import resolve_rng
from dpkit.random.exact import LazyUniform, exp_neg_enclosure, floor_scaled

__all__ = ["FrequencyEstimate", "RandomizedResponse"]

_WORD = 1 << 64
_MAX_LOG_ODDS = 700.0  # beyond this the flip probability underflows float64's normal range




def _categories(value: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"categories must be an integer >= 2; got {type(value).__name__} {value!r}.")
    k = int(value)
    if k < 2:
        raise InvalidArgumentError(f"categories must be an integer >= 2; got {k}.")
    if k > 1 << 40:
        raise InvalidArgumentError(f"categories must be at most 2**40; got {k}.")
    return k


def _keep_enclosure(epsilon: Fraction, k: int) -> Callable[[int], tuple[int, int]]:
    r"""Enclosures of :math:`p = 1/(1 + (k-1)e^{-\varepsilon})`: ``lo <= 2**prec * p <= hi``."""

    def enclose(prec: int) -> tuple[int, int]:
        extra = prec + 16 + k.bit_length()
        e_lo, e_hi = exp_neg_enclosure(epsilon, extra)  # e_lo <= 2**extra e^-eps <= e_hi
        one = 1 << extra
        num = one << prec
        lo = num // (one + (k - 1) * e_hi)  # p is decreasing in e^-eps
        hi = -((-num) // (one + (k - 1) * e_lo))
        return lo, hi

    return enclose


@dataclass(frozen=True, slots=True, kw_only=True)
class FrequencyEstimate:
    r"""Unbiased estimates of the true category frequencies from randomized-response counts.

    Attributes
    ----------
    frequencies : ndarray, shape (k,)
        :math:`\hat\pi_j = (f_j - q)/(p - q)` with :math:`f_j` the observed share of reports ``j``.
        Unbiased, so entries can fall below 0 or above 1; they sum to 1.
    variance : ndarray, shape (k,)
        Unbiased estimates of :math:`\mathrm{Var}(\hat\pi_j) = P_j(1-P_j)/(n(p-q)^2)`, where
        :math:`P_j = q + (p-q)\pi_j` is the probability of reporting ``j``:
        :math:`f_j(1-f_j)/((n-1)(p-q)^2)`.
    n : int
        The number of reports.
    """

    frequencies: NDArray[np.float64]
    variance: NDArray[np.float64]
    n: int

    @property
    def standard_error(self) -> NDArray[np.float64]:
        """Square roots of the estimated variances."""
        return np.asarray(np.sqrt(self.variance), dtype=np.float64)


@value_object(init=False)
class RandomizedResponse(Mechanism):
    r"""Randomized response over ``categories`` values: keep the truth with probability p.

    :math:`p = e^\varepsilon/(e^\varepsilon + k - 1)`; otherwise report one of the other k - 1
    categories uniformly.  Exactly epsilon-DP (the max divergence of its pair), with the exact
    profile, Rényi curve and KL of that pair.

    Parameters
    ----------
    epsilon : float, finite, in (0, 700], optional
        Give this or ``keep_probability``.
    keep_probability : float, in (1/k, 1), optional
        p; then epsilon = ln(p (k - 1) / (1 - p)), rounded to the nearest float, and the mechanism
        is exactly the one with that epsilon (its keep probability equals p to about 1e-16).
    categories : int, >= 2, default 2
        k.  The values released are category indices 0 .. k-1.

    Raises
    ------
    ValueError
        epsilon NaN, infinite, <= 0 or above 700 (the flip probability would underflow); a keep
        probability outside (1/k, 1) or NaN; both or neither of ``epsilon`` and ``keep_probability``;
        ``categories`` below 2 or above 2**40.
    TypeError
        Non-integer ``categories``.

    Notes
    -----
    Exact sampling: see the module docstring.  With :math:`p - q = (e^\varepsilon - 1)/(e^\varepsilon
    + k - 1)`, the pair's divergences are :math:`D_\infty = \varepsilon`,
    :math:`\delta(\varepsilon') = (e^\varepsilon - e^{\varepsilon'})_+/(e^\varepsilon + k - 1)` and
    :math:`\mathrm{KL} = (p - q)\varepsilon` (:math:`\varepsilon\tanh(\varepsilon/2)` for k = 2).

    References
    ----------
    Warner 1965, "Randomized response", JASA 60(309); Dwork & Roth 2014, Sec 3.2 (binary, seed 004);
    Kairouz, Oh & Viswanath 2016, "Discrete distribution estimation under local privacy",
    arXiv 1602.07387v3, Sec 2 (k-ary RR and its unbiased estimator).

    Examples
    --------
    >>> rr = RandomizedResponse(epsilon=math.log(3))
    >>> round(rr.keep_probability, 12), str(rr.guarantee)
    (0.75, '1.09861228867-DP')
    """

    name = "randomized response"

    epsilon: float
    categories: int  # k
    keep_probability: float  # p = e^eps / (e^eps + k - 1), a float (the sampler uses _threshold)
    other_probability: float  # q = p e^-eps, the probability of each other category
    # floor(2^64 p) from an exact enclosure of p: the sampler keeps the truth below it
    _threshold: int = field(repr=False, compare=False)

    def __init__(self, *, epsilon: float | None = None, keep_probability: float | None = None,
                 categories: int = 2) -> None:
        k = _categories(categories)
        if (epsilon is None) == (keep_probability is None):
            raise InvalidArgumentError("give exactly one of epsilon or keep_probability.")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise InvalidArgumentError(f"epsilon must be > 0; got {eps}.")
        else:
            p = check_probability(keep_probability, "keep_probability")
            if not (1.0 / k < p < 1.0):
                raise InvalidArgumentError(
                    f"keep_probability must be in (1/categories, 1) = ({1.0 / k:.6g}, 1); got {p}. "
                    "At 1/k the report carries no information (epsilon = 0); at 1 there is no noise."
                )
            eps = math.log(p) + math.log(k - 1) - math.log1p(-p)  # ln(p (k-1) / (1-p))
            if not eps > 0:  # p within rounding of 1/k
                raise InvalidArgumentError(
                    f"keep_probability={p} is too close to 1/categories: epsilon would be {eps}."
                )
        if not eps <= _MAX_LOG_ODDS:
            raise InvalidArgumentError(
                f"epsilon must be at most {_MAX_LOG_ODDS:g} for randomized response; got {eps}. The "
                "flip probability would underflow float64, and such a release is effectively unnoised."
            )
        # log p = -log1p((k-1) e^-eps), log q = log p - eps: accurate for every eps and k
        log_keep = -math.log1p((k - 1) * math.exp(-eps))
        object.__setattr__(self, "epsilon", eps)  # frozen: set as a dataclass __init__ does
        object.__setattr__(self, "categories", k)
        object.__setattr__(self, "keep_probability", math.exp(log_keep))
        object.__setattr__(self, "other_probability", math.exp(log_keep - eps))
        object.__setattr__(self, "_threshold", floor_scaled(_keep_enclosure(Fraction(eps), k), 64))

    def __repr__(self) -> str:
        return f"RandomizedResponse(epsilon={self.epsilon!r}, categories={self.categories})"

    @property
    def flip_probability(self) -> float:
        """The probability that a report differs from the truth: 1 - p = (k-1) q."""
        return (self.categories - 1) * self.other_probability

    @property
    def pair(self) -> DominatingPair:
        """The output laws on true categories 0 (P) and 1 (Q); symmetric under swapping 0 and 1.

        Binary: ``Bernoulli(1/(1+e^eps))`` vs ``Bernoulli(e^eps/(1+e^eps))`` (log-odds form, both
        masses accurate).  k-ary: ``Finite`` laws on the outputs "0", "1" and "other" (the other
        k - 2 categories merged: each has mass q under both laws, so merging them changes no
        divergence, and the pair stays three numbers long for any k).
        """
        k = self.categories
        if k == 2:
            return DominatingPair(
                P=Bernoulli.randomized_response(self.epsilon, truth=0),
                Q=Bernoulli.randomized_response(self.epsilon, truth=1),
                symmetric=True,
            )
        p, q = self.keep_probability, self.other_probability
        labels = ["0", "1", "other"]
        rest = (k - 2) * q
        return DominatingPair(P=Finite([p, q, rest], support=labels), Q=Finite([q, p, rest], support=labels),
                              symmetric=True)

    def wasserstein_dp(self, order: float = 1.0) -> WassersteinDP:
        """Binary: the distance between the pair's laws on {0, 1}.  k > 2: refused (categories have no metric)."""
        if self.categories == 2:
            return Mechanism.wasserstein_dp(self, order)
        raise UnsupportedError(
            "k-ary randomized response reports categories, which have no metric: a Wasserstein "
            "distance between its output laws is not defined."
        )

    @property
    def guarantee(self) -> PureDP:
        return self.pure_dp()

    def pure_dp(self) -> PureDP:
        """epsilon-DP with the max divergence of :attr:`pair`, rounded up to epsilon where needed.

        The exact max divergence of the pair is epsilon; the pair's float masses can put the
        computed value an ulp below it, and a reported epsilon is never understated.
        """
        from_pair = float(Mechanism.pure_dp(self).epsilon)
        # the release keeps the truth with the exact probability e^eps/(e^eps + k - 1) (an exact
        # enclosure, not the float keep_probability), so its loss is epsilon exactly; the pair's
        # float masses, whose max divergence is now computed exactly and rounded up, differ from it
        # by a few ulps in either direction, which says nothing about the release
        value = self.epsilon if from_pair <= self.epsilon * (1.0 + 2.0**-49) else from_pair
        return PureDP(Estimate(value, kind="exact", method="max divergence of the pair (ln(p/q) = epsilon)"))

    def zcdp(self) -> ZCDP:
        r""":math:`\rho = \varepsilon\tanh(\varepsilon/2)` from :meth:`pure_dp` (Steinke 2024, Thm 5).

        Tight for binary randomized response (kind ``"exact"``: the supremum of
        :math:`D_\alpha/\alpha`, approached as α → 1); an upper bound for k > 2 (kind ``"upper"``).
        """
        rho = pure_to_zcdp(self.pure_dp()).rho
        kind: Kind = "exact" if self.categories == 2 else "upper"
        return ZCDP(Estimate(float(rho), kind=kind, method="eps tanh(eps/2) (Steinke 2024, Thm 5)"))

    # ---- release -------------------------------------------------------------------------------------
    def _indices(self, values: ArrayLike) -> NDArray[np.int64]:
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError):  # pragma: no cover - asarray accepts nearly anything
            raise ArgumentTypeError(f"values must be category indices; got {type(values).__name__}.") from None
        if arr.dtype.kind not in "biuf":
            raise ArgumentTypeError(f"values must be integer category indices; got dtype {arr.dtype}.")
        if arr.size == 0:
            raise InvalidArgumentError("nothing to release: the value array is empty.")
        flat = arr.reshape(-1)
        if arr.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(flat) | (flat != np.floor(flat)))
            if bad.size:
                # no position and no value in the message: the values are private
                raise InvalidArgumentError("values must be integer category indices: NaN and non-integers are refused.")
        outside = np.flatnonzero((flat < 0) | (flat >= self.categories))
        if outside.size:
            raise InvalidArgumentError(f"values must be category indices in [0, {self.categories}).")
        return arr.astype(np.int64)

    def _respond(self, truth: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int64]:
        flat = truth.reshape(-1)
        words = rng.integers(0, _WORD, size=flat.size, dtype=np.uint64)
        threshold = np.uint64(self._threshold)  # < 2**64 because p < 1
        keep = words < threshold
        ties = np.flatnonzero(words == threshold)
        if ties.size:
            enclose = _keep_enclosure(Fraction(self.epsilon), self.categories)
            for i in ties.tolist():
                keep[i] = LazyUniform(int(words[i]), 64, rng).less_than(enclose)
        out = flat.copy()
        flipped = np.flatnonzero(~keep)
        k = self.categories
        if k == 2:
            out[flipped] = 1 - flat[flipped]
        elif flipped.size:
            shift = 1 + rng.integers(0, k - 1, size=flipped.size, dtype=np.int64)  # uniform over others
            out[flipped] = (flat[flipped] + shift) % k
        return out.reshape(truth.shape)

    def release(self, values: ArrayLike, *, rng: np.random.Generator | None = None,
                confidence: float = 0.95) -> Release:
        """Randomize each category index independently.

        Parameters
        ----------
        values : array_like of int
            True category indices in ``[0, categories)``; any shape (floats equal to integers are
            accepted; NaN is refused).
        rng : numpy.random.Generator, optional
            Default: the process's secure generator.
        confidence : float, in (0, 1)

        Returns
        -------
        Release
            ``values``: int64 reports, same shape.  ``scale``: the flip probability 1 - p.
            ``interval``: a confidence set for each true category: the report itself when
            p >= ``confidence`` (it is right with probability p), otherwise ``[0, k - 1]``.
            ``details``: ``categories``, ``keep_probability``.

        Raises
        ------
        ValueError
            Empty input, NaN, non-integers, indices outside ``[0, categories)``, ``confidence``
            outside (0, 1).
        TypeError
            Non-numeric values, or an ``rng`` that is not a NumPy Generator.
        """
        truth = self._indices(values)
        c = check_confidence(confidence)
        gen = resolve_rng(rng)
        reports = self._respond(truth, gen)
        if self.keep_probability >= c:
            interval = (reports.astype(np.float64), reports.astype(np.float64))
        else:
            interval = (np.zeros(reports.shape), np.full(reports.shape, float(self.categories - 1)))
        return Release(
            values=reports,  # category indices, not floats
            scale=self.flip_probability,
            confidence=c,
            interval=interval,
            guarantee=self.guarantee,
            mechanism=self.name,
            insecure=is_insecure(gen),
            details={"categories": self.categories, "keep_probability": self.keep_probability},
        )

    # ---- estimation ----------------------------------------------------------------------------------
    def debias(self, counts: ArrayLike) -> FrequencyEstimate:
        r"""Unbiased estimates of the true category frequencies from counts of reports.

        Parameters
        ----------
        counts : array_like of int, shape (categories,)
            How many reports of each category were received (non-negative integers, at least 2
            reports in all).  ``np.bincount(release.values, minlength=k)`` gives them.

        Returns
        -------
        FrequencyEstimate
            ``frequencies`` :math:`(f - q)/(p - q)` and unbiased ``variance`` estimates.

        Raises
        ------
        ValueError
            Wrong length, negative, NaN or non-integer counts, or fewer than 2 reports.

        Notes
        -----
        :math:`E[f_j] = q + (p - q)\pi_j`, so :math:`\hat\pi_j` is unbiased; :math:`n f_j` is
        binomial, so :math:`E[f_j(1 - f_j)] = P_j(1 - P_j)(n-1)/n` and the variance estimate is
        unbiased.  Post-processing of the reports: no privacy cost.

        References
        ----------
        Warner 1965; Kairouz, Oh & Viswanath 2016, arXiv 1602.07387v3, Sec 2.

        Examples
        --------
        >>> rr = RandomizedResponse(epsilon=math.log(3))
        >>> rr.debias([750, 250]).frequencies.round(12).tolist()
        [1.0, 0.0]
        """
        try:
            arr = np.asarray(counts, dtype=np.float64)
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"counts must be an array of integers; got {type(counts).__name__}.") from None
        k = self.categories
        if arr.shape != (k,):
            raise InvalidArgumentError(
                f"counts must be a 1-D array with one entry per category ({k}); got shape {arr.shape}."
            )
        bad = ~(np.isfinite(arr) & (arr >= 0) & (arr == np.floor(arr)))
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(f"counts must be non-negative integers; entry {i} is {arr[i]}.")
        n = int(arr.sum())
        if n < 2:
            raise InvalidArgumentError(f"debias needs at least 2 reports to estimate a variance; got {n}.")
        q = self.other_probability
        spread = -math.expm1(-self.epsilon) * self.keep_probability  # p - q = p (1 - e^-eps), no cancellation
        f = arr / n
        return FrequencyEstimate(
            frequencies=(f - q) / spread,
            variance=f * (1.0 - f) / ((n - 1) * spread * spread),
            n=n,
        )
