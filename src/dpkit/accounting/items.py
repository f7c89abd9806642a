r"""What an accountant can take: every spend, reduced once to its cost in each family of the core.

Contract
--------
:func:`as_item` turns anything dpkit can spend -- a guarantee (``PureDP``, ``ApproxDP``, ``ZCDP``,
``GaussianDP``, ``RenyiDP`` at finitely many orders), a dpkit mechanism, a
:class:`~dpkit.accounting.dpsgd.DPSGDStep`, or one of the *events* below (descriptions of noise added
by the caller's own code, like ``dp_accounting``'s ``DpEvent``) -- into a :class:`PrivacyItem`: a
frozen value holding, for **one** use,

* ``epsilon``: the pure epsilon (``inf`` if none); ``approx``: an ``(epsilon, delta)`` guarantee for basic
  and approximate-DP composition (``None`` if none);
* ``rho``: a zCDP bound (``inf`` if none); ``mu``: a Gaussian-DP bound (``inf`` if none);
* ``rdp``: the Rényi curve at the fixed orders :data:`ORDERS` (``inf`` where none);
* ``law``: the privacy-loss law the PLD composes (``None`` if the item has no exact law);
* ``event``: a JSON-able description of what was spent (like a ``DpEvent``); :func:`item_to_json` writes
  it with every number above, and :func:`item_from_json` reads them back exactly (the ledger's record).

Every number is an upper bound, rounded up.  The reduction happens once, when an item is made, so an
accountant's ``add`` never looks at a mechanism again; the one exception is the Rényi curve of a
subsampled Gaussian (DP-SGD steps, :class:`SubsampledEvent`), a series summed at each order, which the item
computes on the first read of ``item.rdp`` (a composition read only by PLD never sums it).  Sources:
pure epsilon to zCDP rho = epsilon tanh(epsilon/2) and to the Rényi curve of randomized response (every
epsilon-DP pair is a post-processing of it: Kairouz, Oh, Viswanath 2015, arXiv 1311.0776, Thm 2.4 -- the
curve below is its Rényi divergence); pure epsilon to mu-GDP with mu = 2 Phi^{-1}(e^eps / (1 + e^eps))
(docs/theory.md §2d, from the trade-off function of epsilon-DP, Dong, Roth, Su 2022, arXiv 1905.02383, Prop 2.5 and
Def 2.6); Gaussian: rho = mu^2/2 and D_alpha = alpha mu^2 / 2 (Bun & Steinke 2016, arXiv 1605.02065,
Prop 1.6); RDP is non-decreasing in alpha (van Erven & Harremoës 2014, arXiv 1206.2459, Thm 3), so a
curve given at other orders is read at the next listed order above.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpkit._math import check_count
from dpkit._value import Lazy
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP

__all__ = [
    "ORDERS",
    "ORDERS_V1",
    "GaussianEvent",
    "LaplaceEvent",
    "PrivacyItem",
    "Spendable",
    "SubsampledEvent",
    "as_item",
    "combine",
    "item_from_json",
    "item_to_json",
    "pure_to_gdp_mu",
]

#: the fixed Rényi orders of the core's RDP family: 1.25 to 1.75 and 2.25, 2.5, 3.5, 4.5 (fractional orders,
#: where small compositions find their optimum), every integer from 2 to 64 and every eighth to 256 (the
#: integer grid of :data:`~dpkit.accounting.sampled_gaussian.DEFAULT_ORDERS`).  94 orders: the RDP answer of
#: 100 DP-SGD steps (sigma 1, q 0.01, delta 1e-5) is 1.2248, as from all 255 integer orders 2..256; the 26
#: orders the core kept before gave 1.3035 (the optimum, order 9, fell between 8 and 10).  A sum over
#: orders costs a vector addition, so density is free except where a curve is computed (a subsampled
#: Gaussian's integer orders are closed sums: 94 orders take 1.3x the time of the 26).
ORDERS: tuple[float, ...] = tuple(sorted({1.25, 1.5, 1.75, 2.25, 2.5, 3.5, 4.5}
                                         | {float(a) for a in range(2, 65)} | {float(a) for a in range(72, 257, 8)}))
#: the 26 orders of ledger files written before 2026-11-28 (their items' curves are read at :data:`ORDERS`
#: by :func:`item_from_json`)
ORDERS_V1: tuple[float, ...] = (1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0,
                                14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 48.0, 64.0, 128.0, 256.0)
_ORD = np.array(ORDERS)
_INF_RDP = np.full(len(ORDERS), math.inf)
_INF_RDP.flags.writeable = False


def _up(x: float, ulps: int = 2) -> float:
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


@runtime_checkable
class Spendable(Protocol):
    """Anything :func:`as_item` accepts besides guarantees and events: a dpkit mechanism (a dominating
    pair and the guarantees computed from it)."""

    @property
    def pair(self) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianEvent:
    """Gaussian noise N(0, sigma^2) added by the caller to a query of l2 ``sensitivity`` (continuous
    noise: the accountant takes the caller's word that it was sampled safely)."""

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        for name in ("sigma", "sensitivity"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < float(v) < math.inf):
                raise InvalidArgumentError(f"{name} must be finite and > 0; got {v!r}.")

    @property
    def name(self) -> str:
        return f"Gaussian(sigma={self.sigma:g})"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaplaceEvent:
    """Laplace noise of scale b added by the caller to a query of l1 ``sensitivity`` (continuous noise)."""

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        for name in ("scale", "sensitivity"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < float(v) < math.inf):
                raise InvalidArgumentError(f"{name} must be finite and > 0; got {v!r}.")

    @property
    def name(self) -> str:
        return f"Laplace(scale={self.scale:g})"


@dataclass(frozen=True, slots=True, kw_only=True)
class SubsampledEvent:
    """``noise`` (a :class:`GaussianEvent` or :class:`LaplaceEvent`) added to a query run on a random subset
    of the records: Poisson subsampling with rate ``sampling_rate`` (``sampling="poisson"``) or a fixed batch
    of m of n records, ``sampling_rate`` = m/n (``sampling="without_replacement"``, substitution neighbours
    only), like ``dp_accounting``'s ``PoissonSampledDpEvent`` / ``SampledWithoutReplacementDpEvent``.

    ``noise.sensitivity`` bounds one record's contribution (its l2 norm for Gaussian noise, l1 for Laplace),
    so the base pair is a shift by ``sensitivity`` for add/remove neighbours and by ``2 * sensitivity`` for
    substitution (as :class:`~dpkit.accounting.dpsgd.DPSGDStep` and ``dpkit account --neighbours
    substitution`` take it).  The pairs composed are those of :mod:`dpkit.accounting.subsampling` (its
    table says which are dominating pairs and which, Poisson with substitution, an upper bound).

    >>> SubsampledEvent(noise=LaplaceEvent(scale=2.0), sampling_rate=0.01).name
    'subsampled Laplace(scale=2), q=0.01, poisson, add_remove'
    """

    noise: GaussianEvent | LaplaceEvent
    sampling_rate: float
    sampling: str = "poisson"
    neighboring: str = "add_remove"

    def __post_init__(self) -> None:
        from dpkit.accounting.subsampling import _check_rate, _scheme

        if not isinstance(self.noise, (GaussianEvent, LaplaceEvent)):
            raise ArgumentTypeError(
                f"noise must be a GaussianEvent or a LaplaceEvent; got {type(self.noise).__name__}.")
        r = self.sampling_rate
        if isinstance(r, bool) or not isinstance(r, (int, float)):
            raise ArgumentTypeError(f"sampling_rate must be a number in (0, 1]; got {r!r}.")
        object.__setattr__(self, "sampling_rate", _check_rate(float(r)))
        _scheme(self.sampling, self.neighboring)  # refuses an unknown scheme, or without replacement + add/remove

    @property
    def shift(self) -> float:
        """The base pair's shift: the sensitivity (add/remove) or twice it (substitution)."""
        c = float(self.noise.sensitivity)
        return 2.0 * c if self.neighboring == "substitute" else c

    @property
    def name(self) -> str:
        return f"subsampled {self.noise.name}, q={self.sampling_rate:g}, {self.sampling}, {self.neighboring}"


def _frozen_curve(rdp: Any) -> NDArray[np.float64]:
    r = np.array(rdp, dtype=np.float64, copy=True)
    r.flags.writeable = False
    return r


_UNSET: Any = object()


#: a Rényi curve computed on first use: a deterministic builder (a :func:`functools.partial` of a module
#: function, so that the item still pickles)
RdpBuilder = Callable[[], NDArray[np.float64]]


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class PrivacyItem:
    """One use of a mechanism, in every family of the accounting core (see the module docstring).

    ``rdp`` is given as an array, or as a builder (:data:`RdpBuilder`) for a curve that is a series to sum
    (the subsampled Gaussian's: tens of milliseconds per item), computed on the first read of ``item.rdp``
    and kept in a :class:`~dpkit._value.Lazy` (not part of the value; a copy or ``dataclasses.replace``
    builds it again, a pickle carries the builder); :attr:`rdp_ready` says whether reading it is free."""

    label: str
    event: dict[str, Any] = field(compare=False, hash=False)
    key: str = ""  # canonical JSON of ``event``: identical items share it (run-length encoding)
    epsilon: float = math.inf
    approx: tuple[float, float] | None = None
    rho: float = math.inf
    mu: float = math.inf
    # the Rényi curve (read-only) or its builder; read it through ``rdp``
    rdp_curve: NDArray[np.float64] | RdpBuilder = field(default_factory=lambda: _INF_RDP, compare=False,
                                                         hash=False, repr=False)
    law: tuple[Any, ...] | None = None
    headline: Any = None  # the guarantee a ledger row shows for this item
    _rdp_built: Lazy[NDArray[np.float64]] = field(default_factory=Lazy, init=False, repr=False, compare=False,
                                                  hash=False)

    def __init__(self, *, label: str, event: dict[str, Any], key: str = "", epsilon: float = math.inf,
                 approx: tuple[float, float] | None = None, rho: float = math.inf, mu: float = math.inf,
                 rdp: Any = _UNSET, law: tuple[Any, ...] | None = None, headline: Any = None,
                 rdp_curve: NDArray[np.float64] | RdpBuilder | None = None) -> None:
        given = rdp if rdp is not _UNSET else rdp_curve  # an explicit ``rdp`` wins (``replace(item, rdp=...)``)
        curve: NDArray[np.float64] | RdpBuilder
        if given is None:
            curve = _INF_RDP
        elif callable(given) and not isinstance(given, np.ndarray):
            curve = given
        else:
            curve = _frozen_curve(given)
        set_ = object.__setattr__  # the frozen dataclass's own way of setting its fields
        set_(self, "label", label)
        set_(self, "event", event)
        set_(self, "key", key or json.dumps(event, sort_keys=True))
        set_(self, "epsilon", epsilon)
        set_(self, "approx", approx)
        set_(self, "rho", rho)
        set_(self, "mu", mu)
        set_(self, "rdp_curve", curve)
        set_(self, "law", law)
        set_(self, "headline", headline)
        set_(self, "_rdp_built", Lazy())

    @property
    def rdp(self) -> NDArray[np.float64]:
        """The Rényi curve at :data:`ORDERS` (read-only; ``inf`` where none), computed on first read if lazy."""
        c = self.rdp_curve
        if isinstance(c, np.ndarray):
            return c
        return self._rdp_built.get(lambda: _frozen_curve(c()))

    @property
    def rdp_ready(self) -> bool:
        """Whether reading ``rdp`` is free (the curve is an array, or its builder has run)."""
        return isinstance(self.rdp_curve, np.ndarray) or self._rdp_built.peek() is not None


# ---- closed forms ----------------------------------------------------------------------------------
def pure_to_gdp_mu(epsilon: float) -> float:
    r"""The smallest mu with epsilon-DP => mu-GDP: mu = 2 Phi^{-1}(e^eps/(1 + e^eps)), rounded up.

    The trade-off function of epsilon-DP is f(a) = max(0, 1 - e^eps a, e^-eps (1 - a)); G_mu is
    convex, so G_mu <= f everywhere iff it holds at the kink a* = 1/(1 + e^eps), i.e. iff
    Phi(Phi^{-1}(1 - a*) - mu) <= a* (docs/theory.md §2d).

    >>> round(pure_to_gdp_mu(1.0), 6)
    1.232035
    """
    if epsilon == 0.0:
        return 0.0
    p = 1.0 / (1.0 + math.exp(-epsilon))
    return _up(2.0 * float(special.ndtri(p)) * (1.0 + 1e-14), 4)


def _pure_rdp(epsilon: float) -> NDArray[np.float64]:
    """The Rényi curve of randomized response with parameter epsilon (the worst epsilon-DP pair)."""
    a = _ORD
    # D_a = ln[(e^{a eps} + e^{(1-a) eps}) / (1 + e^eps)] / (a - 1), in log space
    num = np.logaddexp(a * epsilon, (1.0 - a) * epsilon)
    den = np.logaddexp(0.0, epsilon)
    v = (num - den) / (a - 1.0)
    v = np.minimum(np.maximum(v, 0.0), epsilon)
    out: NDArray[np.float64] = np.nextafter(v * (1.0 + 1e-13), np.inf)
    return out


def _gauss_rdp(mu: float) -> NDArray[np.float64]:
    return np.nextafter(_ORD * (mu * mu / 2.0) * (1.0 + 1e-15), np.inf)


def _rdp_from(orders: Any, eps_at: Any) -> NDArray[np.float64]:
    """A curve given at ``orders`` read at :data:`ORDERS`: the value at the next listed order above
    (RDP is non-decreasing in alpha), inf above the largest."""
    os_ = np.asarray(list(orders), dtype=np.float64)
    es = np.asarray([float(eps_at(a)) for a in os_], dtype=np.float64)
    order = np.argsort(os_)
    os_, es = os_[order], es[order]
    # suffix minimum: the best value at any listed order >= alpha
    suf = np.minimum.accumulate(es[::-1])[::-1]
    idx = np.searchsorted(os_, _ORD, side="left")
    out = np.full(len(ORDERS), math.inf)
    ok = idx < os_.size
    out[ok] = suf[idx[ok]]
    return out


# ---- building items ----------------------------------------------------------------------------------
def _item_pure(eps: float, event: dict[str, Any], label: str, law: tuple[Any, ...] | None = None) -> PrivacyItem:
    e = float(eps)
    rho = _up(e * math.tanh(e / 2.0)) if e > 0 else 0.0
    return PrivacyItem(label=label, event=event, epsilon=e, approx=(e, 0.0), rho=rho, mu=pure_to_gdp_mu(e),
                       rdp=_pure_rdp(e), law=law if law is not None else ("pure", e), headline=PureDP(e))


def _item_gaussian(mu: float, event: dict[str, Any], label: str, headline: Any = None) -> PrivacyItem:
    m = float(mu)
    return PrivacyItem(label=label, event=event, rho=_up(m * m / 2.0), mu=m, rdp=_gauss_rdp(m),
                       law=("gaussian", m), headline=headline if headline is not None else GaussianDP(m))


def _from_guarantee(g: Any, label: str | None) -> PrivacyItem:
    if isinstance(g, WassersteinDP):
        raise UnsupportedError(
            "WassersteinDP bounds a transport distance, which the noise scale of an additive mechanism "
            "does not change; it implies no (epsilon, delta) guarantee and cannot be spent from a DP budget. "
            "Spend the mechanism itself, or its PureDP, ZCDP or GaussianDP guarantee."
        )
    if isinstance(g, PureDP):
        return _item_pure(float(g.epsilon), {"type": "PureDP", "epsilon": repr(float(g.epsilon))}, label or str(g))
    if isinstance(g, ApproxDP):
        e, d = float(g.epsilon), float(g.delta)
        if d == 0.0:
            return _item_pure(e, {"type": "PureDP", "epsilon": repr(e)}, label or str(g))
        return PrivacyItem(label=label or str(g), event={"type": "ApproxDP", "epsilon": repr(e), "delta": repr(d)},
                           approx=(e, d), headline=g)
    if isinstance(g, ZCDP):
        r = float(g.rho)
        return PrivacyItem(label=label or str(g), event={"type": "ZCDP", "rho": repr(r)}, rho=r,
                           rdp=np.nextafter(_ORD * r, np.inf), headline=g)
    if isinstance(g, GaussianDP):
        m = float(g.mu)
        return _item_gaussian(m, {"type": "GaussianDP", "mu": repr(m)}, label or str(g), headline=g)
    if isinstance(g, RenyiDP):
        if g.orders is None:
            raise UnsupportedError("a RenyiDP given by a callable curve cannot be accounted; give it at finitely "
                                   "many orders (RenyiDP(orders=..., epsilons=...)).")
        orders = [float(a) for a in g.orders]
        eps = [float(g.epsilon(a)) for a in orders]
        return PrivacyItem(label=label or "RenyiDP", event={"type": "RenyiDP", "orders": [repr(a) for a in orders],
                                                           "epsilons": [repr(e) for e in eps]},
                           rdp=_rdp_from(orders, dict(zip(orders, eps)).__getitem__), headline=g)
    raise ArgumentTypeError(
        f"cannot spend a {type(g).__name__}; spend a guarantee (PureDP, ApproxDP, ZCDP, GaussianDP, "
        "RenyiDP), a dpkit mechanism, a DPSGDStep or a GaussianEvent/LaplaceEvent.")


@functools.lru_cache(maxsize=1024)
def _dpsgd_rdp(sigma: float, q: float) -> NDArray[np.float64]:
    """One Poisson-subsampled Gaussian step's RDP curve at :data:`ORDERS` themselves (Mironov, Talwar, Zhang
    2019, arXiv 1908.10530, sec. 3.3, through :func:`~dpkit.accounting.sampled_gaussian.sampled_gaussian_rdp`),
    read by :func:`_rdp_from` (suffix minimum: never above the value at the order itself).  Only the orders
    the core keeps are evaluated (26, not the 354 of ``DPSGDStep.rdp``'s fractional grid, which the item
    then read at these orders anyway: ten times slower per item), and cached per (sigma, q)."""
    from dpkit.accounting.sampled_gaussian import sampled_gaussian_rdp

    one = sampled_gaussian_rdp(sigma=sigma, sampling_rate=q, orders=ORDERS)
    out = _rdp_from(one.orders, one.epsilon)
    out.flags.writeable = False
    return out


def _dpsgd_steps_rdp(sigma: float, q: float, steps: int) -> NDArray[np.float64]:
    """``steps`` DP-SGD steps' curve: one step's (:func:`_dpsgd_rdp`) times steps, raised by 1e-15 relative
    (covers the product's rounding)."""
    out: NDArray[np.float64] = _dpsgd_rdp(sigma, q) * (steps * (1 + 1e-15))
    return out


def _from_dpsgd(step: Any, label: str | None) -> PrivacyItem:
    from dpkit.accounting.dpsgd import DPSGDStep

    assert isinstance(step, DPSGDStep)
    event = {"type": "DPSGDStep", "sigma": repr(float(step.sigma)), "sampling_rate": repr(float(step.sampling_rate)),
             "steps": int(step.steps), "sampling": step.sampling, "neighboring": step.neighboring}
    shift = 2.0 if step.neighboring == "substitute" else 1.0
    mu = shift / float(step.sigma)
    q = float(step.sampling_rate)
    if q == 1.0:
        one = _item_gaussian(mu * math.sqrt(step.steps), event, label or step.name)
        return PrivacyItem(label=one.label, event=event, rho=one.rho, mu=one.mu, rdp=one.rdp,
                           law=("gaussian", one.mu), headline=GaussianDP(one.mu))
    rdp: NDArray[np.float64] | RdpBuilder = _INF_RDP
    if (step.sampling, step.neighboring) == ("poisson", "add_remove"):  # computed on first use
        rdp = functools.partial(_dpsgd_steps_rdp, float(step.sigma), q, int(step.steps))
    kind = "symmetric" if step.neighboring == "substitute" else "subsampled"
    return PrivacyItem(label=label or step.name, event=event, rdp=rdp,
                       law=(kind, mu, q, int(step.steps)), headline=None)


def _event_of(x: GaussianEvent | LaplaceEvent) -> dict[str, Any]:
    if isinstance(x, GaussianEvent):
        return {"type": "GaussianEvent", "sigma": repr(float(x.sigma)), "sensitivity": repr(float(x.sensitivity))}
    return {"type": "LaplaceEvent", "scale": repr(float(x.scale)), "sensitivity": repr(float(x.sensitivity))}


def subsampled_laplace_epsilon(t: float, q: float) -> float:
    r"""Pure epsilon of a subsampled Laplace shift by t (its base is t-DP): ln(1 + q (e^t - 1)), rounded up.

    The loss of every pair :mod:`dpkit.accounting.subsampling` composes is ln(1 - q + q e^l) (removal) or its
    negative at base losses l in [-t, t] (addition), and the symmetric completion's losses lie in
    [-ln(1 - q + q e^t), ln(1 - q + q e^t)]; -ln(1 - q + q e^{-t}) <= ln(1 - q + q e^t) since
    (1 - q + q e^t)(1 - q + q e^{-t}) >= 1.  So the largest absolute loss is ln(1 + q (e^t - 1)): the
    amplification of pure DP by subsampling (Balle, Barthe, Gaboardi 2018, arXiv 1807.01647, Thm 8
    (Poisson) and Thm 9 (without replacement, substitution)).  log1p and expm1 err by an ulp or so each; a
    relative margin of 1e-14 covers them.

    >>> round(subsampled_laplace_epsilon(1.0, 0.01), 9)
    0.017036863
    """
    if q >= 1.0:
        return t
    return _up(math.log1p(q * math.expm1(t)) * (1.0 + 1e-14))


def _from_subsampled(x: SubsampledEvent, label: str | None) -> PrivacyItem:
    """One use of a subsampled Gaussian or Laplace noise addition: its loss law for the PLD (the kinds
    :mod:`dpkit.accounting._state_pld` composes with the pairs of :mod:`dpkit.accounting.subsampling`), its
    Rényi curve (Poisson add/remove Gaussian: Mironov, Talwar, Zhang 2019) and, for Laplace, its amplified
    pure epsilon and everything :func:`_item_pure` derives from it.  A Gaussian at q = 1 is the Gaussian
    shift itself (closed form); a Laplace at q = 1 keeps its subsampled law (the pair at q = 1 is the base
    pair, on the grid :mod:`dpkit.accounting.subsampling` chooses)."""
    event = {"type": "SubsampledEvent", "noise": _event_of(x.noise), "sampling_rate": repr(float(x.sampling_rate)),
             "sampling": x.sampling, "neighboring": x.neighboring}
    name = label or x.name
    q = float(x.sampling_rate)
    add_remove = (x.sampling, x.neighboring) == ("poisson", "add_remove")
    if isinstance(x.noise, GaussianEvent):
        sigma = float(x.noise.sigma)
        mu = _up(x.shift / sigma)
        if q == 1.0:
            return _item_gaussian(mu, event, name)
        rdp: NDArray[np.float64] | RdpBuilder = _INF_RDP
        if add_remove:  # the noise multiplier sigma / sensitivity, rounded down (less noise: more loss)
            c = float(x.noise.sensitivity)
            z = sigma if c == 1.0 else math.nextafter(sigma / c, 0.0)
            rdp = functools.partial(_dpsgd_rdp, z, q)  # computed on first use
        kind = "subsampled" if add_remove else "symmetric"
        return PrivacyItem(label=name, event=event, rdp=rdp, law=(kind, mu, q, 1), headline=None)
    t = _up(x.shift / float(x.noise.scale))
    kind = "subsampled_laplace" if add_remove else "symmetric_laplace"
    return _item_pure(subsampled_laplace_epsilon(t, q), event, name, law=(kind, t, q, 1))


def _from_mechanism(m: Any, label: str | None) -> PrivacyItem:
    """A dpkit mechanism: its pure epsilon, zCDP, Rényi curve and exact loss law, all from its pair."""
    name = label or getattr(m, "name", None) or type(m).__name__
    from dpkit.mechanisms import Laplace as LaplaceMechanism

    eps = math.inf
    try:
        eps = float(m.pure_dp().epsilon)
    except (UnsupportedError, AttributeError):
        pass
    rho = math.inf
    try:
        rho = float(m.zcdp().rho)
    except (UnsupportedError, AttributeError):
        pass
    if math.isfinite(eps):
        rho = min(rho, _up(eps * math.tanh(eps / 2.0)))
    rdp = _INF_RDP
    if math.isfinite(rho):
        rdp = np.nextafter(_ORD * rho, np.inf)
    if math.isfinite(eps):
        rdp = np.minimum(rdp, _pure_rdp(eps))
    law: tuple[Any, ...] | None = None
    event: dict[str, Any]
    try:
        pair = m.pair
        law = ("pair", pair)
        event = {"type": "Mechanism", "class": type(m).__name__, "repr": repr(m)}
    except UnsupportedError:
        event = {"type": "Mechanism", "class": type(m).__name__, "repr": repr(m)}
    if isinstance(m, LaplaceMechanism) and m.dimension > 1:
        law = None  # the vector's pure epsilon is exact; its PLD is bounded by the epsilon-DP one below
    if law is None and math.isfinite(eps):
        law = ("pure", eps)
    headline: Any = PureDP(eps) if math.isfinite(eps) else (ZCDP(rho) if math.isfinite(rho) else None)
    if headline is None:
        try:
            headline = m.guarantee
        except (UnsupportedError, AttributeError):  # pragma: no cover - every dpkit mechanism states one
            headline = None
    return PrivacyItem(label=str(name), event=event, epsilon=eps, approx=(eps, 0.0) if math.isfinite(eps) else None,
                       rho=rho, mu=pure_to_gdp_mu(eps) if math.isfinite(eps) else math.inf, rdp=rdp, law=law,
                       headline=headline)


def as_item(x: object, *, label: str | None = None) -> PrivacyItem:
    """The :class:`PrivacyItem` of one use of ``x`` (see the module docstring for what ``x`` may be).

    Raises
    ------
    UnsupportedError
        For ``WassersteinDP`` or a ``RenyiDP`` given by a callable curve (the message says what to give).
    ArgumentTypeError
        For anything else that is not spendable.

    >>> as_item(PureDP(1.0)).rho < 0.5
    True
    """
    if isinstance(x, PrivacyItem):
        return x
    if isinstance(x, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP, WassersteinDP)):
        return _from_guarantee(x, label)
    if isinstance(x, GaussianEvent):
        mu = _up(float(x.sensitivity) / float(x.sigma))
        return _item_gaussian(mu, {"type": "GaussianEvent", "sigma": repr(float(x.sigma)),
                                   "sensitivity": repr(float(x.sensitivity))}, label or x.name)
    if isinstance(x, LaplaceEvent):
        t = _up(float(x.sensitivity) / float(x.scale))
        return _item_pure(t, {"type": "LaplaceEvent", "scale": repr(float(x.scale)),
                              "sensitivity": repr(float(x.sensitivity))}, label or x.name, law=("laplace", t))
    if isinstance(x, SubsampledEvent):
        return _from_subsampled(x, label)
    from dpkit.accounting.dpsgd import DPSGDStep

    if isinstance(x, DPSGDStep):
        return _from_dpsgd(x, label)
    if hasattr(x, "pair") and hasattr(x, "release"):
        return _from_mechanism(x, label)
    return _from_guarantee(x, label)  # raises the TypeError


