"""Basic (DR Thm 3.14-3.16) and parallel (McSherry 2009) composition; the seed slips they fix.

Exactness claims are checked on real pairs: products of randomized-response laws (Finite) and
Laplace pairs, through dpkit.divergences. rtol 1e-12 (sums of a few floats).
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np
import pytest

from dpkit.accounting.composition import compose_basic, compose_optimal_heterogeneous, compose_parallel
from dpkit.distributions import Finite, Laplace
from dpkit.divergences import hockey_stick, max_divergence
from dpkit.guarantees import ApproxDP, PureDP


def rr(epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    return np.array([p, 1 - p]), np.array([1 - p, p])


def product(laws: list[np.ndarray]) -> Finite:
    return Finite(reduce(lambda a, b: np.outer(a, b).ravel(), laws))


def test_pure_sum_is_exact_randomized_response_attains_it():
    epsilons = [0.3, 1.1, 0.25]
    g = compose_basic([PureDP(e) for e in epsilons])
    assert isinstance(g, PureDP) and g.epsilon.kind == "exact"
    assert float(g.epsilon) == pytest.approx(sum(epsilons), rel=1e-15)
    pairs = [rr(e) for e in epsilons]
    P, Q = product([p for p, _ in pairs]), product([q for _, q in pairs])
    assert float(max_divergence(P, Q)) == pytest.approx(float(g.epsilon), rel=1e-12)


def test_seed_002_thm_3_14_proof_line_as_printed_loses_the_second_factor():
    """The seed divides by Pr[M1(y)=r1] Pr[M2(x)=r2]: the printed ratio is only e^{eps1}."""
    (p1, q1), (p2, q2) = rr(0.4), rr(0.7)
    r1, r2 = 0, 0  # the worst outcome
    printed = (p1[r1] * p2[r2]) / (q1[r1] * p2[r2])  # seed: M2(x) in numerator and denominator
    correct = (p1[r1] * p2[r2]) / (q1[r1] * q2[r2])
    assert printed == pytest.approx(math.exp(0.4), rel=1e-12)
    assert correct == pytest.approx(math.exp(0.4 + 0.7), rel=1e-12)
    assert q1[r1] * q2[r2] / (p1[r1] * p2[r2]) == pytest.approx(math.exp(-(0.4 + 0.7)), rel=1e-12)  # symmetric line


def test_approx_sums_and_mixed_inputs():
    g = compose_basic([ApproxDP(epsilon=0.5, delta=1e-6), PureDP(0.25), (ApproxDP(epsilon=0.1, delta=1e-7), 3)])
    assert isinstance(g, ApproxDP)
    assert float(g.epsilon) == pytest.approx(1.05, rel=1e-15)
    assert float(g.delta) == pytest.approx(1.3e-6, rel=1e-14)
    assert g.epsilon.kind == g.delta.kind == "upper" and "3.16" in g.delta.method


def test_approx_sum_of_deltas_is_above_the_exact_delta_at_the_summed_epsilon():
    pairs = [(0.5, 1e-2), (0.2, 3e-2), (0.1, 5e-2)]
    g = compose_basic([ApproxDP(epsilon=e, delta=d) for e, d in pairs])
    exact = compose_optimal_heterogeneous(
        [ApproxDP(epsilon=e, delta=d) for e, d in pairs], epsilon_total=float(g.epsilon)
    )
    assert float(exact.delta) == pytest.approx(1 - math.prod(1 - d for _, d in pairs), rel=1e-12)
    assert float(g.delta) > float(exact.delta)


def test_counts_multiply():
    assert float(compose_basic([(PureDP(0.1), 10)]).epsilon) == float(compose_basic([PureDP(0.1)] * 10).epsilon)
    assert float(compose_basic([(PureDP(0.1), 10)]).epsilon) == pytest.approx(1.0, rel=1e-15)


def test_basic_refuses_vacuous_delta():
    with pytest.raises(ValueError, match=r"the deltas sum to 1\.2\d* > 1"):
        compose_basic([(ApproxDP(epsilon=0.1, delta=0.4), 3)])


# ---- parallel composition ----------------------------------------------------------------------


def test_parallel_values():
    parts = [PureDP(1.0), PureDP(0.5), PureDP(0.25)]
    assert float(compose_parallel(parts).epsilon) == 1.0
    assert float(compose_parallel(parts, neighboring="substitute").epsilon) == 1.5
    assert float(compose_parallel([PureDP(0.7)], neighboring="substitute").epsilon) == 0.7  # one part
    assert float(compose_parallel([(PureDP(0.7), 2), PureDP(0.1)], neighboring="substitute").epsilon) == 1.4
    g = compose_parallel([ApproxDP(epsilon=1.0, delta=1e-7), ApproxDP(epsilon=0.2, delta=1e-5)])
    assert (float(g.epsilon), float(g.delta)) == (1.0, 1e-5) and g.epsilon.kind == "upper"
    h = compose_parallel([ApproxDP(epsilon=1.0, delta=1e-7), ApproxDP(epsilon=0.2, delta=1e-5), PureDP(0.5)],
                         neighboring="substitute")
    assert float(h.epsilon) == 1.5 and float(h.delta) == pytest.approx(1e-5 + 1e-7, rel=1e-15)


@pytest.mark.parametrize("neighboring", ["add_remove", "substitute"])
def test_parallel_laplace_histogram_attains_the_bound(neighboring):
    """Counts of three disjoint bins with Laplace noise of scales 1/eps_i."""
    epsilons = [1.0, 0.5, 0.25]
    per_bin = [float(max_divergence(Laplace(0, 1 / e), Laplace(1, 1 / e))) for e in epsilons]
    if neighboring == "add_remove":  # one bin count moves by one
        worst = max(per_bin)
    else:  # a record moves from bin i to bin j: two counts move, independent noises add losses
        worst = max(per_bin[i] + per_bin[j] for i in range(3) for j in range(3) if i != j)
    g = compose_parallel([PureDP(e) for e in epsilons], neighboring=neighboring)
    assert g.epsilon.kind == "exact" and float(g.epsilon) == pytest.approx(worst, rel=1e-12)


def test_seed_004_parallel_needs_disjoint_parts():
    """Seed 004: 'M(X) eps-DP and union X_i = X => M(X_i) eps-DP'. With overlapping parts (here
    X_1 = X_2 = X) releasing both costs 2 eps, not eps: disjointness is what makes it the max."""
    eps = 0.5
    p, q = rr(eps)
    both = max_divergence(product([p, p]), product([q, q]))  # one record in both parts
    assert float(both) == pytest.approx(2 * eps, rel=1e-12)
    assert float(compose_parallel([PureDP(eps)] * 2).epsilon) == eps  # valid only for disjoint parts
    assert float(compose_basic([PureDP(eps)] * 2).epsilon) == pytest.approx(float(both), rel=1e-12)
    assert float(hockey_stick(product([p, p]), product([q, q]), eps)) > 0  # not eps-DP


def test_parallel_accepts_an_enum_like_neighboring():
    class Neighboring:  # what a package-wide enum member looks like
        value = "substitute"

    assert float(compose_parallel([PureDP(1.0), PureDP(0.5)], neighboring=Neighboring()).epsilon) == 1.5  # type: ignore[arg-type]


def test_ten_spends_of_a_tenth_exceed_one_regression():
    """Issue 11: the exact sum of ten copies of the float 0.1 is 1 + 5.55e-17; basic composition
    rounds it up, so a budget of 1.0 (compared in the same direction) refuses the tenth spend."""
    from fractions import Fraction

    from dpkit.accounting import Accountant
    from dpkit.errors import BudgetExceededError

    g = compose_basic([PureDP(0.1)] * 10)
    assert g.epsilon.kind == "exact" and float(g.epsilon) > 1.0
    assert Fraction(float(g.epsilon)) >= 10 * Fraction(0.1)  # never below the exact sum
    assert float(g.epsilon) == math.nextafter(1.0, 2.0)  # and the float just above it
    acc = Accountant(PureDP(1.0))
    for _ in range(9):
        acc.spend(PureDP(0.1))
    with pytest.raises(BudgetExceededError):
        acc.spend(PureDP(0.1))
    approx = compose_basic([ApproxDP(epsilon=0.1, delta=1e-7)] * 10)
    assert Fraction(float(approx.epsilon)) >= 10 * Fraction(0.1)
    assert Fraction(float(approx.delta)) >= 10 * Fraction(1e-7)
