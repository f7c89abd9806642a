"""Definitions: construction, printing, immutability, equality; PrivacyProfile and RenyiDP behaviour."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit.guarantees as guarantees
import dpkit.guarantees.conversions as conversions
from dpkit._math import Estimate
from dpkit.errors import UnsupportedError
from dpkit.guarantees import (
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    WassersteinDP,
    ZCDP,
)


def test_all_is_sorted_and_complete() -> None:
    for module in (guarantees, conversions):
        assert module.__all__ == sorted(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), name
    assert set(conversions.__all__) <= set(guarantees.__all__)


@pytest.mark.parametrize(
    "value,text",
    [
        (PureDP(1.0), "1.0-DP"),
        (ApproxDP(epsilon=1.0, delta=1e-6), "(1.0, 1e-06)-DP"),
        (ZCDP(0.5), "0.5-zCDP"),
        (GaussianDP(1.2), "1.2-GDP"),
        (WassersteinDP(p=2.0, epsilon=0.5), "(2.0, 0.5)-WDP"),
        (RenyiDP(orders=[4, 2], epsilons=[0.3, 0.1]), "RDP at orders {2.0: 0.1, 4.0: 0.3}"),
        (RenyiDP(curve=lambda a: a, description="alpha -> alpha"), "RDP curve (alpha -> alpha)"),
        (PrivacyProfile(delta_function=np.exp, description="d"), "privacy profile (d)"),
    ],
)
def test_str(value: object, text: str) -> None:
    assert str(value) == text


def test_values_are_frozen_and_compare_by_value() -> None:
    g = ApproxDP(epsilon=1, delta=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.epsilon = 2.0  # type: ignore[misc]
    assert g == ApproxDP(epsilon=1.0, delta=0.0)
    assert hash(PureDP(1)) == hash(PureDP(1.0))
    assert PureDP(1.0) == PureDP(epsilon=1.0)
    assert isinstance(PureDP(1).epsilon, float)
    assert not hasattr(PureDP(1.0), "__dict__")  # slotted


def test_two_number_guarantees_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        ApproxDP(1.0, 1e-6)  # type: ignore[misc]
    with pytest.raises(TypeError):
        WassersteinDP(2.0, 0.5)  # type: ignore[misc]


def test_estimates_are_kept() -> None:
    e = Estimate(1.5, kind="upper", method="m")
    assert ApproxDP(epsilon=e, delta=0.1).epsilon.kind == "upper"  # type: ignore[attr-defined]


def test_zero_parameters_are_allowed() -> None:
    assert PureDP(0.0).epsilon == 0.0
    assert ZCDP(0.0).rho == 0.0
    assert ApproxDP(epsilon=0.0, delta=1.0).delta == 1.0
    assert WassersteinDP(p=1.0, epsilon=0.0).p == 1.0


def test_rdp_epsilons_may_be_infinite() -> None:
    rdp = RenyiDP(orders=[2.0, 3.0], epsilons=[math.inf, 1.0])
    assert rdp.epsilon(2.0) == math.inf


# ------------------------------------------------------------------ PrivacyProfile


def _exp_profile() -> PrivacyProfile:
    return PrivacyProfile(delta_function=lambda e: np.exp(-np.asarray(e)), description="e^-eps")


def test_profile_bisection_never_understates() -> None:
    profile = _exp_profile()
    for delta in (1e-300, 1e-12, 0.3, 0.999):
        got = profile.epsilon(delta)
        exact = math.log(1 / delta)
        assert got.kind == "upper"
        assert got >= exact
        assert got - exact <= 1e-12 * max(1.0, exact)
        assert math.exp(-got) <= delta
    assert profile.epsilon(1.0) == 0.0


def test_profile_without_finite_epsilon_gives_inf() -> None:
    floor = PrivacyProfile(delta_function=lambda e: 0.5 + 0.5 * np.exp(-np.asarray(e)))
    assert floor.epsilon(0.4) == math.inf


def test_profile_delta_zero_needs_exact_inverse() -> None:
    with pytest.raises(UnsupportedError, match="delta=0"):
        _exp_profile().epsilon(0.0)
    exact = PrivacyProfile(delta_function=np.exp, epsilon_function=lambda d: math.inf)
    assert exact.epsilon(0.0) == math.inf


def test_profile_accepts_scalar_only_functions() -> None:
    scalar_only = PrivacyProfile(delta_function=lambda e: math.exp(-e))
    np.testing.assert_allclose(scalar_only.delta([0.0, 1.0]), [1.0, math.exp(-1.0)])
    assert scalar_only.delta(2.0) == pytest.approx(math.exp(-2.0))


def test_profile_delta_shape_and_kind() -> None:
    profile = _exp_profile()
    assert profile.delta(np.zeros((2, 3))).shape == (2, 3)
    assert profile.delta(0.5).kind == "upper"


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(0.1, 10.0), d1=st.floats(1e-300, 1.0), d2=st.floats(1e-300, 1.0))
def test_profile_inverse_is_monotone(scale: float, d1: float, d2: float) -> None:
    profile = PrivacyProfile(delta_function=lambda e: np.exp(-np.asarray(e) / scale))
    lo, hi = sorted((d1, d2))
    assert profile.epsilon(hi) <= profile.epsilon(lo)
    assert math.exp(-profile.epsilon(lo) / scale) <= lo


# ------------------------------------------------------------------ RenyiDP


def test_rdp_orders_are_sorted_and_only_they_are_usable() -> None:
    rdp = RenyiDP(orders=np.array([8.0, 2.0]), epsilons=(2.0, 0.5))
    assert rdp.orders == (2.0, 8.0) and rdp.epsilons == (0.5, 2.0)
    np.testing.assert_array_equal(rdp.epsilon([8.0, 2.0]), [2.0, 0.5])
    with pytest.raises(ValueError, match=r"alpha=3.0 is not one of this curve's orders"):
        rdp.epsilon(3.0)


def test_rdp_curve_values() -> None:
    rdp = RenyiDP(curve=lambda a: math.log(a))  # scalar-only callable
    assert rdp.epsilon(math.e) == pytest.approx(1.0)
    np.testing.assert_allclose(rdp.epsilon([2.0, 4.0]), [math.log(2), math.log(4)])
    assert rdp.epsilon(2.0).kind == "upper"


def test_long_rdp_str_is_abbreviated() -> None:
    text = str(RenyiDP(orders=range(2, 20), epsilons=np.arange(18) / 10))
    assert "..." in text and text.startswith("RDP at orders {2.0: 0.0")
