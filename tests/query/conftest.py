"""Shared set-up for the dpkit.query tests: markers, the slow-test policy, sessions over small tables.

Markers
-------
* ``spark``: the test starts PySpark (classic ``local[2]`` or Spark Connect ``remote("local[2]")``).
  py4j and grpc may leave sockets to the garbage collector, which reports them as
  ``ResourceWarning`` (through pytest's unraisable-exception hook) at a moment that depends on the
  collector; pyproject's ``filterwarnings = error`` would turn those into failures, so for
  ``spark`` tests only these two are ignored.  Nothing else is: PySpark's own warnings (e.g. a
  config it cannot set) still fail the test.
* ``slow``: left out of the default run by ``tests/conftest.py`` (``make test-all`` runs them).

Fixtures: ``open_session`` (sessions over small tables, closed afterwards) and ``spark_cluster``, a
Spark standalone master and two workers, separate JVMs started by :class:`services.SparkCluster` for
the module that asks for it and stopped when that module ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dpkit.guarantees import ApproxDP, PureDP
from dpkit.query import Session
from services import SparkCluster, Unavailable

HERE = Path(__file__).parent

# what py4j/grpc sockets may emit when collected (never dpkit): see the module docstring
SPARK_WARNINGS = ("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: starts PySpark (classic local mode, a standalone cluster or Spark "
                                       "Connect); needs Java 17")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE not in Path(str(item.path)).parents:
            continue  # only this directory's tests
        if item.get_closest_marker("spark") is not None:
            for spec in SPARK_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


#: the default budget of ``open_session`` (large: these tests are not about running out)
_OPEN_SESSION_BUDGET = ApproxDP(epsilon=1000.0, delta=0.9)


@pytest.fixture
def open_session(tmp_path: Path) -> Iterator[Callable[..., Session]]:
    """Factory: ``open_session(data, budget=..., ledger=..., **kw)``; every session is closed afterwards."""
    opened: list[Session] = []
    counter = iter(range(10**6))

    def make(data: Any, *, budget: PureDP | ApproxDP | None = _OPEN_SESSION_BUDGET, ledger: Any = None,
             privacy_unit: str = "uid", **kw: Any) -> Session:
        path = ledger if ledger is not None else tmp_path / f"ledger{next(counter)}.db"
        s = Session(data, max_partitions=1, max_rows=1, privacy_unit=privacy_unit, ledger=path, budget=budget, **kw)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


@pytest.fixture(scope="module")
def spark_cluster() -> Iterator[SparkCluster]:
    """A standalone master and two workers (1 core, 1 GiB each) on 127.0.0.1; stopped after the module."""
    try:
        cluster = SparkCluster.start(workers=2, cores=1, memory="1g")
    except Unavailable as exc:
        pytest.skip(f"no Spark standalone cluster: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
