"""Divergences between pairs of distributions and the entropies of the seeds.

Every function takes two :mod:`dpkit.distributions` laws on a common domain and returns an
:class:`~dpkit._math.Estimate` (a float that says whether it is exact or numerical, with its error).
Paths, in order of preference: closed forms for same-family pairs; exact vectorised sums whenever
either law is finite; truncated series for other integer-valued pairs; adaptive quadrature for
other continuous pairs.  The tests check that the paths agree for the same pair.
"""

from dpkit.divergences._dispatch import evaluator
from dpkit.divergences.coupling import Coupling, maximal_coupling
from dpkit.divergences.entropy import cross_entropy, renyi_entropy, shannon_entropy
from dpkit.divergences.hockey_stick import hockey_stick
from dpkit.divergences.kl import kl
from dpkit.divergences.max_divergence import approx_max_divergence, max_divergence
from dpkit.divergences.renyi import renyi
from dpkit.divergences.total_variation import statistical_distance, total_variation
from dpkit.divergences.wasserstein import wasserstein

__all__ = [
    "Coupling",
    "approx_max_divergence",
    "cross_entropy",
    "evaluator",
    "hockey_stick",
    "kl",
    "max_divergence",
    "maximal_coupling",
    "renyi",
    "renyi_entropy",
    "shannon_entropy",
    "statistical_distance",
    "total_variation",
    "wasserstein",
]
