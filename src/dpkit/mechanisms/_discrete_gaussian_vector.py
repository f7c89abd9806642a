r"""The privacy profile of the discrete Gaussian mechanism on integer vectors with an l2 sensitivity.

The problem
-----------
``x + Y`` with :math:`Y_1, \dots, Y_d` independent :math:`N_{\mathbb Z}(0, \sigma^2)` and integer
vectors x, x' whose difference v satisfies :math:`\|v\|_2 \le \Delta`.  The worst pair of
neighbours is *not* the one-dimensional pair :math:`N_{\mathbb Z}(0) / N_{\mathbb Z}(\Delta)`:
for :math:`\Delta = 2`, :math:`\sigma = 0.816`, d = 4 the shift (1, 1, 1, 1) has
:math:`\delta(12) = 2.44 \cdot 10^{-5}` against :math:`10^{-5}` for the shift (2, 0, 0, 0)
(issue 14, item 8).  Unlike the continuous Gaussian, the discrete one is not rotation invariant.

The exact worst case
--------------------
For the shift v the privacy loss at the output :math:`x + k` is

.. math:: L(k) = \ln\frac{\prod_i p(k_i)}{\prod_i p(k_i - v_i)}
   = \frac{\|v\|^2 - 2\langle k, v\rangle}{2\sigma^2},

a sum of independent per-coordinate losses (the normaliser of :math:`N_{\mathbb Z}` does not depend
on an integer shift), so it is a decreasing function of :math:`S = \langle k, v\rangle =
\sum_i v_i k_i` alone, and :math:`\delta_v(\varepsilon) = \mathbb E[(1 - e^{\varepsilon - L})_+]`
is a sum over the integer values of S.  The pair is symmetric (the reflection :math:`k \mapsto v - k`
swaps its two laws), so one direction suffices.

*Which shifts.*  The law of S does not change when entries of v change sign or are permuted (the
:math:`k_i` are i.i.d. and symmetric), so each shift is represented by its nonincreasing tuple of
nonzero magnitudes.  Appending a coordinate cannot lower the hockey-stick divergence (the shorter
shift's pair is the marginal of the longer one's, and the hockey-stick divergence, an f-divergence,
cannot grow under post-processing), so only *maximal* tuples are
needed: those with d entries, or with :math:`\sum w_i^2 = N`, where :math:`N = \lfloor\Delta^2\rfloor`
is the largest squared norm of an integer shift (computed exactly, and rounded *up* where
:math:`\Delta^2` lies within a relative :math:`2^{-40}` below an integer, so
``sensitivity=math.sqrt(3)`` covers the shift (1, 1, 1)).  They are the partitions of N into at
most d squares, plus those with exactly d parts and a smaller sum; ``shift_classes`` enumerates
them (N = 4: 2 classes; N = 25: 19; N = 100: 1116).  The reported profile is the maximum over
them, so it is the **exact** worst case over every integer shift (up to the certified rounding
below), not a bound from a different pair.

*How each class is summed.*  The law of S is the convolution of the laws of :math:`w_i Y_i`, each
:math:`N_{\mathbb Z}(0, \sigma^2)` truncated to :math:`|k| \le K` and renormalised (which can
only raise each kept mass), with :math:`K` chosen so that the mass beyond K is below
:math:`10^{-60}` (geometric tail bound on :math:`e^{-k^2/(2\sigma^2)}`); the dropped mass of the
r coordinates adds at most :math:`r\tau` to :math:`\delta`, which is added.  Convolutions are
direct sums of non-negative terms (no FFT), so every computed mass has a small *relative* error;
the loss is rounded up before :math:`-\mathrm{expm1}(\varepsilon - L)` is taken (a larger loss
can only raise the term), and the sum is multiplied by :math:`1 + \eta` with :math:`\eta` the
first-order rounding bound of all those operations (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., §3.1, :math:`\gamma_n`).  The result is an upper bound on the exact
:math:`\delta_v(\varepsilon)` within a relative :math:`10^{-9}` or so.

*When that is too costly* (more than ``MAX_CLASSES`` classes, or convolutions beyond
``MAX_WORK`` multiply-adds or ``MAX_SUPPORT`` values of S for some class), the profile is the one
implied by zCDP, :math:`\rho = N/(2\sigma^2)`: each coordinate's Rényi divergence is at most
:math:`\alpha w_i^2/(2\sigma^2)` (the one-dimensional bound behind CKS 2020's zCDP theorem, cited in
dpkit as Thm 14; it holds because the theta function is largest at integer arguments), and Rényi
divergences of independent coordinates add (Mironov 2017, Prop 1); it is converted with CKS 2020,
Cor 13.  That is always a valid upper bound, and the profile reported is the smaller of it and the
exact maximum where both are available (both are upper bounds on the true worst case).

References
----------
Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy", arXiv
2004.00010v5: Thm 7 (one-dimensional profile, the cross-check of the one-entry classes), Thm 14
(zCDP), Cor 13 (zCDP to (ε, δ)); their multivariate (ε, δ) statements are not used here.  Mironov
2017, "Rényi Differential Privacy", arXiv 1702.07476v3, Prop 1 (Rényi divergences add under
composition).  Dwork & Roth 2014, Prop 2.1 (post-processing).  The brute-force check over every
integer shift is ``tests/mechanisms/test_discrete_gaussian_vector.py``.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
from dpkit._math.bisection import bisect_monotone
from dpkit.errors import InvalidArgumentError

#: More shift classes than this: use the zCDP profile (N = 100 has 1116 classes, N = 200 has 27482).
MAX_CLASSES = 2_000
#: Multiply-adds of the convolutions of one class above this: that class is not summed exactly.
MAX_WORK = 40_000_000
#: Support points of S above this (memory): the class is not summed exactly.
MAX_SUPPORT = 2_000_000
#: Mass of N_Z(0, sigma^2) beyond the truncation K, per coordinate (an upper bound).
TAIL = 1e-60
_U = 2.0**-53


def max_square_norm(sensitivity: float) -> int:
    r"""The largest :math:`\|v\|_2^2` of an integer vector with :math:`\|v\|_2 \le \Delta`.

    :math:`\lfloor\Delta^2\rfloor` computed exactly from the float, except that a :math:`\Delta^2`
    within a relative :math:`2^{-40}` below an integer counts as that integer (``math.sqrt(3)``
    squares to 2.9999999999999996; rounding that down would drop the shift (1, 1, 1)).

    >>> max_square_norm(2.0), max_square_norm(math.sqrt(3)), max_square_norm(1.5)
    (4, 3, 2)
    """
    square = Fraction(sensitivity) ** 2
    return math.floor(square * (1 + Fraction(1, 2**40)))


def shift_classes(n: int, dimension: int, cap: int | None = None) -> list[tuple[int, ...]] | None:
    """The maximal shift classes: nonincreasing positive tuples, at most ``dimension`` long, with
    sum of squares <= n, and either ``dimension`` long or with sum of squares exactly n.

    ``None`` if there are more than ``cap`` (default ``MAX_CLASSES``) of them.

    >>> shift_classes(4, 4)
    [(1, 1, 1, 1), (2,)]
    >>> shift_classes(4, 2)
    [(1, 1), (2,)]
    """
    out: list[tuple[int, ...]] = []
    limit = MAX_CLASSES if cap is None else cap

    def extend(prefix: list[int], remaining: int, largest: int) -> bool:
        if len(prefix) == dimension or remaining == 0 or largest == 0:
            if prefix and (len(prefix) == dimension or remaining == 0):
                out.append(tuple(prefix))
                if len(out) > limit:
                    return False
            return True
        for w in range(min(largest, math.isqrt(remaining)), 0, -1):
            prefix.append(w)
            ok = extend(prefix, remaining - w * w, w)
            prefix.pop()
            if not ok:
                return False
        return True

    if not extend([], n, math.isqrt(n)):
        return None
    return sorted(out)


def _truncation(sigma: float) -> int:
    """Smallest K >= 1 with 2 e^{-(K+1)^2/(2 s^2)} / (1 - e^{-(2K+3)/(2 s^2)}) <= TAIL."""
    two_s2 = 2.0 * sigma * sigma
    k = max(1, math.ceil(sigma * math.sqrt(2.0 * math.log(2.0 / TAIL))))
    while True:
        ratio = -math.expm1(-(2 * k + 3) / two_s2)
        if ratio > 0 and math.log(2.0) - (k + 1) ** 2 / two_s2 - math.log(ratio) <= math.log(TAIL):
            return k
        k += 1


def work(w: tuple[int, ...], sigma: float) -> float:
    """Multiply-adds of the convolutions that sum the class ``w`` (see :class:`ClassSum`)."""
    length = 2 * _truncation(sigma) + 1
    total, size = 0.0, 1.0
    for value, m in Counter(w).items():
        block = 1.0
        for _ in range(m - 1):
            total += block * length * length
            block += 1.0
        block_len = (m * (length - 1)) * value + 1
        total += size * block_len
        size += block_len - 1
    return total


def support(w: tuple[int, ...], sigma: float) -> int:
    """The number of integers S can take in :class:`ClassSum` (its arrays' length)."""
    return 2 * _truncation(sigma) * sum(w) + 1


class ClassSum:
    r"""The law of :math:`S = \sum_i w_i Y_i` for one class ``w``, and its
    :math:`\delta(\varepsilon)` as a certified upper bound (module docstring)."""

    def __init__(self, w: tuple[int, ...], sigma: float) -> None:
        k = _truncation(sigma)
        arg_max = k * k / (2.0 * sigma * sigma)  # the largest exponent, ~ ln(2 / TAIL)
        ks = np.arange(-k, k + 1, dtype=np.float64)
        base = np.exp(-(ks * ks) / (2.0 * sigma * sigma))
        base /= float(base.sum())  # renormalised truncation: every kept mass is >= the true one
        law = np.ones(1)
        offset = 0  # law[j] = P(S = offset + j)
        convolutions, longest = 0, 1
        for value, m in sorted(Counter(w).items()):
            block = base
            for _ in range(m - 1):
                block = np.convolve(block, base)
                convolutions, longest = convolutions + 1, max(longest, base.size)
            dilated = np.zeros((block.size - 1) * value + 1)
            dilated[::value] = block
            longest = max(longest, min(law.size, dilated.size))
            law = np.convolve(law, dilated)
            convolutions += 1
            offset -= m * k * value
        self.w = w
        self.sigma = sigma
        self.norm2 = sum(x * x for x in w)
        self.law = law
        self.support = offset + np.arange(law.size, dtype=np.float64)
        self.loss = (self.norm2 - 2.0 * self.support) / (2.0 * sigma * sigma)  # decreasing in S
        self.loss_up = np.where(self.loss > 0, self.loss * (1.0 + 8.0 * _U), self.loss)
        # truncated mass of the r coordinates, and products that underflowed to 0 (each < 2^-1022)
        self.tail = len(w) * TAIL + law.size * 2.0**-1000
        # first-order relative rounding (gamma_n bounds, Higham §3.1), doubled for the second order:
        # each kept mass: the exponent's error (2u relative, so 2u arg_max absolute), exp, the
        # normalising sum of 2k+1 terms and the division; each of the r factors of a product
        # carries it.  Each convolution: sums of at most `longest` non-negative products.  The
        # final sum of law.size terms, each a product with expm1.
        per_mass = 2.0 * arg_max + 2.0 * k + 6.0
        self.eta = 2.0 * _U * (len(w) * per_mass + convolutions * (longest + 2) + law.size + 4)

    def delta(self, epsilon: float) -> float:
        """An upper bound on :math:`\\delta_w(\\varepsilon)` (module docstring)."""
        j = int(np.searchsorted(-self.loss_up, -epsilon, side="left"))  # entries 0..j-1: loss_up > eps
        if j == 0:
            return min(1.0, self.tail)
        terms = self.law[:j] * -np.expm1(epsilon - self.loss_up[:j])
        return min(1.0, float(terms.sum()) * (1.0 + self.eta) + self.tail)


class WorstShiftProfile:
    r"""The worst-case :math:`\delta(\varepsilon)` over every integer shift with
    :math:`\|v\|_2^2 \le N` in ``dimension`` coordinates, for one sigma (module docstring).

    ``exact`` says whether every class was summed (else the zCDP profile alone is used).
    """

    def __init__(self, n: int, dimension: int, sigma: float) -> None:
        from dpkit.guarantees import ZCDP
        from dpkit.guarantees.conversions import zcdp_to_profile

        self.n, self.dimension, self.sigma = n, dimension, sigma
        self.rho = n / (2.0 * sigma * sigma)
        while n / (2.0 * sigma * sigma) > self.rho:  # pragma: no cover - rounding guard
            self.rho = math.nextafter(self.rho, math.inf)
        self.zcdp_profile = zcdp_to_profile(ZCDP(self.rho))
        classes = shift_classes(n, dimension)
        self.classes = classes
        self.exact = classes is not None and all(
            work(w, sigma) <= MAX_WORK and support(w, sigma) <= MAX_SUPPORT for w in classes)
        self._sums: dict[tuple[int, ...], ClassSum] = {}
        self._order: list[tuple[int, ...]] = list(classes or [])
        self._epsilons: dict[float, float] = {}

    def _class_delta(self, w: tuple[int, ...], epsilon: float) -> float:
        if w not in self._sums:
            self._sums[w] = ClassSum(w, self.sigma)
        return self._sums[w].delta(epsilon)

    def exact_delta(self, epsilon: float, stop_above: float = math.inf) -> float:
        """The maximum over the classes (``inf`` if not ``exact``); stops once above ``stop_above``."""
        if not self.exact:
            return math.inf
        worst = 0.0
        for i, w in enumerate(self._order):
            d = self._class_delta(w, epsilon)
            if d > worst:
                worst = d
                if worst > stop_above:  # try this class first next time
                    self._order.insert(0, self._order.pop(i))
                    break
        return worst

    def zcdp_delta(self, epsilon: float) -> float:
        return float(self.zcdp_profile.delta(epsilon))

    def delta(self, epsilon: float) -> float:
        """An upper bound on the worst-case delta: the smaller of the exact maximum and the zCDP one."""
        return min(self.zcdp_delta(epsilon), self.exact_delta(epsilon))

    def meets(self, epsilon: float, delta: float) -> bool:
        """Whether ``delta(epsilon) <= delta`` (cheapest test first)."""
        if self.zcdp_delta(epsilon) <= delta:
            return True
        return self.exact_delta(epsilon, stop_above=delta) <= delta

    def epsilon(self, delta: float) -> float:
        """The smallest epsilon (upper end of a bisection bracket) with ``delta(epsilon) <= delta``."""
        if delta not in self._epsilons:
            self._epsilons[delta] = self._epsilon(delta)
        return self._epsilons[delta]

    def _epsilon(self, delta: float) -> float:
        eps_z = float(self.zcdp_profile.epsilon(delta))
        # the conversion's epsilon and delta functions can disagree in the last bits: step up until
        # this profile's own delta (which uses the delta function) confirms it
        steps = 0
        while self.zcdp_delta(eps_z) > delta:
            eps_z = math.nextafter(eps_z, math.inf) if steps < 64 else eps_z * (1.0 + 1e-12)
            steps += 1
        if not self.exact or self.exact_delta(eps_z) > delta:
            return eps_z
        if self.exact_delta(0.0) <= delta:
            return 0.0
        # exact_delta(0) > delta >= exact_delta(eps_z), down to adjacent doubles; the upper end meets delta
        return bisect_monotone(lambda e: self.exact_delta(e) <= delta, 0.0, eps_z, side="upper", rtol=0.0)


def per_class_deltas(n: int, dimension: int, sigma: float, epsilon: float) -> dict[tuple[int, ...], float]:
    """Every class's delta(epsilon) (for tests and the docs; raises if there are too many classes)."""
    profile = WorstShiftProfile(n, dimension, sigma)
    if profile.classes is None:
        raise InvalidArgumentError(f"more than {MAX_CLASSES} shift classes for N={n}, dimension={dimension}.")
    return {w: profile._class_delta(w, epsilon) for w in profile.classes}
