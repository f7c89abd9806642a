"""Budget stretch (issue 9): how many adaptively chosen count queries (sensitivity 1) an ApproxDP(1, 1e-6)
budget answers at a fixed noise standard deviation sigma = 10, 100, 1000.

Rows, each counted by the real ``Accountant`` (adaptive mode, the default filter choice):

* **Laplace path**: dpkit's ``Laplace`` mechanism with epsilon = sqrt(2)/sigma (standard deviation sigma);
  the first spend is pure, so the zCDP filter (Feldman & Zrnic 2021) holds the budget's delta, beside the
  basic filter for pure spends.
* **Gaussian path**: dpkit's ``Gaussian`` mechanism (discrete, zCDP: the zCDP filter) and continuous
  Gaussian noise (``GaussianEvent``: the GDP filter of Smith & Thakurta 2022).
* **basic composition**: Laplace: floor(eps_B / eps_i); Gaussian: the largest k with
  k * eps_G(delta_B / k) <= eps_B (each query's delta an equal share; eps_G the exact Gaussian curve,
  certified upper end), the best basic composition can do with equal queries.

The count is the largest k for which ``Accountant.check(item, count=k)`` passes (bisection; every filter
sums exact fractions, so k copies at once and k single spends are the same decision); for sigma = 100 it
is confirmed by spending one query at a time until the first refusal, and that loop is timed.

Peers (Tumult Analytics, OpenDP) are not run here yet.

    .venv/bin/python benchmarks/bench_budget.py [--no-write]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import environment, environment_markdown, markdown_table, write_report  # noqa: E402

from dpkit.accounting import Accountant  # noqa: E402
from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval  # noqa: E402
from dpkit.accounting.items import GaussianEvent  # noqa: E402
from dpkit.errors import BudgetExceededError  # noqa: E402
from dpkit.guarantees import ApproxDP  # noqa: E402
from dpkit.mechanisms import Gaussian, Laplace  # noqa: E402

EPS, DELTA = 1.0, 1e-6
SIGMAS = (10.0, 100.0, 1000.0)


def _largest_count(fits: Callable[[int], bool]) -> int:
    """The largest k >= 1 with ``fits(k)`` (0 if none), for ``fits`` monotone: doubling, then bisection."""
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def largest_count(item: object) -> int:
    def fits(k: int) -> bool:
        try:
            Accountant(ApproxDP(epsilon=EPS, delta=DELTA)).check(item, count=k)
            return True
        except BudgetExceededError:
            return False

    return _largest_count(fits)


def one_at_a_time(item: object) -> tuple[int, float, str]:
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
    n, t0 = 0, time.perf_counter()
    while True:
        try:
            acc.spend(item)
        except BudgetExceededError:
            return n, time.perf_counter() - t0, "; ".join(acc.filters)
        n += 1


def basic_gaussian(sigma: float) -> int:
    def fits(k: int) -> bool:
        return k * gaussian_epsilon_interval(1.0 / sigma, DELTA / k)[1] <= EPS

    return _largest_count(fits)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print only, write no results file")
    args = ap.parse_args()
    rows, data = [], []
    for sigma in SIGMAS:
        lap = Laplace(sensitivity=1.0, epsilon=math.sqrt(2.0) / sigma)
        eps_l = float(lap.pure_dp().epsilon)
        r = {
            "sigma": sigma,
            "laplace_basic": int(EPS / eps_l) if eps_l * int(EPS / eps_l) <= EPS else int(EPS / eps_l) - 1,
            "laplace_dpkit": largest_count(lap),
            "gaussian_basic": basic_gaussian(sigma),
            "gaussian_dpkit_mechanism": largest_count(Gaussian(sensitivity=1, sigma=sigma)),
            "gaussian_dpkit_continuous": largest_count(GaussianEvent(sigma=sigma)),
        }
        if sigma == 100.0:
            for key, item in (("laplace_dpkit", lap), ("gaussian_dpkit_continuous", GaussianEvent(sigma=sigma))):
                n, secs, filters = one_at_a_time(item)
                assert n == r[key], (key, n, r[key])
                r[f"{key}_loop_seconds"] = secs
                r[f"{key}_filters"] = filters
        data.append(r)
        best_g = max(r["gaussian_dpkit_mechanism"], r["gaussian_dpkit_continuous"])
        rows.append([f"{sigma:g}", r["laplace_basic"], r["laplace_dpkit"],
                     f"{r['laplace_dpkit'] / max(r['laplace_basic'], 1):.2f}x", r["gaussian_basic"],
                     r["gaussian_dpkit_mechanism"], r["gaussian_dpkit_continuous"],
                     f"{best_g / max(r['gaussian_basic'], 1):.2f}x"])
    md = "\n".join([
        "# Budget stretch: adaptive count queries under ApproxDP(1, 1e-6)", "",
        markdown_table(["noise sd", "Laplace: basic", "Laplace: dpkit (zCDP filter)", "ratio",
                        "Gaussian: basic", "Gaussian: dpkit mechanism (zCDP filter)",
                        "Gaussian: continuous (GDP filter)", "ratio"], rows), "",
        "Peers (Tumult Analytics, OpenDP) not run in this benchmark yet.", "",
    ])
    s100 = next(r for r in data if r["sigma"] == 100.0)
    md += (f"\nsigma = 100, one spend at a time until the first refusal: Laplace {s100['laplace_dpkit']} spends in "
           f"{s100['laplace_dpkit_loop_seconds']:.2f} s, continuous Gaussian {s100['gaussian_dpkit_continuous']} "
           f"in {s100['gaussian_dpkit_continuous_loop_seconds']:.2f} s (one run; a loaded machine).\n")
    env = environment()
    if args.no_write:
        print(md)
    else:
        write_report("budget", markdown=md + "\n" + environment_markdown(env), data={"rows": data}, env=env)


if __name__ == "__main__":
    main()
