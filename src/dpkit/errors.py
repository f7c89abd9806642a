"""Exceptions raised by dpkit.

The tree::

    Exception
    ├── ValueError                 bad parameter values (epsilon <= 0, NaN, a pmf that does not sum to 1)
    ├── TypeError                  wrong argument types
    └── DpkitError                 domain conditions that are not simple bad values
        ├── UnsupportedError       a request dpkit cannot answer soundly (e.g. converting WassersteinDP)
        ├── NumericalAccuracyError a numerical method could not reach the accuracy it promises
        ├── BudgetExceededError    a spend that would exceed the privacy budget (nothing was spent)
        └── LedgerError            a ledger file that is not a dpkit ledger, or an invalid state change

Bad values raise plain :class:`ValueError` so that callers can catch them the usual way; messages
name the parameter, the constraint, the value received and, where possible, the fix.
"""

from __future__ import annotations

__all__ = ["BudgetExceededError", "DpkitError", "LedgerError", "NumericalAccuracyError", "UnsupportedError"]


class DpkitError(Exception):
    """Base class of dpkit's domain errors."""


class UnsupportedError(DpkitError):
    """A request that dpkit cannot answer soundly; the message says why and what to do instead."""


class NumericalAccuracyError(DpkitError):
    """A numerical method could not reach the accuracy it promises."""


class BudgetExceededError(DpkitError):
    """A spend that would exceed the budget; it was refused and nothing was spent."""


class LedgerError(DpkitError):
    """A ledger file that is not a dpkit ledger (or is corrupted), or an invalid state change."""
