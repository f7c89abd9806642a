"""A number that says what kind of number it is.

Every divergence and privacy parameter that dpkit computes is returned as an :class:`Estimate`: a
``float`` (so it prints and computes like one) that also carries

* ``kind``: ``"exact"`` (closed form or exact finite sum, accurate to floating-point rounding),
  ``"numerical"`` (quadrature or a truncated series; ``error`` bounds or estimates the absolute
  error), ``"upper"`` or ``"lower"`` (a bound in the stated direction);
* ``error``: an absolute error (0 for exact values up to rounding);
* ``method``: a short phrase naming the path taken ("closed form: Laplace shift", "exact sum").
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["exact", "numerical", "upper", "lower"]
_KINDS = ("exact", "numerical", "upper", "lower")


class Estimate(float):
    """A float tagged with its kind, absolute error and the method that produced it.

    >>> x = Estimate(0.25, kind="exact", method="closed form")
    >>> x + 1, x.kind
    (1.25, 'exact')
    """

    __slots__ = ("kind", "error", "method")
    kind: Kind
    error: float
    method: str

    def __new__(cls, value: float, *, kind: Kind, error: float = 0.0, method: str = "") -> Estimate:
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}; got {kind!r}.")
        obj = float.__new__(cls, value)
        obj.kind = kind
        obj.error = float(error)
        obj.method = method
        return obj

    def __repr__(self) -> str:
        extra = f" ± {self.error:.2g}" if self.kind == "numerical" else ""
        return f"Estimate({float(self)!r}{extra}, kind={self.kind!r}, method={self.method!r})"

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (float(self), self.kind, self.error, self.method))


def _rebuild(value: float, kind: Kind, error: float, method: str) -> Estimate:
    return Estimate(value, kind=kind, error=error, method=method)
