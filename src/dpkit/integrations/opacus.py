r"""dpkit's DP-SGD accountant for training loops: plain PyTorch (or any framework) and Opacus.

:class:`DPSGDAccountant` keeps the history of steps, run-length encoded as Opacus does
(``[noise_multiplier, sample_rate, steps]`` rows), and answers ``get_epsilon(delta)`` with the certified
upper end of :func:`dpkit.accounting.dpsgd_epsilon` over that schedule (the PLD of the Poisson subsampled
Gaussian; Zhu, Dong, Wang 2022, arXiv 2106.08567, Thm 11).  With a ``budget`` it is also a guard:
:meth:`DPSGDAccountant.check_step` raises :class:`~dpkit.errors.BudgetExceededError` *before* a step that
would take the certified epsilon past the budget, and :meth:`step` refuses to record one (so a loop that
calls ``check_step`` before ``optimizer.step()`` stops before it overspends).  For a homogeneous history
(one sigma and q) the check costs O(1): the number of steps the budget allows is computed once
(:func:`dpkit.accounting.calibrate_steps`).

Opacus: :func:`register` registers the accountant under ``mechanism = "dpkit"`` so that
``PrivacyEngine(accountant="dpkit")`` uses it; :func:`opacus_accountant` returns an instance that is an
``opacus.accountants.IAccountant`` (step, get_epsilon, __len__, mechanism, state_dict/load_state_dict,
get_optimizer_hook_fn).  Opacus and torch are imported only by those two functions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dpkit._math import check_delta
from dpkit.errors import ArgumentTypeError, BudgetExceededError, InvalidArgumentError
from dpkit.guarantees import ApproxDP

if TYPE_CHECKING:
    from dpkit.accounting.dpsgd import DPSGDInterval, DPSGDStep

__all__ = ["DPSGDAccountant", "opacus_accountant", "register"]

MECHANISM = "dpkit"


class DPSGDAccountant:
    """DP-SGD accounting by certified PLD for a training loop (see the module docstring).

    Parameters
    ----------
    budget : ApproxDP, optional
        With a budget, :meth:`check_step` and :meth:`step` refuse a step past it.
    sampling, neighboring : as :func:`dpkit.accounting.dpsgd_epsilon` (Opacus samples by Poisson and
        counts add/remove neighbours: the defaults).

    Examples
    --------
    >>> acc = DPSGDAccountant()
    >>> for _ in range(100):
    ...     acc.step(noise_multiplier=1.0, sample_rate=0.01)
    >>> len(acc), acc.history
    (100, [[1.0, 0.01, 100]])
    """

    def __init__(self, budget: ApproxDP | None = None, *, sampling: str = "poisson",
                 neighboring: str = "add_remove") -> None:
        if budget is not None and not isinstance(budget, ApproxDP):
            raise ArgumentTypeError(f"budget must be an ApproxDP (epsilon, delta); got {type(budget).__name__}.")
        from dpkit.accounting.dpsgd import check_scheme

        self.sampling, self.neighboring = check_scheme(sampling, neighboring)
        self.budget = budget
        self.history: list[list[Any]] = []
        self._allowance: dict[tuple[float, float], int] = {}

    # ---- the Opacus accountant interface --------------------------------------------------------
    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one step (after :meth:`check_step` when there is a budget: a step past it is refused)."""
        sigma, q = self._validate(noise_multiplier, sample_rate)
        if self.budget is not None:
            self.check_step(noise_multiplier=sigma, sample_rate=q)
        if self.history and self.history[-1][0] == sigma and self.history[-1][1] == q:
            self.history[-1][2] += 1
        else:
            self.history.append([sigma, q, 1])

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """The certified upper end of epsilon(delta) over the steps so far (0.0 before any step)."""
        return float(self.get_epsilon_interval(delta).upper) if self.history else 0.0

    def __len__(self) -> int:
        """The number of steps taken."""
        return int(sum(row[2] for row in self.history))

    @classmethod
    def mechanism(cls) -> str:
        return MECHANISM

    # ---- dpkit's extras -------------------------------------------------------------------------
    def get_epsilon_interval(self, delta: float) -> DPSGDInterval:
        """[lower, upper] containing epsilon(delta) (a :class:`~dpkit.accounting.DPSGDInterval`)."""
        from dpkit.accounting.dpsgd import dpsgd_epsilon

        d = check_delta(delta, open_interval=True)
        if not self.history:
            raise InvalidArgumentError("no steps yet: epsilon is 0.")
        return dpsgd_epsilon(delta=d, schedule=self.schedule())

    def schedule(self) -> list[DPSGDStep]:
        """The history as a schedule of :class:`~dpkit.accounting.DPSGDStep` phases."""
        from dpkit.accounting.dpsgd import DPSGDStep

        return [DPSGDStep(sigma=s, sampling_rate=q, steps=int(t), sampling=self.sampling,
                          neighboring=self.neighboring) for s, q, t in self.history]

    def check_step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """Raise BudgetExceededError if ``steps`` more steps would take the certified epsilon past the budget
        (nothing is recorded either way)."""
        if self.budget is None:
            return
        sigma, q = self._validate(noise_multiplier, sample_rate)
        eps_b, delta_b = float(self.budget.epsilon), float(self.budget.delta)
        kinds = {(s, r) for s, r, _ in self.history} | {(sigma, q)}
        total = len(self) + int(steps)
        if len(kinds) == 1:  # one sigma and q: compare with the allowance, computed once
            if (sigma, q) not in self._allowance:
                from dpkit.accounting.dpsgd import calibrate_steps

                try:
                    self._allowance[(sigma, q)] = int(calibrate_steps(
                        epsilon=eps_b, delta=delta_b, sigma=sigma, sampling_rate=q, sampling=self.sampling,
                        neighboring=self.neighboring).value)
                except ValueError:
                    self._allowance[(sigma, q)] = 0
            allowed = self._allowance[(sigma, q)]
            if total > allowed:
                raise BudgetExceededError(
                    f"refused: step {total} at noise_multiplier={sigma:g}, sample_rate={q:g} would exceed the budget "
                    f"{self.budget} ({allowed} steps fit, by the certified PLD upper bound). Nothing was recorded.")
            return
        from dpkit.accounting.dpsgd import DPSGDStep, dpsgd_epsilon

        sched = self.schedule() + [DPSGDStep(sigma=sigma, sampling_rate=q, steps=int(steps),
                                             sampling=self.sampling, neighboring=self.neighboring)]
        up = dpsgd_epsilon(delta=delta_b, schedule=sched).upper
        if up > eps_b:
            raise BudgetExceededError(f"refused: the next step would take epsilon to {up:.6g} > budget {eps_b:g} "
                                      f"at delta {delta_b:g}. Nothing was recorded.")

    def state_dict(self, destination: Any = None) -> Any:
        from collections import OrderedDict
        from copy import deepcopy

        out = OrderedDict() if destination is None else destination
        out["history"] = deepcopy(self.history)
        out["mechanism"] = self.mechanism()
        return out

    def load_state_dict(self, state_dict: Any) -> None:
        if not state_dict or "history" not in state_dict or state_dict.get("mechanism") != self.mechanism():
            raise InvalidArgumentError(f"not a state dict of the {self.mechanism()!r} accountant.")
        hist = [[float(s), float(q), int(t)] for s, q, t in state_dict["history"]]
        for s, q, t in hist:
            self._validate(s, q)
            if t < 1:
                raise InvalidArgumentError(f"a history row has {t} steps; expected >= 1.")
        self.history = hist

    @staticmethod
    def _validate(noise_multiplier: float, sample_rate: float) -> tuple[float, float]:
        sigma, q = float(noise_multiplier), float(sample_rate)
        if not (sigma > 0 and math.isfinite(sigma)):
            raise InvalidArgumentError(f"noise_multiplier must be finite and > 0; got {noise_multiplier!r}.")
        if not (0.0 < q <= 1.0):
            raise InvalidArgumentError(f"sample_rate must be in (0, 1]; got {sample_rate!r}.")
        return sigma, q


