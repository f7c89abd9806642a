r"""Tests of dpkit.verify.lemmas: Dwork & Roth 2014 Lemmas 3.17-3.19 (seeds 000/003), checked numerically.

Tolerances (double precision): probabilities and distances 1e-12 absolute (sums of <= 8 masses);
max divergences 1e-12 absolute (a log-ratio of masses down to 1e-300 is ~690, and its rounding is
~2e-13); the linear program is trusted to 1e-8 in mass (HiGHS run at 1e-10 feasibility), and
cases within 1e-6 of the lemma's boundary in delta are skipped.  Reference values for randomized
response come from mpmath at 50 digits.  The Azuma test is statistical: its false-failure rate is
stated in its docstring.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.distributions import Bernoulli, Finite
from dpkit.divergences import approx_max_divergence, hockey_stick, kl, max_divergence, total_variation
from dpkit.verify import pair
from dpkit.verify.lemmas import (
    LP_TOLERANCE,
    azuma_bound,
    kl_bound_tight,
    lemma_3_17_construct,
    lemma_3_17_two_sided,
    lemma_3_18_bound,
    simulate_bounded_martingale,
)
from strategies import pmf_pairs, positive_pmf_pairs, pmfs

mp.mp.dps = 50
TOL = 1e-12
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def profile(Y: Finite, Z: Finite, epsilon: float) -> float:
    """max(E_{e^eps}(Y||Z), E_{e^eps}(Z||Y)): the smallest delta for which both D^delta_inf <= eps."""
    return max(float(hockey_stick(Y, Z, epsilon=epsilon)), float(hockey_stick(Z, Y, epsilon=epsilon)))


# ---------------------------------------------------------------------------------------------
# Lemma 3.17 part 1
# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(pmf_pairs(), st.floats(0.0, 5.0), st.floats(0.0, 1.0))
def test_lemma_3_17_part_1_construction(pq: tuple[np.ndarray, np.ndarray], epsilon: float, slack: float) -> None:
    """D^delta(Y||Z) <= eps  =>  the constructed Y' has Delta(Y, Y') <= delta and D_inf(Y'||Z) <= eps."""
    Y, Z = Finite(pq[0]), Finite(pq[1])
    needed = float(hockey_stick(Y, Z, epsilon=epsilon))
    delta = min(1.0, needed + slack * (1.0 - needed))
    Y_new = lemma_3_17_construct(Y, Z, epsilon=epsilon, delta=delta)
    distance = float(total_variation(Y, Y_new))
    assert distance <= delta + TOL
    assert abs(distance - needed) <= TOL  # it moves exactly E_{e^eps}(Y||Z) of mass
    assert float(max_divergence(Y_new, Z)) <= epsilon + TOL
    assert np.array_equal(Y_new.support, Y.support)


def test_lemma_3_17_part_1_refuses_when_the_precondition_fails() -> None:
    Y, Z = Finite([0.9, 0.1]), Finite([0.5, 0.5])
    with pytest.raises(ValueError, match=r"Lemma 3.17 needs D\^delta_inf\(Y\|\|Z\) <= epsilon"):
        lemma_3_17_construct(Y, Z, epsilon=math.log(1.5), delta=0.1)  # E = 0.9 - 0.75 = 0.15 > 0.1


@st.composite
def triples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y_close, z = draw(pmf_pairs())
    return y_close, z, draw(pmfs(min_size=y_close.size, max_size=y_close.size))


@SETTINGS
@given(triples(), st.floats(1e-6, 1.0))
def test_lemma_3_17_part_1_converse(yzw: tuple[np.ndarray, np.ndarray, np.ndarray], weight: float) -> None:
    """If some Y' is delta-close to Y with D_inf(Y'||Z) <= eps, then D^delta(Y||Z) <= eps."""
    y_close, z, w = yzw
    epsilon = float(max_divergence(Finite(y_close), Finite(z)))
    assume(math.isfinite(epsilon))
    y = (1.0 - weight) * y_close + weight * w  # Y within weight * TV(Y', W) of Y'
    Y, Y_close, Z = Finite(y), Finite(y_close), Finite(z)
    delta = float(total_variation(Y, Y_close))
    assert float(hockey_stick(Y, Z, epsilon=epsilon)) <= delta + TOL


# ---------------------------------------------------------------------------------------------
# Lemma 3.17 part 2 (two-sided, corrected)
# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(pmf_pairs(max_size=6), st.floats(0.0, 3.0), st.floats(0.0, 1.0))
def test_lemma_3_17_part_2_iff(pq: tuple[np.ndarray, np.ndarray], epsilon: float, delta: float) -> None:
    """The LP finds Y', Z' iff D^delta(Y||Z) <= eps and D^delta(Z||Y) <= eps (away from the boundary)."""
    Y, Z = Finite(pq[0]), Finite(pq[1])
    needed = profile(Y, Z, epsilon)
    assume(abs(needed - delta) > 1e-6)
    found = lemma_3_17_two_sided(Y, Z, epsilon=epsilon, delta=delta)
    assert (found is not None) == (needed <= delta), (needed, delta)
    if found is not None:
        Y_new, Z_new = found
        budget = delta / (math.exp(epsilon) + 1.0)
        slack = 1e-8
        assert float(total_variation(Y, Y_new)) <= budget + slack
        assert float(total_variation(Z, Z_new)) <= budget + slack
        y, z, g = Y_new.probabilities, Z_new.probabilities, math.exp(epsilon)
        assert np.all(y <= g * z + slack) and np.all(z <= g * y + slack)


@SETTINGS
@given(positive_pmf_pairs(max_size=6), st.floats(0.0, 3.0))
def test_lemma_3_17_part_2_budget_is_used_exactly(pq: tuple[np.ndarray, np.ndarray], epsilon: float) -> None:
    """The smallest distance that makes both max divergences <= eps is profile / (e^eps + 1).

    So the delta/(e^eps + 1) of the lemma cannot be improved for any pair (docs/notes.md §3).
    """
    Y, Z = Finite(pq[0]), Finite(pq[1])
    found = lemma_3_17_two_sided(Y, Z, epsilon=epsilon, delta=1.0)
    assert found is not None
    moved = max(float(total_variation(Y, found[0])), float(total_variation(Z, found[1])))
    assert moved * (math.exp(epsilon) + 1.0) == pytest.approx(profile(Y, Z, epsilon), abs=1e-8)


@pytest.mark.parametrize("delta", [0.0, 0.25, 0.49])
def test_seed_one_sided_lemma_3_17_part_2_is_false(delta: float) -> None:
    """Seed 000/003 writes only D_inf(Y'||Z') <= eps; docs/notes.md §3's counterexample breaks the 'if'."""
    Y, Z = Finite([1.0, 0.0]), Finite([0.5, 0.5])
    epsilon = math.nextafter(math.log(2.0), math.inf)  # ln 2 rounded up (the float log(2.0) lies below ln 2)
    # the seed's right-hand side holds with Y' = Y, Z' = Z (distance 0 <= delta/(e^eps + 1))
    assert float(max_divergence(Y, Z)) <= epsilon
    # ... but its left-hand side fails: Z puts 1/2 > delta where Y has nothing
    assert float(approx_max_divergence(Z, Y, delta=delta)) == math.inf
    assert not pair(Y, Z, epsilon=epsilon, delta=delta).holds
    # the corrected, two-sided statement agrees with the left-hand side
    assert lemma_3_17_two_sided(Y, Z, epsilon=epsilon, delta=delta) is None


def test_lemma_3_17_two_sided_survives_a_presolve_failure() -> None:
    """HiGHS's presolve once called this (always feasible) program infeasible; the retry solves it."""
    y = np.array([0.5, 0.5, 0.0, 0.0, 0.0, 0.0])
    z = np.array([5e-15, 0.0, 5e-11, 0.0, 0.5, 0.5])
    Y, Z = Finite(y), Finite(z / z.sum())
    assert lemma_3_17_two_sided(Y, Z, epsilon=1e-10, delta=0.5) is None  # profile = 1 > 0.5
    found = lemma_3_17_two_sided(Y, Z, epsilon=1e-10, delta=1.0)
    assert found is not None
    assert max(float(total_variation(Y, found[0])), float(total_variation(Z, found[1]))) <= 0.5 + 1e-8


def test_lemma_3_17_two_sided_returns_a_pair_when_it_holds() -> None:
    P, Q = Bernoulli(0.75).to_finite(), Bernoulli(0.25).to_finite()  # randomized response at ln 3
    found = lemma_3_17_two_sided(P, Q, epsilon=math.log(3.0), delta=0.0)
    assert found is not None
    assert np.allclose(found[0].probabilities, P.probabilities, atol=LP_TOLERANCE)
    assert lemma_3_17_two_sided(P, Q, epsilon=1.0, delta=0.0) is None
    # at epsilon = 1 the smallest delta is E_e(P||Q) = 0.75 - 0.25 e
    edge = 0.75 - 0.25 * math.e
    assert lemma_3_17_two_sided(P, Q, epsilon=1.0, delta=edge + 1e-6) is not None


# ---------------------------------------------------------------------------------------------
# Lemma 3.18
# ---------------------------------------------------------------------------------------------
def rr_kl_reference(epsilon: float) -> mp.mpf:
    """KL of randomized response at epsilon, by the definition (Def 3.5) at 50 digits."""
    e = mp.mpf(epsilon)
    p = mp.exp(e) / (1 + mp.exp(e))
    q = 1 - p
    return p * mp.log(p / q) + q * mp.log(q / p)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0])
