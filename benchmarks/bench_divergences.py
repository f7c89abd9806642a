"""Divergence benchmarks: the bars of the foundation issue.

Bars (foundation issue): "each divergence between two finite distributions on 10^7 support points
in at most 1 s on this machine; a closed-form call in at most 20 microseconds".

* Finite section: two random pmfs on n = 10^7 points (normalised standard exponentials, i.e. one
  draw of Dirichlet(1, ..., 1); built with NumPy here only, since dpkit never normalises for you).
  ``Finite(p), Finite(q)`` construction and validation is timed on its own row; every divergence
  call is then timed on freshly built objects (so no cache left by an earlier call helps it), a
  warm-up run then the median of ``--repeats`` runs.  Beside each: the raw NumPy/SciPy limit
  computed in the same run (``rel_entr(p, q).sum()``, ``0.5*|p-q|.sum()``,
  ``scipy.stats.wasserstein_distance``, ``maximum(p - e^eps q, 0).sum()``, ...) and, where a peer
  genuinely computes the same quantity, the peer: dp_accounting's
  ``from_two_probability_mass_functions`` builds a (pessimistic, 1e-4-grid) privacy-loss
  distribution from two arbitrary pmfs, whose ``get_delta_for_epsilon`` is the hockey-stick
  divergence and ``get_epsilon_for_delta`` the delta-approximate max divergence.  No peer
  computes KL, Rényi, TV or Wasserstein between arbitrary distributions.
* Closed-form section: Laplace(0,1)/Laplace(1,1), Gaussian(0,1)/Gaussian(1,1),
  DiscreteLaplace(0,1)/DiscreteLaplace(1,1), DiscreteGaussian(0,1)/DiscreteGaussian(1,1); the
  per-call time of kl, renyi, total_variation, hockey_stick, approx_max_divergence and
  max_divergence (many calls per run, median over 7 runs), construction of the pair timed apart.
  Peers with a closed form for the same number: dp_accounting ``*PrivacyLoss.get_delta_for_epsilon``
  (hockey-stick), autodp ``rdp_bank.RDP_*`` (Rényi/KL) and ``dp_bank`` analytic Gaussian,
  prv_accountant ``*Mechanism.rdp`` (Rényi), pipeline_dp ``dp_computations.gaussian_delta`` /
  ``gaussian_epsilon``, OpenDP's privacy maps (``make_laplace`` epsilon = max divergence,
  ``make_gaussian`` rho = KL of the shift pair); values are printed side by side.

dpkit, each raw limit and each peer run in their own subprocess with a timeout and a memory cap
(benchmarks/_harness.py).  Run with the bench venv (``bash benchmarks/run.sh divergences``) or
alone with the project venv (``.venv/bin/python benchmarks/bench_divergences.py``; peers then show
as "not installed").  ``--n 100000`` gives a quick smoke run (its results are not the bar's).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402

NAME = "divergences"
BAR_FINITE_S = 1.0
BAR_CLOSED_S = 20e-6
N_BAR = 10**7
SEED = 20240607
EPSILON = 0.5
DELTA = 1e-6

# --------------------------------------------------------------------------------------------
# inputs (identical in every subprocess: same seed)


def finite_inputs(n: int) -> tuple[Any, Any]:
    """Two pmfs on n points: normalised standard exponentials (one Dirichlet(1,...,1) draw each)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    p = rng.standard_exponential(n)
    p /= p.sum()
    q = rng.standard_exponential(n)
    q /= q.sum()
    return p, q


# (row id, label) of the finite section, in table order
FINITE_OPS: list[tuple[str, str]] = [
    ("kl", "kl"),
    ("renyi2", "renyi α=2"),
    ("renyi05", "renyi α=0.5"),
    ("max", "max_divergence"),
    ("approx_max", f"approx_max_divergence δ={DELTA:g}"),
    ("hockey", f"hockey_stick ε={EPSILON:g}"),
    ("tv", "total_variation"),
    ("sd", "statistical_distance"),
    ("w1", "wasserstein order=1"),
    ("w2", "wasserstein order=2"),
]


def _dpkit_finite_calls() -> dict[str, Callable[[Any, Any], Any]]:
    from dpkit.divergences import (
        approx_max_divergence,
        hockey_stick,
        kl,
        max_divergence,
        renyi,
        statistical_distance,
        total_variation,
        wasserstein,
    )

    return {
        "kl": lambda P, Q: kl(P, Q),
        "renyi2": lambda P, Q: renyi(P, Q, alpha=2.0),
        "renyi05": lambda P, Q: renyi(P, Q, alpha=0.5),
        "max": lambda P, Q: max_divergence(P, Q),
        "approx_max": lambda P, Q: approx_max_divergence(P, Q, delta=DELTA),
        "hockey": lambda P, Q: hockey_stick(P, Q, epsilon=EPSILON),
        "tv": lambda P, Q: total_variation(P, Q),
        "sd": lambda P, Q: statistical_distance(P, Q),
        "w1": lambda P, Q: wasserstein(P, Q, order=1.0),
        "w2": lambda P, Q: wasserstein(P, Q, order=2.0),
    }


