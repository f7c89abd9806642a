r"""Exact discrete Gaussian sampler (Canonne, Kamath, Steinke 2020, Algorithm 3), vectorised.

Contract
--------
``discrete_gaussian(sigma)`` has pmf proportional to :math:`e^{-k^2/(2\sigma^2)}` on the integers,
for any float ``sigma`` in ``[2**-40, 2**40]`` taken as the exact dyadic rational it is, and, given
ideal uniform random bits, the output distribution is exactly that pmf.

How
---
CKS Algorithm 3 with :math:`t = \lfloor\sigma\rfloor + 1`: propose :math:`Y` from the discrete
Laplace law with scale ``t`` (exact, :func:`dpkit.random.discrete_laplace`) and accept with
probability :math:`e^{-\gamma}`, :math:`\gamma = (|Y| - \sigma^2/t)^2 / (2\sigma^2)`
(exact, :func:`dpkit.random._bernoulli.bernoulli_exp_vector`).  Proposals are drawn in blocks and
accepted draws kept in proposal order, so the output is a sequence of independent exact draws.

The acceptance step needs :math:`\gamma` per draw.  Its exact value is a rational with numerator
and denominator of a few hundred bits (:math:`\sigma^2` has a 106-bit mantissa), beyond int64, so
it is computed in float64 together with a rigorous bound on the error, from IEEE 754's correctly
rounded ``+ - *`` (unit roundoff :math:`u = 2^{-53}`): with :math:`c = \sigma^2/t`,
:math:`h = 1/(2\sigma^2)`, :math:`\hat c, \hat h` their nearest floats and
:math:`d = \mathrm{fl}(|Y| - \hat c)`,

.. math::

   |d - (|Y| - c)| \le e_1 = 1.01\,u\,(\hat c + |d|), \qquad
   |\hat\gamma - \gamma| \le 3.01\,u\,d^2 h + h\,e_1(2|d| + e_1),

and the code uses twice that (with ``2u`` in place of ``1.01u`` in :math:`e_1`) plus ``2**-1000``.
The Bernoulli step decides from the float only when the decision is certain under this bound and
recomputes the rest (about ``2**-45`` of draws) from the exact rational.  ``|Y| >= 2**52`` (where
``|Y|`` as a float would not be exact; probability below :math:`e^{-2^{11}}`) takes the exact path
too.  The bounds on ``sigma`` keep every float in this computation normal (no underflow).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpkit._math import check_positive
from dpkit.random._arith import bernoulli_exp_exact
from dpkit.random._bernoulli import bernoulli_exp_vector
from dpkit.random._checks import Size, check_rng, check_size, count, prime_allocator
from dpkit.random._geometric import _laplace_draws

__all__ = ["discrete_gaussian"]

_U = 2.0**-53
_TINY = 2.0**-1000
_MIN_SIGMA = 2.0**-40
_MAX_SIGMA = 2.0**40
_BLOCK = 1 << 16
_EXACT_Y = 1 << 52


def _gamma_estimate(
    abs_y: NDArray[np.float64], c_f: float, h_f: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Float64 :math:`\hat\gamma` and a rigorous bound on :math:`|\hat\gamma - \gamma|`.

    :math:`\gamma = (|Y| - c)^2 h` with ``c_f`` and ``h_f`` the nearest floats to ``c`` and ``h``
    and ``abs_y`` exact; the bound is derived in the module docstring.
    """
    d = abs_y - c_f
    ad = np.abs(d)
    g_hat = d * d * h_f
    e1 = 2 * _U * (c_f + ad)
    g_err = 2.0 * (4 * _U * g_hat + h_f * e1 * (2.0 * ad + e1)) + _TINY
    return g_hat, g_err


