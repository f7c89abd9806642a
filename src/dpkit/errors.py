"""Exceptions raised by dpkit: one tree under :class:`DpkitError`.

The tree::

    Exception
    └── DpkitError                     everything dpkit raises on purpose
        ├── InvalidArgumentError       (also a ValueError) a bad parameter value: epsilon <= 0, NaN,
        │                              a pmf that does not sum to 1, an unknown option name
        ├── ArgumentTypeError          (also a TypeError) an argument of the wrong type
        │   └── IntegerTypeError       (also an InvalidArgumentError) a count that is not an integer
        ├── UnsupportedError           a request dpkit cannot answer soundly (e.g. converting WassersteinDP)
        ├── NumericalAccuracyError     a numerical method could not reach the accuracy it promises
        ├── BudgetExceededError        a spend that would exceed the privacy budget (nothing was spent)
        ├── LedgerError                a ledger file that is not a dpkit ledger, or an invalid state change
        │   └── LedgerUnavailableError a ledger that cannot be written now: read-only, or locked past the timeout
        ├── DataDependentFailure       the query engine failed after reading the data (its budget is spent)
        ├── MissingDependencyError     (also a ModuleNotFoundError) an optional package dpkit needs is absent
        └── ResourceLimitError         (also a MemoryError) a request would need more memory than dpkit allows

``except DpkitError`` catches every failure that dpkit reports on purpose, and nothing else: a bug
inside dpkit (or a caller's bug passed through) surfaces as whatever Python raised, with its
traceback.  Argument validation raises :class:`InvalidArgumentError` / :class:`ArgumentTypeError`,
which keep :class:`ValueError` / :class:`TypeError` as second bases, so ``except ValueError`` callers
written before the tree existed keep working.  Messages name the parameter, the constraint, the value
received and, where possible, the fix.

Deliberately outside the tree (the Python protocols they belong to require the builtin class):
``AttributeError`` from a module's ``__getattr__``, :class:`dataclasses.FrozenInstanceError` (an
``AttributeError``) from assigning to an immutable value (a distribution, mechanism, guarantee,
release, accounting state or :class:`~dpkit._math.Estimate`), ``IndexError`` from a two-element
interval's ``__getitem__``, ``NotImplementedError`` from abstract methods, ``ZeroDivisionError`` from
directed-rounding arithmetic, and ``ArithmeticError`` / ``AssertionError`` raised by internal
consistency checks (those mean a dpkit bug: please report them).
The tree is documented for users in ``docs/errors.md``.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "BudgetExceededError",
    "DataDependentFailure",
    "DpkitError",
    "IntegerTypeError",
    "InvalidArgumentError",
    "LedgerError",
    "LedgerUnavailableError",
    "MissingDependencyError",
    "NumericalAccuracyError",
    "ResourceLimitError",
    "UnsupportedError",
]


class DpkitError(Exception):
    """Base class of every error dpkit raises on purpose; ``except DpkitError`` catches them all."""


class InvalidArgumentError(DpkitError, ValueError):
    """A bad parameter value; the message names the parameter, the constraint, the value and the fix.

    Also a :class:`ValueError`, so ``except ValueError`` keeps working.

    >>> from dpkit import Laplace
    >>> try:
    ...     Laplace(0, -1)
    ... except InvalidArgumentError as e:
    ...     isinstance(e, ValueError)
    True
    """


class ArgumentTypeError(DpkitError, TypeError):
    """An argument of the wrong type; also a :class:`TypeError`, so ``except TypeError`` keeps working."""


class IntegerTypeError(ArgumentTypeError, InvalidArgumentError):
    """A count (or another argument that must be an integer) of another type: a bool, a float, a string, None.

    Both an :class:`ArgumentTypeError` (a :class:`TypeError`) and an :class:`InvalidArgumentError` (a
    :class:`ValueError`), so the composition functions' ``TypeError`` contract and the ledger's and
    Accountant's ``ValueError`` contract both hold for the one check, ``dpkit._math.check_count``. An
    integer below the allowed minimum raises a plain :class:`InvalidArgumentError`.
    """


class UnsupportedError(DpkitError):
    """A request that dpkit cannot answer soundly; the message says why and what to do instead."""


class NumericalAccuracyError(DpkitError):
    """A numerical method could not reach the accuracy it promises."""


class BudgetExceededError(DpkitError):
    """A spend that would exceed the budget; it was refused and nothing was spent."""


class LedgerError(DpkitError):
    """A ledger file that is not a dpkit ledger (or is corrupted), or an invalid state change."""


class LedgerUnavailableError(LedgerError):
    """A ledger that cannot be written now: a read-only file or database, or a lock held past the timeout.

    The ledger and its budget are intact; nothing was spent.  Fix the access (permissions, a read-only
    mount, the process holding the lock) and retry; never replace the ledger to get past this error.
    """


class DataDependentFailure(DpkitError):
    """The engine failed after reading the data; the query's budget was spent (the failure may depend on it)."""


class MissingDependencyError(DpkitError, ModuleNotFoundError):
    """A package that dpkit needs for this request is not installed; the message names it and the fix."""


class ResourceLimitError(DpkitError, MemoryError):
    """A request would need more memory than dpkit allows itself; the message says how to make it smaller."""
