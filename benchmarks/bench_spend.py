"""Spending one item after another: an in-memory Accountant and a durable SQLiteLedger, 10^4 mixed spends.

The sequence cycles through three items built once, outside the loop (as a program reusing its
mechanisms would): a subsampled-Gaussian DP-SGD step (``DPSGDStep(sigma=1, q=0.01)``; first, so the
automatic filter of the ApproxDP budget is the RDP one, which takes all three), the Laplace mechanism
(``Laplace(sensitivity=1, epsilon=1e-3)``) and Gaussian noise added by the caller
(``GaussianEvent(sigma=50)``).  The budget, ``ApproxDP(epsilon=1e6, delta=1e-6)``, admits all of them.

Rows (median of ``--repeats`` runs; each run on a fresh Accountant / a fresh ledger file):

* ``Accountant.admit``: the decision and the state update only (O(1) in the history);
* ``Accountant.spend``: the same, plus the remaining budget it returns (under an ApproxDP budget a bisection
  over pure epsilons, 60 filter admissions: the per-spend cost of that return value), on ``--spend-spends``;
* ``SQLiteLedger reserve+commit`` on tmpfs (``/dev/shm``: fsync is free there, so this is the accounting and
  SQLite's own work) and on the disk holding the system temp directory (``synchronous=FULL``: two fsync'd
  transactions per spend), the latter on ``--disk-spends`` spends;
* the raw limit beside each ledger row: the same two transactions written by hand (``BEGIN IMMEDIATE``;
  INSERT; COMMIT; then an UPDATE ... COMMIT) with no accounting, on the same store and durability;
* ``reopen``: a new ledger object on the finished ``--spends`` file answering ``remaining()`` (a cold
  replay of the whole record: each distinct item parsed once, every row decided once).

For each row: total time, and the time of the first and of the last 100 spends (the ratio last/first
shows whether a spend's cost grows with the history; targets: total < 5 s, last <= 2x first).  No peer
keeps a durable budget shared by processes (see bench_ledger.py), so the ledger's reference is the raw limit.

    .venv/bin/python benchmarks/bench_spend.py                # or: bash benchmarks/run.sh spend
    .venv/bin/python benchmarks/bench_spend.py --spends 2000 --repeats 3 --no-write
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

EDGE = 100  # the first and last EDGE spends are timed apart


def _items() -> tuple[list[Any], float]:
    from dpkit.accounting.dpsgd import DPSGDStep
    from dpkit.accounting.items import GaussianEvent, as_item
    from dpkit.mechanisms import Laplace

    t0 = time.perf_counter()
    items = [as_item(DPSGDStep(sigma=1.0, sampling_rate=0.01)), as_item(Laplace(sensitivity=1.0, epsilon=1e-3)),
             as_item(GaussianEvent(sigma=50.0, sensitivity=1.0))]
    return items, time.perf_counter() - t0


def _budget() -> Any:
    from dpkit.guarantees import ApproxDP

    return ApproxDP(epsilon=1e6, delta=1e-6)


def _loop(n: int, items: list[Any], one: Callable[[Any], None]) -> dict[str, float]:
    """Spend ``n`` items (cycling) through ``one``; total, first-EDGE and last-EDGE times."""
    per = [0.0] * n
    t_all = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        one(items[i % len(items)])
        per[i] = time.perf_counter() - t0
    total = time.perf_counter() - t_all
    return {"total_s": total, "first_s": sum(per[:EDGE]), "last_s": sum(per[-EDGE:])}


def _median(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out["ratio_last_first"] = out["last_s"] / out["first_s"] if out["first_s"] > 0 else float("nan")
    out["runs"] = runs
    return out


def run_accountant(n: int, items: list[Any], method: str) -> dict[str, float]:
    from dpkit.accounting import Accountant

    acc = Accountant(_budget())
    call = acc.admit if method == "admit" else acc.spend
    return _loop(n, items, lambda it: call(it))


def run_ledger(n: int, items: list[Any], folder: str) -> tuple[dict[str, float], str]:
    from dpkit.ledger import SQLiteLedger

    path = tempfile.mktemp(suffix=".db", dir=folder)
    ledger = SQLiteLedger(path, budget=_budget())
    try:
        result = _loop(n, items, lambda it: ledger.commit(ledger.reserve(it)))
    finally:
        ledger.close()
    return result, path


def run_raw(n: int, folder: str) -> dict[str, float]:
    """The same two durable transactions per spend, by hand, with no accounting."""
    path = tempfile.mktemp(suffix=".db", dir=folder)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT, item TEXT, state TEXT)")
        text = '{"event": {"type": "x"}, "rdp": [' + ", ".join(['"0.001"'] * 26) + "]}"

        def one(_: Any) -> None:
            conn.execute("BEGIN IMMEDIATE")
            row_id = conn.execute("INSERT INTO spends (label, item, state) VALUES ('q', ?, 'reserved')",
                                  (text,)).lastrowid
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE spends SET state = 'committed' WHERE id = ?", (row_id,))
            conn.execute("COMMIT")

        return _loop(n, [None], one)
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


def run_reopen(path: str) -> float:
    from dpkit.ledger import SQLiteLedger

    t0 = time.perf_counter()
    with SQLiteLedger(path) as ledger:
        ledger.remaining()
    return time.perf_counter() - t0


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spends", type=int, default=10_000)
    ap.add_argument("--spend-spends", type=int, default=600, help="spends for the Accountant.spend row")
    ap.add_argument("--disk-spends", type=int, default=1000, help="spends for the on-disk ledger rows")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    disk = tempfile.gettempdir()
    items, build_s = _items()
    rows: list[dict[str, Any]] = []

    def row(name: str, n: int, fn: Callable[[], dict[str, float]]) -> None:
        res = _median([fn() for _ in range(args.repeats)])
        rows.append({"row": name, "spends": n, **res})
        print(f"  {name}: {res['total_s']:.3f} s total, first {EDGE} {res['first_s'] * 1e3:.1f} ms, "
              f"last {EDGE} {res['last_s'] * 1e3:.1f} ms", flush=True)

    row("Accountant.admit", args.spends, lambda: run_accountant(args.spends, items, "admit"))
    row("Accountant.spend (returns remaining)", args.spend_spends,
        lambda: run_accountant(args.spend_spends, items, "spend"))
    reopen: list[float] = []
    for label, folder, n in (("tmpfs", shm, args.spends), ("disk", disk, args.disk_spends)):
        if folder is None:
            continue

        def ledger_run(folder: str = folder, n: int = n, label: str = label) -> dict[str, float]:
            result, path = run_ledger(n, items, folder)
            if label == "tmpfs":
                reopen.append(run_reopen(path))
            _remove(path)
            return result

        row(f"SQLiteLedger reserve+commit ({label}: {folder})", n, ledger_run)
        def raw_run(folder: str = folder, n: int = n) -> dict[str, float]:
            return run_raw(n, folder)

        row(f"raw limit: two SQLite transactions by hand ({label})", n, raw_run)
    env = H.environment()
    lines = ["# Spending one item after another: Accountant and SQLiteLedger", "", H.environment_markdown(env), "",
             f"Items: DPSGDStep(sigma=1, q=0.01), Laplace(sensitivity=1, epsilon=1e-3), GaussianEvent(sigma=50), "
             f"cycled; built once in {build_s:.2f} s (the DP-SGD step's Renyi curve is most of it). Budget "
             f"ApproxDP(1e6, 1e-6) (automatic filter: RDP, fixed by the first spend). Median of {args.repeats} runs.",
             "", f"| row | spends | total (s) | first {EDGE} (ms) | last {EDGE} (ms) | last / first |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['row']} | {r['spends']} | {r['total_s']:.3f} | {r['first_s'] * 1e3:.1f} | "
                     f"{r['last_s'] * 1e3:.1f} | {r['ratio_last_first']:.2f} |")
    if reopen:
        lines += ["", f"Reopening the {args.spends}-spend tmpfs ledger and asking remaining() (a cold replay of the "
                      f"record): median {statistics.median(reopen):.3f} s over {len(reopen)} runs."]
    md = "\n".join(lines) + "\n"
    if args.no_write:
        print(md)
    else:
        H.write_report("spend", markdown=md, data={"rows": rows, "reopen_s": reopen, "items_build_s": build_s,
                                                   "edge": EDGE}, env=env)


if __name__ == "__main__":
    main()
