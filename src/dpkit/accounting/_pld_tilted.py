r"""Composing discretised privacy-loss laws in an exponentially tilted frame: delta(eps) with no floor.

Why.  A PLD composed by FFT in doubles errs by about 1e-16 of its *largest* mass, so delta(eps) read
off it has an absolute floor near 1e-15 (times the number of compositions, for the rounding of each
factor); truncating each factor's tails at 1e-15 adds another.  Users of delta = 1/n^2 with n in the
millions, and anyone asking for delta(eps) far in the tail, get nothing from such a floor.

The identity.  For a (sub-)probability vector m on the grid l_j = j g and lambda >= 0 write
M(lambda) = sum_j m_j e^{lambda l_j} and the tilted vector m~_j = m_j e^{lambda l_j} / M(lambda).
Tilting commutes with convolution (e^{lambda (l + l')} = e^{lambda l} e^{lambda l'}), so the k-fold
composition of factors m_i satisfies, at every point s of the composed grid,

.. math::

   (m_1^{*k_1} * \dots)_s = e^{C - \lambda s}\,(\tilde m_1^{*k_1} * \dots)_s,
   \qquad C = \sum_i k_i \ln M_i(\lambda)

(the Esscher transform; Esscher 1932; its use for tail probabilities of sums is the saddle-point method,
Daniels 1954, and for privacy loss distributions the same change of measure underlies the
Rényi/moments accountant, Abadi et al. 2016, arXiv 1607.00133, and the saddle-point accountant of
Alghamdi, Gomez, Asoodeh, Calmon, Kosut, Sankar 2023, arXiv 2208.03458).  With lambda chosen so that
the tilted sum has its mean near eps (the saddle point), the FFT computes the tilted composition where
delta(eps) = sum_{s > eps} (1 - e^{eps - s}) (composed mass)_s lives with *relative* accuracy, and

.. math::

   \delta(\varepsilon) = e^{C}\sum_{s > \varepsilon} \tilde\mu_s\, e^{-\lambda s}(1 - e^{\varepsilon - s})
   + P(S = \infty)

is formed in log space: no floor, down to delta = 1e-300.

Certified error terms (each added to the pessimistic law's delta and subtracted from the optimistic
law's; every one is relative to delta or to e^{C - lambda eps}, none is an additive floor):

* FFT rounding (Higham 2002, *Accuracy and Stability of Numerical Algorithms*, §24.1, the normwise
  bound as in :func:`dpkit.accounting.pld.compose_many`) on the tilted vectors, whose l1 norm is 1:
  ||error||_2 <= err2; its effect on delta is at most e^{C} ||w||_2 err2 with w_s = e^{-lambda s}(1 - e^{eps-s})_+.
* Wrap-around: a Chernoff bound on the tilted laws themselves limits the tilted mass outside the
  window; it is added to err2 (it aliases into the window) and, above the window, to the pessimistic
  delta as e^{C - lambda s_top} times that mass.
* Tilt weights: each e^{lambda l_j - c} is computed to a relative r = (2 lambda |l_j| + |c| + 8) u, so the
  composed masses are off by at most a factor (1 +- r)^{k}, a relative error on delta.
* Rounding of the discretised masses (:mod:`dpkit.accounting._pld_discretize`): the masses depend
  on the exact laws only through tail values, each to a relative rho; for one factor this moves
  delta(x) by at most eta P(L > x - g) (eta = 64 u), and through the composition
  delta = E[delta_i(eps - S_rest)] by at most eta P(S > eps - g) per factor, i.e. by
  (sum_i k_i eta_i) P(S > eps - g), which the same tilted vector bounds (it is at most (1 + lambda)
  times delta near the saddle point, a relative term).
* Mass removed at known points (the optimistic discretisation's hull step and snapped atoms, vector
  nu): removing nu_j at l_j from one factor moves delta by at most nu_j P(S_rest > eps - l_j)
  <= nu_j e^{lambda l_j} e^{-lambda eps} prod_rest M, so in all e^{C - lambda eps} sum_i k_i nu~_i.
* The upper tail left out of a factor (beyond its last grid point): the multilinearity of delta in the
  factors gives delta(full) <= delta(truncated) + k E[(1 - e^{eps - S})_+; one factor in the tail]
  <= delta(truncated) + e^{C - lambda eps} sum_i k_i tau_i(lambda) / M_i(lambda) times
  prod_i (1 + tau_i / M_i)^{k_i}, with tau_i(lambda) an analytic bound on the tail's exponential
  moment (given by the law; :mod:`dpkit.accounting.dpsgd` has the subsampled Gaussian's).  The
  optimistic law just leaves it out (a lower bound).

* Factors sharing a count k are composed once (one copy each) before the window's transform, by a
  truncated product tree of FFT convolutions (:func:`_group_products`, which states the bounds): the
  tree's l2 rounding error enters err2 times k (as a forward FFT's error does), and the exact tilted
  mass its truncations drop, r, enters the upper-tail term above as k r (any removed mass, wherever it
  sits, moves delta by at most e^{C - lambda eps} times its tilted mass, by the same multilinearity).

Second-order products of these terms are covered by multiplying all of them by
exp(sum_i k_i (eta_i + nu~_i + tau~_i)) (each factor's perturbations are at most (1 + x)^k <= e^{kx}).

Everything is vectorised NumPy/SciPy; memory is O(window) plus the factors.  Hand-written because
no library composes PLDs in a tilted frame with certified bounds (dp_accounting and prv_accountant
truncate tails at a fixed mass, which is the floor this module removes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import fft as sp_fft
from scipy import special
from dpkit.errors import InvalidArgumentError, ResourceLimitError

Array = NDArray[np.float64]

_U = 2.0**-53
_U_EXT = float(np.finfo(np.longdouble).eps) / 2.0
_FFT_C = 10.0
#: how far below delta (in ln) what wraps around the FFT's circle is kept: e^{-20} = 2e-9 relative
_MARGIN = 20.0


def _lse(x: Array) -> float:
    """ln sum e^x (-inf for no terms or all -inf): scipy's logsumexp without its per-call overhead."""
    if x.size == 0:
        return -math.inf
    m = float(np.max(x))
    if not math.isfinite(m):
        return m
    return m + math.log(float(np.sum(np.exp(x - m))))


