r"""One bisection on the reals for every layer: a monotone predicate, a stated side, a stated tolerance.

Contract of :func:`bisect_bracket` (and of :func:`bisect_monotone`, which returns one end of it):

* ``pred`` is monotone on ``[lo, hi]``: false below some boundary ``b`` and true above it. The caller
  vouches for the ends (``pred(lo)`` false, ``pred(hi)`` true); they are **not** evaluated, so a caller
  that has already evaluated them pays nothing twice.
* Invariant: the returned ``lo`` is the given ``lo`` or a point where ``pred`` was evaluated false; the
  returned ``hi`` is the given ``hi`` or a point where ``pred`` was evaluated true. Hence
  ``side="upper"`` returns a point where the predicate holds (a calibrated sigma that meets its target,
  an epsilon that is an upper bound) and ``side="lower"`` one where it does not (the largest epsilon
  that still fits a budget, when ``pred`` says "too large"). No rounding step ever moves an end across
  the boundary: a privacy caller names its safe side and gets it.
* Stopping rule: the loop ends as soon as ``hi - lo <= max(atol, rtol * |hi|)``, or when the midpoint is no
  longer strictly inside ``(lo, hi)`` (the ends are adjacent floats), or after ``max_iter`` evaluations of
  ``pred`` (``None``: no limit; the adjacent-float rule alone then ends the loop). So with
  ``rtol = atol = 0`` it narrows to adjacent floats.
* ``midpoint="log"`` splits at the geometric mean ``sqrt(lo * hi)`` (for ``0 < lo < hi`` spanning decades).

Why hand-written: :func:`scipy.optimize.bisect` returns a root estimate, not the end of the bracket on a
stated side, and evaluates ``f`` at both ends; the one-sided answer is what a privacy bound needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from dpkit.errors import InvalidArgumentError

__all__ = ["bisect_bracket", "bisect_monotone"]


def bisect_bracket(
    pred: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    rtol: float,
    atol: float = 0.0,
    max_iter: int | None = None,
    midpoint: Literal["linear", "log"] = "linear",
) -> tuple[float, float]:
    """Narrow ``[lo, hi]`` around the boundary of the monotone ``pred`` (false at ``lo``, true at ``hi``).

    Returns the final bracket ``(lo, hi)``: ``lo`` is the given ``lo`` or a point evaluated false, ``hi``
    the given ``hi`` or a point evaluated true; the loop stops once ``hi - lo <= max(atol, rtol * |hi|)``,
    when the ends are adjacent floats, or after ``max_iter`` evaluations (module docstring).

    >>> bisect_bracket(lambda x: x * x >= 2.0, 1.0, 2.0, rtol=0.0)  # adjacent floats around sqrt(2)
    (1.414213562373095, 1.4142135623730951)
    """
    steps = 0
    while max_iter is None or steps < max_iter:
        if hi - lo <= max(atol, rtol * abs(hi)):
            break
        mid = math.sqrt(lo * hi) if midpoint == "log" else 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if pred(mid):
            hi = mid
        else:
            lo = mid
        steps += 1
    return lo, hi


def bisect_monotone(
    pred: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    side: Literal["upper", "lower"],
    rtol: float,
    atol: float = 0.0,
    max_iter: int | None = None,
    midpoint: Literal["linear", "log"] = "linear",
) -> float:
    """The end of :func:`bisect_bracket`'s final bracket on the stated ``side`` of the boundary.

    ``side="upper"``: a point where ``pred`` holds (or the given ``hi``), at most the tolerance above the
    boundary. ``side="lower"``: a point where it fails (or the given ``lo``), at most the tolerance below.

    >>> bisect_monotone(lambda x: x >= 0.3, 0.0, 1.0, side="upper", rtol=1e-12) >= 0.3
    True
    >>> bisect_monotone(lambda x: x >= 0.3, 0.0, 1.0, side="lower", rtol=1e-12) < 0.3
    True
    """
    if side not in ("upper", "lower"):
        raise InvalidArgumentError(f"side must be 'upper' or 'lower'; got {side!r}.")
    b_lo, b_hi = bisect_bracket(pred, lo, hi, rtol=rtol, atol=atol, max_iter=max_iter, midpoint=midpoint)
    return b_hi if side == "upper" else b_lo
