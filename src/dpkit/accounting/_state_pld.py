r"""PLD answers for :class:`~dpkit.accounting.state.AccountingState`: its grouped laws, composed once.

The state hands over its laws grouped (law -> count; every Gaussian already merged into one, mu^2
summed and rounded up).  Two paths, both certified intervals [lower, upper] on the exact epsilon (or
delta) of the composition fixed in advance, worst of the two neighbouring directions:

* **tilted** (no delta floor; :mod:`dpkit.accounting._tilted_solve`): when every law is a Gaussian
  shift, a continuous Laplace shift or a subsampled Gaussian.  The merged Gaussian is the
  ``"remove"`` law at q = 1 (L = X exactly); a Poisson-subsampled Gaussian contributes its removal law
  to one direction and its addition law to the other (Zhu, Dong, Wang 2022, arXiv 2106.08567, Thm 11),
  a substitution one its symmetric law to both; Laplace shifts are symmetric.  Only the Gaussian:
  closed form (:mod:`dpkit.accounting.gaussian_profile`).
* **FFT** (:func:`dpkit.accounting.pld.compose_many`): when a discrete or finite pair is present; every
  law is discretised on one grid (pessimistic and optimistic), each distinct law once, raised to its
  count in Fourier space.  Pure-epsilon items without an exact law are composed as randomized response
  (every epsilon-DP pair is a post-processing of it: Kairouz, Oh, Viswanath 2015, Thm 2.4).

Hand-written glue only: the mathematics and its certificates are those of the modules named.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.accounting.pld import PLD, compose_many, default_grid, pld_from_pair
from dpkit.errors import UnsupportedError

__all__ = ["answer"]

_TILTED_KINDS = ("gaussian", "laplace", "subsampled", "symmetric")
_FACTOR_CACHE: dict[tuple[Any, ...], PLD] = {}


def answer(laws: dict[Any, int], what: str, x: float) -> tuple[float, float, str]:
    """(lower, upper, method) of epsilon(delta = x) or delta(epsilon = x)."""
    if not laws:
        return 0.0, 0.0, "nothing composed"
    if all(key[0] in _TILTED_KINDS for key in laws):
        return _tilted(laws, what, x)
    return _fft(laws, what, x)


def _tilted(laws: dict[Any, int], what: str, x: float) -> tuple[float, float, str]:
    from dpkit.accounting._tilted_laws import LawSpec

    keys = list(laws)
    if len(keys) == 1 and keys[0][0] == "gaussian":
        from dpkit.accounting.gaussian_profile import gaussian_delta_interval, gaussian_epsilon_interval

        mu = math.nextafter(math.sqrt(keys[0][1]), math.inf)
        lo, hi = gaussian_epsilon_interval(mu, x) if what == "epsilon" else gaussian_delta_interval(mu, x)
        return lo, hi, "closed form: the Gaussians merged into one (Dong, Roth, Su 2022, Cor 3.3)"
    remove: list[tuple[Any, int]] = []
    add: list[tuple[Any, int]] = []
    asymmetric = False
    for key, k in laws.items():
        kind = key[0]
        if kind == "gaussian":
            spec, n = _gaussian_pieces(float(key[1]))
            remove.append((spec, n))
            add.append((spec, n))
        elif kind == "laplace":
            spec = LawSpec("laplace", float(key[1]))
            remove.append((spec, k))
            add.append((spec, k))
        elif kind == "symmetric":
            spec = LawSpec("symmetric", float(key[1]), float(key[2]))
            remove.append((spec, k))
            add.append((spec, k))
        else:  # Poisson subsampled Gaussian, add/remove
            asymmetric = True
            remove.append((LawSpec("remove", float(key[1]), float(key[2])), k))
            add.append((LawSpec("add", float(key[1]), float(key[2])), k))
    from dpkit.accounting import _tilted_solve

    directions = [remove, add] if asymmetric else [remove]
    if what == "epsilon":
        lo, hi = _tilted_solve.epsilon_bounds(directions, x)
    else:
        lo, hi = _tilted_solve.delta_bounds(directions, x)
    return lo, hi, "tilted PLD (pessimistic and optimistic laws, no delta floor), worst direction"


#: the largest mu of one piece of the merged Gaussian handed to the tilted accountant
_PIECE_MU = 2.0


def _gaussian_pieces(mu2: float) -> tuple[Any, int]:
    """The merged Gaussian (mu^2 = ``mu2``) as n equal Gaussian shifts of mu_p <= ``_PIECE_MU``, n mu_p^2 >= mu2.

    Composing n Gaussian shifts of mu_p gives exactly the Gaussian shift of sqrt(n) mu_p (Dong, Roth, Su
    2022, arXiv 1905.02383, Cor 3.3), so the pieces are the merged law again, with mu_p rounded up (a larger
    mu only adds privacy loss).  One factor of a large mu (10^6 Gaussians of sigma 20..60 merge to mu ~ 29)
    spans a loss range of ~ mu^2 + 22 mu on the grid of the finest law (a Laplace or subsampled factor of
    scale 1e-3), which is far beyond the point cap (the grid was then coarsened for every law, or the
    discretisation failed); a piece of mu <= 2 spans a few hundred of its own standard deviations at most and
    the tilted FFT raises it to its count like any repeated law."""
    from fractions import Fraction

    from dpkit.accounting._tilted_laws import LawSpec

    n = max(1, math.ceil(mu2 / (_PIECE_MU * _PIECE_MU)))
    mu_p = math.sqrt(mu2 / n)
    while n * Fraction(mu_p) ** 2 < Fraction(mu2):  # exactly: n mu_p^2 >= mu2, never a smaller mu
        mu_p = math.nextafter(mu_p, math.inf)
    return LawSpec("remove", mu_p, 1.0), n


def _pairs(key: Any) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """(P, Q) for direction 0 and direction 1 of one law."""
    from dpkit.distributions import Distribution, Finite, Gaussian, Laplace

    kind = key[0]
    p: tuple[Distribution, Distribution]
    if kind == "gaussian":
        mu = math.nextafter(math.sqrt(key[1]), math.inf)
        p = (Gaussian(0, 1), Gaussian(mu, 1))
        return p, p
    if kind == "laplace":
        p = (Laplace(0, 1), Laplace(float(key[1]), 1))
        return p, p
    if kind == "pure":
        e = float(key[1])
        hi = 1.0 / (1.0 + math.exp(-e))
        p = (Finite([hi, 1.0 - hi], support=[0, 1]), Finite([1.0 - hi, hi], support=[0, 1]))
        return p, p
    if kind == "pair":
        pair = key[2]
        if pair.symmetric:
            return (pair.P, pair.Q), (pair.P, pair.Q)
        return (pair.P, pair.Q), (pair.Q, pair.P)
    raise UnsupportedError(f"no FFT law for {kind!r}")


def _factor(key: Any, direction: int, grid: float, pessimistic: bool) -> PLD:
    ck = (key[:2] if key[0] == "pair" else key, direction, grid, pessimistic)
    hit = _FACTOR_CACHE.get(ck)
    if hit is not None:
        return hit
    if key[0] in ("subsampled", "symmetric", "subsampled_laplace", "symmetric_laplace"):
        from dpkit.accounting.subsampling import pld_subsampled
        from dpkit.distributions import Gaussian, Laplace

        mu, q = float(key[1]), float(key[2])
        base = Laplace if key[0].endswith("_laplace") else Gaussian  # a shift by mu (Laplace: t) of unit scale
        if key[0].startswith("symmetric"):
            f = pld_subsampled(base(0, 1), base(mu, 1), sampling_rate=q, sampling="without_replacement",
                               neighboring="substitute", grid=grid, pessimistic=pessimistic)
        else:
            f = pld_subsampled(base(0, 1), base(mu, 1), sampling_rate=q,
                               direction="remove" if direction == 0 else "add", grid=grid, pessimistic=pessimistic)
    else:
        P, Q = _pairs(key)[direction]
        f = pld_from_pair(P, Q, grid=grid, pessimistic=pessimistic)
    if len(_FACTOR_CACHE) > 256:
        _FACTOR_CACHE.pop(next(iter(_FACTOR_CACHE)))
    _FACTOR_CACHE[ck] = f
    return f


def _fft(laws: dict[Any, int], what: str, x: float) -> tuple[float, float, str]:
    k_total = sum(laws.values())
    # a subsampled Laplace law's loss scale is ~ q t: the grid of subsampling's own interval (the finest if several)
    sub = [key for key in laws if key[0] in ("subsampled_laplace", "symmetric_laplace")]
    if sub:
        from dpkit.accounting.subsampling import subsampled_default_grid
        from dpkit.distributions import Laplace

        grid = min(subsampled_default_grid(Laplace(0, 1), Laplace(float(key[1]), 1), float(key[2]), k_total)
                   for key in sub)
    else:
        grid = default_grid(k_total)
    uppers: list[float] = []
    lowers: list[float] = []
    for direction in (0, 1):
        for pess in (True, False):
            parts = [(_factor(key, direction, grid, pess), k) for key, k in laws.items()]
            composed = compose_many(parts)
            v = composed.epsilon(x) if what == "epsilon" else composed.delta(x)
            (uppers if pess else lowers).append(float(v))
    return max(lowers), max(uppers), "FFT PLD (pessimistic and optimistic on one grid), worst direction"
