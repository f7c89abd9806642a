"""The ``dpkit`` command line.

One module per command; each registers its sub-parser through ``register(subparsers)`` and runs
through the ``func`` default it sets.  Errors in user input print one line to stderr and exit 2;
a spend the budget cannot cover exits 3.

What counts as an error in user input (exit 2, one line): a :class:`~dpkit.errors.DpkitError` (its
:class:`~dpkit.errors.InvalidArgumentError` / :class:`~dpkit.errors.ArgumentTypeError` are dpkit's
argument validation), an :class:`OSError` about a file the user named, and a plain ``ValueError`` /
``TypeError`` that a ``raise`` statement in dpkit's own code raised (validation in the modules that
do not raise the dpkit classes yet).  Anything else -- a ``TypeError`` from calling a function
wrongly inside dpkit, an exception from a library -- is a bug and propagates with its traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

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
    except (DpkitError, OSError) as exc:
        print(f"dpkit: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        if not _raised_by_dpkit_validation(exc):
            raise  # a bug: keep the traceback
        print(f"dpkit: error: {exc}", file=sys.stderr)
        return 2


_PACKAGE = Path(__file__).resolve().parent.parent


def _raised_by_dpkit_validation(exc: BaseException) -> bool:
    """Whether ``exc`` came from a ``raise`` statement in dpkit's source (validation), not from a bug.

    The innermost frame must be in the dpkit package and its line a ``raise`` statement: an error
    Python or a library raised (``None + 1``, NumPy's shape errors) has its innermost frame on the
    failing expression or inside the library, and is not caught.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    try:
        inside = Path(last.filename).resolve().is_relative_to(_PACKAGE)
    except (OSError, ValueError):
        return False
    return inside and (last.line or "").lstrip().startswith("raise ")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
