r"""Exact verification of privacy claims (Dwork & Roth 2014, Remark 3.1) and the seed lemmas as code.

:mod:`dpkit.verify.exact` decides whether a pair of output laws, or a finite mechanism given as a
table of output probabilities, is (epsilon, delta)-DP, and reports the tightest epsilon, the worst
neighbouring pair and a witness event when the claim fails.  :mod:`dpkit.verify.lemmas` turns
Lemmas 3.17-3.19 of the seeds into functions and checkable statements (with the corrections of
docs/notes.md §3 and §4).

>>> from dpkit.verify import table
>>> v = table([[0.75, 0.25], [0.25, 0.75]], epsilon=1.1)    # randomized response at ln 3
>>> v.holds, v.tightest_epsilon
(True, 1.0986122886681098)
"""

from dpkit.verify.exact import FiniteMechanism, TableVerdict, Verdict, load_mechanism_csv, pair, table

__all__ = ["FiniteMechanism", "TableVerdict", "Verdict", "load_mechanism_csv", "pair", "table"]
