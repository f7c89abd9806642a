"""``dpkit account ...``: epsilon of a composition by every method, each marked as what it is."""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from typing import TYPE_CHECKING, Literal

from dpkit._table import fmt_number, render
from dpkit.errors import InvalidArgumentError

#: the compositions named on the command line: (family, parameter, count) each
Items = list[tuple[str, float, int]]

if TYPE_CHECKING:
    from dpkit.accounting import AccountingState
    from dpkit.accounting.items import SubsampledEvent


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "account",
        help="epsilon of k compositions of a mechanism (or a list of mechanisms) by every method",
        description=(
            "Compose a mechanism with itself (or a heterogeneous list from a CSV file) and print epsilon(delta) "
            "by basic, advanced, optimal, RDP and zCDP composition and the PLD interval, each marked as exact, "
            "upper bound or interval. Sensitivity 1 throughout (scale the noise to your sensitivity)."
        ),
        epilog=(
            "Examples: dpkit account gaussian --sigma 1.1 --compositions 1000 --delta 1e-5 | "
            "dpkit account laplace --scale 2 --compositions 100 --delta 1e-6 --plot eps.png | "
            "dpkit account file mechanisms.csv --delta 1e-5 (rows: family,parameter,count) | "
            "dpkit account gaussian --sigma 1 --compositions 1000 --delta 1e-5 --sampling-rate 0.01 "
            "--sampling without-replacement --neighbours substitution | "
            "dpkit account dpsgd --sampling-rate 0.001 --sigma 1.1 --steps 100000 --delta 1e-5 --plot eps.png | "
            "dpkit account dpsgd --sampling-rate 0.001 --steps 100000 --delta 1e-5 --target-epsilon 3"
        ),
    )
    p.add_argument("family", choices=("gaussian", "laplace", "file", "dpsgd"))
    p.add_argument("path", nargs="?", help="for 'file': CSV with rows family,parameter,count")
    p.add_argument("--sigma", type=float, help="Gaussian noise sigma (sensitivity 1)")
    p.add_argument("--scale", type=float, help="Laplace noise scale b (sensitivity 1)")
    p.add_argument("--compositions", "-k", type=int, default=1, help="number of compositions k (default 1)")
    p.add_argument("--delta", type=float, required=True, help="delta in (0, 1) (as small as 1e-300)")
    p.add_argument("--sampling-rate", type=float, default=None,
                   help="amplification by subsampling with rate q in (0, 1] (Poisson q, or m/n for a batch of m of n)")
    p.add_argument("--sampling", choices=("poisson", "without-replacement"), default="poisson",
                   help="with --sampling-rate: Poisson subsampling or a fixed batch without replacement")
    p.add_argument("--neighbours", choices=("add-remove", "substitution"), default="add-remove",
                   help="with --sampling-rate: add/remove one record, or substitute one (each record's "
                        "contribution in [-1, 1], so the base pair is a shift by 2)")
    p.add_argument("--steps", type=int, default=None, help="dpsgd: number of training steps T")
    p.add_argument("--target-epsilon", type=float, default=None,
                   help="dpsgd: calibrate sigma (or, with --sigma given, the number of steps) to this epsilon")
    p.add_argument("--plot", default=None, help="write a PNG: epsilon against k per method, and delta(epsilon)")
    p.set_defaults(func=run)


def _items(args: argparse.Namespace) -> list[tuple[str, float, int]]:
    if args.family == "file":
        if not args.path:
            raise InvalidArgumentError("'file' needs the path of a CSV with rows family,parameter,count.")
        rows = []
        with Path(args.path).open(newline="") as fh:
            for n, row in enumerate(csv.reader(fh), start=1):
                if not row or row[0].strip().startswith("#") or row[0].strip().lower() == "family":
                    continue
                if len(row) != 3 or row[0].strip() not in ("gaussian", "laplace"):
                    raise InvalidArgumentError(
                        f"{args.path} line {n}: expected 'gaussian|laplace,parameter,count'; got {row}.")
                rows.append((row[0].strip(), float(row[1]), int(row[2])))
        if not rows:
            raise InvalidArgumentError(f"{args.path} lists no mechanisms.")
        return rows
    if args.family == "gaussian":
        if args.sigma is None:
            raise InvalidArgumentError("gaussian needs --sigma.")
        return [("gaussian", args.sigma, args.compositions)]
    if args.scale is None:
        raise InvalidArgumentError("laplace needs --scale.")
    return [("laplace", args.scale, args.compositions)]


