"""Instructions per call of the value objects' hot paths, before/after: a measure that a loaded machine does not move.

On a shared 2-core machine the timings of ``bench_value_objects.py`` swing 2x between rounds of the same
code.  Here each path runs under valgrind's callgrind with instrumentation switched on only around the
timed loop (``--instr-atstart=no`` and ``callgrind_control -i on/off``), so the count covers the calls
alone, not the interpreter start or the imports; it is deterministic to well under 1%.  Instructions
are not time (cache misses and branch prediction differ), but a change that adds work shows up here.

    .venv/bin/python benchmarks/instructions_value_objects.py --baseline-src /path/to/base/src

Needs ``valgrind`` (with ``callgrind_control``) on the PATH.  Writes
``benchmarks/results/<date>-<commit>-value-objects-instructions.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

_CHILD = """
import os, subprocess, sys
from dpkit.distributions import Laplace as L, DiscreteLaplace as DL
from dpkit.mechanisms import Laplace, Gaussian
from dpkit.mechanisms import Geometric
from dpkit.random import insecure_seeded
from dpkit._math import Estimate
from dpkit.accounting.items import as_item
from dpkit.accounting.state import AccountingState
from dpkit.guarantees import PureDP, ZCDP
lap = Laplace(sensitivity=1.0, epsilon=1.0)
geo = Geometric(sensitivity=1, epsilon=1.0)
rng = insecure_seeded(1)
items = [as_item(PureDP(0.01)), as_item(ZCDP(0.001))]
box = [AccountingState(), 0]
e1, e2 = Estimate(0.1, kind="upper", method="m"), Estimate(0.25, kind="exact", method="n")


def spend():  # the accountant's per-spend step: one more add to a growing state
    box[1] += 1
    box[0] = box[0].add(items[box[1] & 1])


paths = {"distribution Laplace(0, 1)": lambda: L(0.0, 1.0),
         "distribution DiscreteLaplace(0, 2.0)": lambda: DL(0, 2.0),
         "mechanism Laplace(sensitivity, epsilon)": lambda: Laplace(sensitivity=1.0, epsilon=1.0),
         "mechanism Gaussian(sensitivity, sigma)": lambda: Gaussian(sensitivity=1.0, sigma=2.0),
         "Laplace.pair": lambda: lap.pair,
         "Laplace.release(scalar)": lambda: lap.release(42.0, rng=rng),
         "Geometric.release(scalar)": lambda: geo.release(3, rng=rng),
         "Estimate(0.1, kind='upper')": lambda: Estimate(0.1, kind="upper", method="m"),
         "Estimate + Estimate": lambda: e1 + e2,
         "AccountingState.add (one more spend)": spend}
fn = paths[sys.argv[1]]; n = int(sys.argv[2])
for _ in range(50):
    fn()
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
for _ in range(n):
    fn()
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)
"""

PATHS = {"distribution Laplace(0, 1)": 20000, "distribution DiscreteLaplace(0, 2.0)": 20000,
         "mechanism Laplace(sensitivity, epsilon)": 10000, "mechanism Gaussian(sensitivity, sigma)": 10000,
         "Laplace.pair": 3000, "Laplace.release(scalar)": 300, "Geometric.release(scalar)": 300,
         "Estimate(0.1, kind='upper')": 10000, "Estimate + Estimate": 2000,
         "AccountingState.add (one more spend)": 3000}


def _count(src: str, path: str, n: int) -> int:
    env = dict(os.environ, PYTHONPATH=src, PYTHONHASHSEED="0")
    out = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", _CHILD, path, str(n)], capture_output=True, text=True, env=env)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if not m:
        raise SystemExit(f"callgrind gave no count for {path!r} with {src}: {out.stderr[-500:]}")
    return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-src", required=True)
    ap.add_argument("--src", default=str(H.ROOT / "src"))
    ap.add_argument("--only", default="", help="comma-separated substrings: count only the paths naming one")
    args = ap.parse_args()
    only = [o for o in args.only.split(",") if o]
    trees = {"before": str(Path(args.baseline_src).resolve()), "after": str(Path(args.src).resolve())}
    overhead = {k: _count(v, "Laplace.pair", 0) for k, v in trees.items()}  # the control calls alone
    rows, summary = [], {}
    for path, n in PATHS.items():
        if only and not any(o in path for o in only):
            continue
        per = {k: (_count(v, path, n) - overhead[k]) / n for k, v in trees.items()}
        summary[path] = {**per, "n": n, "ratio": per["after"] / per["before"]}
        rows.append([path, f"{per['before']:,.0f}", f"{per['after']:,.0f}", f"{per['after'] / per['before']:.3f}"])
    env = H.environment()
    md = "\n".join([
        "# Value objects: instructions per call, before / after (callgrind, instrumentation on the loop only)",
        "",
        f"before: `{trees['before']}`; after: `{trees['after']}`.",
        "",
        H.markdown_table(["path", "before (instructions)", "after (instructions)", "after / before"], rows),
        "",
        H.environment_markdown(env),
    ])
    H.write_report("value-objects-instructions", markdown=md, data={"trees": trees, "summary": summary,
                                                                   "overhead": overhead}, env=env)


if __name__ == "__main__":
    main()
