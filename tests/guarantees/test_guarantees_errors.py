"""Bad input at every public boundary: NaN, +-inf and out-of-range values raise ValueError naming
the parameter, wrong types raise TypeError, and every conversion refuses WassersteinDP."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import dpkit.guarantees.conversions as conversions
from dpkit.errors import UnsupportedError
from dpkit.guarantees import (
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    WassersteinDP,
    ZCDP,
    gdp_to_approx_dp,
    profile_to_approx_dp,
    pure_to_approx_dp,
    pure_to_profile,
    rdp_to_approx_dp,
    rdp_to_profile,
    to_approx_dp,
    to_rdp,
    to_zcdp,
    zcdp_to_approx_dp,
)

NAN, INF = math.nan, math.inf
NON_NEGATIVE_BAD = [NAN, INF, -INF, -1.0, -1e-300]


@pytest.mark.parametrize("bad", NON_NEGATIVE_BAD)
def test_epsilon_rho_must_be_finite_non_negative(bad: float) -> None:
    for build in (
        lambda: PureDP(bad),
        lambda: ApproxDP(epsilon=bad, delta=0.0),
        lambda: WassersteinDP(p=1.0, epsilon=bad),
    ):
        with pytest.raises(ValueError, match=rf"epsilon must be finite and >= 0; got {bad}"):
            build()
    with pytest.raises(ValueError, match=rf"rho must be finite and >= 0; got {bad}"):
        ZCDP(bad)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, -0.1, 1.5])
def test_delta_must_be_in_unit_interval(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"delta must be in \[0, 1\]; got {bad}"):
        ApproxDP(epsilon=1.0, delta=bad)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]"):
        pure_to_approx_dp(PureDP(1.0), delta=bad)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]"):
        profile_to_approx_dp(pure_to_profile(PureDP(1.0)), delta=bad)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]"):
        pure_to_profile(PureDP(1.0)).epsilon(bad)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, -1.0])
def test_mu_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"mu must be finite and > 0; got {bad}"):
        GaussianDP(bad)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, 0.5, -2.0])
def test_wasserstein_order_must_be_at_least_one(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"p must be finite and >= 1 \(the Wasserstein order\); got {bad}"):
        WassersteinDP(p=bad, epsilon=1.0)


@pytest.mark.parametrize("bad", ["1", None, True, [1.0], 1 + 0j])
def test_non_numbers_are_type_errors(bad: object) -> None:
    for build in (
        lambda: PureDP(bad),  # type: ignore[arg-type]
        lambda: ApproxDP(epsilon=1.0, delta=bad),  # type: ignore[arg-type]
        lambda: ZCDP(bad),  # type: ignore[arg-type]
        lambda: GaussianDP(bad),  # type: ignore[arg-type]
        lambda: WassersteinDP(p=bad, epsilon=1.0),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match="must be a real number"):
            build()


def test_numpy_scalars_are_accepted() -> None:
    assert PureDP(np.float64(1.0)) == PureDP(1.0)
    assert GaussianDP(np.int64(2)) == GaussianDP(2.0)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, 1.0, -0.5, 1.5])
def test_conversions_need_delta_in_open_unit_interval(bad: float) -> None:
    for convert in (
        lambda: zcdp_to_approx_dp(ZCDP(1.0), delta=bad),
        lambda: zcdp_to_approx_dp(ZCDP(1.0), delta=bad, method="bs16"),
        lambda: rdp_to_approx_dp(RenyiDP(curve=lambda a: a), delta=bad),
        lambda: rdp_to_approx_dp(RenyiDP(curve=lambda a: a), delta=bad, method="mironov"),
        lambda: gdp_to_approx_dp(GaussianDP(1.0), delta=bad),
    ):
        with pytest.raises(ValueError, match=rf"delta must be in \(0, 1\); got {bad}"):
            convert()


def test_unknown_methods() -> None:
    with pytest.raises(ValueError, match=r"method must be one of \('cks', 'bs16'\); got 'mironov'"):
        zcdp_to_approx_dp(ZCDP(1.0), delta=1e-5, method="mironov")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"method must be one of \('cks', 'mironov'\); got 'bs16'"):
        rdp_to_approx_dp(RenyiDP(curve=lambda a: a), delta=1e-5, method="bs16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method must be one of"):
        rdp_to_profile(RenyiDP(curve=lambda a: a), method="exact")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 1.0, 0.5, -3.0])
def test_rdp_orders_must_exceed_one(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"every order alpha must be finite and > 1 .*got {bad}"):
        RenyiDP(orders=[2.0, bad], epsilons=[0.1, 0.2])
    with pytest.raises(ValueError, match=rf"alpha must be finite and > 1; got {bad}"):
        RenyiDP(curve=lambda a: a).epsilon(bad)


@pytest.mark.parametrize("bad", [NAN, -INF, -1.0])
def test_rdp_epsilons_must_be_non_negative(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"every epsilon must be >= 0 \(inf allowed\); got {bad}"):
        RenyiDP(orders=[2.0, 3.0], epsilons=[0.1, bad])


def test_rdp_shape_errors() -> None:
    with pytest.raises(ValueError, match="same length; got 2 and 1"):
        RenyiDP(orders=[2.0, 3.0], epsilons=[0.1])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        RenyiDP(orders=[], epsilons=[])
    with pytest.raises(ValueError, match="distinct"):
        RenyiDP(orders=[2.0, 2.0], epsilons=[0.1, 0.2])
    with pytest.raises(ValueError, match="either curve or both orders and epsilons"):
        RenyiDP(orders=[2.0])
    with pytest.raises(ValueError, match="not both"):
        RenyiDP(curve=lambda a: a, orders=[2.0], epsilons=[1.0])
    with pytest.raises(TypeError, match="curve must be callable"):
        RenyiDP(curve=3.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [NAN, -0.5])
def test_rdp_curve_returning_nan_or_negative_is_refused(value: float) -> None:
    rdp = RenyiDP(curve=lambda a: np.full_like(np.asarray(a, dtype=float), value))
    with pytest.raises(ValueError, match=r"the RDP curve returned .* at alpha="):
        rdp_to_approx_dp(rdp, delta=1e-5)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, -1.0])
def test_profile_epsilon_must_be_finite_non_negative(bad: float) -> None:
    profile = pure_to_profile(PureDP(1.0))
    with pytest.raises(ValueError, match=rf"epsilon must be finite and >= 0; got {bad}"):
        profile.delta(bad)
    with pytest.raises(ValueError, match="epsilon must be finite and >= 0"):
        profile.delta([0.5, bad])


@pytest.mark.parametrize("value", [NAN, 1.5, -0.1])
def test_profile_function_out_of_range_is_refused(value: float) -> None:
    profile = PrivacyProfile(delta_function=lambda e: value)
    with pytest.raises(ValueError, match=r"delta_function returned .* must take values in \[0, 1\]"):
        profile.delta(0.5)
    with pytest.raises(ValueError, match="delta_function returned"):
        profile.epsilon(0.5)


@pytest.mark.parametrize("value", [NAN, -1.0])
def test_profile_inverse_out_of_range_is_refused(value: float) -> None:
    profile = PrivacyProfile(delta_function=np.exp, epsilon_function=lambda d: value)
    with pytest.raises(ValueError, match=r"epsilon_function returned .* at delta=0.5"):
        profile.epsilon(0.5)


def test_profile_needs_callables() -> None:
    with pytest.raises(TypeError, match="delta_function must be callable"):
        PrivacyProfile(delta_function=0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="epsilon_function must be callable"):
        PrivacyProfile(delta_function=np.exp, epsilon_function=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind must be"):
        PrivacyProfile(delta_function=np.exp, kind="lower")  # type: ignore[arg-type]


def test_no_finite_epsilon_is_unsupported() -> None:
    with pytest.raises(UnsupportedError, match="no finite epsilon"):
        to_approx_dp(ApproxDP(epsilon=1.0, delta=1e-3), delta=1e-6)


def test_delta_positive_guarantees_have_no_renyi_bound() -> None:
    for convert in (to_rdp, to_zcdp):
        with pytest.raises(UnsupportedError, match="infinite"):
            convert(ApproxDP(epsilon=1.0, delta=1e-9))
    assert to_zcdp(ApproxDP(epsilon=1.0, delta=0.0)) == to_zcdp(PureDP(1.0))
    with pytest.raises(UnsupportedError, match="cannot certify zCDP"):
        to_zcdp(RenyiDP(curve=lambda a: a))


def test_wrong_guarantee_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="pure_to_profile needs a PureDP; got ZCDP"):
        pure_to_profile(ZCDP(1.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="to_approx_dp does not know float"):
        to_approx_dp(1.0, delta=1e-5)


# ------------------------------------------------------------------ WassersteinDP is inert


def _call(name: str, guarantee: object) -> object:
    function = getattr(conversions, name)
    parameters = inspect.signature(function).parameters
    if "delta" in parameters and parameters["delta"].default is inspect.Parameter.empty:
        return function(guarantee, delta=1e-5)
    return function(guarantee)


@pytest.mark.parametrize("name", conversions.__all__)
def test_every_conversion_refuses_wasserstein_dp(name: str) -> None:
    with pytest.raises(UnsupportedError, match="WassersteinDP cannot be converted") as info:
        _call(name, WassersteinDP(p=1.0, epsilon=0.1))
    assert "noise scale" in str(info.value)


def test_wasserstein_bound_does_not_determine_privacy() -> None:
    """Why WDP is refused (docs/notes.md §6): N(0, s^2) vs N(1, s^2) have W_p = 1 for every p and
    every s (quantile coupling, checked by mpmath quadrature), yet their privacy ranges from nearly
    none (s = 0.1) to strong (s = 10): no function of W_p bounds delta(epsilon)."""
    import mpmath as mp

    from guarantees_reference import gdp_delta

    def quantile(u: mp.mpf, loc: float, s: float) -> mp.mpf:
        return loc + s * mp.sqrt(2) * mp.erfinv(2 * u - 1)

    for p in (1.0, 2.0, 3.5):
        for s in (0.1, 10.0):
            integrand = lambda u, s=s, p=p: abs(quantile(u, 1.0, s) - quantile(u, 0.0, s)) ** p  # noqa: E731
            w_p = mp.quad(integrand, [0, 0.5, 1]) ** (1 / p)
            assert abs(w_p - 1) < 1e-30
    assert gdp_delta(1.0, 1 / 0.1) > 0.99  # s = 0.1: mu = 10, delta(1) ~ 1
    assert gdp_delta(1.0, 1 / 10.0) < 1e-20  # s = 10: mu = 0.1
