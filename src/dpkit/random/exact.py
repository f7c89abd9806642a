"""The exact-sampling building blocks that :mod:`dpkit.mechanisms` composes into its samplers.

One public seam for the layers above ``dpkit.random``: rigorous integer enclosures of
:math:`e^{-x}` and lazily refined uniforms (:mod:`dpkit.random._arith`), vectorised
Bernoulli(:math:`e^{-\\gamma}`) draws (:mod:`dpkit.random._bernoulli`) and integer Gaussian noise
(:mod:`dpkit.random._gaussian`; Canonne, Kamath & Steinke 2020, arXiv 2004.00010), and the one check of an
``rng=`` argument every sampler applies (:func:`resolve_rng`: the secure default for ``None``).  Internal to dpkit
(not part of the user API): mechanisms import these names from here, never from the private modules,
so that the private modules can change without touching another package (the import contract in
``pyproject.toml`` checks it).
"""

from __future__ import annotations

from dpkit.random._arith import LazyUniform, bernoulli_exp_exact, exp_neg_enclosure, floor_scaled
from dpkit.random._bernoulli import bernoulli_exp_vector
from dpkit.random._gaussian import gaussian_noise

__all__ = [
    "LazyUniform",
    "bernoulli_exp_exact",
    "bernoulli_exp_vector",
    "exp_neg_enclosure",
    "floor_scaled",
    "gaussian_noise",
]
