r"""Private partition selection: the threshold's delta, and how often a one-unit partition is released.

Reference: for DLap(t), P(Z = j) = e^{-|j|/t} / \sum_{i \in Z} e^{-|i|/t}; the tail P(Z >= m) is
summed term by term with mpmath (``mp.nsum``, 50 digits), independently of the closed form
e^{-m/t} / (1 + e^{-1/t}) that :func:`dpkit.query._noise.selection_threshold` uses.  The threshold
tau = 1 + m must satisfy K P(Z >= m) <= delta with m the smallest such integer (the function keeps a
1e-12 relative margin, so "smallest" is checked up to that margin).

Statistical tests use ``insecure_seeded`` with fixed seeds and a two-sided binomial test at
ALPHA = 1e-6 (``scipy.stats.binomtest``): a correct engine fails one with probability 1e-6 per
seed, and the seeds are fixed, so the outcome is deterministic.  Each is paired with a power
check: the same count is rejected for the neighbouring threshold m - 1.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.query._noise import selection_threshold
from dpkit.random import insecure_seeded

ALPHA = 1e-6
mp.mp.dps = 50


def dlap_tail(t: float, m: int) -> mp.mpf:
    """P(DLap(t) >= m) by summation of the pmf (mpmath, 50 digits)."""
    a = mp.exp(-1 / mp.mpf(t))
    norm = 1 + 2 * mp.nsum(lambda j: a**j, [1, mp.inf])
    return mp.nsum(lambda j: a**j, [m, mp.inf]) / norm


def check_threshold(t: float, k: int, delta: float) -> None:
    tau, spent = selection_threshold(t, k, delta)
    m = tau - 1
    assert isinstance(tau, int) and m >= 1
    exact = k * dlap_tail(t, m)
    assert spent == pytest.approx(float(exact), rel=1e-10)  # the 1e-12 margin and float rounding
    assert spent <= delta and exact <= delta
    if m > 1:  # m - 1 would not do (up to the function's 1e-12 safety margin)
        assert k * dlap_tail(t, m - 1) > delta * (1 - 1e-11)


@pytest.mark.parametrize("t", [0.25, 1.0, 2.0, 7.3, 60.0, 900.0])
@pytest.mark.parametrize("k", [1, 3, 40])
@pytest.mark.parametrize("delta", [1e-15, 1e-9, 1e-6, 1e-3, 0.2])
def test_threshold_delta_is_exact_within_share_and_smallest(t: float, k: int, delta: float) -> None:
    check_threshold(t, k, delta)


@settings(max_examples=40)
@given(t=st.floats(0.05, 5000.0), k=st.integers(1, 100), delta=st.floats(1e-14, 0.9))
def test_threshold_property(t: float, k: int, delta: float) -> None:
    check_threshold(t, k, delta)


def test_threshold_refuses_bad_delta() -> None:
    for bad in (0.0, 1.0, -1e-9, float("nan")):
        with pytest.raises(ValueError, match="delta share"):
            selection_threshold(2.0, 1, bad)


@pytest.mark.parametrize(("k", "seed"), [(1, 11), (2, 12)])
def test_one_unit_partition_is_released_with_the_tail_probability(open_session, k: int, seed: int) -> None:  # noqa: ANN001
    """N partitions of exactly one unit (each unit in exactly K of them); each is released w.p. P(Z >= m).

    epsilon 1 split evenly between the count and selection, delta 0.3 all to selection:
    t = K / 0.5, and m is recomputed here from the mpmath tail (K = 1: m = 2, p = 0.229;
    K = 2: m = 6, p = 0.125), so the expected number released is a few hundred.
    """
    import pandas as pd

    units = 3000
    df = pd.DataFrame({"uid": [u for u in range(units) for _ in range(k)],
                       "k": [f"p{u}_{j}" for u in range(units) for j in range(k)]})
    s = open_session(df)
    r = s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, delta=0.3, max_partitions=k,
              split={"n": 0.5, "partition_selection": 0.5}, bounding_report=False, rng=insecure_seeded(seed))
    t = k / 0.5
    share = 0.3
    m = next(m for m in range(1, 100) if k * dlap_tail(t, m) <= share)
    assert r.selection["threshold"] == 1 + m
    assert r.selection["noise_scale"] == pytest.approx(t, rel=1e-9)
    assert r.selection["delta"] == pytest.approx(float(k * dlap_tail(t, m)), rel=1e-10)
    n, released = units * k, len(r.rows)
    p = float(dlap_tail(t, m))
    assert stats.binomtest(released, n, p).pvalue > ALPHA, (released, n * p)
    p_wrong = float(dlap_tail(t, m - 1))  # power: a threshold one lower is rejected by the same count
    assert stats.binomtest(released, n, p_wrong).pvalue < ALPHA


def test_rare_keys_are_not_released_and_common_ones_are(open_session) -> None:  # noqa: ANN001
    """delta = 1e-6: 300 keys with 1 or 2 units each stay hidden; the key with 400 units is released.

    Threshold tau ~ 29 at epsilon_sel = 0.5: a 2-unit key needs Z >= 27, probability
    K e^{-27/2}/(1 + e^{-1/2}) < 1e-6, so all 300 stay hidden except with probability < 3e-4.
    """
    import pandas as pd

    uid, key = [], []
    for u in range(400):
        uid.append(u)
        key.append("common")
    for j in range(300):
        for u in range(1 + j % 2):
            uid.append(10_000 + 2 * j + u)
            key.append(f"rare{j}")
    s = open_session(pd.DataFrame({"uid": uid, "k": key}))
    r = s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, delta=1e-6, rng=insecure_seeded(5))
    assert r.selection["threshold"] > 20
    assert [row[0] for row in r.rows] == ["common"]
    assert r.rows[0][1] == pytest.approx(400, abs=60)


def dgauss_tail(sigma: float, m: int) -> mp.mpf:
    """P(N_Z(0, sigma^2) >= m) by direct summation of the pmf (mpmath, 50 digits).

    Finite sums: the terms past j with j^2 >= m'^2 + 140 s2 (m' = max(m, 0), s2 = 2 sigma^2) are below
    e^{-140} < 1e-60 of the largest one kept, and so is their geometric sum (far below what is asserted)."""
    with mp.workdps(50):
        s2 = 2 * mp.mpf(sigma) ** 2
        reach = int(math.ceil(math.sqrt(140.0 * float(s2)))) + 1
        norm = 1 + 2 * mp.fsum(mp.exp(-mp.mpf(j) ** 2 / s2) for j in range(1, reach + 1))
        top = int(math.ceil(math.sqrt(max(m, 0) ** 2 + 140.0 * float(s2)))) + 1
        return mp.fsum(mp.exp(-mp.mpf(j) ** 2 / s2) for j in range(m, top + 1)) / norm


@settings(max_examples=40)
@given(sigma=st.floats(0.3, 300.0), k=st.integers(1, 50), log_delta=st.floats(-30.0, -2.0))
def test_gaussian_selection_threshold_against_mpmath(sigma: float, k: int, log_delta: float) -> None:
    """tau = 1 + m with k P(Z >= m) <= delta, m smallest up to the bound's margin, and the reported delta an
    upper bound on the exact tail (summed independently at 50 digits)."""
    from dpkit.query._noise import gaussian_selection_threshold

    delta = 10.0**log_delta
    tau, bound = gaussian_selection_threshold(sigma, k, delta)
    m = tau - 1
    exact = k * dgauss_tail(sigma, m)
    assert exact <= bound <= delta
    if m > 1:
        assert k * dgauss_tail(sigma, m - 1) > delta * (1 - 1e-9) or bound > exact * 0.5  # no slack of a whole step


def test_gaussian_selection_meets_its_share_and_scales_with_root_k() -> None:
    """sigma meets (epsilon, delta/2) through rho = K/(2 sigma^2); the threshold grows like sqrt(K), the
    Laplace one like K."""
    from dpkit.guarantees import ZCDP, zcdp_to_approx_dp
    from dpkit.query._noise import Selection

    taus = {}
    for k in (1, 16, 256):
        sel = Selection(epsilon=1.0, delta=1e-6, partitions_per_unit=k, noise="gaussian")
        assert float(zcdp_to_approx_dp(ZCDP(k / (2 * sel.sigma**2)), delta=5e-7).epsilon) <= 1.0
        assert float(zcdp_to_approx_dp(ZCDP(k / (2 * (sel.sigma * (1 - 1e-6)) ** 2)), delta=5e-7).epsilon) > 1.0 - 1e-9
        assert sel.delta_spent <= 1e-6
        taus[k] = (sel.threshold, Selection(epsilon=1.0, delta=1e-6, partitions_per_unit=k).threshold)
    assert taus[256][0] / taus[1][0] < 25 and taus[256][1] / taus[1][1] > 150
