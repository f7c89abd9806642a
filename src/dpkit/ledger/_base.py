r"""The ledger seam: a two-phase (reserve, then commit or abort) record of privacy spends.

Contract
--------
A :class:`Ledger` records every release and its cost *before* the result is returned:

1. ``reserve(guarantee, count=...)`` checks, against the budget stored in the ledger and every
   spend already ``reserved`` or ``committed``, that the new spend fits, using the composition
   rules of :class:`dpkit.accounting.Accountant` in adaptive (privacy-filter) mode.  If it does
   not fit it raises :class:`~dpkit.errors.BudgetExceededError` and writes **nothing**; if it fits
   it durably writes a ``reserved`` row and returns a :class:`Reservation`.  Check and write are one
   atomic step, so two writers sharing a ledger cannot together exceed the budget.
2. The caller computes and adds noise, then calls ``commit(reservation)`` *before* returning the
   noisy value, or ``abort(reservation)`` if it failed before any noisy value existed.
3. A reservation that is never committed nor aborted (the process died) **still counts as spent**:
   the noisy value may have been seen.  Nothing drops it silently; an operator who knows no value
   left the process may abort it explicitly (see ``reserved_but_uncommitted``).

``rollup()`` summarises the ledger (:class:`Rollup`).  The record format of a guarantee is
:func:`guarantee_to_record` / :func:`guarantee_from_record`: a type name and a JSON object of
parameters whose floats are written with ``repr`` (the shortest string that reads back to the same
double), so numbers round-trip exactly; ``inf`` is written ``"inf"``.

Spends: anything :func:`dpkit.accounting.items.as_item` takes -- a guarantee (``PureDP``, ``ApproxDP``,
``ZCDP``, ``GaussianDP``, ``RenyiDP`` given at finitely many orders), a dpkit mechanism, a
``GaussianEvent``/``LaplaceEvent`` or a ``DPSGDStep``; each is recorded as its
:class:`~dpkit.accounting.items.PrivacyItem` (:func:`~dpkit.accounting.items.item_to_json`, every number
exactly), beside a readable ``(type, params)`` pair (the guarantee's own, or ``("item", event JSON)``).
``WassersteinDP`` is refused (:class:`~dpkit.errors.UnsupportedError`): it bounds a transport distance,
not privacy loss.  Budgets: ``PureDP``, ``ApproxDP``, ``ZCDP``, ``GaussianDP`` or a finite ``RenyiDP``,
as for the Accountant.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from dpkit.accounting.items import PrivacyItem
from dpkit.accounting.protocols import PrivacyLike
# LedgerError lives in the error tree; re-exported
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, LedgerError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP

__all__ = [
    "Budget",
    "Connection",
    "Cursor",
    "Guarantee",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "Reservation",
    "Rollup",
    "SpendHandle",
    "guarantee_from_record",
    "guarantee_to_record",
]

Guarantee = PureDP | ApproxDP | ZCDP | GaussianDP | RenyiDP


class Cursor(Protocol):
    """The result of :meth:`Connection.execute` as the ledger core reads it (DB-API 2.0, PEP 249)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """A store's connection as the ledger core uses it inside ``_run``: ``execute`` with positional
    parameters (``sqlite3.Connection``; ``psycopg.Connection``, untyped, is taken as is)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
Budget = PureDP | ApproxDP | ZCDP | GaussianDP | RenyiDP

STATES = ("reserved", "committed", "aborted")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """A spend written as ``reserved``: the handle passed to ``commit`` or ``abort``.

    Parameters
    ----------
    id : int
        Row id in the ledger.
    ledger_id : str
        Identity of the ledger that issued it (a random id made when the file was created).
    guarantee : PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP or None
        The spend's guarantee (None for a spend that states none, e.g. a DP-SGD step: see ``item``).
    count : int, >= 1
    label : str
    item : PrivacyItem or None
        What was recorded: the spend's costs in every family of the accounting core.
    """

    id: int
    ledger_id: str
    guarantee: Guarantee | None
    count: int
    label: str
    item: PrivacyItem | None = field(default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One row of the ledger's history (times are UTC ISO 8601 strings).

    ``guarantee`` is the spend's guarantee (None where it states none, e.g. a DP-SGD step); ``item`` is the
    :class:`~dpkit.accounting.items.PrivacyItem` recorded (for rows written before items were recorded,
    the item of the stored guarantee).
    """

    id: int
    ledger_id: str
    created_at: str
    updated_at: str
    label: str
    guarantee: Guarantee | None
    count: int
    state: str
    owner: str
    metadata: dict[str, Any] | None = field(default=None)
    item: PrivacyItem | None = field(default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollup:
    """What a ledger holds: budget, composed spend, remainder and row counts by state.

    ``spent`` and ``remaining`` count ``reserved`` rows as spent (see the module docstring).
    """

    budget: Budget
    spent: Budget
    remaining: Budget
    committed: int
    reserved: int
    aborted: int


@runtime_checkable
class Ledger(Protocol):
    """A durable two-phase record of spends (see the module docstring for the contract)."""

    def reserve(
        self,
        spend: PrivacyLike,  # anything dpkit.accounting.as_item takes: a guarantee, a mechanism, an event, an item
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Reservation: ...

    def commit(self, reservation: Reservation) -> None: ...

    def abort(self, reservation: Reservation) -> None: ...

    def rollup(self) -> Rollup: ...

    @property
    def budget(self) -> Budget: ...

    def remaining(self) -> Budget: ...

    def close(self) -> None: ...


class _Finisher(Protocol):
    """What a :class:`SpendHandle` needs of its ledger: commit and abort of a reservation."""

    def commit(self, reservation: Reservation) -> None: ...

    def abort(self, reservation: Reservation) -> None: ...


class SpendHandle:
    """A spend already reserved (it counts as spent now), as ``ledger.spend(...)`` returns it.

    The reservation was made, durably, when ``spend`` was called; the handle only decides how it ends:

    * ``with ledger.spend(x) as r:`` -- entering yields the :class:`Reservation`; leaving the block
      normally commits it, an exception aborts it (its budget returned; if the abort fails the reservation
      stays and counts as spent).  A handle is entered at most once: a second ``with`` raises
      :class:`~dpkit.errors.LedgerError` (one reservation pays for one release).
    * a plain call ``h = ledger.spend(x)`` -- the reservation counts as spent whatever happens next; call
      :meth:`commit` once the noisy value exists (before returning it), or :meth:`abort` only if no noisy
      value was made.  A handle dropped without either leaves its row ``reserved`` (still spent, listed by
      ``reserved_but_uncommitted``) and, when garbage-collected, warns with a :class:`ResourceWarning`
      naming where it was made (a handle that was entered does not warn: its block ended it, or its abort
      failed and left it spent); the collector never touches the store.

    Attributes
    ----------
    reservation : Reservation
        The reserved spend.
    """

    __slots__ = ("_done", "_entered", "_ledger", "_lock", "_where", "reservation")

    def __init__(self, ledger: _Finisher, reservation: Reservation, where: str = "") -> None:
        self._ledger = ledger
        self.reservation = reservation
        self._where = where  # "file:line" of the call that made it, for the warning
        self._entered = False
        self._done = ""  # "committed" or "aborted" once this handle ended the reservation
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = self._done or ("entered" if self._entered else "reserved")
        return f"SpendHandle(id={self.reservation.id}, label={self.reservation.label!r}, {state})"

    def commit(self) -> None:
        """Commit the reservation (durably); call it before returning the noisy value.  Idempotent.

        Raises
        ------
        LedgerError
            If the reservation was aborted, or the ledger cannot record the commit (the reservation then
            stays ``reserved`` and counts as spent).
        """
        self._ledger.commit(self.reservation)
        self._done = "committed"

    def abort(self) -> None:
        """Abort the reservation, returning its budget; only if no noisy value was made or seen.  Idempotent.

        Raises
        ------
        LedgerError
            If the reservation was committed (a committed spend is never returned), or the ledger cannot
            record the abort (the reservation then stays ``reserved`` and counts as spent).
        """
        self._ledger.abort(self.reservation)
        self._done = "aborted"

    def __enter__(self) -> Reservation:
        with self._lock:  # two threads entering one handle: exactly one gets the reservation
            if self._entered or self._done:
                how = f"already {self._done}" if self._done else "already entered"
                raise LedgerError(
                    f"this spend (reservation {self.reservation.id}, {self.reservation.label!r}) is {how}: a handle "
                    "from ledger.spend(...) pays for one release and can be used in one `with` block only. Call "
                    "ledger.spend(...) again for another release."
                )
            self._entered = True
        return self.reservation

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
            return
        try:
            self.abort()
        except LedgerError:  # the ledger cannot record the abort: the row stays 'reserved' and counts (safe)
            pass

    def __del__(self) -> None:
        # Never touches the store: the row stays 'reserved', which counts as spent (the safe direction).
        try:
            if self._done or self._entered or sys.is_finalizing():
                return
            reservation, where = self.reservation, self._where
        except AttributeError:  # __init__ did not finish
            return
        warnings.warn(
            f"a spend from ledger.spend(...){f' made at {where}' if where else ''} (reservation {reservation.id}, "
            f"{reservation.label!r}) was dropped without a `with` block, .commit() or .abort(); unless it was "
            "finished through its reservation, it was never committed nor aborted, stays 'reserved' and counts "
            "as spent. Use `with ledger.spend(...):`, or call .commit() on the handle before releasing the value.",
            ResourceWarning, stacklevel=1, source=self,
        )


# ---- the record format ----------------------------------------------------------------------------
def _num(x: object) -> str:
    return repr(float(x))  # type: ignore[arg-type]  # shortest round-trip repr; "inf" for infinity


def guarantee_to_record(guarantee: object) -> tuple[str, str]:
    """Serialise a guarantee to ``(type name, JSON parameters)``, exactly.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (at finitely many orders)

    Returns
    -------
    tuple of str
        The type name and a canonical JSON object (sorted keys) of ``repr``-written floats.

    Raises
    ------
    UnsupportedError
        For ``WassersteinDP`` (not a DP budget) or a ``RenyiDP`` given by a callable curve.
    ArgumentTypeError
        For anything that is not a guarantee.

    Examples
    --------
    >>> guarantee_to_record(ApproxDP(epsilon=0.1, delta=1e-6))
    ('ApproxDP', '{"delta": "1e-06", "epsilon": "0.1"}')
    """
    if isinstance(guarantee, WassersteinDP):
        raise UnsupportedError(
            "WassersteinDP bounds a transport distance, not privacy loss; it cannot be recorded as a "
            "spend or a budget. Record the mechanism's PureDP, ApproxDP, ZCDP or GaussianDP guarantee."
        )
    params: dict[str, Any]
    if isinstance(guarantee, PureDP):
        params = {"epsilon": _num(guarantee.epsilon)}
    elif isinstance(guarantee, ApproxDP):
        params = {"epsilon": _num(guarantee.epsilon), "delta": _num(guarantee.delta)}
    elif isinstance(guarantee, ZCDP):
        params = {"rho": _num(guarantee.rho)}
    elif isinstance(guarantee, GaussianDP):
        params = {"mu": _num(guarantee.mu)}
    elif isinstance(guarantee, RenyiDP):
        if guarantee.orders is None:
            raise UnsupportedError(
                "a RenyiDP given by a callable curve cannot be stored; give it at finitely many orders "
                "(RenyiDP(orders=..., epsilons=...))."
            )
        epsilons = guarantee.epsilons
        assert epsilons is not None  # given together with the orders
        params = {
            "orders": [_num(a) for a in guarantee.orders],
            "epsilons": [_num(e) for e in epsilons],
        }
    else:
        raise ArgumentTypeError(
            "expected a guarantee (PureDP, ApproxDP, ZCDP, GaussianDP or finite RenyiDP); got "
            f"{type(guarantee).__name__}. For a mechanism, pass mechanism.guarantee."
        )
    return type(guarantee).__name__, json.dumps(params, sort_keys=True)


def _float(text: object) -> float:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"expected a number written as a string; got {text!r}.")
    value = float(text)
    if math.isnan(value):
        raise InvalidArgumentError("NaN is not a valid privacy parameter.")
    return value


def guarantee_from_record(type_name: str, params_json: str) -> Guarantee:
    """Rebuild a guarantee written by :func:`guarantee_to_record`.

    Parameters
    ----------
    type_name : str
        One of ``PureDP``, ``ApproxDP``, ``ZCDP``, ``GaussianDP``, ``RenyiDP``.
    params_json : str
        The JSON parameters.

    Returns
    -------
    guarantee
        Equal, number for number, to the one written.

    Raises
    ------
    LedgerError
        For an unknown type name or parameters that are not valid JSON or not a valid guarantee.

    Examples
    --------
    >>> print(guarantee_from_record(*guarantee_to_record(ZCDP(0.1))))
    0.1-zCDP
    """
    try:
        p = json.loads(params_json)
        if not isinstance(p, dict):
            raise InvalidArgumentError("parameters must be a JSON object")
        if type_name == "PureDP":
            return PureDP(_float(p["epsilon"]))
        if type_name == "ApproxDP":
            return ApproxDP(epsilon=_float(p["epsilon"]), delta=_float(p["delta"]))
        if type_name == "ZCDP":
            return ZCDP(_float(p["rho"]))
        if type_name == "GaussianDP":
            return GaussianDP(_float(p["mu"]))
        if type_name == "RenyiDP":
            return RenyiDP(orders=[_float(a) for a in p["orders"]], epsilons=[_float(e) for e in p["epsilons"]])
    except (ValueError, TypeError, KeyError) as exc:
        raise LedgerError(
            f"a {type_name} record has invalid parameters {params_json!r} ({exc}); the ledger file is "
            "corrupted or was edited by hand."
        ) from None
    raise LedgerError(
        f"unknown guarantee type {type_name!r} in the ledger; it was written by another program or a "
        "newer dpkit. Known types: PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP."
    )
