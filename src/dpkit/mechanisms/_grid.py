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


def release_on_grid(mechanism, value, *, rng, confidence: float, norm: str,  # type: ignore[no-untyped-def]
                    sample, noise_half_width):
    """The shared release path of grid-snapped mechanisms (Laplace, Gaussian).

    Validates the values (finite, the mechanism's dimension), snaps them to ``mechanism.grid``, adds
    ``sample(size, rng)`` integer noise, and returns a :class:`~dpkit.mechanisms.Release` whose
    interval half-width is ``noise_half_width(confidence)`` grid units plus half a unit for the
    rounding of the input.  ``norm`` names the sensitivity in the error message ("l1" or "l2").
    """
    from dpkit.mechanisms._base import Release, SymmetricInterval, as_values, check_confidence
    from dpkit.random import default_rng, is_insecure

    arr = as_values(value)
    c = check_confidence(confidence)
    if arr.size != mechanism.dimension:
        raise ValueError(f"this mechanism releases {mechanism.dimension} value(s); got {arr.size}. Build it with "
                         f"dimension=<number of values> and the {norm} sensitivity of the whole vector.")
    gen = default_rng() if rng is None else rng
    base = snap(arr.reshape(-1), mechanism.grid)
    noise = np.asarray(sample(base.size, gen), dtype=np.int64)
    out = add_noise_and_unsnap(base, noise, mechanism.grid).reshape(arr.shape)
    del noise
    half = (noise_half_width(c) + 0.5) * mechanism.grid
    return Release(values=out, scale=mechanism.grid * mechanism.noise_grid_scale, confidence=c,
                   interval=SymmetricInterval(out, half), guarantee=mechanism.guarantee, mechanism=mechanism.name,
                   insecure=is_insecure(gen),
                   details={"grid": mechanism.grid, "grid_scale": mechanism.noise_grid_scale,
                            "grid_sensitivity": mechanism.units})