def _lse_at(lm: Array, losses: Array, lams: Sequence[float]) -> list[float]:
    """[_lse(lm + lp * losses) for lp in lams], the same floats (the same elementwise operations, each row's
    maximum, exponentials and pairwise sum as the one-dimensional call), several tilts per pass: the cumulants
    of a few hundred factors at a dozen tilts were 2 of 26 s of a mixed-10^6 answer, mostly in per-call overhead."""
    out: list[float] = []
    if losses.size == 0:
        return [-math.inf] * len(lams)
    lam_arr = np.asarray(lams, dtype=np.float64)
    rows = max(1, (1 << 21) // losses.size)  # at most 16 MB of temporaries
    for i in range(0, lam_arr.size, rows):
        x = lm[None, :] + lam_arr[i: i + rows, None] * losses[None, :]
        m = x.max(axis=1)
        fin = np.isfinite(m)
        s = np.exp(x - np.where(fin, m, 0.0)[:, None]).sum(axis=1)
        out.extend(mi + math.log(si) if fi else mi for mi, si, fi in zip(m.tolist(), s.tolist(), fin.tolist()))
    return out


def _K_at(logs: Sequence[tuple[Array, Array, int]], lams: Sequence[float]) -> list[float]:
    """[math.fsum(k * _lse(lm + lp * losses) for lm, losses, k in logs) for lp in lams] (the same floats)."""
    per = [[k * v for v in _lse_at(lm, losses, lams)] for lm, losses, k in logs]
    return [math.fsum(col) for col in zip(*per)] if per else [0.0] * len(lams)


#: at most this many blocks per factor in the summaries the window's tilts are chosen on (:func:`_summaries`)
_CHOOSE_BLOCKS = 1024


def _summaries(items: Sequence[tuple[Factor, int]], t_max: float) -> list[tuple[Array, Array, Array, int]]:
    """Each factor in blocks of at most ``_CHOOSE_BLOCKS`` (and no wider than 0.25 / t_max in loss), each block's
    ln mass, mean loss and variance within (:func:`_steer_summary`): what :func:`_approx_K` and
    :func:`_approx_var` evaluate to *choose* the window's tilts (lambda' and theta, whose exact K is then computed
    once each for the certified bounds: the choice only sets the window's length)."""
    out = []
    for f, k in items:
        w = f.mass.size // _CHOOSE_BLOCKS
        if t_max > 0:
            w = min(w, int(0.25 / (t_max * f.grid * f.stride)))
        lb, mean, within = _steer_summary(f, max(w, 1))
        out.append((lb, mean, within, k))
    return out


def _approx_K(summ: Sequence[tuple[Array, Array, Array, int]], lams: Sequence[float]) -> list[float]:
    """sum_i k_i ln M_i(lam) at each lam, each block taken as a normal law of its mean and variance (exact for
    blocks of one point; steering only)."""
    lam_arr = np.asarray(lams, dtype=np.float64)
    total = np.zeros(lam_arr.size)
    for lb, mean, within, k in summ:
        if lb.size == 0:
            continue
        with np.errstate(over="ignore", invalid="ignore"):  # an infinite tilt (theta = f / sd, sd = 0) gives nan:
            # never chosen (every comparison with nan is false), as with the exact cumulants
            x = lb[None, :] + lam_arr[:, None] * mean[None, :] + (0.5 * lam_arr * lam_arr)[:, None] * within[None, :]
            m = x.max(axis=1)
            total += k * (m + np.log(np.exp(x - m[:, None]).sum(axis=1)))
    return [float(v) for v in total]


def _approx_var(summ: Sequence[tuple[Array, Array, Array, int]], lam: float) -> float:
    """sum_i k_i times the tilted variance at lam, on the blocks of :func:`_approx_K` (steering only)."""
    var = 0.0
    for lb, mean, within, k in summ:
        if lb.size == 0:
            continue
        x = lb + lam * mean + 0.5 * lam * lam * within
        w = np.exp(x - _lse(x))
        shifted = mean + lam * within
        mu = _dot(w, shifted)
        var += k * _dot(w, within + (shifted - mu) ** 2)
    return var


def _dot(a: Array, b: Array) -> float:
    """sum_i a_i b_i by NumPy's own einsum loop (one thread), not BLAS: a multithreaded BLAS dot waits for its
    threads, which on a loaded machine cost milliseconds per call (24 s of a 90 s answer in the 10^6-step
    mixed composition).  Rounding: within gamma_n sum |a_i b_i| of the exact value, in any summation order
    (Higham 2002, *Accuracy and Stability of Numerical Algorithms*, eq. (3.5))."""
    return float(np.einsum("i,i->", a, b))


def _l2_up(x: Array) -> float:
    """||x||_2 rounded up: the float sum of squares is within gamma_n of the exact one (relative: the terms are
    >= 0; Higham 2002, eq. (3.5), gamma_n = n u / (1 - n u) <= (n + 1) u for n u <= 1/n), the square root
    within one rounding."""
    s = float(np.einsum("i,i->", x, x))
    return math.sqrt(s * (1.0 + (x.size + 2) * _U)) * (1.0 + 2.0 * _U)


def kth_power(z: NDArray[np.complex128], k: int) -> NDArray[np.complex128]:
    """z^k elementwise as |z|^k e^{i k arg z} (relative error about (pi k + 6) u, the ``rel_power`` of
    :func:`compose_tilted`'s error bound); 0 where z is 0.

    Where k ln|z| <= -746, |z|^k rounds to 0 in doubles (below half the least subnormal, e^-745.13), so the
    value there is 0 whatever the phase: only the other entries are evaluated (a high power of a spectrum is
    mostly such zeros, and the complex exponential of the phase, at arguments in the thousands, was most of
    the time)."""
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
        lk = k * np.log(np.abs(z))
        live = np.nonzero(lk > -746.0)[0]
        powered = np.zeros(z.shape, dtype=np.complex128)
        powered[live] = np.exp(lk[live]) * np.exp(1j * (k * np.angle(z[live])))
    return powered


def _readonly(a: Array) -> Array:
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, slots=True, kw_only=True)
class Factor:
    """One discretised privacy-loss law on the grid l_j = (offset + stride j) grid (finite part + mass at +inf;
    ``stride`` > 1: every stride-th grid point, the others holding no mass, as the optimistic Laplace blocks of
    :mod:`dpkit.accounting._tilted_blocks` on a coarser grid).

    ``eta``: tail-relative rounding coefficient; ``nu``: mass removed at each point (or None);
    ``log_tail(lam)``: log of an upper bound on int e^{lam l} over the upper tail left out (-inf if
    none; only the pessimistic law needs it); ``max_loss``: the exact supremum of the true law's finite
    losses (+inf if unbounded), used for the pure-DP cap."""

    grid: float
    offset: int
    mass: Array
    infinity_mass: float
    pessimistic: bool
    eta: float
    nu: Array | None = None
    log_tail: Callable[[float], float] | None = None
    max_loss: float = math.inf
    lam_max: float = math.inf  # the largest tilt the cut was made for (log_tail small up to it)
    stride: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "mass", _readonly(self.mass))
        if self.nu is not None:
            object.__setattr__(self, "nu", _readonly(self.nu))

    @property
    def losses(self) -> Array:
        return np.asarray((self.offset + self.stride * np.arange(self.mass.size)) * self.grid, dtype=np.float64)

    def log_mgf(self, lam: float) -> float:
        """ln sum_j m_j e^{lam l_j} (the finite part)."""
        with np.errstate(divide="ignore"):
            return float(_lse(np.log(self.mass) + lam * self.losses))

    def tilted_moments(self, lams: Array, block_loss: float = 0.0) -> tuple[Array, Array, Array]:
        """(ln M, mean, variance) of the tilted finite part at each lambda, from blocks of the vector no
        wider than ``block_loss`` (and at most 8192 unless that needs more), each at its mass-weighted
        mean loss: approximate, to steer only."""
        losses = self.losses
        m = self.mass
        n = m.size
        width = max(1, -(-n // 8192))
        if block_loss > 0:
            width = max(1, min(width, int(block_loss / (self.grid * self.stride))))
        starts = np.arange(0, n, width)
        bm = np.add.reduceat(m, starts)
        bl = np.add.reduceat(m * losses, starts)
        keep = bm > 0
        bl = bl[keep] / bm[keep]
        lb = np.log(bm[keep])
        c_out, m_out, v_out = [], [], []
        for chunk in np.array_split(np.asarray(lams, dtype=np.float64), max(1, (lams.size * bl.size) // 4_000_000)):
            t = lb[None, :] + chunk[:, None] * bl[None, :]
            c = special.logsumexp(t, axis=1)
            w = np.exp(t - c[:, None])
            mean = np.einsum("ij,j->i", w, bl)  # not BLAS (see _dot)
            c_out.append(c)
            m_out.append(mean)
            v_out.append(np.maximum(np.einsum("ij,j->i", w, bl * bl) - mean * mean, 0.0))
        return np.concatenate(c_out), np.concatenate(m_out), np.concatenate(v_out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tilted:
    """The composition of factors, tilted by ``lam``: composed mass at s_t = (start + t) grid is
    e^{C - lam s_t} out_t (up to the certified errors listed in the module docstring)."""

    grid: float
    lam: float
    start: int
    out: Array
    C: float
    err2: float
    rel: float  # pointwise relative error of the composed masses (tilt weights, untilting)
    width: float  # W = N grid: the circle's length in loss units (a mass wraps by multiples of W)
    cut_hi: bool  # is there composed mass above the window?
    log_below: float  # ln bound, in delta units, on what mass below the window adds by wrapping (optimistic)
    below_theta: float  # theta of the Chernoff bound on the tilted mass below the window (0: none)
    below_K: float  # K(lam - theta) of these factors
    alias_lam: float  # lambda' > lam of the Chernoff bound on mass wrapping down from above (optimistic)
    alias_K: float  # sum_i k_i ln M_i(lambda') of these factors
    log_tail: float  # ln sum_i k_i tau_i / M_i (pessimistic: added as e^{C - lam eps + .})
    log_nu: float  # ln sum_i k_i nu~_i over masses removed above nu_reach from a factor's bottom
    nu_low: float  # sum_i k_i (mass removed within nu_reach of factor i's bottom) / (factor i's total)
    nu_reach: float
    eta: float  # sum_i k_i eta_i
    second: float  # factor covering second-order products of the perturbations
    infinity_mass: float  # P(S = inf), rounded in the law's safe direction
    pessimistic: bool
    max_loss: float  # sum of the factors' exact max losses (inf if any is unbounded)
    log_suffix_a: Array = field(repr=False)
    log_suffix_b: Array = field(repr=False)

    @property
    def losses(self) -> Array:
        return np.asarray((self.start + np.arange(self.out.size)) * self.grid, dtype=np.float64)

    @property
    def window(self) -> tuple[float, float]:
        return self.start * self.grid, (self.start + self.out.size - 1) * self.grid

    def approx_log_delta(self, eps: float) -> float:
        """ln delta(eps) from suffix sums (no error terms): to locate a root quickly."""
        j = max(0, math.floor(eps / self.grid) + 1 - self.start)
        if j >= self.out.size:
            return -math.inf
        a, b = float(self.log_suffix_a[j]), float(self.log_suffix_b[j]) + eps
        if not a > b:
            return -math.inf
        raw = self.C + a + math.log(-math.expm1(b - a))
        return float(np.logaddexp(raw, math.log(self.infinity_mass))) if self.infinity_mass > 0 else raw

    def _segment(self, x: float) -> tuple[Array, Array, float]:
        """(losses, masses) of the window above x up to x + 60/lam (or the window's end), and ln of a bound,
        in delta units, on the composed mass beyond that segment with its weight (at most
        e^{C - lam (x + D)} times the tilted total, which is <= 1 + err)."""
        g, lam = self.grid, self.lam
        # x = -inf (a tail bound from nowhere: eps - nu_reach with nu_reach = inf at lam = 0) is the whole window
        j0 = 0 if x == -math.inf else min(max(0, math.floor(x / g) - self.start), self.out.size)
        j1 = self.out.size
        rest = -math.inf
        if lam > 0:
            j1 = min(j1, j0 + int(60.0 / (lam * g)) + 2)
            if j1 < self.out.size:
                rest = self.C - lam * (self.start + j1) * g + math.log1p(min(1.0, math.sqrt(self.out.size) * self.err2))
        s = np.asarray((self.start + j0 + np.arange(j1 - j0)) * g, dtype=np.float64)
        return s, self.out[j0:j1], rest

    def log_tail_prob(self, x: float) -> float:
        """ln of an upper bound on P(S > x) for this composed law: the vector's part above x, its FFT
        error, the mass above the window, the analytic tails and the mass at +inf."""
        lam = self.lam
        s, out, rest = self._segment(x)
        keep = s > x
        lp = -lam * s[keep]
        with np.errstate(divide="ignore"):
            log_p = self.C + _lse(np.log(out[keep]) + lp)
            log_p2 = 0.5 * _lse(2.0 * lp) if lp.size else -math.inf
        sum_rel = (lp.size + 16) * 4.0 * _U + self.rel
        above = self._log_above()
        terms = [log_p + math.log1p(sum_rel), rest, above, self.C - (lam * x if lam else 0.0) + self.log_tail]
        if self.err2 > 0:
            terms.append(self.C + log_p2 + math.log(self.err2))
        if self.infinity_mass > 0:
            terms.append(math.log(self.infinity_mass))
        return _lse(np.array(terms))

    def log_delta_bound(self, eps: float) -> float:
        """ln of a certified bound on delta(eps) of the true composition: an upper bound for a
        pessimistic law, a lower bound for an optimistic one (-inf for 0)."""
        g = self.grid
        lam = self.lam
        s, out, rest = self._segment(eps)
        over = s > eps
        with np.errstate(divide="ignore"):
            ls = s[over]
            lw = -lam * ls + np.log(-np.expm1(eps - ls))  # ln w_s
            log_raw = self.C + _lse(np.log(out[over]) + lw)
            log_w2 = 0.5 * _lse(2.0 * lw)
        sum_rel = (int(ls.size) + 16) * 4.0 * _U  # the sum's own rounding, relative
        # FFT error on the segment, and beyond it (weights e^{-lam s} there, l2 norm of a geometric tail)
        log_fft = self.C + log_w2 + math.log(self.err2) if self.err2 > 0 else -math.inf
        if rest > -math.inf and self.err2 > 0:
            log_fft = float(np.logaddexp(log_fft, self.C - lam * float(s[-1] if s.size else eps)
                                         - 0.5 * math.log(-math.expm1(-2.0 * lam * g)) + math.log(self.err2)))
        # the pessimistic law's mass above the window (tilted total <= 1): at most e^{C - lam s_top}
        log_above_term = self._log_above()
        log_tail_term = self.C - lam * eps + self.log_tail
        # rounding of the factors' masses: eta P(S > eps - g); mass removed near the bottom of each factor
        # (within nu_reach of its lowest loss): nu_low P(S > eps - nu_reach); the rest by Chernoff
        err_terms = [log_fft, self.C - lam * eps + self.log_nu]
        if self.eta > 0:
            err_terms.append(math.log(self.eta) + self.log_tail_prob(eps - g))
        if self.nu_low > 0:
            err_terms.append(math.log(self.nu_low) + self.log_tail_prob(eps - self.nu_reach))
        errs = _lse(np.array(err_terms)) + math.log(self.second)
        log_raw_hi = log_raw + math.log1p(sum_rel + self.rel)
        log_raw_lo = log_raw + math.log1p(-min(sum_rel + self.rel, 0.5))
        if self.pessimistic:
            parts = [log_raw_hi, rest, errs + math.log1p(self.rel), log_above_term + math.log(self.second),
                     log_tail_term + math.log(self.second)]
            if self.infinity_mass > 0:
                parts.append(math.log(self.infinity_mass))
            return min(0.0, _lse(np.array(parts)))
        # optimistic: raw (lowered) minus the errors and what wrapped onto the window, plus the mass at +inf
        errs = float(np.logaddexp(errs, self.log_alias(eps)))
        finite = -math.inf
        if log_raw_lo > errs + math.log1p(self.rel):
            finite = log_raw_lo + math.log1p(-math.exp(errs + math.log1p(self.rel) - log_raw_lo))
        if self.infinity_mass > 0:
            return float(np.logaddexp(finite, math.log(self.infinity_mass)))
        return finite

    def _log_above(self) -> float:
        """ln of a bound on the composed mass above the window (pessimistic law; in delta units, weight <= 1):
        Chernoff at the tilt, e^{C - lam s_top}, or at lambda', e^{K(lam') - lam' s_top}."""
        if not self.cut_hi:
            return -math.inf
        top = (self.start + self.out.size - 1) * self.grid
        out = self.C - self.lam * top
        if self.alias_lam > self.lam and math.isfinite(self.alias_K):
            out = min(out, self.alias_K - self.alias_lam * top)
        return out

    def log_alias(self, eps: float) -> float:
        """ln of a bound, in delta units, on what wrap-around adds to the window's delta(eps) (>= 0).

        A mass at s lands at p = s - jW above the window or p = s + jW below it (j >= 1), where the
        weight is at most e^{-lam p}; in delta units the mass e^{C} mu~_s weighs e^{lam s} m_s.  From
        below: sum_j e^{-lam j W} P(S < window) <= e^{-lam W} / (1 - e^{-lam W}).  From above, landing
        above eps needs s > eps + j W, and P(S > x) <= e^{K(lam') - lam' x} (Chernoff), so the sum is at
        most e^{K(lam') - lam' eps} e^{-theta W} / (1 - e^{-theta W}), theta = lam' - lam.

        From below also (whichever is smaller): every landing point p of a mass at s below the window with
        p > eps weighs at most e^{C - lam eps} mu~_s, the landing points of one s are W apart, and the tilted
        mass below the window's bottom a is at most e^{K(lam - theta) - K(lam) + theta a} for theta > 0
        (Chernoff on the lower tail; K exists at every argument for the cut factors), so the sum is at most
        e^{K(lam - theta) - lam eps + theta a} / (1 - e^{-lam W})."""
        below = self.log_below
        if self.below_theta > 0 and math.isfinite(self.below_K) and self.lam > 0:
            a = self.start * self.grid
            below = min(below, self.below_K - self.lam * eps + self.below_theta * a
                        - math.log(-math.expm1(-self.lam * self.width)))
        terms = [below]
        if self.alias_lam > self.lam:
            th = self.alias_lam - self.lam
            x = th * self.width
            terms.append(self.alias_K - self.alias_lam * eps - x - math.log(-math.expm1(-x)))
        return float(special.logsumexp(terms))


def _log_suffix(x: Array) -> Array:
    """ln sum_{i >= j} e^{x_i} for every j (to locate roots only, :meth:`Tilted.approx_log_delta`): running sums
    of e^{x - max} from the end (relative error at most n u, the terms being >= 0), and np.logaddexp.accumulate
    where a suffix's terms all underflow there (its relative error is about as small; a running logaddexp over
    1.5e6 points took 40 ms, six of them a tenth of a second on a mixed 10^6 answer)."""
    out = np.full(x.size, -np.inf)
    m = float(np.max(x)) if x.size else -math.inf
    if not math.isfinite(m):
        return out
    with np.errstate(under="ignore", divide="ignore"):
        run = np.cumsum(np.exp(x - m)[::-1])[::-1]
        out = m + np.log(run)
    low = np.nonzero(run < 1e-280)[0]  # the running sums only shrink towards the end
    if low.size:
        j = int(low[0])
        out[j:] = np.logaddexp.accumulate(x[j:][::-1])[::-1]
    return np.asarray(out, dtype=np.float64)


def _trimmed(f: Factor) -> Factor:
    """The factor without zero masses at either end (so that its support, and the window's, is tight)."""
    nz = np.nonzero(f.mass)[0]
    if nz.size == 0 or (nz[0] == 0 and nz[-1] == f.mass.size - 1):
        return f
    a, b = int(nz[0]), int(nz[-1]) + 1
    nu = None if f.nu is None else f.nu[a:b]
    if f.nu is not None and (np.any(f.nu[:a] > 0) or np.any(f.nu[b:] > 0)):
        return f  # removed mass sits there: keep the points
    return Factor(grid=f.grid, offset=f.offset + f.stride * a, mass=f.mass[a:b], infinity_mass=f.infinity_mass,
                  pessimistic=f.pessimistic, eta=f.eta, nu=nu, log_tail=f.log_tail, max_loss=f.max_loss,
                  lam_max=f.lam_max, stride=f.stride)


#: the tilts lambda' (lam + d max(lam, 2 / sd)) tried for the Chernoff bound on what wraps from above
_LAM_STEPS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: how thin (ln, relative to its peak) the tilted law may be at the answer when a smaller tilt is chosen
_THIN = 10.0


def _window_above(logs: Sequence[tuple[Array, Array, int]], lam: float, cands: Sequence[float], x_low: float,
                  target: float) -> tuple[float, float, float]:
    """(w, lambda', K(lambda')): the shortest window from the Chernoff bound on the mass that wraps down from
    above, e^{K(lam') - lam' x_low - (lam' - lam) W} <= e^{target}, over the candidate lambda' > lam."""
    best = (math.inf, lam, math.inf)
    for lp in cands:
        if lp <= lam:
            continue
        Kp = math.fsum(k * _lse(lm + lp * losses) for lm, losses, k in logs)
        w = (Kp - lp * x_low - target) / (lp - lam)
        if w < best[0]:
            best = (w, lp, Kp)
    return best


def _window_tilt(logs: Sequence[tuple[Array, Array, int]], summ: Sequence[tuple[Array, Array, Array, int]],
                 lam: float, lam_min: float, center: float, target: float, g: float
                 ) -> tuple[float, float, float, float]:
    """(FFT tilt, w_above, lambda', K(lambda')): the tilt in [lam_min, lam] whose window
    max((-target) / tilt, w_above(tilt)) is shortest (ties to the larger tilt, where the tilted mass at the
    answer is thickest).  At the saddle tilt lam the law's upper tail beyond the answer decays no faster than
    e^{-lam x}, so what wraps down from above is amplified by e^{lam W}; with heavy jumps (q = 1e-3) a
    smaller tilt needs the shorter window, with light ones (many steps) the saddle tilt itself.

    The choice is made on the factors' block summaries (:func:`_approx_K`); K(lambda'), which the certified
    wrap-around bound uses, is then computed exactly on ``logs`` at the lambda' chosen (14 exact evaluations of
    every factor at every candidate tilt were a tenth of a mixed 10^6 answer)."""
    alphas = (1.0, 0.9, 0.75, 0.6, 0.5)
    cands = sorted({lam * a for a in alphas + (1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 9.0, 14.0)})
    ks = list(zip(cands, _approx_K(summ, cands)))
    kd = dict(ks)
    # the tilted law's sd at lam, for the lowest eps of interest, center - 2 sd (a second difference of K
    # is no good: where jumps dominate, K grows by orders of magnitude just past the saddle tilt)
    x_low = center - 2.0 * math.sqrt(_approx_var(summ, lam))
    best = None
    for a in alphas:
        tilt = lam * a
        if tilt < lam_min:
            break
        # the tilted law at ``tilt`` holds about e^{-I} of its peak at the answer, I = (lam - tilt) center
        # - K(lam) + K(tilt) (Chernoff; 0 at the saddle tilt): the FFT's error is relative to the peak
        if a < 1.0 and (lam - tilt) * center - kd[lam] + kd[tilt] > _THIN:
            break
        w_above, lp_best = math.inf, tilt
        for lp, Kp in ks:
            if lp > tilt * 1.05:
                w = (Kp - lp * x_low - target) / (lp - tilt)
                if w < w_above:
                    w_above, lp_best = w, lp
        W = max(-target / tilt, w_above, 64 * g)
        if best is None or W < 0.95 * best[0]:
            best = (W, tilt, lp_best)
    assert best is not None
    _, tilt, lp_best = best
    if lp_best <= tilt:
        return tilt, math.inf, tilt, math.inf
    K_best = _K_at(logs, [lp_best])[0]
    return tilt, (K_best - lp_best * x_low - target) / (lp_best - tilt), lp_best, K_best


#: compose factors sharing a count once, then raise that to the count (:func:`_group_products`); False: one
#: transform per factor (the reference path the tests compare against)
GROUPED = True
#: the tilted mass (relative, times the count k) a group's product may drop from its tails: e^{C - lam eps} k r is
#: then added to the pessimistic delta, at most 1e-9 e^{C - lam eps} (delta near the saddle point is about
#: e^{C - lam eps} / (lam sd sqrt(2 pi)), so a relative 1e-9 lam sd, far below the interval's width)
_GROUP_DROP = 1e-9


@dataclass(frozen=True, slots=True)
class _Group:
    """The tilted composition of one copy of each factor sharing the count ``k`` (computed, truncated):
    ``vec`` at grid indices offset + j, its l2 distance ``err2`` from the exact composition of the kept
    parts, and ``removed``, a bound on the exact tilted mass dropped (relative to the product's normaliser)."""

    k: int
    vec: Array
    offset: int
    err2: float
    removed: float


def _prefix_sums(vec: Array, budget: float) -> Array:
    """The running sums of ``vec`` up to the first one above ``budget`` (all of them if none is): the first
    entries of ``np.cumsum(vec)``, the same floats (a running sum is sequential), without summing the whole
    vector when the cut is near its start (the masses cut off are a sliver of a long product)."""
    n = vec.size
    m = min(n, 4096)
    while True:
        cum = np.cumsum(vec[:m])
        if m == n or cum[-1] > budget:
            return cum
        m = min(n, 8 * m)


def _trim(vec: Array, offset: int, budget: float, noise2: float, rel: float = 0.0,
          stride: int = 1) -> tuple[Array, int, float]:
    """(vec, offset, dropped): ``vec`` without end blocks of computed mass <= budget each; ``dropped`` bounds the
    exact mass cut off: the computed mass there plus sqrt(points) ``noise2`` (Cauchy-Schwarz: the l1 norm of
    the error on n points is at most sqrt(n) times its l2 norm), times 1 + 2 ``rel`` (a pointwise relative error
    of the values) + 2 n u (the sums' rounding).  ``stride``: the entries are ``stride`` grid points apart."""
    if vec.size <= 2 or budget <= 0:
        return vec, offset, 0.0
    cum = _prefix_sums(vec, budget)
    lo = int(np.searchsorted(cum, budget, side="right"))
    rev = _prefix_sums(vec[::-1], budget)
    hi = vec.size - int(np.searchsorted(rev, budget, side="right"))
    if lo >= hi:
        return vec, offset, 0.0
    dropped = (float(cum[lo - 1]) if lo > 0 else 0.0) + (float(rev[vec.size - hi - 1]) if hi < vec.size else 0.0)
    n_out = lo + vec.size - hi
    if n_out == 0:
        return vec, offset, 0.0
    dropped = (dropped + math.sqrt(n_out) * noise2) * (1.0 + 2.0 * rel + 2.0 * (n_out + 2) * _U)
    return vec[lo:hi], offset + stride * lo, dropped


def _stride(vec: Array, offset: int) -> tuple[int, int]:
    """(s, first): the largest s such that every nonzero entry of ``vec`` sits at a grid index first + s j
    (first: the first nonzero's index), or (0, offset) for a vector of zeros.  Exact: the zeros are exact zeros."""
    nz = np.flatnonzero(vec)
    if nz.size == 0:
        return 0, offset
    if nz.size == 1:
        return 0, offset + int(nz[0])
    return int(np.gcd.reduce(np.diff(nz))), offset + int(nz[0])


def _spread(vec: Array, r: int) -> Array:
    """``vec`` with r - 1 zeros between its entries (its entries r points apart)."""
    if r <= 1:
        return vec
    out = np.zeros(r * (vec.size - 1) + 1)
    out[::r] = vec
    return out


def _group_products(items: Sequence[tuple[Factor, int]], tilted: Sequence[Array], cs: Sequence[float], lam: float,
                    group: bool = True) -> list[_Group]:
    r"""The factors grouped by their count k, each group's tilted vectors convolved into one.

    Why: the composition's spectrum is prod_i F_i^{k_i}; factors with the same k_i give (prod_i F_i)^k, and
    prod_i F_i, the composition of one copy of each, spreads over about sqrt(n) per-step scales where the
    k-fold composition spreads over sqrt(k n): its convolutions run on far shorter vectors than the FFT
    window, which is then transformed once per distinct count instead of once per factor.

    How, and what it certifies.  A product tree (the two shortest vectors first) of linear FFT convolutions.
    Each convolution of computed vectors a, b (exact a + d_a, b + d_b) errs in l2 by at most
    ||d_a||_2 ||b||_1 + ||a||_1 ||d_b||_2 + ||d_a||_2 sqrt(len b) ||d_b||_2 (Young's inequality,
    ||x * y||_2 <= ||x||_2 ||y||_1, and ||y||_1 <= sqrt(len y) ||y||_2) plus its own rounding,
    c log2(n) u (||a||_2 ||b||_1 + ||a||_1 ||b||_2 + ||a * b||_2) (the normwise FFT bound of Higham 2002,
    *Accuracy and Stability of Numerical Algorithms*, §24.1, as in :meth:`dpkit.accounting.pld.PLD.compose`);
    negative results are clipped to 0 (the exact masses are >= 0: clipping only shrinks the error).  Each
    leaf and each product then drops end blocks of computed mass at most ``_GROUP_DROP`` / (4 k n) each
    (:func:`_trim`); the exact mass dropped is bounded by the computed mass plus sqrt(points) times the l2
    error.  A leaf's values are the tilted masses themselves (pointwise relative error (2 lam |l| + |c| + 8) u,
    already in the composition's ``rel``), so there the bound is the computed mass times 1 + 2 r + 2 n u.

    What the drops do to delta: the composition of the truncated products is dominated (pointwise, as
    measures) by the exact one, and their difference has tilted mass at most 1 - (1 - r)^k <= k r, with r the
    sum of the drops (each a sub-measure of an exact partial product, whose tilted mass is <= 1); since
    (1 - e^{eps - s})_+ <= e^{lam (s - eps)} for lam >= 0, the untilted difference adds at most
    e^{C - lam eps} k r to delta: the same term as an upper tail left out of a factor (module docstring),
    so r is added to the factors' ``log_tail`` terms (pessimistic: added; optimistic: a smaller mass only
    lowers delta, and the term only loosens its tail bound).  A final product whose computed l1 norm exceeds
    1 is scaled down to 1 (the change, <= (l1 - 1) ||.||_2, added to the l2 error) so that every spectrum
    raised to the k-th power has modulus <= 1 up to the forward FFT's error.

    With ``group=False`` (or one factor of a count) the factors are transformed one by one, as before."""
    by_k: dict[int, list[int]] = {}
    for i, (_, k) in enumerate(items):
        by_k.setdefault(int(k), []).append(i if group else -1 - i)
    out: list[_Group] = []
    if not group:
        return [_Group(k=int(k), vec=_spread(tilted[i], f.stride), offset=f.offset, err2=0.0, removed=0.0)
                for i, (f, k) in enumerate(items)]
    for k, idx in by_k.items():
        if len(idx) == 1:
            i = idx[0]
            f = items[i][0]
            out.append(_Group(k=k, vec=_spread(tilted[i], f.stride), offset=f.offset, err2=0.0, removed=0.0))
            continue
        budget = _GROUP_DROP / (4.0 * k * len(idx))
        removed, rel_leaves = 0.0, 0.0
        # strides: a leaf whose nonzero entries are s grid points apart (the optimistic Laplace blocks, put on the
        # grid times a power of two) is kept as every s-th point, and two nodes are convolved at the gcd of their
        # strides (the same convolution: a product of such vectors is one too), leaves of one stride first; the
        # product is spread back onto every grid point at the end
        nodes: list[tuple[Array, int, float, int]] = []
        for i in idx:
            f = items[i][0]
            rel_i = (2.0 * abs(lam) * float(np.max(np.abs(f.losses))) + abs(cs[i]) + 8.0) * _U
            # the factor's own stride times that of its nonzero entries
            st, j0 = _stride(tilted[i], 0)
            vec, off = tilted[i][j0::max(st, 1)], f.offset + f.stride * j0
            st = max(st * f.stride, 1)
            v, off, dropped = _trim(vec, off, budget, 0.0, rel_i, st)
            removed += dropped
            rel_leaves += rel_i
            nodes.append((v, off, 0.0, st))
        while len(nodes) > 1:
            nodes.sort(key=lambda t: (-t[3], t[0].size))
            nxt = []
            for j in range(0, len(nodes) - 1, 2):
                (a, oa, ea, sa), (b, ob, eb, sb) = nodes[j], nodes[j + 1]
                stride = math.gcd(sa, sb)
                a, b = _spread(a, sa // stride), _spread(b, sb // stride)
                n = a.size + b.size - 1
                size = sp_fft.next_fast_len(n, real=True)
                conv = sp_fft.irfft(sp_fft.rfft(a, size) * sp_fft.rfft(b, size), size)[:n]
                a1, b1 = float(np.sum(a)) * (1.0 + a.size * _U), float(np.sum(b)) * (1.0 + b.size * _U)
                a2, b2 = _l2_up(a), _l2_up(b)
                c2 = _l2_up(conv)
                fresh = _FFT_C * math.log2(max(size, 2)) * _U * (a2 * b1 + a1 * b2 + c2)
                err = (ea * b1 + a1 * eb + ea * math.sqrt(b.size) * eb + fresh) * (1.0 + 1e-9)
                conv = np.maximum(conv, 0.0)
                v, off, dropped = _trim(conv, oa + ob, budget, err, 0.0, stride)
                removed += dropped
                nxt.append((v, off, err, stride))
            if len(nodes) % 2:
                nxt.append(nodes[-1])
            nodes = nxt
        v, off, err, stride = nodes[0]
        l1 = float(np.sum(v)) * (1.0 + v.size * _U)
        if l1 > 1.0:
            err += (1.0 - 1.0 / l1 + _U) * _l2_up(v) * (1.0 + 1e-9)
            v = v / l1
        v = _spread(v, stride)  # back onto every grid point (exact zeros between: the norms are unchanged)
        # the drops above are of products of the computed leaves; the exact leaves' are at most e^{2 sum r_i} times
        out.append(_Group(k=k, vec=v, offset=off, err2=err, removed=removed * math.exp(2.0 * rel_leaves)))
    return out


def compose_tilted(parts: Sequence[tuple[Factor, int]], lam: float, *, center: float | None = None,
                   log_delta: float | None = None, extended: bool | None = None,
                   lam_min: float | None = None, group: bool | None = None) -> Tilted:
    """The tilted composition of ``k_i`` copies of each factor (same grid, same pessimism), in an FFT
    window around ``center`` (the eps of interest) long enough that wrap-around is negligible next to
    ``log_delta`` (see :meth:`Tilted.log_alias`).

    With ``lam_min`` (and ``center``, ``log_delta``), the tilt is chosen in [lam_min, lam] to make that
    window shortest (:func:`_window_tilt`); every tilt gives certified bounds, this one the cheapest FFT."""
    items = [(_trimmed(f), int(k)) for f, k in parts]
    first = items[0][0]
    g, pess = first.grid, first.pessimistic
    for f, _ in items[1:]:
        if f.grid != g or f.pessimistic != pess:
            raise InvalidArgumentError("factors compose only on the same grid and with the same pessimism.")
    lam = float(lam)
    with np.errstate(divide="ignore"):
        logs = [(np.log(f.mass), f.losses, k) for f, k in items]
    chosen = None
    summ = _summaries(items, 14.0 * lam) if lam > 0 else []
    if lam_min is not None and lam > 0 and center is not None and log_delta is not None and math.isfinite(center):
        chosen = _window_tilt(logs, summ, lam, float(lam_min), float(center), log_delta - _MARGIN, g)
        lam = chosen[0]
    # ---- tilted vectors, their moments, and the log-normalisers c_i
    tilted, cs, means, var, rel = [], [], 0.0, 0.0, 0.0
    lo_support = hi_support = 0
    log_tail_terms, nu_terms, eta, pert = [], [], 0.0, 0.0
    nu_low, nu_reach = 0.0, (1.0 / lam if lam > 0 else math.inf)
    for (f, k), (lm, losses, _) in zip(items, logs):
        t = lm + lam * losses
        c = _lse(t)
        if not math.isfinite(c):
            raise InvalidArgumentError("a factor has no finite mass to compose.")
        tilted_f = np.exp(t - c)
        tilted.append(tilted_f)
        cs.append(c)
        mu = _dot(tilted_f, losses)
        means += k * mu
        var += k * _dot(tilted_f, (losses - mu) ** 2)
        rel += k * (2.0 * abs(lam) * float(np.max(np.abs(losses))) + abs(c) + 8.0) * _U
        lo_support += k * f.offset
        hi_support += k * (f.offset + f.stride * (f.mass.size - 1))
        eta += k * f.eta
        pert += k * f.eta
        if f.nu is not None and np.any(f.nu > 0):
            # removing nu_j at l_j moves delta by <= nu_j P(S_rest > eps - l_j), and S_rest > x implies
            # S > x + l_min (up to the factor's total mass t): near the bottom, nu_j P(S > eps - reach) / t
            low = losses <= losses[0] + nu_reach
            total = float(np.sum(f.mass)) + f.infinity_mass
            nu_low += k * float(np.sum(f.nu[low])) / total * (1.0 + 1e-12)
            high = f.nu * ~low
            if np.any(high > 0):
                with np.errstate(divide="ignore"):
                    nu_t = float(special.logsumexp(np.log(high) + lam * losses)) - c
                nu_terms.append(math.log(k) + nu_t)
                pert += k * math.exp(min(nu_t, 700.0))
            pert += k * float(np.sum(f.nu[low])) / total
        if pess and f.log_tail is not None:
            lt = f.log_tail(lam) - c
            if lt > -math.inf:
                log_tail_terms.append(math.log(k) + lt)
                pert += k * math.exp(min(lt, 700.0))
    C = float(sum(k * c for (f, k), c in zip(items, cs)))
    sd = math.sqrt(var) if var > 0 else g
    # ---- the window (see Tilted.log_alias): its length W makes what wraps onto it negligible next to
    # delta = e^{log_delta}: e^{-lam W} <= delta e^{-M} (from below) and, for the best lambda' > lam,
    # e^{K(lam') - lam' (eps - 2 sd) - (lam' - lam) W} <= delta e^{-M} (from above), M = _MARGIN; it ends
    # M / lam above eps (the pessimistic law's mass above it is then negligible too).  K is the cumulant
    # of the factors as given (their upper tails cut off), which is what the FFT composes, so any lambda'
    # is valid: the best is usually several times lam, where the cut factors' tails are light
    eps0 = means if center is None or not math.isfinite(center) else float(center)
    target = (log_delta if log_delta is not None else C - lam * eps0 - 5.0) - _MARGIN
    w_below = -target / lam if lam > 0 else math.inf
    if chosen is not None:
        _, w_above, alias_lam, alias_K = chosen
    else:
        w_above, alias_lam, alias_K = _window_above(logs, lam, [lam + d * max(lam, 2.0 / sd) for d in _LAM_STEPS],
                                                    eps0 - 2.0 * sd, target)
    # the pessimistic law's mass above the window is added as min(e^{C - lam a_hi}, e^{K(lam') - lam' a_hi})
    # (Chernoff at the tilt and at lam'): below delta e^{-M} there
    a_hi = eps0 + 2.0 * sd + (0.0 if lam > 0 else 6.0 * sd)
    if lam > 0:
        a_hi = max(a_hi, min((C - target) / lam, (alias_K - target) / alias_lam if alias_lam > lam else math.inf))
    # from below (Tilted.log_alias): the bottom a low enough that e^{K(lam - theta) - lam e + theta a} is
    # below delta e^{-M} for the lowest eps of interest e = eps0 - 2 sd, the best of a few theta > 0; with a
    # small tilt (lam sd ~ 1: sigma = 1e4, or large delta) this is a few sd below the tilted mean where
    # e^{-lam W} <= delta e^{-M} alone asked for hundreds
    below_theta, below_K = 0.0, math.inf
    if lam > 0:
        e_low = min(eps0, means) - 2.0 * sd
        best_a = -math.inf
        ths = sorted({lam * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)} | {f / sd for f in (2.0, 4.0, 8.0, 16.0)})
        # chosen on the block summaries, then K(lam - theta) exact at the theta chosen (as for lambda' above)
        for th, Kb in zip(ths, _approx_K(summ, [lam - th for th in ths])):
            a = (target - Kb + lam * e_low) / th
            if a > best_a:
                best_a, below_theta = a, th
        if below_theta > 0:
            below_K = _K_at(logs, [lam - below_theta])[0]
            best_a = (target - below_K + lam * e_low) / below_theta
        w_below = min(w_below, a_hi - best_a)
    # long enough for the wrap-around bounds, and reaching 8 sd below the tilted law's mean and the answer
    # (with a large tilt, e^{C - lam a_hi} alone put the window's top so far up that its bottom missed
    # the answer: sigma = 1e4)
    W = max(w_below, w_above, 64 * g, a_hi - (min(means, eps0) - 8.0 * sd))
    if not math.isfinite(W):  # no tilt: nothing below the window may wrap, so it starts at the support's bottom
        W = a_hi - lo_support * g
    a_lo = a_hi - W
    lo_i, hi_i = math.floor(a_lo / g), math.ceil(a_hi / g)
    if hi_i > hi_support:  # keep the length: move the window down instead
        lo_i, hi_i = lo_i - (hi_i - hi_support), hi_support
    if lo_i < lo_support:  # keep the length: move the window up instead
        lo_i, hi_i = lo_support, min(hi_i + (lo_support - lo_i), hi_support)
    lo_i = max(min(lo_i, hi_support), lo_support)
    cut_lo, cut_hi = lo_i > lo_support, hi_i < hi_support
    width = hi_i - lo_i + 1
    if width > 2**27:
        raise ResourceLimitError(f"the tilted FFT window needs {width} points (grid {g:.3g}); use a coarser grid.")
    size = sp_fft.next_fast_len(width, real=True)
    log_n = math.log2(max(size, 2))
    # ---- factors sharing a count k composed once first (their k-th powers multiply: prod F_i^k = (prod F_i)^k),
    # by a product tree of small FFT convolutions, truncated (:func:`_group_products`); then one forward FFT per
    # distinct count (folded onto the circle), powers, product
    groups = _group_products(items, tilted, cs, lam, group=GROUPED if group is None else group)
    peak = g / (math.sqrt(2.0 * math.pi) * sd)
    a2s = [_l2_up(gp.vec) for gp in groups]
    if extended is None:
        # extended precision shrinks only the forward transforms' term: worth it where the error matters next to
        # the peak and that term is not dwarfed by the products' own (the bound is then at most 5/4 of what it
        # would be; mixed 10^6: 3e-13 next to 3e-9, and three long-double transforms of 1.5e6 points were 0.5 s)
        fwd = sum(gp.k * _FFT_C * log_n * _U * a2 for gp, a2 in zip(groups, a2s))
        tree = sum(gp.k * gp.err2 for gp in groups)
        extended = fwd + tree > 1e-6 * peak and fwd > 0.25 * tree
    u_fwd = _U_EXT if extended else _U
    spectrum = None
    fresh_in, rel_power = 0.0, 0.0
    for gp, a2 in zip(groups, a2s):
        k, tf = gp.k, gp.vec
        idx = (gp.offset + np.arange(tf.size)) % size
        folded = np.bincount(idx, weights=tf, minlength=size) if tf.size > size else np.roll(
            np.pad(tf, (0, size - tf.size)), gp.offset % size)
        fold_err = (tf.size / size + 1.0) * _U if tf.size > size else 0.0
        z = sp_fft.rfft(folded.astype(np.longdouble) if extended else folded).astype(np.complex128)
        powered = kth_power(z, k)
        spectrum = powered if spectrum is None else spectrum * powered
        # the product's own error (l2, ``err2``) is an error of the vector transformed: amplified by k as the
        # forward FFT's is (|z^k - z'^k| <= k |z - z'| for |z|, |z'| <= 1, and Parseval)
        fresh_in += k * ((_FFT_C * log_n * u_fwd + fold_err) * a2 + gp.err2)
        rel_power += math.pi * k + 6.0
        if gp.removed > 0:
            log_tail_terms.append(math.log(k) + math.log(gp.removed))
            pert += k * gp.removed
    assert spectrum is not None
    circ = sp_fft.irfft(spectrum, size)
    out = np.roll(circ, -(lo_i % size))[:width]
    r2 = _l2_up(out) * (1.0 + 1e-6)
    out = np.maximum(out, 0.0)
    err2 = fresh_in + (rel_power + len(groups) + _FFT_C * log_n) * _U * r2 + 4.0 * _U * size * 1e-300
    # untilting e^{-lam s}: relative (2 lam |s| + 8) u on each composed mass
    s_max = max(abs(lo_i), abs(hi_i)) * g
    rel += (2.0 * abs(lam) * s_max + 8.0) * _U
    rel = math.expm1(rel)
    Wl = size * g  # the circle's length
    if not cut_lo:
        log_below = -math.inf
    elif lam > 0:
        log_below = -lam * Wl - math.log(-math.expm1(-lam * Wl))
    else:
        log_below = 0.0  # a useless bound: nothing to gain below the untilted bulk
    if not cut_hi:
        alias_lam = lam
    log_tail = float(special.logsumexp(log_tail_terms)) if log_tail_terms else -math.inf
    log_nu = float(special.logsumexp(nu_terms)) if nu_terms else -math.inf
    # P(S = inf) = 1 - prod (1 - p_i)^{k_i}, rounded the safe way
    log_fin = sum(k * math.log1p(-min(f.infinity_mass, 1.0)) if f.infinity_mass < 1.0 else -math.inf
                  for f, k in items)
    inf_mass = -math.expm1(log_fin)
    inf_mass = inf_mass * (1.0 + 8.0 * _U) if pess else inf_mass * (1.0 - 8.0 * _U)
    max_loss = float(sum(k * f.max_loss for f, k in items))
    # suffix sums for the locating pass
    s = (lo_i + np.arange(width)) * g
    with np.errstate(divide="ignore"):
        la = np.log(out) - lam * s
    suf_a = _log_suffix(la)
    suf_b = _log_suffix(la - s)
    return Tilted(grid=g, lam=lam, start=lo_i, out=_readonly(out), C=C, err2=err2, rel=rel, width=Wl,
                  log_below=log_below, below_theta=below_theta, below_K=below_K, cut_hi=cut_hi,
                  alias_lam=alias_lam, alias_K=alias_K, nu_low=nu_low, nu_reach=nu_reach,
                  log_tail=log_tail, log_nu=log_nu, eta=eta, second=math.exp(min(2.0 * pert, 700.0)) * (1.0 + 1e-9),
                  infinity_mass=min(inf_mass, 1.0), pessimistic=pess, max_loss=max_loss,
                  log_suffix_a=_readonly(suf_a), log_suffix_b=_readonly(suf_b))


#: factors longer than this are summarised in blocks for steering (:class:`Cumulants`)
_STEER_POINTS = 4096
#: the widest block (in loss units) times the tilt: ln M is then off by at most about 0.02^2 / 24
_STEER_LAM_WIDTH = 0.02


def _steer_summary(f: Factor, width: int) -> tuple[Array, Array, Array]:
    """(ln mass, mean loss, variance within) of the factor's blocks of ``width`` points, each at its
    mass-weighted mean loss with its own variance (the untilted mean and variance are exact; at a tilt lambda,
    ln M is off by about (lambda * block width)^2 / 24, which :class:`Cumulants` keeps below 2e-5)."""
    m, losses = f.mass, f.losses
    with np.errstate(divide="ignore", invalid="ignore"):
        if width <= 1:
            return np.log(m), losses, np.zeros(m.size)
        starts = np.arange(0, m.size, width)
        bm = np.add.reduceat(m, starts)
        b1 = np.add.reduceat(m * losses, starts)
        b2 = np.add.reduceat(m * losses * losses, starts)
        keep = bm > 0
        bm, b1, b2 = bm[keep], b1[keep], b2[keep]
        mean = b1 / bm
        return np.log(bm), mean, np.maximum(b2 / bm - mean * mean, 0.0)


class Cumulants:
    """lambda -> (K, K', K''): sums over the factors of k ln M(lambda), k times the tilted mean and variance,
    with the factors' log masses computed once (steering only: the root finders below call it a few times).
    A factor longer than _STEER_POINTS is summarised in blocks of a power-of-two number of points, at most
    _STEER_LAM_WIDTH / lambda wide in loss (:func:`_steer_summary`; one summary per width, made when first
    needed): at small tilts hundreds of times fewer points, at large ones (delta = 1e-30) the points themselves."""

    def __init__(self, parts: Sequence[tuple[Factor, int]]) -> None:
        self._parts = [(f, int(k)) for f, k in parts]
        self._summaries: dict[tuple[int, int], tuple[Array, Array, Array]] = {}
        self._memo: dict[float, tuple[float, float, float]] = {}

    def _summary(self, i: int, lam: float) -> tuple[Array, Array, Array]:
        f = self._parts[i][0]
        n = f.mass.size
        width = 1
        if n > _STEER_POINTS:
            cap = n // (_STEER_POINTS // 2)
            if lam > 0:
                cap = min(cap, int(_STEER_LAM_WIDTH / (lam * f.grid * f.stride)))
            width = 1 << max(0, cap.bit_length() - 1) if cap >= 1 else 1
        key = (i, width)
        if key not in self._summaries:
            self._summaries[key] = _steer_summary(f, width)
        return self._summaries[key]

    def __call__(self, lam: float) -> tuple[float, float, float]:
        lam = float(lam)
        if lam in self._memo:
            return self._memo[lam]
        K = mean = var = 0.0
        for i, (_, k) in enumerate(self._parts):
            lm, losses, within = self._summary(i, lam)
            t = lm + lam * losses
            c = _lse(t)
            w = np.exp(t - c)
            mu = _dot(w, losses)
            K += k * c
            mean += k * mu
            var += k * _dot(w, (losses - mu) ** 2 + within)
        out = (K, mean, var)
        if len(self._memo) > 64:
            self._memo.clear()
        self._memo[lam] = out
        return out


def _exact_moments(parts: Sequence[tuple[Factor, int]], lam: float) -> tuple[float, float, float]:
    """(K, K', K'') at lam: sums over the factors of k ln M, k times the tilted mean and variance."""
    return Cumulants(parts)(lam)


def solve_increasing(f: Callable[[float], tuple[float, float]], target: float, x0: float, rtol: float = 1e-4,
                     saturate: bool = False) -> tuple[float, bool]:
    """(x, hit): the root x > 0 of the increasing f(x) = (value, slope) = target, by Newton steps from x0
    kept inside a bracket (a step leaving it is replaced by bisection in ln x, or by a factor of 8 while
    the bracket is open), between 1e-8 and 1e7.  ``hit`` is False where the root is outside that range (x is
    then the end reached) or, with ``saturate``, where f stops growing (an atom at the largest loss)."""
    lo, hi = 0.0, math.inf
    x = min(max(float(x0), 1e-8), 1e7)
    last_hi_val = None
    for _ in range(80):
        val, slope = f(x)
        if val < target:
            lo = max(lo, x)
        else:
            hi = min(hi, x)
        if val >= target and x <= 1e-8:
            return x, False
        if val < target and x >= 1e7:
            return x, False
        if val < target and hi == math.inf:
            if saturate and last_hi_val is not None and val - last_hi_val < 1e-9 * max(1.0, abs(val)):
                return x, False
            last_hi_val = val
        step = (target - val) / slope if slope > 0 else math.inf
        x_new = x + step
        if not (lo < x_new < hi) or not math.isfinite(x_new):
            if hi == math.inf:
                x_new = min(x * 8.0, 1e7)
            elif lo == 0.0:
                x_new = max(x / 8.0, 1e-8)
            else:
                x_new = math.sqrt(lo * hi)
        if abs(x_new - x) <= rtol * x or (lo > 0 and hi / lo < 1.0 + rtol):
            return x, True  # the last point evaluated (within rtol of the root)
        x = x_new
    return x, True


def saddle_lambda(parts: Sequence[tuple[Factor, int]], log_delta: float, block_loss: float = 0.0,
                  hint: float | None = None) -> tuple[float, float, float]:
    """(lambda, eps, sd): the tilt of the Chernoff bound for delta, lambda K'(lambda) - K(lambda)
    + ln(1 + lambda) = -ln delta (the exponent of delta <= e^{K - lambda eps} / (1 + lambda) at
    eps = K'(lambda); the left side increases with lambda, its slope is lambda K'' + 1 / (1 + lambda)), by
    safeguarded Newton steps (:func:`solve_increasing`) on the factors' exact tilted moments.  Robust where
    the tilted law is far from normal (atoms at the largest loss, heavy jumps); only steers the
    computation, never certifies."""
    cum = parts if isinstance(parts, Cumulants) else Cumulants(parts)

    def h(lam: float) -> tuple[float, float]:
        K, m, v = cum(lam)
        return lam * m - K + math.log1p(lam), lam * v + 1.0 / (1.0 + lam)

    lam, _ = solve_increasing(h, -log_delta, hint if hint else 1.0, saturate=True)
    _, m, v = cum(lam)
    return lam, m, math.sqrt(max(v, 0.0))
