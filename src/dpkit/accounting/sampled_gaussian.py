r"""Rényi DP of the Poisson-subsampled Gaussian mechanism at integer and fractional orders (the RDP
accountant's curve).

With sampling rate q, noise sigma and l2 sensitivity 1 (scale sigma otherwise), the mechanism's
worst pair under add/remove is mu = (1 - q) N(0, s^2) + q N(1, s^2) against mu0 = N(0, s^2), and
at an integer order alpha >= 2 (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of the
Sampled Gaussian Mechanism", arXiv 1908.10530, sec. 3.3, the binomial expansion of A_alpha)

    D_alpha(mu || mu0) = ln A_alpha / (alpha - 1),
    A_alpha = sum_{k=0}^{alpha} C(alpha, k) (1 - q)^{alpha - k} q^k exp(k (k - 1) / (2 s^2)),

since E_{mu0}[(mu/mu0)^alpha] expands binomially and E_{mu0}[(N(1)/N(0))^k] = exp(k(k-1)/(2 s^2)).
The other order of the pair, D_alpha(mu0 || mu), is never larger (MTZ 2019, sec. 3.3, the
inequality A_alpha >= B_alpha); ``tests/accounting/test_sampled_gaussian.py`` checks both against
50-digit quadrature.  At q = 1 the formula is the Gaussian's alpha / (2 s^2).

Fractional orders (MTZ 2019, sec. 3.3, "numerically stable computation for fractional alpha"): split
the integral at z0 = s^2 ln(1/q - 1) + 1/2, where q mu1 = (1 - q) mu0, and expand
((1 - q) mu0 + q mu1)^alpha binomially in the smaller term on each side; with
mu0^{1-j} mu1^j = e^{(j^2 - j)/(2 s^2)} N(j, s^2) this gives

    A_alpha = sum_{k>=0} C(alpha, k) [ (1-q)^{alpha-k} q^k e^{(k^2-k)/(2 s^2)} Phi((z0 - k)/s)
                                     + q^{alpha-k} (1-q)^k e^{((alpha-k)^2-(alpha-k))/(2 s^2)}
                                       Phi((alpha - k - z0)/s) ],

an alternating series for k > alpha whose terms fall off like Phi of a growing negative argument.
The positive and negative terms are summed apart in log space; the series is cut where the next
terms are below 1e-40 of the sum, and the cut is bounded by twice the last term (the terms then decrease
in magnitude and alternate); the difference is widened by 1e-13 relative for the lgamma/log_ndtr
roundings.  ``tests/accounting/test_sampled_gaussian.py`` checks it against 50-digit quadrature.

The sum is taken in log space (log-binomials from lgamma, then logsumexp), and every epsilon is
raised by a relative 1e-12 (plus 1e-300) so that the float rounding of about alpha ulps cannot make it
understate: each value is an upper bound, as a RenyiDP curve states.  Hand-written because the peers
that have it (dp_accounting's ``rdp_privacy_accountant``, Opacus) tie it to their own accountant
objects; the formula is a dozen lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy.special import gammaln, logsumexp

from dpkit._math import check_positive
from dpkit.guarantees import RenyiDP
from dpkit.errors import InvalidArgumentError

__all__ = ["DEFAULT_ORDERS", "FRACTIONAL_ORDERS", "sampled_gaussian_rdp"]

#: integer orders 2..256: dense where the optimum usually is, enough for small sampling rates
DEFAULT_ORDERS: tuple[int, ...] = tuple(range(2, 65)) + tuple(range(72, 257, 8))
#: orders 1.05..10.95 by 0.05, 11..63 by 0.5, 64..256 by 4: fractional orders near the optimum, which the
#: RDP accountants of Opacus and TF Privacy also search (their grids are coarser)
FRACTIONAL_ORDERS: tuple[float, ...] = tuple(
    [round(1.0 + 0.05 * i, 2) for i in range(1, 200)] + [11.0 + 0.5 * i for i in range(106)]
    + [float(x) for x in range(64, 257, 4)])


def _log_a(q: float, sigma: float, alpha: int) -> float:
    k = np.arange(alpha + 1, dtype=np.float64)
    log_binom = gammaln(alpha + 1.0) - gammaln(k + 1.0) - gammaln(alpha - k + 1.0)
    log_q = math.log(q)
    log_1mq = math.log1p(-q) if q < 1.0 else -math.inf
    with np.errstate(invalid="ignore"):
        terms = log_binom + k * log_q + (alpha - k) * log_1mq + k * (k - 1.0) / (2.0 * sigma * sigma)
    terms = np.where(np.isnan(terms), -np.inf, terms)  # 0 * -inf at q = 1, k = alpha: the term is 1
    if q == 1.0:
        terms[-1] = alpha * (alpha - 1.0) / (2.0 * sigma * sigma)
    return float(logsumexp(terms))


def _log_a_frac(q: float, sigma: float, alpha: float) -> float:
    """ln A_alpha for any real alpha > 1 (the series of the module docstring), rounded up."""
    from scipy.special import gammasgn, log_ndtr

    s2 = sigma * sigma
    z0 = s2 * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    lg_a1 = float(gammaln(alpha + 1.0))
    sgn_a1 = float(gammasgn(alpha + 1.0))
    n = int(max(4 * alpha, alpha + 64)) + 64
    for _ in range(8):
        k = np.arange(n, dtype=np.float64)
        j = alpha - k
        log_binom = lg_a1 - gammaln(k + 1.0) - gammaln(j + 1.0)
        sign = sgn_a1 * gammasgn(j + 1.0)
        t1 = log_binom + j * log_1mq + k * log_q + (k * k - k) / (2.0 * s2) + log_ndtr((z0 - k) / sigma)
        t2 = log_binom + j * log_q + k * log_1mq + (j * j - j) / (2.0 * s2) + log_ndtr((j - z0) / sigma)
        terms = np.logaddexp(t1, t2)
        total = float(logsumexp(terms[sign > 0])) if np.any(sign > 0) else -math.inf
        if terms[-8:].max() < total - 92.0:  # e^-92 ~ 1e-40
            break
        n *= 2
    pos = terms[sign > 0]
    neg = terms[sign < 0]
    lp = float(logsumexp(pos))
    ln = float(logsumexp(neg)) if neg.size else -math.inf
    cut = math.log(2.0) + float(terms[-1])  # bound on the omitted tail
    ln_hi = float(np.logaddexp(lp, cut)) + 1e-13
    if ln > -math.inf:
        r = math.exp(ln - ln_hi) * (1.0 - 1e-13)
        return ln_hi + math.log1p(-min(r, 1.0 - 1e-16))
    return ln_hi


def sampled_gaussian_rdp(*, sigma: float, sampling_rate: float, orders: Iterable[float] = DEFAULT_ORDERS,
                         sensitivity: float = 1.0) -> RenyiDP:
    r"""The RDP curve of one Poisson-subsampled Gaussian step, at integer and fractional orders (add/remove).

    Parameters
    ----------
    sigma : float, > 0
        Standard deviation of the Gaussian noise.
    sampling_rate : float in (0, 1]
        Probability q that each record is in the batch.
    orders : iterable of float > 1
        Orders alpha: integers by the finite binomial sum, others by MTZ's series (module docstring).
    sensitivity : float, > 0
        l2 sensitivity of the summed query (the formula uses sigma / sensitivity).

    Returns
    -------
    RenyiDP
        epsilon(alpha) at the given orders, each an upper bound (see the module docstring).

    Raises
    ------
    InvalidArgumentError
        sigma or sensitivity not finite and > 0, sampling_rate outside (0, 1], an order that is
        not finite and > 1.

    References
    ----------
    Mironov, Talwar, Zhang 2019, arXiv 1908.10530, sec. 3.3 (integer and fractional orders); Mironov 2017,
    arXiv 1702.07476, Prop 7 (the Gaussian at q = 1).

    Examples
    --------
    >>> g = sampled_gaussian_rdp(sigma=1.0, sampling_rate=1.0, orders=[2, 3])
    >>> [round(float(g.epsilon(a)), 10) for a in (2, 3)]
    [1.0, 1.5]
    """
    s = check_positive("sigma", sigma) / check_positive("sensitivity", sensitivity)
    q = float(sampling_rate)
    if not 0.0 < q <= 1.0:
        raise InvalidArgumentError(f"sampling_rate must be in (0, 1]; got {sampling_rate!r}.")
    alphas: list[float] = []
    for a in orders:
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)) or not (
                math.isfinite(float(a)) and a > 1):
            raise InvalidArgumentError(f"orders must be finite numbers > 1; got {a!r}.")
        alphas.append(float(a))
    if not alphas:
        raise InvalidArgumentError("give at least one order.")
    eps = []
    for a in alphas:
        if a.is_integer() and a >= 2:
            value = _log_a(q, s, int(a)) / (a - 1.0)
        elif q == 1.0:
            value = a / (2.0 * s * s)
        else:
            value = _log_a_frac(q, s, a) / (a - 1.0)
        eps.append(max(0.0, value) * (1.0 + 1e-12) + 1e-300)
    return RenyiDP(orders=alphas, epsilons=eps)
