"""state.mul_up's fast path (Dekker's TwoProduct) against the exact decision with fractions."""

from __future__ import annotations

import math
import random
from fractions import Fraction

from dpkit.accounting.state import mul_up


def _exact(k: float, v: float) -> float:
    p = k * v
    if p == 0.0 or not math.isfinite(p):
        return p
    return p if Fraction(p) >= Fraction(k) * Fraction(v) else math.nextafter(p, math.inf)


def test_mul_up_matches_the_exact_decision() -> None:
    rng = random.Random(9)
    cases = [(3.0, 0.1), (10.0, 0.1), (1.0, 0.3), (1000.0, 1.0 / 3.0), (7.0, 1e-300), (2.0, 1e308), (0.0, 5.0),
             (5.0, math.inf), (-3.0, 0.1)]
    for _ in range(20000):
        k = float(rng.randint(1, 10**6)) if rng.random() < 0.5 else rng.uniform(0.0, 1e3)
        v = math.ldexp(rng.random() + 0.5, rng.randint(-60, 60))
        cases.append((k, v))
    for k, v in cases:
        got = mul_up(k, v)
        assert got == _exact(k, v), (k, v)
        if math.isfinite(got) and got != 0.0:
            assert Fraction(got) >= Fraction(k) * Fraction(v)