def state_of(items: list[tuple[str, float, int]]) -> AccountingState:
    """The accounting state of the composition: every number below is read from it (as the Accountant,
    the ledgers and the query engine read theirs)."""
    from dpkit.accounting import AccountingState, GaussianEvent, LaplaceEvent

    state = AccountingState()
    for fam, param, count in items:
        if not (param > 0 and math.isfinite(param)):
            raise InvalidArgumentError(f"the noise parameter must be finite and > 0; got {param}.")
        if count < 1:
            raise InvalidArgumentError(f"counts must be >= 1; got {count}.")
        event = GaussianEvent(sigma=param) if fam == "gaussian" else LaplaceEvent(scale=param)
        state = state.add(event, count=count)
    return state


_ROWS: tuple[tuple[Literal["basic", "gdp", "zcdp", "rdp", "pld"], str], ...] = (
         ("basic", "basic (Thm 3.14-3.16)"), ("gdp", "GDP (Dong-Roth-Su Cor 3.3, exact profile)"),
         ("zcdp", "zCDP (CKS Cor 13)"), ("rdp", "RDP (CKS conversion)"), ("pld", "PLD"))


def method_values(items: Items, delta: float) -> list[tuple[str, float, float, str]]:
    """(method, lower, upper, kind) for each method: numbers, for the table and for the plot alike (a
    point value has lower == upper).  Every composition is read from one
    :class:`~dpkit.accounting.AccountingState`; the advanced and optimal theorems for one pure mechanism
    are shown beside it for comparison (seed Theorem 3.20 and Kairouz, Oh, Viswanath 2015)."""
    from dpkit.accounting.composition import compose_advanced, compose_optimal
    from dpkit.errors import UnsupportedError

    state = state_of(items)
    k_total = sum(c for *_, c in items)
    rows: list[tuple[str, float, float, str]] = []
    for method, name in _ROWS:
        try:
            est = state.epsilon(delta, method=method)
        except UnsupportedError as exc:
            rows.append((name, math.nan, math.nan, f"n/a: {str(exc).split(';')[0]}"))
            continue
        hi = float(est)
        if est.kind == "interval":
            lo = float(est.lower_bound)
            exact = method == "pld" and all(f == "gaussian" for f, _, _ in items)
            rows.append((f"{name}: {est.method}", lo, hi,
                         "exact (certified interval; use the upper end)" if exact else "interval (use the upper end)"))
        else:
            rows.append((name, hi, hi, "upper bound"))
        if method == "basic" and len(items) == 1 and items[0][0] == "laplace":
            e0 = 1.0 / items[0][1]
            adv = float(compose_advanced(e0, 0.0, k_total, delta_prime=delta, variant="tanh").epsilon)
            opt = float(compose_optimal(e0, 0.0, k_total, delta_total=delta).epsilon)
            rows.append(("advanced (DRV Thm 3.20, tanh form)", adv, adv, "upper bound"))
            rows.append(("optimal for eps-DP (Kairouz-Oh-Viswanath)", opt, opt, "upper bound"))
    return rows


def methods(items: Items, delta: float) -> list[list[str]]:
    """The table rows of :func:`method_values`, formatted."""
    out = []
    for name, lo, hi, kind in method_values(items, delta):
        if math.isnan(hi):
            out.append([name, "-", kind])
        elif lo == hi and "interval" not in kind:
            out.append([name, fmt_number(hi), kind])
        else:
            out.append([name, f"[{fmt_number(lo)}, {fmt_number(hi)}]", kind])
    return out


def run(args: argparse.Namespace) -> int:
    from dpkit._math import check_delta

    delta = check_delta(args.delta, open_interval=True)
    if args.family == "dpsgd":
        from dpkit.cli._account_dpsgd import run_dpsgd

        return run_dpsgd(args, delta)
    if args.compositions < 1:
        raise InvalidArgumentError(f"--compositions must be >= 1; got {args.compositions}.")
    items = _items(args)
    if args.sampling_rate is not None:
        return _run_subsampled(args, items, delta)
    rows = methods(items, delta)
    desc = ", ".join(f"{c} x {f}({p:g})" for f, p, c in items)
    print(f"composition: {desc}; delta = {delta:g}\n")
    print(render(["method", "epsilon", "kind"], rows))
    if args.plot:
        _plot(items, delta, args.plot)
        print(f"\nplot written to {args.plot}")
    return 0


def subsampled_item(fam: str, param: float, sampling_rate: float, sampling: str = "poisson",
                    neighbours: str = "add-remove") -> SubsampledEvent:
    """The event ``dpkit account FAM --sampling-rate q --sampling ... --neighbours ...`` composes: the noise
    (sensitivity 1) run on a subsample (substitution: each record's contribution in [-1, 1], a shift by 2)."""
    from dpkit.accounting.items import GaussianEvent, LaplaceEvent, SubsampledEvent

    if not (param > 0 and math.isfinite(param)):
        raise InvalidArgumentError(f"the noise parameter must be finite and > 0; got {param}.")
    noise = GaussianEvent(sigma=param) if fam == "gaussian" else LaplaceEvent(scale=param)
    return SubsampledEvent(noise=noise, sampling_rate=sampling_rate, sampling=sampling.replace("-", "_"),
                           neighboring="substitute" if neighbours == "substitution" else "add_remove")


