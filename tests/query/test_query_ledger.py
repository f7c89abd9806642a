"""Every query's spend is recorded durably before its result returns, across sessions and processes.

In-process: the committed entry, its guarantee, label and metadata; budget going down across two
Sessions on one file.  Real processes (``query_child.py`` run with this interpreter through
``subprocess``; nothing is mocked): several children racing queries against one ledger never
exceed it together, and children killed with SIGKILL at seeded random moments of a query loop never
leave the ledger below what they spent (a reserved-but-uncommitted row counts as spent) nor with a
returned result that is not committed.  Epsilons are dyadic, so totals are exact in binary.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpkit.errors import BudgetExceededError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.ledger import SQLiteLedger
from dpkit.query import Session
from dpkit.random import insecure_seeded

CHILD = str(Path(__file__).with_name("query_child.py"))
KEYS = {"k": ["a", "b", "c"]}
QUERY = "SELECT k, COUNT(*) AS n FROM t GROUP BY k"
SCHEMA = {"uid": "BIGINT", "x": "DOUBLE"}  # declared: a CSV's types are not guessed from its values


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    lines = ["uid,k,x"] + [f"{u},{'abc'[u % 3]},{u % 7}.5" for u in range(60)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start(log: Path, *args: object) -> subprocess.Popen[str]:
    """The child, its stdout a pipe read line by line (then to EOF: no bytes lost), stderr to ``log``."""
    with open(log, "w") as err:
        return subprocess.Popen([sys.executable, CHILD, *map(str, args)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True, env=_env())


def _wait_ready(procs: list[subprocess.Popen[str]], logs: list[Path]) -> None:
    for p, log in zip(procs, logs):
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        assert line == "ready", (line, log.read_text())


def _reap(procs: list[subprocess.Popen[str]]) -> list[str]:
    """Kill what still runs, read each stdout to EOF, wait: every child reaped before any assertion."""
    outs = []
    for p in procs:
        if p.poll() is None:
            p.kill()
        assert p.stdout is not None
        outs.append(p.stdout.read())
        p.stdout.close()
        if p.stdin is not None:
            p.stdin.close()
        p.wait(timeout=60)
    return outs


def _integrity_ok(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_a_returned_result_is_already_committed_with_its_guarantee(data: Path, tmp_path: Path) -> None:
    with Session(
        data,
        max_partitions=1,
        max_rows=1,
        privacy_unit="uid",
        schema=SCHEMA,
        ledger=tmp_path / "l.db",
        budget=ApproxDP(epsilon=1.0, delta=1e-6),
    ) as s:
        r = s.sql(QUERY, epsilon=0.25, keys=KEYS, rng=insecure_seeded(0))
        (entry,) = s.ledger.history()
        assert entry.state == "committed" and s.ledger.reserved_but_uncommitted() == ()
        assert entry.guarantee == r.guarantee == PureDP(0.25)
        assert entry.label == QUERY
        assert entry.metadata["engine"] == "duckdb" and sorted(entry.metadata["split"]) == ["bounding_report", "n"]
        share = entry.metadata["split"]["n"][0]
        assert share == pytest.approx(0.25 * 0.95, rel=1e-11) and share <= 0.25 * 0.95  # never above its share
        # the session's ledger runs zCDP and basic filters side by side, delta split evenly (session_filter):
        # what remains for a pure spend is what basic leaves (the charge is the mechanisms' own epsilon, its
        # shares rounded down, so never less than 0.75), with basic's half of delta
        assert s.ledger.filter == {"zcdp": 5e-7, "basic": 5e-7}
        assert r.remaining == s.remaining()
        assert s.remaining().epsilon == pytest.approx(0.75, rel=1e-11) and s.remaining().epsilon >= 0.75
        assert s.remaining().delta == pytest.approx(5e-7) and s.remaining().delta <= 5e-7  # rounded down
        r2 = s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=0.25, delta=1e-7, rng=insecure_seeded(1))
        assert r2.guarantee == ApproxDP(epsilon=0.25, delta=1e-7) == s.ledger.history()[-1].guarantee
        # private selection has no zCDP bound: the zCDP filter stops, basic composition admits it
        # (the charge is the selection's own delta, at most the 1e-7 asked for)
        assert s.remaining().epsilon == pytest.approx(0.5) and 4e-7 <= s.remaining().delta < 5e-7


def test_budget_goes_down_across_two_sessions_on_one_file(data: Path, tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    first = Session(
        data, max_partitions=1, max_rows=1, privacy_unit="uid", schema=SCHEMA, ledger=path, budget=PureDP(1.0)
    )
    # the stored budget
    second = Session(data, max_partitions=1, max_rows=1, privacy_unit="uid", schema=SCHEMA, ledger=path)
    try:
        first.sql(QUERY, epsilon=0.25, keys=KEYS, rng=insecure_seeded(0))
        assert second.remaining() == PureDP(0.75)
        second.sql(QUERY, epsilon=0.5, keys=KEYS, rng=insecure_seeded(1))
        assert first.remaining() == PureDP(0.25) == second.remaining()
        with pytest.raises(BudgetExceededError):
            first.sql(QUERY, epsilon=0.5, keys=KEYS)
        with pytest.raises(ValueError, match="budget"):
            # a different budget is refused
            Session(
                data, max_partitions=1, max_rows=1, privacy_unit="uid", schema=SCHEMA, ledger=path, budget=PureDP(2.0)
            )
        assert [e.state for e in second.ledger.history()] == ["committed", "committed"]
    finally:
        first.close()
        second.close()


def test_concurrent_processes_cannot_exceed_the_budget(data: Path, tmp_path: Path) -> None:
    """Three processes race 8 queries each of 2**-4 against PureDP(1): exactly 16 run, 8 are refused."""
    path = tmp_path / "l.db"
    SQLiteLedger(path, budget=PureDP(1.0)).close()
    logs = [tmp_path / f"race{i}.log" for i in range(3)]
    procs = [_start(log, "race", data, path, 8, 2.0**-4) for log in logs]
    try:
        _wait_ready(procs, logs)
        for p in procs:  # all ready: start them together
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            p.wait(timeout=120)
    finally:
        outs = _reap(procs)
    lines = []
    for p, out, log in zip(procs, outs, logs):
        assert p.returncode == 0, log.read_text()
        lines += out.split()
    assert len(lines) == 24 and lines.count("ok") == 16 and lines.count("refused") == 8
    _integrity_ok(path)
    with SQLiteLedger(path) as ledger:
        history = ledger.history()
        assert [e.state for e in history] == ["committed"] * 16  # a refusal writes nothing
        assert ledger.spent() == PureDP(1.0) and ledger.remaining() == PureDP(0.0)
        assert len({e.owner for e in history}) >= 2  # the processes really interleaved


def test_sigkill_at_random_points_never_understates_the_spend(data: Path, tmp_path: Path) -> None:
    """Four children loop queries of 2**-5 (PureDP(1) admits 32), each killed after a seeded random delay.

    Wherever the kill lands (planning, in the engine, reserving, noising, committing, printing):
    every result a child printed is committed (committed >= printed), at most the one query in
    flight is reserved-but-uncommitted and it counts as spent, nothing is aborted, the file is
    intact, and the ledger still admits exactly what is left, so the total is never above budget.
    """
    epsilon = 2.0**-5
    rng = random.Random(20261123)
    paths = [tmp_path / f"l{i}.db" for i in range(4)]
    for path in paths:
        SQLiteLedger(path, budget=PureDP(1.0)).close()
    logs = [tmp_path / f"loop{i}.log" for i in range(4)]
    procs = [_start(log, "loop", data, path, epsilon) for log, path in zip(logs, paths)]
    try:
        _wait_ready(procs, logs)
        delays = sorted(rng.uniform(0.0, 0.8) for _ in procs)
        t0 = time.monotonic()
        for p, delay in zip(procs, delays):
            time.sleep(max(0.0, t0 + delay - time.monotonic()))
            p.send_signal(signal.SIGKILL)
    finally:
        outputs = _reap(procs)
    counts: list[int] = []
    for p, out, path, log in zip(procs, outputs, paths, logs):
        assert p.returncode == -signal.SIGKILL, log.read_text()
        printed = sum(1 for line in out.splitlines() if line.startswith("result"))
        counts.append(printed)
        _integrity_ok(path)
        with SQLiteLedger(path) as ledger:
            states = [e.state for e in ledger.history()]
            committed, reserved = states.count("committed"), states.count("reserved")
            assert "aborted" not in states
            assert printed <= committed <= printed + 1 and reserved <= 1, (counts, states)
            assert ledger.spent() == PureDP((committed + reserved) * epsilon)  # a reserved row counts
            assert committed + reserved <= 32
        rest = (32 - committed - reserved) * epsilon
        # exactly the rest is still there
        with Session(data, max_partitions=1, max_rows=1, privacy_unit="uid", schema=SCHEMA, ledger=path) as s:
            assert s.remaining() == PureDP(rest)
            with pytest.raises(BudgetExceededError):
                s.sql(QUERY, epsilon=rest + epsilon, keys=KEYS)
            if rest > 0:
                s.sql(QUERY, epsilon=rest, keys=KEYS, rng=insecure_seeded(0))
            assert s.remaining() == PureDP(0.0)
