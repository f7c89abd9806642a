"""Independent high-precision references (mpmath, 50 digits) for the closed forms.

Nothing here uses a closed form from dpkit: continuous pairs are integrated numerically with
mpmath's tanh-sinh quadrature, split at the kinks and crossing points; integer-valued pairs are
summed term by term until the terms fall below 1e-70 of the total.
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 50

INF = mp.inf


def _quad(f, points):
    pts = [-INF] + sorted(set(points)) + [INF]
    return mp.fsum(mp.quad(f, [a, b]) for a, b in zip(pts[:-1], pts[1:]) if a != b)


# ---- Laplace pair Lap(0,b) vs Lap(D,b) -------------------------------------------------------
def laplace_logpdf(x, loc, b):
    return -abs(x - loc) / b - mp.log(2 * b)


def laplace_pair(b, D):
    b, D = mp.mpf(b), mp.mpf(D)
    lp = lambda x: laplace_logpdf(x, 0, b)  # noqa: E731
    lq = lambda x: laplace_logpdf(x, D, b)  # noqa: E731
    return lp, lq, [mp.mpf(0), D]


def gaussian_pair(s, D):
    s, D = mp.mpf(s), mp.mpf(D)
    lp = lambda x: -x**2 / (2 * s**2) - mp.log(s * mp.sqrt(2 * mp.pi))  # noqa: E731
    lq = lambda x: -(x - D) ** 2 / (2 * s**2) - mp.log(s * mp.sqrt(2 * mp.pi))  # noqa: E731
    return lp, lq, [mp.mpf(0), D]


def _bisect(g, a, b):
    ga = g(a)
    for _ in range(200):
        m = (a + b) / 2
        gm = g(m)
        if gm == 0:
            return m
        if (gm < 0) == (ga < 0):
            a, ga = m, gm
        else:
            b = m
    return (a + b) / 2


def _crossings(lp, lq, points, eps):
    """Points where the log-ratio crosses eps (kinks of (p - e^eps q)_+), by bracketing."""
    pts = sorted(points)
    span = max(pts[-1] - pts[0], 1)
    grid = [pts[0] - 200 * span + i * span for i in range(200)] + pts
    grid += [pts[-1] + i * span for i in range(1, 200)]
    grid = sorted(set(grid))
    cross = []
    for a, b in zip(grid[:-1], grid[1:]):
        # subdivide each cell so a crossing inside a linear piece is found
        sub = [a + (b - a) * mp.mpf(i) / 16 for i in range(17)]
        for u, v in zip(sub[:-1], sub[1:]):
            gu, gv = lp(u) - lq(u) - eps, lp(v) - lq(v) - eps
            if gu == 0:
                cross.append(u)
            elif gu * gv < 0:
                cross.append(_bisect(lambda x: lp(x) - lq(x) - eps, u, v))
    return cross


def continuous(lp, lq, points, what, param=None):
    """KL / renyi(alpha) / tv / hockey(eps) of a continuous pair by quadrature."""
    if what == "kl":
        return _quad(lambda x: mp.exp(lp(x)) * (lp(x) - lq(x)), points)
    if what == "renyi":
        a = mp.mpf(param)
        # factor out the largest exponent seen at the split points to keep the integrand O(1)
        shift = max(a * lp(x) + (1 - a) * lq(x) for x in points)
        val = _quad(lambda x: mp.exp(a * lp(x) + (1 - a) * lq(x) - shift), points)
        return (mp.log(val) + shift) / (a - 1)
    if what == "tv":
        cross = _crossings(lp, lq, points, mp.mpf(0))
        return _quad(lambda x: abs(mp.exp(lp(x)) - mp.exp(lq(x))) / 2, list(points) + cross)
    if what == "hockey":
        eps = mp.mpf(param)
        cross = _crossings(lp, lq, points, eps)
        # refine around each crossing so far-tail integrals keep their digits
        cross = cross + [c + sgn * mp.mpf(2) ** j for c in cross for sgn in (-1, 1) for j in range(-4, 9)]
        f = lambda x: max(mp.exp(lp(x)) - mp.exp(eps) * mp.exp(lq(x)), 0)  # noqa: E731
        return _quad(f, list(points) + cross)
    raise ValueError(what)


# ---- integer-valued pairs --------------------------------------------------------------------
def lattice(logp, logq, what, param=None, center=0, width=None):
    """Sum over the integers around ``center`` (width chosen by the caller to cover all mass)."""
    ks = range(center - width, center + width + 1)
    ps = {k: logp(k) for k in ks}
    qs = {k: logq(k) for k in ks}
    if what == "kl":
        return mp.fsum(mp.exp(ps[k]) * (ps[k] - qs[k]) for k in ks)
    if what == "renyi":
        a = mp.mpf(param)
        return mp.log(mp.fsum(mp.exp(a * ps[k] + (1 - a) * qs[k]) for k in ks)) / (a - 1)
    if what == "tv":
        return mp.fsum(abs(mp.exp(ps[k]) - mp.exp(qs[k])) for k in ks) / 2
    if what == "hockey":
        g = mp.exp(mp.mpf(param))
        return mp.fsum(max(mp.exp(ps[k]) - g * mp.exp(qs[k]), 0) for k in ks)
    raise ValueError(what)


def discrete_laplace_logpmf(t):
    t = mp.mpf(t)
    r = mp.exp(-1 / t)
    lz = mp.log((1 - r) / (1 + r))
    return lambda k: lz - abs(mp.mpf(k)) / t


def discrete_gaussian_logpmf(s, width):
    s = mp.mpf(s)
    lz = mp.log(mp.fsum(mp.exp(-mp.mpf(k) ** 2 / (2 * s**2)) for k in range(-width, width + 1)))
    return lambda k: -mp.mpf(k) ** 2 / (2 * s**2) - lz
