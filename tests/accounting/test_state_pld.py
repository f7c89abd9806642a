"""AccountingState's PLD answers on long and mixed sequences (issue 9), checked against independent
high-precision computations with mpmath.

* the merged Gaussian split into pieces (mu_p <= 2, composed by the tilted FFT) against the exact Gaussian
  profile delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth, Su 2022, Cor 3.3);
* many Gaussians and one Laplace shift against delta(eps) = E_P[delta_G(eps - L)], L the Laplace shift's
  loss (atoms at +-t with P-masses 1/2 and e^{-t}/2, density e^{-(t - l)/2}/4 between), by mpmath.quad;
* the case that failed (a merged Gaussian of large mu beside subsampled laws: ln(1 - q + q e^x) at q = 1
  below x = -37) now answers.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpkit.accounting import _tilted_solve
from dpkit.accounting._state_pld import _gaussian_pieces
from dpkit.accounting._tilted_laws import _g
from dpkit.accounting.dpsgd import DPSGDStep
from dpkit.accounting.items import GaussianEvent, LaplaceEvent
from dpkit.accounting.state import AccountingState

mp.mp.dps = 40


def _gauss_delta(mu: mp.mpf, eps: mp.mpf) -> mp.mpf:
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def _eps_of(delta_fn, delta: float, lo: float, hi: float) -> mp.mpf:  # type: ignore[no-untyped-def]
    """The eps with delta_fn(eps) = delta, by bisection on [lo, hi] (delta_fn decreasing)."""
    a, b = mp.mpf(lo), mp.mpf(hi)
    target = mp.mpf(delta)
    assert delta_fn(a) > target > delta_fn(b)
    for _ in range(80):
        m = (a + b) / 2
        if delta_fn(m) > target:
            a = m
        else:
            b = m
    return (a + b) / 2


@pytest.mark.parametrize("mu2", [3.9, 4.0, 25.0, 841.0, 3.0e3])
def test_gaussian_pieces_cover_the_merged_mu(mu2: float) -> None:
    spec, n = _gaussian_pieces(mu2)
    assert spec.mu <= 2.0 * (1 + 1e-15) or n == 1
    assert mp.mpf(n) * mp.mpf(spec.mu) ** 2 >= mp.mpf(mu2)  # never a smaller mu
    assert mp.mpf(n) * mp.mpf(spec.mu) ** 2 <= mp.mpf(mu2) * (1 + 1e-14)


@pytest.mark.parametrize("mu2", [30.0, 841.0])
def test_split_gaussian_interval_contains_the_exact_epsilon(mu2: float) -> None:
    delta = 1e-5
    spec, n = _gaussian_pieces(mu2)
    lo, hi = _tilted_solve.epsilon_bounds([[(spec, n)]], delta)
    mu = mp.sqrt(mp.mpf(mu2))
    truth = _eps_of(lambda e: _gauss_delta(mu, e), delta, 0.0, float(mu2) + 20 * float(mu))
    assert lo <= truth <= hi
    assert (hi - lo) / hi <= 1e-4


def test_q_one_map_is_the_identity_far_below_zero() -> None:
    for x in (-1.0, -37.0, -40.0, -700.0):
        assert _g(x, 1.0) == x
    assert _g(-40.0, 0.5) == pytest.approx(math.log(0.5), rel=1e-12)


def _mixed_state(mu2_target: float, t: float) -> tuple[AccountingState, mp.mpf]:
    """Gaussians of sigma 20..60 (each repeated) whose mu^2 sum is about mu2_target, and one Laplace shift t."""
    s = AccountingState()
    sigmas = [20.0 + 40.0 * i / 49 for i in range(50)]
    per = sum(1.0 / (sg * sg) for sg in sigmas)
    k = max(1, round(mu2_target / per))
    mu2 = mp.mpf(0)
    for sg in sigmas:
        s = s.add(GaussianEvent(sigma=sg), count=k)
        mu2 += k * (mp.mpf(1) / mp.mpf(sg)) ** 2
    s = s.add(LaplaceEvent(scale=1.0 / t))
    return s, mp.sqrt(mu2)


@pytest.mark.parametrize(("mu2_target", "t"), [(2.0, 0.5), (400.0, 3.0)])
def test_mixed_gaussians_and_laplace_against_mpmath(mu2_target: float, t: float) -> None:
    delta = 1e-5
    s, mu = _mixed_state(mu2_target, t)
    tt = mp.mpf(1) / mp.mpf(1.0 / t)  # the t the item holds (1 / scale, in doubles)
    tt = mp.mpf(float(tt))

    def delta_fn(e: mp.mpf) -> mp.mpf:
        atoms = _gauss_delta(mu, e - tt) / 2 + mp.exp(-tt) / 2 * _gauss_delta(mu, e + tt)
        dens = mp.quad(lambda x: mp.exp(-(tt - x) / 2) / 4 * _gauss_delta(mu, e - x), [-tt, 0, tt])
        return atoms + dens

    est = s.epsilon(delta, method="pld")
    lo, hi = float(est.lower_bound), float(est)
    truth = _eps_of(delta_fn, delta, 0.0, float(mu) ** 2 + 20 * float(mu) + 2 * t)
    assert lo <= truth <= hi, (lo, float(truth), hi)
    assert (hi - lo) / hi <= 1e-4


def test_large_merged_gaussian_beside_subsampled_laws_answers() -> None:
    """The crash case: a merged Gaussian of mu ~ 29 beside Laplace and subsampled-Gaussian laws."""
    s = AccountingState()
    for i in range(5):
        s = s.add(GaussianEvent(sigma=20.0 + 10.0 * i), count=200_000)
    s = s.add(LaplaceEvent(scale=300.0), count=1000)
    s = s.add(DPSGDStep(sigma=1.5, sampling_rate=0.01), count=1000)
    est = s.epsilon(1e-5, method="pld")
    lo, hi = float(est.lower_bound), float(est)
    assert 0 < lo <= hi < math.inf
    assert (hi - lo) / hi <= 1e-4
    # the Gaussians alone, exactly, are a lower bound on the whole composition's epsilon
    mu = mp.sqrt(sum(200_000 / mp.mpf(20.0 + 10.0 * i) ** 2 for i in range(5)))
    alone = _eps_of(lambda e: _gauss_delta(mu, e), 1e-5, 0.0, float(mu) ** 2 + 20 * float(mu))
    assert hi >= alone
