"""Pure and approximate DP: tight zCDP, Rényi curve and profile, checked against mpmath.

References: randomized response and the KOV canonical pair evaluated by exact summation at 50
digits (guarantees_reference). rtol 1e-10 unless stated. Soundness is also checked on random
finite pairs that satisfy the input guarantee (the conversions must bound every such pair).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.guarantees import (
    ApproxDP,
    PureDP,
    ZCDP,
    approx_dp_to_profile,
    pure_to_approx_dp,
    pure_to_profile,
    pure_to_rdp,
    pure_to_zcdp,
)
from guarantees_reference import canonical_pair, hockey_stick, randomized_response, renyi

EPSILONS = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]


def _sup_renyi_over_alpha(epsilon: float) -> tuple[mp.mpf, mp.mpf]:
    """sup_{alpha > 1} D_alpha(RR_eps)/alpha over a grid down to alpha = 1 + 1e-30, and the limit
    alpha -> 1 (the KL divergence of RR, computed directly). 100 digits: alpha - 1 = 1e-30 costs 30."""
    with mp.workdps(100):
        p, q = randomized_response(epsilon)
        grid = [1 + mp.mpf(10) ** -k for k in range(1, 31)] + [mp.mpf(x) for x in (1.5, 2, 3, 10, 100, 1000)]
        sup = max(renyi(p, q, a) / a for a in grid)
        kl = mp.fsum(x * mp.log(x / y) for x, y in zip(p, q))
        return +sup, +kl


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_tight_pure_to_zcdp_is_sup_of_rr_renyi_over_alpha(epsilon: float) -> None:
    rho = pure_to_zcdp(PureDP(epsilon)).rho
    sup, kl = _sup_renyi_over_alpha(epsilon)
    # D_alpha/alpha of RR decreases in alpha, so the sup is the alpha -> 1 limit, the KL divergence.
    assert sup <= kl
    assert abs(sup - kl) <= mp.mpf(10) ** -25 * kl
    assert float(rho) == pytest.approx(float(kl), rel=1e-13)
    assert rho.kind == "exact"


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_bun_steinke_pure_to_zcdp_is_looser(epsilon: float) -> None:
    loose = pure_to_zcdp(PureDP(epsilon), tight=False)
    assert loose == ZCDP(epsilon**2 / 2)
    assert loose.rho.kind == "upper"
    assert loose.rho >= pure_to_zcdp(PureDP(epsilon)).rho


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0, 30.0])
@pytest.mark.parametrize("alpha", [1.000001, 1.01, 1.5, 2.0, 7.0, 100.0, 1e6])
def test_pure_to_rdp_is_rr_renyi_divergence(epsilon: float, alpha: float) -> None:
    p, q = randomized_response(epsilon)
    got = pure_to_rdp(PureDP(epsilon)).epsilon(alpha)
    assert float(got) == pytest.approx(float(renyi(p, q, alpha)), rel=1e-10)
    assert got <= epsilon * (1 + 1e-15)
    assert got <= alpha * epsilon * math.tanh(epsilon / 2) * (1 + 1e-12)


def test_pure_to_rdp_at_zero() -> None:
    np.testing.assert_array_equal(pure_to_rdp(PureDP(0.0)).epsilon(np.array([1.5, 9.0])), [0.0, 0.0])


@pytest.mark.parametrize("epsilon,delta", [(1.0, 0.0), (1.0, 1e-6), (0.1, 0.3), (5.0, 1e-12), (40.0, 1e-3)])
def test_approx_profile_is_canonical_pair_hockey_stick(epsilon: float, delta: float) -> None:
    profile = approx_dp_to_profile(ApproxDP(epsilon=epsilon, delta=delta))
    p, q = canonical_pair(epsilon, delta)
    grid = np.array([0.0, 0.01, 0.3, epsilon / 2, epsilon * 0.99, epsilon, epsilon + 1, 100.0])
    got = profile.delta(grid)
    for e, value in zip(grid, got):
        ref = hockey_stick(p, q, float(e))
        assert abs(mp.mpf(float(value)) - ref) <= 1e-12 * max(ref, mp.mpf(1e-300)) + 1e-300


def test_pure_profile_equals_rr_hockey_stick() -> None:
    p, q = randomized_response(2.0)
    profile = pure_to_profile(PureDP(2.0))
    for e in (0.0, 0.5, 1.9, 2.0, 3.0):
        assert float(profile.delta(e)) == pytest.approx(float(hockey_stick(p, q, e)), rel=1e-13, abs=1e-300)
    assert profile.kind == "exact"


def test_profile_inverses_are_exact() -> None:
    profile = approx_dp_to_profile(ApproxDP(epsilon=3.0, delta=1e-6))
    assert profile.epsilon(1e-7) == math.inf
    assert profile.epsilon(1e-6) == 3.0
    for target in (1e-5, 0.01, 0.3):
        eps = profile.epsilon(target)
        assert float(profile.delta(float(eps))) == pytest.approx(target, rel=1e-12)
    assert profile.epsilon(0.99) == 0.0


def test_pure_to_approx_dp() -> None:
    assert pure_to_approx_dp(PureDP(1.0)) == ApproxDP(epsilon=1.0, delta=0.0)
    tight = pure_to_approx_dp(PureDP(1.0), delta=0.1)
    # RR at eps = 1: delta(eps') = (e - e^eps')/(1 + e) = 0.1  =>  eps' = ln(e - 0.1 (1 + e)).
    assert float(tight.epsilon) == pytest.approx(float(mp.log(mp.e - mp.mpf("0.1") * (1 + mp.e))), rel=1e-14)
    assert pure_to_approx_dp(PureDP(1.0), delta=0.5).epsilon == 0.0  # tanh(1/2) = 0.46 < 0.5


def _pure_pair(draw: st.DrawFn) -> tuple[list[float], list[float], float]:
    k = draw(st.integers(2, 6))
    p = np.array(draw(st.lists(st.floats(1e-3, 1.0), min_size=k, max_size=k)))
    q = np.array(draw(st.lists(st.floats(1e-3, 1.0), min_size=k, max_size=k)))
    p, q = p / p.sum(), q / q.sum()
    epsilon = float(np.max(np.abs(np.log(p / q))))
    return p.tolist(), q.tolist(), epsilon


@settings(max_examples=80, deadline=None)
@given(data=st.data(), alpha=st.floats(1.001, 50.0))
def test_pure_conversions_bound_every_pure_dp_pair(data: st.DataObject, alpha: float) -> None:
    """Any full-support pair with |ln p/q| <= eps is eps-DP; its D_alpha must sit below the tight
    RDP curve and below alpha * rho_tight (Steinke 2024, Thms 4-5)."""
    p, q, epsilon = _pure_pair(data.draw)
    d_alpha = renyi(p, q, alpha)
    slack = mp.mpf(1e-12) * (1 + abs(d_alpha))
    assert d_alpha <= float(pure_to_rdp(PureDP(epsilon)).epsilon(alpha)) + slack
    assert d_alpha <= alpha * float(pure_to_zcdp(PureDP(epsilon)).rho) + slack


@settings(max_examples=80, deadline=None)
@given(data=st.data(), shift=st.floats(0.0, 3.0))
def test_approx_profile_bounds_every_approx_dp_pair(data: st.DataObject, shift: float) -> None:
    """A random pair is (eps, delta)-DP with delta = max of its two hockey-sticks at eps; the
    tight profile of that guarantee must bound its hockey-stick at every eps' (DRS Prop 2.5/2.12)."""
    k = data.draw(st.integers(2, 6))
    p = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k))) + 1e-12
    q = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k))) + 1e-12
    p, q = p / p.sum(), q / q.sum()
    epsilon = data.draw(st.floats(0.0, 4.0))
    delta = float(max(hockey_stick(p, q, epsilon), hockey_stick(q, p, epsilon)))
    profile = approx_dp_to_profile(ApproxDP(epsilon=epsilon, delta=min(1.0, delta * (1 + 1e-15))))
    for e in (0.0, epsilon * shift / 3, epsilon, epsilon + shift):
        assert hockey_stick(p, q, e) <= float(profile.delta(e)) * (1 + 1e-12) + 1e-15


@settings(max_examples=80, deadline=None)
@given(e1=st.floats(0.0, 50.0), e2=st.floats(0.0, 50.0), delta=st.floats(0.0, 1.0))
def test_pure_to_approx_dp_is_monotone_in_epsilon(e1: float, e2: float, delta: float) -> None:
    lo, hi = sorted((e1, e2))
    a = pure_to_approx_dp(PureDP(lo), delta=delta).epsilon
    assert a <= pure_to_approx_dp(PureDP(hi), delta=delta).epsilon


@settings(max_examples=80, deadline=None)
@given(epsilon=st.floats(0.0, 50.0), d1=st.floats(0.0, 1.0), d2=st.floats(0.0, 1.0))
def test_pure_to_approx_dp_is_monotone_in_delta(epsilon: float, d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    a = pure_to_approx_dp(PureDP(epsilon), delta=hi).epsilon
    assert a <= pure_to_approx_dp(PureDP(epsilon), delta=lo).epsilon