def test_kl_bound_tight_is_attained_by_randomized_response(epsilon: float) -> None:
    reference = rr_kl_reference(epsilon)
    assert float(kl_bound_tight(epsilon)) == pytest.approx(float(reference), rel=1e-14)
    p = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    # dpkit's exact sum: relative accuracy ~1e-16 / epsilon (the terms are +-epsilon/2, KL ~ eps^2/2)
    assert float(kl(Bernoulli(p), Bernoulli(1.0 - p))) == pytest.approx(float(reference), rel=1e-10)
    assert kl_bound_tight(epsilon) < lemma_3_18_bound(epsilon)


@pytest.mark.parametrize("epsilon", [0.0, 1e-8, 0.3, 1.0, 3.0, 30.0, 700.0])
def test_tight_bound_is_below_the_seed_bound_and_eps_squared_over_two(epsilon: float) -> None:
    tight, seed = float(kl_bound_tight(epsilon)), float(lemma_3_18_bound(epsilon))
    assert tight <= seed and tight <= epsilon**2 / 2.0
    assert float(lemma_3_18_bound(epsilon)) == pytest.approx(float(epsilon * mp.expm1(epsilon)), rel=1e-14)
    assert kl_bound_tight(epsilon).kind == "upper" and lemma_3_18_bound(epsilon).kind == "upper"
    assert lemma_3_18_bound(710.0) == math.inf  # e^710 overflows a double: the bound is +inf, not an error


