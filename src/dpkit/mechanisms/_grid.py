r"""Exact integer releases on a power-of-two grid: total over every finite input, silent about it.

Why a grid
----------
Naive ``x + Laplace()`` in floating point leaks x: the set of reachable doubles depends on x
(Mironov 2012, "On significance of the least significant bits for differential privacy", CCS).
dpkit releases ``g (round(x / g) + K)`` where g is a power of two and K is integer noise drawn
exactly (:mod:`dpkit.random`); the integer mechanisms (:mod:`dpkit.mechanisms.discrete`) are the
case g = 1 with integer x.  The only data-dependent rounding is ``n = round(x / g)`` (half to even),
a deterministic function of the data whose sensitivity the accounting includes: each coordinate
moves by at most g/2, so two neighbours' snapped values differ by at most ``|x - y| / g + 1`` grid
units per coordinate.  The mechanism's guarantee is that of the *exact integer* ``n + K``.

What reaches the caller, and why it is private
----------------------------------------------
The released double is ``fl((n + K) g)``: the exact noisy grid value rounded to the nearest double
(half to even), or ``±inf`` when it is beyond the largest double.  That rounding is a fixed function
of the exact integer ``n + K`` alone (g is a public parameter), so the release is post-processing
of an exactly private output and the guarantee is unchanged.  This is *not* the floating-point
failure Mironov exploited: there the set of possible outputs depended on x beyond any function of
a private value; here every output is ``f(n + K)`` for one public f.  Nothing else about the value
reaches the caller:

* **No failure and no message depends on the value.**  Every finite value is released, whatever
  its size.  Releases run in chunks of 2^16 values (:func:`noisy_grid_chunked`); a chunk whose
  ``|n| + |K|`` stays below 2^53 is computed in float64 in place in the output, where every step is
  exact (:func:`_fast_chunk`); the others go through :func:`noisy_grid`, where values with
  ``|x / g| < 2^62`` (all but absurd ones) take a vectorised int64 path in which nothing can
  overflow (``|n| < 2^62`` and ``|K| < 2^62``, the samplers' documented range);
  the others, and integers that a double cannot hold exactly (``|x| > 2^53`` given as Python or
  NumPy integers, or Fractions/Decimals), are computed exactly with Python integers: ``n`` is the
  half-to-even rounding of the exact rational ``x / g``, ``n + K`` is exact, and the conversion to a
  double is Python's correctly rounded ``int / int`` division (``OverflowError`` there becomes
  ``±inf``).  The paths compute the same function (all round half to even), so which path a
  value took is not visible in the output.  The refusals that remain concern the *form* of the
  input, not its magnitude (NaN, ±inf, non-numbers, an empty array; non-integers for the integer
  mechanisms); their messages name the problem, never a value or its position.
* **No warning depends on the value**: the arithmetic runs under ``numpy.errstate(all="ignore")``
  where it may overflow or underflow, so no ``RuntimeWarning`` is emitted for large values.
* **Timing**: the exact path costs a few microseconds per value with ``|x / g| >= 2^62`` (about
  2^52 times the sensitivity for Laplace), and a chunk that leaves the float64 path costs a few
  times more than one that stays; both are part of the wall-clock channel that the README's
  threat model documents, not of what a release returns.

Intervals stay valid
--------------------
A release's interval is ``out ± half`` with ``half = (q + 1/2) g`` (q the noise quantile in grid
units, 1/2 for the rounding of x) and is computed when read (:class:`GridInterval`).  Where the
ends are not exactly representable they are rounded *outward* (an error-free TwoSum tells the
direction, Knuth TAOCP vol 2 §4.2.2, Thm B), and where the released double is itself rounded
(``|n + K| > 2^53``, or the product left the normal range) the half-width grows by half the spacing
of doubles at the output, which bounds that rounding; an output of ``+inf`` has the interval
``[largest double - half, +inf]`` (and symmetrically).  So the stated coverage of the true value
holds for every release.

References
----------
Mironov 2012 (CCS), Sec 5 (the snapping idea); Canonne, Kamath, Steinke 2020, arXiv 2004.00010v5
(integer noise); Knuth, The Art of Computer Programming vol 2, §4.2.2 (TwoSum).
"""