def _estimate(v: Any) -> dict[str, Any]:
    return {"value": float(v), "kind": getattr(v, "kind", None), "method": getattr(v, "method", None)}


def child_dpkit_finite(n: int, repeats: int, prefault_gib: float = 0.0) -> dict[str, Any]:
    """dpkit on two Finite laws of n points: construction, then each divergence on fresh objects."""
    from dpkit.distributions import Finite

    pre = H.prefault_memory(prefault_gib) if prefault_gib > 0 else None
    p, q = finite_inputs(n)
    out: dict[str, Any] = {"prefault": pre, "rss_after_inputs_bytes": H.peak_rss_bytes()}

    def build() -> tuple[Any, Any]:
        return Finite(p), Finite(q)

    t = H.time_callable(build, repeats=repeats, warmup=1)
    t.pop("value")
    out["construct"] = {"timing": t, **H.measure_peak(build)}

    fresh = lambda: build()  # noqa: E731  (setup: new objects, so no cached sort helps a call)
    calls = _dpkit_finite_calls()
    for key, call in calls.items():
        t = H.time_callable(call, setup=fresh, repeats=repeats, warmup=1)
        value = t.pop("value")
        P, Q = build()
        mem = H.measure_peak(lambda: call(P, Q))
        del P, Q
        out[key] = {"timing": t, **_estimate(value), **mem}
    # a second call on the same objects reuses the sorted supports that Finite caches
    P, Q = build()
    calls["w1"](P, Q)  # first call sorts and caches
    t = H.time_callable(lambda: calls["w1"](P, Q), repeats=repeats, warmup=0)
    value = t.pop("value")
    out["w1_cached"] = {"timing": t, **_estimate(value)}
    out["peak_rss_bytes"] = H.peak_rss_bytes()
    return out


def child_raw_finite(n: int, repeats: int, prefault_gib: float = 0.0) -> dict[str, Any]:
    """The raw NumPy/SciPy limits on the same arrays (no validation, no log space, no edge cases)."""
    import numpy as np
    from scipy import special, stats

    pre = H.prefault_memory(prefault_gib) if prefault_gib > 0 else None
    p, q = finite_inputs(n)
    support = np.arange(n, dtype=np.float64)
    e = math.exp(EPSILON)
    calls: dict[str, tuple[str, Callable[[], Any]]] = {
        "kl": ("scipy rel_entr(p,q).sum()", lambda: float(special.rel_entr(p, q).sum())),
        "renyi2": ("numpy ln Σ p²/q", lambda: float(np.log(np.sum(p * p / q)))),
        "renyi05": ("numpy -2 ln Σ √(pq)", lambda: float(-2.0 * np.log(np.sum(np.sqrt(p * q))))),
        "max": ("numpy max ln(p/q)", lambda: float(np.max(np.log(p / q)))),
        "hockey": ("numpy Σ max(p - e^ε q, 0)", lambda: float(np.maximum(p - e * q, 0.0).sum())),
        "tv": ("numpy 0.5 Σ|p-q|", lambda: float(0.5 * np.abs(p - q).sum())),
        "sd": ("numpy Σ max(p-q, 0)", lambda: float(np.maximum(p - q, 0.0).sum())),
        "w1": (
            "scipy.stats.wasserstein_distance",
            lambda: float(stats.wasserstein_distance(support, support, p, q)),
        ),
    }
    out: dict[str, Any] = {"prefault": pre}
    for key, (label, call) in calls.items():
        t = H.time_callable(call, repeats=repeats, warmup=1)
        value = t.pop("value")
        out[key] = {"label": label, "timing": t, "value": value, **H.measure_peak(call)}
    out["peak_rss_bytes"] = H.peak_rss_bytes()
    return out


