"""Shared pytest set-up: make tests/ importable as a package root for reference helpers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hypothesis import HealthCheck, settings  # noqa: E402

# Deterministic property tests (the same examples on every run, so CI cannot flake on a rare draw)
# and no per-example deadline (timing on a shared 2-core machine is not what these tests check).
settings.register_profile(
    "dpkit", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("dpkit")
