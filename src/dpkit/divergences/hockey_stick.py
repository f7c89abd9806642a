"""The hockey-stick divergence E_gamma, i.e. the privacy profile delta(epsilon) of a pair."""

from __future__ import annotations

from dpkit._math import Estimate, check_finite
from dpkit.distributions import Distribution
from dpkit.divergences._dispatch import evaluator


def hockey_stick(P: Distribution, Q: Distribution, epsilon: float) -> Estimate:
    r"""Hockey-stick divergence
    :math:`E_{e^\varepsilon}(P\|Q) = \sup_S P(S) - e^\varepsilon Q(S) = \int (p - e^\varepsilon q)_+`.

    The smallest delta for which the pair satisfies (epsilon, delta)-indistinguishability in the
    direction P vs Q.  Any real epsilon is accepted (gamma = e^epsilon > 0; for epsilon < 0 the
    value is >= 1 - e^epsilon); ``epsilon = 0`` gives the total variation distance.

    Parameters
    ----------
    P, Q : Distribution
    epsilon : float, finite

    References
    ----------
    Barthe & Olmedo 2013 (ICALP), Def 3; Balle, Barthe, Gaboardi 2018, arXiv 1807.01647v2, Thm 1;
    Balle & Wang 2018, arXiv 1805.06530v2, Thm 8 for the Gaussian closed form.

    Examples
    --------
    >>> from dpkit.distributions import Laplace
    >>> round(hockey_stick(Laplace(0, 1), Laplace(1, 1), epsilon=0.5), 12)
    0.221199216929
    """
    e = check_finite("epsilon", epsilon)
    return evaluator(P, Q).hockey_stick(e)
