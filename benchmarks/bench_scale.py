"""dpkit.query where the work grows: 10^6 groups, 10^6 public keys, 10^8 and 10^9 rows (issue 16).

Every dpkit row has the raw limits of the same engine on the same data beside it, from the same run:

* ``plain``: the non-private ``GROUP BY key`` (``COUNT(*)``), fetched as Arrow;
* ``floor``: the two-level ``GROUP BY (unit, key)`` then ``key`` that any per-unit contribution bounding
  must at least do (no ranking, no clamping), fetched as Arrow.

Bars (issue 16): with 10^6 groups, dpkit within 3x of ``plain`` and 1.5x of ``floor``; 10^6 public keys
answered; 10^9 rows answered within the machine's memory.

Scenarios (each row in its own subprocess with a timeout and an address-space cap, ``_harness.run_isolated``;
median of ``--repeats`` after one warm-up, except the 10^9-row rows, which run once, cold):

* ``groups``: ``--rows`` (10^7) rows, 10^6 units, 10^6 groups, each row's unit and group drawn by hash
  (so nearly every (unit, group) pair is distinct: the per-unit table is as large as the input), in
  Parquet.  dpkit with private partition selection (``delta=1e-6``) and with the 10^6 groups as public
  keys (the keys' registration, once per session, timed apart as ``first plan``); OpenDP's Polars
  context with the same 10^6 keys (``with_keys``).
* ``keys``: 10^4, 10^5 and 10^6 public keys on the same table: dpkit's first plan (registers the keys)
  and the query.
* ``paired``: the ``groups`` table; plain, floor, dpkit private selection and dpkit with 10^6 public keys
  taken in turn in one process, ``--repeats`` rounds after one warm-up round, each ratio the median of
  the per-round ratios (on shared cores the load drifts between the separate rows above).
* ``rows``: ``--big-rows`` (10^8; ``--huge`` adds 10^9) rows, 10^6 units, 100 categories, each unit with
  3 favourite categories holding ~90% of its rows, written once to Parquet (row groups of 2^20 rows) and
  read in place.  dpkit with 100 public keys and with private selection, ``max_partitions=3``,
  ``max_rows=100``.  Several sizes: ``--big-rows 100000000 300000000``.
* ``rows-paired`` (only when named in ``--only``): the ``rows`` table, plain, floor, dpkit private selection
  and dpkit with the 100 public keys taken in turn as in ``paired`` (the bar of issue 16 at 10^8 rows:
  dpkit within 1.3x of the floor).

Every row's DuckDB has ``memory_limit`` (``--memory-limit``, 12GB), ``temp_directory`` (``--temp-dir``,
``<data-dir>/spill``) for spilling beyond it, ``preserve_insertion_order = false`` and, with ``--threads``,
a thread count (on shared cores: ``--threads 2`` under ``nice -n 19``); each row notes the load average
after it.

    bash benchmarks/run.sh scale                               # groups, keys and 10^8 rows
    .bench-venv/bin/python benchmarks/bench_scale.py --huge    # and 10^9 rows (7.1 GB of Parquet)
    .venv/bin/python benchmarks/bench_scale.py --rows 1000000 --big-rows 2000000 --no-write   # a smoke run
    nice -n 19 .venv/bin/python benchmarks/bench_scale.py --only rows-paired --big-rows 100000000 --threads 2 \
        --data-dir /tmp/dpkit-scale                            # the 10^8-row ratio to the floor
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

GENERATOR_VERSION = 1

PRELUDE = """
import os, statistics, time, warnings
warnings.simplefilter("ignore")
P = {params!r}
from _harness import timed_runs as _timed
def _settings(con):  # the same engine settings for every row: a memory limit, spilling beyond it, threads
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET memory_limit = '{{P['memory_limit']}}'")
    if P.get("temp_directory"):
        con.execute(f"SET temp_directory = '{{P['temp_directory']}}'")
    if P.get("threads"):
        con.execute(f"SET threads = {{int(P['threads'])}}")
"""

RAW = """
import duckdb
con = duckdb.connect()
_settings(con)
src = f"read_parquet('{P['path']}')"
if P["kind"] == "plain":
    sql = f"SELECT {P['key']}, COUNT(*) AS n FROM {src} GROUP BY {P['key']}"
