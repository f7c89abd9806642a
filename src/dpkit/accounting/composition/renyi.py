r"""Composition of Rényi DP curves: orders add pointwise.

Contract: :func:`compose_rdp` takes RenyiDP values (or ``(curve, count)`` pairs) and returns one
RenyiDP whose ε(α) is :math:`\sum_i \mathrm{count}_i\,\varepsilon_i(\alpha)` at every usable
order. Callable curves give a callable curve; finite tables give a table on the orders common to
all of them (callables are evaluated there). Every value is an upper bound, as RenyiDP states: the
sums are rounded up (a relative 4 m 2^-53 plus one float for m rounded operations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math.directed import counted_sum_up_array
from dpkit.accounting.composition._common import expand
from dpkit.guarantees import RenyiDP
from dpkit.errors import InvalidArgumentError

__all__ = ["compose_rdp"]


def _values(g: RenyiDP, alpha: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(g.epsilon(alpha), dtype=np.float64)


def _sum_up(pairs: list[tuple[RenyiDP, int]], alpha: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sum(count * epsilon(alpha))`` rounded up elementwise (every term is >= 0).

    Exact where no operation rounded; elsewhere the float sum of m products and additions is
    within a factor 1 - m u (u = 2^-53) of the exact one, so it is scaled by 1 + 4 m u and stepped
    one float up (:func:`dpkit._math.directed.counted_sum_up_array`).
    """
    total: NDArray[np.float64] = counted_sum_up_array([(_values(g, alpha), count) for g, count in pairs])
    return total  # Mironov Prop 1


def compose_rdp(curves: Sequence[object]) -> RenyiDP:
    r"""Compose Rényi DP guarantees: at each order α the epsilons add.

    Parameters
    ----------
    curves : sequence of RenyiDP or (RenyiDP, count) pairs
        ``count`` (an integer >= 1) copies of a curve add ``count`` times its epsilon at every
        order: ten repeats of one exponential mechanism cost ten times one.

    Returns
    -------
    RenyiDP
        A callable curve if every input is callable; otherwise a table on the orders shared by
        all tables (callables evaluated there). Values are upper bounds, as every RDP curve.

    Raises
    ------
    TypeError
        For a non-list, a malformed item or a guarantee other than RenyiDP (convert with
        ``dpkit.guarantees.to_rdp``).
    UnsupportedError
        For a WassersteinDP.
    ValueError
        For an empty list, a bad count, or tables without a common order.

    Notes
    -----
    For adaptive composition, :math:`D_\alpha((P_1,P_2)\|(Q_1,Q_2)) \le \varepsilon_1(\alpha) +
    \varepsilon_2(\alpha)` (Mironov Prop 1); by induction k copies give :math:`k\,\varepsilon(\alpha)`.

    References
    ----------
    Mironov 2017, "Rényi differential privacy", CSF, arXiv 1702.07476, Prop 1.

    Examples
    --------
    >>> g = compose_rdp([(RenyiDP(curve=lambda a: 0.5 * a), 4)])
    >>> float(g.epsilon(2.0))
    4.0
    """
    pairs = cast(
        list[tuple[RenyiDP, int]],
        expand(curves, (RenyiDP,), "compose_rdp", advice="Convert it first with dpkit.guarantees.to_rdp."),
    )
    tables = [g for g, _ in pairs if g.orders is not None]
    description = " + ".join(f"{count} x {g.description}" if count > 1 else g.description for g, count in pairs)
    if not tables:

        def curve(alpha: ArrayLike) -> NDArray[np.float64]:
            return _sum_up(pairs, np.asarray(alpha, dtype=np.float64))

        return RenyiDP(curve=curve, description=f"composition: {description}")
    common = set(cast(tuple[float, ...], tables[0].orders))  # stored as a sorted tuple of floats
    for g in tables[1:]:
        common &= set(cast(tuple[float, ...], g.orders))
    if not common:
        raise InvalidArgumentError(
            "the RDP tables share no order, so no order has a bound for every mechanism; "
            "build them on a common grid of orders."
        )
    orders = np.array(sorted(common), dtype=np.float64)
    return RenyiDP(orders=orders, epsilons=_sum_up(pairs, orders))  # Mironov Prop 1
