r"""Sound conversions between the privacy definitions of :mod:`dpkit.guarantees`.

Contract: each function takes one guarantee and returns another that it *implies*, citing the
theorem. Numbers that are bounds rather than tight values are :class:`~dpkit._math.Estimate`
objects of kind ``"upper"``; ``"exact"`` marks a conversion that is tight for the worst mechanism
the input allows. Optimisations over Rényi orders only choose which valid bound to report (every
order gives one), so optimisation error costs tightness, never soundness; inverses are bisections
that return the upper end of their bracket. Nothing converts a
:class:`~dpkit.guarantees.WassersteinDP`: every function raises
:class:`~dpkit.errors.UnsupportedError` when given one.

=====================  ==========================================  ===========================
module                 functions                                   main sources
=====================  ==========================================  ===========================
``pure``               ``pure_to_*``, ``approx_dp_to_profile``     KOV 2015; Steinke 2024; BS16
``renyi``              ``rdp_to_*``, ``zcdp_to_*``                 CKS 2020; BBGHS 2020; Mironov
``gaussian``           ``gdp_to_*``                                DRS 2019; Balle & Wang 2018
``generic``            ``profile_to_approx_dp``, ``to_*``          dispatch by type
=====================  ==========================================  ===========================
"""

from dpkit.guarantees.conversions.gaussian import (
    gdp_to_approx_dp,
    gdp_to_profile,
    gdp_to_rdp,
    gdp_to_zcdp,
)
from dpkit.guarantees.conversions.generic import (
    profile_to_approx_dp,
    to_approx_dp,
    to_profile,
    to_rdp,
    to_zcdp,
)
from dpkit.guarantees.conversions.pure import (
    approx_dp_to_profile,
    pure_to_approx_dp,
    pure_to_profile,
    pure_to_rdp,
    pure_to_zcdp,
)
from dpkit.guarantees.conversions.renyi import (
    rdp_to_approx_dp,
    rdp_to_profile,
    zcdp_to_approx_dp,
    zcdp_to_profile,
    zcdp_to_rdp,
)

__all__ = [
    "approx_dp_to_profile",
    "gdp_to_approx_dp",
    "gdp_to_profile",
    "gdp_to_rdp",
    "gdp_to_zcdp",
    "profile_to_approx_dp",
    "pure_to_approx_dp",
    "pure_to_profile",
    "pure_to_rdp",
    "pure_to_zcdp",
    "rdp_to_approx_dp",
    "rdp_to_profile",
    "to_approx_dp",
    "to_profile",
    "to_rdp",
    "to_zcdp",
    "zcdp_to_approx_dp",
    "zcdp_to_profile",
    "zcdp_to_rdp",
]