else:
    sql = (f"SELECT {P['key']}, COUNT(*) AS units, SUM(n) AS n FROM (SELECT {P['unit']}, {P['key']}, COUNT(*) AS n "
           f"FROM {src} GROUP BY {P['unit']}, {P['key']}) GROUP BY {P['key']}")
def once():
    return con.sql(sql).to_arrow_table()
timing, t = _timed(once, P["repeats"], P["warmup"])
RESULT = {**timing, "groups": t.num_rows, "load": os.getloadavg()}
"""

DPKIT = """
import tempfile
from dpkit.guarantees import ApproxDP
from dpkit.query import Session
import duckdb
d = tempfile.mkdtemp(prefix="dpkit-bench-scale-")
con = duckdb.connect()  # the same settings as the raw rows: a memory limit, spilling beyond it
_settings(con)
con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{P['path']}')")
s = Session(con, table="t", privacy_unit=P["unit"], ledger=os.path.join(d, "ledger.db"),
            budget=ApproxDP(epsilon=1e9, delta=0.5), max_partitions=P["max_partitions"], max_rows=P["max_rows"])
q = f"SELECT {P['key']}, COUNT(*) AS n FROM t GROUP BY {P['key']}"
kw = dict(epsilon=1.0, bounding_report=False)
first_plan_s = None
if P["keys"] is not None:
    kw["keys"] = {P["key"]: list(range(P["keys"]))}
    t = time.perf_counter()
    s.plan(q, **kw)
    first_plan_s = time.perf_counter() - t
else:
    kw["delta"] = 1e-6
def once():
    return s.sql(q, **kw, debug_timings=True)
timing, r = _timed(once, P["repeats"], P["warmup"])
tm = {k: round(v, 3) for k, v in r.timings.items() if isinstance(v, (int, float))}
if "engine_s" in tm and "total_s" in tm:  # what is not the engine: planning, noise, the result's Python objects
    tm["python_s"] = round(tm["total_s"] - tm["engine_s"], 3)
RESULT = {**timing, "groups": len(r.rows), "first_plan_s": first_plan_s, "timings": tm, "load": os.getloadavg()}
s.close()
"""

OPENDP = """
import opendp.prelude as dp
import polars as pl
dp.enable_features("contrib")
keys = pl.LazyFrame({P["key"]: pl.Series(range(P["keys"]), dtype=pl.Int64)})
def once():
    context = dp.Context.compositor(
        data=pl.scan_parquet(P["path"]),
        privacy_unit=dp.unit_of(contributions=P["max_partitions"], identifier=P["unit"]),
        privacy_loss=dp.loss_of(epsilon=1.0), split_evenly_over=1)
    query = (context.query().truncate_per_group(P["max_rows"], by=[P["key"]])
             .truncate_num_groups(P["max_partitions"], by=[P["key"]], keep="first")
             .group_by(P["key"]).agg(dp.len()).with_keys(keys))
    return query.release().collect()
timing, out = _timed(once, P["repeats"], P["warmup"])
RESULT = {**timing, "groups": out.height}
"""

PAIRED = """
# plain, floor, dpkit private selection and dpkit with 10^6 public keys, taken in turn in one process (round
# after round), so that each round's ratios compare runs made moments apart: on shared cores the load moves
# between the subprocess rows above, and a ratio of medians taken minutes apart carries that drift
import tempfile
import duckdb
from dpkit.guarantees import ApproxDP
from dpkit.query import Session
d = tempfile.mkdtemp(prefix="dpkit-bench-scale-")
con = duckdb.connect()
_settings(con)
con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{P['path']}')")
k, u = P["key"], P["unit"]
plain = f"SELECT {k}, COUNT(*) AS n FROM t GROUP BY {k}"
floor = (f"SELECT {k}, COUNT(*) AS units, SUM(n) AS n FROM (SELECT {u}, {k}, COUNT(*) AS n FROM t GROUP BY {u}, {k}) "
         f"GROUP BY {k}")
s = Session(con, table="t", privacy_unit=u, ledger=os.path.join(d, "ledger.db"),
            budget=ApproxDP(epsilon=1e9, delta=0.5), max_partitions=P["max_partitions"], max_rows=P["max_rows"])
