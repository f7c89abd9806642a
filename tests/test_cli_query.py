"""`dpkit query`: the main job, as a new user runs it on the shipped dataset."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from dpkit.cli import main
from dpkit.ledger import SQLiteLedger

DATA = Path(__file__).resolve().parents[1] / "examples" / "transactions.csv"
CATS = "groceries,restaurants,transport,fuel,pharmacy,clothing,electronics,travel,entertainment,utilities"
QUERY = "SELECT category, COUNT(*) AS purchases, AVG(amount) AS avg_amount FROM t GROUP BY category ORDER BY category"


def _args(ledger: Path, *extra: str, sql: str = QUERY) -> list[str]:
    return [
        "query",
        str(DATA),
        sql,
        "--privacy-unit",
        "user_id",
        "--schema",
        "amount=DOUBLE,day=DATE",
        "--epsilon",
        "1",
        "--ledger",
        str(ledger),
        "--bounds",
        "amount=0:200",
        "--max-partitions",
        "2",
        "--max-rows",
        "5",
        "--keys",
        f"category={CATS}",
        "--quiet",
        *extra,
    ]


def test_shipped_dataset_is_the_documented_one() -> None:
    n, users, cats = duckdb.connect().execute(f"SELECT COUNT(*), COUNT(DISTINCT user_id), COUNT(DISTINCT category) "
                                f"FROM '{DATA}'").fetchone()
    assert (users, cats) == (1000, 10) and 15_000 < n < 25_000


def test_runs_spend_the_ledger_and_the_fourth_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "l.db"
    for left in ("2.0-DP", "1.0-DP", "0.0-DP"):
        assert main(_args(ledger, "--budget-epsilon", "3")) == 0
        out = capsys.readouterr().out
        assert f"budget left in {ledger}: {left}" in out
        assert out.count("[") >= 20 and "groceries" in out and "cost 1.0-DP" in out
    assert main(_args(ledger)) == 3  # an existing ledger needs no --budget-epsilon
    err = capsys.readouterr().err
    assert "would exceed the budget" in err and "Nothing was spent" in err
    with SQLiteLedger(ledger) as led:
        assert [e.state for e in led.history()] == ["committed"] * 3


def test_plan_spends_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "l.db"
    assert main(_args(ledger, "--budget-epsilon", "3", "--plan")) == 0
    out = capsys.readouterr().out
    assert "budget split" in out and "l1_sensitivity 10" in out and "nothing was spent" in out and "GROUP BY" in out
    with SQLiteLedger(ledger) as led:
        assert led.history() == ()


def test_json_output_and_private_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sql = "SELECT region, COUNT(DISTINCT user_id) AS customers FROM t GROUP BY region"
    args = [
        "query",
        str(DATA),
        sql,
        "--privacy-unit",
        "user_id",
        "--schema",
        "amount=DOUBLE,day=DATE",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--budget-epsilon",
        "2",
        "--budget-delta",
        "1e-5",
        "--ledger",
        str(tmp_path / "l.db"),
        "--json",
        "--quiet",
        "--max-partitions",
        "1",
    ]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cost"] == "(1.0, 1e-06)-DP" and doc["columns"] == ["region", "customers"]
    # 5 regions of ~200 customers each, far above the threshold: all are released
    assert sorted(r["region"] for r in doc["rows"]) == ["central", "east", "north", "south", "west"]
    assert all(r["customers_lo"] <= r["customers"] <= r["customers_hi"] for r in doc["rows"])


@pytest.mark.parametrize("sql, extra, message", [
    ("SELECT amount FROM t", [], "individual rows"),
    ("SELECT COUNT(*) FROM t JOIN t AS u ON t.user_id = u.user_id", [], "join"),
    ("SELECT SUM(amount) FROM t", ["--bounds", "amount=5:1"], "lo < hi"),
    ("SELECT SUM(price) FROM t", [], "unknown column"),
    ("SELECT SUM(category) FROM t", ["--bounds", "category=0:1"], "not a number"),
    ("SELECT SUM(amount) FROM t", ["--bounds", "amount=oops"], "LO:HI"),
    ("SELECT region, COUNT(*) FROM t GROUP BY region", [], "delta > 0"),
])
def test_bad_input_exits_2_and_spends_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str,
                                               extra: list[str], message: str) -> None:
    ledger = tmp_path / "l.db"
    args = [
        "query",
        str(DATA),
        sql,
        "--privacy-unit",
        "user_id",
        "--schema",
        "amount=DOUBLE,day=DATE",
        "--epsilon",
        "1",
        "--ledger",
        str(ledger),
        "--budget-epsilon",
        "3",
        "--max-partitions",
        "1",
        "--max-rows",
        "1",
        "--quiet",
        *extra,
    ]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    if ledger.exists():
        with SQLiteLedger(ledger) as led:
            assert led.history() == ()


def test_new_ledger_needs_a_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(tmp_path / "new.db")) == 2
    assert "--budget-epsilon" in capsys.readouterr().err
    assert not (tmp_path / "new.db").exists()


def test_help_explains_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["query", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for option in ("--privacy-unit", "--epsilon", "--bounds", "--max-partitions", "--max-rows", "--keys",
                   "--ledger", "--budget-epsilon", "--engine", "--plan", "Exit status"):
        assert option in out


def test_plan_and_run_agree_on_the_accuracy_epsilon_at_a_given_confidence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--accuracy's epsilon depends on --confidence: --plan computes it at that level too, so the cost it shows
    is the one a run charges (it once planned at 95% while the run charged for the given level)."""
    ledger = tmp_path / "l.db"
    args = ["query", str(DATA), "SELECT COUNT(*) AS n FROM t", "--privacy-unit", "user_id", "--schema",
            "amount=DOUBLE,day=DATE", "--accuracy", "n=30", "--confidence", "0.9", "--ledger", str(ledger),
            "--budget-epsilon", "5", "--max-rows", "5", "--quiet", "--insecure-seed", "1"]
    assert main([*args, "--plan"]) == 0
    planned = capsys.readouterr().out.split("cost: ")[1].split("-DP")[0]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"cost {planned}-DP" in out and "90% interval" in out


def test_signed_noise_releases_the_raw_noisy_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """By default a count and its interval ends are clamped at 0; --signed-noise releases the raw noise (an
    empty selection at epsilon 0.001 then has a negative interval end)."""
    base = ["query", str(DATA), "SELECT COUNT(*) AS n FROM t WHERE amount > 10000", "--privacy-unit", "user_id",
            "--schema", "amount=DOUBLE,day=DATE", "--epsilon", "0.001", "--ledger", str(tmp_path / "l.db"),
            "--budget-epsilon", "1", "--max-rows", "5", "--quiet", "--json", "--insecure-seed", "2"]
    assert main(base) == 0
    clamped = json.loads(capsys.readouterr().out)["rows"][0]
    assert clamped["n"] >= 0 and clamped["n_lo"] >= 0
    assert main([*base, "--signed-noise"]) == 0
    raw = json.loads(capsys.readouterr().out)["rows"][0]
    assert raw["n_lo"] < 0
