"""The privacy filters (issue 9), each checked against its paper's statement in 50-digit arithmetic.

* zCDP filter (Feldman & Zrnic 2021, arXiv 2008.11193, Thm 3.1, at every order at once): spends are
  admitted while sum rho_i <= rho*, rho* the largest rho whose CKS 2020 (arXiv 2004.00010) Cor 13
  conversion gives epsilon(delta_B) <= epsilon_B.
* GDP filter (Smith & Thakurta 2022, arXiv 2210.17520, Thm 1.1): admitted while sum mu_i^2 <= mu*^2, mu*
  the GDP level whose exact (epsilon, delta) curve (Dong, Roth, Su 2022, Cor 2.13) meets the budget.
* approximate-DP filter (Whitehouse, Ramdas, Rogers, Wu 2023, arXiv 2203.05481, the advanced-composition
  filter): admitted while sqrt(2 ln(1/d') S) + S/2 <= epsilon_B (S = sum eps_i^2) and sum delta_i <= d''.
* basic filter (Rogers, Roth, Ullman, Vadhan 2016, arXiv 1605.08294, Thm 3.6).

The references below are independent of the code: the optimal order of the CKS bound solves
rho (a - 1)^2 = ln(1/delta) - ln a (its derivative in a), found by mpmath's root finder.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import pytest

from dpkit.accounting.accountant import Accountant
from dpkit.accounting.filters import gdp_budget, zcdp_budget
from dpkit.accounting.items import GaussianEvent
from dpkit.errors import BudgetExceededError, UnsupportedError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.mechanisms import Gaussian

EPS, DELTA = 1.0, 1e-6


def _cks_epsilon(rho: mp.mpf, delta: mp.mpf) -> mp.mpf:
    """inf over a > 1 of a rho + ln(1 - 1/a) + (ln(1/delta) - ln a)/(a - 1) (CKS 2020 Cor 13), at the
    stationary point."""
    L = -mp.log(delta)
    a = mp.findroot(lambda a: rho * (a - 1) ** 2 - (L - mp.log(a)), 1 + mp.sqrt(L / rho))
    return a * rho + mp.log(1 - 1 / a) + (L - mp.log(a)) / (a - 1)


def _rho_star(eps: float, delta: float) -> mp.mpf:
    return mp.findroot(lambda r: _cks_epsilon(r, mp.mpf(delta)) - eps, mp.mpf(zcdp_budget(eps, delta)))


def _gdp_delta(mu: mp.mpf, eps: mp.mpf) -> mp.mpf:
    """delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth, Su 2022, Cor 2.13)."""
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def _mu_star(eps: float, delta: float) -> mp.mpf:
    return mp.findroot(lambda m: _gdp_delta(m, mp.mpf(eps)) - mp.mpf(delta), mp.mpf(gdp_budget(eps, delta)))


def _count(acc: Accountant, item: object) -> int:
    """Spend ``item`` one at a time (adaptively) until the first refusal; the refusal changes nothing."""
    n = 0
    while True:
        before = acc.spends
        try:
            acc.spend(item)
        except BudgetExceededError as exc:
            assert "Nothing was spent" in str(exc) and acc.spends == before
            return n
        n += 1
        assert n < 10**5


def test_zcdp_budget_is_the_largest_rho_whose_conversion_meets_the_budget():
    with mp.workdps(50):
        for eps, delta in [(EPS, DELTA), (3.0, 1e-5), (0.1, 1e-9), (10.0, 1e-3)]:
            star = _rho_star(eps, delta)
            got = zcdp_budget(eps, delta)
            # certified: never above the exact limit; the dense order grid loses at most 1e-5 of it
            assert got <= star and got >= star * (1 - 1e-5), (eps, delta, got, star)
            assert _cks_epsilon(mp.mpf(got), mp.mpf(delta)) <= eps


def test_gdp_budget_is_the_mu_whose_exact_curve_meets_the_budget():
    with mp.workdps(50):
        for eps, delta in [(EPS, DELTA), (3.0, 1e-5), (0.1, 1e-9), (10.0, 1e-3)]:
            star = _mu_star(eps, delta)
            got = gdp_budget(eps, delta)
            assert got <= star and got >= star * (1 - 1e-9), (eps, delta, got, star)
            assert _gdp_delta(mp.mpf(got), mp.mpf(eps)) <= delta


def test_zcdp_filter_admits_while_the_sum_of_rho_stays_within_the_converted_budget():
    """Issue 9's headline: Gaussian noise sigma = 100 on a count under ApproxDP(1, 1e-6), adaptively."""
    with mp.workdps(50):
        star = _rho_star(EPS, DELTA)
        # continuous Gaussian noise, the zCDP filter asked for: rho_i = 1/(2 sigma^2) = 5e-5
        n = _count(Accountant(ApproxDP(epsilon=EPS, delta=DELTA), filter="zcdp"), GaussianEvent(sigma=100.0))
        assert n == int(mp.floor(star / mp.mpf("5e-5"))) == 487
        # dpkit's Gaussian mechanism (discrete, on a 2^-9 grid: sensitivity 513 units against sigma 51200
        # units, rho = 513^2 / (2 * 51200^2)) chooses the zCDP filter itself, and pays for its rounding
        mech = Gaussian(sensitivity=1, sigma=100)
        rho_m = mp.mpf(float(mech.zcdp().rho))
        assert rho_m >= mp.mpf(513) ** 2 / (2 * mp.mpf(51200) ** 2) * (1 - mp.mpf(10) ** -15)
        acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
        m = _count(acc, mech)
        assert any(line.startswith("zCDP filter") for line in acc.filters)
        assert m * rho_m <= star < (m + 1) * rho_m and m == 485


