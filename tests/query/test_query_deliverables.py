"""Issue 12's analyst-facing deliverables that no other test pins down: public keys given as a string, a
dataframe or a public table's name; a target accuracy instead of epsilon; the selection threshold in a result
that released nothing; MIN/MAX/MEDIAN of dates and numbers without GROUP BY near the truth; valid JSON for
every kind of cell (a quantile's missing interval included).  Seeds are fixed (insecure_seeded)."""

from __future__ import annotations

import json
import math
from datetime import date, timedelta
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.cli import main
from dpkit.errors import ArgumentTypeError
from dpkit.guarantees import ApproxDP, PureDP
from dpkit.query import Session
from dpkit.random import insecure_seeded

DATA = Path(__file__).resolve().parents[2] / "examples" / "transactions.csv"
DAY_BOUNDS: Any = {"day": ("2025-01-01", "2027-01-01"), "amount": (0, 200)}
REGIONS = ["central", "east", "north", "south", "west"]


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    s = Session(DATA, privacy_unit="user_id", schema={"amount": "DOUBLE", "day": "DATE"},
                public={"regions": DATA.parent / "regions.csv"}, ledger=tmp_path / "l.db",
                budget=ApproxDP(epsilon=2000.0, delta=1e-4), max_partitions=2, max_rows=5)
    yield s
    s.close()


def _ledger_state(s: Session) -> tuple[Any, ...]:
    return s.ledger.history(), s.remaining()  # type: ignore[attr-defined]  # a SQLite ledger


def test_keys_as_a_string_are_refused_not_split_into_letters(session: Session) -> None:
    before = _ledger_state(session)
    for keys in ("north", {"region": "north"}):
        with pytest.raises(ArgumentTypeError, match="string"):
            session.sql("SELECT region, COUNT(*) AS n FROM t GROUP BY region", epsilon=1.0, keys=keys)
    assert _ledger_state(session) == before


def test_keys_from_a_dataframe_or_a_public_table_match_the_dict(session: Session) -> None:
    q = "SELECT r.region, COUNT(*) AS n FROM t JOIN regions r ON t.region = r.region GROUP BY r.region"
    released = [[row[0] for row in session.sql(q, keys=keys, epsilon=1.0, rng=insecure_seeded(3)).rows]
                for keys in ({"region": REGIONS}, pd.DataFrame({"region": REGIONS}), "regions")]
    assert released[0] == released[1] == released[2] == REGIONS  # every public key, in their order, no selection


def test_a_target_accuracy_is_met_and_charged_only_when_run(session: Session) -> None:
    before = _ledger_state(session)
    plan = session.plan("SELECT COUNT(*) AS n FROM t", accuracy={"n": 25.0})
    assert _ledger_state(session) == before  # planning spends nothing
    width = plan.half_widths()["n"]["rows"]
    assert width <= 25.0 and width > 24.0  # the smallest epsilon: its half-width is at the target, not far below
    guarantee: Any = plan.guarantee
    eps = guarantee.epsilon
    r = session.sql("SELECT COUNT(*) AS n FROM t", accuracy={"n": 25.0}, rng=insecure_seeded(1))
    (lo, hi), = r.intervals["n"]
    charged: Any = r.guarantee
    assert charged.epsilon == eps and (hi - lo) / 2 <= 25.0 + 1.0  # +1: the geometric grid rounds outward
    assert session.remaining().epsilon == pytest.approx(before[1].epsilon - eps)


def test_the_selection_threshold_is_in_a_result_that_released_nothing(session: Session) -> None:
    r = session.sql("SELECT region, COUNT(*) AS n FROM t WHERE amount > 100000 GROUP BY region", epsilon=0.1,
                    delta=1e-6, rng=insecure_seeded(2))
    assert len(r.rows) == 0
    assert r.selection["released"] == 0 and r.selection["threshold"] > 0
    assert f"threshold of {r.selection['threshold']}" in str(r)