from __future__ import annotations

import bisect
import math
import numbers
from decimal import Decimal
from fractions import Fraction
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

if TYPE_CHECKING:  # at run time they are imported inside the functions that use them
    from dpkit.mechanisms._base import Headline, Release, SymmetricInterval

    #: builds a release's interval: (values, half_width, inexact mask or None, grid) -> interval
    IntervalFactory = Callable[[NDArray[np.float64], float, NDArray[np.bool_] | None, float], SymmetricInterval]

#: draws ``m`` integer noise values from a generator: ``sample(m, rng)``
NoiseSampler = Callable[[int, np.random.Generator], ArrayLike]


class GridMechanism(Protocol):
    """What :func:`release_on_grid` reads of a grid-snapped mechanism (Laplace, Gaussian)."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def grid(self) -> float: ...

    @property
    def units(self) -> float: ...

    @property
    def noise_grid_scale(self) -> float: ...

    @property
    def guarantee(self) -> Headline: ...

#: |round(x / g)| and |K| below this take the int64 path: their sum cannot overflow int64.
FAST_LIMIT = 2.0**62
#: Integers of at most this magnitude are exact doubles.
EXACT_DOUBLE = 2**53
_MAX_DOUBLE = float(np.finfo(np.float64).max)
_TINY_NORMAL = float(np.finfo(np.float64).tiny)  # 2^-1022


def power_of_two_at_most(x: float) -> float:
    """The largest power of two <= x (x > 0, finite)."""
    m, e = math.frexp(x)  # x = m 2^e with 0.5 <= m < 1
    return math.ldexp(1.0, e - 1)


# ---------------------------------------------------------------------------------------------
# the values to release: doubles, plus exact rationals where a double cannot hold them
# ---------------------------------------------------------------------------------------------
def _refuse_nonfinite() -> InvalidArgumentError:
    return InvalidArgumentError(
        "values to release must be finite: NaN and infinities are refused, never noised (this message "
        "names no value or position). Clean or clamp the data first."
    )


def _not_numbers(what: str) -> ArgumentTypeError:
    return ArgumentTypeError(f"values to release must be real numbers; got {what}.")


def release_values(value: ArrayLike) -> tuple[NDArray[np.float64], dict[int, Fraction]]:
    """The values to release as doubles, and the exact value of every entry a double cannot hold.

    Returns ``(floats, exact)``: ``floats`` has the input's shape; ``exact`` maps a flat index to
    the exact rational value of an entry that is an integer beyond 2^53 in magnitude, a Fraction or
    a Decimal (its entry in ``floats`` is then 0 and must not be used).

    Raises
    ------
    TypeError
        Non-numeric input (the message names the container type or dtype, never an entry).
    ValueError
        An empty array, or a NaN or infinite entry (the message names neither the value nor its
        position).
    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise _not_numbers(type(value).__name__) from None
    if raw.size == 0:
        raise InvalidArgumentError("nothing to release: the value array is empty.")
    kind = raw.dtype.kind
    exact: dict[int, Fraction] = {}
    if kind == "b" or (kind == "f" and raw.dtype.itemsize <= 8):
        floats = np.asarray(raw, dtype=np.float64)  # exact; never written
    elif kind == "f":  # long double: entries a double cannot hold are kept exactly
        floats = raw.astype(np.float64)
        flat = raw.reshape(-1)
        with np.errstate(all="ignore"):
            lost = np.flatnonzero((floats.reshape(-1).astype(raw.dtype) != flat) & np.isfinite(flat))
        exact = {int(i): Fraction(*flat[i].as_integer_ratio()) for i in lost.tolist()}
        floats.reshape(-1)[lost] = 0.0
    elif kind in "iu":
        floats = raw.astype(np.float64)
        if raw.dtype.itemsize > 6:  # int64 / uint64 can hold integers that a double cannot
            flat = raw.reshape(-1)
            wide = np.flatnonzero((flat > EXACT_DOUBLE) | ((flat < -EXACT_DOUBLE) if kind == "i" else False))
            exact = {int(i): Fraction(int(flat[i])) for i in wide.tolist()}
    elif kind == "O":
        floats = np.empty(raw.shape, dtype=np.float64)
        out = floats.reshape(-1)
        for i, item in enumerate(raw.reshape(-1).tolist()):
            if isinstance(item, (bool, np.bool_)):
                out[i] = float(item)
            elif isinstance(item, (int, np.integer)):
                if -EXACT_DOUBLE <= int(item) <= EXACT_DOUBLE:
                    out[i] = float(item)
                else:
                    exact[i], out[i] = Fraction(int(item)), 0.0
            elif isinstance(item, np.floating) and item.dtype.itemsize > 8 and np.isfinite(item):
                exact[i], out[i] = Fraction(*item.as_integer_ratio()), 0.0
            elif isinstance(item, (Fraction, Decimal)):
                if isinstance(item, Decimal) and not item.is_finite():
                    raise _refuse_nonfinite()
                exact[i], out[i] = Fraction(item), 0.0
            elif isinstance(item, numbers.Real):
                out[i] = float(item)
            else:
                raise _not_numbers(f"an entry of type {type(item).__name__}")
    else:
        raise _not_numbers(f"an array of dtype {raw.dtype}")
    with np.errstate(all="ignore"):
        total = float(np.add.reduce(floats, axis=None))  # NaN or +-inf anywhere makes it non-finite
    if not math.isfinite(total) and not np.isfinite(floats).all():
        raise _refuse_nonfinite()
    return floats, exact


