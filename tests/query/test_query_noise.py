r"""The noise: its law, its stated scale, and the coverage of the intervals.

Data: 4000 public keys; 20000 units, each with 1 to 5 rows in exactly 2 partitions (K = 2 does
not bind, so the bounded truth is exact: :mod:`query_reference`).  Every query's partitions get
independent noise, so one query gives 4000 draws.

* COUNT(*) with L = 3, K = 2 at epsilon 0.5: noisy - true bounded count must follow DLap(t) with
  t = K L / epsilon = 12 (the geometric mechanism), the scale the result states.  Chi-square
  goodness of fit against ``scipy.stats.dlaplace`` (an implementation independent of dpkit's),
  cells of expected count >= 5 with both tails merged, at ALPHA = 1e-6; power: the same draws
  reject the law with scale 1.1 t.
* Its 95% intervals: each covers iff |noise| <= half-width, so the number covered is
  Binomial(n, P(|Z| <= h)); P(|Z| <= h) must be >= 0.95 with h the smallest such integer.
* SUM (Laplace on a fine grid) covers about 95%: two-sided binomial test against 0.95.
* AVG (interval arithmetic over two intervals at 97.5%) covers at least 95%: one-sided test.
* Gaussian noise (``noise="gaussian"``): the stated sigma (KS test) and coverage of at least 95%.

ALPHA = 1e-6 throughout, ``insecure_seeded`` with fixed seeds (so the outcome is deterministic);
critical values come from ``scipy.stats`` at run time.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpkit.random import insecure_seeded
from query_reference import contributions, to_arrow, totals

ALPHA = 1e-6
KEYS = [f"k{i:04d}" for i in range(4000)]
K, L = 2, 3
BOUNDS = (0.0, 10.0)


@pytest.fixture(scope="module")
def data() -> tuple[dict, dict]:
    rng = np.random.default_rng(20261122)
    uid, key, x = [], [], []
    for u in range(20000):
        p1 = u % 4000
        for p in (p1, (p1 + 1 + u // 4000) % 4000):
            for _ in range(int(rng.integers(1, 6))):
                uid.append(u)
                key.append(KEYS[p])
                v = float(rng.uniform(-2.0, 12.0))
                x.append(None if v > 11.5 else v)
    table = {"uid": uid, "k": key, "x": x}
    truth = totals(contributions(table, unit="uid", keys=["k"], value="x", bounds=BOUNDS, max_rows=L,
                                 public=[(k,) for k in KEYS]))
    return table, truth


@pytest.fixture(scope="module")
def session(data, tmp_path_factory):  # noqa: ANN001, ANN201
    from dpkit.guarantees import ApproxDP
    from dpkit.query import Session

    s = Session(
        to_arrow(data[0]),
        max_partitions=1,
        max_rows=1,
        privacy_unit="uid",
        ledger=tmp_path_factory.mktemp("noise") / "l.db",
        budget=ApproxDP(epsilon=100.0, delta=1e-3),
    )
    yield s
    s.close()


def _run(session, query: str, seed: int, epsilon: float):  # noqa: ANN001, ANN202
    return session.sql(query, epsilon=epsilon, bounds={"x": BOUNDS}, keys={"k": KEYS}, max_partitions=K,
                       max_rows=L, rng=insecure_seeded(seed), nonnegative=False,  # the raw noise law
                       bounding_report=False)


def _chi2_pvalue(draws: np.ndarray, scale: float) -> float:
    law = stats.dlaplace(1.0 / scale)
    j = 0
    while law.pmf(j + 1) * draws.size >= 5 and law.sf(j + 1) * draws.size >= 5:
        j += 1
    cells = np.arange(-j + 1, j)  # interior cells; tails (<= -j) and (>= j) merged
    observed = [np.sum(draws <= -j)] + [np.sum(draws == c) for c in cells] + [np.sum(draws >= j)]
    expected = np.concatenate([[law.cdf(-j)], law.pmf(cells), [law.sf(j - 1)]]) * draws.size
    assert expected.min() >= 5
    return float(stats.chisquare(observed, expected).pvalue)


def test_count_noise_is_discrete_laplace_of_the_stated_scale_and_intervals_cover(session, data) -> None:  # noqa: ANN001
    _, truth = data
    noise, half, scales = [], set(), set()
    for seed in range(4):
        r = _run(session, "SELECT k, COUNT(*) AS n FROM t GROUP BY k", seed, 0.5)
        assert [row[0] for row in r.rows] == KEYS  # every public key, in order
        for (key, value), (lo, hi) in zip(r.rows, r.intervals["n"]):
            assert isinstance(value, int)
            noise.append(value - truth[(key,)]["rows"])
            half.add(hi - value)
            assert value - lo == hi - value
        scales.add(r.scales["n"]["rows"])
    draws = np.asarray(noise, dtype=float)
    assert np.all(draws == np.round(draws))
    (t,) = scales
    assert t == pytest.approx(K * L / 0.5, rel=1e-9)
    assert _chi2_pvalue(draws, t) > ALPHA
    assert _chi2_pvalue(draws, 1.1 * t) < ALPHA  # power: a 10% wrong scale is rejected

    (h,) = half
    law = stats.dlaplace(1.0 / t)
    cover = law.cdf(h) - law.cdf(-h - 1)  # P(|Z| <= h)
    assert cover >= 0.95 > law.cdf(h - 1) - law.cdf(-h)  # h is the smallest half-width that reaches 95%
    covered = int(np.sum(np.abs(draws) <= h))
    assert stats.binomtest(covered, draws.size, cover).pvalue > ALPHA


def test_sum_intervals_cover_about_95_percent_and_avg_at_least(session, data) -> None:  # noqa: ANN001
    _, truth = data
    mid = BOUNDS[0] / 2 + BOUNDS[1] / 2
    sums, means = [], []
    for seed in range(100, 104):
        r = _run(session, "SELECT k, SUM(x) AS s, AVG(x) AS m FROM t GROUP BY k", seed, 8.0)
        assert r.confidence == 0.95
        for (key, _s, _m), (s_lo, s_hi), (m_lo, m_hi) in zip(r.rows, r.intervals["s"], r.intervals["m"]):
            want = truth[(key,)]
            sums.append(s_lo <= want["sum"] <= s_hi)
            if want["values"] > 0:
                means.append(m_lo <= mid + want["centered_sum"] / want["values"] <= m_hi)
    n_s, n_m = len(sums), len(means)
    assert n_s == 16000 and n_m > 15000
    assert stats.binomtest(sum(sums), n_s, 0.95).pvalue > ALPHA
    assert stats.binomtest(sum(means), n_m, 0.95, alternative="less").pvalue > ALPHA
    assert sum(means) / n_m < 1.0  # the AVG intervals are informative here, not [lo, hi] everywhere


def test_gaussian_noise_has_the_stated_sigma_and_intervals_cover_at_least_95_percent(session, data) -> None:  # noqa: ANN001
    """noise="gaussian": noisy - true COUNT(*) is N(0, sigma^2) on a grid far finer than sigma (KS test
    against the continuous normal at ALPHA; power: sigma x 1.25 is rejected); the intervals cover at
    least 95% (one-sided binomial test).  They are conservative here (about 99.3%): beyond 2e5 grid
    units the discrete Gaussian's half-width comes from a sub-Gaussian tail bound
    (``mechanisms.gaussian.discrete_gaussian_half_width``)."""
    _, truth = data
    noise, covered, sigmas = [], [], set()
    for seed in (200, 201):
        r = session.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=1.0, delta=1e-6, noise="gaussian",
                        keys={"k": KEYS}, max_partitions=K, max_rows=L, rng=insecure_seeded(seed), nonnegative=False)
        sigmas.add(r.scales["n"]["rows"])
        for (key, value), (lo, hi) in zip(r.rows, r.intervals["n"]):
            want = truth[(key,)]["rows"]
            noise.append(value - want)
            covered.append(lo <= want <= hi)
    (sigma,) = sigmas
    draws = np.asarray(noise)
    assert stats.kstest(draws, stats.norm(scale=sigma).cdf).pvalue > ALPHA
    assert stats.kstest(draws, stats.norm(scale=1.25 * sigma).cdf).pvalue < ALPHA
    assert stats.binomtest(sum(covered), len(covered), 0.95, alternative="less").pvalue > ALPHA
