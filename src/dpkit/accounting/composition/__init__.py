r"""Composition theorems: what running several mechanisms on the same data costs in privacy.

Contract: every function takes guarantees (values of :mod:`dpkit.guarantees`) or their numbers
and returns a guarantee it *implies*, citing the theorem; nothing here knows mechanisms or
budgets. Lists accept ``(guarantee, count)`` items for ``count`` copies, expanded once for every
family. Numbers are :class:`~dpkit._math.Estimate` values: ``"exact"`` when the value is the
smallest the inputs allow (attained by some mechanisms meeting them, up to rounding towards more
loss), ``"upper"`` when it is only a valid bound; ``method`` names the theorem used. Inputs are
validated once here (NaN and infinities refused; ``k`` an integer >= 1).

Modules and sources:

* ``basic``: ``compose_basic``, ``compose_parallel`` (Dwork & Roth Thm 3.14-3.16; McSherry 2009).
* ``advanced``: ``compose_advanced``, ``advanced_per_step_epsilon``, ``compose_kov_bound``
  (Dwork-Rothblum-Vadhan 2010 = Dwork & Roth Thm 3.20, Cor 3.21; Kairouz-Oh-Viswanath Thm 3.4).
* ``optimal``: ``compose_optimal``, ``compose_optimal_heterogeneous`` (Kairouz-Oh-Viswanath
  Thm 3.3; Murtagh-Vadhan 2016).
* ``renyi``: ``compose_rdp`` (Mironov 2017 Prop 1); ``zcdp``: ``compose_zcdp`` (Bun-Steinke 2016
  Lemma 2.3); ``gdp``: ``compose_gdp`` (Dong-Roth-Su 2019 Cor 3.3).
* ``wasserstein``: ``compose_wasserstein`` (product of couplings), ``wdp_paper_value`` and
  ``PaperValue`` (Yang-Qi-Zhou 2024 Table 1, labelled as not a bound).
* ``generic``: ``compose_guarantees`` and the ``COMPOSERS`` registry (dispatch by type).

Examples
--------
>>> from dpkit.accounting.composition import compose_optimal
>>> round(compose_optimal(0.1, 0.0, 100, delta_total=1e-6).epsilon, 4)
4.7746
"""

from dpkit.accounting.composition.advanced import (
    advanced_per_step_epsilon,
    compose_advanced,
    compose_kov_bound,
)
from dpkit.accounting.composition.basic import compose_basic, compose_parallel
from dpkit.accounting.composition.gdp import compose_gdp
from dpkit.accounting.composition.generic import COMPOSERS, compose_guarantees
from dpkit.accounting.composition.optimal import compose_optimal, compose_optimal_heterogeneous
from dpkit.accounting.composition.renyi import compose_rdp
from dpkit.accounting.composition.wasserstein import PaperValue, compose_wasserstein, wdp_paper_value
from dpkit.accounting.composition.zcdp import compose_zcdp

__all__ = [
    "COMPOSERS",
    "PaperValue",
    "advanced_per_step_epsilon",
    "compose_advanced",
    "compose_basic",
    "compose_gdp",
    "compose_guarantees",
    "compose_kov_bound",
    "compose_optimal",
    "compose_optimal_heterogeneous",
    "compose_parallel",
    "compose_rdp",
    "compose_wasserstein",
    "compose_zcdp",
    "wdp_paper_value",
]
