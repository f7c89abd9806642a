"""Exact, vectorised divergences of two mass vectors on one support (no Python loop over points).

All functions take ``p, q`` (masses, aligned) and work from the log masses, so masses down to the
smallest double give finite answers.  Conventions of the seeds (Dwork & Roth §3.5.1): natural log,
a ratio with zero denominator and positive numerator is +inf, and points where p = 0 contribute
nothing to KL, max divergence or hockey-stick.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from dpkit._math import Estimate

Array = np.ndarray
_EXACT = "exact sum over the support"


class FiniteArrays:
    """Two aligned mass vectors and their log-ratio, computed once."""

    __slots__ = ("p", "q", "logp", "logq", "loss", "p_live", "q_live", "mass_inf")

    def __init__(self, p: Array, q: Array, logp: Array | None = None, logq: Array | None = None) -> None:
        """``p, q`` are the masses; pass ``logp, logq`` too when the masses may underflow."""
        self.p, self.q = p, q
        with np.errstate(divide="ignore"):
            lp = np.log(p) if logp is None else logp
            lq = np.log(q) if logq is None else logq
        live = lp > -np.inf
        finite_q = lq > -np.inf
        both = live & finite_q
        self.mass_inf = float(np.sum(p[live & ~finite_q]))
        self.logp, self.logq = lp[both], lq[both]
        self.p_live, self.q_live = p[both], q[both]  # points with p > 0 and q > 0
        self.loss = self.logp - self.logq  # privacy loss L = ln p/q on those points


def kl(f: FiniteArrays) -> Estimate:
    """KL(P||Q) = sum p ln(p/q) (Dwork & Roth Def 3.5)."""
    if f.mass_inf > 0:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    value = float(np.dot(f.p_live, f.loss))
    return Estimate(max(value, 0.0), kind="exact", method=_EXACT)


def renyi(f: FiniteArrays, alpha: float) -> Estimate:
    r"""Rényi divergence :math:`\frac{1}{\alpha-1}\ln\sum p^\alpha q^{1-\alpha}` (Rényi 1961; seed 004)."""
    if alpha == 1.0:
        return kl(f)
    if math.isinf(alpha):
        return max_divergence(f)
    s = alpha - 1.0
    if alpha > 1.0 and f.mass_inf > 0:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    if f.loss.size == 0:  # P and Q mutually singular, alpha < 1
        return Estimate(math.inf, kind="exact", method=_EXACT)
    value = None
    if abs(s) * float(np.max(np.abs(f.loss))) <= 50.0:
        # ln E_P[e^{sL}; q>0] = log1p(M), M = sum p expm1(sL) - P(q = 0): accurate when M is small
        # (alpha near 1, or P close to Q); when |M| is not small the log-sum-exp form is the accurate one
        m = float(np.dot(f.p_live, np.expm1(s * f.loss))) - f.mass_inf
        if abs(m) <= 0.5:
            value = math.log1p(m) / s
    if value is None:
        value = float(logsumexp(f.logp + s * f.loss)) / s
    return Estimate(max(value, 0.0), kind="exact", method=_EXACT)


def max_divergence(f: FiniteArrays) -> Estimate:
    """D_inf(P||Q) = max over the support of P of ln(p/q) (Dwork & Roth Def 3.6)."""
    if f.mass_inf > 0:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    return Estimate(max(float(np.max(f.loss)), 0.0), kind="exact", method=_EXACT)


def hockey_stick(f: FiniteArrays, epsilon: float) -> Estimate:
    r""":math:`E_{e^\varepsilon}(P\|Q) = \sum (p - e^\varepsilon q)_+`, summed as p(1 - e^{\varepsilon - L}) over L > epsilon."""
    over = f.loss > epsilon
    value = float(np.dot(f.p_live[over], -np.expm1(epsilon - f.loss[over]))) + f.mass_inf
    return Estimate(min(max(value, 0.0), 1.0), kind="exact", method=_EXACT)


def total_variation(f: FiniteArrays) -> Estimate:
    """Half the L1 distance, 1/2 sum |p - q| (seeds 001 and 003)."""
    value = 0.5 * float(np.sum(np.abs(f.p - f.q)))
    return Estimate(min(value, 1.0), kind="exact", method=_EXACT)


def statistical_distance(f: FiniteArrays) -> Estimate:
    """max_S |P(S) - Q(S)|, attained by S = {p > q} (Dwork & Roth §3.5.1)."""
    s = f.p > f.q
    value = float(np.sum(f.p[s] - f.q[s]))
    return Estimate(min(value, 1.0), kind="exact", method=_EXACT + " (witness set {p > q})")


def approx_max_divergence(f: FiniteArrays, delta: float) -> Estimate:
    r"""The delta-approximate max divergence (Dwork & Roth Def 3.6), ln of the smallest gamma with E_gamma <= delta.

    Newton's method on the convex, decreasing, piecewise-linear gamma -> E_gamma(P||Q): starting
    left of the root, each step lands on the root of the current linear piece, which never
    overshoots; it stops when the set {L > ln gamma} no longer changes.
    """
    if delta >= 1.0:
        return Estimate(-math.inf, kind="exact", method=_EXACT)
    if f.mass_inf > delta:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    if f.loss.size == 0:
        return Estimate(-math.inf if f.mass_inf <= delta else math.inf, kind="exact", method=_EXACT)
    if delta == 0.0:
        return Estimate(float(np.max(f.loss)), kind="exact", method=_EXACT)
    # Newton's method from the left on gamma -> E_gamma (convex, decreasing, piecewise linear) gives a
    # gamma at or below the root cheaply; rounding in P(S) - delta can stall it early, so it only
    # selects candidates: the optimal set S* = {L > eps*} lies inside {L > ln gamma_newton}.
    log_gamma = -math.inf
    mask = np.ones(f.loss.size, dtype=bool)
    for _ in range(200):
        p_s = float(np.sum(f.p_live[mask])) + f.mass_inf
        q_s = float(np.sum(f.q_live[mask]))
        if q_s <= 0 or p_s <= delta:
            break
        new_log_gamma = math.log(p_s - delta) - math.log(q_s)
        new_mask = f.loss > new_log_gamma
        if np.array_equal(new_mask, mask) or new_log_gamma <= log_gamma:
            log_gamma = max(new_log_gamma, log_gamma)
            break
        log_gamma, mask = new_log_gamma, new_mask
    # exact step (Def 3.6): D = max over level sets S_k (top-k losses) of ln((P(S_k) - delta) / Q(S_k)),
    # summed from the top so that small masses are not lost next to large ones
    cand = np.flatnonzero(f.loss >= log_gamma - 1e-9 * max(1.0, abs(log_gamma))) if math.isfinite(log_gamma) \
        else np.arange(f.loss.size)
    order = cand[np.argsort(-f.loss[cand], kind="stable")]
    cp = np.cumsum(f.p_live[order]) + f.mass_inf
    cq = np.cumsum(f.q_live[order])
    ok = cp > delta
    if not ok.any():
        return Estimate(-math.inf, kind="exact", method=_EXACT)
    vals = np.log(cp[ok] - delta) - np.log(cq[ok])
    best = float(np.max(vals))
    if f.mass_inf > delta:
        best = math.inf
    return Estimate(best, kind="exact", method=_EXACT + " (level sets, Def 3.6)")
