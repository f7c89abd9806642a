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
  for the utilities and parameters as given (each float is the dyadic rational it represents, so
  :math:`\gamma_i = c\,(u_{\max} - u_i)` is an exact rational): no rounding of probabilities, no
  truncated tails, no reliance on the accuracy of ``exp``.  Floats only *propose*; every decision
  that fixes the law is made against rigorous integer enclosures of :math:`e^{-\gamma}`
  (:mod:`dpkit.random._arith`) or by :mod:`dpkit.random`'s exact Bernoulli(:math:`e^{-\gamma}`)
  sampler.  How, for each law:

  - *exponential mechanism* (also ``ReportNoisyMax(noise="gumbel")``): rejection sampling.  The
    proposal puts integer weight :math:`2^{C - m_i}` on candidate ``i``, where :math:`m_i \le
    \gamma_i \log_2 e - 1` is an integer certified from the floats and capped at
    :math:`C = \lceil\log_2 n\rceil + 2`; the proposal is sampled exactly with one bounded
    integer.  The proposed ``i`` is accepted with probability :math:`e^{-\gamma_i} 2^{m_i} \le 1`,
    decided by one 64-bit word against :math:`\lfloor 2^{64} e^{-\gamma_i} 2^{m_i}\rfloor`
    (computed exactly once per candidate that is ever proposed), ties (probability
    :math:`2^{-64}`) extended bit by bit.  The accepted index has law :math:`\propto
    e^{-\gamma_i}`, and at least one proposal in 4.25 is accepted.
  - *permute-and-flip* (``ReportNoisyMax(noise="exponential")``): McKenna & Sheldon's algorithm
    as written: visit the candidates in a uniformly random order (``Generator.permuted``) and stop
    at the first success of an exact Bernoulli(:math:`e^{-\gamma_i}`) coin.

  The only inexactness is that of the bit source (a cryptographically secure stream by default).

Why hand-written
----------------
The textbook implementation (``exp`` of the scaled utilities, then a uniform float compared with
cumulative sums) rounds every probability in a data-dependent way and lets small probabilities
underflow to 0, which alone breaks pure DP: the privacy loss of an output with probability 0 on
one input and not on a neighbour is infinite.  Ilvento 2020 (arXiv 1912.04222v3) analyses these
failures and proposes a base-2 mechanism with restricted parameters; the rejection scheme above
keeps the natural-base mechanism for every epsilon and needs only exact Bernoulli-style decisions,
which :mod:`dpkit.random` already provides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp as _logsumexp
from scipy.special import roots_legendre

from dpkit._math import Estimate, check_delta, check_epsilon, check_positive
from dpkit.distributions import Finite
from dpkit.errors import NumericalAccuracyError, UnsupportedError
from dpkit.guarantees import ApproxDP, PrivacyProfile, PureDP, RenyiDP, ZCDP
from dpkit.guarantees.conversions import pure_to_profile, pure_to_rdp, pure_to_zcdp
from dpkit.mechanisms._base import DominatingPair, Mechanism, Release, check_confidence
from dpkit.random import bernoulli_exp, default_rng, is_insecure
from dpkit.random._arith import LazyUniform, bernoulli_exp_exact, exp_neg_enclosure, floor_scaled
from dpkit.random._bernoulli import bernoulli_exp_vector

__all__ = ["Exponential", "ReportNoisyMax", "bounded_range_delta", "bounded_range_epsilon", "bounded_range_pair"]

Noise = Literal["gumbel", "exponential"]

_U = 2.0**-53  # unit roundoff of float64
_TINY = 2.0**-1070  # absolute slack: covers a gap that underflowed to a subnormal
_LOG2E_DOWN = 1.4426950408889634 * (1.0 - 2.0**-40)  # below log2(e), with room for rounding
_LN2_UP = 0.6931471805599454  # the float just above ln 2
_HUGE = 2.0**60  # gaps above this are split off as Bernoulli(e^-HUGE) (see _flip)
_MAX_CANDIDATES = 1 << 28  # keeps the proposal's integer weights below 2**63
_COEFF_RANGE = (2.0**-1000, 2.0**1000)  # epsilon/sensitivity outside: float gaps lose their error bound
_WORD = 1 << 64
_MAX_PF_ANALYSIS = 10_000  # quadrature cost and rounding grow like n^2


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
def _check_rng(rng: object) -> np.random.Generator:
    if rng is None:
        return default_rng()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. dpkit.random.secure_rng()) or None; "
            f"got {type(rng).__name__}."
        )
    return rng


