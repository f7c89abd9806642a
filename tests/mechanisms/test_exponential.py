"""Exponential mechanism and report-noisy-max: laws vs mpmath, exact checks on counting queries,
the bounded-range profile, goodness of fit of the exact samplers, and errors.

Statistical tests: Pearson chi-square at ALPHA = 1e-6 per test (critical values from
scipy.stats.chi2 at run time), fixed seeds of ``insecure_seeded`` (so the outcome is
deterministic), 10^6 draws; each has a power check: the same draws reject the law of the mechanism
with epsilon * 1.05.

References computed here with mpmath at 50 digits: softmax of exact rationals; the argmax law of
report-noisy-max as the integral of f_i(x) prod_{j != i} F_j(x) over x (tanh-sinh quadrature
split at the utilities), for Gumbel and exponential noise, independently of the closed forms used
by dpkit (softmax; permute-and-flip by Gauss-Legendre).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpkit.divergences import hockey_stick, max_divergence, renyi
from dpkit.errors import UnsupportedError
from dpkit.guarantees.conversions import pure_to_profile
from dpkit.mechanisms.exponential import (
    Exponential,
    ReportNoisyMax,
    bounded_range_delta,
    bounded_range_epsilon,
    bounded_range_pair,
)
from dpkit.random import insecure_seeded
from dpkit.verify import table

mp.mp.dps = 50
ALPHA = 1e-6
N = 10**6


# ---- references ---------------------------------------------------------------------------------
def mp_softmax(utilities, coefficient):
    u = [mp.mpf(x) for x in utilities]  # floats convert exactly
    top = max(u)
    w = [mp.exp(coefficient * (x - top)) for x in u]
    total = mp.fsum(w)
    return [x / total for x in w]


def mp_argmax_law(utilities, scale, noise):
    """P(argmax_i u_i + Z_i = r) = int f_r(x) prod_{j != r} F_j(x) dx, Z of the given noise law."""
    u = [mp.mpf(x) for x in utilities]
    b = mp.mpf(scale)
    if noise == "gumbel":
        # Gumbel tails: below min(u) - 6b the integrand is < exp(-e^6) ~ 1e-175; above
        # max(u) + 200b it is < e^-200 / b.  Both are far below the 1e-12 tolerance.
        cdf = lambda x, m: mp.exp(-mp.exp(-(x - m) / b))  # noqa: E731
        pdf = lambda x, m: mp.exp(-(x - m) / b - mp.exp(-(x - m) / b)) / b  # noqa: E731
        ends = (min(u) - 6 * b, max(u) + 200 * b)
    else:
        cdf = lambda x, m: -mp.expm1(-(x - m) / b) if x >= m else mp.mpf(0)  # noqa: E731
        pdf = lambda x, m: mp.exp(-(x - m) / b) / b if x >= m else mp.mpf(0)  # noqa: E731
        ends = None
    out = []
    for r in range(len(u)):
        start, stop = (u[r], mp.inf) if ends is None else ends
        points = [start] + sorted(x for x in set(u) if x > start) + [stop]
        f = lambda x, r=r: pdf(x, u[r]) * mp.fprod(cdf(x, u[j]) for j in range(len(u)) if j != r)  # noqa: E731
        out.append(mp.fsum(mp.quad(f, [a, c]) for a, c in zip(points[:-1], points[1:])))
    return out


def chi2_rejects(counts, probabilities):
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(probabilities, dtype=np.float64)
    assert expected.min() >= 5
    statistic = float(np.sum((counts - expected) ** 2 / expected))
    return statistic > stats.chi2.isf(ALPHA, counts.size - 1)


# ---- laws ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "utilities,sensitivity,epsilon",
    [
        ([0.0, 1.0, 2.0, 3.0, 5.0], 1.0, 1.0),
        ([1e6, 1e6 - 3.0, 0.0, -1e6], 1.0, 2.0),  # gaps of 1e6: the last masses underflow to 0
        ([1e300, 0.0, -1e300, 5e299], 1e300, 1.0),  # differences overflow in float64
        ([1.7e308, -1.7e308, 1.7e308 - 1e293], 1e293, 1.0),  # u_0 - u_1 overflows
        ([3.0], 1.0, 1.0),
    ],
)
def test_exponential_probabilities_match_mpmath(utilities, sensitivity, epsilon):
    m = Exponential(sensitivity=sensitivity, epsilon=epsilon)
    got = m.probabilities(utilities)
    ref = mp_softmax(utilities, mp.mpf(epsilon) / (2 * mp.mpf(sensitivity)))
    for g, r in zip(got, ref):
        if r < 1e-300:
            assert g == 0.0 or g == pytest.approx(float(r), rel=1e-10)
        else:
            assert g == pytest.approx(float(r), rel=1e-12)
    assert got.sum() == pytest.approx(1.0, rel=1e-14)


def test_monotonic_factor_is_epsilon_over_sensitivity():
    m = Exponential(sensitivity=2.0, epsilon=1.0, monotonic=True)
    ref = mp_softmax([0.0, 1.0, 4.0], mp.mpf(1) / 2)
    assert m.probabilities([0.0, 1.0, 4.0]) == pytest.approx([float(x) for x in ref], rel=1e-13)
    assert m.scale == 2.0 and Exponential(sensitivity=2.0, epsilon=1.0).scale == 4.0


@pytest.mark.parametrize("utilities", [[0.0, 1.0, 2.5, 3.0], [0.0, 0.0, -1.0], [5.0, -2.0]])
def test_gumbel_noisy_max_is_the_exponential_mechanism(utilities):
    """The Gumbel-max identity, checked by quadrature rather than assumed."""
    m = ReportNoisyMax(sensitivity=1.0, epsilon=1.2, noise="gumbel")
    ref = mp_argmax_law(utilities, m.scale, "gumbel")
    assert m.probabilities(utilities) == pytest.approx([float(x) for x in ref], rel=1e-12)
    assert m.probabilities(utilities) == pytest.approx(
        Exponential(sensitivity=1.0, epsilon=1.2).probabilities(utilities), rel=1e-15
    )


@pytest.mark.parametrize("utilities", [[0.0, 1.0, 2.5, 3.0], [0.0, 0.0, -1.0], [5.0, -2.0], [1.0]])
def test_exponential_noisy_max_is_permute_and_flip(utilities):
    """Ding et al. 2021: argmax with exponential noise has permute-and-flip's law (quadrature)."""
    m = ReportNoisyMax(sensitivity=1.0, epsilon=1.2, noise="exponential")
    ref = mp_argmax_law(utilities, m.scale, "exponential")
    assert m.probabilities(utilities) == pytest.approx([float(x) for x in ref], rel=1e-12)


