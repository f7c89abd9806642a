r"""A number that says what kind of number it is, and keeps saying it through arithmetic.

Every divergence and privacy parameter that dpkit computes is returned as an :class:`Estimate`: a
``float`` (so it prints, compares and converts like one; ``float(x)`` is its value) that also carries

* ``kind``, what the value is with respect to the exact quantity ``v``:

  - ``"exact"``: the closed form or exact sum, rounded towards more privacy loss: ``v <= value``
    and ``value`` is at most two floats above ``v``;
  - ``"upper"``: a bound, ``v <= value`` (``error``, where given, says how far above it may be);
  - ``"lower"``: a bound, ``value <= v``;
  - ``"interval"``: ``lower <= v <= value``, both ends certified (the value is the upper end,
    because decisions about privacy loss use the upper end);
  - ``"numerical"``: an estimate (quadrature, truncated series) with ``error`` estimating its
    absolute error; it certifies nothing.

* ``error``: an absolute error (0 for exact values up to their two ulps);
* ``method``: a short phrase naming the path taken ("closed form: Laplace shift", "exact sum");
* ``lower``: the certified lower end of an ``"interval"`` (``None`` for the other kinds; see
  :attr:`Estimate.lower_bound` and :attr:`Estimate.upper_bound` for every kind).

An Estimate is immutable: a frozen, slotted dataclass (:func:`dpkit._value.value_object`) whose
fields ``kind``, ``error``, ``method`` and ``lower`` are set once in ``__new__`` with
``object.__setattr__``; assigning to or deleting an attribute raises
:class:`dataclasses.FrozenInstanceError` (an ``AttributeError``) saying "Estimate is immutable", as for
every dpkit value object.  Because it is a ``float`` (its value lives in the float, made by
``float.__new__``), the dataclass writes no ``__init__``, ``__eq__`` or ``__repr__``: comparisons and
hashing stay the float's, and the repr is the one below.

Arithmetic is interval arithmetic
---------------------------------
``+``, ``-`` (binary and unary), ``*`` and ``/`` between Estimates and plain real numbers (a plain
number counts as exact: the degenerate interval ``[x, x]``) return an Estimate. Each operand stands
for the interval its kind certifies (``exact``: ``[value - 2 ulps, value]``; ``upper``:
``[-inf, value]``; ``lower``: ``[value, inf]``; ``interval``: ``[lower, value]``); the result is
the enclosure of the operation over those intervals, each end formed exactly and rounded outwards
(``fractions.Fraction``, then the float on the outer side). Its kind follows from the ends that
stay finite: both → ``"interval"`` (``"exact"`` when both ends are the same infinity), only the
upper → ``"upper"``, only the lower → ``"lower"`` (then the value is the lower end). So a sum of
upper bounds is an upper bound rounded up, a budget minus an upper bound is a lower bound rounded
down, and ten spends of 0.1 add to the float above 1.0. When neither end survives (an upper bound
minus another upper bound, a division by an interval holding 0) or a ``"numerical"`` operand is
involved, the result is ``kind="numerical"`` with the value rounded to nearest and ``error`` the
propagated error (``inf`` when no bound survives).

Operations that return a plain ``float`` (documented, not silent): ``**``, ``//``, ``%``,
``divmod``, ``round``, ``abs``, ``math`` functions, ``math.fsum``, and NumPy (``np.float64(x)``,
arrays and ufuncs see a float). Comparisons and hashing are those of the float value.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Integral, Rational, Real
from collections.abc import Callable
from typing import Any, Literal
from dpkit._value import value_object
from dpkit.errors import InvalidArgumentError

Kind = Literal["exact", "numerical", "upper", "lower", "interval"]
_KINDS = ("exact", "numerical", "upper", "lower", "interval")
_METHOD_LIMIT = 160

_INF = math.inf


@value_object(init=False, eq=False, repr=False)
class Estimate(float):
    """A float tagged with its kind, absolute error and the method that produced it.

    Parameters
    ----------
    value : float
        The number (for ``"interval"``: its upper end).
    kind : {"exact", "upper", "lower", "interval", "numerical"}
    error : float, >= 0, default 0
    method : str
    lower : float, optional
        The lower end; required for ``kind="interval"`` (``lower <= value``), refused otherwise.

    Examples
    --------
    >>> x = Estimate(0.25, kind="exact", method="closed form")
    >>> float(x + 1), (x + 1).kind
    (1.25, 'interval')
    >>> budget = 1.0
    >>> spent = sum([Estimate(0.1, kind="upper")] * 10)
    >>> float(spent) > budget, spent.kind
    (True, 'upper')
    """

    kind: Kind
    error: float
    method: str
    lower: float | None

    def __new__(
        cls, value: float, *, kind: Kind, error: float = 0.0, method: str = "", lower: float | None = None
    ) -> Estimate:
        if kind not in _KINDS:
            raise InvalidArgumentError(f"kind must be one of {_KINDS}; got {kind!r}.")
        obj = float.__new__(cls, value)
        if kind == "interval":
            if lower is None:
                raise InvalidArgumentError(
                    "an interval Estimate needs its lower end: Estimate(upper, kind='interval', lower=...)."
                )
            lo = float(lower)
            if not (lo <= float(obj)):
                raise InvalidArgumentError(f"an interval needs lower <= value; got lower={lo}, value={float(obj)}.")
        elif lower is not None:
            raise InvalidArgumentError(f"lower is given only for kind='interval'; got kind={kind!r}.")
        else:
            lo = None
        object.__setattr__(obj, "kind", kind)
        object.__setattr__(obj, "error", float(error))
        object.__setattr__(obj, "method", method)
        object.__setattr__(obj, "lower", lo)
        return obj


    # ---- the interval each kind certifies -------------------------------------------------------
    @property
    def upper_bound(self) -> float:
        """A certified upper bound on the exact value (``inf`` when the kind gives none)."""
        if self.kind in ("exact", "upper", "interval"):
            return float(self)
        return _INF

    @property
    def lower_bound(self) -> float:
        """A certified lower bound on the exact value (``-inf`` when the kind gives none)."""
        v = float(self)
        if self.kind == "lower":
            return v
        if self.kind == "interval":
            assert self.lower is not None
            return self.lower
        if self.kind == "exact":
            return v if math.isinf(v) else math.nextafter(math.nextafter(v, -_INF), -_INF)
        return -_INF

    def __repr__(self) -> str:
        extra = f" ± {self.error:.2g}" if self.kind == "numerical" else ""
        if self.kind == "interval":
            extra = f", lower={self.lower!r}"
        return f"Estimate({float(self)!r}{extra}, kind={self.kind!r}, method={self.method!r})"

    def __reduce__(self) -> tuple[Callable[..., Estimate], tuple[float, Kind, float, str, float | None]]:
        return (_rebuild, (float(self), self.kind, self.error, self.method, self.lower))

    # ---- arithmetic ----------------------------------------------------------------------------
    def __add__(self, other: object) -> Any:
        return _binary("+", self, other)

    def __radd__(self, other: object) -> Any:
        return _binary("+", other, self)

    def __sub__(self, other: object) -> Any:
        return _binary("-", self, other)

    def __rsub__(self, other: object) -> Any:
        return _binary("-", other, self)

    def __mul__(self, other: object) -> Any:
        return _binary("*", self, other)

    def __rmul__(self, other: object) -> Any:
        return _binary("*", other, self)

    def __truediv__(self, other: object) -> Any:
        return _binary("/", self, other)

    def __rtruediv__(self, other: object) -> Any:
        return _binary("/", other, self)

    def __neg__(self) -> Estimate:
        v = float(self)
        if self.kind == "numerical":
            return Estimate(-v, kind="numerical", error=self.error, method=self.method)
        lo, hi = self.lower_bound, self.upper_bound
        return _from_bounds(-hi, -lo, -v, self.error, self.method)

    def __pos__(self) -> Estimate:
        return self

    def __abs__(self) -> float:  # documented: a plain float
        return abs(float(self))


def _rebuild(value: float, kind: Kind, error: float, method: str, lower: float | None = None) -> Estimate:
    return Estimate(value, kind=kind, error=error, method=method, lower=lower)


def _short(method: str) -> str:
    return method if len(method) <= _METHOD_LIMIT else method[: _METHOD_LIMIT - 3] + "..."


def _operand(x: object) -> tuple[float, float, float, float, bool] | None:
    """(value, lower, upper, error, numerical) of an operand, or None for a non-number."""
    if isinstance(x, Estimate):
        v = float(x)
        if x.kind == "numerical":
            return v, -_INF, _INF, x.error, True
        return v, x.lower_bound, x.upper_bound, x.error, False
    if isinstance(x, bool) or not isinstance(x, Real):
        return None
    if isinstance(x, float):
        v = float(x)
        return v, v, v, 0.0, False
    if isinstance(x, Integral):
        q = Fraction(int(x))
    elif isinstance(x, Rational):
        q = Fraction(int(x.numerator), int(x.denominator))
    else:  # another real type (a Decimal-like): its float is taken as the exact value
        v = float(x)
        return v, v, v, 0.0, False
    from dpkit._math.directed import down, up

    v = float(q) if abs(q) < 2**1023 else (math.inf if q > 0 else -math.inf)
    return v, down(q), up(q), 0.0, False


def _from_bounds(lo: float, hi: float, nearest: float, error: float, method: str) -> Estimate:
    if math.isnan(lo):
        lo = -_INF
    if math.isnan(hi):
        hi = _INF
    if lo == hi and math.isinf(lo):
        return Estimate(lo, kind="exact", method=method)
    if hi < _INF and lo > -_INF:
        return Estimate(hi, kind="interval", lower=lo, error=hi - lo, method=method)
    if hi < _INF:
        return Estimate(hi, kind="upper", error=error, method=method)
    if lo > -_INF:
        return Estimate(lo, kind="lower", error=error, method=method)
    return Estimate(nearest, kind="numerical", error=_INF, method=_short("no bound survives: " + method))


def _enclose(op: str, alo: float, ahi: float, blo: float, bhi: float) -> tuple[float, float]:
    from dpkit._math import directed as d

    def safe(fn: Any, x: float, y: float, fallback: float) -> float:
        try:
            return float(fn(x, y))
        except (ValueError, ZeroDivisionError):
            return fallback

    if op == "+":
        return safe(d.add_down, alo, blo, -_INF), safe(d.add_up, ahi, bhi, _INF)
    if op == "-":
        return safe(d.sub_down, alo, bhi, -_INF), safe(d.sub_up, ahi, blo, _INF)
    if op == "*":
        if (alo == ahi == 0.0) or (blo == bhi == 0.0):
            return 0.0, 0.0
        corners = [(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        lows = [safe(d.mul_down, x, y, -_INF) for x, y in corners]
        highs = [safe(d.mul_up, x, y, _INF) for x, y in corners]
        return min(lows), max(highs)
    # "/": the divisor's interval must exclude 0
    if not (blo > 0.0 or bhi < 0.0):
        return -_INF, _INF
    corners = [(x, y) for x in (alo, ahi) for y in (blo, bhi)]
    lows = [safe(d.div_down, x, y, -_INF) for x, y in corners]
    highs = [safe(d.div_up, x, y, _INF) for x, y in corners]
    return min(lows), max(highs)


def _nearest(op: str, a: float, b: float) -> float:
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        return a / b
    except ZeroDivisionError:
        return math.copysign(_INF, a) if a != 0 else math.nan


def _binary(op: str, a: object, b: object) -> Any:
    pa, pb = _operand(a), _operand(b)
    if pa is None or pb is None:
        return NotImplemented
    av, alo, ahi, aerr, anum = pa
    bv, blo, bhi, berr, bnum = pb
    names = [x.method for x in (a, b) if isinstance(x, Estimate) and x.method]
    if not names:
        method = f"arithmetic ({op})"
    elif len(names) == 1 or names[0] == names[1]:
        method = names[0]  # the operation shows in the kind and the bounds, not in a growing string
    else:
        method = _short(f"{names[0]} {op} {names[1]}")
    nearest = _nearest(op, av, bv)
    if op in ("+", "-"):
        error = aerr + berr
    elif op == "*":
        error = abs(av) * berr + abs(bv) * aerr + aerr * berr
    else:
        error = (aerr + abs(nearest) * berr) / abs(bv) if bv != 0 else _INF
    if anum or bnum:
        error += math.ulp(nearest) if math.isfinite(nearest) else 0.0
        return Estimate(nearest, kind="numerical", error=error, method=method)
    lo, hi = _enclose(op, alo, ahi, blo, bhi)
    return _from_bounds(lo, hi, nearest, error, method)
