"""Log-space arithmetic (Maechler 2012 for ``log1mexp``)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr as _log_ndtr
from scipy.special import logsumexp as _logsumexp
from dpkit.errors import InvalidArgumentError

_LN2 = math.log(2.0)


def log1mexp(x: float) -> float:
    r"""Return :math:`\ln(1 - e^{-x})` for ``x >= 0`` accurately (Maechler 2012, eq. 7).

    ``log1mexp(0) = -inf``.

    >>> round(log1mexp(1.0), 12)
    -0.458675145387
    """
    if x < 0:
        raise InvalidArgumentError(f"log1mexp needs x >= 0; got {x}.")
    if x == 0:
        return -math.inf
    if x <= _LN2:
        return math.log(-math.expm1(-x))
    return math.log1p(-math.exp(-x))


def logsubexp(a: float, b: float) -> float:
    r"""Return :math:`\ln(e^a - e^b)` for ``a >= b`` (``-inf`` when ``a == b``).

    >>> round(logsubexp(0.0, -1.0), 12)
    -0.458675145387
    """
    if b > a:
        raise InvalidArgumentError(f"logsubexp needs a >= b; got a={a}, b={b}.")
    if b == -math.inf:
        return a
    return a + log1mexp(a - b)


def log_add(a: float, b: float) -> float:
    r"""Return :math:`\ln(e^a + e^b)` for scalars without overflow.

    >>> round(log_add(0.0, 0.0), 12)
    0.69314718056
    """
    if a < b:
        a, b = b, a
    if b == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


def logsumexp(values: ArrayLike) -> float:
    """Return ``ln(sum(exp(values)))`` (``scipy.special.logsumexp``; ``-inf`` for no terms)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return -math.inf
    return float(_logsumexp(arr))


def log_ndtr(x: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
    r"""Return :math:`\ln \Phi(x)` for the standard normal cdf (``scipy.special.log_ndtr``)."""
    out = _log_ndtr(x)
    return float(out) if np.ndim(out) == 0 else out
