r"""Privacy definitions as immutable, validated values, and sound conversions between them.

===================  ==============================================================  =====================
class                statement about every neighbouring pair (P, Q)                  prints as
===================  ==============================================================  =====================
``PureDP``           :math:`D_\infty(P\|Q) \le \varepsilon`                            ``1.0-DP``
``ApproxDP``         :math:`E_{e^\varepsilon}(P\|Q) \le \delta`                        ``(1.0, 1e-06)-DP``
``PrivacyProfile``   :math:`E_{e^\varepsilon}(P\|Q) \le \delta(\varepsilon)`, ε ≥ 0     ``privacy profile (…)``
``RenyiDP``          :math:`D_\alpha(P\|Q) \le \varepsilon(\alpha)` at usable orders     ``RDP curve (…)``
``ZCDP``             :math:`D_\alpha(P\|Q) \le \alpha\rho`, all α > 1                   ``0.5-zCDP``
``GaussianDP``       trade-off at least that of :math:`N(0,1)` vs :math:`N(\mu,1)`      ``1.2-GDP``
``WassersteinDP``    :math:`W_p(P,Q) \le \varepsilon`: a distance, convertible to none   ``(2.0, 0.5)-WDP``
===================  ==============================================================  =====================

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
