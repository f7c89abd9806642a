"""``Exponential.release_runs``: the exponential mechanism over candidates given as runs of equal utility.

* the law of the expanded index is the exponential mechanism's law over ``np.repeat(utilities, lengths)``:
  a chi-square goodness-of-fit test on 2 * 10^5 draws, whose power is shown by the same test rejecting two
  near-miss laws (the runs drawn without their lengths, and epsilon 10% off) at p < 1e-9;
* inside one long run the position is uniform (chi-square), and runs of 2**29 candidates stay exact integers;
* the query path's runs (``dpkit.query._result._runs``) expand to the dense utility vectors bit for bit, for
  random sparse histograms with occupied buckets at both ends and for an empty partition;
* bad lengths are refused with a clear error.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpkit.errors import InvalidArgumentError
from dpkit.mechanisms import Exponential
from dpkit.query._result import _runs
from dpkit.random import insecure_seeded

U = np.array([0.0, -1.0, -3.0, 0.5, -0.25, -8.0])
L = np.array([3, 1, 5, 2, 7, 40])
N_DRAWS = 200_000


def _chi2_p(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * counts.sum()
    keep = expected >= 5  # pool the rare cells so every expected count is >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def test_law_is_the_expanded_mechanism_and_the_test_has_power() -> None:
    m = Exponential(sensitivity=1.0, epsilon=2.0)
    probs = m.probabilities(np.repeat(U, L))
    x = m.sample_runs(U, L, N_DRAWS, rng=insecure_seeded(11))
    counts = np.bincount(x, minlength=int(L.sum()))
    assert counts.size == L.sum()
    assert _chi2_p(counts, probs) > 1e-4
    # power: the same statistic rejects the law that forgets the run lengths (each run one candidate) ...
    runs_only = m.sample(U, N_DRAWS, rng=insecure_seeded(12))
    starts = np.concatenate([[0], np.cumsum(L)[:-1]])
    wrong = starts[runs_only] + insecure_seeded(13).integers(0, L[runs_only])
    assert _chi2_p(np.bincount(wrong, minlength=int(L.sum())), probs) < 1e-9
    # ... and a mechanism whose epsilon is 10% off
    off = Exponential(sensitivity=1.0, epsilon=2.2).sample_runs(U, L, N_DRAWS, rng=insecure_seeded(14))
    assert _chi2_p(np.bincount(off, minlength=int(L.sum())), probs) < 1e-9


def test_release_matches_the_law_one_draw_at_a_time() -> None:
    """release_runs (one draw a call, the query path) has the same law as sample_runs."""
    m = Exponential(sensitivity=2.0, epsilon=3.0)
    probs = m.probabilities(np.repeat(U, L))
    rng = insecure_seeded(21)
    x = np.array([int(m.release_runs(U, L, rng=rng).value) for _ in range(20_000)])
    assert _chi2_p(np.bincount(x, minlength=int(L.sum())), probs) > 1e-4
    rel = m.release_runs(U, L, rng=rng)
    assert rel.details["candidates"] == L.sum()
    assert rel.details["utility_gap_bound"] == pytest.approx(m.utility_gap_bound(int(L.sum()), 0.95))


def test_position_inside_a_long_run_is_uniform_and_exact() -> None:
    m = Exponential(sensitivity=1.0, epsilon=1.0)
    # one dominant run of 1000 candidates between two negligible ones: the position is uniform in it
    x = m.sample_runs([-200.0, 0.0, -200.0], [5, 1000, 5], 100_000, rng=insecure_seeded(31))
    inside = x[(x >= 5) & (x < 1005)] - 5
    assert inside.size == x.size
    assert _chi2_p(np.bincount(inside, minlength=1000), np.full(1000, 1e-3)) > 1e-4
    # runs of 2**29 candidates (a fine quantile grid): indices are exact integers in range
    big = m.sample_runs([0.0, 0.0], [1 << 29, (1 << 29) - 1], 1000, rng=insecure_seeded(32))
    assert big.dtype == np.int64 and big.min() >= 0 and big.max() < (1 << 30) - 1
    assert 400 < int(np.sum(big < (1 << 29))) < 600


def _dense(h: np.ndarray, q: float, extreme: str | None) -> np.ndarray:
    below = np.concatenate([[0.0], np.cumsum(h)])
    if extreme == "min":
        out = -below[:-1] - (h <= 0.0)
    elif extreme == "max":
        out = -(below[-1] - below[1:]) - (h <= 0.0)
    else:
        out = -np.abs(below - q * below[-1])
    return np.asarray(out, dtype=np.float64)


@pytest.mark.parametrize("extreme,q", [(None, 0.5), (None, 0.9), (None, 0.0), ("min", 0.0), ("max", 1.0)])
def test_query_runs_expand_to_the_dense_utilities(extreme: str | None, q: float) -> None:
    rng = np.random.default_rng(5)
    b = 64
    cases = [np.zeros(b)]  # an empty partition
    for _ in range(30):
        h = np.zeros(b)
        occupied = rng.choice(b, size=int(rng.integers(1, 12)), replace=False)
        h[occupied] = rng.uniform(0.1, 5.0, occupied.size).round(2)
        cases.append(h)
    edge = np.zeros(b)
    edge[[0, b - 1]] = [2.0, 3.0]  # occupied buckets at both ends: no empty run before or after
    cases.append(edge)
    for h in cases:
        bk = np.flatnonzero(h > 0)
        util, lengths = _runs(bk, h[bk], b, q, extreme)
        assert lengths.min() >= 1
        np.testing.assert_array_equal(np.repeat(util, lengths), _dense(h, q, extreme))


@pytest.mark.parametrize("lengths,match", [([1, 0, 2], ">= 1"), ([1, 2], "one entry"),
                                            ([1 << 29, 1 << 29, 1], "2\\*\\*30")])
def test_bad_lengths_are_refused(lengths: list[int], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        Exponential(sensitivity=1.0, epsilon=1.0).release_runs([0.0, 1.0, 2.0], lengths)