def test_permute_and_flip_probabilities_for_many_candidates():
    u = np.linspace(0.0, 30.0, 3001)
    p = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="exponential").probabilities(u)
    assert p.sum() == pytest.approx(1.0, rel=1e-10)  # rounding grows like n^2 u (1.2e-11 here)
    assert np.all(np.diff(p) > 0)  # higher utility, higher probability


# ---- exact samplers: goodness of fit ---------------------------------------------------------------
@pytest.mark.parametrize(
    "noise,monotonic,utilities,seed",
    [
        ("gumbel", False, [0.0, 1.0, 2.0, 3.0, 5.0], 101),
        ("gumbel", True, [0.0, 0.0, 2.0, -1.0, 1.5, 3.0], 102),
        ("exponential", False, [0.0, 1.0, 2.0, 3.0, 5.0], 103),
        ("exponential", True, [0.0, 0.0, 2.0, -1.0, 1.5, 3.0], 104),
    ],
)
def test_sampler_goodness_of_fit_and_power(noise, monotonic, utilities, seed):
    """Chi-square of 10^6 draws against the exact law (ALPHA = 1e-6); epsilon * 1.05 is rejected."""
    m = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise=noise, monotonic=monotonic)
    draws = m.sample(utilities, N, rng=insecure_seeded(seed))
    counts = np.bincount(draws, minlength=len(utilities))
    factor = mp.mpf(1) / m.scale
    if noise == "gumbel":
        exact = [float(x) for x in mp_softmax(utilities, factor)]
    else:
        exact = [float(x) for x in mp_argmax_law(utilities, m.scale, "exponential")]
    assert not chi2_rejects(counts, exact)
    wrong = ReportNoisyMax(sensitivity=1.0, epsilon=1.05, noise=noise, monotonic=monotonic)
    assert chi2_rejects(counts, wrong.probabilities(utilities))


