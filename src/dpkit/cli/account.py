"""``dpkit account ...``: epsilon of a composition by every method, each marked as what it is."""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from dpkit.cli._table import fmt_number, render
from dpkit.errors import InvalidArgumentError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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
                    raise InvalidArgumentError(f"{args.path} line {n}: expected 'gaussian|laplace,parameter,count'; got {row}.")
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


def _guarantees(items):  # type: ignore[no-untyped-def]
    from dpkit.guarantees import ZCDP, PureDP, RenyiDP

    out = []
    for fam, param, count in items:
        if not (param > 0 and math.isfinite(param)):
            raise InvalidArgumentError(f"the noise parameter must be finite and > 0; got {param}.")
        if count < 1:
            raise InvalidArgumentError(f"counts must be >= 1; got {count}.")
        if fam == "gaussian":
            out.append((ZCDP(1.0 / (2.0 * param**2)), None, count))
        else:
            eps = 1.0 / param
            out.append((PureDP(eps), RenyiDP(curve=_laplace_rdp(param), description="Laplace RDP"), count))
    return out


def _laplace_rdp(b: float):  # type: ignore[no-untyped-def]
    from dpkit.distributions import Laplace
    from dpkit.divergences import renyi

    return lambda a: float(renyi(Laplace(0, b), Laplace(1, b), a))


def method_values(items, delta: float) -> list[tuple[str, float, float, str]]:  # type: ignore[no-untyped-def]
    """(method, lower, upper, kind) for each method: numbers, for the table and for the plot alike (a
    point value has lower == upper)."""
    from dpkit.accounting.composition import compose_advanced, compose_basic, compose_optimal, compose_rdp
    from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval
    from dpkit.accounting.pld import default_grid, epsilon_interval, pld_from_pair
    from dpkit.distributions import Gaussian, Laplace
    from dpkit.guarantees import ZCDP
    from dpkit.guarantees.conversions import rdp_to_approx_dp, to_zcdp, zcdp_to_approx_dp, zcdp_to_rdp

    gs = _guarantees(items)
    k_total = sum(c for *_, c in gs)
    rows: list[tuple[str, float, float, str]] = []

    def point(name: str, v: float, kind: str) -> None:
        rows.append((name, float(v), float(v), kind))

    pure = all(not isinstance(g, ZCDP) for g, _, _ in gs)
    if pure:
        point("basic (Thm 3.14-3.16)", float(compose_basic([(g, c) for g, _, c in gs]).epsilon), "upper bound")
        if len(gs) == 1:
            e0 = float(gs[0][0].epsilon)
            point("advanced (DRV Thm 3.20, tanh form)",
                  float(compose_advanced(e0, 0.0, k_total, delta_prime=delta, variant="tanh").epsilon), "upper bound")
            point("optimal for eps-DP (Kairouz-Oh-Viswanath)",
                  float(compose_optimal(e0, 0.0, k_total, delta_total=delta).epsilon), "upper bound")
    else:
        rows.append(("basic / advanced / optimal", math.nan, math.nan, "n/a: a Gaussian has no finite pure epsilon"))
    curves = [(zcdp_to_rdp(g) if isinstance(g, ZCDP) else rdp, c) for g, rdp, c in gs]
    point("RDP (CKS conversion)", float(rdp_to_approx_dp(compose_rdp(curves), delta=delta).epsilon), "upper bound")
    if not pure:
        rho = sum(float(to_zcdp(g).rho) * c for g, _, c in gs)  # Laplace: tight eps tanh(eps/2)
        point("zCDP (CKS Cor 13)", float(zcdp_to_approx_dp(ZCDP(rho), delta=delta).epsilon), "upper bound")
    if all(f == "gaussian" for f, _, _ in items):
        # k-fold Gaussians compose to one Gaussian: the PLD is that law exactly, so no grid is needed
        mu = math.sqrt(sum(c / p**2 for _, p, c in items)) * (1.0 + 4.0 * 2.0**-53)
        if not math.isfinite(mu):
            raise InvalidArgumentError("sigma is too small: mu = sqrt(sum k / sigma^2) overflows a double.")
        lo, hi = gaussian_epsilon_interval(mu, delta)
        rows.append(("PLD = exact: the composition is one Gaussian, mu = sqrt(sum k/sigma^2)", lo, hi,
                     "exact (certified interval; use the upper end)"))
        return rows
    if len(items) == 1 and items[0][0] == "laplace":
        b, k = items[0][1], items[0][2]
        iv = epsilon_interval(Laplace(0, b), Laplace(1, b), k=k, delta=delta, symmetric=True)
        rows.append(("PLD (tilted FFT, connect-the-dots)", iv.lower, iv.upper, "interval (use the upper end)"))
        return rows
    # a heterogeneous list: pessimistic (connect the dots) and optimistic PLDs, per mechanism then convolved
    grid = default_grid(k_total)
    if not pure:
        grid *= min(1.0, min(1.0 / p for f, p, _ in items if f == "gaussian"))
    span = sum(c * (1.0 / p**2 + 40.0 / p if f == "gaussian" else 2.0 / p) for f, p, c in items)
    if span / grid > 5e7:
        raise InvalidArgumentError(f"this list needs a PLD of about {span / grid:.3g} grid points (a sigma this small makes the "
                         "loss range huge); raise the smallest sigma, or account the Gaussians alone (closed form).")
    bounds = []
    for pessimistic in (True, False):
        composed = None
        for fam, param, count in items:
            P, Q = (Gaussian(0, param), Gaussian(1, param)) if fam == "gaussian" else (Laplace(0, param), Laplace(1, param))
            one = pld_from_pair(P, Q, grid=grid, pessimistic=pessimistic).self_compose(count)
            composed = one if composed is None else composed.compose(one)
        bounds.append(float(composed.epsilon(delta)))  # type: ignore[union-attr]
    rows.append(("PLD (FFT, connect-the-dots)", min(bounds[1], bounds[0]), bounds[0], "interval (use the upper end)"))
    return rows