_OPACUS_CLASS: Any = None


def _opacus_class() -> Any:
    """A subclass of Opacus's IAccountant with dpkit's implementation (built on first use)."""
    global _OPACUS_CLASS
    if _OPACUS_CLASS is None:
        from opacus.accountants import IAccountant

        class DpkitAccountant(DPSGDAccountant, IAccountant):  # type: ignore[misc]  # opacus is untyped: its base is Any
            """dpkit's certified PLD accountant as an Opacus IAccountant."""

            def __init__(self, budget: ApproxDP | None = None) -> None:
                DPSGDAccountant.__init__(self, budget)

            def state_dict(self, destination: Any = None) -> Any:
                return DPSGDAccountant.state_dict(self, destination)

            def load_state_dict(self, state_dict: Any) -> None:
                DPSGDAccountant.load_state_dict(self, state_dict)

        _OPACUS_CLASS = DpkitAccountant
    return _OPACUS_CLASS


def opacus_accountant(budget: ApproxDP | None = None) -> Any:
    """An instance of dpkit's accountant that is an ``opacus.accountants.IAccountant`` (needs opacus)."""
    return _opacus_class()(budget)


def register() -> None:
    """Register dpkit's accountant with Opacus as ``PrivacyEngine(accountant="dpkit")`` (needs opacus)."""
    from opacus.accountants import register_accountant

    register_accountant(MECHANISM, _opacus_class(), force=True)