@pytest.mark.parametrize(
    "utilities,seed",
    [
        ([0.0, 1.0, 2.0, 2.0, 4.0], 105),
        # gaps up to 9.75: two proposal weights hit their cap (m_i = C = 5), acceptance ~2e-3
        ([0.0, 4.0, 8.0, 9.0, 10.0, 13.0], 106),
    ],
)
def test_exponential_class_samples_the_softmax_law(utilities, seed):
    m = Exponential(sensitivity=2.0, epsilon=3.0)
    counts = np.bincount(m.sample(utilities, N, rng=insecure_seeded(seed)), minlength=len(utilities))
    exact = [float(x) for x in mp_softmax(utilities, mp.mpf(3) / 4)]
    assert not chi2_rejects(counts, exact)
    assert chi2_rejects(counts, Exponential(sensitivity=2.0, epsilon=3.15).probabilities(utilities))


def test_sampler_many_candidates_and_extreme_utilities():
    rng = insecure_seeded(7)
    big = rng.normal(size=200_000) * 40.0
    for noise in ("gumbel", "exponential"):
        m = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise=noise)
        assert 0 <= m.release(big, rng=rng).value < big.size
        # differences overflow float64; the top candidate wins with probability 1 - e^{-1e307}
        assert set(m.sample([1e308, -1e308, 0.0, 1.7e308], 2000, rng=rng).tolist()) == {3}
        # all equal: uniform
        counts = np.bincount(m.sample([2.0] * 4, 200_000, rng=rng), minlength=4)
        assert not chi2_rejects(counts, [0.25] * 4)


def test_seeded_draws_are_reproducible():
    m = Exponential(sensitivity=1.0, epsilon=1.0)
    a = m.sample([0.0, 1.0, 2.0], 1000, rng=insecure_seeded(9))
    b = m.sample([0.0, 1.0, 2.0], 1000, rng=insecure_seeded(9))
    assert np.array_equal(a, b)


# ---- exact verification on counting queries (Remark 3.1, dpkit.verify.table) ----------------------
def histograms(candidates, max_records):
    """All histograms with at most max_records records, and add/remove-one neighbours."""
    hs = [h for h in itertools.product(range(max_records + 1), repeat=candidates) if sum(h) <= max_records]
    index = {h: i for i, h in enumerate(hs)}
    neighbors = []
    for h in hs:
        for r in range(candidates):
            g = list(h)
            g[r] += 1
            if tuple(g) in index:
                neighbors.append((index[h], index[tuple(g)]))
    return hs, neighbors


@pytest.mark.parametrize("noise", ["gumbel", "exponential"])
@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_counting_query_is_exactly_epsilon_dp(noise, monotonic, epsilon):
    """Utilities = counts (sensitivity 1, monotone under add/remove): epsilon-DP, checked exactly."""
    hs, neighbors = histograms(3, 4)
    m = ReportNoisyMax(sensitivity=1.0, epsilon=epsilon, noise=noise, monotonic=monotonic)
    rows = np.array([m.probabilities(np.array(h, dtype=float)) for h in hs])
    # the table is decided exactly for its float probabilities; permute-and-flip on monotone counts
    # is tight at epsilon, so their rounding (~1e-16) may land either side: allow 1e-12
    verdict = table(rows, epsilon=epsilon * (1 + 1e-12), neighbors=neighbors)
    assert verdict.holds
    assert verdict.tightest_epsilon <= epsilon * (1 + 1e-12)
    if noise == "gumbel":  # the bounded-range profile bounds every neighbouring pair
        for e in (0.0, 0.3 * epsilon, 0.8 * epsilon):
            assert table(rows, epsilon=e, neighbors=neighbors).tightest_delta <= m.delta(e) * (1 + 1e-12)