def _utilities(utilities: ArrayLike, name: str = "utilities") -> NDArray[np.float64]:
    """A non-empty 1-D float array of finite utilities, or a clear error."""
    try:
        arr = np.array(utilities, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a 1-D array of real numbers (one utility per candidate); got "
            f"{type(utilities).__name__}."
        ) from None
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array with one utility per candidate; got shape {arr.shape}."
        )
    if arr.size == 0:
        raise ValueError(f"{name} is empty: the candidate set must contain at least one candidate.")
    if arr.size > _MAX_CANDIDATES:
        raise ValueError(f"{name} has {arr.size} candidates; at most 2**28 are supported.")
    finite = np.isfinite(arr)
    if not np.all(finite):
        bad = int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{name} must be finite; candidate {bad} has utility {arr[bad]}. NaN and infinities "
            "are refused, never used: clean or clamp the utilities first."
        )
    return arr


def _check_noise(noise: object) -> Noise:
    if noise == "gumbel":
        return "gumbel"
    if noise == "exponential":
        return "exponential"
    raise ValueError(f"noise must be 'gumbel' or 'exponential'; got {noise!r}.")


# ---------------------------------------------------------------------------------------------
# gaps gamma_i = c (u_max - u_i): floats with a rigorous error bound, exact rationals on demand
# ---------------------------------------------------------------------------------------------
class _Gaps:
    r"""The exponents :math:`\gamma_i = c\,(u_{\max} - u_i) \ge 0` of one utility vector.

    ``hat[i]`` is a float with :math:`|\hat\gamma_i - \gamma_i| \le` ``err[i]`` (or ``inf``, which
    certifies :math:`\gamma_i > 2^{1023}`); :meth:`exact` returns :math:`\gamma_i` as a Fraction.
    Error analysis: ``c_hat`` is ``c`` correctly rounded and normal (relative error <= u); the
    difference is correctly rounded (<= u; exact if subnormal); the product adds <= u, or an
    absolute 2**-1075 if it underflows.  So :math:`|\hat\gamma - \gamma| \le 3.01u\gamma + 2^{-1074}
    \le 4u\hat\gamma + 2^{-1070}`.
    """

    __slots__ = ("coefficient", "err", "hat", "top", "top_index", "u")

    def __init__(self, u: NDArray[np.float64], coefficient: Fraction) -> None:
        self.u = u
        self.coefficient = coefficient
        self.top_index = int(np.argmax(u))
        self.top = float(u[self.top_index])
        c_hat = float(coefficient)
        with np.errstate(over="ignore", under="ignore"):
            diff = self.top - u
            hat = c_hat * diff
            over = ~np.isfinite(diff)
            if np.any(over):  # |u| >= 2**1022 there, so halving is exact and cannot overflow
                half = self.top / 2.0 - u[over] / 2.0
                hat[over] = 2.0 * (c_hat * half)
        hat[self.top_index] = 0.0  # exact: u_max - u_max
        self.hat = hat
        self.err = 4.0 * _U * hat + _TINY

    @property
    def n(self) -> int:
        return int(self.u.size)

    def exact(self, i: int) -> Fraction:
        return self.coefficient * (Fraction(self.top) - Fraction(float(self.u[i])))


