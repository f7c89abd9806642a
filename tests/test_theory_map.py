"""docs/theory.md names real code and tests; and one seed counterexample as an executable fact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpkit.distributions import Finite
from dpkit.divergences import hockey_stick, max_divergence

ROOT = Path(__file__).resolve().parents[1]


def test_every_path_named_in_theory_md_exists():
    text = (ROOT / "docs" / "theory.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:src|tests)/[^`:\s]+)", text))
    assert paths, "docs/theory.md names no paths"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/theory.md names missing paths: {missing}"


def test_every_test_named_in_theory_md_exists():
    text = (ROOT / "docs" / "theory.md").read_text(encoding="utf-8")
    names = set(re.findall(r"`(?:[^`]*::)?(test_\w+)`", text)) | set(re.findall(r"::(test_\w+)", text))
    assert names
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py"))
    missing = sorted(n for n in names if f"def {n}(" not in sources)
    assert not missing, f"docs/theory.md names tests that do not exist: {missing}"


@pytest.mark.parametrize("delta", [1e-3, 0.1])
def test_seed_004_rule_is_wrong(delta):
    """Seed 004 says (eps, delta)-DP is the max divergence over the p_i >= delta; it is not."""
    P = Finite([0.6 * delta, 0.6 * delta, 1 - 1.2 * delta])
    Q = Finite([0.0, 0.0, 1.0])
    # the seed's rule looks only at masses >= delta: here just the last point, ratio <= 1 => "(0, delta)-DP"
    big = P.probabilities >= delta
    assert not big[:2].any() and P.probabilities[2] / Q.probabilities[2] <= 1
    # but the true smallest delta at epsilon = 0 is 1.2 delta
    assert float(hockey_stick(P, Q, 0.0)) == pytest.approx(1.2 * delta, rel=1e-12)
    assert max_divergence(P, Q) == float("inf")