sel = dict(epsilon=1.0, bounding_report=False, delta=1e-6)
keys = dict(epsilon=1.0, bounding_report=False, keys={k: list(range(P["keys"]))})
s.plan(plain, **keys)  # registers the keys once
cases = {"plain": lambda: con.sql(plain).to_arrow_table(), "floor": lambda: con.sql(floor).to_arrow_table(),
         "selection": lambda: s.sql(plain, **sel), "keys": lambda: s.sql(plain, **keys)}
runs = {name: [] for name in cases}
loads = []
for r in range(P["repeats"] + P["warmup"]):
    for name, fn in cases.items():
        t = time.perf_counter()
        fn()
        if r >= P["warmup"]:
            runs[name].append(time.perf_counter() - t)
    if r >= P["warmup"]:
        loads.append(os.getloadavg())
ratio = {f"{n}/{b}": statistics.median(x / y for x, y in zip(runs[n], runs[b]))
         for n in ("selection", "keys") for b in ("plain", "floor")}
RESULT = {"runs": runs, "median_s": {n: statistics.median(v) for n, v in runs.items()}, "ratios": ratio,
          "load": loads}
s.close()
"""

GEN_GROUPS = """
import duckdb
con = duckdb.connect()
n, units, groups = P["rows"], P["units"], P["groups"]
con.execute(f"COPY (SELECT (hash(range) % {units})::BIGINT AS uid, (hash(range * 7 + 1) % {groups})::BIGINT AS g "
            f"FROM range({n})) TO '{P['path']}' (FORMAT parquet, ROW_GROUP_SIZE 1048576)")
RESULT = {"ok": True}
"""

GEN_ROWS = """
import duckdb
con = duckdb.connect()
con.execute("SET preserve_insertion_order = false")
n, units, cats = P["rows"], P["units"], P["categories"]
# unit by hash; ~90% of a unit's rows in one of its 3 favourite categories, the rest anywhere
con.execute(f"COPY (SELECT u AS uid, (CASE WHEN r % 10 = 0 THEN (r // 10) % {cats} "
            f"ELSE (hash(u) + (r // 10) % 3 * 37) % {cats} END)::INTEGER AS category, (r % 1000)::DOUBLE / 10 AS amount "
            f"FROM (SELECT (hash(range) % {units})::BIGINT AS u, hash(range * 7 + 1) AS r FROM range({n}))) "
            f"TO '{P['path']}' (FORMAT parquet, ROW_GROUP_SIZE 1048576)")
