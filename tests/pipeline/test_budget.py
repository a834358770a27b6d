"""The reproduction's time budget (pipeline.research.budget): the rule as the module states it, by hand, and
its ledger, which a killed command's re-run goes on with."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.research.budget import (
    EVALUATION_SECONDS,
    MIN_MINUTES,
    BudgetLedger,
    Reserve,
    TimeBudget,
    evaluation_reserve,
)

EVAL = Reserve(seconds=750.0, steps=5, timed=0)
"""Steps after training that take 12.5 minutes."""


def test_each_run_gets_an_equal_part_of_the_training_time_still_left():
    b = TimeBudget(hours=1.0)
    # Ingest, labels and datasets took 10 minutes and the evaluation is to take 12.5: 37.5 min training.
    assert b.model_minutes("a", elapsed=600, runs_left=4, reserve=EVAL) == pytest.approx(37.5 / 4, abs=0.01)
    # "a" used 5 minutes: 32.5 minutes left for 3 runs (a reserve given later changes nothing).
    later = Reserve(3000.0, 5, 5)
    assert b.model_minutes("b", elapsed=900, runs_left=3, reserve=later) == pytest.approx(32.5 / 3, abs=0.01)
    # "b" stopped early after 1 minute: its time goes to the runs after it.
    assert b.model_minutes("c", elapsed=960, runs_left=2) == pytest.approx(31.5 / 2, abs=0.01)
    assert b.training_from == 600 and b.training_seconds == pytest.approx(37.5 * 60)
    assert b.reserve_seconds == 750.0 and "12.5 min set aside for the 5 steps after training" in b.text()
    assert set(b.shares) == {"a", "b", "c"}


def test_every_run_using_its_whole_share_is_an_even_split():
    b = TimeBudget(hours=2.0)
    pool = 7200 - 1200 - EVAL.seconds
    elapsed, got = 1200.0, []
    for i in range(5):
        got.append(b.model_minutes(f"m{i}", elapsed, 5 - i, EVAL))
        elapsed += got[-1] * 60
    assert got == pytest.approx([pool / 5 / 60] * 5, abs=0.02)


def test_the_reserve_is_what_the_store_timed_else_the_measured_figure_of_the_step_kind():
    steps = ["model_results", "eval_suites_a", "eval_matches_a", "eval_piece_values_b", "elo_ratings",
             "eval_report_a", "lubeck_grid", "reproduction_report"]  # fmt: skip
    full = EVALUATION_SECONDS["full"]
    r = evaluation_reserve(steps, {"eval_matches_a": 100.0, "lubeck_grid": 20.0}, "full")
    by_hand = (full["model_results"] + full["eval_suites_"] + 100.0 + full["eval_piece_values_"]
               + full["elo_ratings"] + full["eval_report_"] + 20.0 + full["reproduction_report"])  # fmt: skip
    assert r.seconds == pytest.approx(by_hand) and (r.steps, r.timed) == (8, 2)
    assert "6 at this machine's measured figures" in r.text()
    quick = evaluation_reserve(steps, {}, "quick")
    assert quick.seconds < r.seconds and quick.timed == 0
    with pytest.raises(ValueError, match="no measured time for the step 'eval_new_thing'"):
        evaluation_reserve(["eval_new_thing"], {}, "full")


def test_a_reserve_larger_than_what_is_left_gives_the_least():
    b = TimeBudget(hours=1.0)
    assert b.model_minutes("a", elapsed=600, runs_left=2, reserve=Reserve(3600.0, 3, 0)) == MIN_MINUTES
    assert b.training_seconds == 0.0


def test_a_spent_budget_gives_the_least_and_the_text_says_it_is_overrun():
    b = TimeBudget(hours=0.1)  # 6 minutes, all spent by the labels
    assert b.model_minutes("a", elapsed=900, runs_left=3) == MIN_MINUTES
    text = b.text(elapsed=1000)
    assert "0.1 h" in text and "over the budget by 10.7 min" in text
    assert "within the budget" in TimeBudget(hours=1).text(elapsed=60)


@pytest.mark.parametrize("hours", [0, -1, float("nan"), float("inf")])
def test_a_budget_needs_a_positive_finite_number_of_hours(hours):
    with pytest.raises(ValueError, match="positive number of hours"):
        TimeBudget(hours)


def test_the_time_runs_take_beyond_their_shares_comes_off_the_next_shares():
    b = TimeBudget(hours=1.0)
    assert b.model_minutes("a", elapsed=600, runs_left=3, reserve=EVAL) == pytest.approx(12.5)  # 37.5 min, 3 runs
    b.finished("a", 12.5 * 60 + 60)  # a minute beyond its share: loading, the test pass, Dagster
    # 37.5 - 13.5 = 24 minutes left for 2 runs, each expected to take a minute beyond its share.
    assert b.model_minutes("b", elapsed=600 + 13.5 * 60, runs_left=2) == pytest.approx(24 / 2 - 1, abs=0.01)
    assert "60 s beyond its share on average" in b.text()


# The ledger: a budget that outlives the command (rule 5) -------------------------------------------


def test_a_ledger_goes_on_with_the_same_settings_until_a_command_finishes_it(tmp_path):
    path = tmp_path / "store" / "reproduction" / "budget.json"
    first = BudgetLedger.open(path, "settings A", 2.0)
    assert (first.commands, first.spent_before) == (1, 0.0)
    first.budget.model_minutes("m", elapsed=600, runs_left=4, reserve=EVAL)  # training began 10 minutes in
    first.budget.finished("m", 20 * 60)
    first.spent_before = 1500.0  # as if it had run 25 minutes
    first.save()
    again = BudgetLedger.open(path, "settings A", 2.0)
    assert again.commands == 2 and again.spent_before == pytest.approx(1500.0, abs=1.0)
    b, old = again.budget, first.budget
    assert (b.training_from, b.training_seconds, b.shares, b.overheads, b.reserve_seconds, b.reserve_text) == (
        old.training_from,
        old.training_seconds,
        old.shares,
        old.overheads,
        old.reserve_seconds,
        old.reserve_text,
    )
    assert again.elapsed() >= 1500.0
    # Other settings (their own file in the command: pipeline.research.budget.ledger_name), or asked afresh.
    assert BudgetLedger.open(path, "settings B", 2.0).commands == 1
    assert BudgetLedger.open(path, "settings A", 2.0, new=True).commands == 1
    again.save(finished=True)  # every step done: the next command starts afresh
    fresh = BudgetLedger.open(path, "settings A", 2.0)
    assert (fresh.commands, fresh.spent_before, fresh.budget.training_from) == (1, 0.0, None)


def test_an_unreadable_ledger_starts_a_new_budget(tmp_path):
    path = tmp_path / "budget.json"
    path.write_text("{half a file")
    assert BudgetLedger.open(path, "k", 1.0).commands == 1


def test_a_command_killed_mid_step_has_its_time_counted_to_within_a_heartbeat(tmp_path):
    """SIGKILL a real process spending the budget (no save after its start but the heartbeat's):
    the next command goes on from what the heartbeat last wrote."""
    path = tmp_path / "budget.json"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from pipeline.research.budget import BudgetLedger\n"
        "ledger = BudgetLedger.open(Path(sys.argv[1]), 'k', 1.0)\n"
        "ledger.save()\n"
        "with ledger.heartbeat(every_s=0.1):\n"
        "    print('running', flush=True)\n"
        "    time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "running"
        t0 = time.monotonic()
        time.sleep(3.0)
        proc.send_signal(signal.SIGKILL)
        ran = time.monotonic() - t0
    finally:
        proc.kill()
        proc.wait()
    resumed = BudgetLedger.open(path, "k", 1.0)
    assert resumed.commands == 2
    # Counted to within a heartbeat (0.1 s, more on a loaded machine) and the start-up: the
    # command's only other save was at 0 s.
    assert ran - 1.5 <= resumed.spent_before <= ran + 1.0


def test_an_open_ledger_from_before_the_reserve_is_gone_on_with(tmp_path):
    """Version 1 (the fixed three-quarter share) had no reserve: a command killed before the
    change and run again after it keeps its spent time and its training pool."""
    import json

    path = tmp_path / "budget.json"
    old = {"hours": 2.0, "train_share": 0.75, "training_from": 600.0, "training_seconds": 4950.0,
           "shares": {"m": 20.0}, "overheads": [30.0]}  # fmt: skip
    path.write_text(json.dumps({"version": 1, "key": "k", "spent_s": 1800.0, "commands": 1, "finished": False,
                                "budget": old}))  # fmt: skip
    again = BudgetLedger.open(path, "k", 2.0)
    assert again.commands == 2 and again.spent_before == 1800.0
    b = again.budget
    assert (b.training_seconds, b.shares, b.reserve_seconds) == (4950.0, {"m": 20.0}, 0)