def test_gdp_filter_admits_while_the_sum_of_mu_squared_stays_within_mu_budget_squared():
    with mp.workdps(50):
        star = _mu_star(EPS, DELTA)
        acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))  # automatic: a GDP item chooses the GDP filter
        n = _count(acc, GaussianEvent(sigma=100.0))
        assert any(line.startswith("GDP filter") for line in acc.filters)
        assert n == int(mp.floor(star**2 / mp.mpf("1e-4"))) == 560
        # and at other noise levels, the count is the paper's floor(mu*^2 / mu_i^2)
        for sigma in (10.0, 31.0):
            n = _count(Accountant(ApproxDP(epsilon=EPS, delta=DELTA)), GaussianEvent(sigma=sigma))
            mu_i = mp.mpf(1) / mp.mpf(sigma)
            assert n * mu_i**2 <= star**2 < (n + 1) * mu_i**2 * (1 + mp.mpf(10) ** -12)


def test_approximate_dp_filter_of_whitehouse_et_al():
    """(eps_i, delta_i) spends under filter="approx": half the budget's delta for the concentration term
    (d'), half for the spends' own deltas (d'')."""
    e_i, d_i = 0.01, 1e-9
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA), filter="approx")
    n = _count(acc, ApproxDP(epsilon=e_i, delta=d_i))
    with mp.workdps(50):
        d1 = mp.mpf(DELTA) / 2

        def fits(k: int) -> bool:
            s = k * mp.mpf(e_i) ** 2
            return mp.sqrt(2 * mp.log(1 / d1) * s) + s / 2 <= EPS and k * mp.mpf(d_i) <= mp.mpf(DELTA) / 2

        assert fits(n) and not fits(n + 1)
    assert n > 3 * int(EPS / e_i)  # more than three times basic composition's 100
    # the delta condition binds when the spends' deltas are large
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA), filter="approx")
    k = _count(acc, ApproxDP(epsilon=1e-4, delta=1e-7))
    half = Fraction(DELTA) / 2  # d'' = delta_B - delta_B / 2, exact in floats
    assert k * Fraction(1e-7) <= half < (k + 1) * Fraction(1e-7) and k in (4, 5)


def test_basic_filter_sums_epsilon_and_delta():
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))  # an (eps, delta) first spend: basic, all of delta
    assert _count(acc, ApproxDP(epsilon=0.0625, delta=1e-7)) == 10  # delta binds: 10 * 1e-7 <= 1e-6
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
    assert _count(acc, ApproxDP(epsilon=0.0625, delta=1e-9)) == 16  # epsilon binds exactly (binary fraction)


