"""``dpkit verify mechanism.csv --epsilon E [--delta D]``: Remark 3.1 on a finite mechanism."""

from __future__ import annotations

import argparse
from dpkit.errors import InvalidArgumentError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="check a finite mechanism (CSV of output probabilities) against (epsilon, delta)-DP",
        description=(
            "Decide whether a finite mechanism is (epsilon, delta)-DP (Dwork & Roth Remark 3.1): every pair "
            "of neighbouring rows must satisfy D_inf^delta <= epsilon in both directions. The CSV has one row "
            "of output probabilities per input (optional header of output labels, optional first column of "
            "input labels). Neighbours are consecutive rows unless --neighbors is given. Exit status: 0 if the "
            "guarantee holds, 1 if it does not, 2 on bad input."
        ),
        epilog="Example: dpkit verify examples/randomized_response.csv --epsilon 1.0986123 --delta 0",
    )
    p.add_argument("path", help="CSV file: one row of output probabilities per input")
    p.add_argument("--epsilon", type=float, required=True, help="claimed epsilon (>= 0)")
    p.add_argument("--delta", type=float, default=0.0, help="claimed delta in [0, 1] (default 0)")
    p.add_argument(
        "--neighbors",
        default=None,
        help="explicit neighbouring row pairs as 'i-j,i-j,...' (0-based); default: consecutive rows",
    )
    p.set_defaults(func=run)


def _pairs(text: str | None) -> list[tuple[int, int]] | None:
    if text is None:
        return None
    out = []
    for item in text.split(","):
        try:
            i, j = item.split("-")
            out.append((int(i), int(j)))
        except ValueError:
            raise InvalidArgumentError(f"--neighbors must look like '0-1,1-2'; got {item!r}.") from None
    return out


def run(args: argparse.Namespace) -> int:
    from dpkit.verify import load_mechanism_csv, table

    mech = load_mechanism_csv(args.path)
    verdict = table(mech.rows, epsilon=args.epsilon, delta=args.delta, neighbors=_pairs(args.neighbors),
                    outputs=mech.outputs)
    print(verdict)
    return 0 if verdict.holds else 1
