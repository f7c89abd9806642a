"""Exact, vectorised divergences of two mass vectors on one support (no Python loop over points).

All functions take ``p, q`` (masses, aligned) and work from the log masses, so masses down to the
smallest double give finite answers.  Conventions of the seeds (Dwork & Roth §3.5.1): natural log,
a ratio with zero denominator and positive numerator is +inf, and points where p = 0 contribute
nothing to KL, max divergence or hockey-stick.

Rounding (issue 11): the logarithms and the float sums round, so each value is moved up by a bound on
its rounding error and labelled ``"upper"`` (``error`` = that bound); where nothing rounded (equal
masses, total variation as an exact sum of the float masses) it is ``"exact"``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from dpkit._math import Estimate
from dpkit._math.result import Kind
from dpkit._math.directed import sum_up
from dpkit._math.precise import mp, to_float_up

Array = np.ndarray
_EXACT = "exact sum over the support"
_U = 2.0**-53


class FiniteArrays:
    """Two aligned mass vectors and their log-ratio, computed once.

    ``loss_error`` bounds the absolute error of each float loss. Where the masses are given alone and
    p/q is a normal float, the loss is ``ln(p/q)`` (error 2u for the quotient plus 8u|L| for the
    logarithm, so losses near 0 stay accurate); otherwise it is ``logp - logq`` with error
    8u(|ln p| + |ln q| + 1). It is exactly 0 where p and q are the same float (then the loss is 0).
    """

    __slots__ = ("p", "q", "logp", "logq", "loss", "p_live", "q_live", "mass_inf", "loss_error", "given_logs")

    def __init__(self, p: Array, q: Array, logp: Array | None = None, logq: Array | None = None) -> None:
        """``p, q`` are the masses; pass ``logp, logq`` too when the masses may underflow."""
        self.p, self.q = p, q
        self.given_logs = logp is not None or logq is not None
        with np.errstate(divide="ignore"):
            lp = np.log(p) if logp is None else logp
            lq = np.log(q) if logq is None else logq
        live = lp > -np.inf
        finite_q = lq > -np.inf
        both = live & finite_q
        self.mass_inf = sum_up(p[live & ~finite_q].tolist())  # P-mass where Q has none, rounded up
        self.logp, self.logq = lp[both], lq[both]
        self.p_live, self.q_live = p[both], q[both]  # points with p > 0 and q > 0
        self.loss = self.logp - self.logq  # privacy loss L = ln p/q on those points
        error = 8.0 * _U * (np.abs(self.logp) + np.abs(self.logq) + 1.0)
        if logp is None and logq is None:
            with np.errstate(over="ignore", under="ignore", divide="ignore"):
                ratio = self.p_live / self.q_live
                normal = (ratio > 1e-300) & (ratio < 1e300) & (self.p_live > 1e-300) & (self.q_live > 1e-300)
                direct = np.log(np.where(normal, ratio, 1.0))
            self.loss = np.where(normal, direct, self.loss)
            error = np.where(normal, 2.0 * _U + 8.0 * _U * np.abs(direct), error)
        same = self.p_live == self.q_live
        self.loss = np.where(same, 0.0, self.loss)
        self.loss_error = np.where(same, 0.0, error)
        for a in (self.logp, self.logq, self.p_live, self.q_live, self.loss, self.loss_error):
            a.flags.writeable = False


def _sum_with_error(terms: Array) -> tuple[float, float]:
    """(sum, bound on its rounding error): math.fsum (correctly rounded) up to 2e6 terms, else
    numpy's pairwise sum with (136 + log2 n) u of the absolute sum."""
    n = terms.size
    if n == 0:
        return 0.0, 0.0
    if n <= 2_000_000:
        total = math.fsum(terms.tolist())
        return total, 0.5 * math.ulp(total)
    total = float(terms.sum())
    return total, (136.0 + math.log2(n)) * _U * float(np.abs(terms).sum())


def _upper(value: float, bound: float, method: str, *, floor: float = 0.0, cap: float = math.inf) -> Estimate:
    """``value + bound`` rounded up (``"exact"`` when nothing was rounded: bound 0, no clamping).

    ``floor`` and ``cap`` are the quantity's mathematical range (divergences of distributions are
    >= 0): a float sum outside it, possible for masses that miss 1 by a rounding, is clamped and
    then labelled ``"upper"``."""
    if bound == 0.0:
        clamped = min(max(value, floor), cap)
        return Estimate(clamped, kind="exact" if clamped == value else "upper", method=method)
    upper = math.nextafter((value + bound) * (1.0 + 2.0 * _U), math.inf)
    upper = min(max(upper, floor), cap)
    return Estimate(
        upper, kind="upper", error=max(upper - value, 0.0), method=method + " (rounded up by its error bound)"
    )