def test_min_max_median_without_group_by_near_the_truth(session: Session) -> None:
    """Dates come back as dates, on the right side of the true extremes; numbers near the true median."""
    import duckdb

    true: Any = duckdb.connect().execute(
        f"SELECT MIN(day), MAX(day), MEDIAN(LEAST(GREATEST(amount, 0), 200)) FROM read_csv('{DATA}', "
        "types={'amount': 'DOUBLE', 'day': 'DATE'})").fetchone()
    r = session.sql("SELECT MIN(day) AS d0, MAX(day) AS d1, MEDIAN(amount) AS m FROM t", epsilon=100.0,
                    bounds=DAY_BOUNDS, rng=insecure_seeded(4))
    (d0, d1, m), = r.rows
    bucket_days = 730 / 1024
    # MIN/MAX are the DP 0- and 1-quantiles: where no unit lies near the extreme the release may fall between
    # the clamping bound and the data (result.details says so), never far inside the data
    assert date(2025, 1, 1) <= d0 <= true[0] + timedelta(days=3 * bucket_days + 1)
    assert true[1] - timedelta(days=3 * bucket_days + 1) <= d1 <= date(2027, 1, 1)
    assert abs(m - true[2]) <= 5.0  # the median of the bounded data (units over max_rows weigh less)


def test_json_is_valid_for_every_kind_of_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Counts, sums, a ratio (no interval), a quantile (no value interval), a date, a distinct count, a
    join key: the CLI's JSON parses with NaN and Infinity forbidden."""
    sql = ("SELECT r.area, COUNT(*) AS n, SUM(amount) / COUNT(*) AS mean, MEDIAN(amount) AS med, "
           "MIN(day) AS first, COUNT(DISTINCT category) AS cats FROM t JOIN regions r ON t.region = r.region "
           "GROUP BY r.area")
    args = ["query", str(DATA), sql, "--privacy-unit", "user_id", "--schema", "amount=DOUBLE,day=DATE",
            "--epsilon", "1", "--delta", "1e-6", "--budget-epsilon", "2", "--budget-delta", "1e-5",
            "--ledger", str(tmp_path / "l.db"), "--bounds", "amount=0:200", "--bounds", "day=2026-01-01:2026-12-31",
            "--public", f"regions={DATA.parent / 'regions.csv'}", "--max-partitions", "1", "--max-rows", "5",
            "--json", "--quiet", "--insecure-seed", "5"]
    assert main(args) == 0

    def refuse(name: str) -> float:
        raise AssertionError(f"{name} in JSON output")

    doc = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert doc["rows"] and {"n_lo", "med_lo", "first", "cats_hi"} <= set(doc["rows"][0])
    assert all(row["med_lo"] is None for row in doc["rows"])  # marked unavailable, not NaN
    assert not any(isinstance(v, float) and not math.isfinite(v) for row in doc["rows"] for v in row.values())


def test_pure_budget_counts_print_at_a_sensible_precision(tmp_path: Path) -> None:
    with Session(pd.DataFrame({"u": np.arange(50), "x": np.ones(50)}), privacy_unit="u", ledger=tmp_path / "p.db",
                 budget=PureDP(3.0), max_rows=1) as s:
        for _ in range(3):
            r = s.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.1, rng=insecure_seeded(0))
        assert "cost 0.1-DP" in str(r)


@pytest.mark.parametrize(("query", "plain"), [
    ("SELECT f.region, COUNT(*) AS n FROM t AS f WHERE f.amount > 10 GROUP BY f.region",
     "SELECT region, COUNT(*) AS n FROM t WHERE amount > 10 GROUP BY region"),
    ("SELECT CAST(FLOOR(amount / 50) * 50 AS INT) AS band, COUNT(*) AS n FROM t "
     "GROUP BY CAST(FLOOR(amount / 50) * 50 AS INT)",
     "SELECT CAST(FLOOR(amount / 50) * 50 AS INT) AS band, COUNT(*) AS n FROM t GROUP BY band"),
    ("SELECT CAST(date_trunc('week', day) AS DATE) AS w, COUNT(*) AS n FROM t "
     "GROUP BY CAST(date_trunc('week', day) AS DATE)",
     "SELECT date_trunc('week', day) AS w, COUNT(*) AS n FROM t GROUP BY w"),
])
def test_aliases_and_cast_keys_are_accepted_as_written(session: Session, query: str, plain: str) -> None:
    """`FROM t AS f ... f.col` and a CAST in a GROUP BY key (repeated or by its alias) are the same query."""
    def raw(q: str) -> list[tuple[Any, ...]]:
        plan = session.plan(q, epsilon=1.0, delta=1e-6, max_partitions=100, max_rows=10_000)
        return sorted(session._backend.fetch(plan.sql), key=repr)
    got, want = raw(query), raw(plain)
    assert len(got) == len(want) > 1
    assert [row[1:] for row in got] == [row[1:] for row in want]