def child_dp_accounting_finite(n: int, repeats: int, prefault_gib: float = 0.0) -> dict[str, Any]:
    """dp_accounting: PLD from two arbitrary pmfs (dicts of log masses), then its two queries."""
    import numpy as np
    from dp_accounting.pld import privacy_loss_distribution as pld

    pre = H.prefault_memory(prefault_gib) if prefault_gib > 0 else None
    p, q = finite_inputs(n)

    def to_dicts() -> tuple[dict[int, float], dict[int, float]]:
        return dict(enumerate(np.log(p).tolist())), dict(enumerate(np.log(q).tolist()))

    conv = H.time_callable(to_dicts, repeats=3, warmup=0)
    log_p, log_q = conv.pop("value")
    # upper = P, lower = Q: the PLD's privacy loss is ln p/q under P, so delta(eps) = E_{e^eps}(P||Q)

    def build() -> Any:
        return pld.from_two_probability_mass_functions(log_q, log_p)

    t_build = H.time_callable(build, repeats=repeats, warmup=1)
    d = t_build.pop("value")
    t_delta = H.time_per_call(lambda: d.get_delta_for_epsilon(EPSILON), repeats=repeats)
    t_eps = H.time_per_call(lambda: d.get_epsilon_for_delta(DELTA), repeats=repeats)
    return {
        "prefault": pre,
        "convert_to_dicts": conv,
        "build": t_build,
        "hockey": {"timing": t_delta, "value": float(t_delta.pop("value"))},
        "approx_max": {"timing": t_eps, "value": float(t_eps.pop("value"))},
        "peak_rss_bytes": H.peak_rss_bytes(),
    }


def _profile(fn: Callable[[], Any], calls: int) -> dict[str, Any]:
    """cProfile of ``calls`` calls of fn: the top 10 functions by own time, times per call."""
    import cProfile
    import pstats

    fn()  # warm-up
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt / calls  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_cc, ncalls, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = func if file == "~" else f"{Path(file).name}:{line}({func})"
        rows.append({"where": where, "ncalls": ncalls / calls, "tottime_s": tt / calls, "cumtime_s": ct / calls})
    rows.sort(key=lambda r: r["tottime_s"], reverse=True)
    return {"total_s": total, "calls": calls, "top": rows[:10]}


def child_profile_finite(n: int, key: str, prefault_gib: float = 0.0) -> dict[str, Any]:
    """cProfile of one dpkit call on fresh objects (built outside the profile)."""
    from dpkit.distributions import Finite

    if prefault_gib > 0:
        H.prefault_memory(prefault_gib)
    p, q = finite_inputs(n)
    call = _dpkit_finite_calls()[key]
    call(Finite(p), Finite(q))  # warm-up
    P, Q = Finite(p), Finite(q)
    return _profile(lambda: call(P, Q), 1) | {"note": "the warm-up call ran on other objects"}


def child_profile_closed(family: str, key: str) -> dict[str, Any]:
    """cProfile of 2000 closed-form calls on one pair (cProfile's overhead inflates the times)."""
    P, Q = _pair_builders()[family]()
    call = _dpkit_closed_calls()[key]
    return _profile(lambda: call(P, Q), 2000)


# --------------------------------------------------------------------------------------------
# closed forms

PAIRS: list[tuple[str, str]] = [
    ("Laplace", "Laplace(0,1) vs Laplace(1,1)"),
    ("Gaussian", "Gaussian(0,1) vs Gaussian(1,1)"),
    ("DiscreteLaplace", "DiscreteLaplace(0,1.0) vs DiscreteLaplace(1,1.0)"),
    ("DiscreteGaussian", "DiscreteGaussian(0,1.0) vs DiscreteGaussian(1,1.0)"),
]

CLOSED_OPS: list[tuple[str, str]] = [
    ("kl", "kl"),
    ("renyi2", "renyi α=2"),
    ("renyi05", "renyi α=0.5"),
    ("tv", "total_variation"),
    ("hockey", f"hockey_stick ε={EPSILON:g}"),
    ("approx_max", f"approx_max_divergence δ={DELTA:g}"),
    ("max", "max_divergence"),
]


def _pair_builders() -> dict[str, Callable[[], tuple[Any, Any]]]:
    from dpkit.distributions import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace

    return {
        "Laplace": lambda: (Laplace(0.0, 1.0), Laplace(1.0, 1.0)),
        "Gaussian": lambda: (Gaussian(0.0, 1.0), Gaussian(1.0, 1.0)),
        "DiscreteLaplace": lambda: (DiscreteLaplace(0, 1.0), DiscreteLaplace(1, 1.0)),
        "DiscreteGaussian": lambda: (DiscreteGaussian(0, 1.0), DiscreteGaussian(1, 1.0)),
    }


def _dpkit_closed_calls() -> dict[str, Callable[[Any, Any], Any]]:
    calls = _dpkit_finite_calls()
    return {key: calls[key] for key, _ in CLOSED_OPS}


def child_dpkit_closed(repeats: int) -> dict[str, Any]:
    calls = _dpkit_closed_calls()
    out: dict[str, Any] = {}
    for fam, build in _pair_builders().items():
        t = H.time_per_call(build, repeats=repeats)
        P, Q = t.pop("value")
        res: dict[str, Any] = {"construct": {"timing": t}}
        for key, call in calls.items():
            try:
                t = H.time_per_call(lambda: call(P, Q), repeats=repeats)
            except Exception as exc:  # a refused pair is a result, not a crash of the benchmark
                res[key] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            res[key] = {"timing": t, **_estimate(t.pop("value"))}
        out[fam] = res
    return out


