"""Shared pytest set-up: tests/ importable as a package root for reference helpers; the slow-test policy."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Deterministic property tests (the same examples on every run, so CI cannot flake on a rare draw)
# and no per-example deadline (timing on a shared 2-core machine is not what these tests check).
settings.register_profile(
    "dpkit", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("dpkit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` are left out of the default run, as pyproject's marker says; a run that
    selects them with ``-m`` (``make test-all`` passes ``-m "slow or not slow"``) runs them."""
    if "slow" in (config.getoption("-m") or ""):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with -m slow (or make test-all)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip_slow)
