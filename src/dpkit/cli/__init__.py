"""The ``dpkit`` command line.

One module per command; each registers its sub-parser through ``register(subparsers)`` and runs
through the ``func`` default it sets.  Errors in user input print one line to stderr and exit 2;
a spend the budget cannot cover exits 3.
"""

from __future__ import annotations

import argparse
import sys

from dpkit.errors import BudgetExceededError, DpkitError

from dpkit.cli import account, divergence, query, release, verify

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpkit",
        description=(
            "dpkit: differential privacy with exact divergences, safe noise and tight accounting. "
            "Run `dpkit COMMAND --help` for each command."
        ),
        epilog="Example: dpkit divergence laplace --shift 1 --scale 1",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    divergence.register(sub)
    verify.register(sub)
    release.register(sub)
    account.register(sub)
    query.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BudgetExceededError as exc:
        print(f"dpkit: {exc}", file=sys.stderr)
        return 3
    except (ValueError, TypeError, OSError, DpkitError) as exc:
        print(f"dpkit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
