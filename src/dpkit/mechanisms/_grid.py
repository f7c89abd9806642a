"""Snapping to a power-of-two grid, so that released values leak nothing through floating point.

Naive ``x + Laplace()`` in floating point leaks x: the set of reachable doubles depends on x
(Mironov 2012, "On significance of the least significant bits for differential privacy", CCS).
dpkit releases ``g * (round(x / g) + K)`` where g is a power of two and K is integer noise drawn
exactly (:mod:`dpkit.random`).  Because g is a power of two, ``x / g`` and ``n * g`` are exact in
binary floating point (no rounding) as long as the integers stay below 2^52, which is checked; the
only data-dependent rounding is ``round(x / g)``, a deterministic function of the data whose
sensitivity the accounting includes: each coordinate moves by at most g/2, so two neighbours'
snapped values differ by at most ``|x - y| / g + 1`` grid units per coordinate.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

#: Integers on the grid must stay below this so that n * g is an exact double.
LIMIT = 2.0**52


def power_of_two_at_most(x: float) -> float:
    """The largest power of two <= x (x > 0, finite)."""
    m, e = math.frexp(x)  # x = m 2^e with 0.5 <= m < 1
    return math.ldexp(1.0, e - 1)


def snap(values: NDArray[np.float64], grid: float) -> NDArray[np.int64]:
    """round(values / grid) as int64, refusing values too large for an exact grid representation."""
    scaled = values / grid  # exact: grid is a power of two
    if max(-float(scaled.min()), float(scaled.max())) >= LIMIT / 4:
        big = float(np.max(np.abs(values)))
        raise ValueError(
            f"a value of magnitude {big:g} is too large for this mechanism's grid ({grid:g}): the snapped integer "
            "would exceed 2^50. Clamp the data to a sensible range, or use a larger sensitivity/noise scale."
        )
    np.rint(scaled, out=scaled)
    return scaled.astype(np.int64)


def add_noise_and_unsnap(base: NDArray[np.int64], noise: NDArray[np.int64], grid: float) -> NDArray[np.float64]:
    """(base + noise) * grid as exact doubles, in place where possible (one new array)."""
    base += noise
    if max(-int(base.min()), int(base.max())) >= LIMIT:  # pragma: no cover - prevented by snap and noise bounds
        raise ValueError("released integer exceeds 2^52; the grid cannot represent it exactly.")
    out = base.astype(np.float64)
    out *= grid
    return out


def unsnap(integers: NDArray[np.int64], grid: float) -> NDArray[np.float64]:
    """integers * grid as exact doubles."""
    if np.any(np.abs(integers) >= LIMIT):  # pragma: no cover - prevented by snap and the noise checks
        raise ValueError("released integer exceeds 2^52; the grid cannot represent it exactly.")
    return integers.astype(np.float64) * grid