RESULT = {"ok": True}
"""


def _run(code: str, params: dict[str, Any], label: str, *, timeout: float, memory_gib: float) -> dict[str, Any]:
    res = H.run_isolated(PRELUDE.format(params=params) + code, label=label, timeout_s=timeout, memory_gib=memory_gib)
    if res.get("ok"):
        out = dict(res["result"])
        out["peak_rss_bytes"] = res.get("peak_rss_bytes")
        return out
    return {"error": res.get("error"), "stderr": res.get("stderr_tail", "")[-600:]}


def _ensure(path: Path, gen: str, params: dict[str, Any], timeout: float) -> None:
    if path.exists():
        return
    print(f"== writing {path} ...", flush=True)
    tmp = path.with_suffix(".tmp.parquet")
    res = H.run_isolated(PRELUDE.format(params={**params, "path": str(tmp)}) + gen, label="generate",
                         timeout_s=timeout, memory_gib=16.0)
    if not res.get("ok"):
        raise SystemExit(f"could not write {path}: {res.get('error')} {res.get('stderr_tail', '')}")
    tmp.rename(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10**7, help="rows of the 10^6-group table")
    ap.add_argument("--big-rows", type=int, nargs="+", default=[10**8], help="rows of the 100-category table(s)")
    ap.add_argument("--huge", action="store_true", help="also 10^9 rows (7.1 GB of Parquet, run once)")
    ap.add_argument("--only", nargs="+", choices=["groups", "keys", "rows", "paired", "rows-paired"],
                    help="these scenarios only (rows-paired runs only when named)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data-dir", default=str(Path.home() / ".cache" / "dpkit-bench"))
    ap.add_argument("--memory-limit", default="12GB", help="DuckDB's memory_limit for every row (it spills beyond)")
    ap.add_argument("--threads", type=int, help="DuckDB threads for every row (default: DuckDB's, the cores)")
    ap.add_argument("--temp-dir", help="DuckDB's temp_directory (spilling) for every row (default: <data-dir>/spill)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-opendp", action="store_true", help="skip the OpenDP peer (slow at 10^6 keys)")
    args = ap.parse_args()
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    engine = dict(memory_limit=args.memory_limit, threads=args.threads,
                  temp_directory=args.temp_dir or str(data / "spill"))

    def want(name: str) -> bool:
        return name in args.only if args.only else name != "rows-paired"
    env = H.environment()
    results: dict[str, Any] = {"rows": []}
    lines: list[list[Any]] = []

    def row(scenario: str, label: str, res: dict[str, Any], ref: dict[str, float | None]) -> None:
        med = res.get("median_s")
        ratios = [f"{med / ref[k]:.2f}x {k}" if med and ref.get(k) else "" for k in ("plain", "floor")]
        note = res.get("error") or (f"first plan (keys registered) {res['first_plan_s']:.2f} s"
                                    if res.get("first_plan_s") is not None else "")
        if res.get("timings"):
            note = (note + "; " if note else "") + ", ".join(f"{k} {v:.2f}" for k, v in res["timings"].items())
        if res.get("load"):
            note = (note + "; " if note else "") + "load after " + "/".join(f"{x:.1f}" for x in res["load"])
        lines.append([scenario, label, H.fmt_time(med), ", ".join(r for r in ratios if r) or "-",
                      res.get("groups", "-"), H.fmt_bytes(res.get("peak_rss_bytes")), note])
        results["rows"].append({"scenario": scenario, "label": label, **res})
        print(f"   {scenario:8s} {label:44s} {H.fmt_time(med):>10s}  {' '.join(ratios)}  "
              f"peak RSS {H.fmt_bytes(res.get('peak_rss_bytes'))}  {note}", flush=True)

    def paired(scenario: str, res: dict[str, Any]) -> None:
        results.setdefault("paired", {})[scenario] = res
        if res.get("error"):
            lines.append([scenario, "error", "-", "-", "-", "-", res["error"]])
            return
        med = res["median_s"]
        load = "load " + ", ".join(f"{x[0]:.1f}" for x in res.get("load", []))
        for n in ("plain", "floor", "selection", "keys"):
            rs = ", ".join(f"{res['ratios'][f'{n}/{b}']:.2f}x {b}" for b in ("plain", "floor")
                           if f"{n}/{b}" in res["ratios"]) or "-"
            lines.append([scenario, n, H.fmt_time(med[n]), rs, "-", H.fmt_bytes(res.get("peak_rss_bytes")),
                          "runs " + ", ".join(f"{x:.2f}" for x in res["runs"][n]) + f"; {load}"])
            print(f"   {scenario}   {n:40s} {H.fmt_time(med[n]):>10s}  {rs}  {load}", flush=True)

    rep = dict(repeats=args.repeats, warmup=1)
    if want("groups") or want("keys"):
        path = data / f"scale-groups-v{GENERATOR_VERSION}-{args.rows}.parquet"
        base = dict(path=str(path), rows=args.rows, units=10**6, groups=10**6, unit="uid", key="g",
                    **engine)
        _ensure(path, GEN_GROUPS, base, 3600)
        raw = {k: _run(RAW, {**base, **rep, "kind": k}, k, timeout=1200, memory_gib=16) for k in ("plain", "floor")}
        ref = {k: v.get("median_s") for k, v in raw.items()}
        for k in ("plain", "floor"):
            row("groups", f"raw DuckDB {k}", raw[k], ref)
        common = {**base, **rep, "max_partitions": 10, "max_rows": 5}
        if want("groups"):
            row("groups", "dpkit private selection", _run(DPKIT, {**common, "keys": None}, "dpkit-sel",
                                                           timeout=1800, memory_gib=16), ref)
            row("groups", "dpkit 10^6 public keys", _run(DPKIT, {**common, "keys": 10**6}, "dpkit-keys",
                                                          timeout=1800, memory_gib=16), ref)
            if not args.no_opendp:
                row("groups", "OpenDP Polars, 10^6 keys (with_keys)", _run(OPENDP, {**common, "keys": 10**6, "repeats": 1, "warmup": 0}, "opendp", timeout=1200,
                     memory_gib=16), ref)
        if want("keys"):
            for nk in (10**4, 10**5, 10**6):
                row("keys", f"dpkit {nk:.0e} public keys", _run(DPKIT, {**common, "keys": nk}, "dpkit-keys",
                                                                  timeout=1800, memory_gib=16), ref)
    if want("paired"):
        path = data / f"scale-groups-v{GENERATOR_VERSION}-{args.rows}.parquet"
        base = dict(path=str(path), rows=args.rows, units=10**6, groups=10**6, unit="uid", key="g",
                    **engine)
        _ensure(path, GEN_GROUPS, base, 3600)
        paired("paired", _run(PAIRED, {**base, **rep, "keys": 10**6, "max_partitions": 10, "max_rows": 5},
                              "paired", timeout=3600, memory_gib=16))
    big = list(args.big_rows) + ([10**9] if args.huge and 10**9 not in args.big_rows else [])
    if want("rows-paired"):
        # the 100-category table of ``rows``: plain, floor, dpkit selection and dpkit with the 100 categories as
        # public keys taken in turn, round after round (the ratio to the floor is the bar of issue 16)
        for n in big:
            path = data / f"scale-rows-v{GENERATOR_VERSION}-{n}.parquet"
            base = dict(path=str(path), rows=n, units=10**6, categories=100, unit="uid", key="category", **engine)
            _ensure(path, GEN_ROWS, base, 7200)
            paired(f"{n:.0e} rows paired", _run(PAIRED, {**base, **rep, "keys": 100, "max_partitions": 3,
                                                         "max_rows": 100}, "rows-paired", timeout=7200, memory_gib=24))
    if want("rows"):
        for n in big:
            path = data / f"scale-rows-v{GENERATOR_VERSION}-{n}.parquet"
            base = dict(path=str(path), rows=n, units=10**6, categories=100, unit="uid", key="category",
                        **engine)
            _ensure(path, GEN_ROWS, base, 7200)
            once = dict(repeats=1, warmup=0) if n >= 10**9 else rep
            raw = {k: _run(RAW, {**base, **once, "kind": k}, k, timeout=3600, memory_gib=24) for k in ("plain", "floor")}
            ref = {k: v.get("median_s") for k, v in raw.items()}
            scen = f"{n:.0e} rows"
            for k in ("plain", "floor"):
                row(scen, f"raw DuckDB {k}", raw[k], ref)
            common = {**base, **once, "max_partitions": 3, "max_rows": 100}
            row(scen, "dpkit 100 public keys", _run(DPKIT, {**common, "keys": 100}, "dpkit-rows", timeout=3600,
                                                     memory_gib=24), ref)
            row(scen, "dpkit private selection", _run(DPKIT, {**common, "keys": None}, "dpkit-rows-sel",
                                                       timeout=3600, memory_gib=24), ref)

    md = "\n\n".join([
        "# dpkit.query at scale (issue 16)",
        H.environment_markdown(env),
        "paired: ratios are medians of per-round ratios (the four runs of a round are taken in turn). "
        "Medians of the stated repeats after one warm-up (10^9 rows: one cold run). Ratios to the raw DuckDB "
        "limits of the same run: plain = GROUP BY key; floor = GROUP BY (unit, key) then key. Every row: DuckDB "
        f"with memory_limit = {args.memory_limit} (spilling beyond it to {engine['temp_directory']}), threads = "
        f"{args.threads or 'DuckDB default'} and preserve_insertion_order = false. Load: the 1-minute load average "
        "after each run (other processes share these cores). "
        "Memory: the subprocess's peak RSS.",
        H.markdown_table(["scenario", "row", "median", "vs raw", "groups", "peak RSS", "notes"], lines),
    ])
    if args.no_write:
        print(md)
    else:
        H.write_report("scale", markdown=md, data=results, env=env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
