"""Subsampling schemes checked by brute force on a tiny population.

The independent check: a finite base mechanism M(S) = clamp(sum of the records in S + Z) is run on a
random subset S of a population of n <= 6 records; the subsampled mechanism's exact output law is
the average of M over *every* subset (weights q^|S| (1-q)^(n-|S|) for Poisson, 1/C(n, m) for a
batch of m), and its exact privacy profile is the largest hockey-stick divergence over every pair
of neighbouring data sets (both orders), for one run and for k = 2 independent runs.  The PLDs
built from the base mechanism's dominating pair must lie above it, and their [lower, upper] must
hold the hockey-stick of the subsampled pair itself (computed exactly as a finite pair here).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpkit.accounting.subsampling import (
    SubsampledInterval,
    pld_subsampled,
    subsampled_epsilon_interval,
    subsampling_method,
)
from dpkit.distributions import DiscreteLaplace, Finite, Gaussian

EPSILONS = np.array([0.0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0, 1.5, 2.5])
LO = -4  # output range of the clamped mechanism: [LO, n + 4]


# ---- the base mechanisms: additive integer noise, clamped (post-processing of sum + Z) ---------
def dlap_noise(t: float, reach: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Discrete Laplace(t) on [-reach, reach] with each tail folded exactly into its end point."""
    r = math.exp(-1.0 / t)
    z = np.arange(-reach, reach + 1)
    pmf = (1 - r) / (1 + r) * r ** np.abs(z).astype(float)
    tail = r ** (reach + 1) / (1 + r)  # P(Z > reach) = P(Z < -reach)
    pmf[0] += tail
    pmf[-1] += tail
    return z, pmf


def uniform_noise() -> tuple[np.ndarray, np.ndarray]:
    return np.arange(3), np.full(3, 1.0 / 3.0)


def output_law(total: int, noise: tuple[np.ndarray, np.ndarray], hi: int) -> np.ndarray:
    """Law of clamp(total + Z, LO, hi) on the integers LO..hi.  With DLap noise folded at +-reach the
    clamp is exact as long as LO and hi lie inside total +- reach (they do here)."""
    z, pmf = noise
    out = np.clip(total + z, LO, hi) - LO
    law = np.zeros(hi - LO + 1)
    np.add.at(law, out, pmf)
    return law


def subsampled_law(data: tuple[int, ...], sampling: str, q: float, m: int, noise, hi: int) -> np.ndarray:
    """Exact output law of M o S on ``data``, summing over every subset S."""
    n = len(data)
    law = np.zeros(hi - LO + 1)
    if sampling == "poisson":
        for size in range(n + 1):
            for S in itertools.combinations(range(n), size):
                w = q**size * (1 - q) ** (n - size)
                law += w * output_law(sum(data[i] for i in S), noise, hi)
    else:
        batches = list(itertools.combinations(range(n), m))
        for S in batches:
            law += output_law(sum(data[i] for i in S), noise, hi) / len(batches)
    return law


def hockey(p: np.ndarray, q: np.ndarray, eps: np.ndarray) -> np.ndarray:
    return np.array([float(np.sum(np.maximum(p - math.exp(e) * q, 0.0))) for e in eps])


def kfold(law: np.ndarray, k: int) -> np.ndarray:
    out = law
    for _ in range(k - 1):
        out = np.outer(out, law).reshape(-1)
    return out


def brute_force_profile(sampling: str, neighboring: str, n: int, values: tuple[int, ...], q: float, m: int,
                        noise, k: int) -> np.ndarray:
    """max over neighbouring data sets (both orders) of delta(eps) of k runs of M o S."""
    hi = n * max(values) + 4
    best = np.zeros(EPSILONS.size)
    pairs = []
    if neighboring == "add_remove":
        for D in itertools.product(values, repeat=n - 1):
            for x in values:
                pairs.append((D, D + (x,)))
    else:
        for D in itertools.product(values, repeat=n):
            for i, x in itertools.product(range(n), values):
                if x != D[i]:
                    pairs.append((D, D[:i] + (x,) + D[i + 1:]))
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def law(D: tuple[int, ...]) -> np.ndarray:
        if D not in cache:
            cache[D] = kfold(subsampled_law(D, sampling, q, m, noise, hi), k)
        return cache[D]

    for D, E in pairs:
        a, b = law(D), law(E)
        best = np.maximum(best, np.maximum(hockey(a, b, EPSILONS), hockey(b, a, EPSILONS)))
    return best


