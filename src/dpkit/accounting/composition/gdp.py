r"""Composition of Gaussian DP: the mus add in quadrature.

Contract: :func:`compose_gdp` takes GaussianDP values (or ``(guarantee, count)`` pairs) and
returns one GaussianDP whose mu is an ``Estimate(kind="exact")``: composing Gaussian tests is
exactly a Gaussian test.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import cast

from dpkit._math import Estimate
from dpkit._math.directed import sqrt_up
from dpkit.accounting.composition._common import expand, input_kind
from dpkit.guarantees import GaussianDP

__all__ = ["compose_gdp"]


def compose_gdp(guarantees: Sequence[object]) -> GaussianDP:
    r"""Compose Gaussian DP guarantees: :math:`\mu = \sqrt{\sum_i \mathrm{count}_i\,\mu_i^2}`.

    Parameters
    ----------
    guarantees : sequence of GaussianDP or (GaussianDP, count) pairs
        ``count`` is an integer >= 1.

    Returns
    -------
    GaussianDP
        ``mu`` is ``Estimate(kind="exact")``, rounded up (within two ulps): the composition of
        :math:`N(0,1)` vs :math:`N(\mu_i,1)` tests is :math:`N(0,I)` vs :math:`N((\mu_i)_i, I)`,
        a test of :math:`N(0,1)` vs :math:`N(\|\mu\|_2, 1)` after rotation.

    Raises
    ------
    TypeError
        For a non-list, a malformed item or a guarantee other than GaussianDP.
    UnsupportedError
        For a WassersteinDP.
    ValueError
        For an empty list or a bad count.

    References
    ----------
    Dong, Roth & Su 2019, "Gaussian differential privacy", arXiv 1905.02383, Cor 3.3.

    Examples
    --------
    >>> print(compose_gdp([GaussianDP(0.75), GaussianDP(1.0)]))
    1.25-GDP
    >>> float(compose_gdp([GaussianDP(0.6), GaussianDP(0.8)]).mu)  # the floats 0.6, 0.8 are a little above
    1.0000000000000002
    """
    items = cast(list[tuple[GaussianDP, int]], expand(guarantees, (GaussianDP,), "compose_gdp"))
    # DRS Cor 3.3: the sum of count * mu^2 is formed exactly (fractions) and its square root rounded
    # up exactly: the float at or just above the exact mu
    mu = sqrt_up(sum((Fraction(float(g.mu)) ** 2 * count for g, count in items), Fraction(0)))
    kind, note = input_kind([g.mu for g, _ in items], "exact")
    method = "GDP composition: mus add in quadrature (DRS 2019 Cor 3.3)" + note
    return GaussianDP(Estimate(mu, kind=kind, method=method))
