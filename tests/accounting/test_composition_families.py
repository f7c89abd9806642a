"""RDP / zCDP / GDP / Wasserstein composition, and the repeat count for every registered type.

References: the k-fold product of N(0, s^2) vs N(D, s^2) is, through the sufficient statistic
(the mean), the pair N(0, s^2/k) vs N(D, s^2/k); its divergences come from dpkit.divergences
(closed forms checked against mpmath in tests/divergences). Transport distances of small products
come from an optimal-transport linear programme (scipy.optimize.linprog, HiGHS). rtol 1e-10.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog

from dpkit.accounting.composition import (
    COMPOSERS,
    PaperValue,
    compose_gdp,
    compose_guarantees,
    compose_rdp,
    compose_wasserstein,
    compose_zcdp,
    wdp_paper_value,
)
from dpkit.distributions import Finite, Gaussian, Laplace
from dpkit.divergences import hockey_stick, renyi, wasserstein
from dpkit.errors import UnsupportedError
from dpkit.guarantees import (
    ZCDP,
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    WassersteinDP,
    gdp_to_profile,
    zcdp_to_rdp,
)

RTOL = 1e-10
SIGMA, SENSITIVITY = 3.0, 1.5


def gaussian_rdp(sigma: float, sensitivity: float) -> RenyiDP:
    return RenyiDP(curve=lambda a: a * sensitivity**2 / (2 * sigma**2), description=f"Gaussian sigma={sigma}")


@pytest.mark.parametrize("k", [1, 4, 100])
def test_zcdp_composition_equals_one_gaussian_with_sigma_over_sqrt_k(k):
    g = compose_zcdp([(ZCDP(SENSITIVITY**2 / (2 * SIGMA**2)), k)])
    assert g.rho.kind == "exact"
    single = Gaussian(0, SIGMA / math.sqrt(k)), Gaussian(SENSITIVITY, SIGMA / math.sqrt(k))
    for alpha in [1.5, 2.0, 10.0]:
        assert float(g.rho) * alpha == pytest.approx(float(renyi(*single, alpha)), rel=RTOL)


@pytest.mark.parametrize("k", [1, 4, 100])
def test_rdp_composition_equals_one_gaussian(k):
    g = compose_rdp([(gaussian_rdp(SIGMA, SENSITIVITY), k)])
    single = Gaussian(0, SIGMA / math.sqrt(k)), Gaussian(SENSITIVITY, SIGMA / math.sqrt(k))
    alphas = np.array([1.25, 2.0, 7.5, 64.0])
    np.testing.assert_allclose(g.epsilon(alphas), [float(renyi(*single, a)) for a in alphas], rtol=RTOL)
    table = compose_rdp([(RenyiDP(orders=alphas, epsilons=alphas * SENSITIVITY**2 / (2 * SIGMA**2)), k)])
    np.testing.assert_allclose(table.epsilon(alphas), g.epsilon(alphas), rtol=1e-14)


@pytest.mark.parametrize("k", [1, 4, 100])
def test_gdp_composition_equals_one_gaussian(k):
    g = compose_gdp([(GaussianDP(SENSITIVITY / SIGMA), k)])
    assert g.mu.kind == "exact" and float(g.mu) == pytest.approx(math.sqrt(k) * SENSITIVITY / SIGMA, rel=1e-15)
    single = Gaussian(0, SIGMA / math.sqrt(k)), Gaussian(SENSITIVITY, SIGMA / math.sqrt(k))
    profile = gdp_to_profile(g)
    for eps in [0.0, 0.5, 2.0, 6.0]:
        assert float(profile.delta(eps)) == pytest.approx(float(hockey_stick(*single, eps)), rel=RTOL)


def test_gdp_quadrature_and_no_overflow():
    assert float(compose_gdp([GaussianDP(0.6), GaussianDP(0.8)]).mu) == pytest.approx(1.0, rel=1e-15)
    assert float(compose_gdp([(GaussianDP(1e200), 4)]).mu) == pytest.approx(2e200, rel=1e-15)


def test_rdp_mixed_tables_and_callables_use_common_orders():
    table = RenyiDP(orders=[2, 4, 8], epsilons=[0.1, 0.2, 0.4])
    other = RenyiDP(orders=[4, 8, 16], epsilons=[1.0, 1.0, 1.0])
    g = compose_rdp([table, (other, 2), zcdp_to_rdp(ZCDP(0.01))])
    assert g.orders == (4.0, 8.0)
    np.testing.assert_allclose(g.epsilon(np.array([4.0, 8.0])), [0.2 + 2 + 0.04, 0.4 + 2 + 0.08], rtol=1e-14)
    with pytest.raises(ValueError, match="share no order"):
        compose_rdp([RenyiDP(orders=[2], epsilons=[0.1]), RenyiDP(orders=[3], epsilons=[0.1])])


def test_rdp_repeat_count_of_an_exponential_mechanism_is_not_forgotten():
    """dp_accounting's RDP path composes ten repeats of an exponential mechanism as one."""
    one = RenyiDP(curve=lambda a: np.minimum(1.0, a * 0.125), description="exponential mechanism")
    ten = compose_rdp([(one, 10)])
    assert float(ten.epsilon(3.0)) == pytest.approx(10 * 0.375, rel=1e-15)