def base_pair(noise, shift: int) -> tuple[Finite, Finite]:
    """The dominating pair of the base for a change of the sum by ``shift``: (shift + Z, Z)."""
    z, pmf = noise
    support = np.arange(int(z.min()), int(z.max()) + shift + 1)
    P = np.zeros(support.size)
    Q = np.zeros(support.size)
    P[z - support[0] + shift] = pmf
    Q[z - support[0]] = pmf
    return Finite(P), Finite(Q)


def symmetric_completion(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric finite pair with the hockey-stick of (a, b) at eps >= 0: each point of positive
    loss kept and mirrored (masses swapped), every other point merged into one of loss 0."""
    up = a > b
    a_star = np.concatenate([a[up], b[up], [1.0 - a[up].sum() - b[up].sum()]])
    b_star = np.concatenate([b[up], a[up], [1.0 - a[up].sum() - b[up].sum()]])
    return a_star, b_star


def pair_profile(P: Finite, Q: Finite, q: float, directions: tuple[str, ...], k: int) -> np.ndarray:
    """Exact delta(eps) of k runs of the subsampled pair(s), as finite pairs (substitution: the
    symmetric completion of (qP + (1-q)Q, Q), which is what composes; module docstring)."""
    p, qq = P.probabilities, Q.probabilities
    mix = q * p + (1 - q) * qq
    out = np.zeros(EPSILONS.size)
    for direction in directions:
        a, b = (mix, qq) if direction == "remove" else (qq, mix)
        if directions == ("remove",):
            a, b = symmetric_completion(a, b)
        out = np.maximum(out, hockey(kfold(a, k), kfold(b, k), EPSILONS))
    return out


SCHEMES = [
    # sampling, neighbouring, record values, shift of the base pair, directions, tight on this population
    ("poisson", "add_remove", (0, 1), 1, ("remove", "add"), True),
    ("without_replacement", "substitute", (0, 1), 1, ("remove",), True),
    ("poisson", "substitute", (0, 1), 1, ("remove",), True),
    ("without_replacement", "substitute", (-1, 0, 1), 2, ("remove",), False),
    ("poisson", "substitute", (-1, 0, 1), 2, ("remove",), False),
]


@pytest.mark.parametrize("noise_name", ["uniform", "dlap"])
@pytest.mark.parametrize("sampling,neighboring,values,shift,directions,tight", SCHEMES)
@pytest.mark.parametrize("k", [1, 2])
def test_subsampled_pld_is_above_the_brute_force_profile(sampling, neighboring, values, shift, directions, tight,
                                                       noise_name, k):
    """Brute force over every data set and subset of a population of n records: the mechanism's true
    delta(eps) <= the pair's exact delta in [PLD lower, PLD upper]; where the pair is attained on this
    population (records in {0, 1}), the true profile equals the pair's."""
    noise = uniform_noise() if noise_name == "uniform" else dlap_noise(1.5)
    n = 4 if len(values) == 3 else 5
    m = 2
    q = m / n if sampling == "without_replacement" else 0.35
    truth = brute_force_profile(sampling, neighboring, n, values, q, m, noise, k)
    P, Q = base_pair(noise, shift)
    exact_pair = pair_profile(P, Q, q, directions, k)
    upper = np.zeros(EPSILONS.size)
    lower = np.zeros(EPSILONS.size)
    for direction in directions:
        kw = dict(sampling_rate=q, sampling=sampling, neighboring=neighboring, direction=direction, grid=1e-3)
        hi = pld_subsampled(P, Q, **kw).self_compose(k)
        lo = pld_subsampled(P, Q, pessimistic=False, **kw).self_compose(k)
        upper = np.maximum(upper, [hi.delta(e) for e in EPSILONS])
        lower = np.maximum(lower, [lo.delta(e) for e in EPSILONS])
    assert np.all(truth <= exact_pair + 1e-12), (truth, exact_pair)
    assert np.all(lower <= exact_pair + 1e-12) and np.all(exact_pair <= upper + 1e-12), (lower, exact_pair, upper)
    assert np.all(upper - lower <= 5e-3 + 0.02 * exact_pair)
    if tight and noise_name == "uniform":  # the pair is the mechanism on {1} vs {0} (or {} vs {1})
        np.testing.assert_allclose(truth, exact_pair, rtol=1e-9, atol=1e-12)


def test_poisson_substitution_bound_is_loose_where_records_take_both_signs():
    """Records in {-1, 0, 1}: the shift-2 pair is a valid bound for Poisson substitution but above the
    true profile (the exact worst case needs three distributions), and the label says so."""
    noise = uniform_noise()
    truth = brute_force_profile("poisson", "substitute", 4, (-1, 0, 1), 0.35, 2, noise, 1)
    P, Q = base_pair(noise, 2)
    exact_pair = pair_profile(P, Q, 0.35, ("remove",), 1)
    assert np.all(truth <= exact_pair + 1e-12)
    assert float(np.max(exact_pair - truth)) > 0.01
    assert subsampling_method("poisson", "substitute").startswith("upper bound")
    assert subsampling_method("without_replacement", "substitute").startswith("dominating pair")


def test_interval_carries_its_method_and_orders_the_schemes():
    """For one Gaussian base pair (shift 2 = substitution sensitivity), sampling without replacement
    and the Poisson substitution bound use the same pair; Poisson add/remove with the shift-1 pair
    is far tighter (a reason to prefer it where the data allow)."""
    kw = dict(sampling_rate=0.02, k=200, delta=1e-5)
    wor = subsampled_epsilon_interval(Gaussian(0, 1), Gaussian(2, 1), sampling="without_replacement",
                                      neighboring="substitute", **kw)
    psub = subsampled_epsilon_interval(Gaussian(0, 1), Gaussian(2, 1), sampling="poisson",
                                       neighboring="substitute", **kw)
    padd = subsampled_epsilon_interval(Gaussian(0, 1), Gaussian(1, 1), **kw)
    assert isinstance(wor, SubsampledInterval) and wor.method.startswith("dominating pair")
    assert psub.method.startswith("upper bound")
    assert wor.lower == psub.lower and wor.upper == psub.upper
    assert padd.upper < wor.lower
    assert wor.width <= 1e-3 * wor.upper


def test_discrete_laplace_base_pair_is_accepted():
    iv = subsampled_epsilon_interval(DiscreteLaplace(0, 2.0), DiscreteLaplace(1, 2.0), sampling_rate=0.3, k=3,
                                     delta=1e-3)
    assert 0.0 < iv.lower <= iv.upper < 1.0


@pytest.mark.parametrize("kwargs,match", [
    (dict(sampling="without_replacement", neighboring="add_remove"), "substitution neighbours only"),
    (dict(sampling="bootstrap"), "sampling must be"),
    (dict(neighboring="swap"), "neighboring must be"),
    (dict(neighboring="substitute", direction="add"), "direction must be one of"),
    (dict(sampling_rate=1.5), r"\(0, 1\]"),
    (dict(sampling_rate=0.0), "sampling_rate"),
])
def test_bad_scheme_is_refused(kwargs, match):
    args = dict(sampling_rate=0.1) | kwargs
    with pytest.raises(ValueError, match=match):
        pld_subsampled(Gaussian(0, 1), Gaussian(1, 1), **args)