@SETTINGS
@given(positive_pmf_pairs())
def test_lemma_3_18_on_random_pairs(pq: tuple[np.ndarray, np.ndarray]) -> None:
    Y, Z = Finite(pq[0]), Finite(pq[1])
    epsilon = max(float(max_divergence(Y, Z)), float(max_divergence(Z, Y)))
    divergence = float(kl(Y, Z))
    assert divergence <= float(kl_bound_tight(epsilon)) + TOL * max(1.0, divergence)
    assert float(kl_bound_tight(epsilon)) <= float(lemma_3_18_bound(epsilon))


def test_lemma_3_18_needs_both_directions() -> None:
    """The seed's proof uses only D_inf(Z||Y) <= eps at its key step; with one direction KL is unbounded."""
    epsilon = 1.0
    z = np.array([1.0 - 1e-10, 1e-10])
    y = math.exp(-epsilon) * z + (1.0 - math.exp(-epsilon)) * np.array([0.0, 1.0])  # y >= e^-eps z
    Y, Z = Finite(y), Finite(z)
    assert float(max_divergence(Z, Y)) <= epsilon + TOL
    assert float(max_divergence(Y, Z)) > 20.0
    # KL = (1 - 1/e) ln((1 - 1/e)/1e-10) + (1/e) ln(1/e) = 13.90 vs e - 1 = 1.72
    assert float(kl(Y, Z)) > 13.0 > float(lemma_3_18_bound(epsilon))


