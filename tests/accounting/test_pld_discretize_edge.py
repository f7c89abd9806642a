"""The optimistic discretisation at the lowest-loss end of a support where the density rises steeply (the
subsampled Gaussian's removal law piles up just above ln(1 - q)): below the exact hockey-stick curve
everywhere, checked against 50-digit values, and second order in the grid (no first-order E[Y] error)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.accounting._tilted_laws import LawSpec

mp.mp.dps = 50
_U = 2.0**-53


def mp_remove_R(mu: float, q: float, t: mp.mpf) -> mp.mpf:
    """R(t) = E_P[(t - Y)_+] of the removal pair (q N(mu, 1) + (1 - q) N(0, 1), N(0, 1)) in loss form at 50
    digits: with the base loss X ~ N(+-mu^2/2, mu^2), L = ln(1 - q + q e^X) > l iff X > ln((e^l - 1 + q) / q)."""
    mu, q = mp.mpf(mu), mp.mpf(q)
    m, s = mu * mu / 2, mu
    ell = -mp.log(t)
    if mp.exp(ell) <= 1 - q:
        p_tail = q_tail = mp.mpf(1)
    else:
        x0 = mp.log((mp.exp(ell) - (1 - q)) / q)
        p_tail = q * mp.ncdf((m - x0) / s) + (1 - q) * mp.ncdf((-m - x0) / s)
        q_tail = mp.ncdf((-m - x0) / s)
    return t * p_tail - q_tail


def discrete_R(mass: np.ndarray, losses: np.ndarray, inf_mass: float, t: float) -> float:
    y = np.exp(-losses)
    return math.fsum((mass * np.maximum(t - y, 0.0)).tolist()) + inf_mass * t


@pytest.mark.parametrize("sigma,q,grid", [(1.1, 1e-3, 2.36e-5), (0.8, 1e-2, 4e-4), (1.1, 1e-3, 2.28e-5)])
def test_optimistic_below_and_pessimistic_above_the_exact_curve_near_the_edge(sigma, q, grid):
    spec = LawSpec("remove", 1.0 / sigma, q)
    fs = spec.factors(grid, 4.0, 1000)
    pess, opt = fs[True], fs[False]
    losses = pess.losses
    first = int(np.argmax(pess.mass > 0))
    # grid points and midpoints over the first 80 cells (the edge) and a spread further out
    idx = np.r_[first:first + 80, np.linspace(first + 80, pess.mass.size - 2, 40).astype(int)]
    beyond = 1.001 / (1.0 - q)  # above the support's largest y, where R is linear: t - E[Y]
    ts = np.concatenate([np.exp(-losses[idx]), np.exp(-(losses[idx] + 0.5 * grid)), [beyond]])
    gaps = {}
    for t in ts:
        exact = mp_remove_R(1.0 / sigma, q, mp.mpf(float(t)))
        lo = discrete_R(opt.mass, opt.losses, opt.infinity_mass, float(t))
        hi = discrete_R(pess.mass, pess.losses, pess.infinity_mass, float(t))
        tol = 64 * _U * float(t)  # the rounding term delta_error = 64 u, in R units at t
        assert lo <= exact + tol, (t, lo, exact)
        # the pessimistic law leaves its far tail out (the tilted accountant adds an analytic bound for it)
        assert hi >= exact - tol - 1e-20, (t, hi, exact)
        gaps[float(t)] = float(exact) - lo
    # E[Y] is kept: no lowering beyond the support (before the edge sweep: 3.8e-9 at grid 2.36e-5, a first-order
    # error of the composed lower end), while inside it the lowering is second order
    assert gaps[beyond] < 1e-13
    assert max(gaps.values()) < 0.25 * float(np.max(pess.mass)) * grid  # about (mass of a cell) x cell / 8


def test_optimistic_error_is_second_order_whatever_the_alignment():
    """ln M(1) of one step: the optimistic law's deficit scales like grid^2 (before the edge sweep it jumped by
    50x with where ln(1 - q) fell inside its cell, 1e-9 against 4e-11, and epsilon's lower end with it)."""
    spec = LawSpec("remove", 1.0 / 1.1, 1e-3)

    def log_m(f, lam=1.0):
        return math.log(math.fsum((f.mass * np.exp(lam * f.losses)).tolist()))

    deficits = []
    for g in np.linspace(2.2e-5, 2.4e-5, 7):
        fs = spec.factors(float(g), 4.0, 1000)
        deficits.append((log_m(fs[True]) - log_m(fs[False])) / g**2)
    assert max(deficits) < 1.5 * min(deficits)