def is_integral(floats: NDArray[np.float64], exact: dict[int, Fraction]) -> bool:
    """Whether every value is an integer (the exact entries checked exactly)."""
    return bool(np.all(floats == np.floor(floats))) and all(v.denominator == 1 for v in exact.values())


# ---------------------------------------------------------------------------------------------
# the exact noisy grid value, rounded to a double
# ---------------------------------------------------------------------------------------------
def _nearest_double(v: Fraction) -> float:
    """``v`` correctly rounded to a double (half to even), or ``±inf`` beyond the largest double."""
    try:
        return float(v)  # int / int true division: correctly rounded in CPython
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def noisy_grid(floats: NDArray[np.float64], exact: dict[int, Fraction], grid: float,
               noise: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_] | None]:
    """``fl((round(x / grid) + K) * grid)`` for every value, and where that double is inexact.

    ``floats``/``exact`` come from :func:`release_values` (flattened to 1-D here), ``noise`` is the
    integer noise K (one per value), ``grid`` a power of two.  Returns ``(out, inexact)``:
    ``inexact`` is ``None`` when every released double equals the exact noisy grid value, else a
    boolean mask of the entries where it does not: both are functions of the exact ``n + K`` alone
    (which internal path a value took is not visible).  Never raises and never warns for any finite
    input (module docstring).
    """
    flat = floats.reshape(-1)
    with np.errstate(all="ignore"):
        scaled = flat / grid  # exact for a power-of-two grid unless it over- or underflows
        lo, hi = float(scaled.min()), float(scaled.max())
        k_lo, k_hi = int(noise.min()), int(noise.max())
        normal = grid >= _TINY_NORMAL  # then m * grid is a normal double or 0: one rounding at most
        fast = (-FAST_LIMIT < lo and hi < FAST_LIMIT and -FAST_LIMIT < k_lo and k_hi < FAST_LIMIT
                and not exact and normal)
        if fast:
            slow = np.empty(0, dtype=np.intp)
        else:
            outside = ~(np.abs(scaled) < FAST_LIMIT) | ~(np.abs(noise) < FAST_LIMIT)  # inf/NaN-safe
            if not normal:  # a subnormal grid: every value takes the exact path (no double rounding)
                outside[:] = True
            if exact:
                outside[np.fromiter(exact.keys(), dtype=np.intp, count=len(exact))] = True
            slow = np.flatnonzero(outside)
            scaled[slow] = 0.0
        np.rint(scaled, out=scaled)  # half to even, like Python's round() on the exact path
        base = scaled.astype(np.int64)
        del scaled
        base += noise  # |base| < 2^62 and |noise| < 2^62 here: no overflow
        if slow.size:
            base[slow] = 0
        out = base.astype(np.float64)  # correctly rounded beyond 2^53
        out *= grid  # exact unless it leaves the normal range (then a fixed function of n + K)
        exact_everywhere = False
        if fast:  # |n + K| <= m_bound, in Python integers (a float sum would round)
            m_bound = math.ceil(max(abs(lo), abs(hi))) + 1 + max(abs(k_lo), abs(k_hi))
            exact_everywhere = m_bound < EXACT_DOUBLE and float(m_bound) * grid < _MAX_DOUBLE
        inexact: NDArray[np.bool_] | None = None
        if not exact_everywhere:  # exactly where fl(m) != m or the product left the normal range
            mf = base.astype(np.float64)
            wide = np.abs(mf) >= 2.0**63  # fl(m) rounded up to 2^63: inexact, and not castable back
            back = np.where(wide, 0.0, mf).astype(np.int64)
            inexact = wide | (back != base) | ~np.isfinite(out) | ((out != 0.0) & (np.abs(out) < _TINY_NORMAL))
            del mf, back
        del base
    if slow.size:
        g = Fraction(grid)
        if inexact is None:
            inexact = np.zeros(out.size, dtype=bool)
        for i in slow.tolist():
            x = exact[i] if i in exact else Fraction(float(flat[i]))
            v = (round(x / g) + int(noise[i])) * g  # round(Fraction): half to even
            out[i] = _nearest_double(v)
            inexact[i] = not (math.isfinite(out[i]) and Fraction(out[i]) == v)
    if inexact is not None and not inexact.any():
        inexact = None  # so that what the caller sees is a function of the exact noisy values alone
    return out, inexact


