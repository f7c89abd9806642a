"""Mechanism release throughput and memory: dpkit's secure, floating-point-safe Laplace and Gaussian
releases against NumPy's raw samplers (the limit) and the peers' equivalents, in one run.

Bars (issue 16, item 4): releasing 10^7 and 10^8 values with the secure Laplace and Gaussian
mechanisms at no less than 0.5x the throughput of NumPy's raw ``Generator.laplace`` /
``Generator.normal`` on the same number of values (neither secure nor floating-point safe; median of
alternating runs), with the release's memory at most 2x its input; and faster than OpenDP's,
diffprivlib's and python-dp's.

Method
------
* Every row runs in a fresh subprocess (``_harness.run_isolated``) that pre-faults the memory the
  largest row needs (``_harness.prefault_memory``, the same amount in every subprocess), builds its
  input in place (``x = normal(size=n); x *= 100``, 8 n bytes), warms up (the sampler's tables for
  the mechanism's scale; NumPy on 10^4 draws), then times ``--repeats`` calls and keeps their median.
* ``--rounds`` rounds alternate the rows (NumPy laplace, dpkit Laplace, NumPy normal, dpkit
  Gaussian, per size), so that the load of a shared machine falls on dpkit and NumPy alike.
  Reported: the median over rounds of each row's draws/s, and the median over rounds of the
  per-round ratio dpkit / NumPy (each round's pair ran back to back).
* Memory: the peak RSS of the first timed call above the RSS just before it (the call's own
  allocation: output and temporaries; ``_harness.reset_peak_rss``), as a multiple of the input's
  8 n bytes, and the subprocess's total peak RSS.  NumPy's row allocates only its output.
* ``--baseline-src DIR`` adds the dpkit rows once more with ``DIR`` (a ``src/`` of another
  commit, e.g. from ``git archive``) first on ``sys.path``, in the same rounds: a before/after
  comparison under the same load.
* Peers (OpenDP ``make_laplace`` / ``make_gaussian`` on a float vector, diffprivlib ``Laplace`` /
  ``GaussianAnalytic`` ``.randomise`` per value, python-dp ``LaplaceMechanism`` /
  ``GaussianMechanism`` ``.add_noise`` per value) on ``--n-peer`` values, once.

    bash benchmarks/run.sh mechanisms      # with the peers
    .venv/bin/python benchmarks/bench_mechanisms.py   # dpkit and NumPy only (peers "not installed")
    .venv/bin/python benchmarks/bench_mechanisms.py --sizes 1e7 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

_PRELUDE = """
import sys, time, statistics
if {src!r}:
    sys.path.insert(0, {src!r})  # a baseline's src/ ahead of the installed dpkit
import numpy as np
import _harness as H
n = {n}
prefault = H.prefault_memory({gib})
"""

_TIMED = """
ts, call_peak, rss_before = [], None, None
for i in range({repeats}):
    start = H.current_rss_bytes()
    H.reset_peak_rss()
    t = time.perf_counter()
    out = CALL()
    ts.append(time.perf_counter() - t)
    if call_peak is None:
        call_peak, rss_before = H.peak_rss_bytes() - start, start
    del out
RESULT = {{"n": n, "median_s": statistics.median(ts), "runs": ts, "call_peak_bytes": call_peak,
          "rss_before_bytes": rss_before, "input_bytes": 8 * n, "prefault": prefault, **EXTRA}}
"""

_NUMPY = """
rng = np.random.default_rng(1)
rng.{method}(0, 1.0, 10_000)
CALL = lambda: rng.{method}(0, 1.0, n)
EXTRA = {{}}
"""

_DPKIT = """
import dpkit
from dpkit.mechanisms import {cls}
from dpkit.random import {sampler}
x = np.random.default_rng(0).normal(size=n)
x *= 100  # in place: the input is 8 n bytes, nothing else
m = {cls}(sensitivity=1.0, {param}=1.0, dimension=n)
{sampler}(m.noise_grid_scale, 10_000)  # warm-up: the sampler's tables for this scale
CALL = lambda: m.release(x)
EXTRA = {{"guarantee": str(m.guarantee), "dpkit_path": dpkit.__file__}}
"""

PEERS = {
    "OpenDP make_laplace (vector)": ("opendp", """
import time, statistics
import opendp.prelude as dp
dp.enable_features("contrib")
n = {n_peer}
x = [float(i) for i in range(n)]
meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=1.0)
meas(x[:10])
ts = []
for _ in range({repeats}):
    t = time.perf_counter(); meas(x); ts.append(time.perf_counter() - t)
RESULT = {{"n": n, "median_s": statistics.median(ts)}}
"""),
    "OpenDP make_gaussian (vector)": ("opendp", """