def _accept(
    y: NDArray[np.int64], c: Fraction, two_s: Fraction, rng: np.random.Generator
) -> NDArray[np.bool_]:
    """Bernoulli(exp(-(|y| - c)^2 / two_s)) for each proposal, exactly (CKS Alg 3, step 3)."""
    abs_y = np.abs(y)

    def gamma_exact(i: int) -> Fraction:
        return (abs(int(y[i])) - c) ** 2 / two_s

    small = abs_y < _EXACT_Y  # |Y| < 2**52 is exact as a float
    if small.all():
        g_hat, g_err = _gamma_estimate(abs_y.astype(np.float64), float(c), float(1 / two_s))
        return bernoulli_exp_vector(g_hat, g_err, gamma_exact, rng)
    out = np.empty(y.size, dtype=bool)  # pragma: no cover - probability below exp(-2**11)
    index = np.flatnonzero(small)
    g_hat, g_err = _gamma_estimate(abs_y[index].astype(np.float64), float(c), float(1 / two_s))
    out[index] = bernoulli_exp_vector(g_hat, g_err, lambda j: gamma_exact(int(index[j])), rng)
    for i in np.flatnonzero(~small):
        out[i] = bernoulli_exp_exact(gamma_exact(int(i)), rng)
    return out


def _gaussian_draws(sigma: float, n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    s2 = Fraction(sigma) ** 2  # sigma^2, exact
    t = math.floor(sigma) + 1  # CKS Alg 3: t = floor(sigma) + 1
    c = s2 / t
    two_s = 2 * s2
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        # Acceptance is at least ~0.5 for every sigma; ask for a little more than that implies.
        m = min(_BLOCK, 2 * need + 32)
        y = _laplace_draws(float(t), m, rng)
        kept = y[_accept(y, c, two_s, rng)][:need]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out


def discrete_gaussian(
    sigma: float, size: Size = None, *, rng: np.random.Generator | None = None
) -> NDArray[np.int64] | np.int64:
    r"""Draw exactly from the discrete Gaussian law, :math:`P(k) \propto e^{-k^2/(2\sigma^2)}`.

    Parameters
    ----------
    sigma : float, finite, in [2**-40, 2**40]
        Taken as the exact dyadic rational that the float is.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one ``numpy.int64``.
    rng : numpy.random.Generator, optional
        Source of random bits; default :func:`dpkit.random.default_rng` (secure).

    Returns
    -------
    numpy.ndarray of int64, or numpy.int64
        Exact draws (given ideal random bits).

    Raises
    ------
    ValueError
        If ``sigma`` is NaN, infinite, ``<= 0`` or outside ``[2**-40, 2**40]``, or ``size`` is
        invalid.

    Notes
    -----
    .. math:: P(k) = \frac{e^{-k^2/(2\sigma^2)}}{\sum_{j \in \mathbb{Z}} e^{-j^2/(2\sigma^2)}}

    CKS Algorithm 3: discrete Laplace proposals with scale :math:`\lfloor\sigma\rfloor + 1`,
    accepted with probability :math:`e^{-(|Y| - \sigma^2/t)^2/(2\sigma^2)}`; see
    :mod:`dpkit.random._gaussian` for how the acceptance stays exact in float64.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
    arXiv 2004.00010v5, Algorithm 3 (with Algorithms 1 and 2 as subroutines).

    Examples
    --------
    >>> from dpkit.random import insecure_seeded
    >>> discrete_gaussian(2.0, size=5, rng=insecure_seeded(0)).shape
    (5,)
    """
    value = check_positive("sigma", sigma)
    if not (_MIN_SIGMA <= value <= _MAX_SIGMA):
        raise ValueError(
            f"sigma must be in [2**-40, 2**40]; got {value}. (Below 2**-40 a draw is nonzero "
            "with probability under exp(-2**79); above 2**40 it would leave the exact float range.)"
        )
    shape = check_size(size)
    generator = check_rng(rng)
    n = count(shape)
    prime_allocator(n)
    draws = _gaussian_draws(value, n, generator)
    return draws[0] if shape is None else draws.reshape(shape)
