"""The discrete Gaussian pair's hockey-stick divergence on its fast path (the atoms above -R only, the tail
below bounded and added) against an exact mpmath sum and against the whole-table sum it replaced, and the
Gaussian mechanism's calibration, which bisects sigma on it: its sigma meets the target and is minimal to
the bisection's tolerance."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.distributions import DiscreteGaussian
from dpkit.divergences._closed import _DG_TABLES, DiscreteGaussianShift, _dg_table
from dpkit.mechanisms import Gaussian


def _exact_delta(sigma: float, d: int, eps: float) -> mp.mpf:
    """sum over k of max(p_k - e^eps q_k, 0), p = N_Z(0, sigma^2), q = N_Z(d, sigma^2), at 40 digits: the
    positive terms are k < d/2 - sigma^2 eps / d; the normaliser over |k| <= 45 sigma (the rest < 1e-400)."""
    with mp.workdps(40):
        s2 = 2 * mp.mpf(sigma) ** 2
        reach = int(45 * sigma) + d + 2
        norm = mp.fsum(mp.exp(-mp.mpf(k) ** 2 / s2) for k in range(-reach, reach + 1))
        g = mp.exp(mp.mpf(eps))
        top = math.floor(d / 2 - sigma**2 * eps / d) + 1
        terms = (mp.exp(-mp.mpf(k) ** 2 / s2) - g * mp.exp(-mp.mpf(k - d) ** 2 / s2) for k in range(-reach, top + 1))
        return mp.fsum(max(t, 0) for t in terms) / norm


@pytest.mark.parametrize("sigma,d,eps", [(57.3, 1, 0.01), (57.3, 1, 0.03), (300.0, 385, 0.5), (300.0, 385, 2.0),
                                         (300.0, 385, 8.0), (300.0, 385, 23.0), (300.0, 385, 60.0),
                                         (12.0, 5, 3.0), (57.3, 1, -0.5)])
def test_fast_hockey_stick_is_a_tight_upper_bound(sigma: float, d: int, eps: float) -> None:
    """Above the exact sum, by at most 1e-12 relative; (300, 385, 23) has delta < 1e-60 and at eps = 60 no atom
    above -R has loss > eps (the prefix from -39 sigma is summed in both); eps < 0 sums atoms up to +39 sigma."""
    pair = DiscreteGaussianShift(d, sigma, DiscreteGaussian(0, sigma).log_normalizer)
    _DG_TABLES.clear()
    got = pair.hockey_stick(eps)
    exact = _exact_delta(sigma, d, eps)
    assert mp.mpf(float(got)) >= exact
    assert mp.mpf(float(got)) - exact <= max(1e-12 * exact, mp.mpf(1e-300)), (float(got), exact)
    assert got.kind == "upper" and got.error >= 0.0


def _table_delta(sigma: float, d: int, eps: float) -> float:
    """The whole-table sum (the path taken before the fast one, and still its fallback)."""
    pair = DiscreteGaussianShift(d, sigma, DiscreteGaussian(0, sigma).log_normalizer)
    t = _dg_table(d, sigma, pair.log_norm)
    slack = 8.0 * 2.0**-53 * (abs(eps) + float(np.max(np.abs(t.loss))))
    j = int(np.searchsorted(t.neg_loss, -(eps - slack), side="left"))
    j0 = int(np.searchsorted(t.neg_loss, -eps, side="left"))
    return float(pair._hockey_sum(eps, t.loss[:j], t.logp[:j], j0, 0.0))


@pytest.mark.parametrize("sigma,d", [(3823.8974104075123, 1025), (20580.68719030869, 1281), (46543.26, 385)])
@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 3.0])
def test_fast_hockey_stick_matches_the_whole_table(sigma: float, d: int, eps: float) -> None:
    """At the scales a calibration meets (sigma of 10^3-10^5 grid units) the fast path and the whole table
    agree to 1e-12 relative (the atoms below -R hold less than 1e-80)."""
    pair = DiscreteGaussianShift(d, sigma, DiscreteGaussian(0, sigma).log_normalizer)
    _DG_TABLES.clear()  # a table already built would be summed instead
    fast = float(pair.hockey_stick(eps))
    assert not _DG_TABLES  # no table built (below 1e-60 the prefix from -39 sigma is summed, still no table)
    table = _table_delta(sigma, d, eps)
    assert table > 0.0 and (d, sigma, pair.log_norm) in _DG_TABLES
    assert float(pair.hockey_stick(eps)) == table  # with the table built, the table is summed
    assert fast == pytest.approx(table, rel=1e-12)


@pytest.mark.parametrize("epsilon,delta,sensitivity", [(1.0, 1e-5, 1.0), (0.3, 1e-8, 10.0), (0.05, 1e-12, 3.0),
                                                      (5.0, 1e-10, 1.0), (0.01, 0.1, 1.0)])
def test_calibrated_sigma_meets_the_target_and_is_minimal(epsilon: float, delta: float, sensitivity: float) -> None:
    m = Gaussian(sensitivity=sensitivity, epsilon=epsilon, delta=delta)
    s, units = m.grid_sigma, int(m.units)

    def delta_at(sig: float) -> float:
        return float(DiscreteGaussianShift(units, sig, DiscreteGaussian(0, sig).log_normalizer).hockey_stick(epsilon))

    assert delta_at(s) <= delta
    assert delta_at(s * (1.0 - 1e-11)) > delta  # the bisection stops within 1e-12 relative of the boundary
    assert float(m.approx_dp(delta).epsilon) <= epsilon
