r"""Basic (sequential) and parallel composition of pure and approximate DP guarantees.

Contract: both functions take a list whose items are :class:`~dpkit.guarantees.PureDP` or
:class:`~dpkit.guarantees.ApproxDP` values, or ``(guarantee, count)`` pairs, and return a
guarantee of the same family: ``PureDP`` when every input is pure, ``ApproxDP`` otherwise. Each
number is an :class:`~dpkit._math.Estimate` whose ``method`` names the theorem; its ``kind`` is
``"exact"`` when some mechanisms meeting the inputs attain it (pure DP: randomized response) and
``"upper"`` when it is only a valid bound. No numerics beyond exact sums rounded up once
(``fractions``) happen here, so a sum labelled ``"exact"`` is the float at or just above the exact
sum, and a budget check ``epsilon <= budget`` made with it errs only towards refusing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from dpkit._math import Estimate
from dpkit._math.directed import add_up
from dpkit.accounting.composition._common import counted_sum, expand, input_kind
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidArgumentError

__all__ = ["compose_basic", "compose_parallel"]

NeighboringName = Literal["add_remove", "substitute"]
_ADVICE = (
    "Convert it first (dpkit.guarantees.to_approx_dp) or use its own composer "
    "(compose_rdp, compose_zcdp, compose_gdp)."
)


def _parts(guarantees: object, function: str) -> tuple[list[tuple[float, float, int]], bool, list[object]]:
    """(epsilon, delta, count) triples, whether every input is pure, and the numbers as given."""
    items = expand(guarantees, (PureDP, ApproxDP), function, advice=_ADVICE)
    triples = []
    given: list[object] = []
    for g, count in items:
        assert isinstance(g, (PureDP, ApproxDP))  # expand checked the types
        triples.append((float(g.epsilon), float(g.delta) if isinstance(g, ApproxDP) else 0.0, count))
        given += [g.epsilon, g.delta] if isinstance(g, ApproxDP) else [g.epsilon]
    return triples, all(isinstance(g, PureDP) for g, _ in items), given


def compose_basic(guarantees: Sequence[object]) -> PureDP | ApproxDP:
    r"""Basic composition: the epsilons add, and so do the deltas.

    Parameters
    ----------
    guarantees : sequence of PureDP, ApproxDP or (guarantee, count) pairs
        One entry per mechanism run on the same data (adaptively chosen mechanisms allowed);
        ``count`` is an integer >= 1 and stands for that many copies.

    Returns
    -------
    PureDP or ApproxDP
        ``PureDP`` (epsilon ``Estimate(kind="exact")``: randomized response attains the sum) if
        every input is pure; else ``ApproxDP`` with :math:`(\sum_i \varepsilon_i, \sum_i \delta_i)`,
        both ``Estimate(kind="upper")``.

    Raises
    ------
    TypeError
        For a non-list, a malformed item, or a guarantee other than PureDP / ApproxDP.
    UnsupportedError
        For a WassersteinDP (use ``compose_wasserstein``).
    ValueError
        For an empty list, a count that is not an integer >= 1, or a summed delta above 1
        (a vacuous guarantee).

    Notes
    -----
    Pure: :math:`\varepsilon = \sum_i \varepsilon_i` (Thm 3.14, Cor 3.15). Approximate:
    :math:`(\sum_i \varepsilon_i, \sum_i \delta_i)` (Thm 3.16, proof in Dwork & Roth App. B).
    At :math:`\sum_i\varepsilon_i` the exact smallest delta is :math:`1 - \prod_i (1-\delta_i)`
    (Kairouz, Oh & Viswanath 2015; :func:`compose_optimal_heterogeneous`), which is smaller.

    References
    ----------
    Seed 002 = Dwork & Roth 2014, *The Algorithmic Foundations of Differential Privacy*,
    Thm 3.14, Cor 3.15, Thm 3.16; Dwork, McSherry, Nissim & Smith 2006 (TCC).

    Examples
    --------
    >>> print(compose_basic([PureDP(0.5), (PureDP(0.25), 2)]))
    1.0-DP
    """
    triples, pure, given = _parts(guarantees, "compose_basic")
    # Thm 3.14. The seed's proof line divides by Pr[M1(y)=r1] Pr[M2(x)=r2]; the denominator must be
    # Pr[M1(y)=r1] Pr[M2(y)=r2] (as printed the second factor is identically 1), and "by symmetry"
    # must read Pr[M(x)=r]/Pr[M(y)=r] >= exp(-(eps1+eps2)), not the inequality just proved.
    # Sums formed exactly and rounded up: ten spends of 0.1 compose to the float above 1.0
    epsilon = counted_sum((e, c) for e, _, c in triples)
    if pure:
        kind, note = input_kind(given, "exact")
        return PureDP(Estimate(epsilon, kind=kind, method="basic composition (DR Thm 3.14, Cor 3.15)" + note))
    delta = counted_sum((d, c) for _, d, c in triples)  # DR Thm 3.16
    if not delta <= 1.0:
        raise InvalidArgumentError(
            f"the deltas sum to {delta} > 1, so basic composition states nothing; "
            "use compose_optimal_heterogeneous or smaller deltas."
        )
    kind, note = input_kind(given, "upper")
    method = "basic composition (DR Thm 3.16)" + note
    return ApproxDP(
        epsilon=Estimate(epsilon, kind=kind, method=method),
        delta=Estimate(delta, kind=kind, method=method),
    )


def _neighboring_name(neighboring: object) -> str:
    value = getattr(neighboring, "value", neighboring)  # a future Neighboring enum, or its value
    if value not in ("add_remove", "substitute"):
        raise InvalidArgumentError(f"neighboring must be 'add_remove' or 'substitute'; got {neighboring!r}.")
    return str(value)


def _two_largest(values: list[tuple[float, int]]) -> float:
    """Sum of the two largest entries of the multiset (one entry if there is only one), rounded up."""
    flat = sorted(values, reverse=True)
    top, count = flat[0]
    if count >= 2:
        return add_up(top, top)
    return add_up(top, flat[1][0]) if len(flat) > 1 else top


def compose_parallel(
    guarantees: Sequence[object], neighboring: NeighboringName = "add_remove"
) -> PureDP | ApproxDP:
    r"""Parallel composition: mechanisms run on the parts of a disjoint partition of the records.

    Parameters
    ----------
    guarantees : sequence of PureDP, ApproxDP or (guarantee, count) pairs
        Guarantee of the mechanism run on each part; ``count`` parts share one guarantee.
    neighboring : {"add_remove", "substitute"}
        The neighbouring relation of the composed release. Under ``"substitute"`` each part's
        mechanism must meet its guarantee both when one record of its part is added or removed
        and when one is replaced.

    Returns
    -------
    PureDP or ApproxDP
        ``"add_remove"``: the maximum over parts; ``"substitute"``: the sum of the two largest
        (a replaced record may leave one part and enter another), one part alone giving its own
        value. Kind ``"exact"`` for pure inputs (attained by randomized response on each part),
        ``"upper"`` otherwise (epsilon and delta maximised separately).

    Raises
    ------
    TypeError, UnsupportedError, ValueError
        As :func:`compose_basic`; ``ValueError`` also for an unknown ``neighboring``.

    Notes
    -----
    The partition :math:`D_1, \dots, D_m` of the record domain must be fixed before seeing the data
    (data-independent). Add/remove: a neighbour changes one part only, so the loss is that part's,
    :math:`\max_i \varepsilon_i`. Substitution: replacing a record in :math:`D_i` by one in
    :math:`D_j` removes one from part *i* and adds one to part *j*, two independent mechanisms
    seeing neighbouring inputs, so by basic composition the loss is at most
    :math:`\varepsilon_i + \varepsilon_j` (and :math:`\delta_i + \delta_j`); the worst pair is the
    two largest. Seed 004 states parallel composition as "M(X) ε-DP and ∪X_i = X ⇒ M(X_i) ε-DP",
    which says nothing about releasing all parts together and omits that the parts must be
    disjoint and chosen independently of the data.

    References
    ----------
    McSherry 2009, "Privacy integrated queries", SIGMOD, Thm 4 (parallel composition, add/remove
    i.e. symmetric-difference neighbours); Dwork & Roth 2014, Thm 3.16 for the two parts touched by
    a substitution; Guerra-Balboa et al. 2024, CSF, arXiv 2308.14649 (composition under general
    neighbouring notions).

    Examples
    --------
    >>> parts = [PureDP(1.0), PureDP(0.5), PureDP(0.25)]
    >>> print(compose_parallel(parts), compose_parallel(parts, neighboring="substitute"))
    1.0-DP 1.5-DP
    """
    name = _neighboring_name(neighboring)
    triples, pure, given = _parts(guarantees, "compose_parallel")
    if name == "add_remove":
        epsilon = max(e for e, _, _ in triples)
        delta = max(d for _, d, _ in triples)
        method = "parallel composition, add/remove (McSherry 2009 Thm 4)"
    else:
        epsilon = _two_largest([(e, c) for e, _, c in triples])
        delta = _two_largest([(d, c) for _, d, c in triples])
        method = "parallel composition, substitution: two largest parts (McSherry 2009; DR Thm 3.16)"
    if pure:
        kind, note = input_kind(given, "exact")
        return PureDP(Estimate(epsilon, kind=kind, method=method + note))
    if not delta <= 1.0:
        raise InvalidArgumentError(f"the two largest deltas sum to {delta} > 1, so the bound states nothing.")
    kind, note = input_kind(given, "upper")
    return ApproxDP(
        epsilon=Estimate(epsilon, kind=kind, method=method + note),
        delta=Estimate(delta, kind=kind, method=method + note),
    )
