r"""Exact samplers for the selection mechanisms of :mod:`dpkit.mechanisms.exponential`.

What lives here
---------------
* :class:`_Gaps`: the exponents :math:`\gamma_i = c\,(u_{\max} - u_i)` of one utility vector, as
  floats with a rigorous error bound and as exact rationals on demand.
* :func:`_sample_softmax`: exact draws from :math:`P(i) \propto e^{-\gamma_i}`, the law of the
  exponential mechanism (also ``ReportNoisyMax(noise="gumbel")``).
* :func:`_sample_permute_and_flip`: exact draws of permute-and-flip
  (``ReportNoisyMax(noise="exponential")``), with :func:`_flip` its exact
  Bernoulli(:math:`e^{-\gamma_i}`) coins.

Contract
--------
Private to :mod:`dpkit.mechanisms`: callers pass validated, finite, non-empty utilities (at most
``2**28`` of them) and a coefficient ``c`` in [2**-1000, 2**1000].  Given ideal random bits, the
chosen index has *exactly* the mechanism's law for the utilities and parameters as given (each
float is the dyadic rational it represents, so :math:`\gamma_i = c\,(u_{\max} - u_i)` is an exact
rational): no rounding of probabilities, no truncated tails, no reliance on the accuracy of
``exp``.  Floats only *propose*; every decision that fixes the law is made against rigorous
integer enclosures of :math:`e^{-\gamma}` (:mod:`dpkit.random._arith`) or by
:mod:`dpkit.random`'s exact Bernoulli(:math:`e^{-\gamma}`) sampler.  How, for each law:

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

References
----------
McKenna & Sheldon 2020, "Permute-and-Flip", arXiv 2010.12603v2, Alg 1; Ilvento 2020,
arXiv 1912.04222v3 (floating-point risks).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidArgumentError, NumericalAccuracyError
from dpkit.random import bernoulli_exp
from dpkit.random.exact import LazyUniform, bernoulli_exp_exact, exp_neg_enclosure, floor_scaled
from dpkit.random.exact import bernoulli_exp_vector

_U = 2.0**-53  # unit roundoff of float64
_TINY = 2.0**-1070  # absolute slack: covers a gap that underflowed to a subnormal
_LOG2E_DOWN = 1.4426950408889634 * (1.0 - 2.0**-40)  # below log2(e), with room for rounding
_LN2_UP = 0.6931471805599454  # the float just above ln 2
_HUGE = 2.0**60  # gaps above this are split off as Bernoulli(e^-HUGE) (see _flip)
_WORD = 1 << 64
MAX_MULTIPLICITY = 1 << 30  # total weight of run-length candidates: keeps the proposal's sums below 2**62


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
def _sample_softmax(gaps: _Gaps, size: int, rng: np.random.Generator,
                    multiplicities: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
    r"""``size`` exact draws from :math:`P(i) \propto w_i e^{-\gamma_i}` (module docstring), with
    :math:`w_i` = ``multiplicities[i]`` (integers >= 1, summing to at most :data:`MAX_MULTIPLICITY`; all 1
    when None).

    With multiplicities the proposal weight of candidate ``i`` is :math:`w_i 2^{C - m_i}`, an exact
    integer, with :math:`C = \lceil\log_2 W\rceil + 2` for the total :math:`W = \sum_i w_i`; the
    acceptance probability :math:`e^{-\gamma_i} 2^{m_i}` is unchanged, so the accepted index has law
    :math:`\propto w_i e^{-\gamma_i}`: the exponential mechanism over :math:`W` candidates given as
    runs of equal utility (the caller draws the member of the run).  Capped candidates hold at most
    :math:`W \le 2^{C}/4` of the proposal's weight against at least :math:`2^C` for the top one, so a
    proposal is accepted with probability at least 1/5.
    """
    n = gaps.n
    if multiplicities is None:
        weight_total = n
    else:
        weight_total = int(np.sum(multiplicities, dtype=np.int64))
        if multiplicities.shape != (n,) or int(np.min(multiplicities)) < 1 or weight_total > MAX_MULTIPLICITY:
            raise InvalidArgumentError(  # pragma: no cover - callers validate (Exponential.release_runs)
                f"multiplicities must be {n} integers >= 1 summing to at most 2**30.")
    cap = max(1, (weight_total - 1).bit_length()) + 2  # 2**cap >= 4W: capped weights hold <= 1/4 of the mass
    clipped = np.minimum(gaps.hat, 4.0 * cap)  # lowering gamma only lowers m: still certified
    m = np.clip(np.floor(clipped * _LOG2E_DOWN) - 1.0, 0.0, float(cap)).astype(np.int64)
    # 2**m <= e**gamma: floor(gamma_hat log2(e) (1 - 2**-40)) - 1 <= gamma log2(e) (error bound of _Gaps)
    base = np.left_shift(np.int64(1), cap - m)
    # W <= 2**30 and 2**cap <= 8 W: every partial sum is at most W 2**cap <= 2**63 / 2, exact in int64
    cumulative = np.cumsum(base if multiplicities is None else base * multiplicities.astype(np.int64))
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
