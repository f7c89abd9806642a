"""``dpkit account dpsgd``: epsilon of DP-SGD training, calibration of sigma or of the number of steps, and a
plot of epsilon over the steps (its numbers come from the accountant, not from the printed table)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from dpkit._table import fmt_number, render
from dpkit.errors import InvalidArgumentError

if TYPE_CHECKING:
    from dpkit.accounting.dpsgd import DPSGDInterval, Neighboring, Sampling


def _check(args: argparse.Namespace) -> tuple[float, int | None, Sampling, Neighboring]:
    if args.sampling_rate is None:
        raise InvalidArgumentError("dpsgd needs --sampling-rate q in (0, 1].")
    q = float(args.sampling_rate)
    if not (0.0 < q <= 1.0):
        raise InvalidArgumentError(f"--sampling-rate must be in (0, 1]; got {args.sampling_rate}.")
    steps = args.steps
    if steps is not None and steps < 1:
        raise InvalidArgumentError(f"--steps must be an integer >= 1; got {steps}.")
    if args.sigma is not None and not (args.sigma > 0 and math.isfinite(args.sigma)):
        raise InvalidArgumentError(f"--sigma must be finite and > 0; got {args.sigma}.")
    # argparse's choices limit --sampling to poisson / without-replacement
    sampling = cast("Sampling", args.sampling.replace("-", "_"))
    neighboring: Neighboring = "substitute" if args.neighbours == "substitution" else "add_remove"
    return q, steps, sampling, neighboring


def run_dpsgd(args: argparse.Namespace, delta: float) -> int:
    from dpkit.accounting.dpsgd import (calibrate_sigma, calibrate_steps, dpsgd_epsilon, dpsgd_epsilon_curve,
                                        dpsgd_rdp_epsilon)

    q, steps, sampling, neighboring = _check(args)
    scheme = f"{args.sampling}, {args.neighbours}"
    if args.target_epsilon is not None:
        if args.sigma is None:
            if steps is None:
                raise InvalidArgumentError("calibrating sigma needs --steps.")
            c = calibrate_sigma(epsilon=args.target_epsilon, delta=delta, sampling_rate=q, steps=steps,
                                sampling=sampling, neighboring=neighboring)
            print(f"calibrated sigma for epsilon <= {c.target_epsilon:g} at delta = {delta:g} after {steps} steps, "
                  f"q = {q:g} ({scheme})\n")
            rows = [["sigma", f"{c.value:.7g}", f"epsilon in {c.interval} (upper end <= target)"],
                    ["sigma x (1 - 1e-6)", f"{c.beyond_value:.7g}", f"upper end {c.beyond_upper:.10g} > target"]]
        else:
            c = calibrate_steps(epsilon=args.target_epsilon, delta=delta, sigma=args.sigma, sampling_rate=q,
                                sampling=sampling, neighboring=neighboring)
            steps = int(c.value)
            print(f"most steps with epsilon <= {c.target_epsilon:g} at delta = {delta:g}, sigma = {args.sigma:g}, "
                  f"q = {q:g} ({scheme})\n")
            rows = [["steps", str(int(c.value)), f"epsilon in {c.interval} (upper end <= target)"],
                    ["one more step", str(int(c.beyond_value)), f"upper end {c.beyond_upper:.10g} > target"]]
        print(render(["parameter", "value", "evidence"], rows))
        print(f"\npair(s): {c.interval.method}")
        sigma = c.value if args.sigma is None else args.sigma
    else:
        if args.sigma is None or steps is None:
            raise InvalidArgumentError(
                "dpsgd needs --sigma and --steps (or --target-epsilon to calibrate one of them)."
            )
        sigma = args.sigma
        iv = dpsgd_epsilon(delta=delta, sigma=sigma, sampling_rate=q, steps=steps, sampling=sampling,
                           neighboring=neighboring)
        kind = "interval of an upper bound (use the upper end)" if iv.method.startswith("upper bound") else \
            "interval (use the upper end)"
        print(f"DP-SGD: {steps} steps, sigma = {sigma:g}, q = {q:g} ({scheme}); delta = {delta:g}\n")
        rows = [["PLD (tilted FFT), certified", str(iv), kind]]
        if (sampling, neighboring) == ("poisson", "add_remove") and q < 1.0:
            rdp = dpsgd_rdp_epsilon(delta=delta, sigma=sigma, sampling_rate=q, steps=steps)
            rows.append(["RDP (MTZ 2019, fractional orders; CKS conversion)", fmt_number(float(rdp)), "upper bound"])
        print(render(["method", "epsilon", "kind"], rows))
        print(f"\npair(s): {iv.method}")
    if args.plot:
        ts = sorted({max(1, int(round(x))) for x in _geomspace(max(1, steps // 1000), steps, 8)})
        curve = dpsgd_epsilon_curve(delta=delta, sigma=sigma, sampling_rate=q, steps=ts, sampling=sampling,
                                    neighboring=neighboring)
        _plot(curve, delta, sigma, q, args.plot)
        print(f"\nplot written to {args.plot}")
    return 0


def _geomspace(a: float, b: float, n: int) -> list[float]:
    if a >= b:
        return [float(b)]
    return [a * (b / a) ** (i / (n - 1)) for i in range(n)]


def _plot(curve: Sequence[tuple[int, DPSGDInterval]], delta: float, sigma: float, q: float, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        raise InvalidArgumentError("--plot needs matplotlib: pip install 'dpkit[plot]'.") from None
    ts = [t for t, _ in curve]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(ts, [iv.upper for _, iv in curve], marker="o", ms=3, label="PLD upper end (certified)")
    ax.plot(ts, [iv.lower for _, iv in curve], ls="--", lw=0.8, label="PLD lower end")
    ax.set_xscale("log")
    ax.set_xlabel("training steps")
    ax.set_ylabel(f"epsilon at delta = {delta:g}")
    ax.set_title(f"DP-SGD: sigma = {sigma:.4g}, q = {q:g}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
