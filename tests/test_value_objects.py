"""Distributions, mechanisms and release intervals are frozen, slotted dataclasses (issue 13, deliverable 3).

What a caller relies on: assignment and deletion are refused with an "immutable" message (a
``FrozenInstanceError``, so an ``AttributeError``); there is no instance ``__dict__``; equal parameters
give equal, equally-hashed values with a stable ``repr``; pickling and copying keep the value; a table
built on first use is not part of the value and does not travel in a pickle.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from dpkit._value import Lazy, value_object
from dpkit.distributions import Bernoulli, DiscreteGaussian, DiscreteLaplace, Finite, Gaussian, Laplace
from dpkit.mechanisms import (
    DiscreteGaussianMechanism,
    Exponential,
    Geometric,
    RandomizedResponse,
    ReportNoisyMax,
)
from dpkit.mechanisms import Gaussian as GaussianMechanism
from dpkit.mechanisms import Laplace as LaplaceMechanism
from dpkit.random import insecure_seeded

DISTRIBUTIONS = [
    lambda: Laplace(0.0, 2.0),
    lambda: Gaussian(1.0, 3.0),
    lambda: DiscreteLaplace(2, 1.5),
    lambda: DiscreteGaussian(-1, 2.0),
    lambda: Bernoulli(0.25),
    lambda: Bernoulli.from_log_odds(-50.0),
    lambda: Finite([0.5, 0.3, 0.2], support=[0, 1, 2]),
    lambda: Finite([0.5, 0.5], support=["a", "b"]),
]
MECHANISMS = [
    lambda: LaplaceMechanism(sensitivity=1.0, epsilon=0.5),
    lambda: LaplaceMechanism(sensitivity=2.0, scale=3.0, dimension=3),
    lambda: GaussianMechanism(sensitivity=1.0, sigma=2.0),
    lambda: GaussianMechanism(sensitivity=1.0, sigma=2.0, dimension=3),
    lambda: Geometric(sensitivity=1, epsilon=0.5),
    lambda: DiscreteGaussianMechanism(sensitivity=1, rho=0.5),
    lambda: DiscreteGaussianMechanism(sensitivity=2, sigma=3.0, dimension=4),
    lambda: RandomizedResponse(epsilon=1.0, categories=3),
    lambda: Exponential(sensitivity=1.0, epsilon=1.0),
    lambda: ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="exponential"),
]
ALL = DISTRIBUTIONS + MECHANISMS


def _first_field(obj: object) -> str:
    return dataclasses.fields(obj)[0].name  # type: ignore[arg-type]


@pytest.mark.parametrize("make", ALL)
def test_frozen_slotted_dataclass_refusing_assignment_with_an_immutable_message(make):
    obj = make()
    assert dataclasses.is_dataclass(obj) and type(obj).__dataclass_params__.frozen
    assert not hasattr(obj, "__dict__")
    name = _first_field(obj)
    before = getattr(obj, name)
    with pytest.raises(dataclasses.FrozenInstanceError, match="immutable"):
        setattr(obj, name, before)
    with pytest.raises(AttributeError, match="immutable"):
        obj.not_a_field = 1
    with pytest.raises(AttributeError, match="immutable"):
        delattr(obj, name)
    assert getattr(obj, name) is before


@pytest.mark.parametrize("make", ALL)
def test_equal_parameters_give_equal_values_with_equal_hashes_and_reprs(make):
    a, b = make(), make()
    assert a is not b and a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert "object at 0x" not in repr(a)
    assert copy.copy(a) == a and copy.deepcopy(a) == a


def test_different_parameters_or_families_are_not_equal():
    assert Laplace(0.0, 1.0) != Laplace(0.0, 2.0)
    assert Laplace(0.0, 1.0) != Gaussian(0.0, 1.0)
    assert LaplaceMechanism(sensitivity=1.0, epsilon=1.0) != LaplaceMechanism(sensitivity=1.0, epsilon=2.0)
    assert ReportNoisyMax(sensitivity=1.0, epsilon=1.0) != ReportNoisyMax(sensitivity=1.0, epsilon=1.0,
                                                                         noise="exponential")
    assert Finite([0.5, 0.5], support=[0, 1]) != Finite([0.5, 0.5], support=[1, 2])


@pytest.mark.parametrize("make", DISTRIBUTIONS + MECHANISMS[:6] + MECHANISMS[7:])
def test_pickle_round_trip_keeps_the_value(make):
    obj = make()
    back = pickle.loads(pickle.dumps(obj))
    assert type(back) is type(obj) and back == obj and hash(back) == hash(obj) and repr(back) == repr(obj)


def test_reprs_are_the_parameters():
    assert repr(Laplace(0, 1)) == "Laplace(loc=0.0, scale=1.0)"
    assert repr(DiscreteGaussian(0, 2.0)) == "DiscreteGaussian(loc=0, sigma=2.0)"
    assert repr(Bernoulli(0.25)) == "Bernoulli(p=0.25)"
    assert repr(Finite([0.5, 0.5], support=["a", "b"])) == "Finite(probabilities=[0.5, 0.5], support=['a', 'b'])"
    assert repr(Finite(np.full(8, 0.125))) == "Finite(n=8)"
    assert repr(Geometric(sensitivity=1, epsilon=0.5)) == "Geometric(sensitivity=1, scale=2.0)"
    assert repr(Exponential(sensitivity=1.0, epsilon=1.0)) == (
        "Exponential(sensitivity=1.0, epsilon=1.0, monotonic=False)")


def test_derived_fields_survive_pickling():
    b = Bernoulli.from_log_odds(50.0)  # p rounds to 1.0; 1 - p (about 2e-22) is kept on its own
    back = pickle.loads(pickle.dumps(b))
    assert float(b.pmf(0)) > 0.0 and back.pmf(0) == b.pmf(0) and back.pmf(1) == b.pmf(1)


def test_lazy_tables_are_not_part_of_the_value_and_do_not_travel():
    g, h = DiscreteGaussian(0, 2.0), DiscreteGaussian(0, 2.0)
    g.cdf(1.0)
    assert g == h and hash(g) == hash(h)
    assert g._table[1] is g._table[1]  # built once, kept
    fresh = pickle.loads(pickle.dumps(g))
    assert repr(fresh._cdf_cache) == "Lazy(empty)" and np.array_equal(fresh.cdf([0.0, 1.0]), g.cdf([0.0, 1.0]))
    f = Finite([0.25, 0.75], support=[2.0, 1.0])
    assert f._sorted()[0].tolist() == [1.0, 2.0] and f._sorted()[1] is f._sorted()[1]


def test_release_intervals_are_frozen_and_compare_by_identity():
    r = LaplaceMechanism(sensitivity=1.0, epsilon=1.0, dimension=3).release([1.0, 2.0, 3.0], rng=insecure_seeded(1))
    iv = r.interval
    assert dataclasses.is_dataclass(iv) and not hasattr(iv, "__dict__")
    with pytest.raises(AttributeError, match="immutable"):
        iv.half_width = 0.0  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del iv.values
    assert iv == iv and iv != copy.copy(iv)  # holds arrays: identity equality, as before
    assert repr(iv).startswith("SymmetricInterval(values ± ")
    lo, hi = iv
    assert np.all(lo < r.values) and np.all(r.values < hi)


@pytest.mark.parametrize("make", ALL)
def test_every_field_is_set(make):
    """A hand-written ``__init__`` sets each field itself: none may be left unset (an empty slot)."""
    obj = make()
    for f in dataclasses.fields(obj):
        getattr(obj, f.name)  # AttributeError if the slot was never set


def test_a_value_object_with_a_lazy_field():
    @value_object
    class Square:
        side: int
        area: Lazy[int] = dataclasses.field(default_factory=Lazy, init=False, repr=False, compare=False)

        def get_area(self) -> int:
            return self.area.get(lambda: self.side * self.side)

    s = Square(3)
    assert s.get_area() == 9 and repr(s.area) == "Lazy(built)" and s == Square(3) and repr(s).endswith("Square(side=3)")
    with pytest.raises(AttributeError, match="Square is immutable"):
        s.side = 4  # type: ignore[misc]


def test_the_accounting_state_is_a_frozen_slotted_dataclass_with_identity_equality() -> None:
    from dpkit.accounting.state import AccountingState
    from dpkit.guarantees import PureDP

    s = AccountingState().add(PureDP(0.25), count=2)
    assert dataclasses.is_dataclass(s) and type(s).__dataclass_params__.frozen and not hasattr(s, "__dict__")
    for f in dataclasses.fields(s):
        getattr(s, f.name)  # every field set by the hand-written constructor
    with pytest.raises(dataclasses.FrozenInstanceError, match="AccountingState is immutable"):
        s.count = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del s.pure
    assert s.count == 2 and not s.rdp.flags.writeable
    assert s == s and s != copy.copy(s)  # identity, as before: it holds an array and a shared log
    assert repr(s) == "AccountingState(compositions=2, entries=1)"
    assert s.families()["pld"] and repr(s._laws_cache) == "Lazy(built)"
    back = pickle.loads(pickle.dumps(s))  # the grouped laws are rebuilt, not carried
    assert repr(back._laws_cache) == "Lazy(empty)" and float(back.epsilon(1e-6)) == float(s.epsilon(1e-6))


def test_an_estimate_is_a_frozen_slotted_dataclass_that_compares_as_its_float() -> None:
    from dpkit._math import Estimate

    x = Estimate(0.5, kind="interval", lower=0.25, method="m")
    assert dataclasses.is_dataclass(x) and type(x).__dataclass_params__.frozen and not hasattr(x, "__dict__")
    assert [f.name for f in dataclasses.fields(x)] == ["kind", "error", "method", "lower"]
    with pytest.raises(dataclasses.FrozenInstanceError, match="Estimate is immutable"):
        x.kind = "exact"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="Estimate is immutable"):
        del x.lower
    assert x == 0.5 and hash(x) == hash(0.5) and x == Estimate(0.5, kind="upper")  # the float's, as documented
    assert repr(pickle.loads(pickle.dumps(x))) == repr(x) == repr(copy.deepcopy(x))
