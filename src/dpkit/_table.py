"""Plain-text tables shared by the command line and query results (standard library only; at the package
root so that `dpkit.query` need not import `dpkit.cli`)."""

from __future__ import annotations

import math


def fmt_number(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if 1e-4 <= abs(x) < 1e6:
        return f"{x:.12g}"
    return f"{x:.10e}"


def render(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join([line, sep, *body])
