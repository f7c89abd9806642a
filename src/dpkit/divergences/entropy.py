"""Entropies of seed 004: Shannon, cross-entropy, Rényi entropy (Hartley, Shannon and min-entropy limits).

Exact sums for finite laws; closed forms for the Laplace and Gaussian (differential entropies) and
for the discrete Laplace and discrete Gaussian (Shannon).  Natural logarithm throughout.

Labels (issue 11; entropies are not privacy losses, but a label means the same everywhere): closed
forms are evaluated at 160 bits and rounded up (``"exact"``: within two ulps above); float sums over
finite laws are moved up by their rounding-error bound (``"upper"``); the theta-function form of the
discrete Gaussian and the Rényi entropies of finite laws are ``"numerical"`` with an error estimate.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from scipy.special import logsumexp

from dpkit._math import Estimate, check_finite
from dpkit._math.precise import mp, to_float_up
from dpkit.distributions import (
    Bernoulli,
    DiscreteGaussian,
    DiscreteLaplace,
    Distribution,
    Finite,
    Gaussian,
    Laplace,
)
from dpkit.distributions.theta import second_moment
from dpkit.divergences._dispatch import evaluator
from dpkit.divergences._numeric import FinitePair
from dpkit.errors import InvalidArgumentError, UnsupportedError

_EXACT = "exact sum over the support"
_U = 2.0**-53


def _closed(value: object, method: str) -> Estimate:
    """A closed form evaluated at 160 bits, rounded up: within two ulps above."""
    return Estimate(to_float_up(value), kind="exact", method=method + " (160 bits)")


def _sum_up(terms: np.ndarray, magnitudes: np.ndarray, method: str) -> Estimate:
    """A float sum of terms, each good to 9u of its magnitude (a logarithm and a product), moved up
    by that bound and the summation's (math.fsum: half an ulp)."""
    value = math.fsum(terms.tolist())
    bound = 9.0 * _U * float(magnitudes.sum()) + 0.5 * math.ulp(value)
    if not np.any(terms):
        return Estimate(0.0, kind="exact", method=method)
    upper = math.nextafter(value + bound, math.inf)
    return Estimate(upper, kind="upper", error=upper - value, method=method + " (rounded up by its error bound)")


def _finite(P: Distribution) -> Finite | None:
    if isinstance(P, Bernoulli):
        return P.to_finite()
    return P if isinstance(P, Finite) else None


def shannon_entropy(P: Distribution) -> Estimate:
    r"""Shannon entropy :math:`H(P) = -\sum p \ln p` (differential entropy for continuous laws).

    References
    ----------
    Seed 004 (香农熵); Cover & Thomas 2006, eq. 2.1 and Table 17.1 (differential entropies).

    Examples
    --------
    >>> from dpkit.distributions import Finite
    >>> round(shannon_entropy(Finite([0.5, 0.5])), 12)
    0.69314718056
    """
    F = _finite(P)
    if F is not None:
        p = F.probabilities[F.probabilities > 0]
        return _sum_up(-p * np.log(p), p * np.abs(np.log(p)), _EXACT)
    ctx = mp()
    if isinstance(P, Laplace):
        return _closed(1 + ctx.log(2 * ctx.mpf(P.scale)), "closed form: Laplace")
    if isinstance(P, Gaussian):
        return _closed(ctx.log(2 * ctx.pi * ctx.e * ctx.mpf(P.sigma) ** 2) / 2, "closed form: Gaussian")
    if isinstance(P, DiscreteLaplace):
        t = ctx.mpf(P.scale)
        r = ctx.exp(-1 / t)
        mean_abs = 2 * r / -ctx.expm1(-2 / t)  # E|K| = 2r / (1 - r^2)
        log_norm = ctx.log(-ctx.expm1(-1 / t)) - ctx.log1p(r)
        return _closed(-log_norm + mean_abs / t, "closed form: discrete Laplace")
    if isinstance(P, DiscreteGaussian):
        value = P.log_normalizer + second_moment(P.sigma) / (2.0 * P.sigma**2)
        return Estimate(value, kind="numerical", error=64 * _U * (abs(value) + 1.0),
                        method="closed form: discrete Gaussian (theta sums in floats)")
    raise UnsupportedError(f"no Shannon entropy path for {type(P).__name__}.")