def subsampled_values(event: SubsampledEvent, count: int, delta: float) -> list[tuple[str, float, float, str]]:
    """(method, lower, upper, kind) rows of ``count`` uses of a subsampled ``event``, every number read from
    one :class:`~dpkit.accounting.AccountingState` (as :func:`method_values` reads its rows): the PLD
    interval, and the Rényi sum where the state holds one."""
    from dpkit.accounting import AccountingState
    from dpkit.accounting.items import GaussianEvent, LaplaceEvent
    from dpkit.accounting.subsampling import subsampling_method
    from dpkit.errors import UnsupportedError

    state = AccountingState().add(event, count=count)
    pld = state.epsilon(delta, method="pld")
    how = subsampling_method(event.sampling, event.neighboring)
    kind = "interval of an upper bound (use the upper end)" if how.startswith("upper bound") else \
        "interval (use the upper end)"
    rows = [("PLD (FFT), subsampled" if isinstance(event.noise, LaplaceEvent) else "PLD (tilted), subsampled",
             float(pld.lower_bound), float(pld.upper_bound), kind)]
    try:
        rdp = float(state.epsilon(delta, method="rdp"))
    except UnsupportedError:
        return rows
    name = ("RDP (MTZ 2019 at the core's orders 1.25-256; CKS conversion)" if isinstance(event.noise, GaussianEvent)
            else "RDP (of the amplified pure epsilon, BBG 2018; CKS conversion)")
    rows.append((name, rdp, rdp, "upper bound"))
    return rows


def _run_subsampled(args: argparse.Namespace, items: Items, delta: float) -> int:
    """The subsampled mechanism's rows, read from the accounting state, with the pair(s) it used."""
    from dpkit.accounting.subsampling import subsampling_method

    if len(items) != 1:
        raise InvalidArgumentError("--sampling-rate applies to one gaussian or laplace mechanism, not to a file.")
    if args.plot:
        raise InvalidArgumentError("--plot is not available with --sampling-rate.")
    fam, param, count = items[0]
    event = subsampled_item(fam, param, args.sampling_rate, args.sampling, args.neighbours)
    print(f"composition: {count} x subsampled {fam}({param:g}), rate {args.sampling_rate:g}, {args.sampling}, "
          f"{args.neighbours}; delta = {delta:g}\n")
    rows = []
    for name, lo, hi, kind in subsampled_values(event, count, delta):
        value = f"[{lo:.10g}, {hi:.10g}]" if "interval" in kind else fmt_number(hi)
        rows.append([name, value, kind])
    print(render(["method", "epsilon", "kind"], rows))
    print(f"\npair(s): {subsampling_method(event.sampling, event.neighboring)}")
    return 0


def _plot(items: Items, delta: float, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        raise InvalidArgumentError("--plot needs matplotlib: pip install 'dpkit[plot]'.") from None
    import numpy as np

    k_max = sum(c for *_, c in items)
    ks = sorted({int(round(x)) for x in np.geomspace(1, k_max, num=min(12, k_max))})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[str, list[float]] = {}
    for k in ks:
        scaled = _scale_items(items, k, k_max)
        for name, _lo, hi, _kind in method_values(scaled, delta):  # numbers from the computation, not the table
            series.setdefault(name, []).append(hi)
    for name, values in series.items():
        ax1.plot(ks, values, marker="o", ms=3, label=name)
    ax1.set_xscale("log")
    ax1.set_xlabel("compositions k")
    ax1.set_ylabel(f"epsilon at delta = {delta:g}")
    ax1.legend(fontsize=7)
    ax1.set_title("epsilon against k")
    state = state_of(items)
    eps_hi = float(state.epsilon(min(delta, 1e-3))) * 1.2
    es = np.linspace(0, max(eps_hi, 1e-3), 200)
    ax2.semilogy(es, [max(float(state.delta(float(e))), 1e-300) for e in es])
    ax2.set_xlabel("epsilon")
    ax2.set_ylabel("delta(epsilon), best upper bound")
    ax2.set_title("privacy profile of the composition")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _scale_items(items: Items, k: int, k_max: int) -> Items:
    if len(items) == 1:
        return [(items[0][0], items[0][1], k)]
    frac = k / k_max
    return [(f, p, max(1, int(round(c * frac)))) for f, p, c in items]
