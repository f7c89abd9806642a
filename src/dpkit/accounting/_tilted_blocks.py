r"""The optimistic factor of k copies of one Laplace law, composed on the law's own grid first.

Why.  The optimistic (lower) discretisation of a law whose loss has atoms off the grid has to round each
atom down (:mod:`dpkit.accounting._pld_discretize`): a Laplace law has atoms of P-mass 1/2 and e^{-t}/2 at
+-t, so each copy lowers the composed loss by up to half a cell, an error of the *first* order that
composition adds up.  With one Laplace law the grid is aligned to its atoms (:func:`dpkit.accounting.
_tilted_solve._grid`); with many distinct ones it cannot be, and 200 Laplace laws repeated 10^3 times beside
Gaussians left the certified interval 2.5e-3 of epsilon wide (the pessimistic end, connect-the-dots, keeps
the mean and is of the second order; only the lower end was off).

The block.  For a Laplace law with t = D/b and a count k:

1. its optimistic factor on the grid g_t = t / 2^p (p the smallest with g_t <= the composition's grid g), on
   which both atoms lie exactly (t / 2^p is exact in binary floating point, and so is 2^p g_t = t), so that
   the discretisation is of the second order and rounds nothing down;
2. the exact k-fold convolution of that factor is bounded from below, point by point, by a tilted FFT of
   one window (tilt lambda: the composition's): the computed vector minus its rounding error (the l2 bound
   of :func:`dpkit.accounting._pld_tilted.compose_tilted`, Higham 2002, *Accuracy and Stability of
   Numerical Algorithms*, §24.1, amplified by k through the power as there) and minus everything that can
   wrap onto the window (the tilted mass outside it, by Chernoff bounds on the factor's own tilted moments),
   divided by the tilt weights' relative error; the mass outside the window is left out;
3. the block, a measure of atoms on g_t, is discretised onto the composition's grid by supporting lines
   (:func:`dpkit.accounting._pld_discretize.discretize` on its half-cell P- and Q-masses; :func:`_regrid`)
   where the k-fold law is smooth (at most 1e-3 of its mass in atoms), onto that grid times a power of two s
   (about ``_BLOCK_CELLS`` points per sqrt(k) t), a factor on every s-th point of the grid (``stride`` s: the
   same losses, i s g being exactly i (s g)); steps 1 and 2 then run on g_t <= s g.  The result is checked,
   R' <= R at every kink of either curve (:func:`_below`), and where that fails (a window of a few cells at a
   very large tilt, where the lines' rule at the lowest-loss end meets the top of the support) every atom is
   rounded down instead, as is a lumpy block (few copies: there the lines' hull step iterated for a second).

Each step can only lower the hockey-stick curve R(t) = E_P[(t - e^{-L})_+] of the law (leaving mass out
lowers it; the supporting lines' chord lies below R, :mod:`dpkit.accounting._pld_discretize`; moving an atom
down by an ulp raises e^{-L}, Meiser & Mohammadi 2018, Thm 6), so the block is dominated by the k-fold
composition of the exact Laplace law, up to the rounding of the factor's cell masses, which enters the tilted
accountant as k eta, exactly as k separate copies of the factor would, and the masses the supporting lines'
hull step drops (``nu``, as for any optimistic factor).  The error in epsilon is of the second order in the
grid over the *block's* scale (sqrt(k) times the law's): rounding the block down instead (one rounding per law,
not per copy) lost half a cell per law, which with 200 Laplace laws was all of a 4.7e-5 wide interval on
mixed 10^6 (now 8e-6 on the same grid).

Hand-written because no library composes privacy-loss laws with certified lower bounds.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import fft as sp_fft

from dpkit.accounting._pld_discretize import discretize

from dpkit.accounting._pld_tilted import _FFT_C, _U, Factor, _dot, _l2_up, _lse, _lse_at, kth_power
from dpkit.accounting._tilted_laws import LawSpec

#: ln of the tilted mass the window may leave out on each side (its top and bottom are set by Chernoff bounds)
_WINDOW_LOG = 60.0
#: cells of the block's own grid per sqrt(k) t (at least; the block's grid is the composition's times a power of 2)
_BLOCK_CELLS = 256
#: ln of the most mass the k-fold law may keep in atoms for the block to be put on a coarser grid
_SMOOTH_LOG = -6.9
#: the smallest count for which the block pays (one copy is discretised directly)
_MIN_COUNT = 2


def aligned(spec: LawSpec, grid: float) -> bool:
    """Is the grid aligned to the Laplace atoms +-t (t an integer multiple of the grid)?"""
    r = spec.mu / grid
    return abs(r - round(r)) <= 1e-9 * max(1.0, r)


def wants_block(spec: LawSpec, k: int, grid: float) -> bool:
    """A Laplace law repeated, on a grid not aligned to its atoms."""
    return spec.kind == "laplace" and k >= _MIN_COUNT and not aligned(spec, grid)


def laplace_block(spec: LawSpec, k: int, grid: float, lam: float, lam_lo: float, lam_hi: float,
                  k_total: int) -> Factor | None:
    """The optimistic factor of ``k`` copies of the Laplace law ``spec`` on ``grid`` (module docstring), for a
    composition tilted at about ``lam``; None where the law's own factor is not exact enough to use (mass put
    back by its hull step, which only an error term could pay for)."""
    t = float(spec.mu)
    # the block's own grid: the composition's times a power of two (exact), about _BLOCK_CELLS cells per sqrt(k) t
    # (the k-fold law's scale is at most that), where the k-fold law is smooth (its atoms, the copies that all
    # take an atom, hold at most e^{_SMOOTH_LOG}: the lines are of the first order on lone atoms, 2.5 cells low
    # with 3 copies of t = 0.3 on 8 times the grid): its second-order error stays far below the copies' own, and
    # the block and its products cost a stride-th of the points (:func:`dpkit.accounting._pld_tilted.
    # _group_products`; 200 Laplace laws x 10^3 on mixed 10^6: strides 8 and 16, the lower end 1.3e-6 lower)
    stride = 1
    smooth = k * math.log1p(0.5 * math.expm1(-t)) <= _SMOOTH_LOG
    if smooth:
        stride = 1 << max(0, math.floor(math.log2(max(math.sqrt(k) * t / (_BLOCK_CELLS * grid), 1.0))))
    big = grid * stride  # exact
    p = max(0, math.ceil(math.log2(t / big)))
    while t / 2.0**p > big:
        p += 1
    g_t = math.ldexp(t, -p)  # exact
    f = spec.factors(g_t, lam_hi, k_total, (False,), lam_lo=lam_lo)[False]
    if f.nu is not None and np.any(f.nu > 0):
        return None
    with np.errstate(divide="ignore"):
        lm = np.log(f.mass)
    losses = f.losses
    theta = max(float(lam), 0.0)
    a = lm + theta * losses
    c = _lse(a)
    w = np.exp(a - c)  # the tilted factor, total 1 up to rounding
    mu = _dot(w, losses)
    var = _dot(w, (losses - mu) ** 2)
    sd = math.sqrt(k * var) if var > 0 else g_t
    center = k * mu
    lo_s, hi_s = k * f.offset, k * (f.offset + f.mass.size - 1)  # the support, in g_t units
    # the window: where Chernoff bounds on the tilted k-fold law put less than e^{-_WINDOW_LOG} outside (a
    # lumpy law near its largest loss, large tilts, has a lower tail far heavier than a normal one's)
    # K(+-d) = k (ln M(theta +- d) - c): the tilted k-fold law's cumulants at a few d around 1 / sd, for the
    # window here and the wrap-around bound below
    thetas = [x / sd for x in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)]
    k_up = [k * (v - c) for v in _lse_at(lm, losses, [theta + d for d in thetas])]
    k_down = [k * (v - c) for v in _lse_at(lm, losses, [theta - d for d in thetas])]
    a_lo = max((-_WINDOW_LOG - kd) / d for d, kd in zip(thetas, k_down))
    a_hi = min((_WINDOW_LOG + ku) / d for d, ku in zip(thetas, k_up))
    lo_i = max(math.floor(min(a_lo, center - 8.0 * sd) / g_t), lo_s)
    hi_i = min(math.ceil(max(a_hi, center + 8.0 * sd) / g_t), hi_s)
    size = sp_fft.next_fast_len(hi_i - lo_i + 1, real=True)
    hi_i = lo_i + size - 1
    # ---- the circular k-fold convolution of the tilted factor on the window (as compose_tilted does it)
    idx = (f.offset + np.arange(w.size)) % size
    folded = np.bincount(idx, weights=w, minlength=size)
    fold_err = (w.size / size + 1.0) * _U if w.size > size else 0.0
    circ = sp_fft.irfft(kth_power(sp_fft.rfft(folded), k), size)
    out = np.roll(circ, -(lo_i % size))
    log_n = math.log2(max(size, 2))
    a2 = _l2_up(w)
    r2 = _l2_up(out) * (1.0 + 1e-6)
    err2 = k * (_FFT_C * log_n * _U + fold_err) * a2 + (math.pi * k + 7.0 + _FFT_C * log_n) * _U * r2
    # ---- what wraps onto the window: the tilted k-fold mass above hi_i g_t and below lo_i g_t (Chernoff at the
    # same d: P~(S > top) <= e^{K(d) - d top}, P~(S < bottom) <= e^{K(-d) + d bottom})
    top, bottom = hi_i * g_t, lo_i * g_t
    log_wrap = []
    if hi_i < hi_s:
        log_wrap.append(min(ku - d * top for d, ku in zip(thetas, k_up)))
    if lo_i > lo_s:
        log_wrap.append(min(kd + d * bottom for d, kd in zip(thetas, k_down)))
    wrap = math.exp(min(_lse(np.array(log_wrap)), 0.0)) * (1.0 + 1e-9) if log_wrap else 0.0
    low = out - (err2 + wrap)
    # tilt weights: each w_j to a relative (2 theta |l_j| + |c| + 8) u, so the k-fold product to (1 + r)^k;
    # untilting e^{k c - theta s}: relative (2 theta |s| + 2 k |c| + 16) u
    r_w = (2.0 * theta * float(np.max(np.abs(losses))) + abs(c) + 8.0) * _U
    s_max = max(abs(lo_i), abs(hi_i)) * g_t
    shrink = math.exp(-(k * r_w + (2.0 * theta * s_max + 2.0 * k * abs(c) + 16.0) * _U) * 1.01)
    keep = low > 0
    if not keep.any():
        return None
    j = np.nonzero(keep)[0]
    s = (lo_i + j) * g_t  # each to a relative u
    with np.errstate(under="ignore"):
        m = np.asarray(np.exp(np.log(low[j]) + k * c - theta * s) * shrink, dtype=np.float64)
    # ---- onto the composition's grid by supporting lines (second order), :func:`_regrid`; each atom first
    # lowered by 4 u |s| (below its exact loss: moving an atom down only lowers R)
    s_down = np.asarray(s - 4.0 * _U * np.abs(s), dtype=np.float64)
    block = _regrid(s_down, m, big, k * f.eta, k * t, smooth)
    if stride == 1:
        return block
    # the same masses at the same losses (i big = (i stride) grid exactly), every stride-th point of the grid
    return Factor(grid=float(grid), offset=stride * block.offset, mass=block.mass, infinity_mass=block.infinity_mass,
                  pessimistic=False, eta=block.eta, nu=block.nu, log_tail=None, max_loss=block.max_loss,
                  lam_max=math.inf, stride=stride)


def _regrid(s: NDArray[np.float64], m: NDArray[np.float64], grid: float, eta: float, max_loss: float,
            lines: bool = True) -> Factor:
    """The optimistic factor on ``grid`` of the sub-probability measure with P-masses ``m`` at losses ``s``
    (increasing): its half-cell P- and Q-masses (E_P[e^{-L}; half cell]) discretised by supporting lines
    (:func:`dpkit.accounting._pld_discretize.discretize`, whose construction needs nothing of the law but those
    masses: any measure, atoms included, gets R' <= R).  Its error is of the second order in the grid over the
    measure's scale (a cell's gap is its mass times its width, and the mass in a cell is about the density
    times the width); rounding every atom down lost half a cell of the whole law's loss (first order).

    An atom within 1e-9 (relative) above a half cell's edge (s / g is off by a few ulps) is counted in the half
    cell below, at that edge (moved down: only lowers R), its Q-mass taken there.  The grid runs from the point
    at or below the lowest atom to the one at or above the highest, so every point ends an occupied cell and R
    is 0 above the last (nothing is interpolated beyond the support).  The masses the hull step drops sit in
    ``nu``; 64 u is added to ``eta`` for the rounding of the half-cell sums and of the split (as for a law's
    own cells).

    With ``lines`` False (a lumpy block, whose negative masses the lines' hull step moved about for thousands of
    rounds: 0.9 s on 7 + 3 copies of two Laplace laws that rounding down answers in 0.02 s, and cut short it left
    them all as error) every atom is rounded down, as before the lines."""
    half = 0.5 * grid
    x = s / half
    if not lines:
        return _round_down(x / 2.0, m, grid, eta, max_loss)
    h = np.ceil(x - 1e-9 * np.maximum(1.0, np.abs(x))).astype(np.int64) - 1  # half cell (h, h + 1] halves
    # the grid points at or below the lowest atom and at or above the highest: every point the end of an occupied
    # cell, so that nothing is interpolated beyond the support (R is 0 above the top point)
    i_lo = int(h[0]) // 2
    i_hi = max(-(-(int(h[-1]) + 1) // 2), i_lo + 1)
    n = i_hi - i_lo + 1
    hi_edge = np.minimum(s, (h + 1) * half)  # the loss the atom is counted at (at most its own)
    idx = h - 2 * i_lo
    with np.errstate(under="ignore"):
        q = m * np.exp(-hi_edge)
    half_p = np.bincount(idx, weights=m, minlength=2 * n - 2).astype(np.float64)
    half_q = np.bincount(idx, weights=q, minlength=2 * n - 2).astype(np.float64)
    mass, inf, _, nu = discretize(i_lo, n, grid, half_p, half_q, np.empty(0), np.empty(0), 0.0, 0.0, 0.0,
                                  pessimistic=False, positional=True)
    # the check's own rounding (running sums of n non-negative terms: n u of R <= n u z P(Y <= z)) and what it lets
    # pass (32 u + 2 n u of z P(Y <= z), :func:`_below`) join eta beside the 64 u of the lines' own rounding
    check = 4.0 * (hi_edge.size + n + 2) * _U
    grid_losses = np.asarray((i_lo + np.arange(n)) * grid, dtype=np.float64)
    if inf == 0.0 and _below(hi_edge, m, grid_losses, mass, nu):
        return Factor(grid=grid, offset=i_lo, mass=mass, infinity_mass=inf, pessimistic=False,
                      eta=eta + 64.0 * _U + check, nu=nu if np.any(nu > 0) else None, log_tail=None,
                      max_loss=max_loss, lam_max=math.inf)
    # the lines failed (a support of a few cells, where the lowest-loss end's rule, which keeps E[Y] exact, meets
    # the top): every atom rounded down instead
    return _round_down(x / 2.0, m, grid, eta, max_loss)


def _round_down(x: NDArray[np.float64], m: NDArray[np.float64], grid: float, eta: float, max_loss: float) -> Factor:
    """The atoms (P-masses ``m`` at losses ``x`` grid) each moved down onto the grid (Meiser & Mohammadi 2018,
    Thm 6: first order, always below R), to floor(x) lowered by 1e-9 of a cell (x is off by a few ulps; a point
    nearer a grid line than that goes one cell down, which is allowed)."""
    cell = np.floor(x - 1e-9 * np.maximum(1.0, np.abs(x))).astype(np.int64)
    off = int(cell[0])
    down = np.asarray(np.bincount(cell - off, weights=m), dtype=np.float64)
    return Factor(grid=grid, offset=off, mass=down, infinity_mass=0.0, pessimistic=False, eta=eta, nu=None,
                  log_tail=None, max_loss=max_loss, lam_max=math.inf)


def _below(a_loss: NDArray[np.float64], a_mass: NDArray[np.float64], losses: NDArray[np.float64],
           mass: NDArray[np.float64], nu: NDArray[np.float64]) -> bool:
    """Is R' <= R, with R(z) = sum_i a_i (z - e^{-a_loss_i})_+ the atoms' hockey-stick curve and R' that of
    ``mass`` on ``losses``, up to what the tilted accountant pays for anyway: R' of the masses ``nu`` (the hull
    step's, an error term of their own) and (32 + 2 n) u z P(Y <= z) (the lines' own rounding, which the 64 u
    added to the factor's eta covers, and this check's: the caller adds 4 n u more; eta pays for eta
    P(L > -ln z - g) in delta)?  Both curves are piecewise linear with kinks at their points, so they are compared
    at all of those (merged in increasing y) and by their slopes beyond (total masses).  Each curve is a running
    sum of n non-negative increments (slope times the step), off by a relative n u at most, and R <= z P(Y <= z).
    On mixed 10^6 the blocks pass with 40 u to spare at most; a support of 4 cells (delta = 1e-10 at the top of
    10 Laplace laws) put 0.7% of its mass above the law's largest loss."""
    ya, yg = np.exp(-a_loss[::-1]), np.exp(-losses[::-1])  # increasing
    z = np.concatenate([ya, yg])
    order = np.argsort(z, kind="stable")  # two sorted runs: merged in linear time
    z = z[order]
    na = ya.size
    w_a = np.concatenate([a_mass[::-1], np.zeros(yg.size)])[order]
    w_g = np.concatenate([np.zeros(na), mass[::-1]])[order]
    w_n = np.concatenate([np.zeros(na), nu[::-1]])[order]
    dz = np.diff(z)
    s_a, s_g, s_n = np.cumsum(w_a), np.cumsum(w_g), np.cumsum(w_n)
    r_a = np.concatenate([[0.0], np.cumsum(s_a[:-1] * dz)])
    r_g = np.concatenate([[0.0], np.cumsum(s_g[:-1] * dz)])
    r_n = np.concatenate([[0.0], np.cumsum(s_n[:-1] * dz)])
    tol = (32.0 + 2.0 * (z.size + 2)) * _U
    ok = r_g <= r_a + r_n + tol * z * s_a
    total_a, total_g = float(s_a[-1]), float(s_g[-1])
    return bool(np.all(ok)) and total_g <= total_a * (1.0 + tol) + float(s_n[-1])