import time, statistics
import opendp.prelude as dp
dp.enable_features("contrib")
n = {n_peer}
x = [float(i) for i in range(n)]
meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), scale=1.0)
meas(x[:10])
ts = []
for _ in range({repeats}):
    t = time.perf_counter(); meas(x); ts.append(time.perf_counter() - t)
RESULT = {{"n": n, "median_s": statistics.median(ts)}}
"""),
}

_PER_VALUE = """
import time, statistics
from {module} import {cls}
n = {{n_peer}}
m = {cls}({args})
ts = []
for _ in range({{repeats}}):
    t = time.perf_counter()
    for i in range(n):
        m.{call}(1.0)
    ts.append(time.perf_counter() - t)
RESULT = {{{{"n": n, "median_s": statistics.median(ts)}}}}
"""

# peers whose API noises one value per call: the same timing loop for each
for _label, _dist, _module, _cls, _args, _call in [
    ("diffprivlib Laplace.randomise", "diffprivlib", "diffprivlib.mechanisms", "Laplace",
     "epsilon=1.0, sensitivity=1.0", "randomise"),
    ("diffprivlib GaussianAnalytic.randomise", "diffprivlib", "diffprivlib.mechanisms", "GaussianAnalytic",
     "epsilon=1.0, delta=1e-5, sensitivity=1.0", "randomise"),
    ("python-dp LaplaceMechanism.add_noise", "pydp", "pydp.algorithms.numerical_mechanisms", "LaplaceMechanism",
     "epsilon=1.0, sensitivity=1.0", "add_noise"),
    ("python-dp GaussianMechanism.add_noise", "pydp", "pydp.algorithms.numerical_mechanisms", "GaussianMechanism",
     "epsilon=1.0, delta=1e-5, sensitivity=1.0", "add_noise"),
]:
    PEERS[_label] = (_dist, _PER_VALUE.format(module=_module, cls=_cls, args=_args, call=_call))

FAMILIES = {
    "laplace": {"numpy": "laplace", "cls": "Laplace", "param": "epsilon", "sampler": "discrete_laplace"},
    "gaussian": {"numpy": "normal", "cls": "Gaussian", "param": "sigma", "sampler": "discrete_gaussian"},
}


def _rows(n: int, baseline: str | None, baseline_label: str) -> list[tuple[str, str, str]]:
    """(family, label, code) for one size, in the order a round runs them."""
    gib = round(2 * 8 * n / 2**30 + 0.25, 2)  # input + output, the same in every subprocess
    rows = []
    for family, f in FAMILIES.items():
        rows.append((family, f"numpy {f['numpy']}", _PRELUDE.format(src="", n=n, gib=gib)
                     + _NUMPY.format(method=f["numpy"])))
        dpkit = _DPKIT.format(cls=f["cls"], param=f["param"], sampler=f["sampler"])
        rows.append((family, f"dpkit {f['cls']} (secure, grid-safe)", _PRELUDE.format(src="", n=n, gib=gib) + dpkit))
        if baseline:
            rows.append((family, f"dpkit {f['cls']} [{baseline_label}]",
                         _PRELUDE.format(src=baseline, n=n, gib=gib) + dpkit))
    return rows


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _size(text: str) -> int:
    return int(float(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e7,1e8", help="comma-separated numbers of values (default 1e7,1e8)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per subprocess (median kept)")
    ap.add_argument("--n-peer", type=int, default=10**5)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--baseline-src", default=None, help="a src/ directory to time as the baseline")
    ap.add_argument("--baseline-label", default="baseline")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sizes = [_size(s) for s in args.sizes.split(",")]
    baseline = str(Path(args.baseline_src).resolve()) if args.baseline_src else None
    load = {"start": list(os.getloadavg())}
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    families: dict[str, str] = {}
    for r in range(args.rounds):
        for n in sizes:
            for family, label, code in _rows(n, baseline, args.baseline_label):
                families[label] = family
                res = H.run_isolated(code + _TIMED.format(repeats=args.repeats),
                                     label=f"{label} n={n} round {r}", timeout_s=1200, memory_gib=16)
                runs.setdefault((n, label), []).append(res)
                status = (f"{n / res['result']['median_s'] / 1e6:.1f} M/s" if res.get("ok")
                          else res.get("error", "failed"))
                print(f"round {r + 1}/{args.rounds}  n={n:,}  {label}: {status}", file=sys.stderr, flush=True)
    load["end"] = list(os.getloadavg())
    peers: dict[str, dict[str, Any]] = {}
    if not args.no_peers:
        for label, (module, code) in PEERS.items():
            res = H.run_isolated(code.format(n_peer=args.n_peer, repeats=args.repeats), label=label,
                                 timeout_s=900, memory_gib=12)
            if not res.get("ok") and "No module named" in str(res.get("error", "")) + str(res.get("stderr_tail", "")):
                res = {"ok": False, "error": f"{module} not installed"}
            peers[label] = res

    def rate(res: dict[str, Any]) -> float | None:
        return res["result"]["n"] / res["result"]["median_s"] if res.get("ok") else None

    rows, bars, summary = [], [], {}
    for n in sizes:
        for family, f in FAMILIES.items():
            limit_label = f"numpy {f['numpy']}"
            limit_runs = runs[(n, limit_label)]
            for label in [lb for (m, lb) in runs if m == n and families[lb] == family]:
                rs = runs[(n, label)]
                rates = [x for x in (rate(res) for res in rs) if x]
                ratios = [a / b for a, b in ((rate(x), rate(y)) for x, y in zip(rs, limit_runs)) if a and b]
                ok = [res for res in rs if res.get("ok")]
                peak = _median([res["result"]["call_peak_bytes"] for res in ok if res["result"].get("call_peak_bytes")])
                total = _median([res["peak_rss_bytes"] for res in ok if res.get("peak_rss_bytes")])
                mult = peak / (8 * n) if peak else None
                med_rate, med_ratio = _median(rates), _median(ratios)
                summary[f"{label} n={n}"] = {"rate": med_rate, "ratio": med_ratio, "call_peak_x_input": mult,
                                              "rates": rates, "ratios": ratios}
                note = ok[0]["result"].get("guarantee", "") if ok else (rs[0].get("error", "") if rs else "")
                rows.append([label, f"{n:,}",
                             f"{med_rate / 1e6:.1f} M/s" if med_rate else "failed",
                             f"{min(rates) / 1e6:.1f}-{max(rates) / 1e6:.1f}" if rates else "-",
                             f"{med_ratio:.3f}" if med_ratio else "-",
                             H.fmt_bytes(peak), f"{mult:.2f}x" if mult else "-", H.fmt_bytes(total), note])
                if label.startswith("dpkit") and "[" not in label:
                    met = bool(med_ratio and med_ratio >= 0.5)
                    mem_ok = bool(mult and mult <= 2.0)
                    bars.append(f"- {family}, n = {n:,}: >= 0.5x NumPy (median of {len(ratios)} alternating "
                                f"rounds): {'met' if met else 'NOT met'} ({med_ratio:.3f}); memory <= 2x the "
                                f"input: {'met' if mem_ok else 'NOT met'} ({mult:.2f}x)" if med_ratio and mult else
                                f"- {family}, n = {n:,}: no result")
    table = H.markdown_table(["release", "n", "draws/s (median)", "range over rounds (M/s)",
                              "vs NumPy (median of rounds)", "call peak above start", "x input",
                              "process peak RSS", "note"], rows)
    peer_rows = []
    for label, res in peers.items():
        r = rate(res)
        peer_rows.append([label, f"{res['result']['n']:,}" if res.get("ok") else "-",
                          f"{r / 1e6:.3f} M/s" if r else "failed", H.fmt_bytes(res.get("peak_rss_bytes"))
                          if res.get("ok") else "-", "" if res.get("ok") else res.get("error", "")])
    peer_rates = {label: r for label, r in ((lb, rate(res)) for lb, res in peers.items()) if r}
    for family, f in FAMILIES.items():
        ours = [v["rate"] for k, v in summary.items() if k.startswith(f"dpkit {f['cls']} (secure") and v.get("rate")]
        theirs = [r for lb, r in peer_rates.items() if ("aussian" in lb) == (family == "gaussian")]
        if ours and theirs:
            bars.append(f"- {family}: faster than every peer: {'met' if min(ours) > max(theirs) else 'NOT met'}")
    md = ("# Mechanism release throughput and memory\n\n" + table + "\n\n" + "\n".join(bars) + "\n\n"
          + (H.markdown_table(["peer", "n", "draws/s (median)", "peak RSS", "note"], peer_rows) + "\n\n"
             if peer_rows else "")
          + f"- {args.rounds} alternating rounds, {args.repeats} timed calls per subprocess; load average "
          f"(1/5/15 min) at start {[round(v, 2) for v in load['start']]}, at end "
          f"{[round(v, 2) for v in load['end']]}\n"
          + (f"- baseline rows: `{args.baseline_label}` from `{baseline}`\n" if baseline else "")
          + "\n" + H.environment_markdown(env := H.environment(["randomgen"])))
    if args.no_write:
        print(md)
    else:  # write_report prints it too
        H.write_report("mechanisms", markdown=md, data={"runs": {f"{k[1]} n={k[0]}": v for k, v in runs.items()},
                                                         "peers": peers, "summary": summary, "load": load}, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