def item_to_json(item: PrivacyItem) -> str:
    """The item as canonical JSON: its event and every number (``repr`` floats, so they read back exactly)."""
    def num(x: float) -> str:
        return repr(float(x))

    return json.dumps({"event": item.event, "epsilon": num(item.epsilon),
                       "approx": None if item.approx is None else [num(item.approx[0]), num(item.approx[1])],
                       "rho": num(item.rho), "mu": num(item.mu), "rdp": [num(v) for v in item.rdp]},
                      sort_keys=True)


def item_from_json(text: str, label: str) -> PrivacyItem:
    """Rebuild an item written by :func:`item_to_json`, number for number (ValueError/KeyError/TypeError if
    unreadable).  Events of the types :func:`as_item` builds from a description are rebuilt from it (so
    their loss law comes back too); a mechanism's item keeps its numbers and no loss law.

    A curve of 26 values was written at :data:`ORDERS_V1`: a rebuilt event's curve is recomputed at
    :data:`ORDERS`; a mechanism's is read at each order of :data:`ORDERS` from the next order of
    :data:`ORDERS_V1` above it (RDP is non-decreasing in the order, van Erven & Harremoës 2014, Thm 3, so
    that value is an upper bound), ``inf`` above 256."""
    d = json.loads(text)
    if not isinstance(d, dict):
        raise InvalidArgumentError("an item record must be a JSON object")
    event = d["event"]
    if not isinstance(event, dict):
        raise InvalidArgumentError("an item's event must be a JSON object")
    f = float
    rdp = np.array([f(v) for v in d["rdp"]], dtype=np.float64)
    if rdp.shape not in ((len(ORDERS),), (len(ORDERS_V1),)) or np.any(np.isnan(rdp)) or np.any(rdp < 0):
        raise InvalidArgumentError("an item's Renyi curve must hold one value >= 0 per order of ORDERS")
    legacy = rdp.shape != (len(ORDERS),)
    approx = None if d["approx"] is None else (f(d["approx"][0]), f(d["approx"][1]))
    nums = [f(d["epsilon"]), f(d["rho"]), f(d["mu"])]
    if any(math.isnan(v) or v < 0 for v in nums) or (
            approx is not None and not (approx[0] >= 0 and 0 <= approx[1] <= 1)):
        raise InvalidArgumentError("an item's costs must be numbers >= 0")
    law = None
    t = event.get("type")
    rebuilt = None
    if t in ("PureDP", "ApproxDP", "ZCDP", "GaussianDP", "RenyiDP", "GaussianEvent", "LaplaceEvent", "DPSGDStep",
             "SubsampledEvent"):
        rebuilt = _from_event(event, label)
        law = rebuilt.law
    if legacy:  # a curve at ORDERS_V1: recomputed where the event is rebuilt, else read at the next order above
        stored = dict(zip(ORDERS_V1, rdp.tolist()))
        rdp = rebuilt.rdp if rebuilt is not None else _rdp_from(ORDERS_V1, stored.__getitem__)  # the item copies it
    return PrivacyItem(label=label, event=event, epsilon=nums[0], approx=approx, rho=nums[1], mu=nums[2], rdp=rdp,
                       law=law, headline=rebuilt.headline if rebuilt is not None else None)


