"""Mechanisms with safe noise: each releases values and states its dominating pair and guarantees.

See :mod:`dpkit.mechanisms._base` for the contract and :mod:`dpkit.mechanisms._grid` for how
continuous releases are made safe on floating point (Mironov 2012).

=============================  ==============================================================
``Laplace``                    l1 sensitivity, pure epsilon-DP, grid + exact discrete Laplace
``Gaussian``                   l2 sensitivity, analytic (default) or classical calibration
``Geometric``                  integer queries, discrete Laplace noise
``DiscreteGaussianMechanism``  integer queries, discrete Gaussian noise (CKS 2020)
=============================  ==============================================================
"""

from dpkit.mechanisms._base import DominatingPair, Mechanism, Release
from dpkit.mechanisms.discrete import DiscreteGaussianMechanism, Geometric
from dpkit.mechanisms.gaussian import Gaussian, analytic_gaussian_sigma, classical_gaussian_sigma
from dpkit.mechanisms.laplace import Laplace

__all__ = [
    "DiscreteGaussianMechanism",
    "DominatingPair",
    "Gaussian",
    "Geometric",
    "Laplace",
    "Mechanism",
    "Release",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
]
