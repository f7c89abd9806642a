"""dpkit._math.check_count: the one count check, and the contract it keeps for every caller.

The ledger and the Accountant refuse a count of the wrong type with a ValueError, the composition
functions with a TypeError; IntegerTypeError is both, so both contracts hold. A NumPy integer is a count
everywhere (compose_basic accepted ``np.int64(3)`` and Accountant.spend refused it before).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit
from dpkit._math import check_count
from dpkit.accounting import Accountant
from dpkit.accounting.composition import compose_basic
from dpkit.errors import ArgumentTypeError, IntegerTypeError, InvalidArgumentError
from dpkit.guarantees import PureDP

WRONG_TYPES = [True, False, 1.5, 2.0, math.nan, math.inf, "2", None, np.float64(3.0), [3]]


def test_the_type_error_is_both_builtins_and_both_dpkit_classes() -> None:
    assert issubclass(IntegerTypeError, ArgumentTypeError) and issubclass(IntegerTypeError, InvalidArgumentError)
    assert issubclass(IntegerTypeError, TypeError) and issubclass(IntegerTypeError, ValueError)
    assert dpkit.IntegerTypeError is IntegerTypeError


@pytest.mark.parametrize("value", [1, 3, 10**12, np.int64(3), np.uint8(7), np.int32(1)])
def test_python_and_numpy_integers_are_counts(value: object) -> None:
    out = check_count("count", value)
    assert out == int(value) and type(out) is int  # type: ignore[call-overload]


@pytest.mark.parametrize("value", WRONG_TYPES, ids=repr)
def test_other_types_raise_integer_type_error(value: object) -> None:
    with pytest.raises(IntegerTypeError, match="count must be an integer >= 1; got"):
        check_count("count", value)


@pytest.mark.parametrize("value", [0, -1, np.int64(0), -(10**30)])
def test_integers_below_the_minimum_raise_invalid_argument_only(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="count must be an integer >= 1") as info:
        check_count("count", value)
    assert not isinstance(info.value, TypeError)


def test_minimum_and_maximum() -> None:
    assert check_count("size", 0, minimum=0) == 0
    with pytest.raises(InvalidArgumentError, match=r"max_rows must be an integer >= 1 \(and at most 1e\+09\)"):
        check_count("max_rows", 10**9 + 1, maximum=10**9)


def test_numpy_count_is_accepted_by_composition_and_the_accountant_alike() -> None:
    composed = compose_basic([(PureDP(0.1), np.int64(3))])
    acc = Accountant(PureDP(1.0))
    acc.spend(PureDP(0.1), count=np.int64(3))  # type: ignore[arg-type]
    spent = acc.spent()
    assert isinstance(spent, PureDP)
    assert float(spent.epsilon) == pytest.approx(float(composed.epsilon))


@pytest.mark.parametrize("value", [True, "2", None, 1.5])
def test_wrong_type_is_a_value_error_for_the_accountant_and_a_type_error_for_composition(value: object) -> None:
    acc = Accountant(PureDP(1.0))
    with pytest.raises(ValueError, match="count must be an integer >= 1"):
        acc.spend(PureDP(0.1), count=value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="count must be an integer >= 1"):
        compose_basic([(PureDP(0.1), value)])
