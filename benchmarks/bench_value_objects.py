"""Cost of dpkit's value objects (distributions, mechanisms, release intervals, the accounting state,
``Estimate``) before and after a change.

Issue 13 turned the hand-rolled immutable classes (``__setattr__`` that raises, ``_set`` through
``object.__setattr__``, an instance ``__dict__``) into frozen ``dataclass(slots=True)`` value objects.
The hot paths that touch them: building a distribution or a mechanism, reading its fields, hashing and
comparing distributions, a mechanism's ``pair`` and guarantees, and a release (which builds a
distribution for its interval and a ``GridInterval``), the accountant's per-spend ``AccountingState.add``
(10^4 adds in a row) and ``Estimate`` construction and arithmetic.  This benchmark times those paths for two
``src/`` trees under the same load: ``--baseline-src`` (e.g. ``git worktree`` of main, or a
``git archive`` of another commit) and ``--src`` (default: this checkout's ``src/``).

Method: every (tree, round) runs in a fresh interpreter (``_harness.run_isolated``) that imports dpkit
from that tree first on ``sys.path``; each path is timed with ``_harness.time_per_call`` (median over
repeats of per-call times).  Rounds alternate the trees, so a shared machine's load falls on both.
Reported: the median over rounds of each path's per-call time, the median of the per-round ratios
after / before (below 1: faster), and the ratio of the fastest round of each tree (on a shared,
loaded machine the fastest round is the one least disturbed by other processes).  There is no peer
and no raw limit here: the comparison is dpkit against itself, the question being "no slowdown".

    .venv/bin/python benchmarks/bench_value_objects.py --baseline-src /path/to/main/src --rounds 5
    .venv/bin/python benchmarks/bench_value_objects.py --baseline-src ... --only Estimate,AccountingState --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

_SNIPPET = """
import sys
sys.path.insert(0, {src!r})
import numpy as np
import dpkit
assert dpkit.__file__.startswith({src!r}), dpkit.__file__
from dpkit.distributions import DiscreteGaussian, DiscreteLaplace, Finite, Gaussian as NGauss, Laplace as Lap
from dpkit.mechanisms import Gaussian, Laplace
from dpkit.random import insecure_seeded
from dpkit._math import Estimate
from dpkit.accounting.items import as_item
from dpkit.accounting.state import AccountingState
from dpkit.guarantees import ZCDP, PureDP
from _harness import time_per_call

lap = Laplace(sensitivity=1.0, epsilon=1.0)
gau = Gaussian(sensitivity=1.0, sigma=2.0)
lap_v = Laplace(sensitivity=1.0, epsilon=1.0, dimension=1000)
gau_v = Gaussian(sensitivity=1.0, sigma=2.0, dimension=1000)
gau_cal = Gaussian(sensitivity=1.0, epsilon=1.0, delta=1e-5)
d1, d2 = DiscreteGaussian(0, 3.0), DiscreteGaussian(0, 3.0)
rng = insecure_seeded(1)
vec = np.zeros(1000)
items = [as_item(PureDP(0.01)), as_item(ZCDP(0.001))]
e1, e2 = Estimate(0.1, kind="upper", method="m"), Estimate(0.25, kind="exact", method="n")


def adds():
    s = AccountingState()
    for i in range(10_000):
        s = s.add(items[i & 1])


