"""combine(): one item for a fixed batch, each family's cost the (rounded-up) sum of the parts'."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit.accounting.items import GaussianEvent, as_item, combine
from dpkit.guarantees import ZCDP, ApproxDP, GaussianDP, PureDP


def _exact_sum(values):
    return sum((Fraction(v) * k for v, k in values), Fraction(0))


@pytest.mark.parametrize("seed", range(20))
def test_each_family_is_the_sum_of_the_parts_rounded_up(seed):
    rng = np.random.default_rng(seed)
    makers = [lambda: PureDP(float(rng.uniform(0.01, 2))), lambda: GaussianEvent(sigma=float(rng.uniform(0.5, 50))),
              lambda: ZCDP(float(rng.uniform(1e-4, 1))), lambda: GaussianDP(float(rng.uniform(0.01, 2)))]
    parts = [(as_item(makers[int(rng.integers(4))]()), int(rng.integers(1, 5))) for _ in range(int(rng.integers(1, 8)))]
    b = combine(parts, label="batch")
    for name in ("epsilon", "rho"):
        vals = [(getattr(p, name), k) for p, k in parts]
        if all(math.isfinite(v) for v, _ in vals):
            exact = _exact_sum(vals)
            assert Fraction(getattr(b, name)) >= exact
            assert getattr(b, name) <= float(exact) * (1 + 1e-12)
        else:
            assert getattr(b, name) == math.inf
    mus = [(p.mu * p.mu, k) for p, k in parts]
    if all(math.isfinite(v) for v, _ in mus):
        assert Fraction(b.mu) ** 2 >= sum((Fraction(p.mu) ** 2 * k for p, k in parts), Fraction(0))
        assert b.mu <= math.sqrt(sum(p.mu * p.mu * k for p, k in parts)) * (1 + 1e-12)
    else:
        assert b.mu == math.inf
    exact_rdp = sum(k * p.rdp for p, k in parts)
    assert np.all(b.rdp >= exact_rdp)
    assert b.law is None and b.event["type"] == "Composite"


def test_a_part_without_a_family_leaves_the_batch_without_it():
    b = combine([(as_item(ApproxDP(epsilon=0.5, delta=1e-7)), 1), (as_item(PureDP(0.1)), 3)], label="q")
    assert b.approx is not None and b.approx[0] >= 0.8 and b.approx[1] >= 1e-7
    assert b.rho == math.inf and b.mu == math.inf and not np.any(np.isfinite(b.rdp))
    g = combine([(as_item(GaussianEvent(sigma=10.0)), 2)], label="g")
    assert g.approx is None and g.rho >= 2 * 0.005


def test_bad_batches_are_refused():
    with pytest.raises(ValueError, match="at least one part"):
        combine([], label="q")
    with pytest.raises(ValueError, match="count"):
        combine([(as_item(PureDP(1.0)), 0)], label="q")