def _peer_rows(specs: dict[str, dict[str, tuple[str, Callable[[], Any], Callable[[], Any] | None]]],
               repeats: int) -> dict[str, Any]:
    """Time peer closed forms: specs[family][op] = (label, call, constructor or None)."""
    out: dict[str, Any] = {}
    for fam, ops in specs.items():
        for key, (label, call, ctor) in ops.items():
            entry: dict[str, Any] = {"label": label}
            try:
                t = H.time_per_call(call, repeats=repeats)
                entry["value"] = float(t.pop("value"))
                entry["timing"] = t
                if ctor is not None:
                    c = H.time_per_call(ctor, repeats=repeats)
                    c.pop("value")
                    entry["construct"] = c
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            out.setdefault(fam, {})[key] = entry
    return out


def child_dp_accounting_closed(repeats: int) -> dict[str, Any]:
    from dp_accounting.pld import privacy_loss_mechanism as plm

    ctors: dict[str, Callable[[], Any]] = {
        "Laplace": lambda: plm.LaplacePrivacyLoss(1.0, sensitivity=1.0),
        "Gaussian": lambda: plm.GaussianPrivacyLoss(1.0, sensitivity=1.0),
        # dp_accounting's parameter a has pmf ∝ e^{-a|k|}: a = 1/scale = 1
        "DiscreteLaplace": lambda: plm.DiscreteLaplacePrivacyLoss(1.0, sensitivity=1),
        # truncated where the tail mass is below 1e-30 (its default)
        "DiscreteGaussian": lambda: plm.DiscreteGaussianPrivacyLoss(1.0, sensitivity=1),
    }
    specs = {}
    for fam, ctor in ctors.items():
        obj = ctor()
        name = type(obj).__name__
        specs[fam] = {
            "hockey": (f"dp_accounting {name}.get_delta_for_epsilon", (lambda o=obj: o.get_delta_for_epsilon(EPSILON)), ctor)
        }
    return _peer_rows(specs, repeats)


def child_autodp_closed(repeats: int) -> dict[str, Any]:
    from autodp import dp_bank, rdp_bank

    g = {"sigma": 1.0}
    b = {"b": 1.0}
    specs = {
        "Gaussian": {
            "kl": ("autodp RDP_gaussian(α=1)", lambda: rdp_bank.RDP_gaussian(g, 1.0), None),
            "renyi2": ("autodp RDP_gaussian", lambda: rdp_bank.RDP_gaussian(g, 2.0), None),
            "renyi05": ("autodp RDP_gaussian", lambda: rdp_bank.RDP_gaussian(g, 0.5), None),
            "hockey": ("autodp exp(get_logdelta_ana_gaussian)",
                       lambda: math.exp(dp_bank.get_logdelta_ana_gaussian(1.0, EPSILON)), None),
            "approx_max": ("autodp get_eps_ana_gaussian", lambda: dp_bank.get_eps_ana_gaussian(1.0, DELTA), None),
        },
        "Laplace": {
            "kl": ("autodp RDP_laplace(α=1)", lambda: rdp_bank.RDP_laplace(b, 1.0), None),
            "renyi2": ("autodp RDP_laplace", lambda: rdp_bank.RDP_laplace(b, 2.0), None),
            "renyi05": ("autodp RDP_laplace", lambda: rdp_bank.RDP_laplace(b, 0.5), None),
            "max": ("autodp RDP_laplace(α=inf)", lambda: rdp_bank.RDP_laplace(b, math.inf), None),
        },
    }
    return _peer_rows(specs, repeats)


def child_prv_accountant_closed(repeats: int) -> dict[str, Any]:
    from prv_accountant.privacy_random_variables import GaussianMechanism, LaplaceMechanism

    gm = GaussianMechanism(noise_multiplier=1.0)
    lm = LaplaceMechanism(mu=1.0)
    g_ctor = lambda: GaussianMechanism(noise_multiplier=1.0)  # noqa: E731
    l_ctor = lambda: LaplaceMechanism(mu=1.0)  # noqa: E731
    specs = {
        "Gaussian": {
            "renyi2": ("prv_accountant GaussianMechanism.rdp", lambda: gm.rdp(2.0), g_ctor),
            "renyi05": ("prv_accountant GaussianMechanism.rdp", lambda: gm.rdp(0.5), g_ctor),
        },
        "Laplace": {
            "renyi2": ("prv_accountant LaplaceMechanism.rdp", lambda: lm.rdp(2.0), l_ctor),
            "renyi05": ("prv_accountant LaplaceMechanism.rdp", lambda: lm.rdp(0.5), l_ctor),
        },
    }
    return _peer_rows(specs, repeats)


