"""DP-SGD accounting and the tilted accountant: intervals that hold independent values down to delta = 1e-100.

Independent values: the k-fold Gaussian in closed form at 50 digits (mpmath erfc), one subsampled step and the
1- and 2-fold Laplace by mpmath quadrature at 50 digits, the MTZ series against 50-digit quadrature of the Rényi
integral, and the untilted FFT accountant (pld.compose_many, a separate code path with its own certified bounds).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpkit.accounting import Accountant, DPSGDStep, calibrate_sigma, calibrate_steps, dpsgd_delta, dpsgd_epsilon
from dpkit.accounting._tilted_laws import LawSpec
from dpkit.accounting._tilted_solve import epsilon_bounds, log_delta_bounds
from dpkit.accounting.dpsgd import dpsgd_log_delta, dpsgd_rdp_epsilon
from dpkit.accounting.gaussian_profile import gaussian_epsilon_interval
from dpkit.accounting.gaussian_profile import log_delta_bounds as gauss_log_delta
from dpkit.accounting.pld import PLD, epsilon_interval, pld_from_pair
from dpkit.accounting.sampled_gaussian import sampled_gaussian_rdp
from dpkit.distributions import Gaussian, Laplace
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ApproxDP

mp.mp.dps = 50


def mp_gauss_log_delta(mu: float, eps: float) -> mp.mpf:
    """ln delta(eps) of the Gaussian pair (Balle & Wang 2018, Thm 8) at 50 digits."""
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    a, b = mu / 2 - eps / mu, -mu / 2 - eps / mu
    return mp.log(mp.ncdf(a) - mp.exp(eps) * mp.ncdf(b))


@pytest.mark.parametrize("mu,eps", [(1.0, 1.0), (0.2, 5.0), (5.0, 100.0), (3e-6, 1e-5), (2.0, 40.0), (1e3, 6e5)])
def test_gaussian_closed_form_bounds_hold_the_50_digit_value(mu, eps):
    lo, hi = gauss_log_delta(mu, eps)
    ref = mp_gauss_log_delta(mu, eps)
    assert lo <= ref <= hi
    assert hi - lo < 1e-6  # relative width of delta (ln), far in the tail too


def test_extreme_sigmas_have_closed_forms_not_allocations():
    """Issue 11: sigma 1e6 gives 0 (not a negative epsilon), 1e-6 and 0.01 a finite interval at once."""
    assert gaussian_epsilon_interval(math.sqrt(10) / 1e6, 1e-5) == (0.0, 0.0)
    lo, hi = gaussian_epsilon_interval(math.sqrt(10) / 1e-6, 1e-5)
    assert 0 < lo <= hi < math.inf and (hi - lo) / hi < 1e-8
    iv = epsilon_interval(Gaussian(0, 0.01), Gaussian(1, 0.01), k=10, delta=1e-5)
    assert 51347.0 < iv.lower <= iv.upper < 51348.0


@pytest.mark.parametrize("k,sigma,delta", [(10, 1.0, 1e-30), (1000, 20.0, 1e-100), (4, 2.0, 1e-100)])
def test_tilted_engine_on_the_gaussian_law_holds_the_closed_form(k, sigma, delta):
    """The tilted FFT path (LawSpec at q = 1 is the Gaussian law) against the exact one-Gaussian answer."""
    mu = math.sqrt(k) / sigma
    lo, hi = epsilon_bounds([[(LawSpec("remove", 1.0 / sigma, 1.0), k)]], delta)
    exact = mp.findroot(lambda e: mp_gauss_log_delta(mu, e) - mp.log(delta), gaussian_epsilon_interval(mu, delta)[1])
    assert lo <= exact <= hi
    assert (hi - lo) / hi < 1e-4


@pytest.mark.parametrize("eps", [2.0, 6.0, 14.0, 26.0, 34.0])
def test_tilted_delta_far_in_the_tail_of_k_fold_gaussian(eps):
    """delta(eps) down to 1e-247 (eps = 34) inside a certified interval at most 1e-6 wide (relative, issue 10),
    composed by the tilted FFT on the grid log_delta_bounds refines to itself (the width is the grid's: the
    error terms are below 1e-9 of delta there)."""
    k, sigma = 16, 4.0
    mu = math.sqrt(k) / sigma
    lo, hi = log_delta_bounds([[(LawSpec("remove", 1.0 / sigma, 1.0), k)]], eps, target_width=1e-6)
    ref = mp_gauss_log_delta(mu, eps)
    assert lo <= ref <= hi
    assert hi - lo < 1e-6


def laplace_2fold_log_delta(t: float, eps: float) -> mp.mpf:
    """ln delta(eps) of two compositions of the Laplace shift t by 50-digit quadrature of
    E[delta_1(eps - L_2)] over L_2's law (atoms at +-t, density e^{-(t-l)/2}/4 on (-t, t))."""
    t, eps = mp.mpf(t), mp.mpf(eps)

    def d1(x):  # one Laplace: delta(x) = 1 - e^{(x - t)/2} for |x| <= t (Balle & Wang / the hockey stick)
        if x >= t:
            return mp.mpf(0)
        if x <= -t:
            return 1 - mp.exp(x)
        return 1 - mp.exp((x - t) / 2)

    total = d1(eps - t) / 2 + mp.exp(-t) / 2 * d1(eps + t)
    total += mp.quad(
        lambda u: d1(eps - u) * mp.exp(-(t - u) / 2) / 4, [-t, eps - t, t] if -t < eps - t < t else [-t, t]
    )
    return mp.log(total)