def methods(items, delta: float) -> list[list[str]]:  # type: ignore[no-untyped-def]
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


def _run_subsampled(args: argparse.Namespace, items, delta: float) -> int:  # type: ignore[no-untyped-def]
    """One row: the PLD interval of the subsampled mechanism, with the pair(s) it used."""
    from dpkit.accounting.subsampling import subsampled_epsilon_interval
    from dpkit.distributions import Gaussian, Laplace

    if len(items) != 1:
        raise InvalidArgumentError("--sampling-rate applies to one gaussian or laplace mechanism, not to a file.")
    if args.plot:
        raise InvalidArgumentError("--plot is not available with --sampling-rate.")
    fam, param, count = items[0]
    if not (param > 0 and math.isfinite(param)):
        raise InvalidArgumentError(f"the noise parameter must be finite and > 0; got {param}.")
    sampling = args.sampling.replace("-", "_")
    neighboring = "substitute" if args.neighbours == "substitution" else "add_remove"
    shift = 2.0 if neighboring == "substitute" else 1.0
    P, Q = (Gaussian(0, param), Gaussian(shift, param)) if fam == "gaussian" else (Laplace(0, param), Laplace(shift, param))
    iv = subsampled_epsilon_interval(P, Q, sampling_rate=args.sampling_rate, k=count, delta=delta, sampling=sampling,
                                     neighboring=neighboring)
    kind = "interval of an upper bound (use the upper end)" if iv.method.startswith("upper bound") else \
        "interval (use the upper end)"
    print(f"composition: {count} x subsampled {fam}({param:g}), rate {args.sampling_rate:g}, {args.sampling}, "
          f"{args.neighbours}; delta = {delta:g}\n")
    rows = [["PLD (FFT), subsampled", str(iv), kind]]
    if fam == "gaussian" and sampling == "poisson" and neighboring == "add_remove":
        from dpkit.accounting.composition.renyi import compose_rdp
        from dpkit.accounting.sampled_gaussian import sampled_gaussian_rdp
        from dpkit.guarantees.conversions.renyi import rdp_to_approx_dp

        curve = compose_rdp([(sampled_gaussian_rdp(sigma=param, sampling_rate=args.sampling_rate), count)])
        eps = float(rdp_to_approx_dp(curve, delta=delta).epsilon)
        rows.append(["RDP (MTZ 2019, integer orders 2-256; CKS conversion)", fmt_number(eps), "upper bound"])
    print(render(["method", "epsilon", "kind"], rows))
    print(f"\npair(s): {iv.method}")
    return 0


def _plot(items, delta: float, path: str) -> None:  # type: ignore[no-untyped-def]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        raise InvalidArgumentError("--plot needs matplotlib: pip install 'dpkit[plot]'.") from None
    import numpy as np

    from dpkit.accounting.pld import default_grid, pld_from_pair
    from dpkit.distributions import Gaussian, Laplace

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
    grid = default_grid(k_max)
    if all(f == "gaussian" for f, _, _ in items):
        from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval, log_delta_bounds

        mu = math.sqrt(sum(c / p**2 for _, p, c in items))
        eps_hi = gaussian_epsilon_interval(mu, min(delta, 1e-3))[1] * 1.2
        es = np.linspace(0, max(eps_hi, 1e-3), 200)
        ax2.semilogy(es, [max(math.exp(log_delta_bounds(mu, e)[1]), 1e-300) for e in es])
    else:
        composed = None
        for fam, param, count in items:
            P, Q = (Gaussian(0, param), Gaussian(1, param)) if fam == "gaussian" else (Laplace(0, param), Laplace(1, param))
            one = pld_from_pair(P, Q, grid=grid).self_compose(count)
            composed = one if composed is None else composed.compose(one)
        eps_hi = float(composed.epsilon(min(delta, 1e-3))) * 1.2  # type: ignore[union-attr]
        es = np.linspace(0, max(eps_hi, 1e-3), 200)
        ax2.semilogy(es, [max(float(composed.delta(e)), 1e-300) for e in es])  # type: ignore[union-attr]
    ax2.set_xlabel("epsilon")
    ax2.set_ylabel("delta(epsilon), PLD upper bound")
    ax2.set_title("privacy profile of the composition")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _scale_items(items, k: int, k_max: int):  # type: ignore[no-untyped-def]
    if len(items) == 1:
        return [(items[0][0], items[0][1], k)]
    frac = k / k_max
    return [(f, p, max(1, int(round(c * frac)))) for f, p, c in items]