def test_monotonic_is_a_promise_about_the_utility():
    """u_r = count_r - count_{r+1} has sensitivity 1 but is not monotone: the factor eps/Delta fails."""
    hs, neighbors = histograms(3, 3)

    def utility(h):
        return np.array([h[0] - h[1], h[1] - h[2], h[2] - h[0]], dtype=float)

    rows_wrong = np.array([Exponential(sensitivity=1.0, epsilon=1.0, monotonic=True).probabilities(utility(h))
                           for h in hs])
    assert not table(rows_wrong, epsilon=1.0, neighbors=neighbors).holds
    rows_right = np.array([Exponential(sensitivity=1.0, epsilon=1.0).probabilities(utility(h)) for h in hs])
    assert table(rows_right, epsilon=1.0, neighbors=neighbors).holds


# ---- guarantees ---------------------------------------------------------------------------------
def test_pair_is_refused_and_pair_for_is_exact():
    m = Exponential(sensitivity=1.0, epsilon=1.0)
    with pytest.raises(UnsupportedError, match="pair_for"):
        _ = m.pair
    with pytest.raises(UnsupportedError, match="pair_for"):
        m.wasserstein_dp()
    # two candidates pushed apart: the privacy loss approaches epsilon (the guarantee is a supremum)
    for big, gap in ((5.0, 0.1), (40.0, 1e-8)):  # the loss is 1 - O(e^{-big/2})
        pair = m.pair_for([0.0, big], [-1.0, big + 1.0])
        worst = max(float(max_divergence(P, Q)) for P, Q in pair.directions())
        assert 1.0 - gap < worst <= 1.0 + 1e-12


def test_pair_for_refuses_non_neighbours():
    m = Exponential(sensitivity=1.0, epsilon=1.0, monotonic=True)
    with pytest.raises(ValueError, match="sensitivity"):
        m.pair_for([0.0, 0.0], [0.0, 1.5])
    with pytest.raises(ValueError, match="both directions"):
        m.pair_for([0.0, 0.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="length"):
        m.pair_for([0.0, 0.0], [0.0])


@pytest.mark.parametrize("eta", [0.05, 1.0, 4.0, 30.0, 800.0])
def test_bounded_range_profile_matches_mpmath_and_the_sup_over_pairs(eta):
    eps = np.array([0.0, 0.25, 0.5, 0.9, 0.999, 1.0, 1.5]) * eta
    got = bounded_range_delta(eta, eps)
    for e, g in zip(eps, got):
        ref = (mp.exp(mp.mpf(eta) / 2) - mp.exp(mp.mpf(e) / 2)) ** 2 / mp.expm1(eta) if e < eta else 0
        assert g == pytest.approx(float(ref), rel=1e-12, abs=1e-300)
    assert got[0] == pytest.approx(math.tanh(eta / 4), rel=1e-13)
    if eta <= 30:
        ts = np.linspace(0.0, eta, 402)[1:-1]
        for e, g in zip(eps[:4], got[:4]):
            sup = max(max(float(hockey_stick(P, Q, e)) for P, Q in bounded_range_pair(eta, t).directions())
                      for t in ts)
            assert sup <= g * (1 + 1e-9)
            assert sup >= g * (1 - 1e-3)  # a grid of 400 points gets within 1e-3 of the sup


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_profile_is_attained_by_two_candidates_and_never_exceeded(epsilon):
    m = Exponential(sensitivity=1.0, epsilon=epsilon)
    rng = np.random.default_rng(5)
    for e in (0.0, 0.4 * epsilon):
        target = m.delta(e)
        # attained: u_x = (1 + s, 0), u_y = (s, 1) for a suitable offset s
        best = max(float(hockey_stick(*m.pair_for([1.0 + s, 0.0], [s, 1.0]).directions()[0], e))
                   for s in np.linspace(-8 / epsilon, 8 / epsilon, 1601))
        assert target * (1 - 1e-4) <= best <= target * (1 + 1e-12)
        # never exceeded on random neighbouring utility vectors
        for _ in range(200):
            n = int(rng.integers(2, 7))
            ux = rng.normal(size=n) * 3
            uy = ux + rng.choice([-1.0, 1.0], size=n) * rng.random(n)
            pair = m.pair_for(ux, uy)
            assert max(float(hockey_stick(P, Q, e)) for P, Q in pair.directions()) <= target * (1 + 1e-12)
    # smaller than the profile of a generic epsilon-DP mechanism
    grid = np.linspace(0.0, epsilon, 7)
    assert np.all(m.profile().delta(grid) <= pure_to_profile(m.pure_dp()).delta(grid) + 1e-15)


@pytest.mark.parametrize("eta", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-2, 0.2])
def test_bounded_range_epsilon_inverts_the_profile(eta, delta):
    e = float(bounded_range_epsilon(eta, delta))
    assert float(bounded_range_delta(eta, e)) <= delta
    if e > 0:
        assert float(bounded_range_delta(eta, e * (1 - 1e-9))) > delta
    m = Exponential(sensitivity=1.0, epsilon=eta)
    assert float(m.approx_dp(delta).epsilon) == e == float(m.profile().epsilon(delta))
    assert float(bounded_range_epsilon(eta, 0.0)) == eta


