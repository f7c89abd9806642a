r"""Remark 3.1 as code: exact (epsilon, delta) checks of a pair and of a finite mechanism.

Dwork & Roth 2014, Remark 3.1 (seeds 000/003): a mechanism M is (epsilon, delta)-DP exactly when,
for every pair of neighbouring inputs x, y, both :math:`D^\delta_\infty(M(x)\|M(y)) \le \varepsilon`
and :math:`D^\delta_\infty(M(y)\|M(x)) \le \varepsilon`.  Equivalently (docs/notes.md §2),
:math:`E_{e^\varepsilon}(M(x)\|M(y)) \le \delta` in both directions, where
:math:`E_\gamma(P\|Q) = \sum_o (p(o) - \gamma q(o))_+` is the hockey-stick divergence.

Contract:

* :func:`pair` decides one pair of output laws; :func:`table` a finite mechanism given as a matrix
  of output probabilities (one row per input) and a neighbour relation; :func:`load_mechanism_csv`
  reads such a matrix for the ``dpkit verify`` command.
* The decision is ``hockey-stick <= delta`` in both directions of every neighbouring pair.  For
  finite laws it is exact for the probabilities as given (floats): the hockey-stick is a sum
  without cancellation, computed with a bound on its rounding error, and any decision that the
  bound leaves open (a claim within ~1e-15 of the boundary, such as randomized response at
  epsilon = ln 3) is re-decided at 60 significant digits with :mod:`decimal`.  Other pairs use
  :mod:`dpkit.divergences` and decide on the upper end ``value + error``.
* Every verdict also reports the *tightest* epsilon for the given delta (the largest
  :math:`D^\delta_\infty` over pairs and directions, positive part) and the smallest delta for
  the given epsilon, both rounded *up* (never understated; for finite laws within a few ulps of
  the exact value), the worst pair and direction, and, when the check fails on finite laws, a
  *witness*: an output set S with :math:`P(S) > e^\varepsilon Q(S) + \delta`.
* Verdicts are frozen values; nothing here has state.

The sums themselves, vectorised over all neighbouring pairs with certified rounding-error bounds,
are in :mod:`dpkit.verify._finite_core` (which says why they are not :mod:`dpkit.divergences`
calls).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from fractions import Fraction
from os import PathLike
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from dpkit._math import check_delta, check_epsilon
from dpkit.distributions import Bernoulli, Distribution, Finite, align
from dpkit.divergences import approx_max_divergence, hockey_stick
from dpkit.verify._finite_core import DECIMAL_DIGITS as DECIMAL_DIGITS  # re-exported: its old home
from dpkit.verify._finite_core import Array, _check_rows, _tightest_delta, _tightest_epsilon, _witness, _worst
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["FiniteMechanism", "TableVerdict", "Verdict", "load_mechanism_csv", "pair", "table"]

Direction = Literal["P||Q", "Q||P"]


# ---------------------------------------------------------------------------------------------
# verdicts
# ---------------------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return f"{x:.12g}"


def _fmt_pair(x: float, y: float) -> tuple[str, str]:
    """Two numbers with enough digits to tell them apart (12, or up to 17 near the boundary)."""
    for digits in (12, 17):
        a, b = f"{x:.{digits}g}", f"{y:.{digits}g}"
        if a != b:
            break
    return a, b


def _set_text(labels: tuple[Any, ...], limit: int = 8) -> str:
    shown = ", ".join(str(v) for v in labels[:limit])
    more = f", ... ({len(labels)} outputs)" if len(labels) > limit else ""
    return "{" + shown + more + "}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    r"""Whether a pair (P, Q) is (epsilon, delta)-indistinguishable in both directions.

    Attributes
    ----------
    holds : bool
        True iff :math:`E_{e^\varepsilon}(P\|Q) \le \delta` and :math:`E_{e^\varepsilon}(Q\|P) \le \delta`.
    epsilon, delta : float
        The claim that was checked.
    tightest_epsilon : float
        The smallest epsilon for this delta: :math:`\max(0, D^\delta_\infty(P\|Q), D^\delta_\infty(Q\|P))`
        (may be ``inf``), rounded up: for finite pairs within a few ulps of the exact value.
    tightest_delta : float
        The smallest delta for this epsilon: the larger hockey-stick divergence of the two
        directions, rounded up.
    direction : "P||Q" or "Q||P"
        The worst direction: the one with the larger :math:`D^\delta_\infty` (among the failing
        directions when the claim fails).
    witness : tuple or None
        For finite pairs that fail: the output labels of S = {o : loss(o) > epsilon} in the worst
        direction, an event on which the claim is violated.  ``None`` otherwise.
    witness_p, witness_q : float or None
        P(S) and Q(S).  In direction "P||Q" they satisfy P(S) > e^epsilon Q(S) + delta; in
        direction "Q||P", Q(S) > e^epsilon P(S) + delta.
    kind : "exact", "numerical" or "upper"
        How the numbers were obtained (exact finite sums, or the kind of the divergence estimates).
    """

    holds: bool
    epsilon: float
    delta: float
    tightest_epsilon: float
    tightest_delta: float
    direction: Direction
    witness: tuple[Any, ...] | None = None
    witness_p: float | None = None
    witness_q: float | None = None
    kind: str = "exact"

    def __post_init__(self) -> None:
        if self.direction not in ("P||Q", "Q||P"):
            raise InvalidArgumentError(f"direction must be 'P||Q' or 'Q||P'; got {self.direction!r}.")
        if (self.witness is None) != (self.witness_p is None) or (self.witness is None) != (self.witness_q is None):
            raise InvalidArgumentError("witness, witness_p and witness_q must be given together.")

    def __str__(self) -> str:
        status = "HOLDS" if self.holds else "FAILS"
        lines = [
            f"({_fmt(self.epsilon)}, {_fmt(self.delta)})-indistinguishable in both directions: {status}"
            " (Dwork & Roth Remark 3.1)",
            f"  tightest epsilon for delta={_fmt(self.delta)}: {_fmt(self.tightest_epsilon)}"
            f"  (worst direction D({self.direction}))",
            f"  smallest delta for epsilon={_fmt(self.epsilon)}: {_fmt(self.tightest_delta)}",
        ]
        if self.witness is not None and self.witness_p is not None and self.witness_q is not None:
            first, second = ("P", "Q") if self.direction == "P||Q" else ("Q", "P")
            m1, m2 = (self.witness_p, self.witness_q) if self.direction == "P||Q" else (self.witness_q, self.witness_p)
            lhs, rhs = _fmt_pair(m1, math.exp(self.epsilon) * m2 + self.delta)
            lines.append(f"  witness S = {_set_text(self.witness)}: {first}(S) = {lhs} > "
                         f"e^epsilon {second}(S) + delta = {rhs}")
        if self.kind != "exact":
            lines.append(f"  (numbers are {self.kind}; the decision uses their upper ends)")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableVerdict:
    r"""Whether a finite mechanism is (epsilon, delta)-DP for a neighbour relation (Remark 3.1).

    Attributes
    ----------
    holds : bool
        True iff every neighbouring pair of rows is (epsilon, delta)-indistinguishable both ways.
    epsilon, delta : float
        The claim that was checked.
    tightest_epsilon : float
        The smallest epsilon for which the mechanism is (epsilon, delta)-DP: the maximum of
        :math:`D^\delta_\infty` over neighbouring pairs and directions, positive part, rounded up
        (within a few ulps of the exact value).
    tightest_delta : float
        The smallest delta for this epsilon: the largest hockey-stick divergence over pairs and
        directions, rounded up.
    worst_pair : tuple of int
        ``(i, j)``, ordered as the worst direction: the loss is measured as
        :math:`D^\delta_\infty(\mathrm{row}_i\|\mathrm{row}_j)`.  Chosen among the failing
        directions when the claim fails.
    witness : tuple or None
        When the claim fails: the output labels of S = {o : ln(row_i(o)/row_j(o)) > epsilon}.
    witness_masses : tuple of float or None
        ``(row_i(S), row_j(S))``, with row_i(S) > e^epsilon row_j(S) + delta.
    pair_epsilons : tuple of float
        The tightest epsilon of each neighbouring pair (both directions), in the order checked:
        float upper bounds padded by their rounding-error bound (~1e-15 relative for ordinary
        masses, up to ~1e-12 absolute when masses are as small as 1e-300).
    neighbors : tuple of (int, int)
        The neighbouring pairs that were checked.
    inputs : tuple or None
        Input labels for the report, if given.
    """

    holds: bool
    epsilon: float
    delta: float
    tightest_epsilon: float
    tightest_delta: float
    worst_pair: tuple[int, int]
    witness: tuple[Any, ...] | None = None
    witness_masses: tuple[float, float] | None = None
    pair_epsilons: tuple[float, ...] = field(default=())
    neighbors: tuple[tuple[int, int], ...] = field(default=())
    inputs: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if (self.witness is None) != (self.witness_masses is None):
            raise InvalidArgumentError("witness and witness_masses must be given together.")

    def _name(self, i: int) -> str:
        return f"row {i}" if self.inputs is None else f"row {i} ({self.inputs[i]})"

    def __str__(self) -> str:
        status = "HOLDS" if self.holds else "FAILS"
        i, j = self.worst_pair
        count = len(self.neighbors)
        lines = [
            f"({_fmt(self.epsilon)}, {_fmt(self.delta)})-DP: {status}  (Dwork & Roth Remark 3.1; "
            f"{count} neighbouring pair{'' if count == 1 else 's'}, both directions)",
            f"  tightest epsilon for delta={_fmt(self.delta)}: {_fmt(self.tightest_epsilon)}"
            f"  (worst: D({self._name(i)} || {self._name(j)}))",
            f"  smallest delta for epsilon={_fmt(self.epsilon)}: {_fmt(self.tightest_delta)}",
        ]
        if self.witness is not None and self.witness_masses is not None:
            m1, m2 = self.witness_masses
            lhs, rhs = _fmt_pair(m1, math.exp(self.epsilon) * m2 + self.delta)
            lines.append(f"  witness S = {_set_text(self.witness)}: P_{i}(S) = {lhs} > "
                         f"e^epsilon P_{j}(S) + delta = {rhs}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class FiniteMechanism:
    """A finite mechanism read from a file: ``rows[i]`` is the output law on input ``inputs[i]``.

    Attributes
    ----------
    rows : ndarray of float, shape (n_inputs, n_outputs), read-only
        Each row a pmf (validated).
    inputs : tuple
        Input labels (``0, 1, ...`` when the file has none).
    outputs : tuple
        Output labels (``0, 1, ...`` when the file has none).
    """

    rows: Array
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]

    def __post_init__(self) -> None:
        n_in, n_out = self.rows.shape
        if len(self.inputs) != n_in or len(self.outputs) != n_out:
            raise InvalidArgumentError(
                f"labels do not match the table: {n_in}x{n_out} table, {len(self.inputs)} input labels, "
                f"{len(self.outputs)} output labels."
            )


# ---------------------------------------------------------------------------------------------
# public checks
# ---------------------------------------------------------------------------------------------
def _as_finite(d: Distribution) -> Finite | None:
    if isinstance(d, Bernoulli):
        return d.to_finite()
    return d if isinstance(d, Finite) else None


def pair(P: Distribution, Q: Distribution, *, epsilon: float, delta: float = 0.0) -> Verdict:
    r"""Decide whether P and Q are (epsilon, delta)-indistinguishable in both directions.

    Checks :math:`D^\delta_\infty(P\|Q) \le \varepsilon` and :math:`D^\delta_\infty(Q\|P) \le
    \varepsilon` through the equivalent :math:`E_{e^\varepsilon}(P\|Q) \le \delta` and
    :math:`E_{e^\varepsilon}(Q\|P) \le \delta`, the condition of Remark 3.1 for one pair of
    neighbouring inputs.

    Parameters
    ----------
    P, Q : Distribution
        Two laws on a common domain.  Finite (and Bernoulli) pairs are decided by exact sums and
        get a witness set; other pairs use :mod:`dpkit.divergences` (closed forms or quadrature).
    epsilon : float, finite, >= 0
    delta : float in [0, 1]

    Returns
    -------
    Verdict
        ``holds`` (exact for finite pairs), the tightest epsilon for this delta and the smallest
        delta for this epsilon (both rounded up), the worst direction and, for finite pairs
        that fail, a witness set S with P(S) > e^epsilon Q(S) + delta.

    Raises
    ------
    ValueError
        epsilon negative, NaN or infinite; delta outside [0, 1] or NaN; finite laws on different
        supports (see :func:`dpkit.distributions.align`).

    Notes
    -----
    .. math:: E_{e^\varepsilon}(P\|Q) = \sup_S P(S) - e^\varepsilon Q(S) \le \delta
              \iff D^\delta_\infty(P\|Q) \le \varepsilon.

    References
    ----------
    Dwork & Roth 2014, Def 3.6 and Remark 3.1 (seeds 000, 003); Balle, Barthe, Gaboardi 2018,
    arXiv 1807.01647v2, Thm 1 (the hockey-stick form).

    Examples
    --------
    >>> from dpkit.distributions import Bernoulli
    >>> pair(Bernoulli(0.75), Bernoulli(0.25), epsilon=1.0).holds      # e^1 < 3: randomized response at ln 3
    False
    """
    e = check_epsilon(epsilon)
    d = check_delta(delta)
    FP, FQ = _as_finite(P), _as_finite(Q)
    if FP is not None and FQ is not None:
        p, q, support = align(FP, FQ)
        rows_p, rows_q = np.stack([p, q]), np.stack([q, p])
        r = _check_rows(rows_p, rows_q, epsilon=e, delta=d)
        holds, k = _worst(r.fails, r.approx_max)
        direction: Direction = "P||Q" if k == 0 else "Q||P"
        witness = wp = wq = None
        if not holds:
            witness, m1, m2 = _witness(rows_p[k], rows_q[k], e, np.asarray(support))
            wp, wq = (m1, m2) if k == 0 else (m2, m1)
        return Verdict(holds=holds, epsilon=e, delta=d, tightest_epsilon=_tightest_epsilon(r, d),
                       tightest_delta=_tightest_delta(r), direction=direction, witness=witness,
                       witness_p=wp, witness_q=wq, kind="exact")
    # other pairs: the divergences module's closed forms / quadrature, deciding on the upper end
    h = [hockey_stick(P, Q, epsilon=e), hockey_stick(Q, P, epsilon=e)]
    a = [approx_max_divergence(P, Q, delta=d), approx_max_divergence(Q, P, delta=d)]
    upper_h = np.array([float(x) + x.error for x in h])
    upper_a = np.array([float(x) + (x.error if x.kind == "numerical" else 0.0) for x in a])
    holds, k = _worst(upper_h > d, upper_a)
    kinds = {x.kind for x in (*h, *a)}
    kind = "exact" if kinds == {"exact"} else ("numerical" if "numerical" in kinds else "upper")
    return Verdict(holds=holds, epsilon=e, delta=d, tightest_epsilon=max(0.0, float(np.max(upper_a))),
                   tightest_delta=float(np.max(upper_h)), direction="P||Q" if k == 0 else "Q||P", kind=kind)


def _validate_rows(rows: ArrayLike, inputs: tuple[Any, ...] | None = None,
                   line_numbers: list[int] | None = None) -> Array:
    """The table as a read-only float array, every row checked by ``Finite``; errors name the row."""
    try:
        table_ = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"rows must be a 2-D array of probabilities: {exc}") from None
    if table_.ndim != 2:
        raise InvalidArgumentError(
            f"rows must be a 2-D array (one row of output probabilities per input); got {table_.ndim} dimension(s)."
        )
    n_in, n_out = table_.shape
    if n_in < 2:
        raise InvalidArgumentError(f"a mechanism table needs at least 2 rows (inputs) to have neighbours; got {n_in}.")
    if n_out < 1:
        raise InvalidArgumentError("a mechanism table needs at least 1 output column.")
    for i in range(n_in):
        try:
            Finite(table_[i])
        except ValueError as exc:
            notes = [] if inputs is None else [f"input {inputs[i]!s}"]
            notes += [] if line_numbers is None else [f"line {line_numbers[i]}"]
            label = f" ({', '.join(notes)})" if notes else ""
            raise InvalidArgumentError(f"row {i}{label} is not a pmf: {exc}") from None
    table_.setflags(write=False)
    return table_


def _validate_neighbors(neighbors: Any, n_in: int) -> tuple[tuple[int, int], ...]:
    if neighbors is None:
        return tuple((i, i + 1) for i in range(n_in - 1))
    out: list[tuple[int, int]] = []
    for item in neighbors:
        try:
            i, j = item
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                f"neighbors must be a list of (i, j) row pairs; got the item {item!r}."
            ) from None
        for v in (i, j):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ArgumentTypeError(f"neighbors must hold integer row indices; got {v!r} in {item!r}.")
            if not 0 <= v < n_in:
                raise InvalidArgumentError(
                    f"neighbor row index {v} in {item!r} is out of range for a table of {n_in} rows."
                )
        if i == j:
            raise InvalidArgumentError(f"a row is not its own neighbour; got {item!r}.")
        out.append((int(i), int(j)))
    if not out:
        raise InvalidArgumentError("neighbors is empty: give at least one (i, j) pair, or None for consecutive rows.")
    return tuple(out)


def table(
    rows: ArrayLike,
    *,
    epsilon: float,
    delta: float = 0.0,
    neighbors: list[tuple[int, int]] | None = None,
    outputs: ArrayLike | None = None,
    inputs: ArrayLike | None = None,
) -> TableVerdict:
    r"""Decide whether a finite mechanism is (epsilon, delta)-DP (Dwork & Roth Remark 3.1).

    ``rows[x]`` is the output distribution M(x).  Every neighbouring pair (x, y) is checked in both
    directions, :math:`E_{e^\varepsilon}(M(x)\|M(y)) \le \delta` and
    :math:`E_{e^\varepsilon}(M(y)\|M(x)) \le \delta`, as whole-array operations over all pairs.

    Parameters
    ----------
    rows : array_like, shape (n_inputs, n_outputs), n_inputs >= 2
        One row of output probabilities per input; each row must be a pmf (finite, >= 0, summing
        to 1 within 1e-9, validated by :class:`~dpkit.distributions.Finite`).
    epsilon : float, finite, >= 0
    delta : float in [0, 1]
    neighbors : list of (int, int), optional
        The neighbour relation as row-index pairs (order within a pair does not matter: both
        directions are checked).  Default: consecutive rows ``(0, 1), (1, 2), ...``.
    outputs : array_like, optional
        Output labels (for the witness set); default ``0 .. n_outputs - 1``.
    inputs : array_like, optional
        Input labels (for messages and the report only).

    Returns
    -------
    TableVerdict
        ``holds`` (exact); the tightest epsilon for this delta and the smallest delta for this
        epsilon (max over pairs and directions, rounded up by at most a few ulps); the worst ordered pair
        ``(i, j)``; and, when the claim fails, a witness output set S with rows[i](S) > e^epsilon rows[j](S) + delta.

    Raises
    ------
    ValueError
        epsilon negative/NaN/infinite; delta outside [0, 1]/NaN; a row that is not a pmf (the
        message names the row); fewer than 2 rows; neighbour indices out of range, equal, or none;
        labels of the wrong length.
    TypeError
        Non-integer neighbour indices.

    References
    ----------
    Dwork & Roth 2014, Def 3.6 and Remark 3.1 (seeds 000, 003).

    Examples
    --------
    >>> rr = [[0.75, 0.25], [0.25, 0.75]]                       # randomized response, epsilon = ln 3
    >>> table(rr, epsilon=1.0986123).holds, table(rr, epsilon=1.0).holds
    (True, False)
    """
    e = check_epsilon(epsilon)
    d = check_delta(delta)
    input_labels = None if inputs is None else tuple(np.asarray(inputs).tolist())
    R = _validate_rows(rows, input_labels)
    n_in, n_out = R.shape
    if input_labels is not None and len(input_labels) != n_in:
        raise InvalidArgumentError(f"inputs has {len(input_labels)} labels but the table has {n_in} rows.")
    labels = np.arange(n_out) if outputs is None else np.asarray(outputs)
    if labels.ndim != 1 or labels.shape[0] != n_out:
        raise InvalidArgumentError(f"outputs must have one label per column ({n_out}); got shape {labels.shape}.")
    if np.unique(labels).size != n_out:
        raise InvalidArgumentError("output labels must be distinct.")
    pairs = _validate_neighbors(neighbors, n_in)
    first = np.array([i for i, _ in pairs], dtype=np.intp)
    second = np.array([j for _, j in pairs], dtype=np.intp)
    a = np.concatenate([first, second])  # direction k: D(rows[a[k]] || rows[b[k]])
    b = np.concatenate([second, first])
    P, Q = R[a], R[b]
    r = _check_rows(P, Q, epsilon=e, delta=d)
    holds, k = _worst(r.fails, r.approx_max)
    m = len(pairs)
    per_pair = np.maximum(np.maximum(r.approx_max[:m], r.approx_max[m:]), 0.0)
    witness = masses = None
    if not holds:
        witness, m1, m2 = _witness(P[k], Q[k], e, labels)
        masses = (m1, m2)
    return TableVerdict(
        holds=holds, epsilon=e, delta=d, tightest_epsilon=_tightest_epsilon(r, d),
        tightest_delta=_tightest_delta(r), worst_pair=(int(a[k]), int(b[k])), witness=witness,
        witness_masses=masses, pair_epsilons=tuple(float(x) for x in per_pair), neighbors=pairs,
        inputs=input_labels,
    )


# ---------------------------------------------------------------------------------------------
# reading a mechanism from CSV
# ---------------------------------------------------------------------------------------------
def _number(cell: str) -> float | None:
    """The cell as a float (decimal or a fraction such as ``1/3``), or None if it is not a number."""
    text = cell.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        return None


def load_mechanism_csv(path: str | PathLike[str]) -> FiniteMechanism:
    """Read a finite mechanism from a CSV file: one row of output probabilities per input.

    Format (comma-separated; blank lines and lines starting with ``#`` are ignored)::

        input,heads,tails        <- optional header row of output labels
        x0,0.75,0.25             <- optional first column of input labels
        x1,1/4,3/4               <- probabilities as decimals or fractions

    * The first row is a **header** of output labels when any of its cells is not a number.
    * The first column holds **input labels** when any data row's first cell is not a number, or
      when the header's first cell is empty (as ``pandas.DataFrame.to_csv`` writes an index).
      With input labels, the header may have a corner cell (``input`` above) or omit it.
    * Every data row must have the same number of cells; each row of probabilities must be a pmf
      (finite, >= 0, summing to 1 within 1e-9); nothing is normalised for you.
    * Numeric input labels (``0, 1, ...``) need the empty-corner header (``,heads,tails``), since
      otherwise the first column is read as probabilities.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    FiniteMechanism
        ``rows`` (validated), ``inputs`` and ``outputs`` labels (as strings; ``0, 1, ...`` when absent).

    Raises
    ------
    ValueError
        An empty file, ragged rows, a non-numeric probability, a header of the wrong length, or a
        row that is not a pmf (the message gives the line number and input label).

    Examples
    --------
    >>> import os, tempfile; f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    >>> _ = f.write("input,no,yes\\nno,0.75,0.25\\nyes,0.25,0.75\\n"); f.close()
    >>> load_mechanism_csv(f.name).outputs, os.unlink(f.name)
    (('no', 'yes'), None)
    """
    with open(path, newline="", encoding="utf-8") as handle:
        lines = [
            (number, row)
            for number, row in enumerate(csv.reader(handle), start=1)
            if row and any(c.strip() for c in row) and not row[0].lstrip().startswith("#")
        ]
    if not lines:
        raise InvalidArgumentError(f"{path}: no rows found; expected one row of output probabilities per input.")
    header: list[str] | None = None
    if any(_number(c) is None for c in lines[0][1]):
        header = [c.strip() for c in lines[0][1]]
        lines = lines[1:]
    if not lines:
        raise InvalidArgumentError(f"{path}: only a header row; expected one row of output probabilities per input.")
    width = len(lines[0][1])
    for number, row in lines:
        if len(row) != width:
            raise InvalidArgumentError(f"{path}, line {number}: {len(row)} cells, but line {lines[0][0]} has {width}.")
    has_labels = any(_number(row[0]) is None for _, row in lines) or (header is not None and header[0] == "")
    n_out = width - 1 if has_labels else width
    if n_out < 1:
        raise InvalidArgumentError(f"{path}: no probability columns.")
    if header is None:
        outputs: tuple[Any, ...] = tuple(range(n_out))
    elif len(header) == n_out:
        outputs = tuple(header)
    elif has_labels and len(header) == n_out + 1:
        outputs = tuple(header[1:])
    else:
        raise InvalidArgumentError(f"{path}: the header has {len(header)} labels for {n_out} probability columns.")
    inputs: tuple[Any, ...] = tuple(row[0].strip() for _, row in lines) if has_labels else tuple(range(len(lines)))
    values = np.empty((len(lines), n_out))
    for r, (number, row) in enumerate(lines):
        for c, cell in enumerate(row[1:] if has_labels else row):
            x = _number(cell)
            if x is None:
                raise InvalidArgumentError(f"{path}, line {number}: {cell.strip()!r} is not a probability.")
            values[r, c] = x
    rows = _validate_rows(values, inputs, [number for number, _ in lines])
    return FiniteMechanism(rows=rows, inputs=inputs, outputs=outputs)
