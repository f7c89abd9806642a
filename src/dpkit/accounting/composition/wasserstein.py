r"""Composition of Wasserstein "DP" bounds, and the WDP paper's values labelled for what they are.

Contract: :func:`compose_wasserstein` bounds the transport distance of a product of independent
releases (it is a distance bound, convertible to no DP guarantee: see
:class:`~dpkit.guarantees.WassersteinDP`). :func:`wdp_paper_value` reproduces the numbers of
Yang, Qi & Zhou's Table 1 so that they can be compared, but returns a :class:`PaperValue`, never
a guarantee: for Laplace and Gaussian noise the exact :math:`W_p` of a shift by Δ is Δ, for every
order and noise scale, and the paper's value is below it (λ = 1, Δ = 1: 0.429 for p = 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, cast

from dpkit._math import check_finite, check_positive
from dpkit._math.directed import sqrt_up, up
from dpkit._math.precise import mp, to_float_up
from dpkit.accounting.composition._common import expand
from dpkit.guarantees import WassersteinDP
from dpkit.errors import InvalidArgumentError

__all__ = ["PaperValue", "compose_wasserstein", "wdp_paper_value"]

Family = Literal["laplace", "gaussian"]


def compose_wasserstein(guarantees: Sequence[object]) -> WassersteinDP:
    r"""Bound :math:`W_p` of a product of independent releases with the :math:`\ell_p` product cost.

    Parameters
    ----------
    guarantees : sequence of WassersteinDP or (WassersteinDP, count) pairs
        All of the same order ``p``; ``count`` is an integer >= 1.

    Returns
    -------
    WassersteinDP
        Order ``p`` and :math:`\varepsilon = (\sum_i \mathrm{count}_i\,\varepsilon_i^p)^{1/p}`, for
        the product space with metric :math:`d((x_i),(y_i)) = (\sum_i d_i(x_i,y_i)^p)^{1/p}`. The
        bound is attained by location shifts, so no smaller one follows from the inputs. Still a
        distance bound: it implies no DP guarantee.

    Raises
    ------
    TypeError
        For a non-list, a malformed item or a guarantee other than WassersteinDP.
    ValueError
        For an empty list, a bad count, or different orders.

    Notes
    -----
    Gluing optimal couplings :math:`\gamma_i` of :math:`(P_i, Q_i)` into
    :math:`\otimes_i\gamma_i` couples the products, and its cost is
    :math:`\int \sum_i d_i^p \, d\otimes_i\gamma_i = \sum_i W_p(P_i,Q_i)^p`, so
    :math:`W_p(\otimes P_i, \otimes Q_i)^p \le \sum_i W_p(P_i, Q_i)^p`. For shifts by
    :math:`v_i` equality holds: :math:`W_p \ge W_1 \ge \langle u, v\rangle = \|v\|_p` with
    :math:`u` the dual unit vector (1-Lipschitz :math:`x \mapsto \langle u, x\rangle`). This
    replaces the sum :math:`\sum_i \varepsilon_i`, which is larger for p > 1.

    References
    ----------
    Villani 2009, *Optimal Transport: Old and New*, Def 6.1 and Remark 6.5 (duality, p = 1);
    Yang, Qi & Zhou 2024, "Wasserstein differential privacy", AAAI, arXiv 2401.12436 (definition).

    Examples
    --------
    >>> print(compose_wasserstein([(WassersteinDP(p=2.0, epsilon=3.0), 1), WassersteinDP(p=2.0, epsilon=4.0)]))
    (2.0, 5.0)-WDP
    """
    items = cast(list[tuple[WassersteinDP, int]], expand(guarantees, (WassersteinDP,), "compose_wasserstein"))
    orders = {g.p for g, _ in items}
    if len(orders) != 1:
        raise InvalidArgumentError(
            f"every WassersteinDP must have the same order p to compose; got orders {sorted(orders)}."
        )
    p = orders.pop()
    scale = max(g.epsilon for g, _ in items)
    if scale == 0.0:
        return WassersteinDP(p=p, epsilon=0.0)
    # W_p(prod P_i, prod Q_i)^p <= sum_i W_p(P_i, Q_i)^p (product of optimal couplings), evaluated at
    # 160 bits and rounded up (a distance bound, so never below the exact value)
    if p in (1.0, 2.0):  # exact sums (and an exactly rounded square root)
        total = sum((Fraction(float(g.epsilon)) ** int(p) * count for g, count in items), Fraction(0))
        return WassersteinDP(p=p, epsilon=up(total) if p == 1.0 else sqrt_up(total))
    ctx = mp()
    total = ctx.fsum(count * (ctx.mpf(g.epsilon) / scale) ** p for g, count in items)
    return WassersteinDP(p=p, epsilon=to_float_up(scale * total ** (1 / ctx.mpf(p))))


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperValue:
    """A number quoted from a paper, kept apart from guarantees because it bounds nothing.

    Parameters
    ----------
    value : float
        The number the paper's formula gives.
    formula : str
        The formula, as evaluated.
    note : str
        Why it is not a guarantee.

    Examples
    --------
    >>> print(PaperValue(value=0.5, formula="1/2", note="not an upper bound"))
    0.5 (paper formula 1/2; not an upper bound)
    """

    value: float
    formula: str
    note: str

    def __str__(self) -> str:
        return f"{self.value!r} (paper formula {self.formula}; {self.note})"


def wdp_paper_value(order: float, scale: float, sensitivity: float, family: Family = "laplace") -> PaperValue:
    r"""The WDP budget that Yang, Qi & Zhou's Table 1 gives for the Laplace or Gaussian mechanism.

    Parameters
    ----------
    order : float, finite, >= 1
        The Wasserstein order μ (the paper's ``order``).
    scale : float, finite, > 0
        Laplace scale λ or Gaussian standard deviation σ.
    sensitivity : float, finite, > 0
        Δ, the sensitivity of the released query.
    family : {"laplace", "gaussian"}

    Returns
    -------
    PaperValue
        Laplace: :math:`\tfrac12\Delta\,(\sqrt{2(\Delta/\lambda + e^{-\Delta/\lambda} - 1)})^{1/\mu}`;
        Gaussian: :math:`\tfrac12(\Delta/\sigma)^{1/\mu}`. **Not an upper bound** on
        :math:`W_\mu`: the exact distance between the two output laws is Δ for every μ and scale
        (they differ by a shift), and the paper's value lies below it, e.g. 0.429 (μ = 1) and
        0.463 (μ = 2) for λ = Δ = 1. It is not a lower bound either: for λ = 1, Δ = 3, μ = 1 it
        is 3.04 > 3.

    Raises
    ------
    ValueError
        If a parameter is NaN, infinite or out of range, or ``family`` is unknown.
    TypeError
        If a parameter is not a number.

    Notes
    -----
    The paper bounds :math:`W_\mu` by Δ times a power of the total variation distance (valid on a
    space of diameter Δ only; the real line is unbounded) and that by Pinsker's inequality with
    the KL divergence :math:`\Delta/\lambda + e^{-\Delta/\lambda} - 1` (Laplace) or
    :math:`\Delta^2/(2\sigma^2)` (Gaussian). Table 1 writes the Laplace KL with 1/λ (Δ = 1); the
    general Δ/λ is used here. The factor ½ sits outside the 1/μ power as in the paper.

    References
    ----------
    Yang, Qi & Zhou 2024, "Wasserstein differential privacy", AAAI, arXiv 2401.12436, Table 1 and
    Prop 7 (seed 001, formulas 36-37); code github.com/Hifipsysta/WDP, ``basic_mechanism.ipynb``.

    Examples
    --------
    >>> v = wdp_paper_value(order=1.0, scale=1.0, sensitivity=1.0)
    >>> round(v.value, 3), v.note
    (0.429, 'not an upper bound: the exact W_p of a shift by sensitivity is the sensitivity')
    """
    mu = check_finite("order", order)
    if not mu >= 1.0:
        raise InvalidArgumentError(f"order must be finite and >= 1; got {mu}.")
    lam = check_positive("scale", scale)
    delta = check_positive("sensitivity", sensitivity)
    if family == "laplace":
        t = delta / lam
        value = 0.5 * delta * math.sqrt(2.0 * (t + math.expm1(-t))) ** (1.0 / mu)
        formula = "0.5*D*sqrt(2*(D/scale + exp(-D/scale) - 1))**(1/order)"
    elif family == "gaussian":
        value = 0.5 * (delta / lam) ** (1.0 / mu)
        formula = "0.5*(D/scale)**(1/order)"
    else:
        raise InvalidArgumentError(f"family must be 'laplace' or 'gaussian'; got {family!r}.")
    return PaperValue(
        value=value,
        formula=formula,
        note="not an upper bound: the exact W_p of a shift by sensitivity is the sensitivity",
    )
