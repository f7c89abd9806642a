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


_OUTSIDE = ("../" + "shared", "THEORY" + "-NOTES", "/work/" + "shared")


def test_no_file_cites_or_links_outside_the_repository():
    """Citations point into the repository: a package user has neither the project's shared notes nor its
    folders, so no source, test, benchmark or document may name them (docs/notes.md holds the notes)."""
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for top in ("src", "tests", "benchmarks", "examples"):
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".md", ".sh", ".txt"} and p.is_file()]
    offenders = sorted(f"{p.relative_to(ROOT)}:{i}" for p in files
                       for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
                       if any(s in line for s in _OUTSIDE))
    assert not offenders, f"citations outside the repository: {offenders}"


def test_every_notes_section_cited_exists():
    notes = (ROOT / "docs" / "notes.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## §(\d+)", notes, re.M))
    cited = set()
    for top in ("src", "tests"):
        for p in (ROOT / top).rglob("*.py"):
            for ref in re.findall(r"docs/notes\.md §(\d+)((?: and §\d+)*)", p.read_text(encoding="utf-8")):
                cited |= {ref[0], *re.findall(r"\d+", ref[1])}
    assert cited, "no docstring cites docs/notes.md"
    assert cited <= sections, f"docs/notes.md has no section(s) {sorted(cited - sections)}"