def cross_entropy(P: Distribution, Q: Distribution) -> Estimate:
    r"""Cross-entropy :math:`H(P, Q) = -\sum p \ln q = H(P) + D(P\|Q)` (seed 004).

    Examples
    --------
    >>> from dpkit.distributions import Finite
    >>> round(cross_entropy(Finite([0.5, 0.5]), Finite([0.25, 0.75])), 12)
    0.836988216786
    """
    F, G = _finite(P), _finite(Q)
    if F is not None and G is not None:
        ev = cast(FinitePair, evaluator(F, G))  # two Finite laws always get a FinitePair (_dispatch.evaluator)
        arrays = ev.arrays
        if arrays.mass_inf > 0:
            return Estimate(math.inf, kind="exact", method=_EXACT)
        terms = -arrays.p_live * arrays.logq
        return _sum_up(terms, arrays.p_live * (np.abs(arrays.logq) + 1.0), _EXACT)
    h = shannon_entropy(P)
    d = evaluator(P, Q).kl()
    total = h + d  # interval arithmetic: upper + upper is rounded up; an estimate stays one
    return Estimate(
        float(total),
        kind=total.kind,
        error=h.error + d.error if total.kind == "numerical" else total.error,
        method="H(P) + KL(P||Q)",
        lower=total.lower,
    )


def renyi_entropy(P: Distribution, alpha: float) -> Estimate:
    r"""Rényi entropy :math:`H_\alpha(P) = \frac{1}{1-\alpha}\ln\sum p_i^\alpha` for alpha in [0, inf].

    alpha = 0 is the Hartley entropy ln |Supp P| (counting only positive masses: seed 004 writes
    ln n, which holds when all n masses are positive), alpha = 1 the Shannon entropy, alpha = inf
    the min-entropy -ln max p.

    References
    ----------
    Rényi 1961; seed 004 (瑞丽熵).

    Examples
    --------
    >>> from dpkit.distributions import Finite
    >>> round(renyi_entropy(Finite([0.5, 0.25, 0.25]), alpha=2), 12)
    0.980829253012
    """
    a = float(alpha)
    if math.isnan(a) or a < 0:
        raise InvalidArgumentError(f"alpha must be in [0, inf] for the Rényi entropy; got {alpha}.")
    if a == 1.0:
        return shannon_entropy(P)
    F = _finite(P)
    if F is not None:
        p = F.probabilities[F.probabilities > 0]
        ctx = mp()
        if a == 0.0:
            return _closed(ctx.log(p.size), "Hartley entropy")
        if math.isinf(a):
            return _closed(-ctx.log(ctx.mpf(float(np.max(p)))), "min-entropy")
        logp = np.log(p)
        s = a - 1.0
        value = None
        if abs(s) * float(np.max(-logp)) <= 50.0:
            # ln sum p^a = log1p(sum p expm1((a-1) ln p)): no cancellation for a near 1
            m = float(np.dot(p, np.expm1(s * logp)))
            if abs(m) <= 0.5:
                value = math.log1p(m) / (1.0 - a)
        if value is None:
            value = float(logsumexp(a * logp)) / (1.0 - a)
        # the float logarithms and sums err by a few u of |a ln p| per term (an estimate)
        error = 16.0 * _U * (abs(a) * float(np.max(np.abs(logp))) + 1.0) / abs(1.0 - a) + 4.0 * _U * abs(value)
        return Estimate(value, kind="numerical", error=error, method=_EXACT + " (float sums)")
    if isinstance(P, Gaussian):
        if a == 0.0:
            return Estimate(math.inf, kind="exact", method="closed form: Gaussian")
        ctx = mp()
        extra = 0 if math.isinf(a) else ctx.log(ctx.mpf(a)) / (2 * (ctx.mpf(a) - 1))
        return _closed(ctx.log(ctx.mpf(P.sigma) * ctx.sqrt(2 * ctx.pi)) + extra, "closed form: Gaussian")
    if isinstance(P, Laplace):
        if a == 0.0:
            return Estimate(math.inf, kind="exact", method="closed form: Laplace")
        ctx = mp()
        extra = 0 if math.isinf(a) else ctx.log(ctx.mpf(a)) / (ctx.mpf(a) - 1)
        return _closed(ctx.log(2 * ctx.mpf(P.scale)) + extra, "closed form: Laplace")
    check_finite("alpha", a)
    raise UnsupportedError(f"no Rényi entropy path for {type(P).__name__}; use a Finite law.")
