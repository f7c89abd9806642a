"""The pairs of output laws that the accounting and mechanism layers build on: one public seam.

A mechanism's privacy is a pair of neighbouring output distributions; the pairs whose divergences
dpkit knows in closed form (:mod:`dpkit.divergences._closed`: shifted Laplace, Gaussian, discrete
Laplace and discrete Gaussian pairs, each citing its source) and the finite pair evaluated exactly
(:mod:`dpkit.divergences._numeric`) are what :mod:`dpkit.accounting` and :mod:`dpkit.mechanisms`
compose.  Internal to dpkit (not part of the user API): other packages import these names from here,
never from the private modules (the import contract in ``pyproject.toml`` checks it).
"""

from __future__ import annotations

from dpkit.divergences._closed import (
    DiscreteGaussianShift,
    DiscreteLaplaceShift,
    GaussianShift,
    LaplaceShift,
    gaussian_delta,
)
from dpkit.divergences._numeric import FinitePair

__all__ = [
    "DiscreteGaussianShift",
    "DiscreteLaplaceShift",
    "FinitePair",
    "GaussianShift",
    "LaplaceShift",
    "gaussian_delta",
]
