"""Entropies of seed 004: Shannon, cross-entropy, Rényi entropy (Hartley, Shannon and min-entropy limits).

Exact sums for finite laws; closed forms for the Laplace and Gaussian (differential entropies) and
for the discrete Laplace and discrete Gaussian (Shannon).  Natural logarithm throughout.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from dpkit._math import Estimate, check_finite
from dpkit.distributions import (
    Bernoulli,
    DiscreteGaussian,
    DiscreteLaplace,
    Distribution,
    Finite,
    Gaussian,
    Laplace,
)
from dpkit.distributions._theta import second_moment
from dpkit.divergences._dispatch import evaluator
from dpkit.errors import UnsupportedError

_EXACT = "exact sum over the support"


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
        return Estimate(float(-np.dot(p, np.log(p))), kind="exact", method=_EXACT)
    if isinstance(P, Laplace):
        return Estimate(1.0 + math.log(2.0 * P.scale), kind="exact", method="closed form: Laplace")
    if isinstance(P, Gaussian):
        return Estimate(0.5 * math.log(2.0 * math.pi * math.e * P.sigma**2), kind="exact", method="closed form: Gaussian")
    if isinstance(P, DiscreteLaplace):
        t = P.scale
        r = math.exp(-1.0 / t)
        mean_abs = 2.0 * r / -math.expm1(-2.0 / t)  # E|K| = 2r / (1 - r^2)
        log_norm = math.log(-math.expm1(-1.0 / t)) - math.log1p(r)
        return Estimate(-log_norm + mean_abs / t, kind="exact", method="closed form: discrete Laplace")
    if isinstance(P, DiscreteGaussian):
        value = P.log_normalizer + second_moment(P.sigma) / (2.0 * P.sigma**2)
        return Estimate(value, kind="exact", method="closed form: discrete Gaussian (theta sums)")
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
        ev = evaluator(F, G)
        arrays = ev.arrays  # type: ignore[attr-defined]
        if arrays.mass_inf > 0:
            return Estimate(math.inf, kind="exact", method=_EXACT)
        return Estimate(float(-np.dot(arrays.p_live, arrays.logq)), kind="exact", method=_EXACT)
    h = shannon_entropy(P)
    d = evaluator(P, Q).kl()
    kind = "exact" if h.kind == d.kind == "exact" else "numerical"
    return Estimate(float(h) + float(d), kind=kind, error=h.error + d.error, method="H(P) + KL(P||Q)")


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
        raise ValueError(f"alpha must be in [0, inf] for the Rényi entropy; got {alpha}.")
    if a == 1.0:
        return shannon_entropy(P)
    F = _finite(P)
    if F is not None:
        p = F.probabilities[F.probabilities > 0]
        if a == 0.0:
            return Estimate(math.log(p.size), kind="exact", method="Hartley entropy")
        if math.isinf(a):
            return Estimate(-math.log(float(np.max(p))), kind="exact", method="min-entropy")
        logp = np.log(p)
        s = a - 1.0
        if abs(s) * float(np.max(-logp)) <= 50.0:
            # ln sum p^a = log1p(sum p expm1((a-1) ln p)): no cancellation for a near 1
            m = float(np.dot(p, np.expm1(s * logp)))
            if abs(m) <= 0.5:
                return Estimate(math.log1p(m) / (1.0 - a), kind="exact", method=_EXACT)
        return Estimate(float(logsumexp(a * logp)) / (1.0 - a), kind="exact", method=_EXACT)
    if isinstance(P, Gaussian):
        if a == 0.0:
            return Estimate(math.inf, kind="exact", method="closed form: Gaussian")
        base = math.log(P.sigma * math.sqrt(2.0 * math.pi))
        extra = 0.0 if math.isinf(a) else math.log(a) / (2.0 * (a - 1.0))
        return Estimate(base + extra, kind="exact", method="closed form: Gaussian")
    if isinstance(P, Laplace):
        if a == 0.0:
            return Estimate(math.inf, kind="exact", method="closed form: Laplace")
        extra = 0.0 if math.isinf(a) else math.log(a) / (a - 1.0)
        return Estimate(math.log(2.0 * P.scale) + extra, kind="exact", method="closed form: Laplace")
    check_finite("alpha", a)
    raise UnsupportedError(f"no Rényi entropy path for {type(P).__name__}; use a Finite law.")