@pytest.mark.parametrize("eps", [0.5, 1.5, 1.9, 1.999])
def test_tilted_two_fold_laplace_tail_against_quadrature(eps):
    lo, hi = log_delta_bounds([[(LawSpec("laplace", 1.0), 2)]], eps, grid_factor=0.0001)
    ref = laplace_2fold_log_delta(1.0, eps)
    assert lo <= ref <= hi
    assert hi - lo < 1e-6


def test_pure_dp_atom_gives_the_maximum_loss():
    """Issue 10: a pure 4-DP Laplace at delta 1e-14 gives about 4, not [4, inf]; above 4 delta is 0 exactly."""
    iv = epsilon_interval(Laplace(0, 0.25), Laplace(1, 0.25), delta=1e-14, symmetric=True)
    assert 4.0 - 1e-9 < iv.lower <= iv.upper <= 4.0
    assert log_delta_bounds([[(LawSpec("laplace", 4.0), 1)]], 4.0) == (-math.inf, -math.inf)


def one_step_log_delta(mu: float, q: float, eps: float) -> mp.mpf:
    """ln delta(eps) of one Poisson-subsampled Gaussian step (removal pair) by 50-digit quadrature."""
    mu, q, eps = mp.mpf(mu), mp.mpf(q), mp.mpf(eps)
    # L = ln(1 - q + q e^{mu x - mu^2/2}) with x ~ q N(mu, 1) + (1 - q) N(0, 1); L > eps iff x > x0
    x0 = (mp.log((mp.exp(eps) - (1 - q)) / q) + mu * mu / 2) / mu

    def f(x):
        ratio = 1 - q + q * mp.exp(mu * x - mu * mu / 2)
        dens = (q * mp.npdf(x, mu, 1) + (1 - q) * mp.npdf(x))
        return dens * (1 - mp.exp(eps) / ratio)

    return mp.log(mp.quad(f, [x0, x0 + 5, x0 + 20, mp.inf]))


@pytest.mark.parametrize("eps", [1.0, 3.0, 5.0])
def test_one_subsampled_step_tail_against_quadrature(eps):
    lo, hi = log_delta_bounds([[(LawSpec("remove", 1.0, 0.01), 1)]], eps, grid_factor=0.005)
    ref = one_step_log_delta(1.0, 0.01, eps)
    assert lo <= ref <= hi
    assert hi - lo < 1e-4


