r"""Total variation as a coupling distance: the maximal coupling of two finite laws (seed 001).

Seed 001 writes the total variation of two laws as the smallest disagreement probability of a
coupling, :math:`\mathrm{TV}(P, Q) = \inf_{X\sim P,\,Y\sim Q} \Pr[X \ne Y]`.  For finite laws
:func:`maximal_coupling` constructs a coupling that attains the infimum; the tests check, with a
linear programme over all couplings, that no coupling does better.

References
----------
Lindvall, *Lectures on the Coupling Method*, 1992, §I.5; Levin, Peres & Wilmer, *Markov Chains and
Mixing Times*, 2nd ed. 2017, Prop 4.7 (the coupling characterisation) and Remark 4.8 (the
construction); docs/notes.md §7 (statement and proof).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpkit.distributions import Finite
from dpkit.distributions.finite import align
from dpkit.errors import ArgumentTypeError

__all__ = ["Coupling", "maximal_coupling"]


@dataclass(frozen=True, slots=True)
class Coupling:
    """A joint law of (X, Y) on ``support`` x ``support``: ``joint[i, j] = Pr[X = support[i], Y = support[j]]``.

    ``disagreement`` is :math:`\\Pr[X \\ne Y]`, the mass off the diagonal, summed exactly (``math.fsum``).
    ``joint`` is read-only.
    """

    support: np.ndarray
    joint: np.ndarray
    disagreement: float

    def marginals(self) -> tuple[np.ndarray, np.ndarray]:
        """The laws of X (row sums) and of Y (column sums), on ``support``."""
        return self.joint.sum(axis=1), self.joint.sum(axis=0)


def maximal_coupling(P: Finite, Q: Finite) -> Coupling:
    r"""A coupling (X, Y) of two finite laws with :math:`\Pr[X \ne Y] = \mathrm{TV}(P, Q)`, the least possible.

    The diagonal carries :math:`\min(p, q)` (total :math:`1 - \mathrm{TV}`); the rest of P,
    :math:`(p-q)_+`, and of Q, :math:`(q-p)_+`, are joined independently on the off-diagonal,
    :math:`(p-q)_+ \otimes (q-p)_+ / \mathrm{TV}`.  The two remainders have disjoint supports, so
    none of that mass lands on the diagonal and :math:`\Pr[X\ne Y] = \sum (p-q)_+ = \mathrm{TV}`.
    No coupling does better: :math:`P(S) - Q(S) \le \Pr[X \in S, Y \notin S] \le \Pr[X \ne Y]` for
    every event S.  Laws on different supports are placed on the union (the missing labels get mass 0).

    The marginal of X is P exactly up to floating-point rounding of the products; the marginal of Y
    equals Q up to the normalisation error that :class:`~dpkit.distributions.Finite` admits (1e-9).

    References
    ----------
    Levin, Peres & Wilmer, *Markov Chains and Mixing Times*, 2nd ed. 2017, Prop 4.7 and Remark 4.8;
    Lindvall 1992, §I.5; docs/notes.md §7.

    Examples
    --------
    >>> from dpkit import Finite, total_variation
    >>> P, Q = Finite([0.5, 0.3, 0.2]), Finite([0.2, 0.3, 0.5])
    >>> c = maximal_coupling(P, Q)
    >>> c.joint.round(3).tolist()
    [[0.2, 0.0, 0.3], [0.0, 0.3, 0.0], [0.0, 0.0, 0.2]]
    >>> c.disagreement, round(float(total_variation(P, Q)), 15)
    (0.3, 0.3)
    """
    if not isinstance(P, Finite) or not isinstance(Q, Finite):
        bad = P if not isinstance(P, Finite) else Q
        raise ArgumentTypeError(
            f"maximal_coupling takes two dpkit.Finite laws; got {type(bad).__name__}. "
            "Tabulate a discrete law on a finite support with dpkit.Finite(probabilities, support=...)."
        )
    p, q, support = align(P, Q, extend=True)
    diagonal = np.minimum(p, q)
    rest_p = p - diagonal  # (p - q)_+ : exactly 0 where p <= q
    rest_q = q - diagonal  # (q - p)_+ : exactly 0 where q <= p
    joint = np.diag(diagonal)
    mass_q = math.fsum(rest_q.tolist())
    if mass_q > 0.0:
        joint = joint + np.outer(rest_p, rest_q / mass_q)
    joint.setflags(write=False)
    off = joint.copy()
    np.fill_diagonal(off, 0.0)
    disagreement = math.fsum(off.ravel().tolist())
    return Coupling(support=support, joint=joint, disagreement=disagreement)
