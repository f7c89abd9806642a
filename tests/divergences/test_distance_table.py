"""docs/distance-table.md (seed 001's comparison of TV, KL and Wasserstein) is what docs/distance_table.py prints,
and its numbers say what the document claims, checked against independent mpmath values."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import mpmath
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = runpy.run_path(str(ROOT / "docs" / "distance_table.py"))


def test_the_committed_table_is_the_script_output():
    committed = (ROOT / "docs" / "distance-table.md").read_text(encoding="utf-8")
    assert committed == SCRIPT["render"](), "regenerate: python docs/distance_table.py > docs/distance-table.md"


def _num(s: str) -> float:
    return math.inf if s == "∞" else float(s)


ROWS = {name: [(_num(v) if v != "—" else None) for v in vals] for name, vals in SCRIPT["rows"]()}


@pytest.mark.parametrize(("shift", "scale"), [(1, 1), (1, 5), (3, 1)])
def test_laplace_rows_have_the_corrected_tv_and_the_seed_value_is_below_it(shift, scale):
    mpmath.mp.dps = 50
    tv, seed_tv, kl_pq, kl_qp, _, w1, w2, *_ = ROWS[f"Lap(0, {scale}) vs Lap({shift}, {scale})"]
    t = mpmath.mpf(shift) / scale
    # TV by quadrature of half the L1 distance of the densities, split at the kinks 0, shift/2 and shift
    p = lambda x: mpmath.exp(-abs(x) / scale) / (2 * scale)  # noqa: E731
    q = lambda x: mpmath.exp(-abs(x - shift) / scale) / (2 * scale)  # noqa: E731
    tv_mp = mpmath.quad(lambda x: abs(p(x) - q(x)), [-mpmath.inf, 0, mpmath.mpf(shift) / 2, shift, mpmath.inf]) / 2
    assert tv == pytest.approx(float(tv_mp), rel=1e-5)  # the table prints 6 significant digits
    assert tv == pytest.approx(float(1 - mpmath.exp(-t / 2)), rel=1e-5)
    assert seed_tv == pytest.approx(float((1 - mpmath.exp(-t)) / 2), rel=1e-5) and seed_tv < tv
    assert kl_pq == kl_qp == pytest.approx(float(t + mpmath.exp(-t) - 1), rel=1e-5)
    assert w1 == w2 == shift


def test_pinsker_holds_and_formula_36_is_below_the_exact_wasserstein_for_shift_pairs():
    for name, (tv, _, _kl_pq, _, pinsker, w1, w2, f36_1, f36_2) in ROWS.items():
        assert tv <= pinsker * (1 + 1e-5), name
        assert w1 <= w2 * (1 + 1e-5), name  # W_p is non-decreasing in p
        if not name.startswith("point"):
            assert f36_1 < w1 and f36_2 < w2, name  # not an upper bound on R


def test_point_masses_show_the_three_distances_disagree():
    near = ROWS["point masses at 0 and 0.01"]
    assert near[0] == 1 and near[2] == math.inf and near[5] == pytest.approx(0.01, rel=1e-5)