def test_count_star_needs_max_rows_and_says_what_bounding_did(tmp_path: Path) -> None:
    """No default turns COUNT(*) into a count of units: max_rows is required (counting units needs none), and
    every result says what bounding did, or that its intervals are for the bounded data only."""
    from dpkit.errors import InvalidArgumentError

    frame = pd.DataFrame({"u": [1, 1, 1, 2], "x": [1.0, 2.0, 3.0, 4.0]})
    with Session(frame, privacy_unit="u", ledger=tmp_path / "l.db", budget=PureDP(3.0)) as s:
        with pytest.raises(InvalidArgumentError, match="max_rows is required"):
            s.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.0)
        assert s.remaining() == PureDP(3.0)
        units = s.sql("SELECT COUNT(DISTINCT u) AS units FROM t", epsilon=1.0, rng=insecure_seeded(0))
        assert units.bounding["released"] and "bounding (DP counts" in str(units)
        assert units.split["bounding_report"][0] == pytest.approx(0.05)  # its explicit share of the budget
        bare = s.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.0, max_rows=2, bounding_report=False,
                     rng=insecure_seeded(0))
        assert "intervals cover the bounded data only" in str(bare)


def test_a_callers_connection_keeps_no_probe_table(tmp_path: Path) -> None:
    """The plan's check tables (an empty one, one of NULLs) are the session's: closing it leaves the caller's
    connection without the NULL-row table."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT range AS u, range * 1.5 AS x FROM range(10)")
    with Session(con, table="people", privacy_unit="u", ledger=tmp_path / "l.db", budget=PureDP(1.0),
                 max_rows=1) as s:
        s.sql("SELECT COUNT(*) AS n FROM people", epsilon=0.5, rng=insecure_seeded(0))
    names = [row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    assert "people" in names and not any(n.startswith("dpkit_null_row") for n in names)
    con.close()


@pytest.mark.parametrize("query", [
    "SELECT region, COUNT(*) AS n FROM t GROUP BY region HAVING COUNT(*) > 'abc'",
    "SELECT COUNT(*) + INTERVAL 'x' DAY AS n FROM t",
    "SELECT region, COUNT(*) AS n FROM t GROUP BY region ORDER BY regexp_matches(region, '(')",
    "SELECT make_date(2020, 13, CAST(COUNT(*) AS INT)) AS d FROM t",
])
def test_a_typo_in_post_processing_is_refused_before_anything_is_spent(session: Session, query: str) -> None:
    """HAVING, ORDER BY and expressions over aggregates run after the spend, under TRY; one that fails for a
    reason no value decides was a charged, silently empty answer (or a charged failure).  The plan runs them
    once on a made-up row first."""
    from dpkit.errors import InvalidArgumentError

    before = _ledger_state(session)
    with pytest.raises(InvalidArgumentError, match="(?s)post-processing .* Nothing was spent"):
        session.sql(query, epsilon=1.0, keys={"region": REGIONS} if "region" in query else None)
    assert _ledger_state(session) == before


def test_post_processing_that_runs_on_the_made_up_row_is_answered(session: Session) -> None:
    r = session.sql("SELECT region, COUNT(*) AS n, ROUND(SUM(amount) / COUNT(*), 2) AS mean, LN(COUNT(*)) AS ln_n "
                    "FROM t GROUP BY region HAVING COUNT(*) > 10 ORDER BY n DESC LIMIT 3", epsilon=1.0,
                    bounds={"amount": (0, 200)}, keys={"region": REGIONS}, rng=insecure_seeded(6))
    assert len(r.rows) == 3 and all(row[1] > 10 for row in r.rows)
