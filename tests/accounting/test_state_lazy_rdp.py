"""The subsampled Gaussian's Rényi curve is computed on first read, and the state's Rényi sum with it.

A PLD-only answer never sums the series; whenever the curve is read, item and state give exactly the floats
the eager computation gave (the same operations in the same order), on every snapshot, branched or not.
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from dpkit.accounting.dpsgd import DPSGDStep
from dpkit.accounting.items import (ORDERS, GaussianEvent, LaplaceEvent, PrivacyItem, SubsampledEvent, _dpsgd_rdp,
                                    as_item)
from dpkit.accounting.state import AccountingState, _rdp_add
from dpkit.guarantees import ZCDP, PureDP


def _eager(entries: list[tuple[PrivacyItem, int]]) -> np.ndarray:
    acc = np.zeros(len(ORDERS))
    for it, k in entries:
        acc = _rdp_add(acc, k, it.rdp)
    return acc


def _mixed(seed: int) -> list[tuple[object, int]]:
    rng = np.random.default_rng(seed)
    out: list[tuple[object, int]] = []
    for _ in range(40):
        r = int(rng.integers(5))
        x: object
        if r == 0:
            x = DPSGDStep(sigma=float(rng.uniform(0.8, 2.0)), sampling_rate=0.01, steps=int(rng.integers(1, 4)))
        elif r == 1:
            x = SubsampledEvent(noise=GaussianEvent(sigma=float(rng.uniform(0.8, 2.0))), sampling_rate=0.02)
        elif r == 2:
            x = GaussianEvent(sigma=float(rng.uniform(1.0, 5.0)))
        elif r == 3:
            x = PureDP(float(rng.uniform(0.1, 1.0)))
        else:
            x = ZCDP(float(rng.uniform(0.01, 0.1)))
        out.append((x, int(rng.integers(1, 50))))
    return out


def test_a_subsampled_gaussian_item_sums_its_curve_only_when_read() -> None:
    _dpsgd_rdp.cache_clear()
    it = as_item(DPSGDStep(sigma=1.3, sampling_rate=0.01, steps=2))
    ev = as_item(SubsampledEvent(noise=GaussianEvent(sigma=1.1), sampling_rate=0.02))
    assert not it.rdp_ready and not ev.rdp_ready
    s = AccountingState().add(it, count=1000).add(ev, count=1000).add(LaplaceEvent(scale=20.0), count=1000)
    e = s.epsilon(1e-5, method="pld")
    assert float(e.lower_bound) <= float(e)
    assert not it.rdp_ready and not ev.rdp_ready and _dpsgd_rdp.cache_info().currsize == 0
    assert np.all(np.isfinite(s.rdp)) and it.rdp_ready and ev.rdp_ready  # read now: computed
    assert not it.rdp.flags.writeable and not s.rdp.flags.writeable


@pytest.mark.parametrize("seed", [0, 1])
def test_the_lazy_sums_are_the_eager_floats_on_every_snapshot(seed: int) -> None:
    seq = _mixed(seed)
    lazy_states, s = [], AccountingState()
    for x, k in seq:
        s = s.add(x, count=k)
        lazy_states.append(s)
    eager_items = [(as_item(x), k) for x, k in seq]
    for it, _ in eager_items:
        _ = it.rdp  # computed before adding: the state sums eagerly
    t = AccountingState()
    for it, k in eager_items:
        t = t.add(it, count=k)
    assert np.array_equal(t.rdp, _eager(eager_items))
    # snapshots read out of order, and a branch from an older one
    branch = lazy_states[10].add(DPSGDStep(sigma=1.7, sampling_rate=0.01), count=7)
    for i in (39, 3, 20, 10):
        assert np.array_equal(lazy_states[i].rdp, _eager(eager_items[: i + 1]))
    expect = _eager(eager_items[:11] + [(as_item(DPSGDStep(sigma=1.7, sampling_rate=0.01)), 7)])
    assert np.array_equal(branch.rdp, expect)
    assert float(lazy_states[-1].epsilon(1e-6, method="rdp")) == float(t.epsilon(1e-6, method="rdp"))
    assert lazy_states[-1].families() == t.families()


def test_a_read_sum_makes_the_next_additions_eager_again() -> None:
    s = AccountingState().add(DPSGDStep(sigma=1.0, sampling_rate=0.01), count=3)
    assert isinstance(s._rdp, tuple)  # pending: the item's curve is unread
    _ = s.rdp
    s2 = s.add(GaussianEvent(sigma=2.0))
    assert isinstance(s2._rdp, np.ndarray)  # the parent's sum was read: summed at add time


def test_copies_pickles_and_replace_keep_the_curve() -> None:
    it = as_item(DPSGDStep(sigma=1.2, sampling_rate=0.05, steps=3))
    back = pickle.loads(pickle.dumps(it))
    other = dataclasses.replace(it, label="renamed")
    assert back == it and not back.rdp_ready and not other.rdp_ready and other.label == "renamed"
    assert np.array_equal(back.rdp, it.rdp) and np.array_equal(other.rdp, it.rdp)
    given = dataclasses.replace(it, rdp_curve=np.full(len(ORDERS), 1.0))
    assert given.rdp_ready and np.all(given.rdp == 1.0)
    s = AccountingState().add(it, count=2)
    s_back = pickle.loads(pickle.dumps(s))
    assert np.array_equal(s_back.rdp, s.rdp)
