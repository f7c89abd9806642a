r"""Amplification by subsampling, as privacy loss distributions.

A mechanism M whose *base* dominating pair is (P, Q) is run on a random subset of the data.  Three
schemes, each as dominating pair(s) of the subsampled mechanism (a pair (A, B) *dominates* M for a
neighbouring relation when H_{e^eps}(M(D) || M(D')) <= H_{e^eps}(A || B) for every eps >= 0 and every
ordered pair of neighbours; Zhu, Dong, Wang 2022, arXiv 2106.08567, Def 7):

========================  ===============  ====================================================  ================
sampling                  neighbouring     pair(s) used                                           kind
========================  ===============  ====================================================  ================
Poisson, rate q           add/remove       (qP + (1-q)Q, Q) (removal), (Q, qP + (1-q)Q) (addition)  dominating pairs
without replacement,      substitution     (qP + (1-q)Q, Q), one pair for both orders             dominating pair
m of n, q = m/n
Poisson, rate q           substitution     (qP + (1-q)Q, Q), one pair for both orders             upper bound
========================  ===============  ====================================================  ================

*Poisson, add/remove* (Zhu, Dong, Wang 2022, Thm 11; the same pairs as dp_accounting's
``sampling_prob``): (P, Q) dominates the base for removal, M(S + x) against M(S).

*Without replacement, substitution* (Zhu, Dong, Wang 2022, Thm 10; in (eps, delta) form Balle,
Barthe, Gaboardi 2018, arXiv 1807.01647v2, Thm 9): (P, Q) dominates the base for substitution in
both orders.  Proof sketch: the batch holds the changed record with probability q; then
M o S(D) = q A + (1 - q) R and M o S(D') = q A' + (1 - q) R with the same R, and advanced joint
convexity (BBG 2018, Thm 2) gives H_{a'}(M o S(D) || M o S(D')) <= q [(1 - b) H_a(A || R) + b H_a(A || A')]
with a' = 1 + q (a - 1), b = a'/a; A, R (batches B0 + x and B0 + y) and A, A' are substitution
neighbours under one coupling, so both terms are <= H_a(P || Q), and q H_a(P || Q) = H_{a'}(qP + (1-q)Q || Q).

*Poisson, substitution*: the exact worst case needs three distributions, M(S), M(S + x), M(S + x')
(for the Gaussian sum of contributions of norm <= C: (q N(C) + (1-q) N(0), q N(-C) + (1-q) N(0))),
which no single pair built from (P, Q) gives.  What is implemented is a **bound**: the same argument
as above with A = M(S + x), R = M(S), A' = M(S + x') shows that (qP + (1-q)Q, Q) dominates Poisson
substitution whenever (P, Q) dominates the base for removal *and* for substitution (for a shift pair:
a shift by the substitution sensitivity, e.g. 2C for contributions of norm <= C).  It is valid but not
tight, and :func:`subsampled_epsilon_interval` labels it so.

**Composition** needs a pair that dominates at *every* eps, negative ones included (Zhu, Dong,
Wang 2022, Def 7 and Thm 10 of composition).  For add/remove the Poisson pairs do (removal and addition
are composed separately, each ordered pair of neighbours keeping its order over the steps).  For
substitution the arguments above hold for eps >= 0 only, and composing (qP + (1-q)Q, Q) itself is
**not sound**: on the brute-force population of ``tests/accounting/test_subsampling_schemes.py``
(discrete Laplace base, two runs) the true delta exceeds it by up to 0.03 at eps = 0.1.  Since the
relation is symmetric, both orders are bounded by the same profile at eps >= 0, and
H_a(A||B) = 1 - a + a H_{1/a}(B||A) (a <= 1) turns that into a bound at every eps for the
*symmetric completion*: the pair whose loss law is that of (qP + (1-q)Q, Q) on losses l > 0 (and
+inf), mirrored by mass e^{-l} m at -l, with the rest at 0 (:func:`_symmetrized`).  This is what
is composed for both substitution schemes; it equals the mixture pair for one run and costs a
little for many (Gaussian shift 2, q = 0.02, 200 runs, delta = 1e-5: eps 13.00 against 12.20).
(The same pitfall for other mixtures: Lebeda, Regehr, Kamath, Steinke 2024, arXiv 2405.20769.)

Sampling without replacement with add/remove neighbours is refused: a fixed batch from a data set
whose size changes is not one mechanism on both neighbours (Zhu, Dong, Wang 2022 give no pair for it).

Computation.  The losses of these pairs are monotone functions of the base loss l:
ln(1 - q + q e^l) and its negative, so the subsampled loss law is the base law pushed through that
map: exact interval masses, no sampling, then the same pessimistic and optimistic discretisations
as :mod:`dpkit.accounting.pld`.  Base pairs: Laplace and Gaussian shifts (continuous), the discrete
Laplace shift and finite pairs (atoms, +-inf losses included: a point where p = 0 < q has base loss
-inf and subsampled loss ln(1 - q)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from dpkit._math import check_delta, check_positive
from dpkit.accounting._pld_discretize import LossLaw, gaussian_law, laplace_law
from dpkit.accounting.pld import PLD, Interval, check_grid_tail, check_k, from_law, loss_scale, default_grid
from dpkit.distributions import Distribution
from dpkit.divergences.pairs import DiscreteLaplaceShift, GaussianShift, LaplaceShift
from dpkit.divergences import evaluator
from dpkit.divergences.pairs import FinitePair
from dpkit.errors import InvalidArgumentError, UnsupportedError

__all__ = ["SubsampledInterval", "pld_poisson_subsampled", "pld_subsampled", "subsampled_epsilon_interval",
           "subsampling_method"]

Array = NDArray[np.float64]
Sampling = Literal["poisson", "without_replacement"]
NeighboringName = Literal["add_remove", "substitute"]

#: (directions composed, method label) per (sampling, neighbouring); see the module docstring
_SCHEMES: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("poisson", "add_remove"): (
        ("remove", "add"),
        "dominating pairs (qP + (1-q)Q, Q) and (Q, qP + (1-q)Q): Poisson subsampling, add/remove "
        "(Zhu, Dong, Wang 2022, arXiv 2106.08567, Thm 11)"),
    ("without_replacement", "substitute"): (
        ("remove",),
        "dominating pair (qP + (1-q)Q, Q), q = m/n: sampling without replacement, substitution "
        "(Zhu, Dong, Wang 2022, Thm 10; Balle, Barthe, Gaboardi 2018, arXiv 1807.01647, Thm 9)"),
    ("poisson", "substitute"): (
        ("remove",),
        "upper bound, not tight: the pair (qP + (1-q)Q, Q) for Poisson subsampling with substitution, "
        "(P, Q) dominating the base for removal and substitution (advanced joint convexity, Balle, "
        "Barthe, Gaboardi 2018, Thm 2); the exact worst case needs three distributions"),
}


@dataclass(frozen=True, slots=True)
class SubsampledInterval(Interval):
    """An :class:`~dpkit.accounting.pld.Interval` for a subsampled mechanism, with the pair(s) it used:
    ``method`` starts with "dominating pair" (the interval holds the pair's exact epsilon) or with
    "upper bound" (the pair is valid but not tight for the scheme)."""

    method: str = ""


def subsampling_method(sampling: str = "poisson", neighboring: str = "add_remove") -> str:
    """The label of the pair(s) used for ``sampling`` and ``neighboring`` (module docstring table).

    >>> subsampling_method("poisson", "substitute").startswith("upper bound")
    True
    """
    return _scheme(sampling, neighboring)[1]


def _scheme(sampling: object, neighboring: object) -> tuple[tuple[str, ...], str]:
    s = str(getattr(sampling, "value", sampling))
    n = str(getattr(neighboring, "value", neighboring))
    if s not in ("poisson", "without_replacement"):
        raise InvalidArgumentError(f"sampling must be 'poisson' or 'without_replacement'; got {sampling!r}.")
    if n not in ("add_remove", "substitute"):
        raise InvalidArgumentError(f"neighboring must be 'add_remove' or 'substitute'; got {neighboring!r}.")
    if (s, n) not in _SCHEMES:
        raise InvalidArgumentError(
            "sampling without replacement is accounted for with substitution neighbours only: a batch of "
            "fixed size m from n records is not one mechanism on data sets of different sizes; use "
            "neighboring='substitute' or sampling='poisson'."
        )
    return _SCHEMES[(s, n)]


def _atoms_law(p: Array, q: Array) -> LossLaw:
    """The loss law of a finite pair given by aligned masses (zeros allowed: losses +-inf)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    keep = (p > 0) | (q > 0)
    p, q = p[keep], q[keep]
    with np.errstate(divide="ignore"):
        loss = np.log(p) - np.log(q)
    finite = np.isfinite(loss)
    lo = float(loss[finite].min()) if finite.any() else 0.0
    hi = float(loss[finite].max()) if finite.any() else 0.0

    def cells(e: Array) -> tuple[Array, Array]:
        return np.zeros(e.size - 1), np.zeros(e.size - 1)

    atoms = tuple((float(x), float(a), float(b)) for x, a, b in zip(loss, p, q))
    return LossLaw(cells, atoms, lo, hi)


def _base_law(P: Distribution, Q: Distribution, tail: float) -> LossLaw:
    """The base pair's loss law, with [lo, hi] covering both P's and Q's bulk (the mixtures use both)."""
    ev = evaluator(P, Q)
    if isinstance(ev, GaussianShift) and ev.mu > 0:
        return gaussian_law(ev.mu, tail, both_sides=True)
    if isinstance(ev, LaplaceShift) and ev.t > 0:
        return laplace_law(ev.t)
    if isinstance(ev, DiscreteLaplaceShift) and ev.d != 0:
        arrays = ev.atoms()
        return _atoms_law(arrays.p, arrays.q)
    if isinstance(ev, FinitePair):
        return _atoms_law(ev.arrays.p, ev.arrays.q)
    raise UnsupportedError(
        f"subsampling amplification is implemented for Laplace, Gaussian and discrete Laplace shift pairs "
        f"and finite pairs; got ({type(P).__name__}, {type(Q).__name__})."
    )

def _g(base_loss: Array | float, q: float) -> Array:
    """ln(1 - q + q e^l), the loss of the remove-direction mixture as a function of the base loss l."""
    x = np.asarray(base_loss, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(x > 0, x + np.log(q + (1.0 - q) * np.exp(-np.abs(x))), np.log1p(q * np.expm1(x)))


def _g_inv(L: Array, q: float) -> Array:
    """Inverse of :func:`_g`: ln((e^L - (1 - q)) / q), -inf at and below ln(1 - q)."""
    L = np.asarray(L, dtype=np.float64)
    floor = math.log1p(-q) if q < 1 else -math.inf
    out = np.empty(L.shape)
    low = L <= floor
    big = L > 1.0
    mid = ~(low | big)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # e^L - (1-q) = q + expm1(L): accurate near L = 0 (each branch on its own elements only)
        lb = L[big]
        out[big] = lb + np.log1p(-(1.0 - q) * np.exp(-np.minimum(lb, 700.0))) - math.log(q)
        out[mid] = np.log(np.maximum(q + np.expm1(L[mid]), 0.0)) - math.log(q)
    out[low] = -np.inf
    return out


def _mixture_law(base: LossLaw, q: float, direction: str) -> LossLaw:
    """The loss law of the pair (qP + (1-q)Q, Q) ("remove") or (Q, qP + (1-q)Q) ("add"), (P, Q) the
    base pair.  Atoms at a mapped loss of +inf go to the mass at +inf; atoms at -inf carry no P-mass."""
    if direction == "remove":
        # X ~ qP + (1-q)Q, L = g(l); the second law is Q
        def cells(e: Array) -> tuple[Array, Array]:
            bp, bq = base.cells(_g_inv(e, q))
            return q * bp + (1.0 - q) * bq, bq

        atoms = [(float(_g(x, q)), q * pa + (1.0 - q) * qa, qa) for x, pa, qa in base.atoms]
        lo, hi = float(_g(base.lo, q)), float(_g(base.hi, q))
        inf_mass = q * base.infinity_mass
    else:
        # X ~ Q, L = -g(l): the interval (a, b] of L is l in [g^{-1}(-b), g^{-1}(-a)) (reversed edges)
        def cells(e: Array) -> tuple[Array, Array]:
            bp, bq = base.cells(_g_inv(-e[::-1], q))
            return bq[::-1], (q * bp + (1.0 - q) * bq)[::-1]

        atoms = [(-float(_g(x, q)), qa, q * pa + (1.0 - q) * qa) for x, pa, qa in base.atoms]
        lo, hi = -float(_g(base.hi, q)), -float(_g(base.lo, q))
        inf_mass = 0.0  # Q has no mass where the base loss is +inf
    inf_mass += sum(m for x, m, _ in atoms if x == math.inf)
    kept = tuple(a for a in atoms if math.isfinite(a[0]) and a[1] + a[2] > 0)
    if kept:  # the range must hold every finite atom (a base loss of -inf maps to ln(1 - q))
        lo = min(lo, min(a[0] for a in kept))
        hi = max(hi, max(a[0] for a in kept))
    return LossLaw(cells, kept, lo, hi, infinity_mass=inf_mass)


_poisson_law = _mixture_law  # the name the benchmark and older tests use


def _symmetrized(pld: PLD) -> PLD:
    r"""The symmetric pair with the same delta(eps) for eps >= 0: losses l > 0 (and +inf) kept, a mirror
    mass e^{-l} m at -l, the rest at 0 (module docstring, "composition").

    Its delta(eps) for eps < 0 follows from the identity
    H_a(A||B) = 1 - a + a H_{1/a}(B||A) (a <= 1) applied to a symmetric pair, so a PLD above (below) the
    substitution profile at eps >= 0 is above (below) it at every eps, as composition needs.  Total
    mass is restored at 0 (one subtraction per point: counted in ``delta_error``)."""
    losses = pld.losses
    pos = losses > 0
    top = int(round(losses[pos][-1] / pld.grid)) if pos.any() else 0
    out = np.zeros(2 * top + 1)  # losses -top g .. top g
    idx = np.rint(losses[pos] / pld.grid).astype(np.int64)
    m = pld.mass[pos]
    out[top + idx] += m
    out[top - idx] += m * np.exp(-losses[pos])
    zero = 1.0 - math.fsum(out) - pld.infinity_mass  # exact sum, one rounding
    if zero < -1e-9:
        raise UnsupportedError("this pair's profile is not that of a symmetric pair; no substitution PLD for it.")
    out[top] += max(zero, 0.0)
    # the mirror masses err by a few ulps relative (<= 4u of total mass in all) and m_0 by one rounding
    eta = pld.delta_error + 8.0 * 2.0**-53
    return PLD(grid=pld.grid, offset=-top, mass=out, infinity_mass=pld.infinity_mass, pessimistic=pld.pessimistic,
               numerical_error=pld.numerical_error, numerical_error_l1=pld.numerical_error_l1, tail=pld.tail,
               delta_error=eta)


def _scheme_plds(base: LossLaw, q: float, direction: str, symmetric: bool, grid: float, tail: float,
                 which: tuple[bool, ...]) -> tuple[PLD, ...]:
    plds = from_law(_mixture_law(base, q, direction), grid, tail, which)
    return tuple(_symmetrized(p) for p in plds) if symmetric else plds


def _check_rate(sampling_rate: float) -> float:
    q = check_positive("sampling_rate", sampling_rate)
    if q > 1.0:
        raise InvalidArgumentError(f"sampling_rate must be in (0, 1]; got {sampling_rate}.")
    return q


def _check_rate_direction(sampling_rate: float, direction: str) -> float:
    q = _check_rate(sampling_rate)
    if direction not in ("remove", "add"):
        raise InvalidArgumentError(f"direction must be 'remove' or 'add'; got {direction!r}.")
    return q


def pld_poisson_subsampled(P: Distribution, Q: Distribution, *, sampling_rate: float, direction: str,
                           grid: float = 1e-4, pessimistic: bool = True, tail: float = 1e-15) -> PLD:
    r"""PLD of the Poisson-subsampled mechanism whose base dominating pair is (P, Q) (add/remove).

    See the module docstring for the pairs (Zhu, Dong, Wang 2022, Thm 11);
    :func:`pld_subsampled` covers the other schemes.

    Parameters
    ----------
    P, Q : a Laplace, Gaussian or discrete Laplace shift pair, or a finite pair (the base mechanism's
        dominating pair for removal)
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
    g, t = check_grid_tail(grid, tail)
    return from_law(_mixture_law(_base_law(P, Q, t), q, direction), g, t, (bool(pessimistic),))[0]


def pld_subsampled(P: Distribution, Q: Distribution, *, sampling_rate: float, sampling: Sampling = "poisson",
                   neighboring: NeighboringName = "add_remove", direction: str = "remove", grid: float = 1e-4,
                   pessimistic: bool = True, tail: float = 1e-15) -> PLD:
    r"""PLD of one pair of the subsampled mechanism whose base dominating pair is (P, Q).

    Parameters
    ----------
    P, Q : a Laplace, Gaussian or discrete Laplace shift pair, or a finite pair: the base mechanism's
        dominating pair for removal (add/remove) or for substitution *and* removal (substitution;
        for a shift pair, a shift by the substitution sensitivity)
    sampling_rate : float in (0, 1]: q (Poisson) or m/n (a batch of m out of n records)
    sampling : "poisson" or "without_replacement"
    neighboring : "add_remove" or "substitute" (without replacement: "substitute" only)
    direction : "remove" or "add" for Poisson add/remove; "remove" (the one pair) for substitution
    grid, pessimistic, tail : as in :func:`dpkit.accounting.pld.pld_from_pair`

    Returns
    -------
    PLD: pessimistic (an upper bound on the pair's delta, for every composition) or optimistic.
    The pair is a dominating pair, except for Poisson with substitution, where it is a valid but
    not tight upper bound (:func:`subsampling_method`).

    Raises
    ------
    ValueError: a rate outside (0, 1], an unknown scheme, without replacement with add/remove, or a
        direction the scheme does not have.

    References
    ----------
    Zhu, Dong, Wang 2022, arXiv 2106.08567, Thm 10 and 11; Balle, Barthe, Gaboardi 2018,
    arXiv 1807.01647, Thm 2 and 9.

    Examples
    --------
    >>> from dpkit.distributions import Gaussian
    >>> pld = pld_subsampled(Gaussian(0, 1), Gaussian(2, 1), sampling_rate=0.01, sampling="without_replacement",
    ...                      neighboring="substitute")
    >>> 3.0 < pld.epsilon(1e-5) < 3.1
    True
    """
    q = _check_rate(sampling_rate)
    directions, _ = _scheme(sampling, neighboring)
    if direction not in directions:
        raise InvalidArgumentError(f"direction must be one of {directions} for this scheme; got {direction!r}.")
    g, t = check_grid_tail(grid, tail)
    symmetric = directions == ("remove",)  # the substitution schemes
    return _scheme_plds(_base_law(P, Q, t), q, direction, symmetric, g, t, (bool(pessimistic),))[0]


def subsampled_default_grid(P: Distribution, Q: Distribution, sampling_rate: float, k: int) -> float:
    """The grid :func:`subsampled_epsilon_interval` uses: fine enough for the subsampled loss scale
    (about q times the base scale), but at most ~4e5 points across the single-step loss range."""
    base = _base_law(P, Q, 1e-15)
    span = float(_g(base.hi, sampling_rate)) - math.log1p(-min(sampling_rate, 0.999999))
    return max(default_grid(int(k), sampling_rate * loss_scale(P, Q)), span / 4e5)


def subsampled_epsilon_interval(P: Distribution, Q: Distribution, *, sampling_rate: float, k: int, delta: float,
                                grid: float | None = None, sampling: Sampling = "poisson",
                                neighboring: NeighboringName = "add_remove") -> SubsampledInterval:
    """[lower, upper] containing epsilon(delta) of k compositions of the subsampled pair(s) (every
    direction of the scheme; see :func:`pld_subsampled` for the arguments).  ``method`` names the
    pair(s) and says whether they are dominating pairs or a bound.

    >>> from dpkit.distributions import Gaussian
    >>> iv = subsampled_epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), sampling_rate=0.01, k=100, delta=1e-5)
    >>> iv.width < 1e-3 * iv.upper
    True
    """
    d = check_delta(delta, open_interval=True)
    k = check_k(k)
    q = _check_rate(sampling_rate)
    directions, method = _scheme(sampling, neighboring)
    ev = evaluator(P, Q)
    if grid is None and isinstance(ev, GaussianShift) and ev.mu > 0:
        # the tilted accountant: no delta floor, and the DP-SGD sizes (10^6 steps) in seconds
        from dpkit.accounting._tilted_laws import LawSpec
        from dpkit.accounting._tilted_solve import epsilon_bounds

        mu = float(ev.mu)
        if directions == ("remove",):
            dirs = [[(LawSpec("symmetric", mu, q), k)]]
        elif q < 1.0:
            dirs = [[(LawSpec("remove", mu, q), k)], [(LawSpec("add", mu, q), k)]]
        else:
            dirs = [[(LawSpec("remove", mu, q), k)]]
        lo, hi = epsilon_bounds(dirs, d)
        return _subsampled_interval(lo, hi, method)
    g = subsampled_default_grid(P, Q, q, k) if grid is None else check_positive("grid", grid)
    base = _base_law(P, Q, 1e-15)
    upper = lower = -math.inf
    for direction in directions:
        pld_hi, pld_lo = _scheme_plds(base, q, direction, directions == ("remove",), g, 1e-15, (True, False))
        upper = max(upper, float(pld_hi.self_compose(k).epsilon(d)))
        lower = max(lower, float(pld_lo.self_compose(k).epsilon(d)))
    return _subsampled_interval(lower, upper, method)


def _subsampled_interval(lower: float, upper: float, method: str) -> SubsampledInterval:
    """The interval, with an inconsistent bracket reported rather than clamped (both ends are certified,
    so they may cross only by a last rounding of their bisections)."""
    if lower > upper:
        if lower - upper > 1e-12 * max(1.0, abs(upper)):
            raise ArithmeticError(
                f"inconsistent epsilon bracket: lower {lower!r} > upper {upper!r}; please report this."
            )
        lower = upper
    return SubsampledInterval(lower, upper, method)