# ---- the repeat count, for every registered type ----------------------------------------------

SAMPLES = {
    PureDP: PureDP(0.3),
    ApproxDP: ApproxDP(epsilon=0.3, delta=1e-7),
    RenyiDP: gaussian_rdp(2.0, 1.0),
    ZCDP: ZCDP(0.07),
    GaussianDP: GaussianDP(0.4),
    WassersteinDP: WassersteinDP(p=2.0, epsilon=0.3),
}


def numbers(g: object) -> tuple[float, ...]:
    if isinstance(g, RenyiDP):
        return tuple(float(x) for x in g.epsilon(np.array([1.5, 2.0, 32.0])))
    names = {PureDP: ("epsilon",), ApproxDP: ("epsilon", "delta"), ZCDP: ("rho",), GaussianDP: ("mu",),
             WassersteinDP: ("p", "epsilon")}[type(g)]
    return tuple(float(getattr(g, n)) for n in names)


def test_every_registered_type_has_a_sample():
    assert set(SAMPLES) == set(COMPOSERS)


@pytest.mark.parametrize("cls", list(COMPOSERS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("k", [1, 2, 7, 50])
def test_count_equals_k_separate_copies_for_every_registered_type(cls, k):
    g = SAMPLES[cls]
    counted = compose_guarantees([(g, k)])
    repeated = compose_guarantees([g] * k)
    assert type(counted) is type(repeated)
    np.testing.assert_allclose(numbers(counted), numbers(repeated), rtol=1e-14)
    if k > 1:  # and the count really multiplies
        assert numbers(counted) != numbers(compose_guarantees([g]))


def test_compose_guarantees_refuses_mixed_families_and_profiles():
    with pytest.raises(TypeError, match="one family at a time"):
        compose_guarantees([ZCDP(0.1), GaussianDP(1.0)])
    with pytest.raises(UnsupportedError, match="PLD accounting"):
        compose_guarantees([PrivacyProfile(delta_function=lambda e: np.exp(-e))])
    with pytest.raises(TypeError, match="no composer is registered for float"):
        compose_guarantees([0.5])
    assert isinstance(compose_guarantees([PureDP(0.1), ApproxDP(epsilon=0.1, delta=1e-9)]), ApproxDP)


# ---- Wasserstein ------------------------------------------------------------------------------


def transport_cost(p, xs, q, ys, order):
    """min over couplings of sum gamma(x, y) ||x - y||_order^order (linear programme)."""
    n, m = len(p), len(q)
    cost = np.array([[np.sum(np.abs(np.subtract(x, y)) ** order) for y in ys] for x in xs]).ravel()
    a_eq = np.vstack([np.kron(np.eye(n), np.ones(m)), np.kron(np.ones(n), np.eye(m))])
    res = linprog(cost, A_eq=a_eq, b_eq=np.concatenate([p, q]), bounds=(0, None), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("order", [1.0, 2.0, 3.0])
def test_wasserstein_product_bound_holds_and_is_attained_by_shifts(order):
    rng = np.random.default_rng(20240117)
    laws = []
    for _ in range(2):
        p, q = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3))
        xs, ys = np.sort(rng.normal(size=3)), np.sort(rng.normal(size=3))
        laws.append((p, xs, q, ys))
    w = [float(wasserstein(Finite(p, support=xs), Finite(q, support=ys), order=order)) for p, xs, q, ys in laws]
    bound = compose_wasserstein([WassersteinDP(p=order, epsilon=x) for x in w])
    P = np.outer(laws[0][0], laws[1][0]).ravel()
    Q = np.outer(laws[0][2], laws[1][2]).ravel()
    XS = list(itertools.product(laws[0][1], laws[1][1]))
    YS = list(itertools.product(laws[0][3], laws[1][3]))
    assert transport_cost(P, XS, Q, YS, order) ** (1 / order) <= float(bound.epsilon) * (1 + 1e-9)
    # shifts by v = (0.7, 1.9): exactly ||v||_order, which the bound returns
    base = rng.dirichlet(np.ones(3))
    support = np.array([0.0, 0.5, 2.0])
    P = np.outer(base, base).ravel()
    XS = list(itertools.product(support, support))
    YS = [(a + 0.7, b + 1.9) for a, b in XS]
    exact = transport_cost(P, XS, P, YS, order) ** (1 / order)
    shifted = compose_wasserstein([WassersteinDP(p=order, epsilon=0.7), WassersteinDP(p=order, epsilon=1.9)])
    assert exact == pytest.approx(float(shifted.epsilon), rel=1e-7)
    assert float(shifted.epsilon) == pytest.approx((0.7**order + 1.9**order) ** (1 / order), rel=1e-15)


def test_wasserstein_values_and_refusals():
    assert compose_wasserstein([WassersteinDP(p=2.0, epsilon=3.0), WassersteinDP(p=2.0, epsilon=4.0)]).epsilon == 5.0
    assert compose_wasserstein([(WassersteinDP(p=1.0, epsilon=0.5), 3)]).epsilon == 1.5
    assert compose_wasserstein([WassersteinDP(p=1.0, epsilon=0.0)]).epsilon == 0.0
    with pytest.raises(ValueError, match="same order p"):
        compose_wasserstein([WassersteinDP(p=1.0, epsilon=0.5), WassersteinDP(p=2.0, epsilon=0.5)])
    with pytest.raises(UnsupportedError, match="compose_wasserstein"):
        compose_zcdp([WassersteinDP(p=1.0, epsilon=0.5)])
    with pytest.raises(TypeError, match="PaperValue"):
        compose_wasserstein([wdp_paper_value(1.0, 1.0, 1.0)])  # a paper value is not a guarantee


@pytest.mark.parametrize("order", [1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("shift", [1.0, 2.5])
def test_exact_wasserstein_of_shifted_noise_is_the_shift(order, scale, shift):
    assert float(wasserstein(Laplace(0, scale), Laplace(shift, scale), order=order)) == pytest.approx(shift, rel=RTOL)
    assert float(wasserstein(Gaussian(0, scale), Gaussian(shift, scale), order=order)) == pytest.approx(shift, rel=RTOL)


def test_paper_values_are_below_the_exact_distance_and_not_guarantees():
    exact = float(wasserstein(Laplace(0, 1.0), Laplace(1.0, 1.0), order=2.0))  # = 1
    for order, value in [(1.0, 0.429), (2.0, 0.463)]:
        v = wdp_paper_value(order=order, scale=1.0, sensitivity=1.0)
        assert isinstance(v, PaperValue) and not isinstance(v, float)
        assert round(v.value, 3) == value < exact
        assert "not an upper bound" in v.note
    assert round(wdp_paper_value(order=1.0, scale=5.0, sensitivity=1.0).value, 3) == 0.097
    assert round(wdp_paper_value(order=1.0, scale=4.0, sensitivity=1.0, family="gaussian").value, 3) == 0.125
    # nor a lower bound: Laplace, scale 1, sensitivity 3, order 1 gives 3.04 > W = 3
    above = wdp_paper_value(order=1.0, scale=1.0, sensitivity=3.0).value
    assert round(above, 2) == 3.04 > float(wasserstein(Laplace(0, 1.0), Laplace(3.0, 1.0), order=1.0))
