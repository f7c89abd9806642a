"""Choosing the evaluation path for a pair (P, Q): closed form, exact sum, series or quadrature.

Order of preference: a closed form for same-family pairs; an exact finite sum whenever either law
has finite support (then every divergence that only looks at one law's support is a finite sum);
a truncated series for other integer-valued pairs; quadrature for other continuous pairs.  Pairs
with a closed form for some divergences only fall back to quadrature for the rest.
"""

from __future__ import annotations

import math
from fractions import Fraction
from collections.abc import Callable

import numpy as np

from dpkit.distributions import (
    Bernoulli,
    DiscreteGaussian,
    DiscreteLaplace,
    Distribution,
    Finite,
    Gaussian,
    Laplace,
    align,
)
from dpkit._math import Estimate
from dpkit.divergences import _closed
from dpkit.divergences._evaluator import Evaluator
from dpkit.divergences._numeric import FinitePair, QuadraturePair, SeriesPair
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError


class _Hybrid(Evaluator):
    """Closed forms where they exist, another evaluator for the rest."""

    def __init__(self, closed: Evaluator, fallback: Evaluator) -> None:
        self.closed, self.fallback = closed, fallback
        self.name = closed.name

    def _try(self, divergence: Callable[[Evaluator], Estimate]) -> Estimate:
        try:
            return divergence(self.closed)
        except UnsupportedError:
            return divergence(self.fallback)

    def kl(self) -> Estimate:
        return self._try(lambda e: e.kl())

    def renyi(self, alpha: float) -> Estimate:
        return self._try(lambda e: e.renyi(alpha))

    def max_divergence(self) -> Estimate:
        return self._try(lambda e: e.max_divergence())

    def hockey_stick(self, epsilon: float) -> Estimate:
        return self._try(lambda e: e.hockey_stick(epsilon))

    def total_variation(self) -> Estimate:
        return self._try(lambda e: e.total_variation())

    def wasserstein(self, order: float) -> Estimate:
        return self._try(lambda e: e.wasserstein(order))


def evaluator(P: Distribution, Q: Distribution) -> Evaluator:
    """Return the evaluator for the pair (P, Q); raise if they do not share a domain."""
    for name, d in (("P", P), ("Q", Q)):
        if not isinstance(d, Distribution):
            raise ArgumentTypeError(
                f"{name} must be a dpkit distribution (e.g. dpkit.Laplace); got {type(d).__name__}."
            )
    if P.discrete != Q.discrete:
        raise InvalidArgumentError(
            f"P ({type(P).__name__}) and Q ({type(Q).__name__}) are not on a common domain: one has a "
            "density and the other a mass function. Compare two continuous or two discrete laws."
        )
    if isinstance(P, Bernoulli):
        P = P.to_finite()
    if isinstance(Q, Bernoulli):
        Q = Q.to_finite()
    # exact types (a subclass takes the general paths); `type(x) is C` narrows for the type checker
    if type(P) is Laplace and type(Q) is Laplace:
        if P.scale == Q.scale:
            return _closed.LaplaceShift(Fraction(Q.loc) - Fraction(P.loc), P.scale)  # the shift, exactly
        return _Hybrid(_closed.LaplaceScales(P.loc, P.scale, Q.loc, Q.scale), QuadraturePair(P, Q))
    if type(P) is Gaussian and type(Q) is Gaussian:
        if P.sigma == Q.sigma:
            return _closed.GaussianShift(Fraction(Q.loc) - Fraction(P.loc), P.sigma)
        return _Hybrid(_closed.GaussianGeneral(P.loc, P.sigma, Q.loc, Q.sigma), QuadraturePair(P, Q))
    if type(P) is DiscreteLaplace and type(Q) is DiscreteLaplace and P.scale == Q.scale:
        return _closed.DiscreteLaplaceShift(Q.loc - P.loc, P.scale)
    if type(P) is DiscreteGaussian and type(Q) is DiscreteGaussian and P.sigma == Q.sigma:
        return _closed.DiscreteGaussianShift(Q.loc - P.loc, P.sigma, P.log_normalizer)
    if isinstance(P, Finite) and isinstance(Q, Finite):
        p, q, support = align(P, Q)
        return FinitePair(p, q, support, P, Q)
    if isinstance(P, Finite):
        return _finite_vs_lattice(P, Q, p_is_finite=True)
    if isinstance(Q, Finite):
        return _finite_vs_lattice(Q, P, p_is_finite=False)
    if P.discrete:
        return SeriesPair(P, Q)
    return QuadraturePair(P, Q)


def _finite_vs_lattice(F: Finite, L: Distribution, *, p_is_finite: bool) -> FinitePair:
    """Exact sums when one law is finite: the other law's mass off F's support becomes one atom."""
    if not F._numeric:
        raise InvalidArgumentError(
            f"the finite law has non-numeric labels, so it shares no domain with {type(L).__name__} "
            "(integers); give it an integer support."
        )
    support = F.support.astype(np.float64)
    if not np.all(support == np.floor(support)):
        raise InvalidArgumentError(f"the finite law's support must be integers to compare with {type(L).__name__}.")
    log_other = L.log_density(support)
    other = np.exp(log_other)
    outside = max(0.0, 1.0 - math.fsum(other.tolist()))
    f_mass = np.concatenate([F.probabilities, [0.0]])
    l_mass = np.concatenate([other, [outside]])
    with np.errstate(divide="ignore"):
        log_f = np.log(f_mass)
        log_l = np.concatenate([log_other, [math.log(outside) if outside > 0 else -math.inf]])
    if p_is_finite:
        return FinitePair(f_mass, l_mass, None, F, L, logp=log_f, logq=log_l)
    return FinitePair(l_mass, f_mass, None, L, F, logp=log_l, logq=log_f)
