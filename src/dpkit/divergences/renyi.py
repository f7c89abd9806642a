"""Rényi divergence of every order (Rényi 1961; seed 004; Mironov 2017)."""

from __future__ import annotations

from dpkit._math import Estimate, check_alpha
from dpkit.distributions import Distribution
from dpkit.divergences._dispatch import evaluator


def renyi(P: Distribution, Q: Distribution, alpha: float) -> Estimate:
    r"""Rényi divergence :math:`D_\alpha(P\|Q) = \frac{1}{\alpha-1}\ln \int p^\alpha q^{1-\alpha}`.

    ``alpha = 1`` gives the KL divergence and ``alpha = inf`` the max divergence (the limits of
    seed 004); both limits are continuous, and orders next to 1 are computed without cancellation.

    Parameters
    ----------
    P, Q : Distribution
    alpha : float, > 0 (``math.inf`` allowed)

    Returns
    -------
    Estimate
        The divergence (natural log), non-decreasing in alpha.

    Raises
    ------
    ValueError
        alpha <= 0 or NaN.

    References
    ----------
    Rényi 1961; Mironov 2017, "Rényi Differential Privacy", arXiv 1702.07476v3, Def 3 and Table II;
    van Erven & Harremoës 2014, arXiv 1206.2459, Thm 3 (monotone in alpha) and Thm 5 (limits).

    Examples
    --------
    >>> from dpkit.distributions import Gaussian
    >>> float(renyi(Gaussian(0, 1), Gaussian(1, 1), alpha=2))
    1.0
    """
    a = check_alpha(alpha)
    return evaluator(P, Q).renyi(a)