def _expm1mx(x: Array) -> Array:
    """e^x - 1 - x elementwise for |x| <= 1 without cancellation (Taylor series, 25 terms)."""
    term = x * x / 2.0
    total = np.zeros_like(x)
    for k in range(3, 28):
        total = total + term
        term = term * x / k
    return total


def _exact_difference(a: Array, b: Array) -> float:
    """sum(a) - sum(b) for float arrays, correctly rounded (math.fsum)."""
    return math.fsum(a.tolist() + (-b).tolist())


def kl(f: FiniteArrays) -> Estimate:
    r"""KL(P||Q) = sum p ln(p/q) (Dwork & Roth Def 3.5), moved up by its rounding-error bound.

    Summed without first-order cancellation as :math:`\sum_i [p_i L_i - p_i + q_i] + (\sum p - \sum q)`:
    each bracket is :math:`p\,(e^{-L} - 1 + L) \ge 0` (a series for |L| <= 1), and the last term is an
    exact sum of the float masses; so laws that nearly agree keep their tiny KL to a relative error
    of about 2u/|L| instead of an absolute one of u.
    """
    if f.mass_inf > 0:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    L = f.loss
    small = np.abs(L) <= 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.where(small, f.p_live * _expm1mx(-np.where(small, L, 0.0)), f.p_live * L + (f.q_live - f.p_live))
        # a loss error dL moves p (e^{-L} - 1 + L) by p |1 - e^{-L}| dL, and p L + (q - p) by p dL
        slope = np.where(small, np.abs(np.expm1(-np.where(small, L, 0.0))), 1.0)
    value_terms, sum_err = _sum_with_error(terms)
    correction = _exact_difference(f.p_live, f.q_live)
    value = value_terms + correction
    bound = float(np.dot(f.p_live * slope, f.loss_error)) * 1.01
    bound += 4.0 * _U * float(np.abs(terms).sum()) + 4.0 * _U * float(np.abs(f.q_live - f.p_live)[~small].sum())
    if bound > 0.0 or correction != 0.0:
        bound += sum_err + _U * abs(value) + 0.5 * math.ulp(correction)
    if float(np.max(f.loss_error, initial=0.0)) > 0.0:  # subnormal products round by a spacing each
        bound += 5e-324 * (f.loss.size + 2)
    return _upper(value, bound, _EXACT)