def test_dpsgd_interval_agrees_with_the_untilted_fft_path():
    """Two code paths, each certified: their intervals must intersect, and the tilted one is narrow."""
    iv = dpsgd_epsilon(sigma=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    P, Q = Gaussian(0, 1), Gaussian(1, 1)
    from dpkit.accounting.subsampling import pld_poisson_subsampled

    hi = max(float(pld_poisson_subsampled(P, Q, sampling_rate=0.01, direction=d, grid=1e-4).self_compose(1000)
                   .epsilon(1e-5)) for d in ("remove", "add"))
    lo = max(float(pld_poisson_subsampled(P, Q, sampling_rate=0.01, direction=d, grid=1e-4, pessimistic=False)
                   .self_compose(1000).epsilon(1e-5)) for d in ("remove", "add"))
    assert max(lo, iv.lower) <= min(hi, iv.upper)
    assert iv.width <= 1e-4 * iv.upper
    assert iv.upper < float(dpsgd_rdp_epsilon(sigma=1.0, sampling_rate=0.01, steps=1000, delta=1e-5))


def test_small_delta_is_finite_and_delta_round_trips():
    """Issue 10: 10^3 steps at q = 0.01, sigma = 1: epsilon finite at delta 1e-30; delta(eps) brackets it back."""
    iv = dpsgd_epsilon(sigma=1.0, sampling_rate=0.01, steps=1000, delta=1e-30)
    assert math.isfinite(iv.upper) and iv.width <= 1e-4 * iv.upper
    ld = dpsgd_log_delta(sigma=1.0, sampling_rate=0.01, steps=1000, epsilon=iv.upper)
    assert ld.upper <= math.log(1e-30) + 1e-9
    d = dpsgd_delta(sigma=1.0, sampling_rate=0.01, steps=1000, epsilon=iv.lower)
    assert d.upper >= 1e-30 * (1 - 1e-9)


def test_schedule_equals_merged_phases_and_substitution_is_larger():
    a = dpsgd_epsilon(delta=1e-5, schedule=[DPSGDStep(sigma=1.2, sampling_rate=0.02, steps=200),
                                            DPSGDStep(sigma=1.2, sampling_rate=0.02, steps=300)])
    b = dpsgd_epsilon(delta=1e-5, sigma=1.2, sampling_rate=0.02, steps=500)
    assert max(a.lower, b.lower) <= min(a.upper, b.upper)
    sub = dpsgd_epsilon(delta=1e-5, sigma=1.2, sampling_rate=0.02, steps=500, sampling="without_replacement",
                        neighboring="substitute")
    assert sub.lower > b.upper and sub.method.startswith("dominating pair")
    pois_sub = dpsgd_epsilon(delta=1e-5, sigma=1.2, sampling_rate=0.02, steps=500, neighboring="substitute")
    assert pois_sub.method.startswith("upper bound")


def test_full_batch_is_one_gaussian():
    iv = dpsgd_epsilon(delta=1e-5, sigma=4.0, sampling_rate=1.0, steps=16)
    assert iv.lower <= 4.37717809568122 <= iv.upper  # mu = 1: the Balle-Wang root (test_gaussian_closed_form_...)
    assert iv.method.startswith("closed form")


def test_calibrate_sigma_is_certified_both_ways():
    c = calibrate_sigma(epsilon=2.0, delta=1e-5, sampling_rate=0.05, steps=50)
    assert c.interval.upper <= 2.0 < c.beyond_upper
    assert c.beyond_value == pytest.approx(c.value * (1 - 1e-6), rel=1e-12)


@pytest.mark.slow
def test_calibrate_sigma_at_dpsgd_size():
    c = calibrate_sigma(epsilon=3.0, delta=1e-5, sampling_rate=1e-3, steps=10**5)
    assert c.interval.upper <= 3.0 < c.beyond_upper
    assert c.value < float(_rdp_sigma(3.0, 1e-5, 1e-3, 10**5))  # tighter than RDP's calibration


def _rdp_sigma(eps: float, delta: float, q: float, steps: int) -> float:
    lo, hi = 0.3, 10.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if float(dpsgd_rdp_epsilon(delta=delta, sigma=mid, sampling_rate=q, steps=steps)) <= eps:
            hi = mid
        else:
            lo = mid
    return hi


def test_calibrate_steps_and_unreachable_targets():
    c = calibrate_steps(epsilon=1.0, delta=1e-5, sigma=2.0, sampling_rate=0.05)
    assert c.interval.upper <= 1.0 < c.beyond_upper and c.beyond_value == c.value + 1
    with pytest.raises(ValueError, match="not reachable.*one step"):
        calibrate_steps(epsilon=0.01, delta=1e-5, sigma=0.5, sampling_rate=1.0)
    with pytest.raises(ValueError, match="not reachable with sigma <= sigma_max"):
        calibrate_sigma(epsilon=1e-3, delta=1e-5, sampling_rate=1.0, steps=10**6, sigma_max=10.0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(sigma=0.0, sampling_rate=0.1, steps=10, delta=1e-5), "sigma"),
    (dict(sigma=math.nan, sampling_rate=0.1, steps=10, delta=1e-5), "sigma"),
    (dict(sigma=math.inf, sampling_rate=0.1, steps=10, delta=1e-5), "sigma"),
    (dict(sigma=1.0, sampling_rate=0.0, steps=10, delta=1e-5), "sampling_rate"),
    (dict(sigma=1.0, sampling_rate=1.5, steps=10, delta=1e-5), "sampling_rate"),
    (dict(sigma=1.0, sampling_rate=math.nan, steps=10, delta=1e-5), "sampling_rate"),
    (dict(sigma=1.0, sampling_rate=0.1, steps=0, delta=1e-5), "steps"),
    (dict(sigma=1.0, sampling_rate=0.1, steps=10, delta=0.0), "delta"),
    (dict(sigma=1.0, sampling_rate=0.1, steps=10, delta=1.0), "delta"),
    (dict(sigma=1.0, sampling_rate=0.1, steps=10, delta=math.nan), "delta"),
    (dict(sigma=1.0, sampling_rate=0.1, steps=10, delta=1e-5, sampling="without_replacement"), "substitution"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dpsgd_epsilon(**kwargs)


def test_fractional_orders_against_quadrature():
    """MTZ 2019's series at fractional orders against the Rényi integral at 50 digits."""
    q, s = 0.02, 1.3
    for alpha in (1.5, 2.75, 10.3, 33.5):
        a = mp.mpf(alpha)

        def f(z, a=a):  # called within this iteration; a bound here all the same
            m0 = mp.npdf(z, 0, s)
            mix = (1 - q) * m0 + q * mp.npdf(z, 1, s)
            return m0 * (mix / m0) ** a

        ref = mp.log(mp.quad(f, [-mp.inf, -10, 0, 1, 10, mp.inf])) / (a - 1)
        got = float(sampled_gaussian_rdp(sigma=s, sampling_rate=q, orders=[alpha]).epsilon(alpha))
        assert ref <= got <= ref * (1 + 1e-8) + 1e-290  # an upper bound, within 1e-8


def test_accountant_takes_dpsgd_steps_and_refuses_past_the_budget():
    acc = Accountant(ApproxDP(epsilon=1.0, delta=1e-5), adaptive=False)
    acc.spend(DPSGDStep(sigma=2.0, sampling_rate=0.05, steps=50))
    before = acc.spends
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        acc.spend(DPSGDStep(sigma=2.0, sampling_rate=0.05, steps=10**5))
    assert acc.spends == before
    # adaptively, a step with no Renyi curve (substitution neighbours) has no filter; the error says what to do
    with pytest.raises(UnsupportedError, match="adaptive=False"):
        Accountant(ApproxDP(epsilon=1.0, delta=1e-5)).spend(
            DPSGDStep(sigma=2.0, sampling_rate=0.05, neighboring="substitute"))


def test_adaptive_accountant_takes_dpsgd_steps_by_the_renyi_filter():
    """Issue 9: under an (epsilon, delta) budget the adaptive Accountant admits DP-SGD steps through the Renyi
    filter (Feldman & Zrnic 2021, arXiv 2008.11193, Thm 3.1: sum of eps_i(a) <= B_a at a fixed order a gives
    (a, B_a)-RDP under fully adaptive choice), B_a from CKS 2020 (arXiv 2004.00010) Prop 12.  Checked against
    the exact binomial expansion of the Poisson-subsampled Gaussian's Renyi divergence at the integer order
    (Mironov, Talwar, Zhang 2019, arXiv 1908.10530, Sec 3.3) at 50 digits."""
    eps_b, delta_b, sigma, q = 1.0, 1e-5, 2.0, 0.05
    acc = Accountant(ApproxDP(epsilon=eps_b, delta=delta_b))
    n = 0
    while True:
        try:
            acc.spend(DPSGDStep(sigma=sigma, sampling_rate=q))
        except BudgetExceededError as exc:
            assert "Nothing was spent" in str(exc)
            break
        n += 1
        assert n < 10**4
    assert len(acc.spends) == n
    rdp_line = [line for line in acc.filters if line.startswith("RDP filter")]
    assert len(rdp_line) == 1
    a = int(float(rdp_line[0].split("order ")[1].split(":")[0]))
    with mp.workdps(50):
        A = mp.fsum(mp.binomial(a, k) * (1 - mp.mpf(q)) ** (a - k) * mp.mpf(q) ** k
                    * mp.exp(mp.mpf(k * k - k) / (2 * mp.mpf(sigma) ** 2)) for k in range(a + 1))
        r = mp.log(A) / (a - 1)

        def conv(m: int) -> mp.mpf:  # CKS Prop 12 at order a for m steps
            return m * r + mp.log(1 - mp.mpf(1) / a) - (mp.log(mp.mpf(delta_b)) + mp.log(a)) / (a - 1)

        assert conv(n) <= eps_b  # the admitted steps are within the budget by the paper's statement
        assert conv(n + 1) > eps_b * (1 - 1e-9)  # and the filter stops where the statement does at its order
    # the order was chosen from the first step alone, to fit the most copies: no order of the core fits more
    with mp.workdps(30):
        for b in (4, 8, 10, 12, 14, 16, 20, 24, 32):
            A = mp.fsum(mp.binomial(b, k) * (1 - mp.mpf(q)) ** (b - k) * mp.mpf(q) ** k
                        * mp.exp(mp.mpf(k * k - k) / (2 * mp.mpf(sigma) ** 2)) for k in range(b + 1))
            rb = mp.log(A) / (b - 1)
            fit = (eps_b - mp.log(1 - mp.mpf(1) / b) + (mp.log(mp.mpf(delta_b)) + mp.log(b)) / (b - 1)) / rb
            assert int(mp.floor(fit)) <= n + 1


def test_pld_values_are_labelled_and_read_only():
    hi = pld_from_pair(Gaussian(0, 1), Gaussian(1, 1), grid=1e-3)
    lo = pld_from_pair(Gaussian(0, 1), Gaussian(1, 1), grid=1e-3, pessimistic=False)
    assert hi.epsilon(1e-5).kind == "upper" and lo.epsilon(1e-5).kind == "lower"
    assert hi.delta(1.0).kind == "upper" and lo.delta(1.0).kind == "lower"
    assert not hi.mass.flags.writeable
    with pytest.raises(ValueError):
        hi.mass[0] = 0.0
    m = np.array([0.5, 0.5])
    p = PLD(grid=1.0, offset=0, mass=m, infinity_mass=0.0, pessimistic=True)
    m[0] = 0.0  # the caller's array is not the PLD's
    assert float(p.mass[0]) == 0.5
