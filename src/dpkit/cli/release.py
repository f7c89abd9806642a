"""``dpkit release MECHANISM --epsilon E --sensitivity S VALUE...``: one noisy release, with its guarantee."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dpkit._table import fmt_number

if TYPE_CHECKING:
    from dpkit.mechanisms import Mechanism

MECHANISMS = ("laplace", "gaussian", "geometric", "discrete-gaussian")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "release",
        help="add calibrated, floating-point-safe noise to values and print the guarantee",
        description=(
            "Release VALUE(s) through a mechanism with noise from the cryptographically secure generator. "
            "Several values are released together as one vector query: give the l1 (Laplace) or l2 "
            "(Gaussian) sensitivity of the whole vector. Prints each noisy value with a confidence interval, "
            "the noise scale and the guarantee."
        ),
        epilog="Examples: dpkit release laplace --epsilon 1 --sensitivity 1 42 | "
               "dpkit release gaussian --epsilon 1 --delta 1e-6 --sensitivity 1 3.5 7.25",
    )
    p.add_argument("mechanism", choices=MECHANISMS)
    p.add_argument("values", nargs="+", type=float, help="the true value(s) to release")
    p.add_argument("--epsilon", type=float, help="target epsilon (> 0)")
    p.add_argument("--delta", type=float, help="target delta in (0, 1) (Gaussian mechanisms)")
    p.add_argument(
        "--sensitivity", type=float, required=True, help="l1 (Laplace, geometric) or l2 (Gaussian) sensitivity"
    )
    p.add_argument("--scale", type=float, help="noise scale instead of epsilon (Laplace b, or sigma for Gaussian)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--insecure-seed", type=int, default=None, dest="seed",
                   help="use a SEEDED, NOT PRIVATE generator (for reproducible examples and tests only)")
    p.set_defaults(func=run)


def build(args: argparse.Namespace) -> Mechanism:
    from dpkit.mechanisms import DiscreteGaussianMechanism, Gaussian, Geometric, Laplace

    n = len(args.values)
    if args.mechanism == "laplace":
        return Laplace(sensitivity=args.sensitivity, epsilon=args.epsilon, scale=args.scale, dimension=n)
    if args.mechanism == "gaussian":
        if args.scale is not None:
            return Gaussian(sensitivity=args.sensitivity, sigma=args.scale, dimension=n)
        return Gaussian(sensitivity=args.sensitivity, epsilon=args.epsilon, delta=args.delta, dimension=n)
    if args.mechanism == "geometric":
        return Geometric(sensitivity=args.sensitivity, epsilon=args.epsilon, scale=args.scale)
    if args.scale is not None:
        return DiscreteGaussianMechanism(sensitivity=args.sensitivity, sigma=args.scale, dimension=n)
    return DiscreteGaussianMechanism(sensitivity=args.sensitivity, epsilon=args.epsilon, delta=args.delta, dimension=n)


def run(args: argparse.Namespace) -> int:
    from dpkit.random import insecure_seeded

    mech = build(args)
    rng = None if args.seed is None else insecure_seeded(args.seed)
    rel = mech.release(args.values, rng=rng, confidence=args.confidence)
    lo, hi = rel.interval
    for v, a, b in zip(rel.values.reshape(-1), lo.reshape(-1), hi.reshape(-1)):
        print(
            f"{fmt_number(float(v))}    {rel.confidence:.0%} interval [{fmt_number(float(a))}, {fmt_number(float(b))}]"
        )
    print(f"mechanism: {rel.mechanism}, noise scale {fmt_number(rel.scale)}")
    print(f"guarantee: {rel.guarantee}")
    if rel.insecure:
        print("WARNING: seeded generator used: this release is NOT private.")
    return 0
