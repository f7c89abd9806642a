"""Independent references for the composition tests, and checks that the references agree.

Nothing here calls dpkit.accounting. Two independent routes to the exact optimal composition:

* ``brute_delta``: the k-fold product of the canonical (epsilon, delta) pair of Kairouz, Oh &
  Viswanath (2015, arXiv 1311.0776, Sec 3) built with NumPy outer products, and its hockey-stick
  divergence from :func:`dpkit.divergences.hockey_stick` on :class:`~dpkit.distributions.Finite`;
* ``mp_delta`` / ``mp_corner_delta`` / ``mp_heterogeneous_delta``: mpmath at 50 digits, exact
  binomial sums (``mp.binomial`` or the recurrence C(k, l) = C(k, l-1)(k-l+1)/l) of the formulas
  of KOV Thm 3.3 and Murtagh & Vadhan (arXiv 1507.03113).
"""

from __future__ import annotations

import itertools
from functools import reduce

import mpmath as mp
import numpy as np
import pytest

from dpkit.distributions import Finite
from dpkit.divergences import hockey_stick

mp.mp.dps = 50


@pytest.fixture(autouse=True)
def _fifty_digits():  # type: ignore[no-untyped-def]
    """50 digits while each test runs, whatever another module set at import (test_tilted_groups sets 30)."""
    with mp.workdps(50):
        yield


def canonical_pair(epsilon: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """KOV's dominating pair of (epsilon, delta)-DP on {0, 1, 2, 3}."""
    e = np.exp(epsilon)
    p = np.array([delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0.0])
    return p, p[::-1].copy()


def product_pair(pairs: list[tuple[float, float]]) -> tuple[Finite, Finite]:
    """The product of the canonical pairs, flattened into two Finite laws."""
    ps, qs = zip(*(canonical_pair(e, d) for e, d in pairs))
    p = reduce(lambda a, b: np.outer(a, b).ravel(), ps)
    q = reduce(lambda a, b: np.outer(a, b).ravel(), qs)
    return Finite(p / p.sum()), Finite(q / q.sum())


def brute_delta(pairs: list[tuple[float, float]], epsilon_total: float) -> float:
    P, Q = product_pair(pairs)
    return float(hockey_stick(P, Q, epsilon_total))


def mp_delta(epsilon, delta, k: int, epsilon_total) -> mp.mpf:
    """Exact delta_g of k-fold composition (KOV Thm 3.3, form valid for every epsilon_total)."""
    eps, eg = mp.mpf(epsilon), mp.mpf(epsilon_total)
    p = mp.e**eps / (1 + mp.e**eps)
    total, c = mp.mpf(0), mp.mpf(1)
    for ell in range(k + 1):
        if ell:
            c = c * (k - ell + 1) / ell  # exact binomial C(k, ell) by recurrence
        loss = (2 * ell - k) * eps
        if loss > eg:
            total += c * p**ell * (1 - p) ** (k - ell) * (1 - mp.e ** (eg - loss))
    keep = (1 - mp.mpf(delta)) ** k
    return 1 - keep + keep * total


def mp_corner_delta(epsilon, delta, k: int, i: int) -> mp.mpf:
    """KOV Thm 3.3 as printed: delta at epsilon_total = (k - 2i) epsilon."""
    eps = mp.mpf(epsilon)
    delta_i = mp.fsum(
        mp.binomial(k, ell) * (mp.e ** ((k - ell) * eps) - mp.e ** ((k - 2 * i + ell) * eps)) for ell in range(i)
    ) / (1 + mp.e**eps) ** k
    return 1 - (1 - mp.mpf(delta)) ** k * (1 - delta_i)


def mp_heterogeneous_delta(pairs: list[tuple[float, float]], epsilon_total) -> mp.mpf:
    """Murtagh-Vadhan: sum over subsets S of (e^{eps(S)} - e^{eps_g} e^{eps(S^c)})_+ / prod(1 + e^eps_i)."""
    eps = [mp.mpf(e) for e, _ in pairs]
    eg = mp.mpf(epsilon_total)
    total = mp.mpf(0)
    for mask in itertools.product([0, 1], repeat=len(eps)):
        inside = mp.fsum(e for e, m in zip(eps, mask) if m)
        outside = mp.fsum(e for e, m in zip(eps, mask) if not m)
        total += max(mp.mpf(0), mp.e**inside - mp.e**eg * mp.e**outside)
    norm = mp.fprod(1 + mp.e**e for e in eps)
    keep = mp.fprod(1 - mp.mpf(d) for _, d in pairs)
    return 1 - keep + keep * total / norm


# ---- the references agree with each other --------------------------------------------------------


@pytest.mark.parametrize("epsilon, delta, k", [(0.5, 0.0, 4), (1.0, 1e-3, 5), (0.1, 0.01, 3)])
def test_brute_force_equals_mpmath(epsilon, delta, k):
    for eg in [0.0, 0.3 * epsilon, epsilon, 2.5 * epsilon]:
        ref = mp_delta(epsilon, delta, k, eg)
        assert brute_delta([(epsilon, delta)] * k, eg) == pytest.approx(float(ref), rel=1e-12, abs=1e-15)
        het = mp_heterogeneous_delta([(epsilon, delta)] * k, eg)
        assert float(abs(het - ref)) < 1e-40


@pytest.mark.parametrize("k", [4, 7])
def test_corner_formula_equals_general_form(k):
    for i in range(k // 2 + 1):
        assert float(abs(mp_corner_delta(0.3, 1e-4, k, i) - mp_delta(0.3, 1e-4, k, (k - 2 * i) * mp.mpf(0.3)))) < 1e-40
