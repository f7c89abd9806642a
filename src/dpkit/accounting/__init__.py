"""Privacy accounting: composition theorems, privacy loss distributions and the Accountant.

* :mod:`dpkit.accounting.composition`: the composition theorems of the seeds and the literature
  (basic, parallel, advanced, optimal, RDP, zCDP, GDP, Wasserstein), each citing its source.
* :mod:`dpkit.accounting.pld`: discretised privacy loss distributions (pessimistic connect-the-dots
  and second-order optimistic supporting lines), FFT composition (``compose_many`` for long
  heterogeneous sequences), epsilon/delta intervals that contain the exact value.
* :mod:`dpkit.accounting.subsampling`: amplification by Poisson subsampling (add/remove,
  substitution) and by sampling without replacement (substitution), as PLDs;
  :mod:`dpkit.accounting.sampled_gaussian`: the subsampled Gaussian's RDP curve (MTZ 2019).
* :mod:`dpkit.accounting.dpsgd`: DP-SGD: epsilon/delta of T subsampled Gaussian steps (schedules, both
  neighbouring relations) and calibration of sigma, q or T, all certified intervals with no delta floor
  (the tilted accountant, :mod:`dpkit.accounting._pld_tilted`); :mod:`dpkit.accounting.gaussian_profile`:
  composed Gaussians in closed form, in log space.
* :mod:`dpkit.accounting.state`: the one composable accounting state (every family, O(1) per spend);
  :mod:`dpkit.accounting.items`: what it takes; :mod:`dpkit.accounting.filters`: the adaptive filters.
* :mod:`dpkit.accounting.accountant`: a privacy filter that refuses a spend before it would exceed
  the budget, and reports every method side by side.
"""

from dpkit.accounting.accountant import Accountant, MethodReport, Spend
from dpkit.accounting.items import GaussianEvent, LaplaceEvent, PrivacyItem, as_item
from dpkit.accounting.state import AccountingState
from dpkit.accounting.composition import (
    COMPOSERS,
    PaperValue,
    advanced_per_step_epsilon,
    compose_advanced,
    compose_basic,
    compose_gdp,
    compose_guarantees,
    compose_kov_bound,
    compose_optimal,
    compose_optimal_heterogeneous,
    compose_parallel,
    compose_rdp,
    compose_wasserstein,
    compose_zcdp,
    wdp_paper_value,
)
from dpkit.accounting.dpsgd import (
    Calibration,
    DPSGDInterval,
    DPSGDStep,
    calibrate_sampling_rate,
    calibrate_sigma,
    calibrate_steps,
    dpsgd_delta,
    dpsgd_epsilon,
    dpsgd_epsilon_curve,
    dpsgd_rdp_epsilon,
)
from dpkit.accounting.pld import (
    PLD,
    Interval,
    compose_many,
    delta_interval,
    epsilon_interval,
    pld_from_pair,
)
from dpkit.accounting.sampled_gaussian import sampled_gaussian_rdp
from dpkit.accounting.subsampling import (
    SubsampledInterval,
    pld_poisson_subsampled,
    pld_subsampled,
    subsampled_epsilon_interval,
    subsampling_method,
)

__all__ = [
    "Accountant",
    "AccountingState",
    "COMPOSERS",
    "Calibration",
    "DPSGDInterval",
    "DPSGDStep",
    "GaussianEvent",
    "Interval",
    "LaplaceEvent",
    "MethodReport",
    "PLD",
    "PaperValue",
    "PrivacyItem",
    "Spend",
    "SubsampledInterval",
    "advanced_per_step_epsilon",
    "as_item",
    "calibrate_sampling_rate",
    "calibrate_sigma",
    "calibrate_steps",
    "compose_advanced",
    "compose_basic",
    "compose_gdp",
    "compose_guarantees",
    "compose_kov_bound",
    "compose_many",
    "compose_optimal",
    "compose_optimal_heterogeneous",
    "compose_parallel",
    "compose_rdp",
    "compose_wasserstein",
    "compose_zcdp",
    "delta_interval",
    "dpsgd_delta",
    "dpsgd_epsilon",
    "dpsgd_epsilon_curve",
    "dpsgd_rdp_epsilon",
    "epsilon_interval",
    "pld_from_pair",
    "pld_poisson_subsampled",
    "pld_subsampled",
    "sampled_gaussian_rdp",
    "subsampled_epsilon_interval",
    "subsampling_method",
    "wdp_paper_value",
]
