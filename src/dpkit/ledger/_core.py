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

Composition is decided here and only here: the record's reserved and committed spends are composed
in the budget's family (:func:`compose`), and the decision is that of an adaptive
:class:`dpkit.accounting.Accountant` over the stored budget (:func:`accountant_for`).  A later
accounting core replaces these two functions and every ledger follows.

The record: a guarantee is stored as ``(type name, JSON parameters)`` (:func:`~dpkit.ledger.guarantee_to_record`),
times as UTC ISO 8601 text with microseconds, metadata as canonical JSON text, states
``reserved | committed | aborted``, owner ``host:pid``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Self, TypeVar

from dpkit.accounting import Accountant, compose_basic, compose_rdp, compose_zcdp
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ZCDP, ApproxDP, PureDP, RenyiDP
from dpkit.guarantees.conversions import to_rdp, to_zcdp
from dpkit.ledger._base import (
    Budget,
    Guarantee,
    LedgerEntry,
    LedgerError,
    Reservation,
    Rollup,
    guarantee_from_record,
    guarantee_to_record,
)

__all__ = [
    "LiveSpend",
    "SQLLedger",
    "accountant_for",
    "check_budget",
    "check_count",
    "compose",
    "now",
    "remaining",
    "validate_spend",
    "zero_like",
]

T = TypeVar("T")
LiveSpend = tuple[Guarantee, int, str]  # (guarantee, count, label) of one reserved or committed row

COLUMNS = "id, created_at, updated_at, label, type, params, count, state, owner, metadata"


# ---- validation ---------------------------------------------------------------------------------
def now() -> str:
    """The current UTC time as ISO 8601 text with microseconds (the record's time format)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def check_count(count: object) -> int:
    """``count`` if it is an ``int`` >= 1 (not a bool), else ValueError."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1; got {count!r}.")
    return count


def check_budget(budget: object) -> Budget:
    """``budget`` if it can be stored and is a budget the Accountant takes (TypeError/UnsupportedError/ValueError)."""
    guarantee_to_record(budget)  # TypeError / UnsupportedError for what cannot be stored
    Accountant(budget)  # type: ignore[arg-type]  # the Accountant's own budget rules
    if not isinstance(budget, (PureDP, ApproxDP, ZCDP, RenyiDP)):
        # the Accountant also takes a GaussianDP budget; a ledger composes its record in PureDP, ApproxDP,
        # ZCDP or RenyiDP only (compose, zero_like)
        raise TypeError(f"a ledger's budget must be PureDP, ApproxDP, ZCDP or RenyiDP; got {type(budget).__name__} "
                        "(for Gaussian-DP spends, give a ZCDP budget: mu-GDP is (mu^2/2)-zCDP).")
    return budget  # type: ignore[return-value]


def validate_spend(
    guarantee: object, count: object, label: object, metadata: object
) -> tuple[tuple[str, str], int, str, str | None]:
    """Check one spend's arguments before anything is read or written.

    Returns
    -------
    tuple
        ``((type name, params JSON), count, label, metadata JSON or None)``.

    Raises
    ------
    TypeError, ValueError, UnsupportedError
        For a non-guarantee or an unstorable one, a bad count, label or metadata.
    """
    record = guarantee_to_record(guarantee)
    n = check_count(count)
    if label is None:
        label = str(guarantee)
    elif not isinstance(label, str):
        raise TypeError(f"label must be a str or None; got {type(label).__name__}.")
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict or None; got {type(metadata).__name__}.")
    try:
        meta = None if metadata is None else json.dumps(metadata, sort_keys=True, allow_nan=False)
    except ValueError as exc:
        raise ValueError(f"metadata must be JSON without NaN or infinity; {exc}.") from None
    return record, n, label, meta


# ---- composition: the one place a ledger decides what its record adds up to ------------------------
def zero_like(budget: Budget) -> Budget:
    """Nothing spent, in the budget's family."""
    if isinstance(budget, PureDP):
        return PureDP(0.0)
    if isinstance(budget, ApproxDP):
        return ApproxDP(epsilon=0.0, delta=0.0)
    if isinstance(budget, ZCDP):
        return ZCDP(0.0)
    return RenyiDP(orders=list(budget.orders), epsilons=[0.0] * len(budget.orders))  # type: ignore[arg-type]


