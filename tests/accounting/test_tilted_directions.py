"""The worst of several directions (:func:`dpkit.accounting._tilted_solve.epsilon_bounds`): the direction
computed first is picked by an estimate, and the others are only checked against its upper end, so the interval
must not depend on that pick: with the estimate reversed (the better direction first) the interval still
contains the worst direction's epsilon and is about as narrow (the worst direction's own lower end is taken)."""

from __future__ import annotations

import pytest

from dpkit.accounting import _tilted_solve
from dpkit.accounting._tilted_laws import LawSpec

DELTA = 1e-5
MU, Q, K = 1.0 / 0.9, 0.05, 200
REMOVE = [(LawSpec("remove", MU, Q), K)]
ADD = [(LawSpec("add", MU, Q), K)]


def _own(parts: list[tuple[LawSpec, int]]) -> tuple[float, float]:
    _tilted_solve.clear_caches()
    return _tilted_solve.epsilon_bounds([parts], DELTA)


def test_directions_in_either_order_give_one_interval() -> None:
    r_lo, r_hi = _own(REMOVE)
    a_lo, a_hi = _own(ADD)
    assert r_lo > a_hi  # the removal direction is the worst here
    _tilted_solve.clear_caches()
    one = _tilted_solve.epsilon_bounds([REMOVE, ADD], DELTA)
    _tilted_solve.clear_caches()
    other = _tilted_solve.epsilon_bounds([ADD, REMOVE], DELTA)
    assert one == other == (r_lo, r_hi)


def test_a_wrong_pick_still_ends_on_the_worst_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    r_lo, r_hi = _own(REMOVE)
    # the estimate reversed: the addition direction (the better one) is computed first, the removal direction
    # fails the check against its upper end, and its own interval replaces it
    monkeypatch.setattr(_tilted_solve, "_estimate", lambda parts, ld: 1.0 if parts is ADD else 0.0)
    _tilted_solve.clear_caches()
    lo, hi = _tilted_solve.epsilon_bounds([REMOVE, ADD], DELTA)
    # the removal direction's interval on the addition direction's grid: another certified interval on the same
    # epsilon, as narrow as its own
    assert lo <= r_hi and hi >= r_lo
    assert (hi - lo) / hi <= max(1.5 * (r_hi - r_lo) / r_hi, _tilted_solve.TARGET_WIDTH), (lo, hi, r_lo, r_hi)