def test_the_filter_is_fixed_by_the_first_spend_and_never_rechosen():
    """Choosing among filters after seeing answers would not be valid; the choice is made from the first
    spend (made before any answer exists) and kept: a zCDP-first budget charges later Gaussians their rho,
    never their (cheaper) mu^2, and a GDP-first budget refuses a discrete Gaussian it cannot account for."""
    mech = Gaussian(sensitivity=1, sigma=100)
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
    acc.spend(mech)
    n = _count(acc, GaussianEvent(sigma=100.0))
    assert not any("GDP" in line for line in acc.filters)
    with mp.workdps(50):
        star = _rho_star(EPS, DELTA)
        rho_m = mp.mpf(float(mech.zcdp().rho))
        assert rho_m + n * mp.mpf("5e-5") <= star < rho_m + (n + 1) * mp.mpf("5e-5")
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
    acc.spend(GaussianEvent(sigma=100.0))
    before = acc.spends
    with pytest.raises(UnsupportedError, match="Nothing was spent"):
        acc.spend(mech)
    assert acc.spends == before
    # pure spends beside a GDP filter are charged their GDP level 2 Phi^-1(e^eps / (1 + e^eps))
    acc.spend(PureDP(0.01))
    assert any(line.startswith("GDP filter") for line in acc.filters)


def test_a_refused_first_spend_does_not_fix_the_filter():
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
    with pytest.raises(BudgetExceededError):
        acc.spend(GaussianEvent(sigma=0.1))  # mu = 10: far over the budget
    assert acc.filters == ["automatic: the first spend chooses the filter"]
    acc.spend(Gaussian(sensitivity=1, sigma=100))
    assert any(line.startswith("zCDP filter") for line in acc.filters)
    assert math.isfinite(float(acc.epsilon(DELTA)))


def test_gaussian_dp_budget_compares_mu_squared_exactly():
    """mu = 0.41000000000000003: the float mu * mu rounds up past the exact square.  The budget takes a spend
    of itself (exact sums), and nothing more, however small."""
    from dpkit.guarantees import GaussianDP

    mu = 0.41000000000000003
    assert Fraction(mu * mu) > Fraction(mu) ** 2
    acc = Accountant(GaussianDP(mu))
    acc.spend(GaussianDP(mu))
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        acc.spend(GaussianDP(1e-9))
    acc = Accountant(GaussianDP(mu))
    acc.spend(GaussianDP(0.4))
    left = acc.remaining()
    assert Fraction(0.4) ** 2 + Fraction(float(left.mu)) ** 2 <= Fraction(mu) ** 2


def test_an_epsilon_delta_spend_after_a_pure_first_spend_is_refused_with_what_to_do():
    """The automatic set after a pure first spend is {zCDP with all of delta, basic with none}: an (eps, delta)
    spend cannot be taken by either (the union bound has no delta left for it).  The refusal says so and
    changes nothing; filter="basic" or shares of delta take such sequences."""
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA))
    acc.spend(PureDP(0.25))
    before = (acc.spends, acc.filters)
    with pytest.raises(UnsupportedError, match="filter='basic'.*Nothing was spent|Nothing was spent") as info:
        acc.spend(ApproxDP(epsilon=0.25, delta=2.5e-7))
    assert "filter='basic'" in str(info.value)
    assert (acc.spends, acc.filters) == before
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA), filter="basic")
    acc.spend(PureDP(0.25))
    acc.spend(ApproxDP(epsilon=0.25, delta=2.5e-7), count=2)
    acc = Accountant(ApproxDP(epsilon=EPS, delta=DELTA), filter={"basic": DELTA / 2, "zcdp": DELTA / 2})
    acc.spend(PureDP(0.25))
    acc.spend(ApproxDP(epsilon=0.25, delta=2.5e-7))
    # the zCDP filter stopped at the (eps, delta) spend and stays stopped; basic composition goes on
    assert any(line.endswith("(stopped)") and line.startswith("zCDP") for line in acc.filters)