def compose(budget: Budget, live: Sequence[LiveSpend], where: str) -> Budget:
    """Compose the record's reserved and committed spends in the budget's family (an upper bound).

    Basic composition (Dwork & Roth 2014, Thm 3.16) for PureDP/ApproxDP budgets, the sum of rho
    (Bun & Steinke 2016, arXiv 1605.02065v1, Lemma 2.3) for ZCDP, per-order sums (Mironov 2017,
    arXiv 1702.07476v3, Prop 1) for RenyiDP: the Accountant's adaptive rules.

    Raises
    ------
    LedgerError
        If the record holds a spend the budget's family cannot compose (a hand-edited ledger); a
        delta > 0 in a pure ledger is never dropped silently.
    """
    b = budget
    if not live:
        return zero_like(b)
    try:
        if isinstance(b, (PureDP, ApproxDP)):
            for g, _, _ in live:
                if not isinstance(g, (PureDP, ApproxDP)) or (isinstance(b, PureDP) and isinstance(g, ApproxDP)
                                                              and float(g.delta) != 0.0):
                    raise TypeError(f"{g} cannot be composed into a {type(b).__name__} budget")
            total = compose_basic([(g, c) for g, c, _ in live])  # Dwork & Roth Thm 3.16
            if isinstance(b, PureDP):
                return PureDP(total.epsilon)
            return total if isinstance(total, ApproxDP) else ApproxDP(epsilon=total.epsilon, delta=0.0)
        if isinstance(b, ZCDP):
            return compose_zcdp([(to_zcdp(g), c) for g, c, _ in live])  # Bun & Steinke Lemma 2.3
        curve = compose_rdp([(to_rdp(g), c) for g, c, _ in live])  # Mironov Prop 1
        orders = list(b.orders)  # type: ignore[arg-type]
        return RenyiDP(orders=orders, epsilons=[float(curve.epsilon(a)) for a in orders])
    except (TypeError, ValueError, UnsupportedError) as exc:
        raise LedgerError(
            f"the ledger {where} records a spend that its budget {b} cannot compose ({exc}); the "
            "ledger was edited by hand or is corrupted."
        ) from None


def accountant_for(budget: Budget, live: Sequence[LiveSpend], where: str) -> tuple[Accountant, bool]:
    """A fresh adaptive Accountant over the budget holding the record's total; True if that is over.

    Every adaptive filter rule is a sum (of epsilons and deltas, of rho, per order), so spending the
    composed total (:func:`compose`, the same composition functions) once decides exactly as
    replaying each row would, in one pass over the record instead of one per row.
    """
    # the basic filter with all of delta under an ApproxDP budget: a ledger's record is one composed total, and
    # the automatic filter set (fixed by the first spend, dpkit.accounting.filters) would hold no delta for the
    # (epsilon, delta) spends that follow a pure one.  Composing a ledger through the tighter filters needs
    # the record replayed in order, which this ledger does not do yet.
    accountant = Accountant(budget, adaptive=True, filter="basic")
    if live:
        try:
            accountant.spend(compose(budget, live, where), label=f"{len(live)} recorded spends")
        except BudgetExceededError:
            return accountant, True
    return accountant, False


def remaining(budget: Budget, live: Sequence[LiveSpend], where: str) -> Budget:
    """The budget less the record's total under the adaptive filter; zero if the record is already over."""
    accountant, over = accountant_for(budget, live, where)
    return zero_like(budget) if over else accountant.remaining()  # type: ignore[no-any-return]


def refuse_unless_fits(budget: Budget, live: Sequence[LiveSpend], guarantee: object, count: int, where: str) -> None:
    """Raise BudgetExceededError (with "Nothing was spent") unless ``count`` x ``guarantee`` fits; writes nothing."""
    accountant, over = accountant_for(budget, live, where)
    if over:
        raise BudgetExceededError(
            f"refused: the ledger {where} already records spends beyond its budget {budget} "
            "(the ledger was edited or its budget changed). Nothing was spent."
        )
    try:
        accountant.check(guarantee, count=count)
    except BudgetExceededError as exc:
        raise BudgetExceededError(f"{exc} Ledger {where}; remaining {accountant.remaining()}.") from None