# ---------------------------------------------------------------------------------------------
# Lemma 3.19 (Azuma)
# ---------------------------------------------------------------------------------------------
ZS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
#: Suite-wide false-failure rate of the Azuma tests, split evenly (Bonferroni) over every comparison.
FALSE_FAILURE = 1e-6


def clopper_pearson_lower(successes: int, trials: int, level: float) -> float:
    """One-sided lower confidence bound for a binomial proportion (Clopper & Pearson 1934)."""
    return 0.0 if successes == 0 else float(stats.beta.ppf(level, successes, trials - successes + 1))


@pytest.mark.parametrize(("beta", "adaptive"), [(0.1, True), (0.0, True), (0.2, False), (-0.3, True)])
def test_azuma_bound_holds_empirically(beta: float, adaptive: bool) -> None:
    """Pr[sum C_i > k beta + z sqrt(k) alpha] <= e^{-z^2/2}, tested at every z in ZS.

    n = 200,000 paths of k = 100 steps from ``np.random.default_rng(20240601)`` (test-only seed).
    The test fails when the one-sided Clopper-Pearson lower bound on the tail probability, at
    level FALSE_FAILURE / (4 cases x 6 z), exceeds the bound; so if the lemma holds, the chance
    that this test ever fails is below 1e-6.
    """
    k, alpha, n = 100, 1.0, 200_000
    level = FALSE_FAILURE / (4 * len(ZS))
    sums = simulate_bounded_martingale(k, alpha=alpha, beta=beta, n_paths=n,
                                       rng=np.random.default_rng(20240601), adaptive=adaptive)
    for z in ZS:
        tail = int(np.count_nonzero(sums > k * beta + z * math.sqrt(k) * alpha))
        assert clopper_pearson_lower(tail, n, level) <= float(azuma_bound(z)), (z, tail / n)


def test_simulator_matches_its_exact_law_and_the_test_has_power() -> None:
    """With constant drift beta the sum is 2X - k alpha, X ~ Binomial(k, (1 + beta/alpha)/2).

    Checks the simulator against scipy's binomial tail (two-sided, false-failure 1e-6 in total),
    then shows the Azuma test above rejects a wrong bound: the exponent -z^2 instead of -z^2/2
    at z = 2.5 (true tail ~0.006 > e^-6.25 = 0.0019).
    """
    k, alpha, beta, n = 100, 1.0, 0.2, 200_000
    sums = simulate_bounded_martingale(k, alpha=alpha, beta=beta, n_paths=n,
                                       rng=np.random.default_rng(7), adaptive=False)
    p_up = 0.5 * (1.0 + beta / alpha)
    level = 1e-6 / (2 * len(ZS))
    for z in ZS:
        threshold = k * beta + z * math.sqrt(k) * alpha
        exact = float(stats.binom.sf(math.floor((threshold + k * alpha) / (2 * alpha)), k, p_up))
        count = int(np.count_nonzero(sums > threshold))
        lo = stats.binom.ppf(level / 2, n, exact)
        hi = stats.binom.isf(level / 2, n, exact)
        assert lo <= count <= hi, (z, count / n, exact)
    z = 2.5
    tail = int(np.count_nonzero(sums > k * beta + z * math.sqrt(k) * alpha))
    assert clopper_pearson_lower(tail, n, FALSE_FAILURE) > math.exp(-z * z)


