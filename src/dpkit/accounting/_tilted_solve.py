r"""epsilon(delta) and delta(epsilon) of compositions of :class:`~dpkit.accounting._tilted_laws.LawSpec` laws,
through the tilted accountant (:mod:`dpkit.accounting._pld_tilted`).

Steps, for one composition (one ordered pair of neighbours; the caller takes the worst over them):

1. coarse factors of each law (2000 points each, on its own grid, cut for the tilts found) give the
   per-step scales and the tilted cumulants K(lambda); the saddle point lambda*
   (:func:`~dpkit.accounting._pld_tilted.saddle_lambda`) steers the tilt and the grid;
2. the grid is ``grid_factor`` times the smallest per-step standard deviation of the loss
   (both discretisations err at second order in grid / scale; Laplace grids are aligned so that the
   atoms +-t lie on it), coarsened where a factor would pass 4e6 points;
3. pessimistic and optimistic factors on that grid, cut for tilts up to 2 lambda* + 2, composed by one
   tilted FFT each;
4. the root is located on suffix sums, then certified: the upper end is a point where the pessimistic
   bound on delta is <= delta, the lower end one where the optimistic bound is > delta (so the exact
   epsilon is above it), each found by stepping outwards from the located root.

Nothing here is trusted for correctness except step 4's certified evaluations
(:meth:`~dpkit.accounting._pld_tilted.Tilted.log_delta_bound`); a poor tilt only widens the interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpkit._math.bisection import bisect_monotone
from dpkit.accounting._pld_tilted import (Cumulants, Factor, Tilted, _exact_moments, compose_tilted, solve_increasing,
                                          saddle_lambda)
from dpkit.accounting._tilted_blocks import laplace_block, wants_block
from dpkit.accounting._tilted_laws import LawSpec

Parts = Sequence[tuple[LawSpec, int]]

#: grid as a fraction of the per-step (untilted) standard deviation of the loss
GRID_FACTOR = 0.01
_MAX_POINTS = 4_000_000


#: points of each law's own grid in the coarse stage (steering needs only each law's scale and cumulants; on mixed
#: 10^6, 2000 points move the saddle tilt by 1e-4 and the per-step scale, hence the grid, by 4e-4 from 5000)
_COARSE_POINTS = 2000
#: the largest tilt the coarse stage first cuts the laws for (raised to 4 lambda while the tilt found passes half
#: of it): a cut for tilts up to 64 made a subsampled law (q = 0.01, sigma = 0.8) 25 times longer than one for 1,
#: which at a common grid of 0.3 times the smallest per-step scale was 9e6 points for 200 such laws
_COARSE_LAM0 = 1.0


def _coarse(parts: Parts, lam_max: float, k_total: int) -> list[tuple[Factor, int]]:
    """Each law's pessimistic factor on its own grid (``_COARSE_POINTS`` points over its span for tilts up to
    ``lam_max``; a Laplace grid aligned to its atoms): the cumulants sum over factors on any grids."""
    out = []
    for spec, k in parts:
        lo, hi, _ = spec.span(lam_max, k_total)
        g = (hi - lo) / _COARSE_POINTS
        if spec.kind == "laplace":
            g = spec.mu / math.ceil(spec.mu / g)
        out.append((spec.factors(g, lam_max, k_total, (True,))[True], k))
    return out


def _step_sd(coarse: Sequence[tuple[Factor, int]]) -> float:
    """The smallest per-step (untilted) standard deviation of the loss among the factors."""
    sds = [math.sqrt(max(_exact_moments([(f, 1)], 0.0)[2], 0.0)) for f, _ in coarse]
    pos = [x for x in sds if x > 0]
    return min(pos) if pos else 1e-2


def _lambda_for_eps(parts: Sequence[tuple[Factor, int]], eps: float, block_loss: float = 0.0,
                    hint: float | None = None) -> tuple[float, float, float]:
    """The tilt whose composed mean K'(lambda) is eps (0 if eps is below the untilted mean), by safeguarded
    Newton steps (the slope of K' is K'') on the exact tilted moments."""
    cum = Cumulants(parts)
    _, m0, v0 = cum(0.0)
    if m0 >= eps:
        return 0.0, float(eps), math.sqrt(max(v0, 0.0))

    def mean(lam: float) -> tuple[float, float]:
        _, m, v = cum(lam)
        return m, v

    lam, _ = solve_increasing(mean, float(eps), 1.0 if hint is None else hint)
    return lam, float(eps), math.sqrt(max(cum(lam)[2], 0.0))


def _cut_range(lam: float) -> tuple[float, float]:
    """The tilts [lo, hi] the fine factors are cut for, around a saddle tilt lam: the FFT runs at half the
    saddle tilt up to it (:func:`compose_parts`), which the fine factors may move by a few per cent from the
    coarse one."""
    return 0.4 * lam, 1.04 * lam + 0.05


_Steered = tuple[float, float, float, float, dict[bool, list[tuple[Factor, int]]], tuple[float, float],
                 list[Factor | None]]


def _steer(parts: Parts, log_delta: float | None, eps: float | None, k_total: int, grid: float | None = None,
           grid_factor: float = 0.01, max_points: int = 0, opt_factors: bool = True) -> _Steered:
    """(lambda*, eps*, sd*, grid, fine pessimistic factors, the tilts they are cut for, the optimistic
    factors on the same grid and cut) for a target delta (or a target eps).

    The optimistic factors come from the same half-cell masses as the pessimistic ones (one evaluation of
    the law's cells for both: the cells are most of a factor's cost), for every law whose optimistic factor
    is its own (None for a Laplace law composed as a block, :func:`_optimistic`), unless ``opt_factors`` is
    False (a pessimistic bound only: None for every law; made later from their cells if asked for after all).

    A coarse pass (:func:`_coarse_stage`) gives the per-step scale and the saddle point roughly; the grid is
    ``grid_factor`` times the per-step scale (Laplace grids aligned to the atoms); then the saddle point is
    recomputed on the fine factors themselves, rebuilding them if the saddle tilt leaves their cut's range."""
    key = (tuple(parts), log_delta, eps, grid, grid_factor, max_points)
    if key in _STEER_CACHE:
        return _STEER_CACHE[key]
    lam, e, sd, sd1 = _coarse_stage(tuple(parts), log_delta, eps, k_total)
    # the saddle tilt found on another grid (the same parts and target) starts the search: it moves little
    hint = _FINE_LAMBDA.get(key[:3], lam)

    def locate(fs: Sequence[tuple[Factor, int]], block: float) -> tuple[float, float, float]:
        if log_delta is not None:
            return saddle_lambda(fs, log_delta, block, hint=hint if hint > 0 else None)
        assert eps is not None  # exactly one of log_delta and eps is given
        return _lambda_for_eps(fs, float(eps), block, hint=hint if hint > 0 else None)

    cut = _cut_range(hint)
    g = _grid(parts, sd1, cut, k_total, grid_factor, max_points) if grid is None else float(grid)
    for _ in range(4):
        both = [(spec.factors(g, cut[1], k_total, (True, False) if opt_factors and not wants_block(spec, k, g)
                              else (True,), lam_lo=cut[0]), k) for spec, k in parts]
        fine = [(fs[True], k) for fs, k in both]
        opt = [fs.get(False) for fs, _ in both]
        built_for = cut
        lam2, e2, sd2 = locate(fine, 0.3 * sd1)
        lam, e, sd = lam2, e2, sd2
        if cut[0] <= 0.5 * lam2 and lam2 <= cut[1]:
            break
        cut = _cut_range(lam2)
    if built_for != cut:  # the last cut was not built (four moves): the optimistic factors are made on it later
        opt = [None] * len(opt)
    out = (lam, e, sd, g, {True: fine}, cut, opt)
    if len(_STEER_CACHE) >= 4:
        _STEER_CACHE.pop(next(iter(_STEER_CACHE)))
    _STEER_CACHE[key] = out
    if len(_FINE_LAMBDA) > 64:
        _FINE_LAMBDA.clear()
    _FINE_LAMBDA[key[:3]] = lam
    return out


_STEER_CACHE: dict[tuple[object, ...], _Steered] = {}
_FINE_LAMBDA: dict[tuple[object, ...], float] = {}


_STAGE_CACHE: dict[tuple[object, ...], tuple[float, float, float, float]] = {}


def _coarse_stage(parts: tuple[tuple[LawSpec, int], ...], log_delta: float | None, eps: float | None,
                  k_total: int) -> tuple[float, float, float, float]:
    """(lambda, eps, sd, per-step sd) from the coarse pass (cached: calibration asks again and again): each law
    on its own grid (:func:`_coarse`), cut for tilts up to ``_COARSE_LAM0``, and again for 4 lambda while the
    tilt found is above half the cut's (the fine factors are cut for the tilt found; steering only)."""
    key = (parts, log_delta, eps)
    if key in _STAGE_CACHE:
        return _STAGE_CACHE[key]
    lam_max = _COARSE_LAM0
    for _ in range(8):
        coarse = _coarse(parts, lam_max, k_total)
        sd1 = _step_sd(coarse)
        if log_delta is not None:
            lam, e, sd = saddle_lambda(coarse, log_delta, 0.3 * sd1)
        else:
            assert eps is not None  # exactly one of log_delta and eps is given
            lam, e, sd = _lambda_for_eps(coarse, float(eps), 0.3 * sd1)
        if lam <= 0.5 * lam_max:
            break
        lam_max = 4.0 * lam
    if len(_STAGE_CACHE) > 64:
        _STAGE_CACHE.clear()
    _STAGE_CACHE[key] = (lam, e, sd, sd1)
    return lam, e, sd, sd1


def _grid(parts: Parts, sd1: float, cut: tuple[float, float], k_total: int, grid_factor: float,
          max_points: int = 0) -> float:
    g = grid_factor * sd1
    for spec, _ in parts:
        lo, hi, _ = spec.span(cut[1], k_total, cut[0])
        g = max(g, (hi - lo) / (max_points or _MAX_POINTS))
    lap = [spec.mu for spec, _ in parts if spec.kind == "laplace"]
    if len(lap) == 1 or (lap and all(t == lap[0] for t in lap)):
        g = lap[0] / math.ceil(lap[0] / g)
    return g


def compose_parts(parts: Parts, *, log_delta: float | None = None, eps: float | None = None,
                  grid: float | None = None, grid_factor: float = GRID_FACTOR,
                  which: tuple[bool, ...] = (True, False), max_points: int = 0,
                  opt_factors: bool = True) -> dict[bool, Tilted]:
    """The tilted compositions (pessimistic and/or optimistic) steered at a target delta or eps (on a grid of
    at most ``max_points`` points per factor, 4e6 by default).

    The FFT runs at a tilt between half the saddle tilt and the saddle tilt itself (where the tilted law's mean
    is the answer), whichever needs the shortest window (:meth:`~dpkit.accounting._pld_tilted.Tilted.log_alias`):
    about (20 - ln delta) / tilt below and, above, set by a Chernoff bound at a tilt lambda' beyond the
    saddle point (any lambda' is valid: the bound is on the truncated factors the FFT composes).  The
    saddle-point approximation can misplace the answer where the tilted law is far from normal (few large
    jumps: small q, small delta); so the root is located and, unless the certified bound there is within
    1e-3 (relative, in delta) of the located value, the composition is redone at the tilt whose mean is
    that root (at most twice)."""
    k_total = sum(k for _, k in parts)
    lam, e_star, sd, g, fine, cut, opt_built = _steer(parts, log_delta, eps, k_total, grid, grid_factor, max_points,
                                                      opt_factors)
    pre_opt: list[Factor | None] | None = opt_built
    if log_delta is None and lam > 0:
        # delta at a given eps: steer the window by the saddle-point estimate of delta
        assert eps is not None  # exactly one of log_delta and eps is given
        K, _, var = _exact_moments(fine[True], lam)
        log_delta = min(-1.0, K - lam * float(eps)
                        - math.log(lam * (lam + 1.0) * math.sqrt(2.0 * math.pi * max(var, 1e-300))))
    out = _compose_at(parts, fine, lam, e_star, log_delta, g, k_total, which, cut, pre_opt)
    for _ in range(2):
        if log_delta is None or eps is not None:
            return out
        t = out[True] if True in out else out[False]
        e0 = _approx_root(t, log_delta)
        if e0 <= 0.0 or abs(t.log_delta_bound(e0) - t.approx_log_delta(e0)) <= 1e-3:
            return out  # the error terms are negligible at the root: the tilt is good enough
        lam2, _, _ = _lambda_for_eps(fine[True], e0)
        if abs(lam2 - lam) <= 0.02 * lam and abs(e0 - e_star) <= 0.1 * max(sd, g):
            return out  # the same tilt and window again would not help
        lam, e_star = lam2, e0
        if not (cut[0] <= 0.5 * lam and lam <= cut[1]):
            cut = _cut_range(lam)
            fine = {True: [(spec.factors(g, cut[1], k_total, (True,), lam_lo=cut[0])[True], k) for spec, k in parts]}
            pre_opt = None
        out = _compose_at(parts, fine, lam, e_star, log_delta, g, k_total, which, cut, pre_opt)
    return out


def _compose_at(parts: Parts, fine: dict[bool, list[tuple[Factor, int]]], lam: float, e_star: float,
                log_delta: float | None, g: float, k_total: int, which: tuple[bool, ...],
                cut: tuple[float, float], pre_opt: Sequence[Factor | None] | None = None) -> dict[bool, Tilted]:
    out = {}
    lam_min = max(0.5 * lam, cut[0])
    if True in which:
        out[True] = compose_tilted(fine[True], lam, center=e_star, log_delta=log_delta, lam_min=lam_min)
    if False in which:
        pre = pre_opt if pre_opt is not None else [None] * len(parts)
        opt = [_optimistic(spec, k, g, lam, cut, k_total, f) for (spec, k), f in zip(parts, pre)]
        out[False] = compose_tilted(opt, lam, center=e_star, log_delta=log_delta, lam_min=lam_min)
    return out


def _optimistic(spec: LawSpec, k: int, g: float, lam: float, cut: tuple[float, float],
                k_total: int, built: Factor | None = None) -> tuple[Factor, int]:
    """The optimistic factor of ``k`` copies of a law: a Laplace law off the grid as one block composed on its
    own aligned grid first (:mod:`dpkit.accounting._tilted_blocks`: discretised once per law, not per copy);
    ``built``: the law's optimistic factor on ``g`` and ``cut``, if :func:`_steer` made it already."""
    if built is not None:
        return built, k
    if wants_block(spec, k, g):
        block = laplace_block(spec, k, g, lam, cut[0], cut[1], k_total)
        if block is not None:
            return block, 1
    return spec.factors(g, cut[1], k_total, (False,), lam_lo=cut[0])[False], k


def _approx_root(t: Tilted, log_delta: float) -> float:
    """The smallest point of the window ``[max(0, lo), hi]`` where the approximate delta (no error terms) is
    at most ``e^log_delta``, to 1e-14 relative (or 1e-300 absolute), in at most 200 evaluations.

    :func:`dpkit._math.bisection.bisect_monotone` on the upper side: the point returned meets the target
    (or is the window's top), the side from which :func:`_step_out` starts certifying an upper bound."""
    lo_w, hi_w = t.window
    return bisect_monotone(lambda e: t.approx_log_delta(e) <= log_delta, max(0.0, lo_w), hi_w,
                           side="upper", rtol=1e-14, atol=1e-300, max_iter=200)


def epsilon_upper(t: Tilted, log_delta: float) -> float:
    """A point eps >= 0 where the certified pessimistic bound gives delta(eps) <= delta (inf if none)."""
    if t.log_delta_bound(0.0) <= log_delta:
        return 0.0
    if t.infinity_mass > 0 and math.log(t.infinity_mass) > log_delta:
        return math.inf
    top = t.window[1]
    if t.approx_log_delta(top) > log_delta:  # root beyond the window: step out on the certified bound
        e = top
        for _ in range(200):
            if t.log_delta_bound(e) <= log_delta:
                return min(e, t.max_loss) if t.max_loss < math.inf else e
            e = e + max(1.0, abs(e)) * 0.05
        return t.max_loss if (math.isfinite(t.max_loss) and t.infinity_mass <= math.exp(log_delta)) else math.inf
    e0 = _approx_root(t, log_delta)  # in [the window's bottom, top]
    e = _step_out(t, e0, log_delta, +1)
    if math.isfinite(t.max_loss) and t.infinity_mass <= math.exp(log_delta):
        e = min(e, t.max_loss)  # delta(max loss) = P(S = inf) exactly
    return e


def epsilon_lower(t: Tilted, log_delta: float) -> float:
    """A point eps where the certified optimistic bound gives delta(eps) > delta (0 if none), so the
    exact epsilon(delta) is at least it."""
    if t.infinity_mass > 0 and math.log(t.infinity_mass) > log_delta:
        return math.inf
    lo_w, hi_w = t.window
    if t.approx_log_delta(max(0.0, lo_w)) <= log_delta:
        return 0.0
    e0 = _approx_root(t, log_delta)
    return max(0.0, _step_out(t, e0, log_delta, -1))


def _step_out(t: Tilted, e0: float, log_delta: float, side: int) -> float:
    """From the located root e0, the nearest point found (stepping outwards, side +1 up, -1 down) where the
    certified bound is on the right side of delta: <= delta (pessimistic, up) or > delta (optimistic,
    down).  The first step is a Newton step on ln delta (slope about -(lambda + 1)); then doubling."""
    def ok(e: float) -> bool:
        b = t.log_delta_bound(e)
        return b <= log_delta if side > 0 else b > log_delta

    if ok(e0):
        return e0
    b0 = t.log_delta_bound(e0)
    step = max(abs(b0 - log_delta) / (t.lam + 1.0) * 1.25, 1e-13 * max(1.0, abs(e0)))
    for _ in range(200):
        e = e0 + side * step
        if side < 0 and e <= 0.0:
            return 0.0
        if ok(e):
            return e
        step *= 2.0
    return math.inf if side > 0 else 0.0  # pragma: no cover


#: the interval width epsilon_bounds aims at (relative to epsilon), and its first, coarse grid factor
TARGET_WIDTH = 5e-5
_ROUGH = 0.04


#: how much coarser than the first direction's grid the others are first checked on (their pessimistic delta at
#: the upper end: any grid gives a certified bound, and a direction well below the worst passes on a coarse one)
_CHECK_COARSER = 4.0


def epsilon_bounds(directions: Sequence[Parts], delta: float, *, grid: float | None = None,
                   grid_factor: float | None = None, target_width: float = TARGET_WIDTH) -> tuple[float, float]:
    """[lower, upper] containing epsilon(delta) of the worst of the given compositions.

    The direction whose saddle-point estimate of epsilon (from the coarse steering stage, :func:`_coarse_stage`)
    is largest goes first: its pessimistic epsilon on a coarse grid (``_ROUGH`` times the per-step scale) and its
    optimistic epsilon on the same grid give a first width; both discretisations err at second order, so the
    grid is then refined by about (target / width)^(1/2) unless the width already meets ``target_width`` (only
    the part of the width between the two compositions' located roots counts: the certified error terms do not
    shrink with the grid).  Every other direction only has to be shown not to exceed the upper end: its
    pessimistic bound on delta at that upper end on a grid ``_CHECK_COARSER`` times coarser, then on the first
    direction's grid, and if neither is enough its own pessimistic epsilon, which raises the upper end where it
    is larger (and that direction's optimistic epsilon then raises the lower end where it is larger).  Each
    direction's lower end is a lower end for the maximum over directions, and the order only decides how much
    is computed, never what is certified (the order by the directions' own rough epsilons cost a full
    pessimistic composition of every direction: 2.7 of 11 s on mixed 10^6, whose add direction is 7e-4 below)."""
    ld = math.log(delta)
    gf0 = _ROUGH if grid_factor is None else grid_factor
    order = list(range(len(directions)))
    if len(directions) > 1 and grid is None:
        est = [_estimate(p, ld) for p in directions]
        order.sort(key=lambda i: -est[i])
    first = directions[order[0]]
    t_pess = compose_parts(first, log_delta=ld, grid=grid, grid_factor=gf0, which=(True,))[True]
    upper = epsilon_upper(t_pess, ld)
    t_opt = compose_parts(first, log_delta=ld, grid=grid, grid_factor=gf0, which=(False,))[False]
    lower = min(epsilon_lower(t_opt, ld), upper)
    width = (upper - lower) / upper if upper > 0 else 0.0
    disc = _disc_width(t_pess, t_opt, ld, upper)
    gf = gf0
    for _ in range(2):
        if not (grid is None and grid_factor is None and math.isfinite(upper) and width > target_width):
            break
        # only the discretisation's part of the width (between the two located roots) shrinks with the
        # grid, as its square; the rest (the certified error terms: at sigma = 1e4 the masses' rounding,
        # relative to P(S > eps) >> delta) does not, so the grid is refined only as far as that part matters
        fixed = max(width - disc, 0.0)
        goal = 0.8 * max(target_width - fixed, 0.3 * fixed, 0.25 * target_width)
        if disc <= 1.25 * goal:
            break
        gf = gf * min(1.0, max(1.0 / 16.0, (goal / disc) ** 0.5))
        ts = compose_parts(first, log_delta=ld, grid_factor=gf)
        upper = min(upper, epsilon_upper(ts[True], ld))
        lower = max(lower, min(epsilon_lower(ts[False], ld), upper))
        width = (upper - lower) / upper if upper > 0 else 0.0
        disc = _disc_width(ts[True], ts[False], ld, upper)
    for i in order[1:]:
        if not math.isfinite(upper):
            break
        # its pessimistic delta at the upper end, on a coarser grid first, then on the grid the first direction
        # ended on (where two directions are nearly equal, sigma = 1e4, the rough grid's bound was too loose)
        if grid is None and compose_parts(directions[i], log_delta=ld, grid_factor=_CHECK_COARSER * gf, which=(True,),
                                          opt_factors=False)[True].log_delta_bound(upper) <= ld:
            continue
        t_own = compose_parts(directions[i], log_delta=ld, grid=grid, grid_factor=gf, which=(True,),
                              opt_factors=False)[True]
        if t_own.log_delta_bound(upper) <= ld:
            continue
        own = epsilon_upper(t_own, ld)
        if own > upper:  # this direction is the worst after all: its lower end may be higher too
            upper = own
            t_low = compose_parts(directions[i], log_delta=ld, grid=grid, grid_factor=gf, which=(False,))[False]
            lower = max(lower, min(epsilon_lower(t_low, ld), upper))
    return lower, upper


def _estimate(parts: Parts, log_delta: float) -> float:
    """The saddle-point estimate of a direction's epsilon(delta) from the coarse stage (which steering then
    reuses): only orders the directions."""
    return _coarse_stage(tuple(parts), log_delta, None, sum(k for _, k in parts))[1]


def _disc_width(pess: Tilted, opt: Tilted, log_delta: float, upper: float) -> float:
    """The discretisation's part of the relative width: the distance between the roots of the two
    compositions' delta (without error terms), over ``upper``."""
    if not (math.isfinite(upper) and upper > 0):
        return math.inf

    return max(_approx_root(pess, log_delta) - _approx_root(opt, log_delta), 0.0) / upper


def epsilon_upper_only(directions: Sequence[Parts], delta: float, *, grid: float | None = None,
                       grid_factor: float = GRID_FACTOR) -> float:
    """The certified upper end alone (pessimistic laws only), what calibration needs: the first direction
    in full, each other one only checked (its pessimistic delta at that epsilon) unless the check fails."""
    ld = math.log(delta)
    upper = epsilon_upper(compose_parts(directions[0], log_delta=ld, grid=grid, grid_factor=grid_factor,
                                        which=(True,), opt_factors=False)[True], ld)
    for p in directions[1:]:
        if not math.isfinite(upper):
            break
        t = compose_parts(p, eps=upper, grid=grid, grid_factor=grid_factor, which=(True,), opt_factors=False)[True]
        if t.log_delta_bound(upper) <= ld:
            continue
        upper = max(upper, epsilon_upper(compose_parts(p, log_delta=ld, grid=grid, grid_factor=grid_factor,
                                                       which=(True,), opt_factors=False)[True], ld))
    return upper


def log_delta_upper(directions: Sequence[Parts], epsilon: float, *, grid: float | None = None,
                    grid_factor: float = GRID_FACTOR) -> float:
    """ln of the certified (pessimistic) upper bound on delta(epsilon), the worst of the directions: what
    calibration needs (smooth in the mechanism's parameters on a fixed grid, and no root in epsilon)."""
    upper = -math.inf
    for parts in directions:
        max_loss = float(sum(k * s.max_loss for s, k in parts))
        if epsilon >= max_loss:
            continue
        t = compose_parts(parts, eps=epsilon, grid=grid, grid_factor=grid_factor, which=(True,),
                          opt_factors=False)[True]
        upper = max(upper, t.log_delta_bound(epsilon))
    return upper


#: the width of ln delta that delta_bounds aims at (relative width of delta)
DELTA_TARGET_WIDTH = 1e-5
#: the most points per factor delta_bounds refines to
_REFINE_POINTS = 1_500_000


def delta_bounds(directions: Sequence[Parts], epsilon: float, *, grid: float | None = None,
                 grid_factor: float | None = None, target_width: float = DELTA_TARGET_WIDTH
                 ) -> tuple[float, float]:
    """[lower, upper] containing delta(epsilon) of the worst of the given compositions (in linear scale;
    see :func:`log_delta_bounds` for values below 1e-308)."""
    lo, hi = log_delta_bounds(directions, epsilon, grid=grid, grid_factor=grid_factor, target_width=target_width)
    return math.exp(lo), min(1.0, math.exp(hi))


def log_delta_bounds(directions: Sequence[Parts], epsilon: float, *, grid: float | None = None,
                     grid_factor: float | None = None, target_width: float = DELTA_TARGET_WIDTH
                     ) -> tuple[float, float]:
    """[ln lower, ln upper] containing ln delta(epsilon) of the worst of the given compositions.

    On ``GRID_FACTOR`` times the per-step scale first; unless ``grid`` or ``grid_factor`` is given, the grid
    is then refined (at most twice, as :func:`epsilon_bounds` does) until the width of ln delta is about
    ``target_width``: both discretisations err at second order, so by about (target / width)^(1/2), counting
    only the part of the width between the two compositions' values without error terms.  Far in the tail
    the tilt grows, and the grid a relative width needs with it (1e-6 at delta = 1e-144 on the 16-fold
    Gaussian took a grid of 5e-5 of its scale)."""
    gf = GRID_FACTOR if grid_factor is None else grid_factor
    adaptive = grid is None and grid_factor is None
    live = []
    for parts in directions:
        max_loss = float(sum(k * s.max_loss for s, k in parts))
        if epsilon < max_loss:  # else delta = P(S = inf) = 0 for these laws (no mass at +inf)
            live.append(parts)
    if not live:
        return -math.inf, -math.inf

    def one(parts: Parts, gfac: float, cap: int = 0) -> tuple[float, float, float, float, int]:
        ts = compose_parts(parts, eps=epsilon, grid=grid, grid_factor=gfac, max_points=cap)
        lo = ts[False].log_delta_bound(epsilon)
        hi = ts[True].log_delta_bound(epsilon)
        disc = max(ts[True].approx_log_delta(epsilon) - ts[False].approx_log_delta(epsilon), 0.0)
        return min(lo, hi), hi, disc, ts[True].grid, max(t.out.size for t in ts.values())

    res = [one(p, gf) for p in live]
    for _ in range(2):
        lower, upper = max(r[0] for r in res), max(r[1] for r in res)
        width = upper - lower
        if not (adaptive and math.isfinite(upper) and math.isfinite(lower) and width > target_width):
            break
        worst = max(range(len(live)), key=lambda i: res[i][1])
        disc = res[worst][2]
        fixed = max(width - disc, 0.0)
        goal = 0.8 * max(target_width - fixed, 0.3 * fixed, 0.25 * target_width)
        if disc <= 1.25 * goal:
            break
        factor = min(1.0, max(1.0 / 16.0, (goal / disc) ** 0.5))
        factor = max(factor, res[worst][4] / _REFINE_POINTS)  # the FFT window grows as the grid shrinks
        if factor >= 0.95:
            break
        gf = gf * factor
        # every direction that can still be the largest is recomputed on the finer grid, with at most
        # _REFINE_POINTS points per factor and about as many in the FFT's window (q = 1e-3, sigma = 1.1,
        # 10^5 steps needs 30 times the points for 1e-5 at delta = 1e-17); where that binds, the interval
        # stays wider
        new = [one(p, gf, _REFINE_POINTS) if r[1] > lower else r for p, r in zip(live, res)]
        if all(n[3] >= r[3] * 0.999 for n, r in zip(new, res) if n is not r):
            break  # the cap held the grid: nothing gained
        res = [n if n[1] - n[0] <= r[1] - r[0] else r for n, r in zip(new, res)]
    lower, upper = max(r[0] for r in res), max(r[1] for r in res)
    return min(lower, upper), upper


def clear_caches() -> None:
    """Forget every cached factor, half-cell mass and steering result (benchmarks time cold calls)."""
    from dpkit.accounting import _tilted_laws

    _STAGE_CACHE.clear()
    _STEER_CACHE.clear()
    _FINE_LAMBDA.clear()
    _tilted_laws._FACTOR_CACHE.clear()
    _tilted_laws._CELLS_CACHE.clear()


def grid_for(directions: Sequence[Parts], delta: float, grid_factor: float) -> float:
    """The grid ``grid_factor`` times the smallest per-step scale over the directions (to hold fixed
    while a calibration varies a parameter)."""
    ld = math.log(delta)
    gs = []
    for parts in directions:
        k_total = sum(k for _, k in parts)
        lam, _, _, sd1 = _coarse_stage(tuple(parts), ld, None, k_total)
        gs.append(_grid(parts, sd1, _cut_range(lam), k_total, grid_factor))
    return min(gs)
