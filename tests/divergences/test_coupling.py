"""The coupling characterisation of total variation (seed 001; docs/notes.md §7).

The maximal coupling has Pr[X != Y] = TV (TV computed independently, as an exact Fraction sum of the
float inputs), its marginals are P and Q, and a linear programme over *all* couplings of the two laws
finds nothing smaller: TV is the minimum, and the constructed coupling attains it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from dpkit import Finite, total_variation
from dpkit.divergences import maximal_coupling
from dpkit.errors import ArgumentTypeError


def _exact_tv(p, q) -> Fraction:
    return sum((abs(Fraction(a) - Fraction(b)) for a, b in zip(p, q, strict=True)), Fraction(0)) / 2


def _law(rng, n, zeros=0):
    w = rng.random(n)
    w[rng.permutation(n)[:zeros]] = 0.0
    w /= w.sum()
    return w


def _min_disagreement_lp(p, q) -> float:
    """min over couplings pi >= 0 with row sums p and column sums q of sum_{i != j} pi_ij (HiGHS, exact simplex)."""
    n = len(p)
    cost = (1.0 - np.eye(n)).ravel()
    rows = np.kron(np.eye(n), np.ones((1, n)))  # sum_j pi_ij = p_i
    cols = np.kron(np.ones((1, n)), np.eye(n))  # sum_i pi_ij = q_j
    res = linprog(cost, A_eq=np.vstack([rows, cols]), b_eq=np.concatenate([p, q]), bounds=(0, None),
                  method="highs-ds")
    assert res.status == 0, res.message
    return float(res.fun)


LAWS = [(seed, n, zeros) for seed in range(6) for n, zeros in ((2, 0), (3, 1), (5, 0), (6, 2))]


@pytest.mark.parametrize(("seed", "n", "zeros"), LAWS)
def test_maximal_coupling_disagrees_with_probability_tv(seed, n, zeros):
    rng = np.random.default_rng(seed)
    p, q = _law(rng, n, zeros), _law(rng, n, zeros)
    c = maximal_coupling(Finite(p), Finite(q))
    assert np.all(c.joint >= 0)
    px, qy = c.marginals()
    np.testing.assert_allclose(px, p, rtol=0, atol=1e-15)
    np.testing.assert_allclose(qy, q, rtol=0, atol=1e-15)
    tv = float(_exact_tv(p, q))
    assert c.disagreement == pytest.approx(tv, rel=1e-13, abs=1e-16)
    assert float(total_variation(Finite(p), Finite(q))) == pytest.approx(tv, rel=1e-13, abs=1e-16)


@pytest.mark.parametrize(("seed", "n", "zeros"), LAWS)
def test_no_coupling_does_better_than_tv(seed, n, zeros):
    """The LP optimum over all couplings is TV: the maximal coupling attains the minimum, none beats it."""
    rng = np.random.default_rng(100 + seed)
    p, q = _law(rng, n, zeros), _law(rng, n, zeros)
    best = _min_disagreement_lp(p, q)
    tv = float(_exact_tv(p, q))
    assert best == pytest.approx(tv, abs=1e-12)
    assert maximal_coupling(Finite(p), Finite(q)).disagreement <= best + 1e-12


def test_other_couplings_disagree_more():
    """The independent coupling and the LP's worst coupling disagree at least TV (the lower bound's proof)."""
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    independent = np.outer(p, q)
    assert 1.0 - np.trace(independent) >= float(_exact_tv(p, q))  # 0.66 >= 0.3
    c = maximal_coupling(Finite(p), Finite(q))
    assert c.disagreement == pytest.approx(0.3, abs=1e-15)
    assert c.disagreement < 1.0 - np.trace(independent)


def test_randomized_response_pair():
    """Seed 001's example of a pair: randomised response at epsilon has TV = (e^eps - 1)/(e^eps + 1)."""
    eps = 1.0
    a = np.exp(eps) / (1 + np.exp(eps))
    c = maximal_coupling(Finite([a, 1 - a]), Finite([1 - a, a]))
    assert c.disagreement == pytest.approx(np.tanh(eps / 2), rel=1e-14)
    assert c.joint[0, 1] == pytest.approx(np.tanh(eps / 2), rel=1e-14) and c.joint[1, 0] == 0.0


def test_equal_laws_never_disagree_and_different_supports_use_the_union():
    c = maximal_coupling(Finite([0.25, 0.75]), Finite([0.25, 0.75]))
    assert c.disagreement == 0.0 and np.allclose(c.joint, np.diag([0.25, 0.75]))
    d = maximal_coupling(Finite([1.0], support=[0]), Finite([0.5, 0.5], support=[0, 1]))
    assert d.support.tolist() == [0, 1] and d.disagreement == 0.5
    assert d.joint.tolist() == [[0.5, 0.5], [0.0, 0.0]]


def test_the_joint_table_is_read_only_and_bad_input_is_refused():
    c = maximal_coupling(Finite([0.5, 0.5]), Finite([0.2, 0.8]))
    with pytest.raises(ValueError):
        c.joint[0, 0] = 1.0
    from dpkit import Laplace
    with pytest.raises(ArgumentTypeError, match="Finite"):
        maximal_coupling(Laplace(0, 1), Finite([1.0]))
