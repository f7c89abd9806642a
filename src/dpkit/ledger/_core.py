r"""What every dpkit ledger shares, whatever stores it: validation, composition, the record, the protocol.

:class:`SQLLedger` implements the whole two-phase contract of :mod:`dpkit.ledger._base` (check,
reserve, commit, abort, spend, spent, remaining, history, rollup) over a SQL store with three tables
(``meta``, ``budget``, ``spends``) whose columns are the same in every backend.  A backend
(:class:`~dpkit.ledger.SQLiteLedger`, :class:`~dpkit.ledger.PostgresLedger`) supplies only

* ``_run(write, work)``: run ``work(conn)`` in one transaction; for ``write=True`` the transaction
  holds the ledger's *write lock* from its first statement to its commit (SQLite: ``BEGIN
  IMMEDIATE``; PostgreSQL: a row lock on the budget row), so that check-and-reserve is atomic;
* ``_sql(text)``: the statement in its dialect (table names, parameter style);
* ``_where``: how messages name the ledger (a path, or a URL without its password).

Composition is decided here and only here, by the accounting core: each spend is recorded as its
:class:`~dpkit.accounting.items.PrivacyItem` (:func:`~dpkit.accounting.items.item_to_json`, every number
exact), and a decision is that of an adaptive :class:`dpkit.accounting.Accountant` over the stored budget
and the stored filter choice (``meta.filter``: ``"auto"`` for a new ledger unless the caller chose one;
``"basic"`` for a ledger written before the choice was stored, so its past decisions stand) into which
the record's reserved and committed spends are replayed in id order.  The replayed Accountant is kept
by the ledger object and brought forward, not rebuilt: its key is (largest spend id, ``meta.aborts``),
and every reserve raises the first and every abort (the one change that removes a live spend) the
second, in whatever process it happens, so one more spend costs O(1) amortised.  Check and insert
happen under the write lock in one transaction.

The record: a spend's row holds the item (JSON), and a readable ``(type, params)`` pair: a guarantee's
own (:func:`~dpkit.ledger.guarantee_to_record`), or ``("item", event JSON)`` for anything else.  Rows
written before items were recorded (``item`` NULL) are read as ``as_item(guarantee_from_record(...))``.
Times are UTC ISO 8601 text with microseconds, metadata canonical JSON text, states
``reserved | committed | aborted``, owner ``host:pid``.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from dpkit._math import check_count
from dpkit.accounting import Accountant
from dpkit.accounting.items import ORDERS, PrivacyItem, as_item, item_from_json, item_to_json
from dpkit.accounting.protocols import PrivacyLike
from dpkit.accounting.state import AccountingState
from dpkit.errors import ArgumentTypeError, BudgetExceededError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP, RenyiDP, WassersteinDP
from dpkit.ledger._base import (
    Budget,
    Connection,
    Guarantee,
    LedgerEntry,
    LedgerError,
    Reservation,
    Rollup,
    SpendHandle,
    guarantee_from_record,
    guarantee_to_record,
)

__all__ = [
    "FilterSpec",
    "SQLLedger",
    "check_budget",
    "check_filter",
    "filter_from_text",
    "filter_to_text",
    "now",
    "validate_spend",
    "zero_like",
]

T = TypeVar("T")
FilterSpec = str | dict[str, float]
GUARANTEES = ("PureDP", "ApproxDP", "ZCDP", "GaussianDP", "RenyiDP")
ITEM_TYPE = "item"  # the type column of a spend that is not a guarantee (its params column: the event)
LEGACY_FILTER = "basic"  # the filter of a ledger written before the filter was stored: its past decisions stand

COLUMNS = "id, created_at, updated_at, label, type, params, count, state, owner, metadata, item"


# ---- validation ---------------------------------------------------------------------------------
def now() -> str:
    """The current UTC time as ISO 8601 text with microseconds (the record's time format)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def check_budget(budget: object) -> Budget:
    """``budget`` if it can be stored and is a budget the Accountant takes (TypeError/UnsupportedError/ValueError)."""
    if not isinstance(budget, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP)):
        if isinstance(budget, WassersteinDP):
            guarantee_to_record(budget)  # UnsupportedError: not privacy loss
        raise ArgumentTypeError(f"a ledger's budget must be PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP; got "
                                f"{type(budget).__name__}.")
    guarantee_to_record(budget)  # UnsupportedError for what cannot be stored (a callable RenyiDP)
    Accountant(budget)  # the Accountant's own budget rules
    return budget


