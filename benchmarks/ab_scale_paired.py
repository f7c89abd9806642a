"""Two dpkit source trees on bench_scale's 10^6-group table, paired: before/after figures for issue 16.

Two long-lived workers (one per source tree, each with its own DuckDB connection and Session, ``threads = 2``,
``preserve_insertion_order = false``, under ``nice -n 19``) are driven in turn, round after round (the tree that
goes first alternates), each running the per-unit floor, dpkit private selection and dpkit with 10^6 public keys;
each ratio is the median over rounds of that tree's query over its own floor of the same round, by wall clock and
by the worker's CPU time (less moved by other processes on shared cores).  ``python_s`` is ``total_s - engine_s``
of ``debug_timings``: planning, noise and the result's Python objects.

    git archive <base-commit> src | tar -x -C /tmp/base
    .venv/bin/python benchmarks/ab_scale_paired.py /tmp/base/src src --rounds 4

The table is bench_scale's (``~/.cache/dpkit-bench/scale-groups-v1-10000000.parquet``; run bench_scale.py once to
write it).  Prints one JSON line per round and a summary.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import IO

# one worker per source tree: reads a case name a line, runs it, answers "@@" + JSON (wall, CPU, engine seconds)
WORKER = r'''
import os, sys, json, time, tempfile, duckdb
from dpkit.guarantees import ApproxDP
from dpkit.query import Session
path = os.path.expanduser("~/.cache/dpkit-bench/scale-groups-v1-10000000.parquet")
con = duckdb.connect()
for s in ("SET preserve_insertion_order = false", "SET memory_limit = '12GB'", "SET threads = 2", "SET enable_progress_bar = false"): con.execute(s)
con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
s = Session(con, table="t", privacy_unit="uid", ledger=os.path.join(tempfile.mkdtemp(), "l.db"),
            budget=ApproxDP(epsilon=1e9, delta=0.5), max_partitions=10, max_rows=5)
q = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"
floor = "SELECT g, COUNT(*) AS units, SUM(n) AS n FROM (SELECT uid, g, COUNT(*) AS n FROM t GROUP BY uid, g) GROUP BY g"
sel = dict(epsilon=1.0, bounding_report=False, delta=1e-6)
keys = dict(epsilon=1.0, bounding_report=False, keys={"g": list(range(10**6))})
s.plan(q, **keys)
cases = {"floor": lambda: con.sql(floor).to_arrow_table(), "selection": lambda: s.sql(q, **sel, debug_timings=True),
         "keys": lambda: s.sql(q, **keys, debug_timings=True)}
print(json.dumps({"ready": __import__("dpkit").__file__}), flush=True)
for line in sys.stdin:
    name = line.strip()
    t, c = time.perf_counter(), time.process_time()
    r = cases[name]()
    out = {"wall": time.perf_counter() - t, "cpu": time.process_time() - c}
    if hasattr(r, "timings"):
        out["engine"] = r.timings["engine_s"]
    print("@@" + json.dumps(out), flush=True)
'''


def main() -> int:
    srcs = {"base": os.path.abspath(sys.argv[1]), "new": os.path.abspath(sys.argv[2])}
    pipes: dict[str, tuple[subprocess.Popen[str], IO[str], IO[str]]] = {}
    for v, src in srcs.items():
        env = dict(os.environ, PYTHONPATH=src)
        p = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdin is not None and p.stdout is not None
        pipes[v] = (p, p.stdin, p.stdout)
        print(v, p.stdout.readline().strip(), flush=True)
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 4
    res: dict[str, dict[str, list[dict[str, float]]]] = {v: {n: [] for n in ("floor", "selection", "keys")}
                                                         for v in srcs}
    loads: list[float] = []
    for r in range(rounds + 1):  # round 0: the warm-up
        order = list(srcs) if r % 2 == 0 else list(srcs)[::-1]
        for v in order:
            _, stdin, stdout = pipes[v]
            for n in ("floor", "selection", "keys"):
                stdin.write(n + "\n")
                stdin.flush()
                line = stdout.readline()
                while not line.startswith("@@"):
                    line = stdout.readline()
                if r > 0:
                    res[v][n].append(json.loads(line[2:]))
        if r > 0:
            loads.append(os.getloadavg()[0])
            print("round", r, {v: {n: round(res[v][n][-1]["wall"], 2) for n in res[v]} for v in res}, "load",
                  loads[-1], flush=True)
    for p, stdin, _ in pipes.values():
        stdin.close()
        p.wait()
    summary: dict[str, float] = {}
    for v in srcs:
        for n in ("selection", "keys"):
            for m in ("wall", "cpu"):
                summary[f"{v} {n}/floor {m}"] = round(statistics.median(
                    a[m] / b[m] for a, b in zip(res[v][n], res[v]["floor"])), 3)
            summary[f"{v} {n} python_s"] = round(statistics.median(a["wall"] - a["engine"] for a in res[v][n]), 3)
        summary[f"{v} floor median wall"] = round(statistics.median(a["wall"] for a in res[v]["floor"]), 2)
    print(json.dumps({"summary": summary, "loads": loads, "raw": res}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
