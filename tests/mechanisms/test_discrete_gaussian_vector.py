"""The discrete Gaussian on integer vectors (issue 14, item 8): the worst integer shift, by brute force.

The reference here is independent of :mod:`dpkit.mechanisms._discrete_gaussian_vector`: every integer
shift vector v with ||v||_2^2 <= N in d coordinates is enumerated (no maximality argument), and its
hockey-stick divergence is summed in mpmath at 60 digits from the per-coordinate losses
(v_i^2 - 2 v_i k) / (2 sigma^2), convolved as exact integer-keyed dictionaries over |k| <= K, with
the mass beyond K computed and added to give a certified upper end.  The shifts' laws are cached by
the multiset of |v_i| (the law of a coordinate's loss depends on |v_i| only through a sign flip of k,
which the symmetric N_Z(0, sigma^2) does not see: checked below on a few vectors).
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import mpmath as mp
import numpy as np
import pytest

from dpkit.cli import main
from dpkit.distributions import DiscreteGaussian
from dpkit.divergences._closed import DiscreteGaussianShift
from dpkit.errors import UnsupportedError
from dpkit.guarantees import ZCDP
from dpkit.guarantees.conversions import zcdp_to_profile
from dpkit.mechanisms import DiscreteGaussianMechanism
from dpkit.mechanisms import _discrete_gaussian_vector as dgv

DPS = 60


@cache
def _pmf(sigma: float) -> tuple[dict[int, mp.mpf], mp.mpf]:
    """N_Z(0, sigma^2) on |k| <= K at 60 digits, and the exact mass beyond K (a 60-digit sum)."""
    with mp.workdps(DPS):
        s2 = mp.mpf(sigma) ** 2
        big = int(40 * sigma) + 40
        weights = {k: mp.exp(-mp.mpf(k * k) / (2 * s2)) for k in range(-big, big + 1)}
        theta = mp.fsum(weights.values())  # terms beyond 40 sigma + 40 are below e^-800: negligible here
        k_cut = int(14 * sigma) + 6
        kept = {k: weights[k] / theta for k in range(-k_cut, k_cut + 1)}
        tail = 1 - mp.fsum(kept.values())
        return kept, tail


@cache
def _brute_class_law(w: tuple[int, ...], sigma: float) -> tuple[dict[int, mp.mpf], mp.mpf]:
    """Law of A = sum_i (w_i^2 - 2 w_i k_i) (the loss times 2 sigma^2), and the truncated mass bound."""
    pmf, tail = _pmf(sigma)
    law: dict[int, mp.mpf] = {0: mp.mpf(1)}
    with mp.workdps(DPS):
        for wi in w:
            nxt: dict[int, mp.mpf] = {}
            for a, pa in law.items():
                for k, pk in pmf.items():
                    key = a + wi * wi - 2 * wi * k
                    nxt[key] = nxt.get(key, 0) + pa * pk
            law = nxt
    return law, len(w) * tail


def _brute_delta(v: tuple[int, ...], sigma: float, epsilon: float) -> tuple[mp.mpf, mp.mpf]:
    """[lower, upper] enclosing delta_v(epsilon) for the shift v (any signs and order)."""
    w = tuple(sorted((abs(x) for x in v if x), reverse=True))
    if not w:
        return mp.mpf(0), mp.mpf(0)
    law, tail = _brute_class_law(w, sigma)
    with mp.workdps(DPS):
        two_s2 = 2 * mp.mpf(sigma) ** 2
        eps = mp.mpf(epsilon)
        total = mp.fsum(p * (1 - mp.exp(eps - a / two_s2)) for a, p in law.items() if a / two_s2 > eps)
        return total, total + tail


def _all_shifts(n: int, d: int) -> list[tuple[int, ...]]:
    r = math.isqrt(n)
    return [v for v in itertools.product(range(-r, r + 1), repeat=d) if 0 < sum(x * x for x in v) <= n]


def _brute_worst(n: int, d: int, sigma: float, epsilon: float) -> tuple[float, float]:
    worst_lo, worst_hi = mp.mpf(0), mp.mpf(0)
    seen = set()
    for v in _all_shifts(n, d):
        key = tuple(sorted(abs(x) for x in v if x))
        if key in seen:
            continue
        seen.add(key)
        lo, hi = _brute_delta(v, sigma, epsilon)
        worst_lo, worst_hi = max(worst_lo, lo), max(worst_hi, hi)
    return float(worst_lo), float(worst_hi)


# ---------------------------------------------------------------------------------------------------
def test_the_issue_counterexample() -> None:
    """Issue 14 item 8: sigma = 0.816..., Delta = 2, d = 4: (1,1,1,1) gives delta(12) = 2.44e-5 > 1e-5."""
    sigma = 0.816064609355
    lo, hi = _brute_delta((1, 1, 1, 1), sigma, 12.0)
    assert 2.43e-5 < lo <= hi < 2.45e-5
    one_d = _brute_delta((2, 0, 0, 0), sigma, 12.0)[1]
    assert one_d < 1.0001e-5  # what the old code reported
    m = DiscreteGaussianMechanism(sensitivity=2, sigma=sigma, dimension=4)
    assert m.delta(12.0) >= float(hi)
    assert float(m.approx_dp(1e-5).epsilon) >= 13.08
    with pytest.raises(UnsupportedError, match="no single dominating pair"):
        _ = m.pair
    assert (1, 1, 1, 1) in dgv.shift_classes(4, 4)  # type: ignore[operator]


def test_sign_and_permutation_do_not_change_a_shift() -> None:
    sigma, eps = 0.7, 0.5
    base = _brute_delta((2, 1, 0), sigma, eps)[0]
    for v in [(-2, 1, 0), (0, 1, -2), (1, 0, 2), (0, -2, -1)]:
        pmf, _ = _pmf(sigma)
        with mp.workdps(DPS):  # sum this one over the 3-D lattice directly, without the class cache
            two_s2 = 2 * mp.mpf(sigma) ** 2
            total = mp.mpf(0)
            for k in itertools.product(range(-8, 9), repeat=3):
                a = sum(x * x - 2 * x * ki for x, ki in zip(v, k))
                if a / two_s2 > eps:
                    total += pmf[k[0]] * pmf[k[1]] * pmf[k[2]] * (1 - mp.exp(eps - a / two_s2))
        assert abs(total - base) < mp.mpf(10) ** -8 * base  # |k| <= 8 drops mass below 1e-28 here


@pytest.mark.parametrize("n, d", [(n, d) for n in range(1, 13) for d in range(1, 6)])
def test_shift_classes_are_the_maximal_multisets(n: int, d: int) -> None:
    """Every integer shift's multiset of |v_i| extends (by appending) to exactly one listed maximal class
    ... or is one; and the list holds only maximal ones."""
    classes = dgv.shift_classes(n, d)
    assert classes is not None and len(set(classes)) == len(classes)
    multisets = None
    if d <= 4:
        multisets = {tuple(sorted((abs(x) for x in v if x), reverse=True)) for v in _all_shifts(n, d)}
    for w in classes:
        assert list(w) == sorted(w, reverse=True) and len(w) <= d and sum(x * x for x in w) <= n
        assert len(w) == d or sum(x * x for x in w) == n  # cannot append a 1
        if multisets is not None:
            assert w in multisets
    if multisets is not None:
        maximal = {w for w in multisets if len(w) == d or sum(x * x for x in w) > n - 1}
        assert maximal == set(classes)


def test_appending_a_coordinate_never_lowers_delta() -> None:
    """The data-processing step that lets only maximal classes be summed, checked numerically."""
    sigma = 0.6
    for eps in (0.0, 1.0, 4.0):
        for short, longer in [((1,), (1, 1)), ((1, 1), (1, 1, 1)), ((2,), (2, 1)), ((1, 1, 1), (1, 1, 1, 1))]:
            assert _brute_delta(short, sigma, eps)[0] <= _brute_delta(longer, sigma, eps)[0]


def test_max_square_norm_never_drops_a_shift() -> None:
    assert dgv.max_square_norm(2.0) == 4
    assert dgv.max_square_norm(math.sqrt(3)) == 3  # 1.7320508075688772^2 = 2.9999999999999996
    assert dgv.max_square_norm(math.sqrt(7)) == 7
    assert dgv.max_square_norm(1.5) == 2
    assert dgv.max_square_norm(0.999) == 0
    for k in range(1, 200):
        assert dgv.max_square_norm(math.sqrt(k)) == k


def test_class_sums_agree_with_the_one_dimensional_closed_form_and_mpmath() -> None:
    for sigma in (0.4, 0.9, 3.0):
        log_norm = DiscreteGaussian(0, sigma).log_normalizer
        for w in (1, 2, 3):
            s = dgv.ClassSum((w,), sigma)
            for eps in (0.0, 0.7, 3.0):
                closed = float(DiscreteGaussianShift(w, sigma, log_norm).hockey_stick(eps))
                lo, hi = _brute_delta((w,), sigma, eps)
                got = s.delta(eps)
                assert got >= float(hi)
                assert got <= float(hi) * (1 + 1e-9) + 1e-50
                assert closed == pytest.approx(float(lo), rel=1e-10, abs=1e-300)


CASES = [
    # (sensitivity, dimension, sigma)
    (1.0, 3, 0.5), (math.sqrt(2), 2, 0.6), (math.sqrt(2), 3, 1.1), (2.0, 2, 0.816064609355),
    (2.0, 3, 0.7), (2.0, 4, 0.816064609355), (2.0, 4, 1.6), (math.sqrt(5), 2, 0.9), (math.sqrt(5), 3, 0.55),
    (3.0, 1, 0.9), (3.0, 2, 1.2), (3.0, 3, 0.8), (3.0, 4, 1.0),
]


@pytest.mark.parametrize("sensitivity, d, sigma", CASES)
def test_reported_profile_bounds_the_brute_force_worst_case(sensitivity: float, d: int, sigma: float) -> None:
    """delta(eps) >= the true worst case over every integer shift, and is tight (exact sums here)."""
    n = dgv.max_square_norm(sensitivity)
    if d == 1:
        m = DiscreteGaussianMechanism(sensitivity=int(sensitivity), sigma=sigma)
    else:
        m = DiscreteGaussianMechanism(sensitivity=sensitivity, sigma=sigma, dimension=d)
    for eps in (0.0, 0.3, 1.0, 3.0, 8.0):
        lo, hi = _brute_worst(n, d, sigma, eps)
        got = m.delta(eps)
        assert got >= hi, (eps, got, hi)
        assert got <= hi * (1 + 1e-8) + 1e-40, (eps, got, hi)  # exact where the exact sums run
    for target in (1e-2, 1e-5):
        eps = float(m.approx_dp(target).epsilon)
        assert _brute_worst(n, d, sigma, eps)[1] <= target * (1 + 1e-12)  # a valid epsilon for target
        if eps > 0:
            assert _brute_worst(n, d, sigma, eps * (1 - 1e-6))[0] > target  # and the smallest, nearly


def test_calibration_meets_the_target_for_the_true_worst_shift() -> None:
    m = DiscreteGaussianMechanism(sensitivity=2, epsilon=12.0, delta=1e-5, dimension=4)
    assert _brute_worst(4, 4, m.sigma, 12.0)[1] <= 1e-5
    assert _brute_worst(4, 4, m.sigma * (1 - 1e-6), 12.0)[0] > 1e-5  # and sigma is not wastefully large
    assert float(m.guarantee.epsilon) <= 12.0 and m.guarantee.delta == 1e-5
    m2 = DiscreteGaussianMechanism(sensitivity=math.sqrt(2), epsilon=1.0, delta=1e-6, dimension=2)
    assert _brute_worst(2, 2, m2.sigma, 1.0)[1] <= 1e-6


@pytest.mark.parametrize("sensitivity, d, eps, delta", [(2.0, 4, 12.0, 1e-5), (3.0, 10, 1.0, 1e-5),
                                                       (math.sqrt(2), 2, 0.1, 1e-6), (10.0, 1000, 1.0, 1e-5),
                                                       (math.sqrt(3), 3, 4.0, 1e-9)])
def test_calibrated_guarantee_never_exceeds_the_target(sensitivity: float, d: int, eps: float, delta: float) -> None:
    m = DiscreteGaussianMechanism(sensitivity=sensitivity, epsilon=eps, delta=delta, dimension=d)
    assert m.delta(eps) <= delta
    assert float(m.guarantee.epsilon) <= eps and m.guarantee.delta == delta
    assert m.delta(float(m.guarantee.epsilon)) <= delta


def test_the_cli_example_of_the_issue_now_meets_its_claim(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", "discrete-gaussian", "--epsilon", "12", "--delta", "1e-5", "--sensitivity", "2",
                 "--insecure-seed", "1", "10", "20", "30", "40"]) == 0
    text = capsys.readouterr().out
    claimed = float(text.split("guarantee: (")[1].split(",")[0])
    assert claimed <= 12.0
    sigma = DiscreteGaussianMechanism(sensitivity=2, epsilon=12.0, delta=1e-5, dimension=4).sigma
    assert f"noise scale {sigma:.12g}" in text
    assert _brute_worst(4, 4, sigma, claimed)[1] <= 1e-5


def test_zcdp_profile_where_exact_sums_are_too_costly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Too many classes: the zCDP profile rho = N/(2 sigma^2) (valid, looser) is reported and calibrated to."""
    big = DiscreteGaussianMechanism(sensitivity=20.0, epsilon=1.0, delta=1e-6, dimension=1000)  # N = 400
    assert big._worst is not None and dgv.shift_classes(400, 1000) is None
    rho = 400 / (2 * big.sigma**2)
    assert big.delta(1.0) == pytest.approx(float(zcdp_to_profile(ZCDP(rho)).delta(1.0)), rel=1e-12)
    assert big.delta(1.0) <= 1e-6
    assert float(big.zcdp().rho) == pytest.approx(rho)
    # the zCDP profile bounds the brute-force worst case (forced on a small case)
    monkeypatch.setattr(dgv, "MAX_CLASSES", 0)
    small = DiscreteGaussianMechanism(sensitivity=2.0, sigma=0.9, dimension=3)
    assert not small._worst.exact  # type: ignore[union-attr]
    for eps in (0.5, 2.0, 6.0):
        assert small.delta(eps) >= _brute_worst(4, 3, 0.9, eps)[1]


def test_exact_sums_are_never_above_the_zcdp_bound() -> None:
    m = DiscreteGaussianMechanism(sensitivity=3.0, sigma=2.0, dimension=5)
    assert m._worst is not None and m._worst.exact
    for eps in np.linspace(0.0, 6.0, 13):
        assert m.delta(float(eps)) <= m._worst.zcdp_delta(float(eps))


def test_single_shift_vectors_keep_the_one_dimensional_pair() -> None:
    """With N = 1 every shift is a unit vector: the pair N_Z(0) vs N_Z(1) is exact and dominating."""
    m = DiscreteGaussianMechanism(sensitivity=1, epsilon=1.0, delta=1e-5, dimension=50)
    one = DiscreteGaussianMechanism(sensitivity=1, epsilon=1.0, delta=1e-5)
    assert m.sigma == one.sigma and m.pair.Q.mean == one.pair.Q.mean  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="dimension"):
        DiscreteGaussianMechanism(sensitivity=1, sigma=1.0, dimension=0)
    with pytest.raises(ValueError, match="below 1"):
        DiscreteGaussianMechanism(sensitivity=0.5, sigma=1.0, dimension=3)
