"""Bernoulli(exp(-gamma)): binomial tests for scalar and per-draw gamma, forced exact paths, errors.

Binomial tests are two-sided and exact (scipy.stats.binomtest) at ALPHA = 1e-6 (random_stats.py).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from random_stats import binomial_ok

from dpkit.random import bernoulli_exp, insecure_seeded
from dpkit.random._bernoulli import _bernoulli_lazy, bernoulli_exp_vector

N = 10**6
GAMMAS = [0.0, 1e-300, 1e-12, 0.1, 0.5, 1.0, 1.5, 2.75, 7.0, 50.0, 1e300]


@pytest.mark.parametrize("gamma", GAMMAS)
def test_scalar_gamma_mean(gamma: float) -> None:
    draws = bernoulli_exp(gamma, N, rng=insecure_seeded(31))
    assert draws.dtype == np.bool_
    assert binomial_ok(int(draws.sum()), N, math.exp(-gamma))


@pytest.mark.parametrize("gamma", GAMMAS)
def test_per_draw_gamma_mean(gamma: float) -> None:
    """Algorithm 1 in lockstep (array gamma), same gammas."""
    draws = bernoulli_exp(np.full(N, gamma), rng=insecure_seeded(32))
    assert binomial_ok(int(draws.sum()), N, math.exp(-gamma))


def test_mixed_gammas_each_exact() -> None:
    gammas = np.array([0.0, 0.3, 1.0, 4.2, 60.0])
    grid = np.tile(gammas, 200_000)
    draws = bernoulli_exp(grid, rng=insecure_seeded(33))
    for g in gammas:
        sel = draws[grid == g]
        assert binomial_ok(int(sel.sum()), sel.size, math.exp(-g)), g


def test_extreme_gamma_is_never_one() -> None:
    assert not bernoulli_exp(50.0, N, rng=insecure_seeded(34)).any()
    assert not bernoulli_exp(np.array([1e10, 1e300]), (N // 2, 2), rng=insecure_seeded(35)).any()
    assert bernoulli_exp(0.0, 1000, rng=insecure_seeded(36)).all()


def test_power_detects_a_one_percent_error() -> None:
    """The binomial test at n = 10^6 rejects exp(-0.5 * 1.01) as exp(-0.5)."""
    draws = bernoulli_exp(0.5 * 1.01, N, rng=insecure_seeded(37))
    assert not binomial_ok(int(draws.sum()), N, math.exp(-0.5))


def test_lazy_comparison_exact_path_alone() -> None:
    """With an error bound of 0.5 every comparison is undecided in float and goes the exact way."""
    n = 20_000
    p = Fraction(1, 3)
    out = _bernoulli_lazy(np.full(n, 0.3), np.full(n, 0.5), lambda i: p, insecure_seeded(38))
    assert binomial_ok(int(out.sum()), n, 1 / 3)


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(5, 7), Fraction(22, 7)])
def test_vector_path_with_loose_error_bounds_stays_exact(gamma: Fraction) -> None:
    """A loose (but true) error bound sends many decisions to the exact path; the law is unchanged."""
    n = 20_000
    g_hat = np.full(n, float(gamma))
    g_err = np.full(n, 0.2)
    out = bernoulli_exp_vector(g_hat, g_err, lambda i: gamma, insecure_seeded(39))
    assert binomial_ok(int(out.sum()), n, math.exp(-float(gamma)))


def test_shapes_and_broadcasting() -> None:
    rng = insecure_seeded(40)
    assert isinstance(bernoulli_exp(1.0, rng=rng), np.bool_)
    assert bernoulli_exp(1.0, (2, 3), rng=rng).shape == (2, 3)
    assert bernoulli_exp([0.1, 0.2, 0.3], rng=rng).shape == (3,)
    assert bernoulli_exp([0.1, 0.2, 0.3], (4, 3), rng=rng).shape == (4, 3)
    assert isinstance(bernoulli_exp(np.array(0.5), rng=rng), np.bool_)
    assert bernoulli_exp(np.array([1, 2], dtype=np.int64), rng=rng).shape == (2,)
    assert bernoulli_exp(1.0, 5).shape == (5,)  # default secure generator


@pytest.mark.parametrize(
    ("gamma", "match"),
    [
        (math.nan, "gamma must be finite and >= 0; got nan"),
        (math.inf, "gamma must be finite and >= 0; got inf"),
        (-math.inf, "gamma must be finite and >= 0; got -inf"),
        (-0.5, "gamma must be finite and >= 0; got -0.5"),
        ([0.5, math.nan], "gamma must be finite and >= 0 everywhere; got nan"),
        ([0.5, math.inf], "gamma must be finite and >= 0 everywhere; got inf"),
        ([0.5, -1.0], "gamma must be finite and >= 0 everywhere; got -1.0"),
    ],
)
def test_bad_gamma(gamma: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bernoulli_exp(gamma, rng=insecure_seeded(0))  # type: ignore[arg-type]


def test_bad_arguments() -> None:
    rng = insecure_seeded(0)
    with pytest.raises(ValueError, match="does not broadcast to size"):
        bernoulli_exp([0.1, 0.2], 3, rng=rng)
    with pytest.raises(ValueError, match="size must be a non-negative integer"):
        bernoulli_exp(0.1, -2, rng=rng)
    with pytest.raises(TypeError, match="gamma must be a real number"):
        bernoulli_exp("0.1", rng=rng)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="gamma must be a real number"):
        bernoulli_exp(["a"], rng=rng)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="too large to be represented exactly"):
        bernoulli_exp(np.array([2**60 + 1]), rng=rng)
    with pytest.raises(TypeError, match="rng must be"):
        bernoulli_exp(0.1, rng=np.random.default_rng)  # type: ignore[arg-type]
