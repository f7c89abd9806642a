r"""Property tests of :mod:`dpkit.divergences` on random finite distributions.

The pmfs come from ``tests/strategies.py``: up to 8 atoms, exact zeros, masses down to 1e-300,
near-equal pairs, and random Markov kernels for data processing.  Every property is a theorem
about exact divergences; what is checked is that dpkit's floating-point values obey it within

    tolerance(x, y) = ATOL + RTOL * max(|x|, |y|),   ATOL = 1e-12, RTOL = 1e-9.

Why this tolerance: the finite paths are exact sums of at most 8 terms computed from log masses;
with log-ratios bounded by ~1400 (masses >= 1e-300) and negative KL terms bounded by 1/e, the
rounding of a sum is below 8 * 2^-53 * (value + 1400 * 1e-300 + 1) ~ 1e-15 * (value + 1), and the
push-forward ``p @ K`` adds a relative error of n * 2^-53 to each mass.  ATOL/RTOL leave three
orders of magnitude of room over that and are still far below any violation a bug would cause.

Sources of the theorems: data processing for f-divergences and Rényi divergences (van Erven &
Harremoës 2014, arXiv 1206.2459v2, Thm 1 and Thm 9); monotonicity in alpha and the limits
alpha -> 1, alpha -> inf (ibid., Thm 3, Thm 5, Thm 6); Pinsker's inequality (Tsybakov 2009,
Lemma 2.5); D^delta_inf as the inverse of the hockey-stick (docs/notes.md §2, proved in
``dpkit.divergences.max_divergence``'s docstring); Dwork & Roth 2014, Def 3.5, 3.6 (seeds 000/003).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpkit.distributions import Finite
from dpkit.divergences import (
    approx_max_divergence,
    hockey_stick,
    kl,
    max_divergence,
    renyi,
    statistical_distance,
    total_variation,
)
from strategies import distinct_pmf_pairs, markov_kernels, pmf_pairs

ATOL = 1e-12
RTOL = 1e-9
ALPHAS = (0.1, 0.5, 0.9, 0.99, 1.0, 1.01, 1.5, 2.0, 5.0, 20.0, 100.0, math.inf)

# derandomize: the same examples on every run, so CI is deterministic; explore more with
# ``--hypothesis-seed`` or by raising max_examples locally (4000 examples per test were run once).
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

epsilons = st.floats(min_value=-2.0, max_value=5.0, allow_nan=False)
deltas = st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 1e-300, 1e-12, 1e-6, 0.5, 1.0]))


def tol(x: float, y: float = 0.0) -> float:
    """The double-precision allowance of the module docstring."""
    return ATOL + RTOL * max(abs(float(x)), abs(float(y)))


def le(x: float, y: float) -> bool:
    """x <= y up to rounding; +inf on the right always holds."""
    x, y = float(x), float(y)
    if y == math.inf or x == -math.inf:
        return True
    if x == math.inf or y == -math.inf:
        return False
    return x <= y + tol(x, y)


def close(x: float, y: float) -> bool:
    return le(x, y) and le(y, x)


def show(*arrays: np.ndarray | tuple[np.ndarray, ...]) -> str:
    """Full-precision text of the drawn pmfs for failure messages (numpy's repr rounds)."""
    flat: list[np.ndarray] = []
    for a in arrays:
        flat.extend(a if isinstance(a, tuple) else (a,))
    return "; ".join(repr(a.tolist()) for a in flat)


def F(p: np.ndarray) -> Finite:
    return Finite(p)


def divergences_of(P: Finite, Q: Finite) -> dict[str, float]:
    out = {"kl": kl(P, Q), "tv": total_variation(P, Q), "E_1": hockey_stick(P, Q, epsilon=0.0),
           "max": max_divergence(P, Q)}
    for a in ALPHAS:
        out[f"renyi({a})"] = renyi(P, Q, alpha=a)
    return out


# ---------------------------------------------------------------------------------------------
# non-negativity and identity
# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(pmf_pairs())
def test_divergences_are_non_negative(pq: tuple[np.ndarray, np.ndarray]) -> None:
    P, Q = F(pq[0]), F(pq[1])
    for name, value in divergences_of(P, Q).items():
        assert float(value) >= 0.0, (name, value, show(pq))
    for e in (-1.0, 0.5, 3.0):
        assert float(hockey_stick(P, Q, epsilon=e)) >= 0.0


@SETTINGS
@given(pmf_pairs().map(lambda pq: pq[0]), epsilons)
def test_divergences_vanish_on_equal_laws(p: np.ndarray, epsilon: float) -> None:
    P = F(p)
    for name, value in divergences_of(P, P).items():
        assert float(value) == 0.0, (name, value, show(p))
    # E_gamma(P||P) = (1 - gamma)_+ exactly: 0 for epsilon >= 0, 1 - e^epsilon below
    expected = -math.expm1(epsilon) if epsilon < 0 else 0.0
    assert close(hockey_stick(P, P, epsilon=epsilon), expected)


@SETTINGS
@given(distinct_pmf_pairs(gap=1e-4))
def test_divergences_are_positive_on_distinct_laws(pq: tuple[np.ndarray, np.ndarray]) -> None:
    """'Zero only if equal': a gap of 1e-4 at one atom puts every divergence >= ~1e-10 >> rounding."""
    P, Q = F(pq[0]), F(pq[1])
    for name, value in divergences_of(P, Q).items():
        assert float(value) > 0.0, (name, value, show(pq))


# ---------------------------------------------------------------------------------------------
# data processing inequality
# ---------------------------------------------------------------------------------------------
@st.composite
def pairs_and_kernels(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p, q = draw(pmf_pairs())
    return p, q, draw(markov_kernels(p.size))


@SETTINGS
@given(pairs_and_kernels(), epsilons, deltas)
def test_data_processing_inequality(pqk: tuple[np.ndarray, np.ndarray, np.ndarray], epsilon: float,
                                    delta: float) -> None:
    p, q, k = pqk
    P, Q = F(p), F(q)
    PK, QK = F(p @ k), F(q @ k)  # push-forward through the kernel: a matrix product
    before, after = divergences_of(P, Q), divergences_of(PK, QK)
    for name in before:
        assert le(after[name], before[name]), (name, after[name], before[name], show(pqk))
    assert le(hockey_stick(PK, QK, epsilon=epsilon), hockey_stick(P, Q, epsilon=epsilon)), show(pqk)
    assert le(approx_max_divergence(PK, QK, delta=delta), approx_max_divergence(P, Q, delta=delta)), show(pqk)


# ---------------------------------------------------------------------------------------------
# the delta-approximate max divergence
# ---------------------------------------------------------------------------------------------
def _subsets(n: int) -> np.ndarray:
    """All 2^n subsets of n atoms as a boolean matrix (one row per subset)."""
    return np.array(list(itertools.product([False, True], repeat=n)), dtype=bool)


def brute_force_approx_max(p: np.ndarray, q: np.ndarray, delta: float) -> float:
    """Definition 3.6 verbatim: max over S within Supp(P) with P(S) >= delta of ln((P(S)-delta)/Q(S))."""
    best = -math.inf
    live = p > 0
    for s in _subsets(p.size):
        if not s.any() or np.any(s & ~live):
            continue
        ps, qs = math.fsum(p[s].tolist()), math.fsum(q[s].tolist())
        if ps < delta or ps - delta <= 0:
            continue
        best = max(best, math.inf if qs == 0 else math.log(ps - delta) - math.log(qs))
    return best


def brute_force_hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """sup_S P(S) - e^epsilon Q(S), by enumeration."""
    subsets = _subsets(p.size)
    return float(np.max(subsets @ p - math.exp(epsilon) * (subsets @ q)))


@SETTINGS
@given(pmf_pairs(), st.lists(deltas, min_size=2, max_size=6))
def test_approx_max_divergence_is_non_increasing_in_delta(pq: tuple[np.ndarray, np.ndarray],
                                                          ds: list[float]) -> None:
    P, Q = F(pq[0]), F(pq[1])
    values = [approx_max_divergence(P, Q, delta=d) for d in sorted(ds)]
    for smaller_delta, larger_delta in zip(values[:-1], values[1:]):
        assert le(larger_delta, smaller_delta), (sorted(ds), values, show(pq))
    assert float(approx_max_divergence(P, Q, delta=0.0)) == float(max_divergence(P, Q))


@SETTINGS
@given(pmf_pairs(max_size=7), st.floats(min_value=1e-9, max_value=0.999))
def test_approx_max_divergence_matches_the_definition(pq: tuple[np.ndarray, np.ndarray], delta: float) -> None:
    """dpkit inverts the hockey-stick; Def 3.6 maximises over sets: the two must agree."""
    p, q = pq
    exact = brute_force_approx_max(p, q, delta)
    got = float(approx_max_divergence(F(p), F(q), delta=delta))
    if exact == -math.inf:  # no set with P(S) > delta inside Supp(P): only delta = 1 does that
        assert got == -math.inf
    else:
        assert close(got, exact), (got, exact, show(pq))


@SETTINGS
@given(pmf_pairs(), epsilons)
def test_hockey_stick_matches_the_supremum_over_sets(pq: tuple[np.ndarray, np.ndarray], epsilon: float) -> None:
    p, q = pq
    assert close(hockey_stick(F(p), F(q), epsilon=epsilon), brute_force_hockey_stick(p, q, epsilon)), show(pq)


def hockey_stick_error(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """A bound on the rounding error of the finite hockey-stick sum: outputs whose loss ln(p/q) is
    within its rounding error eta of epsilon may count or not, and move their term by <= p * eta."""
    live = (p > 0) & (q > 0)
    logp, logq = np.log(p[live]), np.log(q[live])
    eta = 4 * 2.0**-52 * (np.abs(logp) + np.abs(logq) + 1.0)
    near = logp - logq > epsilon - eta
    return float(np.sum(p[live][near] * eta[near])) + 1e-15 * float(np.sum(p))


@SETTINGS
@given(pmf_pairs(), st.floats(min_value=0.0, max_value=5.0), deltas)
def test_hockey_stick_and_approx_max_divergence_are_inverse(pq: tuple[np.ndarray, np.ndarray], epsilon: float,
                                                            delta: float) -> None:
    """E_{e^eps}(P||Q) <= delta  iff  D^delta_inf(P||Q) <= eps, away from the boundary.

    Cases are skipped when h is within its rounding error (plus 1e-9 relative) of delta, or the
    divergence within 1e-9 (relative, absolute below 1) of epsilon.
    """
    p, q = pq
    P, Q = F(p), F(q)
    h = float(hockey_stick(P, Q, epsilon=epsilon))
    d = float(approx_max_divergence(P, Q, delta=delta))
    assume(abs(h - delta) > hockey_stick_error(p, q, epsilon) + 1e-9 * max(h, delta))
    assume(not (math.isfinite(d) and abs(d - epsilon) <= 1e-9 * max(1.0, abs(epsilon))))
    assert (h <= delta) == (d <= epsilon), (h, delta, d, epsilon, show(pq))


def test_approx_max_divergence_for_tiny_delta_regression() -> None:
    """Found by test_approx_max_divergence_is_non_increasing_in_delta (4000 random examples); fixed by
    taking the exact maximum over level sets after Newton's method has selected the candidates."""
    p = np.array([0.5, 5e-17, 0.5, 0.0])
    q = np.array([1 / 3, 3.333333333333333e-18, 1 / 3, 1 / 3])
    # Def 3.6 by enumeration: the best set is {1}, ln((5e-17 - 1e-300) / 3.333...e-18) = ln 15
    exact = brute_force_approx_max(p, q, 1e-300)
    assert exact == pytest.approx(math.log(15.0), rel=1e-14)
    assert float(approx_max_divergence(F(p), F(q), delta=1e-300)) == pytest.approx(exact, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# total variation, statistical distance, E_1 and Pinsker
# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(pmf_pairs())
def test_total_variation_equals_e1_and_statistical_distance(pq: tuple[np.ndarray, np.ndarray]) -> None:
    P, Q = F(pq[0]), F(pq[1])
    tv = float(total_variation(P, Q))
    assert abs(tv - float(hockey_stick(P, Q, epsilon=0.0))) <= 1e-12, show(pq)
    assert abs(tv - float(statistical_distance(P, Q))) <= 1e-12, show(pq)
    assert abs(tv - float(hockey_stick(Q, P, epsilon=0.0))) <= 1e-12, show(pq)


@SETTINGS
@given(pmf_pairs())
def test_pinsker(pq: tuple[np.ndarray, np.ndarray]) -> None:
    """KL >= 2 TV^2, in this squared form: KL has an absolute rounding error of ~1e-17 (terms
    p ln(p/q) cancel for near-equal pairs), which a square root would magnify to ~1e-17/TV."""
    P, Q = F(pq[0]), F(pq[1])
    tv = float(total_variation(P, Q))
    assert le(2.0 * tv**2, kl(P, Q)), show(pq)


# ---------------------------------------------------------------------------------------------
# Rényi: monotone in alpha, and its limits
# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(pmf_pairs())
def test_renyi_is_non_decreasing_in_alpha(pq: tuple[np.ndarray, np.ndarray]) -> None:
    P, Q = F(pq[0]), F(pq[1])
    values = [renyi(P, Q, alpha=a) for a in ALPHAS]
    for lower, higher in zip(values[:-1], values[1:]):
        assert le(lower, higher), (list(zip(ALPHAS, map(float, values))), show(pq))


def _live_loss(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    live = (p > 0) & (q > 0)
    return p[live], np.log(p[live]) - np.log(q[live])


@SETTINGS
@given(pmf_pairs())
def test_renyi_tends_to_kl_at_alpha_one(pq: tuple[np.ndarray, np.ndarray]) -> None:
    r"""|D_{1+s} - KL| <= |s| R^2 / 8 with R the range of the loss L = ln(p/q).

    D_{1+s} = phi(s)/s with phi(s) = ln E_P e^{sL}, phi(0) = 0, phi'(0) = KL and phi'' a variance
    of L (under a tilted law), which is <= R^2/4 (Popoviciu); Taylor's theorem gives the bound.
    """
    p, q = pq
    P, Q = F(p), F(q)
    divergence = float(kl(P, Q))
    assume(math.isfinite(divergence))  # supp P within supp Q
    _, loss = _live_loss(p, q)
    spread = float(np.ptp(loss))
    for s in (1e-9, -1e-9, 1e-6, -1e-6):
        gap = abs(float(renyi(P, Q, alpha=1.0 + s)) - divergence)
        assert gap <= abs(s) * spread**2 / 8 + tol(divergence) + 1e-15 * float(np.max(np.abs(loss))), (s, gap, show(pq))


@SETTINGS
@given(pmf_pairs())
def test_renyi_tends_to_max_divergence(pq: tuple[np.ndarray, np.ndarray]) -> None:
    r"""max_i [L_i + ln p_i / (alpha - 1)] <= D_alpha <= D_inf: the gap closes like 1/(alpha - 1)."""
    p, q = pq
    P, Q = F(p), F(q)
    d_inf = float(max_divergence(P, Q))
    for a in (1e3, 1e6, 1e9):
        d_a = float(renyi(P, Q, alpha=a))
        if d_inf == math.inf:
            assert d_a == math.inf
            continue
        p_live, loss = _live_loss(p, q)
        lower = float(np.max(loss + np.log(p_live) / (a - 1.0)))
        assert le(lower, d_a) and le(d_a, d_inf), (a, lower, d_a, d_inf, show(pq))


# ---------------------------------------------------------------------------------------------
# Finite refuses what is not a pmf
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("probabilities", "match"),
    [
        ([0.5, math.nan, 0.5], "finite"),
        ([0.5, math.inf, 0.5], "finite"),
        ([1.5, -0.5], ">= 0"),
        ([0.5, 0.5 + 1e-8], "sum to 1"),
        ([0.5, 0.5 - 1e-8], "sum to 1"),
        ([], "empty"),
    ],
)
def test_finite_refuses_non_pmfs(probabilities: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Finite(probabilities)


def test_finite_accepts_rounding_within_tolerance() -> None:
    assert len(Finite([0.5, 0.5 + 1e-12])) == 2


def test_finite_refuses_bad_supports() -> None:
    with pytest.raises(ValueError, match="labels"):
        Finite([0.5, 0.5], support=[0, 1, 2])
    with pytest.raises(ValueError, match="distinct"):
        Finite([0.5, 0.5], support=["a", "a"])


def test_divergences_refuse_mismatched_supports() -> None:
    P, Q = Finite([0.5, 0.5], support=[0, 1]), Finite([0.5, 0.5], support=[1, 2])
    for fn in (kl, total_variation, max_divergence):
        with pytest.raises(ValueError, match="different supports"):
            fn(P, Q)
    # the same labels in another order are aligned, not refused
    assert float(kl(Finite([0.25, 0.75], support=["a", "b"]), Finite([0.75, 0.25], support=["b", "a"]))) == 0.0