def _from_event(event: dict[str, Any], label: str) -> PrivacyItem:
    t = event.get("type")
    f = float
    if t == "PureDP":
        return as_item(PureDP(f(event["epsilon"])), label=label)
    if t == "ApproxDP":
        return as_item(ApproxDP(epsilon=f(event["epsilon"]), delta=f(event["delta"])), label=label)
    if t == "ZCDP":
        return as_item(ZCDP(f(event["rho"])), label=label)
    if t == "GaussianDP":
        return as_item(GaussianDP(f(event["mu"])), label=label)
    if t == "RenyiDP":
        return as_item(RenyiDP(orders=[f(a) for a in event["orders"]], epsilons=[f(e) for e in event["epsilons"]]),
                       label=label)
    if t == "GaussianEvent":
        return as_item(GaussianEvent(sigma=f(event["sigma"]), sensitivity=f(event["sensitivity"])), label=label)
    if t == "LaplaceEvent":
        return as_item(LaplaceEvent(scale=f(event["scale"]), sensitivity=f(event["sensitivity"])), label=label)
    if t == "SubsampledEvent":
        noise = event["noise"]
        base: GaussianEvent | LaplaceEvent = (
            GaussianEvent(sigma=f(noise["sigma"]), sensitivity=f(noise["sensitivity"]))
            if noise["type"] == "GaussianEvent"
            else LaplaceEvent(scale=f(noise["scale"]), sensitivity=f(noise["sensitivity"])))
        return as_item(SubsampledEvent(noise=base, sampling_rate=f(event["sampling_rate"]),
                                       sampling=str(event["sampling"]), neighboring=str(event["neighboring"])),
                       label=label)
    from dpkit.accounting.dpsgd import DPSGDStep

    return as_item(DPSGDStep(sigma=f(event["sigma"]), sampling_rate=f(event["sampling_rate"]),
                             steps=int(event["steps"]), sampling=event["sampling"],
                             neighboring=event["neighboring"]), label=label)


