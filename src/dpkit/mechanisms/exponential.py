r"""The exponential mechanism and report-noisy-max, sampled exactly.

What lives here
---------------
* :class:`Exponential`: the exponential mechanism (McSherry & Talwar 2007; Dwork & Roth 2014,
  Def 3.4 and Thm 3.10), which picks candidate ``i`` with probability proportional to
  :math:`\exp(\varepsilon u_i / (2\Delta_u))`, or :math:`\exp(\varepsilon u_i / \Delta_u)` for
  utilities that are monotone in the data.
* :class:`ReportNoisyMax`: the index of the largest ``u_i + noise_i``.  With Gumbel noise of scale
  :math:`2\Delta_u/\varepsilon` it *is* the exponential mechanism (the Gumbel-max identity); with
  exponential noise of that scale it is the permute-and-flip mechanism (Ding et al. 2021).

Contract
--------
* Both are immutable :class:`~dpkit.mechanisms.Mechanism` values built from (``sensitivity``,
  ``epsilon``) or (``sensitivity``, ``scale``).  ``sensitivity`` is the utility sensitivity
  :math:`\Delta_u = \max_{r} \max_{x \sim y} |u(x, r) - u(y, r)|`, maximised over the candidates
  ``r`` **and** the neighbouring datasets (seed 004 maximises over the neighbours only; see
  ``docs/theory.md``).  ``monotonic=True`` promises that for every neighbouring pair the utilities
  of all candidates move in the same direction (counts under adding or removing one record).
* ``release(utilities)`` takes the 1-D array of candidate utilities computed on the private data and
  returns a :class:`~dpkit.mechanisms.Release` whose value is the chosen index.  NaN or infinite
  utilities and empty candidate sets are refused.  The release does **not** contain the selection
  probabilities: they are a function of the private utilities.  :meth:`probabilities` computes
  them for analysis (not private).
* **Exact sampling.**  Given ideal random bits, the chosen index has *exactly* the mechanism's law
  for the utilities and parameters as given: no rounding of probabilities, no truncated tails, no
  reliance on the accuracy of ``exp``.  How, and why hand-written (Ilvento 2020, arXiv
  1912.04222v3): :mod:`dpkit.mechanisms._selection_sampling`.  The bounded-range profile (Durfee &
  Rogers 2019; Dong, Durfee & Rogers 2020) is in :mod:`dpkit.mechanisms.bounded_range`, re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import field
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp as _logsumexp
from scipy.special import roots_legendre

from dpkit._math import Estimate, check_count, check_delta, check_epsilon, check_positive
from dpkit.distributions import Finite
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ApproxDP, PrivacyProfile, PureDP, RenyiDP, ZCDP
from dpkit.guarantees.conversions import pure_to_profile, pure_to_rdp, pure_to_zcdp
from dpkit._value import value_object
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release, check_confidence
from dpkit.mechanisms._selection_sampling import MAX_MULTIPLICITY, _Gaps, _sample_permute_and_flip, _sample_softmax
from dpkit.mechanisms.bounded_range import _br_delta, _br_profile, _br_rdp, _br_zcdp
from dpkit.mechanisms.bounded_range import bounded_range_delta, bounded_range_epsilon, bounded_range_pair
from dpkit.random import is_insecure
from dpkit.random import resolve_rng

__all__ = ["Exponential", "ReportNoisyMax", "bounded_range_delta", "bounded_range_epsilon", "bounded_range_pair"]

Noise = Literal["gumbel", "exponential"]

_MAX_CANDIDATES = 1 << 28  # keeps the proposal's integer weights below 2**63
_COEFF_RANGE = (2.0**-1000, 2.0**1000)  # epsilon/sensitivity outside: float gaps lose their error bound
_MAX_PF_ANALYSIS = 10_000  # quadrature cost and rounding grow like n^2


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _utilities(utilities: ArrayLike, name: str = "utilities") -> NDArray[np.float64]:
    """A non-empty 1-D float array of finite utilities, or a clear error."""
    try:
        arr = np.array(utilities, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"{name} must be a 1-D array of real numbers (one utility per candidate); got "
            f"{type(utilities).__name__}."
        ) from None
    if arr.ndim != 1:
        raise InvalidArgumentError(
            f"{name} must be a 1-D array with one utility per candidate; got shape {arr.shape}."
        )
    if arr.size == 0:
        raise InvalidArgumentError(f"{name} is empty: the candidate set must contain at least one candidate.")
    if arr.size > _MAX_CANDIDATES:
        raise InvalidArgumentError(f"{name} has {arr.size} candidates; at most 2**28 are supported.")
    finite = np.isfinite(arr)
    if not np.all(finite):
        # the message names no candidate and no value: utilities are computed on private data
        raise InvalidArgumentError(
            f"{name} must be finite: NaN and infinities are refused, never used; clean or clamp the "
            "utilities first."
        )
    return arr


def _lengths(lengths: ArrayLike, n: int) -> NDArray[np.int64]:
    """Run lengths: ``n`` integers >= 1 summing to at most 2**30, or a clear error."""
    try:
        raw = np.asarray(lengths)
    except (TypeError, ValueError):  # pragma: no cover - asarray takes almost anything
        raise ArgumentTypeError("lengths must be a 1-D array of integers.") from None
    whole_floats = raw.dtype.kind == "f" and bool(np.all(np.isfinite(raw)) and np.all(raw == np.floor(raw)))
    if raw.dtype.kind not in "iu" and not whole_floats:
        raise ArgumentTypeError(f"lengths must be integers (one run length per utility); got dtype {raw.dtype}.")
    if raw.shape != (n,):
        raise InvalidArgumentError(f"lengths must have one entry per utility ({n}); got shape {raw.shape}.")
    if np.any(raw < 1) or float(np.sum(raw, dtype=np.float64)) > MAX_MULTIPLICITY:
        raise InvalidArgumentError("lengths must each be >= 1 and sum to at most 2**30.")
    return raw.astype(np.int64)


def _check_noise(noise: object) -> Noise:
    if noise == "gumbel":
        return "gumbel"
    if noise == "exponential":
        return "exponential"
    raise InvalidArgumentError(f"noise must be 'gumbel' or 'exponential'; got {noise!r}.")


# ---------------------------------------------------------------------------------------------
# the mechanisms
# ---------------------------------------------------------------------------------------------
@value_object(init=False)
class _Selection(Mechanism):
    """Shared parts of the selection mechanisms: parameters, validation, release, accuracy."""

    name = "selection"

    epsilon: float
    sensitivity: float  # the utility sensitivity
    monotonic: bool
    # c = epsilon / (factor * sensitivity) as an exact fraction: what the exact sampler uses
    _coefficient: Fraction = field(repr=False, compare=False)

    @property
    def _law(self) -> Literal["softmax", "permute-and-flip"]:
        """The law of the selected index: softmax (exponential mechanism) or permute-and-flip."""
        return "softmax"

    def _init(self, sensitivity: float, epsilon: float | None, scale: float | None, monotonic: bool) -> None:
        """Validate the shared parameters and set the shared fields (from a subclass's ``__init__``)."""
        delta_u = check_positive("sensitivity", sensitivity)
        if not isinstance(monotonic, (bool, np.bool_)):
            raise ArgumentTypeError(f"monotonic must be True or False; got {monotonic!r}.")
        if (epsilon is None) == (scale is None):
            raise InvalidArgumentError("give exactly one of epsilon (to calibrate) or scale (the noise scale).")
        factor = 1.0 if monotonic else 2.0  # epsilon = factor * sensitivity / scale
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise InvalidArgumentError(f"epsilon must be > 0; got {eps}.")
        else:
            eps = factor * delta_u / check_positive("scale", scale)
            if not (eps > 0 and math.isfinite(eps)):
                raise InvalidArgumentError(
                    f"scale={scale} with sensitivity={delta_u} gives epsilon={eps}, which is not a "
                    "finite positive number; choose a scale closer to the sensitivity."
                )
        coefficient = Fraction(eps) / (Fraction(factor) * Fraction(delta_u))
        if not (_COEFF_RANGE[0] <= coefficient <= _COEFF_RANGE[1]):
            raise InvalidArgumentError(
                f"epsilon / sensitivity = {float(coefficient) * factor:.3g} is outside "
                "[2**-1000, 2**1000], where the sampler's floating-point certificates hold; "
                "rescale the utilities."
            )
        object.__setattr__(self, "epsilon", eps)  # frozen: set as a dataclass __init__ does
        object.__setattr__(self, "sensitivity", delta_u)
        object.__setattr__(self, "monotonic", bool(monotonic))
        object.__setattr__(self, "_coefficient", coefficient)

    @property
    def scale(self) -> float:
        r"""The noise scale :math:`2\Delta_u/\varepsilon` (:math:`\Delta_u/\varepsilon` if monotonic)."""
        return float(1 / self._coefficient)

    @property
    def pair(self) -> DominatingPair:
        """Not available: the worst pair depends on the utilities (see :meth:`pair_for`)."""
        raise UnsupportedError(
            f"the {self.name} has no single dominating pair: its output laws depend on the whole "
            "utility vector. Use pair_for(utilities_x, utilities_y) for two concrete neighbouring "
            "utility vectors; the guarantees (pure_dp, delta, approx_dp, profile, rdp, zcdp) are "
            "closed forms over all utilities."
        )

    @property
    def guarantee(self) -> PureDP:
        return self.pure_dp()

    def pure_dp(self) -> PureDP:
        r"""epsilon-DP, tight over all utilities of sensitivity :math:`\Delta_u`.

        References
        ----------
        McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014, Thm 3.10 (non-monotone, factor
        :math:`\varepsilon/(2\Delta_u)`) and the remark after it (monotone, :math:`\varepsilon/\Delta_u`);
        for permute-and-flip McKenna & Sheldon 2020, arXiv 2010.12603v2, Thm 1.  Checked exactly
        on counting queries in ``tests/mechanisms/test_exponential.py``.
        """
        return PureDP(Estimate(self.epsilon, kind="exact", method=f"{self.name}, tight over all utilities"))

    # ---- analysis helpers (not private: they read the utilities) --------------------------------
    def probabilities(self, utilities: ArrayLike) -> NDArray[np.float64]:
        """The selection probabilities for these utilities.  **Not private**: for analysis only.

        Parameters
        ----------
        utilities : array_like of float, 1-D, finite, non-empty

        Returns
        -------
        ndarray
            Probabilities computed in log space; masses below ~1e-308 are 0.  Softmax: relative
            error about 1e-15.  Permute-and-flip: Gauss-Legendre quadrature, exact up to rounding
            (about 1e-14 up to 200 candidates, 1e-11 at 3000).  The sampler does not use them.

        Raises
        ------
        ValueError
            Empty, multi-dimensional, NaN or infinite utilities; more than 10,000 candidates for
            permute-and-flip.
        """
        gaps = _Gaps(_utilities(utilities), self._coefficient)
        if self._law == "permute-and-flip" and gaps.n > _MAX_PF_ANALYSIS:
            raise InvalidArgumentError(
                f"probabilities of permute-and-flip are computed by quadrature for at most "
                f"{_MAX_PF_ANALYSIS} candidates; got {gaps.n}. (Sampling has no such limit.)"
            )
        if self._law == "softmax":
            log_w = -gaps.hat
            return np.asarray(np.exp(log_w - _logsumexp(log_w)), dtype=np.float64)
        return _pf_probabilities(gaps.hat)

    def pair_for(self, utilities_x: ArrayLike, utilities_y: ArrayLike) -> DominatingPair:
        r"""The exact pair of output laws for two neighbouring utility vectors.

        Parameters
        ----------
        utilities_x, utilities_y : array_like of float, 1-D, same length, finite
            Neighbours under this mechanism's assumptions: every
            :math:`|u_x - u_y| \le \Delta_u`, and, if ``monotonic``, all differences of one sign.

        Returns
        -------
        DominatingPair
            ``Finite`` laws over the candidate indices (``symmetric=False``).

        Raises
        ------
        ValueError
            Invalid utilities, different lengths, or vectors that are not neighbours.
        """
        ux = _utilities(utilities_x, "utilities_x")
        uy = _utilities(utilities_y, "utilities_y")
        if ux.shape != uy.shape:
            raise InvalidArgumentError(f"utilities_x and utilities_y differ in length: {ux.size} vs {uy.size}.")
        diff = ux - uy
        far = np.abs(diff) > self.sensitivity
        if np.any(far):
            i = int(np.flatnonzero(far)[0])
            raise InvalidArgumentError(
                f"not neighbours: candidate {i} moves by {abs(diff[i])} > sensitivity={self.sensitivity}."
            )
        if self.monotonic and np.any(diff > 0) and np.any(diff < 0):
            raise InvalidArgumentError("not neighbours for a monotonic mechanism: utilities move in both directions.")
        return DominatingPair(P=Finite(self.probabilities(ux)), Q=Finite(self.probabilities(uy)))

    def utility_gap_bound(self, candidates: int, confidence: float = 0.95) -> float:
        r"""A data-independent accuracy bound: with probability >= ``confidence``, the chosen
        candidate's utility is at least :math:`\max_r u_r - \text{bound}`.

        Parameters
        ----------
        candidates : int, >= 1
        confidence : float, in (0, 1)

        Returns
        -------
        float
            :math:`\text{scale} \cdot (\ln n + \ln(1/(1 - \text{confidence})))`, an upper bound.

        Notes
        -----
        Every candidate r with gap :math:`s` is chosen with probability at most :math:`e^{-s/\text{scale}}`
        (for the exponential mechanism because the top candidate has weight 1; for permute-and-flip
        because r's coin must succeed), and a union bound over the n candidates gives the result.

        References
        ----------
        Dwork & Roth 2014, Thm 3.11; McKenna & Sheldon 2020, arXiv 2010.12603v2, Sec 4.
        """
        n = check_count("candidates", candidates)
        c = check_confidence(confidence)
        return self.scale * (math.log(n) - math.log1p(-c))

    # ---- release ---------------------------------------------------------------------------------
    def _draw(self, gaps: _Gaps, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
        if self._law == "softmax":
            return _sample_softmax(gaps, size, rng)
        return _sample_permute_and_flip(gaps, size, rng)

    def release(
        self, utilities: ArrayLike, *, rng: np.random.Generator | None = None, confidence: float = 0.95
    ) -> Release:
        """Choose one candidate index.

        Parameters
        ----------
        utilities : array_like of float, 1-D, finite, non-empty
            One utility per candidate, computed on the private data.
        rng : numpy.random.Generator, optional
            Default: the process's secure generator.
        confidence : float, in (0, 1)
            Level of the accuracy bound in ``details["utility_gap_bound"]``.

        Returns
        -------
        Release
            ``values``: the chosen index (a 0-d int64 array; ``.value`` gives it as a number).
            ``interval``: ``(0, n - 1)``: a selection has no interval for a true value, and this
            trivially valid one says so.  ``scale``: the noise scale.  ``details``:
            ``candidates`` and ``utility_gap_bound`` (:meth:`utility_gap_bound`).

        Raises
        ------
        ValueError
            Empty, multi-dimensional, NaN or infinite utilities; ``confidence`` outside (0, 1).
        TypeError
            Non-numeric utilities, or an ``rng`` that is not a NumPy Generator.
        """
        u = _utilities(utilities)
        c = check_confidence(confidence)
        gen = resolve_rng(rng)
        index = self._draw(_Gaps(u, self._coefficient), 1, gen)[0]
        return Release(
            values=np.asarray(index, dtype=np.int64),  # a candidate index, not a float
            scale=self.scale,
            confidence=c,
            interval=(np.asarray(0.0), np.asarray(float(u.size - 1))),
            guarantee=self.guarantee,
            mechanism=self.name,
            insecure=is_insecure(gen),
            details={"candidates": int(u.size), "utility_gap_bound": self.utility_gap_bound(u.size, c)},
        )

    def sample(
        self, utilities: ArrayLike, size: int, *, rng: np.random.Generator | None = None
    ) -> NDArray[np.int64]:
        """``size`` independent selections on the same utilities, for tests and simulation.

        Each draw is a separate epsilon-DP release: publishing k of them costs k epsilon (basic
        composition), which is why :meth:`release` returns one.

        Parameters
        ----------
        utilities : array_like of float, 1-D, finite, non-empty
        size : int, >= 0
        rng : numpy.random.Generator, optional

        Returns
        -------
        ndarray of int64, shape (size,)
        """
        u = _utilities(utilities)
        n = check_count("size", size, minimum=0)
        return self._draw(_Gaps(u, self._coefficient), n, resolve_rng(rng))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, "
                f"monotonic={self.monotonic})")


@value_object(init=False, repr=False)  # repr: _Selection's
class Exponential(_Selection):
    r"""The exponential mechanism, sampled exactly: choose i with probability ∝ exp(c u_i).

    :math:`c = \varepsilon/(2\Delta_u)`, or :math:`c = \varepsilon/\Delta_u` with
    ``monotonic=True``.  The release is epsilon-DP (tight over all utilities), epsilon-bounded-range
    (so its (epsilon', delta) profile is the smaller one of :func:`bounded_range_delta`) and
    :math:`\min(\varepsilon^2/8, \varepsilon\tanh(\varepsilon/2))`-zCDP.

    Parameters
    ----------
    sensitivity : float, finite, > 0
        The utility sensitivity :math:`\Delta_u = \max_r \max_{x\sim y} |u(x,r) - u(y,r)|`,
        maximised over candidates **and** neighbours.
    epsilon : float, finite, > 0, optional
        Give this or ``scale``.
    scale : float, finite, > 0, optional
        The temperature :math:`1/c`: probabilities ∝ exp(u_i / scale); then
        epsilon = 2 sensitivity / scale (sensitivity / scale if monotonic), rounded to the nearest
        float, and the mechanism is exactly the one with that epsilon.
    monotonic : bool, default False
        True if, for every pair of neighbours, all utilities move in the same direction (counts
        under adding or removing a record); then the factor is epsilon/sensitivity.

    Raises
    ------
    ValueError
        ``sensitivity``, ``epsilon`` or ``scale`` NaN, infinite or <= 0; both or neither of
        ``epsilon`` and ``scale``; epsilon/sensitivity outside [2**-1000, 2**1000].

    Notes
    -----
    Sampling is exact (module docstring): rejection from a power-of-two proposal, each acceptance
    decided against :math:`\lfloor 2^{64}e^{-\gamma}2^{m}\rfloor` computed in integer arithmetic.
    Utilities may be as large as float64 allows (differences that overflow are handled).
    ``pair`` is refused (the laws depend on the utilities); :meth:`pair_for` gives the exact pair
    for two concrete utility vectors.

    References
    ----------
    McSherry & Talwar 2007, "Mechanism design via differential privacy", Thm 6; Dwork & Roth 2014,
    Def 3.4, Thm 3.10 and 3.11 (seed 004 states the mechanism); Durfee & Rogers 2019,
    arXiv 1905.04273v2 (bounded range); Dong, Durfee & Rogers 2020, arXiv 1909.13830v4;
    Ilvento 2020, arXiv 1912.04222v3 (floating-point risks).

    Examples
    --------
    >>> m = Exponential(sensitivity=1.0, epsilon=1.0)
    >>> m.probabilities([0.0, 2.0]).round(4).tolist(), str(m.guarantee)
    ([0.2689, 0.7311], '1.0-DP')
    """

    name = "exponential mechanism"

    def __init__(self, *, sensitivity: float, epsilon: float | None = None, scale: float | None = None,
                 monotonic: bool = False) -> None:
        self._init(sensitivity, epsilon, scale, monotonic)

    # ---- candidates given as runs of equal utility -----------------------------------------------
    def release_runs(self, utilities: ArrayLike, lengths: ArrayLike, *, rng: np.random.Generator | None = None,
                     confidence: float = 0.95) -> Release:
        r"""The exponential mechanism over :math:`W = \sum_i \ell_i` candidates given as runs: candidates
        :math:`\ell_0 + \dots + \ell_{i-1}` to :math:`\ell_0 + \dots + \ell_i - 1` all have utility
        ``utilities[i]``.  Returns the chosen candidate's index in ``0 .. W - 1``.

        The law is exactly that of ``release(np.repeat(utilities, lengths))``: the run is drawn with
        probability :math:`\propto \ell_i e^{c u_i}` by the exact rejection sampler with integer
        multiplicities (:func:`~dpkit.mechanisms._selection_sampling._sample_softmax`), then the member of
        the run uniformly (``Generator.integers``: exact for integer ranges).  By the chain rule the index
        has probability :math:`\ell_i e^{c u_i} / Z \cdot 1/\ell_i = e^{c u_i} / Z`, the mechanism's law
        over the expanded candidates, so the guarantee is the one of :meth:`pure_dp` whenever the expanded
        candidate set is public and every expanded candidate's utility has sensitivity
        :math:`\Delta_u`.  The run boundaries may depend on the data: they are not released, only the
        expanded index (McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014, Thm 3.10).  Cost: O(number of
        runs), not O(W), which is what makes a fine grid of candidates affordable (Smith 2011, STOC,
        "Privacy-preserving statistical estimation with optimal convergence rates", uses the exponential mechanism
        for quantiles over the intervals between sorted data points, weighted by their lengths: on a public grid
        this is that mechanism with each interval's length counted in grid candidates).

        Parameters
        ----------
        utilities : array_like of float, 1-D, finite, non-empty
        lengths : array_like of int, same length, each >= 1, sum at most 2**30
        rng : numpy.random.Generator, optional
        confidence : float, in (0, 1)
            Level of ``details["utility_gap_bound"]`` (over the W expanded candidates).

        Returns
        -------
        Release
            ``values``: the expanded index (0-d int64).  ``details``: ``candidates`` (W) and
            ``utility_gap_bound``.
        """
        u = _utilities(utilities)
        ell = _lengths(lengths, u.size)
        c = check_confidence(confidence)
        gen = resolve_rng(rng)
        index = self._draw_runs(u, ell, 1, gen)[0]
        total = int(ell.sum())
        return Release(
            values=np.asarray(index, dtype=np.int64),
            scale=self.scale,
            confidence=c,
            interval=(np.asarray(0.0), np.asarray(float(total - 1))),
            guarantee=self.guarantee,
            mechanism=self.name,
            insecure=is_insecure(gen),
            details={"candidates": total, "utility_gap_bound": self.utility_gap_bound(total, c)},
        )

    def sample_runs(self, utilities: ArrayLike, lengths: ArrayLike, size: int, *,
                    rng: np.random.Generator | None = None) -> NDArray[np.int64]:
        """``size`` independent draws of :meth:`release_runs` (for tests and simulation; each is a release)."""
        u = _utilities(utilities)
        ell = _lengths(lengths, u.size)
        n = check_count("size", size, minimum=0)
        return self._draw_runs(u, ell, n, resolve_rng(rng))

    def _draw_runs(self, u: NDArray[np.float64], ell: NDArray[np.int64], size: int,
                   rng: np.random.Generator) -> NDArray[np.int64]:
        runs = _sample_softmax(_Gaps(u, self._coefficient), size, rng, multiplicities=ell)
        starts = np.concatenate([[0], np.cumsum(ell)[:-1]]).astype(np.int64)
        offsets = rng.integers(0, ell[runs]) if size else np.zeros(0, dtype=np.int64)  # exact uniform integers
        return np.asarray(starts[runs] + offsets, dtype=np.int64)

    @property
    def bounded_range(self) -> float:
        r""":math:`\eta = \varepsilon`: every privacy loss lies in an interval of width epsilon.

        The loss at output o is :math:`c(u_o(x) - u_o(y)) + \ln(Z_y/Z_x)`; its first term lies in
        :math:`[-c\Delta_u, c\Delta_u]`, of width :math:`2c\Delta_u = \varepsilon` (standard
        analysis), or, for monotone utilities, in :math:`[0, c\Delta_u]` or
        :math:`[-c\Delta_u, 0]`, of width :math:`c\Delta_u = \varepsilon`.  Accountants compose
        bounded-range mechanisms more tightly than epsilon-DP ones.

        References
        ----------
        Durfee & Rogers 2019, arXiv 1905.04273v2, Def 2.1 and Lemma 3.1; Dong, Durfee & Rogers
        2020, arXiv 1909.13830v4.
        """
        return self.epsilon

    def delta(self, epsilon: float) -> float:
        """The smallest delta for ``epsilon``: the tight bounded-range profile (:func:`bounded_range_delta`)."""
        return float(_br_delta(self.epsilon, np.asarray(check_epsilon(epsilon))))

    def approx_dp(self, delta: float) -> ApproxDP:
        """(epsilon', delta)-DP with the smallest epsilon' (:func:`bounded_range_epsilon`)."""
        return ApproxDP(epsilon=bounded_range_epsilon(self.epsilon, delta), delta=check_delta(delta))

    def profile(self) -> PrivacyProfile:
        """The profile of an epsilon-bounded-range mechanism: tight over all utilities."""
        return _br_profile(self.epsilon, self.name)

    def zcdp(self) -> ZCDP:
        r""":math:`\rho = \min(\varepsilon^2/8, \varepsilon\tanh(\varepsilon/2))`, an upper bound.

        :math:`\varepsilon^2/8` holds for every :math:`\varepsilon`-bounded-range mechanism (Cesar &
        Rogers 2021, arXiv 2004.07223v2, Lemma 3.2 [R]; checked against the worst-case pairs of
        :func:`bounded_range_pair` in the tests), :math:`\varepsilon\tanh(\varepsilon/2)` for every
        :math:`\varepsilon`-DP one (Steinke 2024, Thm 5); the first is smaller below about 7.9.
        """
        return _br_zcdp(self.epsilon)

    def rdp(self) -> RenyiDP:
        r"""The Rényi curve :math:`\min(\alpha\varepsilon^2/8, \text{RR}_\varepsilon(\alpha))`, an upper bound.

        Each term is valid at every order: the first from :meth:`zcdp`, the second is the tight
        curve of an :math:`\varepsilon`-DP mechanism (:func:`~dpkit.guarantees.pure_to_rdp`).
        """
        return _br_rdp(self.epsilon, self.name)


@value_object(init=False)
class ReportNoisyMax(_Selection):
    r"""Report-noisy-max: the index of the largest utility plus independent noise, sampled exactly.

    * ``noise="gumbel"``: Gumbel noise of scale :math:`2\Delta_u/\varepsilon` (``Δ_u/ε`` if
      monotonic).  By the Gumbel-max identity the argmax has exactly the law of
      :class:`Exponential`; it is sampled by the same exact sampler (no Gumbel variates are drawn)
      and has the same guarantees (epsilon-DP, epsilon-bounded range).
    * ``noise="exponential"``: exponential noise of that scale.  Its argmax has exactly the law of
      permute-and-flip (Ding et al. 2021), which is sampled exactly as McKenna & Sheldon's
      algorithm; it is epsilon-DP, never less accurate in expectation than the exponential
      mechanism, but not epsilon-bounded-range, so its profile is the one of an epsilon-DP
      mechanism (:func:`~dpkit.guarantees.pure_to_profile`).

    Parameters
    ----------
    sensitivity : float, finite, > 0
        Utility sensitivity, maximised over candidates and neighbours.
    epsilon : float, finite, > 0, optional
        Give this or ``scale``.
    scale : float, finite, > 0, optional
        The noise scale; epsilon = 2 sensitivity / scale (sensitivity / scale if monotonic).
    noise : {"gumbel", "exponential"}
    monotonic : bool, default False
        True if all utilities move in the same direction between any two neighbours.

    Raises
    ------
    ValueError
        As :class:`Exponential`, and for an unknown ``noise``.

    Notes
    -----
    Why not add floating-point noise and take the argmax: the noisy values would be rounded in a
    data-dependent way and the noise itself would be drawn from a float approximation of its law;
    drawing the argmax from its exact law removes both.  Monotone case: scale
    :math:`\Delta_u/\varepsilon` is epsilon-DP for both noises (Ding et al. 2021; checked exactly on
    counting queries in the tests).

    References
    ----------
    Dwork & Roth 2014, Claim 3.9 (report noisy max); McKenna & Sheldon 2020, "Permute-and-Flip",
    arXiv 2010.12603v2, Alg 1 and Thm 1; Ding, Kifer, Saghaian, Steinke, Wang, Xiao, Zhang 2021,
    "The permute-and-flip mechanism is identical to report-noisy-max with exponential noise",
    arXiv 2105.07260v1.

    Examples
    --------
    >>> m = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="exponential")
    >>> m.probabilities([0.0, 2.0]).round(4).tolist(), str(m.guarantee)
    ([0.1839, 0.8161], '1.0-DP')
    """

    noise: Noise
    name: str = field(repr=False, compare=False)  # "report-noisy-max (<noise> noise)"

    def __init__(self, *, sensitivity: float, epsilon: float | None = None, scale: float | None = None,
                 noise: Noise = "gumbel", monotonic: bool = False) -> None:
        kind = _check_noise(noise)
        self._init(sensitivity, epsilon, scale, monotonic)
        object.__setattr__(self, "noise", kind)
        object.__setattr__(self, "name", f"report-noisy-max ({kind} noise)")

    @property
    def _law(self) -> Literal["softmax", "permute-and-flip"]:
        """Gumbel noise: the exponential mechanism's softmax; exponential noise: permute-and-flip."""
        return "softmax" if self.noise == "gumbel" else "permute-and-flip"

    @property
    def bounded_range(self) -> float:
        """epsilon for Gumbel noise (the exponential mechanism); refused for exponential noise."""
        if self.noise == "gumbel":
            return self.epsilon
        raise UnsupportedError(
            "report-noisy-max with exponential noise (permute-and-flip) is not claimed to be "
            "epsilon-bounded-range; use its pure_dp() or profile()."
        )

    def delta(self, epsilon: float) -> float:
        """Smallest delta: bounded-range profile (Gumbel) or the tight epsilon-DP profile (exponential)."""
        if self.noise == "gumbel":
            return float(_br_delta(self.epsilon, np.asarray(check_epsilon(epsilon))))
        return float(pure_to_profile(self.pure_dp()).delta(check_epsilon(epsilon)))

    def approx_dp(self, delta: float) -> ApproxDP:
        """(epsilon', delta)-DP with the smallest epsilon' of :meth:`profile`."""
        if self.noise == "gumbel":
            return ApproxDP(epsilon=bounded_range_epsilon(self.epsilon, delta), delta=check_delta(delta))
        return ApproxDP(epsilon=pure_to_profile(self.pure_dp()).epsilon(delta), delta=check_delta(delta))

    def profile(self) -> PrivacyProfile:
        """Bounded-range profile (Gumbel noise) or that of an epsilon-DP mechanism (exponential noise)."""
        if self.noise == "gumbel":
            return _br_profile(self.epsilon, self.name)
        return pure_to_profile(self.pure_dp())

    def zcdp(self) -> ZCDP:
        """As :meth:`Exponential.zcdp` (Gumbel noise), or epsilon tanh(epsilon/2) (exponential noise)."""
        if self.noise == "gumbel":
            return _br_zcdp(self.epsilon)
        return pure_to_zcdp(self.pure_dp())

    def rdp(self) -> RenyiDP:
        """As :meth:`Exponential.rdp` (Gumbel noise), or the tight epsilon-DP curve (exponential noise)."""
        if self.noise == "gumbel":
            return _br_rdp(self.epsilon, self.name)
        return pure_to_rdp(self.pure_dp())

    def __repr__(self) -> str:
        return (f"ReportNoisyMax(sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, "
                f"noise={self.noise!r}, monotonic={self.monotonic})")


def _pf_probabilities(gap: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""Permute-and-flip's law: :math:`P(r) = p_r \int_0^1 \prod_{j \ne r} (1 - x p_j)\,dx`.

    (Candidate r is output iff its coin succeeds and every candidate placed before it fails; with
    i.i.d. uniform arrival times x.)  The integrand is a polynomial of degree n - 1, so
    Gauss-Legendre with n // 2 + 2 nodes is exact in exact arithmetic; positive weights and a
    positive integrand evaluated in log space keep the float error small (the total mass is within
    1e-14 of 1 up to 200 candidates, 1e-11 at 3000).
    """
    p = np.exp(-gap)
    nodes, weights = roots_legendre(p.size // 2 + 2)
    x = (nodes + 1.0) / 2.0
    w = weights / 2.0
    integrals = np.zeros(p.size)
    for start in range(0, x.size, 64):  # blocks of nodes keep memory at 64 n floats
        log_terms = np.log1p(-np.outer(x[start : start + 64], p))  # x < 1, so finite
        total = log_terms.sum(axis=1, keepdims=True)
        integrals += w[start : start + 64] @ np.exp(total - log_terms)
    return np.asarray(p * integrals, dtype=np.float64)
