"""Wasserstein-p distance between laws on the real line (Villani 2009; seed 001)."""

from __future__ import annotations

from dpkit._math import Estimate, check_finite
from dpkit.distributions import Bernoulli, Distribution, Finite
from dpkit.divergences._dispatch import evaluator
from dpkit.divergences._numeric import finite_wasserstein
from dpkit.errors import InvalidArgumentError


def wasserstein(P: Distribution, Q: Distribution, order: float = 1.0) -> Estimate:
    r"""Wasserstein distance :math:`W_p(P,Q) = (\inf_\gamma \int |x-y|^p d\gamma)^{1/p}` on the real line.

    Exact for location shifts (W_p = |shift| for every p >= 1: the coupling Y = X + shift is
    optimal since W_p >= W_1 >= |E_Q X - E_P X|) and for finite laws (merged quantile functions);
    quadrature of :math:`\int_0^1 |F^{-1}(u) - G^{-1}(u)|^p du` otherwise.

    Parameters
    ----------
    P, Q : Distribution (numeric supports)
    order : float, finite, >= 1 (``p``)

    References
    ----------
    Villani 2009, "Optimal Transport: Old and New", Def 6.1 and Rem 2.19 (one-dimensional formula);
    Yang, Qi, Zhou 2024, "Wasserstein Differential Privacy", arXiv 2401.12436 (seed 001).

    Examples
    --------
    >>> from dpkit.distributions import Laplace
    >>> float(wasserstein(Laplace(0, 1), Laplace(1, 1), order=2))
    1.0
    """
    p = check_finite("order", order)
    if not p >= 1.0:
        raise InvalidArgumentError(f"order must be >= 1 (W_p is a metric only for p >= 1); got {p}.")
    if isinstance(P, Bernoulli):
        P = P.to_finite()
    if isinstance(Q, Bernoulli):
        Q = Q.to_finite()
    if isinstance(P, Finite) and isinstance(Q, Finite):
        # transport needs no common support: the two laws may sit on different points
        return finite_wasserstein(P, Q, p)
    return evaluator(P, Q).wasserstein(p)
