"""dpkit: differential privacy with exact divergences, safe noise and tight accounting.

The quick-start surface: distributions, the divergences of a pair (the seeds' privacy measures),
privacy guarantees and their conversions.  Submodules: :mod:`dpkit.distributions`,
:mod:`dpkit.divergences`, :mod:`dpkit.guarantees`, :mod:`dpkit.verify` (Remark 3.1 on finite
mechanisms), :mod:`dpkit.random` (the secure generator and exact samplers), :mod:`dpkit.query`
(DP SQL over DuckDB and Spark; ``dpkit.Session``, imported on first use).

>>> import dpkit as dp
>>> round(dp.kl(dp.Laplace(0, 1), dp.Laplace(1, 1)), 6)
0.367879
"""

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
from dpkit.errors import (
    ArgumentTypeError,
    BudgetExceededError,
    DataDependentFailure,
    DpkitError,
    InvalidArgumentError,
    LedgerError,
    MissingDependencyError,
    NumericalAccuracyError,
    ResourceLimitError,
    UnsupportedError,
)
from dpkit.guarantees import ApproxDP, GaussianDP, PrivacyProfile, PureDP, RenyiDP, WassersteinDP, ZCDP

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``dpkit.Session`` imports the query engine (and DuckDB) only when first used."""
    if name == "Session":
        from dpkit.query import Session

        return Session
    raise AttributeError(f"module 'dpkit' has no attribute {name!r}")


__all__ = [
    "Accountant",
    "approx_max_divergence",
    "ApproxDP",
    "ArgumentTypeError",
    "Bernoulli",
    "BudgetExceededError",
    "cross_entropy",
    "DataDependentFailure",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DpkitError",
    "Estimate",
    "Finite",
    "Gaussian",
    "GaussianDP",
    "hockey_stick",
    "InvalidArgumentError",
    "kl",
    "Laplace",
    "LedgerError",
    "max_divergence",
    "MissingDependencyError",
    "NumericalAccuracyError",
    "PrivacyProfile",
    "PureDP",
    "renyi",
    "renyi_entropy",
    "RenyiDP",
    "ResourceLimitError",
    "Session",
    "shannon_entropy",
    "statistical_distance",
    "total_variation",
    "UnsupportedError",
    "wasserstein",
    "WassersteinDP",
    "ZCDP",
]
