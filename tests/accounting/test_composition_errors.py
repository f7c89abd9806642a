"""Bad input at every public boundary of dpkit.accounting.composition: NaN, +-inf, out-of-range
values and non-integer k raise ValueError naming the parameter, wrong types raise TypeError,
WassersteinDP is refused outside compose_wasserstein."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting.composition import (
    advanced_per_step_epsilon,
    compose_advanced,
    compose_basic,
    compose_gdp,
    compose_kov_bound,
    compose_optimal,
    compose_optimal_heterogeneous,
    compose_parallel,
    compose_rdp,
    compose_wasserstein,
    compose_zcdp,
    wdp_paper_value,
)
from dpkit.errors import UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP

NAN, INF = math.nan, math.inf
K_FUNCTIONS = {
    "advanced": lambda k: compose_advanced(0.1, 0.0, k, delta_prime=1e-6),
    "kov": lambda k: compose_kov_bound(0.1, 0.0, k, delta_prime=1e-6),
    "optimal": lambda k: compose_optimal(0.1, 0.0, k, delta_total=1e-6),
    "per_step": lambda k: advanced_per_step_epsilon(0.5, k, 1e-6),
}
EPSILON_FUNCTIONS = {
    "advanced": lambda e: compose_advanced(e, 0.0, 3, delta_prime=1e-6),
    "kov": lambda e: compose_kov_bound(e, 0.0, 3, delta_prime=1e-6),
    "optimal": lambda e: compose_optimal(e, 0.0, 3, delta_total=1e-6),
}
DELTA_FUNCTIONS = {
    "advanced": lambda d: compose_advanced(0.1, d, 3, delta_prime=1e-6),
    "kov": lambda d: compose_kov_bound(0.1, d, 3, delta_prime=1e-6),
    "optimal": lambda d: compose_optimal(0.1, d, 3, epsilon_total=0.2),
}
LIST_FUNCTIONS = {
    "basic": (compose_basic, PureDP(0.1)),
    "parallel": (compose_parallel, PureDP(0.1)),
    "optimal_heterogeneous": (lambda gs: compose_optimal_heterogeneous(gs, delta_total=0.1), PureDP(0.1)),
    "rdp": (compose_rdp, RenyiDP(curve=lambda a: 0.1 * a)),
    "zcdp": (compose_zcdp, ZCDP(0.1)),
    "gdp": (compose_gdp, GaussianDP(0.1)),
    "wasserstein": (compose_wasserstein, WassersteinDP(p=1.0, epsilon=0.1)),
}


@pytest.mark.parametrize("name", list(K_FUNCTIONS))
@pytest.mark.parametrize("bad", [0, -3, 1.5, 2.0, NAN, INF, -INF])
def test_k_must_be_an_integer_at_least_one(name, bad):
    with pytest.raises(ValueError, match=rf"k must be an integer >= 1; got {bad}"):
        K_FUNCTIONS[name](bad)


@pytest.mark.parametrize("name", list(K_FUNCTIONS))
@pytest.mark.parametrize("bad", [True, "3", None])
def test_k_of_wrong_type(name, bad):
    with pytest.raises(TypeError, match="k must be an integer >= 1"):
        K_FUNCTIONS[name](bad)


@pytest.mark.parametrize("name", list(K_FUNCTIONS))
def test_numpy_integer_k_is_accepted(name):
    K_FUNCTIONS[name](np.int64(3))


@pytest.mark.parametrize("name", list(EPSILON_FUNCTIONS))
@pytest.mark.parametrize("bad", [NAN, INF, -INF, -0.1])
def test_epsilon_must_be_finite_non_negative(name, bad):
    with pytest.raises(ValueError, match=rf"epsilon must be finite and >= 0; got {bad}"):
        EPSILON_FUNCTIONS[name](bad)


@pytest.mark.parametrize("name", list(DELTA_FUNCTIONS))
@pytest.mark.parametrize("bad", [NAN, INF, -INF, -0.1, 1.5])
def test_delta_must_be_in_unit_interval(name, bad):
    with pytest.raises(ValueError, match=rf"delta must be in \[0, 1\]; got {bad}"):
        DELTA_FUNCTIONS[name](bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, NAN, INF, -INF])
def test_delta_prime_must_be_in_open_unit_interval(bad):
    with pytest.raises(ValueError, match=rf"delta_prime must be in \(0, 1\); got {bad}"):
        compose_advanced(0.1, 0.0, 3, delta_prime=bad)
    with pytest.raises(ValueError, match="delta_prime must be in"):
        advanced_per_step_epsilon(0.5, 3, bad)
    if not bad == 1.0:  # KOV allows delta~ = 1
        with pytest.raises(ValueError, match=r"delta_prime must be in"):
            compose_kov_bound(0.1, 0.0, 3, delta_prime=bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, 2.0, -0.5, NAN, INF, -INF])
def test_per_step_total_epsilon_in_open_unit_interval(bad):
    with pytest.raises(ValueError, match="total_epsilon must be"):
        advanced_per_step_epsilon(bad, 10, 1e-6)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, -0.5, 1.5])
def test_optimal_targets(bad):
    with pytest.raises(ValueError, match=rf"delta_total must be in \[0, 1\]; got {bad}"):
        compose_optimal(0.1, 0.0, 3, delta_total=bad)
    if not bad == 1.5:
        with pytest.raises(ValueError, match=rf"epsilon_total must be finite and >= 0; got {bad}"):
            compose_optimal(0.1, 0.0, 3, epsilon_total=bad)


def test_optimal_needs_exactly_one_target():
    with pytest.raises(ValueError, match="exactly one of delta_total"):
        compose_optimal(0.1, 0.0, 3)
    with pytest.raises(ValueError, match="exactly one of delta_total"):
        compose_optimal(0.1, 0.0, 3, delta_total=1e-6, epsilon_total=1.0)
    with pytest.raises(ValueError, match="exactly one of delta_total"):
        compose_optimal_heterogeneous([PureDP(0.1)])


def test_optimal_refuses_huge_k():
    with pytest.raises(UnsupportedError, match="compose_kov_bound"):
        compose_optimal(0.1, 0.0, 10**6 + 1, delta_total=1e-6)


def test_variant_and_neighboring_names():
    with pytest.raises(ValueError, match="variant must be 'drv' or 'tanh'; got 'kov'"):
        compose_advanced(0.1, 0.0, 3, delta_prime=1e-6, variant="kov")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="neighboring must be 'add_remove' or 'substitute'; got 'bounded'"):
        compose_parallel([PureDP(0.1)], neighboring="bounded")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(LIST_FUNCTIONS))
def test_list_inputs(name):
    function, sample = LIST_FUNCTIONS[name]
    with pytest.raises(ValueError, match="at least one guarantee; got an empty list"):
        function([])
    with pytest.raises(TypeError, match="list of guarantees"):
        function(sample)  # a bare guarantee, not a list
    with pytest.raises(TypeError, match="tuple of length 3"):
        function([(sample, 2, 3)])
    for bad in [0, -1, 1.5, NAN, INF, -INF]:
        with pytest.raises(ValueError, match=rf"count must be an integer >= 1; got {bad}"):
            function([(sample, bad)])
    with pytest.raises(TypeError, match="count must be an integer >= 1"):
        function([(sample, True)])
    with pytest.raises(TypeError, match=r"item 1 is str"):
        function([sample, "x"])


@pytest.mark.parametrize("name", [n for n in LIST_FUNCTIONS if n != "wasserstein"])
def test_wasserstein_is_refused_outside_its_composer(name):
    function, _ = LIST_FUNCTIONS[name]
    with pytest.raises(UnsupportedError, match="only with other WassersteinDP"):
        function([WassersteinDP(p=1.0, epsilon=0.1)])


def test_wrong_family_gets_advice():
    with pytest.raises(TypeError, match=r"compose_basic composes PureDP/ApproxDP; item 0 is ZCDP\. Convert it first"):
        compose_basic([ZCDP(0.1)])
    with pytest.raises(TypeError, match="to_rdp"):
        compose_rdp([ZCDP(0.1)])
    with pytest.raises(TypeError, match="to_zcdp"):
        compose_zcdp([ApproxDP(epsilon=0.1, delta=0.0)])


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, -1.0])
def test_paper_value_parameters(bad):
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        wdp_paper_value(1.0, bad, 1.0)
    with pytest.raises(ValueError, match="sensitivity must be finite and > 0"):
        wdp_paper_value(1.0, 1.0, bad)
    with pytest.raises(ValueError, match="order must be finite"):
        wdp_paper_value(bad, 1.0, 1.0)
    with pytest.raises(ValueError, match="family must be 'laplace' or 'gaussian'"):
        wdp_paper_value(1.0, 1.0, 1.0, family="cauchy")  # type: ignore[arg-type]