paths = {{
    "distribution Laplace(0, 1)": lambda: Lap(0.0, 1.0),
    "distribution Gaussian(0, 1)": lambda: NGauss(0.0, 1.0),
    "distribution DiscreteLaplace(0, 2.0)": lambda: DiscreteLaplace(0, 2.0),
    "distribution DiscreteGaussian(0, 3.0)": lambda: DiscreteGaussian(0, 3.0),
    "distribution Finite(3 masses)": lambda: Finite([0.5, 0.3, 0.2]),
    "DiscreteGaussian.cdf (cached table)": lambda: d1.cdf(1.0),
    "distribution hash + ==": lambda: hash(d1) == hash(d2) and d1 == d2,
    "field reads (x4)": lambda: (lap.grid_scale, lap.units, gau.grid_sigma, gau.grid),
    "mechanism Laplace(sensitivity, epsilon)": lambda: Laplace(sensitivity=1.0, epsilon=1.0),
    "mechanism Gaussian(sensitivity, sigma)": lambda: Gaussian(sensitivity=1.0, sigma=2.0),
    "Laplace.pair + pure_dp()": lambda: (lap.pair, lap.pure_dp()),
    "Gaussian.pair": lambda: gau.pair,
    "Laplace.release(scalar)": lambda: lap.release(42.0, rng=rng),
    "Gaussian.release(scalar)": lambda: gau.release(42.0, rng=rng),
    "Laplace.release(1000 values)": lambda: lap_v.release(vec, rng=rng),
    "Gaussian.release(1000 values)": lambda: gau_v.release(vec, rng=rng),
    "release interval ends": lambda: lap_v.release(vec, rng=rng).interval[1],
    "Estimate(0.1, kind='upper')": lambda: Estimate(0.1, kind="upper", method="m"),
    "Estimate + Estimate": lambda: e1 + e2,
    "AccountingState().add(PureDP)": lambda: AccountingState().add(items[0]),
}}
slow = {{
    "mechanism Gaussian(sensitivity, epsilon, delta) (calibration)":
        lambda: Gaussian(sensitivity=1.0, epsilon=1.0, delta=1e-5),
    "Gaussian.approx_dp(1e-6) (calibrated)": lambda: gau_cal.approx_dp(1e-6),
    "AccountingState: 10^4 adds in a row (PureDP, ZCDP alternating)": adds,
}}
only = {only!r}
paths = {{k: v for k, v in paths.items() if not only or any(o in k for o in only)}}
slow = {{k: v for k, v in slow.items() if not only or any(o in k for o in only)}}
out = {{}}
for name, fn in paths.items():
    out[name] = time_per_call(fn, repeats={repeats}, warmup=2)["median_s"]
for name, fn in slow.items():
    out[name] = time_per_call(fn, repeats=max(3, {repeats} // 2), warmup=1)["median_s"]
RESULT = out
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-src", required=True, help="the src/ directory of the 'before' tree")
    ap.add_argument("--src", default=str(H.ROOT / "src"), help="the src/ directory of the 'after' tree")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated substrings: time only the paths naming one")
    args = ap.parse_args()
    trees = {"before": str(Path(args.baseline_src).resolve()), "after": str(Path(args.src).resolve())}
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for which in order:
            only = [o for o in args.only.split(",") if o]
            res = H.run_isolated(_SNIPPET.format(src=trees[which], repeats=args.repeats, only=only), label=which)
            if not res.get("ok"):
                raise SystemExit(f"{which} round {r}: {res.get('error')} {res.get('stderr_tail', '')}")
            runs[which].append(res["result"])
    rows: list[list[Any]] = []
    summary: dict[str, dict[str, float]] = {}
    for name in runs["before"][0]:
        before = statistics.median(run[name] for run in runs["before"])
        after = statistics.median(run[name] for run in runs["after"])
        ratio = statistics.median(a[name] / b[name] for a, b in zip(runs["after"], runs["before"]))
        best_before = min(run[name] for run in runs["before"])
        best_after = min(run[name] for run in runs["after"])
        summary[name] = {"before_s": before, "after_s": after, "ratio_after_over_before": ratio,
                         "best_before_s": best_before, "best_after_s": best_after,
                         "best_ratio": best_after / best_before}
        rows.append([name, H.fmt_time(before), H.fmt_time(after), f"{ratio:.2f}", H.fmt_time(best_before),
                     H.fmt_time(best_after), f"{best_after / best_before:.2f}"])
    env = H.environment()
    md = "\n".join([
        "# Value objects: before / after (issue 13, frozen slotted dataclasses)",
        "",
        f"before: `{trees['before']}`; after: `{trees['after']}`; {args.rounds} alternating rounds, "
        f"{args.repeats} repeats each; per-call medians; ratio = median over rounds of after/before.",
        "",
        H.markdown_table(["path", "before (median)", "after (median)", "after / before (median of rounds)",
                          "before (fastest round)", "after (fastest round)", "after / before (fastest)"], rows),
        "",
        H.environment_markdown(env),
    ])
    H.write_report("value-objects", markdown=md, data={"trees": trees, "rounds": runs, "summary": summary}, env=env)


if __name__ == "__main__":
    main()
