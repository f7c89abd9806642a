"""DP-SGD intervals at 10^4-10^6 steps against an independent 40-digit value: delta(eps) of T Poisson-subsampled
Gaussian steps by the inverse Laplace transform of its moment generating function,

    delta(eps) = E[(1 - e^{eps - S})_+]
               = (1 / 2 pi) int Re[ M(c + it)^T e^{-(c + it) eps} / ((c + it)(c + it + 1)) ] dt,

valid for every c > 0 ((1 - e^{-u})_+ is the inverse Laplace transform of 1/z - 1/(z + 1); the representation
behind the saddle-point accountant, Alghamdi et al. 2023, arXiv 2208.03458), with M(z) = E[(1 - q + q e^X)^{+-z}]
by mpmath quadrature over the base loss X and the t-integral by composite Gauss-Legendre rules around the saddle
point c (two rules must agree to 1e-10 in ln delta).  Nothing here shares code with the PLD accountant."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.accounting import dpsgd_epsilon

pytestmark = pytest.mark.slow


def _log_mgf(z, mu: float, q: float, direction: str):  # type: ignore[no-untyped-def]
    """ln E[e^{zL}] of one step: removal pair L = ln(1 - q + q e^X), X ~ q N(m, mu^2) + (1 - q) N(-m, mu^2);
    addition pair L = -ln(1 - q + q e^X), X ~ N(-m, mu^2); m = mu^2 / 2."""
    mu_, q_ = mp.mpf(mu), mp.mpf(q)
    m = mu_ * mu_ / 2
    sign = 1 if direction == "remove" else -1

    def f(u):  # type: ignore[no-untyped-def]
        x = -m + mu_ * u
        g = mp.log(1 - q_ + q_ * mp.exp(x))
        density_ratio = (1 - q_) + q_ * mp.exp(x) if direction == "remove" else 1  # the mixture over N(-m, mu^2)
        return mp.npdf(u) * density_ratio * mp.exp(sign * z * g)

    return mp.log(mp.quad(f, [-mp.inf, -10, -5, 0, 5, 10, 20, mp.inf]))


def _saddle(eps: float, mu: float, q: float, steps: int, direction: str) -> mp.mpf:
    """c > 0 with T K'(c) = eps (any c > 0 gives the same integral; this one makes it a narrow bell)."""
    h = mp.mpf("1e-12")

    def slope(c):  # type: ignore[no-untyped-def]
        return steps * (_log_mgf(c + h, mu, q, direction) - _log_mgf(c - h, mu, q, direction)) / (2 * h) - eps

    lo, hi = mp.mpf("0.01"), mp.mpf(1)
    while slope(hi) < 0:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
        if hi - lo < mp.mpf("1e-3") * hi:
            break
    return (lo + hi) / 2


def mp_log_delta(eps: float, mu: float, q: float, steps: int, direction: str) -> mp.mpf:
    with mp.workdps(40):
        c = _saddle(eps, mu, q, steps, direction)
        k1 = _log_mgf(c, mu, q, direction)
        h = mp.mpf("1e-10") * max(1, c)
        k2 = steps * (_log_mgf(c + h, mu, q, direction) - 2 * k1 + _log_mgf(c - h, mu, q, direction)) / h**2
        width = 1 / mp.sqrt(k2)
        cache: dict[mp.mpf, mp.mpf] = {}

        def integrand(t):  # type: ignore[no-untyped-def]
            if t not in cache:
                z = c + 1j * t * width
                val = mp.exp(steps * (_log_mgf(z, mu, q, direction) - k1) - z * eps) / (z * (z + 1))
                cache[t] = mp.re(val) * width
            return cache[t]

        # panels doubling in length from a: where c is small next to the bell's width (sigma = 1e4) the pole
        # of 1 / z at distance c from the contour makes a peak c / width wide at t = 0
        a = min(1.0, float(c / width)) / 2.0
        # and far enough that the integrand has fallen below 1e-25 of its value at 0 (where single jumps
        # dominate, far in the tail, it is no Gaussian bell and falls much more slowly)
        span = 8.0
        while span < 1024.0 and abs(integrand(mp.mpf(span))) > mp.mpf("1e-25") * abs(integrand(mp.mpf(0))):
            span *= 2.0
        edges = np.array([0.0] + [a * 2.0**j for j in range(64) if a * 2.0**j < span] + [span])

        def rule(n: int):  # type: ignore[no-untyped-def]
            x, w = np.polynomial.legendre.leggauss(n)
            total = mp.mpf(0)
            for a, b in zip(edges[:-1], edges[1:]):
                for xi, wi in zip(x, w):
                    t = mp.mpf(float((a + b) / 2 + (b - a) / 2 * xi))
                    total += mp.mpf(float(wi)) * mp.mpf(float((b - a) / 2)) * integrand(t)
            return steps * k1 + mp.log(total / mp.pi)  # the integrand's real part is even in t

        fine, coarse = rule(14), rule(10)
        assert abs(fine - coarse) < 1e-10, (fine, coarse)
        return fine


# (q, sigma, steps): DP-SGD sizes of issue 10 whose speed-up changed the path they take (the cut, the FFT's tilt
# and window, the grid refinement) and sigma = 1e4.  (At q = 1e-3 and 10^4 steps single jumps dominate and the
# t-integrand is no narrow bell: its rules would need ten times the points.)
CASES = [(1e-3, 1.1, 10**5), (1e-2, 0.8, 10**6), (1e-3, 1e4, 10**5)]


@pytest.mark.parametrize("q,sigma,steps", CASES)
def test_dpsgd_epsilon_interval_holds_the_40_digit_value(q, sigma, steps):
    iv = dpsgd_epsilon(sigma=sigma, sampling_rate=q, steps=steps, delta=1e-5)
    ld = math.log(1e-5)
    mu = 1.0 / sigma
    # the exact epsilon(1e-5) is the larger of the two directions' roots: at the upper end both deltas are at
    # most 1e-5, at the lower end the removal pair's (the larger here) is above it
    assert mp_log_delta(iv.upper, mu, q, steps, "remove") <= ld
    assert mp_log_delta(iv.upper, mu, q, steps, "add") <= ld
    assert mp_log_delta(iv.lower, mu, q, steps, "remove") > ld
    assert iv.width <= (1e-4 if sigma < 100 else 1e-3) * iv.upper
