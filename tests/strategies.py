"""Hypothesis strategies shared by dpkit's property tests.

What lives here: random finite probability mass functions (with exact zeros and masses spread
over 300 decades, down to 1e-300), pairs of them on one support, and random Markov kernels
(row-stochastic matrices) for data-processing tests.  Everything is returned as plain float64
NumPy arrays so that a test can build :class:`dpkit.distributions.Finite` objects itself.

Contract:

* every pmf is finite, non-negative, has at least one mass >= 1/(2n) and sums to 1 within
  ~1e-15 (far inside ``Finite``'s 1e-9 tolerance), so ``Finite(p)`` always accepts it;
* masses are either exactly 0 or >= ``TINY`` (1e-300), so they are normal doubles;
* kernel entries are either 0 or >= ``KERNEL_FLOOR / n_out``, so a push-forward ``p @ K`` of a
  pmf from here stays a normal double (>= ~1e-308) and its rounding is relative, never absolute.

Import as ``from strategies import pmfs, pmf_pairs, markov_kernels`` (``tests/conftest.py`` puts
``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "KERNEL_FLOOR",
    "TINY",
    "distinct_pmf_pairs",
    "markov_kernels",
    "pmf_pairs",
    "pmfs",
    "positive_pmf_pairs",
]

#: The smallest positive mass the strategies produce.
TINY = 1e-300
#: Smallest positive kernel weight before the rows are normalised.
KERNEL_FLOOR = 1e-6

# Decimal exponents of the unnormalised weights: hypothesis shrinks towards 0, i.e. towards the
# uniform pmf; the sampled_from branch makes the extremes (1e-300, 1e-200, ...) common.
_EXPONENT = st.one_of(
    st.floats(min_value=-300.0, max_value=0.0, allow_nan=False),
    st.sampled_from([-300.0, -200.0, -100.0, -30.0, -16.0, -8.0, -1.0, 0.0]),
)


def _normalise(w: np.ndarray) -> np.ndarray:
    """Divide by the total (the largest weight is 1, so the total is in [1, n])."""
    return w / np.sum(w)


@st.composite
def _pmf_of_size(draw: st.DrawFn, n: int, *, zeros: bool) -> np.ndarray:
    exps = np.array(draw(st.lists(_EXPONENT, min_size=n, max_size=n)), dtype=np.float64)
    if zeros:
        zero = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    else:
        zero = np.zeros(n, dtype=bool)
    anchor = draw(st.integers(0, n - 1))  # one weight is 1: the pmf has a mass >= 1/n
    exps[anchor] = 0.0
    zero[anchor] = False
    # weights 10^e with e >= -300 are >= 1e-300 before normalising; the total is in [1, n], so a
    # mass can drop below 1e-300 by at most a factor n: clip the exponents to keep masses >= TINY.
    floor = -300.0 + np.log10(n)
    w = np.where(zero, 0.0, 10.0 ** np.maximum(exps, floor))
    return _normalise(w)


def pmfs(*, min_size: int = 1, max_size: int = 8, zeros: bool = True) -> st.SearchStrategy[np.ndarray]:
    """A pmf with between ``min_size`` and ``max_size`` atoms (zeros allowed unless ``zeros=False``)."""
    return st.integers(min_size, max_size).flatmap(lambda n: _pmf_of_size(n, zeros=zeros))


@st.composite
def pmf_pairs(
    draw: st.DrawFn, *, min_size: int = 1, max_size: int = 8, zeros: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Two pmfs on one support of between ``min_size`` and ``max_size`` atoms.

    A quarter of the draws make the second pmf a small perturbation of the first (mixing in
    a fraction in [1e-12, 1e-1] of another pmf), so near-equal pairs, where cancellation bites,
    are common; another eighth return two equal pmfs.
    """
    n = draw(st.integers(min_size, max_size))
    p = draw(_pmf_of_size(n, zeros=zeros))
    shape = draw(st.sampled_from(["independent"] * 5 + ["perturbed"] * 2 + ["equal"]))
    if shape == "equal":
        return p, p.copy()
    other = draw(_pmf_of_size(n, zeros=zeros))
    if shape == "perturbed":
        t = 10.0 ** draw(st.floats(min_value=-12.0, max_value=-1.0))
        q = (1.0 - t) * p + t * other
        # keep every positive mass a normal double >= TINY (raising one costs < 1e-299 of mass)
        q = _normalise(np.where(q > 0, np.maximum(q, TINY), 0.0))
        return p, q
    return p, other


def positive_pmf_pairs(*, min_size: int = 1, max_size: int = 8) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Pairs with every mass positive (so every divergence between them is finite)."""
    return pmf_pairs(min_size=min_size, max_size=max_size, zeros=False)


def distinct_pmf_pairs(
    *, min_size: int = 2, max_size: int = 8, gap: float = 1e-6
) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Pairs that differ by at least ``gap`` at some atom (``max |p - q| >= gap``)."""
    return pmf_pairs(min_size=min_size, max_size=max_size).filter(
        lambda pq: float(np.max(np.abs(pq[0] - pq[1]))) >= gap
    )


@st.composite
def markov_kernels(draw: st.DrawFn, n_in: int, *, max_out: int = 6) -> np.ndarray:
    """A row-stochastic ``n_in x n_out`` matrix (``1 <= n_out <= max_out``); zeros allowed.

    Row ``i`` is the law of the output given input ``i``.  Positive entries are >=
    ``KERNEL_FLOOR / n_out``; the diagonal-like cases (each row a point mass: a deterministic
    map, possibly merging inputs) are drawn often, since they are where data processing is tight.
    """
    n_out = draw(st.integers(1, max_out))
    deterministic = draw(st.booleans())
    if deterministic:
        targets = draw(hnp.arrays(np.int64, n_in, elements=st.integers(0, n_out - 1)))
        k = np.zeros((n_in, n_out))
        k[np.arange(n_in), targets] = 1.0
        return k
    exps = draw(hnp.arrays(np.float64, (n_in, n_out), elements=st.floats(np.log10(KERNEL_FLOOR), 0.0)))
    zero = draw(hnp.arrays(np.bool_, (n_in, n_out)))
    anchor = draw(hnp.arrays(np.int64, n_in, elements=st.integers(0, n_out - 1)))
    zero[np.arange(n_in), anchor] = False
    exps[np.arange(n_in), anchor] = 0.0
    w = np.where(zero, 0.0, 10.0**exps)
    return w / np.sum(w, axis=1, keepdims=True)
