"""Laplace laws composed off their grid (:mod:`dpkit.accounting._tilted_blocks`): the certified interval
contains the exact epsilon(delta), computed independently with mpmath, and is of the second order where
rounding each copy's atoms down was of the first (and rounding each block down lost half a cell per law).

The reference.  With b = 1 and shift t, the Laplace loss is +t with P-mass 1/2, -t with P-mass e^{-t}/2,
and has density e^{(l - t)/2} / 4 on (-t, t).  A composition is a mixture over which copies take which
part; n continuous parts with ranges [-t_i, t_i] have the density prod_i (e^{-t_i/2} / 4) e^{s/2} A(s),
A the (n-1)-volume of the slice {x in the box: sum x = s}, by inclusion-exclusion over the box's corners
A(s) = sum_J (-1)^{|J|} (s + sum_i t_i - 2 sum_{i in J} t_i)_+^{n-1} / (n-1)!.  delta(eps) is the mixture's
E[(1 - e^{eps - S})_+], integrated by mpmath between the density's breakpoints at 30 digits
(mpmath.workdps, leaving the global precision alone).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.accounting import _tilted_solve
from dpkit.accounting._pld_discretize import discretize
from dpkit.accounting._tilted_blocks import _below, _regrid, aligned, laplace_block, wants_block
from dpkit.accounting._tilted_laws import LawSpec



def _slice_volume(s, ts):  # type: ignore[no-untyped-def]
    n = len(ts)
    total = mp.mpf(0)
    for J in itertools.product((0, 1), repeat=n):
        x = s + sum(ts) - 2 * sum(t for t, j in zip(ts, J) if j)
        if x > 0:
            total += (-1) ** sum(J) * x ** (n - 1) / mp.factorial(n - 1)
    return total


def exact_delta(eps: float, ts: list[float]) -> mp.mpf:
    """delta(eps) of the composition of Laplace shifts ts (each once; repeat a value to repeat a law)."""
    with mp.workdps(30):
        return _exact_delta(eps, ts)


def _exact_delta(eps: float, ts: list[float]) -> mp.mpf:
    eps = mp.mpf(eps)
    tm = [mp.mpf(t) for t in ts]
    total = mp.mpf(0)
    for config in itertools.product((1, -1, 0), repeat=len(tm)):
        w, shift, cont = mp.mpf(1), mp.mpf(0), []
        for c, t in zip(config, tm):
            if c == 1:
                w, shift = w / 2, shift + t
            elif c == -1:
                w, shift = w * mp.exp(-t) / 2, shift - t
            else:
                w, _ = w * mp.exp(-t / 2) / 4, cont.append(t)
        if not cont:
            total += w * max(mp.mpf(0), 1 - mp.exp(eps - shift))
            continue
        lo, hi = -sum(cont), sum(cont)
        cut = eps - shift  # the integrand vanishes below it
        if cut >= hi:
            continue
        breaks = sorted({lo, hi, max(lo, cut)} | {lo + 2 * sum(sub) for r in range(len(cont) + 1)
                                                  for sub in itertools.combinations(cont, r)})
        breaks = [b for b in breaks if max(lo, cut) <= b <= hi]

        def f(s, cut=cut, cont=cont):  # type: ignore[no-untyped-def]
            return (1 - mp.exp(cut - s)) * mp.exp(s / 2) * _slice_volume(s, cont)

        total += w * mp.quad(f, breaks)
    return total


def exact_delta_repeated(eps: float, t: float, k: int) -> mp.mpf:
    """delta(eps) of k copies of one Laplace shift t: the mixture grouped by how many copies take each part
    (multinomial weights), the slice volume of the cube [-t, t]^n by its n + 1 corner classes."""
    with mp.workdps(30):
        return _exact_delta_repeated(eps, t, k)


def _exact_delta_repeated(eps: float, t: float, k: int) -> mp.mpf:
    eps, t = mp.mpf(eps), mp.mpf(t)
    total = mp.mpf(0)
    for a in range(k + 1):
        for b in range(k + 1 - a):
            n = k - a - b
            w = (mp.factorial(k) / (mp.factorial(a) * mp.factorial(b) * mp.factorial(n))
                 * mp.mpf(2) ** -a * (mp.exp(-t) / 2) ** b * (mp.exp(-t / 2) / 4) ** n)
            shift = (a - b) * t
            if n == 0:
                total += w * max(mp.mpf(0), 1 - mp.exp(eps - shift))
                continue
            cut = eps - shift
            if cut >= n * t:
                continue

            def f(s, n=n, cut=cut):  # type: ignore[no-untyped-def]
                vol = mp.fsum((-1) ** j * mp.binomial(n, j) * (s + n * t - 2 * j * t) ** (n - 1)
                              for j in range(n + 1) if s + n * t - 2 * j * t > 0) / mp.factorial(n - 1)
                return (1 - mp.exp(cut - s)) * mp.exp(s / 2) * vol

            breaks = sorted({max(-n * t, cut)} | {-n * t + 2 * j * t for j in range(n + 1)})
            total += w * mp.quad(f, [x for x in breaks if x >= max(-n * t, cut)])
    return total


def test_reference_matches_the_single_laplace_closed_form() -> None:
    # one Laplace: delta(eps) = 1 - e^{(eps - t)/2} for 0 <= eps <= t (the hockey-stick of the Laplace pair)
    t = 0.7
    with mp.workdps(30):
        for eps in (0.0, 0.2, 0.5):
            assert abs(exact_delta(eps, [t]) - (1 - mp.exp((mp.mpf(eps) - t) / 2))) < mp.mpf(10) ** -25


@pytest.mark.parametrize("laws", [[(0.3, 3)], [(0.31, 2), (0.47, 2)]])
def test_off_grid_interval_contains_the_exact_epsilon(laws: list[tuple[float, int]]) -> None:
    delta = 1e-3
    ts = [t for t, k in laws for _ in range(k)]
    parts = [(LawSpec("laplace", t), k) for t, k in laws]
    grid = 0.3 / 997.3  # aligned to none of the atoms
    assert all(wants_block(s, k, grid) for s, k in parts)
    _tilted_solve.clear_caches()
    lower, upper = _tilted_solve.epsilon_bounds([parts], delta, grid=grid)
    assert exact_delta(lower, ts) >= delta >= exact_delta(upper, ts), (lower, upper)  # lower <= truth <= upper
    # so few copies leave the blocks lumpy (heavy atoms), and those are rounded down, once per law: the lower end
    # is within about a cell per law of the truth
    assert exact_delta(lower + 1.5 * grid * len(laws), ts) <= delta


def test_repeated_reference_agrees_with_the_general_one() -> None:
    for eps in (0.1, 0.6):
        assert abs(exact_delta_repeated(eps, 0.3, 3) - exact_delta(eps, [0.3] * 3)) < mp.mpf(10) ** -25


def test_many_copies_off_grid_lose_one_rounding_not_k() -> None:
    """k = 12 copies of t = 0.3 on a grid aligned to nothing: rounding each copy's atoms down put the lower
    end several cells below the truth; the block (lumpy: 19% of its mass in atoms, so rounded down) loses at
    most about one cell.  (Checked on delta, which
    decreases in eps: lower <= truth iff delta(lower) >= delta.)"""
    t, k, delta = 0.3, 12, 1e-4
    grid = t / 611.3
    _tilted_solve.clear_caches()
    lower, upper = _tilted_solve.epsilon_bounds([[(LawSpec("laplace", t), k)]], delta, grid=grid)
    assert exact_delta_repeated(lower, t, k) >= delta >= exact_delta_repeated(upper, t, k), (lower, upper)
    assert exact_delta_repeated(lower + 1.5 * grid, t, k) <= delta, "the lower end is more than 1.5 cells low"
    assert exact_delta_repeated(upper - 1.5 * grid, t, k) >= delta, "the upper end is more than 1.5 cells high"


def test_smooth_block_on_a_coarser_grid_contains_the_exact_epsilon() -> None:
    """k = 19 copies of t = 1 (the copies that all take an atom hold 7e-4 of the mass): the block is put on 2
    times the grid (a factor on every other grid point), and the interval still contains the exact epsilon, its
    lower end within a tenth of a cell (0.03 cells when written)."""
    t, k, delta = 1.0, 19, 1e-6
    grid = t / 211.3
    spec = LawSpec("laplace", t)
    block = laplace_block(spec, k, grid, 0.7, 0.3, 0.8, k)
    assert block is not None and block.stride == 2 and block.offset % 2 == 0
    _tilted_solve.clear_caches()
    lower, upper = _tilted_solve.epsilon_bounds([[(spec, k)]], delta, grid=grid)
    assert exact_delta_repeated(lower, t, k) >= delta >= exact_delta_repeated(upper, t, k), (lower, upper)
    assert exact_delta_repeated(lower + 0.1 * grid, t, k) <= delta, "the lower end is more than 0.1 cells low"


def test_a_block_of_a_few_cells_stays_below_the_exact_epsilon() -> None:
    """delta = 1e-12 next to the largest loss of 3 + 2 Laplace copies: the tilt is so large that each block's window
    holds a few cells (where supporting lines, whose rule at the lowest-loss end keeps E[Y], put mass above the
    law's largest loss and the lower end at the largest loss itself); the interval holds the exact value."""
    laws, delta = [(1 / 3, 3), (0.2, 2)], 1e-12
    ts = [t for t, k in laws for _ in range(k)]
    _tilted_solve.clear_caches()
    lower, upper = _tilted_solve.epsilon_bounds([[(LawSpec("laplace", t), k) for t, k in laws]], delta)
    assert lower < sum(ts)
    assert exact_delta(lower, ts) >= delta >= exact_delta(upper, ts), (lower, upper)


def test_supporting_lines_on_a_few_cells_pass_the_check_and_round_down_too() -> None:
    """Four atoms within two cells: the lines' lowest-loss sweep (E[Y] kept) used to meet the top of so short a
    support and leave the top point above the largest atom, which this check caught (the block was rounded
    down); the sweep now gives up there (:func:`dpkit.accounting._pld_discretize._edge_sweep`), the lines'
    result is below R and nothing lies above the largest atom; rounding down, the block's fallback, is below R
    as well."""
    g = 0.01
    s = np.array([1.0, 1.0 + 0.3 * g, 1.0 + 0.7 * g, 1.0 + 1.2 * g])
    m = np.array([0.3, 0.2, 0.1, 0.05])
    half = np.ceil(s / (0.5 * g) - 1e-9 * s / (0.5 * g)).astype(np.int64) - 1
    i_lo, i_hi = int(half[0]) // 2, -(-(int(half[-1]) + 1) // 2)
    n = i_hi - i_lo + 1
    idx = half - 2 * i_lo
    hp = np.bincount(idx, weights=m, minlength=2 * n - 2).astype(np.float64)
    hq = np.bincount(idx, weights=m * np.exp(-s), minlength=2 * n - 2).astype(np.float64)
    raw, _, _, nu = discretize(i_lo, n, g, hp, hq, np.empty(0), np.empty(0), 0.0, 0.0, 0.0, pessimistic=False,
                               positional=True)
    losses = (i_lo + np.arange(n)) * g
    assert _below(s, m, losses, raw, nu)
    assert losses[np.nonzero(raw)[0][-1]] <= s[-1]
    block = _regrid(s, m, g, 0.0, float(s[-1]))
    assert block.losses[np.nonzero(block.mass)[0][-1]] <= s[-1]
    assert _below(s, m, block.losses, block.mass, np.zeros(block.mass.size))


def test_block_is_below_the_exact_composition_pointwise() -> None:
    """The block's delta(eps) (its own hockey-stick) never exceeds the exact k-fold composition's."""
    spec, k, grid = LawSpec("laplace", 0.4), 3, 0.4 / 613.7
    block = laplace_block(spec, k, grid, 0.5, 0.2, 0.6, k)
    assert block is not None and not block.pessimistic
    losses, mass = block.losses, block.mass
    for eps in (0.0, 0.1, 0.3, 0.6, 0.9):
        d_block = math.fsum(float(m) * -math.expm1(eps - x) for x, m in zip(losses, mass) if x > eps)
        assert d_block <= float(exact_delta(eps, [0.4] * k)) * (1 + 1e-12)
        assert d_block >= float(exact_delta(eps, [0.4] * k)) - 0.01  # and close to it


def test_alignment_rule() -> None:
    spec = LawSpec("laplace", 0.5)
    assert aligned(spec, 0.5 / 64) and not aligned(spec, 0.5 / 63.5)
    assert not wants_block(spec, 1, 0.5 / 63.5)  # one copy: discretised directly
    assert not wants_block(LawSpec("remove", 1.0, 0.01), 100, 0.001)
