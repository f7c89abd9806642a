"""Independent references for tests/numerics: the textbook formulas, evaluated naively in mpmath.

Each reference is the plain closed form (or the plain finite sum) of the quantity, with none of the
cancellation-free rewriting dpkit does: instead the working precision is raised far enough for the
cancellation it suffers (50 digits plus the digits the subtraction loses, estimated generously
from the parameters), so agreement checks dpkit's rewriting as well as its rounding. Every
function returns an ``mp.mpf`` computed at those digits.

Also here: the ulp check of a labelled value against its reference, and the record of the worst
relative error per function (written to ``$DPKIT_NUMERICS_REPORT`` as JSON when that is set, for
the table in docs/theory.md).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable

import mpmath as mp

DIGITS = 50

WORST: dict[str, tuple[float, str]] = {}


def _extra(*small: float) -> int:
    """Extra digits for naive formulas that cancel like the given small parameters."""
    more = 0
    for x in small:
        x = abs(float(x))
        if 0.0 < x < 1.0:
            more += int(3 * -math.log10(x)) + 5
    return min(more, 4000)


def at(digits: int) -> mp.workdps:
    return mp.workdps(DIGITS + digits)


def float_above(x: mp.mpf) -> float:
    """The smallest float >= x."""
    f = float(x)
    if math.isinf(f):
        return f
    if mp.mpf(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def check(name: str, value: object, exact: mp.mpf, *, scale: float = 1e-300) -> None:
    """The label of ``value`` holds against ``exact``; record the relative error.

    exact: exact <= value <= the second float at or above exact; upper: exact <= value; lower:
    value <= exact; interval: lower <= exact <= value. Numerical estimates are not checked. The
    error recorded is |value - exact| / max(|exact|, scale): ``scale`` is where a bound that is
    absolute (float sums of masses) stops being measured relative to the value.
    """
    kind = getattr(value, "kind", "exact")
    v = float(value)  # type: ignore[arg-type]
    with mp.workdps(DIGITS + 20):
        ex = mp.mpf(exact)
        if mp.isinf(ex):
            assert v == float(ex), (name, v, ex)
            return
        mv = mp.mpf(v)
        if kind == "exact":
            assert mv >= ex, f"{name}: exact value {v!r} below {mp.nstr(ex, 25)}"
            limit = math.nextafter(float_above(ex), math.inf)
            assert v <= limit, f"{name}: exact value {v!r} more than 2 ulps above {mp.nstr(ex, 25)}"
        elif kind == "upper":
            assert mv >= ex, f"{name}: upper bound {v!r} below {mp.nstr(ex, 25)}"
        elif kind == "lower":
            assert mv <= ex, f"{name}: lower bound {v!r} above {mp.nstr(ex, 25)}"
        elif kind == "interval":
            assert mp.mpf(value.lower) <= ex <= mv, (name, value, ex)  # type: ignore[attr-defined]
        else:
            return
        if abs(ex) > mp.mpf("1e-300") or scale > 1e-300:
            rel = float(abs(mv - ex) / max(abs(ex), mp.mpf(scale)))
            label = f"{kind}"
            if rel > WORST.get(name, (-1.0, ""))[0]:
                WORST[name] = (rel, label)
        else:
            WORST.setdefault(name, (0.0, kind))


def dump() -> None:
    path = os.environ.get("DPKIT_NUMERICS_REPORT")
    if not path:
        return
    old: dict[str, list[object]] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            old = json.load(fh)
    for name, (rel, kind) in WORST.items():
        if name not in old or rel > float(old[name][0]):  # type: ignore[arg-type]
            old[name] = [rel, kind]
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(old, fh, indent=1, sort_keys=True)


# ---- Laplace shift, t = D / b ---------------------------------------------------------------------


def laplace_kl(t: mp.mpf) -> mp.mpf:
    return t + mp.exp(-t) - 1


def laplace_renyi(t: mp.mpf, a: mp.mpf) -> mp.mpf:
    """Mironov 2017, Table II; alpha = 1/2 from the Bhattacharyya coefficient e^{-t/2}(1 + t/2)."""
    if a == mp.mpf(0.5):
        return -2 * mp.log(mp.exp(-t / 2) * (1 + t / 2))
    inner = a / (2 * a - 1) * mp.exp((a - 1) * t) + (a - 1) / (2 * a - 1) * mp.exp(-a * t)
    return mp.log(inner) / (a - 1)


def laplace_hockey(t: mp.mpf, e: mp.mpf) -> mp.mpf:
    if e >= t:
        return mp.mpf(0)
    if e >= -t:
        return 1 - mp.exp((e - t) / 2)
    return 1 - mp.exp(e)


def laplace_approx_max(t: mp.mpf, d: mp.mpf) -> mp.mpf:
    return max(mp.log(1 - d), t + 2 * mp.log(1 - d))


# ---- Gaussian shift, mu = D / sigma ---------------------------------------------------------------


def phi(x: mp.mpf) -> mp.mpf:
    return mp.ncdf(x)


def gaussian_hockey(mu: mp.mpf, e: mp.mpf) -> mp.mpf:
    """Balle & Wang 2018, Thm 8, as printed."""
    if mu == 0:
        return max(mp.mpf(0), 1 - mp.exp(e))
    return phi(mu / 2 - e / mu) - mp.exp(e) * phi(-mu / 2 - e / mu)


def gaussian_digits(mu: float, e: float) -> int:
    """Digits the naive Balle-Wang difference loses: the terms over their difference."""
    with mp.workdps(60):
        m, ee = mp.mpf(mu), mp.mpf(e)
        a = phi(m / 2 - ee / m)
        b = mp.exp(ee) * phi(-m / 2 - ee / m)
        d = a - b
        if d <= 0:
            return 400
        return min(int(mp.log10((a + b) / d)) + 10, 4000)


def invert(f: Callable[[mp.mpf], mp.mpf], target: mp.mpf, guess: float) -> mp.mpf:
    """The root of f(e) = target near ``guess`` (f decreasing): bracketing then bisection in mpmath."""
    lo = hi = mp.mpf(guess)
    step = max(abs(mp.mpf(guess)) * mp.mpf("1e-12"), mp.mpf("1e-300"))
    while f(lo) <= target:
        lo -= step
        step *= 2
    step = max(abs(mp.mpf(guess)) * mp.mpf("1e-12"), mp.mpf("1e-300"))
    while f(hi) > target:
        hi += step
        step *= 2
    for _ in range(mp.mp.prec + 40):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi


# ---- lattice pairs, by their atoms ----------------------------------------------------------------


def discrete_laplace_atoms(d: int, t: float) -> list[tuple[mp.mpf, mp.mpf]]:
    """(p, q) over the integers for DLap(0, t) vs DLap(d, t), as a finite list with the far tails
    folded into two atoms (their loss is constant: +-d/t)."""
    tm = mp.mpf(t)
    r = mp.exp(-1 / tm)
    norm = (1 - r) / (1 + r)
    pmf = lambda k, loc: norm * r ** abs(k - loc)  # noqa: E731
    atoms = [(pmf(k, 0), pmf(k, d)) for k in range(1, d)]
    # k <= 0: P-mass 1/(1+r), loss d/t; k >= d: P-mass r^d/(1+r), loss -d/t
    atoms.append((1 / (1 + r), 1 / (1 + r) * mp.exp(-d / tm)))
    atoms.append((r**d / (1 + r), r**d / (1 + r) * mp.exp(d / tm)))
    return atoms


def discrete_gaussian_atoms(d: int, sigma: float, center: float = 0.0) -> list[tuple[mp.mpf, mp.mpf]]:
    """The atoms within 60 sigma of 0, of d and of ``center`` (where a Rényi sum of order alpha
    peaks: (1 - alpha) d)."""
    s2 = 2 * mp.mpf(sigma) ** 2
    reach = int(60 * sigma) + d + 10 + int(abs(center))
    ks = range(-reach, reach + 1)
    norm = mp.fsum(mp.exp(-mp.mpf(k) ** 2 / s2) for k in ks)
    return [(mp.exp(-mp.mpf(k) ** 2 / s2) / norm, mp.exp(-mp.mpf(k - d) ** 2 / s2) / norm) for k in ks]


def atoms_kl(atoms: list[tuple[mp.mpf, mp.mpf]]) -> mp.mpf:
    return mp.fsum(p * mp.log(p / q) for p, q in atoms if p > 0)


def atoms_renyi(atoms: list[tuple[mp.mpf, mp.mpf]], a: mp.mpf, *, shortfall: bool = False) -> mp.mpf:
    """ln(sum p^a q^(1-a))/(a - 1); with ``shortfall``, float masses that sum to less (or more) than 1
    count the difference c = 1 - sum p as mass at loss 0 (dpkit's convention for ``Finite`` laws,
    whose masses may miss 1 by a rounding) where the sum is at least 2|c|. With the convention the
    sum minus 1 is formed as sum p expm1((a-1) ln(p/q)) - P(q = 0), so no 1 + tiny is ever rounded."""
    total = mp.fsum(p**a * q ** (1 - a) for p, q in atoms if p > 0 and q > 0)
    c = 1 - mp.fsum(p for p, _ in atoms)
    if shortfall and abs(c) <= total / 2:
        if abs(total - 1) >= mp.mpf(0.5):
            return mp.log(total + c) / (a - 1)
        x = mp.fsum(p * mp.expm1((a - 1) * mp.log(p / q)) for p, q in atoms if p > 0 and q > 0)
        x -= mp.fsum(p for p, q in atoms if p > 0 and q == 0)
        return mp.log1p(x) / (a - 1)
    return mp.log(total) / (a - 1)


def atoms_hockey(atoms: list[tuple[mp.mpf, mp.mpf]], e: mp.mpf) -> mp.mpf:
    g = mp.exp(e)
    return min(mp.mpf(1), mp.fsum(max(mp.mpf(0), p - g * q) for p, q in atoms))  # <= 1 for laws


def atoms_tv(atoms: list[tuple[mp.mpf, mp.mpf]]) -> mp.mpf:
    return min(mp.mpf(1), mp.fsum(abs(p - q) for p, q in atoms) / 2)  # <= 1: rounding of the masses aside


def atoms_max(atoms: list[tuple[mp.mpf, mp.mpf]]) -> mp.mpf:
    return max(mp.log(p / q) for p, q in atoms if p > 0)
