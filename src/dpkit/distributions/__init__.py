"""Distributions of dpkit: Laplace, Gaussian, discrete Laplace, discrete Gaussian, Bernoulli, finite.

See :mod:`dpkit.distributions._base` for the common contract.
"""

from dpkit.distributions._base import ContinuousDistribution, DiscreteDistribution, Distribution
from dpkit.distributions.continuous import Gaussian, Laplace
from dpkit.distributions.discrete import Bernoulli, DiscreteGaussian, DiscreteLaplace
from dpkit.distributions.finite import Finite, align

__all__ = [
    "Bernoulli",
    "ContinuousDistribution",
    "DiscreteDistribution",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Distribution",
    "Finite",
    "Gaussian",
    "Laplace",
    "align",
]
