"""Randomized response: guarantees from the exact pair vs mpmath closed forms, exact coins
(goodness of fit with power checks), the unbiased frequency estimator, and errors.

Statistical tests run at ALPHA = 1e-6 each (exact binomial or Pearson chi-square; critical values
from scipy.stats at run time) on fixed ``insecure_seeded`` seeds with 10^6 reports; each has a power
check: the same reports reject the law of randomized response with epsilon * 1.05.

mpmath references (50 digits), with p = e^eps/(e^eps + k - 1) and q = 1/(e^eps + k - 1):
D_inf = eps; KL = (p - q) eps (eps tanh(eps/2) for k = 2); delta(eps') = (e^eps - e^eps')_+ /
(e^eps + k - 1); D_alpha = ln(p^a q^(1-a) + q^a p^(1-a) + (k - 2) q) / (a - 1).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpkit.divergences import kl, max_divergence, renyi
from dpkit.errors import UnsupportedError
from dpkit.mechanisms.randomized_response import FrequencyEstimate, RandomizedResponse
from dpkit.random import insecure_seeded
from dpkit.verify import table

mp.mp.dps = 50
ALPHA = 1e-6
N = 10**6


def mp_pq(eps, k):
    e = mp.exp(mp.mpf(eps))
    return e / (e + k - 1), 1 / (e + k - 1)


def chi2_rejects(counts, probabilities):
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(probabilities, dtype=np.float64)
    assert expected.min() >= 5
    return float(np.sum((counts - expected) ** 2 / expected)) > stats.chi2.isf(ALPHA, counts.size - 1)


CASES = [(eps, k) for eps in (0.01, 0.5, 1.0, 5.0, 20.0) for k in (2, 3, 10)]


# ---- guarantees from the pair --------------------------------------------------------------------
@pytest.mark.parametrize("eps,k", CASES)
def test_guarantees_from_the_pair_match_mpmath(eps, k):
    rr = RandomizedResponse(epsilon=eps, categories=k)
    p, q = mp_pq(eps, k)
    assert rr.keep_probability == pytest.approx(float(p), rel=1e-15)
    assert rr.other_probability == pytest.approx(float(q), rel=1e-14)
    P, Q = rr.pair.P, rr.pair.Q
    assert float(max_divergence(P, Q)) == pytest.approx(eps, rel=1e-12)
    assert float(rr.pure_dp().epsilon) >= eps  # never understated
    assert float(rr.pure_dp().epsilon) == pytest.approx(eps, rel=1e-15)
    assert float(kl(P, Q)) == pytest.approx(float((p - q) * mp.mpf(eps)), rel=1e-10)
    if k == 2:
        assert float(kl(P, Q)) == pytest.approx(float(eps * mp.tanh(mp.mpf(eps) / 2)), rel=1e-10)
    for e in (0.0, 0.3 * eps, 0.99 * eps, eps, 2 * eps):
        ref = max(mp.mpf(0), (mp.exp(mp.mpf(eps)) - mp.exp(mp.mpf(e))) / (mp.exp(mp.mpf(eps)) + k - 1))
        assert rr.delta(e) == pytest.approx(float(ref), rel=1e-9, abs=1e-15)
    for a in (1.5, 2.0, 10.0):
        a_mp = mp.mpf(a)
        ref = mp.log(p**a_mp * q ** (1 - a_mp) + q**a_mp * p ** (1 - a_mp) + (k - 2) * q) / (a_mp - 1)
        assert float(renyi(P, Q, a)) == pytest.approx(float(ref), rel=1e-10)
        assert float(rr.rdp().epsilon(a)) == pytest.approx(float(ref), rel=1e-10)


@pytest.mark.parametrize("eps,k", [(0.5, 2), (1.0, 4), (3.0, 7)])
def test_every_pair_of_inputs_checked_exactly(eps, k):
    """The full k x k mechanism table, all pairs of inputs neighbours (local DP): exactly eps-DP."""
    rr = RandomizedResponse(epsilon=eps, categories=k)
    rows = np.full((k, k), rr.other_probability)
    np.fill_diagonal(rows, rr.keep_probability)
    neighbors = [(i, j) for i in range(k) for j in range(i + 1, k)]
    verdict = table(rows, epsilon=eps * (1 + 1e-12), neighbors=neighbors)
    assert verdict.holds
    assert verdict.tightest_epsilon == pytest.approx(eps, rel=1e-12)
    assert not table(rows, epsilon=eps * (1 - 1e-9), neighbors=neighbors).holds


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_zcdp(eps):
    binary = RandomizedResponse(epsilon=eps)
    rho = binary.zcdp().rho
    assert float(rho) == pytest.approx(eps * math.tanh(eps / 2), rel=1e-14) and rho.kind == "exact"
    # approached as alpha -> 1: D_alpha / alpha of the pair
    P, Q = binary.pair.P, binary.pair.Q
    assert float(renyi(P, Q, 1.0001)) / 1.0001 == pytest.approx(float(rho), rel=1e-3)
    kary = RandomizedResponse(epsilon=eps, categories=5)
    assert kary.zcdp().rho.kind == "upper"
    assert float(kary.zcdp().rho) >= float(kl(kary.pair.P, kary.pair.Q))


def test_built_from_keep_probability():
    rr = RandomizedResponse(keep_probability=0.75)
    assert rr.epsilon == pytest.approx(math.log(3), rel=1e-15)
    assert rr.keep_probability == pytest.approx(0.75, rel=1e-15)
    rr5 = RandomizedResponse(keep_probability=0.5, categories=5)
    assert rr5.epsilon == pytest.approx(math.log(4), rel=1e-15)
    assert rr5.flip_probability == pytest.approx(0.5, rel=1e-15)
    assert repr(rr5) == f"RandomizedResponse(epsilon={rr5.epsilon!r}, categories=5)"


def test_many_categories_and_wasserstein():
    """The pair stays three outputs long for any k (equal-mass categories merged)."""
    k = 2**40
    rr = RandomizedResponse(epsilon=30.0, categories=k)
    assert len(rr.pair.P) == 3
    assert float(rr.pure_dp().epsilon) == pytest.approx(30.0, rel=1e-12)
    assert rr.delta(10.0) == pytest.approx(float((mp.exp(30) - mp.exp(10)) / (mp.exp(30) + k - 1)), rel=1e-10)
    values = rr.release([0, k - 1] * 1000, rng=insecure_seeded(1)).values
    assert values.min() >= 0 and values.max() < k
    with pytest.raises(UnsupportedError, match="metric"):
        RandomizedResponse(epsilon=1.0, categories=3).wasserstein_dp()
    assert float(RandomizedResponse(epsilon=1.0).wasserstein_dp().epsilon) == pytest.approx(math.tanh(0.5))


# ---- exact coins: goodness of fit --------------------------------------------------------------------
@pytest.mark.parametrize("eps,seed", [(0.5, 201), (1.0, 202), (3.0, 203)])
def test_binary_goodness_of_fit_and_power(eps, seed):
    """Exact two-sided binomial test (ALPHA = 1e-6) of the keep rate; epsilon * 1.05 is rejected."""
    rr = RandomizedResponse(epsilon=eps)
    truth = np.ones(N, dtype=np.int64)
    reports = rr.release(truth, rng=insecure_seeded(seed)).values
    kept = int(np.sum(reports == 1))
    assert set(np.unique(reports).tolist()) <= {0, 1}
    assert stats.binomtest(kept, N, rr.keep_probability).pvalue > ALPHA
    wrong = RandomizedResponse(epsilon=eps * 1.05).keep_probability
    assert stats.binomtest(kept, N, wrong).pvalue < ALPHA


@pytest.mark.parametrize("eps,k,seed", [(1.0, 5, 301), (2.5, 12, 302)])
def test_kary_goodness_of_fit_and_power(eps, k, seed):
    """Chi-square over the k reports for a fixed truth (ALPHA = 1e-6); epsilon * 1.05 is rejected."""
    rr = RandomizedResponse(epsilon=eps, categories=k)
    truth = 2
    reports = rr.release(np.full(N, truth), rng=insecure_seeded(seed)).values
    counts = np.bincount(reports, minlength=k)
    exact = np.full(k, rr.other_probability)
    exact[truth] = rr.keep_probability
    assert not chi2_rejects(counts, exact)
    wrong = RandomizedResponse(epsilon=eps * 1.05, categories=k)
    exact_wrong = np.full(k, wrong.other_probability)
    exact_wrong[truth] = wrong.keep_probability
    assert chi2_rejects(counts, exact_wrong)


def test_mixed_inputs_keep_shape_and_are_independent_per_entry():
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    truth = np.tile(np.array([[0, 1, 2]]), (200_000, 1))
    reports = rr.release(truth, rng=insecure_seeded(401)).values
    assert reports.shape == truth.shape and reports.dtype == np.int64
    # the joint law of (report of column 0, report of column 1) is the product law: 9-cell chi-square
    joint = np.bincount(reports[:, 0] * 3 + reports[:, 1], minlength=9)
    row0 = np.array([rr.keep_probability, rr.other_probability, rr.other_probability])
    row1 = np.array([rr.other_probability, rr.keep_probability, rr.other_probability])
    assert not chi2_rejects(joint, np.outer(row0, row1).ravel())


# ---- release -------------------------------------------------------------------------------------
def test_release_fields_and_interval():
    rr = RandomizedResponse(epsilon=math.log(19))  # p = 0.95
    r = rr.release([0, 1, 1], rng=insecure_seeded(5), confidence=0.9)
    assert r.insecure and r.values.shape == (3,)
    assert np.array_equal(r.interval[0], r.values) and np.array_equal(r.interval[1], r.values)
    assert r.scale == pytest.approx(0.05, rel=1e-14)
    assert r.details == {"categories": 2, "keep_probability": rr.keep_probability}
    wide = rr.release([0, 1], rng=insecure_seeded(5), confidence=0.99)  # p < 0.99: all categories
    assert wide.interval[0].tolist() == [0.0, 0.0] and wide.interval[1].tolist() == [1.0, 1.0]
    scalar = RandomizedResponse(epsilon=1.0, categories=4).release(3)
    assert not scalar.insecure and 0 <= scalar.value <= 3
    assert str(scalar.guarantee) == "1.0-DP"
    assert rr.release(np.array([1.0, 0.0]), rng=insecure_seeded(1)).values.dtype == np.int64


def test_interval_coverage():
    rr = RandomizedResponse(epsilon=math.log(19))
    truth = np.zeros(N, dtype=np.int64)
    r = rr.release(truth, rng=insecure_seeded(6), confidence=0.9)
    covered = int(np.sum((r.interval[0] <= 0) & (0 <= r.interval[1])))
    assert stats.binomtest(covered, N, rr.keep_probability).pvalue > ALPHA  # coverage is p >= 0.9


# ---- debiasing ---------------------------------------------------------------------------------------
def test_debias_inverts_expected_counts():
    rr = RandomizedResponse(keep_probability=0.75)
    est = rr.debias([550, 450])  # P_0 = 0.25 + 0.5 * 0.6
    assert isinstance(est, FrequencyEstimate) and est.n == 1000
    assert est.frequencies == pytest.approx([0.6, 0.4], rel=1e-14)
    assert est.frequencies.sum() == pytest.approx(1.0, rel=1e-15)
    assert est.variance == pytest.approx([0.55 * 0.45 / (999 * 0.25)] * 2, rel=1e-14)
    assert est.standard_error == pytest.approx(np.sqrt(est.variance))


@pytest.mark.parametrize("k", [2, 4])
def test_debias_variance_estimate_is_unbiased_exactly(k):
    """E[f(1-f)/(n-1)] = P(1-P)/n, summed exactly over the binomial law of one count."""
    rr = RandomizedResponse(epsilon=0.7, categories=k)
    n, pi = 9, 0.3
    p, q = rr.keep_probability, rr.other_probability
    P = q + (p - q) * pi
    c = np.arange(n + 1)
    pmf = stats.binom.pmf(c, n, P)
    estimates = []
    for count in c:
        counts = np.zeros(k)
        counts[0], counts[1] = count, n - count
        estimates.append(rr.debias(counts))
    mean_freq = sum(w * e.frequencies[0] for w, e in zip(pmf, estimates))
    mean_var = sum(w * e.variance[0] for w, e in zip(pmf, estimates))
    assert mean_freq == pytest.approx(pi, rel=1e-12)
    assert mean_var == pytest.approx(P * (1 - P) / (n * (p - q) ** 2), rel=1e-12)


def test_debias_recovers_frequencies_from_releases():
    """|estimate - truth| <= z * SE per category, z for ALPHA = 1e-6 split over the k categories."""
    k = 6
    rr = RandomizedResponse(epsilon=1.5, categories=k)
    pi = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    truth = np.repeat(np.arange(k), (pi * 600_000).astype(int))
    reports = rr.release(truth, rng=insecure_seeded(77)).values
    est = rr.debias(np.bincount(reports, minlength=k))
    z = stats.norm.isf(ALPHA / (2 * k))
    assert np.all(np.abs(est.frequencies - pi) <= z * est.standard_error)


# ---- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf, 701.0])
def test_bad_epsilon(bad):
    with pytest.raises(ValueError, match="epsilon"):
        RandomizedResponse(epsilon=bad)


@pytest.mark.parametrize("bad", [0.5, 0.2, 1.0, 1.5, math.nan, math.inf, -0.1])
def test_bad_keep_probability(bad):
    with pytest.raises(ValueError, match="keep_probability"):
        RandomizedResponse(keep_probability=bad)


def test_bad_construction():
    with pytest.raises(ValueError, match="categories"):
        RandomizedResponse(epsilon=1.0, categories=1)
    with pytest.raises(TypeError, match="categories"):
        RandomizedResponse(epsilon=1.0, categories=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="categories"):
        RandomizedResponse(epsilon=1.0, categories=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one"):
        RandomizedResponse()
    with pytest.raises(ValueError, match="exactly one"):
        RandomizedResponse(epsilon=1.0, keep_probability=0.7)
    with pytest.raises(AttributeError, match="immutable"):
        RandomizedResponse(epsilon=1.0).epsilon = 2.0  # type: ignore[misc]


def test_bad_values():
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    for bad, match in [([0, math.nan], "integer category indices"), ([0.5], "integer"), ([-1], "\\[0, 3\\)"),
                       ([3], "\\[0, 3\\)"), ([], "empty"), ([math.inf], "integer")]:
        with pytest.raises(ValueError, match=match):
            rr.release(bad)
    with pytest.raises(TypeError, match="integer category"):
        rr.release(["a"])
    with pytest.raises(TypeError, match="rng"):
        rr.release([0], rng=np.random.RandomState(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        rr.release([0], confidence=0.0)


def test_bad_counts():
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    for bad, match in [([1, 2], "one entry per category"), ([1, -1, 3], "non-negative"),
                       ([1.5, 1, 1], "integers"), ([math.nan, 1, 1], "integers"), ([1, 0, 0], "at least 2"),
                       ([[1, 2, 3]], "one entry per category")]:
        with pytest.raises(ValueError, match=match):
            rr.debias(bad)