# ---------------------------------------------------------------------------------------------
# exact samplers
# ---------------------------------------------------------------------------------------------
def _sample_softmax(gaps: _Gaps, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    r"""``size`` exact draws from :math:`P(i) \propto e^{-\gamma_i}` (module docstring)."""
    n = gaps.n
    cap = max(1, (n - 1).bit_length()) + 2  # 2**cap >= 4n, so capped weights hold <= 1/4 of the mass
    clipped = np.minimum(gaps.hat, 4.0 * cap)  # lowering gamma only lowers m: still certified
    m = np.clip(np.floor(clipped * _LOG2E_DOWN) - 1.0, 0.0, float(cap)).astype(np.int64)
    # 2**m <= e**gamma: floor(gamma_hat log2(e) (1 - 2**-40)) - 1 <= gamma log2(e) (error bound of _Gaps)
    cumulative = np.cumsum(np.left_shift(np.int64(1), cap - m))
    total = int(cumulative[-1])

    thresholds = np.zeros(n, dtype=np.uint64)  # floor(2**64 e^-gamma 2**m), where known
    known = np.zeros(n, dtype=bool)
    always = np.zeros(n, dtype=bool)  # acceptance probability exactly 1 (gamma = 0 and m = 0)
    with np.errstate(invalid="ignore"):
        # e^-gamma 2^m < 2**-64 for sure: gamma - m ln 2 > 45 > 64 ln 2 (threshold 0, ties exact)
        known |= gaps.hat * (1.0 - 2.0**-40) - m * _LN2_UP > 45.0

    def enclosure(i: int) -> Callable[[int], tuple[int, int]]:
        g, shift = gaps.exact(i), int(m[i])
        return lambda prec: exp_neg_enclosure(g, prec + shift)  # 2**prec * e^-gamma * 2**m

    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        proposal = np.searchsorted(cumulative, rng.integers(0, total, size=pending.size), side="right")
        for i in np.unique(proposal[~known[proposal]]).tolist():
            t = floor_scaled(enclosure(i), 64)
            if t > _WORD:  # pragma: no cover - would mean the certificate for m_i is wrong
                raise NumericalAccuracyError(f"acceptance probability above 1 for candidate {i}.")
            always[i] = t == _WORD
            thresholds[i] = 0 if t == _WORD else t
            known[i] = True
        words = rng.integers(0, _WORD, size=pending.size, dtype=np.uint64)
        limit = thresholds[proposal]
        accept = always[proposal] | (words < limit)
        for j in np.flatnonzero(~always[proposal] & (words == limit)).tolist():
            accept[j] = LazyUniform(int(words[j]), 64, rng).less_than(enclosure(int(proposal[j])))
        out[pending[accept]] = proposal[accept]
        pending = pending[~accept]
    return out


def _flip(gaps: _Gaps, index: NDArray[np.intp], rng: np.random.Generator) -> NDArray[np.bool_]:
    r"""Independent exact Bernoulli(:math:`e^{-\gamma_i}`) coins for the candidates ``index``."""
    hat = gaps.hat[index]
    out = np.zeros(index.size, dtype=bool)
    huge = hat > 2.0 * _HUGE  # certifies gamma > 2**60
    normal = np.flatnonzero(~huge)
    if normal.size:
        picked = index[normal]
        out[normal] = bernoulli_exp_vector(
            hat[normal], gaps.err[picked], lambda j: gaps.exact(int(picked[j])), rng
        )
    far = np.flatnonzero(huge)
    if far.size:  # e^-gamma = e^-HUGE * e^-(gamma - HUGE); the first coin almost never succeeds
        first = np.asarray(bernoulli_exp(_HUGE, size=far.size, rng=rng))
        for j in far[first].tolist():
            out[j] = bernoulli_exp_exact(gaps.exact(int(index[j])) - Fraction(_HUGE), rng)
    return out


def _sample_permute_and_flip(gaps: _Gaps, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``size`` exact draws of permute-and-flip (McKenna & Sheldon 2020, Alg 1)."""
    n = gaps.n
    out = np.empty(size, dtype=np.int64)
    rows_per_chunk = max(1, (1 << 22) // n)
    for start in range(0, size, rows_per_chunk):
        rows = min(rows_per_chunk, size - start)
        order = rng.permuted(np.tile(np.arange(n, dtype=np.intp), (rows, 1)), axis=1)
        pending = np.arange(rows)
        column = 0
        while pending.size:  # the top candidate's coin always succeeds, so this ends by column n
            if column >= n:  # pragma: no cover - impossible: gamma = 0 gives a sure success
                raise NumericalAccuracyError("permute-and-flip visited every candidate without a success.")
            width = min(n - column, max(1, (1 << 20) // pending.size))
            block = order[pending, column : column + width]
            coins = _flip(gaps, block.ravel(), rng).reshape(block.shape)
            done = coins.any(axis=1)
            first = np.argmax(coins, axis=1)
            out[start + pending[done]] = block[done, first[done]]
            pending = pending[~done]
            column += width
    return out


# ---------------------------------------------------------------------------------------------
# bounded range (Durfee & Rogers 2019; Dong, Durfee & Rogers 2020)
# ---------------------------------------------------------------------------------------------
def bounded_range_pair(bounded_range: float, t: float) -> DominatingPair:
    r"""The two-point pair that dominates an :math:`\eta`-bounded-range pair with losses in [t - η, t].

    Parameters
    ----------
    bounded_range : float, finite, > 0
        :math:`\eta`: every neighbouring pair's privacy loss :math:`\ln(P(o)/Q(o))` takes values in
        an interval of width at most :math:`\eta`.
    t : float, in (0, bounded_range)
        The top of that interval.

    Returns
    -------
    DominatingPair
        P = (p, 1 - p) and Q = (p e^{-t}, (1 - p) e^{η - t}) on outputs {0, 1}, with
        :math:`p = (e^\eta - e^t)/(e^\eta - 1)` (so Q sums to 1): losses t and t - η.

    Raises
    ------
    ValueError
        If ``bounded_range`` is not finite and > 0, or ``t`` is not in (0, bounded_range).

    Notes
    -----
    Among pairs with losses in :math:`[t-\eta, t]`, the hockey-stick divergence
    :math:`E_{e^{\varepsilon}}(P\|Q) = E_P[(1 - e^{\varepsilon} e^{-L})_+]` is a convex function of
    :math:`e^{-L}`, whose mean is fixed at 1; so it is largest when :math:`e^{-L}` sits on the two
    ends: this pair.  The supremum over t is :func:`bounded_range_delta`.

    References
    ----------
    Dong, Durfee & Rogers 2020, "Optimal Differential Privacy Composition for Exponential
    Mechanisms", arXiv 1909.13830v4, Sec 3 (worst-case BR pairs); Durfee & Rogers 2019,
    arXiv 1905.04273v2, Def 2.1 (bounded range).

    Examples
    --------
    >>> pair = bounded_range_pair(1.0, 0.5)
    >>> [round(float(x), 6) for x in pair.P.probabilities]
    [0.622459, 0.377541]
    """
    eta = check_positive("bounded_range", bounded_range)
    top = float(t)
    if not (0.0 < top < eta):
        raise ValueError(f"t must be in (0, bounded_range={eta}); got {t}.")
    # p = (e^eta - e^t)/(e^eta - 1) = -expm1(t - eta) / -expm1(-eta), without overflow
    p = -math.expm1(top - eta) / -math.expm1(-eta)
    one_minus_p = -math.expm1(-top) / -math.expm1(-eta) * math.exp(top - eta)  # (e^t - 1)/(e^eta - 1)
    P = Finite([p, one_minus_p])
    Q = Finite([p * math.exp(-top), one_minus_p * math.exp(eta - top)])
    return DominatingPair(P=P, Q=Q)


def bounded_range_delta(bounded_range: float, epsilon: ArrayLike) -> NDArray[np.float64]:
    r"""The tight privacy profile of an :math:`\eta`-bounded-range mechanism.

    Parameters
    ----------
    bounded_range : float, finite, > 0
    epsilon : float or array of floats, finite, >= 0

    Returns
    -------
    ndarray
        Exact (up to rounding): :math:`\delta(\varepsilon) =
        \frac{(e^{\eta/2} - e^{\varepsilon/2})^2}{e^\eta - 1}` for :math:`\varepsilon < \eta`, and 0
        from :math:`\eta` on; at :math:`\varepsilon = 0` it is :math:`\tanh(\eta/4)`.

    Raises
    ------
    ValueError
        If ``bounded_range`` is not finite and > 0, or an epsilon is NaN, infinite or negative.

    Notes
    -----
    The supremum over t of the hockey-stick divergence of :func:`bounded_range_pair`: with
    :math:`g(t) = (e^\eta - e^t)(1 - e^{\varepsilon - t})`, :math:`g'(t) = 0` at
    :math:`t^* = (\eta+\varepsilon)/2`, where :math:`g = (e^{\eta/2} - e^{\varepsilon/2})^2`
    (the reverse direction is the same by :math:`t \mapsto \eta - t`).  Computed as
    :math:`\mathrm{expm1}((\varepsilon-\eta)/2)^2 / (-\mathrm{expm1}(-\eta))`, without overflow.
    The exponential mechanism attains it (two candidates whose utilities move by
    :math:`\pm\Delta_u`), so for it this profile is tight.

    References
    ----------
    Dong, Durfee & Rogers 2020, arXiv 1909.13830v4, Sec 3 (the worst case for one BR mechanism is
    this sup over t); derivation and numerical check in ``tests/mechanisms/test_exponential.py``.

    Examples
    --------
    >>> round(float(bounded_range_delta(1.0, 0.0)), 12)  # tanh(1/4)
    0.244918662404
    """
    eta = check_positive("bounded_range", bounded_range)
    e = np.asarray(epsilon, dtype=np.float64)
    bad = ~(np.isfinite(e) & (e >= 0.0))
    if np.any(bad):
        raise ValueError(f"epsilon must be finite and >= 0; got {e[bad].flat[0]}.")
    return _br_delta(eta, e)


def _br_delta(eta: float, e: NDArray[np.float64]) -> NDArray[np.float64]:
    gap = np.minimum((e - eta) / 2.0, 0.0)
    return np.asarray(np.expm1(gap) ** 2 / -math.expm1(-eta), dtype=np.float64)


def bounded_range_epsilon(bounded_range: float, delta: float) -> Estimate:
    r"""The smallest epsilon with :func:`bounded_range_delta` at most ``delta`` (never understated).

    Parameters
    ----------
    bounded_range : float, finite, > 0
    delta : float, in [0, 1]

    Returns
    -------
    Estimate
        Kind ``"exact"``: :math:`\max(0, \eta + 2\ln(1 - \sqrt{\delta (1 - e^{-\eta})}))`,
        rounded up to the first float at which the profile is at most ``delta``; ``eta`` at
        ``delta = 0``.

    Raises
    ------
    ValueError
        If ``bounded_range`` is not finite and > 0, or ``delta`` is NaN or outside [0, 1].

    Examples
    --------
    >>> float(bounded_range_epsilon(1.0, 0.0)), float(bounded_range_epsilon(1.0, 0.5))
    (1.0, 0.0)
    """
    eta = check_positive("bounded_range", bounded_range)
    d = check_delta(delta)
    return Estimate(_br_epsilon(eta, d), kind="exact", method=f"inverse bounded-range profile ({eta}-BR)")


def _br_epsilon(eta: float, d: float) -> float:
    if d == 0.0:
        return eta
    root = math.sqrt(d * -math.expm1(-eta))
    if root >= 1.0:
        return 0.0
    e = max(0.0, eta + 2.0 * math.log1p(-root))
    while e < eta and float(_br_delta(eta, np.asarray(e))) > d:  # round up: never understate
        e = min(eta, math.nextafter(e, math.inf))
    return e


# ---------------------------------------------------------------------------------------------
# the mechanisms
# ---------------------------------------------------------------------------------------------
class _Selection(Mechanism):
    """Shared parts of the selection mechanisms: parameters, validation, release, accuracy."""

    name = "selection"
    _law: Literal["softmax", "permute-and-flip"] = "softmax"

    def _init(self, sensitivity: float, epsilon: float | None, scale: float | None, monotonic: bool) -> None:
        delta_u = check_positive("sensitivity", sensitivity)
        if not isinstance(monotonic, (bool, np.bool_)):
            raise TypeError(f"monotonic must be True or False; got {monotonic!r}.")
        if (epsilon is None) == (scale is None):
            raise ValueError("give exactly one of epsilon (to calibrate) or scale (the noise scale).")
        factor = 1.0 if monotonic else 2.0  # epsilon = factor * sensitivity / scale
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            if not eps > 0:
                raise ValueError(f"epsilon must be > 0; got {eps}.")
        else:
            eps = factor * delta_u / check_positive("scale", scale)
            if not (eps > 0 and math.isfinite(eps)):
                raise ValueError(
                    f"scale={scale} with sensitivity={delta_u} gives epsilon={eps}, which is not a "
                    "finite positive number; choose a scale closer to the sensitivity."
                )
        coefficient = Fraction(eps) / (Fraction(factor) * Fraction(delta_u))
        if not (_COEFF_RANGE[0] <= coefficient <= _COEFF_RANGE[1]):
            raise ValueError(
                f"epsilon / sensitivity = {float(coefficient) * factor:.3g} is outside "
                "[2**-1000, 2**1000], where the sampler's floating-point certificates hold; "
                "rescale the utilities."
            )
        self._set("epsilon", eps)
        self._set("sensitivity", delta_u)
        self._set("monotonic", bool(monotonic))
        self._set("_coefficient", coefficient)

    epsilon: float
    sensitivity: float
    monotonic: bool
    _coefficient: Fraction

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
            raise ValueError(
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
            raise ValueError(f"utilities_x and utilities_y differ in length: {ux.size} vs {uy.size}.")
        diff = ux - uy
        far = np.abs(diff) > self.sensitivity
        if np.any(far):
            i = int(np.flatnonzero(far)[0])
            raise ValueError(
                f"not neighbours: candidate {i} moves by {abs(diff[i])} > sensitivity={self.sensitivity}."
            )
        if self.monotonic and np.any(diff > 0) and np.any(diff < 0):
            raise ValueError("not neighbours for a monotonic mechanism: utilities move in both directions.")
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
        if isinstance(candidates, bool) or not isinstance(candidates, (int, np.integer)) or candidates < 1:
            raise ValueError(f"candidates must be an integer >= 1; got {candidates!r}.")
        c = check_confidence(confidence)
        return self.scale * (math.log(int(candidates)) - math.log1p(-c))

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
        gen = _check_rng(rng)
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
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"size must be an integer >= 0; got {size!r}.")
        return self._draw(_Gaps(u, self._coefficient), int(size), _check_rng(rng))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, "
                f"monotonic={self.monotonic})")


def _br_profile(eta: float, name: str) -> PrivacyProfile:
    return PrivacyProfile(
        delta_function=lambda e: _br_delta(eta, np.asarray(e, dtype=np.float64)),
        epsilon_function=lambda d: bounded_range_epsilon(eta, d),
        kind="exact",
        description=f"{name}, {eta!r}-bounded range (Dong, Durfee & Rogers 2020)",
    )


def _br_zcdp(eta: float) -> ZCDP:
    br = eta * eta / 8.0
    pure = float(pure_to_zcdp(PureDP(eta)).rho)
    if br <= pure:
        return ZCDP(Estimate(br, kind="upper", method="bounded range: eps^2/8 (Cesar & Rogers 2021)"))
    return ZCDP(Estimate(pure, kind="upper", method="pure DP: eps tanh(eps/2) (Steinke 2024)"))


def _br_rdp(eta: float, name: str) -> RenyiDP:
    pure_curve = pure_to_rdp(PureDP(eta))

    def curve(alpha: ArrayLike) -> NDArray[np.float64]:
        a = np.asarray(alpha, dtype=np.float64)
        return np.minimum(a * eta * eta / 8.0, np.asarray(pure_curve.epsilon(a), dtype=np.float64))

    return RenyiDP(curve=curve, description=f"{name}: min(alpha eps^2/8, pure-DP curve)")


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
    _law = "softmax"

    def __init__(self, *, sensitivity: float, epsilon: float | None = None, scale: float | None = None,
                 monotonic: bool = False) -> None:
        self._init(sensitivity, epsilon, scale, monotonic)

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

    name = "report-noisy-max"

    def __init__(self, *, sensitivity: float, epsilon: float | None = None, scale: float | None = None,
                 noise: Noise = "gumbel", monotonic: bool = False) -> None:
        kind = _check_noise(noise)
        self._init(sensitivity, epsilon, scale, monotonic)
        self._set("noise", kind)
        self._set("_law", "softmax" if kind == "gumbel" else "permute-and-flip")
        self._set("name", f"report-noisy-max ({kind} noise)")

    noise: Noise

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