def renyi(f: FiniteArrays, alpha: float) -> Estimate:
    r"""Rényi divergence :math:`\frac{1}{\alpha-1}\ln\sum p^\alpha q^{1-\alpha}` (Rényi 1961; seed 004),
    moved up by its rounding-error bound (the loss errors enter as :math:`|s|\,\Delta L` in each exponent).

    The masses are taken to sum to 1 (``Finite`` allows a float shortfall of up to 1e-9): the shortfall
    c = 1 - sum p counts as mass at loss 0, so that D_alpha(P||P) = 0 exactly, i.e. the value is
    ln(sum p^a q^(1-a) + c)/(a - 1); where the sum is not at least twice |c| (laws nearly disjoint),
    c is left out."""
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
    err = 0.0
    spread = np.abs(s) * f.loss_error  # error of each exponent s L
    if float(np.max(s * f.loss)) <= 700.0:  # no term overflows: the log1p form, if M is small
        # ln E_P[e^{sL}; q>0] = log1p(M), M = sum p expm1(sL) - P(q = 0): accurate when M is small
        # (alpha near 1, or P close to Q); when |M| is not small the log-sum-exp form is the accurate one.
        # M is summed without first-order cancellation: sum p expm1(sL) = sum p psi(L) + s (sum p - sum q),
        # psi(L) = f(sL) + s f(-L) with f(x) = e^x - 1 - x (series) where |L|, |sL| <= 1, and
        # p expm1(sL) + s (q - p) elsewhere
        L = f.loss
        small = (np.abs(L) <= 1.0) & (np.abs(s * L) <= 1.0)
        Ls = np.where(small, L, 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.expm1(s * L)
            terms = np.where(small, f.p_live * (_expm1mx(s * Ls) + s * _expm1mx(-Ls)),
                             f.p_live * e + s * (f.q_live - f.p_live))
            slope = np.where(small, np.abs(e - np.expm1(-Ls)), np.abs(e) + 1.0) * abs(s)
        m_sum, sum_err = _sum_with_error(terms)
        correction = s * _exact_difference(f.p_live, f.q_live)
        m = m_sum + correction - f.mass_inf
        if abs(m) <= 0.5:
            # a loss error dL moves each term by p |s| |e^{sL} - e^{-L}| dL; products and series by a few u
            err_m = float(np.dot(f.p_live * slope, f.loss_error)) * 1.01
            err_m += 4.0 * _U * (float(np.abs(terms).sum()) + abs(correction)) + _U * f.mass_inf
            if err_m > 0.0 or correction != 0.0:
                err_m += sum_err + 4.0 * _U * float(np.abs(f.q_live - f.p_live)[~small].sum()) * abs(s)
            if err_m == 0.0 and float(np.max(spread)) > 0.0:
                err_m = 5e-324 * f.loss.size  # the bound underflowed: at least the subnormal spacing
            value = math.log1p(m) / s
            if err_m > 0.0:
                # plus the spacing of m itself, which may be subnormal
                err_m += 4.0 * _U * abs(m) + 5e-324
                err = (err_m / max(1.0 + m - err_m, 1e-300) + 2.0 * _U * abs(math.log1p(m))) / abs(s)
    if value is None:
        exponents = f.logp + s * f.loss
        lse = float(logsumexp(exponents))
        # the same convention as the log1p form: the float shortfall 1 - sum p counts as mass at loss 0
        shortfall = -math.fsum(f.p_live.tolist() + [f.mass_inf, -1.0])
        if shortfall != 0.0 and -700.0 < lse < 700.0 and abs(shortfall) <= 0.5 * math.exp(lse):
            lse = lse + math.log1p(shortfall * math.exp(-lse))
        value = lse / s
        if float(np.max(spread)) > 0.0:
            # each term e^{x_i} errs by its exponent's error (the loss's, times |s|, plus a few u of
            # |x_i|); the sum's relative error is their average weighted by each term's share
            with np.errstate(under="ignore"):
                share = np.exp(exponents - lse)
            err_ln = float(np.dot(share, spread + 8.0 * _U * (np.abs(exponents) + 1.0))) * 1.01
            err_ln += 8.0 * _U * (abs(lse) + math.log2(f.loss.size + 1) + 1.0)
            err = err_ln / abs(s)
    return _upper(value, err, _EXACT)


def max_divergence(f: FiniteArrays) -> Estimate:
    """D_inf(P||Q) = max over the support of P of ln(p/q) (Dwork & Roth Def 3.6), rounded up."""
    if f.mass_inf > 0:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    if f.loss.size == 0:
        return Estimate(0.0, kind="exact", method=_EXACT)
    top = float(np.max(f.loss))
    if top <= 0.0 and float(np.max(f.loss + f.loss_error)) <= 0.0:
        return Estimate(0.0, kind="exact", method=_EXACT)
    # every atom that may hold the maximum, its loss recomputed at 160 bits from the float masses
    # (or the given log masses) and rounded up: within two ulps of the exact maximum
    cand = np.flatnonzero(f.loss + f.loss_error >= top - float(np.max(f.loss_error)))
    ctx = mp()
    if f.given_logs:
        best = max(ctx.mpf(float(f.logp[i])) - ctx.mpf(float(f.logq[i])) for i in cand[:64])
    else:
        best = max(ctx.log(ctx.mpf(float(f.p_live[i])) / ctx.mpf(float(f.q_live[i]))) for i in cand[:64])
    if cand.size > 64:  # more near-ties than worth recomputing: the float bound
        return _upper(max(top, 0.0), float(np.max(f.loss_error)), _EXACT)
    return Estimate(max(to_float_up(best), 0.0), kind="exact", method=_EXACT + " (maximum at 160 bits)")


def hockey_stick(f: FiniteArrays, epsilon: float) -> Estimate:
    r""":math:`E_{e^\varepsilon}(P\|Q) = \sum (p - e^\varepsilon q)_+`, summed as p(1 - e^{\varepsilon - L})
    over L > epsilon.

    Rounded up by its error bound. Atoms whose loss lies within 2^40 times its error bound of epsilon
    (where the float term would be inaccurate, or on the wrong side) are summed exactly at 160 bits
    as :math:`\max(0, p - e^\varepsilon q)` from the float masses (or the given log masses); for the
    others a loss error :math:`\Delta L` moves the term by at most
    :math:`p\,|\Delta L|\,e^{\varepsilon - L} \le 2^{-40}` of itself, and the products and
    ``expm1`` by a few ulps.
    """
    slack = f.loss_error + 2.0 * _U * abs(epsilon)
    gap = f.loss - epsilon
    band = np.abs(gap) <= 2.0**40 * slack
    if np.count_nonzero(band) > 4096:  # too many to sum at 160 bits: the float bound for all
        band = np.abs(gap) <= slack
        exact_band = False
    else:
        exact_band = True
    over = (gap > 0) & ~band
    with np.errstate(under="ignore"):
        h = -np.expm1(np.minimum(-gap, 0.0))
        terms = np.where(over, f.p_live * h, 0.0)
        edge = f.p_live * slack * np.exp(np.minimum(-gap, 0.0)) * 1.01
    value, sum_err = _sum_with_error(terms)
    bound = float(np.where(over, edge, 0.0).sum()) + 4.0 * _U * float(terms.sum())
    if bound > 0.0 or np.count_nonzero(over) > 1:
        bound += sum_err + _U * value
    band_up = 0.0
    if np.any(band):
        idx = np.flatnonzero(band)
        if exact_band:
            ctx = mp()
            g = ctx.exp(ctx.mpf(epsilon))
            if f.given_logs:
                parts = (ctx.exp(ctx.mpf(float(f.logp[i]))) - g * ctx.exp(ctx.mpf(float(f.logq[i]))) for i in idx)
            else:
                parts = (ctx.mpf(float(f.p_live[i])) - g * ctx.mpf(float(f.q_live[i])) for i in idx)
            band_up = to_float_up(ctx.fsum(x for x in parts if x > 0))
        else:
            band_up = float(np.sum(np.where(gap[idx] > 0, terms[idx], 0.0) + edge[idx])) * (1.0 + 64.0 * _U)
    if bound == 0.0 and band_up == 0.0:
        return Estimate(min(value + f.mass_inf, 1.0), kind="exact", method=_EXACT)
    total = sum_up([value, bound, band_up, f.mass_inf])
    upper = min(math.nextafter(total, math.inf) if bound > 0.0 else total, 1.0)
    kind: Kind = "upper" if bound > 0.0 or not exact_band else "exact"
    return Estimate(
        upper, kind=kind, error=bound, method=_EXACT + (" (rounded up by its error bound)" if kind == "upper" else "")
    )


def total_variation(f: FiniteArrays) -> Estimate:
    """Half the L1 distance, 1/2 sum |p - q| (seeds 001 and 003): the exact sum of the float masses
    over {p > q} (which equals half the L1 sum for masses summing to the same total), rounded up."""
    return statistical_distance(f, _EXACT)


def statistical_distance(f: FiniteArrays, method: str = _EXACT + " (witness set {p > q})") -> Estimate:
    """max_S |P(S) - Q(S)|, attained by S = {p > q} (Dwork & Roth §3.5.1): the exact sum of the float
    masses p - q over S (``math.fsum`` plus the sign of its residual), rounded up."""
    s = f.p > f.q
    value = sum_up(np.concatenate([f.p[s], -f.q[s]]).tolist())
    return Estimate(min(max(value, 0.0), 1.0), kind="exact", method=method)


def approx_max_divergence(f: FiniteArrays, delta: float) -> Estimate:
    r"""The delta-approximate max divergence (Dwork & Roth Def 3.6), ln of the smallest gamma with E_gamma <= delta.

    Newton's method on the convex, decreasing, piecewise-linear gamma -> E_gamma(P||Q): starting
    left of the root, each step lands on the root of the current linear piece, which never
    overshoots; it stops when the set {L > ln gamma} no longer changes. The float value found is
    labelled ``"upper"``: the public function moves it up until the rounded-up hockey-stick
    divergence meets ``delta``.
    """
    if delta >= 1.0:
        return Estimate(-math.inf, kind="exact", method=_EXACT)
    if f.mass_inf > delta:
        return Estimate(math.inf, kind="exact", method=_EXACT)
    if f.loss.size == 0:
        return Estimate(-math.inf if f.mass_inf <= delta else math.inf, kind="exact", method=_EXACT)
    if delta == 0.0:
        return max_divergence(f)
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
    return Estimate(best, kind="upper", method=_EXACT + " (level sets, Def 3.6)")