@pytest.mark.parametrize(("adaptive", "mean"), [(False, 0.5), (True, -0.5)])
def test_simulated_steps_meet_the_hypotheses(adaptive: bool, mean: float) -> None:
    """One step: C_1 = +-alpha with E[C_1] = beta (constant drift) or beta - alpha/2 (adaptive: no
    path is ahead of its drift line at the start); 5-sigma band, sd = sqrt(alpha^2 - m^2 / n)."""
    n = 100_000
    sums = simulate_bounded_martingale(1, alpha=2.0, beta=0.5, n_paths=n, rng=np.random.default_rng(3),
                                       adaptive=adaptive)
    assert set(np.unique(sums).tolist()) == {-2.0, 2.0}  # |C_1| <= alpha
    assert abs(float(np.mean(sums)) - mean) <= 5 * math.sqrt(4.0 - mean**2) / math.sqrt(n)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0])
def test_bounds_refuse_bad_epsilon(value: float) -> None:
    for fn in (lemma_3_18_bound, kl_bound_tight):
        with pytest.raises(ValueError, match=r"epsilon must be finite and >= 0; got"):
            fn(value)
    Y, Z = Finite([0.5, 0.5]), Finite([0.5, 0.5])
    for lemma in (lemma_3_17_construct, lemma_3_17_two_sided):
        with pytest.raises(ValueError, match=r"epsilon must be finite and >= 0; got"):
            lemma(Y, Z, epsilon=value, delta=0.1)


@pytest.mark.parametrize("value", [math.nan, math.inf, -0.5, 1.5])
def test_lemmas_refuse_bad_delta(value: float) -> None:
    Y, Z = Finite([0.5, 0.5]), Finite([0.5, 0.5])
    for lemma in (lemma_3_17_construct, lemma_3_17_two_sided):
        with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]; got"):
            lemma(Y, Z, epsilon=1.0, delta=value)


def test_lemmas_refuse_non_finite_laws() -> None:
    with pytest.raises(TypeError, match="Y must be a dpkit.distributions.Finite"):
        lemma_3_17_construct([0.5, 0.5], Finite([0.5, 0.5]), epsilon=1.0, delta=0.1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Z must be a dpkit.distributions.Finite"):
        lemma_3_17_two_sided(Finite([0.5, 0.5]), Bernoulli(0.5), epsilon=1.0, delta=0.1)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0.0, -1.0])
def test_azuma_bound_refuses_bad_z(value: float) -> None:
    with pytest.raises(ValueError, match=r"z must be finite and > 0; got|z must be finite; got"):
        azuma_bound(value)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"k": 0}, ValueError, r"k must be an integer >= 1; got 0"),
        ({"k": 2.5}, ValueError, r"k must be an integer >= 1"),
        ({"n_paths": 0}, ValueError, r"n_paths must be an integer >= 1"),
        ({"alpha": 0.0}, ValueError, r"alpha must be finite and > 0; got 0.0"),
        ({"alpha": math.nan}, ValueError, r"alpha must be finite; got nan"),
        ({"alpha": math.inf}, ValueError, r"alpha must be finite; got inf"),
        ({"beta": math.nan}, ValueError, r"beta must be finite; got nan"),
        ({"beta": -math.inf}, ValueError, r"beta must be finite; got -inf"),
        ({"beta": 1.5}, ValueError, r"beta must be in \[-alpha, alpha\]"),
        ({"beta": -1.5}, ValueError, r"beta must be in \[-alpha, alpha\]"),
        ({"rng": 42}, TypeError, r"rng must be a numpy.random.Generator"),
    ],
)
def test_simulator_refuses_bad_parameters(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    args: dict[str, object] = {"k": 3, "alpha": 1.0, "beta": 0.0, "n_paths": 2, "rng": np.random.default_rng(0)}
    args.update(kwargs)
    k = args.pop("k")
    with pytest.raises(error, match=match):
        simulate_bounded_martingale(k, **args)  # type: ignore[arg-type]
