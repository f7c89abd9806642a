r"""Discretising a privacy-loss law onto a grid: pessimistic and optimistic, both second order.

Notation.  A pair (P, Q) has privacy loss L = ln p/q under P; write Y = e^{-L} (the likelihood ratio
q/p, with Y = 0 where q = 0, i.e. L = +inf) and

.. math:: R(t) = \mathbb E_P[(t - Y)_+], \qquad \delta(\varepsilon) = e^{\varepsilon} R(e^{-\varepsilon}).

R is convex with R(0) = 0 and left derivative P(Y < t).  A PLD on the grid l_j = (i_lo + j) g,
y_j = e^{-l_j}, has a piecewise-linear R with kinks only at the y_j (and at 0, the mass at +inf).

**Composition keeps the order.**  For a composition, delta(eps) = E[phi(Y_1 ... Y_k)] with
phi(y) = (1 - e^eps y)_+, which is convex and non-increasing in each factor (the others fixed, >= 0).
If a (sub-)probability law has R' >= R everywhere, then E'[psi(Y)] >= E[psi(Y)] for every convex
non-increasing psi >= 0 (such psi is a mixture of the (t - y)_+ and a constant; the stop-loss
characterisation of the convex orders, Shaked & Shanthikumar, *Stochastic Orders*, 2007, §4.A.1),
and replacing the factors one at a time (Fubini) gives delta' >= delta for *every* composition;
R' <= R gives delta' <= delta the same way.  (This is Blackwell dominance of pairs, Zhu, Dong, Wang
2022, arXiv 2106.08567, §2, stated for the hockey-stick curve.)

**Pessimistic: connect the dots** (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, arXiv
2207.04380): R' is the linear interpolation of R at the y_j, which lies above the convex R.  In mass
terms each cell (l_j, l_{j+1}] sends its P-mass to its two ends keeping its Q-mass E_P[Y; cell]
(a mean-preserving spread of Y).  Error at most (density of Y) h^2 / 8 per cell, h = y_j - y_{j+1}.

**Optimistic: supporting lines** (derived here; the same picture as the optimistic bound of
Doroshenko et al. 2022, but the construction and its proof are ours).  On each cell take the tangent
of R at the cell's midpoint s_j = e^{-(l_j + g/2)}; it lies below the convex R.  Its gap to R at the
two cell ends is local:

.. math:: R(y_j) - T_j(y_j) = \mathbb E_P[(y_j - Y);\ l_j < L \le l_j + g/2], \quad
          R(y_{j+1}) - T_j(y_{j+1}) = \mathbb E_P[(Y - y_{j+1});\ l_j + g/2 < L \le l_{j+1}].

Lower each R(y_j) by gamma_j, the larger of the gaps of the two neighbouring tangents: the chord of
every cell then lies below that cell's tangent, hence below R.  In mass terms this is the
connect-the-dots PLD followed, at every grid point, by a mean-preserving *contraction* that pulls
gamma_j / h_{j-1} from the left neighbour and gamma_j / h_j from the right one; its error is second
order too (gamma ~ density h^2 / 8), where rounding every loss down (Meiser & Mohammadi 2018, Thm 6;
Koskela et al. 2021) loses g/2 per composition.  Edge cases, each keeping R' <= R:

* a tangent that would go below 0 at the cell's lower end (only where mass stops, e.g. the top of the
  support) is replaced by the tangent at that lower end (gap 0 there, the whole cell's gap above);
* grid points with no mass on either side are not pinned: gamma is interpolated linearly in y there
  (R is linear on such a stretch), kept constant beyond the lowest loss, and taken to 0 at y = 0;
* where the lowered interpolation is still not convex (a negative mass), the point is lowered to its
  neighbours' chord (a step of the lower convex hull; the mass moves to the two neighbours keeping
  total and mean), and any negative mass left after that is dropped and counted as numerical error.

The lower tail (losses below the grid) is dropped and the upper tail is rounded down onto the last
grid point, both of which only lower R.

Numerical error, as a bound uniform in eps on |delta computed - delta of the exact construction|
(it composes additively, see :class:`dpkit.accounting.pld.PLD`): the cell masses are differences of
cdf values, and delta(eps) of a loss law depends on them only through the two tail values
P(L > eps) - e^eps Q(L > eps); scipy's ndtr/erfc (Cephes) are accurate to a few ulps *relative*, so
rounding them moves delta by at most 2 rho P(L > eps) <= 2 rho with rho = 8 u.  The split and
contraction amounts are computed from those masses with cancellation, but an error of c u m / g in
the amount moved across one cell moves delta by at most (1 - e^{-g}) c u m / g <= c u m, so at most
c u in all.  ``delta_error = 64 u`` covers both; mass dropped by the hull step is added to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np
from numpy.typing import NDArray
from scipy import special
from dpkit.errors import InvalidArgumentError

_U = 2.0**-53

Array = NDArray[np.float64]


@overload
def discretize(i_lo: int, n: int, grid: float, half_p: Array | None, half_q: Array | None,
               atom_loss: Array, atom_mass: Array, below: float, above: float, infinity_mass: float,
               *, pessimistic: bool, delta_error: float = ..., positional: Literal[False] = ...
               ) -> tuple[Array, float, float]: ...


@overload
def discretize(i_lo: int, n: int, grid: float, half_p: Array | None, half_q: Array | None,
               atom_loss: Array, atom_mass: Array, below: float, above: float, infinity_mass: float,
               *, pessimistic: bool, delta_error: float = ..., positional: Literal[True]
               ) -> tuple[Array, float, float, Array]: ...


def discretize(i_lo: int, n: int, grid: float, half_p: Array | None, half_q: Array | None,
               atom_loss: Array, atom_mass: Array, below: float, above: float, infinity_mass: float,
               *, pessimistic: bool, delta_error: float = 64 * _U,
               positional: bool = False) -> tuple[Array, float, float] | tuple[Array, float, float, Array]:
    """Masses on the grid l_j = (i_lo + j) grid, j < n, for one loss law; see the module docstring.

    Parameters
    ----------
    half_p, half_q : the continuous part's P-mass and Q-mass (E_P[e^{-L}; .]) of the 2(n - 1) half
        cells (l_0, l_0 + g/2], (l_0 + g/2, l_1], ... (or None when the law is atoms only)
    atom_loss, atom_mass : atoms (loss, P-mass) inside [l_0, l_{n-1}]
    below, above : P-mass with loss below l_0 / above l_{n-1} (the latter finite)
    infinity_mass : P(L = +inf)
    delta_error : a bound, uniform in eps, on how far the inputs' rounding moves delta (module docstring)

    positional : with True, the mass dropped by the hull step and the snapped atoms' bound are
        returned as a vector ``nu`` on the grid (where they sit) instead of being added to
        ``delta_error``: removing mass nu_j at loss l_j moves the delta of any composition at eps by at
        most nu_j P(S_rest > eps - l_j), which the tilted accountant (:mod:`dpkit.accounting._pld_tilted`)
        bounds relative to delta rather than as an additive floor.

    Returns
    -------
    (mass, infinity_mass, delta_error): the masses, the mass at +inf, and a bound, uniform in eps, on
    the error of this PLD's delta(eps) from rounding (``delta_error`` plus any mass dropped here);
    with ``positional``, (mass, infinity_mass, delta_error, nu).
    """
    g = float(grid)
    if n < 2:
        raise InvalidArgumentError("a grid needs at least two points.")
    losses = (i_lo + np.arange(n)) * g
    if max(abs(float(losses[0])), abs(float(losses[-1]))) > 705.0:
        raise InvalidArgumentError(
            f"the grid reaches losses of {max(abs(float(losses[0])), abs(float(losses[-1]))):.4g}; "
            "beyond 705, e^-loss over- or underflows: cut the law's range (its tails are bounded "
            "separately) or use a closed form for so small a noise."
        )
    y = np.exp(-losses)
    one_minus = -math.expm1(-g)  # 1 - e^{-g}
    h = y[:-1] * one_minus  # y_j - y_{j+1}
    mass = np.zeros(n)
    occupied = np.zeros(n - 1, dtype=bool)  # cells (l_j, l_{j+1}] with mass
    pc = qc = None
    if half_p is not None and half_q is not None:
        pc = half_p[0::2] + half_p[1::2]
        qc = half_q[0::2] + half_q[1::2]
        # connect the dots: the cell's P-mass to its two ends, keeping its Q-mass
        to_lo = np.clip((qc - y[1:] * pc) / h, 0.0, pc)
        mass[:-1] += to_lo
        mass[1:] += pc - to_lo
        occupied |= pc > 0
    al = np.asarray(atom_loss, dtype=np.float64)
    am = np.asarray(atom_mass, dtype=np.float64)
    if not pessimistic and above > 0:  # the upper tail, rounded down onto the last point
        al, am = np.append(al, losses[-1]), np.append(am, above)
    pinned = np.zeros(n, dtype=bool)  # grid points next to some mass
    step = np.zeros(n)  # optimistic: extra lowering of all points left of an atom snapped down in y
    snapped = 0.0
    snapped_at = np.zeros(n)
    if al.size:
        r = np.clip(np.rint((al - losses[0]) / g).astype(np.int64), 0, n - 1)
        d = al - losses[r]
        # an atom within 1e-6 cells of a grid point (a Laplace atom on an aligned grid, up to the
        # rounding of t / grid) goes to that point whole: for the optimistic PLD the move down in y
        # (d < 0) is paid for by lowering every point left of it by m (y_atom - y_r) (R changes by at
        # most that, and only for t > y_r); elsewhere it is split like the rest
        near = (np.abs(d) <= 1e-6 * g) & (not pessimistic)
        if near.any():
            np.add.at(mass, r[near], am[near])
            pinned[r[near]] = True
            lowered = np.where(d[near] < 0, am[near] * y[r[near]] * np.expm1(-np.minimum(d[near], 0.0)), 0.0)
            np.add.at(step, r[near], lowered)
            snapped = float(np.sum(am[near] * np.maximum(-d[near], 0.0)))  # bounds their effect on delta
            np.add.at(snapped_at, r[near], am[near] * np.maximum(-d[near], 0.0))
            step = np.cumsum(step[::-1])[::-1] - step  # sum over atoms at points right of j
            al, am, r, d = al[~near], am[~near], r[~near], d[~near]
        j = np.clip(np.floor((al - losses[0]) / g).astype(np.int64), 0, n - 2)
        if pessimistic:
            f = np.clip(al - losses[j], 0.0, g)
            # weight on the lower end keeping e^{-L}: (e^{-f} - e^{-g}) / (1 - e^{-g})
            w_lo = np.clip(math.exp(-g) * np.expm1(g - f) / one_minus, 0.0, 1.0)
            np.add.at(mass, j, am * w_lo)
            np.add.at(mass, j + 1, am * (1.0 - w_lo))
            occupied[j[am > 0]] = True
        else:
            # an atom off the grid is rounded down (Meiser & Mohammadi 2018): a supporting line
            # through an isolated kink of R would have to lower every point on one side of it
            np.add.at(mass, j, am)
            pinned[j[am > 0]] = True
    pinned[:-1] |= occupied
    pinned[1:] |= occupied
    if pessimistic:
        mass[0] += below  # the lower tail, rounded up onto the first point
        if positional:
            return mass, infinity_mass + above, delta_error, np.zeros(n)
        return mass, infinity_mass + above, delta_error

    # ---- optimistic: lower the interpolation by the supporting lines' gaps
    gap_hi = np.zeros(n)  # at y_j, of the tangent on cell j (losses in (l_j, l_j + g/2])
    gap_lo = np.zeros(n)  # at y_j, of the tangent on cell j - 1 (losses in (l_j - g/2, l_j])
    gap_cell = np.zeros(n)  # at y_j, of the tangent at the lower end y_{j+1} of cell j (all atoms are
    # on grid points by now, where they add nothing to any gap)
    if pc is not None and qc is not None and half_p is not None and half_q is not None:
        gap_hi[:-1] = np.maximum(y[:-1] * half_p[0::2] - half_q[0::2], 0.0)
        gap_lo[1:] = np.maximum(half_q[1::2] - y[1:] * half_p[1::2], 0.0)
        gap_cell[:-1] = np.maximum(y[:-1] * pc - qc, 0.0)
    # R at the grid points, of the law as discretised so far (equal to R of the truncated law there)
    after = np.append(np.cumsum(mass[::-1])[::-1][1:], 0.0)  # mass strictly above l_j
    after_y = np.append(np.cumsum((mass * y)[::-1])[::-1][1:], 0.0)
    r_at = np.maximum(y * after - after_y, 0.0) + infinity_mass * y
    # a midpoint tangent below 0 at y_j: use the tangent at y_j for that cell instead
    swap = np.nonzero(gap_lo[1:] > r_at[1:])[0] + 1
    gap_lo[swap] = 0.0
    gap_hi[swap - 1] = gap_cell[swap - 1]
    gamma = np.minimum(np.maximum(gap_hi, gap_lo) * (1.0 + 1e-9) + step, r_at)
    # the lowest-loss end of the support (largest y): beyond it R is linear, with slope the total mass, and
    # lowering R there would raise E[Y] (the second law's mass) for every larger t, an error of the first
    # order that composition multiplies (10^6 steps of q = 1e-3, sigma = 0.8: epsilon 9.23 for 9.69); so point
    # c (the first occupied cell's upper y end) is not lowered, and the cells after it are swept so that no
    # mass goes negative there (the hull step would push the deficit back to c): see :func:`_edge_sweep`
    if pc is not None and qc is not None and occupied.any():
        c = int(np.argmax(occupied))
        if c + 1 < n and not pinned[:c].any() and step[c] == 0.0:
            general_gamma = gamma.copy()
            if not _edge_sweep(gamma, c, mass, h, pc, qc, y, gap_hi, gap_lo, r_at):
                gamma = general_gamma  # the sweep met the top of a short support: the general rule's lowering
    if pinned.any() and not pinned.all():
        idx = np.nonzero(pinned)[0][::-1]  # increasing y
        gamma = np.interp(y, np.append(0.0, y[idx]), np.append(0.0, gamma[idx]))
    # slope of the interpolation on cell j (and on [0, y_{n-1}]) drops by (gamma_j - gamma_{j+1}) / h_j
    drop = (gamma - np.append(gamma[1:], 0.0)) / np.append(h, y[-1])
    ext = np.append(mass, infinity_mass)
    ext[:-1] += drop
    ext[1:] -= drop
    dropped_at = _lower_hull(ext, np.append(y, 0.0))
    # a snapped atom's R exceeds the lowered interpolation on (y_r, y_atom) by at most m (y_atom - y_r),
    # which moves delta(eps) = e^eps R(e^-eps) there (eps < l_r) by at most m |d|: counted as error
    if positional:
        return ext[:-1], float(ext[-1]), delta_error, dropped_at[:-1] + snapped_at
    return ext[:-1], float(ext[-1]), delta_error + float(dropped_at.sum()) + snapped


#: how many cells past the lowest-loss end :func:`_edge_sweep` adjusts before the general rule takes over
_EDGE_CELLS = 64


def _edge_sweep(gamma: Array, c: int, mass: Array, h: Array, pc: Array, qc: Array, y: Array, gap_hi: Array,
                gap_lo: Array, r_at: Array) -> bool:
    """The optimistic lowering ``gamma`` (in place) next to the lowest-loss end c of the support; False (and
    ``gamma`` to be discarded) where it cannot keep R' <= R.

    Point c keeps gamma = 0 (so E[Y] is exact), which forces the tangent at y_c on cell c and gamma_{c+1}
    = E_P[Y - y_{c+1}; cell c] (``edge``; no less: the chord must lie below that tangent; no more: the mass
    at c, E_P[Y - y_{c+1}; cell c] / h_c by connect the dots, would go negative).  On each next cell j any
    line below R on it serves: the tangent at y_j (gaps 0 at y_j and E_P[Y - y_{j+1}; cell j] at y_{j+1}),
    the midpoint tangent (gaps ``gap_hi[j]``, ``gap_lo[j+1]``) and every convex combination of the two (a
    mean of two lines below R is below R).  Where gamma_j is below the midpoint tangent's gap the
    combination that fits gamma_j is used; gamma_{j+1} is then the larger of what that line needs and the
    next midpoint gap, but at most what keeps the mass at j non-negative
    (gamma_{j+1} <= gamma_j + h_j (m_j + (gamma_j - gamma_{j-1}) / h_{j-1})), never below what the line needs.
    Where the density rises steeply from the end of the support (the subsampled Gaussian's removal law at
    ln(1 - q)) the midpoint gaps grow faster than the masses, and without this sweep the hull step lowered
    point c (1e-9 of E[Y] per step at q = 1e-3, a first-order error in epsilon's lower end).  The sweep stops
    where the midpoint tangent fits and the general rule's gamma_{j+1} is kept.

    On a short support (a few cells: a subsampled Laplace law on a coarse grid, a window of the tilted
    accountant) the sweep can reach the top of the support before the midpoint tangent fits.  There the line
    it needs on cell j goes below 0 at y_{j+1} (its gap exceeds R(y_{j+1}), the most gamma_{j+1} may be),
    gamma_{j+1} was capped at R(y_{j+1}) and the chord of cell j rose above R: the optimistic PLD kept mass
    above the largest loss (the subsampled Laplace addition pair, t = 2, q = 0.01, on 2.5 cells: a lower
    delta of 1.4e-4 where the exact one is 0).  The sweep then returns False and the caller keeps the
    general rule's gamma, whose tangent swap handles the top of the support (point c is lowered again; on a
    support that short there are no long compositions of the one law whose E[Y] that would shift)."""
    n = gamma.size
    tol = 1.0 + 1e-9
    edge = max(float(qc[c] - y[c + 1] * pc[c]), 0.0)  # the tangent at y_c, at y_{c+1}
    if edge > float(r_at[c + 1]):
        return False
    gamma[c] = 0.0
    gamma[c + 1] = min(edge * tol, float(r_at[c + 1]))
    for j in range(c + 1, min(c + 1 + _EDGE_CELLS, n - 1)):
        g_j = float(gamma[j])
        top = max(float(qc[j] - y[j + 1] * pc[j]), 0.0)  # the tangent at y_j, at y_{j+1}
        u_mid, l_mid = float(gap_hi[j]) * tol, float(gap_lo[j + 1])
        fits = g_j >= u_mid
        low = l_mid if fits else (g_j / u_mid) * l_mid + (1.0 - g_j / u_mid) * top
        if low > float(r_at[j + 1]):
            return False  # the line goes below 0 at y_{j+1}: no gamma_{j+1} <= R(y_{j+1}) keeps the chord below R
        need = low * tol
        cap = g_j + float(h[j]) * (float(mass[j]) + (g_j - float(gamma[j - 1])) / float(h[j - 1]))
        general = max(float(gap_hi[j + 1]), l_mid) * tol if j + 1 < n - 1 else need
        new = max(need, min(general, cap))
        gamma[j + 1] = min(new, float(r_at[j + 1]))
        if fits and new >= general:
            break  # the general rule's gamma from here on
    return True


def _lower_hull(ext: Array, y: Array, rounds: int = 10000, negligible: float = 1e-20) -> Array:
    """Remove negative masses (concave kinks) in place by lowering each such point to its
    neighbours' chord; ``ext[-1]`` is the mass at +inf (y = 0).  Returns the negative mass left
    (dropped) at each point, to be counted as numerical error.  Works on the negative points and their neighbours
    only, odd and even positions in turn so that no two neighbours move at once.  Once the negative mass left
    is below ``negligible`` in all it is dropped (and counted) as it is: a deficit of a few ulps bouncing
    off the first point took thousands of rounds to reach the underflow."""
    n = ext.size
    todo = np.nonzero(ext[:-1] < 0)[0]
    for _ in range(rounds):
        if todo.size == 0 or -float(np.sum(ext[todo])) < negligible:
            break
        if todo[0] == 0:  # beyond the first point R' may drop freely: move the deficit to point 1
            ext[1] += ext[0]
            ext[0] = 0.0
        moved = [np.array([1], dtype=np.int64)] if todo[0] == 0 else []
        for parity in (1, 0):
            jj = todo[(todo % 2 == parity) & (todo > 0)]
            jj = jj[ext[jj] < 0]
            if jj.size:
                w = (y[jj] - y[jj + 1]) / (y[jj - 1] - y[jj + 1])
                m = ext[jj].copy()
                ext[jj] = 0.0
                ext[jj - 1] += m * w
                ext[jj + 1] += m * (1.0 - w)
                moved.append(jj - 1)
                moved.append(jj + 1)
        if not moved:
            break
        cand = np.unique(np.concatenate(moved))
        cand = cand[cand < n - 1]
        todo = cand[ext[cand] < 0]
    left = np.maximum(-ext, 0.0)
    np.maximum(ext, 0.0, out=ext)
    return left


# ---- exact loss laws, as masses of intervals ----------------------------------------------------
@dataclass(frozen=True)
class LossLaw:
    r"""The privacy loss L = ln p/q of a pair, given by the masses of intervals.

    ``cells(edges)`` returns, for increasing edges e_0 < ... < e_m (+-inf allowed), the continuous
    part's P(e_k < L <= e_{k+1}) and Q(e_k < L <= e_{k+1}) = E_P[e^{-L}; e_k < L <= e_{k+1}];
    ``atoms`` lists (loss, P-mass, Q-mass); all but a negligible part of the continuous mass lies in
    [lo, hi]; ``infinity_mass`` is P(L = +inf).
    """

    cells: Callable[[Array], tuple[Array, Array]]
    atoms: tuple[tuple[float, float, float], ...]
    lo: float
    hi: float
    infinity_mass: float = 0.0


def normal_cells(edges: Array, mean: float, sd: float) -> Array:
    """N(mean, sd^2) masses of (e_k, e_{k+1}], from the tail on the side away from the mean (two
    ndtr calls per edge, each accurate to a few ulps relative)."""
    z = (edges - mean) / sd
    tail = special.ndtr(-np.abs(z))  # ndtr(-z) above the mean, ndtr(z) below it: one call per edge
    out: Array = np.where(z[:-1] > 0, tail[:-1] - tail[1:], tail[1:] - tail[:-1])
    across = np.nonzero((z[:-1] <= 0) & (z[1:] > 0))[0]  # the cell holding the mean: ndtr(z1) - ndtr(z0)
    if across.size:
        out[across] = special.ndtr(z[across + 1]) - special.ndtr(z[across])
    return out


def gaussian_law(mu: float, tail: float, *, both_sides: bool = False) -> LossLaw:
    """Gaussian shift with mu = D / sigma: L ~ N(mu^2/2, mu^2) under P and N(-mu^2/2, mu^2) under Q.
    [lo, hi] holds all but ``tail`` of P's mass on each side (of Q's too with ``both_sides``)."""
    m, sd = mu * mu / 2.0, mu
    z = math.sqrt(2.0) * float(special.erfcinv(2.0 * tail))
    return LossLaw(lambda e: (normal_cells(e, m, sd), normal_cells(e, -m, sd)), (),
                   (-m if both_sides else m) - z * sd, m + z * sd)


def laplace_law(t: float) -> LossLaw:
    """Laplace shift with t = D / b: atoms at t (P-mass 1/2) and -t (P-mass e^{-t}/2), density
    e^{-(t - l)/2} / 4 on (-t, t) under P (and e^{-(t + l)/2} / 4 under Q)."""

    def cells(e: Array) -> tuple[Array, Array]:
        c = np.clip(e, -t, t)
        p = 0.5 * np.exp(-(t - c) / 2.0)  # P(-t < L <= c) of the continuous part, plus e^{-t}/2
        q = -0.5 * np.exp(-(t + c) / 2.0)
        return np.maximum(np.diff(p), 0.0), np.maximum(np.diff(q), 0.0)

    return LossLaw(cells, ((t, 0.5, 0.5 * math.exp(-t)), (-t, 0.5 * math.exp(-t), 0.5)), -t, t)


def discretize_law(law: LossLaw, grid: float, *, pessimistic: Sequence[bool] = (True, False)
                   ) -> dict[bool, tuple[int, Array, float, float]]:
    """(offset, mass, infinity_mass, delta_error) of ``law`` on the grid, for each pessimism asked
    for, from one evaluation of the half-cell masses."""
    i_lo = math.floor(law.lo / grid) - 1
    i_hi = math.ceil(law.hi / grid) + 1
    n = i_hi - i_lo + 1
    edges = (2 * i_lo + np.arange(2 * n - 1)) * (0.5 * grid)
    p, q = law.cells(np.concatenate([[-np.inf], edges, [np.inf]]))
    p, q = np.maximum(p, 0.0), np.maximum(q, 0.0)
    below, above = float(p[0]), float(p[-1])
    inside_l, inside_m = [], []
    for loss, m, _ in law.atoms:
        if loss < edges[0]:
            below += m
        elif loss > edges[-1]:
            above += m
        else:
            inside_l.append(loss)
            inside_m.append(m)
    out = {}
    for pess in pessimistic:
        mass, inf, eta = discretize(i_lo, n, grid, p[1:-1], q[1:-1], np.array(inside_l), np.array(inside_m),
                                    below, above, law.infinity_mass, pessimistic=pess)
        out[pess] = (i_lo, mass, inf, eta)
    return out


@dataclass(frozen=True)
class RangeCells:
    """The half-cell masses of a law on the grid covering [lo, hi] (what :func:`discretize_range` needs;
    computed once and shared by the pessimistic and optimistic discretisations)."""

    i_lo: int
    n: int
    p: Array  # P-mass below the first edge, of each half cell, above the last edge
    q: Array
    below: float  # P-mass with loss below the first point (continuous part and atoms)
    atom_loss: Array
    atom_mass: Array
    infinity_mass: float


def range_cells(law: LossLaw, grid: float, lo: float, hi: float) -> RangeCells:
    """The half-cell masses of ``law`` on the grid covering [lo, hi] (see :func:`discretize_range`)."""
    i_lo = math.floor(lo / grid) - 1
    i_hi = math.ceil(hi / grid) + 1
    n = i_hi - i_lo + 1
    edges = (2 * i_lo + np.arange(2 * n - 1)) * (0.5 * grid)
    p, q = law.cells(np.concatenate([[-np.inf], edges, [np.inf]]))
    p, q = np.maximum(p, 0.0), np.maximum(q, 0.0)
    below = float(p[0])
    inside_l, inside_m = [], []
    for loss, m, _ in law.atoms:
        if loss < edges[0]:
            below += m
        elif loss <= edges[-1]:
            inside_l.append(loss)
            inside_m.append(m)
    return RangeCells(i_lo, n, p, q, below, np.array(inside_l), np.array(inside_m), law.infinity_mass)


def discretize_range(law: LossLaw | None, grid: float, lo: float, hi: float, *,
                     pessimistic: Sequence[bool] = (True, False), cells: RangeCells | None = None
                     ) -> dict[bool, tuple[int, Array, float, float, Array]]:
    """(offset, mass, infinity_mass, delta_error, nu) of ``law`` restricted to losses <= ``hi``, on the
    grid covering [lo, hi], for each pessimism asked for (one evaluation of the half-cell masses, or
    ``cells`` from :func:`range_cells` on the same grid and range).

    The lower tail (losses below the first point) is rounded up onto it (pessimistic) or dropped
    (optimistic), both of which keep the order of the module docstring.  The upper tail beyond the
    last point is **left out** of both: the caller bounds its contribution (the tilted accountant adds
    an analytic bound on its exponential moment to the pessimistic delta; leaving mass out only lowers
    the optimistic one).  ``nu`` is the position-aware rounding vector of :func:`discretize`.
    """
    if cells is None:
        assert law is not None
        cells = range_cells(law, grid, lo, hi)
    c = cells
    out = {}
    for pess in pessimistic:
        mass, inf, eta, nu = discretize(c.i_lo, c.n, grid, c.p[1:-1], c.q[1:-1], c.atom_loss, c.atom_mass,
                                        c.below if pess else 0.0, 0.0, c.infinity_mass, pessimistic=pess,
                                        positional=True)
        out[pess] = (c.i_lo, mass, inf, eta, nu)
    return out
