"""Privacy definitions as immutable, validated values, and sound conversions between them.

==============  =========================================================  =====================
class           statement, for every neighbouring pair (P, Q)              prints as
==============  =========================================================  =====================
PureDP          D_inf(P || Q) <= epsilon                                   1.0-DP
ApproxDP        E_{e^epsilon}(P || Q) <= delta                             (1.0, 1e-06)-DP
PrivacyProfile  E_{e^epsilon}(P || Q) <= delta(epsilon), all epsilon >= 0  privacy profile (...)
RenyiDP         D_alpha(P || Q) <= epsilon(alpha) at the usable orders     RDP curve (...)
ZCDP            D_alpha(P || Q) <= alpha * rho for all alpha > 1           0.5-zCDP
GaussianDP      at least as hard to test as N(0, 1) vs N(mu, 1)            1.2-GDP
WassersteinDP   W_p(P, Q) <= epsilon: a distance, convertible to nothing   (2.0, 0.5)-WDP
==============  =========================================================  =====================

Conversions are named functions (``pure_to_zcdp``, ``zcdp_to_approx_dp``, ``rdp_to_approx_dp``,
``gdp_to_profile``, …) plus the type-dispatched ``to_approx_dp``, ``to_profile``, ``to_rdp`` and
``to_zcdp``; see :mod:`dpkit.guarantees.conversions` for the contract. Every epsilon or delta they
report is an upper bound (or exact), tagged with its kind.

Examples
--------
>>> from dpkit.guarantees import PureDP, pure_to_zcdp
>>> print(pure_to_zcdp(PureDP(epsilon=1.0), tight=False))
0.5-zCDP
"""

from dpkit.guarantees.conversions import (
    approx_dp_to_profile,
    gdp_to_approx_dp,
    gdp_to_profile,
    gdp_to_rdp,
    gdp_to_zcdp,
    profile_to_approx_dp,
    pure_to_approx_dp,
    pure_to_profile,
    pure_to_rdp,
    pure_to_zcdp,
    rdp_to_approx_dp,
    rdp_to_profile,
    to_approx_dp,
    to_profile,
    to_rdp,
    to_zcdp,
    zcdp_to_approx_dp,
    zcdp_to_profile,
    zcdp_to_rdp,
)
from dpkit.guarantees.definitions import (
    ZCDP,
    ApproxDP,
    GaussianDP,
    PrivacyProfile,
    PureDP,
    RenyiDP,
    WassersteinDP,
)

__all__ = [
    "ApproxDP",
    "GaussianDP",
    "PrivacyProfile",
    "PureDP",
    "RenyiDP",
    "WassersteinDP",
    "ZCDP",
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
