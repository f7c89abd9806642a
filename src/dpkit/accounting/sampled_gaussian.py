r"""Rényi DP of the Poisson-subsampled Gaussian mechanism at integer orders (the RDP accountant's curve).

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

__all__ = ["DEFAULT_ORDERS", "sampled_gaussian_rdp"]

#: integer orders 2..256: dense where the optimum usually is, enough for small sampling rates
DEFAULT_ORDERS: tuple[int, ...] = tuple(range(2, 65)) + tuple(range(72, 257, 8))


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


def sampled_gaussian_rdp(*, sigma: float, sampling_rate: float, orders: Iterable[int] = DEFAULT_ORDERS,
                         sensitivity: float = 1.0) -> RenyiDP:
    r"""The RDP curve of one Poisson-subsampled Gaussian step, at integer orders (add/remove).

    Parameters
    ----------
    sigma : float, > 0
        Standard deviation of the Gaussian noise.
    sampling_rate : float in (0, 1]
        Probability q that each record is in the batch.
    orders : iterable of int >= 2
        Integer orders alpha (the closed form is for integers; compose and convert over them).
    sensitivity : float, > 0
        l2 sensitivity of the summed query (the formula uses sigma / sensitivity).

    Returns
    -------
    RenyiDP
        epsilon(alpha) at the given orders, each an upper bound (see the module docstring).

    Raises
    ------
    ValueError
        sigma or sensitivity not finite and > 0, sampling_rate outside (0, 1], an order that is
        not an integer >= 2.

    References
    ----------
    Mironov, Talwar, Zhang 2019, arXiv 1908.10530, sec. 3.3; Mironov 2017, arXiv 1702.07476, Prop 7
    (the Gaussian at q = 1).

    Examples
    --------
    >>> g = sampled_gaussian_rdp(sigma=1.0, sampling_rate=1.0, orders=[2, 3])
    >>> [round(float(g.epsilon(a)), 10) for a in (2, 3)]
    [1.0, 1.5]
    """
    s = check_positive("sigma", sigma) / check_positive("sensitivity", sensitivity)
    q = float(sampling_rate)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1]; got {sampling_rate!r}.")
    alphas = []
    for a in orders:
        if isinstance(a, bool) or not float(a).is_integer() or a < 2:
            raise ValueError(f"orders must be integers >= 2 (the closed form is for integer orders); got {a!r}.")
        alphas.append(int(a))
    if not alphas:
        raise ValueError("give at least one order.")
    eps = []
    for a in alphas:
        value = _log_a(q, s, a) / (a - 1.0)
        eps.append(max(0.0, value) * (1.0 + 1e-12) + 1e-300)
    return RenyiDP(orders=alphas, epsilons=eps)