# ---------------------------------------------------------------------------------------------
# intervals that cover the truth whatever the rounding
# ---------------------------------------------------------------------------------------------
def _two_sum_outward(a: Any, b: Any, up: bool) -> Any:
    """``a + b`` rounded outward (up or down) where the float sum is inexact (TwoSum, Knuth §4.2.2)."""
    with np.errstate(all="ignore"):
        s = np.add(a, b)
        bv = s - a
        err = (a - (s - bv)) + (b - bv)  # exact: a + b = s + err (NaN if s overflowed: s is kept)
        if up:
            return np.where(err > 0, np.nextafter(s, np.inf), s)
        return np.where(err < 0, np.nextafter(s, -np.inf), s)


def _interval_class() -> IntervalFactory:
    from dpkit._value import value_object
    from dpkit.mechanisms._base import SymmetricInterval

    @value_object(eq=False, repr=False)  # repr: SymmetricInterval's
    class GridInterval(SymmetricInterval):
        """``values ∓ half_width`` rounded outward, widened where a released double is inexact.

        Behaves like :class:`~dpkit.mechanisms._base.SymmetricInterval` (a two-item tuple computed
        when read; a frozen, slotted dataclass); see the module docstring of :mod:`dpkit.mechanisms._grid`
        for why it covers the truth whatever the rounding.  ``inexact`` is the mask :func:`noisy_grid`
        returned (or None), kept as a read-only copy.
        """

        inexact: NDArray[np.bool_] | None
        grid: float

        def __post_init__(self) -> None:
            SymmetricInterval.__post_init__(self)  # no bare super(): a slots dataclass is a new class
            if self.inexact is not None:
                inexact = np.array(self.inexact, dtype=bool)
                inexact.flags.writeable = False
                object.__setattr__(self, "inexact", inexact)
            grid = float(self.grid)
            if grid is not self.grid:
                object.__setattr__(self, "grid", grid)

        def _exact_ends(self) -> bool:
            """Whether ``values ∓ half_width`` is exact: all are multiples of grid/2 below 2^53 halves."""
            if self.inexact is not None:
                return False
            units = self.half_width / self.grid
            with np.errstate(all="ignore"):
                top = float(np.max(np.abs(self.values))) / self.grid
            return (float(2.0 * units).is_integer() and self.grid / 2.0 >= _TINY_NORMAL
                    and (top + units) * 2.0 < EXACT_DOUBLE and (top + units) * self.grid < _MAX_DOUBLE)

        def __getitem__(self, i: int) -> NDArray[np.float64]:
            if i not in (0, 1, -1, -2):
                raise IndexError("an interval has two ends")
            up = i in (1, -1)
            values, half = self.values, self.half_width
            if self._exact_ends():
                exact = values + half if up else values - half
                if isinstance(exact, np.ndarray):
                    exact.flags.writeable = False
                return exact
            width: Any = half
            if self.inexact is not None and self.inexact.any():
                with np.errstate(all="ignore"):
                    spacing = np.where(self.inexact.reshape(values.shape), np.spacing(np.abs(values)) / 2.0, 0.0)
                    spacing = np.where(np.isfinite(spacing), spacing, 0.0)
                width = _two_sum_outward(half, spacing, up=True)
            end = _two_sum_outward(values, width if up else -width, up=up)
            # an output of +inf (-inf) says the exact value is beyond the largest double
            if up:
                cap, beyond = _two_sum_outward(-_MAX_DOUBLE, width, up=True), np.isneginf(values)
            else:
                cap, beyond = _two_sum_outward(_MAX_DOUBLE, -width, up=False), np.isposinf(values)
            out = np.asarray(np.where(beyond, cap, end), dtype=np.float64)
            if out.ndim:
                out.flags.writeable = False
            return out

    return GridInterval


