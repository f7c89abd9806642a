r"""Exact Bernoulli(exp(-gamma)) draws, for one gamma or one gamma per draw.

Contract
--------
``bernoulli_exp(gamma)`` is ``True`` with probability exactly :math:`e^{-\gamma}` (given ideal
uniform random bits) for every float ``gamma >= 0``, taken as the exact dyadic rational it is.

How
---
*One gamma for all draws.*  :math:`T = \lfloor 2^{32} e^{-\gamma} \rfloor` is computed once in exact
integer arithmetic; a uniform 32-bit word ``W`` gives ``True`` if ``W < T`` and ``False`` if
``W > T``; the fraction ``2**-32`` of ties is settled by extending that uniform with further words
(:class:`~dpkit.random._arith.LazyUniform`).  Half a 64-bit word per draw.

*One gamma per draw* (CKS 2020, Algorithm 1, in lockstep).  Write
:math:`\gamma = n/2 + r` with an integer :math:`n \ge 0` and :math:`r \in [0, 1]`.  Then

.. math:: e^{-\gamma} = P(G \ge n) \cdot e^{-r}, \qquad G \text{ geometric}, P(G \ge k) = e^{-k/2},

and Bernoulli(:math:`e^{-r}`) is Algorithm 1: draw :math:`A_k \sim` Bernoulli(:math:`r/k`) for
:math:`k = 1, 2, \dots` until the first :math:`A_k = 0`, and return whether that ``k`` is odd.  All
draws run round ``k`` together (a loop over rounds, not over draws; about
:math:`\log n / \log\log n` rounds).  Each :math:`A_k` compares a 32-bit uniform with :math:`r/k`
in float64, with a margin covering the IEEE 754 rounding of :math:`r/k` plus the error bound the
caller states for :math:`\hat r`.  A comparison the margin leaves open (about ``2**-32`` of them)
is redone exactly: the uniform is extended with fresh words and compared with the exact rational
:math:`r/k`.  So the draws are exact whenever the caller's error bound is a true bound, which is
all the discrete Gaussian sampler needs.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit.random._arith import (
    LazyUniform,
    bernoulli_exp_exact,
    exp_neg_enclosure,
    floor_scaled,
    fraction_enclosure,
)
from dpkit.random._checks import Size, check_size, count, prime_allocator, resolve_rng
from dpkit.random._geometric import _geometric_draws
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["bernoulli_exp"]

_U = 2.0**-53
_ULP32 = 2.0**-32
_TINY = 2.0**-1000  # absolute slack: covers underflow, where relative error bounds fail
_BLOCK = 1 << 16  # draws per vectorised block
_GEOMETRIC_CAP = 2.0**52  # n above this: G >= n is decided by G < 2**52 (else exactly, in Python)

ExactValue = Callable[[int], Fraction]


def _bernoulli_lazy(
    p_hat: NDArray[np.float64],
    p_err: NDArray[np.float64],
    p_exact: ExactValue,
    rng: np.random.Generator,
) -> NDArray[np.bool_]:
    """Bernoulli(p_i) for each i, where ``|p_hat - p| <= p_err`` and ``p_exact(i)`` is exact."""
    # 32 bits of U per comparison: a comparison is undecided with probability about 2**-32
    # (then settled exactly), and a 64-bit word of the generator serves two comparisons.
    u32 = rng.integers(0, 1 << 32, size=p_hat.size, dtype=np.uint32).astype(np.int64)
    lo = u32.astype(np.float64) * _ULP32  # U lies in [lo, lo + 2**-32)
    hi = lo + _ULP32
    # Margin: the caller's bound, doubled, plus 4u|p| for the rounding of p_hat -/+ margin.
    margin = 2.0 * p_err + 4 * _U * np.abs(p_hat) + _TINY
    yes = hi <= p_hat - margin  # U < hi <= p
    no = lo >= p_hat + margin  # U >= lo >= p
    for i in np.flatnonzero(~(yes | no)):
        yes[i] = LazyUniform(int(u32[i]), 32, rng).less_than(fraction_enclosure(p_exact(int(i))))
    return yes


def _algorithm1(
    r_hat: NDArray[np.float64],
    r_err: NDArray[np.float64],
    r_exact: ExactValue,
    rng: np.random.Generator,
) -> NDArray[np.bool_]:
    """Bernoulli(exp(-r_i)) for ``r_i`` in [0, 1] by CKS Algorithm 1, all draws in lockstep."""
    result = np.empty(r_hat.size, dtype=bool)
    active = np.arange(r_hat.size)
    k = 1
    while active.size:
        current = active  # bound now: the closure below is only called inside this round

        def p_exact(i: int, current: NDArray[np.intp] = current, k: int = k) -> Fraction:
            return r_exact(int(current[i])) / k

        # p = r / k: one division, relative rounding <= u, inside _bernoulli_lazy's 4u margin.
        a = _bernoulli_lazy(r_hat[current] / k, r_err[current] / k, p_exact, rng)
        result[current[~a]] = k % 2 == 1  # CKS Alg 1: return 1 iff the first A_k = 0 has k odd
        active = current[a]
        k += 1
    return result


def bernoulli_exp_vector(
    g_hat: NDArray[np.float64],
    g_err: NDArray[np.float64],
    g_exact: ExactValue,
    rng: np.random.Generator,
) -> NDArray[np.bool_]:
    r"""Bernoulli(exp(-gamma_i)) for each i, exact given ``|g_hat - gamma| <= g_err``.

    ``g_exact(i)`` returns :math:`\gamma_i` as a Fraction; it is called only for the rare draws
    that the float64 certificates cannot decide.  See the module docstring.
    """
    m = g_hat.size
    # n/2 <= gamma for sure: round down with margin (2 g_err + 4u g for the float subtraction).
    low = g_hat - (2.0 * g_err + 4 * _U * g_hat + _TINY)
    n_half = np.floor(2.0 * np.maximum(low, 0.0))  # the integer n, as an exact float
    r_hat = g_hat - 0.5 * n_half  # n / 2 exact; subtraction rounding <= u |r_hat|
    r_err = g_err + 2 * _U * np.abs(r_hat) + _TINY

    out = np.ones(m, dtype=bool)
    need = np.flatnonzero(n_half > 0)
    if need.size:
        n_need = n_half[need]
        capped = np.minimum(n_need, _GEOMETRIC_CAP).astype(np.int64)
        g = _geometric_draws(2.0, need.size, rng)  # P(G >= k) = exp(-k/2)
        passed = g >= capped
        # For n > 2**52 a draw G >= 2**52 (probability exp(-2**51)) still needs the exact test.
        for j in np.flatnonzero(passed & (n_need > _GEOMETRIC_CAP)):
            passed[j] = int(g[j]) >= int(n_need[j])
        out[need] = passed

    alive = np.flatnonzero(out)
    # Algorithm 1 needs r <= 1; that holds unless g_err is huge (gamma above ~2**48).
    safe = r_hat[alive] + 2.0 * r_err[alive] + 4 * _U <= 1.0
    for i in alive[~safe]:
        r = g_exact(int(i)) - Fraction(int(n_half[i]), 2)
        out[i] = bernoulli_exp_exact(r, rng)
    run = alive[safe]
    if run.size:

        def r_exact(j: int) -> Fraction:
            i = int(run[j])
            return g_exact(i) - Fraction(int(n_half[i]), 2)

        out[run] = _algorithm1(r_hat[run], r_err[run], r_exact, rng)
    return out


@lru_cache(maxsize=256)
def _threshold32(gamma: float) -> int:
    """``floor(2**32 * exp(-gamma))`` for ``gamma > 0``, exactly."""
    g = Fraction(gamma)
    return floor_scaled(lambda prec: exp_neg_enclosure(g, prec), 32)


def _bernoulli_exp_scalar(gamma: float, n: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    if gamma == 0:
        return np.ones(n, dtype=bool)
    threshold = np.uint32(_threshold32(gamma))
    words = rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
    out = words < threshold  # U < (W + 1) / 2**32 <= T / 2**32 <= exp(-gamma)
    ties = np.flatnonzero(words == threshold)  # probability 2**-32 each: settle exactly
    if ties.size:
        g = Fraction(gamma)
        for i in ties:
            out[i] = LazyUniform(int(words[i]), 32, rng).less_than(
                lambda prec: exp_neg_enclosure(g, prec)
            )
    return out


def _check_gamma_scalar(gamma: object) -> float:
    if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, (int, float, np.number)):
        raise ArgumentTypeError(
            f"gamma must be a real number or an array of them; got {type(gamma).__name__}."
        )
    value = float(gamma)
    if not (value >= 0 and value < float("inf")):
        raise InvalidArgumentError(f"gamma must be finite and >= 0; got {value}.")
    return value


def bernoulli_exp(
    gamma: ArrayLike, size: Size = None, *, rng: np.random.Generator | None = None
) -> NDArray[np.bool_] | np.bool_:
    r"""Draw exactly from Bernoulli(:math:`e^{-\gamma}`).

    Parameters
    ----------
    gamma : float or array_like of float, finite, >= 0
        Each value is taken as the exact dyadic rational that the float is.  An array gives one
        gamma per draw and broadcasts against ``size``.
    size : int or tuple of int, optional
        Output shape; ``None`` gives the shape of ``gamma`` (a scalar for a scalar gamma).
    rng : numpy.random.Generator, optional
        Source of random bits; default :func:`dpkit.random.default_rng` (secure).

    Returns
    -------
    numpy.ndarray of bool, or numpy.bool_
        Exact draws (given ideal random bits): ``True`` with probability :math:`e^{-\gamma}`.

    Raises
    ------
    ValueError
        If any ``gamma`` is NaN, infinite or negative, ``size`` is invalid, or ``gamma`` does not
        broadcast to ``size``.

    Notes
    -----
    A scalar ``gamma`` costs one 32-bit word per draw (comparison with
    :math:`\lfloor 2^{32} e^{-\gamma}\rfloor`, computed exactly; ties settled exactly).  An array runs CKS
    Algorithm 1 in lockstep after splitting off :math:`e^{-n/2}` as a geometric tail event; see
    :mod:`dpkit.random._bernoulli`.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
    arXiv 2004.00010v5, Algorithm 1.

    Examples
    --------
    >>> from dpkit.random import insecure_seeded
    >>> bernoulli_exp(0.5, size=4, rng=insecure_seeded(3)).dtype
    dtype('bool')
    """
    shape = check_size(size)
    generator = resolve_rng(rng)
    prime_allocator(count(shape) if shape is not None else int(np.size(gamma)))
    if np.ndim(gamma) == 0 and not isinstance(gamma, np.ndarray):
        value = _check_gamma_scalar(gamma)
        out = _bernoulli_exp_scalar(value, count(shape), generator)
        return out[0] if shape is None else out.reshape(shape)
    array = np.asarray(gamma)
    if array.dtype.kind not in "iuf":
        raise ArgumentTypeError(
            f"gamma must be a real number or an array of them; got dtype {array.dtype}."
        )
    if array.dtype.kind in "iu" and np.any((array > 2**53) | (array < -(2**53))):
        raise InvalidArgumentError(
            "gamma has integers beyond 2**53, too large to be represented exactly as float64; "
            "pass them as floats."
        )
    values = array.astype(np.float64, copy=False)
    if not (np.all(values >= 0) and np.all(np.isfinite(values))):
        bad = values[~((values >= 0) & np.isfinite(values))].ravel()[0]
        raise InvalidArgumentError(f"gamma must be finite and >= 0 everywhere; got {bad}.")
    target = values.shape if shape is None else shape
    try:
        flat = np.ascontiguousarray(np.broadcast_to(values, target)).ravel()
    except ValueError:
        raise InvalidArgumentError(
            f"gamma of shape {values.shape} does not broadcast to size {target}."
        ) from None
    out = np.empty(flat.size, dtype=bool)
    zeros = np.zeros(min(flat.size, _BLOCK))  # the gammas are exact: no error to carry
    for start in range(0, flat.size, _BLOCK):
        block = flat[start : start + _BLOCK]

        def exact(i: int, start: int = start) -> Fraction:
            return Fraction(float(flat[start + i]))

        out[start : start + block.size] = bernoulli_exp_vector(
            block, zeros[: block.size], exact, generator
        )
    shaped = out.reshape(target)
    return shaped[()] if shaped.ndim == 0 else shaped