def check_filter(budget: Budget, spec: object) -> FilterSpec:
    """``spec`` if ``Accountant(budget, filter=spec)`` takes it (TypeError/ValueError otherwise)."""
    if isinstance(spec, dict):
        if not all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                   for k, v in spec.items()):
            raise ArgumentTypeError("filter must be 'auto', a filter kind, or a dict {kind: delta share}.")
        spec = {k: float(v) for k, v in spec.items()}
    elif not isinstance(spec, str):
        raise ArgumentTypeError(f"filter must be 'auto', a filter kind, or a dict {{kind: delta share}}; got "
                                f"{type(spec).__name__}.")
    Accountant(budget, adaptive=True, filter=spec)  # the filter set's own rules (ValueError, TypeError)
    if not isinstance(budget, ApproxDP):
        # only an ApproxDP budget has a choice of filters; fail for a bad kind all the same
        Accountant(ApproxDP(epsilon=1.0, delta=1e-6), adaptive=True,
                   filter=spec if isinstance(spec, str) else {k: min(v, 1e-6) for k, v in spec.items()})
    return spec


def filter_to_text(spec: FilterSpec) -> str:
    """The filter choice as stored in ``meta`` (canonical JSON, floats written exactly)."""
    return json.dumps(spec if isinstance(spec, str) else {k: repr(float(v)) for k, v in spec.items()},
                      sort_keys=True)


def filter_from_text(text: str, where: str) -> FilterSpec:
    """Read a stored filter choice (LedgerError if unreadable)."""
    try:
        value = json.loads(text)
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return {str(k): float(v) for k, v in value.items()}
    except (ValueError, TypeError):
        pass
    raise LedgerError(f"the ledger {where} stores an unreadable filter choice {text!r}; it is corrupted.")


def validate_spend(
    spend: object, count: object, label: object, metadata: object
) -> tuple[PrivacyItem, tuple[str, str], int, str, str | None]:
    """Check one spend's arguments before anything is read or written.

    Returns
    -------
    tuple
        ``(item, (type name, params JSON), count, label, metadata JSON or None)``: the item of
        :func:`~dpkit.accounting.items.as_item`, and the readable record (the guarantee's own, the
        item's headline guarantee if it states one, or ``("item", event JSON)``).

    Raises
    ------
    ArgumentTypeError, InvalidArgumentError, UnsupportedError
        For something that cannot be spent, a bad count, label or metadata.
    """
    if label is not None and not isinstance(label, str):
        raise ArgumentTypeError(f"label must be a str or None; got {type(label).__name__}.")
    if isinstance(spend, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP)):
        record = guarantee_to_record(spend)  # UnsupportedError for a callable RenyiDP
    item = as_item(spend)
    if not isinstance(spend, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP)):
        if isinstance(spend, PrivacyItem) and isinstance(item.headline, (PureDP, ApproxDP, ZCDP, GaussianDP,
                                                                         RenyiDP)):
            # an item built by the caller that states its headline guarantee (a query's cost in its budget's
            # family) shows it; decisions still compose the recorded item, every family of it
            record = guarantee_to_record(item.headline)
        else:
            record = (ITEM_TYPE, item.key)  # the event as canonical JSON (made once, with the item)
    n = check_count("count", count)
    text = item.label if label is None else label
    if metadata is not None and not isinstance(metadata, dict):
        raise ArgumentTypeError(f"metadata must be a dict or None; got {type(metadata).__name__}.")
    try:
        meta = None if metadata is None else json.dumps(metadata, sort_keys=True, allow_nan=False)
    except ValueError as exc:
        raise InvalidArgumentError(f"metadata must be JSON without NaN or infinity; {exc}.") from None
    return item, record, n, text, meta


def zero_like(budget: Budget) -> Budget:
    """Nothing left, in the budget's family (``PureDP(0)`` for a GaussianDP budget: mu must be > 0)."""
    if isinstance(budget, PureDP):
        return PureDP(0.0)
    if isinstance(budget, ApproxDP):
        return ApproxDP(epsilon=0.0, delta=0.0)
    if isinstance(budget, ZCDP):
        return ZCDP(0.0)
    if isinstance(budget, GaussianDP):
        return PureDP(0.0)
    orders = budget.orders
    assert orders is not None, "a ledger's Rényi budget is given at finite orders (a curve cannot be stored)"
    return RenyiDP(orders=list(orders), epsilons=[0.0] * len(orders))


def entry_guarantee(type_name: str, params: str, item: PrivacyItem) -> Guarantee | None:
    """The guarantee a row shows: its own record, else the item's headline if that is a guarantee."""
    if type_name in GUARANTEES:
        return guarantee_from_record(type_name, params)
    h = item.headline
    return h if isinstance(h, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP)) else None


