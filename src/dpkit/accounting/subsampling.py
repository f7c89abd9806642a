r"""Amplification by Poisson subsampling, as privacy loss distributions.

With sampling rate q, a mechanism whose base dominating pair is (P, Q) becomes, under Poisson
subsampling and the add/remove neighbourhood, dominated by ``(q P + (1 - q) Q, Q)`` for removal and
``(Q, q P + (1 - q) Q)`` for addition (Zhu, Dong, Wang 2022, arXiv 2106.08567, Thm 11; the same pairs
as dp_accounting's ``sampling_prob``).  Their losses are monotone functions of the base loss l:
ln(1 - q + q e^l) and its negative, so the subsampled loss law is the base law pushed through that
map: exact interval masses, no sampling, then the same pessimistic and optimistic discretisations
as :mod:`dpkit.accounting.pld`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dpkit._math import check_delta, check_positive
from dpkit.accounting._pld_discretize import LossLaw, gaussian_law, laplace_law
from dpkit.accounting.pld import PLD, Interval, _check_grid_tail, _check_k, _from_law, _loss_scale, default_grid
from dpkit.distributions import Distribution
from dpkit.divergences._closed import GaussianShift, LaplaceShift
from dpkit.divergences._dispatch import evaluator
from dpkit.errors import UnsupportedError

__all__ = ["pld_poisson_subsampled", "subsampled_epsilon_interval"]

Array = NDArray[np.float64]


def _base_law(P: Distribution, Q: Distribution, tail: float) -> LossLaw:
    """The base pair's loss law, with [lo, hi] covering both P's and Q's bulk (the mixtures use both)."""
    ev = evaluator(P, Q)
    if isinstance(ev, GaussianShift) and ev.mu > 0:
        return gaussian_law(ev.mu, tail, both_sides=True)
    if isinstance(ev, LaplaceShift) and ev.t > 0:
        return laplace_law(ev.t)
    raise UnsupportedError(
        f"subsampling amplification is implemented for Laplace and Gaussian shift pairs; got "
        f"({type(P).__name__}, {type(Q).__name__})."
    )


def _g(l: Array | float, q: float) -> Array:
    """ln(1 - q + q e^l), the loss of the remove-direction mixture as a function of the base loss."""
    l = np.asarray(l, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(l > 0, l + np.log(q + (1.0 - q) * np.exp(-np.abs(l))), np.log1p(q * np.expm1(l)))


def _g_inv(L: Array, q: float) -> Array:
    """Inverse of :func:`_g`: ln((e^L - (1 - q)) / q), -inf at and below ln(1 - q)."""
    L = np.asarray(L, dtype=np.float64)
    floor = math.log1p(-q) if q < 1 else -math.inf
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # e^L - (1-q) = q + expm1(L): accurate near L = 0
        inner = np.where(L > 1.0, L + np.log1p(-(1.0 - q) * np.exp(-np.minimum(L, 700.0))) - math.log(q),
                         np.log(np.maximum(q + np.expm1(L), 0.0)) - math.log(q))
    return np.where(L <= floor, -np.inf, np.where(np.isposinf(L), np.inf, inner))


def _poisson_law(base: LossLaw, q: float, direction: str) -> LossLaw:
    """The loss law of the remove pair (qP + (1-q)Q, Q) or the add pair (Q, qP + (1-q)Q)."""
    if direction == "remove":
        # X ~ qP + (1-q)Q, L = g(l); the second law is Q
        def cells(e: Array) -> tuple[Array, Array]:
            bp, bq = base.cells(_g_inv(e, q))
            return q * bp + (1.0 - q) * bq, bq

        atoms = tuple((float(_g(l, q)), q * pa + (1.0 - q) * qa, qa) for l, pa, qa in base.atoms)
        return LossLaw(cells, atoms, float(_g(base.lo, q)), float(_g(base.hi, q)))

    # X ~ Q, L = -g(l): the interval (a, b] of L is l in [g^{-1}(-b), g^{-1}(-a)) (reversed edges)
    def cells_add(e: Array) -> tuple[Array, Array]:
        bp, bq = base.cells(_g_inv(-e[::-1], q))
        return bq[::-1], (q * bp + (1.0 - q) * bq)[::-1]

    atoms = tuple((-float(_g(l, q)), qa, q * pa + (1.0 - q) * qa) for l, pa, qa in base.atoms)
    return LossLaw(cells_add, atoms, -float(_g(base.hi, q)), -float(_g(base.lo, q)))


def _check_rate_direction(sampling_rate: float, direction: str) -> float:
    q = check_positive("sampling_rate", sampling_rate)
    if q > 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1]; got {sampling_rate}.")
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add'; got {direction!r}.")
    return q


def pld_poisson_subsampled(P: Distribution, Q: Distribution, *, sampling_rate: float, direction: str,
                           grid: float = 1e-4, pessimistic: bool = True, tail: float = 1e-15) -> PLD:
    r"""PLD of the Poisson-subsampled mechanism whose base dominating pair is (P, Q) (add/remove).

    See the module docstring for the pairs (Zhu, Dong, Wang 2022, Thm 11).

    Parameters
    ----------
    P, Q : a Laplace or Gaussian shift pair (the base mechanism's dominating pair)
    sampling_rate : float in (0, 1]
    direction : "remove" or "add"
    grid, pessimistic, tail : as in :func:`dpkit.accounting.pld.pld_from_pair`

    Examples
    --------
    >>> from dpkit.distributions import Gaussian
    >>> pld = pld_poisson_subsampled(Gaussian(0, 1), Gaussian(1, 1), sampling_rate=0.01, direction="remove")
    >>> 0.19 < pld.epsilon(1e-5) < 0.2
    True
    """
    q = _check_rate_direction(sampling_rate, direction)
    g, t = _check_grid_tail(grid, tail)
    return _from_law(_poisson_law(_base_law(P, Q, t), q, direction), g, t, (bool(pessimistic),))[0]


def subsampled_default_grid(P: Distribution, Q: Distribution, sampling_rate: float, k: int) -> float:
    """The grid :func:`subsampled_epsilon_interval` uses: fine enough for the subsampled loss scale
    (about q times the base scale), but at most ~4e5 points across the single-step loss range."""
    base = _base_law(P, Q, 1e-15)
    span = float(_g(base.hi, sampling_rate)) - math.log1p(-min(sampling_rate, 0.999999))
    return max(default_grid(int(k), sampling_rate * _loss_scale(P, Q)), span / 4e5)


def subsampled_epsilon_interval(P: Distribution, Q: Distribution, *, sampling_rate: float, k: int, delta: float,
                                grid: float | None = None) -> Interval:
    """[lower, upper] containing epsilon(delta) of k Poisson-subsampled compositions (both directions).

    >>> from dpkit.distributions import Gaussian
    >>> iv = subsampled_epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), sampling_rate=0.01, k=100, delta=1e-5)
    >>> iv.width < 1e-3 * iv.upper
    True
    """
    d = check_delta(delta, open_interval=True)
    k = _check_k(k)
    q = _check_rate_direction(sampling_rate, "remove")
    g = subsampled_default_grid(P, Q, q, k) if grid is None else check_positive("grid", grid)
    base = _base_law(P, Q, 1e-15)
    upper = lower = -math.inf
    for direction in ("remove", "add"):
        hi, lo = _from_law(_poisson_law(base, q, direction), g, 1e-15)
        upper = max(upper, hi.self_compose(k).epsilon(d))
        lower = max(lower, lo.self_compose(k).epsilon(d))
    return Interval(min(lower, upper), upper)
