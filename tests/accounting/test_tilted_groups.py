"""The tilted FFT's grouped path (issue 9): factors sharing a count are composed once by a truncated product
tree and raised to the count (:func:`dpkit.accounting._pld_tilted._group_products`).

Checked, on fixed grids (fast), against

* the closed-form Gaussian profile (Dong, Roth, Su 2022, Cor 3.3): Gaussian shifts of different mu with one
  count compose to the Gaussian shift of mu^2 = k sum mu_i^2;
* mpmath: one Gaussian and two Laplace shifts, each once, delta(eps) = E[delta_G(eps - L_1 - L_2)] over the
  Laplace losses (atoms at +-t with P-masses 1/2 and e^{-t}/2, density e^{-(t - l)/2}/4 between);
* the per-factor path (``group=False``) on heterogeneous mixes with subsampled laws: the certified
  intervals overlap and agree to far below their width.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.accounting import _pld_tilted, _tilted_solve
from dpkit.accounting._pld_tilted import _trim
from dpkit.accounting._tilted_laws import LawSpec

mp.mp.dps = 30


def _gauss_delta(mu: mp.mpf, eps: mp.mpf) -> mp.mpf:
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def _bounds(parts: list[tuple[LawSpec, int]], eps: float, grid: float, group: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[float, float]:
    """(ln lower, ln upper) on delta(eps): the optimistic and pessimistic certified bounds."""
    monkeypatch.setattr(_pld_tilted, "GROUPED", group)
    ts = _tilted_solve.compose_parts(parts, eps=eps, grid=grid)
    return ts[False].log_delta_bound(eps), ts[True].log_delta_bound(eps)


def test_trim_bounds_what_it_drops() -> None:
    rng = np.random.default_rng(1)
    v = rng.random(1000) ** 8
    v /= v.sum()
    kept, off, dropped = _trim(v, 5, 1e-3, 1e-6)
    lo = off - 5
    exact = float(v[:lo].sum() + v[lo + kept.size:].sum())
    assert exact <= dropped
    assert dropped <= exact + math.sqrt(v.size - kept.size) * 1e-6 * (1 + 1e-9)
    assert float(v[:lo].sum()) <= 1e-3 and float(v[lo + kept.size:].sum()) <= 1e-3
    assert np.array_equal(kept, v[lo:lo + kept.size])


@pytest.mark.parametrize("eps", [2.0, 10.0, 18.0])
def test_gaussians_of_one_count_against_the_closed_form(eps: float, monkeypatch: pytest.MonkeyPatch) -> None:
    mus, k = (0.3, 0.4, 0.5, 0.6), 20
    parts = [(LawSpec("remove", m, 1.0), k) for m in mus]
    mu = mp.sqrt(k * sum(mp.mpf(m) ** 2 for m in mus))
    truth = float(mp.log(_gauss_delta(mu, mp.mpf(eps))))
    lo, hi = _bounds(parts, eps, 2e-3, True, monkeypatch)
    assert lo <= truth <= hi, (lo, truth, hi)
    assert hi - lo <= 2e-3


def test_one_gaussian_two_laplace_against_mpmath(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = 2.0
    mu_g, t1, t2 = 0.8, 0.5, 0.3
    parts = [(LawSpec("remove", mu_g, 1.0), 1), (LawSpec("laplace", t1), 1), (LawSpec("laplace", t2), 1)]
    mu, a, b = mp.mpf(mu_g), mp.mpf(t1), mp.mpf(t2)

    def atoms(t: mp.mpf) -> list[tuple[mp.mpf, mp.mpf]]:
        return [(t, mp.mpf(1) / 2), (-t, mp.exp(-t) / 2)]

    def dens(t: mp.mpf, x: mp.mpf) -> mp.mpf:
        return mp.exp(-(t - x) / 2) / 4

    e = mp.mpf(eps)
    d = mp.mpf(0)
    for la, pa in atoms(a):
        for lb, pb in atoms(b):
            d += pa * pb * _gauss_delta(mu, e - la - lb)
        d += pa * mp.quad(lambda y, la=la: dens(b, y) * _gauss_delta(mu, e - la - y), [-b, b])
    for lb, pb in atoms(b):
        d += pb * mp.quad(lambda x, lb=lb: dens(a, x) * _gauss_delta(mu, e - x - lb), [-a, a])
    with mp.workdps(20):
        d += mp.quad(lambda x, y: dens(a, x) * dens(b, y) * _gauss_delta(mu, e - x - y), [-a, a], [-b, b])
    truth = float(mp.log(d))
    lo, hi = _bounds(parts, eps, 1e-3, True, monkeypatch)
    assert lo <= truth <= hi, (lo, truth, hi)
    assert hi - lo <= 5e-3


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_grouped_path_agrees_with_the_per_factor_path(direction: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """5 distinct laws x 50 (Laplace, subsampled Gaussians and one Gaussian piece of another count)."""
    reps = 50
    parts = [(LawSpec("remove", 1.3, 1.0), 2), (LawSpec("laplace", 1 / 20), reps), (LawSpec("laplace", 1 / 40), reps),
             (LawSpec(direction, 1 / 0.8, 0.01), reps), (LawSpec(direction, 1 / 1.5, 0.01), reps)]
    for eps in (3.0, 4.5):
        lo_g, hi_g = _bounds(parts, eps, 2e-3, True, monkeypatch)
        lo_f, hi_f = _bounds(parts, eps, 2e-3, False, monkeypatch)
        assert lo_g <= hi_f and lo_f <= hi_g  # both certified: the intervals overlap
        assert lo_g <= hi_g
        assert abs(hi_g - hi_f) <= 1e-6 and abs(lo_g - lo_f) <= 1e-6


def test_epsilon_bounds_grouped_contains_the_per_factor_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """epsilon(delta) on one fixed grid, both paths: overlapping intervals, and the Gaussian-only closed form
    of the Gaussian parts (a lower bound on the whole composition's epsilon) below both upper ends."""
    parts = [(LawSpec("remove", 0.5, 1.0), 30), (LawSpec("remove", 0.7, 1.0), 30), (LawSpec("laplace", 0.2), 30),
             (LawSpec("remove", 1.0, 0.05), 30), (LawSpec("remove", 0.8, 0.05), 30)]
    delta = 1e-6
    out = {}
    for group in (True, False):
        monkeypatch.setattr(_pld_tilted, "GROUPED", group)
        out[group] = _tilted_solve.epsilon_bounds([parts], delta, grid=2e-3)
    (lo_g, hi_g), (lo_f, hi_f) = out[True], out[False]
    assert lo_g <= hi_f and lo_f <= hi_g
    assert abs(hi_g - hi_f) <= 1e-6 * hi_f
    mu = mp.sqrt(30 * (mp.mpf(0.5) ** 2 + mp.mpf(0.7) ** 2))
    lo_e, hi_e = mp.mpf(0), mp.mpf(100)
    for _ in range(100):
        m = (lo_e + hi_e) / 2
        lo_e, hi_e = (m, hi_e) if _gauss_delta(mu, m) > delta else (lo_e, m)
    assert float(lo_e) <= hi_g


def test_strided_leaves_give_the_exact_product() -> None:
    """Leaves whose nonzero entries are 2 or 4 grid points apart (the optimistic Laplace blocks) are convolved on
    every stride-th point only: the product, spread back, is the full convolution of the leaves within its
    certified l2 error."""
    rng = np.random.default_rng(2)
    leaves = []
    for st, n, off in ((4, 50, 8), (4, 60, -12), (2, 70, 3), (2, 40, 1), (4, 30, 5)):
        v = np.zeros(st * (n - 1) + 1)
        v[::st] = rng.random(n) + 0.5
        leaves.append((v / v.sum(), off))
    assert _pld_tilted._stride(leaves[0][0], leaves[0][1]) == (4, 8)
    items = [(_pld_tilted.Factor(grid=0.01, offset=off, mass=v, infinity_mass=0.0, pessimistic=True, eta=0.0), 7)
             for v, off in leaves]
    (group,) = _pld_tilted._group_products(items, [v for v, _ in leaves], [0.0] * len(leaves), 0.0)
    ref = leaves[0][0]
    for v, _ in leaves[1:]:
        ref = np.convolve(ref, v)
    start = sum(off for _, off in leaves)
    assert group.removed == 0.0 and group.offset >= start
    a = group.offset - start
    assert a + group.vec.size <= ref.size
    assert float(np.linalg.norm(group.vec - ref[a:a + group.vec.size])) <= group.err2
    assert float(np.sum(ref[:a]) + np.sum(ref[a + group.vec.size:])) == 0.0  # only exact zeros left out
