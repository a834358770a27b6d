"""The lead of a model over a baseline on the same rows, and its 95% interval (training.train.paired_lead)."""

import statistics

import numpy as np

from training.train import paired_lead


def test_without_clusters_the_interval_is_the_textbook_paired_one():
    rng = np.random.default_rng(0)
    right, other = rng.random(500) < 0.8, rng.random(500) < 0.75
    lead, half = paired_lead(right, other)
    d = [int(a) - int(b) for a, b in zip(right, other, strict=True)]
    assert np.isclose(lead, statistics.fmean(d)) and np.isclose(lead, right.mean() - other.mean())
    assert np.isclose(half, 1.96 * statistics.stdev(d) / len(d) ** 0.5)


def test_a_game_of_copies_counts_as_one_observation():
    # 40 games of 25 positions each, every position of a game right or wrong together: the rows
    # carry the information of 40 games, so the interval is that of the 40 per-game differences,
    # five times (sqrt 25) wider than the one that takes each row for independent.
    rng = np.random.default_rng(1)
    per_game = rng.integers(-1, 2, size=40)  # -1, 0 or 1: the model wrong and the rule right, ...
    d = np.repeat(per_game, 25)
    right, other = d > 0, d < 0
    games = np.repeat(np.arange(40), 25)
    lead, clustered = paired_lead(right, other, games)
    _, rows = paired_lead(right, other)
    assert np.isclose(lead, per_game.mean())
    assert np.isclose(clustered, 1.96 * statistics.stdev(per_game.tolist()) / 40**0.5)
    assert clustered > 4.5 * rows


def test_no_interval_from_one_row_or_one_game():
    assert paired_lead(np.array([True]), np.array([False]))[1] == float("inf")
    assert paired_lead(np.array([True, True]), np.array([False, True]), np.array([7, 7]))[1] == float("inf")
