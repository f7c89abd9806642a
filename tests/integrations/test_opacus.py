"""dpkit's DP-SGD accountant in real training loops on the CPU: Opacus's PrivacyEngine with accountant="dpkit", and
a plain PyTorch DP-SGD loop through dpkit's own API.  Run by ``make test-torch`` (its own venv with CPU torch and
Opacus); skipped where torch or opacus is not installed."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from dpkit.accounting import dpsgd_epsilon, dpsgd_rdp_epsilon  # noqa: E402
from dpkit.errors import BudgetExceededError  # noqa: E402
from dpkit.guarantees import ApproxDP  # noqa: E402
from dpkit.integrations.opacus import DPSGDAccountant, opacus_accountant, register  # noqa: E402


def _data(n: int = 256):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return torch.utils.data.TensorDataset(x, y)


@pytest.mark.filterwarnings("ignore::UserWarning:opacus")  # Opacus's own advice (secure RNG off, in a test)
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore:Full backward hook:UserWarning")
def test_opacus_training_loop_with_dpkit_accountant():
    from opacus import PrivacyEngine

    register()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(_data(), batch_size=32)
    engine = PrivacyEngine(accountant="dpkit")
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.1,
                                             max_grad_norm=1.0)
    assert engine.accountant.mechanism() == "dpkit" and isinstance(engine.accountant, opacus.accountants.IAccountant)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(2):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
    steps = len(engine.accountant)
    assert steps == 2 * len(loader)
    eps = engine.get_epsilon(1e-5)
    q = 32 / 256
    iv = dpsgd_epsilon(delta=1e-5, sigma=1.1, sampling_rate=q, steps=steps)
    assert eps == iv.upper
    # Opacus's own RDP accountant on the same history is a valid but looser bound
    rdp = opacus.accountants.RDPAccountant()
    rdp.history = [(1.1, q, steps)]
    assert iv.upper <= rdp.get_epsilon(1e-5)
    state = engine.accountant.state_dict()
    fresh = opacus_accountant()
    fresh.load_state_dict(state)
    assert fresh.get_epsilon(1e-5) == eps


def test_fractional_rdp_matches_opacus_rdp_accountant():
    """The RDP curve at fractional orders (MTZ 2019) against Opacus's on its own order list."""
    from opacus.accountants.analysis.rdp import compute_rdp

    orders = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
    from dpkit.accounting.sampled_gaussian import sampled_gaussian_rdp

    ours = sampled_gaussian_rdp(sigma=1.1, sampling_rate=0.01, orders=orders)
    theirs = compute_rdp(q=0.01, noise_multiplier=1.1, steps=1, orders=orders)
    for a, t in zip(orders, theirs):
        # ours is an upper bound (rounded up, series cut bounded): at most 1e-7 above Opacus's rounded-to-nearest
        assert float(t) * (1 - 1e-12) <= float(ours.epsilon(a)) <= float(t) * (1 + 1e-7)
    ours_eps = float(dpsgd_rdp_epsilon(delta=1e-5, sigma=1.1, sampling_rate=0.01, steps=1000, orders=orders))
    rdp = opacus.accountants.RDPAccountant()
    rdp.history = [(1.1, 0.01, 1000)]
    assert ours_eps == pytest.approx(rdp.get_epsilon(1e-5, alphas=orders), rel=1e-6)


def test_plain_pytorch_loop_with_a_budget_stops_before_overspending():
    """Manual DP-SGD (per-example clipping, Gaussian noise, Poisson batches) with dpkit's accountant as the guard."""
    torch.manual_seed(0)
    data = _data()
    n, q, sigma, clip = len(data), 0.05, 2.0, 1.0
    model = torch.nn.Linear(8, 2)
    acc = DPSGDAccountant(budget=ApproxDP(epsilon=2.0, delta=1e-5))
    loss_fn = torch.nn.CrossEntropyLoss()
    steps, step_time, acc_time = 0, 0.0, 0.0
    acc.check_step(noise_multiplier=sigma, sample_rate=q)  # the one-off allowance (calibrate_steps), timed apart
    while True:
        t0 = time.perf_counter()
        try:
            acc.check_step(noise_multiplier=sigma, sample_rate=q)
        except BudgetExceededError:
            break
        t1 = time.perf_counter()
        mask = torch.rand(n) < q  # Poisson sampling
        xb, yb = data.tensors[0][mask], data.tensors[1][mask]
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for x, y in zip(xb, yb):  # per-example gradients, clipped
            model.zero_grad()
            loss_fn(model(x[None]), y[None]).backward()
            g = [p.grad.detach().clone() for p in model.parameters()]
            norm = torch.sqrt(sum((gi**2).sum() for gi in g))
            for acc_g, gi in zip(grads, g):
                acc_g += gi * min(1.0, clip / (float(norm) + 1e-12))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p -= 0.1 * (g + sigma * clip * torch.randn_like(g)) / (q * n)
        t2 = time.perf_counter()
        acc.step(noise_multiplier=sigma, sample_rate=q)
        t3 = time.perf_counter()
        steps += 1
        step_time += t2 - t1
        acc_time += (t1 - t0) + (t3 - t2)
        if steps > 2000:  # pragma: no cover - the budget must stop it long before
            pytest.fail("the budget never stopped the loop")
    assert len(acc) == steps > 0
    assert acc.get_epsilon(1e-5) <= 2.0
    with pytest.raises(BudgetExceededError):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    assert len(acc) == steps  # the refused step was not recorded
    print(f"\nplain loop: {steps} steps, {1e3 * step_time / steps:.3f} ms/step training, "
          f"{1e6 * acc_time / steps:.1f} us/step accounting (check + step, after the one-off allowance)")
