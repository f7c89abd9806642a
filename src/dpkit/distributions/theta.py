r"""Jacobi-theta sums for the discrete Gaussian, in log space.

:math:`\theta_\sigma(s) = \sum_{k\in\mathbb Z} e^{-(k-s)^2/(2\sigma^2)}`.  For sigma >= 1/2 we use
the Poisson-summation (dual) form
:math:`\theta_\sigma(s) = \sigma\sqrt{2\pi}\,\bigl(1 + 2\sum_{n\ge1} q^{n^2}\cos(2\pi n s)\bigr)`,
:math:`q = e^{-2\pi^2\sigma^2}`, which converges in a handful of terms and keeps ratios close to one
accurate (``log1p``); for small sigma the direct sum has only a few non-negligible terms.
Hand-written because SciPy has no theta function (mpmath's is arbitrary-precision and slow).
Canonne, Kamath, Steinke 2020 (arXiv 2004.00010v5) §2 use the same identity.
"""

from __future__ import annotations

import math

import numpy as np

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _dual_terms(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    c = 2.0 * math.pi**2 * sigma**2
    nmax = max(1, int(math.ceil(math.sqrt(750.0 / c))) + 1)
    n = np.arange(1, nmax + 1, dtype=np.float64)
    return n, np.exp(-c * n * n)


def log_theta(sigma: float, s: float = 0.0) -> float:
    """ln theta_sigma(s) for real s."""
    if sigma >= 0.5:
        n, q = _dual_terms(sigma)
        # cos(2 pi n s) - 1 = -2 sin^2(pi n s): keeps 1 + small accurate
        frac = s - math.floor(s)
        corr = 2.0 * float(np.sum(q)) - 4.0 * float(np.sum(q * np.sin(math.pi * n * frac) ** 2))
        return math.log(sigma * _SQRT_2PI) + math.log1p(corr)
    half = int(math.ceil(40.0 * sigma)) + 2
    center = int(round(s))
    k = np.arange(center - half, center + half + 1, dtype=np.float64)
    z = -((k - s) ** 2) / (2.0 * sigma * sigma)
    m = float(np.max(z))
    return m + math.log(float(np.sum(np.exp(z - m))))


def log_theta_ratio(sigma: float, s: float) -> float:
    """ln(theta_sigma(s) / theta_sigma(0)), accurate when the ratio is close to 1."""
    if sigma >= 0.5:
        n, q = _dual_terms(sigma)
        frac = s - math.floor(s)
        base = 2.0 * float(np.sum(q))
        dip = 4.0 * float(np.sum(q * np.sin(math.pi * n * frac) ** 2))
        # ln(1 + base - dip) - ln(1 + base) = ln1p(-dip / (1 + base))
        return math.log1p(-dip / (1.0 + base))
    return log_theta(sigma, s) - log_theta(sigma, 0.0)


def second_moment(sigma: float) -> float:
    """E[k^2] for k ~ N_Z(0, sigma^2) (derivative of the dual form in sigma)."""
    if sigma >= 0.5:
        n, q = _dual_terms(sigma)
        num = 8.0 * math.pi**2 * sigma**2 * float(np.sum(n * n * q))
        return sigma**2 * (1.0 - num / (1.0 + 2.0 * float(np.sum(q))))
    half = int(math.ceil(40.0 * sigma)) + 2
    k = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(k**2) / (2.0 * sigma * sigma))
    return float(np.sum(k * k * w) / np.sum(w))
