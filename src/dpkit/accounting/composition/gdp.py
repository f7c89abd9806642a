r"""Composition of Gaussian DP: the mus add in quadrature.

Contract: :func:`compose_gdp` takes GaussianDP values (or ``(guarantee, count)`` pairs) and
returns one GaussianDP whose mu is an ``Estimate(kind="exact")``: composing Gaussian tests is
exactly a Gaussian test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from dpkit._math import Estimate
from dpkit.accounting.composition._common import counted_sum, expand
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
        ``mu`` is ``Estimate(kind="exact")``: the composition of
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
    >>> print(compose_gdp([GaussianDP(0.6), GaussianDP(0.8)]))
    1.0-GDP
    """
    items = cast(list[tuple[GaussianDP, int]], expand(guarantees, (GaussianDP,), "compose_gdp"))
    mus = [(float(g.mu), count) for g, count in items]
    scale = max(mu for mu, _ in mus)  # scaled so that mu**2 cannot overflow
    mu = scale * math.sqrt(counted_sum(((m / scale) ** 2, c) for m, c in mus))  # DRS Cor 3.3
    method = "GDP composition: mus add in quadrature (DRS 2019 Cor 3.3)"
    return GaussianDP(Estimate(mu, kind="exact", method=method))