# ---- several filters side by side: the union-bound argument checked exactly ------------------------------
def _rr_delta(paths: list[tuple[Fraction, Fraction]], eps: float) -> float:
    """delta(eps) between the transcript distributions (both directions), in 50 digits."""
    with mp.workdps(50):
        e = mp.exp(mp.mpf(eps))
        d01 = mp.fsum(max(mp.mpf(0), mp.mpf(p.numerator) / p.denominator - e * mp.mpf(q.numerator) / q.denominator)
                      for p, q in paths)
        d10 = mp.fsum(max(mp.mpf(0), mp.mpf(q.numerator) / q.denominator - e * mp.mpf(p.numerator) / p.denominator)
                      for p, q in paths)
        return float(max(d01, d10))


def _rr(eps: float) -> tuple[Fraction, Fraction]:
    """Randomized response with parameter eps on one bit: P(report the bit) as a fraction, both inputs."""
    p = Fraction(math.exp(eps)) / (1 + Fraction(math.exp(eps)))
    return p, 1 - p


def _transcripts(strategy, depth: int, rule) -> list[tuple[Fraction, Fraction]]:
    """Every transcript of an adaptive analyst against randomized response on input bit 0 versus 1.

    ``strategy(history)`` is the next epsilon; ``rule(state, eps)`` the next filter state or None (refused)."""
    out: list[tuple[Fraction, Fraction]] = []

    def walk(history: tuple, state, p0: Fraction, p1: Fraction) -> None:
        if len(history) == depth:
            out.append((p0, p1))
            return
        eps = strategy(history)
        nxt = rule(state, eps)
        if nxt is None:  # refused: the analyst sees the refusal and goes on
            walk(history + ("R",), state, p0, p1)
            return
        keep, flip = _rr(eps)
        walk(history + (0,), nxt, p0 * keep, p1 * flip)  # reports 0: input 0 kept it, input 1 flipped
        walk(history + (1,), nxt, p0 * flip, p1 * keep)

    walk((), None, Fraction(1), Fraction(1))
    return out


def test_several_filters_side_by_side_stay_within_the_sum_of_their_deltas():
    """The FilterSet rule (a filter that does not admit a spend that runs stops for good) keeps every
    adaptive interaction (eps_B, sum of shares)-DP: checked exactly over random adaptive analysts against
    randomized response.  The rule without stopping (each filter counting only what it admitted) breaks the
    budget on the first sequence tried, so the check can fail."""
    import random

    from dpkit.accounting.filters import FilterSet
    from dpkit.accounting.items import as_item

    eps_b, d = 1.0, 0.05
    menu = (0.9, 0.3, 0.1)
    items = {e: as_item(PureDP(e)) for e in menu}
    start = FilterSet.build(eps_b, d, {"basic": 0.0, "zcdp": d})

    def real(state, eps):
        return (start if state is None else state).admit(items[eps], 1)

    rng = random.Random(20261124)
    worst = 0.0
    for _ in range(40):
        table: dict = {}

        def strategy(history, table=table):
            if history not in table:
                table[history] = rng.choice(menu)
            return table[history]

        worst = max(worst, _rr_delta(_transcripts(strategy, 6, real), eps_b))
    assert 0.0 < worst <= d  # the analysts do reach past pure eps_B = 1 (four spends of 0.3), within delta
    # fixed sequences that use both filters: a large spend then small ones
    seq = (0.9,) + (0.1,) * 11
    assert _rr_delta(_transcripts(lambda h: seq[len(h)], len(seq), real), eps_b) <= d

    # the invalid rule: run a spend if any filter admits it, each filter summing only what it admitted
    def naive(state, eps):
        be, rho = state if state is not None else (Fraction(0), Fraction(0))
        nb = be + Fraction(items[eps].epsilon)
        nr = rho + Fraction(items[eps].rho)
        ok_b, ok_r = nb <= Fraction(eps_b), nr <= Fraction(start.filters[1].limit)
        if not (ok_b or ok_r):
            return None
        return (nb if ok_b else be, nr if ok_r else rho)

    assert _rr_delta(_transcripts(lambda h: seq[len(h)], len(seq), naive), eps_b) > d
