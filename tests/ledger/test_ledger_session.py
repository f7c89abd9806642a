"""A query Session and the ``dpkit query`` command on a PostgreSQL ledger chosen by its URL.

``Session(..., ledger="postgresql://...")`` and ``dpkit query --ledger postgresql://...`` record every
spend on the server before the result returns, two sessions share one budget, a bad server is a
one-line error with nothing spent, and children killed with SIGKILL at seeded random moments of a
query loop never leave the ledger below what they spent (the same check ``tests/query`` makes on a
SQLite file, with ``tests/query/query_child.py`` as the child).  Real server, real processes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpkit.cli import main
from dpkit.errors import BudgetExceededError
from dpkit.guarantees import PureDP
from dpkit.ledger import LedgerError, PostgresLedger
from dpkit.query import Session
from dpkit.random import insecure_seeded
from services import PostgresServer

QUERY_CHILD = str(Path(__file__).resolve().parents[1] / "query" / "query_child.py")
KEYS = {"k": ["a", "b", "c"]}
QUERY = "SELECT k, COUNT(*) AS n FROM t GROUP BY k"
SCHEMA = {"uid": "BIGINT", "x": "DOUBLE"}  # declared: a CSV's types are not guessed from its values


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    lines = ["uid,k,x"] + [f"{u},{'abc'[u % 3]},{u % 7}.5" for u in range(60)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sessions_on_one_postgres_ledger_share_its_budget(data: Path, postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    first = Session(data, max_partitions=1, max_rows=1, schema=SCHEMA, privacy_unit="uid", ledger=url,
                    budget=PureDP(1.0))
    second = Session(data, max_partitions=1, max_rows=1, schema=SCHEMA, privacy_unit="uid",
                     ledger=url)  # the stored budget
    try:
        assert isinstance(first.ledger, PostgresLedger)
        r = first.sql(QUERY, epsilon=0.25, keys=KEYS, rng=insecure_seeded(0))
        (entry,) = second.ledger.history()
        assert entry.state == "committed" and entry.guarantee == r.guarantee == PureDP(0.25)
        assert entry.label == QUERY and entry.metadata["engine"] == "duckdb"
        second.sql(QUERY, epsilon=0.5, keys=KEYS, rng=insecure_seeded(1))
        assert first.remaining() == PureDP(0.25) == second.remaining()
        with pytest.raises(BudgetExceededError):
            first.sql(QUERY, epsilon=0.5, keys=KEYS)
        with pytest.raises(ValueError, match="does not match the budget"):
            Session(data, max_partitions=1, max_rows=1, schema=SCHEMA, privacy_unit="uid", ledger=url,
                    budget=PureDP(2.0))
    finally:
        first.close()
        second.close()
    with PostgresLedger(url) as ledger:  # an opened ledger object is taken as it is
        with Session(data, max_partitions=1, max_rows=1, schema=SCHEMA, privacy_unit="uid", ledger=ledger) as s:
            assert s.remaining() == PureDP(0.25)


def test_dpkit_query_with_a_postgres_ledger(data: Path, postgres_server: PostgresServer,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    url = postgres_server.create_database()
    args = ["query", str(data), "--privacy-unit", "uid", "--schema", "uid=BIGINT,x=DOUBLE", "--epsilon", "0.5",
            "--keys", "k=a,b,c", "--max-partitions", "1", "--max-rows", "1", "--insecure-seed", "1",
            "--quiet", "--json", "--ledger", url, QUERY]
    assert main(args[:-1] + [QUERY]) == 2  # a new ledger without a budget: refused, nothing made
    assert "is new and has no budget" in capsys.readouterr().err
    assert main(args[:2] + ["--budget-epsilon", "1", "--budget-delta", "1e-6"] + args[2:]) == 0
    out = json.loads(capsys.readouterr().out)
    # a new ledger's filter is "auto": the pure first spend chose the zCDP filter (with all of delta), so what is
    # left is 0.5 of pure epsilon and no delta for an (epsilon, delta) spend
    with PostgresLedger(url) as ledger:
        left = "(0.5, 1e-06)-DP" if ledger.filter == "basic" else "(0.5, 0.0)-DP"
    assert out["remaining"] == left and out["cost"] == "0.5-DP"
    assert postgres_server.password not in json.dumps(out)
    assert main(args) == 0  # the stored budget: no --budget-epsilon needed for an existing ledger
    capsys.readouterr()
    assert main(args) == 3  # spent
    assert "exceed" in capsys.readouterr().err
    with PostgresLedger(url) as ledger:
        assert [e.state for e in ledger.history()] == ["committed", "committed"]
    bad = url.replace(f":{postgres_server.port}/", ":1/")
    assert main(args[:-2] + [bad, QUERY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot connect to the ledger" in err and postgres_server.password not in err


def test_a_session_on_an_unreachable_server_spends_nothing(data: Path, postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    with pytest.raises(LedgerError, match="password authentication failed"):
        Session(data, max_partitions=1, max_rows=1, schema=SCHEMA, privacy_unit="uid",
                ledger=url.replace(postgres_server.password, "wrong"), budget=PureDP(1.0))
    with PostgresLedger(url, budget=PureDP(1.0)) as ledger:
        assert ledger.history() == ()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_sigkill_mid_query_never_understates_the_spend(data: Path, postgres_server: PostgresServer,
                                                       tmp_path: Path) -> None:
    """Three children loop queries of 2**-5 (PureDP(1) admits 32), each killed after a seeded random delay.

    Wherever the kill lands (planning, in the engine, reserving, noising, committing, printing): every
    result a child printed is committed, at most the one query in flight is reserved-but-uncommitted
    and it counts as spent, and the ledger still admits exactly what is left.
    """
    epsilon = 2.0**-5
    rng = random.Random(20261124)
    urls = [postgres_server.create_database() for _ in range(3)]
    for url in urls:
        PostgresLedger(url, budget=PureDP(1.0)).close()
    logs = [tmp_path / f"loop{i}.log" for i in range(3)]
    procs = []
    for url, log in zip(urls, logs):
        with open(log, "w") as err:
            procs.append(subprocess.Popen([sys.executable, QUERY_CHILD, "loop", str(data), url, str(epsilon)],
                                          stdout=subprocess.PIPE, stderr=err, text=True, env=_env()))
    outputs = []
    try:
        for p, log in zip(procs, logs):
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", log.read_text()
        delays = sorted(rng.uniform(0.0, 0.8) for _ in procs)
        t0 = time.monotonic()
        for p, delay in zip(procs, delays):
            time.sleep(max(0.0, t0 + delay - time.monotonic()))
            p.send_signal(signal.SIGKILL)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            assert p.stdout is not None
            outputs.append(p.stdout.read())  # to EOF through the buffer readline filled (communicate would skip it)
            p.stdout.close()
            p.wait(timeout=60)
    for p, out, url, log in zip(procs, outputs, urls, logs):
        assert p.returncode == -signal.SIGKILL, log.read_text()
        printed = sum(1 for line in out.splitlines() if line.startswith("result"))
        with PostgresLedger(url) as ledger:
            states = [e.state for e in ledger.history()]
            committed, reserved = states.count("committed"), states.count("reserved")
            assert "aborted" not in states
            assert printed <= committed <= printed + 1 and reserved <= 1, (printed, states)
            assert ledger.spent() == PureDP((committed + reserved) * epsilon)  # a reserved row counts
        rest = (32 - committed - reserved) * epsilon
        with Session(data, max_partitions=1, max_rows=1, schema=SCHEMA, privacy_unit="uid", ledger=url) as s:
            assert s.remaining() == PureDP(rest)
            with pytest.raises(BudgetExceededError):
                s.sql(QUERY, epsilon=rest + epsilon, keys=KEYS)
