r"""Dwork & Roth 2014, Lemmas 3.17-3.19 (seeds 000/003) as functions that can be checked.

What lives here, and what each function promises:

* :func:`lemma_3_17_construct` (Lemma 3.17, part 1, "only if"): given finite Y, Z with
  :math:`D^\delta_\infty(Y\|Z)\le\varepsilon`, an explicit Y' with :math:`\Delta(Y,Y')\le\delta` and
  :math:`D_\infty(Y'\|Z)\le\varepsilon`.
* :func:`lemma_3_17_two_sided` (Lemma 3.17, part 2, in the corrected two-sided form): a linear
  program that finds Y', Z' within statistical distance :math:`\delta/(e^\varepsilon+1)` of Y, Z
  with :math:`D_\infty(Y'\|Z')\le\varepsilon` **and** :math:`D_\infty(Z'\|Y')\le\varepsilon`, or
  reports that none exist.  The seed states only the first max-divergence condition; with it
  alone the "if" direction is false (docs/notes.md §3; the test suite carries the
  counterexample).
* :func:`lemma_3_18_bound` (the seed's :math:`\varepsilon(e^\varepsilon-1)`) and
  :func:`kl_bound_tight` (:math:`\varepsilon\tanh(\varepsilon/2)`, attained by randomized response)
  bound the KL divergence of a pair with both max divergences <= epsilon.
* :func:`azuma_bound` and :func:`simulate_bounded_martingale` (Lemma 3.19, Azuma's inequality):
  the tail bound and a vectorised simulator of processes that meet its hypotheses.

All bounds are returned as :class:`~dpkit._math.Estimate` values of kind ``"upper"``.
Hand-written because no library states these lemmas; the LP is solved by SciPy's HiGHS.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linprog
from scipy.sparse import csr_array, hstack, identity, vstack

from dpkit._math import Estimate, check_delta, check_epsilon, check_finite
from dpkit.distributions import Finite, align
from dpkit.divergences import hockey_stick
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, NumericalAccuracyError

__all__ = [
    "azuma_bound",
    "kl_bound_tight",
    "lemma_3_17_construct",
    "lemma_3_17_two_sided",
    "lemma_3_18_bound",
    "simulate_bounded_martingale",
]

#: Feasibility tolerance of the linear program of :func:`lemma_3_17_two_sided` (in probability mass).
LP_TOLERANCE = 1e-9


def _check_finite_law(name: str, value: object) -> Finite:
    if not isinstance(value, Finite):
        raise ArgumentTypeError(f"{name} must be a dpkit.distributions.Finite; got {type(value).__name__}.")
    return value


# ---------------------------------------------------------------------------------------------
# Lemma 3.17
# ---------------------------------------------------------------------------------------------
def lemma_3_17_construct(Y: Finite, Z: Finite, *, epsilon: float, delta: float) -> Finite:
    r"""Lemma 3.17(1), constructively: a Y' that is delta-close to Y with :math:`D_\infty(Y'\|Z)\le\varepsilon`.

    Caps Y at :math:`e^\varepsilon Z` pointwise, which removes exactly
    :math:`r = E_{e^\varepsilon}(Y\|Z) \le \delta` of mass, then returns that mass to the outputs
    where :math:`y < e^\varepsilon z`, in proportion to the slack :math:`e^\varepsilon z - y`.  The
    total slack is :math:`e^\varepsilon - 1 + r \ge r` (this needs epsilon >= 0), so no output goes
    over its cap.

    Parameters
    ----------
    Y, Z : Finite
        Two laws on one support (same labels, any order).
    epsilon : float, finite, >= 0
    delta : float in [0, 1]

    Returns
    -------
    Finite
        Y' on Y's support, with :math:`\Delta(Y, Y') = E_{e^\varepsilon}(Y\|Z) \le \delta` and
        :math:`y'(o) \le e^\varepsilon z(o)` for every output, up to floating-point rounding
        (a few ulps; if the two inputs' totals differ by rounding, as ``Finite`` allows, at most
        that difference of mass is not returned).

    Raises
    ------
    ValueError
        The precondition :math:`D^\delta_\infty(Y\|Z) \le \varepsilon` (i.e.
        :math:`E_{e^\varepsilon}(Y\|Z) \le \delta`) fails; bad epsilon or delta; different supports.
    TypeError
        Y or Z is not a ``Finite``.

    Notes
    -----
    .. math:: y'(o) = \min(y(o), e^\varepsilon z(o)) + r\,\frac{(e^\varepsilon z(o) - y(o))_+}
              {\sum_{o'} (e^\varepsilon z(o') - y(o'))_+},\qquad r = \sum_o (y(o) - e^\varepsilon z(o))_+.

    The converse ("if") half of the lemma is the data-processing-free inequality
    :math:`Y(S) - \delta \le Y'(S) \le e^\varepsilon Z(S)`; the tests check both halves.

    References
    ----------
    Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy", Lemma 3.17 (seeds
    000, 003; the seed omits the proof, and its sentence before the lemma should read "in terms of
    exact max divergence and statistical distance").

    Examples
    --------
    >>> from dpkit.distributions import Finite
    >>> Y, Z = Finite([0.8, 0.2]), Finite([0.5, 0.5])               # E_1.5(Y||Z) = 0.8 - 0.75 = 0.05
    >>> lemma_3_17_construct(Y, Z, epsilon=math.log(1.5), delta=0.1).probabilities.round(12)
    array([0.75, 0.25])
    """
    Y, Z = _check_finite_law("Y", Y), _check_finite_law("Z", Z)
    e = check_epsilon(epsilon)
    d = check_delta(delta)
    y, z, _ = align(Y, Z)
    removed = float(hockey_stick(Y, Z, epsilon=e))
    if not removed <= d:
        raise InvalidArgumentError(
            f"Lemma 3.17 needs D^delta_inf(Y||Z) <= epsilon, i.e. E_(e^epsilon)(Y||Z) <= delta; here "
            f"E = {removed!r} > delta = {d!r} at epsilon = {e!r}. Raise delta or epsilon."
        )
    with np.errstate(divide="ignore"):
        log_cap = e + np.log(z)  # ln(e^eps z), -inf where z = 0
        logy = np.log(y)
    capped = logy > log_cap
    cap = np.exp(log_cap)
    out = np.where(capped, cap, y)
    slack = np.where(capped, 0.0, cap - y)  # >= 0 off the capped outputs
    total = math.fsum(slack.tolist())  # = e^eps - 1 + removed >= removed (exactly, for exact pmfs)
    if removed > 0.0 and total > 0.0:
        # min(): when the inputs' totals differ by rounding (Finite allows 1e-9), never overfill
        out = out + min(removed, total) * (slack / total)
        out = np.minimum(out, cap)  # guard rounding: never above the cap
    return Finite(out, support=Y.support)


def lemma_3_17_two_sided(Y: Finite, Z: Finite, *, epsilon: float, delta: float) -> tuple[Finite, Finite] | None:
    r"""Lemma 3.17(2), corrected: find Y', Z' close to Y, Z with max divergence <= epsilon both ways.

    Solves the linear program (HiGHS) over Y', Z' on the common support

    .. math:: \min t \;\text{s.t.}\; \Delta(Y,Y') \le t,\ \Delta(Z,Z') \le t,\
              y' \le e^\varepsilon z',\ z' \le e^\varepsilon y',\ y', z' \text{ pmfs},

    (the distances linearised with one slack variable per output) and accepts when
    :math:`t^* \le \delta/(e^\varepsilon+1)` (+ ``LP_TOLERANCE``).  By the lemma this happens iff
    :math:`D^\delta_\infty(Y\|Z)\le\varepsilon` and :math:`D^\delta_\infty(Z\|Y)\le\varepsilon`.

    Parameters
    ----------
    Y, Z : Finite
        Two laws on one support.
    epsilon : float, finite, >= 0
        Moderate values (up to ~20): the constraint matrix holds e^epsilon.
    delta : float in [0, 1]

    Returns
    -------
    (Finite, Finite) or None
        Y', Z' found by the solver (feasible to ``LP_TOLERANCE`` = 1e-9 in each mass; solver noise
        below it is clipped at 0), or ``None`` when no pair exists.  The decision is exact away
        from the boundary; within ~1e-9 of it (in delta) it follows the solver's tolerance, and
        masses below ~1e-9 are invisible to it.

    Raises
    ------
    ValueError
        Bad epsilon or delta; different supports.
    TypeError
        Y or Z is not a ``Finite``.
    NumericalAccuracyError
        HiGHS fails on the (always feasible) program even without presolve.

    Notes
    -----
    The seed writes only :math:`D_\infty(Y'\|Z')\le\varepsilon`.  With one direction the "if" part
    is false: Y = Y' = point mass at 0, Z = Z' = uniform{0, 1}, epsilon = ln 2 and any delta < 1/2
    meet the seed's right-hand side, yet :math:`D^\delta_\infty(Z\|Y) = \infty` (docs/notes.md §3).

    References
    ----------
    Dwork & Roth 2014, Lemma 3.17 part 2 (seeds 000, 003; one-sided as printed, see Notes);
    Dwork, Rothblum, Vadhan 2010 (FOCS), "Boosting and Differential Privacy", the lemma's source
    [recalled, not re-read].

    Examples
    --------
    >>> from dpkit.distributions import Finite
    >>> Y, Z = Finite([1.0, 0.0]), Finite([0.5, 0.5])
    >>> lemma_3_17_two_sided(Y, Z, epsilon=math.log(2), delta=0.4) is None   # D^0.4(Z||Y) = inf
    True
    """
    Y, Z = _check_finite_law("Y", Y), _check_finite_law("Z", Z)
    e = check_epsilon(epsilon)
    d = check_delta(delta)
    y, z, _ = align(Y, Z)
    n = y.size
    g = math.exp(e)
    eye = identity(n, format="csr")
    zero = csr_array((n, n))
    col0 = csr_array((n, 1))
    # variables: [y' (n), z' (n), u (n), v (n), t]
    a_ub = vstack([
        hstack([eye, -g * eye, zero, zero, col0]),    # y' - e^eps z' <= 0
        hstack([-g * eye, eye, zero, zero, col0]),    # z' - e^eps y' <= 0
        hstack([-eye, zero, -eye, zero, col0]),       # y - y' <= u
        hstack([eye, zero, -eye, zero, col0]),        # y' - y <= u
        hstack([zero, -eye, zero, -eye, col0]),       # z - z' <= v
        hstack([zero, eye, zero, -eye, col0]),        # z' - z <= v
        csr_array(np.concatenate([np.zeros(2 * n), np.full(n, 0.5), np.zeros(n), [-1.0]])[None, :]),  # TV(Y,Y') <= t
        csr_array(np.concatenate([np.zeros(3 * n), np.full(n, 0.5), [-1.0]])[None, :]),               # TV(Z,Z') <= t
    ], format="csr")
    b_ub = np.concatenate([np.zeros(2 * n), -y, y, -z, z, [0.0, 0.0]])
    a_eq = csr_array(np.vstack([
        np.concatenate([np.ones(n), np.zeros(3 * n + 1)]),
        np.concatenate([np.zeros(n), np.ones(n), np.zeros(2 * n + 1)]),
    ]))
    cost = np.zeros(4 * n + 1)
    cost[-1] = 1.0
    options = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(2), bounds=(0, None), method="highs",
                     options=options)
    if result.status != 0:
        # The LP is always feasible (Y' = Z' = Y, t = Delta(Y, Z)) and bounded below by 0, so a
        # failure is numerical: HiGHS's presolve has been seen to call it infeasible for epsilon
        # ~ 1e-10 with masses ~ 1e-15.  Solve again without presolve.
        result = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(2), bounds=(0, None),
                         method="highs", options={**options, "presolve": False})
    if result.status != 0:  # pragma: no cover - not seen without presolve
        raise NumericalAccuracyError(f"HiGHS could not solve the Lemma 3.17 linear program: {result.message}")
    budget = d / (g + 1.0)
    if not result.x[-1] <= budget + LP_TOLERANCE:
        return None
    y_new = np.maximum(result.x[:n], 0.0)
    z_new = np.maximum(result.x[n:2 * n], 0.0)
    return Finite(y_new, support=Y.support), Finite(z_new, support=Y.support)


# ---------------------------------------------------------------------------------------------
# Lemma 3.18
# ---------------------------------------------------------------------------------------------
def lemma_3_18_bound(epsilon: float) -> Estimate:
    r"""The seed's KL bound :math:`\varepsilon(e^\varepsilon - 1)` for pairs with both max divergences <= epsilon.

    Parameters
    ----------
    epsilon : float, finite, >= 0

    Returns
    -------
    Estimate
        An upper bound (``kind="upper"``) on :math:`D(Y\|Z)` whenever :math:`D_\infty(Y\|Z)\le\varepsilon`
        and :math:`D_\infty(Z\|Y)\le\varepsilon`.  Valid but loose: see :func:`kl_bound_tight`.

    Raises
    ------
    ValueError
        epsilon negative, NaN or infinite.

    Notes
    -----
    The seed's supplementary proof bounds :math:`(z - y)\ln(z/y) \le \varepsilon|z - y|` from
    :math:`D_\infty(Z\|Y)\le\varepsilon` alone; when z < y both factors are negative and the step
    needs :math:`D_\infty(Y\|Z)\le\varepsilon` (the identity is
    :math:`(z-y)\ln(z/y) = |z-y|\,|\ln(z/y)|`).  It also writes the max over sets in
    :math:`D_\infty(Z\|Y)` with Supp(Y) for Supp(Z) and a point y inside it (docs/notes.md §4).
    With one direction only, KL is unbounded; the tests carry a counterexample.

    References
    ----------
    Dwork & Roth 2014, Lemma 3.18 (seeds 000, 003); Dwork, Rothblum, Vadhan 2010 (FOCS) [recalled].

    Examples
    --------
    >>> float(lemma_3_18_bound(1.0))                       # 1 * (e - 1)
    1.718281828459045
    """
    e = check_epsilon(epsilon)
    value = e * math.expm1(e) if e < 709.0 else math.inf  # e^709.78 overflows a double
    return Estimate(value, kind="upper", method="Dwork & Roth Lemma 3.18: eps (e^eps - 1)")


def kl_bound_tight(epsilon: float) -> Estimate:
    r"""The tight KL bound :math:`\varepsilon\tanh(\varepsilon/2)` for pairs with both max divergences <= epsilon.

    Parameters
    ----------
    epsilon : float, finite, >= 0

    Returns
    -------
    Estimate
        An upper bound (``kind="upper"``) on :math:`D(Y\|Z)`, attained by randomized response
        :math:`Y = \mathrm{Bern}(e^\varepsilon/(1+e^\varepsilon))`, :math:`Z = \mathrm{Bern}(1/(1+e^\varepsilon))`.
        It is :math:`\le \min(\varepsilon^2/2,\ \varepsilon(e^\varepsilon-1))`.

    Raises
    ------
    ValueError
        epsilon negative, NaN or infinite.

    Notes
    -----
    Every pair with :math:`D_\infty \le \varepsilon` both ways is a post-processing of the
    randomized-response pair (Kairouz, Oh, Viswanath 2015, the dominating mechanism in the proof
    of Thm 3.3 [number recalled]), and KL obeys data processing, so

    .. math:: D(Y\|Z) \le \frac{e^\varepsilon}{1+e^\varepsilon}\varepsilon - \frac{1}{1+e^\varepsilon}\varepsilon
              = \varepsilon\,\frac{e^\varepsilon-1}{e^\varepsilon+1} = \varepsilon\tanh(\varepsilon/2).

    References
    ----------
    Dwork & Roth 2014, Lemma 3.18 (seeds 000, 003: the loose form); Kairouz, Oh, Viswanath 2015,
    ICML, arXiv 1311.0776 (the dominating pair); docs/notes.md §4.

    Examples
    --------
    >>> round(kl_bound_tight(1.0), 12)                     # = KL of randomized response at eps = 1
    0.46211715726
    """
    e = check_epsilon(epsilon)
    return Estimate(e * math.tanh(e / 2.0), kind="upper", method="eps tanh(eps/2), tight at randomized response")


# ---------------------------------------------------------------------------------------------
# Lemma 3.19 (Azuma)
# ---------------------------------------------------------------------------------------------
def azuma_bound(z: float) -> Estimate:
    r"""Azuma's tail bound :math:`e^{-z^2/2}` of Lemma 3.19.

    If :math:`|C_i| \le \alpha` almost surely and :math:`\mathbb E[C_i \mid C_1..C_{i-1}] \le \beta`
    for every i, then for every z > 0

    .. math:: \Pr\Big[\sum_{i=1}^k C_i > k\beta + z\sqrt{k}\,\alpha\Big] \le e^{-z^2/2}.

    Parameters
    ----------
    z : float, finite, > 0

    Returns
    -------
    Estimate
        The bound (``kind="upper"``).

    Raises
    ------
    ValueError
        z <= 0, NaN or infinite.

    Notes
    -----
    Proof sketch: :math:`D_i = C_i - \mathbb E[C_i\mid\text{past}]` lies in an interval of length
    :math:`2\alpha`, so Hoeffding's lemma gives :math:`\mathbb E[e^{\lambda D_i}\mid\text{past}] \le
    e^{\lambda^2\alpha^2/2}`; the Chernoff bound at :math:`\lambda = z/(\sqrt k\,\alpha)` and
    :math:`\sum C_i \le k\beta + \sum D_i` finish it.  The seed states the lemma correctly.

    References
    ----------
    Dwork & Roth 2014, Lemma 3.19 (seeds 000, 003); Azuma 1967, Tohoku Math. J. 19(3);
    Hoeffding 1963, JASA 58, Lemma 1 (Hoeffding's lemma).

    Examples
    --------
    >>> round(azuma_bound(2.0), 12)
    0.135335283237
    """
    x = check_finite("z", z)
    if not x > 0:
        raise InvalidArgumentError(f"z must be finite and > 0; got {x}.")
    return Estimate(math.exp(-0.5 * x * x), kind="upper", method="Azuma's inequality (Dwork & Roth Lemma 3.19)")


def simulate_bounded_martingale(
    k: int, *, alpha: float, beta: float, n_paths: int, rng: np.random.Generator, adaptive: bool = True
) -> NDArray[np.float64]:
    r"""Simulate :math:`\sum_{i=1}^k C_i` for processes meeting Lemma 3.19's hypotheses (vectorised over paths).

    Each step :math:`C_i \in \{-\alpha, +\alpha\}` (the largest variance a mean allows) with
    conditional mean :math:`m_i = \beta` when the path is ahead of its drift line
    (:math:`\sum_{j<i} C_j > (i-1)\beta`) and :math:`m_i = \max(\beta - \alpha/2, -\alpha)` otherwise,
    so :math:`|C_i| \le \alpha` and :math:`\mathbb E[C_i \mid C_1..C_{i-1}] \le \beta` hold, with a
    drift that depends on the past.  ``adaptive=False`` uses :math:`m_i = \beta` throughout (the
    extreme case for the tail).

    Parameters
    ----------
    k : int, >= 1
        Number of steps.
    alpha : float, finite, > 0
    beta : float, finite, in [-alpha, alpha]
        (beta > alpha makes the lemma vacuous; beta < -alpha is impossible with |C_i| <= alpha.)
    n_paths : int, >= 1
    rng : numpy.random.Generator
        Required: this simulates, it releases nothing (tests pass ``np.random.default_rng(seed)``).
    adaptive : bool, default True

    Returns
    -------
    ndarray of float, shape (n_paths,)
        The sums :math:`\sum_{i=1}^k C_i`, one per path.

    Raises
    ------
    ValueError
        k or n_paths not a positive integer; alpha not finite and > 0; beta outside [-alpha, alpha].
    TypeError
        rng is not a ``numpy.random.Generator``.

    References
    ----------
    Dwork & Roth 2014, Lemma 3.19 (seeds 000, 003).

    Examples
    --------
    >>> s = simulate_bounded_martingale(10, alpha=1.0, beta=0.0, n_paths=4, rng=np.random.default_rng(0))
    >>> s.shape, bool(np.all(np.abs(s) <= 10))
    ((4,), True)
    """
    for name, value in (("k", k), ("n_paths", n_paths)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidArgumentError(f"{name} must be an integer >= 1; got {value!r}.")
    a = check_finite("alpha", alpha)
    if not a > 0:
        raise InvalidArgumentError(f"alpha must be finite and > 0; got {a}.")
    b = check_finite("beta", beta)
    if not -a <= b <= a:
        raise InvalidArgumentError(f"beta must be in [-alpha, alpha] = [{-a}, {a}]; got {b}.")
    if not isinstance(rng, np.random.Generator):
        raise ArgumentTypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}.")
    low_drift = max(b - a / 2.0, -a)
    total = np.zeros(int(n_paths))
    for i in range(int(k)):
        if adaptive:
            mean = np.where(total > i * b, b, low_drift)  # depends on the past, always <= beta
        else:
            mean = np.full(total.shape, b)
        up = rng.random(total.shape) < 0.5 * (1.0 + mean / a)  # P(C = +alpha) gives E[C | past] = mean
        total += np.where(up, a, -a)
    return total
