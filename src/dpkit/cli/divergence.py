"""``dpkit divergence FAMILY ...``: every divergence of a mechanism's pair, in one table."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from functools import partial

from dpkit._math import Estimate
from dpkit._table import fmt_number, render
from dpkit.distributions import Bernoulli, DiscreteGaussian, DiscreteLaplace, Distribution, Finite, Gaussian, Laplace
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
from dpkit.errors import InvalidArgumentError, UnsupportedError

FAMILIES = ("laplace", "gaussian", "discrete-laplace", "discrete-gaussian", "randomized-response", "finite")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "divergence",
        help="print every divergence between the two output laws of a mechanism",
        description=(
            "Print KL, Rényi, max, delta-approximate max, total variation, hockey-stick and Wasserstein "
            "divergences between P = FAMILY(0, scale) and Q = FAMILY(shift, scale), each marked exact or "
            "numerical (with its error)."
        ),
        epilog=(
            "Examples: dpkit divergence laplace --shift 1 --scale 1 | "
            "dpkit divergence gaussian --shift 1 --sigma 2 | "
            "dpkit divergence randomized-response --epsilon 1 | "
            "dpkit divergence finite --p 0.5,0.3,0.2 --q 0.2,0.3,0.5"
        ),
    )
    p.add_argument("family", choices=FAMILIES, help="the pair's family")
    p.add_argument(
        "--shift", type=float, default=1.0, help="location of Q minus location of P (sensitivity); default 1"
    )
    p.add_argument("--scale", type=float, default=None, help="Laplace / discrete Laplace scale (default 1)")
    p.add_argument("--sigma", type=float, default=None, help="Gaussian / discrete Gaussian sigma (default 1)")
    p.add_argument("--epsilon", type=float, default=None, help="randomized response parameter")
    p.add_argument("--p", default=None, help="finite: comma-separated masses of P")
    p.add_argument("--q", default=None, help="finite: comma-separated masses of Q")
    p.add_argument("--alphas", default="0.5,2,10,100", help="Rényi orders to show (comma-separated)")
    p.add_argument("--delta", type=float, default=1e-5, help="delta for the approximate max divergence")
    p.add_argument("--at-epsilon", type=float, default=1.0, dest="at_epsilon", help="epsilon for the hockey-stick")
    p.set_defaults(func=run)


def build_pair(args: argparse.Namespace) -> tuple[Distribution, Distribution]:
    fam = args.family
    if fam == "laplace":
        b = 1.0 if args.scale is None else args.scale
        return Laplace(0.0, b), Laplace(args.shift, b)
    if fam == "gaussian":
        s = 1.0 if args.sigma is None else args.sigma
        return Gaussian(0.0, s), Gaussian(args.shift, s)
    if fam in ("discrete-laplace", "discrete-gaussian"):
        if not float(args.shift).is_integer():
            raise InvalidArgumentError(f"--shift must be an integer for {fam}; got {args.shift}.")
        d = int(args.shift)
        if fam == "discrete-laplace":
            t = 1.0 if args.scale is None else args.scale
            return DiscreteLaplace(0, t), DiscreteLaplace(d, t)
        s = 1.0 if args.sigma is None else args.sigma
        return DiscreteGaussian(0, s), DiscreteGaussian(d, s)
    if fam == "randomized-response":
        if args.epsilon is None:
            raise InvalidArgumentError("randomized-response needs --epsilon.")
        return (
            Bernoulli.randomized_response(args.epsilon, truth=1),
            Bernoulli.randomized_response(args.epsilon, truth=0),
        )
    if args.p is None or args.q is None:
        raise InvalidArgumentError("finite needs --p and --q, e.g. --p 0.5,0.5 --q 0.25,0.75.")
    return Finite(_floats("--p", args.p)), Finite(_floats("--q", args.q))


def _floats(name: str, text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(f"{name} must be comma-separated numbers; got {text!r}.") from None


def _row(name: str, fn: Callable[[], Estimate]) -> list[str]:
    try:
        v = fn()
    except UnsupportedError as exc:
        return [name, "-", "unsupported", str(exc)[:60]]
    kind: str = v.kind
    note = v.method
    if v.kind == "numerical":
        kind = f"numerical ± {v.error:.1e}"
    return [name, fmt_number(float(v)), kind, note]


def run(args: argparse.Namespace) -> int:
    P, Q = build_pair(args)
    alphas = _floats("--alphas", args.alphas)
    rows = [_row("KL  D(P||Q)", lambda: kl(P, Q))]
    rows += [_row(f"Rényi D_{a:g}", partial(renyi, P, Q, a)) for a in alphas]
    rows += [
        _row("max divergence D_inf", lambda: max_divergence(P, Q)),
        _row(f"approx max D_inf^delta (delta={args.delta:g})", lambda: approx_max_divergence(P, Q, args.delta)),
        _row("reverse D_inf^delta(Q||P)", lambda: approx_max_divergence(Q, P, args.delta)),
        _row("total variation (1/2 L1)", lambda: total_variation(P, Q)),
        _row("statistical distance (sup_S)", lambda: statistical_distance(P, Q)),
        _row(f"hockey-stick delta(eps={args.at_epsilon:g})", lambda: hockey_stick(P, Q, args.at_epsilon)),
        _row("Wasserstein W_1", lambda: wasserstein(P, Q, 1)),
        _row("Wasserstein W_2", lambda: wasserstein(P, Q, 2)),
    ]
    print(f"P = {P}\nQ = {Q}\n")
    print(render(["divergence", "value", "kind", "method"], rows))
    eps_d = approx_max_divergence(P, Q, args.delta)
    eps_r = approx_max_divergence(Q, P, args.delta)
    eps = max(float(eps_d), float(eps_r), 0.0)
    if math.isfinite(eps):
        print(f"\nRemark 3.1: this pair is ({fmt_number(eps)}, {args.delta:g})-indistinguishable in both directions "
              "(tightest epsilon for that delta, rounded up).")
    else:
        print(f"\nRemark 3.1: no finite epsilon for delta={args.delta:g}.")
    return 0
