"""Sampling benchmarks: dpkit's exact samplers against NumPy's raw limit.

Bar (randomness issue): a cryptographically secure default generator "fast enough to feed
vectorised NumPy sampling" and exact samplers vectorised over arrays; the target is at least
10 million discrete Laplace draws per second on this 2-core machine (OpenDP, the issue notes, makes
about 44 thousand per second).

Rows, each at n = 10^7 draws (``--n``), a warm-up run then the median of ``--repeats`` (>= 3) runs,
each row in its own subprocess (``_harness.run_isolated``; in-process if the harness is absent):

* the raw limit: NumPy's ``Generator`` on PCG64 (``integers`` as raw 64-bit words, ``random``,
  ``laplace``, ``normal``, ``geometric``), which is neither secure nor exact;
* the secure generators' raw 64-bit word throughput: ChaCha20 (dpkit's default) and AES-128-CTR
  (``secure_rng(cipher="aes128")``, where the CPU has AES-NI);
* dpkit's samplers with each generator: the default secure one (ChaCha20), AES-128, and the
  insecure seeded PCG64 (not private; it isolates the cost of the algorithms from the cipher).

"vs NumPy" divides draws/s by the matching NumPy row (discrete Laplace by ``laplace``, geometric by
``geometric``, discrete Gaussian by ``normal``, Bernoulli by ``random``): the price of exactness
and security over NumPy's floating-point, predictable samplers.  Peers are added by the peer
benchmark (``bench_*`` harness); nothing here asserts on timing.

    .venv/bin/python benchmarks/bench_sampling.py            # prints the table
    .venv/bin/python benchmarks/bench_sampling.py --write    # also writes benchmarks/results/
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import _harness as H
except ImportError:  # pragma: no cover - the shared harness is optional for this script
    H = None

N_BAR = 10**7

# (key, label, parameters, NumPy row it is compared with)
NUMPY_ROWS = [
    ("np_words", "integers (raw 64-bit words)", "", None),
    ("np_random", "random (uniform float)", "", None),
    ("np_laplace", "laplace", "scale=1", None),
    ("np_normal", "normal", "sigma=1", None),
    ("np_geometric", "geometric", "p=1-exp(-1/10)", None),
]
RAW_ROWS = [
    ("words_chacha20", "raw 64-bit words", "ChaCha20 (secure default)"),
    ("words_aes128", "raw 64-bit words", "AES-128-CTR (secure, AES-NI)"),
]
SAMPLER_ROWS = [
    ("discrete_laplace", "discrete_laplace", "scale=1", "np_laplace"),
    ("discrete_laplace_100", "discrete_laplace", "scale=100", "np_laplace"),
    ("discrete_laplace_1e7", "discrete_laplace", "scale=1e7", "np_laplace"),
    # the grid scale of a 10^7-value Laplace release (sensitivity 1, epsilon 1): the split path
    ("discrete_laplace_2e10", "discrete_laplace", "scale=2**34+10**7", "np_laplace"),
    ("geometric", "geometric", "scale=10", "np_geometric"),
    ("discrete_gaussian", "discrete_gaussian", "sigma=1", "np_normal"),
    ("discrete_gaussian_100", "discrete_gaussian", "sigma=100", "np_normal"),
    # about the grid sigma of a 10^7-value Gaussian release (sigma 1): bins of width 2**14
    ("discrete_gaussian_4e6", "discrete_gaussian", "sigma=2**22", "np_normal"),
    ("bernoulli_exp", "bernoulli_exp", "gamma=0.5", "np_random"),
    ("bernoulli_exp_array", "bernoulli_exp", "gamma per draw, U[0,2)", "np_random"),
]
GENERATORS = [
    ("chacha20", "ChaCha20 (secure default)"),
    ("aes128", "AES-128-CTR (secure, AES-NI)"),
    ("pcg64", "PCG64 insecure_seeded (not private)"),
]


def _time(fn: Any, setup: Any, repeats: int) -> dict[str, Any]:
    if H is not None:
        res = H.time_callable(fn, setup=setup, repeats=repeats, warmup=1)
        res.pop("value", None)
        return res
    times = []
    for i in range(1 + repeats):
        args = setup() if setup is not None else ()
        t0 = time.perf_counter()
        fn(*args)
        if i:
            times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "runs": times}


def _generator(name: str) -> Any:
    import dpkit.random as dr

    if name == "pcg64":
        return dr.insecure_seeded(12345)
    return dr.secure_rng(cipher=name)


def child_row(key: str, generator: str | None, n: int, repeats: int, prefault_gib: float) -> dict[str, Any]:
    """Time one row in this process; returns the timing dict (median_s etc.)."""
    import numpy as np

    if H is not None and prefault_gib > 0:
        H.prefault_memory(prefault_gib)
    if key.startswith("np_"):
        rng = np.random.Generator(np.random.PCG64(12345))
        fns = {
            "np_words": lambda: rng.integers(0, 1 << 64, size=n, dtype=np.uint64),
            "np_random": lambda: rng.random(n),
            "np_laplace": lambda: rng.laplace(0.0, 1.0, n),
            "np_normal": lambda: rng.normal(0.0, 1.0, n),
            "np_geometric": lambda: rng.geometric(-math.expm1(-1 / 10), n),
        }
        return _time(fns[key], None, repeats)
    if key.startswith("words_"):
        rng = _generator(key.removeprefix("words_"))
        return _time(lambda: rng.integers(0, 1 << 64, size=n, dtype=np.uint64), None, repeats)

    import dpkit.random as dr

    rng = _generator(generator or "chacha20")
    gammas = np.random.Generator(np.random.PCG64(7)).random(n) * 2 if key == "bernoulli_exp_array" else None
    fns = {
        "discrete_laplace": lambda: dr.discrete_laplace(1.0, n, rng=rng),
        "discrete_laplace_100": lambda: dr.discrete_laplace(100.0, n, rng=rng),
        "discrete_laplace_1e7": lambda: dr.discrete_laplace(1e7, n, rng=rng),
        "discrete_laplace_2e10": lambda: dr.discrete_laplace(2.0**34 + 1e7, n, rng=rng),
        "geometric": lambda: dr.geometric(10.0, n, rng=rng),
        "discrete_gaussian": lambda: dr.discrete_gaussian(1.0, n, rng=rng),
        "discrete_gaussian_100": lambda: dr.discrete_gaussian(100.0, n, rng=rng),
        "discrete_gaussian_4e6": lambda: dr.discrete_gaussian(2.0**22, n, rng=rng),
        "bernoulli_exp": lambda: dr.bernoulli_exp(0.5, n, rng=rng),
        "bernoulli_exp_array": lambda: dr.bernoulli_exp(gammas, rng=rng),
    }
    return _time(fns[key], None, repeats)


def _run(key: str, generator: str | None, args: argparse.Namespace) -> dict[str, Any]:
    label = key if generator is None else f"{key}[{generator}]"
    print(f"  running {label} ...", file=sys.stderr, flush=True)
    if H is None:
        try:
            return {"ok": True, "result": child_row(key, generator, args.n, args.repeats, 0.0)}
        except Exception as exc:  # noqa: BLE001 - reported in the table
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    code = (
        "import bench_sampling as B\n"
        f"RESULT = B.child_row({key!r}, {generator!r}, {args.n}, {args.repeats}, {args.prefault_gib})\n"
    )
    return H.run_isolated(code, label=label, timeout_s=args.timeout, memory_gib=8)


def _rate(res: dict[str, Any], n: int) -> float | None:
    if not res.get("ok"):
        return None
    return n / res["result"]["median_s"]


def _fmt_rate(rate: float | None) -> str:
    if rate is None:
        return "—"
    return f"{rate / 1e6:.3g} M/s" if rate >= 1e6 else f"{rate / 1e3:.3g} k/s"


def _spread(res: dict[str, Any], n: int) -> str:
    if not res.get("ok"):
        return str(res.get("error", "failed"))[:80]
    r = res["result"]
    return f"{n / r['max_s'] / 1e6:.3g}–{n / r['min_s'] / 1e6:.3g} M/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=N_BAR, help="draws per call (default 10^7, the bar's n)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per row after one warm-up (>= 3)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per row before it is killed")
    ap.add_argument("--prefault-gib", type=float, default=1.0,
                    help="memory each subprocess touches once before timing (see _harness.prefault_memory)")
    ap.add_argument("--generators", default="chacha20,aes128,pcg64",
                    help="comma-separated subset of chacha20, aes128, pcg64 for the sampler rows")
    ap.add_argument("--write", action="store_true", help="write JSON and Markdown to benchmarks/results/")
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3 (STYLE.md §7)")
    n = args.n
    chosen = [g for g in args.generators.split(",") if g]

    results: dict[str, dict[str, Any]] = {}
    for key, *_ in NUMPY_ROWS:
        results[key] = _run(key, None, args)
    for key, *_ in RAW_ROWS:
        results[key] = _run(key, None, args)
    for key, *_ in SAMPLER_ROWS:
        for gen in chosen:
            results[f"{key}[{gen}]"] = _run(key, gen, args)

    rows = []
    for key, label, params, _ in NUMPY_ROWS:
        rows.append([f"NumPy `{label}`", "PCG64 (raw limit)", params, _fmt_rate(_rate(results[key], n)),
                     _spread(results[key], n), "1"])
    words = _rate(results["np_words"], n)
    for key, label, gen_label in RAW_ROWS:
        rate = _rate(results[key], n)
        ratio = f"{rate / words:.2f}" if rate and words else "—"
        rows.append([f"secure `{label}`", gen_label, "", _fmt_rate(rate), _spread(results[key], n),
                     f"{ratio} (vs NumPy words)"])
    gen_labels = dict(GENERATORS)
    for key, name, params, base in SAMPLER_ROWS:
        base_rate = _rate(results[base], n)
        for gen in chosen:
            res = results[f"{key}[{gen}]"]
            rate = _rate(res, n)
            ratio = f"{rate / base_rate:.2f}" if rate and base_rate else "—"
            rows.append([f"dpkit `{name}`", gen_labels[gen], params, _fmt_rate(rate), _spread(res, n), ratio])

    columns = ["sampler", "generator", "parameters", "draws/s (median)", "range over runs", "vs NumPy"]
    if H is not None:
        table = H.markdown_table(columns, rows)
    else:
        table = "\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
                          + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])
    dlap = _rate(results.get("discrete_laplace[chacha20]", {}), n)
    lines = [
        "# Sampling: dpkit's exact samplers vs NumPy",
        "",
        f"Bar: >= 10 M discrete Laplace draws/s with the secure default generator (OpenDP: ~44 k/s). "
        f"Measured: {_fmt_rate(dlap)} (scale=1, ChaCha20).",
        "",
        f"n = {n:,} draws per call; median of {args.repeats} runs after a warm-up; "
        + ("one subprocess per row." if H is not None else "in-process (benchmarks/_harness.py absent)."),
        "",
    ]
    if H is not None:
        env = H.environment(extra_dists=("randomgen",))
        lines += [H.environment_markdown(env), f"- randomgen {env['versions'].get('randomgen')}", ""]
    lines += [table, ""]
    markdown = "\n".join(lines)
    if args.write and H is not None:
        H.write_report("sampling", markdown=markdown, data={"n": n, "rows": rows, "results": results}, env=env)
    else:
        print(markdown)


if __name__ == "__main__":
    main()
