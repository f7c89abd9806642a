"""The type-dispatched conversions agree with the named ones they dispatch to."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.guarantees import (
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    ZCDP,
    gdp_to_approx_dp,
    gdp_to_profile,
    profile_to_approx_dp,
    pure_to_approx_dp,
    pure_to_zcdp,
    rdp_to_approx_dp,
    to_approx_dp,
    to_profile,
    to_rdp,
    to_zcdp,
    zcdp_to_approx_dp,
)

GUARANTEES = [
    PureDP(1.0),
    ApproxDP(epsilon=1.0, delta=1e-7),
    ZCDP(0.5),
    GaussianDP(1.0),
    RenyiDP(orders=[2.0, 8.0, 32.0], epsilons=[0.5, 2.0, 8.0]),
    gdp_to_profile(GaussianDP(2.0)),
]


def test_to_approx_dp_matches_named_conversions() -> None:
    delta = 1e-5
    expected = [
        pure_to_approx_dp(PureDP(1.0), delta=delta),
        ApproxDP(epsilon=to_approx_dp(ApproxDP(epsilon=1.0, delta=1e-7), delta=delta).epsilon, delta=delta),
        zcdp_to_approx_dp(ZCDP(0.5), delta=delta),
        gdp_to_approx_dp(GaussianDP(1.0), delta=delta),
        rdp_to_approx_dp(GUARANTEES[4], delta=delta),  # type: ignore[arg-type]
        gdp_to_approx_dp(GaussianDP(2.0), delta=delta),
    ]
    for guarantee, want in zip(GUARANTEES, expected):
        got = to_approx_dp(guarantee, delta=delta)
        assert got == want
        assert got.epsilon.kind in ("exact", "upper")  # type: ignore[attr-defined]


def test_approx_dp_to_approx_dp_trades_delta_for_epsilon() -> None:
    got = to_approx_dp(ApproxDP(epsilon=1.0, delta=1e-7), delta=1e-5)
    assert got.epsilon < 1.0
    assert to_approx_dp(ApproxDP(epsilon=1.0, delta=1e-7), delta=1e-7).epsilon == 1.0


@pytest.mark.parametrize("guarantee", GUARANTEES, ids=str)
def test_to_profile_is_consistent_with_to_approx_dp(guarantee: object) -> None:
    profile = to_profile(guarantee)
    assert isinstance(profile, PrivacyProfile)
    eps = profile.epsilon(1e-5)
    assert float(eps) == pytest.approx(float(to_approx_dp(guarantee, delta=1e-5).epsilon), rel=1e-12)
    # the profile's delta at its own epsilon is within delta (up to order-search tolerance)
    assert float(profile.delta(float(eps))) <= 1e-5 * (1 + 1e-6)
    assert profile_to_approx_dp(profile, delta=1e-5).epsilon == eps


def test_to_rdp_and_to_zcdp() -> None:
    assert to_zcdp(PureDP(1.0)) == pure_to_zcdp(PureDP(1.0))
    assert to_zcdp(GaussianDP(2.0)) == ZCDP(2.0)
    assert to_zcdp(ZCDP(0.1)) == ZCDP(0.1)
    rdp = GUARANTEES[4]
    assert to_rdp(rdp) is rdp
    np.testing.assert_allclose(to_rdp(GaussianDP(2.0)).epsilon(np.array([2.0, 3.0])), [4.0, 6.0])
    np.testing.assert_allclose(to_rdp(ZCDP(0.5)).epsilon(np.array([2.0, 3.0])), [1.0, 1.5])
    assert to_rdp(ApproxDP(epsilon=1.0, delta=0.0)).epsilon(2.0) == pytest.approx(
        float(to_rdp(PureDP(1.0)).epsilon(2.0))
    )
    assert to_rdp(PureDP(2.0)).epsilon(1e6) <= 2.0
    assert math.isfinite(to_rdp(PureDP(2.0)).epsilon(1.0 + 1e-9))


def test_approx_dp_through_the_generic_profile_is_never_below_the_exact_inverse() -> None:
    """Issue 14 (minor): the inverse of the (epsilon, delta) profile, reached through to_approx_dp /
    profile_to_approx_dp, could be one float below the exact inverse. Now it is the float at or
    above it, within two ulps (checked against 60-digit mpmath on a spread of parameters)."""
    import mpmath as mp

    rng = np.random.default_rng(11)
    for _ in range(300):
        eps = float(10.0 ** rng.uniform(-6, 1.5))
        delta = float(10.0 ** rng.uniform(-12, -1)) * float(rng.integers(0, 2))
        target = delta + (1 - delta) * float(rng.uniform(0, 1)) * math.tanh(eps / 2) * 0.999
        got = to_approx_dp(ApproxDP(epsilon=eps, delta=delta), delta=target).epsilon
        assert got.kind == "exact"
        with mp.workdps(60):
            x = (mp.mpf(target) - delta) * (1 + mp.exp(-mp.mpf(eps))) / (1 - mp.mpf(delta))
            exact = max(mp.mpf(0), eps + mp.log1p(-x))
            assert mp.mpf(float(got)) >= exact, (eps, delta, target)
            assert float(got) <= math.nextafter(math.nextafter(float(exact), math.inf), math.inf)
