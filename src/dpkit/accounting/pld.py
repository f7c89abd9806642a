r"""Privacy loss distributions (PLDs): discretised, composed by FFT, read as intervals.

The privacy loss of a pair (P, Q) is L = ln p(X)/q(X) with X ~ P, plus an atom at +inf of mass
P(q = 0) (Sommer, Meiser, Mohammadi 2019, arXiv 1906.03049; Koskela, Jälkö, Honkela 2020,
arXiv 2006.07134).  Its hockey-stick divergence is
:math:`\delta(\varepsilon) = \mathbb E[(1 - e^{\varepsilon - L})_+] + P(L = \infty)`, and composing
independent mechanisms adds their losses, so the PLD of a composition is the convolution of theirs.

Contract
--------
* A :class:`PLD` lives on the grid ``l_i = (offset + i) * grid``.  A *pessimistic* PLD's delta is an
  upper bound on the true delta of the pair **and of every composition of such pairs**; an
  *optimistic* PLD's delta is a lower bound, again for every composition.  Both discretisations are
  second order in the grid (:mod:`dpkit.accounting._pld_discretize` states them and proves the
  composition property): pessimistic by connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar,
  Manurangsi 2022, arXiv 2207.04380), optimistic by supporting lines of the hockey-stick curve.
  Truncated tails go the safe way: upper tail to +inf and lower tail up to the first kept point
  (pessimistic); dropped (optimistic).
* Rounding is carried in two parts.  ``delta_error`` bounds, uniformly in eps, how far the
  discretisation's rounding moves delta (see :mod:`dpkit.accounting._pld_discretize`); since
  delta_{A*B}(eps) = E_B[delta_A(eps - L_B)] (plus B's mass at +inf times A's total mass), such an error
  composes additively: eta_{A*B} <= eta_A ||B||_1 + eta_B ||A||_1 + eta_A eta_B.  The FFTs' rounding is
  a mass-vector error: ``numerical_error`` bounds its l2 norm and ``numerical_error_l1`` its l1 norm
  (the normwise bound for floating-point FFTs, Higham, *Accuracy and Stability of Numerical
  Algorithms*, 2nd ed., §24.1, carried through later convolutions by Young's inequality).
  ``delta`` adds (pessimistic) or subtracts (optimistic) ``delta_error`` plus the smaller of
  ||w||_2 ``numerical_error`` and ``numerical_error_l1``, w being the hockey-stick weights, so no
  answer hides it; ``epsilon`` inverts that bound.
* k-fold and heterogeneous compositions (:func:`compose_many`) multiply the Fourier transforms once,
  in a window that a Chernoff bound on the discretised laws shows to hold all but ``tail`` of the
  mass on each side; the mass outside it is accounted for the safe way, as above (for an optimistic
  PLD the wrapped-around mass is added to the numerical error).
* Everything is vectorised NumPy/SciPy (real FFTs from ``scipy.fft`` in doubles); memory is
  O(grid points of the result).

Hand-written because no well-kept library exposes pessimistic *and* second-order optimistic PLD
discretisation with a stated numerical error for arbitrary pairs (dp_accounting's PLD is tied to
its own mechanism classes and rounds its optimistic PLD down).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from scipy import special
from scipy import fft as sp_fft

from dpkit._math import Estimate, check_count, check_delta, check_finite, check_positive
from dpkit._math.bisection import bisect_monotone
from dpkit.accounting._pld_discretize import LossLaw, discretize, discretize_law, gaussian_law, laplace_law
from dpkit.distributions import Distribution
from dpkit.divergences.pairs import DiscreteGaussianShift, DiscreteLaplaceShift, GaussianShift, LaplaceShift
from dpkit.divergences import evaluator
from dpkit.divergences.pairs import FinitePair
from dpkit.errors import DpkitError, InvalidArgumentError, UnsupportedError

if TYPE_CHECKING:
    from dpkit.accounting._tilted_laws import LawSpec

# pld_poisson_subsampled and subsampled_epsilon_interval live in dpkit.accounting.subsampling (re-exported by
# dpkit.accounting); listing them here made ``from dpkit.accounting.pld import *`` raise AttributeError.
__all__ = ["PLD", "Interval", "aligned_grid", "compose_many", "default_grid", "delta_interval", "epsilon_interval",
           "pld_from_pair"]

_U = 2.0**-53
#: unit roundoff of numpy.longdouble (2^-64 on x86-64; equal to _U where longdouble is double)
_U_EXT = float(np.finfo(np.longdouble).eps) / 2.0
#: generous constant of the normwise FFT error bound c log2(n) u (Higham 2002, Thm 24.2 gives about 5)
_FFT_C = 10.0


def _norm2(x: NDArray[np.float64]) -> float:
    """Euclidean norm without BLAS (whose threads contend with FFTs on a small machine)."""
    return math.sqrt(float(np.einsum("i,i->", x, x)))


def check_k(k: object) -> int:
    """``k``, the number of compositions, as a checked count (shared with :mod:`~dpkit.accounting.subsampling`)."""
    return check_count("k", k)


@dataclass(frozen=True, slots=True)
class Interval:
    """A closed interval [lower, upper] that contains an exact value; decisions use ``upper``."""

    lower: float
    upper: float

    def __post_init__(self) -> None:
        if not (self.lower <= self.upper):
            raise InvalidArgumentError(f"interval needs lower <= upper; got [{self.lower}, {self.upper}].")

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def __contains__(self, x: float) -> bool:
        return self.lower <= x <= self.upper

    def __str__(self) -> str:
        return f"[{self.lower:.10g}, {self.upper:.10g}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class PLD:
    """A discretised privacy loss distribution (see the module docstring)."""

    grid: float
    offset: int
    mass: NDArray[np.float64]
    infinity_mass: float
    pessimistic: bool
    numerical_error: float = 0.0
    numerical_error_l1: float = math.inf
    tail: float = 1e-15
    delta_error: float = 0.0

    def __post_init__(self) -> None:
        # a frozen value: its masses cannot be changed in place either (a copy owned by the PLD)
        m = np.array(self.mass, dtype=np.float64, copy=True)
        m.flags.writeable = False
        object.__setattr__(self, "mass", m)

    # ---- reading --------------------------------------------------------------------------
    @property
    def losses(self) -> NDArray[np.float64]:
        return np.asarray((self.offset + np.arange(self.mass.size)) * self.grid, dtype=np.float64)

    def _raw_delta(self, eps: float) -> tuple[float, float]:
        """(sum_i w_i m_i + P(inf), error bound) with w_i = (1 - e^{eps - l_i})_+."""
        losses = self.losses
        over = losses > eps
        w = -np.expm1(eps - losses[over])
        raw = float(np.dot(self.mass[over], w)) + self.infinity_mass
        return raw, self.delta_error + min(_norm2(w) * self.numerical_error, self.numerical_error_l1)

    def delta(self, epsilon: float) -> Estimate:
        """delta(epsilon) of this PLD: an ``Estimate`` of kind "upper" if pessimistic, "lower" if optimistic
        (``error`` is the rounding bound included in it).

        The rounding error of the masses is bounded in l2 (``numerical_error``); its effect on
        delta = sum_i w_i m_i, w_i = (1 - e^{eps - l_i})_+ in [0, 1], is at most ||w||_2 times it
        (and at most ``numerical_error_l1``); ``delta_error`` is added on top.  This is an additive
        bound: for deltas near 1e-15 and below use the tilted accountant
        (:func:`delta_interval`, :mod:`dpkit.accounting.dpsgd`), which has no such floor.
        """
        raw, err = self._raw_delta(check_finite("epsilon", epsilon))
        if self.pessimistic:
            return Estimate(min(1.0, raw + err), kind="upper", error=err, method="pessimistic PLD (connect the dots)")
        return Estimate(max(0.0, raw - err), kind="lower", error=err, method="optimistic PLD (supporting lines)")

    def _profile(self) -> tuple[Callable[[float], tuple[float, float]], float]:
        """delta as a function of eps >= 0 in O(log n) per call: (raw(eps), error bound(eps)).

        raw(eps) = S1_j - e^eps S2_j for the suffix {i >= j} of losses above eps (S2 kept in log
        space), and the error uses ||w||_2 <= sqrt(#{l_i > eps}) (w_i <= 1), which needs no
        cancellation-prone sum of squares."""
        losses = self.losses
        pos = losses > 0
        lp, mp = losses[pos], self.mass[pos]
        s1 = np.append(np.cumsum(mp[::-1])[::-1], 0.0) + self.infinity_mass
        with np.errstate(divide="ignore"):
            log_s2 = np.append(np.logaddexp.accumulate((np.log(mp) - lp)[::-1])[::-1], -np.inf)
        count = np.arange(lp.size, -1, -1, dtype=np.float64)
        err = self.delta_error + np.minimum(np.sqrt(count) * self.numerical_error, self.numerical_error_l1)

        def at(eps: float) -> tuple[float, float]:
            j = int(np.searchsorted(lp, eps, side="right"))  # first loss > eps
            raw = float(s1[j]) - (math.exp(eps + float(log_s2[j])) if log_s2[j] > -np.inf else 0.0)
            return max(raw, 0.0), float(err[j])

        top = float(lp[-1]) if lp.size else 0.0
        return at, top

    def epsilon(self, delta: float) -> Estimate:
        """Smallest epsilon >= 0 with delta(epsilon) <= delta: an ``Estimate`` of kind "upper" (an upper
        bound on the true one) if pessimistic, "lower" if optimistic (the numerical error term included
        either way).

        Bisection (to 1e-13 relative) on the piecewise form of :meth:`_profile`."""
        value = self._epsilon(delta)
        if self.pessimistic:
            return Estimate(value, kind="upper", method="pessimistic PLD (connect the dots)")
        return Estimate(value, kind="lower", method="optimistic PLD (supporting lines)")

    def _epsilon(self, delta: float) -> float:
        d = check_delta(delta, open_interval=True)
        at, top = self._profile()
        if self.pessimistic:
            # raw + err is non-increasing in eps
            def ok(e: float) -> bool:
                raw, err = at(e)
                return raw + err <= d

            if ok(0.0):
                return 0.0
            if not ok(top):
                return math.inf
            return self._bisect(ok, 0.0, top)
        # optimistic: the true delta is >= raw - err.  Let e_r be where raw alone crosses d and e_a < e_r
        # a point with raw(e_a) - err(e_a) > d: the true delta exceeds d below e_a (it is
        # non-increasing), and on [e_a, e_r] the error is at most err(e_a) (fewer losses lie above a
        # larger eps), so the first crossing of raw - err(e_a) is a lower bound on the true epsilon.
        if at(0.0)[0] <= d:
            return 0.0
        if self.infinity_mass > d:
            return math.inf
        e_r = self._bisect(lambda e: at(e)[0] <= d, 0.0, top)
        step = max(1e-12 * max(1.0, e_r), self.grid * 1e-6)
        while True:
            e_a = max(0.0, e_r - step)
            raw, err_a = at(e_a)
            if raw - err_a > d:
                break
            if e_a == 0.0:
                return 0.0
            step *= 2.0
        return self._bisect(lambda e: at(e)[0] - err_a <= d, e_a, e_r)

    @staticmethod
    def _bisect(ok: Callable[[float], bool], lo: float, hi: float) -> float:
        """The smallest point (to 1e-13 relative) of [lo, hi] where ``ok`` holds; ok(hi) is true."""
        return max(bisect_monotone(ok, lo, hi, side="upper", rtol=1e-13, atol=1e-13, max_iter=200), 0.0)

    # ---- composing ----------------------------------------------------------------------------
    def compose(self, other: PLD) -> PLD:
        """The PLD of the composition with ``other`` (one linear convolution), truncated to ``tail``."""
        _check_same(self, other)
        a, b = self.mass, other.mass
        n = a.size + b.size - 1
        if min(a.size, b.size) <= 64:
            conv = np.convolve(a, b)
            log_n = 1.0
        else:
            size = sp_fft.next_fast_len(n, real=True)
            conv = sp_fft.irfft(sp_fft.rfft(a, size) * sp_fft.rfft(b, size), size)[:n]
            log_n = math.log2(size)
        # l2 error of an FFT convolution: ||err||_2 <= c log2(n) u (||a||_2 ||b||_1 + ||a||_1 ||b||_2 + ||a*b||_2)
        # (Higham 2002, §24.1); earlier errors propagate by Young's inequality, ||e_a * b||_2 <= ||e_a||_2 ||b||_1
        a1, b1 = float(a.sum()), float(b.sum())
        fresh = _FFT_C * log_n * _U * (_norm2(a) * b1 + a1 * _norm2(b) + _norm2(conv))
        err = (self.numerical_error * b1 + other.numerical_error * a1
               + self.numerical_error * other.numerical_error + fresh)
        err1 = (self.numerical_error_l1 * b1 + other.numerical_error_l1 * a1
                + self.numerical_error_l1 * other.numerical_error_l1 + math.sqrt(n) * fresh)
        conv = np.maximum(conv, 0.0)  # the true masses are >= 0: clipping only shrinks the error
        inf = 1.0 - (1.0 - self.infinity_mass) * (1.0 - other.infinity_mass)
        ea, eb = self.delta_error, other.delta_error
        eta = ea * (b1 + other.infinity_mass) + eb * (a1 + self.infinity_mass) + ea * eb
        out = PLD(grid=self.grid, offset=self.offset + other.offset, mass=conv, infinity_mass=inf,
                  pessimistic=self.pessimistic, numerical_error=err, numerical_error_l1=err1,
                  tail=self.tail, delta_error=eta)
        return out._truncated()

    def self_compose(self, k: int) -> PLD:
        """The k-fold composition: one FFT, a k-th power and one inverse FFT (:func:`compose_many`)."""
        k = check_k(k)
        return self if k == 1 else compose_many([(self, k)])

    def _truncated(self) -> PLD:
        m = self.mass
        cum = np.cumsum(m)
        total = cum[-1] if m.size else 0.0
        lo = int(np.searchsorted(cum, self.tail, side="right"))  # drop a lower block of mass <= tail
        rev = np.cumsum(m[::-1])
        hi_drop = int(np.searchsorted(rev, self.tail, side="right"))
        hi = m.size - hi_drop
        if lo == 0 and hi == m.size or lo >= hi:
            return self
        kept = m[lo:hi].copy()
        low_mass = float(cum[lo - 1]) if lo > 0 else 0.0
        high_mass = float(total - cum[hi - 1])
        inf = self.infinity_mass
        if self.pessimistic:
            kept[0] += low_mass  # lower tail rounded up to the first kept loss
            inf = inf + high_mass  # upper tail sent to +inf
        return PLD(grid=self.grid, offset=self.offset + lo, mass=kept, infinity_mass=min(inf, 1.0),
                   pessimistic=self.pessimistic, numerical_error=self.numerical_error,
                   numerical_error_l1=self.numerical_error_l1, tail=self.tail, delta_error=self.delta_error)


def _check_same(a: PLD, b: PLD) -> None:
    if b.grid != a.grid or b.pessimistic != a.pessimistic:
        raise InvalidArgumentError("PLDs compose only on the same grid and with the same pessimism.")


def _log_mgf_bounds(pld: PLD, lambdas: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Upper bounds on ln sum_i m_i e^{+-lambda l_i} (the finite part), from at most 2048 blocks of
    the mass vector, each taken at its largest (for +lambda) or smallest (for -lambda) loss."""
    m = np.maximum(pld.mass, 0.0)
    n = m.size
    width = max(1, -(-n // 2048))
    starts = np.arange(0, n, width)
    block = np.add.reduceat(m, starts)
    lo_loss = (pld.offset + starts) * pld.grid
    hi_loss = (pld.offset + np.minimum(starts + width, n) - 1) * pld.grid
    keep = block > 0
    if not keep.any():
        return np.full(lambdas.size, -np.inf), np.full(lambdas.size, -np.inf)
    logb = np.log(block[keep])
    up = special.logsumexp(logb[None, :] + lambdas[:, None] * hi_loss[keep][None, :], axis=1)
    down = special.logsumexp(logb[None, :] - lambdas[:, None] * lo_loss[keep][None, :], axis=1)
    # the mass vector's own rounding: scale by (1 + l1 error / mass) -- log1p of a tiny ratio
    slack = math.log1p(min(pld.numerical_error_l1, 1.0) / float(block.sum()))
    return up + slack, down + slack


def compose_many(parts: Sequence[tuple[PLD, int]]) -> PLD:
    r"""The PLD of the composition of ``k_i`` copies of each PLD in ``parts`` (same grid, same pessimism).

    The Fourier transforms are multiplied once, :math:`\prod_i \hat a_i^{k_i}`, in a window
    [a_lo, a_hi] of the summed loss chosen by the Chernoff bound
    :math:`\mu^{*}(S \ge a) \le e^{-\lambda a} \prod_i M_i(\lambda)^{k_i}` (and its mirror image) on the
    discretised laws themselves, so that at most ``tail`` of the mass lies beyond each end.  That mass
    wraps around in the circular convolution; a pessimistic result adds ``tail`` to the mass at +inf
    and to the first point, an optimistic one adds ``2 tail`` to its numerical error.

    Numerical error (l2, Higham 2002, §24.1 and Young's inequality): each forward FFT is computed in
    ``numpy.longdouble`` (in doubles where k_i ||a_i||_2 < 10) and errs by at most
    c log2(N) u_fwd sqrt(N) ||a_i||_2 (u_fwd the unit roundoff used), which the power
    multiplies by at most k_i (|z| <= 1); rounding the transform to complex128 and the power in polar
    form add a relative error of at most (pi k_i + 6) u per coefficient; the inverse FFT (in doubles)
    adds c log2(N) u ||result||_2; errors already carried propagate as k_i e_i prod_j ||a_j||_1^{k_j}.

    Examples
    --------
    >>> from dpkit.distributions import Gaussian, Laplace
    >>> g = pld_from_pair(Gaussian(0, 1), Gaussian(1, 1), grid=1e-3)
    >>> lap = pld_from_pair(Laplace(0, 1), Laplace(1, 1), grid=1e-3)
    >>> 5.0 < compose_many([(g, 10), (lap, 3)]).epsilon(1e-5) < 40.0
    True
    """
    items = [(p, check_k(k)) for p, k in parts]
    if not items:
        raise InvalidArgumentError("compose_many needs at least one (PLD, count) pair.")
    first = items[0][0]
    for p, _ in items[1:]:
        _check_same(first, p)
    if len(items) == 1 and items[0][1] == 1:
        return first
    g, tail, pess = first.grid, first.tail, first.pessimistic
    # ---- the window: Chernoff bounds on the sum of the losses, in grid units
    sd2, mean = 0.0, 0.0
    lo_support = hi_support = 0
    for p, k in items:
        m = np.maximum(p.mass, 0.0)
        tot = float(m.sum())
        if tot > 0:
            losses = p.losses
            mu = float(np.dot(m, losses)) / tot
            sd2 += k * float(np.dot(m, (losses - mu) ** 2)) / tot
            mean += k * mu
        lo_support += k * p.offset
        hi_support += k * (p.offset + p.mass.size - 1)
    scale = math.sqrt(sd2) if sd2 > 0 else g
    lambdas = np.geomspace(1e-3, 1e3, 97) / scale
    up = np.zeros(lambdas.size)
    down = np.zeros(lambdas.size)
    for p, k in items:
        u_, d_ = _log_mgf_bounds(p, lambdas)
        up += k * u_
        down += k * d_
    log_tail = math.log(tail)
    with np.errstate(invalid="ignore"):
        a_hi = float(np.nanmin((up - log_tail) / lambdas))
        a_lo = float(np.nanmax((log_tail - down) / lambdas))
    lo_i = max(lo_support, math.floor(a_lo / g)) if math.isfinite(a_lo) else lo_support
    hi_i = min(hi_support, math.ceil(a_hi / g)) if math.isfinite(a_hi) else hi_support
    lo_i, hi_i = min(lo_i, hi_support), max(hi_i, lo_support)
    if hi_i < lo_i:
        lo_i, hi_i = lo_support, hi_support
    cut_lo, cut_hi = lo_i > lo_support, hi_i < hi_support  # is anything outside the window?
    width = hi_i - lo_i + 1
    size = sp_fft.next_fast_len(max(width, max(p.mass.size for p, _ in items)), real=True)
    log_n = math.log2(max(size, 2))
    # ---- product of powers in Fourier space
    spectrum: NDArray[np.complex128] | None = None
    k_total, fresh_in, prop2, prop1, eta, rel_power = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    log_norm = 0.0  # ln prod_j (||a_j||_1 + e1_j)^{k_j}
    norms = []
    for p, k in items:
        # total mass (with +inf) of the computed and of the exact law: bounds ||.||_1 of both
        a1 = float(np.abs(p.mass).sum()) + p.infinity_mass + min(p.numerical_error_l1, 1.0) + p.delta_error
        norms.append(a1)
        log_norm += k * math.log(a1) if a1 > 0 else -math.inf
    for (p, k), a1 in zip(items, norms):
        # the forward transform's error is what the k-th power amplifies: in extended precision unless
        # k ||a||_2 < 10, where the double-precision bound k c log2(N) u ||a||_2 stays below ~2e-13
        a2 = _norm2(p.mass)
        extended = k * a2 >= 10.0
        f = sp_fft.rfft(p.mass.astype(np.longdouble) if extended else p.mass, size).astype(np.complex128)
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            mod = np.abs(f)
            powered = np.exp(k * np.log(mod)) * np.exp(1j * (k * np.angle(f)))
        powered[mod == 0] = 0.0
        spectrum = powered if spectrum is None else spectrum * powered
        k_total += k
        fresh_in += k * _FFT_C * log_n * (_U_EXT if extended else _U) * a2
        rel_power += math.pi * k + 6.0  # rounding to complex128, then the power in polar form
        if a1 > 0:
            share = k * math.exp(log_norm - math.log(a1))
            prop2 += share * min(p.numerical_error, 1.0)
            prop1 += share * min(p.numerical_error_l1, 1.0)
            eta += share * p.delta_error
    assert spectrum is not None
    circ = sp_fft.irfft(spectrum, size)
    base = sum(k * p.offset for p, k in items)
    shift = (lo_i - base) % size
    out = np.roll(circ, -shift)[:width]
    r2 = _norm2(out) * (1.0 + 1e-6)
    fresh = fresh_in + (rel_power + len(items) + _FFT_C * log_n) * _U * r2 + _U
    err2 = prop2 + fresh
    err1 = prop1 + math.sqrt(size) * fresh
    out = np.maximum(out, 0.0)
    inf = -math.expm1(sum(k * math.log1p(-min(p.infinity_mass, 1.0)) if p.infinity_mass < 1.0 else -math.inf
                          for p, k in items))
    if pess:
        if cut_lo:
            out[0] += tail
        if cut_hi:
            inf = min(1.0, inf + tail)
    else:
        wrapped = tail * (cut_lo + cut_hi)
        err2 += wrapped
        err1 += wrapped
    return PLD(grid=g, offset=lo_i, mass=out, infinity_mass=inf, pessimistic=pess, numerical_error=err2,
               numerical_error_l1=err1, tail=tail, delta_error=eta)._truncated()


# ---- building PLDs from pairs ------------------------------------------------------------------
def _pld(offset: int, mass: NDArray[np.float64], inf: float, eta: float, grid: float, pessimistic: bool,
         tail: float) -> PLD:
    return PLD(grid=grid, offset=offset, mass=mass, infinity_mass=inf, pessimistic=pessimistic, tail=tail,
               numerical_error=0.0, numerical_error_l1=0.0, delta_error=eta)._truncated()


def from_law(law: LossLaw, grid: float, tail: float, which: tuple[bool, ...] = (True, False)) -> tuple[PLD, ...]:
    """PLDs of an exact loss law, pessimistic and/or optimistic as ``which`` asks, from one
    evaluation of its cell masses."""
    parts = discretize_law(law, grid, pessimistic=which)
    return tuple(_pld(*parts[w], grid, w, tail) for w in which)


def _from_atoms(losses: NDArray[np.float64], masses: NDArray[np.float64], infinity_mass: float,
                grid: float, pessimistic: bool, tail: float) -> PLD:
    """Discretise atoms (loss l with P-mass m): connect the dots (pessimistic) or supporting lines
    (optimistic), as in :mod:`dpkit.accounting._pld_discretize`."""
    losses = np.asarray(losses, dtype=np.float64)
    masses = np.asarray(masses, dtype=np.float64)
    if losses.size == 0:
        return PLD(grid=grid, offset=0, mass=np.zeros(1), infinity_mass=infinity_mass, pessimistic=pessimistic,
                   tail=tail, numerical_error=0.0, numerical_error_l1=0.0)
    i_lo = math.floor(float(losses.min()) / grid)
    i_hi = math.ceil(float(losses.max()) / grid) + 1
    # the atoms are exact up to one rounding each: only the split (a few roundings per atom) errs
    mass, inf, eta = discretize(i_lo, i_hi - i_lo + 1, grid, None, None, losses, masses, 0.0, 0.0, infinity_mass,
                                pessimistic=pessimistic, delta_error=8.0 * _U * float(masses.sum()))
    return _pld(i_lo, mass, inf, eta, grid, pessimistic, tail)


def _pair_plds(P: Distribution, Q: Distribution, grid: float, tail: float,
               which: tuple[bool, ...] = (True, False)) -> tuple[PLD, ...]:
    """PLDs of the pair (P, Q), pessimistic and/or optimistic as ``which`` asks; see :func:`pld_from_pair`."""
    ev = evaluator(P, Q)
    if isinstance(ev, LaplaceShift):
        return from_law(laplace_law(ev.t), grid, tail, which)
    if isinstance(ev, GaussianShift):
        if ev.mu == 0:
            return tuple(_from_atoms(np.zeros(1), np.ones(1), 0.0, grid, w, tail) for w in which)
        return from_law(gaussian_law(ev.mu, tail), grid, tail, which)
    if isinstance(ev, DiscreteLaplaceShift):
        arrays = ev.atoms()
        loss, mass, inf = arrays.loss, arrays.p_live, arrays.mass_inf
    elif isinstance(ev, DiscreteGaussianShift):
        reach = int(math.ceil(39.0 * ev.sigma)) + 2 + ev.d
        k = np.arange(-reach, reach + 1, dtype=np.float64)
        mass = np.exp(-(k * k) / (2.0 * ev.sigma**2) - ev.log_norm)
        loss, inf = (ev.d**2 - 2.0 * ev.d * k) / (2.0 * ev.sigma**2), 0.0
    elif isinstance(ev, FinitePair):
        loss, mass, inf = ev.arrays.loss, ev.arrays.p_live, ev.arrays.mass_inf
    else:
        raise UnsupportedError(
            f"no exact privacy-loss law for the pair ({type(P).__name__}, {type(Q).__name__}); "
            "use a same-family shift pair or finite laws."
        )
    return tuple(_from_atoms(loss, mass, inf, grid, w, tail) for w in which)


def check_grid_tail(grid: float, tail: float) -> tuple[float, float]:
    """The grid step and tail mass checked (both > 0, tail <= 1e-6); shared with the subsampled PLDs."""
    g = check_positive("grid", grid)
    t = check_positive("tail", tail)
    if t > 1e-6:
        raise InvalidArgumentError(f"tail must be <= 1e-6 so that truncation stays negligible; got {tail}.")
    return g, t


def pld_from_pair(P: Distribution, Q: Distribution, *, grid: float = 1e-4, pessimistic: bool = True,
                  tail: float = 1e-15) -> PLD:
    r"""The PLD of the pair (P, Q) (the loss ln p/q under P), pessimistic or optimistic.

    Exact loss laws: finite and integer-valued pairs (atoms), the Laplace shift (atoms at +-t of mass
    1/2 and e^{-t}/2, density e^{-(t-l)/2}/4 on (-t, t)), the Gaussian shift (L ~ N(mu^2/2, mu^2)).

    Parameters
    ----------
    P, Q : Distribution
    grid : float, > 0: the loss discretisation step
    pessimistic : bool: an upper bound on delta (connect the dots) or a lower bound (supporting lines)
    tail : float in (0, 1e-6]: mass truncated from each tail (accounted for as described above)

    Examples
    --------
    >>> from dpkit.distributions import Gaussian
    >>> hi = pld_from_pair(Gaussian(0, 1), Gaussian(1, 1)).delta(1.0)
    >>> 0.1269367 <= hi < 0.12695
    True
    """
    g, t = check_grid_tail(grid, tail)
    return _pair_plds(P, Q, g, t, (bool(pessimistic),))[0]


def default_grid(k: int, loss_scale: float = 1.0) -> float:
    """A loss grid for k compositions of a pair whose loss has scale ``loss_scale`` (sqrt(2 KL)).

    loss_scale * min(1e-2, 1e-4 sqrt(k)): both discretisations err at second order in grid/scale, so
    this keeps the k-fold epsilon within ~1e-5 relative while the composed array stays near
    16 sqrt(k) scale / grid points."""
    return float(loss_scale * min(1e-2, max(1e-4, 1e-4 * math.sqrt(k))))


def aligned_grid(grid: float, P: Distribution, Q: Distribution) -> float:
    """The largest grid <= ``grid`` on which the pair's loss atoms fall exactly (Laplace: +-t).

    Splitting a heavy atom between two grid points costs much more accuracy than a slightly finer
    grid: for k = 1000 Laplace compositions a grid of 3e-3 misses the reference by 2.6e-3 relative,
    t/369 = 2.71e-3 by 6e-7."""
    ev = evaluator(P, Q)
    if isinstance(ev, LaplaceShift) and ev.t > 0:
        return ev.t / math.ceil(ev.t / grid)
    if isinstance(ev, DiscreteLaplaceShift) and ev.t > 0:
        unit = 1.0 / ev.t  # losses are multiples of 1/t
        return unit / math.ceil(unit / grid)
    return grid


def loss_scale(P: Distribution, Q: Distribution) -> float:
    """The typical size of the pair's privacy loss, KL(P || Q) (1 where it has none), which sets the default grid."""
    from dpkit.divergences import kl

    try:
        v = float(kl(P, Q))
    # a pair without a KL path (UnsupportedError) or whose KL fails numerically
    # (overflow, NumericalAccuracyError, or numpy's RuntimeWarning where warnings are errors): a scale of 1
    except (DpkitError, ArithmeticError, ValueError, RuntimeWarning):  # pragma: no cover
        return 1.0
    return math.sqrt(2.0 * v) if 0.0 < v < math.inf else 1.0


def _directions(P: Distribution, Q: Distribution, k: int, grid: float | None, symmetric: bool
                ) -> list[tuple[PLD, PLD]]:
    """(pessimistic, optimistic) k-fold PLDs of (P, Q) and, unless ``symmetric``, of (Q, P)."""
    g = aligned_grid(default_grid(k, loss_scale(P, Q)), P, Q) if grid is None else check_positive("grid", grid)
    pairs = ((P, Q),) if symmetric else ((P, Q), (Q, P))
    out = []
    for a, b in pairs:
        hi, lo = _pair_plds(a, b, g, 1e-15)
        out.append((hi.self_compose(k), lo.self_compose(k)))
    return out


def _interval(lower: float, upper: float, what: str) -> Interval:
    """The interval [lower, upper]; an inconsistent bracket (lower > upper beyond rounding) is a bug to
    report, never to clamp silently."""
    if lower > upper:
        if lower - upper <= 1e-12 * max(1.0, abs(upper)):
            lower = upper  # both ends certified: they can cross only by the last rounding of a bisection
        else:
            raise ArithmeticError(
                f"inconsistent {what} bracket: lower {lower!r} > upper {upper!r}; please report this."
            )
    return Interval(lower, upper)


def _tilted_specs(P: Distribution, Q: Distribution, k: int, symmetric: bool
                  ) -> list[list[tuple[LawSpec, int]]] | None:
    """The tilted accountant's laws for a Laplace shift pair (both directions have the same law), or None."""
    from dpkit.accounting._tilted_laws import LawSpec

    ev = evaluator(P, Q)
    if isinstance(ev, LaplaceShift) and ev.t > 0:
        return [[(LawSpec("laplace", float(ev.t)), k)]]
    return None


def epsilon_interval(P: Distribution, Q: Distribution, *, k: int = 1, delta: float, grid: float | None = None,
                     symmetric: bool = False) -> Interval:
    """[lower, upper] containing epsilon(delta) of the k-fold composition of the pair (P, Q).

    Both directions (P||Q and Q||P) are composed unless ``symmetric``; the answer is the larger.  Gaussian
    shift pairs are answered in closed form (k-fold = one Gaussian with mu sqrt(k),
    :mod:`dpkit.accounting.gaussian_profile`), Laplace shift pairs by the tilted accountant
    (:mod:`dpkit.accounting._pld_tilted`: no delta floor, delta down to 1e-300); other pairs by the
    pessimistic (upper end) and optimistic (lower end) PLDs composed by FFT, both second order in the grid.

    >>> from dpkit.distributions import Gaussian
    >>> iv = epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), k=10, delta=1e-5, symmetric=True)
    >>> iv.lower <= 17.856586830107614 <= iv.upper  # mpmath at 40 digits: 17.85658683010761392...
    True
    """
    d = check_delta(delta, open_interval=True)
    k = check_k(k)
    if grid is None:
        ev = evaluator(P, Q)
        if isinstance(ev, GaussianShift) and ev.mu > 0:
            from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval

            return _interval(*gaussian_epsilon_interval(ev.mu * math.sqrt(k), d), "epsilon")
        specs = _tilted_specs(P, Q, k, symmetric)
        if specs is not None:
            from dpkit.accounting._tilted_solve import epsilon_bounds

            return _interval(*epsilon_bounds(specs, d, target_width=5e-6), "epsilon")
    plds = _directions(P, Q, k, grid, symmetric)
    upper = max(hi.epsilon(d) for hi, _ in plds)
    lower = max(lo.epsilon(d) for _, lo in plds)
    return _interval(float(lower), float(upper), "epsilon")


def delta_interval(P: Distribution, Q: Distribution, *, k: int = 1, epsilon: float, grid: float | None = None,
                   symmetric: bool = False) -> Interval:
    """[lower, upper] containing delta(epsilon) of the k-fold composition of the pair (P, Q) (Gaussian
    pairs in closed form, Laplace pairs by the tilted accountant, as :func:`epsilon_interval`)."""
    e = check_finite("epsilon", epsilon)
    k = check_k(k)
    if grid is None and e >= 0:
        ev = evaluator(P, Q)
        if isinstance(ev, GaussianShift) and ev.mu > 0:
            from dpkit.accounting.gaussian_profile import gaussian_delta_interval

            return _interval(*gaussian_delta_interval(ev.mu * math.sqrt(k), e), "delta")
        specs = _tilted_specs(P, Q, k, symmetric)
        if specs is not None:
            from dpkit.accounting._tilted_solve import delta_bounds

            return _interval(*delta_bounds(specs, e), "delta")
    plds = _directions(P, Q, k, grid, symmetric)
    upper = max(hi.delta(e) for hi, _ in plds)
    lower = max(lo.delta(e) for _, lo in plds)
    return _interval(float(lower), float(upper), "delta")
