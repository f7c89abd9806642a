r"""Sequential composition dispatched on the guarantee type, through one registry.

Contract: :data:`COMPOSERS` maps each guarantee class to the function that composes a list of
that family (one rule per type); :func:`compose_guarantees` picks it. Repeat counts are
``(guarantee, count)`` items, expanded once in ``_common.expand`` for every composer, so a new
type joins the registry and inherits the count handling (the tests parametrize over the
registry). Types are never mixed silently: convert first with :mod:`dpkit.guarantees`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from dpkit.accounting.composition.basic import compose_basic
from dpkit.accounting.composition.gdp import compose_gdp
from dpkit.accounting.composition.renyi import compose_rdp
from dpkit.accounting.composition.wasserstein import compose_wasserstein
from dpkit.accounting.composition.zcdp import compose_zcdp
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PrivacyProfile, PureDP, RenyiDP, WassersteinDP

__all__ = ["COMPOSERS", "compose_guarantees"]

COMPOSERS: Mapping[type, Callable[[Sequence[object]], object]] = MappingProxyType(
    {
        PureDP: compose_basic,
        ApproxDP: compose_basic,
        RenyiDP: compose_rdp,
        ZCDP: compose_zcdp,
        GaussianDP: compose_gdp,
        WassersteinDP: compose_wasserstein,
    }
)
"""Guarantee class -> composer of a list of that family (PureDP and ApproxDP share one)."""


def compose_guarantees(guarantees: Sequence[object]) -> object:
    r"""Sequentially compose guarantees of one family with that family's composer.

    Parameters
    ----------
    guarantees : sequence of guarantees or (guarantee, count) pairs
        All PureDP/ApproxDP (basic composition), all RenyiDP, all ZCDP, all GaussianDP or all
        WassersteinDP.

    Returns
    -------
    PureDP, ApproxDP, RenyiDP, ZCDP, GaussianDP or WassersteinDP
        What the composer in :data:`COMPOSERS` returns.

    Raises
    ------
    TypeError
        For a non-list, mixed families, or an unregistered type.
    UnsupportedError
        For a PrivacyProfile (compose profiles through PLD accounting).
    ValueError
        For an empty list or a bad count.

    References
    ----------
    See each composer: Dwork & Roth 2014 Thm 3.14-3.16; Mironov 2017 Prop 1; Bun & Steinke 2016
    Lemma 2.3; Dong, Roth & Su 2019 Cor 3.3.

    Examples
    --------
    >>> print(compose_guarantees([(ZCDP(0.5), 2)]))
    1.0-zCDP
    """
    if isinstance(guarantees, (str, bytes)) or not isinstance(guarantees, Sequence):
        raise ArgumentTypeError(
            "compose_guarantees takes a list of guarantees or (guarantee, count) pairs; got "
            f"{type(guarantees).__name__}."
        )
    if not guarantees:
        raise InvalidArgumentError("compose_guarantees needs at least one guarantee; got an empty list.")
    composers = set()
    for item in guarantees:
        g = item[0] if isinstance(item, tuple) and item else item
        if isinstance(g, PrivacyProfile):
            raise UnsupportedError(
                "a PrivacyProfile composes through its privacy loss distribution; use PLD "
                "accounting (dpkit.accounting.pld), or convert with dpkit.guarantees.to_approx_dp."
            )
        composer = COMPOSERS.get(type(g))
        if composer is None:
            raise ArgumentTypeError(f"no composer is registered for {type(g).__name__}; known: "
                            f"{', '.join(t.__name__ for t in COMPOSERS)}.")
        composers.add(composer)
    if len(composers) > 1:
        raise ArgumentTypeError(
            "compose_guarantees composes one family at a time; convert first (e.g. "
            "dpkit.guarantees.to_rdp or to_zcdp) so that every guarantee has one type."
        )
    return composers.pop()(guarantees)