_GRID_INTERVAL: list[IntervalFactory] = []


def grid_interval(values: NDArray[np.float64], half_width: float, inexact: NDArray[np.bool_] | None,
                  grid: float) -> SymmetricInterval:
    """The interval object of a grid release (``GridInterval``); ``inexact`` as :func:`noisy_grid` returned."""
    if not _GRID_INTERVAL:
        _GRID_INTERVAL.append(_interval_class())
    return _GRID_INTERVAL[0](values, half_width, inexact, grid)


# ---------------------------------------------------------------------------------------------
# the shared release path of Laplace and Gaussian
# ---------------------------------------------------------------------------------------------
#: Values per chunk of the release path: each chunk's noise, snapping and noising stay in cache.
_CHUNK = 1 << 16


def _fast_chunk(x: NDArray[np.float64], inv: float, grid: float, noise: NDArray[np.int64] | NDArray[np.float64],
                out: NDArray[np.float64]) -> bool:
    """``out = (rint(x / grid) + noise) * grid`` in place in float64, where that is exact; else False.

    ``inv = 1 / grid`` is an exact power of two (``grid`` is a normal power of two), so ``x * inv`` is
    the correctly rounded ``x / grid`` (the same real number) and ``rint`` rounds it half to even, as
    :func:`noisy_grid` does.  When ``|n| + |K| < 2**53`` over the chunk, ``n`` and ``K`` are exact
    doubles and so is their sum; when moreover ``(|n| + |K|) grid`` is below the largest double, the
    product by ``grid`` is exact too (a nonzero multiple of a normal power of two is normal).  Then
    ``out`` is exactly the noisy grid value :func:`noisy_grid` would return, with nothing inexact.
    Otherwise (huge values, or ``x / grid`` overflowing to infinity) nothing is claimed, ``False`` is
    returned, and the caller recomputes the chunk with :func:`noisy_grid`.  Values of either sign of
    zero come out as ``+0.0``, like the int64 path's.
    """
    np.multiply(x, inv, out=out)
    np.rint(out, out=out)
    top = max(-float(out.min()), float(out.max()))  # max |n|; inf if x / grid overflowed
    if not top < EXACT_DOUBLE:
        return False
    bound = int(top) + max(-int(noise.min()), int(noise.max()))  # >= |n + K|; exact (int, or float < 2**53)
    if bound >= EXACT_DOUBLE or float(bound) * grid >= _MAX_DOUBLE:
        return False
    np.add(out, noise, out=out)  # exact: integers below 2**53 and their sum
    out *= grid  # exact: a multiple of grid below the largest double
    return True


