"""Finite distributions: an explicit probability vector over an explicit support.

Contract: probabilities are finite, non-negative and sum to 1 within 1e-9; nothing is normalised
for you (a pmf that is off by more raises :class:`ValueError`).  The support may be numbers (then
cdf, quantile, mean, variance and Wasserstein distances are defined) or any hashable labels.
Masses may be as small as the smallest positive double (~5e-324); all divergence computations on
finite distributions work in log space.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np
from numpy.typing import ArrayLike

from dpkit._value import Lazy, value_object
from dpkit.distributions._base import Array, DiscreteDistribution, as_array, check_size
from dpkit.random import resolve_rng
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["Finite", "align"]

#: Tolerance on the total mass of a pmf.
MASS_TOLERANCE = 1e-9


@value_object(init=False)
class Finite(DiscreteDistribution):
    r"""A probability mass function over an explicit finite support.

    Parameters
    ----------
    probabilities : array_like of float
        Finite, >= 0, summing to 1 within 1e-9 (not normalised for you).
    support : array_like, optional
        Distinct labels, one per probability; numbers or any hashable values.  Defaults to
        ``0, 1, ..., n-1``.

    Raises
    ------
    ValueError
        Negative, NaN or infinite probabilities; a total mass off 1 by more than 1e-9; a support
        of the wrong length or with repeated labels; an empty vector.

    Examples
    --------
    >>> F = Finite([0.5, 0.3, 0.2], support=[0, 1, 2])
    >>> round(F.mean, 12)
    0.7

    Two ``Finite`` are equal when their masses and labels are, in the same order.
    """

    probabilities: Array  # read-only
    support: np.ndarray  # read-only
    _numeric: bool = field(repr=False, compare=False)  # whether the support labels are numbers
    # (sorted numeric support, cumulative masses), built on first use (see _sorted)
    _order: Lazy[tuple[Array, Array]] = field(repr=False, compare=False)

    def __init__(self, probabilities: ArrayLike, support: ArrayLike | None = None) -> None:
        p = np.array(probabilities, dtype=np.float64, copy=True).reshape(-1)
        if p.size == 0:
            raise InvalidArgumentError("probabilities must not be empty.")
        if not np.all(np.isfinite(p)):
            bad = int(np.flatnonzero(~np.isfinite(p))[0])
            raise InvalidArgumentError(f"probabilities must be finite; entry {bad} is {p[bad]}.")
        if np.any(p < 0):
            bad = int(np.flatnonzero(p < 0)[0])
            raise InvalidArgumentError(f"probabilities must be >= 0; entry {bad} is {p[bad]}.")
        total = float(np.sum(p))
        if abs(total - 1.0) > MASS_TOLERANCE:
            raise InvalidArgumentError(
                f"probabilities must sum to 1 within {MASS_TOLERANCE:g}; they sum to {total!r}. "
                "dpkit does not normalise silently: divide by the sum yourself if that is what you mean."
            )
        if support is None:
            s = np.arange(p.size, dtype=np.int64)
        else:
            s = np.asarray(support)
            if s.ndim != 1:
                s = np.array(list(support), dtype=object)  # type: ignore[arg-type]  # ArrayLike: a 0-d support raises TypeError
            if s.shape[0] != p.size:
                raise InvalidArgumentError(f"support has {s.shape[0]} labels but there are {p.size} probabilities.")
            if np.unique(s).size != s.size:
                raise InvalidArgumentError("support labels must be distinct.")
        p.setflags(write=False)
        s.setflags(write=False)
        object.__setattr__(self, "probabilities", p)
        object.__setattr__(self, "support", s)
        object.__setattr__(self, "_numeric", bool(np.issubdtype(s.dtype, np.number)))
        object.__setattr__(self, "_order", Lazy())

    def __len__(self) -> int:
        return int(self.probabilities.size)

    def __repr__(self) -> str:
        if self.probabilities.size <= 6:
            return f"Finite(probabilities={self.probabilities.tolist()!r}, support={self.support.tolist()!r})"
        return f"Finite(n={self.probabilities.size!r})"

    def _key(self) -> tuple[bytes, bytes | tuple[object, ...]]:
        return (self.probabilities.tobytes(), self.support.tobytes() if self._numeric else tuple(self.support))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Finite) or type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def log_probabilities(self) -> Array:
        """Natural logs of the masses (``-inf`` for zero masses)."""
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities)

    def _require_numeric(self, what: str) -> None:
        if not self._numeric:
            raise ArgumentTypeError(
                f"{what} needs a numeric support; this support has labels of type {self.support.dtype}."
            )

    def _sorted(self) -> tuple[Array, Array]:
        self._require_numeric("this operation")
        return self._order.get(self._build_sorted)

    def _build_sorted(self) -> tuple[Array, Array]:
        order = np.argsort(self.support, kind="stable")
        xs = self.support[order].astype(np.float64)
        cum = np.cumsum(self.probabilities[order])
        xs.flags.writeable = False  # cached on a value object: read-only like its masses
        cum.flags.writeable = False
        return (xs, cum)

    def index_of(self, x: ArrayLike) -> np.ndarray:
        """Positions of the labels ``x`` in the support (-1 where absent)."""
        xs = np.asarray(x)
        if self._numeric:
            order = np.argsort(self.support, kind="stable")
            sorted_support = self.support[order]
            pos = np.clip(np.searchsorted(sorted_support, xs), 0, sorted_support.size - 1)
            hit = sorted_support[pos] == xs
            return np.where(hit, order[pos], -1)
        lookup = {label: i for i, label in enumerate(self.support.tolist())}
        flat = [lookup.get(v, -1) for v in np.atleast_1d(xs).tolist()]
        return np.asarray(flat, dtype=np.int64).reshape(np.shape(xs))

    def log_density(self, x: ArrayLike) -> Array:
        idx = self.index_of(x)
        logp = self.log_probabilities
        return np.where(idx >= 0, logp[np.maximum(idx, 0)], -np.inf)

    def cdf(self, x: ArrayLike) -> Array:
        xs, cum = self._sorted()
        pos = np.searchsorted(xs, as_array(x), side="right")
        return np.where(pos > 0, cum[np.maximum(pos - 1, 0)], 0.0)

    def quantile(self, u: ArrayLike) -> Array:
        xs, cum = self._sorted()
        arr = as_array(u)
        if not np.all((arr >= 0) & (arr <= 1)):
            raise InvalidArgumentError("quantile levels u must lie in [0, 1] (NaN is refused).")
        pos = np.minimum(np.searchsorted(cum, arr, side="left"), xs.size - 1)
        return xs[pos]

    @property
    def mean(self) -> float:
        self._require_numeric("mean")
        return float(np.dot(self.probabilities, self.support.astype(np.float64)))

    @property
    def variance(self) -> float:
        x = self.support.astype(np.float64)
        m = self.mean
        return float(np.dot(self.probabilities, (x - m) ** 2))

    @property
    def support_bounds(self) -> tuple[float, float]:
        xs, _ = self._sorted()
        live = xs[self.probabilities[np.argsort(self.support, kind="stable")] > 0]
        return (float(live[0]), float(live[-1]))

    def sample(self, size: int | tuple[int, ...] = 1, *, rng: np.random.Generator | None = None) -> np.ndarray:
        gen = resolve_rng(rng)
        cum = np.cumsum(self.probabilities)
        u = gen.random(check_size(size)) * cum[-1]
        idx = np.minimum(np.searchsorted(cum, u, side="right"), cum.size - 1)
        drawn: np.ndarray = self.support[idx]
        return drawn

    def extend_to(self, support: ArrayLike) -> Finite:
        """The same law on a larger support (the new labels get mass 0).

        >>> Finite([1.0], support=["a"]).extend_to(["a", "b"]).probabilities.tolist()
        [1.0, 0.0]
        """
        new = np.asarray(support)
        idx = Finite(np.full(new.shape[0], 1.0 / new.shape[0]), support=new).index_of(self.support)
        if np.any(idx < 0):
            missing = self.support[idx < 0][:3].tolist()
            raise InvalidArgumentError(f"the new support must contain the old one; missing e.g. {missing}.")
        p = np.zeros(new.shape[0])
        p[idx] = self.probabilities
        return Finite(p, support=new)


def align(P: Finite, Q: Finite, *, extend: bool = False) -> tuple[Array, Array, np.ndarray]:
    """Return the two probability vectors on one common support order.

    With identical supports (the fast path) nothing is copied.  Supports that contain the same
    labels in another order are reordered.  Supports with different labels raise
    :class:`ValueError` unless ``extend=True``, which places both on the union (the missing labels
    get mass 0).

    >>> p, q, s = align(Finite([0.5, 0.5], support=[0, 1]), Finite([0.2, 0.8], support=[1, 0]))
    >>> q.tolist()
    [0.8, 0.2]
    """
    if P.support.shape == Q.support.shape and np.array_equal(P.support, Q.support):
        return P.probabilities, Q.probabilities, P.support
    if P.support.size == Q.support.size:
        idx = Q.index_of(P.support)
        if np.all(idx >= 0):
            return P.probabilities, Q.probabilities[idx], P.support
    if not extend:
        raise InvalidArgumentError(
            "the two distributions have different supports; divergences need a common domain. "
            "Pass both through dpkit.distributions.align(P, Q, extend=True) or "
            "P.extend_to(union) to place them on the union with explicit zero masses."
        )
    union = np.union1d(P.support, Q.support) if P._numeric and Q._numeric else np.array(
        list(dict.fromkeys(P.support.tolist() + Q.support.tolist())), dtype=object
    )
    return P.extend_to(union).probabilities, Q.extend_to(union).probabilities, union


