"""Shared machinery of the benchmarks (STYLE.md §7): timing, isolated runs, environment, reports.

Contract:

* :func:`time_callable` runs a callable after ``warmup`` untimed runs and reports the median, min
  and max of ``repeats`` (>= 3) timed runs; ``number`` calls per run give per-call times for
  microsecond-scale calls; ``setup`` builds fresh arguments before every run, outside the timing.
* :func:`run_isolated` runs a snippet in a fresh interpreter with a timeout and an address-space
  cap (``RLIMIT_AS``), and returns what the snippet put in ``RESULT`` plus its peak resident
  memory, or the reason it failed ("not installed", "timeout", "memory cap", an exception).
  Every peer, every raw limit and dpkit itself run this way, so one cannot disturb another.
* :func:`environment` records Python, NumPy/SciPy, dpkit and peer versions, the CPU and the git
  commit; :func:`write_report` writes ``benchmarks/results/<date>-<commit>-<name>.{json,md}`` and
  prints the Markdown.

Nothing here asserts on timing: benchmarks report, tests decide.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

#: Distribution names of the peers, as pip knows them, with the module each one imports as.
PEERS: dict[str, str] = {
    "opendp": "opendp",
    "dp-accounting": "dp_accounting",
    "diffprivlib": "diffprivlib",
    "python-dp": "pydp",
    "prv-accountant": "prv_accountant",
    "autodp": "autodp",
    "pipeline-dp": "pipeline_dp",
}

_MARKER = "@@BENCH-RESULT@@"


# --------------------------------------------------------------------------------------------
# timing


def time_callable(
    fn: Callable[..., Any],
    *,
    setup: Callable[[], tuple[Any, ...]] | None = None,
    repeats: int = 5,
    warmup: int = 1,
    number: int = 1,
) -> dict[str, Any]:
    """Time ``fn(*setup())``: ``warmup`` untimed runs, then ``repeats`` timed runs of ``number`` calls.

    Returns a dict with ``median_s``, ``min_s``, ``max_s`` (per call), ``runs`` (the per-call time
    of each timed run), ``repeats``, ``number`` and ``value`` (what the last call returned).
    """
    if repeats < 3:
        raise ValueError(f"repeats must be >= 3 (STYLE.md §7: median of at least 3 runs); got {repeats}.")
    if number < 1:
        raise ValueError(f"number must be >= 1; got {number}.")
    value: Any = None
    times: list[float] = []
    for i in range(warmup + repeats):
        args = setup() if setup is not None else ()
        t0 = time.perf_counter()
        for _ in range(number):
            value = fn(*args)
        elapsed = (time.perf_counter() - t0) / number
        del args
        if i >= warmup:
            times.append(elapsed)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": times,
        "repeats": repeats,
        "warmup": warmup,
        "number": number,
        "value": value,
    }


def timed_runs(fn: Callable[[], Any], repeats: int, warmup: int) -> tuple[dict[str, Any], Any]:
    """``warmup`` untimed calls, then ``repeats`` timed ones (1 allowed: the slow rows that run once, cold).

    For the snippets of ``run_isolated`` (they import it from here).  Returns the timing (``runs``,
    ``median_s``, ``repeats``, ``warmup``) and what the last call returned.
    """
    for _ in range(warmup):
        fn()
    runs, value = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        runs.append(time.perf_counter() - t)
    return {"runs": runs, "median_s": statistics.median(runs), "repeats": repeats, "warmup": warmup}, value


def time_per_call(
    fn: Callable[[], Any], *, target_run_s: float = 0.1, repeats: int = 7, warmup: int = 1
) -> dict[str, Any]:
    """Per-call time of a fast call: ``number`` is chosen so one run lasts about ``target_run_s``."""
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= target_run_s / 5 or number >= 10**7:
            break
        number *= 10
    number = max(1, int(number * target_run_s / max(elapsed, 1e-9)))
    return time_callable(fn, repeats=repeats, warmup=warmup, number=number)


# --------------------------------------------------------------------------------------------
# memory


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (``VmHWM``; ``ru_maxrss`` where /proc is absent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss_bytes() -> int:
    """Resident memory of this process now (``VmRSS``), or -1 where /proc is absent."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def reset_peak_rss() -> bool:
    """Reset the peak-RSS mark to the current RSS (Linux >= 4.0, ``clear_refs`` 5); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def prefault_memory(gib: float) -> dict[str, Any]:
    """Touch ``gib`` GiB once, free it, and reset the peak-RSS mark; returns what the touches cost.

    On a virtual machine whose host backs guest memory lazily, the first touch of memory the guest
    has never used costs far more than any later touch (about 200 ms per 80 MB was seen here,
    against ~5 ms once backed), and it lands on whichever timed call first grows the process.
    Pre-faulting the memory a benchmark will need, in every subprocess alike (dpkit, raw limits,
    peers), takes that one-off cost out of the comparison.  Benchmarks report the two touch times.
    """
    import numpy as np

    n = max(1, int(gib * 2**30) // 8)
    t0 = time.perf_counter()
    block = np.ones(n)  # writes every page: first touch
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    block.fill(0.0)  # the same pages again: memory bandwidth only
    second = time.perf_counter() - t0
    del block
    reset_peak_rss()
    return {"gib": gib, "first_touch_s": first, "second_touch_s": second}


def measure_peak(fn: Callable[[], Any]) -> dict[str, Any]:
    """Run ``fn`` once and report the peak RSS it reached above the RSS at its start (bytes)."""
    if not reset_peak_rss():
        return {"peak_above_start_bytes": None, "note": "peak reset refused by the kernel"}
    start = current_rss_bytes()
    fn()
    return {"peak_above_start_bytes": peak_rss_bytes() - start}


# --------------------------------------------------------------------------------------------
# isolated runs


def _limit_address_space(limit_bytes: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return preexec


_CHILD = r"""
import json, resource, sys, traceback
sys.path.insert(0, {bench_dir!r})
_ns = {{"__name__": "__bench_child__"}}
try:
    exec(compile({code!r}, {label!r}, "exec"), _ns)
    _out = {{"ok": True, "result": _ns.get("RESULT")}}
