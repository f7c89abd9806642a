"""Shared helpers of the composition modules: the ``(guarantee, count)`` list and input checks.

Every public composition function takes a sequence whose items are either a guarantee or a pair
``(guarantee, count)`` meaning ``count`` copies of it. :func:`expand` validates the list once,
at the boundary, and returns ``(guarantee, count)`` pairs, so that each composer applies the
repeat count in exactly one place (dp_accounting's RDP path forgets it for the exponential
mechanism: ten repeats come out as one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from dpkit._math import Estimate, check_count, check_delta
from dpkit._math.directed import counted_sum_up
from dpkit._math.result import Kind
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import WassersteinDP

G = TypeVar("G")

_WASSERSTEIN_ONLY = (
    "WassersteinDP bounds a transport distance, not a privacy loss; it composes only with other "
    "WassersteinDP values, through compose_wasserstein."
)


def expand(
    guarantees: object, allowed: tuple[type, ...], function: str, *, advice: str = ""
) -> list[tuple[object, int]]:
    """Validate ``guarantees`` (items ``g`` or ``(g, count)``) and return ``(g, count)`` pairs.

    Raises ``TypeError`` for a non-sequence, a malformed item or a guarantee of another type
    (with ``advice``), ``UnsupportedError`` for a ``WassersteinDP`` where it is not allowed, and
    ``ValueError`` for an empty list or a bad count.
    """
    if isinstance(guarantees, (str, bytes)) or not isinstance(guarantees, Iterable):
        raise ArgumentTypeError(
            f"{function} takes a list of guarantees or (guarantee, count) pairs; got "
            f"{type(guarantees).__name__}."
        )
    items = list(guarantees)
    if not items:
        raise InvalidArgumentError(f"{function} needs at least one guarantee; got an empty list.")
    names = "/".join(t.__name__ for t in allowed)
    out: list[tuple[object, int]] = []
    for position, item in enumerate(items):
        if isinstance(item, tuple):
            if len(item) != 2:
                raise ArgumentTypeError(
                    f"item {position} of {function}'s list must be a guarantee or a "
                    f"(guarantee, count) pair; got a tuple of length {len(item)}."
                )
            g, count = item[0], check_count("count", item[1])
        else:
            g, count = item, 1
        if isinstance(g, WassersteinDP) and WassersteinDP not in allowed:
            raise UnsupportedError(_WASSERSTEIN_ONLY)
        if not isinstance(g, allowed):
            raise ArgumentTypeError(
                f"{function} composes {names}; item {position} is {type(g).__name__}."
                + (f" {advice}" if advice else "")
            )
        out.append((g, count))
    return out


def counted_sum(values: Iterable[tuple[float, int]]) -> float:
    """Return ``sum(count * value)`` formed exactly and rounded **up** (one rounding in all).

    ``[(x, k)]`` and ``[(x, 1)] * k`` give the same float, the float just above (or equal to) the
    exact sum, so ten spends of 0.1 add to more than 1.0 (the exact sum of ten copies of the float
    0.1 is 1 + 5.55e-17).
    """
    return counted_sum_up(values)


def input_kind(values: Iterable[object], kind: Kind) -> tuple[Kind, str]:
    """The kind a result may claim given its inputs' kinds, and a note for the method.

    A bound built from inputs that are themselves upper bounds (or exact) keeps ``kind``; an input
    that is only an estimate (``"numerical"``) or a lower bound makes the result an estimate, and
    the note says so.
    """
    weak = sorted({v.kind for v in values if isinstance(v, Estimate) and v.kind in ("numerical", "lower")})
    if weak:
        return "numerical", f" (from {'/'.join(weak)} inputs: an estimate, not a bound)"
    return kind, ""


def log1mexp_array(d: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""Return :math:`\ln(1 - e^{-d})` elementwise for ``d > 0`` (Maechler 2012, eq. 7)."""
    out = np.empty_like(d)
    small = d <= math.log(2.0)
    out[small] = np.log(-np.expm1(-d[small]))
    out[~small] = np.log1p(-np.exp(-d[~small]))
    return out


def check_open_probability(name: str, value: object) -> float:
    """A probability strictly inside (0, 1), NaN-safe."""
    return check_delta(value, name, open_interval=True)