def noisy_grid_chunked(
    floats: NDArray[np.float64], exact: dict[int, Fraction], grid: float, sample: NoiseSampler, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.bool_] | None]:
    """:func:`noisy_grid` with the noise drawn by ``sample(m, rng)``, ``_CHUNK`` values at a time.

    ``sample`` returns ``m`` integers: an integer array, or a float64 array whose entries are exact
    integers (:func:`dpkit.random._gaussian.gaussian_noise`; it switches to int64 for a draw of
    ``2**53`` or more), which the fast path adds to the doubles without a conversion.

    The same function of the values and the noise as :func:`noisy_grid` (the noise of value ``i`` is
    the ``i``-th draw), computed chunk by chunk into one output array: each chunk draws its noise,
    then snaps and noises in place in the output (:func:`_fast_chunk`), or, where that is not exact
    (values or noise of ``2**53`` grid units and more, a subnormal grid, exact entries), goes through
    :func:`noisy_grid`.  Memory: the output plus a few chunk-sized temporaries, never a copy of the
    input.  Which path a chunk took is not visible in the output (both compute ``fl((n + K) g)``).
    """
    flat = floats.reshape(-1)
    n = flat.size
    out = np.empty(n, dtype=np.float64)
    inexact: NDArray[np.bool_] | None = None
    normal = grid >= _TINY_NORMAL
    inv = 1.0 / grid  # exact for a normal power of two
    keys = sorted(exact) if exact else []
    with np.errstate(all="ignore"):
        for start in range(0, n, _CHUNK):
            stop = min(start + _CHUNK, n)
            noise = np.asarray(sample(stop - start, rng)).reshape(-1)
            if noise.dtype != np.float64:
                noise = noise.astype(np.int64, copy=False)
            piece = out[start:stop]
            lo, hi = bisect.bisect_left(keys, start), bisect.bisect_left(keys, stop)
            if lo == hi and normal and _fast_chunk(flat[start:stop], inv, grid, noise, piece):
                continue
            chunk_exact = {i - start: exact[i] for i in keys[lo:hi]}
            values, mask = noisy_grid(flat[start:stop], chunk_exact, grid, noise.astype(np.int64, copy=False))
            piece[...] = values
            if mask is not None:
                if inexact is None:
                    inexact = np.zeros(n, dtype=bool)
                inexact[start:stop] = mask
    return out, inexact


def release_on_grid(mechanism: GridMechanism, value: ArrayLike, *, rng: np.random.Generator | None,
                    confidence: float, norm: str, sample: NoiseSampler,
                    noise_half_width: Callable[[float], float]) -> Release:
    """The shared release path of grid-snapped mechanisms (Laplace, Gaussian).

    Validates the values (finite, the mechanism's dimension), adds integer noise drawn by
    ``sample(m, rng)`` (``m`` values at a time, in order) on ``mechanism.grid`` exactly
    (:func:`noisy_grid_chunked`), and returns a
    :class:`~dpkit.mechanisms.Release` whose interval half-width is ``noise_half_width(confidence)``
    grid units plus half a unit for the rounding of the input (:class:`GridInterval`).  ``norm``
    names the sensitivity in the error message ("l1" or "l2").  ``insecure`` is checked before and
    after the draws, so a generator rewound since its last use is reported even when the release
    replays exactly the stream it had drawn.
    """
    from dpkit.mechanisms._base import Release, check_confidence
    from dpkit.random import is_insecure, resolve_rng

    floats, exact = release_values(value)
    c = check_confidence(confidence)
    if floats.size != mechanism.dimension:
        raise InvalidArgumentError(
            f"this mechanism releases {mechanism.dimension} value(s); got {floats.size}. Build it with "
            f"dimension=<number of values> and the {norm} sensitivity of the whole vector."
        )
    half = (noise_half_width(c) + 0.5) * mechanism.grid
    gen = resolve_rng(rng)
    insecure = is_insecure(gen)
    out, inexact = noisy_grid_chunked(floats, exact, mechanism.grid, sample, gen)
    insecure = is_insecure(gen) or insecure
    out = out.reshape(floats.shape)
    return Release(values=out, scale=mechanism.grid * mechanism.noise_grid_scale, confidence=c,
                   interval=grid_interval(out, half, inexact, mechanism.grid), guarantee=mechanism.guarantee,
                   mechanism=mechanism.name, insecure=insecure,
                   details={"grid": mechanism.grid, "grid_scale": mechanism.noise_grid_scale,
                            "grid_sensitivity": mechanism.units})