def child_pipeline_dp_closed(repeats: int) -> dict[str, Any]:
    from pipeline_dp import dp_computations as dpc

    specs = {
        "Gaussian": {
            "hockey": ("pipeline_dp gaussian_delta", lambda: dpc.gaussian_delta(1.0, EPSILON), None),
            "approx_max": ("pipeline_dp gaussian_epsilon (bisection to 1e-10)",
                           lambda: dpc.gaussian_epsilon(1.0, DELTA), None),
        }
    }
    return _peer_rows(specs, repeats)


def child_opendp_closed(repeats: int) -> dict[str, Any]:
    import opendp.prelude as dp

    dp.enable_features("contrib")

    def lap(T: type) -> Any:
        return dp.m.make_laplace(dp.atom_domain(T=T, nan=False) if T is float else dp.atom_domain(T=T),
                                 dp.absolute_distance(T=T), scale=1.0)

    def gauss(T: type) -> Any:
        return dp.m.make_gaussian(dp.atom_domain(T=T, nan=False) if T is float else dp.atom_domain(T=T),
                                  dp.absolute_distance(T=T), scale=1.0)

    m = {"lf": lap(float), "li": lap(int), "gf": gauss(float), "gi": gauss(int)}
    specs = {
        "Laplace": {"max": ("opendp make_laplace(float).map(1) (ε = D∞)", lambda: m["lf"].map(1.0), lambda: lap(float))},
        "DiscreteLaplace": {"max": ("opendp make_laplace(int).map(1) (ε = D∞)", lambda: m["li"].map(1), lambda: lap(int))},
        "Gaussian": {"kl": ("opendp make_gaussian(float).map(1) (ρ = KL)", lambda: m["gf"].map(1.0), lambda: gauss(float))},
        "DiscreteGaussian": {"kl": ("opendp make_gaussian(int).map(1) (ρ = KL)", lambda: m["gi"].map(1), lambda: gauss(int))},
    }
    return _peer_rows(specs, repeats)


# peers with no comparable call, and why (checked against their installed APIs)
NO_COMPARABLE = {
    "diffprivlib": "mechanisms calibrate noise from (ε, δ) (e.g. GaussianAnalytic solves for σ); no function "
                   "evaluates a divergence or a privacy profile of a given pair",
    "python-dp": "bindings of the C++ algorithms (noise calibration and aggregation); no divergence or "
                 "privacy-profile evaluation",
}

CLOSED_PEERS: dict[str, str] = {
    "dp-accounting": "child_dp_accounting_closed",
    "autodp": "child_autodp_closed",
    "prv-accountant": "child_prv_accountant_closed",
    "pipeline-dp": "child_pipeline_dp_closed",
    "opendp": "child_opendp_closed",
}


# --------------------------------------------------------------------------------------------
# orchestration and report


def _iso(code: str, label: str, timeout_s: float, memory_gib: float) -> dict[str, Any]:
    print(f"  running {label} ...", file=sys.stderr, flush=True)
    res = H.run_isolated(code, label=label, timeout_s=timeout_s, memory_gib=memory_gib)
    status = "ok" if res.get("ok") else f"FAILED: {res.get('error')}"
    print(f"    {label}: {status} ({res.get('wall_s', 0):.1f} s wall)", file=sys.stderr, flush=True)
    return res


def probe_peers() -> dict[str, str]:
    """Import each peer in a subprocess: its version, 'not installed', or why the import fails."""
    status = {}
    for dist, mod in H.PEERS.items():
        res = H.run_isolated(f"import {mod}\nRESULT = 'ok'", label=f"import {mod}", timeout_s=120, memory_gib=8)
        status[dist] = "ok" if res.get("ok") else res.get("error", "failed")
    return status


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "—"
    return f"{a / b:.3g}×"


