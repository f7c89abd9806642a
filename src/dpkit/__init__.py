"""dpkit: differential privacy with exact divergences, safe noise and tight accounting.

The public surface is flat: after ``import dpkit`` every name below is an attribute of ``dpkit``,
and every subpackage is reachable as ``dpkit.<name>`` without importing it first.  Nothing heavy
(NumPy, SciPy, mpmath, DuckDB) is imported by ``import dpkit`` itself: each name imports its
subpackage on first use (``python -X importtime -c "import dpkit"`` stays in the milliseconds).

Top-level names
    distributions  ``Laplace``, ``Gaussian``, ``DiscreteLaplace``, ``DiscreteGaussian``, ``Bernoulli``,
                   ``Finite`` (probability laws; the *mechanisms* of the same names live in
                   :mod:`dpkit.mechanisms`)
    divergences    ``kl``, ``renyi``, ``total_variation``, ``hockey_stick``, ``wasserstein``, ...
    guarantees     ``PureDP``, ``ApproxDP``, ``ZCDP``, ``RenyiDP``, ``GaussianDP``, ``PrivacyProfile``, ...
    accounting     ``Accountant`` (a budget that refuses overspending)
    queries        ``Session`` (DP SQL over DuckDB and Spark), ``open_ledger`` (a durable budget)
    randomness     ``secure_rng`` (the cryptographically secure generator every release uses)
    errors         ``DpkitError`` and its tree (see :mod:`dpkit.errors` and ``docs/errors.md``)

Subpackages: :mod:`dpkit.distributions`, :mod:`dpkit.divergences`, :mod:`dpkit.guarantees`,
:mod:`dpkit.mechanisms`, :mod:`dpkit.accounting`, :mod:`dpkit.verify` (exact checks of finite
mechanisms), :mod:`dpkit.random`, :mod:`dpkit.query`, :mod:`dpkit.ledger`, :mod:`dpkit.errors`,
:mod:`dpkit.integrations`.

>>> import dpkit as dp
>>> round(dp.kl(dp.Laplace(0, 1), dp.Laplace(1, 1)), 6)
0.367879
>>> dp.mechanisms.Laplace.__module__
'dpkit.mechanisms.laplace'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dpkit.errors import (
    ArgumentTypeError,
    BudgetExceededError,
    DataDependentFailure,
    DpkitError,
    IntegerTypeError,
    InvalidArgumentError,
    LedgerError,
    LedgerUnavailableError,
    MissingDependencyError,
    NumericalAccuracyError,
    ResourceLimitError,
    UnsupportedError,
)

if TYPE_CHECKING:  # the names __getattr__ resolves, for type checkers and IDEs
    from dpkit import (
        accounting,
        distributions,
        divergences,
        guarantees,
        integrations,
        ledger,
        mechanisms,
        query,
        random,
        verify,
    )
    from dpkit._math import Estimate
    from dpkit.accounting import Accountant
    from dpkit.distributions import Bernoulli, DiscreteGaussian, DiscreteLaplace, Finite, Gaussian, Laplace
    from dpkit.divergences import (
        approx_max_divergence,
        cross_entropy,
        hockey_stick,
        kl,
        max_divergence,
        renyi,
        renyi_entropy,
        shannon_entropy,
        statistical_distance,
        total_variation,
        wasserstein,
    )
    from dpkit.guarantees import ApproxDP, GaussianDP, PrivacyProfile, PureDP, RenyiDP, WassersteinDP, ZCDP
    from dpkit.ledger import open_ledger
    from dpkit.query import Session
    from dpkit.random import secure_rng

__version__ = "0.1.0"

_SUBPACKAGES = frozenset({
    "accounting", "distributions", "divergences", "errors", "guarantees", "integrations", "ledger",
    "mechanisms", "query", "random", "verify",
})

# name -> the module that defines it publicly; imported on first access
_LAZY = {
    "Estimate": "dpkit._math",
    "Accountant": "dpkit.accounting",
    **dict.fromkeys(["Bernoulli", "DiscreteGaussian", "DiscreteLaplace", "Finite", "Gaussian", "Laplace"],
                    "dpkit.distributions"),
    **dict.fromkeys(["approx_max_divergence", "cross_entropy", "hockey_stick", "kl", "max_divergence", "renyi",
                     "renyi_entropy", "shannon_entropy", "statistical_distance", "total_variation",
                     "wasserstein"], "dpkit.divergences"),
    **dict.fromkeys(["ApproxDP", "GaussianDP", "PrivacyProfile", "PureDP", "RenyiDP", "WassersteinDP", "ZCDP"],
                    "dpkit.guarantees"),
    "open_ledger": "dpkit.ledger",
    "Session": "dpkit.query",
    "secure_rng": "dpkit.random",
}


def __getattr__(name: str) -> object:
    """Import a subpackage, or the module defining a top-level name, on first use (PEP 562)."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f"dpkit.{name}")  # the import also binds it on this package
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBPACKAGES | set(_LAZY))


__all__ = [
    "Accountant",
    "ApproxDP",
    "ArgumentTypeError",
    "Bernoulli",
    "BudgetExceededError",
    "DataDependentFailure",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DpkitError",
    "Estimate",
    "Finite",
    "Gaussian",
    "GaussianDP",
    "IntegerTypeError",
    "InvalidArgumentError",
    "Laplace",
    "LedgerError",
    "LedgerUnavailableError",
    "MissingDependencyError",
    "NumericalAccuracyError",
    "PrivacyProfile",
    "PureDP",
    "RenyiDP",
    "ResourceLimitError",
    "Session",
    "UnsupportedError",
    "WassersteinDP",
    "ZCDP",
    "accounting",
    "approx_max_divergence",
    "cross_entropy",
    "distributions",
    "divergences",
    "errors",
    "guarantees",
    "hockey_stick",
    "integrations",
    "kl",
    "ledger",
    "max_divergence",
    "mechanisms",
    "open_ledger",
    "query",
    "random",
    "renyi",
    "renyi_entropy",
    "secure_rng",
    "shannon_entropy",
    "statistical_distance",
    "total_variation",
    "verify",
    "wasserstein",
]