@pytest.mark.parametrize("eta", [0.1, 1.0, 3.0, 10.0])
def test_zcdp_and_rdp_bound_every_bounded_range_pair(eta):
    m = Exponential(sensitivity=1.0, epsilon=eta)
    rho = float(m.zcdp().rho)
    assert rho == pytest.approx(min(eta * eta / 8, eta * math.tanh(eta / 2)), rel=1e-15)
    alphas = np.array([1.001, 1.5, 2.0, 4.0, 16.0, 100.0])
    curve = m.rdp().epsilon(alphas)
    worst = np.zeros(alphas.size)
    for t in np.linspace(0.0, eta, 62)[1:-1]:
        P, Q = bounded_range_pair(eta, t).directions()[0]
        worst = np.maximum(worst, [float(renyi(P, Q, a)) for a in alphas])
    assert np.all(worst <= curve * (1 + 1e-9))
    assert np.all(curve <= alphas * rho * (1 + 1e-12) + 1e-15)


def test_report_noisy_max_guarantees():
    g = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="gumbel")
    x = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="exponential")
    assert g.bounded_range == 1.0 and str(g.pure_dp()) == str(x.pure_dp()) == "1.0-DP"
    assert Exponential(sensitivity=3.0, epsilon=0.7, monotonic=True).bounded_range == 0.7
    with pytest.raises(UnsupportedError, match="bounded-range"):
        _ = x.bounded_range
    assert g.delta(0.0) == pytest.approx(math.tanh(0.25), rel=1e-13)
    assert x.delta(0.0) == pytest.approx(math.tanh(0.5), rel=1e-13)  # generic 1-DP profile
    assert float(x.approx_dp(1e-3).epsilon) >= float(g.approx_dp(1e-3).epsilon)
    assert float(x.zcdp().rho) == pytest.approx(math.tanh(0.5), rel=1e-13)
    assert float(g.rdp().epsilon(2.0)) <= float(x.rdp().epsilon(2.0))
    assert float(x.profile().delta(0.5)) == pytest.approx(x.delta(0.5), rel=1e-15)


