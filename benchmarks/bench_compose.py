"""Long heterogeneous sequences (issue 9): 10^3 distinct mechanisms, each repeated 10^3 times, added to one
``AccountingState`` (non-adaptive composition), and epsilon(delta = 1e-5) read as the state's certified PLD
interval [lower, upper]; beside Google's ``dp_accounting`` PLD accountant on the same sequence.

Scenarios:

* ``gaussians-once``: 10^3 Gaussians, sigma evenly spread over [20, 60] (sensitivity 1), each once;
* ``gaussians-1e6``: the same 10^3 Gaussians, each 10^3 times (10^6 compositions);
* ``mixed-1e6``: 600 Gaussians (sigma over [20, 60]), 200 Laplace (scale over [20, 60]), 200 Poisson-subsampled
  Gaussians (``DPSGDStep``, sigma over [0.8, 2], q = 0.01), each 10^3 times.

Each row runs in its own subprocess (``_harness.run_isolated``); dpkit's time covers building the items,
adding them and the answer; dp_accounting's covers building its events, composing and ``get_epsilon``
(default discretisation 1e-4; its answer is an upper bound only).  Peer runs are capped at 60 s ('>60 s').

    .bench-venv/bin/python benchmarks/bench_compose.py [--no-write] [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402

DELTA = 1e-5
PEER_TIMEOUT_S = 60.0

_SCEN = r'''
import numpy as np
def scenario(name):
    g = [float(s) for s in np.linspace(20.0, 60.0, 1000 if name != "mixed-1e6" else 600)]
    reps = 1 if name == "gaussians-once" else 1000
    out = [("gaussian", s, reps) for s in g]
    if name == "mixed-1e6":
        out += [("laplace", float(b), reps) for b in np.linspace(20.0, 60.0, 200)]
        out += [("subsampled", float(s), reps) for s in np.linspace(0.8, 2.0, 200)]
    return out
'''

DPKIT = _SCEN + r'''
import time
from dpkit.accounting.state import AccountingState
from dpkit.accounting.items import GaussianEvent, LaplaceEvent, as_item
from dpkit.accounting.dpsgd import DPSGDStep
from dpkit.accounting import _tilted_solve
def run():
    _tilted_solve.clear_caches()
    t0 = time.perf_counter()
    items = []
    for kind, p, reps in scenario({name!r}):
        if kind == "gaussian":
            items.append((as_item(GaussianEvent(sigma=p)), reps))
        elif kind == "laplace":
            items.append((as_item(LaplaceEvent(scale=p)), reps))
        else:
            items.append((as_item(DPSGDStep(sigma=p, sampling_rate=0.01)), reps))
    t1 = time.perf_counter()
    s = AccountingState()
    for it, k in items:
        s = s.add(it, count=k)
    t2 = time.perf_counter()
    e = s.epsilon({delta!r}, method="pld")
    t3 = time.perf_counter()
    return {{"upper": float(e), "lower": float(e.lower_bound), "items_s": t1 - t0, "add_s": t2 - t1,
             "answer_s": t3 - t2, "count": s.count, "method": e.method}}
from _harness import timed_runs
timing, value = timed_runs(run, {repeats}, 0)
RESULT = {{"timing": timing, "value": value}}
'''

PEER = _SCEN + r'''
import time
import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
def run():
    t0 = time.perf_counter()
    acc = pld_privacy_accountant.PLDAccountant()
    for kind, p, reps in scenario({name!r}):
        if kind == "gaussian":
            ev = dp_accounting.GaussianDpEvent(noise_multiplier=p)
        elif kind == "laplace":
            ev = dp_accounting.LaplaceDpEvent(noise_multiplier=p)
        else:
            ev = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(noise_multiplier=p))
        acc.compose(ev, reps)
    return {{"upper": float(acc.get_epsilon({delta!r}))}}
from _harness import timed_runs
timing, value = timed_runs(run, {repeats}, 0)
RESULT = {{"timing": timing, "value": value}}
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dpkit-timeout", type=float, default=600.0)
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    args = ap.parse_args()
    names = ["gaussians-once", "gaussians-1e6", "mixed-1e6"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    rows, data = [], []
    for name in names:
        d = H.run_isolated(DPKIT.format(name=name, delta=DELTA, repeats=args.repeats), label=f"dpkit {name}",
                           timeout_s=args.dpkit_timeout)
        p = H.run_isolated(PEER.format(name=name, delta=DELTA, repeats=1), label=f"dp_accounting {name}",
                           timeout_s=PEER_TIMEOUT_S)
        data.append({"scenario": name, "dpkit": d, "dp_accounting": p})
        if d.get("ok"):
            v, tm = d["result"]["value"], d["result"]["timing"]
            width = (v["upper"] - v["lower"]) / v["upper"] if v["upper"] > 0 else 0.0
            dk = [f"[{v['lower']:.6f}, {v['upper']:.6f}]", f"{width:.1e}", f"{tm['median_s']:.2f} s",
                  f"{v['items_s']:.2f} / {v['add_s']:.3f} / {v['answer_s']:.2f} s"]
        else:
            dk = [d.get("error", "?")[:80], "", "", ""]
        if p.get("ok"):
            pv, pt = p["result"]["value"], p["result"]["timing"]
            pk = [f"{pv['upper']:.6f}", f"{pt['median_s']:.2f} s"]
            ratio = (f"{pt['median_s'] / d['result']['timing']['median_s']:.1f}x" if d.get("ok") else "")
        else:
            err = p.get("error", "?")
            pk = [">60 s" if "timeout" in err else err[:80], ">60 s" if "timeout" in err else ""]
            ratio = (">" + f"{PEER_TIMEOUT_S / d['result']['timing']['median_s']:.1f}x") if d.get("ok") else "n/a"
        rows.append([name, *dk, *pk, ratio])
    md = "\n".join([
        "# Long heterogeneous sequences: epsilon(delta = 1e-5) of 10^3 distinct mechanisms x 10^3", "",
        H.markdown_table(["scenario", "dpkit [lower, upper]", "width (rel.)", "dpkit median",
                          "items / add / answer (last run)", "dp_accounting PLD eps", "dp_accounting time",
                          "dp_accounting / dpkit"], rows), "",
        f"dpkit: median of {args.repeats} cold runs (caches cleared), each in one subprocess; dp_accounting: one run, "
        f"capped at {PEER_TIMEOUT_S:g} s.", "",
    ])
    env = H.environment()
    if args.no_write:
        print(md)
    else:
        H.write_report("compose", markdown=md + "\n" + H.environment_markdown(env), data={"rows": data}, env=env)


if __name__ == "__main__":
    main()