_OWNER: tuple[int, str] = (-1, "")


def owner() -> str:
    """``host:pid`` of this process: who reserved a spend (kept per process; a fork gets its own)."""
    global _OWNER
    pid = os.getpid()
    if _OWNER[0] != pid:
        _OWNER = (pid, f"{socket.gethostname()}:{pid}")
    return _OWNER[1]


@dataclass(slots=True)
class _Replay:
    """The record's live spends replayed into an adaptive Accountant, valid while ``key`` is the record's.

    ``key`` is (largest spend id, abort counter): ids only grow (SQLite AUTOINCREMENT, a PostgreSQL
    identity, both taken under the write lock) and every abort bumps the counter, so a reserve anywhere
    changes the first and the one change that removes a live spend changes the second.  A commit leaves
    the live set (reserved + committed) as it was, so it changes neither.
    """

    key: tuple[int, int]
    accountant: Accountant
    over: AccountingState | None  # every live spend, once one did not fit when replayed (the record is beyond
    # its budget: a ledger edited by hand); None while all fit


def over_spent(budget: Budget, state: AccountingState, where: str) -> Budget:
    """The total of a record beyond its budget, in the budget's family, from the state (sums, rounded up)."""
    try:
        if isinstance(budget, PureDP):
            return PureDP(state.pure)
        if isinstance(budget, ZCDP):
            return ZCDP(state.rho)
        if isinstance(budget, GaussianDP):
            return GaussianDP(math.nextafter(math.sqrt(state.mu2), math.inf))
        if isinstance(budget, RenyiDP):
            orders = [float(a) for a in budget.orders]  # type: ignore[union-attr]  # a RenyiDP budget has orders
            at = dict(zip(ORDERS, state.rdp.tolist()))
            return RenyiDP(orders=orders, epsilons=[at[next(o for o in ORDERS if o >= a)] for a in orders])
        if math.isfinite(state.basic_epsilon):
            return ApproxDP(epsilon=state.basic_epsilon, delta=min(1.0, state.basic_delta))
        d = float(budget.delta)
        return ApproxDP(epsilon=float(min(float(state.epsilon(d, method=m)) for m in ("zcdp", "rdp")
                                          if state.families()[m])), delta=d)
    except (ValueError, UnsupportedError) as exc:
        raise LedgerError(f"the ledger {where} records spends beyond its budget {budget} whose total cannot be "
                          f"stated in the budget's family ({exc}).") from None