except ModuleNotFoundError as e:
    _out = {{"ok": False, "error": "not installed (no module " + repr(e.name) + ")"}}
except ImportError as e:
    _out = {{"ok": False, "error": "installed but import fails: " + str(e)[:300]}}
except MemoryError:
    _out = {{"ok": False, "error": "MemoryError: hit the memory cap"}}
except BaseException as e:
    _out = {{"ok": False, "error": type(e).__name__ + ": " + str(e)[:500],
            "traceback": traceback.format_exc()[-3000:]}}
_out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sys.stdout.write("\n" + {marker!r} + json.dumps(_out, default=float) + "\n")
sys.stdout.flush()
"""


def run_isolated(
    code: str,
    *,
    label: str = "snippet",
    timeout_s: float = 600.0,
    memory_gib: float = 12.0,
    python: str | None = None,
) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter with a timeout and an address-space cap.

    The snippet runs with ``benchmarks/`` on ``sys.path`` and reports by assigning a JSON-able
    value to ``RESULT``.  Returns ``{"ok": True, "result": ..., "peak_rss_bytes": ..., "wall_s": ...}``
    or ``{"ok": False, "error": <reason>, ...}``; never raises for a failure of the snippet.
    """
    limit = int(memory_gib * 2**30)
    child = _CHILD.format(bench_dir=str(BENCH_DIR), code=code, label=f"<{label}>", marker=_MARKER)
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [python or sys.executable, "-c", child],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
        env=env,
        preexec_fn=_limit_address_space(limit),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return {"ok": False, "error": f"timeout after {timeout_s:g} s", "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    for line in reversed(out.splitlines()):
        if line.startswith(_MARKER):
            res: dict[str, Any] = json.loads(line[len(_MARKER):])
            res["wall_s"] = wall
            if not res.get("ok") and err.strip():
                res.setdefault("stderr_tail", err.strip()[-1500:])
            return res
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        reason = f"killed by {sig}" + (" (likely the memory cap)" if sig in ("SIGKILL", "SIGSEGV", "SIGABRT") else "")
    else:
        reason = f"exited with status {proc.returncode} without a result"
    tail = err.strip().splitlines()[-3:] if err.strip() else []
    return {"ok": False, "error": reason + (": " + " | ".join(tail) if tail else ""), "wall_s": wall}


# --------------------------------------------------------------------------------------------
# environment


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"model": model, "logical_cpus": os.cpu_count(), "usable_cpus": usable, "memory_gib": mem}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def git_commit() -> dict[str, Any]:
    """Short commit hash, and whether src/ differs from it (a dirty tree is not that commit)."""
    commit = _git("rev-parse", "--short", "HEAD") or "nogit"
    dirty = bool(_git("status", "--porcelain", "--", "src", "pyproject.toml"))
    return {"commit": commit, "src_dirty": dirty}


def environment(extra_dists: Sequence[str] = ()) -> dict[str, Any]:
    """Versions, CPU, commit and interpreter of this run."""
    dists = ["dpkit", "numpy", "scipy", *PEERS.keys(), *extra_dists]
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu": _cpu(),
        "git": git_commit(),
        "versions": {d: _version(d) for d in dict.fromkeys(dists)},
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        # other work on the machine skews timings: the 1/5/15-minute load averages when the run began
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


# --------------------------------------------------------------------------------------------
# formatting and reports


def fmt_time(seconds: float | None) -> str:
    """Seconds in a readable unit: ``1.23 s``, ``45.6 ms``, ``7.89 µs``, ``120 ns``."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_value(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.12g}"
    return str(v)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table; cells are str()-ed and pipes escaped."""

    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)  # "inf", "-inf", "nan": strict JSON has no such numbers
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def write_report(name: str, *, markdown: str, data: dict[str, Any], env: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``results/<date>-<commit>-<name>.{json,md}``, print the Markdown, return both paths."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    date = env["date"][:10]
    commit = env["git"]["commit"] + ("-dirty" if env["git"]["src_dirty"] else "")
    stem = f"{date}-{commit}-{name}"
    json_path = RESULTS_DIR / f"{stem}.json"
    md_path = RESULTS_DIR / f"{stem}.md"
    json_path.write_text(json.dumps(_jsonable({"name": name, "environment": env, **data}), indent=2) + "\n")
    md_path.write_text(markdown.rstrip() + "\n")
    print(markdown)
    print(f"\n(written to {md_path.relative_to(ROOT)} and {json_path.name})")
    return json_path, md_path


def environment_markdown(env: dict[str, Any]) -> str:
    cpu = env["cpu"]
    v = env["versions"]
    peers = ", ".join(f"{d} {v[d]}" for d in PEERS)
    dirty = " (src/ modified)" if env["git"]["src_dirty"] else ""
    return "\n".join(
        [
            f"- commit `{env['git']['commit']}`{dirty}, {env['date']}",
            f"- CPU: {cpu['model']}, {cpu['usable_cpus']} usable of {cpu['logical_cpus']} logical, {cpu['memory_gib']} GiB",
            f"- Python {env['python']} (`{env['executable']}`); dpkit {v['dpkit']}, numpy {v['numpy']}, scipy {v['scipy']}",
            f"- peers: {peers}",
            f"- load average at start (1/5/15 min): {env.get('load_average')} — other processes share these cores",
        ]
    )
