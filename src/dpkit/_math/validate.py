"""Validation of public parameters. NaN-safe: every check is written so that NaN fails it."""

from __future__ import annotations

import math
import numbers

from dpkit.errors import ArgumentTypeError, IntegerTypeError, InvalidArgumentError


def _num(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            import numpy as np

            if isinstance(value, np.generic) and np.issubdtype(type(value), np.number):
                return float(value)
        except ImportError:  # pragma: no cover
            pass
        raise ArgumentTypeError(f"{name} must be a real number; got {type(value).__name__} {value!r}.")
    return float(value)


def check_finite(name: str, value: object) -> float:
    """Return ``value`` as float if it is a finite real number, else raise."""
    x = _num(name, value)
    if not math.isfinite(x):
        raise InvalidArgumentError(f"{name} must be finite; got {x}.")
    return x


def check_positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` if ``0 < value`` (and finite unless ``allow_inf``), else raise ValueError."""
    x = _num(name, value)
    if not (x > 0) or (not allow_inf and math.isinf(x)):
        bound = "in (0, inf]" if allow_inf else "finite and > 0"
        raise InvalidArgumentError(f"{name} must be {bound}; got {x}.")
    return x


def check_epsilon(value: object, name: str = "epsilon", *, allow_inf: bool = False) -> float:
    """epsilon must be >= 0 (and finite unless ``allow_inf``)."""
    x = _num(name, value)
    if not (x >= 0) or (not allow_inf and math.isinf(x)):
        bound = "in [0, inf]" if allow_inf else "finite and >= 0"
        raise InvalidArgumentError(f"{name} must be {bound}; got {x}.")
    return x


def check_delta(value: object, name: str = "delta", *, open_interval: bool = False) -> float:
    """delta must be in [0, 1] (or in (0, 1) with ``open_interval``)."""
    x = _num(name, value)
    if open_interval:
        if not (0 < x < 1):
            raise InvalidArgumentError(f"{name} must be in (0, 1); got {x}.")
    elif not (0 <= x <= 1):
        raise InvalidArgumentError(f"{name} must be in [0, 1]; got {x}.")
    return x


def check_probability(value: object, name: str = "p") -> float:
    """A probability in [0, 1]."""
    return check_delta(value, name)


def check_alpha(value: object, name: str = "alpha") -> float:
    """A Rényi order: alpha > 0 (alpha = inf allowed, meaning the max divergence)."""
    x = _num(name, value)
    if not (x > 0):
        raise InvalidArgumentError(f"{name} must be > 0 (use math.inf for the max divergence); got {x}.")
    return x


def check_count(name: str, value: object, *, minimum: int = 1, maximum: int | None = None) -> int:
    """The one check of a count: ``value`` as an ``int`` if it is an integer in ``[minimum, maximum]``.

    Accepts Python ``int`` and NumPy integers (``np.int64(3)``); refuses ``bool``, floats (``2.0`` too),
    strings, ``None`` and every other type with :class:`~dpkit.errors.IntegerTypeError`, which is both a
    ``TypeError`` and a ``ValueError``; an integer out of range raises
    :class:`~dpkit.errors.InvalidArgumentError`. Messages read "count must be an integer >= 1; got 1.5.".
    """
    if type(value) is int and value >= minimum and (maximum is None or value <= maximum):
        return value  # the common case, without the ABC check
    bound = f">= {minimum}" + ("" if maximum is None else f" (and at most {maximum:.0e})")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        shown = f"{value!r}" if isinstance(value, numbers.Real) else f"{type(value).__name__} {value!r}"
        raise IntegerTypeError(f"{name} must be an integer {bound}; got {shown}.")
    count = int(value)
    if count < minimum or (maximum is not None and count > maximum):
        raise InvalidArgumentError(f"{name} must be an integer {bound}; got {count}.")
    return count
