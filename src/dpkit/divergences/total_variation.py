"""Statistical distance / total variation (seeds 001 and 003)."""

from __future__ import annotations

from dpkit._math import Estimate
from dpkit.distributions import Distribution
from dpkit.divergences._dispatch import evaluator


def total_variation(P: Distribution, Q: Distribution) -> Estimate:
    r"""Total variation in its half-L1 form, :math:`\tfrac12\int|p-q|` (seed 001).

    Equal to :func:`statistical_distance` (the sup over events) and to :math:`E_1(P\|Q)`.
    Note: seed 001 states TV(Lap(0,b), Lap(D,b)) = (1 - e^{-D/b})/2; the correct value, which this
    returns, is 1 - e^{-D/(2b)} (see docs/theory.md).

    References
    ----------
    Dwork & Roth 2014, §3.5.1 (statistical distance); Levin, Peres, Wilmer, "Markov Chains and
    Mixing Times", Prop 4.2 (sup form = half L1).

    Examples
    --------
    >>> from dpkit.distributions import Laplace
    >>> round(total_variation(Laplace(0, 1), Laplace(1, 1)), 12)
    0.393469340287
    """
    return evaluator(P, Q).total_variation()


def statistical_distance(P: Distribution, Q: Distribution) -> Estimate:
    r"""Statistical distance :math:`\Delta(P, Q) = \max_S |P(S) - Q(S)|` (Dwork & Roth §3.5.1).

    For finite laws it is computed from the witness set S = {p > q}, independently of the
    half-L1 sum of :func:`total_variation`; the tests check that the two agree.

    Examples
    --------
    >>> from dpkit.distributions import Finite
    >>> float(statistical_distance(Finite([0.5, 0.5]), Finite([0.25, 0.75])))
    0.25
    """
    return evaluator(P, Q).statistical_distance()
