"""Kullback-Leibler divergence (Dwork & Roth 2014, Definition 3.5; seed 000/003)."""

from __future__ import annotations

from dpkit._math import Estimate
from dpkit.distributions import Distribution
from dpkit.divergences._dispatch import evaluator


def kl(P: Distribution, Q: Distribution) -> Estimate:
    r"""KL divergence :math:`D(P\|Q) = \mathbb E_{y\sim P}[\ln(p(y)/q(y))]`.

    Closed form for same-family pairs, an exact sum when either law is finite, quadrature or a
    truncated series otherwise (``kind`` and ``error`` on the result say which).  ``+inf`` when P
    puts mass where Q has none.

    Parameters
    ----------
    P, Q : Distribution
        Two laws on a common domain (both continuous, or both discrete).

    Returns
    -------
    Estimate
        The divergence (natural log), tagged exact or numerical.

    References
    ----------
    Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy", Def 3.5 (seeds 000, 003).

    Examples
    --------
    >>> from dpkit.distributions import Laplace
    >>> round(kl(Laplace(0, 1), Laplace(1, 1)), 12)
    0.367879441171
    """
    return evaluator(P, Q).kl()
