"""The evaluator protocol: one object per pair (P, Q) that knows the best path for each divergence.

Subclasses implement closed forms; the defaults here derive what they can from the hockey-stick
divergence (TV = E_1; the delta-approximate max divergence by inverting delta(eps)).
"""

from __future__ import annotations

import math

from scipy.optimize import brentq

from dpkit._math import Estimate
from dpkit._math.gaussian import first_float
from dpkit._math.result import Kind
from dpkit.errors import UnsupportedError


class Evaluator:
    """Divergences of one pair (P, Q); subclasses override what they can do better."""

    name = "pair"

    def kl(self) -> Estimate:
        raise UnsupportedError(f"KL divergence is not available for {self.name}.")

    def renyi(self, alpha: float) -> Estimate:
        raise UnsupportedError(f"Rényi divergence is not available for {self.name}.")

    def max_divergence(self) -> Estimate:
        raise UnsupportedError(f"the max divergence is not available for {self.name}.")

    def hockey_stick(self, epsilon: float) -> Estimate:
        raise UnsupportedError(f"the hockey-stick divergence is not available for {self.name}.")

    def total_variation(self) -> Estimate:
        return self.hockey_stick(0.0)

    def statistical_distance(self) -> Estimate:
        return self.total_variation()

    def wasserstein(self, order: float) -> Estimate:
        raise UnsupportedError(f"the Wasserstein distance is not available for {self.name}.")

    def approx_max_divergence(self, delta: float) -> Estimate:
        """ln of the smallest gamma with E_gamma(P||Q) <= delta, by bracketing root finding.

        Where the hockey-stick values are certified (``"exact"`` or ``"upper"``), the result is the
        first float at which the rounded-up value meets ``delta`` (kind ``"upper"``): never below the
        exact root. Where they are quadrature or series estimates (``"numerical"``), so is the root:
        kind ``"numerical"``, ``error`` the bracket plus the quadrature error carried through the
        slope (issue 11: a root found on estimates is not an upper bound).
        """
        if delta >= 1.0:
            return Estimate(-math.inf, kind="exact", method="delta = 1")
        if delta == 0.0:
            return self.max_divergence()
        probe = self.hockey_stick(0.0)
        certified = probe.kind in ("exact", "upper", "interval")
        hi_cap = float(self.max_divergence_or_inf())
        lo = math.log1p(-delta)  # E_gamma >= 1 - gamma > delta for ln gamma < ln(1 - delta)
        lo = lo - 1e-12 * max(1.0, abs(lo)) - 1e-300
        kind: Kind = "upper" if certified else "numerical"
        if math.isfinite(hi_cap):
            hi = hi_cap
        else:
            hi = 1.0
            while float(self.hockey_stick(hi)) > delta:
                lo, hi = hi, 2.0 * hi
                if hi > 1e12:
                    return Estimate(math.inf, kind="upper", method="no finite epsilon below 1e12")
        if float(self.hockey_stick(lo)) <= delta:
            return Estimate(lo, kind=kind, method="bracket root of the hockey-stick")

        def g(e: float) -> float:
            return float(self.hockey_stick(e)) - delta

        if g(hi) > 0:  # the cap itself is not enough: no finite epsilon
            return Estimate(math.inf, kind="exact", method="hockey-stick stays above delta")
        root = brentq(g, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=400)
        if certified:
            value = first_float(lambda e: g(e) <= 0.0, root, lower=lo, upper=hi)
            return Estimate(value, kind="upper", error=abs(value - root),
                            method="root of the rounded-up hockey-stick (first float that meets delta)")
        # estimates: carry the quadrature error through the slope of the profile at the root
        h = 1e-6 * max(1.0, abs(root))
        at = self.hockey_stick(root)
        slope = (float(self.hockey_stick(root - h)) - float(self.hockey_stick(root + h))) / (2.0 * h)
        error = at.error / slope if slope > 0 else math.inf
        return Estimate(root, kind="numerical", error=error + 1e-15 * max(1.0, abs(root)),
                        method="root of the hockey-stick estimates (quadrature or series): an estimate")

    def max_divergence_or_inf(self) -> float:
        try:
            return float(self.max_divergence())
        except UnsupportedError:
            return math.inf
