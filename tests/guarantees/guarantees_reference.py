"""Independent mpmath references for the guarantees tests (mp.dps = 50).

Each function evaluates a definition directly (no shared code with dpkit): the Gaussian profile
from ``mpmath.ncdf``, its inverse by plain bisection, hockey-stick and Rényi divergences of finite
pmfs by exact summation, and the Rényi divergence of the randomized-response pair.
"""

from __future__ import annotations

from collections.abc import Sequence

import mpmath as mp

mp.mp.dps = 50


def gdp_delta(epsilon: float, mu: float) -> mp.mpf:
    """Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (DRS 2019 Cor 2.13), at 50 digits."""
    e, m = mp.mpf(epsilon), mp.mpf(mu)
    return mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)


def gdp_epsilon(delta: float, mu: float) -> mp.mpf:
    """Smallest eps >= 0 with gdp_delta(eps) <= delta, by 200 bisection steps (error < 1e-40)."""
    target = mp.mpf(delta)
    if gdp_delta(0, mu) <= target:
        return mp.mpf(0)
    lo, hi = mp.mpf(0), mp.mpf(1)
    while gdp_delta(hi, mu) > target:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        if gdp_delta(mid, mu) > target:
            lo = mid
        else:
            hi = mid
    return hi


def hockey_stick(p: Sequence[float], q: Sequence[float], epsilon: float) -> mp.mpf:
    """E_{e^eps}(P||Q) = sum (p - e^eps q)_+ of two pmfs, exactly summed at 50 digits."""
    g = mp.exp(mp.mpf(epsilon))
    return mp.fsum(max(mp.mpf(0), mp.mpf(a) - g * mp.mpf(b)) for a, b in zip(p, q))


def renyi(p: Sequence[float], q: Sequence[float], alpha: float) -> mp.mpf:
    """D_alpha(P||Q) = ln(sum p^alpha q^(1-alpha)) / (alpha - 1) for full-support pmfs."""
    a = mp.mpf(alpha)
    s = mp.fsum(mp.mpf(x) ** a * mp.mpf(y) ** (1 - a) for x, y in zip(p, q) if x > 0)
    return mp.log(s) / (a - 1)


def randomized_response(epsilon: float | mp.mpf) -> tuple[list[mp.mpf], list[mp.mpf]]:
    """The pair Bern(e^eps/(1+e^eps)) vs Bern(1/(1+e^eps)) as pmfs on {1, 0}."""
    e = mp.exp(mp.mpf(epsilon))
    p = e / (1 + e)
    return [p, 1 - p], [1 - p, p]


def canonical_pair(epsilon: float, delta: float) -> tuple[list[mp.mpf], list[mp.mpf]]:
    """Kairouz-Oh-Viswanath's dominating (eps, delta) pair on four points."""
    e, d = mp.exp(mp.mpf(epsilon)), mp.mpf(delta)
    return (
        [d, (1 - d) * e / (1 + e), (1 - d) / (1 + e), mp.mpf(0)],
        [mp.mpf(0), (1 - d) / (1 + e), (1 - d) * e / (1 + e), d],
    )


def cks_epsilon(rho: float, delta: float, alpha: mp.mpf) -> mp.mpf:
    """CKS 2020 Cor 13 epsilon at order alpha for rho-zCDP."""
    a, r, d = mp.mpf(alpha), mp.mpf(rho), mp.mpf(delta)
    return a * r + mp.log(1 - 1 / a) - (mp.log(d) + mp.log(a)) / (a - 1)


def minimise(f, lo: float, hi: float) -> tuple[mp.mpf, mp.mpf]:
    """Minimum of a unimodal f on [lo, hi] by golden-section search at 50 digits."""
    a, b = mp.mpf(lo), mp.mpf(hi)
    ratio = (mp.sqrt(5) - 1) / 2
    for _ in range(300):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if f(c) < f(d):
            b = d
        else:
            a = c
    x = (a + b) / 2
    return f(x), x
