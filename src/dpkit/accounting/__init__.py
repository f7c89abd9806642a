"""Privacy accounting: composition theorems and privacy loss distributions.

* :mod:`dpkit.accounting.pld`: discretised privacy loss distributions (pessimistic connect-the-dots
  and optimistic rounding), FFT composition, epsilon/delta intervals that contain the exact value.
* :mod:`dpkit.accounting.composition`: the composition theorems of the seeds and the literature.
"""

from dpkit.accounting.pld import PLD, Interval, delta_interval, epsilon_interval, pld_from_pair

__all__ = ["Interval", "PLD", "delta_interval", "epsilon_interval", "pld_from_pair"]
