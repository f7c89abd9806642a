r"""Directed rounding: the float just above (or below) an exact value, and exact sums and products.

Contract: every function here returns a Python ``float`` that is on the stated side of the exact
mathematical result of its arguments (taken as exact binary numbers): ``up(x) >= x`` and
``down(x) <= x``, each the nearest float on that side. Sums and products are formed exactly
(``fractions.Fraction``, or ``math.fsum`` plus the sign of its exact residual) and rounded once, so
``sum_up`` and ``counted_sum_up`` are within one ulp of the exact sum. Overflow goes to ``inf`` on the
upward side and to the largest finite float on the downward side; NaN arguments raise ``ValueError``.

Why hand-written: Python has no rounding-mode control for floats (``math.fma`` and directed rounding
arrive only in 3.13 and even then not for sums), and NumPy's ``nextafter`` rounds nothing.
``fractions`` makes the exact operation cheap for scalars (a few microseconds).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from fractions import Fraction
from numbers import Rational
from typing import Any
from dpkit.errors import InvalidArgumentError

__all__ = [
    "add_down",
    "add_up",
    "counted_sum_up",
    "counted_sum_up_array",
    "bump_up_array",
    "mul_up_array",
    "div_down",
    "div_up",
    "down",
    "from_key",
    "float_key",
    "mul_down",
    "mul_up",
    "next_down",
    "next_up",
    "sub_down",
    "sqrt_up",
    "sub_up",
    "sum_down",
    "sum_up",
    "up",
]

_MAX = 1.7976931348623157e308


def next_up(x: float, n: int = 1) -> float:
    """The ``n``-th float above ``x`` (``inf`` stays ``inf``; ``nextafter`` repeated)."""
    for _ in range(n):
        x = math.nextafter(x, math.inf)
    return x


def next_down(x: float, n: int = 1) -> float:
    """The ``n``-th float below ``x`` (``-inf`` stays ``-inf``)."""
    for _ in range(n):
        x = math.nextafter(x, -math.inf)
    return x


def _exact(x: object) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, float):
        if math.isnan(x):
            raise InvalidArgumentError("cannot round NaN in a direction.")
        return Fraction(x)
    if isinstance(x, (int, Rational)):
        return Fraction(x)
    return Fraction(float(x))  # type: ignore[arg-type]  # any float()-able value (Decimal, numpy scalar); float raises TypeError for the rest


def _nearest(q: Fraction) -> float:
    try:
        return q.numerator / q.denominator  # correctly rounded (CPython int true division)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def up(x: object) -> float:
    """The smallest float ``>= x`` for an exact value ``x`` (Fraction, int or float).

    >>> up(Fraction(1, 10)) == 0.1, up(Fraction(3, 10)) == math.nextafter(0.3, 1.0)  # 0.1 > 1/10 > ...
    (True, True)
    """
    if isinstance(x, float):
        if math.isnan(x):
            raise InvalidArgumentError("cannot round NaN in a direction.")
        return x
    q = _exact(x)
    f = _nearest(q)
    if math.isinf(f):
        return f if f > 0 else -_MAX
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def down(x: object) -> float:
    """The largest float ``<= x`` for an exact value ``x``.

    >>> down(Fraction(1, 10)) == math.nextafter(0.1, 0.0), down(Fraction(3, 10)) == 0.3
    (True, True)
    """
    if isinstance(x, float):
        if math.isnan(x):
            raise InvalidArgumentError("cannot round NaN in a direction.")
        return x
    q = _exact(x)
    f = _nearest(q)
    if math.isinf(f):
        return f if f < 0 else _MAX
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def _special(values: list[float]) -> float | None:
    """The sum when an infinity or NaN is involved (``None`` when all are finite)."""
    if all(math.isfinite(v) for v in values):
        return None
    s = sum(values)
    if math.isnan(s):
        raise InvalidArgumentError("the sum is undefined (inf - inf or NaN).")
    return s


def sum_up(values: Iterable[float]) -> float:
    """The exact sum of floats, rounded up (``math.fsum`` plus the sign of its exact residual).

    >>> sum_up([0.1] * 10) > 1.0
    True
    """
    xs = [float(v) for v in values]
    special = _special(xs)
    if special is not None:
        return special
    try:
        s = math.fsum(xs)
    except OverflowError:  # an intermediate partial overflowed: sum exactly instead
        return up(sum((Fraction(v) for v in xs), Fraction(0)))
    if math.isinf(s):
        return s if s > 0 else -_MAX
    xs.append(-s)
    if math.fsum(xs) > 0.0:  # the residual (exact sum - s) is a sum of floats: its sign is exact
        s = math.nextafter(s, math.inf)
    return s


def sum_down(values: Iterable[float]) -> float:
    """The exact sum of floats, rounded down."""
    return -sum_up(-float(v) for v in values)


def counted_sum_up(pairs: Iterable[tuple[float, int]]) -> float:
    """``sum(count * value)`` formed exactly and rounded up (one rounding in all).

    >>> counted_sum_up([(0.1, 10)]) > 1.0
    True
    """
    items = [(float(v), int(c)) for v, c in pairs]
    special = _special([v for v, _ in items])
    if special is not None:
        return special
    if len(items) > 8 and all(0 < c < 2**53 for _, c in items):
        # many terms: each product split exactly into prod + err (Dekker's TwoProduct, vectorised),
        # then the exact sum of all the parts rounded up, without fractions (same result, faster)
        import numpy as np

        v = np.array([x for x, _ in items])
        c = np.array([float(k) for _, k in items])
        with np.errstate(over="ignore", invalid="ignore"):
            prod = c * v
            vh, vl = _split(v)
            ch, cl = _split(c)
            err = ((vh * ch - prod) + vh * cl + vl * ch) + vl * cl
        if np.all(np.isfinite(prod)) and np.all(np.isfinite(err)) and not np.any((prod != 0) & (np.abs(prod) < 1e-290)):
            return sum_up(prod.tolist() + err.tolist())
    return up(sum((Fraction(v) * c for v, c in items), Fraction(0)))


def add_up(a: float, b: float) -> float:
    """``a + b`` rounded up."""
    return sum_up((a, b))


def add_down(a: float, b: float) -> float:
    """``a + b`` rounded down."""
    return sum_down((a, b))


def sub_up(a: float, b: float) -> float:
    """``a - b`` rounded up."""
    return sum_up((a, -b))


def sub_down(a: float, b: float) -> float:
    """``a - b`` rounded down."""
    return sum_down((a, -b))


def _product(a: float, b: float) -> Fraction | float:
    if not (math.isfinite(a) and math.isfinite(b)):
        p = a * b
        if math.isnan(p):
            if math.isnan(a) or math.isnan(b):
                raise InvalidArgumentError("cannot round NaN in a direction.")
            return 0.0  # 0 * inf: an exact zero factor wins (the convention of interval arithmetic)
        return p
    return Fraction(a) * Fraction(b)


def mul_up(a: float, b: float) -> float:
    """``a * b`` rounded up."""
    return up(_product(float(a), float(b)))


def mul_down(a: float, b: float) -> float:
    """``a * b`` rounded down."""
    return down(_product(float(a), float(b)))


def _quotient(a: float, b: float) -> Fraction | float:
    if b == 0.0:
        raise ZeroDivisionError("division by zero in directed rounding.")
    if not (math.isfinite(a) and math.isfinite(b)):
        q = a / b
        if math.isnan(q):
            raise InvalidArgumentError("the quotient is undefined (inf / inf or NaN).")
        return q
    return Fraction(a) / Fraction(b)


def div_up(a: float, b: float) -> float:
    """``a / b`` rounded up."""
    return up(_quotient(float(a), float(b)))


def div_down(a: float, b: float) -> float:
    """``a / b`` rounded down."""
    return down(_quotient(float(a), float(b)))


def sqrt_up(x: object) -> float:
    """The smallest float ``>= sqrt(x)`` for an exact ``x >= 0`` (decided by exact squaring).

    >>> sqrt_up(Fraction(25, 16)), sqrt_up(2) ** 2 >= 2
    (1.25, True)
    """
    q = _exact(x)
    if q < 0:
        raise InvalidArgumentError(f"sqrt_up needs x >= 0; got {float(q)}.")
    if q == 0:
        return 0.0
    near = _nearest(q)
    if 0.0 < near < math.inf:
        f = math.sqrt(near)
    else:  # outside the float range: a first guess from the logarithms of the (big) integers
        try:
            f = 2.0 ** (0.5 * (math.log2(q.numerator) - math.log2(q.denominator)))
        except OverflowError:
            return math.inf
    if f == 0.0:
        f = 5e-324
    while Fraction(f) ** 2 < q:
        f = math.nextafter(f, math.inf)
    while f > 0.0 and Fraction(math.nextafter(f, 0.0)) ** 2 >= q:
        f = math.nextafter(f, 0.0)
    return f


def _split(a: Any) -> tuple[Any, Any]:
    c = 134217729.0 * a  # Dekker's split: 2^27 + 1
    high = c - (c - a)
    return high, a - high


def counted_sum_up_array(terms: list[tuple[Any, int]]) -> Any:
    r"""``sum(count * values)`` elementwise over NumPy arrays, the exact sum rounded up.

    Each product is split exactly into ``prod + err`` (Dekker's TwoProduct); where every product and
    every float addition was exact (checked with Knuth's TwoSum) the float sum is returned, elsewhere
    the exact sum of the parts is rounded up (:func:`sum_up`). The result is therefore the same
    however the counts are grouped: ``[(v, 16)]`` and ``[(v, 1)] * 16`` give the same floats.
    """
    import numpy as np

    prods: list[Any] = []
    errs: list[Any] = []
    total: Any = None
    inexact: Any = None
    with np.errstate(over="ignore", invalid="ignore"):
        for values, count in terms:
            v = np.asarray(values, dtype=np.float64)
            c = float(count)
            prod = c * v
            vh, vl = _split(v)
            ch, cl = _split(np.float64(c))
            err = ((vh * ch - prod) + vh * cl + vl * ch) + vl * cl  # prod + err = c * v exactly
            err = np.where(np.isfinite(prod), err, 0.0)
            prods.append(prod)
            errs.append(err)
            flag = err != 0.0
            if total is None:
                total, inexact = prod, flag
                continue
            s = total + prod
            bb = s - total
            err2 = (total - (s - bb)) + (prod - bb)
            inexact = inexact | flag | ((err2 != 0.0) & np.isfinite(s))
            total = s
    assert total is not None
    out = np.array(total, dtype=np.float64, copy=True)
    for i in zip(*np.nonzero(inexact)) if out.ndim else ([()] if bool(inexact) else []):
        parts = [float(p[i]) for p in prods] + [float(e[i]) for e in errs]
        out[i] = sum_up(parts)
    return out


def mul_up_array(a: Any, b: Any) -> Any:
    """``a * b`` elementwise, rounded up where the product rounded down (Dekker's TwoProduct)."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        x = np.asarray(a, dtype=np.float64)
        y = np.asarray(b, dtype=np.float64)
        prod = x * y
        xh, xl = _split(x)
        yh, yl = _split(y)
        err = ((xh * yh - prod) + xh * yl + xl * yh) + xl * yl  # exact: prod + err = x * y
        return np.where(np.isfinite(prod) & (err > 0.0), np.nextafter(prod, np.inf), prod)


def bump_up_array(values: Any, ulps: float) -> Any:
    """``values`` moved up by ``ulps`` relative ulps and one float more (zeros and non-finite values
    unchanged): an upper bound on any number within ``ulps * 2^-52`` relative below each value."""
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.where(v >= 0.0, v * (1.0 + ulps * 2.0**-52), v * (1.0 - ulps * 2.0**-52))
        return np.where(np.isfinite(v) & (v != 0.0), np.nextafter(scaled, np.inf), v)


def float_key(x: float) -> int:
    """An integer that orders floats as the reals (``-0.0`` and ``0.0`` share a key), for bisection on floats."""
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def from_key(k: int) -> float:
    """The float whose :func:`float_key` is ``k``."""
    bits = k if k >= 0 else (-k) | -0x8000000000000000
    (x,) = struct.unpack("<d", struct.pack("<q", bits))
    return float(x)
