"""Numerical helpers shared by dpkit: log-space arithmetic, validation and typed results.

Contract: every helper here is pure, vectorised where it takes arrays, and accurate in log space
(no overflow for log-probabilities down to -1e300 or exponents up to 1e7).  The functions are thin
wrappers over NumPy/SciPy (``scipy.special.logsumexp``, ``log_ndtr``); the few hand-written pieces
(``log1mexp``, ``logsubexp``) exist because neither library offers them with the accuracy we need
(Maechler 2012, "Accurately computing log(1 - exp(-|a|))").

Directed rounding (issue 11) lives in the private modules ``directed`` (exact float sums and
products rounded once, up or down), ``precise`` (160-bit mpmath evaluation, converted to the float
above) and ``gaussian`` (the Gaussian privacy profile and its inverse at 160 bits); ``result`` holds
:class:`Estimate`, whose arithmetic is interval arithmetic with outward rounding.
"""

from dpkit._math.logspace import log1mexp, log_ndtr, logsubexp, logsumexp, log_add
from dpkit._math.result import Estimate
from dpkit._math.validate import (
    check_alpha,
    check_count,
    check_delta,
    check_epsilon,
    check_finite,
    check_positive,
    check_probability,
)

__all__ = [
    "Estimate",
    "check_alpha",
    "check_count",
    "check_delta",
    "check_epsilon",
    "check_finite",
    "check_positive",
    "check_probability",
    "log1mexp",
    "log_add",
    "log_ndtr",
    "logsubexp",
    "logsumexp",
]
