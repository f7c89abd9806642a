"""Ledger throughput: reserve + commit pairs per second on SQLite and PostgreSQL with 1, 8 and 32 concurrent clients.

Each client is a process of its own with its own connection (as analysts on several machines would
be), started and made to wait at a barrier; the clock runs from the barrier to the last client's
last commit.  Every spend is ``reserve(PureDP(1e-3))`` then ``commit`` against a budget that never
runs out, so each pair is two durable transactions (SQLite: WAL, ``synchronous=FULL``; PostgreSQL:
``synchronous_commit = on``, fsync on) and the reserve reads and composes the whole record under the
ledger's lock.  The same total number of spends (``--spends``) is split over the clients, on a fresh
ledger each run; median of ``--repeats`` runs.

Peers: no DP library keeps a durable budget shared by processes (Tumult, OpenDP and PipelineDP hold
the budget in the memory of one process), so the reference beside each row is the *raw limit*: the
same two transactions written by hand with no accounting (SQLite: ``BEGIN IMMEDIATE``; INSERT;
COMMIT; then an UPDATE; PostgreSQL: ``SELECT ... FOR UPDATE`` on the budget row, INSERT, COMMIT;
then an UPDATE), on the same store with the same durability.

A last row times single reserves on a ledger that already holds ``--big`` committed spends: the
reserve reads the whole record each time (the accounting core of issue 9 is to make it incremental).

The PostgreSQL server is a throwaway one started by ``tests/services.py`` (the Debian package,
installed if missing; initdb in a temporary directory), unless ``--postgres-url`` names one.

    .venv/bin/python benchmarks/bench_ledger.py                  # or: bash benchmarks/run.sh ledger
    .venv/bin/python benchmarks/bench_ledger.py --spends 240 --repeats 3 --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

CLIENTS = (1, 8, 32)
EPSILON = 1e-3


# ---- one client (run as: bench_ledger.py --client KIND TARGET N) ---------------------------------
def _client(kind: str, target: str, n: int) -> None:
    """Open, print ``ready``, wait for a line on stdin, do ``n`` spends, print their latencies as JSON."""
    reserve_s: list[float] = []
    commit_s: list[float] = []
    if kind == "dpkit":
        from dpkit.guarantees import PureDP
        from dpkit.ledger import open_ledger

        ledger = open_ledger(target)
        spend = PureDP(EPSILON)

        def one() -> None:
            t0 = time.perf_counter()
            r = ledger.reserve(spend, label="bench")
            t1 = time.perf_counter()
            ledger.commit(r)
            reserve_s.append(t1 - t0)
            commit_s.append(time.perf_counter() - t1)
    elif target.startswith("postgresql://"):
        import psycopg

        conn = psycopg.connect(target, autocommit=True)
        conn.execute("SET synchronous_commit = on")

        def one() -> None:
            t0 = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute("SELECT id FROM dpkit_ledger.budget WHERE id = 1 FOR UPDATE")
            row = conn.execute(
                "INSERT INTO dpkit_ledger.spends (created_at, updated_at, label, type, params, count, state, owner)"
                " VALUES ('t', 't', 'raw', 'PureDP', '{\"epsilon\": \"0.001\"}', 1, 'reserved', 'me') RETURNING id"
            ).fetchone()
            conn.execute("COMMIT")
            t1 = time.perf_counter()
            conn.execute("UPDATE dpkit_ledger.spends SET state = 'committed' WHERE id = %s", (row[0],))
            reserve_s.append(t1 - t0)
            commit_s.append(time.perf_counter() - t1)
    else:
        import sqlite3

        db = sqlite3.connect(target, timeout=600, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL").fetchone()
        db.execute("PRAGMA synchronous=FULL")

        def one() -> None:
            t0 = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            cur = db.execute(
                "INSERT INTO spends (created_at, updated_at, label, type, params, count, state, owner)"
                " VALUES ('t', 't', 'raw', 'PureDP', '{\"epsilon\": \"0.001\"}', 1, 'reserved', 'me')")
            db.execute("COMMIT")
            t1 = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE spends SET state = 'committed' WHERE id = ?", (cur.lastrowid,))
            db.execute("COMMIT")
            reserve_s.append(t1 - t0)
            commit_s.append(time.perf_counter() - t1)

    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(n):
        one()
    print(json.dumps({"reserve_s": reserve_s, "commit_s": commit_s}), flush=True)


# ---- the parent -----------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(H.ROOT / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _new_ledger(backend: str, server: Any, url: str | None, folder: Path, counter: list[int]) -> str:
    from dpkit.guarantees import PureDP
    from dpkit.ledger import open_ledger

    counter[0] += 1
    if backend == "sqlite":
        target = str(folder / f"ledger{counter[0]}.db")
    elif server is not None:
        target = server.create_database("bench")
    else:  # a given server: one database per run is not ours to make; reuse it after clearing our schema
        import psycopg

        assert url is not None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS dpkit_ledger CASCADE")
        target = url
    open_ledger(target, budget=PureDP(1e9)).close()
    return target


def _run(kind: str, target: str, clients: int, total: int) -> dict[str, Any]:
    per = total // clients
    procs = [subprocess.Popen([sys.executable, __file__, "--client", kind, target, str(per)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(clients)]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a client failed to start: {line!r} {p.stderr.read() if p.stderr else ''}")
        t0 = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            assert p.stdout is not None
            outs.append(p.stdout.readline())
        wall = time.perf_counter() - t0
    finally:
        for p in procs:
            if p.poll() is None and p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=120)
            if p.stdout is not None:
                p.stdout.close()
            if p.stderr is not None:
                p.stderr.close()
    reserve = [x for o in outs for x in json.loads(o)["reserve_s"]]
    commit = [x for o in outs for x in json.loads(o)["commit_s"]]
    return {"wall_s": wall, "spends": per * clients, "per_s": per * clients / wall,
            "reserve_p50_s": statistics.median(reserve), "reserve_p95_s": statistics.quantiles(reserve, n=20)[-1],
            "commit_p50_s": statistics.median(commit)}


def _big_ledger(backend: str, target: str, n: int) -> None:
    """Fill a fresh ledger with n committed spends by raw SQL (the same record reserve would write)."""
    rows = [("t", "t", "fill", "PureDP", '{"epsilon": "1e-06"}', 1, "committed", "me")] * n
    sql = ("INSERT INTO {}spends (created_at, updated_at, label, type, params, count, state, owner)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(target)
        with conn:
            conn.executemany(sql.format(""), rows)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(target) as conn:
            with conn.cursor() as cur:
                cur.executemany(sql.format("dpkit_ledger.").replace("?", "%s"), rows)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        _client(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spends", type=int, default=960, help="spends per run, split over the clients (default 960)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--big", type=int, default=10_000, help="committed spends already in the ledger for the last row")
    ap.add_argument("--postgres-url", default=None, help="an existing server (a database of its own) instead of a throwaway one")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3 (STYLE.md §7)")
    if args.spends % max(CLIENTS):
        ap.error(f"--spends must be a multiple of {max(CLIENTS)}")
    env = H.environment(["psycopg", "psycopg-binary"])
    server = None
    sys.path.insert(0, str(H.ROOT / "tests"))
    if args.postgres_url is None:
        from services import PostgresServer

        server = PostgresServer.start()
    folder = Path(tempfile.mkdtemp(prefix="dpkit-bench-ledger-"))
    counter = [0]
    results: dict[str, Any] = {}
    pg_version = ""
    try:
        if server is not None:
            with server.connect() as conn:
                pg_version = conn.execute("SHOW server_version").fetchone()[0]
        for backend in ("sqlite", "postgres"):
            for clients in CLIENTS:
                for kind in ("dpkit", "raw"):
                    runs = []
                    for _ in range(args.repeats):
                        target = _new_ledger(backend, server, args.postgres_url, folder, counter)
                        runs.append(_run(kind, target, clients, args.spends))
                    best = sorted(runs, key=lambda r: r["per_s"])[len(runs) // 2]  # the median run
                    best["runs_per_s"] = [r["per_s"] for r in runs]
                    results[f"{backend}/{clients}/{kind}"] = best
                    print(f"  {backend:8s} {clients:2d} clients {kind:5s}: {best['per_s']:8.1f} spends/s "
                          f"(runs {', '.join(f'{r:.1f}' for r in best['runs_per_s'])})", file=sys.stderr, flush=True)
            target = _new_ledger(backend, server, args.postgres_url, folder, counter)
            _big_ledger(backend, target, args.big)
            results[f"{backend}/big"] = _run("dpkit", target, 1, 30)
            print(f"  {backend:8s} reserve on {args.big} spends: {results[f'{backend}/big']['reserve_p50_s']*1e3:.1f} ms",
                  file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.stop()

    rows = []
    for backend in ("sqlite", "postgres"):
        for clients in CLIENTS:
            d, r = results[f"{backend}/{clients}/dpkit"], results[f"{backend}/{clients}/raw"]
            rows.append([backend, clients, f"{d['per_s']:.0f}", f"{r['per_s']:.0f}", f"{r['per_s'] / d['per_s']:.1f}x",
                         H.fmt_time(d["reserve_p50_s"]), H.fmt_time(d["reserve_p95_s"]), H.fmt_time(d["commit_p50_s"]),
                         ", ".join(f"{x:.0f}" for x in d["runs_per_s"])])
    table = H.markdown_table(["ledger", "clients", "dpkit spends/s", "raw limit spends/s", "raw / dpkit",
                              "reserve p50", "reserve p95", "commit p50", "dpkit runs (spends/s)"], rows)
    big = [f"- one client reserving on a ledger already holding {args.big:,} committed spends: "
           f"{b}: reserve p50 {H.fmt_time(results[f'{b}/big']['reserve_p50_s'])} "
           f"(an empty ledger: {H.fmt_time(results[f'{b}/1/dpkit']['reserve_p50_s'])}); the reserve reads and "
           "composes the whole record" for b in ("sqlite", "postgres")]
    load_end = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    md = "\n".join([
        f"# Ledger throughput: reserve + commit, {args.spends} spends a run split over 1, 8 and 32 client processes",
        "",
        table,
        "",
        "- a spend is reserve(PureDP(1e-3)) + commit: two durable transactions; the raw limit writes the same two "
        "transactions by hand with no accounting (see the module docstring). Median run of "
        f"{args.repeats}, each on a fresh ledger.",
        *big,
        f"- PostgreSQL {pg_version or '(given server)'}: "
        + ("a throwaway server from tests/services.py on 127.0.0.1 (fsync on, synchronous_commit on), "
           "the clients on the same machine" if server is not None else "the server at --postgres-url"),
        H.environment_markdown(env),
        f"- load average at the end (1/5/15 min): {load_end}",
    ])
    if args.no_write:
        print(md)
    else:
        H.write_report("ledger", markdown=md, data={"results": results, "args": vars(args)}, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