# ---- the record ---------------------------------------------------------------------------------
def live_from_rows(rows: Iterable[Sequence[Any]], where: str) -> list[LiveSpend]:
    """``(type, params, count, label)`` rows of reserved/committed spends -> guarantees, checked."""
    out: list[LiveSpend] = []
    for type_name, params, count, label in rows:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise LedgerError(f"a spend in {where} has count {count!r}; the ledger is corrupted.")
        out.append((guarantee_from_record(str(type_name), str(params)), count, str(label)))
    return out


def entries_from_rows(rows: Iterable[Sequence[Any]], ledger_id: str, where: str) -> tuple[LedgerEntry, ...]:
    """Rows of :data:`COLUMNS` -> :class:`LedgerEntry` values."""
    out = []
    for id_, created, updated, label, type_name, params, count, state, owner, metadata in rows:
        try:
            meta = None if metadata is None else json.loads(metadata)
        except ValueError:
            raise LedgerError(f"spend {id_} in {where} has unreadable metadata; the ledger is corrupted.") from None
        out.append(LedgerEntry(
            id=id_, ledger_id=ledger_id, created_at=created, updated_at=updated, label=label,
            guarantee=guarantee_from_record(type_name, params), count=count, state=state, owner=owner,
            metadata=meta,
        ))
    return tuple(out)


def owner() -> str:
    """``host:pid`` of this process: who reserved a spend."""
    return f"{socket.gethostname()}:{os.getpid()}"


