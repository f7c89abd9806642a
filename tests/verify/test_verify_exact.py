r"""Tests of dpkit.verify.exact: Remark 3.1 on pairs and finite mechanisms.

References are independent of the code under test: Definition 3.6 evaluated verbatim by
enumerating every output set, with exact rational set masses (``fractions.Fraction``) and mpmath
logarithms/exponentials at 50 digits; the hockey-stick as the sum of (p - e^eps q)_+ in mpmath.
Tolerances: decisions must agree exactly (cases within 1e-40 of the boundary, where a 50-digit
reference could itself be wrong, are skipped); reported epsilons and deltas are upper bounds,
so they must be >= the reference and within RTOL = 1e-12 (relative, absolute below 1) of it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpkit.distributions import Bernoulli, Finite, Gaussian, Laplace
from dpkit.divergences import hockey_stick
from dpkit.verify import FiniteMechanism, TableVerdict, Verdict, load_mechanism_csv, pair, table
from reference.mp import continuous, laplace_pair
from strategies import pmf_pairs, pmfs

mp.mp.dps = 50
RTOL = 1e-12
ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------------------------
def exact_hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> mp.mpf:
    gamma = mp.exp(mp.mpf(epsilon))
    return mp.fsum(max(mp.mpf(a) - gamma * mp.mpf(b), 0) for a, b in zip(p.tolist(), q.tolist()))


def exact_approx_max(p: np.ndarray, q: np.ndarray, delta: float) -> mp.mpf:
    """Def 3.6 verbatim: max over S inside Supp(P), P(S) >= delta, of ln((P(S) - delta)/Q(S))."""
    best = mp.ninf
    support = [i for i in range(p.size) if p[i] > 0]
    d = Fraction(delta)
    for r in range(1, len(support) + 1):
        for s in itertools.combinations(support, r):
            ps = sum((Fraction(float(p[i])) for i in s), Fraction(0))
            qs = sum((Fraction(float(q[i])) for i in s), Fraction(0))
            if ps < d or ps - d == 0:
                continue
            if qs == 0:
                return mp.inf
            value = mp.log(mp.mpf((ps - d).numerator) / (ps - d).denominator) - mp.log(
                mp.mpf(qs.numerator) / qs.denominator)
            best = max(best, value)
    return best


def upper_and_close(reported: float, exact: mp.mpf) -> bool:
    """reported >= exact, and not by more than RTOL (relative; absolute below 1)."""
    if exact == mp.inf:
        return reported == math.inf
    return mp.mpf(reported) >= exact and mp.mpf(reported) - exact <= RTOL * max(1, abs(exact))


# ---------------------------------------------------------------------------------------------
# pair
# ---------------------------------------------------------------------------------------------
def test_randomized_response_is_exactly_ln3_dp() -> None:
    P, Q = Bernoulli(0.75), Bernoulli(0.25)
    ln3 = math.log(3.0)
    assert mp.mpf(ln3) > mp.log(3)  # the double nearest ln 3 lies above it, so the claim is true
    verdict = pair(P, Q, epsilon=ln3)
    assert verdict.holds and verdict.tightest_delta == 0.0
    assert upper_and_close(verdict.tightest_epsilon, mp.log(3))
    below = pair(P, Q, epsilon=math.nextafter(ln3, 0.0))  # one ulp below ln 3: false, by ~1e-16
    assert not below.holds
    assert below.witness == (1,) and below.direction == "P||Q"
    assert (below.witness_p, below.witness_q) == (0.75, 0.25)


def test_failure_carries_a_witness_set() -> None:
    Y, Z = Finite([1.0, 0.0], support=["a", "b"]), Finite([0.5, 0.5], support=["a", "b"])
    verdict = pair(Y, Z, epsilon=math.log(2), delta=0.25)
    assert not verdict.holds
    assert verdict.direction == "Q||P" and verdict.tightest_epsilon == math.inf
    assert verdict.witness == ("b",) and verdict.witness_q == 0.5 and verdict.witness_p == 0.0
    assert verdict.tightest_delta == 0.5
    text = str(verdict)
    assert "FAILS" in text and "witness S = {b}" in text and "Q(S) = 0.5" in text


def test_total_variation_claims_at_the_boundary_are_decided_exactly() -> None:
    """E_1 = 0.25 exactly: delta = 0.25 holds, the next double below does not."""
    P, Q = Finite([0.5, 0.5]), Finite([0.25, 0.75])
    assert pair(P, Q, epsilon=0.0, delta=0.25).holds
    assert pair(P, Q, epsilon=0.0, delta=0.25).tightest_epsilon == 0.0
    assert not pair(P, Q, epsilon=0.0, delta=math.nextafter(0.25, 0.0)).holds


@SETTINGS
@given(pmf_pairs(max_size=6), st.floats(0.0, 5.0),
       st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1e-300, 1e-20, 1e-9, 0.5, 1.0])))
def test_pair_agrees_with_definition_3_6(pq: tuple[np.ndarray, np.ndarray], epsilon: float, delta: float) -> None:
    p, q = pq
    verdict = pair(Finite(p), Finite(q), epsilon=epsilon, delta=delta)
    e_pq, e_qp = exact_hockey_stick(p, q, epsilon), exact_hockey_stick(q, p, epsilon)
    worst_e = max(e_pq, e_qp)
    assume(abs(worst_e - delta) > mp.mpf(10) ** -40)
    assert verdict.holds == (worst_e <= delta)
    assert upper_and_close(verdict.tightest_delta, min(worst_e, 1))  # masses may sum to 1 + 1e-16
    d_exact = max(exact_approx_max(p, q, delta), exact_approx_max(q, p, delta), 0)
    assert upper_and_close(verdict.tightest_epsilon, d_exact), (verdict.tightest_epsilon, d_exact)
    if not verdict.holds:
        first, second = (p, q) if verdict.direction == "P||Q" else (q, p)
        s = Finite(p).index_of(np.array(verdict.witness))
        mass_first, mass_second = mp.fsum(first[s].tolist()), mp.fsum(second[s].tolist())
        assert (verdict.witness_p, verdict.witness_q) == (
            (float(mass_first), float(mass_second)) if verdict.direction == "P||Q" else
            (float(mass_second), float(mass_first)))
        # the witness attains the hockey-stick of the worst direction (up to the loss rounding)
        excess = mass_first - mp.exp(epsilon) * mass_second
        assert abs(excess - max(e_pq if verdict.direction == "P||Q" else e_qp, 0)) <= 1e-13
        if worst_e - delta > 1e-12:
            assert excess > delta


def test_continuous_pair_uses_the_divergences() -> None:
    # Laplace(0,1) vs Laplace(1,1): delta(0.5) = 0.221199216928595 (mpmath quadrature, tests/reference/mp.py)
    reference = continuous(*laplace_pair(1, 1), "hockey", 0.5)
    verdict = pair(Laplace(0, 1), Laplace(1, 1), epsilon=0.5, delta=0.25)
    assert verdict.holds
    assert verdict.tightest_delta == pytest.approx(float(reference), rel=1e-10)
    assert not pair(Laplace(0, 1), Laplace(1, 1), epsilon=0.5, delta=0.2).holds
    assert pair(Laplace(0, 1), Laplace(1, 1), epsilon=1.0).holds  # pure epsilon = t = 1
    gaussian = pair(Gaussian(0, 1), Gaussian(1, 1), epsilon=5.0)  # no finite pure epsilon
    assert not gaussian.holds and gaussian.tightest_epsilon == math.inf and gaussian.witness is None


def test_verdict_is_a_frozen_value() -> None:
    verdict = pair(Bernoulli(0.5), Bernoulli(0.5), epsilon=0.0)
    assert verdict.holds and verdict.tightest_epsilon == 0.0 and verdict.witness is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.holds = False  # type: ignore[misc]
    assert "HOLDS" in str(verdict)


# ---------------------------------------------------------------------------------------------
# table
# ---------------------------------------------------------------------------------------------
@st.composite
def mechanisms(draw: st.DrawFn) -> tuple[np.ndarray, list[tuple[int, int]] | None]:
    n_out = draw(st.integers(1, 6))
    n_in = draw(st.integers(2, 5))
    rows = np.stack([draw(pmfs(min_size=n_out, max_size=n_out)) for _ in range(n_in)])
    if draw(st.booleans()):
        return rows, None
    all_pairs = [(i, j) for i in range(n_in) for j in range(n_in) if i != j]
    return rows, draw(st.lists(st.sampled_from(all_pairs), min_size=1, max_size=6))


@SETTINGS
@given(mechanisms(), st.floats(0.0, 4.0), st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1e-300, 1e-9])))
def test_table_is_the_worst_of_its_pairs(mech: tuple[np.ndarray, list[tuple[int, int]] | None], epsilon: float,
                                         delta: float) -> None:
    rows, neighbors = mech
    verdict = table(rows, epsilon=epsilon, delta=delta, neighbors=neighbors)
    checked = neighbors if neighbors is not None else [(i, i + 1) for i in range(rows.shape[0] - 1)]
    assert verdict.neighbors == tuple(checked)
    singles = [pair(Finite(rows[i]), Finite(rows[j]), epsilon=epsilon, delta=delta) for i, j in checked]
    assert verdict.holds == all(v.holds for v in singles)
    assert verdict.tightest_epsilon == max(v.tightest_epsilon for v in singles)
    assert verdict.tightest_delta == max(v.tightest_delta for v in singles)
    for padded, single in zip(verdict.pair_epsilons, singles):  # float bounds, padded by <= ~1e-12
        assert single.tightest_epsilon <= padded <= single.tightest_epsilon + 1e-10 * max(1.0, padded)
    # cross-check with dpkit.divergences: the largest hockey-stick over pairs and directions
    library = max(max(float(hockey_stick(Finite(rows[i]), Finite(rows[j]), epsilon=epsilon)),
                      float(hockey_stick(Finite(rows[j]), Finite(rows[i]), epsilon=epsilon))) for i, j in checked)
    assert verdict.tightest_delta == pytest.approx(library, rel=1e-12, abs=1e-15)
    i, j = verdict.worst_pair
    assert (i, j) in checked or (j, i) in checked
    if not verdict.holds:
        assert verdict.witness is not None and verdict.witness_masses is not None
        s = np.array(verdict.witness, dtype=np.intp)
        assert verdict.witness_masses == (math.fsum(rows[i, s].tolist()), math.fsum(rows[j, s].tolist()))


def test_table_reports_the_worst_pair() -> None:
    rows = [[0.5, 0.3, 0.2], [0.3, 0.3, 0.4], [0.1, 0.3, 0.6]]  # examples/leaky_mechanism.csv
    verdict = table(rows, epsilon=1.0, outputs=["a", "b", "c"])
    assert not verdict.holds
    assert verdict.worst_pair == (1, 2)  # 0.3 / 0.1 = 3 on output "a"
    assert upper_and_close(verdict.tightest_epsilon, mp.log(3))
    assert verdict.witness == ("a",) and verdict.witness_masses == (0.3, 0.1)
    assert verdict.tightest_delta == pytest.approx(0.3 - math.e * 0.1, rel=1e-14)
    # x0 vs x1: max(ln(0.5/0.3), ln(0.4/0.2)) = ln 2; x1 vs x2: ln(0.3/0.1) = ln 3
    assert verdict.pair_epsilons == pytest.approx([math.log(2), math.log(3)], rel=1e-13)
    text = str(verdict)
    assert "FAILS" in text and "row 1 || row 2" in text and "witness S = {a}" in text
    assert table(rows, epsilon=1.0, neighbors=[(0, 1)]).holds  # x1-x2 no longer neighbours
    assert table(rows, epsilon=math.log(3)).holds


def test_table_vectorised_over_many_pairs() -> None:
    """A 200-input mechanism (geometric-like rows) against its closed-form epsilon."""
    n, scale = 200, 3.0
    k = np.arange(n)
    logits = -np.abs(k[None, :] - k[:, None]) / scale
    rows = np.exp(logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True)))
    rows = rows / rows.sum(axis=1, keepdims=True)
    verdict = table(rows, epsilon=1.0)
    singles = [pair(Finite(rows[i]), Finite(rows[i + 1]), epsilon=1.0) for i in range(n - 1)]
    assert verdict.tightest_epsilon == max(v.tightest_epsilon for v in singles)
    assert verdict.holds == all(v.holds for v in singles)


# ---------------------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------------------
def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mechanism.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_header_and_input_labels(tmp_path: Path) -> None:
    m = load_mechanism_csv(write(tmp_path, "# randomized response\ninput,no,yes\nno,3/4,1/4\n\nyes,0.25,0.75\n"))
    assert isinstance(m, FiniteMechanism)
    assert m.inputs == ("no", "yes") and m.outputs == ("no", "yes")
    assert m.rows.tolist() == [[0.75, 0.25], [0.25, 0.75]]
    assert not m.rows.flags.writeable


def test_csv_pandas_style_index_and_bare_tables(tmp_path: Path) -> None:
    m = load_mechanism_csv(write(tmp_path, ",a,b\n0,0.5,0.5\n1,0.25,0.75\n"))
    assert m.inputs == ("0", "1") and m.outputs == ("a", "b")
    bare = load_mechanism_csv(write(tmp_path, "0.5,0.5\n0.25,0.75\n"))
    assert bare.inputs == (0, 1) and bare.outputs == (0, 1)
    no_corner = load_mechanism_csv(write(tmp_path, "a,b\nx,0.5,0.5\ny,0.25,0.75\n"))
    assert no_corner.inputs == ("x", "y") and no_corner.outputs == ("a", "b")


def test_examples_in_the_repository() -> None:
    m = load_mechanism_csv(ROOT / "examples" / "randomized_response.csv")
    assert table(m.rows, epsilon=1.0986123, outputs=m.outputs).holds
    leaky = load_mechanism_csv(ROOT / "examples" / "leaky_mechanism.csv")
    assert leaky.inputs == ("x0", "x1", "x2") and leaky.outputs == ("a", "b", "c")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no rows"),
        ("a,b\n", "only a header"),
        ("0.5,0.5\n0.5\n", "line 2: 1 cells"),
        ("x,0.5,0.5\ny,0.5,half\n", "line 2: 'half' is not a probability"),
        ("in,a,b\nx,0.5,0.5\ny,0.5,0.6\n", r"row 1 \(input y, line 3\) is not a pmf: .*sum to 1"),
        ("in,a,b\nx,0.5,0.5\ny,nan,0.5\n", r"row 1 \(input y, line 3\) .*finite"),
        ("a,b,c\n0.5,0.5\n0.2,0.8\n", "header has 3 labels for 2"),
        ("in,a,b\nx,0.5,0.5\n", "at least 2 rows"),
    ],
)
def test_csv_refuses_bad_files(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_mechanism_csv(write(tmp_path, text))


# ---------------------------------------------------------------------------------------------
# validation at the boundary
# ---------------------------------------------------------------------------------------------
RR = [[0.75, 0.25], [0.25, 0.75]]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1e-12])
def test_epsilon_must_be_finite_and_non_negative(value: float) -> None:
    with pytest.raises(ValueError, match=r"epsilon must be finite and >= 0; got"):
        table(RR, epsilon=value)
    with pytest.raises(ValueError, match=r"epsilon must be finite and >= 0; got"):
        pair(Bernoulli(0.5), Bernoulli(0.5), epsilon=value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.1, 1.5])
def test_delta_must_be_in_the_unit_interval(value: float) -> None:
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]; got"):
        table(RR, epsilon=1.0, delta=value)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]; got"):
        pair(Bernoulli(0.5), Bernoulli(0.5), epsilon=1.0, delta=value)


@pytest.mark.parametrize(
    ("rows", "kwargs", "error", "match"),
    [
        ([[0.5, 0.5], [0.5, 0.5 + 1e-8]], {}, ValueError, r"row 1 is not a pmf: probabilities must sum to 1"),
        ([[0.5, 0.5], [1.5, -0.5]], {}, ValueError, r"row 1 is not a pmf: .*>= 0"),
        ([[0.5, 0.5], [math.nan, 0.5]], {}, ValueError, r"row 1 is not a pmf: .*finite"),
        ([[0.5, 0.5], [math.inf, 0.5]], {}, ValueError, r"row 1 is not a pmf: .*finite"),
        ([[0.5, 0.5], [0.5, 0.5]], {"inputs": ["a", "b"]}, None, None),
        ([[0.5, 0.5], [0.2, 0.7]], {"inputs": ["a", "b"]}, ValueError, r"row 1 \(input b\) is not a pmf"),
        ([0.5, 0.5], {}, ValueError, "2-D array"),
        ([[1.0]], {}, ValueError, "at least 2 rows"),
        ([["a", "b"], ["c", "d"]], {}, ValueError, "2-D array of probabilities"),
        (RR, {"neighbors": [(0, 2)]}, ValueError, "out of range"),
        (RR, {"neighbors": [(1, 1)]}, ValueError, "not its own neighbour"),
        (RR, {"neighbors": []}, ValueError, "neighbors is empty"),
        (RR, {"neighbors": [(0,)]}, ValueError, r"list of \(i, j\) row pairs"),
        (RR, {"neighbors": [(0, 1.0)]}, TypeError, "integer row indices"),
        (RR, {"outputs": ["a"]}, ValueError, "one label per column"),
        (RR, {"outputs": ["a", "a"]}, ValueError, "distinct"),
        (RR, {"inputs": ["a"]}, ValueError, "inputs has 1 labels"),
    ],
)
def test_table_refuses_bad_input(rows: object, kwargs: dict[str, object], error: type[Exception] | None,
                                 match: str | None) -> None:
    if error is None:
        assert table(rows, epsilon=0.0, **kwargs).holds  # type: ignore[arg-type]
        return
    with pytest.raises(error, match=match):
        table(rows, epsilon=1.0, **kwargs)  # type: ignore[arg-type]


def test_pair_refuses_mismatched_supports() -> None:
    with pytest.raises(ValueError, match="different supports"):
        pair(Finite([0.5, 0.5], support=[0, 1]), Finite([0.5, 0.5], support=[1, 2]), epsilon=1.0)


def test_verdicts_check_their_own_fields() -> None:
    with pytest.raises(ValueError, match="direction"):
        Verdict(holds=True, epsilon=1.0, delta=0.0, tightest_epsilon=0.0, tightest_delta=0.0,
                direction="P|Q")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="together"):
        TableVerdict(holds=False, epsilon=1.0, delta=0.0, tightest_epsilon=2.0, tightest_delta=0.1,
                     worst_pair=(0, 1), witness=(0,))
