"""Mechanisms with safe noise: each releases values and states its dominating pair and guarantees.

See :mod:`dpkit.mechanisms._base` for the contract and :mod:`dpkit.mechanisms._grid` for how
continuous releases are made safe on floating point (Mironov 2012).

=============================  ==============================================================
``Laplace``                    l1 sensitivity, pure epsilon-DP, grid + exact discrete Laplace
``Gaussian``                   l2 sensitivity, analytic (default) or classical calibration
``Geometric``                  integer queries, discrete Laplace noise
``DiscreteGaussianMechanism``  integer queries, discrete Gaussian noise (CKS 2020)
``Exponential``                selection, Pr[r] ∝ exp(eps u / (2 Delta_u)); eps-bounded-range
``ReportNoisyMax``             Gumbel (= exponential mechanism) or exponential noise (permute-and-flip)
``RandomizedResponse``         binary and k-ary, with an unbiased frequency estimator
=============================  ==============================================================
"""

from dpkit.mechanisms._base import DominatingPair, Mechanism, Release
from dpkit.mechanisms.discrete import DiscreteGaussianMechanism, Geometric
from dpkit.mechanisms.exponential import (
    Exponential,
    ReportNoisyMax,
    bounded_range_delta,
    bounded_range_epsilon,
    bounded_range_pair,
)
from dpkit.mechanisms.gaussian import Gaussian, analytic_gaussian_sigma, classical_gaussian_sigma
from dpkit.mechanisms.laplace import Laplace
from dpkit.mechanisms.randomized_response import FrequencyEstimate, RandomizedResponse

__all__ = [
    "DiscreteGaussianMechanism",
    "DominatingPair",
    "Exponential",
    "FrequencyEstimate",
    "Gaussian",
    "Geometric",
    "Laplace",
    "Mechanism",
    "RandomizedResponse",
    "Release",
    "ReportNoisyMax",
    "analytic_gaussian_sigma",
    "bounded_range_delta",
    "bounded_range_epsilon",
    "bounded_range_pair",
    "classical_gaussian_sigma",
]