# ---- release ------------------------------------------------------------------------------------
def test_release_fields():
    m = Exponential(sensitivity=1.0, epsilon=1.0)
    r = m.release([0.0, 3.0, 1.0], rng=insecure_seeded(3), confidence=0.9)
    assert r.values.dtype == np.int64 and 0 <= r.value <= 2
    assert r.insecure and "INSECURE" in str(r)
    assert str(r.guarantee) == "1.0-DP" and r.scale == 2.0
    assert float(r.interval[0]) == 0.0 and float(r.interval[1]) == 2.0
    assert r.details["candidates"] == 3
    assert r.details["utility_gap_bound"] == pytest.approx(2.0 * (math.log(3) + math.log(10)), rel=1e-14)
    assert "probabilities" not in r.details  # they are a function of the private utilities
    secure = m.release([0.0, 3.0], confidence=0.9)
    assert not secure.insecure


def test_utility_gap_bound_holds_empirically():
    """P(gap > bound) <= 1 - confidence (Dwork & Roth Thm 3.11); binomial test at ALPHA = 1e-6."""
    u = np.concatenate([[10.0], np.zeros(99)])
    for noise in ("gumbel", "exponential"):
        m = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise=noise)
        bound = m.utility_gap_bound(u.size, 0.9)
        misses = int(np.sum(10.0 - u[m.sample(u, 100_000, rng=insecure_seeded(17))] > bound))
        assert stats.binom.sf(misses - 1, 100_000, 0.1) > ALPHA


def test_built_from_scale():
    assert Exponential(sensitivity=2.0, scale=4.0).epsilon == 1.0
    assert Exponential(sensitivity=2.0, scale=4.0, monotonic=True).epsilon == 0.5
    m = ReportNoisyMax(sensitivity=1.0, scale=0.5, noise="exponential")
    assert m.epsilon == 4.0 and m.scale == 0.5
    assert "ReportNoisyMax" in repr(m) and "Exponential" in repr(Exponential(sensitivity=1.0, epsilon=1.0))


# ---- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_bad_epsilon_sensitivity_scale(bad):
    with pytest.raises(ValueError, match="epsilon"):
        Exponential(sensitivity=1.0, epsilon=bad)
    with pytest.raises(ValueError, match="sensitivity"):
        Exponential(sensitivity=bad, epsilon=1.0)
    with pytest.raises(ValueError, match="scale"):
        ReportNoisyMax(sensitivity=1.0, scale=bad)


def test_bad_construction():
    with pytest.raises(ValueError, match="exactly one"):
        Exponential(sensitivity=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        Exponential(sensitivity=1.0, epsilon=1.0, scale=2.0)
    with pytest.raises(ValueError, match="noise"):
        ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="laplace")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="monotonic"):
        Exponential(sensitivity=1.0, epsilon=1.0, monotonic="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2\\*\\*-1000"):
        Exponential(sensitivity=1e300, epsilon=1e-300)
    with pytest.raises(AttributeError, match="immutable"):
        Exponential(sensitivity=1.0, epsilon=1.0).epsilon = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("noise", ["gumbel", "exponential"])
def test_bad_utilities(noise):
    m = ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise=noise)
    for bad, match in [([0.0, math.nan], "finite"), ([math.inf, 0.0], "finite"),
                       ([0.0, -math.inf], "finite"), ([], "empty"), ([[0.0, 1.0]], "1-D"), (3.0, "1-D")]:
        with pytest.raises(ValueError, match=match):
            m.release(bad)
        with pytest.raises(ValueError, match=match):
            m.probabilities(bad)
    with pytest.raises(TypeError, match="real numbers"):
        m.release(["a", "b"])
    with pytest.raises(TypeError, match="rng"):
        m.release([0.0, 1.0], rng=np.random.RandomState(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        m.release([0.0, 1.0], confidence=1.0)
    with pytest.raises(ValueError, match="size"):
        m.sample([0.0, 1.0], -1)
    with pytest.raises(ValueError, match="candidates"):
        m.utility_gap_bound(0)
