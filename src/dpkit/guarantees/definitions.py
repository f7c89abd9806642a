r"""Privacy definitions as immutable, validated values.

Contract: every class here is a frozen, slotted dataclass (keyword-only where it has more than one
field; the one-number guarantees also accept ``PureDP(1.0)``), validated once in
``__post_init__`` (``ValueError`` naming parameter, constraint and value; ``TypeError`` for
non-numbers) and never mutated. A value states a guarantee about *every* pair of neighbouring
output distributions of a mechanism; it does no accounting (composition lives in
:mod:`dpkit.accounting`) and knows nothing of mechanisms. Conversions between definitions are
named functions in :mod:`dpkit.guarantees.conversions`, each citing its theorem.

The table in :mod:`dpkit.guarantees` lists each class with the statement it makes.
``WassersteinDP`` is deliberately inert: no conversion accepts it (see its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit._math import Estimate, check_delta, check_epsilon, check_finite, check_positive
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import _numerics

__all__ = [
    "ApproxDP",
    "GaussianDP",
    "PrivacyProfile",
    "PureDP",
    "RenyiDP",
    "WassersteinDP",
    "ZCDP",
]

ProfileKind = Literal["exact", "upper"]


def _keep(value: object, checked: float) -> float:
    """Keep an :class:`Estimate` as given (it carries its kind), else store the plain float."""
    return value if isinstance(value, Estimate) else checked


def _fmt(x: float) -> str:
    """``x`` for reading: its shortest repr, or the nearest 12-significant-digit decimal when the repr is
    longer, so that ``2.1999999999999997`` prints as ``2.2``.

    The printed text is for people only: the attributes and ``repr`` keep the exact number, and nothing in
    dpkit decides from printed text.  Nearest rounding, not upward, because a printed guarantee is read both as
    a cost (where up is the safe side) and as a remaining budget (where down is).

    >>> _fmt(2.1999999999999997), _fmt(9.800000000000001e-06), _fmt(999.4899999999999), _fmt(1.0), _fmt(1/3)
    ('2.2', '9.8e-06', '999.49', '1.0', '0.333333333333')
    """
    f = float(x)
    text = repr(f)
    if not math.isfinite(f) or len(text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")) <= 12:
        return text
    short = f"{f:.12g}"
    return short if any(c in short for c in ".e") else short + ".0"


@dataclass(frozen=True, slots=True)  # one parameter: positional is unambiguous
class PureDP:
    r"""Pure :math:`\varepsilon`-differential privacy.

    Parameters
    ----------
    epsilon : float, finite, >= 0
        Bound on the max divergence :math:`D_\infty(P\|Q)` of every neighbouring pair.

    Raises
    ------
    ValueError
        If ``epsilon`` is NaN, infinite or negative.

    References
    ----------
    Dwork & Roth 2014, *The Algorithmic Foundations of DP*, Def 2.4 (seed 000, Remark 3.1).

    Examples
    --------
    >>> print(PureDP(epsilon=1.0))
    1.0-DP
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _keep(self.epsilon, check_epsilon(self.epsilon)))

    def __str__(self) -> str:
        return f"{_fmt(self.epsilon)}-DP"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproxDP:
    r"""Approximate :math:`(\varepsilon, \delta)`-differential privacy.

    Parameters
    ----------
    epsilon : float, finite, >= 0
    delta : float, in [0, 1]
        Bound on the hockey-stick divergence :math:`E_{e^\varepsilon}(P\|Q)`.

    Raises
    ------
    ValueError
        If ``epsilon`` is NaN, infinite or negative, or ``delta`` is outside [0, 1] or NaN.

    Notes
    -----
    Conversions return an ``ApproxDP`` whose ``epsilon`` is an :class:`~dpkit._math.Estimate`
    of kind ``"upper"`` (or ``"exact"``) naming the method used.

    References
    ----------
    Dwork & Roth 2014, Def 2.4; seed 000, Remark 3.1 (δ-approximate max divergence).

    Examples
    --------
    >>> print(ApproxDP(epsilon=1.0, delta=1e-6))
    (1.0, 1e-06)-DP
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _keep(self.epsilon, check_epsilon(self.epsilon)))
        object.__setattr__(self, "delta", _keep(self.delta, check_delta(self.delta)))

    def __str__(self) -> str:
        return f"({_fmt(self.epsilon)}, {_fmt(self.delta)})-DP"


@dataclass(frozen=True, slots=True)  # one parameter: positional is unambiguous
class ZCDP:
    r"""Zero-concentrated differential privacy: :math:`D_\alpha(P\|Q) \le \alpha\rho` for all α > 1.

    Parameters
    ----------
    rho : float, finite, >= 0

    Raises
    ------
    ValueError
        If ``rho`` is NaN, infinite or negative.

    References
    ----------
    Bun & Steinke 2016, arXiv 1605.02065, Def 1.1.

    Examples
    --------
    >>> print(ZCDP(rho=0.5))
    0.5-zCDP
    """

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _keep(self.rho, check_epsilon(self.rho, "rho")))

    def __str__(self) -> str:
        return f"{_fmt(self.rho)}-zCDP"


@dataclass(frozen=True, slots=True)  # one parameter: positional is unambiguous
class GaussianDP:
    r""":math:`\mu`-Gaussian differential privacy.

    Every neighbouring pair is at least as hard to distinguish as :math:`N(0,1)` from
    :math:`N(\mu,1)`; equivalently its privacy profile is at most
    :math:`\Phi(-\varepsilon/\mu + \mu/2) - e^\varepsilon\Phi(-\varepsilon/\mu - \mu/2)`.

    Parameters
    ----------
    mu : float, finite, > 0

    Raises
    ------
    ValueError
        If ``mu`` is NaN, infinite or <= 0 (0-GDP would be perfect privacy; use ``PureDP(0)``).

    References
    ----------
    Dong, Roth & Su 2019, arXiv 1905.02383, Def 2.6 and Cor 2.13.

    Examples
    --------
    >>> print(GaussianDP(mu=1.2))
    1.2-GDP
    """

    mu: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _keep(self.mu, check_positive("mu", self.mu)))

    def __str__(self) -> str:
        return f"{_fmt(self.mu)}-GDP"


@dataclass(frozen=True, slots=True, kw_only=True)
class WassersteinDP:
    r"""(p, ε)-Wasserstein "DP": :math:`W_p(P, Q) \le \varepsilon` for every neighbouring pair.

    A bound on a transport *distance*, kept so that it can be stated and printed, but **not
    convertible** to any DP guarantee: every conversion raises
    :class:`~dpkit.errors.UnsupportedError`. The noise scale of an additive mechanism leaves
    :math:`W_p` unchanged (a location shift by Δ has :math:`W_p = \Delta` for every noise law and
    every p), and a deterministic release with sensitivity η has :math:`W_p = \eta \to 0` while
    :math:`\delta(\varepsilon) = 1` for every ε; so no function of a WDP bound implies
    :math:`(\varepsilon,\delta)`-DP. See ``docs/theory.md`` (docs/notes.md §6).

    Parameters
    ----------
    p : float, finite, >= 1
        Order of the Wasserstein distance.
    epsilon : float, finite, >= 0
        Bound on :math:`W_p`, in the units of the output space.

    Raises
    ------
    ValueError
        If ``p`` is NaN, infinite or < 1, or ``epsilon`` is NaN, infinite or negative.

    References
    ----------
    Yang, Qi & Zhou 2024, "Wasserstein Differential Privacy", AAAI, arXiv 2401.12436 (definition);
    Villani 2009, *Optimal Transport*, Def 6.1 and Thm 6.15.

    Examples
    --------
    >>> print(WassersteinDP(p=2.0, epsilon=0.5))
    (2.0, 0.5)-WDP
    """

    p: float
    epsilon: float

    def __post_init__(self) -> None:
        try:
            p = check_finite("p", self.p)  # TypeError for a non-number
        except ValueError:
            p = math.nan
        if not (p >= 1.0):
            raise InvalidArgumentError(f"p must be finite and >= 1 (the Wasserstein order); got {self.p}.")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    def __str__(self) -> str:
        return f"({_fmt(self.p)}, {_fmt(self.epsilon)})-WDP"


# --------------------------------------------------------------------------------------------


def _as_epsilon_array(epsilon: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(epsilon, dtype=np.float64)
    bad = ~(np.isfinite(arr) & (arr >= 0.0))
    if np.any(bad):
        raise InvalidArgumentError(f"epsilon must be finite and >= 0; got {arr[bad].flat[0]}.")
    return arr


def _call_vectorised(fn: Callable[..., object], x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Call ``fn`` on the whole array; fall back to one call per element if it does not vectorise.

    A single element is passed as a Python float (so scalar-only callables such as
    ``lambda a: math.log(a)`` never see a one-element array)."""
    if x.size == 1:
        with np.errstate(over="ignore", under="ignore"):
            value = float(fn(float(x.flat[0])))  # type: ignore[arg-type]  # fn returns object: float() raises TypeError on a non-number
        return np.asarray(value, dtype=np.float64).reshape(x.shape)
    try:
        with np.errstate(over="ignore", under="ignore"):
            out = np.asarray(fn(x), dtype=np.float64)
        if out.shape == x.shape:
            return out
    except (TypeError, ValueError):
        pass
    with np.errstate(over="ignore", under="ignore"):
        values = [float(fn(float(v))) for v in x.flat]  # type: ignore[arg-type]  # fn returns object: float() raises TypeError on a non-number
        return np.array(values, dtype=np.float64).reshape(x.shape)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyProfile:
    r"""A privacy profile :math:`\varepsilon \mapsto \delta(\varepsilon)`, with its inverse.

    The statement: :math:`E_{e^\varepsilon}(P\|Q) \le \delta(\varepsilon)` for every ε >= 0 and
    every neighbouring pair. Profiles are defined on ε >= 0 only (negative ε is refused: the
    profiles built here are not specified there, and (ε, δ)-DP with ε < 0 is never needed).

    Parameters
    ----------
    delta_function : callable, float -> float in [0, 1], non-increasing
        Vectorised over NumPy arrays where possible (otherwise called once per element).
    epsilon_function : callable, float -> float, optional
        The exact inverse: the smallest ε >= 0 with δ(ε) <= delta, ``inf`` if none. Without it
        :meth:`epsilon` bisects ``delta_function`` and returns the upper end of the bracket.
    kind : {"exact", "upper"}
        ``"exact"`` if ``delta_function`` is the tight profile of the guarantee it came from,
        ``"upper"`` if it is only an upper bound on it (e.g. from Rényi DP).
    description : str
        Printed by ``str``.

    Raises
    ------
    TypeError
        If ``delta_function`` (or a given ``epsilon_function``) is not callable.

    References
    ----------
    Balle, Barthe & Gaboardi 2018, "Privacy amplification by subsampling", arXiv 1807.01647,
    Sec 2 (privacy profiles); Dong, Roth & Su 2019, arXiv 1905.02383, Prop 2.12.

    Examples
    --------
    >>> profile = PrivacyProfile(delta_function=lambda e: np.exp(-e), description="e^-eps")
    >>> round(profile.epsilon(0.5), 6), float(profile.delta(0.0))
    (0.693147, 1.0)
    """

    delta_function: Callable[..., object]
    epsilon_function: Callable[[float], float] | None = None
    kind: ProfileKind = "upper"
    description: str = field(default="user profile")

    def __post_init__(self) -> None:
        if not callable(self.delta_function):
            raise ArgumentTypeError(f"delta_function must be callable; got {type(self.delta_function).__name__}.")
        if self.epsilon_function is not None and not callable(self.epsilon_function):
            raise ArgumentTypeError(
                f"epsilon_function must be callable or None; got {type(self.epsilon_function).__name__}."
            )
        if self.kind not in ("exact", "upper"):
            raise InvalidArgumentError(f"kind must be 'exact' or 'upper'; got {self.kind!r}.")

    def __str__(self) -> str:
        return f"privacy profile ({self.description})"

    def _delta_array(self, eps: NDArray[np.float64]) -> NDArray[np.float64]:
        out = _call_vectorised(self.delta_function, eps)
        bad = ~((out >= 0.0) & (out <= 1.0))
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(
                f"delta_function returned {out.flat[i]} at epsilon={eps.flat[i]}; a privacy profile "
                "must take values in [0, 1]."
            )
        return out

    @overload
    def delta(self, epsilon: float) -> Estimate: ...

    @overload
    def delta(self, epsilon: ArrayLike) -> Estimate | NDArray[np.float64]: ...

    def delta(self, epsilon: ArrayLike) -> Estimate | NDArray[np.float64]:
        r"""Return :math:`\delta(\varepsilon)`.

        Parameters
        ----------
        epsilon : float or array of floats, finite, >= 0

        Returns
        -------
        Estimate or ndarray
            For a scalar, an :class:`~dpkit._math.Estimate`: the label the profile's function gives
            it (dpkit's profiles return ``"exact"`` values evaluated at 160 bits, within two ulps
            above the exact δ), or this profile's ``kind`` for a plain float (taken at its word);
            an ``"upper"`` profile's values are never labelled more than ``"upper"``. For an array,
            an array of the same shape (dpkit's profiles: upper bounds).

        Raises
        ------
        ValueError
            If any epsilon is NaN, infinite or negative, or the profile returns a value outside [0, 1].

        Examples
        --------
        >>> PrivacyProfile(delta_function=lambda e: np.exp(-e)).delta([0.0, 1.0]).round(4)
        array([1.    , 0.3679])
        """
        eps = _as_epsilon_array(epsilon)
        if eps.ndim == 0:
            return self._delta_scalar(float(eps))
        return self._delta_array(eps)

    def _delta_scalar(self, eps: float) -> Estimate:
        """One value, labelled: an Estimate from a dpkit profile keeps its own label (an "upper"
        profile's values are at most "upper"); a plain float is labelled with the profile's kind."""
        with np.errstate(over="ignore", under="ignore"):
            raw = self.delta_function(eps)
        try:
            value = float(raw)  # type: ignore[arg-type]  # raw is any object: the except below takes what float() refuses
        except (TypeError, ValueError):  # a one-element array or another number type
            value = float(np.asarray(raw, dtype=np.float64).reshape(-1)[0])
        if not (0.0 <= value <= 1.0):
            raise InvalidArgumentError(
                f"delta_function returned {value} at epsilon={eps}; a privacy profile must take values in [0, 1]."
            )
        if isinstance(raw, Estimate):
            if self.kind == "exact" or raw.kind in ("numerical", "lower"):
                return raw
            return Estimate(value, kind="upper", error=raw.error, method=raw.method or self.description)
        return Estimate(value, kind=self.kind, method=self.description)

    def epsilon(self, delta: float) -> Estimate:
        r"""Return the smallest ε >= 0 with δ(ε) <= ``delta`` (never understated).

        Parameters
        ----------
        delta : float, in [0, 1]

        Returns
        -------
        Estimate
            Kind ``"upper"`` (or what an exact inverse reports, e.g. ``"exact"`` for a closed
            form); after bisection ``error`` is the width of the final bracket. ``inf`` means no
            finite ε (e.g. ``delta`` below the profile's floor).

        Raises
        ------
        ValueError
            If ``delta`` is NaN or outside [0, 1], or a given ``epsilon_function`` returns NaN or
            a negative number.
        UnsupportedError
            If ``delta == 0`` and the profile has no exact inverse: floating-point profiles
            underflow to 0 before the true δ(ε) reaches 0, so bisection cannot be trusted there.

        Notes
        -----
        Bisection returns the upper end of its bracket, at which δ was evaluated and found
        <= ``delta``, so the reported ε is valid whatever the bracket width.

        Examples
        --------
        >>> round(PrivacyProfile(delta_function=lambda e: np.exp(-e)).epsilon(0.1), 9)
        2.302585093
        """
        target = check_delta(delta)
        if self.epsilon_function is not None:
            value = self.epsilon_function(target)
            if not (float(value) >= 0.0):
                raise InvalidArgumentError(
                    f"epsilon_function returned {value} at delta={target}; it must return a "
                    "number >= 0 (inf for 'no finite epsilon')."
                )
            if isinstance(value, Estimate):
                return value
            return Estimate(float(value), kind="upper", method=f"inverse of {self.description}")
        if target == 0.0:
            raise UnsupportedError(
                "delta=0 cannot be reached soundly by bisecting a floating-point profile (it "
                "underflows to 0 first); pass delta > 0 or give the profile an epsilon_function."
            )
        upper, width = _numerics.invert_profile_upper(
            lambda e: float(self._delta_array(np.array(e))), target
        )
        return Estimate(upper, kind="upper", error=width, method=f"bisection of {self.description}")


