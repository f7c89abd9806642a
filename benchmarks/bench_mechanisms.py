"""Mechanism release throughput: dpkit's secure, floating-point-safe Laplace and Gaussian releases
against NumPy's raw samplers (the limit) and the peers' equivalents, in one run.

Bar (mechanisms issue): releasing 10^7 values with the secure Laplace and Gaussian mechanisms at no
less than 1/3 of the throughput of NumPy's raw ``Generator.laplace`` / ``Generator.normal`` (neither
secure nor floating-point safe), and faster than OpenDP's, diffprivlib's and python-dp's.

Rows (draws per second; median of --repeats runs after a warm-up; each row in its own subprocess
with a timeout and a memory cap, via ``_harness.run_isolated``):

* NumPy PCG64 ``laplace`` / ``normal`` on 10^7 draws (the raw limit);
* dpkit ``Laplace(sensitivity=1, epsilon=1, dimension=n).release(x)`` and
  ``Gaussian(sensitivity=1, sigma=1, dimension=n).release(x)`` on n = 10^7 values, secure default
  generator (ChaCha20), grid snapping included;
* OpenDP ``make_laplace`` / ``make_gaussian`` on a float vector (10^5 values; OpenDP's samplers are
  slow, so fewer draws), diffprivlib ``Laplace`` / ``GaussianAnalytic`` ``.randomise`` per value
  (10^5), python-dp ``LaplaceMechanism`` / ``GaussianMechanism`` ``.add_noise`` per value (10^5).

    bash benchmarks/run.sh mechanisms      # with the peers
    .venv/bin/python benchmarks/bench_mechanisms.py   # dpkit and NumPy only (peers "not installed")
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

SNIPPETS = {
    "numpy laplace": ("numpy", """
import numpy as np, time, statistics
rng = np.random.default_rng(1)
n = {n}
rng.laplace(0, 1, n)
ts = []
for _ in range({repeats}):
    t = time.perf_counter(); rng.laplace(0, 1.0, n); ts.append(time.perf_counter() - t)
RESULT = {{"n": n, "median_s": statistics.median(ts)}}
"""),
    "numpy normal": ("numpy", """
import numpy as np, time, statistics
rng = np.random.default_rng(1)
n = {n}
rng.normal(0, 1, n)
ts = []
for _ in range({repeats}):
    t = time.perf_counter(); rng.normal(0, 1.0, n); ts.append(time.perf_counter() - t)
RESULT = {{"n": n, "median_s": statistics.median(ts)}}
"""),
    "dpkit Laplace (secure, grid-safe)": ("dpkit", """
import numpy as np, time, statistics
from dpkit.mechanisms import Laplace
n = {n}
x = np.random.default_rng(0).normal(size=n) * 100
m = Laplace(sensitivity=1.0, epsilon=1.0, dimension=n)
m.release(x)
ts = []
for _ in range({repeats}):
    t = time.perf_counter(); r = m.release(x); ts.append(time.perf_counter() - t)
RESULT = {{"n": n, "median_s": statistics.median(ts), "scale": r.scale, "guarantee": str(r.guarantee)}}
"""),
    "dpkit Gaussian (secure, grid-safe)": ("dpkit", """
import numpy as np, time, statistics
from dpkit.mechanisms import Gaussian
n = {n}
x = np.random.default_rng(0).normal(size=n) * 100
m = Gaussian(sensitivity=1.0, sigma=1.0, dimension=n)
m.release(x)
ts = []
for _ in range({repeats}):
    t = time.perf_counter(); r = m.release(x); ts.append(time.perf_counter() - t)
RESULT = {{"n": n, "median_s": statistics.median(ts), "scale": r.scale, "guarantee": str(r.guarantee)}}
"""),
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
    SNIPPETS[_label] = (_dist, _PER_VALUE.format(module=_module, cls=_cls, args=_args, call=_call))

LIMIT = {"laplace": "numpy laplace", "gaussian": "numpy normal"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--n-peer", type=int, default=10**5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    results = {}
    for label, (module, code) in SNIPPETS.items():
        res = H.run_isolated(code.format(n=args.n, n_peer=args.n_peer, repeats=args.repeats), label=label,
                             timeout_s=900, memory_gib=12)
        if not res.get("ok") and "No module named" in str(res.get("error", "")) + str(res.get("stderr_tail", "")):
            res = {"ok": False, "error": f"{module} not installed"}
        results[label] = res
    rate = {k: (v["result"]["n"] / v["result"]["median_s"]) if v.get("ok") else None for k, v in results.items()}
    rows = []
    for label, r in rate.items():
        family = "gaussian" if ("normal" in label or "aussian" in label) else "laplace"
        limit = rate[LIMIT[family]]
        ratio = f"{r / limit:.3f}" if r and limit else "-"
        info = results[label]
        note = info["result"].get("guarantee", "") if info.get("ok") else info.get("error", "")
        peak = H.fmt_bytes(info.get("peak_rss_bytes")) if info.get("ok") else "-"
        rows.append([label, f"{info['result']['n']:,}" if info.get("ok") else "-",
                     f"{r / 1e6:.3f} M/s" if r else "failed", ratio, peak, note])
    table = H.markdown_table(["release", "n", "draws/s (median)", "vs NumPy raw", "peak RSS", "note"], rows)
    bars = []
    for family, dp_label in (("laplace", "dpkit Laplace (secure, grid-safe)"), ("gaussian", "dpkit Gaussian (secure, grid-safe)")):
        r, limit = rate[dp_label], rate[LIMIT[family]]
        peers = [v for k, v in rate.items() if v and not k.startswith(("dpkit", "numpy")) and
                 (("aussian" in k) == (family == "gaussian"))]
        ok_third = bool(r and limit and r >= limit / 3)
        ok_peers = bool(r and all(r > p for p in peers))
        bars.append(f"- {family}: >= 1/3 of NumPy: {'met' if ok_third else 'NOT met'}; faster than every peer: "
                    f"{'met' if ok_peers else 'NOT met'}")
    env = H.environment(["numpy", "randomgen", "opendp", "diffprivlib", "python-dp"])
    md = "# Mechanism release throughput\n\n" + table + "\n\n" + "\n".join(bars) + "\n\n" + H.environment_markdown(env)
    print(md)
    if not args.no_write:
        H.write_report("mechanisms", markdown=md, data={"results": results}, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
