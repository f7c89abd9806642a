"""The core's Rényi orders: dense enough that the RDP answer is the one of every integer order 2..256.

The reference is independent of dpkit's sampled-Gaussian code: for an integer order a, the Poisson-subsampled
Gaussian's Rényi divergence is (1/(a-1)) ln sum_k C(a,k) (1-q)^(a-k) q^k exp(k(k-1)/(2 sigma^2)) (Mironov,
Talwar, Zhang 2019, arXiv 1908.10530, sec. 3.3), summed exactly in mpmath at 50 digits; k steps multiply it by
k; the conversion to (epsilon, delta) is CKS 2020 Prop 12 (Balle et al. 2020, Thm 21), minimised over the
orders.  The core must answer at or above that minimum (an upper bound) and within 1e-9 of it.
"""
from __future__ import annotations

import mpmath as mp
import pytest

from dpkit.accounting.dpsgd import DPSGDStep
from dpkit.accounting.items import ORDERS, ORDERS_V1, as_item
from dpkit.accounting.state import AccountingState


def _reference(sigma: float, q: float, steps: int, delta: float) -> mp.mpf:
    with mp.workdps(50):
        qq, one_q, best = mp.mpf(q), 1 - mp.mpf(q), mp.inf
        grow = mp.exp(1 / mp.mpf(sigma) ** 2)  # e^{k(k-1)/(2 sigma^2)} = prod_{j<k} grow^j
        for a in range(2, 257):
            term = one_q ** a  # k = 0: C(a,0) (1-q)^a
            s, ratio, e = term, qq / one_q, mp.mpf(1)
            for k in range(1, a + 1):  # term_k = term_{k-1} (a-k+1)/k q/(1-q) e^{(k-1)/sigma^2}
                term *= mp.mpf(a - k + 1) / k * ratio * e
                e *= grow
                s += term
            rdp = steps * mp.log(s) / (a - 1)
            best = min(best, rdp + mp.log(1 - mp.mpf(1) / a) - (mp.log(delta) + mp.log(a)) / (a - 1))
        return best


@pytest.mark.parametrize(("sigma", "q", "steps"), [(1.0, 0.01, 100), (1.1, 0.004, 2500), (0.8, 0.02, 50)])
def test_the_rdp_answer_is_the_minimum_over_every_integer_order(sigma: float, q: float, steps: int) -> None:
    delta = 1e-5
    state = AccountingState().add(as_item(DPSGDStep(sigma=sigma, sampling_rate=q)), steps)
    got = float(state.epsilon(delta, method="rdp"))
    ref = _reference(sigma, q, steps, delta)
    assert got >= ref
    assert got <= ref * (1 + 1e-9)


def test_the_orders_hold_the_old_ones_and_every_integer_to_64() -> None:
    assert set(ORDERS_V1) <= set(ORDERS)
    assert {float(a) for a in range(2, 65)} <= set(ORDERS)
    assert list(ORDERS) == sorted(set(ORDERS)) and ORDERS[-1] == 256.0


def test_the_26_orders_of_before_would_answer_looser() -> None:
    """The case of the last stop's note: sigma 1, q 0.01, 100 steps: 1.3035 at the 26 orders, 1.2248 now."""
    state = AccountingState().add(as_item(DPSGDStep(sigma=1.0, sampling_rate=0.01)), 100)
    assert float(state.epsilon(1e-5, method="rdp")) == pytest.approx(1.2248457796, rel=1e-9)