# --------------------------------------------------------------------------------------------


def _orders_array(name: str, values: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidArgumentError(f"{name} must be a non-empty 1-D sequence; got shape {arr.shape}.")
    return arr


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class RenyiDP:
    r"""Rényi differential privacy: a curve :math:`\alpha \mapsto \varepsilon(\alpha)`, α > 1.

    The statement: :math:`D_\alpha(P\|Q) \le \varepsilon(\alpha)` for every neighbouring pair and
    every order α at which the curve is given. Build it either from a callable (every α > 1
    usable) or from finite ``orders`` and ``epsilons`` (only those orders are usable; conversions
    optimise over them).

    Parameters
    ----------
    curve : callable, float -> float, optional
        ε(α) for α > 1; vectorised over arrays where possible. ``inf`` means "no bound at α".
    orders : sequence of float, each finite and > 1, distinct, optional
    epsilons : sequence of float, each >= 0 (``inf`` allowed: no bound at that order), optional
    description : str, optional
        Printed by ``str`` for a callable curve.

    Raises
    ------
    ValueError
        If neither or both of ``curve`` and ``orders`` are given, lengths differ, an order is
        NaN, infinite or <= 1, repeated, or an epsilon is NaN or negative.

    References
    ----------
    Mironov 2017, "Rényi Differential Privacy", arXiv 1702.07476, Def 4.

    Examples
    --------
    >>> print(RenyiDP(orders=[2, 4], epsilons=[0.1, 0.3]))
    RDP at orders {2.0: 0.1, 4.0: 0.3}
    """

    curve: Callable[..., object] | None = None
    orders: tuple[float, ...] | None = None  # sorted; the constructor takes any 1-D sequence of numbers
    epsilons: tuple[float, ...] | None = None  # epsilons[i] is the bound at orders[i]
    description: str = "user curve"

    def __init__(
        self,
        *,
        curve: Callable[..., object] | None = None,
        orders: ArrayLike | None = None,
        epsilons: ArrayLike | None = None,
        description: str = "user curve",
    ) -> None:
        # written out (init=False) so that orders and epsilons take any 1-D sequence, while the fields
        # hold what is stored: sorted tuples of floats
        _set = object.__setattr__  # frozen: the dataclass's own __init__ sets fields the same way
        _set(self, "curve", curve)
        _set(self, "description", description)
        if curve is not None:
            if orders is not None or epsilons is not None:
                raise InvalidArgumentError("give either curve or (orders, epsilons), not both.")
            if not callable(curve):
                raise ArgumentTypeError(f"curve must be callable; got {type(curve).__name__}.")
            _set(self, "orders", None)
            _set(self, "epsilons", None)
            return
        if orders is None or epsilons is None:
            raise InvalidArgumentError("give either curve or both orders and epsilons.")
        orders = _orders_array("orders", orders)
        epsilons = _orders_array("epsilons", epsilons)
        if orders.shape != epsilons.shape:
            raise InvalidArgumentError(
                f"orders and epsilons must have the same length; got {orders.size} and {epsilons.size}."
            )
        bad = ~(np.isfinite(orders) & (orders > 1.0))
        if np.any(bad):
            raise InvalidArgumentError(
                "every order alpha must be finite and > 1 (use PureDP for alpha = inf); "
                f"got {orders[bad][0]}."
            )
        if np.unique(orders).size != orders.size:
            raise InvalidArgumentError(f"orders must be distinct; got {orders.tolist()}.")
        bad = ~(epsilons >= 0.0)
        if np.any(bad):
            raise InvalidArgumentError(f"every epsilon must be >= 0 (inf allowed); got {epsilons[bad][0]}.")
        order = np.argsort(orders)
        _set(self, "orders", tuple(float(a) for a in orders[order]))
        _set(self, "epsilons", tuple(float(e) for e in epsilons[order]))

    def __str__(self) -> str:
        if self.curve is not None:
            return f"RDP curve ({self.description})"
        pairs = [f"{_fmt(a)}: {_fmt(e)}" for a, e in zip(self._orders, self._epsilons)]
        if len(pairs) > 6:
            pairs = pairs[:3] + ["..."] + pairs[-2:]
        return "RDP at orders {" + ", ".join(pairs) + "}"

    @overload
    def epsilon(self, alpha: float) -> Estimate: ...

    @overload
    def epsilon(self, alpha: ArrayLike) -> Estimate | NDArray[np.float64]: ...

    def epsilon(self, alpha: ArrayLike) -> Estimate | NDArray[np.float64]:
        r"""Return ε(α), the bound on :math:`D_\alpha` (an upper bound by definition).

        Parameters
        ----------
        alpha : float or array, each finite and > 1 (and one of ``orders`` for a finite curve)

        Returns
        -------
        Estimate or ndarray
            ``Estimate(kind="upper")`` for a scalar; an array for an array.

        Raises
        ------
        ValueError
            If an order is NaN, infinite, <= 1 or not among ``orders``, or the curve returns NaN
            or a negative number.

        Examples
        --------
        >>> float(RenyiDP(curve=lambda a: 0.5 * a).epsilon(3.0))
        1.5
        """
        arr = np.asarray(alpha, dtype=np.float64)
        values = self._values(arr)
        if values.ndim == 0:
            return Estimate(float(values), kind="upper", method=f"RDP {self.description}")
        return values

    def _values(self, arr: NDArray[np.float64]) -> NDArray[np.float64]:
        bad = ~(np.isfinite(arr) & (arr > 1.0))
        if np.any(bad):
            raise InvalidArgumentError(f"alpha must be finite and > 1; got {arr[bad].flat[0]}.")
        if self.curve is None:
            table = dict(zip(self._orders, self._epsilons))
            missing = [a for a in arr.flat if float(a) not in table]
            if missing:
                raise InvalidArgumentError(
                    f"alpha={missing[0]} is not one of this curve's orders {list(self._orders)}."
                )
            return np.array([table[float(a)] for a in arr.flat], dtype=np.float64).reshape(arr.shape)
        out = _call_vectorised(self.curve, arr)
        bad = ~(out >= 0.0)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(
                f"the RDP curve returned {out.flat[i]} at alpha={arr.flat[i]}; Rényi divergences "
                "are >= 0 (inf allowed, NaN not)."
            )
        return out

    def _grid(self) -> NDArray[np.float64] | None:
        """The usable orders, or None for a callable curve (the optimiser picks its own grid)."""
        return None if self.orders is None else np.asarray(self._orders, dtype=np.float64)

    @property
    def _orders(self) -> tuple[float, ...]:
        return cast(tuple[float, ...], self.orders)

    @property
    def _epsilons(self) -> tuple[float, ...]:
        return cast(tuple[float, ...], self.epsilons)