class SQLLedger:
    r"""The ledger contract over a SQL store; subclasses supply the connection and the transaction.

    Not used directly: open a :class:`~dpkit.ledger.SQLiteLedger` or a
    :class:`~dpkit.ledger.PostgresLedger` (or call :func:`~dpkit.ledger.open_ledger`).  See the
    module docstring for what a subclass provides, and :mod:`dpkit.ledger._base` for the contract.
    """

    _budget: Budget
    _filter: FilterSpec
    _ledger_id: str
    _where: str
    _lock: AbstractContextManager[Any]  # a threading.RLock held by _run (the backend makes it)
    _cache: _Replay | None = None  # the replayed Accountant (see the module docstring)
    _items: dict[str, PrivacyItem]  # parsed items by their JSON text

    def _init_core(self) -> None:
        """Called by a backend's __init__ before it opens the store."""
        self._cache = None
        self._items = {}
        self._json_memo: dict[int, tuple[PrivacyItem, str]] = {}

    # ---- what a backend provides ------------------------------------------------------------------
    def _run(self, write: bool, work: Callable[[Connection], T]) -> T:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sql(self, text: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _insert(self, conn: Connection, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT and return the new row's id (``RETURNING id``; SQLite overrides)."""
        row = conn.execute(self._sql(sql + " RETURNING id"), params).fetchone()
        return int(row[0])

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- opening: the stored budget and filter ----------------------------------------------------
    def _load_budget(self, conn: Connection, budget: Budget | None,
                     filter: FilterSpec | None = None) -> tuple[Budget, str]:
        """Read the ledger id, the stored budget and filter choice, storing ``budget`` (and ``filter``) if the
        ledger is new (inside the open transaction); sets ``self._filter``."""
        row = conn.execute(self._sql("SELECT value FROM {meta} WHERE key = 'ledger_id'")).fetchone()
        if row is None:
            raise LedgerError(f"{self._where} is a dpkit ledger without a ledger id; it is corrupted.")
        ledger_id = str(row[0])
        stored_row = conn.execute(self._sql("SELECT type, params FROM {budget} WHERE id = 1")).fetchone()
        if stored_row is None:
            if budget is None:
                raise InvalidArgumentError(
                    f"the ledger {self._where} is new and has no budget; pass budget=, e.g. "
                    f"{type(self).__name__}(..., budget=ApproxDP(epsilon=1.0, delta=1e-6)) (on the command line, "
                    "--budget-epsilon and --budget-delta)."
                )
            spec = check_filter(budget, "auto" if filter is None else filter)
            type_name, params = guarantee_to_record(budget)
            conn.execute(self._sql("INSERT INTO {budget} (id, type, params, created_at) VALUES (1, ?, ?, ?)"),
                         (type_name, params, now()))
            # a new ledger: its filter is "auto" unless the caller chose one
            conn.execute(self._sql("UPDATE {meta} SET value = ? WHERE key = 'filter'"), (filter_to_text(spec),))
            self._filter = self._stored_filter(conn)
            return budget, ledger_id
        stored = guarantee_from_record(str(stored_row[0]), str(stored_row[1]))
        try:
            stored_budget = check_budget(stored)
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"the budget stored in {self._where} is not a valid budget ({exc}).") from None
        if budget is not None and guarantee_to_record(budget) != (stored_row[0], stored_row[1]):
            raise InvalidArgumentError(
                f"budget {budget} does not match the budget {stored} stored in {self._where}; a ledger's "
                "budget is fixed when it is created. Omit budget= to use the stored one, or name a new ledger."
            )
        self._filter = self._stored_filter(conn)
        if filter is not None and filter_to_text(check_filter(stored_budget, filter)) != filter_to_text(self._filter):
            raise InvalidArgumentError(
                f"filter {filter!r} does not match the filter {self._filter!r} stored in {self._where}; a ledger's "
                "filter is fixed when it is created. Omit filter= to use the stored one, or name a new ledger."
            )
        return stored_budget, ledger_id

    def _stored_filter(self, conn: Connection) -> FilterSpec:
        row = conn.execute(self._sql("SELECT value FROM {meta} WHERE key = 'filter'")).fetchone()
        if row is None:
            raise LedgerError(f"{self._where} is a dpkit ledger without a filter choice; it is corrupted.")
        spec = filter_from_text(str(row[0]), self._where)
        try:
            return check_filter(self._stored_budget(conn), spec)
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"the filter stored in {self._where} is not valid ({exc}); it is corrupted.") from None

    def _stored_budget(self, conn: Connection) -> Budget:
        row = conn.execute(self._sql("SELECT type, params FROM {budget} WHERE id = 1")).fetchone()
        return check_budget(guarantee_from_record(str(row[0]), str(row[1])))

    # ---- state ------------------------------------------------------------------------------------
    @property
    def budget(self) -> Budget:
        """The total budget stored in the ledger (fixed when it was created)."""
        return self._budget

    @property
    def filter(self) -> FilterSpec:
        """The privacy filter choice stored in the ledger (fixed when it was created; see ``Accountant``)."""
        return self._filter

    @property
    def ledger_id(self) -> str:
        """A random id made when the ledger was created; reservations carry it."""
        return self._ledger_id

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- reading the record -----------------------------------------------------------------------
    def _item(self, type_name: object, params: object, item_json: object, label: str, row_id: object) -> PrivacyItem:
        """The item of one row: its recorded item, or (a row written before items were) its guarantee's item.

        Parsed items are kept by their JSON text, so a record of repeated spends is parsed once per kind."""
        if item_json is None:  # a row written before items were recorded (an unknown type: LedgerError)
            return as_item(guarantee_from_record(str(type_name), str(params)), label=label)
        cache = self._items
        item = cache.get(str(item_json))
        if item is None:
            try:
                item = item_from_json(str(item_json), label)
            except (ValueError, KeyError, TypeError, UnsupportedError) as exc:
                raise LedgerError(f"spend {row_id} in {self._where} has an unreadable item ({exc}); the ledger is "
                                  "corrupted or was edited by hand.") from None
            if len(cache) >= 4096:
                cache.clear()
            cache[str(item_json)] = item
        return item

    def _item_json(self, item: PrivacyItem) -> str:
        """:func:`item_to_json` of ``item``, kept for the items spent lately (a reused mechanism is written once)."""
        memo = self._json_memo
        hit = memo.get(id(item))
        if hit is not None and hit[0] is item:
            return hit[1]
        text = item_to_json(item)
        if len(memo) >= 64:
            memo.clear()
        memo[id(item)] = (item, text)  # the item is held, so its id is not reused while it is here
        return text

    def _replay(self, conn: Connection) -> _Replay:
        """The adaptive Accountant of the record's live spends, replayed in id order (see :class:`_Replay`).

        Brought up to date from the cached one: nothing to read if the record has not changed, only the
        new rows if spends were reserved since (by any process), the whole record after an abort."""
        row = conn.execute(self._sql("SELECT MAX(id) FROM {spends}")).fetchone()
        top = 0 if row is None or row[0] is None else int(row[0])
        row = conn.execute(self._sql("SELECT value FROM {meta} WHERE key = 'aborts'")).fetchone()
        try:
            aborts = int(row[0])
        except (TypeError, ValueError):
            raise LedgerError(f"{self._where} has no readable abort counter; the ledger is corrupted.") from None
        key = (top, aborts)
        cached: _Replay | None = self._cache
        if cached is not None and cached.key == key:
            return cached
        if cached is not None and cached.over is None and cached.key[1] == aborts and cached.key[0] < top:
            replay, since = cached, cached.key[0]
        else:
            accountant = Accountant(self._budget, adaptive=True, filter=self._filter)
            replay, since = _Replay(key=(0, aborts), accountant=accountant, over=None), 0
        self._cache = None  # until the replay below completes
        rows = conn.execute(self._sql(
            "SELECT id, type, params, item, count, label FROM {spends} WHERE state IN ('reserved', 'committed')"
            " AND id > ? ORDER BY id"), (since,)).fetchall()
        for row_id, type_name, params, item_json, count, label in rows:
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise LedgerError(f"spend {row_id} in {self._where} has count {count!r}; the ledger is corrupted.")
            item = self._item(type_name, params, item_json, str(label), row_id)
            if replay.over is not None:  # beyond the budget already: only counted, for spent()
                replay.over = replay.over.add(item, count)
                continue
            try:
                replay.accountant.admit(item, count=count, label=str(label))
            except BudgetExceededError:
                replay.over = replay.accountant.state.add(item, count)
                continue
            except (UnsupportedError, TypeError, ValueError) as exc:
                raise LedgerError(
                    f"the ledger {self._where} records a spend (id {row_id}) that its budget {self._budget} cannot "
                    f"compose ({exc}); the ledger was edited by hand or is corrupted."
                ) from None
        replay.key = key
        self._cache = replay
        return replay

    def _entries(self, conn: Connection, only_reserved: bool = False) -> tuple[LedgerEntry, ...]:
        where = " WHERE state = 'reserved'" if only_reserved else ""
        rows = conn.execute(self._sql(f"SELECT {COLUMNS} FROM {{spends}}{where} ORDER BY id")).fetchall()
        out = []
        for id_, created, updated, label, type_name, params, count, state, owner_, metadata, item_json in rows:
            try:
                meta = None if metadata is None else json.loads(metadata)
            except ValueError:
                raise LedgerError(f"spend {id_} in {self._where} has unreadable metadata; the ledger is corrupted.") \
                    from None
            item = self._item(type_name, params, item_json, str(label), id_)
            if item.label != label:
                item = replace(item, label=str(label))
            out.append(LedgerEntry(
                id=id_, ledger_id=self._ledger_id, created_at=created, updated_at=updated, label=label,
                guarantee=entry_guarantee(str(type_name), str(params), item), count=count, state=state,
                owner=owner_, metadata=meta, item=item,
            ))
        return tuple(out)

    def _spent(self, replay: _Replay) -> Budget:
        if replay.over is None:
            return replay.accountant.spent()
        return over_spent(self._budget, replay.over, self._where)

    def _remaining(self, replay: _Replay) -> Budget:
        return zero_like(self._budget) if replay.over is not None else replay.accountant.remaining()

    def spent(self) -> Budget:
        """What the reserved and committed spends add up to, in the budget's family, as the filter accounts them.

        Returns
        -------
        PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP
            :meth:`dpkit.accounting.Accountant.spent` of the live spends replayed in order: the sum of
            epsilon, of rho, of mu^2 (as a mu), per order; under an ApproxDP budget the tightest (epsilon,
            delta) a running filter certifies.  Uncommitted reservations count (see :mod:`dpkit.ledger._base`).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ZCDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=ZCDP(1.0)) as ledger:
        ...     _ = ledger.reserve(ZCDP(0.125), count=2); print(ledger.spent())
        0.25-zCDP
        """
        return self._run(False, lambda conn: self._spent(self._replay(conn)))

    def remaining(self) -> Budget:
        """What is left of the budget under the adaptive filter's rule (as ``Accountant.remaining``).

        Returns
        -------
        PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP
            The budget less the spent total, per parameter (under an ApproxDP budget: the largest pure
            epsilon one more spend may have, and the delta left); zero if the record already exceeds
            the budget (possible only if the ledger was edited).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ApproxDP; from dpkit.ledger import SQLiteLedger
        >>> budget = ApproxDP(epsilon=1.0, delta=1e-6)
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=budget) as ledger:
        ...     print(ledger.remaining())
        (1.0, 1e-06)-DP
        """
        return self._run(False, lambda conn: self._remaining(self._replay(conn)))

    def state(self) -> AccountingState:
        """The :class:`~dpkit.accounting.state.AccountingState` of the reserved and committed spends.

        Read epsilon(delta) bounds and intervals from it (``ledger.state().epsilon(1e-6)``); they describe the
        spends as if fixed in advance (the guarantee under adaptive choice is the budget, which the filter
        enforces).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ZCDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=ZCDP(1.0)) as ledger:
        ...     _ = ledger.reserve(ZCDP(0.125), count=2); print(ledger.state().count)
        2
        """
        return self._run(False, lambda conn: self._replay(conn).accountant.state)

    def history(self) -> tuple[LedgerEntry, ...]:
        """Every spend ever recorded (reserved, committed and aborted), oldest first.

        Returns
        -------
        tuple of LedgerEntry

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.commit(ledger.reserve(PureDP(0.5), label="q1"))
        ...     print([(e.label, e.state) for e in ledger.history()])
        [('q1', 'committed')]
        """
        return self._run(False, self._entries)

    def reserved_but_uncommitted(self) -> tuple[LedgerEntry, ...]:
        """Spends reserved but neither committed nor aborted: in flight now, or left by a process that died.

        They count as spent.  Each entry names its ``owner`` (``host:pid``) and time; pass one to
        :meth:`abort` only if you know that no noisy value left that process.

        Returns
        -------
        tuple of LedgerEntry

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     r = ledger.reserve(PureDP(0.5)); print(len(ledger.reserved_but_uncommitted()))
        1
        """
        return self._run(False, lambda conn: self._entries(conn, only_reserved=True))

    def rollup(self) -> Rollup:
        """Budget, composed spend, remainder and the number of rows in each state, read at one instant.

        Returns
        -------
        Rollup

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.abort(ledger.reserve(PureDP(0.5))); r = ledger.rollup(); print(r.remaining, r.aborted)
        1.0-DP 1
        """
        def work(conn: Connection) -> Rollup:
            replay = self._replay(conn)
            counts = {str(s): int(n) for s, n in
                      conn.execute(self._sql("SELECT state, COUNT(*) FROM {spends} GROUP BY state")).fetchall()}
            return Rollup(
                budget=self._budget, spent=self._spent(replay),
                remaining=self._remaining(replay), committed=counts.get("committed", 0),
                reserved=counts.get("reserved", 0), aborted=counts.get("aborted", 0),
            )

        return self._run(False, work)

    # ---- the two-phase protocol -------------------------------------------------------------------
    def _refuse_unless_fits(self, replay: _Replay, item: PrivacyItem, count: int) -> None:
        """Raise BudgetExceededError (with "Nothing was spent") unless ``count`` x ``item`` fits; changes nothing."""
        if replay.over is not None:
            raise BudgetExceededError(
                f"refused: the ledger {self._where} already records spends beyond its budget {self._budget} "
                "(the ledger was edited or its budget changed). Nothing was spent."
            )
        accountant = replay.accountant
        try:
            accountant.check(item, count=count)
        except BudgetExceededError as exc:
            raise BudgetExceededError(f"{exc} Ledger {self._where}; remaining {accountant.remaining()}.") from None

    def check(self, spend: PrivacyLike, *, count: int = 1) -> None:
        """Dry run: raise BudgetExceededError if reserving ``spend`` ``count`` times would overspend now.

        Another process may spend in between; only :meth:`reserve` decides atomically.

        Parameters
        ----------
        spend : guarantee, dpkit mechanism, GaussianEvent/LaplaceEvent, DPSGDStep or PrivacyItem
            Anything :func:`~dpkit.accounting.items.as_item` takes.
        count : int, >= 1

        Raises
        ------
        BudgetExceededError
            If it would not fit.
        UnsupportedError, ArgumentTypeError, InvalidArgumentError
            As :meth:`reserve`.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.check(PureDP(0.5), count=2)
        """
        item, _, n, _, _ = validate_spend(spend, count, None, None)
        self._run(False, lambda conn: self._refuse_unless_fits(self._replay(conn), item, n))

    def reserve(
        self,
        spend: PrivacyLike,
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Reservation:
        """Atomically check that a spend fits and durably record it as ``reserved``.

        The decision is that of ``Accountant(budget, adaptive=True, filter=ledger.filter)`` with every
        reserved and committed spend replayed in id order (kept up to date between calls, so a spend costs
        O(1) however long the record).

        Parameters
        ----------
        spend : guarantee, dpkit mechanism, GaussianEvent/LaplaceEvent, DPSGDStep or PrivacyItem
            What one release costs: anything :func:`~dpkit.accounting.items.as_item` takes (a guarantee
            ``PureDP``, ``ApproxDP``, ``ZCDP``, ``GaussianDP``, finite ``RenyiDP``; a mechanism itself).
        count : int, >= 1
            How many times it is spent.
        label : str, optional
            Shown in :meth:`history`; defaults to the item's label (``str(guarantee)`` for a guarantee).
        metadata : dict, optional
            JSON-serialisable details (query text, user); no NaN or infinity.

        Returns
        -------
        Reservation
            Pass it to :meth:`commit` before returning the noisy value, or to :meth:`abort`.

        Raises
        ------
        BudgetExceededError
            If the spend would exceed the budget; nothing was written.
        UnsupportedError
            For ``WassersteinDP``, a callable ``RenyiDP``, or a spend the budget's filter cannot
            account for (e.g. an (epsilon, delta) spend against a ZCDP budget).
        ArgumentTypeError, InvalidArgumentError
            For something that cannot be spent, a bad ``count``, ``label`` or ``metadata``.
        LedgerUnavailableError
            If the ledger is read-only or stays locked past its timeout.
        LedgerError
            If the ledger cannot be reached or is corrupted.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     r = ledger.reserve(PureDP(0.5), label="mean age"); ledger.commit(r); print(r.label, ledger.remaining())
        mean age 0.5-DP
        """
        item, (type_name, params), n, text, meta = validate_spend(spend, count, label, metadata)
        item_json = self._item_json(item)
        moved: list[_Replay] = []  # the cached replay, once this spend was admitted into it

        def work(conn: Connection) -> int:  # inside the write lock, from the read of the record to the insert
            replay = self._replay(conn)
            if replay.over is not None:
                self._refuse_unless_fits(replay, item, n)  # raises
            try:
                replay.accountant.admit(item, count=n, label=text)  # refuses changing nothing, or admits
            except BudgetExceededError as exc:
                raise BudgetExceededError(f"{exc} Ledger {self._where}; remaining {replay.accountant.remaining()}.") \
                    from None
            moved.append(replay)
            stamp = now()
            row_id = self._insert(
                conn,
                "INSERT INTO {spends} (created_at, updated_at, label, type, params, count, state, owner, metadata,"
                " item) VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?, ?)",
                (stamp, stamp, text, type_name, params, n, owner(), meta, item_json),
            )
            replay.key = (row_id, replay.key[1])  # valid once this transaction commits
            return row_id

        with self._lock:  # the cached replay holds this spend only if its transaction committed
            try:
                row_id = self._run(True, work)
            except BaseException:
                if moved:
                    self._cache = None  # admitted in memory but maybe not on disk: replay from the record next time
                raise
        guarantee = spend if isinstance(spend, (PureDP, ApproxDP, ZCDP, GaussianDP, RenyiDP)) else \
            entry_guarantee(type_name, params, item)
        return Reservation(id=row_id, ledger_id=self._ledger_id, guarantee=guarantee, count=n, label=text, item=item)

    def _finish(self, reservation: object, target: str) -> None:
        if not isinstance(reservation, (Reservation, LedgerEntry)):
            hint = (f" Call the handle's own .{target[:-2] if target == 'aborted' else 'commit'}() (or pass its "
                    ".reservation).") if isinstance(reservation, SpendHandle) else ""
            raise ArgumentTypeError(f"expected a Reservation; got {type(reservation).__name__}.{hint}")
        if reservation.ledger_id != self._ledger_id:
            raise LedgerError(
                f"reservation {reservation.id} was issued by another ledger ({reservation.ledger_id}), not "
                f"{self._where} ({self._ledger_id})."
            )

        def work(conn: Connection) -> None:
            row = conn.execute(self._sql("SELECT state FROM {spends} WHERE id = ?"), (reservation.id,)).fetchone()
            if row is None:
                raise LedgerError(f"reservation {reservation.id} is not in the ledger {self._where}; it is corrupted.")
            state = row[0]
            if state == target:
                return  # idempotent: a retried commit or abort changes nothing
            if state != "reserved":
                raise LedgerError(
                    f"cannot {target[:-2] if target == 'aborted' else 'commit'} reservation {reservation.id}: it "
                    f"is already {state}."
                    + (" A committed spend is never returned to the budget." if state == "committed" else "")
                )
            conn.execute(self._sql("UPDATE {spends} SET state = ?, updated_at = ? WHERE id = ?"),
                         (target, now(), reservation.id))
            if target == "aborted":  # the live set shrank: every cached replay (in any process) is stale
                conn.execute(self._sql(
                    "UPDATE {meta} SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key = 'aborts'"))

        self._run(True, work)

    def commit(self, reservation: Reservation) -> None:
        """Mark a reservation ``committed`` (durably); call it before returning the noisy value.

        Committing twice is a no-op.

        Parameters
        ----------
        reservation : Reservation
            From :meth:`reserve` on this ledger (or an entry of :meth:`reserved_but_uncommitted`).

        Raises
        ------
        LedgerError
            If it was aborted, or belongs to another ledger.
        ArgumentTypeError
            If it is not a Reservation.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.commit(ledger.reserve(PureDP(0.5))); print(ledger.rollup().committed)
        1
        """
        self._finish(reservation, "committed")

    def abort(self, reservation: Reservation) -> None:
        """Mark a reservation ``aborted``, returning its budget; only if no noisy value was made or seen.

        Aborting twice is a no-op.

        Parameters
        ----------
        reservation : Reservation
            From :meth:`reserve` on this ledger (or an entry of :meth:`reserved_but_uncommitted`).

        Raises
        ------
        LedgerError
            If it was committed (a committed spend is never returned), or belongs to another ledger.
        ArgumentTypeError
            If it is not a Reservation.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.abort(ledger.reserve(PureDP(0.5))); print(ledger.remaining())
        1.0-DP
        """
        self._finish(reservation, "aborted")

    def spend(
        self,
        guarantee: PrivacyLike,
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SpendHandle:
        """Reserve now (as :meth:`reserve`), and return a handle that commits or aborts it, used with ``with``.

        The budget check and the durable ``reserved`` row happen **when spend is called**, with or without
        ``with``: a refusal raises :class:`~dpkit.errors.BudgetExceededError` from the call and changes
        nothing; otherwise the spend counts as spent from that moment (as every reservation does) until it
        is aborted.

        ``with ledger.spend(x) as r:`` yields the :class:`~dpkit.ledger.Reservation`, commits when the block
        ends normally and aborts if it raises.  Compute and add noise inside the block but return the noisy
        value only *after* it: the commit happens on leaving the block, so a value is never returned
        unrecorded.  A block that raises is aborted (its budget returned), so do not let a noisy value out
        of the block before it ends.  If the abort itself fails the reservation stays and counts as spent.
        A handle is used in one ``with`` block at most (a second raises :class:`~dpkit.errors.LedgerError`).

        A plain call ``h = ledger.spend(x)`` (as ``Accountant.spend``) charges the ledger all the same:
        call ``h.commit()`` once the noisy value exists, before returning it (or ``h.abort()`` if no noisy
        value was made).  A handle dropped with neither stays ``reserved``, counted as spent, and warns
        (:class:`ResourceWarning`) when collected.

        Parameters
        ----------
        guarantee, count, label, metadata
            As :meth:`reserve`.

        Returns
        -------
        SpendHandle
            A context manager yielding the :class:`~dpkit.ledger.Reservation` (also its ``reservation``),
            with ``commit()`` and ``abort()``.

        Raises
        ------
        BudgetExceededError
            From the call, if the spend would not fit (nothing is written; a ``with`` block does not run).
        UnsupportedError, ArgumentTypeError, InvalidArgumentError, LedgerError
            As :meth:`reserve`.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     with ledger.spend(PureDP(0.5)) as r: pass
        ...     h = ledger.spend(PureDP(0.25)); print(ledger.remaining())  # a plain call charges at once
        ...     h.commit(); print([e.state for e in ledger.history()])
        0.25-DP
        ['committed', 'committed']
        """
        reservation = self.reserve(guarantee, count=count, label=label, metadata=metadata)
        frame = sys._getframe(1)  # the caller, named by the warning of a handle left unfinished
        return SpendHandle(self, reservation, f"{frame.f_code.co_filename}:{frame.f_lineno}")
