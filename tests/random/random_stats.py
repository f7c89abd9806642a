"""Statistical helpers for the sampler tests: exact CDFs and a chi-square goodness-of-fit test.

Every statistical test in tests/random (:func:`chi2_gof` and :func:`binomial_ok`) runs at
significance level ``ALPHA = 1e-6``, the probability that a correct sampler fails it for a random
seed; there are fewer than 100 of them, so the suite's false-failure rate is below 1e-4, and with
the fixed seeds used the outcome is deterministic.  Critical values and p-values come from
``scipy.stats`` at run time.

Binning: ``bins`` cells whose edges are the integers where the exact CDF crosses ``j / bins``
(duplicates merged, so a law with few atoms gets one cell per atom), with the two tails merged
into the end cells; a cell with expected count below 5 is merged into its smaller neighbour.

Power against a 1% error in scale (or sigma), 32 cells, alpha = 1e-6, from the noncentral
chi-square (``scipy.stats.ncx2``, noncentrality ``n * sum((p - p')**2 / p)``): discrete Laplace
0.98 at n = 10^6 for scales >= 31 (0.9998 and more below), so its power tests use n = 2*10^6,
where it exceeds 1 - 1e-6; discrete Gaussian above 1 - 1e-6 at n = 10^6 for sigma in
[0.5, 1234.5]; geometric (scale 7) above 1 - 1e-6 at n = 2*10^6.  The tests' power checks confirm
these on fixed seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

ALPHA = 1e-6

Cdf = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def laplace_cdf(scale: float) -> Cdf:
    """P(X <= k) for the discrete Laplace law, pmf (1-q)/(1+q) q^|k|, q = exp(-1/scale)."""
    q = math.exp(-1.0 / scale)

    def cdf(k: NDArray[np.float64]) -> NDArray[np.float64]:
        k = np.floor(k)
        left = np.exp(np.minimum(k, 0.0) / scale) / (1 + q)  # sum_{j <= k < 0} = q^{-k} / (1+q)
        right = 1.0 - np.exp(-(np.maximum(k, -1.0) + 1) / scale) / (1 + q)
        return np.where(k < 0, left, right)

    return cdf


def geometric_cdf(scale: float) -> Cdf:
    """P(G <= k) = 1 - exp(-(k + 1)/scale) for k >= 0."""

    def cdf(k: NDArray[np.float64]) -> NDArray[np.float64]:
        k = np.floor(k)
        return np.where(k < 0, 0.0, -np.expm1(-(np.maximum(k, 0.0) + 1) / scale))

    return cdf


def gaussian_cdf(sigma: float) -> Cdf:
    """P(X <= k) for the discrete Gaussian by direct summation over |k| <= 60 sigma + 60.

    The mass outside that range is below exp(-1800); the sum is float64 (relative error ~1e-15).
    """
    radius = int(60 * sigma) + 60
    support = np.arange(-radius, radius + 1, dtype=np.float64)
    pmf = np.exp(-(support**2) / (2 * sigma * sigma))
    cumulative = np.cumsum(pmf)
    cumulative /= cumulative[-1]

    def cdf(k: NDArray[np.float64]) -> NDArray[np.float64]:
        index = np.clip(np.floor(k) + radius, -1, 2 * radius).astype(np.int64)
        return np.where(index < 0, 0.0, cumulative[np.maximum(index, 0)])

    return cdf


@dataclass(frozen=True)
class GofResult:
    statistic: float
    critical: float
    df: int
    p_value: float

    @property
    def rejects(self) -> bool:
        return self.statistic > self.critical


def _quantile_edges(cdf: Cdf, bins: int, lo: float, hi: float) -> NDArray[np.float64]:
    """The smallest integers e_j with cdf(e_j) >= j / bins, j = 1..bins-1, by bisection."""
    targets = np.arange(1, bins) / bins
    a = np.full(targets.shape, lo)
    b = np.full(targets.shape, hi)
    for _ in range(200):
        mid = np.floor((a + b) / 2)
        up = cdf(mid) >= targets
        b = np.where(up, mid, b)
        a = np.where(up, a, mid)
        if np.all(b - a <= 1):
            break
    return np.unique(b)


def chi2_gof(
    samples: NDArray[np.int64], cdf: Cdf, *, bins: int = 32, support: tuple[float, float]
) -> GofResult:
    """Pearson's chi-square test of ``samples`` against the law with CDF ``cdf`` (see module doc)."""
    n = samples.size
    edges = _quantile_edges(cdf, bins, support[0] - 1, support[1])
    cumulative = np.concatenate([[0.0], cdf(edges), [1.0]])
    probabilities = np.diff(cumulative)
    keep = probabilities > 0
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size + 1)
    observed, probabilities = observed[keep], probabilities[keep]
    assert observed.sum() == n, "a sample fell in a cell of probability zero"
    expected = n * probabilities
    while expected.size > 2 and expected.min() < 5:  # merge a small cell into its smaller neighbour
        i = int(np.argmin(expected))
        j = i - 1 if i == expected.size - 1 or (i > 0 and expected[i - 1] < expected[i + 1]) else i + 1
        expected[j] += expected[i]
        observed[j] += observed[i]
        expected, observed = np.delete(expected, i), np.delete(observed, i)
    assert expected.min() >= 5, "too few samples for this law"
    statistic = float(((observed - expected) ** 2 / expected).sum())
    df = int(observed.size - 1)
    return GofResult(
        statistic=statistic,
        critical=float(stats.chi2.isf(ALPHA, df)),
        df=df,
        p_value=float(stats.chi2.sf(statistic, df)),
    )


def binomial_ok(successes: int, n: int, p: float) -> bool:
    """Two-sided exact binomial test at level ALPHA: True if it does not reject."""
    if p == 1.0:
        return successes == n
    if p == 0.0:
        return successes == 0
    return bool(stats.binomtest(successes, n, p).pvalue > ALPHA)
