r"""Composition of zero-concentrated DP: the rhos add.

Contract: :func:`compose_zcdp` takes ZCDP values (or ``(guarantee, count)`` pairs) and returns
one ZCDP whose rho is an ``Estimate(kind="exact")``: Gaussian mechanisms attain the sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from dpkit._math import Estimate
from dpkit.accounting.composition._common import counted_sum, expand, input_kind
from dpkit.guarantees import ZCDP

__all__ = ["compose_zcdp"]


def compose_zcdp(guarantees: Sequence[object]) -> ZCDP:
    r"""Compose zCDP guarantees: :math:`\rho = \sum_i \mathrm{count}_i\,\rho_i`.

    Parameters
    ----------
    guarantees : sequence of ZCDP or (ZCDP, count) pairs
        ``count`` is an integer >= 1.

    Returns
    -------
    ZCDP
        ``rho`` is ``Estimate(kind="exact")``, the exact sum rounded up: Gaussian mechanisms with these rhos
        compose to a Gaussian mechanism with exactly the summed rho.

    Raises
    ------
    TypeError
        For a non-list, a malformed item or a guarantee other than ZCDP (convert with
        ``dpkit.guarantees.to_zcdp``).
    UnsupportedError
        For a WassersteinDP.
    ValueError
        For an empty list or a bad count.

    Notes
    -----
    :math:`D_\alpha` of an adaptive composition is at most the sum of the per-step bounds
    :math:`\alpha\rho_i`, so the composition is :math:`(\sum_i\rho_i)`-zCDP.

    References
    ----------
    Bun & Steinke 2016, "Concentrated differential privacy: simplifications, extensions, and
    lower bounds", TCC, arXiv 1605.02065, Lemma 2.3.

    Examples
    --------
    >>> print(compose_zcdp([ZCDP(0.125), (ZCDP(0.25), 3)]))
    0.875-zCDP
    """
    advice = "Convert it first with dpkit.guarantees.to_zcdp."
    items = cast(list[tuple[ZCDP, int]], expand(guarantees, (ZCDP,), "compose_zcdp", advice=advice))
    rho = counted_sum((float(g.rho), count) for g, count in items)  # BS16 Lemma 2.3, exact sum rounded up
    kind, note = input_kind([g.rho for g, _ in items], "exact")
    return ZCDP(Estimate(rho, kind=kind, method="zCDP composition: rhos add (BS16 Lemma 2.3)" + note))
