r"""The exact finite core of :mod:`dpkit.verify.exact`, vectorised over pairs of rows.

What lives here
---------------
For row pairs ``(p[k], q[k])`` of output laws on a common finite set of outputs: the hockey-stick
divergence :math:`E_{e^\varepsilon}(p_k\|q_k) = \sum_o (p_k(o) - e^\varepsilon q_k(o))_+` with a
bound on its rounding error, the decision :math:`E_{e^\varepsilon} \le \delta` (re-decided at
:data:`DECIMAL_DIGITS` significant digits with :mod:`decimal` where the bound leaves it open), an
upper bound on :math:`D^\delta_\infty(p_k\|q_k)`, the tightest epsilon and delta over all pairs
rounded *up*, the worst direction and a witness set.

Contract
--------
Private to :mod:`dpkit.verify`: callers pass validated pmfs (rows of a mechanism table, or a pair
aligned on one support) and validated epsilon and delta (Dwork & Roth 2014, Def 3.6 and Remark
3.1; docs/notes.md §2).  Decisions are exact for the probabilities as given (floats); reported
epsilons and deltas are never understated, and for finite laws lie within a few ulps of the exact
values.

Why this module computes its own finite sums instead of calling :mod:`dpkit.divergences` once per
pair: a mechanism table has many neighbouring pairs, and both the hockey-stick and the
delta-approximate max divergence vectorise across pairs as whole-matrix NumPy operations.  The
latter uses the *prefix* form of Definition 3.6: the maximising set is a superlevel set of the
privacy loss, so :math:`D^\delta_\infty = \max_k \ln\frac{P(S_k)-\delta}{Q(S_k)}` over the sets
:math:`S_k` of the k outputs with the largest loss.  Each candidate is a ratio of two sums of
non-negative masses, so no cancellation occurs even for delta = 1e-300 (an iteration on
:math:`P(S)-\gamma Q(S)` cancels at ~1e-16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

_U = 2.0**-52  # the spacing of doubles at 1
#: Working precision (significant digits) of the decimal re-check of near-boundary decisions.
DECIMAL_DIGITS = 60


@dataclass(frozen=True, slots=True)
class _Rows:
    """Hockey-stick, D^delta and their rounding-error bounds for each row pair, and the decisions."""

    p: Array
    q: Array
    hockey: Array  # E_{e^eps}(p_k || q_k), float
    hockey_error: Array  # a bound on the rounding error of ``hockey``
    fails: NDArray[np.bool_]  # E > delta, decided exactly (decimal re-check near the boundary)
    approx_max: Array  # upper bound on D^delta_inf(p_k || q_k) (float value plus its error bound)
    epsilon: float
    delta: float


def _loss_and_error(p: Array, q: Array) -> tuple[Array, Array]:
    """ln(p/q) elementwise (+inf where q = 0 < p, -inf where p = 0) and a bound on its rounding error.

    ln p and ln q are each within one ulp (<= 2^-52 |ln x|) and the subtraction adds half an ulp
    of the result; the bound below is 4x that, plus 2^-50 absolute.
    """
    with np.errstate(divide="ignore"):
        logp, logq = np.log(p), np.log(q)
    both = (p > 0) & (q > 0)
    loss = np.full(p.shape, -np.inf)
    loss[both] = logp[both] - logq[both]
    loss[(p > 0) & (q == 0)] = np.inf
    eta = np.zeros(p.shape)
    eta[both] = 4.0 * _U * (np.abs(logp[both]) + np.abs(logq[both]) + 1.0)
    return loss, eta


def _hockey_stick_rows(p: Array, loss: Array, eta: Array, epsilon: float) -> tuple[Array, Array]:
    r""":math:`E_{e^\varepsilon} = \sum_{L>\varepsilon} p(1 - e^{\varepsilon - L})` per row, and an error bound.

    The summands have no cancellation (p > 0 and 1 - e^{eps - L} > 0 computed by expm1); the
    error comes from the loss (a point within eta of epsilon may be in or out, and moving L by eta
    moves its term by at most p * eta) and from rounding the terms and their sum.
    """
    over = loss > epsilon
    terms = np.zeros(p.shape)
    terms[over] = p[over] * -np.expm1(epsilon - loss[over])  # = p where L = +inf
    value = np.sum(terms, axis=-1)
    near = (loss > epsilon - eta) & np.isfinite(loss)
    n = p.shape[-1]
    error = np.sum(np.where(near, p * eta, 0.0), axis=-1) + (n + 4) * _U * value
    return np.minimum(value, 1.0), error


def _hockey_stick_decimal(p: Array, q: Array, epsilon: float) -> Decimal:
    """E_{e^eps}(p||q) = sum (p - e^eps q)_+ at DECIMAL_DIGITS significant digits (exact inputs).

    Only outputs that float arithmetic cannot rule out (loss > epsilon - its error bound) are
    summed in decimal; the others contribute 0 for certain.
    """
    loss, eta = _loss_and_error(p[None, :], q[None, :])
    maybe = np.flatnonzero(loss[0] > epsilon - eta[0])
    with localcontext() as ctx:
        ctx.prec = DECIMAL_DIGITS
        gamma = Decimal(epsilon).exp()
        total = Decimal(0)
        for a, b in zip(p[maybe].tolist(), q[maybe].tolist()):
            term = Decimal(a) - gamma * Decimal(b)
            if term > 0:
                total += term
        return min(total, Decimal(1))  # masses summing to 1 + 1e-16 cannot need delta > 1


def _approx_max_rows(p: Array, q: Array, loss: Array, eta: Array, delta: float, *, pad: bool = True) -> Array:
    r"""Upper bound on :math:`D^\delta_\infty` per row: max of ln((P(S_k)-delta)/Q(S_k)) over prefixes S_k.

    Definition 3.6 maximises over all S inside Supp(P) with P(S) >= delta; the maximiser can be
    taken to be a superlevel set {L >= ln gamma*} (docs/notes.md §2), i.e. a prefix of the outputs
    sorted by decreasing loss, and every prefix is itself a candidate set, so the prefix maximum
    is exactly the definition.  The result is raised by a bound on its rounding error: the logs
    and cumulative sums (k 2^-53 relative), the subtraction of delta (relative error amplified by
    P(S)/(P(S) - delta)), and outputs whose losses are within eta of each other and may be sorted
    in the wrong order (which moves the maximum by at most 2 eta).
    """
    shape = p.shape[:-1]
    if delta >= 1.0:
        return np.full(shape, -np.inf)
    order = np.argsort(-loss, axis=-1, kind="stable")
    ls = np.take_along_axis(loss, order, axis=-1)
    cp = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
    cq = np.cumsum(np.take_along_axis(q, order, axis=-1), axis=-1)
    numerator = cp - delta
    ok = (ls > -np.inf) & (numerator > 0)  # S inside Supp(P), P(S) > delta
    pos_q = ok & (cq > 0)
    cand = np.full(p.shape, -np.inf)
    err = np.zeros(p.shape)
    k = np.arange(1, p.shape[-1] + 1, dtype=np.float64) * np.ones(p.shape)
    log_num = np.log(numerator[pos_q])
    log_cq = np.log(cq[pos_q])
    cand[pos_q] = log_num - log_cq
    err[pos_q] = 4.0 * _U * (
        np.abs(log_num) + np.abs(log_cq) + np.abs(cand[pos_q]) + k[pos_q] * (cp[pos_q] / numerator[pos_q] + 1.0) + 2.0
    )
    cand[ok & (cq == 0)] = np.inf  # P(S) > delta on a set Q never produces
    best: NDArray[np.float64] = np.max(cand, axis=-1)
    if not pad:
        return best
    at = np.argmax(cand, axis=-1)
    spread = 2.0 * np.max(np.where(np.isfinite(loss), eta, 0.0), axis=-1)
    pad = np.take_along_axis(err, at[..., None], axis=-1)[..., 0] + spread
    padded: NDArray[np.float64] = np.where(np.isfinite(best), best + pad, best)
    return padded


def _check_rows(p: Array, q: Array, *, epsilon: float, delta: float) -> _Rows:
    """Decide E_{e^eps}(p_k||q_k) <= delta for every row pair k, exactly; bound D^delta from above."""
    loss, eta = _loss_and_error(p, q)
    hockey, error = _hockey_stick_rows(p, loss, eta, epsilon)
    fails = hockey > delta
    for k in np.flatnonzero(np.abs(hockey - delta) <= error).tolist():
        # near the boundary: decide on the exact inputs, in decimal
        fails[k] = _hockey_stick_decimal(p[k], q[k], epsilon) > Decimal(delta)
    return _Rows(p=p, q=q, hockey=hockey, hockey_error=error, fails=fails,
                 approx_max=_approx_max_rows(p, q, loss, eta, delta), epsilon=epsilon, delta=delta)


def _round_up(x: Decimal) -> float:
    value = float(x)
    return value if Decimal(value) >= x else math.nextafter(value, math.inf)


def _tightest_delta(rows: _Rows) -> float:
    """max_k E_{e^eps}(p_k||q_k), rounded up to a float: the directions that can attain the maximum
    (float value plus error bound >= the largest float value) are summed in decimal.  A direction
    with error bound 0 has no output within rounding of epsilon or above it: its E is exactly 0."""
    floor = float(np.max(rows.hockey))
    contenders = np.flatnonzero((rows.hockey + rows.hockey_error >= floor) & (rows.hockey_error > 0))
    exact = [_round_up(_hockey_stick_decimal(rows.p[k], rows.q[k], rows.epsilon)) for k in contenders.tolist()]
    return max([0.0, *exact])


def _tightest_epsilon(rows: _Rows, delta: float) -> float:
    """max(0, max_k D^delta(p_k||q_k)), rounded up to a float at which the exact profile is <= delta.

    ``rows.approx_max`` holds float maxima raised by an error bound (~1e-14).  The directions that
    can attain the maximum are visited in decreasing order of their float estimate; each is
    checked in decimal at the running answer (one exact hockey-stick: D^delta <= eps' iff
    E_{e^eps'} <= delta), and only where that fails is the answer raised, by geometrically growing
    steps from the float estimate up to its padded bound.  The result is an upper bound on the
    exact maximum, usually within a few ulps of it.
    """
    upper = rows.approx_max
    best = float(np.max(upper))
    if not math.isfinite(best) or best <= 0.0:
        return max(0.0, best)
    loss, eta = _loss_and_error(rows.p, rows.q)
    raw = _approx_max_rows(rows.p, rows.q, loss, eta, delta, pad=False)
    floor = max(float(np.max(raw)), 0.0)
    contenders = np.flatnonzero(upper >= floor)
    result = floor
    for k in contenders[np.argsort(-raw[contenders], kind="stable")].tolist():
        if _hockey_stick_decimal(rows.p[k], rows.q[k], result) <= Decimal(delta):
            continue  # this direction's D^delta is already <= result
        start = max(float(raw[k]), result)
        found = float(upper[k])
        trial, step = math.nextafter(start, math.inf), max(math.ulp(start), 2.0**-70)
        while trial < found:
            if _hockey_stick_decimal(rows.p[k], rows.q[k], trial) <= Decimal(delta):
                found = trial
                break
            trial, step = start + step, 4.0 * step  # geometric steps: ~25 tries at most up to the pad
        result = max(result, found)
    return result


def _worst(fails: NDArray[np.bool_], dd: Array) -> tuple[bool, int]:
    """(holds, index of the worst direction): argmax D^delta, among the failing directions if any fail."""
    holds = not bool(np.any(fails))
    score = dd if holds else np.where(fails, dd, -np.inf)
    if not holds and not np.any(score > -np.inf):  # pragma: no cover - failing implies D^delta > epsilon
        score = fails.astype(np.float64)
    return holds, int(np.argmax(score))


def _witness(p: Array, q: Array, epsilon: float, labels: np.ndarray) -> tuple[tuple[Any, ...], float, float]:
    """S = {o : p(o) > e^eps q(o)}, the set attaining the hockey-stick, and its two masses.

    Outputs whose float loss is within its rounding error of epsilon are placed in decimal.
    """
    loss, eta = _loss_and_error(p[None, :], q[None, :])
    loss, eta = loss[0], eta[0]
    s = loss > epsilon + eta
    unsure = np.flatnonzero((np.abs(loss - epsilon) <= eta) & np.isfinite(loss))
    if unsure.size:
        with localcontext() as ctx:
            ctx.prec = DECIMAL_DIGITS
            gamma = Decimal(epsilon).exp()
            for i in unsure.tolist():
                s[i] = Decimal(float(p[i])) > gamma * Decimal(float(q[i]))
    return tuple(labels[s].tolist()), math.fsum(p[s].tolist()), math.fsum(q[s].tolist())
