"""The Accountant: refuses before overspending, leaves state unchanged, enforces adaptivity."""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq

from dpkit.accounting.accountant import Accountant
from dpkit.divergences._closed import gaussian_delta
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP
from dpkit.mechanisms import Gaussian, Laplace


def snapshot(acc: Accountant):
    return (acc.spends, str(acc.remaining()))


def test_pure_budget_refuses_and_is_unchanged():
    acc = Accountant(PureDP(1.0))
    acc.spend(Laplace(sensitivity=1.0, epsilon=0.25), count=2)
    before = snapshot(acc)
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        acc.spend(Laplace(sensitivity=1.0, epsilon=0.25), count=3)
    assert snapshot(acc) == before
    acc.spend(PureDP(0.5))
    assert float(acc.remaining().epsilon) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(BudgetExceededError):
        acc.spend(PureDP(1e-9))
    assert len(acc.spends) == 2


def test_count_multiplies_for_every_family():
    """dp_accounting's RDP path forgets the repeat count of the exponential mechanism; here count
    is one mechanism for every budget type."""
    # 0.0625 is a binary fraction: 16 spends fill a budget of 1.0 exactly (16 spends of the float 0.1
    # would exceed it by 8.9e-16, and compositions are rounded up: issue 11)
    for budget, item in [(PureDP(1.0), PureDP(0.0625)), (ZCDP(1.0), ZCDP(0.0625)),
                         (RenyiDP(orders=[2.0, 8.0], epsilons=[1.0, 1.0]), PureDP(0.0625))]:
        one = Accountant(budget)
        one.spend(item, count=16)
        many = Accountant(budget)
        for _ in range(16):
            many.spend(item)
        assert str(one.remaining()) == str(many.remaining())
        with pytest.raises(BudgetExceededError):
            one.spend(item, count=1 if isinstance(budget, ZCDP) else 100)


def test_approx_budget_adaptive_uses_a_filter_tighter_than_basic():
    """Six (0.5, 1e-6) Gaussians filled (3, 1e-5) by basic composition; the zCDP filter (fixed by the first
    spend, a Gaussian mechanism with a rho) admits more, and still refuses in time."""
    acc = Accountant(ApproxDP(epsilon=3.0, delta=1e-5))
    g = Gaussian(sensitivity=1.0, epsilon=0.5, delta=1e-6)
    n = 0
    while True:
        try:
            acc.spend(g)
        except BudgetExceededError as exc:
            assert "Nothing was spent" in str(exc) and "zCDP filter" in str(exc)
            break
        n += 1
    assert n > 6
    rho = float(g.zcdp().rho)
    from dpkit.accounting.state import zcdp_epsilon

    assert zcdp_epsilon(n * rho, 1e-5) <= 3.0 < zcdp_epsilon((n + 1) * rho, 1e-5) * (1 + 1e-9)
    with pytest.raises(UnsupportedError, match="adaptively"):
        acc.epsilon(1e-5, method="pld")
    assert float(acc.epsilon(1e-5)) <= 3.0


def test_non_adaptive_uses_the_tightest_and_lets_more_through():
    g = Gaussian(sensitivity=1.0, sigma=5.0)
    acc = Accountant(ApproxDP(epsilon=2.0, delta=1e-5), adaptive=False)
    spent = 0
    while True:
        try:
            acc.spend(g, count=5)
        except BudgetExceededError:
            break
        spent += 5
    # exact: spent Gaussians of sigma 5 compose to mu = sqrt(spent)/5; its epsilon at 1e-5 must be <= 2
    mu = math.sqrt(spent) / 5.0
    exact = brentq(lambda e: gaussian_delta(mu, e) - 1e-5, 0, 100)
    assert exact <= 2.0
    mu_next = math.sqrt(spent + 5) / 5.0
    assert brentq(lambda e: gaussian_delta(mu_next, e) - 1e-5, 0, 100) > 2.0 - 0.01
    rows = {r.method: r for r in acc.report(1e-5)}
    assert rows["pld"].epsilon <= rows["rdp"].epsilon
    assert math.isnan(rows["basic"].epsilon)  # a sigma-built Gaussian states zCDP, not (epsilon, delta)
    assert not rows["pld"].valid_adaptively and rows["basic"].valid_adaptively
    assert float(acc.epsilon(1e-5, method="pld")) >= exact  # an upper bound


def test_methods_are_ordered_for_identical_pure_spends():
    acc = Accountant(ApproxDP(epsilon=100.0, delta=1e-3), adaptive=False)
    acc.spend(PureDP(0.1), count=100)
    rows = {r.method: r.epsilon for r in acc.report(1e-6)}
    assert rows["basic"] == pytest.approx(10.0)
    assert rows["pld"] <= rows["rdp"] <= rows["zcdp"] <= rows["basic"]
    # 100 randomized responses at 0.1: Kairouz-Oh-Viswanath's optimal value 4.7746 (docs/notes.md §1)
    assert rows["pld"] == pytest.approx(4.7746, abs=2e-3) and rows["pld"] >= 4.7746 - 1e-4


def test_zcdp_budget_and_conversions():
    acc = Accountant(ZCDP(0.5))
    acc.spend(GaussianDP(0.5))  # rho = mu^2 / 2 = 0.125
    acc.spend(Laplace(sensitivity=1.0, epsilon=0.5))  # rho = 0.5 tanh(0.25)
    left = float(acc.remaining().rho)
    assert left == pytest.approx(0.5 - 0.125 - 0.5 * math.tanh(0.25), rel=1e-9)


def test_wasserstein_is_never_spent():
    acc = Accountant(PureDP(1.0))
    with pytest.raises(UnsupportedError, match="transport distance"):
        acc.spend(WassersteinDP(p=1.0, epsilon=0.1))
    assert acc.spends == ()
    with pytest.raises(UnsupportedError):
        Accountant(WassersteinDP(p=1.0, epsilon=1.0))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_count(bad):
    acc = Accountant(PureDP(1.0))
    with pytest.raises(ValueError, match="count"):
        acc.spend(PureDP(0.1), count=bad)
    assert acc.spends == ()


def test_bad_budget_and_delta():
    with pytest.raises(TypeError):
        Accountant(1.0)  # type: ignore[arg-type]
    acc = Accountant(PureDP(1.0))
    acc.spend(PureDP(0.5))
    for bad in (0.0, 1.0, math.nan):
        with pytest.raises(ValueError, match="delta"):
            acc.epsilon(bad)
