"""Bad input to the divergences: a ValueError that says what was wrong."""

from __future__ import annotations

import math

import pytest

from dpkit.distributions import Finite, Laplace
from dpkit.divergences import approx_max_divergence, hockey_stick, renyi, renyi_entropy, wasserstein

P, Q = Laplace(0, 1), Laplace(1, 1)


@pytest.mark.parametrize("alpha", [0.0, -1.0, math.nan, -math.inf])
def test_alpha(alpha):
    with pytest.raises(ValueError, match="alpha must be > 0"):
        renyi(P, Q, alpha)


@pytest.mark.parametrize("delta", [-0.1, 1.5, math.nan, math.inf])
def test_delta(delta):
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\]"):
        approx_max_divergence(P, Q, delta)


@pytest.mark.parametrize("eps", [math.nan, math.inf, -math.inf])
def test_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon must be finite"):
        hockey_stick(P, Q, eps)


@pytest.mark.parametrize("order", [0.5, math.nan, math.inf])
def test_wasserstein_order(order):
    with pytest.raises(ValueError, match="order"):
        wasserstein(P, Q, order)


def test_renyi_entropy_alpha():
    with pytest.raises(ValueError, match="alpha must be in"):
        renyi_entropy(Finite([0.5, 0.5]), -1.0)


def test_type_errors():
    with pytest.raises(TypeError, match="dpkit distribution"):
        renyi([0.5, 0.5], Q, 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="real number"):
        renyi(P, Q, "2")  # type: ignore[arg-type]
