"""The types at the accounting seams: what an accountant takes, and what a mechanism must offer it.

These are structural (:class:`typing.Protocol`): a class satisfies one by having the members, with no
registration and no base class, so a caller's own mechanism is spendable if it has a dominating pair
and ``release``. They are for type checkers only; the runtime checks stay in
:func:`~dpkit.accounting.items.as_item` (which raises ArgumentTypeError for anything else).

* :class:`MechanismLike`: what :func:`~dpkit.accounting.items.as_item` reads from a mechanism (its
  dominating pair ``pair``; ``release`` marks it as a mechanism rather than a bare pair).
* :class:`CalibratedMechanism`: a mechanism whose own pure-DP and zCDP guarantees can be asked for
  (every :class:`dpkit.mechanisms.Mechanism`); the query layer reads its costs through it.
* :data:`PrivacyLike`: everything an :class:`~dpkit.accounting.Accountant` (and a ledger) can spend:
  a :class:`~dpkit.accounting.PrivacyItem`, a guarantee (PureDP, ApproxDP, zCDP, GaussianDP, RenyiDP
  given per order), a Gaussian or Laplace event, a DP-SGD step, or a mechanism.

The other two seams already have their protocols where they live: a ledger is
:class:`dpkit.ledger.Ledger`, and a query engine backend is ``dpkit.query._backends.Backend``.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

from dpkit.accounting.dpsgd import DPSGDStep
from dpkit.accounting.items import GaussianEvent, LaplaceEvent, PrivacyItem
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP
from dpkit.mechanisms import DominatingPair

__all__ = ["CalibratedMechanism", "MechanismLike", "PrivacyLike"]


class MechanismLike(Protocol):
    """A mechanism as the accountant sees it: the dominating pair of the laws it releases, and ``release``."""

    @property
    def pair(self) -> DominatingPair: ...

    def release(self, *args: Any, **kwargs: Any) -> Any: ...


class CalibratedMechanism(MechanismLike, Protocol):
    """A mechanism that states its own pure-DP and zCDP guarantees (``zcdp`` may raise UnsupportedError)."""

    def pure_dp(self) -> PureDP: ...

    def zcdp(self) -> ZCDP: ...


#: What an Accountant's ``spend``/``admit``/``check`` (and a ledger's ``reserve``) take: see the module docstring.
PrivacyLike: TypeAlias = (
    PrivacyItem | PureDP | ApproxDP | ZCDP | GaussianDP | RenyiDP | GaussianEvent | LaplaceEvent | DPSGDStep
    | MechanismLike
)
