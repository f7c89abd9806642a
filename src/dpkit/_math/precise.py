r"""High-precision evaluation for the values dpkit labels ``"exact"``, with directed conversion to float.

Contract: :func:`mp` returns an mpmath context private to the calling thread, at :data:`PREC` bits
(160, about 48 digits). Closed forms evaluated there in a cancellation-free way are trusted to a
relative error of :math:`2^{-100}`; :func:`to_float_up` widens by that margin and then rounds to the
float just above, so a value converted from such an evaluation is ``>=`` the exact value and at
most two ulps above it (one for the rounding, one should the margin cross a float). An exactly zero
evaluation stays 0: callers return 0 only where the formula is structurally zero.

Why mpmath: it is a well-kept, pure-Python arbitrary-precision library with the special functions
the Gaussian profile needs (``erfc``, ``erfcx`` via ``erfc`` scaling, ``log1p``, ``expm1``);
``decimal`` has no ``erfc``. Each thread gets its own context so that raising the precision for one
evaluation (``workprec``) never changes another thread's.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from typing import Any

import mpmath
from dpkit.errors import InvalidArgumentError

__all__ = ["MARGIN_BITS", "PREC", "evaluate", "exact_mpf", "mp", "to_float_down", "to_float_up"]

PREC = 160
MARGIN_BITS = 100
_local = threading.local()


def mp() -> Any:
    """This thread's mpmath context at :data:`PREC` bits."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = mpmath.MPContext()
        ctx.prec = PREC
        _local.ctx = ctx
    return ctx


def exact_mpf(ctx: Any, x: Any) -> Any:
    """``x`` (float, int, Fraction or mpf) as an mpf at the context's current precision."""
    if isinstance(x, Fraction):
        return ctx.mpf(x.numerator) / x.denominator
    return ctx.mpf(x)


def evaluate(fn: Any, max_prec: int = 40_000) -> tuple[Any, bool]:
    """Evaluate ``fn(ctx) -> (value, scale)`` until the value is good to 2^-110 relative.

    ``scale`` bounds the magnitudes of the terms that were added or subtracted to form ``value``
    (each computed to a few ulps of the working precision), so ``log2(scale / |value|)`` bits were
    lost to cancellation; the precision is raised by that much (and doubled while the value is 0)
    and ``fn`` called again. Returns ``(value, certified)``: ``certified`` is False when even
    ``max_prec`` bits left the value unresolved (then ``value`` is the last one computed).
    """
    ctx = mp()
    prec = PREC
    while True:
        with ctx.workprec(prec):
            value, scale = fn(ctx)
            value, scale = +ctx.mpf(value), abs(ctx.mpf(scale))
            if scale == 0:
                return value, True  # nothing was combined: no cancellation possible
            if value != 0:
                lost = float(ctx.log(scale / abs(value), 2)) if scale > abs(value) else 0.0
                if lost <= prec - 110:
                    return value, True
                need = int(110 + lost + 32)
            else:
                need = 2 * prec
        if need > max_prec:
            return value, False
        prec = max(need, prec + 64)


def _convert(x: Any, direction: int, margin_bits: int) -> float:
    ctx = mp()
    x = ctx.mpf(x)
    if ctx.isnan(x):
        raise InvalidArgumentError("cannot round NaN in a direction.")
    if ctx.isinf(x):
        return math.inf if x > 0 else -math.inf
    if x == 0:
        return 0.0
    widened = x + direction * abs(x) * ctx.ldexp(1, -margin_bits)
    f = float(widened)  # nearest (0.0 or inf on under/overflow)
    if math.isinf(f):
        if (f > 0) == (direction > 0):
            return f
        return math.copysign(1.7976931348623157e308, f)
    exact_f = ctx.mpf(f)
    if direction > 0 and exact_f < widened:
        f = math.nextafter(f, math.inf)
    elif direction < 0 and exact_f > widened:
        f = math.nextafter(f, -math.inf)
    return f


def to_float_up(x: Any, margin_bits: int = MARGIN_BITS) -> float:
    """The smallest float ``>= x (1 + 2^-margin_bits)`` (``x <= 0``: ``x (1 - 2^-margin_bits)``)."""
    return _convert(x, 1, margin_bits)


def to_float_down(x: Any, margin_bits: int = MARGIN_BITS) -> float:
    """The largest float ``<= x`` widened downwards by ``2^-margin_bits`` relative."""
    return _convert(x, -1, margin_bits)