class SQLLedger:
    r"""The ledger contract over a SQL store; subclasses supply the connection and the transaction.

    Not used directly: open a :class:`~dpkit.ledger.SQLiteLedger` or a
    :class:`~dpkit.ledger.PostgresLedger` (or call :func:`~dpkit.ledger.open_ledger`).  See the
    module docstring for what a subclass provides, and :mod:`dpkit.ledger._base` for the contract.
    """

    _budget: Budget
    _ledger_id: str
    _where: str

    # ---- what a backend provides ------------------------------------------------------------------
    def _run(self, write: bool, work: Callable[[Any], T]) -> T:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sql(self, text: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _insert(self, conn: Any, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT and return the new row's id (``RETURNING id``; SQLite overrides)."""
        row = conn.execute(self._sql(sql + " RETURNING id"), params).fetchone()
        return int(row[0])

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- opening: the stored budget ---------------------------------------------------------------
    def _load_budget(self, conn: Any, budget: Budget | None) -> tuple[Budget, str]:
        """Read the ledger id and the stored budget, storing ``budget`` if none is (inside the open transaction)."""
        row = conn.execute(self._sql("SELECT value FROM {meta} WHERE key = 'ledger_id'")).fetchone()
        if row is None:
            raise LedgerError(f"{self._where} is a dpkit ledger without a ledger id; it is corrupted.")
        ledger_id = str(row[0])
        stored_row = conn.execute(self._sql("SELECT type, params FROM {budget} WHERE id = 1")).fetchone()
        if stored_row is None:
            if budget is None:
                raise ValueError(
                    f"the ledger {self._where} is new and has no budget; pass budget=, e.g. "
                    f"{type(self).__name__}(..., budget=ApproxDP(epsilon=1.0, delta=1e-6)) (on the command line, "
                    "--budget-epsilon and --budget-delta)."
                )
            type_name, params = guarantee_to_record(budget)
            conn.execute(self._sql("INSERT INTO {budget} (id, type, params, created_at) VALUES (1, ?, ?, ?)"),
                         (type_name, params, now()))
            return budget, ledger_id
        stored = guarantee_from_record(str(stored_row[0]), str(stored_row[1]))
        try:
            stored_budget = check_budget(stored)
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"the budget stored in {self._where} is not a valid budget ({exc}).") from None
        if budget is not None and guarantee_to_record(budget) != (stored_row[0], stored_row[1]):
            raise ValueError(
                f"budget {budget} does not match the budget {stored} stored in {self._where}; a ledger's "
                "budget is fixed when it is created. Omit budget= to use the stored one, or name a new ledger."
            )
        return stored_budget, ledger_id

    # ---- state ------------------------------------------------------------------------------------
    @property
    def budget(self) -> Budget:
        """The total budget stored in the ledger (fixed when it was created)."""
        return self._budget

    @property
    def ledger_id(self) -> str:
        """A random id made when the ledger was created; reservations carry it."""
        return self._ledger_id

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- reading the record -----------------------------------------------------------------------
    def _live(self, conn: Any) -> list[LiveSpend]:
        """Every reserved or committed spend, in id order."""
        rows = conn.execute(self._sql(
            "SELECT type, params, count, label FROM {spends} WHERE state IN ('reserved', 'committed') ORDER BY id"
        )).fetchall()
        return live_from_rows(rows, self._where)

    def _entries(self, conn: Any, only_reserved: bool = False) -> tuple[LedgerEntry, ...]:
        where = " WHERE state = 'reserved'" if only_reserved else ""
        rows = conn.execute(self._sql(f"SELECT {COLUMNS} FROM {{spends}}{where} ORDER BY id")).fetchall()
        return entries_from_rows(rows, self._ledger_id, self._where)

    def spent(self) -> Budget:
        """The composed total of every reserved and committed spend, in the budget's family.

        Returns
        -------
        PureDP, ApproxDP, ZCDP or RenyiDP
            Basic composition (Dwork & Roth Thm 3.16) for PureDP/ApproxDP budgets, the sum of rho
            (Bun & Steinke 2016, arXiv 1605.02065v1, Lemma 2.3) for ZCDP, per-order sums (Mironov
            2017, arXiv 1702.07476v3, Prop 1) for RenyiDP: an upper bound.  Uncommitted
            reservations count (see :mod:`dpkit.ledger._base`).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ZCDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=ZCDP(1.0)) as ledger:
        ...     _ = ledger.reserve(ZCDP(0.125), count=2); print(ledger.spent())
        0.25-zCDP
        """
        return self._run(False, lambda conn: compose(self._budget, self._live(conn), self._where))

    def remaining(self) -> Budget:
        """What is left of the budget under the adaptive filter's rule (as ``Accountant.remaining``).

        Returns
        -------
        PureDP, ApproxDP, ZCDP or RenyiDP
            The budget less the spent total, per parameter; zero if the record already exceeds
            the budget (possible only if the ledger was edited).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import ApproxDP; from dpkit.ledger import SQLiteLedger
        >>> budget = ApproxDP(epsilon=1.0, delta=1e-6)
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=budget) as ledger:
        ...     print(ledger.remaining())
        (1.0, 1e-06)-DP
        """
        return self._run(False, lambda conn: remaining(self._budget, self._live(conn), self._where))

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
        def work(conn: Any) -> Rollup:
            live = self._live(conn)
            counts = {str(s): int(n) for s, n in
                      conn.execute(self._sql("SELECT state, COUNT(*) FROM {spends} GROUP BY state")).fetchall()}
            return Rollup(
                budget=self._budget, spent=compose(self._budget, live, self._where),
                remaining=remaining(self._budget, live, self._where), committed=counts.get("committed", 0),
                reserved=counts.get("reserved", 0), aborted=counts.get("aborted", 0),
            )

        return self._run(False, work)

    # ---- the two-phase protocol -------------------------------------------------------------------
    def check(self, guarantee: Guarantee, *, count: int = 1) -> None:
        """Dry run: raise BudgetExceededError if reserving ``guarantee`` ``count`` times would overspend now.

        Another process may spend in between; only :meth:`reserve` decides atomically.

        Parameters
        ----------
        guarantee : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders)
        count : int, >= 1

        Raises
        ------
        BudgetExceededError
            If it would not fit.
        UnsupportedError, TypeError, ValueError
            As :meth:`reserve`.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.check(PureDP(0.5), count=2)
        """
        _, n, _, _ = validate_spend(guarantee, count, None, None)
        self._run(False, lambda conn: refuse_unless_fits(self._budget, self._live(conn), guarantee, n, self._where))

    def reserve(
        self,
        guarantee: Guarantee,
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Reservation:
        """Atomically check that a spend fits and durably record it as ``reserved``.

        Parameters
        ----------
        guarantee : PureDP, ApproxDP, ZCDP, GaussianDP or RenyiDP (finite orders)
            The guarantee of one release (for a mechanism, its ``guarantee``).
        count : int, >= 1
            How many times it is spent (composed by the budget's rule).
        label : str, optional
            Shown in :meth:`history`; defaults to ``str(guarantee)``.
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
            For ``WassersteinDP``, a callable ``RenyiDP``, or a guarantee the budget's family
            cannot compose (e.g. ``ZCDP`` against an ``ApproxDP`` budget).
        TypeError, ValueError
            For a non-guarantee, a bad ``count``, ``label`` or ``metadata``.
        LedgerError
            If the ledger stays locked past its timeout, cannot be reached, or is corrupted.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     r = ledger.reserve(PureDP(0.5), label="mean age"); ledger.commit(r); print(r.label, ledger.remaining())
        mean age 0.5-DP
        """
        (type_name, params), n, text, meta = validate_spend(guarantee, count, label, metadata)

        def work(conn: Any) -> int:  # inside the write lock, from the read of the record to the insert
            refuse_unless_fits(self._budget, self._live(conn), guarantee, n, self._where)
            stamp = now()
            return self._insert(
                conn,
                "INSERT INTO {spends} (created_at, updated_at, label, type, params, count, state, owner, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?, ?)",
                (stamp, stamp, text, type_name, params, n, owner(), meta),
            )

        row_id = self._run(True, work)
        return Reservation(id=row_id, ledger_id=self._ledger_id, guarantee=guarantee, count=n, label=text)

    def _finish(self, reservation: object, target: str) -> None:
        if not isinstance(reservation, (Reservation, LedgerEntry)):
            raise TypeError(f"expected a Reservation; got {type(reservation).__name__}.")
        if reservation.ledger_id != self._ledger_id:
            raise LedgerError(
                f"reservation {reservation.id} was issued by another ledger ({reservation.ledger_id}), not "
                f"{self._where} ({self._ledger_id})."
            )

        def work(conn: Any) -> None:
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
        TypeError
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
        TypeError
            If it is not a Reservation.

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     ledger.abort(ledger.reserve(PureDP(0.5))); print(ledger.remaining())
        1.0-DP
        """
        self._finish(reservation, "aborted")

    @contextmanager
    def spend(
        self,
        guarantee: Guarantee,
        *,
        count: int = 1,
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Iterator[Reservation]:
        """Reserve on entry; commit when the block ends normally, abort if it raises.

        Compute and add noise inside the block but return the noisy value only *after* it: the
        commit happens on leaving the block, so a value is never returned unrecorded.  A block
        that raises is aborted (its budget returned), so do not let a noisy value out of the block
        before it ends.  If the abort itself fails the reservation stays and counts as spent.

        Parameters
        ----------
        guarantee, count, label, metadata
            As :meth:`reserve`.

        Yields
        ------
        Reservation

        Raises
        ------
        BudgetExceededError
            On entry, if the spend would not fit (the block does not run).

        Examples
        --------
        >>> import tempfile; from dpkit.guarantees import PureDP; from dpkit.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d, SQLiteLedger(f"{d}/b.db", budget=PureDP(1.0)) as ledger:
        ...     with ledger.spend(PureDP(0.5)) as r: pass
        ...     print(ledger.history()[0].state)
        committed
        """
        reservation = self.reserve(guarantee, count=count, label=label, metadata=metadata)
        try:
            yield reservation
        except BaseException:
            try:
                self.abort(reservation)
            except Exception:  # noqa: BLE001 - the row stays 'reserved' and counts: the safe side
                pass
            raise
        self.commit(reservation)
