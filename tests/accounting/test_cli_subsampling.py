"""``dpkit account ... --sampling-rate``: the subsampled PLD interval and the pair it used."""

from __future__ import annotations

from dpkit.cli import main


def test_account_subsampled_schemes_print_their_pairs(capsys):
    base = [
        "account",
        "gaussian",
        "--sigma",
        "1",
        "--compositions",
        "100",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
    ]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "Thm 11" in out and "interval (use the upper end)" in out
    rdp_line = next(line for line in out.splitlines() if line.startswith("RDP (MTZ 2019"))
    pld_line = next(line for line in out.splitlines() if line.startswith("PLD"))
    pld_upper = float(pld_line.split("[")[1].split("]")[0].split(",")[1])
    assert "upper bound" in rdp_line and float(rdp_line.split()[-3]) > pld_upper  # RDP is valid but looser
    assert main(base + ["--sampling", "without-replacement", "--neighbours", "substitution"]) == 0
    out = capsys.readouterr().out
    assert "dominating pair" in out and "Thm 10" in out
    assert main(base + ["--neighbours", "substitution"]) == 0
    assert "interval of an upper bound" in capsys.readouterr().out


def test_account_subsampled_refuses_without_replacement_add_remove(capsys):
    args = ["account", "laplace", "--scale", "2", "--delta", "1e-5", "--sampling-rate", "0.1", "--sampling",
            "without-replacement"]
    assert main(args) == 2
    assert "substitution neighbours only" in capsys.readouterr().err