def _agree(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "—"
    if a == b:
        return "0"
    if not (math.isfinite(a) and math.isfinite(b)):
        return "differ"
    return f"{abs(a - b) / max(abs(a), abs(b), 1e-300):.1e}"


def _tcell(t: dict[str, Any] | None) -> str:
    if not t:
        return "—"
    return f"{H.fmt_time(t['median_s'])} ({H.fmt_time(t['min_s'])}–{H.fmt_time(t['max_s'])})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=N_BAR, help="support size of the finite section (bar: 10^7)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per finite measurement (>= 3)")
    ap.add_argument("--closed-repeats", type=int, default=7, help="timed runs per closed-form measurement")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds allowed to each subprocess")
    ap.add_argument("--memory-gib", type=float, default=12.0, help="address-space cap of each subprocess")
    ap.add_argument("--no-profile", action="store_true", help="skip profiling the calls that miss their bar")
    ap.add_argument("--prefault-gib", type=float, default=None,
                    help="GiB each finite subprocess touches before timing (default: 3 at n = 10^7, scaled with n; "
                         "0 turns it off); see _harness.prefault_memory")
    args = ap.parse_args(argv)
    n, rep = args.n, args.repeats
    pf = args.prefault_gib if args.prefault_gib is not None else round(3.0 * n / N_BAR, 3)
    iso = lambda code, label: _iso(code, label, args.timeout, args.memory_gib)  # noqa: E731

    env = H.environment()
    print("probing peers ...", file=sys.stderr, flush=True)
    peers = probe_peers()
    B = "import bench_divergences as B\n"

    # ---------------- finite section
    dk = iso(B + f"RESULT = B.child_dpkit_finite({n}, {rep}, {pf})", f"dpkit finite n={n}")
    raw = iso(B + f"RESULT = B.child_raw_finite({n}, {rep}, {pf})", f"raw numpy/scipy finite n={n}")
    if peers["dp-accounting"] == "ok":
        dpa = iso(B + f"RESULT = B.child_dp_accounting_finite({n}, {rep}, {pf})", f"dp_accounting finite n={n}")
    else:
        dpa = {"ok": False, "error": peers["dp-accounting"]}

    dkr = dk.get("result") or {}
    rawr = raw.get("result") or {}
    dpar = dpa.get("result") or {}
    finite_rows: list[list[Any]] = []
    misses: list[str] = []
    cons = dkr.get("construct")
    finite_rows.append(["Finite(p), Finite(q): construction + validation", f"{n:.0e}", _tcell(cons and cons["timing"]),
                        "— (reported separately; not a divergence)", "—", "—", "—", "—", "—", "—",
                        H.fmt_bytes(cons and cons.get("peak_above_start_bytes"))])
    for key, label in FINITE_OPS:
        d = dkr.get(key)
        if d is None:
            finite_rows.append([label, f"{n:.0e}", f"failed: {dk.get('error')}"] + ["—"] * 8)
            continue
        dt = d["timing"]["median_s"]
        met = dt <= BAR_FINITE_S
        if not met:
            misses.append(key)
        refs: list[tuple[str, float | None, float | None]] = []
        if key in rawr:
            refs.append((f"raw: {rawr[key]['label']}", rawr[key]["timing"]["median_s"], rawr[key]["value"]))
        elif raw.get("ok"):
            refs.append(("raw: no NumPy/SciPy one-liner" + (" (scipy's wasserstein_distance is W1 only)" if key == "w2" else ""), None, None))
        else:
            refs.append((f"raw: failed ({raw.get('error')})", None, None))
        if key in ("hockey", "approx_max"):
            if dpar:
                query = dpar[key]["timing"]["median_s"]
                build = dpar["build"]["median_s"]
                what = "get_delta_for_epsilon" if key == "hockey" else "get_epsilon_for_delta"
                refs.append((f"dp_accounting from_two_probability_mass_functions + {what} "
                             f"(build {H.fmt_time(build)} + query {H.fmt_time(query)})", build + query, dpar[key]["value"]))
            else:
                refs.append((f"dp_accounting: {dpa.get('error')}", None, None))
        for i, (rlabel, rt, rv) in enumerate(refs):
            first = i == 0
            finite_rows.append([
                label if first else "〃", f"{n:.0e}", _tcell(d["timing"]) if first else "〃", rlabel,
                H.fmt_time(rt), _ratio(dt, rt), f"≤ {H.fmt_time(BAR_FINITE_S)}" if first else "",
                ("yes" if met else "**NO**") if first else "", H.fmt_value(d["value"]) if first else "〃",
                H.fmt_value(rv) + (f" (rel. diff {_agree(d['value'], rv)})" if rv is not None else ""),
                H.fmt_bytes(d.get("peak_above_start_bytes")) if first else "",
            ])
    if "w1_cached" in dkr:
        c = dkr["w1_cached"]
        finite_rows.append(["wasserstein order=1, second call on the same objects (sorted supports cached)",
                            f"{n:.0e}", _tcell(c["timing"]), "(information: the bar row above times first calls)",
                            "—", "—", "", "", H.fmt_value(c["value"]), "—", ""])

    # ---------------- closed-form section
    ck = iso(B + f"RESULT = B.child_dpkit_closed({args.closed_repeats})", "dpkit closed forms")
    peer_closed: dict[str, dict[str, Any]] = {}
    for dist, fn in CLOSED_PEERS.items():
        if peers[dist] != "ok":
            peer_closed[dist] = {"ok": False, "error": peers[dist]}
            continue
        peer_closed[dist] = iso(B + f"RESULT = B.{fn}({args.closed_repeats})", f"{dist} closed forms")
    ckr = ck.get("result") or {}
    closed_rows: list[list[Any]] = []
    closed_misses: list[str] = []
    for fam, pair_label in PAIRS:
        fr = ckr.get(fam, {})
        con = fr.get("construct")
        closed_rows.append([f"construct both laws — {pair_label}", "1 pair", _tcell(con and con["timing"]),
                            "—", "—", "—", "—", "—", "—", "—"])
        for key, label in CLOSED_OPS:
            d = fr.get(key)
            if d is None:
                closed_rows.append([f"{label} — {pair_label}", "1 call", f"failed: {ck.get('error')}"] + ["—"] * 7)
                continue
            if "error" in d:
                closed_rows.append([f"{label} — {pair_label}", "1 call", f"refused: {d['error'][:80]}"] + ["—"] * 7)
                continue
            dt = d["timing"]["median_s"]
            met = dt <= BAR_CLOSED_S
            if not met:
                closed_misses.append(f"{key}/{fam}")
            refs = []
            for dist, res in peer_closed.items():
                entry = ((res.get("result") or {}).get(fam) or {}).get(key)
                if entry is None:
                    continue
                if "error" in entry:
                    refs.append((f"{entry['label']}: {entry['error']}", None, None))
                    continue
                extra = f" (+ construct {H.fmt_time(entry['construct']['median_s'])})" if "construct" in entry else ""
                refs.append((entry["label"] + extra, entry["timing"]["median_s"], entry["value"]))
            if not refs:
                refs.append(("none: no installed peer has this closed form", None, None))
            for i, (rlabel, rt, rv) in enumerate(refs):
                first = i == 0
                closed_rows.append([
                    f"{label} — {pair_label}" if first else "〃", "1 call", _tcell(d["timing"]) if first else "〃",
                    rlabel, H.fmt_time(rt), _ratio(dt, rt), f"≤ {H.fmt_time(BAR_CLOSED_S)}" if first else "",
                    ("yes" if met else "**NO**") if first else "", H.fmt_value(d["value"]) if first else "〃",
                    H.fmt_value(rv) + (f" (rel. diff {_agree(d['value'], rv)})" if rv is not None else ""),
                ])

    # ---------------- profiles of the misses
    profiles: dict[str, Any] = {}
    if misses and not args.no_profile and dk.get("ok"):
        for key in misses:
            pr = iso(B + f"RESULT = B.child_profile_finite({n}, {key!r}, {pf})", f"profile {key}")
            profiles[key] = pr.get("result") or {"error": pr.get("error")}

    # ---------------- report
    cols_f = ["operation", "n", "dpkit median (min–max)", "reference", "ref. median", "dpkit / ref.", "bar",
              "bar met", "dpkit value", "reference value", "dpkit peak extra memory"]
    cols_c = cols_f[:-1]
    md: list[str] = [f"# Divergence benchmarks ({env['date'][:10]})", "",
                     "Bars of the foundation issue: each divergence between two finite distributions on 10^7 support "
                     "points in at most 1 s on this machine; a closed-form call in at most 20 µs.", "",
                     H.environment_markdown(env), "",
                     "Peers: " + "; ".join(f"{d}: {'importable' if s == 'ok' else s}" for d, s in peers.items()), ""]
    if n != N_BAR:
        md += [f"**n = {n}, not the bar's 10^7: a smoke run, not a measurement of the bar.**", ""]
    md += [f"## Finite laws, n = {n:,} (fresh objects per run; warm-up + median of {rep})", "",
           H.markdown_table(cols_f, finite_rows), ""]
    mem_lines = []
    pre = dkr.get("prefault")
    if pre:
        mem_lines.append(f"- each finite subprocess first touched and freed {pre['gib']:g} GiB (harness.prefault_memory): on this "
                         f"VM the first touch took {H.fmt_time(pre['first_touch_s'])}, a second touch of the same pages "
                         f"{H.fmt_time(pre['second_touch_s'])}; without it, whichever timed call first grows the process pays that "
                         "(`--prefault-gib 0` to see it)")
    else:
        mem_lines.append("- memory not pre-faulted: the first run that grows a process pays the VM's first-touch cost")
    if dk.get("ok"):
        mem_lines.append(f"- dpkit subprocess peak RSS {H.fmt_bytes(dkr.get('peak_rss_bytes'))} "
                         f"(of which the two input arrays and the interpreter: {H.fmt_bytes(dkr.get('rss_after_inputs_bytes'))})")
    if raw.get("ok"):
        mem_lines.append(f"- raw NumPy/SciPy subprocess peak RSS {H.fmt_bytes(rawr.get('peak_rss_bytes'))}")
    if dpa.get("ok"):
        conv = dpar["convert_to_dicts"]["median_s"]
        mem_lines.append(f"- dp_accounting subprocess peak RSS {H.fmt_bytes(dpar.get('peak_rss_bytes'))}; its input "
                         f"format (dicts of log masses) took {H.fmt_time(conv)} to build from the arrays, not counted above; "
                         "its values are pessimistic (upper) estimates on a 1e-4 loss grid")
    elif peers.get("dp-accounting") == "ok":
        mem_lines.append(f"- dp_accounting finite run failed: {dpa.get('error')}")
    md += ["- peers: none computes KL, Rényi, max divergence, TV, statistical distance or Wasserstein between two "
           "arbitrary finite laws; dp_accounting's PLD from two pmfs is the only peer for the hockey-stick and the "
           "δ-approximate max divergence (its dict-of-log-masses input is built outside its timing)"]
    md += mem_lines + [""]
    md += [f"## Closed forms (per call; many calls per run, warm-up + median of {args.closed_repeats})", "",
           H.markdown_table(cols_c, closed_rows), ""]
    md += ["Peers without a comparable call: " + "; ".join(f"{k}: {v}" for k, v in NO_COMPARABLE.items())
           + ". dp_accounting, autodp, prv_accountant, pipeline_dp and OpenDP offer closed forms only for the "
           "mechanism pairs shown; none offers KL/TV/Wasserstein between arbitrary distributions.", ""]
    failed = {d: r.get("error") for d, r in peer_closed.items() if not r.get("ok")}
    if failed:
        md += ["Peer closed-form runs that did not complete: " + "; ".join(f"{d}: {e}" for d, e in failed.items()), ""]
    md += ["## Bars", ""]
    if misses:
        md.append(f"- finite, n = {n:,}: missed by " + ", ".join(misses))
    else:
        md.append(f"- finite, n = {n:,}: every divergence within {H.fmt_time(BAR_FINITE_S)}" if dk.get("ok") else "- finite: dpkit run failed")
    if closed_misses:
        md.append(f"- closed forms: missed by " + ", ".join(closed_misses))
    else:
        md.append(f"- closed forms: every call within {H.fmt_time(BAR_CLOSED_S)}" if ck.get("ok") else "- closed forms: dpkit run failed")
    if closed_misses and not args.no_profile and ck.get("ok"):
        for miss in closed_misses:
            key, fam = miss.split("/")
            pr = iso(B + f"RESULT = B.child_profile_closed({fam!r}, {key!r})", f"profile {miss}")
            profiles[miss] = pr.get("result") or {"error": pr.get("error")}
    for key, pr in profiles.items():
        if "/" in key:
            op, fam = key.split("/")
            title = f"`{dict(CLOSED_OPS)[op]}` on {dict(PAIRS)[fam]} (per call, averaged over 2000 calls under cProfile, whose overhead inflates them)"
        else:
            title = f"`{dict(FINITE_OPS)[key]}`, n = {n:,} (one call on fresh objects)"
        md += ["", f"### Profile of {title}; top 10 by own time", ""]
        if "top" in pr:
            md.append(H.markdown_table(["where", "calls", "own time", "cumulative"],
                                       [[r["where"], r["ncalls"], H.fmt_time(r["tottime_s"]), H.fmt_time(r["cumtime_s"])]
                                        for r in pr["top"]]))
        else:
            md.append(f"profile failed: {pr.get('error')}")
    for label, res in (("dpkit finite", dk), ("dpkit closed", ck)):
        if not res.get("ok"):
            md += ["", f"**{label} run failed**: {res.get('error')}", "```", str(res.get("traceback", ""))[-1500:], "```"]

    data = {
        "bars": {"finite_s": BAR_FINITE_S, "closed_form_s": BAR_CLOSED_S, "n": N_BAR},
        "parameters": {"n": n, "repeats": rep, "closed_repeats": args.closed_repeats, "seed": SEED,
                       "epsilon": EPSILON, "delta": DELTA, "memory_cap_gib": args.memory_gib, "timeout_s": args.timeout,
                       "prefault_gib": pf},
        "peers": peers,
        "finite": {"dpkit": dk, "raw": raw, "dp_accounting": dpa},
        "closed": {"dpkit": ck, **peer_closed},
        "profiles": profiles,
        "misses": {"finite": misses, "closed": closed_misses},
    }
    name = NAME if n == N_BAR else f"{NAME}-n{n}"
    H.write_report(name, markdown="\n".join(md), data=data, env=env)
    return 0 if (dk.get("ok") and ck.get("ok")) else 1


if __name__ == "__main__":
    sys.exit(main())
