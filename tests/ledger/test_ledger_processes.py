"""Both ledgers across real processes: 8 concurrent writers, concurrent creation, SIGKILL at chosen and
random points, abrupt exit without closing.  Every test runs on a SQLite file and on a PostgreSQL
database of the session's server (``ledger_target``).

The children are ``ledger_child.py`` run with this interpreter (``subprocess``); nothing is mocked.
Numbers are dyadic (0.5 = 32 x 2**-6) so totals are exact in binary floating point.
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
from dpkit.guarantees import PureDP
from ledger_targets import Target

CHILD = str(Path(__file__).with_name("ledger_child.py"))
pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, *map(str, args)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )


def _read_until(proc: subprocess.Popen[str], prefix: str, timeout: float = 60.0) -> list[str]:
    """Lines the child printed up to and including the first starting with ``prefix``."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr is not None else ""
            raise AssertionError(f"child ended before {prefix!r}: {lines}, stderr {err!r}")
        lines.append(line.strip())
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"child did not print {prefix!r} in {timeout} s")


def _rest(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[str, str]:
    """Wait for the child; its stdout and stderr not read yet.  Read through the text wrappers, not
    ``communicate(timeout=...)``, which reads the pipes' descriptors and skips what ``readline`` buffered."""
    assert proc.stdout is not None and proc.stderr is not None
    proc.wait(timeout=timeout)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    if proc.stdin is not None:
        proc.stdin.close()
    return out, err


def _kill(proc: subprocess.Popen[str]) -> list[str]:
    """SIGKILL the child; return what it printed that was not read yet."""
    proc.send_signal(signal.SIGKILL)
    out, _ = _rest(proc, timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return out.split()


def _integrity_ok(target: Target) -> None:
    if target.backend == "sqlite":
        conn = sqlite3.connect(target.location)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            conn.close()
    else:  # the server keeps its own consistency; check the ledger's: every row in a known state
        with target.raw() as conn:
            assert conn.execute("SELECT COUNT(*) FROM spends WHERE state NOT IN ('reserved', 'committed', 'aborted')"
                                " OR count < 1").fetchone()[0] == 0


def _states(target: Target) -> dict[int, str]:
    with target.open() as ledger:
        return {e.id: e.state for e in ledger.history()}


def test_eight_racing_processes_cannot_exceed_the_budget(ledger_target: Target) -> None:
    """Eight processes race 12 spends each of 2**-6 against PureDP(0.5), which admits exactly 32.

    All eight are queued on the ledger's lock at once: the test holds the lock a reserve takes while
    they start their first reserve (for PostgreSQL it sees all eight waiting on it), and no child
    decides anything before the test lets go of it.
    """
    ledger_target.open(PureDP(0.5)).close()
    procs = [_start("race", ledger_target, 12, 2.0**-6) for _ in range(8)]
    try:
        for p in procs:
            _read_until(p, "ready")
        with ledger_target.hold_write_lock():
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in procs:
                _read_until(p, "attempt")
            deadline = time.monotonic() + 60
            while (waiting := ledger_target.waiting_for_lock()) is not None and waiting < 8:
                assert time.monotonic() < deadline, f"only {waiting} of 8 children wait for the lock"
                time.sleep(0.02)
            if waiting is None:  # SQLite does not show its waiters: give them time to reach the lock
                time.sleep(0.5)
            released = time.time()
        results = [(p, *_rest(p)) for p in procs]  # reap every child before asserting
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    lines = []
    for p, out, err in results:
        assert p.returncode == 0, err
        lines += out.splitlines()
    ok = [int(line.split()[1]) for line in lines if line.startswith("ok")]
    decided = [float(line.split()[-1]) for line in lines if line.startswith(("ok", "refused"))]
    assert len(decided) == 96 and min(decided) >= released  # nothing was decided while the lock was held
    assert len(ok) == 32 and len(set(ok)) == 32
    assert sum(line.startswith("refused") for line in lines) == 64
    _integrity_ok(ledger_target)
    with ledger_target.open() as ledger:
        history = ledger.history()
        assert sorted(e.id for e in history if e.state == "committed") == sorted(ok)
        assert len(history) == 32  # a refusal writes no row
        assert ledger.spent() == PureDP(0.5) and ledger.remaining() == PureDP(0.0)
        with pytest.raises(BudgetExceededError):
            ledger.reserve(PureDP(2.0**-6))


# A child for the interleaving test: spends N times, pausing PAUSE seconds after each commit so that the
# other processes (SQLite's busy handler retries at least every 0.1 s) can take the lock meanwhile.
_INTERLEAVE_CHILD = r"""
import os, sys, time
from dpkit.guarantees import PureDP
from dpkit.ledger import open_ledger
path, n, epsilon, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ledger = open_ledger(path)
print("ready", flush=True)
sys.stdin.readline()
for _ in range(n):
    r = ledger.reserve(PureDP(epsilon), label=f"pid {os.getpid()}")
    ledger.commit(r)
    print(f"ok {r.id}", flush=True)
    time.sleep(pause)
ledger.close()
"""


def _switches(owners: list[int]) -> int:
    return sum(a != b for a, b in zip(owners, owners[1:]))


def test_switch_count_tells_serial_from_interleaved() -> None:
    """The measure below: k processes run one after another give exactly k - 1 switches of owner."""
    assert _switches([1, 1, 2, 2, 3]) == 2  # serial: each process's spends one block
    assert _switches([1, 2, 1, 3, 3]) == 3  # process 1 interrupted by process 2


def test_processes_spending_concurrently_interleave_in_the_ledger(ledger_target: Target) -> None:
    """Four processes spending at once interleave: in the ledger's own order (row ids), some process's
    spends are interrupted by another's.  Run one after another, or with a ledger that kept a process's
    lock across its spends, the rows would form one block per process, exactly 3 owner switches for 4
    processes; the test asserts more than that.  Each child pauses 0.2 s after a commit, longer than the
    longest retry sleep of SQLite's busy handler (0.1 s), so a waiting process gets the lock in that
    pause unless it was itself descheduled for the whole of every pause of every other process."""
    n_procs, spends, epsilon = 4, 6, 2.0**-6
    ledger_target.open(PureDP(1.0)).close()
    procs = [subprocess.Popen([sys.executable, "-c", _INTERLEAVE_CHILD, str(ledger_target), str(spends), str(epsilon),
                               "0.2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=_env()) for _ in range(n_procs)]
    try:
        for p in procs:
            _read_until(p, "ready")
        for p in procs:  # start them together
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [(p, *_rest(p)) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    reported: dict[int, int] = {}
    for p, out, err in results:
        assert p.returncode == 0, err
        ids = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ok")]
        assert len(ids) == spends
        reported |= dict.fromkeys(ids, p.pid)
    with ledger_target.open() as ledger:
        history = sorted(ledger.history(), key=lambda e: e.id)
    assert [e.id for e in history] == sorted(reported) and all(e.state == "committed" for e in history)
    assert all(e.label == f"pid {reported[e.id]}" for e in history)  # the ledger's record matches the children's
    owners = [reported[e.id] for e in history]
    assert _switches(owners) > n_procs - 1, f"the processes ran one after another: owners in id order {owners}"


def test_concurrent_processes_creating_one_ledger(ledger_target: Target) -> None:
    """Four processes open the same new ledger with the same budget at once: one schema, four spends."""
    start_at = time.time() + 3.0
    procs = [_start("create", ledger_target, start_at) for _ in range(4)]
    results = [(p, p.communicate(timeout=120)[1]) for p in procs]  # reap every child before asserting
    for p, err in results:
        assert p.returncode == 0, err
    _integrity_ok(ledger_target)
    with ledger_target.open(PureDP(0.5)) as ledger:
        assert [e.state for e in ledger.history()] == ["committed"] * 4
        assert ledger.spent() == PureDP(4 * 2.0**-6)


@pytest.mark.parametrize("stage", ["opened", "reserved", "committed"])
def test_sigkill_at_each_stage(ledger_target: Target, stage: str) -> None:
    path = ledger_target
    path.open(PureDP(1.0)).close()
    proc = _start("stop", path, stage, 0.25)
    lines = _read_until(proc, stage)
    _kill(proc)
    _integrity_ok(path)
    with path.open() as ledger:
        history = ledger.history()
        if stage == "opened":  # killed before reserve: nothing written, nothing spent
            assert history == () and ledger.remaining() == PureDP(1.0)
            return
        (entry,) = history
        assert lines[-1] == f"{stage} {entry.id}"
        assert entry.state == stage  # a reported reservation or commit survived the kill
        assert ledger.spent() == PureDP(0.25)  # a killed-after-reserve spend still counts
        assert ledger.reserved_but_uncommitted() == (() if stage == "committed" else (entry,))


def test_sigkill_at_random_points_never_overspends(ledger_target: Target) -> None:
    """Children reserving and committing in a loop are killed after seeded random delays.

    Whatever the point (mid-transaction included), the file stays intact, every reservation or
    commit a child reported is in the file in at least that state, every reserved row counts, and
    the total never exceeds the budget.  Each round has a fresh ledger admitting exactly 64
    spends, so the kill lands while the child is still spending; a second child then spends
    the rest, and exactly the budget is used.
    """
    epsilon, budget = 2.0**-6, PureDP(1.0)  # admits exactly 64
    rng = random.Random(20261122)
    for round_ in range(6):
        path = ledger_target.other() if round_ else ledger_target
        path.open(budget).close()
        proc = _start("loop", path, epsilon)
        _read_until(proc, "ready")
        time.sleep(rng.uniform(0.0, 0.04))
        reported: dict[int, str] = {}
        for kind, id_ in _pairs(_kill(proc)):
            reported[id_] = "committed" if "committed" in (kind, reported.get(id_)) else kind
        _integrity_ok(path)
        states = _states(path)
        for id_, kind in reported.items():
            assert states[id_] in (("reserved", "committed") if kind == "reserved" else ("committed",))
        live = sum(1 for s in states.values() if s in ("reserved", "committed"))
        with path.open() as ledger:
            assert ledger.spent() == PureDP(live * epsilon)  # reserved rows count
            assert live <= 64
            while True:  # the ledger still works, and admits exactly what is left
                try:
                    ledger.commit(ledger.reserve(PureDP(epsilon)))
                except BudgetExceededError:
                    break
            assert ledger.spent() == budget
            assert len(ledger.reserved_but_uncommitted()) == sum(1 for s in states.values() if s == "reserved")


def _pairs(words: list[str]) -> list[tuple[str, int]]:
    """('reserved', 7) pairs from a child's printed words."""
    out = []
    for kind, value in zip(words, words[1:]):
        if kind in ("reserved", "committed") and value.isdigit():
            out.append((kind, int(value)))
    return out


def test_committed_spend_survives_abrupt_exit(ledger_target: Target) -> None:
    path = ledger_target
    path.open(PureDP(1.0)).close()
    proc = _start("exit", path, 0.5)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    with path.open() as ledger:
        (entry,) = ledger.history()
    assert out.strip() == f"committed {entry.id}" and entry.state == "committed"
    _integrity_ok(path)
