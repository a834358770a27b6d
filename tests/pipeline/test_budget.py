"""The reproduction's time budget (pipeline.budget): the rule as the module states it, by hand."""

import pytest

from pipeline.budget import MIN_MINUTES, TRAIN_SHARE, TimeBudget


def test_each_run_gets_an_equal_part_of_the_training_time_still_left():
    b = TimeBudget(hours=1.0)
    # Ingest, labels and datasets took 10 minutes: 3/4 of the 50 left is training time (37.5 min).
    assert TRAIN_SHARE == 0.75
    assert b.model_minutes("a", elapsed=600, runs_left=4) == pytest.approx(37.5 / 4, abs=0.01)
    # "a" used 5 minutes: 32.5 minutes left for 3 runs.
    assert b.model_minutes("b", elapsed=900, runs_left=3) == pytest.approx(32.5 / 3, abs=0.01)
    # "b" stopped early after 1 minute: its time goes to the runs after it.
    assert b.model_minutes("c", elapsed=960, runs_left=2) == pytest.approx(31.5 / 2, abs=0.01)
    assert b.training_from == 600 and b.training_seconds == pytest.approx(37.5 * 60)
    assert set(b.shares) == {"a", "b", "c"}


def test_every_run_using_its_whole_share_is_an_even_split():
    b = TimeBudget(hours=2.0)
    pool = (7200 - 1200) * TRAIN_SHARE
    elapsed, got = 1200.0, []
    for i in range(5):
        got.append(b.model_minutes(f"m{i}", elapsed, 5 - i))
        elapsed += got[-1] * 60
    assert got == pytest.approx([pool / 5 / 60] * 5, abs=0.02)


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
    assert b.model_minutes("a", elapsed=600, runs_left=3) == pytest.approx(12.5)  # 37.5 min for 3 runs
    b.finished("a", 12.5 * 60 + 60)  # a minute beyond its share: loading, the test pass, Dagster
    # 37.5 - 13.5 = 24 minutes left for 2 runs, each expected to take a minute beyond its share.
    assert b.model_minutes("b", elapsed=600 + 13.5 * 60, runs_left=2) == pytest.approx(24 / 2 - 1, abs=0.01)
    assert "60 s beyond its share on average" in b.text()