def _sum_up(a: float, b: float) -> float:
    """a + b rounded up; exact (no rounding) when either is 0, so that a sum of zero deltas stays 0."""
    return a + b if a == 0.0 or b == 0.0 else _up(a + b)


def _times_up(k: float, v: float) -> float:
    """k * v rounded up; exact when k is 1 or either factor is 0."""
    return k * v if k == 1.0 or k == 0.0 or v == 0.0 else _up(k * v)


def combine(parts: Sequence[tuple[PrivacyItem, int]], *, label: str, event: dict[str, Any] | None = None,
            headline: Any = None) -> PrivacyItem:
    """One item for a fixed (non-adaptive) batch: ``count`` uses of each part, run together as one spend.

    Each family's cost is the composition of the parts' costs in that family, rounded up: pure epsilon
    and ``approx`` add (basic composition, Dwork & Roth 2014, Thm 3.16), rho adds (Bun & Steinke 2016,
    arXiv 1605.02065, Lemma 2.3), mu^2 adds (Dong, Roth, Su 2022, arXiv 1905.02383, Cor 3.3), the Rényi
    curve adds order by order (Mironov 2017, arXiv 1702.07476, Prop 1).  A family in which some part has
    no bound is unbounded for the batch (``inf`` / ``None``).  The batch has no single loss law
    (``law=None``): it is charged through the filters, never through a PLD.  A filter charging the batch
    charges exactly what charging the parts one after another would (each filter's rule is a sum), so a
    query's mechanisms may be spent as one ledger row.

    >>> from dpkit.guarantees import PureDP, ZCDP
    >>> b = combine([(as_item(PureDP(0.5)), 2), (as_item(ZCDP(0.1)), 1)], label="query")
    >>> b.epsilon, b.approx, round(b.rho, 6)
    (inf, None, 0.344919)
    """
    if not parts:
        raise InvalidArgumentError("a batch needs at least one part.")
    eps, rho, mu2 = 0.0, 0.0, 0.0
    approx: tuple[float, float] | None = (0.0, 0.0)
    rdp = np.zeros(len(ORDERS))
    for item, count in parts:
        if not isinstance(item, PrivacyItem):
            item = as_item(item)
        k = float(check_count("count", count))
        eps = _sum_up(eps, _times_up(k, item.epsilon)) if math.isfinite(item.epsilon) else math.inf
        rho = _sum_up(rho, _times_up(k, item.rho)) if math.isfinite(item.rho) else math.inf
        mu2 = (_sum_up(mu2, _times_up(k, _times_up(item.mu, item.mu))) if math.isfinite(item.mu)
               else math.inf)
        if approx is not None and item.approx is not None:
            approx = (_sum_up(approx[0], _times_up(k, item.approx[0])),
                      _sum_up(approx[1], _times_up(k, item.approx[1])))
        else:
            approx = None
        s = rdp + k * item.rdp
        rdp = np.where(s != 0.0, np.nextafter(s, np.inf), s)
    if approx is not None and approx[1] >= 1.0:
        approx = None  # a delta of 1 or more states nothing
    ev = dict(event) if event is not None else {}
    ev.setdefault("type", "Composite")
    ev.setdefault("parts", [[p.event if isinstance(p, PrivacyItem) else str(p), int(c)] for p, c in parts])
    return PrivacyItem(label=label, event=ev, epsilon=eps, approx=approx, rho=rho,
                       mu=_up(math.sqrt(mu2)) if math.isfinite(mu2) else math.inf, rdp=rdp, law=None, headline=headline)
