r"""Accounting for DP-SGD: epsilon and delta of T subsampled Gaussian steps, schedules, and calibration.

A DP-SGD step clips each example's gradient to l2 norm C, sums the gradients of a random batch and adds
N(0, sigma^2 C^2 I): a subsampled Gaussian mechanism with noise multiplier ``sigma``.  Its privacy:

===========================  ===============  =================================================  ===============
sampling                     neighbouring     pair(s) composed                                    answer is
===========================  ===============  =================================================  ===============
Poisson, rate q              add/remove       (q N(1,s^2) + (1-q) N(0,s^2), N(0,s^2)) and its     exact (interval)
                                              reverse, s = sigma (Zhu, Dong, Wang 2022, Thm 11)
fixed-size batch m of n,     substitution     symmetric completion of (q N(2,s^2) + (1-q) N(0,    exact (interval)
q = m/n                                       s^2), N(0,s^2)) (ZDW 2022 Thm 10; Balle, Barthe,
                                              Gaboardi 2018, arXiv 1807.01647, Thm 9)
Poisson, rate q              substitution     the same symmetric pair                             upper bound
===========================  ===============  =================================================  ===============

(details and proofs: :mod:`dpkit.accounting.subsampling`; substitution replaces one example, so its
sensitivity is 2C).  Fixed-size batches with add/remove neighbours are refused: a batch of m from a data
set whose size changes is not one mechanism on both neighbours.

Every epsilon and delta here is a certified interval [lower, upper] containing the exact value for the
pair(s) composed: the upper end from the pessimistic discretisation, the lower from the optimistic one,
each composed in a tilted frame (:mod:`dpkit.accounting._pld_tilted`) whose error terms are all
relative, so delta may be as small as 1e-300.  At q = 1 (full batch) the composition is one Gaussian with
mu = sqrt(sum_t 1 / sigma_t^2) (:mod:`dpkit.accounting.gaussian_profile`).  Decisions use the upper end.

Calibration (:func:`calibrate_sigma`, :func:`calibrate_sampling_rate`, :func:`calibrate_steps`) returns
the most private-budget-efficient parameter whose certified upper epsilon meets the target, with the
evidence: the interval at the answer and, one step (1e-6 relative, or one step of T) beyond it, an upper
end that does not meet the target.

Fractional-order RDP for the Poisson subsampled Gaussian (Mironov, Talwar, Zhang 2019) is in
:func:`dpkit.accounting.sampled_gaussian.sampled_gaussian_rdp`; :func:`dpsgd_rdp_epsilon` converts it
beside the PLD answer, as Opacus and TF Privacy report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from dpkit._math import Estimate, check_delta, check_epsilon, check_positive
from dpkit._math.bisection import bisect_monotone
from dpkit.accounting import _tilted_solve as _solve
from dpkit.accounting._tilted_laws import LawSpec
from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval, log_delta_bounds
from dpkit.accounting.pld import Interval
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

if TYPE_CHECKING:
    from dpkit.guarantees import RenyiDP

__all__ = ["Calibration", "DPSGDInterval", "DPSGDStep", "calibrate_sampling_rate", "calibrate_sigma",
           "calibrate_steps", "dpsgd_delta", "dpsgd_epsilon", "dpsgd_epsilon_curve", "dpsgd_rdp_epsilon"]

Sampling = Literal["poisson", "without_replacement"]
Neighboring = Literal["add_remove", "substitute"]

_METHODS = {
    ("poisson", "add_remove"): "dominating pairs of the Poisson subsampled Gaussian, add/remove (Zhu, Dong, Wang "
                               "2022, arXiv 2106.08567, Thm 11), composed by tilted PLD",
    ("without_replacement", "substitute"): "dominating pair of the subsampled Gaussian, batches of fixed size, "
                                           "substitution (ZDW 2022 Thm 10; Balle, Barthe, Gaboardi 2018, Thm 9), "
                                           "composed by tilted PLD",
    ("poisson", "substitute"): "upper bound: Poisson subsampling with substitution by the symmetric mixture pair "
                               "(not tight; see dpkit.accounting.subsampling), composed by tilted PLD",
}


def _check_sigma(sigma: object) -> float:
    return check_positive("sigma", sigma)


def _check_rate(q: object) -> float:
    v = check_positive("sampling_rate", q)
    if v > 1.0:
        raise InvalidArgumentError(f"sampling_rate must be in (0, 1]; got {v}.")
    return v


def _check_steps(t: object, name: str = "steps") -> int:
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        if isinstance(t, float) and t.is_integer() and t >= 1:
            return int(t)
        raise InvalidArgumentError(f"{name} must be an integer >= 1; got {t!r}.")
    return int(t)


def check_scheme(sampling: object, neighboring: object) -> tuple[Sampling, Neighboring]:
    s = str(getattr(sampling, "value", sampling))
    n = str(getattr(neighboring, "value", neighboring))
    if s not in ("poisson", "without_replacement"):
        raise InvalidArgumentError(f"sampling must be 'poisson' or 'without_replacement'; got {sampling!r}.")
    if n not in ("add_remove", "substitute"):
        raise InvalidArgumentError(f"neighboring must be 'add_remove' or 'substitute'; got {neighboring!r}.")
    if (s, n) == ("without_replacement", "add_remove"):
        raise InvalidArgumentError(
            "fixed-size batches (sampling without replacement) are accounted for with substitution "
            "neighbours only; use neighboring='substitute' or sampling='poisson'."
        )
    return cast(Sampling, s), cast(Neighboring, n)  # both checked against the literals above


@dataclass(frozen=True, slots=True, kw_only=True)
class DPSGDStep:
    """``steps`` DP-SGD steps with noise multiplier ``sigma`` and sampling rate ``sampling_rate``: an item
    an :class:`~dpkit.accounting.Accountant` can spend and a schedule is made of.

    >>> DPSGDStep(sigma=1.1, sampling_rate=0.01, steps=100).name
    'DP-SGD(sigma=1.1, q=0.01, steps=100)'
    """

    sigma: float
    sampling_rate: float
    steps: int = 1
    sampling: Sampling = "poisson"
    neighboring: Neighboring = "add_remove"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _check_sigma(self.sigma))
        object.__setattr__(self, "sampling_rate", _check_rate(self.sampling_rate))
        object.__setattr__(self, "steps", _check_steps(self.steps))
        check_scheme(self.sampling, self.neighboring)

    @property
    def name(self) -> str:
        return f"DP-SGD(sigma={self.sigma:g}, q={self.sampling_rate:g}, steps={self.steps})"

    def epsilon(self, delta: float) -> DPSGDInterval:
        """epsilon(delta) of these steps alone (:func:`dpsgd_epsilon`)."""
        return dpsgd_epsilon(delta=delta, schedule=[self])

    def rdp(self) -> RenyiDP:
        """The RDP curve of these steps (Poisson, add/remove only: MTZ 2019, fractional orders)."""
        from dpkit.accounting.sampled_gaussian import FRACTIONAL_ORDERS, sampled_gaussian_rdp
        from dpkit.guarantees import RenyiDP

        if (self.sampling, self.neighboring) != ("poisson", "add_remove"):
            from dpkit.errors import UnsupportedError

            raise UnsupportedError("an RDP curve is implemented for Poisson sampling with add/remove neighbours only.")
        one = sampled_gaussian_rdp(sigma=self.sigma, sampling_rate=self.sampling_rate, orders=FRACTIONAL_ORDERS)
        orders = _finite_orders(one)
        return RenyiDP(orders=list(orders), epsilons=[self.steps * float(one.epsilon(a)) * (1 + 1e-15)
                                                      for a in orders])


@dataclass(frozen=True, slots=True)
class DPSGDInterval(Interval):
    """[lower, upper] containing the exact epsilon (or delta) of the pair(s) in ``method``; decisions use
    ``upper``.  :meth:`upper_bound` and :meth:`lower_bound` give the ends as labelled
    :class:`~dpkit._math.Estimate` values."""

    method: str = ""

    def upper_bound(self) -> Estimate:
        return Estimate(self.upper, kind="upper", error=self.width, method=self.method)

    def lower_bound(self) -> Estimate:
        return Estimate(self.lower, kind="lower", error=self.width, method=self.method)


def _finite_orders(curve: RenyiDP) -> tuple[float, ...]:
    # sampled_gaussian_rdp builds its curve from a finite order list, so ``orders`` is never None
    return cast("tuple[float, ...]", curve.orders)


def _schedule(sigma: object, sampling_rate: object, steps: object, schedule: Sequence[DPSGDStep] | None,
              sampling: object, neighboring: object) -> list[DPSGDStep]:
    if schedule is not None:
        if sigma is not None or sampling_rate is not None or steps is not None:
            raise InvalidArgumentError(
                "give either schedule=[DPSGDStep(...), ...] or sigma, sampling_rate and steps, not both."
            )
        phases = list(schedule)
        if not phases:
            raise InvalidArgumentError("schedule is empty; give at least one DPSGDStep.")
        for p in phases:
            if not isinstance(p, DPSGDStep):
                raise ArgumentTypeError(f"schedule entries must be DPSGDStep; got {type(p).__name__}.")
        kinds = {(p.sampling, p.neighboring) for p in phases}
        if len(kinds) > 1:
            raise InvalidArgumentError(
                "every phase of a schedule must use the same sampling and neighbouring relation."
            )
        return phases
    if sigma is None or sampling_rate is None or steps is None:
        raise InvalidArgumentError("give sigma, sampling_rate and steps (or a schedule).")
    s, n = check_scheme(sampling, neighboring)
    # sigma, sampling_rate and steps are checked (and converted) by DPSGDStep.__post_init__
    return [DPSGDStep(sigma=cast(float, sigma), sampling_rate=cast(float, sampling_rate), steps=cast(int, steps),
                      sampling=s, neighboring=n)]


def _directions(phases: list[DPSGDStep]) -> tuple[list[list[tuple[LawSpec, int]]] | None, float | None, str]:
    """(directions of LawSpec compositions, or None with the Gaussian mu when every q is 1; method)."""
    s, n = phases[0].sampling, phases[0].neighboring
    method = _METHODS[(s, n)]
    shift = 2.0 if n == "substitute" else 1.0
    merged: dict[tuple[float, float], int] = {}
    for p in phases:
        key = (shift / p.sigma, p.sampling_rate)
        merged[key] = merged.get(key, 0) + p.steps
    if all(q == 1.0 for _, q in merged):
        mu = math.sqrt(sum(k * m * m for (m, _), k in merged.items())) * (1.0 + 4.0 * 2.0**-53)
        if not math.isfinite(mu):
            raise InvalidArgumentError("sigma is too small: mu = sqrt(steps) / sigma overflows a double.")
        return None, mu, "closed form: full-batch steps compose to one Gaussian (Dong, Roth, Su 2022, Cor 2; "\
                         "Balle & Wang 2018, Thm 8)"
    if n == "substitute":
        return [[(LawSpec("symmetric", m, q), k) for (m, q), k in merged.items()]], None, method
    remove = [(LawSpec("remove", m, q), k) for (m, q), k in merged.items()]
    add = [(LawSpec("add" if q < 1.0 else "remove", m, q), k) for (m, q), k in merged.items()]
    return [remove, add], None, method


def dpsgd_epsilon(*, delta: float, sigma: float | None = None, sampling_rate: float | None = None,
                  steps: int | None = None, schedule: Sequence[DPSGDStep] | None = None,
                  sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove") -> DPSGDInterval:
    r"""[lower, upper] containing epsilon(delta) after ``steps`` DP-SGD steps (or a ``schedule``).

    Parameters
    ----------
    delta : float in (0, 1), as small as 1e-300
    sigma : float > 0: the noise multiplier (noise standard deviation / clipping norm)
    sampling_rate : float in (0, 1]: Poisson rate q, or batch size / data set size for fixed-size batches
    steps : int >= 1
    schedule : sequence of :class:`DPSGDStep` (instead of sigma, sampling_rate, steps): phases whose sigma
        and q may differ (same sampling and neighbouring)
    sampling : "poisson" or "without_replacement" (fixed-size batches)
    neighboring : "add_remove" or "substitute"

    Returns
    -------
    DPSGDInterval
        Certified [lower, upper] (about 5e-5 of epsilon wide); ``method`` names the pair(s) and says
        whether they are exact or a bound for the scheme.

    Raises
    ------
    InvalidArgumentError
        A parameter outside its domain (NaN and inf included), or an unsupported scheme.

    References
    ----------
    Zhu, Dong, Wang 2022, arXiv 2106.08567, Thm 10, 11; Koskela, Jälkö, Honkela 2020, arXiv 2006.07134
    (PLD accounting of the subsampled Gaussian); Gopi, Lee, Wutschitz 2021, arXiv 2106.02848 (error bounds
    for FFT accounting); Doroshenko et al. 2022, arXiv 2207.04380 (connect the dots).

    Examples
    --------
    >>> iv = dpsgd_epsilon(sigma=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    >>> iv.lower <= 1.82823 <= iv.upper and iv.width < 1e-4 * iv.upper
    True
    """
    d = check_delta(delta, open_interval=True)
    phases = _schedule(sigma, sampling_rate, steps, schedule, sampling, neighboring)
    dirs, mu, method = _directions(phases)
    if dirs is None:
        lo, hi = gaussian_epsilon_interval(float(cast(float, mu)), d)  # mu is set when dirs is None
        return DPSGDInterval(lo, hi, method)
    lo, hi = _solve.epsilon_bounds(dirs, d)
    return DPSGDInterval(lo, hi, method)


def dpsgd_delta(*, epsilon: float, sigma: float | None = None, sampling_rate: float | None = None,
                steps: int | None = None, schedule: Sequence[DPSGDStep] | None = None,
                sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove") -> DPSGDInterval:
    """[lower, upper] containing delta(epsilon) after the steps (arguments as :func:`dpsgd_epsilon`);
    relatively accurate however small delta is (values below 1e-308 underflow to 0.0: see
    :func:`dpsgd_log_delta`).

    At the ends of the certified epsilon interval for delta = 1e-5, delta lies on either side of 1e-5:

    >>> eps = dpsgd_epsilon(sigma=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    >>> dpsgd_delta(sigma=1.0, sampling_rate=0.01, steps=1000, epsilon=eps.upper).upper <= 1e-5
    True
    >>> dpsgd_delta(sigma=1.0, sampling_rate=0.01, steps=1000, epsilon=eps.lower).lower >= 1e-5
    True
    """
    lo, hi, method = _log_delta(epsilon, sigma, sampling_rate, steps, schedule, sampling, neighboring)
    return DPSGDInterval(math.exp(lo), min(1.0, math.exp(hi)), method)


def dpsgd_log_delta(*, epsilon: float, sigma: float | None = None, sampling_rate: float | None = None,
                    steps: int | None = None, schedule: Sequence[DPSGDStep] | None = None,
                    sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove") -> DPSGDInterval:
    """[ln lower, ln upper] of delta(epsilon): for deltas below 1e-308."""
    lo, hi, method = _log_delta(epsilon, sigma, sampling_rate, steps, schedule, sampling, neighboring)
    return DPSGDInterval(lo, hi, method)


def _log_delta(epsilon: float, sigma: float | None, sampling_rate: float | None, steps: int | None,
               schedule: Sequence[DPSGDStep] | None, sampling: Sampling, neighboring: Neighboring
               ) -> tuple[float, float, str]:
    e = check_epsilon(epsilon)
    phases = _schedule(sigma, sampling_rate, steps, schedule, sampling, neighboring)
    dirs, mu, method = _directions(phases)
    if dirs is None:
        lo, hi = log_delta_bounds(float(cast(float, mu)), e)  # mu is set when dirs is None
        return lo, hi, method
    lo, hi = _solve.log_delta_bounds(dirs, e)
    return lo, hi, method


def dpsgd_rdp_epsilon(*, delta: float, sigma: float, sampling_rate: float, steps: int,
                      orders: Sequence[float] | None = None) -> Estimate:
    """epsilon(delta) by RDP of the Poisson subsampled Gaussian at fractional orders (Mironov, Talwar,
    Zhang 2019) and the conversion of Canonne, Kamath, Steinke 2020 (Prop 12; Balle et al. 2020, Thm 21):
    what Opacus's and TF Privacy's RDP accountants report (theirs over their own order lists).  An upper
    bound, looser than :func:`dpsgd_epsilon`.

    >>> 1.8282 < float(dpsgd_rdp_epsilon(delta=1e-5, sigma=1.0, sampling_rate=0.01, steps=1000)) < 2.2
    True
    """
    from dpkit.accounting.sampled_gaussian import FRACTIONAL_ORDERS, sampled_gaussian_rdp
    from dpkit.guarantees import RenyiDP
    from dpkit.guarantees.conversions import rdp_to_approx_dp

    d = check_delta(delta, open_interval=True)
    t = _check_steps(steps)
    one = sampled_gaussian_rdp(sigma=sigma, sampling_rate=sampling_rate,
                               orders=FRACTIONAL_ORDERS if orders is None else orders)
    orders_used = _finite_orders(one)
    curve = RenyiDP(orders=list(orders_used), epsilons=[t * float(one.epsilon(a)) * (1 + 1e-15) for a in orders_used])
    # conversions return an ApproxDP whose epsilon is an Estimate naming its method (see ApproxDP)
    eps = cast(Estimate, rdp_to_approx_dp(curve, delta=d).epsilon)
    return Estimate(
        float(eps), kind="upper", method=f"RDP (MTZ 2019, fractional orders) + CKS conversion; {eps.method}"
    )


def dpsgd_epsilon_curve(*, delta: float, sigma: float, sampling_rate: float, steps: Sequence[int],
                        sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove"
                        ) -> list[tuple[int, DPSGDInterval]]:
    """epsilon(delta) after each number of steps in ``steps`` (for a plot of epsilon over training)."""
    return [(int(t), dpsgd_epsilon(delta=delta, sigma=sigma, sampling_rate=sampling_rate, steps=int(t),
                                   sampling=sampling, neighboring=neighboring)) for t in steps]


# ---- calibration --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Calibration:
    """The calibrated ``parameter`` (``value``) with its evidence: ``interval`` at ``value`` (its upper end
    meets ``target_epsilon``) and ``beyond``, the upper end one step past it (``beyond_value``: 1e-6
    relative, or one more step), which does not."""

    parameter: str
    value: float
    interval: DPSGDInterval
    beyond_value: float
    beyond_upper: float
    target_epsilon: float
    delta: float


def _upper_at(phase: DPSGDStep, delta: float, grid: float | None) -> float:
    dirs, mu, _ = _directions([phase])
    if dirs is None:
        return gaussian_epsilon_interval(float(cast(float, mu)), delta)[1]  # mu is set when dirs is None
    return _solve.epsilon_upper_only(dirs, delta, grid=grid)


def _check_target(epsilon: object, delta: object) -> tuple[float, float]:
    e = check_positive("epsilon", epsilon)
    d = check_delta(delta, open_interval=True)
    return e, d


def _solve_monotone(f: Callable[[float], float], lo: float, hi: float, target: float, increasing: bool,
                    rel: float = 1e-6
                    ) -> float:
    """The point x of [lo, hi] at the boundary of {f(x) <= target} to relative ``rel``, by the Illinois
    method on ln f in ln x (bisection when it stalls); f(lo), f(hi) bracket the target.  Returns the end
    of the bracket on the feasible side."""
    feas, infeas = (lo, hi) if increasing else (hi, lo)  # f(feas) <= target < f(infeas)
    f_feas, f_inf = f(feas), f(infeas)
    side = 0
    for _ in range(60):
        if abs(infeas - feas) <= rel * 0.25 * abs(feas):
            break
        a, b = math.log(feas), math.log(infeas)
        fa, fb = math.log(max(f_feas, 1e-300)), math.log(max(f_inf, 1e-300)) if math.isfinite(f_inf) else None
        lt = math.log(target)
        if fb is None or fb == fa:
            x = math.exp(0.5 * (a + b))
        else:
            wa, wb = (fb - lt), (lt - fa)
            if side == -1:
                wb *= 0.5
            elif side == 1:
                wa *= 0.5
            t = wb / (wa + wb) if wa + wb > 0 else 0.5
            t = min(max(t, 0.02), 0.98)
            x = math.exp(a + t * (b - a))
        fx = f(x)
        if fx <= target:
            feas, f_feas = x, fx
            side = 1 if side != 1 else 2
        else:
            infeas, f_inf = x, fx
            side = -1 if side != -1 else -2
    return feas


def calibrate_sigma(*, epsilon: float, delta: float, sampling_rate: float, steps: int,
                    sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove",
                    sigma_max: float = 1e4) -> Calibration:
    r"""The smallest noise multiplier sigma (to 1e-6 relative) whose certified upper epsilon(delta) after
    ``steps`` steps at ``sampling_rate`` is at most ``epsilon`` (Opacus ``get_noise_multiplier``, TF Privacy
    ``compute_noise``, done with certified PLD bounds).

    sigma meets the target exactly when the certified (pessimistic) upper bound on delta at ``epsilon`` is
    at most ``delta`` (then ``epsilon`` itself is a certified upper end of epsilon(delta)); that bound is a
    smooth function of sigma on a fixed grid, so the boundary is found by regula falsi (Illinois) in
    ln sigma from a bracket whose feasible end is the RDP calibration (RDP's epsilon is larger).  The grid
    is fixed from the first guess; ``interval`` at the answer is computed on it too.

    Raises
    ------
    InvalidArgumentError
        Bad parameters, or a target no sigma up to ``sigma_max`` meets (the message gives the epsilon
        reached there).

    Examples
    --------
    >>> c = calibrate_sigma(epsilon=2.0, delta=1e-5, sampling_rate=0.01, steps=1000)
    >>> c.interval.upper <= 2.0 < c.beyond_upper and 0.9 < c.value < 1.0
    True
    """
    from dpkit.accounting.sampled_gaussian import DEFAULT_ORDERS

    e, d = _check_target(epsilon, delta)
    q = _check_rate(sampling_rate)
    t = _check_steps(steps)
    s_max = check_positive("sigma_max", sigma_max)
    s, n = check_scheme(sampling, neighboring)

    def phase(sig: float) -> DPSGDStep:
        return DPSGDStep(sigma=sig, sampling_rate=q, steps=t, sampling=s, neighboring=n)

    rdp_ok = (s, n) == ("poisson", "add_remove") and q < 1.0  # the RDP bound is valid too, and cheap

    def rdp(sig: float) -> float:
        return float(dpsgd_rdp_epsilon(delta=d, sigma=sig, sampling_rate=q, steps=t, orders=DEFAULT_ORDERS))

    at_max = rdp(s_max) if rdp_ok else math.inf
    if at_max > e:
        at_max = min(at_max, _upper_at(phase(s_max), d, None))
    if at_max > e:
        raise InvalidArgumentError(
            f"epsilon={e:g} at delta={d:g} is not reachable with sigma <= sigma_max={s_max:g}: there "
            f"epsilon is {at_max:.6g} after {t} steps at q={q:g}; raise sigma_max, lower the number "
            "of steps or the sampling rate, or accept a larger epsilon."
        )
    # a feasible sigma: the RDP calibration (its epsilon is an upper bound), else sigma_max
    hi_s = _bracket_sigma(rdp, e, s_max) if rdp_ok else s_max
    dirs, _, _ = _directions([phase(hi_s)])
    grid = None if dirs is None else _solve.grid_for(dirs, d, _solve.GRID_FACTOR)
    ld = math.log(d)

    def excess(sig: float) -> float:  # ln(certified upper delta at epsilon) - ln(delta): <= 0 meets the target
        return _log_delta_upper_at(phase(sig), e, grid) - ld

    f_hi = excess(hi_s)
    while f_hi > 0 and hi_s < s_max:
        hi_s = min(2.0 * hi_s, s_max)
        f_hi = excess(hi_s)
    lo_s = hi_s * 0.9
    f_lo = excess(lo_s)
    while f_lo <= 0 and lo_s > 1e-6:  # lo_s meets the target too: it is the new feasible end
        hi_s, f_hi = lo_s, f_lo
        lo_s = lo_s * 0.7
        f_lo = excess(lo_s)
    sig, f_sig = _illinois(excess, lo_s, f_lo, hi_s, f_hi, rel=1e-6)
    beyond = sig * (1.0 - 1e-6)
    while True:  # the evidence: just below sigma, neither bound meets the target (else step down to it)
        if excess(beyond) > 0:
            b_up = _upper_at(phase(beyond), d, grid)
            if b_up > e:
                break
        sig = beyond
        beyond = sig * (1.0 - 1e-6)
    iv = _interval_on(phase(sig), d, grid, cap=e)
    return Calibration("sigma", sig, iv, beyond, b_up, e, d)


def _illinois(f: Callable[[float], float], lo: float, f_lo: float, hi: float, f_hi: float, rel: float
              ) -> tuple[float, float]:
    """(x, f(x)): the end of a bracket [lo, hi] (f(lo) > 0 >= f(hi), f smooth and decreasing in x) on the
    side f <= 0, narrowed to ``rel`` relative by the Illinois variant of regula falsi in ln x (bisection in
    ln x when it stalls)."""
    a, b = math.log(lo), math.log(hi)
    fa, fb = f_lo, f_hi
    side = 0
    for _ in range(100):
        if b - a <= rel * 0.5:
            break
        if math.isfinite(fa) and math.isfinite(fb) and fa != fb:
            x = b - fb * (b - a) / (fb - fa)
            x = min(max(x, a + 0.02 * (b - a)), b - 0.02 * (b - a))
        else:
            x = 0.5 * (a + b)
        fx = f(math.exp(x))
        if fx > 0:
            a, fa = x, fx
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa *= 0.5
            side = 1
    return math.exp(b), fb


def _log_delta_upper_at(phase: DPSGDStep, epsilon: float, grid: float | None) -> float:
    dirs, mu, _ = _directions([phase])
    if dirs is None:
        return log_delta_bounds(float(cast(float, mu)), epsilon)[1]  # mu is set when dirs is None
    return _solve.log_delta_upper(dirs, epsilon, grid=grid)


def _interval_on(phase: DPSGDStep, delta: float, grid: float | None, cap: float = math.inf) -> DPSGDInterval:
    """The interval at ``phase`` on ``grid``; ``cap``: an epsilon already certified as an upper end (the
    calibration target, where the certified delta there is at most ``delta``)."""
    dirs, mu, method = _directions([phase])
    if dirs is None:
        lo, hi = gaussian_epsilon_interval(float(cast(float, mu)), delta)  # mu is set when dirs is None
        return DPSGDInterval(min(lo, cap), min(hi, cap), method)
    lo, hi = _solve.epsilon_bounds(dirs, delta, grid=grid)
    return DPSGDInterval(min(lo, cap), min(hi, cap), method)


def _bracket_sigma(rdp: Callable[[float], float], e: float, s_max: float) -> float:
    """A sigma meeting the target by the RDP bound (integer orders; an upper bound on epsilon, so the
    calibrated sigma is at most it), to 1e-3 relative."""
    hi = 0.5
    while hi < s_max and rdp(hi) > e:
        hi *= 1.5
    hi = min(hi, s_max)
    lo = hi / 1.5
    while lo > 1e-3 and rdp(lo) <= e:
        hi, lo = lo, lo / 1.5
    # the upper side (a sigma that meets the target), geometric midpoints, stopped once hi / lo <= 1.001:
    # hi - lo <= (1 - 1 / 1.001) hi.  The bracket's ratio starts at 1.5 and is square-rooted by each
    # step (1.0016, then 1.0008), never near 1.001, so the rule stops at the same step as hi / lo < 1.001
    return bisect_monotone(lambda sig: rdp(sig) <= e, lo, hi, side="upper", rtol=1.0 - 1.0 / 1.001, max_iter=40,
                           midpoint="log")


def calibrate_sampling_rate(*, epsilon: float, delta: float, sigma: float, steps: int,
                            sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove") -> Calibration:
    """The largest sampling rate q (to 1e-6 relative) whose certified upper epsilon(delta) after ``steps``
    steps with noise multiplier ``sigma`` is at most ``epsilon``.

    Raises ValueError if even q -> 0 cannot meet it (it always can for steps finite: epsilon -> 0) or
    the target is met at q = 1 (then q = 1 is returned with ``beyond_upper`` = nan).

    >>> c = calibrate_sampling_rate(epsilon=2.0, delta=1e-5, sigma=1.0, steps=1000)
    >>> c.interval.upper <= 2.0 < c.beyond_upper
    True
    """
    e, d = _check_target(epsilon, delta)
    sig = _check_sigma(sigma)
    t = _check_steps(steps)
    s, n = check_scheme(sampling, neighboring)

    def phase(q: float) -> DPSGDStep:
        return DPSGDStep(sigma=sig, sampling_rate=q, steps=t, sampling=s, neighboring=n)

    full = _upper_at(phase(1.0), d, None)
    if full <= e:
        return Calibration("sampling_rate", 1.0, _interval_on(phase(1.0), d, None), math.nan, math.nan, e, d)
    lo_q, hi_q = 1e-3, 1.0
    while _upper_at(phase(lo_q), d, None) > e:
        lo_q /= 10.0
        if lo_q < 1e-12:
            raise InvalidArgumentError(
                f"epsilon={e:g} at delta={d:g} is not reachable with any sampling rate down to 1e-12 "
                f"at sigma={sig:g}, {t} steps; raise sigma or lower the number of steps."
            )
    dirs, _, _ = _directions([phase(lo_q)])
    grid = None if dirs is None else _solve.grid_for(dirs, d, _solve.GRID_FACTOR)

    def f(q: float) -> float:
        return _upper_at(phase(min(q, 1.0)), d, grid) if q < 1.0 else full

    q = _solve_monotone(f, lo_q, hi_q, e, increasing=True)
    beyond = min(q * (1.0 + 1e-6), 1.0)
    b_up = f(beyond)
    while b_up <= e and beyond < 1.0:
        q = beyond
        beyond = min(q * (1.0 + 1e-6), 1.0)
        b_up = f(beyond)
    return Calibration("sampling_rate", q, _interval_on(phase(q), d, grid), beyond, b_up, e, d)


def calibrate_steps(*, epsilon: float, delta: float, sigma: float, sampling_rate: float,
                    sampling: Sampling = "poisson", neighboring: Neighboring = "add_remove",
                    max_steps: int = 10**8) -> Calibration:
    """The largest number of steps whose certified upper epsilon(delta) is at most ``epsilon``
    (``beyond_value`` = that number + 1, whose upper end exceeds it).

    Raises ValueError if not even one step meets the target (the message gives one step's epsilon).

    >>> c = calibrate_steps(epsilon=2.0, delta=1e-5, sigma=1.0, sampling_rate=0.01)
    >>> c.interval.upper <= 2.0 < c.beyond_upper
    True
    """
    e, d = _check_target(epsilon, delta)
    sig = _check_sigma(sigma)
    q = _check_rate(sampling_rate)
    s, n = check_scheme(sampling, neighboring)

    def phase(t: int) -> DPSGDStep:
        return DPSGDStep(sigma=sig, sampling_rate=q, steps=t, sampling=s, neighboring=n)

    one = _upper_at(phase(1), d, None)
    if one > e:
        raise InvalidArgumentError(f"epsilon={e:g} at delta={d:g} is not reachable: one step at sigma={sig:g}, q={q:g} "
                         f"already costs epsilon {one:.6g}; raise sigma or lower the sampling rate.")
    hi = 2
    while _upper_at(phase(hi), d, None) <= e:
        hi *= 4
        if hi > max_steps:
            raise InvalidArgumentError(f"more than max_steps={max_steps} steps fit epsilon={e:g}; raise max_steps.")
    lo = max(1, hi // 4)
    dirs, _, _ = _directions([phase(hi)])
    grid = None if dirs is None else _solve.grid_for(dirs, d, _solve.GRID_FACTOR)

    def f(x: float) -> float:
        return _upper_at(phase(max(1, int(round(x)))), d, grid)

    t = max(1, int(round(_solve_monotone(f, float(lo), float(hi), e, increasing=True, rel=0.5 / hi))))
    while t > 1 and f(t) > e:  # integer neighbours settle it (the upper end grows with the steps)
        t -= 1
    while f(t + 1) <= e:
        t += 1
    return Calibration("steps", float(t), _interval_on(phase(t), d, grid), float(t + 1), f(t + 1), e, d)
